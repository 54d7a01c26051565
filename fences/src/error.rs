//! The queue layer's errors, one type per operation: what `launch` can
//! answer is not what `synchronize` can, nor what `wait_event` or
//! `elapsed_to` can. Each variant says what the caller can do next.
//! [`Error`] is their union, for callers that pass any of them on with `?`.
//!
//! Faults stay where they happen (CUDA's split): a queue whose work failed
//! on the GPU is failed on its own (`QueueFailed`, naming it: drop it and
//! create a new one), and the device and its other queues keep working.
//! Only a device-wide fault ([`Device::set_error`](crate::Device::set_error))
//! puts the device in its error state (`DeviceError`, `Aborted`), for good:
//! recreate the device.
//!
//! | operation | error |
//! |---|---|
//! | [`HostQueue::launch`](crate::HostQueue::launch), [`launch_empty`](crate::HostQueue::launch_empty), [`submit`](crate::HostQueue::submit), [`submit_all`](crate::HostQueue::submit_all), [`record_event`](crate::HostQueue::record_event) | [`SubmitError`] |
//! | [`HostQueue::record`](crate::HostQueue::record) | [`RecordError`] |
//! | [`HostQueue::synchronize`](crate::HostQueue::synchronize), [`HostQueue::query`](crate::HostQueue::query) | [`SyncError`] |
//! | [`Event::synchronize`](crate::Event::synchronize), [`Command::wait`](crate::Command::wait) | [`WaitError`] |
//! | [`HostQueue::wait_event`](crate::HostQueue::wait_event), [`wait_events`](crate::HostQueue::wait_events), [`wait_queue`](crate::HostQueue::wait_queue) | [`WaitEventError`] |
//! | [`HostQueue::move_to`](crate::HostQueue::move_to) | [`MoveError`] |
//! | [`Event::timestamps`](crate::Event::timestamps) | [`TimestampsError`] |
//! | [`Event::elapsed_to`](crate::Event::elapsed_to) | [`ElapsedError`] |
//! | [`QueueConfig::validate`](crate::QueueConfig::validate), [`Device::new`](crate::Device::new), [`Device::create_queue`](crate::Device::create_queue) | [`InvalidConfig`] |

use sigretire_tracker::backend::QueueError;
use std::time::Duration;

/// A configuration value ([`QueueConfig`](crate::QueueConfig)) is out of
/// range: the queue was not made. Fix the value the message names.
///
/// ```
/// use sigretire_queue::{BatchLimits, QueueConfig};
/// let bad = QueueConfig { batch_limits: BatchLimits { host_signals: 0, device_signals: 64 }, ..QueueConfig::default() };
/// assert!(bad.validate().unwrap_err().to_string().contains("batch limits"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("invalid queue configuration: {0}")]
pub struct InvalidConfig(pub &'static str);

/// Why a submission ([`HostQueue::launch`](crate::HostQueue::launch),
/// [`submit`](crate::HostQueue::submit),
/// [`submit_all`](crate::HostQueue::submit_all),
/// [`record_event`](crate::HostQueue::record_event)) published no command.
/// Back-pressure surfaces only past the wait timeout: the queue waits for
/// the use the tracker names, outside its lock, and retries (see
/// [`InFlightLimit`](SubmitError::InFlightLimit)).
///
/// ```
/// use sigretire_queue::SubmitError;
/// let error = SubmitError::Aborted { reason: "injected".into() };
/// assert!(error.to_string().contains("recreate the device"));
/// assert!(error.is_device_error());
/// let failed = SubmitError::QueueFailed { queue: 3 };
/// assert!(failed.to_string().contains("drop this queue and create a new one"));
/// assert!(!failed.is_device_error());
/// assert_eq!(failed.failed_queue(), Some(3));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// The device is in the error state and aborts on GPU errors: it takes
    /// no more work ([`DeviceConfig::skip_abort_on_error`](crate::DeviceConfig)).
    #[error(
        "the device is in an error state ({reason}) and aborts on GPU errors: nothing was submitted; recreate the device (or set skip_abort_on_error)"
    )]
    Aborted {
        /// What put the device in the error state.
        reason: String,
    },
    /// The device entered the error state while the submission waited for
    /// room: nothing was submitted. The state is for good: recreate the
    /// device.
    #[error(
        "the device entered an error state ({reason}) while the submission waited for room: nothing was submitted; the error state is for good: recreate the device"
    )]
    DeviceError {
        /// What put the device in the error state.
        reason: String,
    },
    /// The queue failed (a use of it failed on the GPU: a queue error),
    /// before the call or while it waited for room: it takes no more work,
    /// and its unfinished work will not complete. Nothing was submitted.
    /// Drop the queue and create a new one; the device and its other
    /// queues keep working.
    #[error(
        "queue {queue} failed (its work failed on the GPU): it takes no more work and nothing was submitted; drop this queue and create a new one (the device and its other queues keep working)"
    )]
    QueueFailed {
        /// The failed queue's id.
        queue: u64,
    },
    /// The tracker has `limit` uses in flight, its limit
    /// (`sigretire_tracker::Config::max_in_flight()`: `initial_size` x
    /// `growth_limit`), and the use it needs to complete for room, `wait_for`
    /// (the oldest one the ring waits on, or a fence near it), did not
    /// within the queue's wait timeout ([`QueueConfig::wait_timeout`](crate::QueueConfig)).
    /// Nothing was submitted. The GPU may be stalled behind work that waits
    /// (a gated kernel): release it, synchronize, raise the tracker's
    /// `growth_limit`, or raise `wait_timeout`.
    #[error(
        "the tracker's in-flight limit is reached: {limit} uses in flight (sigretire_tracker::Config::max_in_flight(), initial_size x growth_limit), and use {wait_for}, whose completion frees room, did not complete within {waited:?} (QueueConfig::wait_timeout): nothing was submitted; the GPU may be stalled behind work that waits: release it, synchronize, or raise growth_limit or wait_timeout"
    )]
    InFlightLimit {
        /// Uses in flight: the tracker's `Config::max_in_flight()`.
        limit: usize,
        /// The use (its ticket's sequence number, `Ticket::seq`) the
        /// submission waited for.
        wait_for: u64,
        /// How long it waited: the queue's `wait_timeout`.
        waited: Duration,
    },
    /// A wait the submission needed ran past the wait timeout. Nothing was
    /// submitted; retry, or wait longer
    /// ([`QueueConfig::wait_timeout`](crate::QueueConfig)). (A wait for room
    /// in the tracker's ring answers [`InFlightLimit`](SubmitError::InFlightLimit).)
    #[error(
        "timed out after {0:?} waiting for the queue's work: nothing was submitted; retry, or raise wait_timeout"
    )]
    TimedOut(Duration),
    /// The hardware queue stayed full for the whole wait timeout.
    #[error(
        "the hardware queue stayed full for {0:?}: the GPU is not consuming packets; nothing was submitted"
    )]
    RingFull(Duration),
    /// The hardware queue refused the work (the backend cannot express it)
    /// or failed. The queue keeps working for other work; a command of
    /// several operations refused after issuing some still runs those, and
    /// fails.
    #[error("the hardware queue refused the work: {0}")]
    Queue(#[from] QueueError),
    /// The tracker refused: out of signals, or a signal held everywhere
    /// (let go of events and pins, then retry).
    #[error("the tracker handed out no signal: {0}")]
    Tracker(#[from] sigretire_tracker::Error),
    /// [`submit_all`](crate::HostQueue::submit_all) was given no work, or
    /// more operations than one command holds.
    #[error("a command needs 1 to 2^32 - 1 operations, not {0}: pass at least one Work")]
    Operations(usize),
    /// [`launch`](crate::HostQueue::launch) was given kernel object 0,
    /// which names no kernel (HIP answers `hipErrorInvalidDeviceFunction`).
    /// Nothing was submitted.
    #[error(
        "kernel object 0 names no kernel: nothing was submitted; pass a kernel object the backend knows, or call launch_empty for an empty packet"
    )]
    NullKernel,
}

/// Why [`HostQueue::synchronize`](crate::HostQueue::synchronize) (or
/// [`HostQueue::query`](crate::HostQueue::query), which may publish a
/// marker too) ended without completion.
///
/// ```
/// use sigretire_queue::SyncError;
/// let error = SyncError::DeviceError { reason: "injected".into() };
/// assert!(error.to_string().contains("returned early"));
/// assert!(error.is_device_error());
/// assert!(SyncError::QueueFailed { queue: 3 }.to_string().contains("create a new one"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    /// The device is in the error state and aborts on GPU errors (CLR
    /// aborts the process; a library refuses all further work on the
    /// device instead). Recreate the device.
    #[error(
        "the device is in an error state ({reason}) and aborts on GPU errors: no further work is accepted; recreate the device (or set skip_abort_on_error)"
    )]
    Aborted {
        /// What put the device in the error state.
        reason: String,
    },
    /// The device is in the error state and was configured not to abort
    /// ([`DeviceConfig::skip_abort_on_error`](crate::DeviceConfig), CLR's
    /// `HIP_SKIP_ABORT_ON_GPU_ERROR`): the wait returned early without
    /// completion. Timing and the queue-state reset were skipped; the batch
    /// was released so no thread waits on it forever. The GPU may still run
    /// the work.
    #[error(
        "the device is in an error state ({reason}): the wait returned early without completion; the GPU may still be running the work; the error state is for good: recreate the device to run more work"
    )]
    DeviceError {
        /// What put the device in the error state.
        reason: String,
    },
    /// Work on this queue failed (its completion signal went negative: a
    /// queue error), now or before: the queue is failed for good, its
    /// unfinished work will not complete, and it takes no more work. Drop
    /// it and create a new one; the device and its other queues keep
    /// working.
    #[error(
        "queue {queue} failed (its work failed on the GPU): its work will not complete; drop this queue and create a new one (the device and its other queues keep working)"
    )]
    QueueFailed {
        /// The failed queue's id.
        queue: u64,
    },
    /// The wait ran out of time ([`QueueConfig::wait_timeout`](crate::QueueConfig)).
    /// The work may still complete; nothing was reported complete, and the
    /// completion thread completes the batch when it does.
    #[error(
        "timed out after {0:?}; the work has not completed (it may still): synchronize again, or raise wait_timeout"
    )]
    TimedOut(Duration),
    /// The tracker's in-flight limit was reached and the use that frees
    /// room did not complete within the wait timeout: no marker was
    /// published (see [`SubmitError::InFlightLimit`]).
    #[error(
        "the tracker's in-flight limit is reached: {limit} uses in flight (sigretire_tracker::Config::max_in_flight(), initial_size x growth_limit), and use {wait_for}, whose completion frees room, did not complete within {waited:?} (QueueConfig::wait_timeout): no marker was published; release work that waits, or raise growth_limit or wait_timeout"
    )]
    InFlightLimit {
        /// Uses in flight: the tracker's `Config::max_in_flight()`.
        limit: usize,
        /// The use (its ticket's sequence number) the call waited for.
        wait_for: u64,
        /// How long it waited: the queue's `wait_timeout`.
        waited: Duration,
    },
    /// The hardware queue stayed full for the whole wait timeout: the
    /// marker could not be published.
    #[error(
        "the hardware queue stayed full for {0:?}: the GPU is not consuming packets; no marker was published"
    )]
    RingFull(Duration),
    /// The hardware queue refused the marker, or failed.
    #[error("the hardware queue refused the marker: {0}")]
    Queue(#[from] QueueError),
    /// The tracker refused the marker a signal.
    #[error("the tracker handed out no signal for the marker: {0}")]
    Tracker(#[from] sigretire_tracker::Error),
}

/// Why a wait for a command ([`Command::wait`](crate::Command::wait)) or
/// an event ([`Event::synchronize`](crate::Event::synchronize)) ended
/// without completion.
///
/// ```
/// use sigretire_queue::WaitError;
/// use std::time::Duration;
/// assert!(!WaitError::QueueFailed { queue: 1 }.is_device_error());
/// assert_eq!(WaitError::QueueFailed { queue: 1 }.failed_queue(), Some(1));
/// assert!(!WaitError::TimedOut(Duration::from_secs(1)).is_device_error());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WaitError {
    /// The device is in the error state and aborts on GPU errors. Recreate
    /// the device.
    #[error(
        "the device is in an error state ({reason}) and aborts on GPU errors: no further work is accepted; recreate the device (or set skip_abort_on_error)"
    )]
    Aborted {
        /// What put the device in the error state.
        reason: String,
    },
    /// The device is in the error state (and does not abort): the wait
    /// returned early without completion; the GPU may still run the work.
    #[error(
        "the device is in an error state ({reason}): the wait returned early without completion; the GPU may still be running the work; the error state is for good: recreate the device to run more work"
    )]
    DeviceError {
        /// What put the device in the error state.
        reason: String,
    },
    /// The work failed (a queue error): its queue is failed for good.
    /// Drop that queue and create a new one; the device and its other
    /// queues keep working.
    #[error(
        "queue {queue} failed (its work failed on the GPU): the work will not complete; drop that queue and create a new one (the device and its other queues keep working)"
    )]
    QueueFailed {
        /// The failed queue's id.
        queue: u64,
    },
    /// The wait ran out of time ([`QueueConfig::wait_timeout`](crate::QueueConfig)).
    /// The work may still complete; nothing was reported complete.
    #[error(
        "timed out after {0:?}; the work has not completed (it may still): wait again, or raise wait_timeout"
    )]
    TimedOut(Duration),
    /// The tracker could not arrange the wait (a wake packet's pin was
    /// refused).
    #[error("the tracker refused the wait: {0}")]
    Tracker(#[from] sigretire_tracker::Error),
}

/// Why a cross-queue wait ([`HostQueue::wait_event`](crate::HostQueue::wait_event),
/// [`wait_events`](crate::HostQueue::wait_events),
/// [`wait_queue`](crate::HostQueue::wait_queue)) was not set up.
///
/// ```
/// use sigretire_queue::WaitEventError;
/// assert!(WaitEventError::ForeignSignalMemory.to_string().contains("nothing was published"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WaitEventError {
    /// The producer's signals live in memory the waiting queue cannot read
    /// (another simulator, ROCr process or CUDA context). Nothing was
    /// published.
    #[error(
        "the producer's signals live in memory the waiting queue cannot read (another simulator, runtime or context): nothing was published"
    )]
    ForeignSignalMemory,
    /// The device is in the error state and aborts on GPU errors.
    #[error(
        "the device is in an error state ({reason}) and aborts on GPU errors: nothing was published; recreate the device (or set skip_abort_on_error)"
    )]
    Aborted {
        /// What put the device in the error state.
        reason: String,
    },
    /// The device entered the error state while the wait waited for room.
    #[error(
        "the device entered an error state ({reason}) while the wait waited for room: the wait packets were not all published; the error state is for good: recreate the device"
    )]
    DeviceError {
        /// What put the device in the error state.
        reason: String,
    },
    /// Queue `queue` failed: a producer (its work will not complete, so
    /// nothing may wait on it), or this queue itself (it takes no more
    /// work). The waiting queue is not failed by the refusal: the wait was
    /// not set up. (A wait already published when its producer fails on the
    /// GPU fails the waiting queue's hardware queue with it, as a barrier
    /// on a failed signal does: the waiting queue then fails as its own
    /// work does.) Drop the failed queue and create a new one; wait on
    /// events of a healthy queue.
    #[error(
        "queue {queue} failed (its work failed on the GPU): nothing may wait on it or be queued on it, and nothing was published; drop that queue and create a new one (the device and its other queues keep working)"
    )]
    QueueFailed {
        /// The failed queue's id.
        queue: u64,
    },
    /// The tracker's in-flight limit was reached and the use that frees
    /// room did not complete within the wait timeout: the wait packets were
    /// not all published (see [`SubmitError::InFlightLimit`]).
    #[error(
        "the tracker's in-flight limit is reached: {limit} uses in flight (sigretire_tracker::Config::max_in_flight(), initial_size x growth_limit), and use {wait_for}, whose completion frees room, did not complete within {waited:?} (QueueConfig::wait_timeout): the wait packets were not all published; release work that waits, or raise growth_limit or wait_timeout"
    )]
    InFlightLimit {
        /// Uses in flight: the tracker's `Config::max_in_flight()`.
        limit: usize,
        /// The use (its ticket's sequence number) the call waited for.
        wait_for: u64,
        /// How long it waited: the queue's `wait_timeout`.
        waited: Duration,
    },
    /// A wait the call needed ran past the wait timeout: the wait packets
    /// were not all published; retry.
    #[error(
        "timed out after {0:?}: the wait packets were not all published; retry, or raise wait_timeout"
    )]
    TimedOut(Duration),
    /// The hardware queue stayed full for the whole wait timeout.
    #[error(
        "the hardware queue stayed full for {0:?}: the GPU is not consuming packets; the wait packets were not all published"
    )]
    RingFull(Duration),
    /// The hardware queue refused a wait packet (or a producer's marker),
    /// or failed.
    #[error("the hardware queue refused a wait packet: {0}")]
    Queue(#[from] QueueError),
    /// A tracker refused: a pin, or a signal for a wait packet.
    #[error("the tracker refused the wait: {0}")]
    Tracker(#[from] sigretire_tracker::Error),
}

/// Why [`HostQueue::record`](crate::HostQueue::record) did not record the
/// event: it keeps its previous recording (or stays never recorded).
///
/// ```
/// use sigretire_queue::RecordError;
/// assert!(RecordError::OtherDevice { queue: 2 }.to_string().contains("nothing was recorded"));
/// assert_eq!(RecordError::QueueFailed { queue: 2 }.failed_queue(), Some(2));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The queue belongs to another device than the event
    /// ([`Event::new`](crate::Event::new) names its device): HIP and CUDA
    /// refuse it too. Nothing was recorded.
    #[error(
        "the event belongs to another device than queue {queue}: nothing was recorded; record it on a queue of its own device, or create an event of this one"
    )]
    OtherDevice {
        /// The queue that refused the event.
        queue: u64,
    },
    /// The device is in the error state and aborts on GPU errors: it takes
    /// no more work.
    #[error(
        "the device is in an error state ({reason}) and aborts on GPU errors: nothing was recorded; recreate the device (or set skip_abort_on_error)"
    )]
    Aborted {
        /// What put the device in the error state.
        reason: String,
    },
    /// The device entered the error state while the record waited for
    /// room: nothing was recorded. Recreate the device.
    #[error(
        "the device entered an error state ({reason}) while the record waited for room: nothing was recorded; the error state is for good: recreate the device"
    )]
    DeviceError {
        /// What put the device in the error state.
        reason: String,
    },
    /// The queue failed: it takes no more work. Drop it and create a new
    /// one; record the event there (the device and its other queues keep
    /// working).
    #[error(
        "queue {queue} failed (its work failed on the GPU): it takes no more work and nothing was recorded; drop this queue and create a new one (the device and its other queues keep working)"
    )]
    QueueFailed {
        /// The failed queue's id.
        queue: u64,
    },
    /// The tracker's in-flight limit was reached and the use that frees
    /// room did not complete within the wait timeout: nothing was recorded
    /// (see [`SubmitError::InFlightLimit`]).
    #[error(
        "the tracker's in-flight limit is reached: {limit} uses in flight (sigretire_tracker::Config::max_in_flight(), initial_size x growth_limit), and use {wait_for}, whose completion frees room, did not complete within {waited:?} (QueueConfig::wait_timeout): nothing was recorded; release work that waits, or raise growth_limit or wait_timeout"
    )]
    InFlightLimit {
        /// Uses in flight: the tracker's `Config::max_in_flight()`.
        limit: usize,
        /// The use (its ticket's sequence number) the call waited for.
        wait_for: u64,
        /// How long it waited: the queue's `wait_timeout`.
        waited: Duration,
    },
    /// A wait the record needed ran past the wait timeout: nothing was
    /// recorded; retry.
    #[error("timed out after {0:?}: nothing was recorded; retry, or raise wait_timeout")]
    TimedOut(Duration),
    /// The hardware queue stayed full for the whole wait timeout.
    #[error(
        "the hardware queue stayed full for {0:?}: the GPU is not consuming packets; nothing was recorded"
    )]
    RingFull(Duration),
    /// The hardware queue refused the event's marker, or failed.
    #[error("the hardware queue refused the event's marker: {0}")]
    Queue(#[from] QueueError),
    /// The tracker refused the marker a signal (let go of events and pins,
    /// then retry).
    #[error("the tracker handed out no signal for the event: {0}")]
    Tracker(#[from] sigretire_tracker::Error),
}

/// Why [`HostQueue::move_to`](crate::HostQueue::move_to) did not move the
/// stream: it stays on its hardware queue.
///
/// ```
/// use sigretire_queue::MoveError;
/// assert!(MoveError::ForeignSignalMemory.to_string().contains("did not move"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MoveError {
    /// The new queue cannot name the tracker's signals (another
    /// simulator, ROCr process or CUDA context).
    #[error(
        "the new hardware queue cannot read the tracker's signals (another simulator, runtime or context): the stream did not move"
    )]
    ForeignSignalMemory,
    /// The device is in the error state and aborts on GPU errors.
    #[error(
        "the device is in an error state ({reason}) and aborts on GPU errors: the stream did not move; recreate the device (or set skip_abort_on_error)"
    )]
    Aborted {
        /// What put the device in the error state.
        reason: String,
    },
    /// The device entered the error state while the move waited for room.
    #[error(
        "the device entered an error state ({reason}) while the move waited for room: the stream did not move; the error state is for good: recreate the device"
    )]
    DeviceError {
        /// What put the device in the error state.
        reason: String,
    },
    /// The queue failed (the old hardware queue's newest command, or
    /// before): nothing on the new queue can be ordered after its work, and
    /// it takes no more work. The stream did not move. Drop the queue and
    /// create a new one; the device and its other queues keep working.
    #[error(
        "queue {queue} failed (its work failed on the GPU): the new hardware queue cannot be ordered after its work, and the stream did not move; drop this queue and create a new one (the device and its other queues keep working)"
    )]
    QueueFailed {
        /// The failed queue's id.
        queue: u64,
    },
    /// The tracker's in-flight limit was reached and the use that frees
    /// room did not complete within the wait timeout: the stream did not
    /// move (see [`SubmitError::InFlightLimit`]).
    #[error(
        "the tracker's in-flight limit is reached: {limit} uses in flight (sigretire_tracker::Config::max_in_flight(), initial_size x growth_limit), and use {wait_for}, whose completion frees room, did not complete within {waited:?} (QueueConfig::wait_timeout): the stream did not move; release work that waits, or raise growth_limit or wait_timeout"
    )]
    InFlightLimit {
        /// Uses in flight: the tracker's `Config::max_in_flight()`.
        limit: usize,
        /// The use (its ticket's sequence number) the call waited for.
        wait_for: u64,
        /// How long it waited: the queue's `wait_timeout`.
        waited: Duration,
    },
    /// A wait the move needed ran past the wait timeout: the stream did not
    /// move; retry.
    #[error("timed out after {0:?}: the stream did not move; retry, or raise wait_timeout")]
    TimedOut(Duration),
    /// The old hardware queue stayed full for the whole wait timeout.
    #[error(
        "the hardware queue stayed full for {0:?}: the GPU is not consuming packets; the stream did not move"
    )]
    RingFull(Duration),
    /// The old hardware queue refused the marker, or failed.
    #[error("the hardware queue refused the marker the move needs: {0}")]
    Queue(#[from] QueueError),
    /// The tracker refused (a pin of the old queue's newest command, or a
    /// signal for a marker).
    #[error("the tracker refused the move: {0}")]
    Tracker(#[from] sigretire_tracker::Error),
}

/// Why [`Event::timestamps`](crate::Event::timestamps) has no stamps.
///
/// ```
/// use sigretire_queue::TimestampsError;
/// assert!(TimestampsError::NotReady.to_string().contains("synchronize it first"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimestampsError {
    /// The event was never recorded ([`Event::new`](crate::Event::new)):
    /// there is no work to time. Record it first.
    #[error("the event was never recorded: record it on a queue first")]
    NotRecorded,
    /// The event is not timed (its queue does not profile).
    #[error("the event is not timed: record it on a queue with QueueConfig::profiling = true")]
    NotTimed,
    /// The event has not completed.
    #[error("the event has not completed: synchronize it first")]
    NotReady,
    /// The event's work failed, so it has no timing.
    #[error("the event failed: its work did not complete")]
    EventFailed,
    /// The tracker no longer keeps the stamps (hold the event to keep them).
    #[error("the tracker has no stamps for the event: {0}")]
    Tracker(#[from] sigretire_tracker::Error),
}

/// Why [`Event::elapsed_to`](crate::Event::elapsed_to) has no elapsed time.
///
/// ```
/// use sigretire_queue::ElapsedError;
/// assert!(ElapsedError::StopBeforeStart { ticks: 3 }.to_string().contains("swap the events"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ElapsedError {
    /// The events were recorded on two devices: their timestamps come from
    /// unrelated clocks (HIP and CUDA refuse it too).
    #[error(
        "the events were recorded on two devices, whose clocks are unrelated: no elapsed time between them"
    )]
    DifferentDevices,
    /// Either event was never recorded ([`Event::new`](crate::Event::new)):
    /// CUDA answers `cudaErrorInvalidResourceHandle`. Record both first.
    #[error("an event was never recorded: record both on a queue first")]
    NotRecorded,
    /// Either event is not timed (its queue does not profile).
    #[error("an event is not timed: record both on queues with QueueConfig::profiling = true")]
    NotTimed,
    /// Either event has not completed.
    #[error("an event has not completed: synchronize both first")]
    NotReady,
    /// Either event's work failed, so it has no timing.
    #[error("an event failed: its work did not complete")]
    EventFailed,
    /// The stop event completed before the start event: the elapsed time
    /// would be negative, which a [`Duration`] cannot say (HIP returns a
    /// negative float). Swap the events, or record them on one queue.
    #[error(
        "the stop event completed {ticks} timestamp ticks before the start event: the elapsed time is negative; swap the events"
    )]
    StopBeforeStart {
        /// How many GPU timestamp ticks the stop event completed before the
        /// start event.
        ticks: u64,
    },
    /// The tracker no longer keeps an event's stamps.
    #[error("the tracker has no stamps for an event: {0}")]
    Tracker(#[from] sigretire_tracker::Error),
}

impl From<TimestampsError> for ElapsedError {
    fn from(error: TimestampsError) -> Self {
        match error {
            TimestampsError::NotRecorded => ElapsedError::NotRecorded,
            TimestampsError::NotTimed => ElapsedError::NotTimed,
            TimestampsError::NotReady => ElapsedError::NotReady,
            TimestampsError::EventFailed => ElapsedError::EventFailed,
            TimestampsError::Tracker(error) => ElapsedError::Tracker(error),
        }
    }
}

/// What went wrong submitting or waiting, inside the layer: every
/// operation that publishes converts it into its own error (each has all
/// of these).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    Aborted {
        reason: String,
    },
    DeviceError {
        reason: String,
    },
    QueueFailed {
        queue: u64,
    },
    InFlightLimit {
        limit: usize,
        wait_for: u64,
        waited: Duration,
    },
    TimedOut(Duration),
    RingFull(Duration),
    Queue(QueueError),
    Tracker(sigretire_tracker::Error),
}

impl From<QueueError> for Fault {
    fn from(error: QueueError) -> Self {
        Fault::Queue(error)
    }
}

impl From<WaitError> for Fault {
    fn from(error: WaitError) -> Self {
        match error {
            WaitError::Aborted { reason } => Fault::Aborted { reason },
            WaitError::DeviceError { reason } => Fault::DeviceError { reason },
            WaitError::QueueFailed { queue } => Fault::QueueFailed { queue },
            WaitError::TimedOut(timeout) => Fault::TimedOut(timeout),
            WaitError::Tracker(error) => Fault::Tracker(error),
        }
    }
}

/// Each of the tracker's per-operation errors passes through `?` as a
/// tracker error, into whichever type names one.
macro_rules! from_tracker {
    ($($error:ty),*) => {
        $(
            impl From<$error> for Fault {
                fn from(error: $error) -> Self {
                    Fault::Tracker(error.into())
                }
            }
            impl From<$error> for WaitError {
                fn from(error: $error) -> Self {
                    WaitError::Tracker(error.into())
                }
            }
            impl From<$error> for TimestampsError {
                fn from(error: $error) -> Self {
                    TimestampsError::Tracker(error.into())
                }
            }
        )*
    };
}

impl From<sigretire_tracker::Error> for Fault {
    fn from(error: sigretire_tracker::Error) -> Self {
        Fault::Tracker(error)
    }
}

from_tracker!(
    sigretire_tracker::ForeignTicket,
    sigretire_tracker::AcquireError,
    sigretire_tracker::PinError,
    sigretire_tracker::TimestampsError
);

/// Each operation that publishes answers every [`Fault`] as its own
/// variant of the same name.
macro_rules! from_fault {
    ($($error:ident),*) => {
        $(
            impl From<Fault> for $error {
                fn from(fault: Fault) -> Self {
                    match fault {
                        Fault::Aborted { reason } => $error::Aborted { reason },
                        Fault::DeviceError { reason } => $error::DeviceError { reason },
                        Fault::QueueFailed { queue } => $error::QueueFailed { queue },
                        Fault::InFlightLimit { limit, wait_for, waited } => {
                            $error::InFlightLimit { limit, wait_for, waited }
                        }
                        Fault::TimedOut(timeout) => $error::TimedOut(timeout),
                        Fault::RingFull(timeout) => $error::RingFull(timeout),
                        Fault::Queue(error) => $error::Queue(error),
                        Fault::Tracker(error) => $error::Tracker(error),
                    }
                }
            }

            impl From<WaitError> for $error {
                fn from(error: WaitError) -> Self {
                    Fault::from(error).into()
                }
            }

            impl $error {
                /// Whether the error comes from the device error state (an
                /// early return, or an abort): the device needs attention
                /// (recreate it), not the call. A failed queue is not a
                /// device error: see [`failed_queue`](Self::failed_queue).
                pub fn is_device_error(&self) -> bool {
                    matches!(self, $error::DeviceError { .. } | $error::Aborted { .. })
                }

                /// The queue that failed, if that is the error: drop it and
                /// create a new one; the device and its other queues keep
                /// working.
                pub fn failed_queue(&self) -> Option<u64> {
                    match self {
                        $error::QueueFailed { queue } => Some(*queue),
                        _ => None,
                    }
                }
            }
        )*
    };
}

from_fault!(
    SubmitError,
    SyncError,
    WaitEventError,
    MoveError,
    RecordError
);

impl WaitError {
    /// Whether the error comes from the device error state (an early
    /// return, or an abort): the device needs attention (recreate it), not
    /// the call. A failed queue is not a device error: see
    /// [`failed_queue`](Self::failed_queue).
    pub fn is_device_error(&self) -> bool {
        matches!(
            self,
            WaitError::DeviceError { .. } | WaitError::Aborted { .. }
        )
    }

    /// The queue that failed, if that is the error: drop it and create a
    /// new one; the device and its other queues keep working.
    pub fn failed_queue(&self) -> Option<u64> {
        match self {
            WaitError::QueueFailed { queue } => Some(*queue),
            _ => None,
        }
    }
}

/// Any queue-layer error, flattened: each operation's own error converts
/// into it variant for variant, for a caller that passes them on with `?`
/// (and the simulator platform's set-up answers it).
///
/// ```
/// use sigretire_queue::{Error, SubmitError};
/// fn submit(queue: &sigretire_queue::HostQueue<sigretire_queue::sim::SimTracker>) -> Result<(), Error> {
///     queue.launch_empty()?; // a SubmitError, passed on
///     queue.synchronize()?; // a SyncError
///     Ok(())
/// }
/// let error = Error::from(SubmitError::Aborted { reason: "injected".into() });
/// assert!(matches!(error, Error::Aborted { .. }));
/// assert!(error.is_device_error());
/// let failed = Error::from(SubmitError::QueueFailed { queue: 3 });
/// assert_eq!(failed.failed_queue(), Some(3));
/// assert!(!failed.is_device_error());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A tracker refused ([`SubmitError::Tracker`] and the like), or could
    /// not be made.
    #[error("tracker: {0}")]
    Tracker(#[from] sigretire_tracker::Error),
    /// The hardware queue refused work or failed (or could not be made).
    #[error("hardware queue: {0}")]
    Queue(#[from] QueueError),
    /// The device is in the error state and does not abort: a wait
    /// returned early without completion.
    #[error(
        "the device is in an error state ({reason}): the wait returned early without completion; the GPU may still be running the work; the error state is for good: recreate the device to run more work"
    )]
    DeviceError {
        /// What put the device in the error state.
        reason: String,
    },
    /// The device is in the error state and aborts on GPU errors: no
    /// further work is accepted. Recreate the device.
    #[error(
        "the device is in an error state ({reason}) and aborts on GPU errors: no further work is accepted; recreate the device (or set skip_abort_on_error)"
    )]
    Aborted {
        /// What put the device in the error state.
        reason: String,
    },
    /// Work on a queue failed: that queue is failed for good. Drop it and
    /// create a new one; the device and its other queues keep working.
    #[error(
        "queue {queue} failed (its work failed on the GPU): its work will not complete, and it takes no more work; drop that queue and create a new one (the device and its other queues keep working)"
    )]
    QueueFailed {
        /// The failed queue's id.
        queue: u64,
    },
    /// The tracker's in-flight limit was reached and the use that frees
    /// room did not complete within the wait timeout (see
    /// [`SubmitError::InFlightLimit`]).
    #[error(
        "the tracker's in-flight limit is reached: {limit} uses in flight (sigretire_tracker::Config::max_in_flight(), initial_size x growth_limit), and use {wait_for}, whose completion frees room, did not complete within {waited:?} (QueueConfig::wait_timeout): nothing was published; release work that waits, or raise growth_limit or wait_timeout"
    )]
    InFlightLimit {
        /// Uses in flight: the tracker's `Config::max_in_flight()`.
        limit: usize,
        /// The use (its ticket's sequence number) the call waited for.
        wait_for: u64,
        /// How long it waited: the queue's `wait_timeout`.
        waited: Duration,
    },
    /// A wait ran out of time.
    #[error(
        "timed out after {0:?}; the work has not completed (it may still): wait again, or raise wait_timeout"
    )]
    TimedOut(Duration),
    /// The hardware queue stayed full for the whole wait timeout.
    #[error("the hardware queue stayed full for {0:?}: the GPU is not consuming packets")]
    RingFull(Duration),
    /// A command was given no work, or too many operations.
    #[error("a command needs 1 to 2^32 - 1 operations, not {0}")]
    Operations(usize),
    /// A launch was given kernel object 0, which names no kernel.
    #[error(
        "kernel object 0 names no kernel: pass a kernel object the backend knows, or call launch_empty for an empty packet"
    )]
    NullKernel,
    /// An event was never recorded.
    #[error("the event was never recorded: record it on a queue first")]
    NotRecorded,
    /// An event was to be recorded on a queue of another device.
    #[error(
        "the event belongs to another device than queue {queue}: nothing was recorded; record it on a queue of its own device, or create an event of this one"
    )]
    OtherDevice {
        /// The queue that refused the event.
        queue: u64,
    },
    /// An event is not timed.
    #[error("the event is not timed: record it on a queue with QueueConfig::profiling = true")]
    NotTimed,
    /// An event has not completed.
    #[error("the event has not completed: synchronize it first")]
    NotReady,
    /// An event's work failed, so it has no timing.
    #[error("the event failed: its work did not complete")]
    EventFailed,
    /// The stop event of an elapsed time completed before its start event.
    #[error(
        "the stop event completed {ticks} timestamp ticks before the start event: the elapsed time is negative; swap the events"
    )]
    StopBeforeStart {
        /// How many ticks the stop event completed before the start event.
        ticks: u64,
    },
    /// A configuration value is out of range.
    #[error(transparent)]
    InvalidConfig(#[from] InvalidConfig),
    /// Events of two devices have no elapsed time between them.
    #[error(
        "the events were recorded on two devices, whose clocks are unrelated: no elapsed time between them"
    )]
    DifferentDevices,
    /// Signals of memory the waiting (or moved-to) queue cannot read.
    #[error(
        "the producer's signals live in memory the waiting queue cannot read (another simulator, runtime or context): nothing was published"
    )]
    ForeignSignalMemory,
}

impl Error {
    /// Whether the error comes from the device error state (early return,
    /// or abort): the device needs attention (recreate it), not the call. A
    /// failed queue is not a device error: see
    /// [`failed_queue`](Self::failed_queue).
    ///
    /// ```
    /// use sigretire_queue::Error;
    /// use std::time::Duration;
    /// assert!(!Error::QueueFailed { queue: 1 }.is_device_error());
    /// assert!(Error::Aborted { reason: "injected".into() }.is_device_error());
    /// assert!(!Error::TimedOut(Duration::from_secs(1)).is_device_error());
    /// ```
    pub fn is_device_error(&self) -> bool {
        matches!(self, Error::DeviceError { .. } | Error::Aborted { .. })
    }

    /// The queue that failed, if that is the error: drop it and create a
    /// new one; the device and its other queues keep working.
    ///
    /// ```
    /// assert_eq!(sigretire_queue::Error::QueueFailed { queue: 1 }.failed_queue(), Some(1));
    /// ```
    pub fn failed_queue(&self) -> Option<u64> {
        match self {
            Error::QueueFailed { queue } => Some(*queue),
            _ => None,
        }
    }
}

/// The variants every publishing operation shares, into the union.
macro_rules! into_union {
    ($error:ident { $($own:pat => $union:expr),* }) => {
        impl From<$error> for Error {
            fn from(error: $error) -> Self {
                match error {
                    $error::Aborted { reason } => Error::Aborted { reason },
                    $error::DeviceError { reason } => Error::DeviceError { reason },
                    $error::QueueFailed { queue } => Error::QueueFailed { queue },
                    $error::InFlightLimit { limit, wait_for, waited } => {
                        Error::InFlightLimit { limit, wait_for, waited }
                    }
                    $error::TimedOut(timeout) => Error::TimedOut(timeout),
                    $error::RingFull(timeout) => Error::RingFull(timeout),
                    $error::Queue(error) => Error::Queue(error),
                    $error::Tracker(error) => Error::Tracker(error),
                    $($own => $union,)*
                }
            }
        }
    };
}

into_union!(SubmitError {
    SubmitError::Operations(count) => Error::Operations(count),
    SubmitError::NullKernel => Error::NullKernel
});
into_union!(SyncError {});
into_union!(WaitEventError { WaitEventError::ForeignSignalMemory => Error::ForeignSignalMemory });
into_union!(MoveError { MoveError::ForeignSignalMemory => Error::ForeignSignalMemory });
into_union!(RecordError { RecordError::OtherDevice { queue } => Error::OtherDevice { queue } });

impl From<WaitError> for Error {
    fn from(error: WaitError) -> Self {
        Fault::from(error).into()
    }
}

impl From<Fault> for Error {
    fn from(fault: Fault) -> Self {
        SyncError::from(fault).into()
    }
}

impl From<TimestampsError> for Error {
    fn from(error: TimestampsError) -> Self {
        match error {
            TimestampsError::NotRecorded => Error::NotRecorded,
            TimestampsError::NotTimed => Error::NotTimed,
            TimestampsError::NotReady => Error::NotReady,
            TimestampsError::EventFailed => Error::EventFailed,
            TimestampsError::Tracker(error) => Error::Tracker(error),
        }
    }
}

impl From<ElapsedError> for Error {
    fn from(error: ElapsedError) -> Self {
        match error {
            ElapsedError::DifferentDevices => Error::DifferentDevices,
            ElapsedError::NotRecorded => Error::NotRecorded,
            ElapsedError::NotTimed => Error::NotTimed,
            ElapsedError::NotReady => Error::NotReady,
            ElapsedError::EventFailed => Error::EventFailed,
            ElapsedError::StopBeforeStart { ticks } => Error::StopBeforeStart { ticks },
            ElapsedError::Tracker(error) => Error::Tracker(error),
        }
    }
}

impl From<sigretire_tracker::CreateError> for Error {
    fn from(error: sigretire_tracker::CreateError) -> Self {
        Error::Tracker(error.into())
    }
}
