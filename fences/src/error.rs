//! The queue layer's errors: each one says what the caller can do about it.

use std::time::Duration;

/// Everything a queue-layer call can report.
///
/// ```
/// use sigretire_queue::Error;
/// let error = Error::DeviceError { reason: "queue 3 failed".into() };
/// assert!(error.to_string().contains("returned early"));
/// assert!(error.is_device_error());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The tracker refused (out of signals, a foreign ticket, a bad
    /// configuration). Back-pressure never surfaces here: the queue waits for
    /// the named use outside its lock and retries.
    #[error("tracker: {0}")]
    Tracker(#[from] sigretire_tracker::Error),
    /// The hardware queue refused work or failed.
    #[error("hardware queue: {0}")]
    Queue(#[from] sigretire_tracker::QueueError),
    /// The device is in an error state and the device was configured not to
    /// abort ([`DeviceConfig::skip_abort_on_error`](crate::DeviceConfig), CLR's
    /// `HIP_SKIP_ABORT_ON_GPU_ERROR`): the wait returned early without
    /// completion. Timing and the queue-state reset were skipped; the batch
    /// was released so no thread waits on it forever. The GPU may still run
    /// the work.
    #[error(
        "the device is in an error state ({reason}): the wait returned early without completion; the GPU may still be running the work"
    )]
    DeviceError {
        /// What put the device in the error state.
        reason: String,
    },
    /// The device is in an error state and was configured to abort (CLR
    /// aborts the process; a library refuses all further work on the
    /// device instead). Recreate the device.
    #[error(
        "the device is in an error state ({reason}) and aborts on GPU errors: no further work is accepted; recreate the device (or set skip_abort_on_error)"
    )]
    Aborted {
        /// What put the device in the error state.
        reason: String,
    },
    /// Work on this queue failed (its completion signal went negative: a
    /// queue error). The device is now in the error state.
    #[error("queue {queue} failed: its work will not complete; the device is in the error state")]
    QueueFailed {
        /// The queue's id.
        queue: u64,
    },
    /// A wait ran out of time ([`QueueConfig::wait_timeout`](crate::QueueConfig)).
    /// The work may still complete; nothing was reported complete.
    #[error("timed out after {0:?}; the work has not completed (it may still)")]
    TimedOut(Duration),
    /// The hardware queue stayed full for the whole wait timeout.
    #[error("the hardware queue stayed full for {0:?}: the GPU is not consuming packets")]
    RingFull(Duration),
    /// An event's timestamps were asked for but it is not timed (its queue
    /// does not profile).
    #[error("the event is not timed: record it on a queue with QueueConfig::profiling = true")]
    NotTimed,
    /// An event's result was asked for before it completed.
    #[error("the event has not completed: synchronize it first")]
    NotReady,
    /// An event's work failed, so it has no timing.
    #[error("the event failed: its work did not complete")]
    EventFailed,
    /// The stop event of an elapsed-time query completed before its start
    /// event ([`Event::elapsed_to`](crate::Event::elapsed_to)): the elapsed
    /// time would be negative, which a [`Duration`] cannot say (HIP returns a
    /// negative float). Swap the events, or record them on one queue.
    #[error(
        "the stop event completed {ticks} timestamp ticks before the start event: the elapsed time is negative; swap the events"
    )]
    StopBeforeStart {
        /// How many GPU timestamp ticks the stop event completed before the
        /// start event.
        ticks: u64,
    },
    /// A configuration value ([`QueueConfig`](crate::QueueConfig)) is out
    /// of range.
    #[error("invalid configuration: {0}")]
    InvalidConfig(&'static str),
    /// An elapsed time between events of two devices
    /// ([`Event::elapsed_to`](crate::Event::elapsed_to)): their timestamps
    /// come from unrelated clocks (HIP and CUDA refuse it too).
    #[error(
        "the events were recorded on two devices, whose clocks are unrelated: no elapsed time between them"
    )]
    DifferentDevices,
    /// A cross-queue wait on an event or a queue whose signals the waiting
    /// queue cannot read ([`HostQueue::wait_event`](crate::HostQueue::wait_event),
    /// [`HostQueue::wait_queue`](crate::HostQueue::wait_queue)): their
    /// signal memory belongs to another simulator, ROCr process or CUDA
    /// context. Nothing was published.
    #[error(
        "the producer's signals live in memory the waiting queue cannot read (another simulator, runtime or context): nothing was published"
    )]
    ForeignSignalMemory,
}

/// Each of the tracker's per-operation errors passes through `?` as
/// [`Error::Tracker`].
macro_rules! from_tracker {
    ($($error:ty),*) => {
        $(
            impl From<$error> for Error {
                fn from(error: $error) -> Self {
                    Error::Tracker(error.into())
                }
            }
        )*
    };
}

from_tracker!(
    sigretire_tracker::ForeignTicket,
    sigretire_tracker::CreateError,
    sigretire_tracker::AcquireError,
    sigretire_tracker::PinError,
    sigretire_tracker::FailSubmissionError,
    sigretire_tracker::TimestampsError,
    sigretire_tracker::WaitError,
    sigretire_tracker::InvalidConfig
);

impl Error {
    /// Whether the error comes from the device error state (early return,
    /// abort, or a failed queue): the device needs attention, not the call.
    ///
    /// ```
    /// use sigretire_queue::Error;
    /// use std::time::Duration;
    /// assert!(Error::QueueFailed { queue: 1 }.is_device_error());
    /// assert!(Error::Aborted { reason: "queue 1 failed".into() }.is_device_error());
    /// assert!(!Error::TimedOut(Duration::from_secs(1)).is_device_error());
    /// assert!(!Error::InvalidConfig("batch limits must be at least 1").is_device_error());
    /// ```
    pub fn is_device_error(&self) -> bool {
        matches!(
            self,
            Error::DeviceError { .. } | Error::Aborted { .. } | Error::QueueFailed { .. }
        )
    }
}
