//! The queue layer on CUDA through the C ABI, on a real GPU: a runtime's
//! own `CUstream`s adopted (`sigretire_cuda_device_adopt`,
//! `sigretire_cuda_stream_adopt`), launches, events, elapsed time, a
//! cross-stream wait, the runtime's own work on the adopted stream covered
//! by a marker, every handle destroyed, and each stream handed back through
//! its release callback exactly once. Built with the `cuda` feature; on a
//! machine without a driver or a GPU it says so and passes (the typed
//! refusals there are `tests/streams.rs`'s).
//!
//! Every `unsafe` block calls the C ABI or the driver with pointers to
//! locals, live handles made in the same test, or NULL where the call
//! allows it.

use sigretire_capi::*;
use sigretire_cuda::cudarc::driver::sys;
use sigretire_cuda::{CudaContext, check};
use std::ffi::c_void;
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Counts the release callbacks of one stream.
unsafe extern "C" fn released(object: *mut c_void, user: *mut c_void) {
    let _ = object;
    // SAFETY: `user` is the address of a static counter (see below).
    let count = unsafe { &*(user as *const AtomicUsize) };
    count.fetch_add(1, Ordering::SeqCst);
}

static FIRST_RELEASED: AtomicUsize = AtomicUsize::new(0);
static SECOND_RELEASED: AtomicUsize = AtomicUsize::new(0);

fn ok(status: sigretire_status, what: &str) {
    assert_eq!(status, SIGRETIRE_OK, "{what}");
}

fn use_status(event: *const sigretire_event) -> sigretire_use_status {
    let mut status = SIGRETIRE_USE_PENDING;
    // SAFETY: see the top of the file.
    ok(
        unsafe { sigretire_event_query(event, &mut status) },
        "event query",
    );
    status
}

#[test]
fn a_runtimes_cuda_streams_get_events_and_cross_stream_waits_from_c() {
    if !sigretire_cuda::library_present() {
        eprintln!("no CUDA driver here: nothing to run (the refusals are tests/streams.rs's)");
        return;
    }
    let context = match CudaContext::new(0) {
        Ok(context) => context,
        Err(error) => {
            eprintln!("no GPU here ({error}): nothing to run");
            return;
        }
    };
    context.bind().expect("bind the primary context");
    let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
    let (mut first, mut second) = (null_mut(), null_mut());
    let (mut buffer, bytes) = (0, 64usize << 20);
    // SAFETY: the context is bound; the outputs are live locals.
    unsafe {
        check("cuStreamCreate", sys::cuStreamCreate(&mut first, flags)).unwrap();
        check("cuStreamCreate", sys::cuStreamCreate(&mut second, flags)).unwrap();
        check("cuMemAlloc", sys::cuMemAlloc_v2(&mut buffer, bytes)).unwrap();
    }

    let mut device = null_mut();
    let (mut producer, mut consumer) = (null_mut(), null_mut());
    // SAFETY: see the top of the file; the streams live until both release
    // callbacks ran.
    unsafe {
        ok(
            sigretire_cuda_device_adopt(
                0,
                first.cast(),
                Some(released),
                (&FIRST_RELEASED as *const AtomicUsize).cast_mut().cast(),
                null(),
                null(),
                null(),
                &mut device,
            ),
            "adopt the first stream",
        );
        ok(
            sigretire_device_default_stream(device, &mut producer),
            "its stream",
        );
        ok(
            sigretire_cuda_stream_adopt(
                device,
                second.cast(),
                Some(released),
                (&SECOND_RELEASED as *const AtomicUsize).cast_mut().cast(),
                null(),
                &mut consumer,
            ),
            "adopt the second stream",
        );
    }

    let (mut start, mut stop) = (null_mut(), null_mut());
    // SAFETY: see the top of the file.
    unsafe {
        ok(
            sigretire_event_record(producer, 0, &mut start),
            "record start",
        );
        for _ in 0..16 {
            ok(sigretire_stream_launch_empty(producer), "launch");
        }
        // The runtime's own work on the adopted stream, then a marker that
        // covers it (64 MiB written: long enough to be seen pending).
        check(
            "cuMemsetD8Async",
            sys::cuMemsetD8Async(buffer, 7, bytes, first),
        )
        .unwrap();
        ok(sigretire_stream_marker(producer), "marker");
        ok(
            sigretire_event_record(producer, 0, &mut stop),
            "record stop",
        );
        // The consumer waits for `stop` on the GPU, then launches.
        ok(
            sigretire_stream_wait_event(consumer, stop),
            "cross-stream wait",
        );
        ok(sigretire_stream_launch_empty(consumer), "consumer launch");
        let mut after = null_mut();
        ok(
            sigretire_event_record(consumer, 0, &mut after),
            "record after",
        );
        ok(
            sigretire_stream_synchronize(consumer),
            "consumer synchronize",
        );
        // The consumer's work ran after the producer's stop: complete now
        // without the producer being synchronized.
        assert_eq!(use_status(after), SIGRETIRE_USE_COMPLETE);
        assert_eq!(
            use_status(stop),
            SIGRETIRE_USE_COMPLETE,
            "ordered behind stop"
        );
        ok(sigretire_event_destroy(&mut after), "destroy after");
    }
    // The runtime's memset finished before the marker: every byte is 7.
    let mut host = vec![0u8; bytes];
    // SAFETY: `host` holds `bytes` bytes; the device buffer as many.
    unsafe {
        check(
            "cuMemcpyDtoH",
            sys::cuMemcpyDtoH_v2(host.as_mut_ptr().cast(), buffer, bytes),
        )
        .unwrap();
    }
    assert!(
        host.iter().all(|&byte| byte == 7),
        "the memset ran before the marker completed"
    );

    let mut elapsed = 0;
    // SAFETY: see the top of the file.
    unsafe {
        ok(
            sigretire_event_elapsed_ns(start, stop, &mut elapsed),
            "elapsed",
        );
        ok(sigretire_device_synchronize(device), "device synchronize");
    }
    assert!(elapsed > 0, "16 launches and a 64 MiB memset take GPU time");
    assert!(
        elapsed < 1_000_000_000,
        "{elapsed} ns between two events a few launches apart"
    );
    println!("16 launches and a 64 MiB memset: {elapsed} ns between the C events");

    // Any order: the device first, then the events and streams.
    // SAFETY: see the top of the file.
    unsafe {
        ok(sigretire_device_destroy(&mut device), "destroy device");
        ok(sigretire_event_destroy(&mut start), "destroy start");
        ok(sigretire_event_destroy(&mut stop), "destroy stop");
        ok(sigretire_stream_destroy(&mut producer), "destroy producer");
        ok(sigretire_stream_destroy(&mut consumer), "destroy consumer");
    }
    // The library lets go of each stream once nothing of it runs there any
    // more, possibly on a thread of its own after the last handle: then
    // each callback runs exactly once.
    let deadline = Instant::now() + Duration::from_secs(10);
    while (FIRST_RELEASED.load(Ordering::SeqCst) == 0
        || SECOND_RELEASED.load(Ordering::SeqCst) == 0)
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        FIRST_RELEASED.load(Ordering::SeqCst),
        1,
        "first stream released once"
    );
    assert_eq!(
        SECOND_RELEASED.load(Ordering::SeqCst),
        1,
        "second stream released once"
    );
    // SAFETY: both streams were handed back; the buffer is ours.
    unsafe {
        check("cuStreamDestroy", sys::cuStreamDestroy_v2(first)).unwrap();
        check("cuStreamDestroy", sys::cuStreamDestroy_v2(second)).unwrap();
        check("cuMemFree", sys::cuMemFree_v2(buffer)).unwrap();
    }
}
