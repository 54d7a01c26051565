//! Cross-queue waits: barrier-AND packets with pinned producer signals, at
//! most five per packet and chained; no dependency for a use already known
//! complete; pins released when the consumer retires; no lock-order
//! deadlock between queues that wait on each other; recording and
//! cross-queue waits never wait for a GPU wait another thread is doing.

mod support;

use sigretire_queue::sim::{SimPlatform, SimTracker};
use sigretire_queue::{
    CommandStatus, Device, Event, HostQueue, QueueConfig, SyncError, WaitEventError,
};
use sigretire_sim::hsa_sys::HSA_PACKET_TYPE_BARRIER_AND;
use sigretire_tracker::{Status, Tracker};
use std::thread::JoinHandle;
use support::*;

fn hardware(
    queue: &sigretire_queue::HostQueue<sigretire_queue::sim::SimTracker>,
) -> sigretire_sim::Queue {
    queue.with_tracker(|t| t.queue().clone())
}

/// The consumer's next work waits on the GPU for the producer's spin kernel,
/// and runs once `flag` releases it.
fn later_work_waits_for_the_flag(
    platform: &sigretire_queue::sim::SimPlatform,
    consumer: &sigretire_queue::HostQueue<sigretire_queue::sim::SimTracker>,
    flag: &sigretire_sim::HostFlag,
) {
    let after = consumer.launch_empty().unwrap();
    platform.sim().run_until_idle();
    assert_eq!(after.status(), CommandStatus::Pending);
    flag.set();
    platform.sim().run_until_idle();
    assert_eq!(after.status(), CommandStatus::Complete);
}

#[test]
fn a_wait_is_a_barrier_and_packet_carrying_the_pinned_producer_signal() {
    let (platform, device) = stepped();
    let producer = platform.create_queue(&device, bounded()).unwrap();
    let consumer = device.default_queue();
    let flag = sigretire_sim::HostFlag::new();
    producer.launch(spin_kernel(&platform, &flag)).unwrap();
    let event = producer.record_event().unwrap();

    let wait = consumer.wait_event(&event).unwrap();
    assert_eq!(
        (wait.packets(), wait.dependencies(), wait.elided()),
        (1, 1, 0)
    );
    let truth = hardware(consumer)
        .truth(wait.commands()[0].aql_index())
        .unwrap();
    assert_eq!(truth.packet_type, HSA_PACKET_TYPE_BARRIER_AND);
    assert!(truth.barrier);
    let producer_signal = hardware(&producer)
        .truth(event.aql_index().unwrap())
        .unwrap()
        .completion_signal
        .handle;
    assert_eq!(truth.packet.u64_at(8), producer_signal);
    assert_eq!(truth.packet.u64_at(16), 0, "one dependency only");
    assert_eq!(producer.with_tracker(|t| t.stats().pins), 1);

    assert_eq!(event.query(), Status::Pending);
    later_work_waits_for_the_flag(&platform, consumer, &flag);
    assert!(platform.sim().violations().is_empty());
}

#[test]
fn a_producer_use_known_complete_yields_no_dependency() {
    let (platform, device) = stepped();
    let producer = platform.create_queue(&device, bounded()).unwrap();
    let consumer = device.default_queue();
    let event = producer.record_event().unwrap();
    platform.run_while(|| event.synchronize()).unwrap();
    let commands = consumer.stats().commands;
    let wait = consumer.wait_event(&event).unwrap();
    assert_eq!(
        (wait.packets(), wait.dependencies(), wait.elided()),
        (0, 0, 1)
    );
    assert_eq!(consumer.stats().commands, commands, "nothing was published");
    assert_eq!(consumer.stats().dependencies_elided, 1);
    assert_eq!(producer.with_tracker(|t| t.stats().pins), 0);

    // The same through the producer's tracker: its fence proved the use.
    let second = producer.record_event().unwrap();
    producer.launch_empty().unwrap();
    platform.sim().run_until_idle();
    producer.with_tracker(|t| t.poll());
    let wait = consumer.wait_event(&second).unwrap();
    assert_eq!((wait.packets(), wait.elided()), (0, 1));
}

#[test]
fn seven_dependencies_chain_two_packets_of_at_most_five() {
    let (platform, device) = stepped();
    let producer = platform.create_queue(&device, bounded()).unwrap();
    let consumer = device.default_queue();
    let flag = sigretire_sim::HostFlag::new();
    producer.launch(spin_kernel(&platform, &flag)).unwrap();
    let events: Vec<_> = (0..7).map(|_| producer.record_event().unwrap()).collect();
    let refs: Vec<_> = events.iter().collect();
    let wait = consumer.wait_events(&refs).unwrap();
    assert_eq!((wait.packets(), wait.dependencies()), (2, 7));
    assert_eq!(consumer.stats().wait_packets, 2);

    let hw = hardware(consumer);
    let count = |index| {
        let packet = hw.truth(index).unwrap().packet;
        (0..5).filter(|k| packet.u64_at(8 + 8 * k) != 0).count()
    };
    let (first, second) = (
        wait.commands()[0].aql_index(),
        wait.commands()[1].aql_index(),
    );
    assert_eq!(second, first + 1, "chained back to back");
    assert_eq!((count(first), count(second)), (5, 2));
    assert!(hw.truth(first).unwrap().barrier && hw.truth(second).unwrap().barrier);

    later_work_waits_for_the_flag(&platform, consumer, &flag);
}

#[test]
fn pins_hold_until_the_consumer_retires() {
    let (platform, device) = stepped();
    let producer = platform.create_queue(&device, bounded()).unwrap();
    let consumer = device.default_queue();
    let flag = sigretire_sim::HostFlag::new();
    consumer.launch(spin_kernel(&platform, &flag)).unwrap();
    let event = producer.record_event().unwrap();
    consumer.wait_event(&event).unwrap();
    drop(event); // only the consumer's pin holds the signal now

    platform.sim().run_until_idle();
    producer.with_tracker(|t| t.poll());
    // The producer use retired, but the consumer has not passed its wait.
    assert_eq!(producer.with_tracker(|t| t.census().parked), 1);

    flag.set();
    platform.run_while(|| consumer.synchronize()).unwrap();
    producer.with_tracker(|t| t.reclaim());
    assert_eq!(producer.with_tracker(|t| t.census().parked), 0);
    assert!(platform.sim().violations().is_empty());
}

#[test]
fn waiting_on_a_queue_pins_its_newest_command() {
    let (platform, device) = stepped();
    let producer = platform.create_queue(&device, bounded()).unwrap();
    let consumer = device.default_queue();
    // An idle producer: nothing to wait for.
    let wait = consumer.wait_queue(&producer).unwrap();
    assert_eq!((wait.packets(), wait.elided()), (0, 1));

    let flag = sigretire_sim::HostFlag::new();
    producer.launch(spin_kernel(&platform, &flag)).unwrap();
    let wait = consumer.wait_queue(&producer).unwrap();
    assert_eq!((wait.packets(), wait.dependencies()), (1, 1));
    // A marker after the spinning kernel would complete with it: the wait
    // pins the kernel's own signal.
    let stats = producer.stats();
    assert_eq!((stats.markers, stats.shared_completions), (0, 1));
    later_work_waits_for_the_flag(&platform, consumer, &flag);
}

#[test]
fn queues_waiting_on_each_other_never_deadlock_on_the_host() {
    let (platform, device) = threaded();
    let a = platform.create_queue(&device, bounded()).unwrap();
    let b = platform.create_queue(&device, bounded()).unwrap();
    std::thread::scope(|scope| {
        for (mine, theirs) in [(&a, &b), (&b, &a)] {
            scope.spawn(move || {
                for _ in 0..200 {
                    mine.launch_empty().unwrap();
                    let event = mine.record_event().unwrap();
                    theirs.wait_event(&event).unwrap();
                    mine.query().unwrap();
                }
                mine.synchronize().unwrap();
            });
        }
    });
    a.synchronize().unwrap();
    b.synchronize().unwrap();
    assert!(platform.sim().violations().is_empty());
}

// --- Calls that never block while another thread synchronizes ------------

/// A producer queue whose synchronize is in progress on another thread: it
/// waits for a kernel that spins until `flag`, on a stepped GPU nobody
/// drives, so its GPU wait cannot end until the test ends it. With the old
/// behaviour (support's `OldSynchronize`, which waits holding the lock)
/// every test below fails by its watchdog: each call needs the producer's
/// lock.
struct Synchronizing {
    platform: SimPlatform,
    _device: Device<SimTracker>,
    producer: HostQueue<SimTracker>,
    consumer: HostQueue<SimTracker>,
    flag: sigretire_sim::HostFlag,
    /// An event recorded on the producer before the synchronize (taken by
    /// the test that waits on it).
    before: Option<Event<SimTracker>>,
    sync: JoinHandle<Result<(), SyncError>>,
}

fn synchronizing() -> Synchronizing {
    let config = QueueConfig {
        // Longer than the watchdog, so a call stuck behind the synchronize
        // is caught by the watchdog, not freed by the synchronize's timeout.
        wait_timeout: Some(HANDSHAKE * 3),
        ..bounded()
    };
    let (platform, device) = stepped();
    let producer = platform.create_queue(&device, config).unwrap();
    let consumer = device.default_queue().clone();
    let flag = sigretire_sim::HostFlag::new();
    producer.launch(spin_kernel(&platform, &flag)).unwrap();
    let before = producer.record_event().unwrap();
    let sync = spawn_synchronize(&producer);
    wait_until("the producer's synchronize waits for the GPU", || {
        waiting(&producer) == 1
    });
    Synchronizing {
        platform,
        _device: device,
        producer,
        consumer,
        flag,
        before: Some(before),
        sync,
    }
}

impl Synchronizing {
    /// What the watchdog does before failing: release the kernel and run
    /// the GPU, so a thread stuck behind the synchronize can end.
    fn unblock(&self) -> impl FnOnce() + use<> {
        let (flag, platform) = (self.flag.clone(), self.platform.clone());
        move || {
            flag.set();
            platform.sim().run_until_idle();
        }
    }

    /// The call returned while the GPU wait was still in progress.
    fn assert_still_synchronizing(&self) {
        assert_eq!(waiting(&self.producer), 1);
        assert!(!self.sync.is_finished());
    }

    /// Releases the kernel and lets the synchronize finish.
    fn finish(self) -> SimPlatform {
        self.flag.set();
        assert_eq!(drive(&self.platform, self.sync), Ok(()));
        self.platform
    }

    /// After a cross-queue wait on the producer: the consumer's next work
    /// waits on the GPU for the producer's kernel, and runs once the kernel
    /// is released and the synchronize has finished.
    #[track_caller]
    fn later_consumer_work_waits_for_the_producer(self) {
        let after = self.consumer.launch_empty().unwrap();
        self.platform.sim().run_until_idle();
        assert_eq!(
            after.status(),
            CommandStatus::Pending,
            "it waits for the producer"
        );
        let platform = self.finish();
        platform.sim().run_until_idle();
        assert_eq!(after.status(), CommandStatus::Complete);
    }
}

#[test]
fn record_event_returns_while_its_queue_is_being_synchronized() {
    let s = synchronizing();
    let producer = s.producer.clone();
    let event = returns_promptly(
        "record_event on a queue being synchronized",
        move || producer.record_event(),
        s.unblock(),
    )
    .unwrap();
    s.assert_still_synchronizing();
    assert_eq!(event.query(), Status::Pending);
    let platform = s.finish();
    platform.sim().run_until_idle();
    assert_eq!(event.query(), Status::Complete);
}

#[test]
fn wait_event_returns_while_the_producer_is_being_synchronized() {
    let mut s = synchronizing();
    let (consumer, before) = (s.consumer.clone(), s.before.take().unwrap());
    // Pinning the producer's use takes the producer's lock.
    let wait = returns_promptly(
        "wait_event on an event of a queue being synchronized",
        move || consumer.wait_event(&before).map(|w| w.dependencies()),
        s.unblock(),
    );
    assert_eq!(wait, Ok(1));
    s.assert_still_synchronizing();
    s.later_consumer_work_waits_for_the_producer();
}

#[test]
fn wait_queue_returns_while_the_producer_is_being_synchronized() {
    let s = synchronizing();
    let (consumer, producer) = (s.consumer.clone(), s.producer.clone());
    // Pins the producer's newest command, under its lock.
    let wait = returns_promptly(
        "wait_queue on a queue being synchronized",
        move || consumer.wait_queue(&producer).map(|w| w.dependencies()),
        s.unblock(),
    );
    assert_eq!(wait, Ok(1));
    s.assert_still_synchronizing();
    let producer = s.producer.clone();
    s.later_consumer_work_waits_for_the_producer();
    // Nothing was published on the producer after the command its
    // synchronize waits for: its queue state is reset.
    let stats = producer.stats();
    assert_eq!((stats.state_resets_skipped, stats.markers), (0, 0));
}

#[test]
fn a_wait_on_another_simulators_signals_is_refused_before_anything_is_published() {
    let (platform, device) = stepped();
    let (other_platform, other_device) = stepped();
    let consumer = device.default_queue();
    let foreign_queue = other_device.default_queue();
    foreign_queue.launch_empty().unwrap();
    let foreign = foreign_queue.record_event().unwrap();
    let before = consumer.stats();
    assert_eq!(
        consumer.wait_event(&foreign).map(|w| w.packets()),
        Err(WaitEventError::ForeignSignalMemory)
    );
    assert_eq!(
        consumer.wait_queue(foreign_queue).map(|w| w.packets()),
        Err(WaitEventError::ForeignSignalMemory)
    );
    // Nothing was published or pinned, and both devices carry on.
    assert_eq!(consumer.stats().commands, before.commands);
    assert_eq!(device.error(), None);
    let after = consumer.launch_empty().unwrap();
    platform.run_while(|| consumer.synchronize()).unwrap();
    assert_eq!(after.status(), CommandStatus::Complete);
    other_platform.run_while(|| foreign.synchronize()).unwrap();
    assert_eq!(other_device.error(), None);
    assert!(platform.sim().violations().is_empty());
    assert!(other_platform.sim().violations().is_empty());
}

#[test]
fn a_wait_on_another_device_of_the_same_simulator_is_allowed() {
    let (platform, device) = stepped();
    let other_device = platform
        .device(sigretire_queue::DeviceConfig::default(), bounded())
        .unwrap();
    let flag = sigretire_sim::HostFlag::new();
    let spin = platform
        .sim()
        .register_kernel(sigretire_sim::Kernel::SpinUntil(flag.clone()));
    let producer = other_device.default_queue();
    producer.launch(spin).unwrap();
    let event = producer.record_event().unwrap();
    let wait = device.default_queue().wait_event(&event).unwrap();
    assert_eq!(wait.dependencies(), 1);
    later_work_waits_for_the_flag(&platform, device.default_queue(), &flag);
}
