//! The queue layer's C handles, what each holds, and how a call finds the
//! live one behind a pointer: devices (`sigretire_device`), streams
//! (`sigretire_stream`) and events (`sigretire_event`), with their options
//! and flags. The functions on them (`device.rs`, `stream.rs`, `event.rs`,
//! and the backends' constructors in `sim.rs`, `rocr.rs`, `cuda.rs`) all
//! build on this module and none on another's, so a stream's function may
//! make an event and a device's a stream without the modules naming each
//! other.

use crate::layer::{AnyDevice, AnyEvent, AnyStream, Platform};
use crate::registry::{self, Kind};
use crate::status::*;
use crate::types::*;
use ::sigretire_queue::{DeviceConfig, QueueConfig};
use ::sigretire_tracker::WaitPolicy;
use std::sync::Arc;

/// `sigretire_device_options.flags`: after a device-wide fault
/// (`sigretire_device_set_error`) waits return `SIGRETIRE_ERR_DEVICE_ERROR`
/// early and streams keep taking work (HIP's `HIP_SKIP_ABORT_ON_GPU_ERROR`);
/// without it the device refuses all further work
/// (`SIGRETIRE_ERR_DEVICE_ABORTED`).
pub const SIGRETIRE_DEVICE_SKIP_ABORT_ON_ERROR: u32 = 1;

/// How a device reacts to a device-wide fault.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct sigretire_device_options {
    /// `sizeof` this struct, set by the caller before every call that
    /// takes it (`SIGRETIRE_ERR_STRUCT_SIZE` otherwise): `sigretire_device_options_default` needs it too.
    pub size: u32,
    /// `SIGRETIRE_DEVICE_*` flag bits (default 0).
    pub flags: u32,
}

impl Default for sigretire_device_options {
    fn default() -> Self {
        Self {
            size: size_of::<Self>() as u32,
            flags: 0,
        }
    }
}

sized_structs!(sigretire_device_options);
caller_filled!(sigretire_device_options);

impl sigretire_device_options {
    fn to_rust(self) -> Outcome<DeviceConfig> {
        if self.flags & !SIGRETIRE_DEVICE_SKIP_ABORT_ON_ERROR != 0 {
            return fail(
                SIGRETIRE_ERR_INVALID_ARGUMENT,
                format!("device flags {:#x} has unknown bits", self.flags),
            );
        }
        Ok(DeviceConfig {
            skip_abort_on_error: self.flags & SIGRETIRE_DEVICE_SKIP_ABORT_ON_ERROR != 0,
        })
    }
}

/// The device options, the default stream's options and the tracker
/// configuration a create function was given (each may be NULL: the
/// defaults), read and checked.
pub(crate) struct Creation {
    pub(crate) device: DeviceConfig,
    pub(crate) stream: QueueConfig,
    pub(crate) config: ::sigretire_tracker::Config,
}

impl Creation {
    /// Reads the three optional structs.
    ///
    /// # Safety
    /// Each pointer is NULL or points to a readable struct of its type
    /// whose size field the caller set.
    pub(crate) unsafe fn read(
        device: *const sigretire_device_options,
        stream: *const sigretire_stream_options,
        config: *const sigretire_config,
    ) -> Outcome<Self> {
        // SAFETY: forwarded caller guarantee.
        let device = unsafe {
            read_optional_struct(device, "device_options", sigretire_device_options::default)
        }?
        .to_rust()?;
        // SAFETY: as above.
        let stream = unsafe {
            read_optional_struct(stream, "stream_options", sigretire_stream_options::default)
        }?
        .to_rust()?;
        // SAFETY: as above.
        let config =
            unsafe { read_optional_struct(config, "config", sigretire_config::default_values) }?
                .to_rust()?
                .config;
        Ok(Self {
            device,
            stream,
            config,
        })
    }
}

/// A device and what its new streams' trackers are made from.
pub(crate) struct DeviceParts {
    pub(crate) platform: Platform,
    pub(crate) device: AnyDevice,
}

/// A GPU device of the queue layer (opaque): its error state, its
/// completion thread, its default stream (HIP's null stream) and the
/// streams created on it. Made by `sigretire_sim_device_create`,
/// `sigretire_rocr_device_adopt` or `sigretire_cuda_device_adopt`;
/// destroyed by `sigretire_device_destroy`. Its streams and events keep it
/// alive: destroy the handles in any order.
///
/// Thread safety: every function on it may be called from any thread,
/// concurrently, except `sigretire_device_destroy` (the last call on this
/// handle; streams and events made from it stay usable).
pub struct sigretire_device {
    pub(crate) parts: Arc<DeviceParts>,
}

impl sigretire_device {
    /// A new handle of `parts`, entered in the table of live handles.
    pub(crate) fn into_raw(parts: DeviceParts) -> *mut sigretire_device {
        let ptr = Box::into_raw(Box::new(sigretire_device {
            parts: Arc::new(parts),
        }));
        registry::register(ptr, Kind::Device);
        ptr
    }
}

/// The device behind `ptr`, checked.
///
/// # Safety
/// A `sigretire_device` handle in the table of live handles is a live
/// device, not destroyed while the call runs (the caller's contract).
pub(crate) unsafe fn device_ref<'a>(ptr: *const sigretire_device) -> Outcome<&'a sigretire_device> {
    registry::check(ptr, Kind::Device, "device")?;
    // SAFETY: a live handle (the table says so; nothing of `ptr` was read
    // before it did), not destroyed while this call runs (contract).
    Ok(unsafe { &*ptr })
}

/// `sigretire_stream_options.flags`: the stream's hardware queue writes no
/// timestamps for it: its events are untimed (`SIGRETIRE_ERR_NOT_TIMED` for
/// an elapsed time).
pub const SIGRETIRE_STREAM_UNPROFILED: u32 = 1;
/// `sigretire_stream_options.flags`: the stream's waits (synchronize, its
/// events' synchronize) sleep until the GPU wakes them rather than spin
/// (the blocking wait policy, `sigretire_wait_policy_blocking`).
pub const SIGRETIRE_STREAM_BLOCKING_WAITS: u32 = 2;
const STREAM_FLAGS: u32 = SIGRETIRE_STREAM_UNPROFILED | SIGRETIRE_STREAM_BLOCKING_WAITS;

/// How a stream waits and whether it is timed.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct sigretire_stream_options {
    /// `sizeof` this struct, set by the caller before every call that
    /// takes it (`SIGRETIRE_ERR_STRUCT_SIZE` otherwise): `sigretire_stream_options_default` needs it too.
    pub size: u32,
    /// `SIGRETIRE_STREAM_*` flag bits (default 0: profiled, spinning waits).
    pub flags: u32,
    /// The longest any wait of the stream takes (a synchronize without a
    /// deadline, a launch waiting for room), in nanoseconds, before it
    /// answers `SIGRETIRE_ERR_TIMED_OUT` (or `SIGRETIRE_ERR_IN_FLIGHT_LIMIT`
    /// for room); 0 (the default) waits as long as the GPU takes, as HIP
    /// does.
    pub wait_timeout_ns: u64,
}

impl Default for sigretire_stream_options {
    fn default() -> Self {
        Self {
            size: size_of::<Self>() as u32,
            flags: 0,
            wait_timeout_ns: 0,
        }
    }
}

sized_structs!(sigretire_stream_options);
caller_filled!(sigretire_stream_options);

impl sigretire_stream_options {
    /// The queue layer's configuration, checked.
    pub(crate) fn to_rust(self) -> Outcome<QueueConfig> {
        if self.flags & !STREAM_FLAGS != 0 {
            return fail(
                SIGRETIRE_ERR_INVALID_ARGUMENT,
                format!("stream flags {:#x} has unknown bits", self.flags),
            );
        }
        let config = QueueConfig {
            profiling: self.flags & SIGRETIRE_STREAM_UNPROFILED == 0,
            wait_policy: if self.flags & SIGRETIRE_STREAM_BLOCKING_WAITS != 0 {
                WaitPolicy::blocking()
            } else {
                WaitPolicy::spin()
            },
            wait_timeout: (self.wait_timeout_ns != 0).then(|| nanos(self.wait_timeout_ns)),
            ..QueueConfig::default()
        };
        match config.validate() {
            Ok(()) => Ok(config),
            Err(invalid) => fail(SIGRETIRE_ERR_INVALID_CONFIG, invalid.to_string()),
        }
    }
}

/// A stream (opaque): the queue layer's host queue on one hardware queue,
/// in order (every packet a barrier), whose lock covers submission only,
/// so a synchronize on one thread never blocks another thread's launch.
/// Made by `sigretire_device_default_stream`,
/// `sigretire_device_stream_create` or an adopt function; destroyed by
/// `sigretire_stream_destroy`, which never waits for the GPU. It keeps its
/// device alive. A stream whose work failed on the GPU is failed for good
/// (`SIGRETIRE_ERR_STREAM_FAILED`): destroy it and make another; the device
/// and its other streams keep working.
///
/// Thread safety: every function on it may be called from any thread,
/// concurrently, except `sigretire_stream_destroy` (the last call on this
/// handle; its events stay usable).
pub struct sigretire_stream {
    /// Keeps the device (its completion thread, its error state) alive.
    device: Arc<DeviceParts>,
    pub(crate) queue: AnyStream,
}

impl sigretire_stream {
    /// A new handle of `queue`, entered in the table of live handles.
    pub(crate) fn into_raw(device: Arc<DeviceParts>, queue: AnyStream) -> *mut sigretire_stream {
        let ptr = Box::into_raw(Box::new(sigretire_stream { device, queue }));
        registry::register(ptr, Kind::Stream);
        ptr
    }

    /// The device the stream belongs to.
    pub(crate) fn device(&self) -> &Arc<DeviceParts> {
        &self.device
    }
}

/// The stream behind `ptr`, checked.
///
/// # Safety
/// A `sigretire_stream` handle in the table of live handles is a live
/// stream, not destroyed while the call runs (the caller's contract).
pub(crate) unsafe fn stream_ref<'a>(ptr: *const sigretire_stream) -> Outcome<&'a sigretire_stream> {
    registry::check(ptr, Kind::Stream, "stream")?;
    // SAFETY: a live handle (the table says so; nothing of `ptr` was read
    // before it did), not destroyed while this call runs (contract).
    Ok(unsafe { &*ptr })
}

/// `sigretire_event_record` flags: no timestamps (`hipEventDisableTiming`):
/// an elapsed time of it answers `SIGRETIRE_ERR_NOT_TIMED`, and recording
/// it harvests none.
pub const SIGRETIRE_EVENT_DISABLE_TIMING: u32 = 1;
/// `sigretire_event_record` flags: its synchronize sleeps until the GPU
/// wakes it, whatever its stream's wait policy (`hipEventBlockingSync`).
pub const SIGRETIRE_EVENT_BLOCKING_SYNC: u32 = 2;
pub(crate) const EVENT_FLAGS: u32 = SIGRETIRE_EVENT_DISABLE_TIMING | SIGRETIRE_EVENT_BLOCKING_SYNC;

/// A recorded event (opaque): the point after everything submitted to its
/// stream before `sigretire_event_record`. Destroyed by
/// `sigretire_event_destroy`. It keeps its stream's parts and its device
/// alive, so it stays usable after their handles are destroyed.
///
/// Thread safety: every function on it may be called from any thread,
/// concurrently, except `sigretire_event_destroy` (the last call on this
/// handle).
pub struct sigretire_event {
    /// Keeps the device alive (events of a destroyed device's streams
    /// still answer).
    pub(crate) _device: Arc<DeviceParts>,
    pub(crate) event: AnyEvent,
}

/// The event behind `ptr`, checked.
///
/// # Safety
/// A `sigretire_event` handle in the table of live handles is a live
/// event, not destroyed while the call runs (the caller's contract).
pub(crate) unsafe fn event_ref<'a>(ptr: *const sigretire_event) -> Outcome<&'a sigretire_event> {
    registry::check(ptr, Kind::Event, "event")?;
    // SAFETY: a live handle (the table says so; nothing of `ptr` was read
    // before it did), not destroyed while this call runs (contract).
    Ok(unsafe { &*ptr })
}
