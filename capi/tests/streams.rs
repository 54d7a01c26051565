//! The queue layer through the C ABI, from Rust (the C test
//! `tests/c/streams_test.c` runs the same from C): devices on the
//! simulator, streams and events, cross-stream waits, failures, the
//! device's error state, handles destroyed in any order, refused handles,
//! and the CUDA functions on a machine without a GPU.
//!
//! Every `unsafe` block here calls the C ABI with pointers to locals, live
//! handles made in the same test, or NULL where the call allows it.

use sigretire_capi::*;
use std::ptr::{null, null_mut};

const MS: u64 = 1_000_000;

/// A simulator (`flags`: stepped with 0) and a device on it.
struct Rig {
    sim: *mut sigretire_sim,
    device: *mut sigretire_device,
}

impl Rig {
    fn new(flags: u32) -> Self {
        let mut options = sigretire_sim_options {
            size: size_of::<sigretire_sim_options>() as u32,
            queues: 0,
            queue_size: 0,
            flags: 0,
            costs: 0,
        };
        let (mut sim, mut device) = (null_mut(), null_mut());
        // SAFETY: see the top of the file.
        unsafe {
            assert_eq!(sigretire_sim_options_default(&mut options), SIGRETIRE_OK);
            options.flags = flags;
            assert_eq!(sigretire_sim_create(&options, &mut sim), SIGRETIRE_OK);
            assert_eq!(
                sigretire_sim_device_create(sim, null(), null(), null(), &mut device),
                SIGRETIRE_OK
            );
        }
        Self { sim, device }
    }

    fn stream(&self) -> *mut sigretire_stream {
        let mut stream = null_mut();
        // SAFETY: see the top of the file.
        let status = unsafe { sigretire_device_stream_create(self.device, null(), &mut stream) };
        assert_eq!(status, SIGRETIRE_OK);
        stream
    }

    fn gated_kernel(&self) -> u64 {
        let mut kernel = 0;
        // SAFETY: see the top of the file.
        let status = unsafe { sigretire_sim_register_gated_kernel(self.sim, &mut kernel) };
        assert_eq!(status, SIGRETIRE_OK);
        kernel
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // SAFETY: see the top of the file; NULL handles are no-ops.
        unsafe {
            assert_eq!(sigretire_device_destroy(&mut self.device), SIGRETIRE_OK);
            assert_eq!(sigretire_sim_destroy(&mut self.sim), SIGRETIRE_OK);
        }
    }
}

fn record(stream: *const sigretire_stream, flags: u32) -> *mut sigretire_event {
    let mut event = null_mut();
    // SAFETY: see the top of the file.
    let status = unsafe { sigretire_event_record(stream, flags, &mut event) };
    assert_eq!(status, SIGRETIRE_OK);
    event
}

fn event_status(event: *const sigretire_event) -> sigretire_use_status {
    let mut status = SIGRETIRE_USE_UNKNOWN;
    // SAFETY: see the top of the file.
    let answer = unsafe { sigretire_event_query(event, &mut status) };
    assert_eq!(answer, SIGRETIRE_OK);
    status
}

fn stream_status(stream: *const sigretire_stream) -> sigretire_use_status {
    let mut status = SIGRETIRE_USE_UNKNOWN;
    // SAFETY: see the top of the file.
    let answer = unsafe { sigretire_stream_query(stream, &mut status) };
    assert_eq!(answer, SIGRETIRE_OK);
    status
}

fn destroy_stream(mut stream: *mut sigretire_stream) {
    // SAFETY: see the top of the file.
    let answer = unsafe { sigretire_stream_destroy(&mut stream) };
    assert_eq!(answer, SIGRETIRE_OK);
    assert!(stream.is_null());
}

fn destroy_event(mut event: *mut sigretire_event) {
    // SAFETY: see the top of the file.
    assert_eq!(unsafe { sigretire_event_destroy(&mut event) }, SIGRETIRE_OK);
    assert!(event.is_null());
}

#[test]
fn an_event_after_work_completes_only_when_the_stepped_gpu_runs() {
    let rig = Rig::new(0);
    let stream = rig.stream();
    // SAFETY: see the top of the file.
    unsafe {
        // Kernel object 0 names no kernel: refused, nothing published.
        assert_eq!(
            sigretire_stream_launch(stream, 0),
            SIGRETIRE_ERR_INVALID_ARGUMENT
        );
        let mut status = SIGRETIRE_USE_PENDING;
        assert_eq!(sigretire_stream_query(stream, &mut status), SIGRETIRE_OK);
        assert_eq!(
            status, SIGRETIRE_USE_COMPLETE,
            "the refused launch published nothing"
        );
        assert_eq!(sigretire_stream_launch_empty(stream), SIGRETIRE_OK);
        assert_eq!(sigretire_stream_marker(stream), SIGRETIRE_OK);
    }
    let event = record(stream, 0);
    assert_eq!(event_status(event), SIGRETIRE_USE_PENDING);
    // SAFETY: see the top of the file.
    unsafe {
        assert_eq!(
            sigretire_stream_synchronize_timeout(stream, MS),
            SIGRETIRE_ERR_TIMED_OUT
        );
        assert_eq!(
            sigretire_event_synchronize_timeout(event, 0),
            SIGRETIRE_ERR_TIMED_OUT
        );
        assert_eq!(sigretire_sim_run_until_idle(rig.sim), SIGRETIRE_OK);
        assert_eq!(sigretire_event_synchronize(event), SIGRETIRE_OK);
        assert_eq!(sigretire_stream_synchronize(stream), SIGRETIRE_OK);
    }
    assert_eq!(event_status(event), SIGRETIRE_USE_COMPLETE);
    assert_eq!(stream_status(stream), SIGRETIRE_USE_COMPLETE);
    destroy_event(event);
    destroy_stream(stream);
}

#[test]
fn a_cross_stream_wait_holds_the_waiter_until_the_producers_event() {
    let rig = Rig::new(SIGRETIRE_SIM_THREADED);
    let (producer, consumer) = (rig.stream(), rig.stream());
    let gated = rig.gated_kernel();
    // SAFETY: see the top of the file.
    unsafe { assert_eq!(sigretire_stream_launch(producer, gated), SIGRETIRE_OK) };
    let produced = record(producer, 0);
    // SAFETY: see the top of the file.
    unsafe {
        assert_eq!(
            sigretire_stream_wait_event(consumer, produced),
            SIGRETIRE_OK
        );
        assert_eq!(sigretire_stream_launch_empty(consumer), SIGRETIRE_OK);
        assert_eq!(
            sigretire_stream_synchronize_timeout(consumer, 5 * MS),
            SIGRETIRE_ERR_TIMED_OUT
        );
    }
    assert_eq!(stream_status(consumer), SIGRETIRE_USE_PENDING);
    // SAFETY: see the top of the file.
    unsafe {
        assert_eq!(sigretire_sim_open_gate(rig.sim, gated), SIGRETIRE_OK);
        assert_eq!(sigretire_stream_synchronize(consumer), SIGRETIRE_OK);
    }
    assert_eq!(event_status(produced), SIGRETIRE_USE_COMPLETE);
    let (mut first, mut second) = (0, 0);
    // SAFETY: see the top of the file.
    unsafe {
        assert_eq!(sigretire_stream_id(producer, &mut first), SIGRETIRE_OK);
        assert_eq!(sigretire_stream_id(consumer, &mut second), SIGRETIRE_OK);
        assert_eq!(
            sigretire_sim_open_gate(rig.sim, gated + 1000),
            SIGRETIRE_ERR_INVALID_ARGUMENT
        );
        assert_eq!(sigretire_device_synchronize(rig.device), SIGRETIRE_OK);
    }
    assert_ne!(first, second);
    destroy_event(produced);
    destroy_stream(producer);
    destroy_stream(consumer);
}

#[test]
fn elapsed_time_is_measured_between_timed_events_only() {
    let rig = Rig::new(SIGRETIRE_SIM_THREADED);
    let stream = rig.stream();
    let start = record(stream, 0);
    // SAFETY: see the top of the file.
    unsafe { assert_eq!(sigretire_stream_launch_empty(stream), SIGRETIRE_OK) };
    let stop = record(stream, SIGRETIRE_EVENT_BLOCKING_SYNC);
    let untimed = record(stream, SIGRETIRE_EVENT_DISABLE_TIMING);
    let mut elapsed = u64::MAX;
    // SAFETY: see the top of the file.
    unsafe {
        assert_eq!(sigretire_event_synchronize(untimed), SIGRETIRE_OK);
        assert_eq!(
            sigretire_event_elapsed_ns(start, stop, &mut elapsed),
            SIGRETIRE_OK
        );
        assert_ne!(elapsed, u64::MAX);
        assert_eq!(
            sigretire_event_elapsed_ns(stop, start, &mut elapsed),
            SIGRETIRE_ERR_STOP_BEFORE_START
        );
        assert_eq!(
            sigretire_event_elapsed_ns(start, untimed, &mut elapsed),
            SIGRETIRE_ERR_NOT_TIMED
        );
    }
    // Events of two devices have unrelated clocks.
    let other = Rig::new(SIGRETIRE_SIM_THREADED);
    let other_stream = other.default_stream();
    let elsewhere = record(other_stream, 0);
    // SAFETY: see the top of the file.
    unsafe {
        assert_eq!(sigretire_event_synchronize(elsewhere), SIGRETIRE_OK);
        assert_eq!(
            sigretire_event_elapsed_ns(start, elsewhere, &mut elapsed),
            SIGRETIRE_ERR_DIFFERENT_DEVICES
        );
        // Another simulator's signals are not this stream's to wait on.
        assert_eq!(
            sigretire_stream_wait_event(stream, elsewhere),
            SIGRETIRE_ERR_FOREIGN_SIGNAL_MEMORY
        );
    }
    for event in [start, stop, untimed, elsewhere] {
        destroy_event(event);
    }
    destroy_stream(stream);
    destroy_stream(other_stream);
}

impl Rig {
    /// A new handle of the device's default stream.
    fn default_stream(&self) -> *mut sigretire_stream {
        let mut stream = null_mut();
        // SAFETY: see the top of the file.
        let status = unsafe { sigretire_device_default_stream(self.device, &mut stream) };
        assert_eq!(status, SIGRETIRE_OK);
        stream
    }
}

#[test]
fn a_failed_stream_has_its_own_status_and_the_other_stream_works() {
    let rig = Rig::new(SIGRETIRE_SIM_THREADED);
    let (failing, healthy) = (rig.stream(), rig.stream());
    let gated = rig.gated_kernel();
    let mut failed = true;
    // SAFETY: see the top of the file.
    unsafe {
        assert_eq!(sigretire_stream_launch(failing, gated), SIGRETIRE_OK);
        assert_eq!(sigretire_sim_fail_stream(failing), SIGRETIRE_OK);
        assert_eq!(
            sigretire_stream_synchronize(failing),
            SIGRETIRE_ERR_STREAM_FAILED
        );
        assert_eq!(
            sigretire_stream_has_failed(failing, &mut failed),
            SIGRETIRE_OK
        );
        assert!(failed);
        assert_eq!(
            sigretire_stream_marker(failing),
            SIGRETIRE_ERR_STREAM_FAILED
        );
        let mut event = null_mut();
        assert_eq!(
            sigretire_event_record(failing, 0, &mut event),
            SIGRETIRE_ERR_STREAM_FAILED
        );
        assert!(event.is_null(), "nothing is written on failure");
        assert_eq!(sigretire_stream_launch_empty(healthy), SIGRETIRE_OK);
        assert_eq!(sigretire_stream_synchronize(healthy), SIGRETIRE_OK);
        assert_eq!(
            sigretire_stream_has_failed(healthy, &mut failed),
            SIGRETIRE_OK
        );
        assert!(!failed);
    }
    assert_eq!(stream_status(failing), SIGRETIRE_USE_FAILED);
    destroy_stream(failing);
    destroy_stream(healthy);
}

#[test]
fn a_device_fault_returns_early_on_a_device_that_skips_the_abort() {
    let mut options = sigretire_sim_options {
        size: size_of::<sigretire_sim_options>() as u32,
        queues: 1,
        queue_size: 0,
        flags: 0,
        costs: 0,
    };
    let device_options = sigretire_device_options {
        size: size_of::<sigretire_device_options>() as u32,
        flags: SIGRETIRE_DEVICE_SKIP_ABORT_ON_ERROR,
    };
    let (mut sim, mut device, mut stream) = (null_mut(), null_mut(), null_mut());
    // SAFETY: see the top of the file.
    unsafe {
        assert_eq!(sigretire_sim_options_default(&mut options), SIGRETIRE_OK);
        assert_eq!(sigretire_sim_create(&options, &mut sim), SIGRETIRE_OK);
        assert_eq!(
            sigretire_sim_device_create(sim, &device_options, null(), null(), &mut device),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_device_default_stream(device, &mut stream),
            SIGRETIRE_OK
        );
        assert_eq!(sigretire_stream_launch_empty(stream), SIGRETIRE_OK);
        assert_eq!(sigretire_device_set_error(device, null()), SIGRETIRE_OK);
        // Stepped and never run: only the error state ends the wait.
        assert_eq!(
            sigretire_stream_synchronize(stream),
            SIGRETIRE_ERR_DEVICE_ERROR
        );
        assert_eq!(sigretire_stream_destroy(&mut stream), SIGRETIRE_OK);
        assert_eq!(sigretire_device_destroy(&mut device), SIGRETIRE_OK);
        assert_eq!(sigretire_sim_destroy(&mut sim), SIGRETIRE_OK);
    }
}

#[test]
fn handles_go_in_any_order_and_stale_ones_are_refused() {
    let mut rig = Rig::new(SIGRETIRE_SIM_THREADED);
    let stream = rig.stream();
    let event = record(stream, 0);
    // SAFETY: see the top of the file.
    unsafe {
        // The device and the simulator go first: the stream keeps them.
        assert_eq!(sigretire_device_destroy(&mut rig.device), SIGRETIRE_OK);
        assert_eq!(sigretire_sim_destroy(&mut rig.sim), SIGRETIRE_OK);
        assert_eq!(sigretire_stream_launch_empty(stream), SIGRETIRE_OK);
        assert_eq!(sigretire_stream_synchronize(stream), SIGRETIRE_OK);
    }
    let stale = stream;
    destroy_stream(stream);
    // The event outlives its stream's handle.
    // SAFETY: see the top of the file.
    unsafe { assert_eq!(sigretire_event_synchronize(event), SIGRETIRE_OK) };
    let stale_event = event;
    destroy_event(event);
    let mut status = SIGRETIRE_USE_UNKNOWN;
    // SAFETY: see the top of the file; stale handles are looked up, never read.
    unsafe {
        assert_eq!(
            sigretire_stream_launch_empty(stale),
            SIGRETIRE_ERR_BAD_HANDLE
        );
        assert_eq!(
            sigretire_event_query(stale_event, &mut status),
            SIGRETIRE_ERR_BAD_HANDLE
        );
        let mut again = stale;
        assert_eq!(
            sigretire_stream_destroy(&mut again),
            SIGRETIRE_ERR_BAD_HANDLE
        );
        assert_eq!(sigretire_stream_destroy(null_mut()), SIGRETIRE_ERR_NULL);
        let mut none: *mut sigretire_stream = null_mut();
        assert_eq!(sigretire_stream_destroy(&mut none), SIGRETIRE_OK);
    }
}

#[test]
fn a_handle_of_another_kind_is_refused() {
    let rig = Rig::new(0);
    let stream = rig.stream();
    let mut status = SIGRETIRE_USE_UNKNOWN;
    let mut out = null_mut();
    // SAFETY: see the top of the file; a handle of another kind is looked
    // up, never read.
    unsafe {
        assert_eq!(
            sigretire_event_query(stream.cast(), &mut status),
            SIGRETIRE_ERR_BAD_HANDLE
        );
        assert_eq!(
            sigretire_stream_query(rig.device.cast(), &mut status),
            SIGRETIRE_ERR_BAD_HANDLE
        );
        assert_eq!(
            sigretire_device_stream_create(rig.sim.cast(), null(), &mut out),
            SIGRETIRE_ERR_BAD_HANDLE
        );
        assert_eq!(
            sigretire_sim_fail_stream(rig.device.cast()),
            SIGRETIRE_ERR_BAD_HANDLE
        );
        assert_eq!(
            sigretire_event_record(stream, 4, &mut out.cast()),
            SIGRETIRE_ERR_INVALID_ARGUMENT
        );
    }
    let bad_options = sigretire_stream_options {
        size: size_of::<sigretire_stream_options>() as u32,
        flags: 0,
        wait_timeout_ns: 0,
    };
    let mut wrong_size = bad_options;
    wrong_size.size = 3;
    // SAFETY: see the top of the file.
    unsafe {
        assert_eq!(
            sigretire_device_stream_create(rig.device, &wrong_size, &mut out),
            SIGRETIRE_ERR_STRUCT_SIZE
        );
        assert_eq!(
            sigretire_device_stream_create(rig.device, &bad_options, &mut out),
            SIGRETIRE_OK
        );
    }
    destroy_stream(out);
    destroy_stream(stream);
}

#[test]
fn the_status_names_of_the_queue_layer_are_known() {
    for (status, name) in [
        (SIGRETIRE_ERR_STREAM_FAILED, "SIGRETIRE_ERR_STREAM_FAILED"),
        (SIGRETIRE_ERR_DEVICE_ABORTED, "SIGRETIRE_ERR_DEVICE_ABORTED"),
        (
            SIGRETIRE_ERR_FOREIGN_SIGNAL_MEMORY,
            "SIGRETIRE_ERR_FOREIGN_SIGNAL_MEMORY",
        ),
    ] {
        let mut text = null();
        // SAFETY: see the top of the file.
        let answer = unsafe { sigretire_status_name(status as i32, &mut text) };
        assert_eq!(answer, SIGRETIRE_OK);
        // SAFETY: a static NUL-terminated string of the library.
        assert_eq!(unsafe { std::ffi::CStr::from_ptr(text) }.to_str(), Ok(name));
    }
}

/// Without `libcuda` (this machine's case in CI) the CUDA functions answer a
/// typed status: `SIGRETIRE_ERR_LOAD` or `SIGRETIRE_ERR_NO_GPU` with the
/// backend built in, `SIGRETIRE_ERR_UNSUPPORTED` without it. On a machine
/// with a GPU the legacy default stream (1) is refused before any driver
/// call.
#[test]
fn cuda_answers_a_typed_status_without_a_gpu() {
    let mut device = null_mut();
    // SAFETY: see the top of the file; handle 1 is CU_STREAM_LEGACY, which
    // the backend refuses without using it.
    let status = unsafe {
        sigretire_cuda_device_adopt(
            0,
            std::ptr::without_provenance_mut::<std::ffi::c_void>(1),
            None,
            null_mut(),
            null(),
            null(),
            null(),
            &mut device,
        )
    };
    if cfg!(feature = "cuda-no-version") {
        assert!(
            matches!(
                status,
                SIGRETIRE_ERR_LOAD | SIGRETIRE_ERR_NO_GPU | SIGRETIRE_ERR_INVALID_ARGUMENT
            ),
            "{status:?}"
        );
    } else {
        assert_eq!(status, SIGRETIRE_ERR_UNSUPPORTED);
    }
    assert!(device.is_null());
    // SAFETY: see the top of the file.
    let status = unsafe {
        sigretire_cuda_device_adopt(
            0,
            null_mut(),
            None,
            null_mut(),
            null(),
            null(),
            null(),
            &mut device,
        )
    };
    assert_eq!(
        status, SIGRETIRE_ERR_NULL,
        "the null stream, in every build"
    );
    let rig = Rig::new(0);
    let mut stream = null_mut();
    // SAFETY: see the top of the file: a simulator device is refused
    // before the stream pointer is used.
    let status = unsafe {
        sigretire_cuda_stream_adopt(
            rig.device,
            std::ptr::without_provenance_mut::<std::ffi::c_void>(1),
            None,
            null_mut(),
            null(),
            &mut stream,
        )
    };
    let expected = if cfg!(feature = "cuda-no-version") {
        SIGRETIRE_ERR_WRONG_BACKEND
    } else {
        SIGRETIRE_ERR_UNSUPPORTED
    };
    assert_eq!(status, expected);
}
