//! The queue layer (`fences`) on a backend: devices and queues whose
//! trackers sit on the backend's hardware queues, handshakes on state the
//! code under test publishes, and a watchdog.

use super::{Backend, Machine, Retiring};
use sigretire_queue::{Device, HostQueue, QueueConfig};
use sigretire_tracker::{Config, Placement, RetiringTracker, Tracker};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
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

/// Polls `condition` (yielding) until it holds; fails the test after
/// `HANDSHAKE`.
#[track_caller]
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

/// The queue's number of CPU waits in progress right now.
pub fn waiting<T: sigretire_queue::QueueTracker>(queue: &HostQueue<T>) -> u64 {
    queue.stats().cpu_waits_in_progress
}

/// A machine of a backend, and how to make retiring trackers for new queues
/// on it.
pub struct Platform<B: Backend> {
    pub gpu: B,
    pub machine: Machine,
    pub tracker_config: Config,
}

impl<B: Backend> Platform<B> {
    pub fn new(machine: Machine) -> Self {
        Self {
            gpu: B::new(machine),
            machine,
            tracker_config: Config::default(),
        }
    }

    /// A stepped machine: the test runs the GPU.
    pub fn stepped() -> Self {
        Self::new(Machine::default())
    }

    /// A processor thread runs the GPU in real time.
    pub fn threaded() -> Self {
        Self::new(Machine::threaded())
    }

    /// Trackers made from now on keep their signals in device memory.
    pub fn with_device_signals(mut self) -> Self {
        self.tracker_config.signals = Placement::Device;
        self
    }

    /// A retiring tracker on a new hardware queue, with memory of its own.
    pub fn tracker(&self) -> Retiring<B> {
        self.tracker_on(0)
    }

    /// As [`tracker`](Platform::tracker), on GPU `gpu`: its device-memory
    /// signals live in that GPU's VRAM.
    pub fn tracker_on(&self, gpu: u32) -> Retiring<B> {
        let queue = self.gpu.queue_on(gpu);
        RetiringTracker::new(self.gpu.memory(&queue), queue, self.tracker_config).unwrap()
    }

    /// A device on GPU `gpu` whose default queue is a new hardware queue
    /// there.
    pub fn device_on(&self, gpu: u32, queue: QueueConfig) -> Device<Retiring<B>> {
        Device::new(
            sigretire_queue::DeviceConfig::default(),
            self.tracker_on(gpu),
            queue,
        )
        .unwrap()
    }

    /// A device whose default queue is a new hardware queue.
    pub fn device(&self, queue: QueueConfig) -> Device<Retiring<B>> {
        Device::new(
            sigretire_queue::DeviceConfig::default(),
            self.tracker(),
            queue,
        )
        .unwrap()
    }

    /// A created queue of `device` on a new hardware queue.
    pub fn create_queue(
        &self,
        device: &Device<Retiring<B>>,
        queue: QueueConfig,
    ) -> HostQueue<Retiring<B>> {
        device.create_queue(self.tracker(), queue).unwrap()
    }

    /// The hardware queue under `queue`.
    pub fn hardware(queue: &HostQueue<Retiring<B>>) -> B::Queue {
        queue.with_tracker(|t| t.queue().clone())
    }

    /// Runs `f` on another thread while this one drives a stepped GPU
    /// (threaded: just runs `f`).
    pub fn run_while<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        if self.machine.threaded {
            return f();
        }
        std::thread::scope(|scope| self.drive(scope.spawn(f)))
    }

    /// Drives a stepped GPU until the thread `handle` finishes, then joins
    /// it.
    #[track_caller]
    pub fn drive<R>(&self, handle: impl Joinable<R>) -> R {
        let start = Instant::now();
        while !handle.is_finished() {
            assert!(start.elapsed() < HANDSHAKE, "the thread never finished");
            self.gpu.run_all();
            std::thread::yield_now();
        }
        self.gpu.run_all();
        handle.join()
    }
}

/// A thread to join: spawned or scoped.
pub trait Joinable<R> {
    fn is_finished(&self) -> bool;
    fn join(self) -> R;
}

impl<R> Joinable<R> for JoinHandle<R> {
    fn is_finished(&self) -> bool {
        JoinHandle::is_finished(self)
    }

    fn join(self) -> R {
        JoinHandle::join(self).unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

impl<R> Joinable<R> for std::thread::ScopedJoinHandle<'_, R> {
    fn is_finished(&self) -> bool {
        std::thread::ScopedJoinHandle::is_finished(self)
    }

    fn join(self) -> R {
        std::thread::ScopedJoinHandle::join(self)
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

/// A watchdog: unless disarmed within `limit`, it records that it fired and
/// runs `rescue` (which must break whatever deadlock it guards, so the test
/// ends).
pub struct Watchdog {
    disarm: Option<mpsc::Sender<()>>,
    fired: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    pub fn start(limit: Duration, rescue: impl FnOnce() + Send + 'static) -> Self {
        let (disarm, armed) = mpsc::channel::<()>();
        let fired = Arc::new(AtomicBool::new(false));
        let flag = fired.clone();
        let thread = std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = armed.recv_timeout(limit) {
                flag.store(true, Ordering::SeqCst);
                rescue();
            }
        });
        Self {
            disarm: Some(disarm),
            fired,
            thread: Some(thread),
        }
    }

    /// Whether the watchdog has fired so far.
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// Stops the watchdog; returns whether it had fired.
    pub fn disarm(mut self) -> bool {
        self.stop()
    }

    fn stop(&mut self) -> bool {
        if let Some(disarm) = self.disarm.take() {
            let _ = disarm.send(());
        }
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
        self.fired()
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop();
    }
}
