//! What a measurement was taken on: the device, its driver and kernel
//! module, and the CUDA API this crate was built against.

use crate::context::CudaContext;
use crate::driver::kernel_module_version;
use crate::version::CudaVersion;
use core::fmt;

/// The machine a figure was measured on: device, driver, kernel module, and
/// the CUDA API this crate was built against.
///
/// ```
/// use sigretire_cuda::{CudaVersion, SystemReport};
///
/// let report = SystemReport {
///     device: "NVIDIA H200".into(),
///     compute_capability: (9, 0),
///     cuda_driver: CudaVersion::new(13, 0),
///     kernel_module: None,
///     built_against: CudaVersion::BUILT_AGAINST,
/// };
/// assert_eq!(
///     report.to_string(),
///     "NVIDIA H200 (compute 9.0), driver unknown (CUDA 13.0), built against CUDA 12.8"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SystemReport {
    /// The device's name (`NVIDIA H200`).
    pub device: String,
    /// Its compute capability.
    pub compute_capability: (u32, u32),
    /// The CUDA version the driver supports (`cuDriverGetVersion`).
    pub cuda_driver: CudaVersion,
    /// The NVIDIA kernel module's version (`580.159.04`), where readable.
    pub kernel_module: Option<String>,
    /// The CUDA headers this crate's bindings come from.
    pub built_against: CudaVersion,
}

impl SystemReport {
    /// The report for `context`'s device.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_cuda::SystemReport;
    /// let report = SystemReport::of(&context);
    /// assert_eq!(report.compute_capability, context.info().compute_capability);
    /// assert_eq!(report.kernel_module, sigretire_cuda::kernel_module_version());
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn of(context: &CudaContext) -> Self {
        let info = context.info();
        Self {
            device: info.name.clone(),
            compute_capability: info.compute_capability,
            cuda_driver: info.driver,
            kernel_module: kernel_module_version(),
            built_against: CudaVersion::BUILT_AGAINST,
        }
    }
}

impl fmt::Display for SystemReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (compute {}.{}), driver {} (CUDA {}), built against CUDA {}",
            self.device,
            self.compute_capability.0,
            self.compute_capability.1,
            self.kernel_module.as_deref().unwrap_or("unknown"),
            self.cuda_driver,
            self.built_against,
        )
    }
}

/// What a context's figures were measured on.
impl CudaContext {
    /// What to print next to a measurement: device, driver, kernel module,
    /// and the CUDA API this crate was built against.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_cuda::CudaVersion;
    /// let report = context.report();
    /// assert_eq!(report.device, context.info().name);
    /// assert_eq!(report.built_against, CudaVersion::BUILT_AGAINST);
    /// println!("{report}");
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn report(&self) -> SystemReport {
        SystemReport::of(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_reads_as_one_line() {
        let report = SystemReport {
            device: "NVIDIA H200".into(),
            compute_capability: (9, 0),
            cuda_driver: CudaVersion::new(13, 0),
            kernel_module: Some("580.159.04".into()),
            built_against: CudaVersion::BUILT_AGAINST,
        };
        assert_eq!(
            report.to_string(),
            "NVIDIA H200 (compute 9.0), driver 580.159.04 (CUDA 13.0), built against CUDA 12.8"
        );
    }
}
