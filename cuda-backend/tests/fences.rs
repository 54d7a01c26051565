//! The queue layer (`fences`) on a real NVIDIA GPU: events, synchronize with
//! the CPU wait outside the submission lock, cross-stream waits, and the
//! regression test of DESIGN.md section 4 (CLR #13532) with a spin kernel
//! that waits for a host flag.
//!
//! Each test skips, saying so on stderr, where there is no driver or no
//! device (as in CI). On the device machine run the release binary with
//! `--test-threads=1 --nocapture` (see the crate's README).

mod support;

use cuda_backend::{CudaContext, CudaMemory, CudaQueue, FlagState};
use fences::{Device, DeviceConfig, HostQueue, QueueConfig, SyncWait};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::WAIT;
use tracker::{Config, RetiringTracker, Status};

type Tracker = RetiringTracker<CudaMemory, CudaQueue>;

/// Spin kernels give up after this: the device-side watchdog of the seed's
/// test, so a deadlock ends and is reported rather than hanging.
const SPIN_TIMEOUT: Duration = Duration::from_secs(3);

fn gpu() -> Option<CudaContext> {
    support::gpu("queue-layer")
}

fn tracker(context: &CudaContext) -> Tracker {
    context
        .retiring_tracker(Config::default())
        .expect("a tracker")
        .0
}

fn config(sync_wait: SyncWait) -> QueueConfig {
    QueueConfig {
        sync_wait,
        wait_timeout: Some(WAIT),
        ..QueueConfig::default()
    }
}

fn device(context: &CudaContext, sync_wait: SyncWait) -> Device<Tracker> {
    Device::new(DeviceConfig::default(), tracker(context), config(sync_wait)).expect("a device")
}

#[test]
fn events_record_query_synchronize_and_time_real_kernels() {
    let Some(context) = gpu() else { return };
    let device = device(&context, SyncWait::OutsideLock);
    let queue = device.default_queue();
    let busy = context.register_busy_kernel(Duration::from_micros(200), 1);
    let start = queue.record_event().unwrap();
    queue.launch(busy.raw()).unwrap();
    let stop = queue.record_event().unwrap();
    stop.synchronize().unwrap();
    assert_eq!(stop.query(), Status::Complete);
    assert_eq!(start.query(), Status::Complete);
    let elapsed = start.elapsed_to(&stop).unwrap();
    assert!(
        elapsed >= Duration::from_micros(190) && elapsed < Duration::from_millis(50),
        "a 200 us kernel took {elapsed:?} of GPU time"
    );
    // A completed event answers without reading the signal.
    let reads = queue.with_tracker(|t| {
        let s = tracker::Tracker::stats(t);
        (s.host().loads, s.host().polls, s.host().timestamp_reads)
    });
    for _ in 0..100 {
        assert_eq!(stop.query(), Status::Complete);
        assert_eq!(start.elapsed_to(&stop).unwrap(), elapsed);
    }
    let after = queue.with_tracker(|t| {
        let s = tracker::Tracker::stats(t);
        (s.host().loads, s.host().polls, s.host().timestamp_reads)
    });
    assert_eq!(after, reads);
}

#[test]
fn a_cross_stream_wait_holds_the_consumer_until_the_producer_completes() {
    let Some(context) = gpu() else { return };
    let device = device(&context, SyncWait::OutsideLock);
    let producer = device
        .create_queue(tracker(&context), config(SyncWait::OutsideLock))
        .unwrap();
    let consumer = device.default_queue();
    let flag = context.host_flag().unwrap();
    let spin = context.register_spin_kernel(&flag, SPIN_TIMEOUT);
    producer.launch(spin.raw()).unwrap();
    let produced = producer.record_event().unwrap();
    let wait = consumer.wait_event(&produced).unwrap();
    assert_eq!(
        wait.dependencies(),
        1,
        "a pending producer is a real dependency"
    );
    let after = consumer.record_event().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        after.query(),
        Status::Pending,
        "the consumer waits for the producer"
    );
    flag.release();
    after.synchronize().unwrap();
    assert_eq!(produced.query(), Status::Complete);
    assert_ne!(
        flag.state(),
        FlagState::GaveUp,
        "released by the host, not by the timeout"
    );
    // Now the producer's use is known complete: no dependency at all.
    assert_eq!(consumer.wait_event(&produced).unwrap().dependencies(), 0);
    consumer.synchronize().unwrap();
    producer.synchronize().unwrap();
}

/// What the regression scenario saw.
#[derive(Debug)]
struct Outcome {
    /// The spin kernel ended by its own timeout: nobody released it, so the
    /// other thread never got through (the deadlock).
    deadlocked: bool,
    main: Result<(), fences::Error>,
    extra: Vec<Result<(), fences::Error>>,
    queries: Vec<Status>,
    dependencies: usize,
    longest_call: Duration,
}

const ROUNDS: usize = 5;

fn regression(default_queue: bool, extra_syncers: usize, sync_wait: SyncWait) -> Option<Outcome> {
    let context = gpu()?;
    let device = device(&context, sync_wait);
    let created = device
        .create_queue(tracker(&context), config(sync_wait))
        .unwrap();
    let producer = device
        .create_queue(tracker(&context), config(sync_wait))
        .unwrap();
    let queue: HostQueue<Tracker> = if default_queue {
        device.default_queue().clone()
    } else {
        created.clone()
    };
    let flag = context.host_flag().unwrap();
    let spin = context.register_spin_kernel(&flag, SPIN_TIMEOUT);
    producer.launch(spin.raw()).unwrap();
    let produced = producer.record_event().unwrap();
    queue.launch(spin.raw()).unwrap();

    let started_waiting = |q: &HostQueue<Tracker>| q.stats().cpu_waits_in_progress;
    let gave_up = Arc::new(AtomicBool::new(false));
    let ((main, extra), (queries, dependencies, longest_call, other_saw_give_up)) =
        std::thread::scope(|scope| {
            let extra: Vec<_> = (0..extra_syncers)
                .map(|_| {
                    let queue = &queue;
                    scope.spawn(move || {
                        let begun = Instant::now();
                        while started_waiting(queue) == 0 && begun.elapsed() < WAIT {
                            std::thread::yield_now();
                        }
                        queue.synchronize()
                    })
                })
                .collect();
            let other = {
                let (queue, produced, flag) = (&queue, &produced, &flag);
                scope.spawn(move || {
                    // Wait until every synchronizer is waiting (the old
                    // behaviour waits under the lock without saying so: give up
                    // on the handshake well before the kernel's own timeout).
                    let begun = Instant::now();
                    while started_waiting(queue) < 1 + extra_syncers as u64
                        && begun.elapsed() < SPIN_TIMEOUT / 10
                    {
                        std::thread::yield_now();
                    }
                    let mut queries = Vec::new();
                    let mut dependencies = 0;
                    let mut longest = Duration::ZERO;
                    for _ in 0..ROUNDS {
                        let t = Instant::now();
                        queries.push(queue.query().unwrap());
                        longest = longest.max(t.elapsed());
                        let t = Instant::now();
                        dependencies += queue.wait_event(produced).unwrap().dependencies();
                        longest = longest.max(t.elapsed());
                    }
                    // Only now is the kernel released — unless it already gave
                    // up, which is the deadlock (note it before releasing).
                    let gave_up = flag.state() == FlagState::GaveUp;
                    flag.release();
                    (queries, dependencies, longest, gave_up)
                })
            };
            let main = queue.synchronize();
            let extra: Vec<_> = extra.into_iter().map(|t| t.join().unwrap()).collect();
            ((main, extra), other.join().unwrap())
        });
    gave_up.store(
        other_saw_give_up || flag.state() == FlagState::GaveUp,
        Ordering::Relaxed,
    );
    // Whatever happened, everything finishes.
    queue.synchronize().unwrap();
    producer.synchronize().unwrap();
    Some(Outcome {
        deadlocked: gave_up.load(Ordering::Relaxed),
        main,
        extra,
        queries,
        dependencies,
        longest_call,
    })
}

fn fixed_passes(default_queue: bool, extra_syncers: usize) {
    let Some(outcome) = regression(default_queue, extra_syncers, SyncWait::OutsideLock) else {
        return;
    };
    assert!(!outcome.deadlocked, "deadlock: {outcome:?}");
    assert_eq!(outcome.main, Ok(()));
    assert!(outcome.extra.iter().all(|r| r.is_ok()), "{outcome:?}");
    assert_eq!(
        outcome.queries,
        vec![Status::Pending; ROUNDS],
        "the other thread ran while the kernel spun"
    );
    assert_eq!(outcome.dependencies, ROUNDS);
    assert!(
        outcome.longest_call < Duration::from_millis(500),
        "{outcome:?}"
    );
}

#[test]
fn regression_fixed_default_queue_no_extra_synchronizers() {
    fixed_passes(true, 0);
}

#[test]
fn regression_fixed_default_queue_three_extra_synchronizers() {
    fixed_passes(true, 3);
}

#[test]
fn regression_fixed_created_queue_no_extra_synchronizers() {
    fixed_passes(false, 0);
}

#[test]
fn regression_fixed_created_queue_three_extra_synchronizers() {
    fixed_passes(false, 3);
}

#[test]
fn regression_old_behaviour_deadlocks_until_the_kernel_gives_up() {
    let Some(outcome) = regression(true, 0, SyncWait::UnderLock) else {
        return;
    };
    assert!(
        outcome.deadlocked,
        "the old behaviour should deadlock: {outcome:?}"
    );
    assert!(
        outcome.longest_call >= SPIN_TIMEOUT / 2
            || outcome.queries.first() != Some(&Status::Pending),
        "{outcome:?}"
    );
}
