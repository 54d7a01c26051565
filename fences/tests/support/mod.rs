//! Shared test helpers: platforms, deterministic handshakes.
#![allow(dead_code)]

pub mod old_synchronize;

#[allow(unused_imports)] // not every test uses it
pub use old_synchronize::OldSynchronize;
use sigretire_queue::sim::{SimPlatform, SimTracker};
use sigretire_queue::{Device, DeviceConfig, HostQueue, QueueConfig};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a handshake may take before the test fails (never reached when
/// the code under test is right; it turns a hang into a failure).
pub const HANDSHAKE: Duration = Duration::from_secs(10);

/// A queue config whose waits give up after `HANDSHAKE`, so a bug fails a
/// test instead of hanging it.
pub fn bounded() -> QueueConfig {
    QueueConfig {
        wait_timeout: Some(HANDSHAKE),
        ..QueueConfig::default()
    }
}

/// The baseline tracker (CLR's original design, `sigretire-baseline`) on a
/// simulated queue: the queue layer runs on it unchanged.
pub type SimBaselineTracker = sigretire_baseline::sim::SimBaseline;

/// A baseline tracker on a new hardware queue of `platform`, with the
/// platform's queue and tracker configurations (as `SimPlatform::tracker`
/// makes a retiring one).
pub fn baseline_tracker(platform: &SimPlatform) -> SimBaselineTracker {
    let queue = platform
        .sim()
        .create_queue(platform.sim_queue_config())
        .unwrap();
    sigretire_baseline::sim::on(platform.sim(), queue, platform.tracker_config())
        .unwrap()
        .0
}

pub fn stepped() -> (SimPlatform, Device<SimTracker>) {
    let platform = SimPlatform::stepped();
    let device = platform.device(DeviceConfig::default(), bounded()).unwrap();
    (platform, device)
}

pub fn stepped_with(device: DeviceConfig, queue: QueueConfig) -> (SimPlatform, Device<SimTracker>) {
    let platform = SimPlatform::stepped();
    let device = platform.device(device, queue).unwrap();
    (platform, device)
}

pub fn threaded() -> (SimPlatform, Device<SimTracker>) {
    let platform = SimPlatform::threaded(sigretire_sim::CostProfile::zero());
    let device = platform.device(DeviceConfig::default(), bounded()).unwrap();
    (platform, device)
}

/// Polls `condition` (yielding) until it holds; fails the test after
/// `HANDSHAKE`. A handshake on state the code under test publishes, not a
/// sleep.
pub fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(
            start.elapsed() < HANDSHAKE,
            "timed out waiting until {what}"
        );
        std::thread::yield_now();
    }
}

/// Runs `f` on a new thread and returns what it returned, failing the test
/// if it has not returned within `HANDSHAKE` (a call that should never
/// block, blocked). Before failing, `unblock` runs (release the spinning
/// kernel, let go of a held lock) so the stuck thread can end rather than
/// outlive the test.
#[track_caller]
pub fn returns_promptly<R: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> R + Send + 'static,
    unblock: impl FnOnce(),
) -> R {
    let handle = std::thread::spawn(f);
    let start = Instant::now();
    while !handle.is_finished() {
        if start.elapsed() >= HANDSHAKE {
            unblock();
            panic!("{what} blocked: it had not returned after {HANDSHAKE:?}");
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    match handle.join() {
        Ok(result) => result,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Runs `f` on a new thread.
pub fn spawn<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> JoinHandle<R> {
    std::thread::spawn(f)
}

/// `queue.synchronize()` on a new thread.
pub fn spawn_synchronize(
    queue: &HostQueue<SimTracker>,
) -> JoinHandle<Result<(), sigretire_queue::SyncError>> {
    let queue = queue.clone();
    spawn(move || queue.synchronize())
}

/// Steps a stepped simulator until `handle` finishes, then joins it.
pub fn drive<R>(platform: &SimPlatform, handle: JoinHandle<R>) -> R {
    let start = Instant::now();
    while !handle.is_finished() {
        assert!(start.elapsed() < HANDSHAKE, "the thread never finished");
        platform.sim().run_until_idle();
        std::thread::yield_now();
    }
    platform.sim().run_until_idle();
    handle.join().unwrap()
}

/// Registers a kernel that spins until `flag` is set.
pub fn spin_kernel(platform: &SimPlatform, flag: &sigretire_sim::HostFlag) -> u64 {
    platform
        .sim()
        .register_kernel(sigretire_sim::Kernel::SpinUntil(flag.clone()))
}

/// The queue's number of CPU waits in progress right now.
pub fn waiting(queue: &HostQueue<SimTracker>) -> u64 {
    queue.stats().cpu_waits_in_progress
}
