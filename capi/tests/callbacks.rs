//! Completion callbacks and deferred release through the C ABI, from Rust
//! (`tests/c/streams_test.c` runs them from C too): a callback runs only
//! after the stepped GPU ran the work, on a thread other than the caller's,
//! in stream order, with the failed outcome on a failed stream and the
//! device-error one in the device's error state, and still once its
//! stream's handles are gone; a release runs once, only after the work
//! retired; registrations on NULL or destroyed handles are refused.
//!
//! Every `unsafe` block here calls the C ABI with pointers to locals, live
//! handles made in the same test, or NULL where the test says so; each
//! user pointer is a `Box` leaked for the callback, which takes it back.

use sigretire_capi::*;
use std::ffi::c_void;
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// A stepped simulator, a device on it, and a stream of the device.
struct Rig {
    sim: *mut sigretire_sim,
    device: *mut sigretire_device,
    stream: *mut sigretire_stream,
}

impl Rig {
    fn new() -> Self {
        let (mut sim, mut device, mut stream) = (null_mut(), null_mut(), null_mut());
        // SAFETY: see the top of the file.
        unsafe {
            assert_eq!(sigretire_sim_create(null(), &mut sim), SIGRETIRE_OK);
            assert_eq!(
                sigretire_sim_device_create(sim, null(), null(), null(), &mut device),
                SIGRETIRE_OK
            );
            assert_eq!(
                sigretire_device_stream_create(device, null(), &mut stream),
                SIGRETIRE_OK
            );
        }
        Self {
            sim,
            device,
            stream,
        }
    }

    /// Registers `logged` with `tag` on the stream's position now.
    fn log_completion(&self, log: &Arc<Log>, tag: usize) {
        // SAFETY: see the top of the file.
        let status =
            unsafe { sigretire_stream_on_complete(self.stream, Some(logged), user(log, tag)) };
        assert_eq!(status, SIGRETIRE_OK);
    }

    fn gated_kernel(&self) -> u64 {
        let mut kernel = 0;
        // SAFETY: see the top of the file.
        let status = unsafe { sigretire_sim_register_gated_kernel(self.sim, &mut kernel) };
        assert_eq!(status, SIGRETIRE_OK);
        // SAFETY: as above.
        let status = unsafe { sigretire_stream_launch(self.stream, kernel) };
        assert_eq!(status, SIGRETIRE_OK);
        kernel
    }

    /// Opens the gate and lets the stepped GPU run everything.
    fn run(&self, kernel: u64) {
        // SAFETY: see the top of the file.
        unsafe {
            assert_eq!(sigretire_sim_open_gate(self.sim, kernel), SIGRETIRE_OK);
            assert_eq!(sigretire_sim_run_until_idle(self.sim), SIGRETIRE_OK);
        }
    }

    fn stats(&self) -> sigretire_callback_stats {
        let mut stats = sigretire_callback_stats::default();
        // SAFETY: see the top of the file.
        let status = unsafe { sigretire_device_callback_stats(self.device, &mut stats) };
        assert_eq!(status, SIGRETIRE_OK);
        stats
    }

    /// The device's callback numbers once `run` callbacks have finished:
    /// the counter moves after a callback returns, so the callback's own
    /// report can reach the test before it does.
    fn stats_once_run(&self, run: u64) -> sigretire_callback_stats {
        let start = Instant::now();
        while self.stats().run < run && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.stats()
    }

    /// Destroys every handle (NULL ones are no-ops).
    fn destroy(&mut self) {
        // SAFETY: see the top of the file.
        unsafe {
            assert_eq!(sigretire_stream_destroy(&mut self.stream), SIGRETIRE_OK);
            assert_eq!(sigretire_device_destroy(&mut self.device), SIGRETIRE_OK);
            assert_eq!(sigretire_sim_destroy(&mut self.sim), SIGRETIRE_OK);
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.destroy();
    }
}

/// What the callbacks of one test saw: (tag, outcome, thread) per call.
#[derive(Default)]
struct Log(Mutex<Vec<(usize, sigretire_completion, ThreadId)>>);

impl Log {
    fn entries(&self) -> Vec<(usize, sigretire_completion, ThreadId)> {
        self.0.lock().unwrap().clone()
    }

    /// Waits up to 10 s for `count` entries.
    fn wait_for(&self, count: usize) -> Vec<(usize, sigretire_completion, ThreadId)> {
        let start = Instant::now();
        while self.0.lock().unwrap().len() < count && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.entries()
    }
}

/// The user pointer of one registration: the log and a tag.
fn user(log: &Arc<Log>, tag: usize) -> *mut c_void {
    Box::into_raw(Box::new((log.clone(), tag))).cast()
}

unsafe extern "C" fn logged(outcome: sigretire_completion, user: *mut c_void) {
    // SAFETY: `user` is the box `user()` leaked for this one call.
    let (log, tag) = *unsafe { Box::from_raw(user.cast::<(Arc<Log>, usize)>()) };
    log.0
        .lock()
        .unwrap()
        .push((tag, outcome, std::thread::current().id()));
}

unsafe extern "C" fn never(_: sigretire_completion, user: *mut c_void) {
    // SAFETY: `user` points to an `AtomicUsize` the test keeps alive.
    unsafe { &*user.cast::<AtomicUsize>() }.fetch_add(1, Ordering::AcqRel);
}

unsafe extern "C" fn counted(user: *mut c_void) {
    // SAFETY: `user` points to an `AtomicUsize` the test keeps alive.
    unsafe { &*user.cast::<AtomicUsize>() }.fetch_add(1, Ordering::AcqRel);
}

fn settle() {
    std::thread::sleep(Duration::from_millis(50));
}

#[test]
fn a_stream_callback_runs_after_the_stepped_gpu_ran_the_work_on_another_thread() {
    let rig = Rig::new();
    let log = Arc::new(Log::default());
    let kernel = rig.gated_kernel();
    rig.log_completion(&log, 7);
    settle();
    assert!(log.entries().is_empty(), "ran before the GPU ran the work");
    rig.run(kernel);
    let entries = log.wait_for(1);
    assert_eq!(entries.len(), 1);
    let (tag, outcome, thread) = entries[0];
    assert_eq!(tag, 7, "the user pointer came back untouched");
    assert_eq!(outcome, SIGRETIRE_COMPLETION_COMPLETE);
    assert_ne!(thread, std::thread::current().id());
    let stats = rig.stats_once_run(1);
    assert_eq!((stats.run, stats.cancelled), (1, 0));
}

#[test]
fn an_event_callback_runs_once_its_work_ran_even_after_the_handle_is_gone() {
    let rig = Rig::new();
    let log = Arc::new(Log::default());
    let kernel = rig.gated_kernel();
    let mut event = null_mut();
    // SAFETY: see the top of the file.
    unsafe {
        assert_eq!(
            sigretire_event_record(rig.stream, 0, &mut event),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_event_on_complete(event, Some(logged), user(&log, 1)),
            SIGRETIRE_OK
        );
        assert_eq!(sigretire_event_destroy(&mut event), SIGRETIRE_OK);
    }
    settle();
    assert!(log.entries().is_empty(), "ran before the GPU ran the work");
    rig.run(kernel);
    let entries = log.wait_for(1);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].1, SIGRETIRE_COMPLETION_COMPLETE);
    assert_ne!(entries[0].2, std::thread::current().id());
}

#[test]
fn callbacks_run_in_stream_order() {
    let rig = Rig::new();
    let log = Arc::new(Log::default());
    let kernel = rig.gated_kernel();
    const COUNT: usize = 64;
    for tag in 0..COUNT {
        // SAFETY: see the top of the file.
        unsafe {
            assert_eq!(sigretire_stream_launch_empty(rig.stream), SIGRETIRE_OK);
            let status = if tag % 2 == 0 {
                sigretire_stream_on_complete(rig.stream, Some(logged), user(&log, tag))
            } else {
                let mut event = null_mut();
                assert_eq!(
                    sigretire_event_record(rig.stream, 0, &mut event),
                    SIGRETIRE_OK
                );
                let status = sigretire_event_on_complete(event, Some(logged), user(&log, tag));
                assert_eq!(sigretire_event_destroy(&mut event), SIGRETIRE_OK);
                status
            };
            assert_eq!(status, SIGRETIRE_OK);
        }
    }
    settle();
    assert!(log.entries().is_empty());
    rig.run(kernel);
    let entries = log.wait_for(COUNT);
    let tags: Vec<usize> = entries.iter().map(|entry| entry.0).collect();
    assert_eq!(tags, (0..COUNT).collect::<Vec<_>>());
    assert!(
        entries
            .iter()
            .all(|entry| entry.1 == SIGRETIRE_COMPLETION_COMPLETE)
    );
}

#[test]
fn a_failed_streams_callbacks_run_with_the_failed_outcome() {
    let rig = Rig::new();
    let log = Arc::new(Log::default());
    rig.gated_kernel();
    rig.log_completion(&log, 0);
    // SAFETY: see the top of the file.
    unsafe {
        assert_eq!(sigretire_sim_fail_stream(rig.stream), SIGRETIRE_OK);
        assert_eq!(sigretire_sim_run_until_idle(rig.sim), SIGRETIRE_OK);
    }
    let entries = log.wait_for(1);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].1, SIGRETIRE_COMPLETION_FAILED);
    // A stream known failed registers nothing more.
    // SAFETY: see the top of the file.
    unsafe {
        assert_eq!(
            sigretire_stream_synchronize(rig.stream),
            SIGRETIRE_ERR_STREAM_FAILED
        );
        let called = AtomicUsize::new(0);
        let status = sigretire_stream_on_complete(
            rig.stream,
            Some(never),
            (&raw const called).cast_mut().cast::<c_void>(),
        );
        assert_eq!(status, SIGRETIRE_ERR_STREAM_FAILED);
        settle();
        assert_eq!(called.load(Ordering::Acquire), 0, "a refused callback ran");
    }
    assert_eq!(log.entries().len(), 1);
}

#[test]
fn a_destroyed_streams_callback_still_runs_as_its_work_completes() {
    let mut rig = Rig::new();
    let log = Arc::new(Log::default());
    let kernel = rig.gated_kernel();
    rig.log_completion(&log, 0);
    // SAFETY: see the top of the file.
    unsafe {
        assert_eq!(sigretire_stream_destroy(&mut rig.stream), SIGRETIRE_OK);
        assert_eq!(sigretire_device_destroy(&mut rig.device), SIGRETIRE_OK);
    }
    settle();
    assert!(log.entries().is_empty());
    rig.run(kernel);
    let entries = log.wait_for(1);
    assert_eq!(entries.len(), 1, "a destroyed stream lost its callback");
    assert_eq!(entries[0].1, SIGRETIRE_COMPLETION_COMPLETE);
}

#[test]
fn the_device_error_state_runs_pending_callbacks_with_it() {
    let rig = Rig::new();
    let log = Arc::new(Log::default());
    rig.gated_kernel();
    rig.log_completion(&log, 0);
    // SAFETY: see the top of the file.
    unsafe {
        assert_eq!(sigretire_device_set_error(rig.device, null()), SIGRETIRE_OK);
    }
    let entries = log.wait_for(1);
    assert_eq!(entries.len(), 1, "the error state left a callback pending");
    assert_eq!(entries[0].1, SIGRETIRE_COMPLETION_DEVICE_ERROR);
}

#[test]
fn a_release_runs_once_only_after_the_work_retired() {
    let rig = Rig::new();
    let released = AtomicUsize::new(0);
    let user = (&raw const released).cast_mut().cast::<c_void>();
    // Nothing submitted yet: released at once, before the call returns.
    // SAFETY: see the top of the file; `released` outlives the rig.
    unsafe {
        assert_eq!(
            sigretire_stream_release_after(rig.stream, Some(counted), user),
            SIGRETIRE_OK
        );
    }
    assert_eq!(released.swap(0, Ordering::AcqRel), 1);

    let kernel = rig.gated_kernel();
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            sigretire_stream_release_after(rig.stream, Some(counted), user),
            SIGRETIRE_OK
        );
        // Later work is not covered, and does not hold the release back.
        assert_eq!(sigretire_stream_launch_empty(rig.stream), SIGRETIRE_OK);
        assert_eq!(
            sigretire_stream_synchronize_timeout(rig.stream, 0),
            SIGRETIRE_ERR_TIMED_OUT
        );
        assert_eq!(sigretire_sim_run_until_idle(rig.sim), SIGRETIRE_OK);
    }
    settle();
    assert_eq!(
        released.load(Ordering::Acquire),
        0,
        "released before the work ran"
    );
    rig.run(kernel);
    // SAFETY: as above.
    let status = unsafe { sigretire_stream_synchronize(rig.stream) };
    assert_eq!(status, SIGRETIRE_OK);
    let start = Instant::now();
    while released.load(Ordering::Acquire) == 0 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(1));
    }
    settle();
    assert_eq!(released.load(Ordering::Acquire), 1);
    drop(rig);
    assert_eq!(released.load(Ordering::Acquire), 1, "released twice");
}

#[test]
fn registrations_on_null_or_destroyed_handles_are_refused() {
    let mut rig = Rig::new();
    let called = AtomicUsize::new(0);
    let user = (&raw const called).cast_mut().cast::<c_void>();
    let mut event = null_mut();
    let mut stats = sigretire_callback_stats::default();
    // SAFETY: see the top of the file; the destroyed handles are only
    // looked up in the table of live handles, never read.
    unsafe {
        assert_eq!(
            sigretire_event_record(rig.stream, 0, &mut event),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_stream_on_complete(rig.stream, None, user),
            SIGRETIRE_ERR_NULL
        );
        assert_eq!(
            sigretire_event_on_complete(event, None, user),
            SIGRETIRE_ERR_NULL
        );
        assert_eq!(
            sigretire_stream_release_after(rig.stream, None, user),
            SIGRETIRE_ERR_NULL
        );
        assert_eq!(
            sigretire_stream_on_complete(null(), Some(never), user),
            SIGRETIRE_ERR_NULL
        );
        assert_eq!(
            sigretire_event_on_complete(null(), Some(never), user),
            SIGRETIRE_ERR_NULL
        );
        assert_eq!(
            sigretire_stream_release_after(null(), Some(counted), user),
            SIGRETIRE_ERR_NULL
        );
        assert_eq!(
            sigretire_device_callback_stats(rig.device, null_mut()),
            SIGRETIRE_ERR_NULL
        );
        stats.size = 4;
        assert_eq!(
            sigretire_device_callback_stats(rig.device, &mut stats),
            SIGRETIRE_ERR_STRUCT_SIZE
        );

        let stale_event = event;
        assert_eq!(sigretire_event_destroy(&mut event), SIGRETIRE_OK);
        let stale_stream = rig.stream;
        let stale_device = rig.device;
        assert_eq!(sigretire_stream_destroy(&mut rig.stream), SIGRETIRE_OK);
        assert_eq!(sigretire_device_destroy(&mut rig.device), SIGRETIRE_OK);
        assert_eq!(
            sigretire_event_on_complete(stale_event, Some(never), user),
            SIGRETIRE_ERR_BAD_HANDLE
        );
        assert_eq!(
            sigretire_stream_on_complete(stale_stream, Some(never), user),
            SIGRETIRE_ERR_BAD_HANDLE
        );
        assert_eq!(
            sigretire_stream_release_after(stale_stream, Some(counted), user),
            SIGRETIRE_ERR_BAD_HANDLE
        );
        stats.size = size_of::<sigretire_callback_stats>() as u32;
        assert_eq!(
            sigretire_device_callback_stats(stale_device, &mut stats),
            SIGRETIRE_ERR_BAD_HANDLE
        );
        // A stream handle is not an event handle.
        assert_eq!(
            sigretire_event_on_complete(stale_stream.cast(), Some(never), user),
            SIGRETIRE_ERR_BAD_HANDLE
        );
    }
    settle();
    assert_eq!(called.load(Ordering::Acquire), 0, "a refused callback ran");
}
