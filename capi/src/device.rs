//! Devices of the queue layer (`sigretire_device`): a device's error state,
//! its completion thread and its default stream, on the simulator, on ROCr
//! over a runtime's `hsa_queue_t`, or on CUDA over a runtime's `CUstream`
//! (`cuda.rs`).
//!
//! Lifetimes: the C handle holds the device by a counted reference, and so
//! does every stream and event handle made from it, so handles may be
//! destroyed in any order: the device goes with the last of them. Its
//! streams are never waited for when a handle goes (the queue layer's
//! streams never wait for the GPU when dropped).

use crate::layer::{AnyDevice, AnyStream, Platform, each, layer_failure};
use crate::objects::{
    Creation, DeviceParts, device_ref, sigretire_device, sigretire_device_options,
    sigretire_stream, sigretire_stream_options,
};
use crate::registry::{self, Kind};
use crate::release::sigretire_release_callback;
use crate::rocr::{rocr_adopt, rocr_failure, rocr_ref, sigretire_rocr_adopt_options};
use crate::rocr_queue::KeptQueue;
use crate::sim::sim_ref;
use crate::status::*;
use crate::types::*;
use ::sigretire_queue::Device;
use ::sigretire_queue::sim::SimPlatform;
use ::sigretire_tracker::RetiringTracker;
use sigretire_hsa::SignalPool;
use std::ffi::{CStr, c_char, c_void};
use std::sync::Arc;
use std::time::Duration;

/// The default device options: no flags (a device-wide fault aborts).
///
/// Thread safety: any thread.
///
/// # Safety
/// `options` points to a writable `sigretire_device_options`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_device_options_default(
    options: *mut sigretire_device_options,
) -> sigretire_status {
    guard("sigretire_device_options_default", || {
        // SAFETY: forwarded caller guarantee.
        unsafe { StructOut::new(options, "options") }?.write(sigretire_device_options::default());
        Ok(())
    })
}

/// Creates a device on simulator `sim`: its default stream and every
/// stream `sigretire_device_stream_create` makes run on new hardware queues
/// of that simulator (profiled, 4096 packets; not the numbered queues of
/// `sigretire_sim_options`), so cross-stream waits resolve on its packet
/// processor. A stepped simulator runs only when
/// `sigretire_sim_run_until_idle` says so: a synchronize there blocks until
/// another thread runs it (use a threaded simulator,
/// `SIGRETIRE_SIM_THREADED`, for blocking calls). `device_options`,
/// `stream_options` (the default stream's) and `config` (every stream's
/// tracker) may be NULL: the defaults. The simulator handle may be
/// destroyed before the device: the device keeps what it needs of it.
///
/// Thread safety: any thread.
///
/// # Safety
/// `sim` is a live simulator; the options and `config` are NULL or
/// readable; `device` points to a writable handle variable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_sim_device_create(
    sim: *const crate::sim::sigretire_sim,
    device_options: *const sigretire_device_options,
    stream_options: *const sigretire_stream_options,
    config: *const sigretire_config,
    device: *mut *mut sigretire_device,
) -> sigretire_status {
    guard("sigretire_sim_device_create", || {
        let out = Out::new(device, "device")?;
        // SAFETY: forwarded caller guarantees.
        let creation = unsafe { Creation::read(device_options, stream_options, config) }?;
        // SAFETY: as above.
        let sim = unsafe { sim_ref(sim) }?;
        let platform =
            SimPlatform::new(sim.simulator().clone()).with_tracker_config(creation.config);
        let made = platform
            .device(creation.device, creation.stream)
            .or_else(layer_failure)?;
        out.write(sigretire_device::into_raw(DeviceParts {
            platform: Platform::Sim(platform),
            device: AnyDevice::Sim(made),
        }));
        Ok(())
    })
}

/// Creates a device on ROCr GPU `gpu` whose default stream runs on `queue`,
/// an `hsa_queue_t *` the runtime made on that GPU and keeps owning (as
/// `sigretire_rocr_tracker_adopt` takes one: `options` may be NULL, the
/// defaults). The library never destroys the queue: it calls
/// `release(queue, user)` once it no longer uses it (after draining what
/// it published, up to `drain_timeout_ns`), possibly after every handle is
/// destroyed; the runtime destroys the queue then. `release` may be NULL:
/// then the queue must stay live for as long as the library is loaded.
/// Every stream of the device takes its signals from one pool of that
/// GPU. More streams: `sigretire_rocr_stream_adopt`, each over another
/// queue of the runtime's. ROCr reports a queue's errors to the runtime's
/// callback: forward them with `sigretire_rocr_stream_report_queue_error`.
/// `device_options`, `stream_options` and `config` may be NULL: the
/// defaults.
///
/// Thread safety: any thread.
///
/// # Safety
/// `rocr` is a live ROCr handle of the library the runtime loaded; `queue`
/// is a live queue of GPU `gpu` made by that runtime, not destroyed before
/// `release` is called (see above); every slot a producer reserves on it
/// is published. The option pointers are NULL or readable; `device` points
/// to a writable handle variable.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)] // the C call's arguments
pub unsafe extern "C" fn sigretire_rocr_device_adopt(
    rocr: *const crate::rocr::sigretire_rocr,
    gpu: usize,
    queue: *mut c_void,
    release: sigretire_release_callback,
    user: *mut c_void,
    options: *const sigretire_rocr_adopt_options,
    device_options: *const sigretire_device_options,
    stream_options: *const sigretire_stream_options,
    config: *const sigretire_config,
    device: *mut *mut sigretire_device,
) -> sigretire_status {
    guard("sigretire_rocr_device_adopt", || {
        let out = Out::new(device, "device")?;
        if queue.is_null() {
            return fail(SIGRETIRE_ERR_NULL, "`queue` is NULL");
        }
        // SAFETY: forwarded caller guarantees.
        let adopt_options = unsafe { crate::rocr::read_adopt_options(options) }?;
        // SAFETY: as above.
        let creation = unsafe { Creation::read(device_options, stream_options, config) }?;
        // SAFETY: as above.
        let rocr = unsafe { rocr_ref(rocr) }?;
        let gpu = rocr.runtime().device(gpu).or_else(rocr_failure)?;
        let adopted = KeptQueue::new(
            rocr_adopt(&gpu, queue, adopt_options)?,
            queue,
            release,
            user,
        );
        let signals = Arc::new(SignalPool::new(&gpu));
        let tracker = RetiringTracker::new(signals.clone(), adopted, creation.config)
            .or_else(crate::tracker::created_failure)?;
        let made = Device::new(creation.device, tracker, creation.stream).or_else(layer_failure)?;
        out.write(sigretire_device::into_raw(DeviceParts {
            platform: Platform::Rocr {
                gpu,
                signals,
                config: creation.config,
            },
            device: AnyDevice::Rocr(made),
        }));
        Ok(())
    })
}

/// A new handle of the device's default stream (HIP's null stream), which
/// lives as long as the device; destroy the handle with
/// `sigretire_stream_destroy` (the stream itself goes with the device).
/// Each call makes another handle of the same stream.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `device` is a live device; `stream` points to a writable handle
/// variable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_device_default_stream(
    device: *const sigretire_device,
    stream: *mut *mut sigretire_stream,
) -> sigretire_status {
    guard("sigretire_device_default_stream", || {
        let out = Out::new(stream, "stream")?;
        // SAFETY: forwarded caller guarantee.
        let device = unsafe { device_ref(device) }?;
        let queue = match &device.parts.device {
            AnyDevice::Sim(d) => AnyStream::Sim(d.default_queue().clone()),
            AnyDevice::Rocr(d) => AnyStream::Rocr(d.default_queue().clone()),
            #[cfg(feature = "cuda-no-version")]
            AnyDevice::Cuda(d) => AnyStream::Cuda(d.default_queue().clone()),
        };
        out.write(sigretire_stream::into_raw(device.parts.clone(), queue));
        Ok(())
    })
}

/// Creates a stream on a new hardware queue the library makes: a new
/// queue of the simulator, or a CUDA stream of the library's own (never the
/// runtime's). ROCr's queues are the runtime's: there this answers
/// `SIGRETIRE_ERR_UNSUPPORTED` (adopt one with `sigretire_rocr_stream_adopt`).
/// `options` may be NULL: the defaults.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `device` is a live device; `options` is NULL or readable; `stream`
/// points to a writable handle variable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_device_stream_create(
    device: *const sigretire_device,
    options: *const sigretire_stream_options,
    stream: *mut *mut sigretire_stream,
) -> sigretire_status {
    guard("sigretire_device_stream_create", || {
        let out = Out::new(stream, "stream")?;
        // SAFETY: forwarded caller guarantee.
        let config =
            unsafe { read_optional_struct(options, "options", sigretire_stream_options::default) }?
                .to_rust()?;
        // SAFETY: as above.
        let device = unsafe { device_ref(device) }?;
        let queue = match (&device.parts.platform, &device.parts.device) {
            (Platform::Sim(platform), AnyDevice::Sim(d)) => {
                AnyStream::Sim(platform.create_queue(d, config).or_else(layer_failure)?)
            }
            #[cfg(feature = "cuda-no-version")]
            (Platform::Cuda { context, .. }, AnyDevice::Cuda(_)) => {
                let queue = context.create_queue().or_else(crate::cuda::cuda_failure)?;
                crate::cuda::stream_on(&device.parts, queue, config)?
            }
            _ => {
                return fail(
                    SIGRETIRE_ERR_UNSUPPORTED,
                    format!(
                        "a device on {} has no queues of the library's own: adopt one of the \
                         runtime's (sigretire_rocr_stream_adopt)",
                        device.parts.device.backend()
                    ),
                );
            }
        };
        out.write(sigretire_stream::into_raw(device.parts.clone(), queue));
        Ok(())
    })
}

/// Creates a stream of a ROCr device over another `hsa_queue_t *` of the
/// runtime's on the device's GPU (`release` and `user` as for
/// `sigretire_rocr_device_adopt`; `options` as for
/// `sigretire_rocr_tracker_adopt`; `options` and `stream_options` may be
/// NULL: the defaults). `SIGRETIRE_ERR_WRONG_BACKEND` for a device of
/// another backend.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `device` is a live ROCr device; `queue` as for
/// `sigretire_rocr_device_adopt`; the option pointers are NULL or
/// readable; `stream` points to a writable handle variable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_rocr_stream_adopt(
    device: *const sigretire_device,
    queue: *mut c_void,
    release: sigretire_release_callback,
    user: *mut c_void,
    options: *const sigretire_rocr_adopt_options,
    stream_options: *const sigretire_stream_options,
    stream: *mut *mut sigretire_stream,
) -> sigretire_status {
    guard("sigretire_rocr_stream_adopt", || {
        let out = Out::new(stream, "stream")?;
        if queue.is_null() {
            return fail(SIGRETIRE_ERR_NULL, "`queue` is NULL");
        }
        // SAFETY: forwarded caller guarantees.
        let adopt_options = unsafe { crate::rocr::read_adopt_options(options) }?;
        // SAFETY: as above.
        let config = unsafe {
            read_optional_struct(
                stream_options,
                "stream_options",
                sigretire_stream_options::default,
            )
        }?
        .to_rust()?;
        // SAFETY: as above.
        let device = unsafe { device_ref(device) }?;
        let (
            Platform::Rocr {
                gpu,
                signals,
                config: tracker_config,
            },
            AnyDevice::Rocr(d),
        ) = (&device.parts.platform, &device.parts.device)
        else {
            return fail(
                SIGRETIRE_ERR_WRONG_BACKEND,
                format!(
                    "sigretire_rocr_stream_adopt needs a ROCr device; this one runs on {}",
                    device.parts.device.backend()
                ),
            );
        };
        let adopted = KeptQueue::new(rocr_adopt(gpu, queue, adopt_options)?, queue, release, user);
        let tracker = RetiringTracker::new(signals.clone(), adopted, *tracker_config)
            .or_else(crate::tracker::created_failure)?;
        let made = d.create_queue(tracker, config).or_else(layer_failure)?;
        out.write(sigretire_stream::into_raw(
            device.parts.clone(),
            AnyStream::Rocr(made),
        ));
        Ok(())
    })
}

/// Waits until everything submitted so far to every live stream of the
/// device completed (`hipDeviceSynchronize`): each stream in turn, each
/// bounded by its own `wait_timeout_ns`. Returns the first stream's failure
/// (`SIGRETIRE_ERR_STREAM_FAILED`, ...) and stops there.
///
/// Thread safety: any thread, concurrently; takes no stream's lock while
/// it waits for the GPU.
///
/// # Safety
/// `device` is a live device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_device_synchronize(
    device: *const sigretire_device,
) -> sigretire_status {
    guard("sigretire_device_synchronize", || {
        // SAFETY: forwarded caller guarantee.
        let device = unsafe { device_ref(device) }?;
        each!(AnyDevice, &device.parts.device, d => d.synchronize()).or_else(layer_failure)
    })
}

/// As `sigretire_device_synchronize`, but gives up once `timeout_ns`
/// nanoseconds have passed since the call: `SIGRETIRE_ERR_TIMED_OUT` (the
/// work has not all completed, and may still; nothing was reported
/// complete). A zero timeout looks once.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `device` is a live device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_device_synchronize_timeout(
    device: *const sigretire_device,
    timeout_ns: u64,
) -> sigretire_status {
    guard("sigretire_device_synchronize_timeout", || {
        // SAFETY: forwarded caller guarantee.
        let device = unsafe { device_ref(device) }?;
        let timeout = Duration::from_nanos(timeout_ns);
        each!(AnyDevice, &device.parts.device, d => d.synchronize_timeout(timeout))
            .or_else(layer_failure)
    })
}

/// Puts the device in its error state, as a device-wide fault (a lost
/// device) would, with `reason` (a NUL-terminated string, or NULL) as the
/// cause the errors name. The state is for good: waits on every stream
/// then return early (`SIGRETIRE_ERR_DEVICE_ERROR` with
/// `SIGRETIRE_DEVICE_SKIP_ABORT_ON_ERROR`, else
/// `SIGRETIRE_ERR_DEVICE_ABORTED`, and an aborting device takes no more
/// work). A failure of one stream's work does not call for this: it fails
/// that stream alone.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `device` is a live device; `reason` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_device_set_error(
    device: *const sigretire_device,
    reason: *const c_char,
) -> sigretire_status {
    guard("sigretire_device_set_error", || {
        let reason = if reason.is_null() {
            "a device-wide fault the runtime reported".to_owned()
        } else {
            // SAFETY: non-null and NUL-terminated by the caller's contract.
            unsafe { CStr::from_ptr(reason) }
                .to_string_lossy()
                .into_owned()
        };
        // SAFETY: forwarded caller guarantee.
        let device = unsafe { device_ref(device) }?;
        each!(AnyDevice, &device.parts.device, d => d.set_error(reason));
        Ok(())
    })
}

/// Destroys the device handle and sets `*device` to NULL (a NULL `*device`
/// is a no-op). Never waits for the GPU. The device itself lives on while a
/// stream or event handle of it does, and goes with the last of them.
///
/// Thread safety: the last call on this handle.
///
/// # Safety
/// `device` points to a variable holding NULL or a live device handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_device_destroy(
    device: *mut *mut sigretire_device,
) -> sigretire_status {
    guard("sigretire_device_destroy", || {
        check_pointer(device.cast_const(), "device")?;
        // SAFETY: checked; the caller's variable.
        let handle = unsafe { *device };
        if handle.is_null() {
            return Ok(());
        }
        // Out of the table first: of two calls destroying the same handle,
        // only the one that took it out frees it.
        registry::unregister(handle.cast_const(), Kind::Device, "*device")?;
        // SAFETY: a live handle from `into_raw` (the table said so), now
        // out of the table, used by nothing else (contract): freed once,
        // here; the caller's variable cleared.
        unsafe {
            *device = std::ptr::null_mut();
            drop(Box::from_raw(handle));
        }
        Ok(())
    })
}

/// Forwards an error ROCr reported for the `hsa_queue_t` under a ROCr
/// stream to the library (`status`, an `hsa_status_t`, from the runtime's
/// `hsa_queue_create` callback): from then on the queue is failed
/// (reserving and publishing fail), and the stream fails as soon as a
/// wait, a query or an event sees its work failed
/// (`SIGRETIRE_ERR_STREAM_FAILED`). `SIGRETIRE_ERR_WRONG_BACKEND` for a
/// stream of another backend.
///
/// Thread safety: any thread (takes the stream's lock briefly); safe to
/// call from the runtime's queue-error callback.
///
/// # Safety
/// `stream` is a live stream.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_rocr_stream_report_queue_error(
    stream: *const sigretire_stream,
    status: u32,
) -> sigretire_status {
    guard("sigretire_rocr_stream_report_queue_error", || {
        // SAFETY: forwarded caller guarantee.
        let stream = unsafe { crate::objects::stream_ref(stream) }?;
        match &stream.queue {
            AnyStream::Rocr(queue) => {
                queue.with_tracker(|tracker| {
                    ::sigretire_tracker::Tracker::queue(tracker)
                        .queue()
                        .report_error(status)
                });
                Ok(())
            }
            other => fail(
                SIGRETIRE_ERR_WRONG_BACKEND,
                format!(
                    "sigretire_rocr_stream_report_queue_error is for ROCr streams; this one runs \
                     on {}",
                    crate::layer::stream_backend(other)
                ),
            ),
        }
    })
}
