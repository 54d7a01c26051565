//! Streams (`sigretire_stream`): the queue layer's host queue, a HIP
//! stream, on one hardware queue: launches, markers, query, synchronize
//! with and without a deadline, and cross-stream waits for events.
//!
//! How outcomes are reported, here and for events: a call that waits
//! (synchronize) or submits returns the failure as its status
//! (`SIGRETIRE_ERR_STREAM_FAILED`, `SIGRETIRE_ERR_TIMED_OUT`, ...), and
//! `SIGRETIRE_OK` means the work completed (or was submitted); a query
//! never waits and answers in its out-parameter (`SIGRETIRE_USE_PENDING`,
//! `_COMPLETE`, `_FAILED`), returning `SIGRETIRE_OK` whenever it could
//! answer.

use crate::layer::{
    AnyEvent, AnyStream, each, event_backend, layer_failure, mixed_backends, stream_backend,
};
use crate::objects::{event_ref, sigretire_stream, sigretire_stream_options, stream_ref};
use crate::registry::{self, Kind};
use crate::status::*;
use crate::types::*;
use ::sigretire_queue::SyncError;
use ::sigretire_tracker::{Status, Work};
use std::time::Duration;

/// The default stream options: profiled, spinning waits, no wait timeout.
///
/// Thread safety: any thread.
///
/// # Safety
/// `options` points to a writable `sigretire_stream_options`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_stream_options_default(
    options: *mut sigretire_stream_options,
) -> sigretire_status {
    guard("sigretire_stream_options_default", || {
        // SAFETY: forwarded caller guarantee.
        unsafe { StructOut::new(options, "options") }?.write(sigretire_stream_options::default());
        Ok(())
    })
}

/// Launches the kernel the backend knows by `kernel_object` on the stream
/// (on the simulator, a kernel of `sigretire_sim_register_gated_kernel`;
/// on ROCr, a code object's kernel object; on CUDA none: a CUDA runtime
/// launches its own kernels on the stream it adopted, and a marker or an
/// event after them covers them): one packet with the barrier bit. 0 names
/// no kernel (`SIGRETIRE_ERR_INVALID_ARGUMENT`, as HIP refuses a null
/// function): the empty packet is `sigretire_stream_launch_empty`. A kernel
/// the backend cannot launch is refused (`SIGRETIRE_ERR_UNSUPPORTED`); the
/// stream keeps working. Takes the stream's lock for
/// the publication only; when the tracker's ring is full it waits for room
/// outside the lock, up to the stream's `wait_timeout_ns`
/// (`SIGRETIRE_ERR_IN_FLIGHT_LIMIT` after it). `SIGRETIRE_ERR_STREAM_FAILED`
/// once the stream failed: nothing was submitted.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `stream` is a live stream.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_stream_launch(
    stream: *const sigretire_stream,
    kernel_object: u64,
) -> sigretire_status {
    guard("sigretire_stream_launch", || {
        // SAFETY: forwarded caller guarantee.
        let stream = unsafe { stream_ref(stream) }?;
        each!(AnyStream, &stream.queue, q => q.launch(kernel_object).map(drop))
            .or_else(layer_failure)
    })
}

/// Launches the empty kernel on the stream: a packet that does nothing but
/// complete (on CUDA, the library's own empty kernel). Errors as for
/// `sigretire_stream_launch`.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `stream` is a live stream.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_stream_launch_empty(
    stream: *const sigretire_stream,
) -> sigretire_status {
    guard("sigretire_stream_launch_empty", || {
        // SAFETY: forwarded caller guarantee.
        let stream = unsafe { stream_ref(stream) }?;
        each!(AnyStream, &stream.queue, q => q.launch_empty().map(drop)).or_else(layer_failure)
    })
}

/// Submits a marker: no work, only a completion point after everything
/// submitted so far (a barrier packet on AQL queues; on CUDA the stream
/// memory operations alone, so it also covers work the runtime enqueued on
/// an adopted stream itself before this call). Errors as for
/// `sigretire_stream_launch`.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `stream` is a live stream.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_stream_marker(
    stream: *const sigretire_stream,
) -> sigretire_status {
    guard("sigretire_stream_marker", || {
        // SAFETY: forwarded caller guarantee.
        let stream = unsafe { stream_ref(stream) }?;
        each!(AnyStream, &stream.queue, q => q.submit(Work::Marker).map(drop))
            .or_else(layer_failure)
    })
}

/// Whether everything submitted to the stream so far completed
/// (`hipStreamQuery`), in `*status`: `SIGRETIRE_USE_PENDING`,
/// `SIGRETIRE_USE_COMPLETE`, or `SIGRETIRE_USE_FAILED` for a failed stream.
/// Never waits for the GPU: proven with at most one load, taking the
/// stream's lock briefly; a stream too busy to publish the marker a query
/// may need answers pending. Returns `SIGRETIRE_OK` whenever it answers;
/// a device in its error state answers `SIGRETIRE_ERR_DEVICE_ERROR` or
/// `_ABORTED`.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `stream` is a live stream; `status` points to a writable
/// `sigretire_use_status`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_stream_query(
    stream: *const sigretire_stream,
    status: *mut sigretire_use_status,
) -> sigretire_status {
    guard("sigretire_stream_query", || {
        let out = Out::new(status, "status")?;
        // SAFETY: forwarded caller guarantee.
        let stream = unsafe { stream_ref(stream) }?;
        let answer = match each!(AnyStream, &stream.queue, q => q.query()) {
            Ok(answer) => answer,
            Err(SyncError::QueueFailed { .. }) => Status::Failed,
            Err(error) => return layer_failure(error),
        };
        out.write(sigretire_use_status::from_rust(answer));
        Ok(())
    })
}

/// Waits until everything submitted to the stream so far completed
/// (`hipStreamSynchronize`), for at most the stream's `wait_timeout_ns`
/// (none by default), never holding the stream's lock while it waits for
/// the GPU. `SIGRETIRE_ERR_STREAM_FAILED` if the stream's work failed (now
/// or before), `SIGRETIRE_ERR_TIMED_OUT` past the stream's timeout,
/// `SIGRETIRE_ERR_DEVICE_ERROR` or `_ABORTED` on a device in its error
/// state.
///
/// Thread safety: any thread, concurrently (other threads keep launching).
///
/// # Safety
/// `stream` is a live stream.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_stream_synchronize(
    stream: *const sigretire_stream,
) -> sigretire_status {
    guard("sigretire_stream_synchronize", || {
        // SAFETY: forwarded caller guarantee.
        let stream = unsafe { stream_ref(stream) }?;
        each!(AnyStream, &stream.queue, q => q.synchronize()).or_else(layer_failure)
    })
}

/// As `sigretire_stream_synchronize`, but gives up after `timeout_ns`
/// nanoseconds (in place of the stream's `wait_timeout_ns`):
/// `SIGRETIRE_ERR_TIMED_OUT`, the work not completed yet (it may still;
/// nothing was reported complete). A zero timeout looks once.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `stream` is a live stream.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_stream_synchronize_timeout(
    stream: *const sigretire_stream,
    timeout_ns: u64,
) -> sigretire_status {
    guard("sigretire_stream_synchronize_timeout", || {
        // SAFETY: forwarded caller guarantee.
        let stream = unsafe { stream_ref(stream) }?;
        let timeout = Duration::from_nanos(timeout_ns);
        each!(AnyStream, &stream.queue, q => q.synchronize_timeout(timeout)).or_else(layer_failure)
    })
}

/// Makes the stream wait, on the GPU, for `event` (recorded on any stream
/// of the same backend whose signals this stream can read: any stream of
/// the same device, simulator, ROCr runtime or CUDA context):
/// `hipStreamWaitEvent`. Work launched on the stream after this runs after
/// the event's work. Publishes nothing when the event is already known
/// complete. `SIGRETIRE_ERR_STREAM_FAILED` (nothing published, this stream
/// not failed by the refusal) when the event's stream failed;
/// `SIGRETIRE_ERR_WRONG_BACKEND` for an event of another backend;
/// `SIGRETIRE_ERR_FOREIGN_SIGNAL_MEMORY` for one whose signals this
/// stream cannot read.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `stream` is a live stream, `event` a live event.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_stream_wait_event(
    stream: *const sigretire_stream,
    event: *const crate::objects::sigretire_event,
) -> sigretire_status {
    guard("sigretire_stream_wait_event", || {
        // SAFETY: forwarded caller guarantees.
        let stream = unsafe { stream_ref(stream) }?;
        // SAFETY: as above.
        let event = unsafe { event_ref(event) }?;
        let waited = match (&stream.queue, &event.event) {
            (AnyStream::Sim(q), AnyEvent::Sim(e)) => q.wait_event(e).map(drop),
            (AnyStream::Rocr(q), AnyEvent::Rocr(e)) => q.wait_event(e).map(drop),
            #[cfg(feature = "cuda-no-version")]
            (AnyStream::Cuda(q), AnyEvent::Cuda(e)) => q.wait_event(e).map(drop),
            (queue, event) => {
                return mixed_backends(
                    "a stream cannot wait for an event of another backend",
                    stream_backend(queue),
                    event_backend(event),
                );
            }
        };
        waited.or_else(layer_failure)
    })
}

/// Whether the stream failed (its work failed on the GPU, seen by a wait,
/// a query or an event): a failed stream stays failed and takes no more
/// work. Never waits.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `stream` is a live stream; `failed` points to a writable `bool`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_stream_has_failed(
    stream: *const sigretire_stream,
    failed: *mut bool,
) -> sigretire_status {
    guard("sigretire_stream_has_failed", || {
        let out = Out::new(failed, "failed")?;
        // SAFETY: forwarded caller guarantee.
        let stream = unsafe { stream_ref(stream) }?;
        out.write(each!(AnyStream, &stream.queue, q => q.has_failed()));
        Ok(())
    })
}

/// The stream's id, unique in the process (the id failure messages name);
/// every handle of one stream answers the same.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `stream` is a live stream; `id` points to a writable `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_stream_id(
    stream: *const sigretire_stream,
    id: *mut u64,
) -> sigretire_status {
    guard("sigretire_stream_id", || {
        let out = Out::new(id, "id")?;
        // SAFETY: forwarded caller guarantee.
        let stream = unsafe { stream_ref(stream) }?;
        out.write(each!(AnyStream, &stream.queue, q => q.id()));
        Ok(())
    })
}

/// Destroys the stream handle and sets `*stream` to NULL (a NULL `*stream`
/// is a no-op). Never waits for the GPU: work in flight runs on, and the
/// stream's events stay usable (each keeps what it needs of the stream).
/// The stream itself goes once no handle and no event of it is left (the
/// default stream lives as long as its device).
///
/// Thread safety: the last call on this handle.
///
/// # Safety
/// `stream` points to a variable holding NULL or a live stream handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_stream_destroy(
    stream: *mut *mut sigretire_stream,
) -> sigretire_status {
    guard("sigretire_stream_destroy", || {
        check_pointer(stream.cast_const(), "stream")?;
        // SAFETY: checked; the caller's variable.
        let handle = unsafe { *stream };
        if handle.is_null() {
            return Ok(());
        }
        // Out of the table first: of two calls destroying the same handle,
        // only the one that took it out frees it.
        registry::unregister(handle.cast_const(), Kind::Stream, "*stream")?;
        // SAFETY: a live handle from `into_raw` (the table said so), now
        // out of the table, used by nothing else (contract): freed once,
        // here; the caller's variable cleared.
        unsafe {
            *stream = std::ptr::null_mut();
            drop(Box::from_raw(handle));
        }
        Ok(())
    })
}
