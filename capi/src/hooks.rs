//! Backend hooks: a runtime that brings its own signal memory and queue
//! gives the tracker a table of C functions, which stand in for the
//! tracker's `SignalMemory` and `QueueView` traits.
//!
//! The library never touches the runtime's signal memory or queue itself:
//! every load, store, fence and flush goes through the runtime's hooks, so
//! the runtime decides how GPU memory is accessed (atomics, the right
//! fence instructions). The tracker still counts every call.

use crate::engine::CQueue;
use crate::status::*;
use crate::tracker::{Backend, build, give, require_backend, sigretire_tracker, tracker_ref};
use crate::types::*;
use ::sigretire_tracker::{
    Placement, TimestampClock, Timestamps, Work,
    backend::{AllocError, Publication, QueueView, SignalMemory},
};
use std::ffi::c_void;
use std::sync::Arc;

/// The functions and data of a runtime's own signal memory and queue.
/// Copied at creation. Required (non-NULL): `allocate`, `load`, `store`,
/// `store_fence`, `hdp_flush`, `read_index` and `queue_user`; `user` and
/// the other hooks may be NULL.
///
/// Every hook may be called from any thread, and several at once (a CPU
/// wait loads a signal while the tracker's owner stores another): they must
/// be thread-safe. Hooks must not call back into the library on the same
/// tracker, must not unwind (a C++ exception must not leave them), and
/// touch GPU memory only with atomic or volatile accesses.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct sigretire_hooks {
    /// `sizeof` this struct, set by the caller before every call that
    /// takes it (`SIGRETIRE_ERR_STRUCT_SIZE` otherwise).
    pub size: u32,
    /// Passed to every memory hook and to `release`.
    pub user: *mut c_void,
    /// Makes `count` new signals: writes their handles to `signals[0..count]`
    /// and the `sigretire_placement` each actually got to
    /// `placements[0..count]` (`placement` is a preference: fall back to host
    /// memory and say so). Returns 0 on success, anything else when out of
    /// memory (then nothing was made). A new signal may hold any value; the
    /// tracker arms it. A handle is the runtime's own (for instance an
    /// `amd_signal_t *`); signals stay valid until `release`.
    pub allocate: Option<
        unsafe extern "C" fn(
            user: *mut c_void,
            count: usize,
            placement: u32,
            signals: *mut u64,
            placements: *mut u32,
        ) -> i32,
    >,
    /// Loads a signal's value with acquire ordering.
    pub load: Option<unsafe extern "C" fn(user: *mut c_void, signal: u64) -> i64>,
    /// Stores a value with release ordering (for device memory: may stay
    /// write-combined until `store_fence`).
    pub store: Option<unsafe extern "C" fn(user: *mut c_void, signal: u64, value: i64)>,
    /// Optional: stores one value to `count` signals (a batched re-arm); NULL
    /// means `store` one by one.
    pub store_many: Option<
        unsafe extern "C" fn(user: *mut c_void, signals: *const u64, count: usize, value: i64),
    >,
    /// Orders every earlier store to device memory before later ones (x86
    /// `sfence`).
    pub store_fence: Option<unsafe extern "C" fn(user: *mut c_void)>,
    /// Makes fenced device-memory stores visible to readers that do not go
    /// through the BAR in order (an HDP flush).
    pub hdp_flush: Option<unsafe extern "C" fn(user: *mut c_void)>,
    /// Optional: reads the start and end timestamps the packet processor
    /// wrote for the signal's latest use into `*start` and `*end`; returns
    /// nonzero if there are any. NULL: no use is ever stamped.
    pub timestamps: Option<
        unsafe extern "C" fn(user: *mut c_void, signal: u64, start: *mut u64, end: *mut u64) -> i32,
    >,
    /// Optional: the value a packet's `completion_signal` field takes for a
    /// signal (never 0). NULL: the handle itself.
    pub packet_handle: Option<unsafe extern "C" fn(user: *mut c_void, signal: u64) -> u64>,
    /// Optional: called once, with `user`, when nothing uses the memory any
    /// more (the tracker and every hold and pin of it are gone): free the
    /// signals then.
    pub release: Option<unsafe extern "C" fn(user: *mut c_void)>,
    /// Ticks per second of the timestamps (0: nanoseconds).
    pub timestamp_frequency: u64,
    /// Names the hardware queue to the queue hooks, which get it with every
    /// call (`sigretire_hooks_note_queue_change` gives the new queue's).
    /// Must not be NULL (`SIGRETIRE_ERR_NULL`).
    pub queue_user: *mut c_void,
    /// The packet processor's read index (acquire load): which packets were
    /// consumed. The tracker uses it only to nominate a fence, whose signal
    /// one load then confirms.
    pub read_index: Option<unsafe extern "C" fn(queue_user: *mut c_void) -> u64>,
    /// Optional: a `sigretire_placement` for where the queue's packet ring
    /// lives (device memory: no HDP flush is needed before publishing).
    /// NULL, or an unknown value: host memory, which is always safe.
    pub ring_placement: Option<unsafe extern "C" fn(queue_user: *mut c_void) -> u32>,
}

sized_structs!(sigretire_hooks);
caller_filled!(sigretire_hooks);

type AllocateHook = unsafe extern "C" fn(*mut c_void, usize, u32, *mut u64, *mut u32) -> i32;
type LoadHook = unsafe extern "C" fn(*mut c_void, u64) -> i64;
type StoreHook = unsafe extern "C" fn(*mut c_void, u64, i64);
type VoidHook = unsafe extern "C" fn(*mut c_void);
type ReadIndexHook = unsafe extern "C" fn(*mut c_void) -> u64;

/// Signal memory through the runtime's hooks.
#[derive(Debug)]
pub(crate) struct HookMemory {
    user: *mut c_void,
    allocate: AllocateHook,
    load: LoadHook,
    store: StoreHook,
    store_many: Option<unsafe extern "C" fn(*mut c_void, *const u64, usize, i64)>,
    store_fence: VoidHook,
    hdp_flush: VoidHook,
    timestamps: Option<unsafe extern "C" fn(*mut c_void, u64, *mut u64, *mut u64) -> i32>,
    packet_handle: Option<unsafe extern "C" fn(*mut c_void, u64) -> u64>,
    release: Option<VoidHook>,
    clock: TimestampClock,
}

// SAFETY: the hooks' contract (sigretire_hooks' documentation) is that
// every hook may be called from any thread, concurrently; `user` is only
// ever passed back to them.
unsafe impl Send for HookMemory {}
// SAFETY: as above.
unsafe impl Sync for HookMemory {}

impl Drop for HookMemory {
    fn drop(&mut self) {
        if let Some(release) = self.release {
            // SAFETY: the runtime's hook, called once, when nothing can
            // touch a signal of this memory any more (the tracker keeps the
            // memory in an `Arc` for as long as it or anything it handed
            // out may).
            unsafe { release(self.user) }
        }
    }
}

impl SignalMemory for HookMemory {
    type Signal = u64;

    fn allocate(
        &self,
        count: usize,
        placement: Placement,
        out: &mut Vec<(u64, Placement)>,
    ) -> Result<(), AllocError> {
        let mut signals = vec![0u64; count];
        let mut placements = vec![u32::MAX; count];
        let asked = sigretire_placement::from_rust(placement) as u32;
        // SAFETY: the runtime's hook, given arrays of `count` elements each.
        let status = unsafe {
            (self.allocate)(
                self.user,
                count,
                asked,
                signals.as_mut_ptr(),
                placements.as_mut_ptr(),
            )
        };
        if status != 0 {
            return Err(AllocError::OutOfMemory(format!(
                "the allocate hook returned {status} for {count} signal(s)"
            )));
        }
        for (signal, got) in signals.into_iter().zip(placements) {
            let got = match got {
                0 => Placement::Host,
                1 => Placement::Device,
                // A broken hook: the signal is still the runtime's, but the
                // tracker cannot know what a load of it costs. Refuse.
                other => {
                    return Err(AllocError::OutOfMemory(format!(
                        "the allocate hook reported placement {other} (not a sigretire_placement)"
                    )));
                }
            };
            out.push((signal, got));
        }
        Ok(())
    }

    unsafe fn load(&self, signal: u64) -> i64 {
        // SAFETY: the runtime's hook, on a signal its `allocate` made (the
        // trait's contract).
        unsafe { (self.load)(self.user, signal) }
    }

    unsafe fn store(&self, signal: u64, value: i64) {
        // SAFETY: as for `load`.
        unsafe { (self.store)(self.user, signal, value) }
    }

    unsafe fn store_many(&self, signals: &[u64], value: i64) {
        match self.store_many {
            // SAFETY: as for `load`; the array holds `signals.len()` handles.
            Some(many) => unsafe { many(self.user, signals.as_ptr(), signals.len(), value) },
            None => {
                for &signal in signals {
                    // SAFETY: as for `load`.
                    unsafe { (self.store)(self.user, signal, value) }
                }
            }
        }
    }

    fn store_fence(&self) {
        // SAFETY: the runtime's hook.
        unsafe { (self.store_fence)(self.user) }
    }

    fn hdp_flush(&self) {
        // SAFETY: the runtime's hook.
        unsafe { (self.hdp_flush)(self.user) }
    }

    unsafe fn timestamps(&self, signal: u64) -> Option<Timestamps> {
        let hook = self.timestamps?;
        let (mut start, mut end) = (0u64, 0u64);
        // SAFETY: the runtime's hook, on one of its signals, with two
        // writable words.
        let stamped = unsafe { hook(self.user, signal, &raw mut start, &raw mut end) };
        (stamped != 0).then_some(Timestamps { start, end })
    }

    fn timestamp_clock(&self) -> TimestampClock {
        self.clock
    }

    fn packet_handle(&self, signal: u64) -> u64 {
        match self.packet_handle {
            // SAFETY: the runtime's hook, on one of its signals.
            Some(hook) => unsafe { hook(self.user, signal) },
            None => signal,
        }
    }

    fn shares_signals_with(&self, other: &Self) -> bool {
        self.user == other.user && self.load as usize == other.load as usize
    }
}

/// The runtime's queue, through its hooks.
#[derive(Debug)]
pub(crate) struct HookQueue {
    user: *mut c_void,
    read_index: ReadIndexHook,
    ring_placement: Option<unsafe extern "C" fn(*mut c_void) -> u32>,
}

// SAFETY: the hooks' contract: callable from any thread; `user` is only
// passed back to them.
unsafe impl Send for HookQueue {}

impl QueueView for HookQueue {
    fn read_index(&self) -> u64 {
        // SAFETY: the runtime's hook.
        unsafe { (self.read_index)(self.user) }
    }

    fn ring_in_device_memory(&self) -> bool {
        match self.ring_placement {
            // SAFETY: the runtime's hook.
            Some(hook) => (unsafe { hook(self.user) }) == SIGRETIRE_PLACEMENT_DEVICE as u32,
            None => false,
        }
    }
}

impl CQueue for HookQueue {
    fn reserve_slot(&self) -> Outcome<u64> {
        unsupported()
    }

    fn publish_work(&self, _: Publication, _: Work<'_>) -> Outcome {
        unsupported()
    }

    fn may_move_to(&self, _: &Self) -> bool {
        true
    }
}

/// Calls a `release` hook when dropped, unless disarmed: so a creation
/// that fails half-way still gives the runtime its memory back.
struct ReleaseOnDrop(Option<VoidHook>, *mut c_void);

impl ReleaseOnDrop {
    fn disarm(mut self) -> Option<VoidHook> {
        self.0.take()
    }
}

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        if let Some(release) = self.0.take() {
            // SAFETY: the runtime's hook, called once with its `user`; no
            // signal of it was handed to any tracker.
            unsafe { release(self.1) }
        }
    }
}

fn unsupported<T>() -> Outcome<T> {
    fail(
        SIGRETIRE_ERR_UNSUPPORTED,
        "a hooks tracker's queue is the runtime's own: reserve and write its packets yourself \
         (sigretire_acquired's completion_signal and header)",
    )
}

fn required<T>(hook: Option<T>, name: &str) -> Outcome<T> {
    match hook {
        Some(hook) => Ok(hook),
        None => fail(SIGRETIRE_ERR_NULL, format!("hooks `{name}` is NULL")),
    }
}

/// Creates a tracker over the runtime's own signal memory and queue, as
/// `hooks` describes them (copied; `config` may be NULL: the defaults).
/// The tracker allocates and arms `config.initial_size` signals through the
/// hooks before this returns. It publishes nothing itself
/// (`sigretire_tracker_submit`, `_publish` and `_reserve` answer
/// `SIGRETIRE_ERR_UNSUPPORTED`): write each packet with the acquired
/// `completion_signal` and `header`. The library owns `hooks->user` from
/// this call on: on any failure but a NULL `hooks` or `tracker`,
/// `hooks->release` (if set) has been called before this returns.
///
/// Thread safety: any thread.
///
/// # Safety
/// `hooks` points to a readable `sigretire_hooks` whose non-NULL function
/// pointers are functions of the documented signatures, callable as its
/// documentation says for as long as the tracker or any hold or pin of it
/// lives; `config` is NULL or readable; `tracker` points to a writable
/// handle variable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_hooks_tracker_create(
    hooks: *const sigretire_hooks,
    config: *const sigretire_config,
    tracker: *mut *mut sigretire_tracker,
) -> sigretire_status {
    guard("sigretire_hooks_tracker_create", || {
        let out = Out::new(tracker, "tracker")?;
        // SAFETY: forwarded caller guarantees.
        let hooks = unsafe { read_struct(hooks, "hooks") }?;
        // From here on the library owns `user`: any failure releases it.
        let release = ReleaseOnDrop(hooks.release, hooks.user);
        // SAFETY: as above.
        let config =
            unsafe { read_optional_struct(config, "config", sigretire_config::default_values) }?;
        let settings = config.to_rust()?;
        let memory = HookMemory {
            user: hooks.user,
            allocate: required(hooks.allocate, "allocate")?,
            load: required(hooks.load, "load")?,
            store: required(hooks.store, "store")?,
            store_many: hooks.store_many,
            store_fence: required(hooks.store_fence, "store_fence")?,
            hdp_flush: required(hooks.hdp_flush, "hdp_flush")?,
            timestamps: hooks.timestamps,
            packet_handle: hooks.packet_handle,
            release: release.disarm(),
            clock: TimestampClock::from_frequency(hooks.timestamp_frequency)
                .unwrap_or(TimestampClock::NANOSECONDS),
        };
        if hooks.queue_user.is_null() {
            return fail(
                SIGRETIRE_ERR_NULL,
                "hooks `queue_user` is NULL: it names the queue to the queue hooks",
            );
        }
        let queue = HookQueue {
            user: hooks.queue_user,
            read_index: required(hooks.read_index, "read_index")?,
            ring_placement: hooks.ring_placement,
        };
        give(
            out,
            build(Arc::new(memory), queue, settings, Backend::Hooks)?,
        );
        Ok(())
    })
}

/// The runtime moved the stream to another hardware queue: a new
/// generation begins, and the queue hooks get `queue_user` from now on.
/// Write the packets of every use acquired before the change on the old
/// queue, where their indices were reserved, before calling this.
/// `queue_user` names the new queue and must not be NULL
/// (`SIGRETIRE_ERR_NULL`, nothing changed), as at creation.
///
/// Thread safety: takes the tracker's lock.
///
/// # Safety
/// `tracker` is a live hooks tracker; `queue_user` is what its queue hooks
/// accept.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_hooks_note_queue_change(
    tracker: *mut sigretire_tracker,
    queue_user: *mut c_void,
) -> sigretire_status {
    guard("sigretire_hooks_note_queue_change", || {
        if queue_user.is_null() {
            return fail(
                SIGRETIRE_ERR_NULL,
                "`queue_user` is NULL: it names the new queue to the queue hooks",
            );
        }
        // SAFETY: forwarded caller guarantee.
        let tracker = unsafe { tracker_ref(tracker) }?;
        require_backend(tracker, "hooks", |b| b == Backend::Hooks)?;
        tracker.with_core(|core| {
            let Some(current) = core.queue().downcast_ref::<HookQueue>() else {
                return fail(SIGRETIRE_ERR_WRONG_BACKEND, "not a hooks tracker");
            };
            let queue = HookQueue {
                user: queue_user,
                read_index: current.read_index,
                ring_placement: current.ring_placement,
            };
            core.note_queue_change(Box::new(queue))
        })
    })
}
