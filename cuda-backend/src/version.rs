//! CUDA versions: what the driver reports, what this crate needs, and the
//! headers it was built against.

use core::fmt;

/// A CUDA version, as the driver encodes it (`1000 * major + 10 * minor`).
///
/// ```
/// use sigretire_cuda::CudaVersion;
/// let version = CudaVersion::from_encoded(13000);
/// assert_eq!(version, CudaVersion::new(13, 0));
/// assert_eq!(version.to_string(), "13.0");
/// assert!(version >= CudaVersion::MINIMUM);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CudaVersion {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl CudaVersion {
    /// The oldest driver this backend accepts. CUDA 12.0 turned stream memory
    /// operations on by default and made the `_v2` entry points (which cudarc
    /// binds) the only ones; older drivers need a kernel-module option.
    ///
    /// ```
    /// use sigretire_cuda::CudaVersion;
    /// assert_eq!(CudaVersion::MINIMUM.to_string(), "12.0");
    /// assert!(CudaVersion::new(11, 8) < CudaVersion::MINIMUM);
    /// ```
    pub const MINIMUM: CudaVersion = CudaVersion::new(12, 0);

    /// The CUDA headers cudarc's bindings were generated from: the API
    /// this crate was built against, chosen by the one `cuda-*` feature of
    /// cudarc the build enabled (this crate's own `cuda-*` features pass
    /// theirs on; `cuda-12080` by default).
    ///
    /// ```
    /// use sigretire_cuda::CudaVersion;
    /// # #[cfg(feature = "cuda-12080")]
    /// assert_eq!(CudaVersion::BUILT_AGAINST, CudaVersion::from_encoded(12080));
    /// assert_eq!(
    ///     CudaVersion::BUILT_AGAINST,
    ///     CudaVersion::from_encoded(cudarc::driver::sys::CUDA_VERSION as i32)
    /// );
    /// assert!(CudaVersion::BUILT_AGAINST >= CudaVersion::MINIMUM);
    /// ```
    pub const BUILT_AGAINST: CudaVersion =
        CudaVersion::from_encoded(cudarc::driver::sys::CUDA_VERSION as i32);

    /// A version from its parts.
    ///
    /// ```
    /// use sigretire_cuda::CudaVersion;
    /// let version = CudaVersion::new(12, 8);
    /// assert_eq!((version.major, version.minor), (12, 8));
    /// assert!(version < CudaVersion::new(12, 10)); // ordered by number, not text
    /// ```
    pub const fn new(major: u32, minor: u32) -> Self {
        Self { major, minor }
    }

    /// Decodes `cuDriverGetVersion`'s integer (12080 is 12.8).
    ///
    /// ```
    /// use sigretire_cuda::CudaVersion;
    /// assert_eq!(CudaVersion::from_encoded(12080), CudaVersion::new(12, 8));
    /// assert_eq!(CudaVersion::from_encoded(13010).to_string(), "13.1");
    /// assert_eq!(CudaVersion::from_encoded(-1), CudaVersion::new(0, 0));
    /// ```
    pub const fn from_encoded(encoded: i32) -> Self {
        let encoded = if encoded < 0 { 0 } else { encoded as u32 };
        Self::new(encoded / 1000, (encoded % 1000) / 10)
    }
}

impl fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}
