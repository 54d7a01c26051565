//! Errors: one enum whose variants a caller can act on.
//!
//! Every driver call goes through [`check`], so a failure always names the
//! call and the driver's own `CUresult` name (`CUDA_ERROR_OUT_OF_MEMORY`, ...).
//! Nothing in this crate panics or hangs on a missing library, a missing
//! device or a driver error: it returns one of these.

use crate::version::CudaVersion;
use cudarc::driver::sys::CUresult;

/// What went wrong, and what to do about it (the `Display` text says).
///
/// ```
/// use sigretire_cuda::Error;
/// use cudarc::driver::sys::CUresult;
///
/// let error = Error::Driver { call: "cuMemHostAlloc", code: CUresult::CUDA_ERROR_OUT_OF_MEMORY };
/// assert_eq!(error.code_name(), Some("CUDA_ERROR_OUT_OF_MEMORY".to_string()));
/// assert!(error.to_string().starts_with("cuMemHostAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (2)"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `libcuda.so` could not be loaded: no NVIDIA driver on this machine.
    #[error(
        "the CUDA driver library (libcuda.so.1) was not found: install the NVIDIA driver, \
         or add the folder that holds libcuda.so.1 to LD_LIBRARY_PATH"
    )]
    LibraryMissing,

    /// The driver predates what this backend needs.
    #[error(
        "the CUDA driver supports CUDA {found}, but this backend needs {needed} or newer \
         (for 64-bit stream memory operations): update the NVIDIA driver"
    )]
    DriverTooOld {
        /// The CUDA version the installed driver supports.
        found: CudaVersion,
        /// The oldest version that works.
        needed: CudaVersion,
    },

    /// The requested device does not exist.
    #[error(
        "there is no CUDA device {requested}: the driver sees {found} device(s); \
         pick an ordinal below {found}, or check CUDA_VISIBLE_DEVICES"
    )]
    NoDevice {
        /// The ordinal asked for.
        requested: u32,
        /// How many devices the driver sees.
        found: u32,
    },

    /// The device lacks a capability completion signals need.
    #[error("CUDA device {ordinal} ({name}) lacks {missing}, which {why}: use another device")]
    MissingCapability {
        /// The device's ordinal.
        ordinal: u32,
        /// The device's name.
        name: String,
        /// The missing capability (the driver attribute's name).
        missing: &'static str,
        /// Why the backend needs it.
        why: &'static str,
    },

    /// A driver call failed.
    #[error("{call} failed: {code:?} ({number}){hint}", number = *.code as u32, hint = driver_hint(*.code))]
    Driver {
        /// The driver function that failed.
        call: &'static str,
        /// Its result code.
        code: CUresult,
    },

    /// The driver could not compile the signal kernels' PTX.
    #[error("the driver rejected the signal kernels' PTX ({code:?}): {log}")]
    KernelLoad {
        /// The result of `cuModuleLoadDataEx`.
        code: CUresult,
        /// The JIT compiler's error log.
        log: String,
    },

    /// More signals than one pinned allocation can hold were asked for.
    #[error("{requested} signals do not fit in one pinned allocation: allocate fewer at a time")]
    TooManySignals {
        /// The number asked for.
        requested: usize,
    },

    /// The tracker refused to start (bad configuration or no signals).
    #[error(transparent)]
    Tracker(#[from] sigretire_tracker::CreateError),

    /// [`CudaContext::adopt_stream`](crate::CudaContext::adopt_stream) (or a
    /// sibling) was handed one of CUDA's default streams: the null stream,
    /// `CU_STREAM_LEGACY` or `CU_STREAM_PER_THREAD`. The queue publishes
    /// from whichever thread calls it, and the per-thread handle names a
    /// different stream on each thread, so its publications would land on
    /// streams the tracker never sees; the null and legacy handles name the
    /// one stream that every blocking stream of the context synchronises
    /// with, which a runtime does not own.
    #[error("{}", default_stream_refusal(*.handle))]
    DefaultStream {
        /// The handle's value: 0, 1 (`CU_STREAM_LEGACY`) or 2
        /// (`CU_STREAM_PER_THREAD`).
        handle: usize,
    },

    /// The stream handed to
    /// [`CudaContext::adopt_stream`](crate::CudaContext::adopt_stream)
    /// belongs to another CUDA context (`cuStreamGetCtx`), whose streams
    /// cannot be driven through this one.
    #[error(
        "the stream belongs to CUDA context {stream_context:#x}, not to this one \
         ({context:#x}, the device's primary context): create the stream while the primary \
         context is current (the CUDA runtime's own), or adopt it with that context's device"
    )]
    ForeignStream {
        /// The stream's context (`cuStreamGetCtx`), as an address.
        stream_context: usize,
        /// This context ([`CudaContext::as_raw`](crate::CudaContext::as_raw)), as an address.
        context: usize,
    },

    /// The cudarc context handed to
    /// [`CudaContext::from_cudarc`](crate::CudaContext::from_cudarc) is not
    /// its device's primary context (cudarc's `new_non_primary`, `new_cig`
    /// or `from_raw_context`): this library works in the primary context,
    /// and a stream of another context cannot be driven through it.
    #[error(
        "cudarc's context {cudarc_context:#x} is not CUDA device {ordinal}'s primary context \
         ({primary:#x}), which this library works in: make it with cudarc's \
         CudaContext::new (the primary context), not new_non_primary, new_cig or \
         from_raw_context"
    )]
    ForeignContext {
        /// The device's ordinal.
        ordinal: u32,
        /// cudarc's context (`cu_ctx`), as an address.
        cudarc_context: usize,
        /// The device's primary context, as an address.
        primary: usize,
    },

    /// An adopted stream is being captured into a CUDA graph
    /// (`cuStreamIsCapturing`). The library's completion writes would be
    /// captured instead of run, so no completion would ever land (and a
    /// later launch of the graph would write signals the tracker has reused).
    /// Returned by the adoption, and by a publication that finds the stream
    /// capturing (then the queue fails from that index on).
    #[error(
        "the adopted stream is being captured into a CUDA graph: the library's completion \
         writes would be captured instead of run; end the capture before adopting or \
         publishing, and capture on another stream"
    )]
    StreamCapturing,
}

/// What [`Error::DefaultStream`] says for each handle.
fn default_stream_refusal(handle: usize) -> &'static str {
    match handle {
        0 | 1 => {
            "the null stream (the legacy default stream, CU_STREAM_LEGACY) cannot be adopted: \
             every blocking stream of the context synchronises with it, and no runtime owns it; \
             create a stream with cuStreamCreate and adopt that"
        }
        2 => {
            "the per-thread default stream (CU_STREAM_PER_THREAD) cannot be adopted: the handle \
             names a different stream on every thread, and the queue publishes from whichever \
             thread calls it; create a stream with cuStreamCreate and adopt that"
        }
        _ => "a default stream cannot be adopted: create a stream with cuStreamCreate",
    }
}

/// This crate's result type.
///
/// ```
/// use sigretire_cuda::{Error, Result, check};
/// use cudarc::driver::sys::CUresult;
///
/// fn launch() -> Result<u32> {
///     check("cuLaunchKernel", CUresult::CUDA_ERROR_INVALID_VALUE)?;
///     Ok(1)
/// }
/// assert!(matches!(launch(), Err(Error::Driver { call: "cuLaunchKernel", .. })));
/// ```
pub type Result<T, E = Error> = core::result::Result<T, E>;

impl Error {
    /// The driver's name for the result code, if this is a driver error.
    ///
    /// ```
    /// use sigretire_cuda::{Error, check};
    /// use cudarc::driver::sys::CUresult;
    ///
    /// let error = check("cuStreamQuery", CUresult::CUDA_ERROR_ILLEGAL_ADDRESS).unwrap_err();
    /// assert_eq!(error.code_name().as_deref(), Some("CUDA_ERROR_ILLEGAL_ADDRESS"));
    /// assert_eq!(Error::LibraryMissing.code_name(), None);
    /// ```
    pub fn code_name(&self) -> Option<String> {
        match self {
            Error::Driver { code, .. } | Error::KernelLoad { code, .. } => {
                Some(format!("{code:?}"))
            }
            _ => None,
        }
    }

    /// Whether the error means the context is lost (a sticky error: a kernel
    /// faulted, the device fell off the bus). Every later call on the context
    /// fails the same way; no enqueued work will complete, so pending uses
    /// may be failed and their signals reused.
    ///
    /// ```
    /// use sigretire_cuda::check;
    /// use cudarc::driver::sys::CUresult;
    ///
    /// let fault = check("cuStreamQuery", CUresult::CUDA_ERROR_ILLEGAL_ADDRESS).unwrap_err();
    /// assert!(fault.is_context_lost());
    /// // Out of memory is not sticky: the context is still usable.
    /// let full = check("cuMemHostAlloc", CUresult::CUDA_ERROR_OUT_OF_MEMORY).unwrap_err();
    /// assert!(!full.is_context_lost());
    /// ```
    pub fn is_context_lost(&self) -> bool {
        matches!(self, Error::Driver { code, .. } if is_sticky(*code))
    }
}

/// Turns a driver result into a `Result` that names the call.
///
/// ```
/// use cudarc::driver::sys::CUresult;
/// assert!(sigretire_cuda::check("cuInit", CUresult::CUDA_SUCCESS).is_ok());
/// let err = sigretire_cuda::check("cuInit", CUresult::CUDA_ERROR_NO_DEVICE).unwrap_err();
/// assert_eq!(err.code_name().as_deref(), Some("CUDA_ERROR_NO_DEVICE"));
/// ```
pub fn check(call: &'static str, code: CUresult) -> Result<()> {
    match code {
        CUresult::CUDA_SUCCESS => Ok(()),
        code => Err(Error::Driver { call, code }),
    }
}

/// Errors after which the context cannot be used again (CUDA's documentation
/// calls them sticky: "the process must be terminated and relaunched").
fn is_sticky(code: CUresult) -> bool {
    use CUresult::*;
    matches!(
        code,
        CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_ECC_UNCORRECTABLE
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_CONTEXT_IS_DESTROYED
    )
}

/// What to do about the codes a caller of this crate can meet.
fn driver_hint(code: CUresult) -> &'static str {
    use CUresult::*;
    match code {
        CUDA_ERROR_OUT_OF_MEMORY => ": out of pinned host memory; allocate smaller batches",
        CUDA_ERROR_NO_DEVICE => ": no CUDA device is visible (check CUDA_VISIBLE_DEVICES)",
        CUDA_ERROR_INVALID_VALUE => ": an argument was out of range (launch shape, address)",
        CUDA_ERROR_NOT_SUPPORTED => ": the device or driver does not support this operation",
        CUDA_ERROR_NOT_INITIALIZED | CUDA_ERROR_DEINITIALIZED => {
            ": the driver is not initialised (or shutting down)"
        }
        code if is_sticky(code) => {
            ": the context is lost; create a new one (in a new process, for sticky errors)"
        }
        _ => "",
    }
}

impl From<Error> for sigretire_tracker::backend::QueueError {
    fn from(error: Error) -> Self {
        sigretire_tracker::backend::QueueError::Failed(error.to_string())
    }
}

impl From<Error> for sigretire_tracker::backend::AllocError {
    fn from(error: Error) -> Self {
        sigretire_tracker::backend::AllocError::OutOfMemory(error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_errors_name_the_call_and_the_code() {
        let error = check("cuLaunchKernel", CUresult::CUDA_ERROR_INVALID_VALUE).unwrap_err();
        assert_eq!(
            error.to_string(),
            "cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE (1): an argument was out of \
             range (launch shape, address)"
        );
        assert_eq!(
            error.code_name().as_deref(),
            Some("CUDA_ERROR_INVALID_VALUE")
        );
        assert!(!error.is_context_lost());
    }

    #[test]
    fn sticky_codes_say_the_context_is_lost() {
        let error = check("cuStreamQuery", CUresult::CUDA_ERROR_ILLEGAL_ADDRESS).unwrap_err();
        assert!(error.is_context_lost());
        assert!(
            error
                .to_string()
                .contains("CUDA_ERROR_ILLEGAL_ADDRESS (700)")
        );
        assert!(error.to_string().contains("the context is lost"));
    }

    #[test]
    fn codes_without_a_hint_still_print_their_name() {
        let error = check("cuEventQuery", CUresult::CUDA_ERROR_NOT_READY).unwrap_err();
        assert_eq!(
            error.to_string(),
            "cuEventQuery failed: CUDA_ERROR_NOT_READY (600)"
        );
    }

    #[test]
    fn every_variant_says_what_to_do() {
        let cases = [
            Error::LibraryMissing,
            Error::DriverTooOld {
                found: CudaVersion::new(11, 4),
                needed: CudaVersion::new(12, 0),
            },
            Error::NoDevice {
                requested: 3,
                found: 1,
            },
            Error::MissingCapability {
                ordinal: 0,
                name: "Old GPU".into(),
                missing: "CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY",
                why: "signals live in mapped host memory",
            },
            Error::TooManySignals {
                requested: usize::MAX,
            },
        ];
        let texts: Vec<String> = cases.iter().map(ToString::to_string).collect();
        assert!(texts[0].contains("LD_LIBRARY_PATH"));
        assert!(texts[1].contains("CUDA 11.4") && texts[1].contains("12.0"));
        assert!(texts[2].contains("ordinal below 1"));
        assert!(texts[3].contains("Old GPU") && texts[3].contains("use another device"));
        assert!(texts[4].contains("allocate fewer"));
    }

    #[test]
    fn stream_refusals_say_why_and_what_to_do() {
        let null = Error::DefaultStream { handle: 0 }.to_string();
        assert!(null.starts_with("the null stream"), "{null}");
        assert!(null.contains("cannot be adopted") && null.contains("cuStreamCreate"));
        // The legacy handle is the null stream by another name.
        assert_eq!(Error::DefaultStream { handle: 1 }.to_string(), null);
        let per_thread = Error::DefaultStream { handle: 2 }.to_string();
        assert!(
            per_thread.contains("CU_STREAM_PER_THREAD") && per_thread.contains("every thread"),
            "{per_thread}"
        );
        let foreign = Error::ForeignStream {
            stream_context: 0x1000,
            context: 0x2000,
        }
        .to_string();
        assert!(
            foreign.contains("0x1000") && foreign.contains("0x2000"),
            "{foreign}"
        );
        assert!(foreign.contains("primary context"));
        let context = Error::ForeignContext {
            ordinal: 1,
            cudarc_context: 0x3000,
            primary: 0x4000,
        }
        .to_string();
        assert!(
            context.contains("0x3000")
                && context.contains("0x4000")
                && context.contains("device 1"),
            "{context}"
        );
        assert!(context.contains("CudaContext::new"), "{context}");
        assert!(
            Error::StreamCapturing
                .to_string()
                .contains("end the capture")
        );
        assert_eq!(Error::StreamCapturing.code_name(), None);
        assert!(!Error::StreamCapturing.is_context_lost());
    }

    #[test]
    fn errors_become_the_trackers_backend_errors() {
        let error = Error::Driver {
            call: "cuStreamBatchMemOp_v2",
            code: CUresult::CUDA_ERROR_INVALID_VALUE,
        };
        let queue: sigretire_tracker::backend::QueueError = error.clone().into();
        assert!(
            matches!(queue, sigretire_tracker::backend::QueueError::Failed(text) if text.contains("cuStreamBatchMemOp_v2"))
        );
        let alloc: sigretire_tracker::backend::AllocError = error.into();
        assert!(alloc.to_string().contains("CUDA_ERROR_INVALID_VALUE"));
    }
}
