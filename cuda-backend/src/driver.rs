//! The driver itself: is it there, is it new enough, and which versions does
//! it report.
//!
//! cudarc loads `libcuda` lazily and panics on the first call if it is
//! missing, so every entry point of this crate goes through [`initialize`]
//! first, which asks [`library_present`] (cudarc's `is_culib_present`) and
//! turns absence into [`Error::LibraryMissing`]. The answer is cached: the
//! check opens and closes the library, which is too slow to repeat.

use crate::error::{Error, Result, check};
use crate::version::CudaVersion;
use cudarc::driver::sys;
use std::sync::OnceLock;

/// Whether `libcuda` can be loaded on this machine (cached after the first call).
///
/// ```
/// // On a machine without the NVIDIA driver this is false, and every
/// // constructor of this crate returns `Error::LibraryMissing`.
/// let present = sigretire_cuda::library_present();
/// assert_eq!(present, sigretire_cuda::library_present());
/// ```
pub fn library_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: `is_culib_present` only tries to open (and then closes) the
    // library by its usual names; it runs no code of the library but its
    // initialisers, which the driver allows to run at any time.
    *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() })
}

/// The guard in front of every entry point: the library is there,
/// `cuInit` succeeded, and the driver is new enough. Cached.
pub(crate) fn initialize() -> Result<()> {
    static INITIALIZED: OnceLock<Result<()>> = OnceLock::new();
    INITIALIZED
        .get_or_init(|| {
            if !library_present() {
                return Err(Error::LibraryMissing);
            }
            // SAFETY: the library is present (checked above), so cudarc's
            // loader finds `cuInit`; flags must be 0.
            match unsafe { sys::cuInit(0) } {
                sys::CUresult::CUDA_ERROR_NO_DEVICE => {
                    return Err(Error::NoDevice {
                        requested: 0,
                        found: 0,
                    });
                }
                code => check("cuInit", code)?,
            }
            let found = query_driver_version()?;
            require_version(found)
        })
        .clone()
}

/// Refuses drivers older than [`CudaVersion::MINIMUM`].
pub(crate) fn require_version(found: CudaVersion) -> Result<()> {
    if found < CudaVersion::MINIMUM {
        return Err(Error::DriverTooOld {
            found,
            needed: CudaVersion::MINIMUM,
        });
    }
    Ok(())
}

fn query_driver_version() -> Result<CudaVersion> {
    let mut encoded = 0;
    // SAFETY: only called once the library is known present; the pointer is
    // to a live local.
    check("cuDriverGetVersion", unsafe {
        sys::cuDriverGetVersion(&mut encoded)
    })?;
    Ok(CudaVersion::from_encoded(encoded))
}

/// The CUDA version the installed driver supports (`cuDriverGetVersion`),
/// for reports.
///
/// ```no_run
/// println!("driver supports CUDA {}", sigretire_cuda::driver_version()?);
/// # Ok::<(), sigretire_cuda::Error>(())
/// ```
pub fn driver_version() -> Result<CudaVersion> {
    initialize()?;
    query_driver_version()
}

/// The NVIDIA kernel module's version (`580.159.04`), read from
/// `/proc/driver/nvidia/version`, for reports. The CUDA driver API has no
/// call for it. `None` where the file is missing (no driver, not Linux).
///
/// ```
/// match sigretire_cuda::kernel_module_version() {
///     // Dotted numbers only: the module's banner and build date are dropped.
///     Some(version) => assert!(version.split('.').all(|part| part.parse::<u32>().is_ok())),
///     None => println!("no NVIDIA kernel module on this machine"),
/// }
/// ```
pub fn kernel_module_version() -> Option<String> {
    let text = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    parse_kernel_module_version(&text)
}

/// Finds the version in the first line of `/proc/driver/nvidia/version`:
/// `NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Tue ...`
/// (open modules say `Open Kernel Module for x86_64`).
fn parse_kernel_module_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    let after = line.split("Kernel Module").nth(1)?;
    let words = after.split_whitespace();
    words
        .filter(|w| w.split('.').count() >= 2 && w.split('.').all(|p| p.parse::<u32>().is_ok()))
        .map(str::to_string)
        .next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_decode_and_order() {
        assert_eq!(CudaVersion::from_encoded(12080), CudaVersion::new(12, 8));
        assert_eq!(CudaVersion::from_encoded(11040).to_string(), "11.4");
        assert_eq!(CudaVersion::from_encoded(-1), CudaVersion::new(0, 0));
        assert!(CudaVersion::new(12, 10) > CudaVersion::new(12, 8));
        assert!(CudaVersion::new(13, 0) > CudaVersion::new(12, 9));
    }

    #[test]
    fn old_drivers_are_refused_with_a_typed_error() {
        assert_eq!(
            require_version(CudaVersion::new(11, 8)),
            Err(Error::DriverTooOld {
                found: CudaVersion::new(11, 8),
                needed: CudaVersion::MINIMUM
            })
        );
        assert_eq!(require_version(CudaVersion::new(12, 0)), Ok(()));
        assert_eq!(require_version(CudaVersion::new(13, 0)), Ok(()));
    }

    #[test]
    fn the_kernel_module_version_is_found_in_both_module_flavours() {
        let proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  \
                           Tue Sep 30 01:23:45 UTC 2025\nGCC version:  gcc version 12.2.0\n";
        assert_eq!(
            parse_kernel_module_version(proprietary).as_deref(),
            Some("580.159.04")
        );
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  \
                    Release Build  (dvs-builder@U16-I3-B03-4-3)  Thu Jan 23 2025\n";
        assert_eq!(
            parse_kernel_module_version(open).as_deref(),
            Some("570.86.15")
        );
        assert_eq!(parse_kernel_module_version("garbage"), None);
    }

    #[test]
    fn a_missing_library_is_a_typed_error_not_a_panic() {
        // On a machine without the driver (CI), the guard answers before any
        // cudarc call could panic; with a driver, it initialises or names why not.
        match initialize() {
            Err(Error::LibraryMissing) => assert!(!library_present()),
            Ok(()) => assert!(library_present()),
            Err(other) => {
                assert!(library_present());
                println!("driver present but unusable: {other}");
            }
        }
    }
}
