//! Generates `include/sigretire.h` with cbindgen, as a library: shared by
//! the test that checks the checked-in header (`tests/header.rs`) and the
//! example that rewrites it (`examples/generate_header.rs`).

#![allow(dead_code)] // each user (a test, an example) needs only part of it

use std::path::{Path, PathBuf};

/// The crate's directory.
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where the checked-in header is.
pub fn header_path() -> PathBuf {
    crate_dir().join("include").join("sigretire.h")
}

/// The command that rewrites the header.
pub const REGENERATE: &str = "cargo run -p sigretire-capi --example generate_header";

/// The header cbindgen makes from the sources now.
pub fn generate() -> String {
    let dir = crate_dir();
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml"))
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.join("cbindgen.toml").display()));
    // The ticket is the tracker's own struct: cbindgen reads its file too
    // (only it: the rest of the tracker is no part of the C ABI).
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src").join("lib.rs"))
        .with_src(ticket_source())
        .generate()
        .unwrap_or_else(|e| panic!("cbindgen failed on {}: {e}", dir.join("src").display()));
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("cbindgen writes UTF-8")
}

/// The tracker's file that defines the ticket (a path dependency, beside
/// this crate in the repository).
pub fn ticket_source() -> PathBuf {
    crate_dir()
        .join("..")
        .join("tracker")
        .join("src")
        .join("ticket.rs")
}

/// Whether `path` holds exactly `text`.
pub fn is_current(path: &Path, text: &str) -> bool {
    std::fs::read_to_string(path).is_ok_and(|checked_in| checked_in == text)
}
