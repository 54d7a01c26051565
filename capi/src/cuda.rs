//! The CUDA backend from C: a device of the queue layer on a CUDA device,
//! its streams over `CUstream`s the runtime created and keeps owning
//! (adopted: the library never destroys them), or streams of the library's
//! own (`sigretire_device_stream_create`).
//!
//! `libcuda` is loaded at run time: without it the functions answer
//! `SIGRETIRE_ERR_LOAD`, without a device `SIGRETIRE_ERR_NO_GPU`, never a
//! crash. A library built without the `cuda` cargo feature has the same
//! functions, which answer `SIGRETIRE_ERR_UNSUPPORTED`, so that one header
//! serves every build.

use crate::objects::sigretire_device_options;
use crate::objects::sigretire_stream_options;
use crate::release::sigretire_release_callback;
use crate::status::*;
use crate::types::*;
use std::ffi::c_void;

#[cfg(feature = "cuda-no-version")]
mod enabled {
    use super::*;
    use crate::layer::{AnyDevice, AnyStream, Platform, layer_failure};
    use crate::objects::{Creation, DeviceParts, sigretire_device};
    use crate::release::Release;
    use crate::tracker::created_failure;
    use ::sigretire_cuda::{CudaContext, CudaMemory, CudaQueue, Error};
    use ::sigretire_queue::{Device, QueueConfig};
    use ::sigretire_tracker::RetiringTracker;
    use std::sync::Arc;

    /// A CUDA error as a status.
    pub(crate) fn cuda_failure<T>(error: Error) -> Outcome<T> {
        let status = match &error {
            Error::LibraryMissing | Error::DriverTooOld { .. } => SIGRETIRE_ERR_LOAD,
            Error::NoDevice { .. } | Error::MissingCapability { .. } => SIGRETIRE_ERR_NO_GPU,
            Error::DefaultStream { .. } | Error::ForeignStream { .. } | Error::StreamCapturing => {
                SIGRETIRE_ERR_INVALID_ARGUMENT
            }
            Error::Tracker(create) => return created_failure(create.clone()),
            _ => SIGRETIRE_ERR_BACKEND,
        };
        fail(status, error.to_string())
    }

    /// The runtime's `stream` adopted on `context`, handed back through
    /// `release` (if any) once the library is done with it.
    ///
    /// # Safety
    /// `stream` is a live `CUstream` of the device's primary context, not
    /// destroyed before `release` is called (or, with no `release`, while
    /// the library is loaded).
    unsafe fn adopt(
        context: &Arc<CudaContext>,
        stream: *mut c_void,
        release: sigretire_release_callback,
        user: *mut c_void,
    ) -> Outcome<CudaQueue> {
        let raw: ::sigretire_cuda::cudarc::driver::sys::CUstream = stream.cast();
        let adopted = match Release::new(release, stream, user) {
            // SAFETY: the caller's contract; the keeper tells the runtime
            // when the stream is no longer used.
            Some(keeper) => unsafe { context.adopt_stream_with(raw, keeper) },
            // SAFETY: the caller's contract: live for as long as the
            // library is loaded.
            None => unsafe { context.adopt_stream(raw) },
        };
        adopted.or_else(cuda_failure)
    }

    /// A stream of the device `parts` (a CUDA one) on `queue`.
    pub(crate) fn stream_on(
        parts: &DeviceParts,
        queue: CudaQueue,
        config: QueueConfig,
    ) -> Outcome<AnyStream> {
        let (
            Platform::Cuda {
                signals,
                config: tracker_config,
                ..
            },
            AnyDevice::Cuda(device),
        ) = (&parts.platform, &parts.device)
        else {
            return fail(
                SIGRETIRE_ERR_WRONG_BACKEND,
                format!(
                    "this function needs a CUDA device; this one runs on {}",
                    parts.device.backend()
                ),
            );
        };
        let tracker = RetiringTracker::new(signals.clone(), queue, *tracker_config)
            .or_else(created_failure)?;
        Ok(AnyStream::Cuda(
            device
                .create_queue(tracker, config)
                .or_else(layer_failure)?,
        ))
    }

    pub(super) fn device_adopt(
        ordinal: u32,
        stream: *mut c_void,
        release: sigretire_release_callback,
        user: *mut c_void,
        creation: Creation,
    ) -> Outcome<*mut sigretire_device> {
        let context = CudaContext::new(ordinal).or_else(cuda_failure)?;
        // SAFETY: forwarded caller guarantee (sigretire_cuda_device_adopt's).
        let queue = unsafe { adopt(&context, stream, release, user) }?;
        let signals = Arc::new(CudaMemory::new(&context));
        let tracker = RetiringTracker::new(signals.clone(), queue, creation.config)
            .or_else(created_failure)?;
        let device =
            Device::new(creation.device, tracker, creation.stream).or_else(layer_failure)?;
        Ok(sigretire_device::into_raw(DeviceParts {
            platform: Platform::Cuda {
                context,
                signals,
                config: creation.config,
            },
            device: AnyDevice::Cuda(device),
        }))
    }

    pub(super) fn stream_adopt(
        parts: &DeviceParts,
        stream: *mut c_void,
        release: sigretire_release_callback,
        user: *mut c_void,
        config: QueueConfig,
    ) -> Outcome<AnyStream> {
        let Platform::Cuda { context, .. } = &parts.platform else {
            return fail(
                SIGRETIRE_ERR_WRONG_BACKEND,
                format!(
                    "sigretire_cuda_stream_adopt needs a CUDA device; this one runs on {}",
                    parts.device.backend()
                ),
            );
        };
        // SAFETY: forwarded caller guarantee (sigretire_cuda_stream_adopt's).
        let queue = unsafe { adopt(context, stream, release, user) }?;
        stream_on(parts, queue, config)
    }
}

#[cfg(feature = "cuda-no-version")]
pub(crate) use enabled::{cuda_failure, stream_on};

/// The answer of every CUDA function in a library built without CUDA.
#[cfg(not(feature = "cuda-no-version"))]
fn not_built<T>() -> Outcome<T> {
    fail(
        SIGRETIRE_ERR_UNSUPPORTED,
        "this library was built without the CUDA backend: build it with `cargo build -p \
         sigretire-capi --features cuda`",
    )
}

/// Creates a device on CUDA device `ordinal` (its primary context, the one
/// the CUDA runtime uses) whose default stream runs on `stream`, a
/// `CUstream` the runtime created on that context and keeps owning: the
/// runtime keeps launching its own work on it, and a marker
/// (`sigretire_stream_marker`) or an event recorded after that work
/// completes after it. The library never destroys the stream: it calls
/// `release(stream, user)` once it no longer uses it (`release` may be
/// NULL: then the stream must stay live for as long as the library is
/// loaded). Every stream of the device takes its signals from one pinned
/// allocation of the context. `device_options`, `stream_options` and
/// `config` may be NULL: the defaults.
///
/// A NULL `stream` (the null stream): `SIGRETIRE_ERR_NULL`, in every
/// build. Without `libcuda`: `SIGRETIRE_ERR_LOAD`; without that device:
/// `SIGRETIRE_ERR_NO_GPU`; the legacy or per-thread default stream
/// (`CU_STREAM_LEGACY`, `CU_STREAM_PER_THREAD`), or a stream of another
/// context: `SIGRETIRE_ERR_INVALID_ARGUMENT`; a library built without the
/// `cuda` feature: `SIGRETIRE_ERR_UNSUPPORTED`. Never a crash.
///
/// Thread safety: any thread.
///
/// # Safety
/// `stream` is a live `CUstream` of device `ordinal`'s primary context, not
/// destroyed before `release` is called (see above), and never captured
/// into a graph while the device uses it; the option pointers are NULL or
/// readable; `device` points to a writable handle variable.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)] // the C call's arguments, as for ROCr
pub unsafe extern "C" fn sigretire_cuda_device_adopt(
    ordinal: u32,
    stream: *mut c_void,
    release: sigretire_release_callback,
    user: *mut c_void,
    device_options: *const sigretire_device_options,
    stream_options: *const sigretire_stream_options,
    config: *const sigretire_config,
    device: *mut *mut crate::objects::sigretire_device,
) -> sigretire_status {
    guard("sigretire_cuda_device_adopt", || {
        let out = Out::new(device, "device")?;
        if stream.is_null() {
            return fail(SIGRETIRE_ERR_NULL, "`stream` is NULL");
        }
        // SAFETY: forwarded caller guarantees.
        let creation =
            unsafe { crate::objects::Creation::read(device_options, stream_options, config) }?;
        #[cfg(feature = "cuda-no-version")]
        {
            out.write(enabled::device_adopt(
                ordinal, stream, release, user, creation,
            )?);
            Ok(())
        }
        #[cfg(not(feature = "cuda-no-version"))]
        {
            let _ = (ordinal, stream, release, user, creation, out);
            not_built()
        }
    })
}

/// Creates a stream of a CUDA device over another `CUstream` of the
/// runtime's, on the device's context (`release` and `user` as for
/// `sigretire_cuda_device_adopt`; `options` may be NULL: the defaults).
/// `SIGRETIRE_ERR_WRONG_BACKEND` for a device of another backend.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `device` is a live device; `stream` as for `sigretire_cuda_device_adopt`;
/// `options` is NULL or readable; `out` points to a writable handle
/// variable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_cuda_stream_adopt(
    device: *const crate::objects::sigretire_device,
    stream: *mut c_void,
    release: sigretire_release_callback,
    user: *mut c_void,
    options: *const sigretire_stream_options,
    out: *mut *mut crate::objects::sigretire_stream,
) -> sigretire_status {
    guard("sigretire_cuda_stream_adopt", || {
        let out = Out::new(out, "out")?;
        if stream.is_null() {
            return fail(SIGRETIRE_ERR_NULL, "`stream` is NULL");
        }
        // SAFETY: forwarded caller guarantee.
        let config =
            unsafe { read_optional_struct(options, "options", sigretire_stream_options::default) }?
                .to_rust()?;
        // SAFETY: as above.
        let device = unsafe { crate::objects::device_ref(device) }?;
        #[cfg(feature = "cuda-no-version")]
        {
            let made = enabled::stream_adopt(&device.parts, stream, release, user, config)?;
            out.write(crate::objects::sigretire_stream::into_raw(
                device.parts.clone(),
                made,
            ));
            Ok(())
        }
        #[cfg(not(feature = "cuda-no-version"))]
        {
            let _ = (device, stream, release, user, config, out);
            not_built()
        }
    })
}
