//! Waits that sleep (a policy with `interrupt`): on the threaded simulator
//! a blocking event synchronize or queue synchronize publishes a wake
//! packet completing one of the queue's wake signals (interrupt signals)
//! and sleeps on it: a few reads of a device-memory signal instead of a
//! poll loop, a thread that burns next to no CPU, no interrupt signal made
//! after the queue's creation, and polling (counted) when none is free.

mod support;

use sigretire_queue::sim::{HostFlag, Kernel, SimPlatform, SimTracker};
use sigretire_queue::tracker::{Config, Placement, Status, WaitPolicy};
use sigretire_queue::{Device, DeviceConfig, HostQueue, QueueConfig, QueueStats};
use std::time::{Duration, Instant};
use support::*;

/// A threaded simulator with MI300X costs (each device-memory poll is a
/// PCIe read) and device-memory signals.
fn platform() -> SimPlatform {
    SimPlatform::threaded(sigretire_sim::CostProfile::mi300x()).with_tracker_config(Config {
        signals: Placement::Device,
        ..Config::default()
    })
}

/// Batches that close at `commands`, whatever the signals' placement.
fn batches_of(commands: usize) -> sigretire_queue::BatchLimits {
    sigretire_queue::BatchLimits {
        host_signals: commands,
        device_signals: commands,
    }
}

fn blocking() -> QueueConfig {
    QueueConfig {
        wait_policy: WaitPolicy::blocking(),
        ..bounded()
    }
}

fn device(platform: &SimPlatform, queue: QueueConfig) -> Device<SimTracker> {
    platform.device(DeviceConfig::default(), queue).unwrap()
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a live timespec to write.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(rc, 0);
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// Launches a kernel that spins until released, records an event after it,
/// and synchronizes the event on another thread; releases the kernel once
/// `began(stats)` says the wait got where the test wants it, and returns
/// when the synchronize did.
fn synchronize_behind_a_spinning_kernel(
    platform: &SimPlatform,
    queue: &HostQueue<SimTracker>,
    began: impl Fn(&QueueStats) -> bool,
) {
    let flag = HostFlag::new();
    let spin = platform
        .sim()
        .register_kernel(Kernel::SpinUntil(flag.clone()));
    queue.launch(spin).unwrap();
    let event = queue.record_event().unwrap();
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| event.synchronize());
        wait_until("the wait began", || began(&queue.stats()));
        flag.set();
        waiter.join().unwrap().unwrap();
    });
}

fn device_loads(platform: &SimPlatform) -> u64 {
    platform.sim().counters().device.loads
}

#[test]
fn a_blocking_event_synchronize_on_a_long_kernel_sleeps_and_reads_the_signal_at_most_three_times() {
    // A timed event's synchronize also harvests its two timestamps (one
    // more read of its device-memory signal: the pair is one 16-byte
    // access), once, after the wait.
    for (timed, stamp_reads) in [(false, 0), (true, 1)] {
        let platform = platform();
        let config = QueueConfig {
            profiling: timed,
            ..blocking()
        };
        let device = device(&platform, config);
        let queue = device.default_queue();
        assert_eq!(queue.stats().wake_signals, 5, "made with the queue");
        let created = platform.sim().interrupt_stats().created;
        let long = platform
            .sim()
            .register_kernel(Kernel::Duration(Duration::from_millis(5)));
        let mut long_waits = 0;
        for round in 0..5 {
            queue.launch(long).unwrap();
            let event = queue.record_event().unwrap();
            let loads = device_loads(&platform);
            let (cpu, wall) = (thread_cpu(), Instant::now());
            event.synchronize().unwrap();
            let (cpu, wall) = (thread_cpu() - cpu, wall.elapsed());
            assert_eq!(event.query(), Status::Complete);
            let reads = device_loads(&platform) - loads - stamp_reads;
            assert!(
                (1..=3).contains(&reads),
                "timed {timed}, round {round}: {reads} reads of device memory"
            );
            // On a loaded machine the kernel may be nearly done before the
            // wait begins; a wait that spans it must have slept through it.
            if wall >= Duration::from_millis(2) {
                assert!(
                    cpu * 4 < wall,
                    "round {round}: the thread burned {cpu:?} of a {wall:?} wait"
                );
                long_waits += 1;
            }
        }
        assert!(
            long_waits > 0,
            "no wait spanned its kernel: nothing was shown"
        );
        let stats = queue.stats();
        assert_eq!((stats.sleeping_waits, stats.wake_fallbacks), (5, 0));
        assert_eq!(
            platform.sim().interrupt_stats().created,
            created,
            "no interrupt signal made after the queue's creation"
        );
        assert!(platform.sim().interrupt_stats().wakes >= 5);
        assert!(platform.sim().violations().is_empty());
    }
}

#[test]
fn a_blocking_queue_synchronize_sleeps_too() {
    let platform = platform();
    let device = device(&platform, blocking());
    let queue = device.default_queue();
    let long = platform
        .sim()
        .register_kernel(Kernel::Duration(Duration::from_millis(3)));
    queue.launch(long).unwrap();
    queue.synchronize().unwrap();
    assert_eq!(queue.query().unwrap(), Status::Complete);
    assert_eq!(queue.stats().sleeping_waits, 1);
}

#[test]
fn a_spin_policy_never_sleeps_and_makes_no_wake_packet() {
    let platform = platform();
    let device = device(&platform, bounded());
    let queue = device.default_queue();
    let written = queue.hardware_write_index();
    queue.launch_empty().unwrap();
    let event = queue.record_event().unwrap();
    event.synchronize().unwrap();
    assert_eq!(queue.stats().sleeping_waits, 0);
    assert_eq!(
        queue.hardware_write_index() - written,
        2,
        "the kernel and the timed event's marker (device-memory signals), no wake packet"
    );
}

#[test]
fn waits_beyond_the_wake_signals_poll_and_are_counted() {
    let platform = platform();
    let device = device(
        &platform,
        QueueConfig {
            wake_signals: 1,
            ..blocking()
        },
    );
    let queue = device.default_queue();
    let flag = HostFlag::new();
    let spin = platform
        .sim()
        .register_kernel(Kernel::SpinUntil(flag.clone()));
    queue.launch(spin).unwrap();
    let first = queue.record_event().unwrap();
    let second = queue.record_event().unwrap();
    std::thread::scope(|scope| {
        let a = scope.spawn(|| first.synchronize());
        let b = scope.spawn(|| second.synchronize());
        wait_until("both waits began", || {
            let stats = queue.stats();
            stats.sleeping_waits + stats.wake_fallbacks == 2
        });
        flag.set();
        a.join().unwrap().unwrap();
        b.join().unwrap().unwrap();
    });
    let stats = queue.stats();
    assert_eq!((stats.sleeping_waits, stats.wake_fallbacks), (1, 1));
    // The one wake signal is free again once its packet ran: a wait for
    // work that outlasts the spin phase sleeps on it.
    synchronize_behind_a_spinning_kernel(&platform, queue, |stats| {
        stats.sleeping_waits + stats.wake_fallbacks == 3
    });
    assert_eq!(queue.stats().sleeping_waits, 2);
}

#[test]
fn with_the_event_budget_spent_a_queue_has_no_wake_signals_and_its_waits_poll() {
    let platform = platform();
    platform.sim().set_interrupt_budget(2);
    let device = device(&platform, blocking());
    let queue = device.default_queue();
    assert_eq!(queue.stats().wake_signals, 2, "what the budget left");
    let other = platform.create_queue(&device, blocking()).unwrap();
    assert_eq!(other.stats().wake_signals, 0);
    assert!(platform.sim().interrupt_stats().degraded >= 1);
    // Work that outlasts the wait's spin phase: the wait then looks for a
    // wake signal, finds none, and polls.
    synchronize_behind_a_spinning_kernel(&platform, &other, |stats| stats.wake_fallbacks == 1);
    let stats = other.stats();
    assert_eq!((stats.sleeping_waits, stats.wake_fallbacks), (0, 1));
}

#[test]
fn a_sleeper_behind_later_work_still_returns_once_its_event_is_done() {
    // The wake packet is published behind a kernel submitted after the
    // event, which spins: the sleeper's periodic look at the event ends
    // the wait, not the packet.
    let platform = platform();
    let device = device(&platform, blocking());
    let queue = device.default_queue();
    let event = queue.record_event().unwrap();
    let flag = HostFlag::new();
    let spin = platform
        .sim()
        .register_kernel(Kernel::SpinUntil(flag.clone()));
    let later = queue.launch(spin).unwrap();
    wait_until("the event is done", || event.query() == Status::Complete);
    event.synchronize().unwrap();
    assert_eq!(later.status(), sigretire_queue::CommandStatus::Pending);
    flag.set();
    queue.synchronize().unwrap();
}

#[test]
fn a_queue_failing_under_a_sleeper_wakes_it_with_the_failure() {
    let platform = platform();
    let device = device(&platform, blocking());
    let queue = device.default_queue();
    let flag = HostFlag::new();
    let spin = platform
        .sim()
        .register_kernel(Kernel::SpinUntil(flag.clone()));
    queue.launch(spin).unwrap();
    let event = queue.record_event().unwrap();
    let hardware: sigretire_sim::Queue = queue.with_tracker(|t| {
        use sigretire_queue::tracker::Tracker;
        t.queue().clone()
    });
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| event.synchronize());
        wait_until("the wait sleeps", || queue.stats().sleeping_waits == 1);
        hardware.fail();
        assert!(waiter.join().unwrap().is_err(), "a failure, not completion");
    });
    assert_eq!(event.query(), Status::Failed);
}

trait WriteIndex {
    fn hardware_write_index(&self) -> u64;
}

impl WriteIndex for HostQueue<SimTracker> {
    fn hardware_write_index(&self) -> u64 {
        self.with_tracker(|t| {
            use sigretire_queue::tracker::Tracker;
            t.queue().write_index()
        })
    }
}

/// Launches `batches` batches of two 4 ms kernels on a queue of `policy`
/// with `wake_signals`, and returns the device-memory reads (scaled to the
/// kernels' time when the run took longer: see the end) and the
/// simulator's interrupt wake-ups while the completion thread completed
/// them, and the queue's counters.
fn batches_through_the_completion_thread(
    policy: WaitPolicy,
    wake_signals: usize,
    batches: u64,
) -> (u64, u64, QueueStats) {
    let platform = platform();
    let config = QueueConfig {
        wait_policy: policy,
        wake_signals,
        batch_limits: batches_of(2),
        ..bounded()
    };
    let device = device(&platform, config);
    let queue = device.default_queue();
    let long = platform
        .sim()
        .register_kernel(Kernel::Duration(Duration::from_millis(4)));
    let loads = device_loads(&platform);
    let wakes = platform.sim().interrupt_stats().wakes;
    let start = Instant::now();
    let commands: Vec<_> = (0..2 * batches)
        .map(|_| queue.launch(long).unwrap())
        .collect();
    wait_until("the completion thread completed every batch", || {
        queue.stats().handler_batches == batches
    });
    let took = start.elapsed();
    assert!(commands.iter().all(|c| c.status().is_done()));
    let reads = device_loads(&platform) - loads;
    let woken = platform.sim().interrupt_stats().wakes - wakes;
    // The completion thread also looks at every job every 10 ms: a run
    // that took longer than its kernels (a loaded machine, tests running
    // side by side on two cores) may look more, in proportion. Reads are
    // scaled back to the kernels' time, so the bounds below hold for the
    // thread's rules rather than for the machine's load; polling every
    // 200 us would still read 50 times as often.
    let kernels = Duration::from_millis(8 * batches);
    let scaled = (reads as f64 * kernels.as_secs_f64() / took.max(kernels).as_secs_f64()).ceil();
    (scaled as u64, woken, queue.stats())
}

#[test]
fn the_completion_thread_sleeps_on_closed_batches_whatever_the_wait_policy() {
    // Batches of two commands close as they fill and go to the completion
    // thread, which sleeps until the GPU completes their fences instead of
    // polling device memory every few microseconds, on a queue whose waits
    // sleep and on one whose waits spin alike.
    let mut sleeping_reads = 0;
    for policy in [WaitPolicy::blocking(), WaitPolicy::spin()] {
        let (reads, woken, stats) = batches_through_the_completion_thread(policy, 5, 2);
        assert_eq!(stats.wake_signals, 5);
        // A look at each job as it arrives and after each wake, and at
        // every job every 10 ms: about 9.
        assert!(reads <= 16, "{reads} reads of device memory over 16 ms");
        assert!(woken >= 2, "woken {woken} times for two batches");
        assert!(stats.handler_sleeps >= 2, "{stats:?}");
        assert_eq!((stats.sleeping_waits, stats.wake_fallbacks), (0, 0));
        sleeping_reads = sleeping_reads.max(reads);
    }
    // Side by side: without wake signals the thread polls, every 200 us at
    // most (80 times in 16 ms when it gets the core).
    let (polling_reads, woken, stats) =
        batches_through_the_completion_thread(WaitPolicy::spin(), 0, 2);
    assert_eq!((woken, stats.handler_sleeps), (0, 0));
    assert!(
        polling_reads > 2 * sleeping_reads,
        "sleeping {sleeping_reads} reads against polling {polling_reads}"
    );
}

#[test]
fn one_wake_signal_serves_every_batch_in_turn() {
    // Four batches in flight and one wake signal: the first takes it as it
    // closes; each later one gets it from the completion thread when it is
    // about to sleep, if its last packet ran. Such a packet is published
    // behind later work, so the thread also looks after each 1 ms slice,
    // and polls while the signal is still lent.
    let (reads, woken, stats) = batches_through_the_completion_thread(WaitPolicy::spin(), 1, 4);
    assert_eq!(stats.wake_signals, 1);
    assert!(woken >= 2, "woken {woken} times for four batches");
    assert!(stats.handler_sleeps >= 2, "{stats:?}");
    // With a wake signal for each batch it closes with, none of that.
    let (sleeping, woken, _) = batches_through_the_completion_thread(WaitPolicy::spin(), 5, 4);
    assert!(woken >= 4, "woken {woken} times for four batches");
    // 32 ms of kernels: a look at each job as it arrives and after each
    // wake, and at every job every 10 ms.
    assert!(
        sleeping <= 32,
        "{sleeping} reads of device memory over 32 ms"
    );
    assert!(
        sleeping < reads,
        "{sleeping} reads with five, {reads} with one"
    );
}

#[test]
fn wake_signals_are_made_with_the_queue_and_zero_spends_none_of_the_budget() {
    // A spinning queue's waits never sleep, but its completion thread does:
    // it gets the configured five, made once; `wake_signals: 0` makes none.
    let platform = platform();
    let device = device(&platform, bounded());
    let queue = device.default_queue();
    assert_eq!(queue.stats().wake_signals, 5);
    assert_eq!(platform.sim().interrupt_stats().created, 5);
    for _ in 0..3 {
        queue.launch_empty().unwrap();
        queue.record_event().unwrap().synchronize().unwrap();
    }
    let stats = queue.stats();
    assert_eq!((stats.sleeping_waits, stats.wake_fallbacks), (0, 0));
    assert_eq!(
        platform.sim().interrupt_stats().created,
        5,
        "none after creation"
    );
    let none = QueueConfig {
        wake_signals: 0,
        ..bounded()
    };
    let spent_none = platform.create_queue(&device, none).unwrap();
    assert_eq!(spent_none.stats().wake_signals, 0);
    assert_eq!(platform.sim().interrupt_stats().created, 5);
}

#[test]
fn the_sleeping_completion_thread_wakes_as_the_fence_completes() {
    // A batch ends in a kernel spinning until released; once the completion
    // thread sleeps on it, the kernel is released. The thread is woken by
    // the wake packet, not by its 10 ms look at every job (nor by a slice's
    // end: the packet is right behind the fence), so the batch completes
    // within a few wake-ups' time; the median of five rounds is asserted,
    // as one round may lose the core on a loaded machine.
    let platform = platform();
    let config = QueueConfig {
        batch_limits: batches_of(1),
        ..bounded()
    };
    let device = device(&platform, config);
    let queue = device.default_queue();
    let mut after_release = Vec::new();
    for round in 1..=5 {
        let flag = HostFlag::new();
        let spin = platform
            .sim()
            .register_kernel(Kernel::SpinUntil(flag.clone()));
        let sleeps = queue.stats().handler_sleeps;
        let wakes = platform.sim().interrupt_stats().wakes;
        let command = queue.launch(spin).unwrap();
        wait_until("the completion thread slept on the batch", || {
            queue.stats().handler_sleeps > sleeps
        });
        let released = Instant::now();
        flag.set();
        wait_until("the completion thread completed the batch", || {
            queue.stats().handler_batches == round
        });
        after_release.push(released.elapsed());
        assert!(command.status().is_done());
        assert!(
            platform.sim().interrupt_stats().wakes > wakes,
            "round {round}"
        );
    }
    after_release.sort();
    assert!(
        after_release[2] < Duration::from_millis(5),
        "completed {after_release:?} after the fence's release"
    );
}

#[test]
fn a_configured_spin_on_device_memory_is_honoured_before_the_sleep() {
    // `blocking()` spins on host-memory signals only; a policy that asks
    // for a spin on device-memory signals too gets it, each poll a read.
    let spin_first = WaitPolicy {
        device_spin: Duration::from_millis(2),
        ..WaitPolicy::blocking()
    };
    let mut reads = Vec::new();
    for policy in [WaitPolicy::blocking(), spin_first] {
        let platform = platform();
        let config = QueueConfig {
            wait_policy: policy,
            profiling: false,
            ..bounded()
        };
        let device = device(&platform, config);
        let queue = device.default_queue();
        // Far longer than the spin, so a spinning thread the OS preempts
        // for a few milliseconds still finds it running.
        let long = platform
            .sim()
            .register_kernel(Kernel::Duration(Duration::from_millis(50)));
        queue.launch(long).unwrap();
        let event = queue.record_event().unwrap();
        let loads = device_loads(&platform);
        event.synchronize().unwrap();
        reads.push(device_loads(&platform) - loads);
        assert_eq!(queue.stats().sleeping_waits, 1, "it sleeps after the spin");
    }
    // A 1.1 us read per poll for up to 2 ms: hundreds, against at most 3.
    assert!(reads[0] <= 3, "{reads:?}");
    assert!(reads[1] > 100, "{reads:?}");
}

#[test]
fn a_wake_packets_pin_goes_with_the_next_lock_when_the_completion_thread_could_not_take_it() {
    // A batch closes with a wake packet behind its fence, which pins the
    // fence's use while the packet may read its signal. The completion
    // thread finishes the batch while another thread holds the lock, so it
    // cannot let go of that pin itself; the next holder of the lock does,
    // and the drained use re-arms rather than staying parked.
    let platform = SimPlatform::stepped();
    let config = QueueConfig {
        batch_limits: batches_of(2),
        ..bounded()
    };
    let device = platform.device(DeviceConfig::default(), config).unwrap();
    let queue = device.default_queue();
    queue.launch_empty().unwrap();
    queue.launch_empty().unwrap();
    assert_eq!(queue.stats().batches_closed, 1);
    queue.with_tracker(|_| {
        // The GPU runs the batch and the wake packet; the completion thread
        // finishes the batch, the lock held here all along.
        platform.sim().run_until_idle();
        wait_until("the completion thread finished the batch", || {
            queue.batches_in_completion() == 0
        });
    });
    let census = queue.with_tracker(|t| {
        use sigretire_queue::tracker::Tracker;
        t.poll();
        t.census()
    });
    assert_eq!((census.parked, census.pins), (0, 0), "{census:?}");
}
