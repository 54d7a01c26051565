#!/usr/bin/env bash
# The C ABI checked from the shell, as a C runtime's build would use it (a
# step of .ci/run; a person can run it by hand too): builds the shared and
# the static library, checks the shared library's SONAME, checks the
# checked-in header against a fresh cbindgen run, compiles the C tests (the
# tracker's and the streams') with the system's C compiler against each
# library and runs them, shows that a planted wrong answer fails the
# tracker's, installs the library under a prefix and builds the streams
# example with the flags pkg-config gives for it, compiles the header as
# C++, and checks the CUDA backend's build of the library (no GPU needed).
# Any failure fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."

cc=${CC:-cc}
cxx=${CXX:-c++}
for tool in "$cc" "$cxx"; do
  command -v "$tool" >/dev/null || { echo "capi/ci.sh: $tool is missing (install gcc and g++)"; exit 1; }
done

if ! command -v pkg-config >/dev/null; then
  # CI installs it, as .ci/run installs the compilers; by hand, say so.
  if [ -n "${CI:-}" ]; then
    if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq pkg-config
  else
    echo "capi/ci.sh: pkg-config is missing (install pkg-config)"
    exit 1
  fi
fi

echo "--- the libraries (cargo build -p sigretire-capi)"
cargo build -p sigretire-capi
target=$(cd "${CARGO_TARGET_DIR:-target}" && pwd)
libs="$target/debug"
ls -l "$libs/libsigretire_capi.so" "$libs/libsigretire_capi.a"

echo "--- the shared library's SONAME carries the ABI version (readelf -d)"
abi=$(sed -n 's/^#define SIGRETIRE_ABI_VERSION \([0-9]*\).*/\1/p' capi/include/sigretire.h)
[ -n "$abi" ] || { echo "capi/ci.sh: no SIGRETIRE_ABI_VERSION in the header"; exit 1; }
soname=$(readelf -d "$libs/libsigretire_capi.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" != "libsigretire_capi.so.$abi" ]; then
  echo "capi/ci.sh: the SONAME is '$soname', not libsigretire_capi.so.$abi (capi/build.rs)"
  exit 1
fi
echo "SONAME $soname"
# Programs linked against the library ask the loader for its SONAME: the
# link an installation makes, made beside cargo's copy too.
ln -sf libsigretire_capi.so "$libs/$soname"

echo "--- the header against a fresh cbindgen run"
cargo test -q -p sigretire-capi --test header

out="$target/capi-ci"
mkdir -p "$out"
flags=(-std=c11 -Wall -Wextra -Werror -pedantic -pthread -Icapi/include)
test_c=capi/tests/c/sigretire_test.c
streams_c=capi/tests/c/streams_test.c

echo "--- the C test, linked against the shared library"
"$cc" "${flags[@]}" "$test_c" "$libs/libsigretire_capi.so" -Wl,-rpath,"$libs" -o "$out/sigretire_test_shared"
"$out/sigretire_test_shared"

echo "--- the C test, linked against the static library"
"$cc" "${flags[@]}" "$test_c" "$libs/libsigretire_capi.a" -lpthread -ldl -lm -o "$out/sigretire_test_static"
"$out/sigretire_test_static"

echo "--- the streams' C test, linked against the shared and the static library"
"$cc" "${flags[@]}" "$streams_c" "$libs/libsigretire_capi.so" -Wl,-rpath,"$libs" -o "$out/streams_test_shared"
"$out/streams_test_shared"
"$cc" "${flags[@]}" "$streams_c" "$libs/libsigretire_capi.a" -lpthread -ldl -lm -o "$out/streams_test_static"
"$out/streams_test_static"

echo "--- the C test with a planted wrong answer (-DPLANT_WRONG_ANSWER): it must exit 1"
"$cc" "${flags[@]}" -DPLANT_WRONG_ANSWER "$test_c" "$libs/libsigretire_capi.so" -Wl,-rpath,"$libs" \
  -o "$out/sigretire_test_planted"
set +e
"$out/sigretire_test_planted"
planted=$?
set -e
if [ "$planted" -ne 1 ]; then
  echo "capi/ci.sh: the planted wrong answer exited $planted, not 1: the C test cannot catch a wrong answer"
  exit 1
fi
echo "(the planted wrong answer was caught: exit $planted)"

echo "--- installed under a prefix; the streams example built with pkg-config's flags"
prefix="$out/prefix"
rm -rf "$prefix"
cargo run -q -p sigretire-capi --example install -- --prefix "$prefix"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pc_flags=$(pkg-config --cflags --libs sigretire_capi)
echo "pkg-config --cflags --libs sigretire_capi: $pc_flags"
pkg-config --exists --print-errors "sigretire_capi >= 0.1"
# shellcheck disable=SC2086 # pkg-config's flags are words
"$cc" "${flags[@]}" capi/examples/streams.c $pc_flags -Wl,-rpath,"$prefix/lib" -o "$out/streams_example"
readelf -d "$out/streams_example" | grep -q "NEEDED.*\[$soname\]" \
  || { echo "capi/ci.sh: the example does not ask for $soname"; exit 1; }
"$out/streams_example"

echo "--- the header as C++ ($cxx -fsyntax-only)"
"$cxx" -std=c++11 -fsyntax-only -Wall -Wextra -Werror -pedantic -Icapi/include capi/tests/c/header_check.cpp
echo "--- the CUDA backend's build (--features cuda): its functions answer a typed status here"
cargo test -q -p sigretire-capi --features cuda --test streams
echo "capi/ci.sh: ok"
