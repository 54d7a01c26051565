#!/usr/bin/env bash
# The C ABI checked from the shell, as a C runtime's build would use it (a
# step of .ci/run; a person can run it by hand too): builds the shared and
# the static library, checks the checked-in header against a fresh cbindgen
# run, compiles the C test with the system's C compiler against each
# library and runs it, shows that a planted wrong answer fails it, and
# compiles the header as C++. Any failure fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."

cc=${CC:-cc}
cxx=${CXX:-c++}
for tool in "$cc" "$cxx"; do
  command -v "$tool" >/dev/null || { echo "capi/ci.sh: $tool is missing (install gcc and g++)"; exit 1; }
done

echo "--- the libraries (cargo build -p sigretire-capi)"
cargo build -p sigretire-capi
target=$(cd "${CARGO_TARGET_DIR:-target}" && pwd)
libs="$target/debug"
ls -l "$libs/libsigretire_capi.so" "$libs/libsigretire_capi.a"

echo "--- the header against a fresh cbindgen run"
cargo test -q -p sigretire-capi --test header

out="$target/capi-ci"
mkdir -p "$out"
flags=(-std=c11 -Wall -Wextra -Werror -pedantic -pthread -Icapi/include)
test_c=capi/tests/c/sigretire_test.c

echo "--- the C test, linked against the shared library"
"$cc" "${flags[@]}" "$test_c" "$libs/libsigretire_capi.so" -Wl,-rpath,"$libs" -o "$out/sigretire_test_shared"
"$out/sigretire_test_shared"

echo "--- the C test, linked against the static library"
"$cc" "${flags[@]}" "$test_c" "$libs/libsigretire_capi.a" -lpthread -ldl -lm -o "$out/sigretire_test_static"
"$out/sigretire_test_static"

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

echo "--- the header as C++ ($cxx -fsyntax-only)"
"$cxx" -std=c++11 -fsyntax-only -Wall -Wextra -Werror -pedantic -Icapi/include capi/tests/c/header_check.cpp
echo "capi/ci.sh: ok"
