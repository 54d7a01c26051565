//! Gives the shared library its SONAME, `libsigretire_capi.so.<ABI>`, so
//! that a program linked against it records the ABI version it was built
//! for, and the dynamic loader refuses a library of another one (a test
//! checks `ABI` against `SIGRETIRE_ABI_VERSION`). Writes nothing into the
//! source tree.

/// The ABI version: `SIGRETIRE_ABI_VERSION` in src/types.rs (the test
/// `the_sonames_version_is_the_abi_version` keeps them equal).
const ABI: u32 = 4;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-env=SIGRETIRE_SONAME_ABI={ABI}");
    // ELF platforms only: macOS names a dylib with -install_name instead,
    // and Windows has no SONAME.
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if matches!(
        os.as_str(),
        "linux"
            | "android"
            | "freebsd"
            | "netbsd"
            | "openbsd"
            | "dragonfly"
            | "solaris"
            | "illumos"
    ) {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libsigretire_capi.so.{ABI}");
    }
}
