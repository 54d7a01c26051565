//! The regression test of docs/design.md section 4 (CLR's
//! Unit_hipStreamSynchronize_ConcurrentSubmitFromOtherThread), on
//! the queue layer over each backend.
//!
//! A kernel spins until the host sets a flag. While the main thread is
//! inside synchronize on that queue (and, in half the runs, three more
//! threads synchronize it too), another thread polls query and submits
//! cross-queue waits on the same queue; only when all those calls have
//! returned is the kernel released. With the fix the calls never wait for
//! the GPU and the test passes. With the old behaviour (waiting for the
//! marker while holding the execution lock: the test double
//! `OldSynchronize`, as the layer has no such mode) the calls block on the
//! lock while the lock holder waits for a kernel that only they can
//! release: a deadlock, which the watchdog turns into a test result by
//! releasing the kernel itself (as the seed's device-side watchdog ends its
//! kernel).
//!
//! Runs on a threaded machine, on the default queue and on a created queue,
//! with 0 and 3 extra synchronizing threads. (cuda-backend/tests/fences.rs
//! runs it on an NVIDIA GPU.)

use crate::support::{Backend, Platform, Retiring, Watchdog, on_every_backend, waiting};
use sigretire_queue::{Error, HostQueue, QueueConfig};
use sigretire_tracker::Status;
use std::time::{Duration, Instant};

#[path = "../../../fences/tests/support/old_synchronize.rs"]
mod old_synchronize;
use old_synchronize::OldSynchronize;

/// How the test's threads synchronize.
#[derive(Clone, Copy, Debug)]
enum Synchronize {
    /// The queue layer's synchronize.
    Fixed,
    /// The old behaviour's, as a test double.
    Old,
}

on_every_backend! {
    adopted;
    fixed_default_queue_no_extra_synchronizers,
    fixed_default_queue_three_extra_synchronizers,
    fixed_created_queue_no_extra_synchronizers,
    fixed_created_queue_three_extra_synchronizers,
    old_behaviour_deadlocks_default_queue_no_extra_synchronizers,
    old_behaviour_deadlocks_default_queue_three_extra_synchronizers,
    old_behaviour_deadlocks_created_queue_no_extra_synchronizers,
    old_behaviour_deadlocks_created_queue_three_extra_synchronizers,
}

/// The fixed behaviour never lets this fire: it only bounds a regression.
const WATCHDOG: Duration = Duration::from_secs(10);
/// The old behaviour deadlocks for certain; the watchdog's length only sets
/// how long the test takes to prove it.
const OLD_BEHAVIOUR_WATCHDOG: Duration = Duration::from_secs(1);
/// Rounds of query + cross-queue wait the other thread runs.
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
    /// What the other thread's queries answered.
    queries: Vec<Status>,
    /// Dependencies its cross-queue waits emitted.
    dependencies: usize,
    /// The longest any of its calls took.
    longest_call: Duration,
    marker_joins: u64,
    state_resets_skipped: u64,
}

fn run<B: Backend>(
    kind: QueueKind,
    extra_syncers: usize,
    how: Synchronize,
    watchdog: Duration,
) -> Outcome {
    let old = OldSynchronize::default();
    let synchronize = |queue: &HostQueue<Retiring<B>>| match how {
        Synchronize::Fixed => queue.synchronize().map_err(Error::from),
        Synchronize::Old => old.synchronize(queue),
    };
    let waiting = |queue: &HostQueue<Retiring<B>>| waiting(queue) + old.waiting();
    let platform = Platform::<B>::threaded();
    let config = QueueConfig {
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

    let (spin, release) = platform.gpu.spin_kernel();
    // An event on another queue that stays pending until the kernel is
    // released, so every cross-queue wait on it needs a real (pinned)
    // dependency.
    producer.launch(spin).unwrap();
    let produced = producer.record_event().unwrap();
    queue.launch(spin).unwrap();

    let watchdog = Watchdog::start(watchdog, {
        let release = release.clone();
        move || release()
    });
    let (extra, other) = std::thread::scope(|scope| {
        let extra: Vec<_> = (0..extra_syncers)
            .map(|_| {
                let (queue, watchdog, synchronize, waiting) =
                    (&queue, &watchdog, &synchronize, &waiting);
                scope.spawn(move || {
                    // Start once the main thread is inside synchronize.
                    while waiting(queue) == 0 && !watchdog.fired() {
                        std::thread::yield_now();
                    }
                    synchronize(queue)
                })
            })
            .collect();
        let other = {
            let (queue, watchdog, produced, release, waiting) =
                (&queue, &watchdog, &produced, &release, &waiting);
            scope.spawn(move || {
                // Start once every synchronizing thread is waiting.
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
                // Only now is the kernel released.
                release();
                (queries, dependencies, longest)
            })
        };
        // The main thread synchronizes.
        let main = synchronize(&queue);
        let extra: Vec<_> = extra.into_iter().map(|t| t.join().unwrap()).collect();
        let other = other.join().unwrap();
        ((main, extra), other)
    });
    let ((main, extra), (queries, dependencies, longest_call)) = (extra, other);
    let watchdog_fired = watchdog.disarm();
    // Whatever happened, everything finishes.
    queue.synchronize().unwrap();
    assert_eq!(queue.query().unwrap(), Status::Complete);
    let stats = queue.stats();
    // Torn down, nothing was done that the hardware would not forgive.
    drop((queue, created, producer, produced, device));
    let violations = platform.gpu.violations();
    assert!(violations.is_empty(), "{violations:#?}");
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

fn fixed_passes<B: Backend>(kind: QueueKind, extra_syncers: usize) {
    let outcome = run::<B>(kind, extra_syncers, Synchronize::Fixed, WATCHDOG);
    assert!(!outcome.watchdog_fired, "deadlock: {outcome:?}");
    assert_eq!(outcome.main, Ok(()));
    assert!(outcome.extra.iter().all(|r| r.is_ok()), "{outcome:?}");
    // The other thread ran while the kernel still spun, and never waited
    // for it.
    assert_eq!(outcome.queries, vec![Status::Pending; ROUNDS]);
    assert_eq!(outcome.dependencies, ROUNDS);
    assert!(outcome.longest_call < Duration::from_secs(1), "{outcome:?}");
    // Every extra synchronizer waited on the main thread's marker, and the
    // reset was skipped because the waits were submitted after it.
    assert_eq!(outcome.marker_joins, extra_syncers as u64);
    assert_eq!(outcome.state_resets_skipped, 1);
}

fn old_behaviour_deadlocks<B: Backend>(kind: QueueKind, extra_syncers: usize) {
    let outcome = run::<B>(
        kind,
        extra_syncers,
        Synchronize::Old,
        OLD_BEHAVIOUR_WATCHDOG,
    );
    assert!(
        outcome.watchdog_fired,
        "the deadlock went undetected: {outcome:?}"
    );
    // The other thread's first call blocked until the watchdog released the
    // kernel (or it could not even start before then).
    assert!(
        outcome.longest_call >= OLD_BEHAVIOUR_WATCHDOG / 2
            || outcome.queries.first() != Some(&Status::Pending),
        "{outcome:?}"
    );
}

fn fixed_default_queue_no_extra_synchronizers<B: Backend>() {
    fixed_passes::<B>(QueueKind::Default, 0);
}

fn fixed_default_queue_three_extra_synchronizers<B: Backend>() {
    fixed_passes::<B>(QueueKind::Default, 3);
}

fn fixed_created_queue_no_extra_synchronizers<B: Backend>() {
    fixed_passes::<B>(QueueKind::Created, 0);
}

fn fixed_created_queue_three_extra_synchronizers<B: Backend>() {
    fixed_passes::<B>(QueueKind::Created, 3);
}

fn old_behaviour_deadlocks_default_queue_no_extra_synchronizers<B: Backend>() {
    old_behaviour_deadlocks::<B>(QueueKind::Default, 0);
}

fn old_behaviour_deadlocks_default_queue_three_extra_synchronizers<B: Backend>() {
    old_behaviour_deadlocks::<B>(QueueKind::Default, 3);
}

fn old_behaviour_deadlocks_created_queue_no_extra_synchronizers<B: Backend>() {
    old_behaviour_deadlocks::<B>(QueueKind::Created, 0);
}

fn old_behaviour_deadlocks_created_queue_three_extra_synchronizers<B: Backend>() {
    old_behaviour_deadlocks::<B>(QueueKind::Created, 3);
}
