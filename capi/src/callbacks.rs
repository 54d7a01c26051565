//! Completion callbacks and deferred release, from C: a C function run
//! once a stream's or an event's work completed or failed
//! (`sigretire_stream_on_complete`, `sigretire_event_on_complete`), one
//! called once everything submitted to a stream so far retired
//! (`sigretire_stream_release_after`), and what a device's callbacks did
//! (`sigretire_device_callback_stats`).
//!
//! Why a module of its own: the queue layer takes Rust closures and values
//! (`Event::on_complete`, `HostQueue::on_complete`,
//! `HostQueue::release_after_all`); a C runtime has a function pointer and
//! a `void *`. This module owns that translation, and the one argument that
//! it is sound: the pointer is the caller's, passed back untouched, never
//! read here, and the caller's contract lets its function run on a thread
//! of the library's. The handles' functions (`stream.rs`, `event.rs`,
//! `device.rs`) know nothing of it.

use crate::layer::{each, layer_failure};
use crate::objects::{
    device_ref, event_ref, sigretire_device, sigretire_event, sigretire_stream, stream_ref,
};
use crate::status::*;
use crate::types::*;
use ::sigretire_queue::{CallbackStats, CommandStatus};
use std::ffi::c_void;

/// How the work a completion callback waited for ended.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum sigretire_completion {
    /// The work completed.
    SIGRETIRE_COMPLETION_COMPLETE = 1,
    /// The work failed (its stream failed: a queue error); it never
    /// completes.
    SIGRETIRE_COMPLETION_FAILED = 2,
    /// The device entered its error state before the work was seen
    /// complete (`sigretire_device_set_error`): the GPU may still run it.
    SIGRETIRE_COMPLETION_DEVICE_ERROR = 3,
    /// The stream was torn down before its work was ever seen done:
    /// nothing is known of the work.
    SIGRETIRE_COMPLETION_CANCELLED = 4,
}

pub use sigretire_completion::*;

impl sigretire_completion {
    /// The queue layer's outcome in C (`Pending` is what a cancelled
    /// callback runs with).
    pub(crate) fn from_rust(status: CommandStatus) -> Self {
        match status {
            CommandStatus::Complete => SIGRETIRE_COMPLETION_COMPLETE,
            CommandStatus::Failed => SIGRETIRE_COMPLETION_FAILED,
            CommandStatus::DeviceError => SIGRETIRE_COMPLETION_DEVICE_ERROR,
            CommandStatus::Pending => SIGRETIRE_COMPLETION_CANCELLED,
        }
    }
}

/// Called once, with how the work ended and the `user` pointer given with
/// it (untouched), on the device's callback thread: never on the thread
/// that registered it, one that waits, or inside the GPU stream (nothing
/// is enqueued on the GPU for it). Callbacks of one device run one at a
/// time, those of one stream in the order of their stream positions.
///
/// It may call the library (launch, query, record, destroy handles; a
/// destroy of a device's last handle there does not wait for this
/// thread), but should be short and must not wait for another callback
/// of the same device (they run after it returns). It must return
/// normally: no `longjmp` out of it, no C++ exception through it (the
/// library cannot unwind it; the process may abort).
pub type sigretire_completion_callback =
    Option<unsafe extern "C" fn(outcome: sigretire_completion, user: *mut c_void)>;

/// Called once, with the `user` pointer given with it (untouched), when
/// the work it was released after has retired
/// (`sigretire_stream_release_after`): the runtime may reuse or free what
/// that work read (kernel arguments, a staging block) from then on. It
/// runs on whichever thread proved the retirement (usually the device's
/// completion thread; the registering thread when already proven, before
/// the registration returns), so it must be short (return a block to a
/// free list), must not call the library on the stream it was released on
/// (it may run where that stream's work is being completed), and must
/// return normally (no `longjmp`, no C++ exception).
pub type sigretire_retired_callback = Option<unsafe extern "C" fn(user: *mut c_void)>;

/// What a device's completion callbacks did so far
/// (`sigretire_device_callback_stats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct sigretire_callback_stats {
    /// `sizeof` this struct, set by the caller before every call that
    /// takes it (`SIGRETIRE_ERR_STRUCT_SIZE` otherwise).
    pub size: u32,
    /// Callbacks that ran.
    pub run: u64,
    /// Of those, callbacks that ran with `SIGRETIRE_COMPLETION_CANCELLED`.
    pub cancelled: u64,
}

impl Default for sigretire_callback_stats {
    fn default() -> Self {
        Self {
            size: size_of::<Self>() as u32,
            run: 0,
            cancelled: 0,
        }
    }
}

sized_structs!(sigretire_callback_stats);

impl sigretire_callback_stats {
    fn from_rust(stats: CallbackStats) -> Self {
        Self {
            run: stats.run,
            cancelled: stats.cancelled,
            ..Self::default()
        }
    }
}

/// A C completion callback with its user pointer, run once.
struct Completion {
    callback: unsafe extern "C" fn(sigretire_completion, *mut c_void),
    user: *mut c_void,
}

// SAFETY: `user` is the caller's pointer, never dereferenced here, only
// handed back to the caller's own function; the contract of
// `sigretire_completion_callback` (documented on every registration) is
// that the function runs on a thread of the library's, so moving the
// pair to that thread is what the caller agreed to.
unsafe impl Send for Completion {}

impl Completion {
    /// The callback `callback` with `user`, or `SIGRETIRE_ERR_NULL`.
    fn new(callback: sigretire_completion_callback, user: *mut c_void) -> Outcome<Self> {
        match callback {
            Some(callback) => Ok(Self { callback, user }),
            None => fail(SIGRETIRE_ERR_NULL, "`callback` is NULL"),
        }
    }

    /// Runs the callback (by value: once).
    fn run(self, status: CommandStatus) {
        // SAFETY: the caller's function with its own user pointer, called
        // once, on the callback thread, as its contract says.
        unsafe { (self.callback)(sigretire_completion::from_rust(status), self.user) }
    }
}

/// A value whose drop calls a C retired callback: what the queue layer
/// holds until its work retired.
struct Retired {
    callback: unsafe extern "C" fn(*mut c_void),
    user: *mut c_void,
}

// SAFETY: as for `Completion`: the pointer is never dereferenced here, and
// `sigretire_retired_callback`'s contract lets it run on any thread.
unsafe impl Send for Retired {}

impl Drop for Retired {
    fn drop(&mut self) {
        // SAFETY: the caller's function with its own user pointer, called
        // once (this drop), as its contract says.
        unsafe { (self.callback)(self.user) }
    }
}

/// Runs `callback(outcome, user)` once everything submitted to `stream`
/// so far completed or failed (the position `sigretire_stream_synchronize`
/// would wait for): on the device's callback thread, after the callbacks
/// of earlier positions of the stream (see
/// `sigretire_completion_callback`); at once, on that thread, when that
/// work is already known done. Registering never waits and enqueues
/// nothing on the GPU (it may publish a marker, as a query does, when the
/// newest work has no completion point of its own).
///
/// Teardown: destroying the stream's and the device's handles drops no
/// callback: they run as the work completes (the library keeps the stream
/// while its work is in flight). Work that never completes keeps its
/// callbacks waiting; a device put in its error state
/// (`sigretire_device_set_error`) runs them with
/// `SIGRETIRE_COMPLETION_DEVICE_ERROR`. A stream torn down without its
/// work ever seen done runs them with `SIGRETIRE_COMPLETION_CANCELLED`.
///
/// ```c
/// static void done(sigretire_completion outcome, void *user) {
///     notify_runtime(user, outcome == SIGRETIRE_COMPLETION_COMPLETE);
/// }
///
/// sigretire_stream_launch(stream, kernel);
/// sigretire_stream_on_complete(stream, done, request);
/// ```
///
/// `SIGRETIRE_ERR_NULL` for a NULL `callback`;
/// `SIGRETIRE_ERR_STREAM_FAILED` for a stream already failed,
/// `SIGRETIRE_ERR_DEVICE_ABORTED` on an aborting device: nothing is
/// registered and `callback` is never called.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `stream` is a live stream; `callback` keeps the contract of
/// `sigretire_completion_callback`; `user` is anything the callback
/// accepts (the library never reads it) and stays valid until it is
/// called.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_stream_on_complete(
    stream: *const sigretire_stream,
    callback: sigretire_completion_callback,
    user: *mut c_void,
) -> sigretire_status {
    guard("sigretire_stream_on_complete", || {
        let completion = Completion::new(callback, user)?;
        // SAFETY: forwarded caller guarantee.
        let stream = unsafe { stream_ref(stream) }?;
        each!(AnyStream, &stream.queue, q => q.on_complete(move |s| completion.run(s)))
            .or_else(layer_failure)
    })
}

/// Runs `callback(outcome, user)` once the event's work completed or
/// failed, as `sigretire_stream_on_complete` does for a stream (its
/// stream's order, the device's callback thread, the same teardown). An
/// event of a stream that already failed runs it with
/// `SIGRETIRE_COMPLETION_FAILED`. The event handle may be destroyed
/// before it runs.
///
/// `SIGRETIRE_ERR_NULL` for a NULL `callback`: nothing is registered.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `event` is a live event; `callback` and `user` as for
/// `sigretire_stream_on_complete`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_event_on_complete(
    event: *const sigretire_event,
    callback: sigretire_completion_callback,
    user: *mut c_void,
) -> sigretire_status {
    guard("sigretire_event_on_complete", || {
        let completion = Completion::new(callback, user)?;
        // SAFETY: forwarded caller guarantee.
        let event = unsafe { event_ref(event) }?;
        each!(AnyEvent, &event.event, e => e.on_complete(move |s| completion.run(s)));
        Ok(())
    })
}

/// Deferred release: calls `callback(user)` once everything submitted to
/// `stream` so far is proven retired, so a runtime frees or reuses what
/// that work reads (kernel arguments, staging blocks) by the library's
/// retirement proof instead of an event per block. At once, on this
/// thread, before returning, when nothing was submitted or everything is
/// already known done.
///
/// It costs no signal read: registering reads host memory only, and the
/// proof that retires a batch of the stream (one load of its fence, or
/// none) calls every release waiting on it, in the order they were
/// registered. A release never closes a batch by itself: it is called once
/// the batch completes (its size limit, a synchronize, an event
/// synchronize, or a completion callback on a later position), so a
/// runtime that only releases should synchronize or register a callback
/// now and then. Failed work releases too (nothing of it still runs).
/// Releases of work the device error state released are kept until the
/// stream is torn down; any still held then are called at teardown (the
/// library lets go of them; nothing proves the GPU is done).
///
/// ```c
/// static void free_block(void *block) { staging_free(block); }
///
/// memcpy(block, arguments, size);
/// sigretire_stream_launch(stream, kernel);        // reads `block`
/// sigretire_stream_release_after(stream, free_block, block);
/// ```
///
/// `SIGRETIRE_ERR_NULL` for a NULL `callback`: nothing is registered.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `stream` is a live stream; `callback` keeps the contract of
/// `sigretire_retired_callback`; `user` is anything the callback accepts
/// (the library never reads it) and stays valid until it is called.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_stream_release_after(
    stream: *const sigretire_stream,
    callback: sigretire_retired_callback,
    user: *mut c_void,
) -> sigretire_status {
    guard("sigretire_stream_release_after", || {
        let Some(callback) = callback else {
            return fail(SIGRETIRE_ERR_NULL, "`callback` is NULL");
        };
        // SAFETY: forwarded caller guarantee.
        let stream = unsafe { stream_ref(stream) }?;
        let retired = Retired { callback, user };
        each!(AnyStream, &stream.queue, q => q.release_after_all(retired));
        Ok(())
    })
}

/// What the device's completion callbacks did so far: how many ran and
/// how many of those were cancelled (the counts of every stream of the
/// device). Never waits.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `device` is a live device; `stats` points to a writable
/// `sigretire_callback_stats` whose `size` is set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_device_callback_stats(
    device: *const sigretire_device,
    stats: *mut sigretire_callback_stats,
) -> sigretire_status {
    guard("sigretire_device_callback_stats", || {
        // SAFETY: forwarded caller guarantee.
        let out = unsafe { StructOut::new(stats, "stats") }?;
        // SAFETY: forwarded caller guarantee.
        let device = unsafe { device_ref(device) }?;
        out.write(sigretire_callback_stats::from_rust(
            each!(AnyDevice, &device.parts.device, d => d.callback_stats()),
        ));
        Ok(())
    })
}
