//! The backend's errors: each says what went wrong and what to do about it.

use hsa_sys::{LoadError, StatusError};
use std::time::Duration;

/// Everything the ROCr backend can report.
///
/// Loading and initialisation never panic and never hang: a machine without
/// ROCm gets [`Error::Load`], one without a GPU [`Error::InitFailed`] (ROCr
/// itself refuses to start) or [`Error::NoGpu`], and a runtime that does not
/// answer [`Error::InitTimedOut`].
///
/// ```
/// let error = sigretire_hsa::Runtime::load_from("/nonexistent/libhsa-runtime64.so.1").unwrap_err();
/// assert!(matches!(error, sigretire_hsa::Error::Load(hsa_sys::LoadError::LibraryMissing { .. })));
/// assert!(error.to_string().contains("SIGRETIRE_HSA_LIBRARY"), "{error}");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The ROCr library is missing, or lacks a function the backend needs
    /// (its text names the library or the symbol, and how to fix it).
    #[error(transparent)]
    Load(#[from] LoadError),
    /// `hsa_init` failed. On a machine without an AMD GPU (no `/dev/kfd`)
    /// ROCr answers `HSA_STATUS_ERROR_OUT_OF_RESOURCES`.
    #[error(
        "hsa_init failed: {}. Check that an AMD GPU and its kernel driver (amdgpu, /dev/kfd) \
         are present and that this user may open /dev/kfd and /dev/dri/renderD* (the `render` \
         and `video` groups)",
        sentence(.0)
    )]
    InitFailed(StatusError),
    /// `hsa_init` did not return in time (a wedged driver). The call goes on
    /// in the background and, should it succeed later, is balanced there.
    #[error(
        "hsa_init did not return within {0:?}; the GPU driver may be hung (see dmesg), or \
         raise InitOptions::timeout"
    )]
    InitTimedOut(Duration),
    /// ROCr started but reports no GPU agent that runs kernel dispatches.
    #[error(
        "ROCr found no GPU agent: the driver sees no supported AMD GPU, or \
         HIP_VISIBLE_DEVICES/ROCR_VISIBLE_DEVICES hide them all"
    )]
    NoGpu,
    /// ROCr reported a timestamp frequency of 0: its stamps could not be
    /// turned into time.
    #[error("ROCr reports a timestamp frequency of 0 (HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY)")]
    NoTimestampClock,
    /// A GPU index beyond those ROCr reports.
    #[error("there is no GPU {index}: ROCr reports {count} GPU agent(s), numbered from 0")]
    NoSuchGpu {
        /// The index asked for.
        index: usize,
        /// How many GPUs there are.
        count: usize,
    },
    /// A ROCr call failed.
    #[error("{call} failed: {status}")]
    Call {
        /// The C function.
        call: &'static str,
        /// What ROCr answered, with its own description.
        status: StatusError,
    },
    /// A queue size ROCr cannot make.
    #[error(
        "a queue of {size} packets is not possible on this GPU: use a power of two from {min} to {max}"
    )]
    InvalidQueueSize {
        /// The size asked for.
        size: u32,
        /// `HSA_AGENT_INFO_QUEUE_MIN_SIZE`.
        min: u32,
        /// `HSA_AGENT_INFO_QUEUE_MAX_SIZE`.
        max: u32,
    },
    /// The queue failed (ROCr reported an error through the queue's
    /// callback, or its packets completed with a negative value): its pending
    /// packets will not complete.
    #[error(
        "the queue failed: {}. Its pending work will not complete; create a new queue",
        sentence(.0)
    )]
    QueueFailed(StatusError),
    /// A queue handed to [`AqlQueue::adopt`](crate::AqlQueue::adopt) that
    /// the backend cannot publish on.
    #[error("the queue handed to AqlQueue::adopt cannot be used: {0}")]
    InvalidQueue(&'static str),
    /// A wait ran out of time.
    #[error("timed out after {0:?} waiting for the GPU; the work may still complete")]
    TimedOut(Duration),
}

impl Error {
    /// The ROCr status behind the error, if one is.
    ///
    /// ```
    /// use sigretire_hsa::Error;
    /// use hsa_sys::{StatusError, HSA_STATUS_ERROR_OUT_OF_RESOURCES};
    ///
    /// let error = Error::InitFailed(StatusError::new(HSA_STATUS_ERROR_OUT_OF_RESOURCES));
    /// assert_eq!(error.status().map(|s| s.status()), Some(HSA_STATUS_ERROR_OUT_OF_RESOURCES));
    /// assert!(error.to_string().contains("HSA_STATUS_ERROR_OUT_OF_RESOURCES"));
    /// ```
    pub fn status(&self) -> Option<&StatusError> {
        match self {
            Error::InitFailed(status) | Error::QueueFailed(status) | Error::Call { status, .. } => {
                Some(status)
            }
            _ => None,
        }
    }
}

/// A status as the middle of a sentence: ROCr's own texts end with a period,
/// which the message that goes on after them must not double.
fn sentence(status: &StatusError) -> String {
    status.to_string().trim_end_matches(['.', ' ']).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hsa_sys::HSA_STATUS_ERROR_OUT_OF_RESOURCES;

    #[test]
    fn a_status_text_ending_in_a_period_is_not_followed_by_another() {
        let text = "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the \
                    necessary resources. This error may also occur when the core runtime \
                    library needs to spawn threads or create internal OS-specific events.";
        let status = StatusError::new(HSA_STATUS_ERROR_OUT_OF_RESOURCES).with_runtime_text(text);
        for error in [
            Error::InitFailed(status.clone()),
            Error::QueueFailed(status),
        ] {
            let message = error.to_string();
            assert!(!message.contains(".."), "{message}");
            assert!(message.contains("OS-specific events. "), "{message}");
        }
    }
}
