//! The hybrid wait (`WaitPolicy::hybrid`), the tracker's own and through
//! the queue layer, on a threaded machine whose kernels take a known time: it never answers
//! before the work is done (the ground truth says the event's packet
//! completed), never misses a completion (every wait ends well before its
//! timeout), learns the queue's kernel length and dozes to it (a long doze
//! on one wake armed as it starts, a short one rechecking on a timer), and
//! a wrong guess costs a wake-up or a recheck (a guess far too long) or a
//! blocking wait's wake (far too short), never the guess.

use crate::support::{Backend, Machine, Platform, Retiring, Rig, bounded, on_every_backend};
use sigretire_queue::{HostQueue, QueueConfig, QueueTracker};
use sigretire_tracker::{Config, Request, Status, Tracker, WaitPolicy, Work};
use std::time::{Duration, Instant};

on_every_backend! {
    the_trackers_own_hybrid_wait_learns_the_kernel_length_and_is_never_early,
    a_hybrid_synchronize_learns_the_queues_kernels_and_dozes_on_one_wake,
    a_wrong_guess_costs_a_recheck_or_a_wake_never_the_guess,
}

fn hybrid() -> QueueConfig {
    QueueConfig {
        wait_policy: WaitPolicy::hybrid(),
        ..bounded()
    }
}

/// Launches `kernel` (about `length` long), records an event and
/// synchronizes it; checks the answer against the ground truth and answers
/// how long the synchronize took from the launch.
fn launch_and_wait<B: Backend, T: QueueTracker>(
    platform: &Platform<B>,
    queue: &HostQueue<T>,
    hw: &B::Queue,
    kernel: u64,
    length: Duration,
) -> Duration {
    let started = Instant::now();
    queue.launch(kernel).unwrap();
    let event = queue.record_event().unwrap();
    event.synchronize().unwrap();
    let took = started.elapsed();
    // Never early: the machine ran the event's packet, and the kernel's
    // time passed.
    let truth = platform
        .gpu
        .truth(hw, event.aql_index().expect("recorded"))
        .unwrap();
    assert!(truth.completed, "answered before the work completed");
    assert!(
        took >= length,
        "answered after {took:?} of a {length:?} kernel"
    );
    assert_eq!(event.query(), Status::Complete);
    took
}

fn a_hybrid_synchronize_learns_the_queues_kernels_and_dozes_on_one_wake<B: Backend>() {
    let platform = Platform::<B>::new(Machine::threaded());
    let device = platform.device(hybrid());
    let queue = device.default_queue();
    let hw = Platform::<B>::hardware(queue);
    let length = Duration::from_millis(3);
    let kernel = platform.gpu.timed_kernel(length);
    // The first waits have no guess (they sleep on a wake, as blocking
    // ones do) and teach the queue's history.
    for _ in 0..4 {
        launch_and_wait(&platform, queue, &hw, kernel, length);
    }
    let woken_before = queue.stats().sleeping_waits;
    let mut took = Vec::new();
    for _ in 0..10 {
        took.push(launch_and_wait(&platform, queue, &hw, kernel, length));
    }
    took.sort_unstable();
    // Never missed, and not late: the median within 2 ms of the kernel's
    // end even on a loaded machine (a wait sleeping to a guess tenfold off
    // would take 30 ms).
    assert!(took[5] < length + Duration::from_millis(2), "{took:?}");
    // Once the guess is learned, a wait dozes and spins. A doze this long
    // (longer than two rechecks) sleeps on a wake armed as it starts, in
    // place of a recheck every 100 us: a wait arms one, never more.
    let woken = queue.stats().sleeping_waits - woken_before;
    assert!(
        (1..=10).contains(&woken),
        "{woken} wakes armed for 10 waits: {took:?}"
    );
}

fn a_wrong_guess_costs_a_recheck_or_a_wake_never_the_guess<B: Backend>() {
    let platform = Platform::<B>::new(Machine::threaded());
    let device = platform.device(hybrid());
    let queue = device.default_queue();
    let hw = Platform::<B>::hardware(queue);
    let usual = Duration::from_millis(5);
    let kernel = platform.gpu.timed_kernel(usual);
    for _ in 0..8 {
        launch_and_wait(&platform, queue, &hw, kernel, usual);
    }
    // Far shorter than guessed: found at a doze's recheck (every 100 us),
    // not at the 5 ms guess. Five times, each after the usual kernels have
    // put the guess back, judged by the median: one wait's wall time on a
    // loaded 2-core machine (a sanitizer build beside it) once ran 4.4 ms,
    // and a wait that slept to the guess takes about 5 ms every time.
    let short = Duration::from_micros(300);
    let short_kernel = platform.gpu.timed_kernel(short);
    let mut took = Vec::new();
    for _ in 0..5 {
        for _ in 0..3 {
            launch_and_wait(&platform, queue, &hw, kernel, usual);
        }
        took.push(launch_and_wait(&platform, queue, &hw, short_kernel, short));
    }
    took.sort_unstable();
    assert!(took[2] < short + Duration::from_millis(2), "{took:?}");
    // Far longer than guessed: past the spin, the wait sleeps on a wake
    // as a blocking one does, and still sees the completion; each such
    // wait arms exactly one wake. Three times, after the usual kernels, and
    // judged by the median, as above.
    let long = Duration::from_millis(25);
    let long_kernel = platform.gpu.timed_kernel(long);
    let mut took = Vec::new();
    let mut wakes = 0;
    for _ in 0..3 {
        for _ in 0..3 {
            launch_and_wait(&platform, queue, &hw, kernel, usual);
        }
        let woken_before = queue.stats().sleeping_waits;
        took.push(launch_and_wait(&platform, queue, &hw, long_kernel, long));
        wakes += queue.stats().sleeping_waits - woken_before;
    }
    took.sort_unstable();
    assert!(took[1] < long + Duration::from_millis(5), "{took:?}");
    assert_eq!(wakes, 3, "one wake per wait past its guess: {took:?}");
}

fn the_trackers_own_hybrid_wait_learns_the_kernel_length_and_is_never_early<B: Backend>() {
    // The tracker's `Waiter` publishes nothing, so it has no wake: past a
    // wrong guess it sleep-polls. Its history is the tracker's.
    let mut rig = Rig::<B, Retiring<B>>::retiring_on(Config::default(), Machine::threaded());
    let length = Duration::from_millis(2);
    let kernel = rig.gpu.timed_kernel(length);
    let waiter = rig.tracker.waiter();
    let mut took = Vec::new();
    for _ in 0..12 {
        let started = Instant::now();
        let request = Request::packet(rig.write_index()).barrier(true);
        let issued = rig.submit_work(request, Work::Kernel(kernel)).unwrap();
        let status = waiter.wait(
            &issued.ticket,
            Duration::from_secs(10),
            WaitPolicy::hybrid(),
        );
        took.push(started.elapsed());
        assert_eq!(status, Ok(Status::Complete));
        let truth = rig.gpu.truth(&rig.queue, issued.index).unwrap();
        assert!(truth.completed, "answered before the work completed");
        rig.check();
    }
    assert!(took.iter().all(|&t| t >= length), "{took:?}");
    // Learned: the guess is the kernel's length as the waits saw it (from
    // a wait's start, after the submission, to the completion, which a
    // loaded machine's simulated GPU makes late), not tenfold off.
    let guess = waiter.history().guess().expect("learned");
    let near = Duration::from_micros(500);
    let longest = *took.iter().max().unwrap();
    assert!(
        guess > length - near && guess < longest + near,
        "{guess:?}: {took:?}"
    );
    let mut steady = took[4..].to_vec();
    steady.sort_unstable();
    assert!(
        steady[steady.len() / 2] < length + Duration::from_millis(2),
        "{took:?}"
    );
    rig.assert_no_violations();
}
