//! Callbacks on completion: run off the submitting and waiting threads
//! (on the device's callback thread), in completion order per queue,
//! never in the GPU stream (a callback that blocks holds no later work),
//! with the outcome (complete, failed, device error), a panic contained
//! and reported, each run exactly once, and run (not lost) when the queue's
//! last handle is dropped while its work is pending. Each is checked
//! against the simulator's ground truth: never run before the work truly
//! completed.

mod support;

use sigretire_queue::sim::{SimPlatform, SimTracker};
use sigretire_queue::{CommandStatus, Device, DeviceConfig, HostQueue};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use support::*;

fn truly_done(queue: &HostQueue<SimTracker>, index: u64) -> bool {
    queue.with_tracker(|t| {
        sigretire_tracker::Tracker::queue(t)
            .truth(index)
            .is_none_or(|truth| truth.completed)
    })
}

#[test]
fn callbacks_run_on_the_callback_thread_in_queue_order_after_their_work() {
    let (platform, device) = stepped();
    let queue = device.default_queue().clone();
    let hardware = queue.with_tracker(|t| sigretire_tracker::Tracker::queue(t).clone());
    let ran = Arc::new(Mutex::new(Vec::new()));
    let commands: Vec<_> = (0..200).map(|_| queue.launch_empty().unwrap()).collect();
    // Registered out of order, while nothing ran.
    let mut order: Vec<usize> = (0..commands.len()).collect();
    order.reverse();
    order.swap(3, 150);
    for &i in &order {
        let (ran, hardware) = (ran.clone(), hardware.clone());
        let index = commands[i].aql_index();
        let seq = commands[i].seq();
        commands[i].on_complete(move |status| {
            let truth = hardware.truth(index).unwrap();
            let thread = std::thread::current().name().map(str::to_owned);
            ran.lock()
                .unwrap()
                .push((seq, status, truth.completed, thread));
        });
    }
    assert!(ran.lock().unwrap().is_empty(), "nothing completed yet");
    drive(&platform, spawn_synchronize(&queue)).unwrap();
    wait_until("every callback ran", || ran.lock().unwrap().len() == 200);
    let ran = ran.lock().unwrap();
    let seqs: Vec<u64> = ran.iter().map(|r| r.0).collect();
    assert!(seqs.is_sorted(), "in queue order: {seqs:?}");
    for (_, status, truly_completed, thread) in ran.iter() {
        assert_eq!(*status, CommandStatus::Complete);
        assert!(truly_completed, "run before its packet completed");
        assert_eq!(thread.as_deref(), Some("fences-callbacks"));
    }
    // The counter moves once a callback returned, after its own report.
    wait_until("every run is counted", || {
        device.callback_stats().run >= 200
    });
    assert_eq!(device.callback_stats().run, 200);
    assert!(platform.sim().violations().is_empty());
}

#[test]
fn a_blocked_callback_holds_no_later_work() {
    let (_platform, device) = threaded();
    let queue = device.default_queue();
    let (release, blocked) = mpsc::channel::<()>();
    let (entered, has_entered) = mpsc::channel::<()>();
    let first = queue.launch_empty().unwrap();
    first.on_complete(move |_| {
        entered.send(()).unwrap();
        // Blocks the callback thread until the test lets it go.
        blocked.recv().unwrap();
    });
    has_entered.recv_timeout(HANDSHAKE).unwrap();
    // The stream goes on: later work launches, completes, and is waited for
    // while the callback still blocks.
    let later: Vec<_> = (0..100).map(|_| queue.launch_empty().unwrap()).collect();
    queue.synchronize().unwrap();
    for command in &later {
        assert!(truly_done(queue, command.aql_index()));
    }
    let event = queue.record_event().unwrap();
    event.synchronize().unwrap();
    assert_eq!(device.callback_stats().run, 0, "it is still blocked");
    release.send(()).unwrap();
    wait_until("the blocked callback returned", || {
        device.callback_stats().run == 1
    });
}

#[test]
fn a_panicking_callback_is_contained_and_reported() {
    let (_platform, device) = threaded();
    let queue = device.default_queue();
    let after = Arc::new(AtomicUsize::new(0));
    queue
        .launch_empty()
        .unwrap()
        .on_complete(|_| panic!("a callback's bug"));
    let counter = after.clone();
    queue.launch_empty().unwrap().on_complete(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    queue.synchronize().unwrap();
    wait_until("both ran", || device.callback_stats().run == 2);
    let stats = device.callback_stats();
    assert_eq!(stats.panicked, 1);
    assert_eq!(stats.last_panic.as_deref(), Some("a callback's bug"));
    assert_eq!(after.load(Ordering::SeqCst), 1, "the next one still ran");
    // The queue and the callback thread keep working.
    let (done, ended) = mpsc::channel();
    queue
        .on_complete(move |status| done.send(status).unwrap())
        .unwrap();
    assert_eq!(
        ended.recv_timeout(HANDSHAKE).unwrap(),
        CommandStatus::Complete
    );
}

#[test]
fn callbacks_receive_the_failure_of_their_queue() {
    let (platform, device) = stepped();
    let queue = platform.create_queue(&device, bounded()).unwrap();
    let flag = sigretire_sim::HostFlag::new();
    let (done, ended) = mpsc::channel();
    let command = queue.launch(spin_kernel(&platform, &flag)).unwrap();
    let event = queue.record_event().unwrap();
    let sent = done.clone();
    command.on_complete(move |status| sent.send(("command", status)).unwrap());
    let sent = done.clone();
    event.on_complete(move |status| sent.send(("event", status)).unwrap());
    queue.with_tracker(|t| sigretire_tracker::Tracker::queue(t).fail());
    platform.sim().run_until_idle();
    let got = [
        ended.recv_timeout(HANDSHAKE).unwrap(),
        ended.recv_timeout(HANDSHAKE).unwrap(),
    ];
    assert_eq!(
        got,
        [
            ("command", CommandStatus::Failed),
            ("event", CommandStatus::Failed)
        ]
    );
    // A failed queue registers nothing more: the error says so.
    assert!(queue.on_complete(|_| unreachable!()).is_err());
    flag.set();
}

#[test]
fn the_device_error_state_runs_pending_callbacks_with_it() {
    let (platform, device) = stepped_with(
        DeviceConfig {
            skip_abort_on_error: true,
        },
        bounded(),
    );
    let queue = device.default_queue();
    let flag = sigretire_sim::HostFlag::new();
    let command = queue.launch(spin_kernel(&platform, &flag)).unwrap();
    let (done, ended) = mpsc::channel();
    command.on_complete(move |status| done.send(status).unwrap());
    device.set_error("injected");
    assert_eq!(
        ended.recv_timeout(HANDSHAKE).unwrap(),
        CommandStatus::DeviceError
    );
    assert!(!truly_done(queue, command.aql_index()));
    flag.set();
}

#[test]
fn a_dropped_queue_runs_its_pending_callbacks_once_as_its_work_completes() {
    let (platform, device) = threaded();
    let queue = platform.create_queue(&device, bounded()).unwrap();
    let hardware = queue.with_tracker(|t| sigretire_tracker::Tracker::queue(t).clone());
    let flag = sigretire_sim::HostFlag::new();
    let runs = Arc::new(Mutex::new(Vec::new()));
    let spin = queue.launch(spin_kernel(&platform, &flag)).unwrap();
    let mut indices = vec![spin.aql_index()];
    for i in 0..50 {
        let command = queue.launch_empty().unwrap();
        indices.push(command.aql_index());
        let (runs, hardware, index) = (runs.clone(), hardware.clone(), command.aql_index());
        command.on_complete(move |status| {
            runs.lock()
                .unwrap()
                .push((i, status, hardware.truth(index).unwrap().completed));
        });
    }
    drop(queue);
    std::thread::sleep(std::time::Duration::from_millis(10));
    assert!(runs.lock().unwrap().is_empty(), "the kernel still spins");
    flag.set();
    wait_until("every callback ran", || runs.lock().unwrap().len() == 50);
    // Nothing more arrives: each ran exactly once.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let runs = runs.lock().unwrap();
    assert_eq!(runs.len(), 50);
    let order: Vec<_> = runs.iter().map(|r| r.0).collect();
    assert_eq!(order, (0..50).collect::<Vec<_>>());
    assert!(runs.iter().all(|r| r.1 == CommandStatus::Complete && r.2));
    assert_eq!(device.callback_stats().cancelled, 0);
}

#[test]
fn a_callback_on_work_already_done_runs_on_the_callback_thread() {
    let (_platform, device) = threaded();
    let queue = device.default_queue();
    let command = queue.launch_empty().unwrap();
    queue.synchronize().unwrap();
    let (done, ended) = mpsc::channel();
    let caller = std::thread::current().id();
    command.on_complete(move |status| {
        done.send((status, std::thread::current().id())).unwrap();
    });
    let (status, ran_on) = ended.recv_timeout(HANDSHAKE).unwrap();
    assert_eq!(status, CommandStatus::Complete);
    assert_ne!(ran_on, caller, "never on the registering thread");
}

/// The packets a callback's wait put in `queue`'s own ring: those that
/// complete an interrupt signal (a wake signal: the queue's trackers never
/// hand one out).
fn wakes_in_ring(platform: &SimPlatform, queue: &HostQueue<SimTracker>) -> usize {
    let hardware = queue.with_tracker(|t| sigretire_tracker::Tracker::queue(t).clone());
    (0..hardware.write_index())
        .filter_map(|index| hardware.truth(index))
        .filter(|truth| {
            platform
                .sim()
                .resolve(truth.completion_signal)
                .is_some_and(|signal| platform.sim().is_interrupt(signal))
        })
        .count()
}

/// A callback on work still running: the completion thread sleeps on one
/// of the queue's wake signals until it completes. Checks that the
/// callback ran only once its work truly had, and that later work ran.
fn callback_on_running_work(platform: &SimPlatform, device: &Device<SimTracker>) {
    let queue = device.default_queue();
    let gate = sigretire_sim::HostFlag::new();
    let command = queue.launch(spin_kernel(platform, &gate)).unwrap();
    let (ran, has_run) = mpsc::channel();
    let hardware = queue.with_tracker(|t| sigretire_tracker::Tracker::queue(t).clone());
    let index = command.aql_index();
    command.on_complete(move |status| {
        ran.send((status, hardware.truth(index).unwrap().completed))
            .unwrap();
    });
    wait_until("the completion thread sleeps", || {
        queue.stats().handler_sleeps >= 1
    });
    let later: Vec<_> = (0..8).map(|_| queue.launch_empty().unwrap()).collect();
    gate.set();
    let (status, truly_completed) = has_run.recv_timeout(HANDSHAKE).unwrap();
    assert_eq!(status, CommandStatus::Complete);
    assert!(truly_completed, "a callback ran before its work completed");
    queue.synchronize().unwrap();
    for command in &later {
        assert!(truly_done(queue, command.aql_index()));
    }
    assert!(platform.sim().violations().is_empty());
}

#[test]
fn with_a_wake_relay_a_callback_puts_nothing_in_its_queues_ring() {
    let platform = SimPlatform::threaded(sigretire_sim::CostProfile::zero()).with_wake_relay();
    let device = platform.device(DeviceConfig::default(), bounded()).unwrap();
    callback_on_running_work(&platform, &device);
    let queue = device.default_queue();
    let relay = queue
        .with_tracker(|t| sigretire_tracker::Tracker::queue(t).wake_relay())
        .expect("made with one");
    assert!(
        relay.write_index() >= 1,
        "the sleep's wake ran on the relay"
    );
    assert_eq!(wakes_in_ring(&platform, queue), 0);
}

/// Without a relay, the same wait's wake packet sits in the queue's ring
/// (what the test above would see if the relay were not used).
#[test]
fn without_a_wake_relay_a_callbacks_wake_sits_in_its_queues_ring() {
    let platform = SimPlatform::threaded(sigretire_sim::CostProfile::zero());
    let device = platform.device(DeviceConfig::default(), bounded()).unwrap();
    callback_on_running_work(&platform, &device);
    assert!(wakes_in_ring(&platform, device.default_queue()) >= 1);
}
