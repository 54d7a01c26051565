//! Events (`sigretire_event`): a point recorded on a stream
//! (`hipEventRecord`), queried and synchronized from any thread without the
//! stream's lock, waited for by other streams on the GPU, and timed.
//!
//! Recording makes a new handle each time (a recorded event is the queue
//! layer's `Event`, a point in one stream); there is no empty event to
//! record into, as `hipEventCreate` makes. An event keeps the signal of its
//! point from being re-armed, so its status and timestamps stay readable
//! for as long as the handle lives: destroy events once done with them.

use crate::layer::{AnyEvent, each, event_backend, layer_failure, mixed_backends};
use crate::objects::{
    EVENT_FLAGS, SIGRETIRE_EVENT_BLOCKING_SYNC, SIGRETIRE_EVENT_DISABLE_TIMING, event_ref,
    sigretire_event, stream_ref,
};
use crate::registry::{self, Kind};
use crate::status::*;
use crate::types::*;
use ::sigretire_queue::EventFlags;
use std::time::Duration;

/// Records an event on `stream`: a marker after everything submitted so
/// far (or, right after a launch on a stream that runs only what it
/// publishes, that launch's own completion). `flags`: 0 (timed where the
/// stream profiles, spinning synchronize) or `SIGRETIRE_EVENT_*` bits.
/// Errors as for `sigretire_stream_launch`
/// (`SIGRETIRE_ERR_STREAM_FAILED` on a failed stream: nothing recorded).
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `stream` is a live stream; `event` points to a writable handle
/// variable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_event_record(
    stream: *const crate::objects::sigretire_stream,
    flags: u32,
    event: *mut *mut sigretire_event,
) -> sigretire_status {
    guard("sigretire_event_record", || {
        let out = Out::new(event, "event")?;
        if flags & !EVENT_FLAGS != 0 {
            return fail(
                SIGRETIRE_ERR_INVALID_ARGUMENT,
                format!("event flags {flags:#x} has unknown bits"),
            );
        }
        let flags = EventFlags {
            timing: flags & SIGRETIRE_EVENT_DISABLE_TIMING == 0,
            blocking_sync: flags & SIGRETIRE_EVENT_BLOCKING_SYNC != 0,
        };
        // SAFETY: forwarded caller guarantee.
        let stream = unsafe { stream_ref(stream) }?;
        let recorded = match &stream.queue {
            crate::layer::AnyStream::Sim(q) => q.record_event_with(flags).map(AnyEvent::Sim),
            crate::layer::AnyStream::Rocr(q) => q.record_event_with(flags).map(AnyEvent::Rocr),
            #[cfg(feature = "cuda-no-version")]
            crate::layer::AnyStream::Cuda(q) => q.record_event_with(flags).map(AnyEvent::Cuda),
        }
        .or_else(layer_failure)?;
        let ptr = Box::into_raw(Box::new(sigretire_event {
            _device: stream.device().clone(),
            event: recorded,
        }));
        registry::register(ptr, Kind::Event);
        out.write(ptr);
        Ok(())
    })
}

/// The event's status (`hipEventQuery`) in `*status`:
/// `SIGRETIRE_USE_PENDING`, `_COMPLETE`, or `_FAILED` when its stream's
/// work failed (the stream is then failed too). No lock; no memory read
/// once the tracker knows, else one load of the event's signal. Never
/// waits. Returns `SIGRETIRE_OK` whenever it answers.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `event` is a live event; `status` points to a writable
/// `sigretire_use_status`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_event_query(
    event: *const sigretire_event,
    status: *mut sigretire_use_status,
) -> sigretire_status {
    guard("sigretire_event_query", || {
        let out = Out::new(status, "status")?;
        // SAFETY: forwarded caller guarantee.
        let event = unsafe { event_ref(event) }?;
        let answer = each!(AnyEvent, &event.event, e => e.query());
        out.write(sigretire_use_status::from_rust(answer));
        Ok(())
    })
}

/// Waits for the event (`hipEventSynchronize`) without its stream's lock,
/// for at most its stream's `wait_timeout_ns` (none by default).
/// `SIGRETIRE_OK` once the event's work completed;
/// `SIGRETIRE_ERR_STREAM_FAILED` if it failed; `SIGRETIRE_ERR_TIMED_OUT`
/// past the stream's timeout; `SIGRETIRE_ERR_DEVICE_ERROR` or `_ABORTED` on
/// a device in its error state.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `event` is a live event.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_event_synchronize(
    event: *const sigretire_event,
) -> sigretire_status {
    guard("sigretire_event_synchronize", || {
        // SAFETY: forwarded caller guarantee.
        let event = unsafe { event_ref(event) }?;
        each!(AnyEvent, &event.event, e => e.synchronize()).or_else(layer_failure)
    })
}

/// As `sigretire_event_synchronize`, but gives up after `timeout_ns`
/// nanoseconds (in place of its stream's `wait_timeout_ns`):
/// `SIGRETIRE_ERR_TIMED_OUT`, the event not completed yet (it may still).
/// A zero timeout looks once.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `event` is a live event.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_event_synchronize_timeout(
    event: *const sigretire_event,
    timeout_ns: u64,
) -> sigretire_status {
    guard("sigretire_event_synchronize_timeout", || {
        // SAFETY: forwarded caller guarantee.
        let event = unsafe { event_ref(event) }?;
        let timeout = Duration::from_nanos(timeout_ns);
        each!(AnyEvent, &event.event, e => e.synchronize_timeout(timeout)).or_else(layer_failure)
    })
}

/// GPU time from event `start` to event `stop` (`hipEventElapsedTime`), in
/// nanoseconds, from their completion timestamps (read from host memory:
/// no PCIe read). Both must be timed and complete: `SIGRETIRE_ERR_NOT_TIMED`,
/// `SIGRETIRE_ERR_NOT_READY` (synchronize them first),
/// `SIGRETIRE_ERR_STREAM_FAILED` otherwise; `SIGRETIRE_ERR_STOP_BEFORE_START`
/// when `stop` completed first (swap them);
/// `SIGRETIRE_ERR_DIFFERENT_DEVICES` for events of two devices,
/// `SIGRETIRE_ERR_WRONG_BACKEND` for two backends. An event to itself is 0.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `start` and `stop` are live events; `elapsed_ns` points to a writable
/// `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_event_elapsed_ns(
    start: *const sigretire_event,
    stop: *const sigretire_event,
    elapsed_ns: *mut u64,
) -> sigretire_status {
    guard("sigretire_event_elapsed_ns", || {
        let out = Out::new(elapsed_ns, "elapsed_ns")?;
        // SAFETY: forwarded caller guarantees.
        let start = unsafe { event_ref(start) }?;
        // SAFETY: as above.
        let stop = unsafe { event_ref(stop) }?;
        let elapsed = match (&start.event, &stop.event) {
            (AnyEvent::Sim(a), AnyEvent::Sim(b)) => a.elapsed_to(b),
            (AnyEvent::Rocr(a), AnyEvent::Rocr(b)) => a.elapsed_to(b),
            #[cfg(feature = "cuda-no-version")]
            (AnyEvent::Cuda(a), AnyEvent::Cuda(b)) => a.elapsed_to(b),
            (a, b) => {
                return mixed_backends(
                    "no elapsed time between events of two backends",
                    event_backend(a),
                    event_backend(b),
                );
            }
        }
        .or_else(layer_failure)?;
        out.write(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX));
        Ok(())
    })
}

/// Destroys the event handle and sets `*event` to NULL (a NULL `*event` is
/// a no-op). A stream waiting for it on the GPU keeps waiting correctly
/// (the wait holds the event's signal itself).
///
/// Thread safety: the last call on this handle.
///
/// # Safety
/// `event` points to a variable holding NULL or a live event handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_event_destroy(
    event: *mut *mut sigretire_event,
) -> sigretire_status {
    guard("sigretire_event_destroy", || {
        check_pointer(event.cast_const(), "event")?;
        // SAFETY: checked; the caller's variable.
        let handle = unsafe { *event };
        if handle.is_null() {
            return Ok(());
        }
        // Out of the table first: of two calls destroying the same handle,
        // only the one that took it out frees it.
        registry::unregister(handle.cast_const(), Kind::Event, "*event")?;
        // SAFETY: a live handle (the table said so) from `Box::into_raw`,
        // now out of the table, used by nothing else (contract): freed
        // once, here; the caller's variable cleared.
        unsafe {
            *event = std::ptr::null_mut();
            drop(Box::from_raw(handle));
        }
        Ok(())
    })
}
