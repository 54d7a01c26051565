//! Cross-queue waits: barrier-AND packets with pinned producer signals, at
//! most five per packet and chained; no dependency for a use already known
//! complete; pins released when the consumer retires; no lock-order
//! deadlock between queues that wait on each other.

mod support;

use fences::CommandStatus;
use sim::hsa_sys::HSA_PACKET_TYPE_BARRIER_AND;
use support::*;
use tracker::{Status, Tracker};

fn hardware(queue: &fences::HostQueue<fences::sim::SimTracker>) -> sim::Queue {
    queue.with_tracker(|t| t.queue().clone())
}

/// The consumer's next work waits on the GPU for the producer's spin kernel,
/// and runs once `flag` releases it.
fn later_work_waits_for_the_flag(
    platform: &fences::sim::SimPlatform,
    consumer: &fences::HostQueue<fences::sim::SimTracker>,
    flag: &sim::HostFlag,
) {
    let after = consumer.launch(0).unwrap();
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
    let flag = sim::HostFlag::new();
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
        .truth(event.aql_index())
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
    producer.launch(0).unwrap();
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
    let flag = sim::HostFlag::new();
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
    let flag = sim::HostFlag::new();
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
fn waiting_on_a_queue_pins_a_gpu_waiter_marker() {
    let (platform, device) = stepped();
    let producer = platform.create_queue(&device, bounded()).unwrap();
    let consumer = device.default_queue();
    // An idle producer: nothing to wait for.
    let wait = consumer.wait_queue(&producer).unwrap();
    assert_eq!((wait.packets(), wait.elided()), (0, 1));

    let flag = sim::HostFlag::new();
    producer.launch(spin_kernel(&platform, &flag)).unwrap();
    let wait = consumer.wait_queue(&producer).unwrap();
    assert_eq!((wait.packets(), wait.dependencies()), (1, 1));
    assert_eq!(producer.stats().markers, 1);
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
                    mine.launch(0).unwrap();
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
