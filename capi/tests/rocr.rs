//! The ROCr path of the C ABI against the ROCr stand-in (ROCr's C functions
//! over the simulator, loaded from its own copy of the library): a
//! runtime's own `hsa_queue_t` adopted through `sigretire_rocr_tracker_adopt`,
//! the runtime's packets and the tracker's side by side, waits, errors
//! forwarded from the runtime's callback, a move to another queue; and the
//! answers of a machine without ROCm or without a GPU.

use hsa_sys::{
    AqlSlot, HSA_QUEUE_TYPE_MULTI, HSA_STATUS_ERROR_EXCEPTION, HSA_STATUS_SUCCESS, amd_queue_t,
    hsa_queue_t,
};
use sigretire_capi::*;
use sigretire_hsa::Runtime;
use sigretire_rocr_standin::{Config as Machine, Standin};
use std::ffi::CString;
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicU64, Ordering};

/// The runtime's side: ROCr loaded by the runtime itself, and its own queue.
struct RuntimeQueue {
    runtime: std::sync::Arc<Runtime>,
    raw: *mut hsa_queue_t,
}

impl RuntimeQueue {
    fn create(standin: &Standin) -> Self {
        let runtime = Runtime::load_from(standin.library_path()).unwrap();
        let device = runtime.device(0).unwrap();
        let mut raw: *mut hsa_queue_t = null_mut();
        // SAFETY: a GPU agent of an initialised runtime; no callback.
        let status = unsafe {
            runtime.api().hsa_queue_create(
                device.agent(),
                256,
                HSA_QUEUE_TYPE_MULTI,
                None,
                null_mut(),
                u32::MAX,
                u32::MAX,
                &raw mut raw,
            )
        };
        assert_eq!(status, HSA_STATUS_SUCCESS);
        Self { runtime, raw }
    }

    /// A barrier-AND of the runtime's own, published as a runtime does.
    fn publish_own_barrier(&self) -> u64 {
        // SAFETY: the runtime's live queue: its descriptor begins an
        // amd_queue_t whose write index every producer updates atomically.
        let write = unsafe {
            AtomicU64::from_ptr(&raw mut (*self.raw.cast::<amd_queue_t>()).write_dispatch_id)
        };
        let index = write.fetch_add(1, Ordering::AcqRel);
        // SAFETY: the runtime's live queue; its descriptor is read-only after creation.
        let (ring, size, doorbell) = unsafe {
            let q = &*self.raw;
            (q.base_address.cast::<AqlSlot>(), q.size, q.doorbell_signal)
        };
        // SAFETY: the slot of an index reserved above, inside the ring of `size` slots.
        let slot = unsafe { &*ring.add((index & u64::from(size - 1)) as usize) };
        slot.publish(sigretire_hsa::packet::barrier_and(&[], true, 0).unwrap());
        // SAFETY: the queue's own doorbell signal, of a live queue.
        unsafe {
            self.runtime
                .api()
                .hsa_signal_store_screlease(doorbell, index as i64)
        };
        index
    }

    fn destroy(self) {
        // SAFETY: the runtime's queue, destroyed once, after the tracker
        // let go of it.
        let status = unsafe { self.runtime.api().hsa_queue_destroy(self.raw) };
        assert_eq!(status, HSA_STATUS_SUCCESS);
    }
}

fn open(standin: &Standin) -> *mut sigretire_rocr {
    let path = CString::new(standin.library_path().as_os_str().as_encoded_bytes()).unwrap();
    let mut rocr = null_mut();
    // SAFETY: a C ABI call with locals, live handles of this test, or NULL
    // where the call allows it.
    let status = unsafe { sigretire_rocr_open(path.as_ptr(), &mut rocr) };
    assert_eq!(status, SIGRETIRE_OK);
    rocr
}

fn device_config() -> sigretire_config {
    // SAFETY: all-zero is a valid sigretire_config (plain integers).
    let mut config = unsafe { std::mem::zeroed::<sigretire_config>() };
    config.size = size_of::<sigretire_config>() as u32;
    // SAFETY: a C ABI call with locals, live handles of this test, or NULL
    // where the call allows it.
    unsafe { assert_eq!(sigretire_config_default(&mut config), SIGRETIRE_OK) };
    config.signals = SIGRETIRE_PLACEMENT_DEVICE as u32;
    config
}

#[test]
fn a_runtimes_own_queue_is_tracked_through_the_c_abi() {
    let standin = Standin::new(Machine::default()).unwrap();
    let own = RuntimeQueue::create(&standin);
    let mut rocr = open(&standin);
    let mut count = 0;
    // SAFETY: a C ABI call with locals, live handles of this test, or NULL
    // where the call allows it.
    unsafe { assert_eq!(sigretire_rocr_gpu_count(rocr, &mut count), SIGRETIRE_OK) };
    assert_eq!(count, 1);

    let mut tracker = null_mut();
    let config = device_config();
    // SAFETY: a C ABI call with locals, live handles of this test, or NULL
    // where the call allows it.
    let status = unsafe {
        sigretire_rocr_tracker_adopt(rocr, 0, own.raw.cast(), null(), &config, &mut tracker)
    };
    assert_eq!(status, SIGRETIRE_OK);
    // The tracker keeps ROCr up; the handle may go first.
    // SAFETY: a C ABI call with locals, live handles of this test, or NULL
    // where the call allows it.
    unsafe { assert_eq!(sigretire_rocr_close(&mut rocr), SIGRETIRE_OK) };

    let mut tickets = Vec::new();
    for round in 0..16u32 {
        own.publish_own_barrier();
        let request = sigretire_request {
            flags: if round % 2 == 0 {
                SIGRETIRE_REQUEST_BARRIER
            } else {
                0
            },
            purpose: sigretire_purpose::SIGRETIRE_PURPOSE_CPU_SYNC as u32,
            ..Default::default()
        };
        let work = sigretire_work {
            kind: sigretire_work_kind::SIGRETIRE_WORK_EMPTY as u32,
            ..Default::default()
        };
        let mut acquired = sigretire_acquired::default();
        // SAFETY: a C ABI call with locals, live handles of this test, or NULL
        // where the call allows it.
        let status = unsafe { sigretire_tracker_submit(tracker, &request, &work, &mut acquired) };
        assert_eq!(status, SIGRETIRE_OK);
        assert_eq!(acquired.placement, SIGRETIRE_PLACEMENT_DEVICE as u32);
        tickets.push(acquired.ticket);
    }
    for ticket in &tickets {
        let mut status = SIGRETIRE_USE_UNKNOWN;
        // SAFETY: a C ABI call with locals, live handles of this test, or NULL
        // where the call allows it.
        let result =
            unsafe { sigretire_tracker_wait(tracker, ticket, 10_000_000_000, null(), &mut status) };
        assert_eq!(result, SIGRETIRE_OK);
        assert_eq!(status, SIGRETIRE_USE_COMPLETE);
    }
    let mut hz = 0;
    // SAFETY: a C ABI call with locals, live handles of this test, or NULL
    // where the call allows it.
    unsafe {
        assert_eq!(
            sigretire_tracker_timestamp_frequency(tracker, &mut hz),
            SIGRETIRE_OK
        )
    };
    assert!(hz > 0);

    // A move to another of the runtime's queues: a new generation.
    let second = RuntimeQueue::create(&standin);
    let mut generation = 0;
    // SAFETY: a C ABI call with locals, live handles of this test, or NULL
    // where the call allows it.
    unsafe {
        assert_eq!(
            sigretire_rocr_note_queue_change(tracker, second.raw.cast(), null()),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_tracker_generation(tracker, &mut generation),
            SIGRETIRE_OK
        );
    }
    assert_eq!(generation, 1);

    // ROCr told the runtime's callback of an error; the runtime forwards it.
    // SAFETY: a C ABI call with locals, live handles of this test, or NULL
    // where the call allows it.
    unsafe {
        assert_eq!(
            sigretire_rocr_report_queue_error(tracker, HSA_STATUS_ERROR_EXCEPTION),
            SIGRETIRE_OK
        );
    }
    let mut index = 0;
    // SAFETY: a live tracker and a local.
    let reserved = unsafe { sigretire_tracker_reserve(tracker, &mut index) };
    assert_eq!(reserved, SIGRETIRE_ERR_QUEUE_FAILED);

    // SAFETY: a C ABI call with locals, live handles of this test, or NULL
    // where the call allows it.
    unsafe { assert_eq!(sigretire_tracker_destroy(&mut tracker), SIGRETIRE_OK) };
    assert_eq!(
        standin.calls("hsa_queue_destroy"),
        0,
        "the runtime's queues stay the runtime's"
    );
    own.destroy();
    second.destroy();
    standin.assert_no_violations();
}

#[test]
fn a_gpu_that_is_not_there_and_a_missing_queue_are_errors() {
    let standin = Standin::new(Machine::default()).unwrap();
    let own = RuntimeQueue::create(&standin);
    let mut rocr = open(&standin);
    let mut tracker = null_mut();
    // SAFETY: a C ABI call with locals, live handles of this test, or NULL
    // where the call allows it.
    unsafe {
        assert_eq!(
            sigretire_rocr_tracker_adopt(rocr, 1, own.raw.cast(), null(), null(), &mut tracker),
            SIGRETIRE_ERR_NO_GPU
        );
        assert_eq!(
            sigretire_rocr_tracker_adopt(rocr, 0, null_mut(), null(), null(), &mut tracker),
            SIGRETIRE_ERR_NULL
        );
        let bad = sigretire_config {
            initial_size: 0,
            ..device_config()
        };
        assert_eq!(
            sigretire_rocr_tracker_adopt(rocr, 0, own.raw.cast(), null(), &bad, &mut tracker),
            SIGRETIRE_ERR_INVALID_CONFIG
        );
        assert_eq!(sigretire_rocr_close(&mut rocr), SIGRETIRE_OK);
    }
    assert!(tracker.is_null() && rocr.is_null());
    own.destroy();
}

#[test]
fn rocr_without_a_gpu_answers_no_gpu() {
    let empty = Standin::new(Machine {
        gpus: 0,
        ..Machine::default()
    })
    .unwrap();
    let path = CString::new(empty.library_path().as_os_str().as_encoded_bytes()).unwrap();
    let mut rocr = null_mut();
    // SAFETY: a C ABI call with locals, live handles of this test, or NULL
    // where the call allows it.
    let status = unsafe { sigretire_rocr_open(path.as_ptr(), &mut rocr) };
    assert_eq!(status, SIGRETIRE_ERR_NO_GPU);
    assert!(rocr.is_null());
}

#[test]
fn a_machine_without_rocm_answers_load() {
    let mut rocr = null_mut();
    // SAFETY: a C ABI call with locals, live handles of this test, or NULL
    // where the call allows it.
    let status =
        unsafe { sigretire_rocr_open(c"/nonexistent/libhsa-runtime64.so.1".as_ptr(), &mut rocr) };
    assert_eq!(status, SIGRETIRE_ERR_LOAD);
    assert!(rocr.is_null());
    // The default library: whatever this machine has, an answer, never a
    // crash or a hang.
    // SAFETY: a C ABI call with locals, live handles of this test, or NULL
    // where the call allows it.
    let status = unsafe { sigretire_rocr_open(null(), &mut rocr) };
    match status {
        // SAFETY: a C ABI call with locals, live handles of this test, or NULL
        // where the call allows it.
        SIGRETIRE_OK => unsafe {
            assert_eq!(sigretire_rocr_close(&mut rocr), SIGRETIRE_OK);
        },
        SIGRETIRE_ERR_LOAD | SIGRETIRE_ERR_NO_GPU | SIGRETIRE_ERR_BACKEND => {
            assert!(rocr.is_null())
        }
        other => panic!("sigretire_rocr_open(NULL) answered {other:?}"),
    }
}

/// Debian's real ROCr (CI installs it) on a machine without a GPU: ROCr
/// loads, `hsa_init` fails, and the C caller gets `SIGRETIRE_ERR_NO_GPU`
/// with ROCr's own status in the message.
#[test]
fn debian_rocr_without_a_gpu_answers_no_gpu() {
    const DEBIAN_ROCR: &str = "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1";
    let required =
        std::env::var_os("REQUIRE_DEBIAN_ROCR").is_some_and(|v| !v.is_empty() && v != "0");
    let skip = |why: &str| {
        assert!(!required, "REQUIRE_DEBIAN_ROCR is set, yet {why}");
        eprintln!("SKIPPED: {why}");
    };
    if !std::path::Path::new(DEBIAN_ROCR).exists() {
        return skip(&format!(
            "{DEBIAN_ROCR} not found (install libhsa-runtime64-1)"
        ));
    }
    if std::path::Path::new("/dev/kfd").exists() {
        return skip("/dev/kfd exists: a GPU may be here, so the no-GPU answer cannot be checked");
    }
    let path = CString::new(DEBIAN_ROCR).unwrap();
    let mut rocr = null_mut();
    // SAFETY: a C ABI call with locals, live handles of this test, or NULL
    // where the call allows it.
    let status = unsafe { sigretire_rocr_open(path.as_ptr(), &mut rocr) };
    assert_eq!(status, SIGRETIRE_ERR_NO_GPU);
    assert!(rocr.is_null());
    let mut buffer = [0 as std::ffi::c_char; 1024];
    let mut length = 0;
    // SAFETY: a C ABI call with locals, live handles of this test, or NULL
    // where the call allows it.
    unsafe { sigretire_last_error(buffer.as_mut_ptr(), buffer.len(), &mut length) };
    // SAFETY: a C ABI call with locals, live handles of this test, or NULL
    // where the call allows it.
    let message = unsafe { std::ffi::CStr::from_ptr(buffer.as_ptr()) }.to_string_lossy();
    assert!(message.contains("hsa_init failed"), "{message}");
}

/// Counts the runtime's queues the library handed back (`user` is an
/// `AtomicU64`).
unsafe extern "C" fn count_release(_queue: *mut std::ffi::c_void, user: *mut std::ffi::c_void) {
    // SAFETY: `user` is the test's live counter (it waits for the count
    // before the counter goes).
    let released = unsafe { &*user.cast::<AtomicU64>() };
    released.fetch_add(1, Ordering::AcqRel);
}

/// The queue layer on ROCr through the C ABI: a device over one of the
/// runtime's queues, a second stream over another, a cross-stream wait, an
/// elapsed time and synchronize, on the stand-in's threaded simulator; the
/// queues handed back through the release callback before the runtime
/// destroys them.
#[test]
fn streams_run_on_the_runtimes_own_queues() {
    let released = AtomicU64::new(0);
    let user: *mut std::ffi::c_void = (&raw const released).cast_mut().cast();
    let standin = Standin::new(Machine::default()).unwrap();
    let (first, second) = (
        RuntimeQueue::create(&standin),
        RuntimeQueue::create(&standin),
    );
    let mut rocr = open(&standin);
    let config = device_config();
    let (mut device, mut producer, mut consumer) = (null_mut(), null_mut(), null_mut());
    let (mut start, mut stop) = (null_mut(), null_mut());
    let mut elapsed = 0;
    // SAFETY: a C ABI call with locals, live handles of this test, or NULL
    // where the call allows it; the runtime's queues outlive every handle.
    unsafe {
        assert_eq!(
            sigretire_rocr_device_adopt(
                rocr,
                0,
                first.raw.cast(),
                Some(count_release),
                user,
                null(),
                null(),
                null(),
                &config,
                &mut device
            ),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_device_default_stream(device, &mut producer),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_rocr_stream_adopt(
                device,
                second.raw.cast(),
                Some(count_release),
                user,
                null(),
                null(),
                &mut consumer
            ),
            SIGRETIRE_OK
        );
        // ROCr's queues are the runtime's: the library makes none.
        let mut none = null_mut();
        assert_eq!(
            sigretire_device_stream_create(device, null(), &mut none),
            SIGRETIRE_ERR_UNSUPPORTED
        );
        assert_eq!(
            sigretire_event_record(producer, 0, &mut start),
            SIGRETIRE_OK
        );
        assert_eq!(sigretire_stream_launch_empty(producer), SIGRETIRE_OK);
        assert_eq!(sigretire_event_record(producer, 0, &mut stop), SIGRETIRE_OK);
        assert_eq!(sigretire_stream_wait_event(consumer, stop), SIGRETIRE_OK);
        assert_eq!(sigretire_stream_launch_empty(consumer), SIGRETIRE_OK);
        assert_eq!(
            sigretire_stream_synchronize_timeout(consumer, 10_000_000_000),
            SIGRETIRE_OK
        );
        let mut status = SIGRETIRE_USE_UNKNOWN;
        assert_eq!(sigretire_event_query(stop, &mut status), SIGRETIRE_OK);
        assert_eq!(status, SIGRETIRE_USE_COMPLETE);
        assert_eq!(
            sigretire_event_elapsed_ns(start, stop, &mut elapsed),
            SIGRETIRE_OK
        );
        assert_eq!(sigretire_device_synchronize(device), SIGRETIRE_OK);
        // A queue error ROCr reported to the runtime, forwarded: that
        // stream's queue takes no more work; the other stream keeps going.
        assert_eq!(
            sigretire_rocr_stream_report_queue_error(consumer, HSA_STATUS_ERROR_EXCEPTION),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_stream_launch_empty(consumer),
            SIGRETIRE_ERR_QUEUE_FAILED
        );
        assert_eq!(sigretire_stream_launch_empty(producer), SIGRETIRE_OK);
        assert_eq!(sigretire_stream_synchronize(producer), SIGRETIRE_OK);
        assert_eq!(sigretire_event_destroy(&mut start), SIGRETIRE_OK);
        assert_eq!(sigretire_event_destroy(&mut stop), SIGRETIRE_OK);
        assert_eq!(sigretire_stream_destroy(&mut consumer), SIGRETIRE_OK);
        assert_eq!(sigretire_stream_destroy(&mut producer), SIGRETIRE_OK);
        assert_eq!(sigretire_device_destroy(&mut device), SIGRETIRE_OK);
        assert_eq!(sigretire_rocr_close(&mut rocr), SIGRETIRE_OK);
    }
    // The library lets go of the queues once its last user is done (here
    // at once, or on its teardown thread soon after): only then may the
    // runtime destroy them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while released.load(Ordering::Acquire) < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the queues were never handed back"
        );
        std::thread::yield_now();
    }
    assert_eq!(released.load(Ordering::Acquire), 2, "each queue once");
    second.destroy();
    first.destroy();
}
