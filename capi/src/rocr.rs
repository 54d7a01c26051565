//! The ROCr backend: ROCr loaded at run time, and a tracker over an
//! `hsa_queue_t` the C runtime created and keeps owning.

use crate::engine::{CQueue, queue_failure};
use crate::registry::{self, Kind};
use crate::status::*;
use crate::tracker::{Backend, build, give, require_backend, sigretire_tracker, tracker_ref};
use crate::types::*;
use ::sigretire_tracker::Work;
use ::sigretire_tracker::backend::{HardwareQueue, Publication};
use sigretire_hsa::{AdoptOptions, Agent, AqlQueue, Error, Runtime, SignalPool};
use std::ffi::{CStr, c_char, c_void};
use std::sync::Arc;

impl CQueue for AqlQueue {
    fn reserve_slot(&self) -> Outcome<u64> {
        HardwareQueue::reserve(self).or_else(queue_failure)
    }

    fn publish_work(&self, publication: Publication, work: Work<'_>) -> Outcome {
        HardwareQueue::publish(self, publication, work).or_else(queue_failure)
    }

    fn may_move_to(&self, other: &Self) -> bool {
        Arc::ptr_eq(self.device().runtime(), other.device().runtime())
            && self.device().agent() == other.device().agent()
    }
}

/// A ROCr error as a status.
pub(crate) fn rocr_failure<T>(error: Error) -> Outcome<T> {
    let status = match &error {
        Error::Load(_) => SIGRETIRE_ERR_LOAD,
        Error::InitFailed(_) | Error::NoGpu | Error::NoSuchGpu { .. } => SIGRETIRE_ERR_NO_GPU,
        Error::InvalidQueue(_) | Error::InvalidQueueSize { .. } => SIGRETIRE_ERR_INVALID_ARGUMENT,
        Error::QueueFailed(_) => SIGRETIRE_ERR_QUEUE_FAILED,
        Error::TimedOut(_) => SIGRETIRE_ERR_TIMED_OUT,
        _ => SIGRETIRE_ERR_BACKEND,
    };
    fail(status, error.to_string())
}

/// ROCr, loaded and initialised (opaque). Made by `sigretire_rocr_open`,
/// closed by `sigretire_rocr_close`; trackers made from it keep ROCr
/// initialised until they are destroyed too (`hsa_shut_down` runs when the
/// last user goes).
///
/// Thread safety: any function on it from any thread, concurrently, except
/// `sigretire_rocr_close` (the last call).
pub struct sigretire_rocr {
    runtime: Arc<Runtime>,
}

impl sigretire_rocr {
    /// The loaded, initialised ROCr.
    pub(crate) fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }
}

/// The adopt options at `options` (NULL: the defaults), checked.
///
/// # Safety
/// `options` is NULL or points to a readable `sigretire_rocr_adopt_options`
/// whose size field the caller set.
pub(crate) unsafe fn read_adopt_options(
    options: *const sigretire_rocr_adopt_options,
) -> Outcome<AdoptOptions> {
    // SAFETY: forwarded caller guarantee.
    unsafe { read_optional_struct(options, "options", sigretire_rocr_adopt_options::default) }?
        .to_rust()
}

/// The runtime behind `ptr`, checked.
///
/// # Safety
/// A `sigretire_rocr` handle in the table of live handles is a live ROCr
/// handle, not closed while the call runs (the caller's contract).
pub(crate) unsafe fn rocr_ref<'a>(ptr: *const sigretire_rocr) -> Outcome<&'a sigretire_rocr> {
    registry::check(ptr, Kind::Rocr, "rocr")?;
    // SAFETY: a live handle (the table says so; nothing of `ptr` was read
    // before it did), not destroyed while this call runs (contract).
    Ok(unsafe { &*ptr })
}

/// `sigretire_rocr_adopt_options.flags`: enable profiling on the queue
/// (`hsa_amd_profiling_set_profiler_enabled`; harmless if the runtime did),
/// so uses may be timed.
pub const SIGRETIRE_ROCR_PROFILING: u32 = 1;
/// `sigretire_rocr_adopt_options.flags`: the ring is in VRAM (the runtime
/// configured ROCr so): publication then needs no HDP flush. Leaving it
/// clear is always safe.
pub const SIGRETIRE_ROCR_RING_IN_DEVICE_MEMORY: u32 = 2;

/// How a tracker takes over the runtime's queue.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct sigretire_rocr_adopt_options {
    /// `sizeof` this struct, set by the caller before every call that
    /// takes it (`SIGRETIRE_ERR_STRUCT_SIZE` otherwise): `sigretire_rocr_adopt_options_default` needs it too.
    pub size: u32,
    /// `SIGRETIRE_ROCR_*` bits (default: profiling).
    pub flags: u32,
    /// How long destroying the tracker waits for the packets it published
    /// to finish, nanoseconds (default 1 s; the queue itself is never
    /// destroyed: it stays the runtime's).
    pub drain_timeout_ns: u64,
}

impl Default for sigretire_rocr_adopt_options {
    fn default() -> Self {
        Self {
            size: size_of::<Self>() as u32,
            flags: SIGRETIRE_ROCR_PROFILING,
            drain_timeout_ns: 1_000_000_000,
        }
    }
}

sized_structs!(sigretire_rocr_adopt_options);
caller_filled!(sigretire_rocr_adopt_options);

impl sigretire_rocr_adopt_options {
    fn to_rust(self) -> Outcome<AdoptOptions> {
        if self.flags & !(SIGRETIRE_ROCR_PROFILING | SIGRETIRE_ROCR_RING_IN_DEVICE_MEMORY) != 0 {
            return fail(
                SIGRETIRE_ERR_INVALID_ARGUMENT,
                format!("adopt flags {:#x} has unknown bits", self.flags),
            );
        }
        Ok(AdoptOptions {
            profiling: self.flags & SIGRETIRE_ROCR_PROFILING != 0,
            ring_in_device_memory: self.flags & SIGRETIRE_ROCR_RING_IN_DEVICE_MEMORY != 0,
            drain_timeout: nanos(self.drain_timeout_ns),
        })
    }
}

/// The default adopt options: profiling, ring assumed in system memory,
/// 1 s drain.
///
/// Thread safety: any thread.
///
/// # Safety
/// `options` points to a writable `sigretire_rocr_adopt_options`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_rocr_adopt_options_default(
    options: *mut sigretire_rocr_adopt_options,
) -> sigretire_status {
    guard("sigretire_rocr_adopt_options_default", || {
        // SAFETY: forwarded caller guarantee.
        unsafe { StructOut::new(options, "options") }?
            .write(sigretire_rocr_adopt_options::default());
        Ok(())
    })
}

/// Loads ROCr and initialises it (`hsa_init`, bounded by a deadline):
/// `library` is a path or a name for the dynamic loader, or NULL for
/// `libhsa-runtime64.so.1` (or what the environment variable
/// `SIGRETIRE_HSA_LIBRARY` names). Loading the same library the runtime
/// uses shares its ROCr instance (`hsa_init` is reference-counted).
///
/// On a machine without ROCm: `SIGRETIRE_ERR_LOAD`; with ROCm but no GPU
/// it can use: `SIGRETIRE_ERR_NO_GPU`. Never hangs or aborts.
///
/// Thread safety: any thread.
///
/// # Safety
/// `library` is NULL or a NUL-terminated string; `rocr` points to a
/// writable handle variable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_rocr_open(
    library: *const c_char,
    rocr: *mut *mut sigretire_rocr,
) -> sigretire_status {
    guard("sigretire_rocr_open", || {
        let out = Out::new(rocr, "rocr")?;
        let runtime = if library.is_null() {
            Runtime::load()
        } else {
            // SAFETY: non-null and NUL-terminated by the caller's contract.
            let name = unsafe { CStr::from_ptr(library) };
            Runtime::load_from(path_of(name)?)
        };
        let runtime = runtime.or_else(rocr_failure)?;
        let handle = Box::into_raw(Box::new(sigretire_rocr { runtime }));
        registry::register(handle, Kind::Rocr);
        out.write(handle);
        Ok(())
    })
}

#[cfg(unix)]
fn path_of(name: &CStr) -> Outcome<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    Ok(std::ffi::OsStr::from_bytes(name.to_bytes()).into())
}

#[cfg(not(unix))]
fn path_of(name: &CStr) -> Outcome<std::path::PathBuf> {
    match name.to_str() {
        Ok(text) => Ok(text.into()),
        Err(_) => fail(SIGRETIRE_ERR_INVALID_ARGUMENT, "`library` is not UTF-8"),
    }
}

/// Lets go of ROCr (it shuts down once no tracker uses it either) and sets
/// `*rocr` to NULL; a NULL `*rocr` is a no-op.
///
/// Thread safety: the last call on this handle.
///
/// # Safety
/// `rocr` points to a variable holding NULL or a live ROCr handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_rocr_close(rocr: *mut *mut sigretire_rocr) -> sigretire_status {
    guard("sigretire_rocr_close", || {
        check_pointer(rocr.cast_const(), "rocr")?;
        // SAFETY: checked; the caller's variable.
        let handle = unsafe { *rocr };
        if handle.is_null() {
            return Ok(());
        }
        // Out of the table first: of two calls closing the same handle,
        // only the one that took it out frees it.
        registry::unregister(handle.cast_const(), Kind::Rocr, "*rocr")?;
        // SAFETY: a live handle from `Box::into_raw` (the table said so),
        // now out of the table, used by nothing else (contract): freed
        // once, here; the caller's variable cleared.
        unsafe {
            *rocr = std::ptr::null_mut();
            drop(Box::from_raw(handle));
        }
        Ok(())
    })
}

/// How many GPU agents that run kernel dispatches ROCr reports (numbered
/// from 0 in ROCr's order).
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `rocr` is a live ROCr handle; `count` points to a writable `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_rocr_gpu_count(
    rocr: *const sigretire_rocr,
    count: *mut usize,
) -> sigretire_status {
    guard("sigretire_rocr_gpu_count", || {
        let out = Out::new(count, "count")?;
        // SAFETY: forwarded caller guarantee.
        let rocr = unsafe { rocr_ref(rocr) }?;
        out.write(rocr.runtime.gpu_agents().len());
        Ok(())
    })
}

/// Creates a tracker over `queue`, an `hsa_queue_t *` the runtime made on
/// GPU `gpu` with `hsa_queue_create` and keeps owning: the tracker's
/// signals come from that GPU (VRAM batches where the host can map them,
/// else system memory), and the tracker and the runtime publish side by
/// side on the queue (the runtime reserves slots atomically, as ROCr's
/// `hsa_queue_add_write_index_*` do). Destroying the tracker drains what it
/// published (up to `drain_timeout_ns`) but never destroys the queue.
/// ROCr reports the queue's errors to the runtime's callback: forward them
/// with `sigretire_rocr_report_queue_error`. `options` and `config` may be
/// NULL (the defaults).
///
/// Thread safety: any thread.
///
/// # Safety
/// `rocr` is a live ROCr handle of the same library the runtime loaded;
/// `queue` is a live queue of GPU `gpu` made by that runtime, not destroyed
/// until the tracker (and every hold and pin of it) is gone; every slot a
/// producer reserves on it is published. `options` and `config` are NULL
/// or readable; `tracker` points to a writable handle variable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_rocr_tracker_adopt(
    rocr: *const sigretire_rocr,
    gpu: usize,
    queue: *mut c_void,
    options: *const sigretire_rocr_adopt_options,
    config: *const sigretire_config,
    tracker: *mut *mut sigretire_tracker,
) -> sigretire_status {
    guard("sigretire_rocr_tracker_adopt", || {
        let out = Out::new(tracker, "tracker")?;
        if queue.is_null() {
            return fail(SIGRETIRE_ERR_NULL, "`queue` is NULL");
        }
        // SAFETY: forwarded caller guarantees.
        let options = unsafe {
            read_optional_struct(options, "options", sigretire_rocr_adopt_options::default)
        }?
        .to_rust()?;
        // SAFETY: as above.
        let config =
            unsafe { read_optional_struct(config, "config", sigretire_config::default_values) }?;
        let settings = config.to_rust()?;
        // SAFETY: as above.
        let rocr = unsafe { rocr_ref(rocr) }?;
        let device = rocr.runtime.device(gpu).or_else(rocr_failure)?;
        let queue = rocr_adopt(&device, queue, options)?;
        let pool = Arc::new(SignalPool::new(&device));
        give(out, build(pool, queue, settings, Backend::Rocr)?);
        Ok(())
    })
}

/// `AqlQueue::adopt` with the caller's word for the queue.
pub(crate) fn rocr_adopt(
    device: &Agent,
    queue: *mut c_void,
    options: AdoptOptions,
) -> Outcome<AqlQueue> {
    // SAFETY: the C caller's contract (the `# Safety` of every function that
    // adopts a queue: sigretire_rocr_tracker_adopt, _note_queue_change,
    // sigretire_rocr_device_adopt, sigretire_rocr_stream_adopt): a live queue of this
    // device's agent, made by this runtime, kept live while the tracker
    // and its handles live, every reserved slot published.
    unsafe { AqlQueue::adopt(device, queue.cast(), options) }.or_else(rocr_failure)
}

/// Moves a ROCr tracker to another queue of the runtime's on the same GPU
/// (`queue`, an `hsa_queue_t *`): a new generation begins. `options` may be
/// NULL (the defaults). Publish every slot reserved on the old queue first:
/// from now on the tracker publishes on the new queue, and
/// `sigretire_tracker_publish` refuses a use acquired before the change
/// (`SIGRETIRE_ERR_INVALID_STATE`).
///
/// Thread safety: takes the tracker's lock.
///
/// # Safety
/// `tracker` is a live ROCr tracker; `queue` as for
/// `sigretire_rocr_tracker_adopt`; `options` is NULL or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_rocr_note_queue_change(
    tracker: *mut sigretire_tracker,
    queue: *mut c_void,
    options: *const sigretire_rocr_adopt_options,
) -> sigretire_status {
    guard("sigretire_rocr_note_queue_change", || {
        if queue.is_null() {
            return fail(SIGRETIRE_ERR_NULL, "`queue` is NULL");
        }
        // SAFETY: forwarded caller guarantees.
        let options = unsafe {
            read_optional_struct(options, "options", sigretire_rocr_adopt_options::default)
        }?
        .to_rust()?;
        // SAFETY: as above.
        let tracker = unsafe { tracker_ref(tracker) }?;
        require_backend(tracker, "ROCr", |b| b == Backend::Rocr)?;
        let device = tracker.with_core(|core| {
            core.queue()
                .downcast_ref::<AqlQueue>()
                .map(|q| q.device().clone())
        });
        let Some(device) = device else {
            return fail(SIGRETIRE_ERR_WRONG_BACKEND, "not a ROCr tracker");
        };
        let queue = rocr_adopt(&device, queue, options)?;
        tracker.with_core(|core| core.note_queue_change(Box::new(queue)))
    })
}

/// Forwards an error ROCr reported for the tracker's queue to the runtime's
/// `hsa_queue_create` callback (`status`, an `hsa_status_t`): from then on
/// the queue is failed for the tracker (reserving and publishing fail);
/// call `sigretire_tracker_fail_queue` to fail its pending uses.
///
/// Thread safety: any thread (takes the tracker's lock briefly); safe to
/// call from the runtime's queue-error callback.
///
/// # Safety
/// `tracker` is a live ROCr tracker.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_rocr_report_queue_error(
    tracker: *mut sigretire_tracker,
    status: u32,
) -> sigretire_status {
    guard("sigretire_rocr_report_queue_error", || {
        // SAFETY: forwarded caller guarantee.
        let tracker = unsafe { tracker_ref(tracker) }?;
        require_backend(tracker, "ROCr", |b| b == Backend::Rocr)?;
        tracker.with_core(|core| match core.queue().downcast_ref::<AqlQueue>() {
            Some(queue) => {
                queue.report_error(status);
                Ok(())
            }
            None => fail(SIGRETIRE_ERR_WRONG_BACKEND, "not a ROCr tracker"),
        })
    })
}
