//! The tracker's scenarios on a real NVIDIA GPU: fence probing, the read
//! index, CPU waits, pins and events across two streams, timestamps, failure
//! paths, publication order, CUDA's own events, and a table of latencies
//! measured in the same process.
//!
//! Each test skips, saying so on stderr, where there is no driver or no
//! device (as in CI), so `cargo test --workspace` stays green without a GPU.
//! On the device machine, run the release binary with `--test-threads=1
//! --nocapture` (see the crate's README).

mod support;

use sigretire_baseline::BaselineTracker;
use sigretire_cuda::{CudaContext, CudaMemory, CudaQueue, Error};
use sigretire_cuda_testkit::{FlagState, HostFlag, busy_kernel, spin_kernel};
use sigretire_tracker::{
    Acquired, Config, Placement, Purpose, Request, RetiringTracker, Status, Tracker, WaitPolicy,
    Work,
    backend::{HardwareQueue, Publication, QueueError, QueueView, SignalMemory},
};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{RawEvent, WAIT};

/// Spin kernels give up after this, so a test that fails before releasing
/// one cannot keep the GPU busy.
const SPIN_TIMEOUT: Duration = Duration::from_secs(5);

macro_rules! gpu_or_skip {
    () => {
        match support::gpu("GPU") {
            Some(context) => context,
            None => return,
        }
    };
}

/// A tracker (retiring or baseline) on its own stream.
struct Rig<T> {
    tracker: T,
    queue: CudaQueue,
}

type Retiring = RetiringTracker<CudaMemory, CudaQueue>;

fn retiring(context: &Arc<CudaContext>, config: Config) -> Rig<Retiring> {
    let (tracker, queue) = context.retiring_tracker(config).unwrap();
    Rig { tracker, queue }
}

impl<T: Tracker<Memory = CudaMemory, Queue = CudaQueue>> Rig<T> {
    /// Reserves an index, acquires a signal for it (a fence: every use on a
    /// stream is one) and publishes `work`. Under back-pressure, fills the
    /// slot, waits for the use the tracker names, and retries.
    fn submit(&mut self, work: Work<'_>, request: impl Fn(Request) -> Request) -> Acquired {
        loop {
            let index = self.queue.reserve().unwrap();
            match self
                .tracker
                .acquire(request(Request::packet(index).barrier(true)))
            {
                Ok(acquired) => {
                    self.queue.publish(acquired.publication, work).unwrap();
                    return acquired;
                }
                Err(sigretire_tracker::AcquireError::Backpressure { wait_for, .. }) => {
                    self.queue
                        .publish(Publication::unsignalled(index, true), Work::Empty)
                        .unwrap();
                    let waited = self
                        .tracker
                        .waiter()
                        .wait(&wait_for, WAIT, WaitPolicy::spin());
                    assert_eq!(waited, Ok(Status::Complete));
                }
                Err(error) => panic!("acquire: {error}"),
            }
        }
    }

    fn plain(&mut self, work: Work<'_>) -> Acquired {
        self.submit(work, |r| r)
    }

    fn wait(&self, acquired: &Acquired) -> Status {
        self.tracker
            .waiter()
            .wait(&acquired.ticket, WAIT, WaitPolicy::spin())
            .unwrap()
    }

    fn known(&self, acquired: &Acquired) -> Option<Status> {
        self.tracker.known_status(&acquired.ticket).unwrap()
    }
}

fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

#[test]
fn fence_probing_retires_a_batch_of_empty_kernels_with_one_load() {
    let context = gpu_or_skip!();
    let mut rig = retiring(&context, Config::default());
    let started = Instant::now();
    let uses: Vec<_> = (0..64).map(|_| rig.plain(Work::Empty)).collect();
    let submitted = started.elapsed();
    rig.queue.synchronize().unwrap();
    assert_eq!(
        rig.queue.read_index(),
        64,
        "the progress word after the last use"
    );
    let before = rig.tracker.stats();
    rig.tracker.poll();
    for u in &uses {
        assert_eq!(rig.known(u), Some(Status::Complete));
    }
    let stats = rig.tracker.stats().since(&before);
    assert_eq!(
        stats.host().loads,
        1,
        "one load for the whole batch: {stats:?}"
    );
    assert_eq!(
        (stats.probes, stats.retired, stats.retired_by_fence),
        (1, 64, 64)
    );
    assert_eq!(
        rig.tracker.stats().device().loads,
        0,
        "no device memory at all"
    );
    println!(
        "64 empty kernels published in {:.1} us ({:.2} us each), retired by one load",
        micros(submitted),
        micros(submitted) / 64.0
    );
}

#[test]
fn the_read_index_never_passes_unfinished_work() {
    let context = gpu_or_skip!();
    let flag = HostFlag::new(&context).unwrap();
    let spin = spin_kernel(&context, &flag, SPIN_TIMEOUT).unwrap();
    let mut rig = retiring(&context, Config::default());
    let first = rig.plain(Work::Empty);
    let spinning = rig.plain(spin.work());
    let after = rig.plain(Work::Empty);
    assert_eq!(rig.wait(&first), Status::Complete);
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(
        rig.queue.read_index(),
        1,
        "the spinning kernel holds the stream"
    );
    rig.tracker.poll();
    assert_eq!(rig.known(&first), Some(Status::Complete));
    assert_eq!(rig.known(&spinning), None);
    assert_eq!(rig.known(&after), None);
    assert_eq!(
        rig.tracker.query(&after.ticket).unwrap(),
        Status::Pending,
        "its own signal says pending too"
    );
    flag.release();
    assert_eq!(rig.wait(&after), Status::Complete);
    rig.tracker.poll();
    assert_eq!(rig.known(&spinning), Some(Status::Complete));
    assert_eq!(flag.state(), FlagState::Released, "released, not timed out");
    rig.queue.synchronize().unwrap();
    assert_eq!(rig.queue.read_index(), 3);
}

#[test]
fn a_cpu_wait_on_another_thread_sees_the_release_and_proves_the_fence() {
    let context = gpu_or_skip!();
    let flag = HostFlag::new(&context).unwrap();
    let spin = spin_kernel(&context, &flag, SPIN_TIMEOUT).unwrap();
    let mut rig = retiring(&context, Config::default());
    let kernels: Vec<_> = (0..3).map(|_| rig.plain(Work::Empty)).collect();
    let marker = rig.submit(spin.work(), |r| r.purpose(Purpose::CpuSync));
    let waiter = rig.tracker.waiter();
    let ticket = marker.ticket;
    let thread = std::thread::spawn(move || {
        let status = waiter.wait(&ticket, WAIT, WaitPolicy::spin());
        (status, Instant::now())
    });
    std::thread::sleep(Duration::from_millis(20));
    // Meanwhile the owner keeps submitting on the same queue: no lock is held.
    let later = rig.plain(Work::Empty);
    let released = Instant::now();
    flag.release();
    let (status, woke) = thread.join().unwrap();
    assert_eq!(status, Ok(Status::Complete));
    println!(
        "host release -> waiting thread woke: {:.1} us",
        micros(woke.saturating_duration_since(released))
    );
    assert_eq!(rig.wait(&later), Status::Complete);
    rig.tracker.poll();
    for u in &kernels {
        assert_eq!(rig.known(u), Some(Status::Complete));
    }
    assert!(
        rig.tracker.stats().retired_by_cpu_wait >= 1,
        "the waiter's observation counts"
    );
}

#[test]
fn a_gpu_waiter_on_another_stream_pins_the_signal_until_its_consumer_retires() {
    let context = gpu_or_skip!();
    let flag = HostFlag::new(&context).unwrap();
    let spin = spin_kernel(&context, &flag, SPIN_TIMEOUT).unwrap();
    let mut producer = retiring(&context, Config::default());
    let mut consumer = retiring(&context, Config::default());

    let produced = producer.submit(spin.work(), |r| r.purpose(Purpose::GpuWaiter));
    let pin = producer
        .tracker
        .pin(&produced.ticket)
        .unwrap()
        .expect("pending: a dependency");
    assert_eq!(pin.packet_handle(), produced.signal);
    let consuming = consumer.plain(Work::Wait(&[pin.packet_handle()]));
    consumer.tracker.attach(&consuming.ticket, pin).unwrap();
    let after = consumer.plain(Work::Empty);

    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(
        consumer.queue.read_index(),
        0,
        "the consumer stream waits on the GPU"
    );
    assert_eq!(
        consumer.tracker.query(&after.ticket).unwrap(),
        Status::Pending
    );
    let released = Instant::now();
    flag.release();
    assert_eq!(consumer.wait(&after), Status::Complete);
    println!(
        "producer released -> consumer stream's use complete: {:.1} us",
        micros(released.elapsed())
    );

    producer.queue.synchronize().unwrap();
    producer.tracker.poll();
    assert_eq!(producer.tracker.census().parked, 1, "retired but pinned");
    for _ in 0..100 {
        let u = producer.plain(Work::Empty);
        assert_ne!(
            u.signal, produced.signal,
            "a pinned signal is never handed out"
        );
    }
    producer.queue.synchronize().unwrap();
    producer.tracker.poll();
    consumer.tracker.poll(); // the consumer retires: its pin drops
    producer.tracker.reclaim();
    assert_eq!(producer.tracker.census().parked, 0);
    assert!(producer.tracker.census().is_balanced());

    // A use already known complete gives no dependency at all.
    let done = producer.submit(Work::Empty, |r| r.purpose(Purpose::GpuWaiter));
    producer.queue.synchronize().unwrap();
    producer.tracker.poll();
    assert!(producer.tracker.pin(&done.ticket).unwrap().is_none());
    assert_eq!(producer.tracker.stats().dependencies_elided, 1);
}

#[test]
fn a_wait_on_two_streams_needs_both() {
    let context = gpu_or_skip!();
    let (first_flag, second_flag) = (
        HostFlag::new(&context).unwrap(),
        HostFlag::new(&context).unwrap(),
    );
    let first_spin = spin_kernel(&context, &first_flag, SPIN_TIMEOUT).unwrap();
    let second_spin = spin_kernel(&context, &second_flag, SPIN_TIMEOUT).unwrap();
    let mut a = retiring(&context, Config::default());
    let mut b = retiring(&context, Config::default());
    let mut consumer = retiring(&context, Config::default());
    let from_a = a.submit(first_spin.work(), |r| r.purpose(Purpose::GpuWaiter));
    let from_b = b.submit(second_spin.work(), |r| r.purpose(Purpose::GpuWaiter));
    let pins = [
        a.tracker.pin(&from_a.ticket).unwrap().unwrap(),
        b.tracker.pin(&from_b.ticket).unwrap().unwrap(),
    ];
    let handles = [pins[0].packet_handle(), pins[1].packet_handle()];
    let waiting = consumer.plain(Work::Wait(&handles));
    for pin in pins {
        consumer.tracker.attach(&waiting.ticket, pin).unwrap();
    }
    first_flag.release();
    assert_eq!(a.wait(&from_a), Status::Complete);
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(
        consumer.tracker.query(&waiting.ticket).unwrap(),
        Status::Pending
    );
    second_flag.release();
    assert_eq!(consumer.wait(&waiting), Status::Complete);
}

#[test]
fn a_held_event_is_parked_and_comes_back_once_released() {
    let context = gpu_or_skip!();
    let mut rig = retiring(&context, Config::default());
    let event = rig.submit(Work::Empty, |r| r.purpose(Purpose::Event));
    let reference = rig
        .tracker
        .hold(&event.ticket)
        .unwrap()
        .expect("not yet known complete");
    let waiting = reference.clone();
    let thread = std::thread::spawn(move || waiting.wait(WAIT, WaitPolicy::blocking()));
    assert_eq!(thread.join().unwrap(), Ok(Status::Complete));
    rig.queue.synchronize().unwrap();
    rig.tracker.poll();
    assert_eq!(rig.tracker.census().parked, 1);
    assert_eq!(reference.known_status(), Some(Status::Complete));
    for round in 0..200 {
        let u = rig.plain(Work::Empty);
        assert_ne!(u.signal, event.signal);
        if round % 16 == 15 {
            rig.tracker.poll();
        }
    }
    std::thread::spawn(move || drop(reference)).join().unwrap();
    rig.queue.synchronize().unwrap();
    rig.tracker.poll();
    assert_eq!(
        (rig.tracker.census().parked, rig.tracker.stats().unparks),
        (0, 1)
    );
    assert!(rig.tracker.census().is_balanced());
}

/// Submits `uses` empty kernels, synchronizing the stream and polling every
/// `batch`: returns the stats since warm-up (the first quarter).
fn steady_state<T: Tracker<Memory = CudaMemory, Queue = CudaQueue>>(
    rig: &mut Rig<T>,
    uses: usize,
    batch: usize,
) -> (sigretire_tracker::Stats, Duration) {
    let mut warm = None;
    let mut started = Instant::now();
    for round in 0..uses {
        if round == uses / 4 {
            rig.queue.synchronize().unwrap();
            rig.tracker.poll();
            warm = Some(rig.tracker.stats());
            started = Instant::now();
        }
        rig.plain(Work::Empty);
        if round % batch == batch - 1 {
            rig.queue.synchronize().unwrap();
            rig.tracker.poll();
        }
    }
    rig.queue.synchronize().unwrap();
    rig.tracker.poll();
    (rig.tracker.stats().since(&warm.unwrap()), started.elapsed())
}

#[test]
fn steady_state_creates_no_signals_and_loads_one_per_batch() {
    let context = gpu_or_skip!();
    let config = Config {
        initial_size: 256,
        ..Config::default()
    };
    let mut rig = retiring(&context, config);
    let (stats, elapsed) = steady_state(&mut rig, 4096, 64);
    let uses = stats.uses as f64;
    println!(
        "retiring: {} uses after warm-up, {:.4} loads per retired use, {} signals created, \
         {:.2} us per use (publish + sync every 64)",
        stats.uses,
        stats.loads_per_retired_use(Placement::Host),
        stats.signals_created,
        micros(elapsed) / uses
    );
    assert_eq!(stats.signals_created, 0);
    assert_eq!(stats.retired, stats.uses);
    assert!(
        stats.loads_per_retired_use(Placement::Host) <= 1.0 / 32.0,
        "{stats:?}"
    );
    assert!(rig.tracker.census().is_balanced());

    let (tracker, queue) = sigretire_baseline::cuda::baseline_tracker(&context, config).unwrap();
    let mut baseline = Rig { tracker, queue };
    let (stats, elapsed) = steady_state(&mut baseline, 4096, 64);
    println!(
        "baseline: {} uses after warm-up, {:.4} loads per retired use, {} signals created, \
         {:.2} us per use",
        stats.uses,
        stats.loads_per_retired_use(Placement::Host),
        stats.signals_created,
        micros(elapsed) / stats.uses as f64
    );
    assert!(stats.loads_per_retired_use(Placement::Host) >= 1.0);
}

#[test]
fn timestamps_are_the_gpus_own_and_in_stream_order() {
    let context = gpu_or_skip!();
    let work = Duration::from_micros(100);
    let busy = busy_kernel(&context, work, 1).unwrap();
    let mut rig = retiring(&context, Config::default());
    let (start_event, end_event) = (RawEvent::new(&context), RawEvent::new(&context));
    let host_started = Instant::now();
    start_event.record(rig.queue.as_raw());
    let mut events = Vec::new();
    for _ in 0..8 {
        let u = rig.submit(busy.work(), |r| r.purpose(Purpose::Event).timed(true));
        let reference = rig.tracker.hold(&u.ticket).unwrap().unwrap();
        events.push((u, reference));
    }
    end_event.record(rig.queue.as_raw());
    let empty = rig.submit(Work::Empty, |r| r.purpose(Purpose::TimingOnly));
    rig.queue.synchronize().unwrap();
    let host_elapsed = host_started.elapsed();
    rig.tracker.poll();

    let mut previous_end = 0;
    let mut spans = Vec::new();
    for (u, reference) in &events {
        let stamps = rig
            .tracker
            .timestamps(&u.ticket)
            .unwrap()
            .expect("harvested");
        assert_eq!(
            reference.timestamps(),
            Some(stamps),
            "the holder sees the same stamps"
        );
        assert!(
            stamps.start >= previous_end,
            "stream order: {stamps:?} after {previous_end}"
        );
        let ticks = stamps.ticks();
        assert!(
            (work.as_nanos() as u64 - 2_000..50_000_000).contains(&ticks),
            "a 100 us kernel took {ticks} ns"
        );
        spans.push(ticks);
        previous_end = stamps.end;
    }
    let first = rig
        .tracker
        .timestamps(&events[0].0.ticket)
        .unwrap()
        .unwrap();
    let gpu_span = Duration::from_nanos(previous_end - first.start);
    let native = end_event.since(&start_event);
    println!(
        "8 x 100 us kernels: stamps {spans:?} ns; first start to last end {:.1} us; \
         cuEventElapsedTime {:.1} us; host {:.1} us",
        micros(gpu_span),
        micros(native),
        micros(host_elapsed)
    );
    assert!(gpu_span >= 8 * work - Duration::from_micros(16));
    assert!(gpu_span <= host_elapsed, "GPU time fits in the host's");
    assert!(
        native + Duration::from_micros(5) >= gpu_span,
        "the events bracket the kernels"
    );
    assert!(native <= gpu_span + Duration::from_millis(2));
    let empty_stamps = rig.tracker.timestamps(&empty.ticket).unwrap().unwrap();
    assert!(
        empty_stamps.start > 0 && empty_stamps.ticks() < 1_000_000,
        "{empty_stamps:?}"
    );
    assert_eq!(rig.tracker.stats().harvests, 9);

    // A timed wait runs no kernel: its stamps are zeros, never another use's.
    let timed_wait = rig.submit(Work::Wait(&[]), |r| r.timed(true));
    rig.queue.synchronize().unwrap();
    rig.tracker.poll();
    let stamps = rig.tracker.timestamps(&timed_wait.ticket).unwrap();
    assert!(
        stamps.is_none_or(|s| s.start == 0 && s.end == 0),
        "{stamps:?}"
    );
}

#[test]
fn failures_are_typed_and_nothing_reports_a_completion_that_did_not_happen() {
    let context = gpu_or_skip!();
    let mut rig = retiring(&context, Config::default());

    // An unregistered kernel: the publication is refused, its index consumed.
    let index = rig.queue.reserve().unwrap();
    let refused = rig
        .tracker
        .acquire(Request::packet(index).barrier(true))
        .unwrap();
    let error = rig
        .queue
        .publish(refused.publication, Work::Kernel(999))
        .unwrap_err();
    assert!(matches!(error, QueueError::Unsupported(_)), "{error}");
    rig.tracker.fail_submission(&refused.ticket, 0).unwrap();
    assert_eq!(rig.tracker.query(&refused.ticket).unwrap(), Status::Failed);
    let next = rig.plain(Work::Empty);
    assert_eq!(rig.wait(&next), Status::Complete, "the queue keeps working");
    assert!(rig.queue.failure().is_none());
    let bogus = rig
        .queue
        .publish(Publication::unsignalled(u64::MAX - 1, true), Work::Empty)
        .unwrap_err();
    assert!(
        matches!(bogus, QueueError::Unsupported(_)),
        "unreserved: {bogus}"
    );
    let again = rig
        .queue
        .publish(Publication::unsignalled(index, true), Work::Empty)
        .unwrap_err();
    assert!(
        matches!(again, QueueError::Unsupported(_)),
        "published twice: {again}"
    );

    // A CPU wait times out with a typed error and never reports completion.
    let flag = HostFlag::new(&context).unwrap();
    let spin = spin_kernel(&context, &flag, SPIN_TIMEOUT).unwrap();
    let held = rig.plain(spin.work());
    let waited = rig.tracker.waiter().wait(
        &held.ticket,
        Duration::from_millis(50),
        WaitPolicy::blocking(),
    );
    assert_eq!(
        waited,
        Err(sigretire_tracker::WaitError::TimedOut(
            sigretire_tracker::TimedOut(Duration::from_millis(50))
        ))
    );
    assert_eq!(rig.tracker.query(&held.ticket).unwrap(), Status::Pending);
    flag.release();
    assert_eq!(rig.wait(&held), Status::Complete);

    // A spin kernel nobody releases gives up by itself: no GPU hang.
    let forgotten = HostFlag::new(&context).unwrap();
    let short = spin_kernel(&context, &forgotten, Duration::from_millis(20)).unwrap();
    let gave_up = rig.plain(short.work());
    let started = Instant::now();
    rig.queue.synchronize().unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(forgotten.state(), FlagState::GaveUp);
    assert_eq!(
        rig.tracker.query(&gave_up.ticket).unwrap(),
        Status::Complete
    );

    // A real driver error (a launch wider than any block): typed, sticky for
    // the queue, and earlier work still retires.
    let too_wide = busy_kernel(&context, Duration::from_micros(1), 4096).unwrap();
    let before = rig.plain(Work::Empty);
    let index = rig.queue.reserve().unwrap();
    let failing = rig
        .tracker
        .acquire(Request::packet(index).barrier(true))
        .unwrap();
    let error = rig
        .queue
        .publish(failing.publication, too_wide.work())
        .unwrap_err();
    let QueueError::Failed(text) = &error else {
        panic!("expected a queue failure, got {error}");
    };
    println!("provoked: {text}");
    assert!(
        text.contains("cuLaunchKernel failed: CUDA_ERROR_"),
        "{text}"
    );
    let failure = rig.queue.failure().expect("the queue failed");
    assert_eq!(failure.index, index);
    assert!(failure.error.code_name().is_some());
    assert!(
        !failure.error.is_context_lost(),
        "a launch-shape error is not sticky"
    );
    assert!(matches!(rig.queue.reserve(), Err(QueueError::Failed(_))));
    rig.tracker.fail_submission(&failing.ticket, 0).unwrap();
    assert_eq!(rig.tracker.query(&failing.ticket).unwrap(), Status::Failed);
    rig.queue.synchronize().unwrap();
    rig.queue.health().unwrap();
    assert_eq!(rig.tracker.query(&before.ticket).unwrap(), Status::Complete);
    // Move to a new queue: a new generation, and everything works again.
    let fresh = context.create_queue().unwrap();
    rig.tracker.note_queue_change(fresh.clone());
    rig.queue = fresh;
    let after = rig.plain(Work::Empty);
    assert_eq!(rig.wait(&after), Status::Complete);
    rig.tracker.poll();
    assert!(rig.tracker.census().is_balanced());

    // Impossible requests are typed errors before any driver call.
    let memory = CudaMemory::new(&context);
    let mut out = Vec::new();
    let alloc = memory
        .allocate(usize::MAX / 16, Placement::Host, &mut out)
        .unwrap_err();
    assert!(alloc.to_string().contains("do not fit"), "{alloc}");
    assert!(out.is_empty());
    let count = sigretire_cuda::device_count().unwrap();
    assert_eq!(
        CudaContext::new(count).unwrap_err(),
        Error::NoDevice {
            requested: count,
            found: count
        }
    );
}

#[test]
fn publications_run_in_index_order_whatever_order_they_arrive_in() {
    let context = gpu_or_skip!();
    let memory = CudaMemory::new(&context);
    let queue = context.create_queue().unwrap();
    let mut signals = Vec::new();
    memory
        .allocate(1003, Placement::Host, &mut signals)
        .unwrap();
    let signals: Vec<_> = signals.into_iter().map(|(s, _)| s).collect();
    for &s in &signals {
        // SAFETY: the signals come from `memory`, which is alive.
        unsafe { memory.store(s, 1) };
    }
    let load = |i: usize| {
        // SAFETY: as above.
        unsafe { memory.load(signals[i]) }
    };
    let handle = |i: usize| memory.packet_handle(signals[i]);
    let indices: Vec<u64> = (0..3).map(|_| queue.reserve().unwrap()).collect();
    queue
        .publish(
            Publication::untracked(indices[2], true, handle(2)),
            Work::Empty,
        )
        .unwrap();
    queue
        .publish(
            Publication::untracked(indices[1], true, handle(1)),
            Work::Empty,
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(2));
    assert_eq!(
        (queue.read_index(), load(1), load(2), queue.parked()),
        (0, 1, 1, 2)
    );
    queue
        .publish(
            Publication::untracked(indices[0], true, handle(0)),
            Work::Empty,
        )
        .unwrap();
    queue.synchronize().unwrap();
    assert_eq!(
        (
            queue.read_index(),
            load(0),
            load(1),
            load(2),
            queue.parked()
        ),
        (3, 0, 0, 0, 0)
    );

    // Four threads reserve and publish 250 each, racing.
    let queue_for_threads = queue.clone();
    let handles: Arc<Vec<u64>> = Arc::new((3..1003).map(handle).collect());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (queue, handles) = (queue_for_threads.clone(), handles.clone());
            std::thread::spawn(move || {
                for i in 0..250 {
                    let index = queue.reserve().unwrap();
                    if (i + t) % 7 == 0 {
                        std::thread::yield_now();
                    }
                    queue
                        .publish(
                            Publication::untracked(index, true, handles[(index - 3) as usize]),
                            Work::Empty,
                        )
                        .unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    queue.synchronize().unwrap();
    assert_eq!(
        (queue.read_index(), queue.published(), queue.parked()),
        (1003, 1003, 0)
    );
    assert!((3..1003).all(|i| load(i) == 0));
}

#[test]
fn a_device_placement_request_is_served_from_host_memory() {
    let context = gpu_or_skip!();
    let config = Config {
        signals: Placement::Device,
        ..Config::default()
    };
    let mut rig = retiring(&context, config);
    let uses: Vec<_> = (0..20).map(|_| rig.plain(Work::Empty)).collect();
    assert!(uses.iter().all(|u| u.placement == Placement::Host));
    rig.queue.synchronize().unwrap();
    rig.tracker.poll();
    assert!(uses.iter().all(|u| rig.known(u) == Some(Status::Complete)));
    assert_eq!(rig.tracker.stats().device().loads, 0);
    println!(
        "Config::signals = Device on a host-only backend: {} signals created for 20 uses",
        rig.tracker.stats().signals_created
    );
}

#[test]
fn latencies_next_to_cudas_own_in_the_same_process() {
    let context = gpu_or_skip!();
    const N: usize = 2000;
    let mut rig = retiring(&context, Config::default());
    let waiter = rig.tracker.waiter();
    for _ in 0..200 {
        rig.submit(Work::Empty, |r| r.purpose(Purpose::CpuSync));
    }
    rig.queue.synchronize().unwrap();
    rig.tracker.poll();

    // Empty kernel + completion, host spins on the tracker's signal.
    let (mut ours, mut publish) = (Vec::with_capacity(N), Vec::with_capacity(N));
    let mut last = None;
    for i in 0..N {
        let started = Instant::now();
        let acquired = rig.submit(Work::Empty, |r| r.purpose(Purpose::CpuSync));
        publish.push(started.elapsed());
        assert_eq!(
            waiter.wait(&acquired.ticket, WAIT, WaitPolicy::spin()),
            Ok(Status::Complete)
        );
        ours.push(started.elapsed());
        if i % 32 == 31 {
            rig.tracker.poll();
        }
        last = Some(acquired.ticket);
    }
    let last = last.unwrap();
    rig.tracker.poll();

    // CUDA: empty kernel + event record + cuEventSynchronize.
    let event = RawEvent::new(&context);
    let queue = &rig.queue;
    let mut native = Vec::with_capacity(N);
    for _ in 0..N {
        let started = Instant::now();
        queue.launch_empty().unwrap();
        event.record(queue.as_raw());
        event.synchronize();
        native.push(started.elapsed());
    }

    // Queries of completed work, 16 per sample.
    let per_call = |f: &mut dyn FnMut()| {
        let samples: Vec<_> = (0..N)
            .map(|_| {
                let started = Instant::now();
                for _ in 0..16 {
                    f();
                }
                started.elapsed() / 16
            })
            .collect();
        p50(samples)
    };
    let status = per_call(&mut || assert_eq!(waiter.status(&last), Ok(Status::Complete)));
    let query = per_call(&mut || assert_eq!(rig.tracker.query(&last), Ok(Status::Complete)));
    let event_query = per_call(&mut || {
        assert_eq!(
            event.query(),
            sigretire_cuda::cudarc::driver::sys::CUresult::CUDA_SUCCESS
        )
    });
    let stream_sync = per_call(&mut || rig.queue.synchronize().unwrap());
    let context_sync = per_call(&mut || context.synchronize().unwrap());

    // A GPU waiter (cuStreamWaitValue64 on a host word) released by a host store.
    let memory = CudaMemory::new(&context);
    let consumer = context.create_queue().unwrap();
    let mut words = Vec::new();
    memory.allocate(2, Placement::Host, &mut words).unwrap();
    let (word, done) = (words[0].0, words[1].0);
    let mut release = Vec::with_capacity(200);
    for _ in 0..200 {
        // SAFETY: both signals come from `memory`, alive for the loop.
        unsafe {
            memory.store(word, 1);
            memory.store(done, 1);
        }
        let index = consumer.reserve().unwrap();
        consumer
            .publish(
                Publication::untracked(index, true, memory.packet_handle(done)),
                Work::Wait(&[memory.packet_handle(word)]),
            )
            .unwrap();
        std::thread::sleep(Duration::from_micros(200));
        let started = Instant::now();
        // SAFETY: as above.
        unsafe { memory.store(word, 0) };
        let deadline = started + WAIT;
        // SAFETY: as above.
        while unsafe { memory.load(done) } != 0 {
            assert!(
                Instant::now() < deadline,
                "the GPU waiter was never released"
            );
            std::hint::spin_loop();
        }
        release.push(started.elapsed());
    }

    let (ours, native) = (p50(ours), p50(native));
    println!(
        "latencies, p50 of {N} (queries: of 16 calls each), {}",
        context.report()
    );
    let row = |name: &str, d: Duration| println!("  {name:<66} {:>8.3} us", micros(d));
    row(
        "publish: reserve + acquire + empty kernel + completion write",
        p50(publish),
    );
    row(
        "event sync: empty kernel, host spins on the tracker's signal",
        ours,
    );
    row(
        "native: empty kernel + cuEventRecord + cuEventSynchronize",
        native,
    );
    row("event query on a completed use: Waiter::status", status);
    row("event query on a completed use: Tracker::query", query);
    row("native: cuEventQuery on a completed event", event_query);
    row("native: cuStreamSynchronize on completed work", stream_sync);
    row("native: cuCtxSynchronize on completed work", context_sync);
    row(
        "GPU waiter: host store -> cuStreamWaitValue64 released -> seen",
        p50(release),
    );
    println!(
        "  ratios: event sync {:.2} x native; query {:.3} x cuEventQuery; completed-use status {:.3} x cuStreamSynchronize",
        ours.as_secs_f64() / native.as_secs_f64(),
        status.as_secs_f64() / event_query.as_secs_f64(),
        status.as_secs_f64() / stream_sync.as_secs_f64(),
    );
    assert!(ours > Duration::ZERO && native > Duration::ZERO);
}

#[test]
fn the_baseline_runs_on_this_backend_too() {
    let context = gpu_or_skip!();
    let (tracker, queue) =
        sigretire_baseline::cuda::baseline_tracker(&context, Config::default()).unwrap();
    let mut rig: Rig<BaselineTracker<CudaMemory, CudaQueue>> = Rig { tracker, queue };
    let uses: Vec<_> = (0..100).map(|_| rig.plain(Work::Empty)).collect();
    rig.queue.synchronize().unwrap();
    for u in &uses {
        assert_eq!(rig.tracker.query(&u.ticket).unwrap(), Status::Complete);
    }
    assert!(rig.tracker.stats().host().loads >= 100, "one load per use");
}
