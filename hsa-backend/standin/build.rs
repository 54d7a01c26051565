//! Tells the crate where cargo builds it, so the test side can find the
//! shared library even from a doctest (which runs from a temporary
//! directory), and the platform's shared-library file name.

fn main() {
    let out_dir = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR for build scripts");
    println!("cargo:rustc-env=ROCR_STANDIN_OUT_DIR={out_dir}");
    let (prefix, suffix) = match std::env::var("CARGO_CFG_TARGET_OS").as_deref() {
        Ok("windows") => ("", ".dll"),
        Ok("macos" | "ios") => ("lib", ".dylib"),
        _ => ("lib", ".so"),
    };
    println!("cargo:rustc-env=ROCR_STANDIN_DLL_PREFIX={prefix}");
    println!("cargo:rustc-env=ROCR_STANDIN_DLL_SUFFIX={suffix}");
    println!("cargo:rerun-if-changed=build.rs");
}
