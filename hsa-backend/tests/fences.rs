//! The queue layer's scenarios (fences/tests) on the ROCr backend: events,
//! synchronize with the CPU wait outside the lock, cross-queue waits, and the
//! regression test of DESIGN.md section 4 — every packet published by the
//! backend's queue, every signal a block of its pools, the GPU the stand-in's
//! simulator.

mod support;

use fences::{CommandStatus, Device, DeviceConfig, Error, HostQueue, QueueConfig, SyncWait};
use hsa_backend::{AqlQueue, QueueOptions, SignalPool};
use rocr_standin::{Config as Machine, Flag, Kernel};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use support::{Gpu, Watchdog};
use tracker::{Config, Placement, RetiringTracker, Status, Tracker};

type Retiring = RetiringTracker<SignalPool, AqlQueue>;

/// How long a handshake may take before the test fails.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// Devices and queues of the queue layer on one stand-in GPU.
struct Platform {
    gpu: Arc<Gpu>,
    machine: Machine,
    tracker_config: Config,
}

impl Platform {
    fn new(machine: Machine) -> Self {
        Self {
            gpu: Arc::new(Gpu::new(machine)),
            machine,
            tracker_config: Config::default(),
        }
    }

    fn stepped() -> Self {
        Self::new(Machine::stepped())
    }

    fn threaded() -> Self {
        Self::new(Machine::default())
    }

    fn with_device_signals(mut self) -> Self {
        self.tracker_config.signals = Placement::Device;
        self
    }

    /// A retiring tracker on a new backend queue, with a pool of its own.
    fn tracker(&self) -> Retiring {
        let queue = AqlQueue::new(
            &self.gpu.device,
            QueueOptions {
                size: 1 << 12,
                ..self.gpu.queue_options(&self.machine)
            },
        )
        .unwrap();
        let pool = Arc::new(SignalPool::new(&self.gpu.device));
        RetiringTracker::new(pool, queue, self.tracker_config).unwrap()
    }

    fn device_config(&self) -> DeviceConfig {
        DeviceConfig {
            timestamp_period: self.gpu.runtime.timestamp_period(),
            ..DeviceConfig::default()
        }
    }

    fn device(&self, queue: QueueConfig) -> Device<Retiring> {
        Device::new(self.device_config(), self.tracker(), queue).unwrap()
    }

    fn create_queue(&self, device: &Device<Retiring>, queue: QueueConfig) -> HostQueue<Retiring> {
        device.create_queue(self.tracker(), queue).unwrap()
    }

    fn spin_kernel(&self) -> (u64, Flag) {
        let flag = self.gpu.standin.new_flag();
        (
            self.gpu.standin.register_kernel(Kernel::SpinUntil(flag)),
            flag,
        )
    }

    fn empty_kernel(&self) -> u64 {
        self.gpu.standin.register_kernel(Kernel::Empty)
    }

    /// Runs `f` on another thread while this one drives a stepped GPU.
    fn run_while<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        if self.machine.threaded {
            return f();
        }
        std::thread::scope(|scope| {
            let worker = scope.spawn(f);
            let start = Instant::now();
            while !worker.is_finished() {
                assert!(start.elapsed() < HANDSHAKE, "the call never returned");
                self.gpu.standin.run_until_idle();
                std::thread::yield_now();
            }
            worker.join().unwrap()
        })
    }

    /// Steps a stepped GPU until `handle` finishes, then joins it.
    fn drive<R>(&self, handle: JoinHandle<R>) -> R {
        let start = Instant::now();
        while !handle.is_finished() {
            assert!(start.elapsed() < HANDSHAKE, "the thread never finished");
            self.gpu.standin.run_until_idle();
            std::thread::yield_now();
        }
        self.gpu.standin.run_until_idle();
        handle.join().unwrap()
    }
}

fn bounded() -> QueueConfig {
    QueueConfig {
        wait_timeout: Some(HANDSHAKE),
        ..QueueConfig::default()
    }
}

fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(
            start.elapsed() < HANDSHAKE,
            "timed out waiting until {what}"
        );
        std::thread::yield_now();
    }
}

fn waiting(queue: &HostQueue<Retiring>) -> u64 {
    queue.stats().cpu_waits_in_progress
}

// --- Events ---------------------------------------------------------------

#[test]
fn elapsed_time_matches_the_ground_truth_in_the_system_domain() {
    let platform = Platform::stepped();
    let device = platform.device(bounded());
    let queue = device.default_queue();
    let kernel = platform.empty_kernel();
    let start = queue.record_event().unwrap();
    for _ in 0..3 {
        queue.launch(kernel).unwrap();
    }
    let stop = queue.record_event().unwrap();
    platform.run_while(|| stop.synchronize()).unwrap();

    let hw = queue.with_tracker(|t| t.queue().clone());
    let truth = |index| platform.gpu.control(&hw).truth(index).unwrap();
    let (first, last) = (truth(start.aql_index()), truth(stop.aql_index()));
    let system = |tick| platform.gpu.standin.gpu_to_system(tick);
    let ns = system(last.end_ts) - system(first.end_ts);
    assert!(ns > 0);
    assert_eq!(start.elapsed_to(&stop).unwrap(), Duration::from_nanos(ns));
    assert_eq!(
        start.timestamps().unwrap(),
        tracker::Timestamps {
            start: system(first.start_ts),
            end: system(first.end_ts)
        }
    );
    platform.gpu.standin.assert_no_violations();
}

#[test]
fn event_synchronize_completes_the_batch_through_its_marker_then_takes_no_lock() {
    let platform = Platform::stepped();
    let device = platform.device(bounded());
    let queue = device.default_queue();
    let kernel = platform.empty_kernel();
    let before: Vec<_> = (0..2).map(|_| queue.launch(kernel).unwrap()).collect();
    let event = queue.record_event().unwrap();
    let after = queue.launch(kernel).unwrap();
    platform.gpu.standin.run_until_idle();

    assert_eq!(event.synchronize(), Ok(()));
    assert!(before.iter().all(|c| c.is_released()));
    assert!(
        !after.is_released(),
        "commands after the marker stay in the batch"
    );
    let locks = queue.stats().lock_acquisitions;
    assert_eq!(event.synchronize(), Ok(()));
    assert_eq!(event.query(), Status::Complete);
    assert_eq!(queue.stats().lock_acquisitions, locks);
    platform.gpu.standin.assert_no_violations();
}

#[test]
fn event_synchronize_waits_for_the_gpu_without_the_lock() {
    let platform = Platform::stepped();
    let device = platform.device(bounded());
    let queue = device.default_queue();
    let (spin, flag) = platform.spin_kernel();
    queue.launch(spin).unwrap();
    let event = queue.record_event().unwrap();
    platform.gpu.standin.run_until_idle();
    assert_eq!(event.query(), Status::Pending);
    std::thread::scope(|scope| {
        let sync = scope.spawn(|| event.synchronize());
        let other = queue.launch(platform.empty_kernel()).unwrap(); // the lock is free
        assert_eq!(other.seq(), 3);
        platform.gpu.standin.set_flag(flag, true);
        let start = Instant::now();
        while !sync.is_finished() {
            assert!(start.elapsed() < HANDSHAKE);
            platform.gpu.standin.run_until_idle();
            std::thread::yield_now();
        }
        assert_eq!(sync.join().unwrap(), Ok(()));
    });
    assert_eq!(event.query(), Status::Complete);
    platform.gpu.standin.assert_no_violations();
}

#[test]
fn a_completed_event_costs_no_vram_read() {
    let platform = Platform::stepped().with_device_signals();
    let device = platform.device(QueueConfig::default());
    let queue = device.default_queue();
    let start = queue.record_event().unwrap();
    queue.launch(platform.empty_kernel()).unwrap();
    let stop = queue.record_event().unwrap();
    platform.run_while(|| stop.synchronize()).unwrap();
    start.synchronize().unwrap();
    let elapsed = start.elapsed_to(&stop).unwrap();
    let reads = || {
        queue.with_tracker(|t| {
            let d = t.stats().device();
            (d.loads, d.polls, d.timestamp_reads)
        })
    };
    let before = reads();
    for _ in 0..10 {
        assert_eq!(start.query(), Status::Complete);
        assert_eq!(stop.query(), Status::Complete);
        assert_eq!(start.elapsed_to(&stop).unwrap(), elapsed);
    }
    assert_eq!(reads(), before);
    platform.gpu.standin.assert_no_violations();
}

// --- Synchronize ------------------------------------------------------------

#[test]
fn the_small_batch_marker_is_waited_for_outside_the_lock() {
    let platform = Platform::stepped();
    let device = platform.device(bounded());
    let queue = device.default_queue().clone();
    let (spin, flag) = platform.spin_kernel();
    let kernel = queue.launch(spin).unwrap();
    let sync = {
        let queue = queue.clone();
        std::thread::spawn(move || queue.synchronize())
    };
    wait_until("the synchronizing thread waits for its marker", || {
        waiting(&queue) == 1
    });
    assert_eq!(queue.query().unwrap(), Status::Pending);
    let (late_spin, late_flag) = platform.spin_kernel();
    let late = queue.launch(late_spin).unwrap();
    assert!(!sync.is_finished());
    platform.gpu.standin.set_flag(flag, true);
    assert_eq!(platform.drive(sync), Ok(()));
    assert_eq!(kernel.status(), CommandStatus::Complete);
    let stats = queue.stats();
    assert_eq!((stats.state_resets, stats.state_resets_skipped), (0, 1));
    assert_eq!(late.status(), CommandStatus::Pending);
    platform.gpu.standin.set_flag(late_flag, true);
    platform.gpu.standin.run_until_idle();
    assert_eq!(queue.query().unwrap(), Status::Complete);
    platform.gpu.standin.assert_no_violations();
}

#[test]
fn a_second_synchronizer_waits_on_the_marker_in_flight() {
    let platform = Platform::stepped();
    let device = platform.device(bounded());
    let queue = device.default_queue().clone();
    let (spin, flag) = platform.spin_kernel();
    queue.launch(spin).unwrap();
    let first = {
        let queue = queue.clone();
        std::thread::spawn(move || queue.synchronize())
    };
    wait_until("the first synchronizer waits", || waiting(&queue) == 1);
    let second = {
        let queue = queue.clone();
        std::thread::spawn(move || queue.synchronize())
    };
    wait_until("the second synchronizer waits too", || waiting(&queue) == 2);
    assert_eq!((queue.stats().marker_joins, queue.stats().markers), (1, 1));
    assert_eq!(queue.query().unwrap(), Status::Pending);
    platform.gpu.standin.set_flag(flag, true);
    assert_eq!(platform.drive(first), Ok(()));
    assert_eq!(platform.drive(second), Ok(()));
    assert_eq!(queue.query().unwrap(), Status::Complete);
    platform.gpu.standin.assert_no_violations();
}

#[test]
fn a_cross_queue_wait_is_a_pinned_barrier_and_work_flows_on_a_threaded_gpu() {
    let platform = Platform::threaded().with_device_signals();
    let device = platform.device(bounded());
    let producer = platform.create_queue(&device, bounded());
    let consumer = device.default_queue();
    let (spin, flag) = platform.spin_kernel();
    let work = producer.launch(spin).unwrap();
    let done = producer.record_event().unwrap();
    let wait = consumer.wait_event(&done).unwrap();
    assert_eq!(wait.dependencies(), 1);
    let after = consumer.launch(platform.empty_kernel()).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        after.status(),
        CommandStatus::Pending,
        "the consumer waits for the producer"
    );
    platform.gpu.standin.set_flag(flag, true);
    consumer.synchronize().unwrap();
    assert_eq!(after.status(), CommandStatus::Complete);
    assert_eq!(work.status(), CommandStatus::Complete);
    assert_eq!(done.query(), Status::Complete);
    // Many more, to cycle every signal through re-arming.
    let kernel = platform.empty_kernel();
    for _ in 0..300 {
        producer.launch(kernel).unwrap();
        let event = producer.record_event().unwrap();
        consumer.wait_event(&event).unwrap();
        consumer.launch(kernel).unwrap();
    }
    consumer.synchronize().unwrap();
    producer.synchronize().unwrap();
    drop((producer, device));
    platform.gpu.standin.assert_no_violations();
}

// --- The regression test (DESIGN.md section 4) -------------------------------

const WATCHDOG: Duration = Duration::from_secs(10);
const OLD_BEHAVIOUR_WATCHDOG: Duration = Duration::from_secs(1);
const ROUNDS: usize = 5;

#[derive(Clone, Copy, Debug)]
enum QueueKind {
    Default,
    Created,
}

#[derive(Debug)]
struct Outcome {
    watchdog_fired: bool,
    main: Result<(), Error>,
    extra: Vec<Result<(), Error>>,
    queries: Vec<Status>,
    dependencies: usize,
    longest_call: Duration,
    marker_joins: u64,
    state_resets_skipped: u64,
}

/// A kernel spins until the host sets a flag; while the main thread (and
/// `extra_syncers` more) synchronize the queue, another thread polls query
/// and submits cross-queue waits on it; only then is the kernel released. A
/// watchdog turns a deadlock into an outcome.
fn run(kind: QueueKind, extra_syncers: usize, sync_wait: SyncWait, watchdog: Duration) -> Outcome {
    let platform = Platform::threaded();
    let config = QueueConfig {
        sync_wait,
        wait_timeout: Some(Duration::from_secs(30)),
        ..QueueConfig::default()
    };
    let device = platform.device(config);
    let created = platform.create_queue(&device, config);
    let producer = platform.create_queue(&device, config);
    let queue = match kind {
        QueueKind::Default => device.default_queue().clone(),
        QueueKind::Created => created.clone(),
    };
    let (spin, flag) = platform.spin_kernel();
    producer.launch(spin).unwrap();
    let produced = producer.record_event().unwrap();
    queue.launch(spin).unwrap();

    let watchdog = Watchdog::start(watchdog, {
        let gpu = platform.gpu.clone();
        move || gpu.standin.set_flag(flag, true)
    });
    let gpu = &platform.gpu;
    let (extra, other) = std::thread::scope(|scope| {
        let extra: Vec<_> = (0..extra_syncers)
            .map(|_| {
                let (queue, watchdog) = (&queue, &watchdog);
                scope.spawn(move || {
                    while waiting(queue) == 0 && !watchdog.fired() {
                        std::thread::yield_now();
                    }
                    queue.synchronize()
                })
            })
            .collect();
        let other = {
            let (queue, watchdog, produced) = (&queue, &watchdog, &produced);
            scope.spawn(move || {
                while waiting(queue) < 1 + extra_syncers as u64 && !watchdog.fired() {
                    std::thread::yield_now();
                }
                let mut queries = Vec::new();
                let mut dependencies = 0;
                let mut longest = Duration::ZERO;
                for _ in 0..ROUNDS {
                    let started = Instant::now();
                    queries.push(queue.query().unwrap());
                    longest = longest.max(started.elapsed());
                    let started = Instant::now();
                    dependencies += queue.wait_event(produced).unwrap().dependencies();
                    longest = longest.max(started.elapsed());
                }
                gpu.standin.set_flag(flag, true); // only now
                (queries, dependencies, longest)
            })
        };
        let main = queue.synchronize();
        let extra: Vec<_> = extra.into_iter().map(|t| t.join().unwrap()).collect();
        let other = other.join().unwrap();
        ((main, extra), other)
    });
    let ((main, extra), (queries, dependencies, longest_call)) = (extra, other);
    let watchdog_fired = watchdog.disarm();
    queue.synchronize().unwrap();
    assert_eq!(queue.query().unwrap(), Status::Complete);
    let stats = queue.stats();
    drop((queue, created, producer, produced, device));
    platform.gpu.standin.assert_no_violations();
    Outcome {
        watchdog_fired,
        main,
        extra,
        queries,
        dependencies,
        longest_call,
        marker_joins: stats.marker_joins,
        state_resets_skipped: stats.state_resets_skipped,
    }
}

fn fixed_passes(kind: QueueKind, extra_syncers: usize) {
    let outcome = run(kind, extra_syncers, SyncWait::OutsideLock, WATCHDOG);
    assert!(!outcome.watchdog_fired, "deadlock: {outcome:?}");
    assert_eq!(outcome.main, Ok(()));
    assert!(outcome.extra.iter().all(|r| r.is_ok()), "{outcome:?}");
    assert_eq!(outcome.queries, vec![Status::Pending; ROUNDS]);
    assert_eq!(outcome.dependencies, ROUNDS);
    assert!(outcome.longest_call < Duration::from_secs(1), "{outcome:?}");
    assert_eq!(outcome.marker_joins, extra_syncers as u64);
    assert_eq!(outcome.state_resets_skipped, 1);
}

fn old_behaviour_deadlocks(kind: QueueKind, extra_syncers: usize) {
    let outcome = run(
        kind,
        extra_syncers,
        SyncWait::UnderLock,
        OLD_BEHAVIOUR_WATCHDOG,
    );
    assert!(
        outcome.watchdog_fired,
        "the deadlock went undetected: {outcome:?}"
    );
    assert!(
        outcome.longest_call >= OLD_BEHAVIOUR_WATCHDOG / 2
            || outcome.queries.first() != Some(&Status::Pending),
        "{outcome:?}"
    );
}

#[test]
fn regression_fixed_default_queue_no_extra_synchronizers() {
    fixed_passes(QueueKind::Default, 0);
}

#[test]
fn regression_fixed_default_queue_three_extra_synchronizers() {
    fixed_passes(QueueKind::Default, 3);
}

#[test]
fn regression_fixed_created_queue_no_extra_synchronizers() {
    fixed_passes(QueueKind::Created, 0);
}

#[test]
fn regression_fixed_created_queue_three_extra_synchronizers() {
    fixed_passes(QueueKind::Created, 3);
}

#[test]
fn regression_old_behaviour_deadlocks_default_queue() {
    old_behaviour_deadlocks(QueueKind::Default, 0);
}

#[test]
fn regression_old_behaviour_deadlocks_created_queue_three_extra_synchronizers() {
    old_behaviour_deadlocks(QueueKind::Created, 3);
}

// --- Stress -------------------------------------------------------------------

/// hip-tests' event-overflow shape on the backend: threads over queues
/// recording, querying, synchronizing and waiting across queues on a
/// threaded GPU, under a progress watchdog; afterwards nothing is left
/// behind and the stand-in saw no violation.
#[test]
fn many_threads_over_many_queues_make_progress_and_leave_nothing_behind() {
    const THREADS: usize = 4;
    const ROUNDS: usize = 500;
    let platform = Platform::threaded().with_device_signals();
    let device = platform.device(bounded());
    let queues: Vec<_> = (0..THREADS)
        .map(|_| platform.create_queue(&device, bounded()))
        .collect();
    let kernel = platform
        .gpu
        .standin
        .register_kernel(Kernel::Duration(Duration::from_micros(5)));
    let progress = std::sync::atomic::AtomicUsize::new(0);
    let watchdog = Watchdog::start(Duration::from_secs(60), || {});
    std::thread::scope(|scope| {
        for (t, queue) in queues.iter().enumerate() {
            let (queues, progress) = (&queues, &progress);
            scope.spawn(move || {
                let neighbour = &queues[(t + 1) % queues.len()];
                let mut events = std::collections::VecDeque::new();
                for round in 0..ROUNDS {
                    queue.launch(kernel).unwrap();
                    let event = queue.record_event().unwrap();
                    let _ = event.query();
                    if round % 5 == 0 {
                        neighbour.wait_event(&event).unwrap();
                    }
                    events.push_back(event);
                    if events.len() > 16 {
                        events.pop_front().unwrap().synchronize().unwrap();
                    }
                    if round % 25 == 24 {
                        queue.synchronize().unwrap();
                    }
                    progress.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                for event in events {
                    event.synchronize().unwrap();
                }
                queue.synchronize().unwrap();
            });
        }
    });
    assert!(!watchdog.disarm(), "no progress for a minute");
    assert_eq!(progress.into_inner(), THREADS * ROUNDS);
    for queue in &queues {
        queue.synchronize().unwrap();
        assert_eq!(queue.query().unwrap(), Status::Complete);
        let census = queue.with_tracker(|t| t.census());
        assert!(census.is_balanced(), "{census:?}");
        assert_eq!(
            queue.with_tracker(|t| t.stats().signals_created) as usize,
            census.created
        );
    }
    drop((queues, device));
    let Platform { gpu, .. } = platform;
    let gpu = Arc::into_inner(gpu).expect("the last handle");
    let standin = {
        let support::Gpu {
            device,
            runtime,
            standin,
        } = gpu;
        drop((device, runtime));
        standin
    };
    assert_eq!(
        standin.census(),
        rocr_standin::Census::default(),
        "nothing leaked"
    );
    standin.assert_no_violations();
}
