//! The queue layer (`sigretire_queue`: devices, streams, events) over every
//! backend, behind one enum per type, so that the C handles
//! (`sigretire_device`, `sigretire_stream`, `sigretire_event`) are
//! backend-neutral; and the queue layer's errors as statuses.
//!
//! The queue layer's types are generic over the tracker, and each backend
//! is another tracker type. A trait object cannot carry them here (a
//! cross-queue wait needs the producer's and the waiter's tracker types to
//! agree on their signal memory, which `dyn` cannot express), so each type
//! is an enum with one variant per backend, the same variants in each, and
//! [`each!`] runs one generic expression on whichever variant a value is.
//! Two values of different backends meet only in a cross-stream wait and an
//! elapsed time, which refuse the pair (`SIGRETIRE_ERR_WRONG_BACKEND`).

use crate::engine::queue_failure;
use crate::rocr_queue::KeptQueue;
use crate::status::*;
use crate::tracker::created_failure;
use ::sigretire_queue::sim::{SimPlatform, SimTracker};
use ::sigretire_queue::{Device, Event, HostQueue};
use ::sigretire_tracker::{Config, RetiringTracker};
use sigretire_hsa::SignalPool;
use std::sync::Arc;

/// The tracker a ROCr stream runs on: signals of the device's pool, over
/// an `hsa_queue_t` the runtime owns (handed back through its release
/// callback).
pub(crate) type RocrTracker = RetiringTracker<SignalPool, KeptQueue>;

/// The tracker a CUDA stream runs on: signals in the context's pinned
/// memory, over a stream of the context (the runtime's, adopted, or one of
/// the library's own).
#[cfg(feature = "cuda-no-version")]
pub(crate) type CudaTracker =
    RetiringTracker<::sigretire_cuda::CudaMemory, ::sigretire_cuda::CudaQueue>;

/// A device of the queue layer, of any backend.
pub(crate) enum AnyDevice {
    Sim(Device<SimTracker>),
    Rocr(Device<RocrTracker>),
    #[cfg(feature = "cuda-no-version")]
    Cuda(Device<CudaTracker>),
}

/// A stream (a `HostQueue`), of any backend.
pub(crate) enum AnyStream {
    Sim(HostQueue<SimTracker>),
    Rocr(HostQueue<RocrTracker>),
    #[cfg(feature = "cuda-no-version")]
    Cuda(HostQueue<CudaTracker>),
}

/// A recorded event, of any backend.
pub(crate) enum AnyEvent {
    Sim(Event<SimTracker>),
    Rocr(Event<RocrTracker>),
    #[cfg(feature = "cuda-no-version")]
    Cuda(Event<CudaTracker>),
}

/// What a device makes the trackers of its new streams from: the same
/// signal memory for every stream of the device (so that any stream can
/// wait, on the GPU, for any other's events), and the tracker
/// configuration the device was created with.
pub(crate) enum Platform {
    Sim(SimPlatform),
    Rocr {
        gpu: sigretire_hsa::Agent,
        signals: Arc<SignalPool>,
        config: Config,
    },
    #[cfg(feature = "cuda-no-version")]
    Cuda {
        context: Arc<::sigretire_cuda::CudaContext>,
        signals: Arc<::sigretire_cuda::CudaMemory>,
        config: Config,
    },
}

/// Runs `$body` with `$x` bound to the inner value of `$value`, a
/// reference to an `$enum` of this module, whichever backend it is.
macro_rules! each {
    ($enum:ident, $value:expr, $x:ident => $body:expr) => {
        match $value {
            $crate::layer::$enum::Sim($x) => $body,
            $crate::layer::$enum::Rocr($x) => $body,
            #[cfg(feature = "cuda-no-version")]
            $crate::layer::$enum::Cuda($x) => $body,
        }
    };
}
pub(crate) use each;

impl AnyDevice {
    /// The backend's name, for messages.
    pub(crate) fn backend(&self) -> &'static str {
        match self {
            AnyDevice::Sim(_) => "the simulator",
            AnyDevice::Rocr(_) => "ROCr",
            #[cfg(feature = "cuda-no-version")]
            AnyDevice::Cuda(_) => "CUDA",
        }
    }
}

/// A stream's backend, as a device's is named.
pub(crate) fn stream_backend(stream: &AnyStream) -> &'static str {
    match stream {
        AnyStream::Sim(_) => "the simulator",
        AnyStream::Rocr(_) => "ROCr",
        #[cfg(feature = "cuda-no-version")]
        AnyStream::Cuda(_) => "CUDA",
    }
}

/// An event's backend, as a device's is named.
pub(crate) fn event_backend(event: &AnyEvent) -> &'static str {
    match event {
        AnyEvent::Sim(_) => "the simulator",
        AnyEvent::Rocr(_) => "ROCr",
        #[cfg(feature = "cuda-no-version")]
        AnyEvent::Cuda(_) => "CUDA",
    }
}

/// The refusal of a pair of objects of two backends.
pub(crate) fn mixed_backends<T>(what: &str, first: &str, second: &str) -> Outcome<T> {
    fail(
        SIGRETIRE_ERR_WRONG_BACKEND,
        format!(
            "{what}: one runs on {first}, the other on {second}; their signals and clocks are \
             unrelated"
        ),
    )
}

/// Any queue-layer error (each operation's own converts into the union) as
/// a status, with the layer's sentence (which says what to do next); a
/// failed stream's also says it in this library's names.
pub(crate) fn layer_failure<T>(error: impl Into<::sigretire_queue::Error>) -> Outcome<T> {
    use ::sigretire_queue::Error as E;
    let error = error.into();
    let status = match &error {
        E::Tracker(tracker) => return tracker_failure(tracker.clone()),
        E::Queue(queue) => return queue_failure(queue.clone()),
        E::DeviceError { .. } => SIGRETIRE_ERR_DEVICE_ERROR,
        E::Aborted { .. } => SIGRETIRE_ERR_DEVICE_ABORTED,
        E::QueueFailed { queue } => {
            return fail(
                SIGRETIRE_ERR_STREAM_FAILED,
                format!(
                    "{error} (stream {queue}: sigretire_stream_destroy it and make another with \
                     sigretire_device_stream_create or an adopt function)"
                ),
            );
        }
        E::EventFailed => SIGRETIRE_ERR_STREAM_FAILED,
        E::InFlightLimit { .. } => SIGRETIRE_ERR_IN_FLIGHT_LIMIT,
        E::TimedOut(_) => SIGRETIRE_ERR_TIMED_OUT,
        E::RingFull(_) => SIGRETIRE_ERR_QUEUE_FULL,
        E::Operations(_) => SIGRETIRE_ERR_INVALID_ARGUMENT,
        E::NotTimed => SIGRETIRE_ERR_NOT_TIMED,
        E::NotReady => SIGRETIRE_ERR_NOT_READY,
        E::StopBeforeStart { .. } => SIGRETIRE_ERR_STOP_BEFORE_START,
        E::InvalidConfig(_) => SIGRETIRE_ERR_INVALID_CONFIG,
        E::DifferentDevices => SIGRETIRE_ERR_DIFFERENT_DEVICES,
        E::ForeignSignalMemory => SIGRETIRE_ERR_FOREIGN_SIGNAL_MEMORY,
        E::NullKernel => SIGRETIRE_ERR_INVALID_ARGUMENT,
        // The C ABI's events are recorded when they are made: a handle of a
        // never-recorded event cannot reach the layer.
        E::NotRecorded => SIGRETIRE_ERR_INVALID_ARGUMENT,
        E::OtherDevice { .. } => SIGRETIRE_ERR_DIFFERENT_DEVICES,
    };
    fail(status, error.to_string())
}

/// A tracker's refusal inside the queue layer, as a status.
fn tracker_failure<T>(error: ::sigretire_tracker::Error) -> Outcome<T> {
    use ::sigretire_tracker::{AcquireError, Error as E, PinError};
    let status = match &error {
        E::Create(create) => return created_failure(create.clone()),
        E::Acquire(AcquireError::SignalsHeld { .. }) => SIGRETIRE_ERR_SIGNALS_HELD,
        E::Acquire(AcquireError::OutOfSignals(_)) => SIGRETIRE_ERR_OUT_OF_SIGNALS,
        E::Acquire(AcquireError::Backpressure { .. }) => SIGRETIRE_ERR_BACKPRESSURE,
        E::Pin(PinError::Failed { .. }) => SIGRETIRE_ERR_STREAM_FAILED,
        E::Timestamps(_) => SIGRETIRE_ERR_EXPIRED,
        E::InvalidConfig(_) => SIGRETIRE_ERR_INVALID_CONFIG,
        _ => SIGRETIRE_ERR_BACKEND,
    };
    fail(status, format!("the tracker refused: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::sigretire_queue::{ElapsedError, SubmitError, SyncError, WaitError};
    use std::time::Duration;

    fn status(result: Outcome) -> sigretire_status {
        result.unwrap_err().status
    }

    #[test]
    fn each_layer_error_has_its_own_status() {
        let second = Duration::from_secs(1);
        assert_eq!(
            status(layer_failure(SubmitError::QueueFailed { queue: 7 })),
            SIGRETIRE_ERR_STREAM_FAILED
        );
        assert_eq!(
            status(layer_failure(SyncError::TimedOut(second))),
            SIGRETIRE_ERR_TIMED_OUT
        );
        assert_eq!(
            status(layer_failure(WaitError::DeviceError {
                reason: "lost".into()
            })),
            SIGRETIRE_ERR_DEVICE_ERROR
        );
        assert_eq!(
            status(layer_failure(SubmitError::Aborted {
                reason: "lost".into()
            })),
            SIGRETIRE_ERR_DEVICE_ABORTED
        );
        assert_eq!(
            status(layer_failure(ElapsedError::StopBeforeStart { ticks: 3 })),
            SIGRETIRE_ERR_STOP_BEFORE_START
        );
        assert_eq!(
            status(layer_failure(ElapsedError::NotTimed)),
            SIGRETIRE_ERR_NOT_TIMED
        );
        assert_eq!(
            status(layer_failure(SyncError::RingFull(second))),
            SIGRETIRE_ERR_QUEUE_FULL
        );
    }

    #[test]
    fn a_failed_streams_message_says_what_to_do_in_c() {
        let failure = layer_failure::<()>(SyncError::QueueFailed { queue: 4 }).unwrap_err();
        assert!(
            failure.message.contains("sigretire_stream_destroy"),
            "{}",
            failure.message
        );
        assert!(
            failure.message.contains("queue 4 failed"),
            "{}",
            failure.message
        );
    }
}
