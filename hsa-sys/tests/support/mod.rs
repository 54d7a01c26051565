//! Skips shared by hsa-sys's test binaries.

use std::io::Write as _;

/// Skips the calling test, visibly: libtest captures `eprintln!`, not writes
/// to the stderr handle itself. The line names the test binary
/// (`SKIPPED: hsa-sys loader: ...`).
pub fn skip(reason: &str) {
    let binary = env!("CARGO_CRATE_NAME");
    let _ = writeln!(std::io::stderr(), "SKIPPED: hsa-sys {binary}: {reason}");
}

/// Set (to anything but empty or `0`) on a machine where Debian's ROCr is
/// installed, with its headers (`libhsa-runtime-dev`), and the tests against
/// them must run, such as CI: their skips become failures.
pub const REQUIRE_DEBIAN_ROCR: &str = "REQUIRE_DEBIAN_ROCR";

/// Skips a test that needs Debian's ROCr (or its headers and a C compiler)
/// and cannot run here, or fails it if [`REQUIRE_DEBIAN_ROCR`] is set.
#[track_caller]
pub fn skip_debian_rocr(reason: &str) {
    let required = std::env::var_os(REQUIRE_DEBIAN_ROCR).is_some_and(|v| !v.is_empty() && v != "0");
    assert!(!required, "{REQUIRE_DEBIAN_ROCR} is set, yet {reason}");
    skip(reason);
}
