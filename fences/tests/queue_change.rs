//! A stream moved to another hardware queue (`HostQueue::move_to`): later
//! commands run on the new queue, never before what was submitted on the
//! old one, the old queue's newest signal stays pinned while the new queue
//! may read it, and commands and events from before the move keep working.

mod support;

use sigretire_queue::CommandStatus;
use sigretire_queue::sim::{HostFlag, Kernel, SimTracker};
use sigretire_sim::hsa_sys::HSA_PACKET_TYPE_BARRIER_AND;
use sigretire_tracker::Tracker;
use support::*;

fn hardware(queue: &sigretire_queue::HostQueue<SimTracker>) -> sigretire_sim::Queue {
    queue.with_tracker(|t| t.queue().clone())
}

#[test]
fn work_after_a_move_waits_for_work_before_it() {
    let (platform, device) = stepped();
    let sim = platform.sim();
    let queue = device.default_queue();
    let old = hardware(queue);
    let flag = HostFlag::new();
    let spin = sim.register_kernel(Kernel::SpinUntil(flag.clone()));
    let before = queue.launch(spin).unwrap();
    let new = sim.create_queue(platform.sim_queue_config()).unwrap();
    queue.move_to(new.clone()).unwrap();
    assert_eq!(
        hardware(queue).id(),
        new.id(),
        "later work goes to the new queue"
    );
    let after = queue.launch_empty().unwrap();
    let event = queue.record_event().unwrap();

    // The new queue's first packet waits for the old queue's spin kernel.
    let wait = new.truth(0).unwrap();
    assert_eq!(wait.packet_type, HSA_PACKET_TYPE_BARRIER_AND);
    assert_eq!(
        wait.packet.u64_at(8),
        old.truth(before.aql_index())
            .unwrap()
            .completion_signal
            .handle,
        "waits on the old queue's newest signal"
    );
    assert_eq!(after.aql_index(), 1, "behind the wait");
    sim.run_until_idle();
    assert_eq!(after.status(), CommandStatus::Pending);
    assert_eq!(event.query(), sigretire_tracker::Status::Pending);
    assert!(!new.truth(after.aql_index()).unwrap().launched);

    flag.set();
    platform.run_while(|| queue.synchronize()).unwrap();
    assert_eq!(before.status(), CommandStatus::Complete);
    assert_eq!(after.status(), CommandStatus::Complete);
    assert_eq!(event.query(), sigretire_tracker::Status::Complete);
    let stats = queue.stats();
    assert_eq!((stats.queue_changes, stats.order_waits), (1, 1));
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

#[test]
fn a_move_after_finished_work_orders_nothing() {
    let (platform, device) = stepped();
    let sim = platform.sim();
    let queue = device.default_queue();
    queue.launch_empty().unwrap();
    platform.run_while(|| queue.synchronize()).unwrap();
    let new = sim.create_queue(platform.sim_queue_config()).unwrap();
    queue.move_to(new.clone()).unwrap();
    let after = queue.launch_empty().unwrap();
    assert_eq!(after.aql_index(), 0, "no wait before it");
    assert_eq!(queue.stats().order_waits, 0);
    platform.run_while(|| queue.synchronize()).unwrap();
    assert_eq!(after.status(), CommandStatus::Complete);
}

#[test]
fn two_moves_without_work_between_them_wait_once_for_the_first_queue() {
    let (platform, device) = stepped();
    let sim = platform.sim();
    let queue = device.default_queue();
    let first = hardware(queue);
    let flag = HostFlag::new();
    let before = queue
        .launch(sim.register_kernel(Kernel::SpinUntil(flag.clone())))
        .unwrap();
    let second = sim.create_queue(platform.sim_queue_config()).unwrap();
    let third = sim.create_queue(platform.sim_queue_config()).unwrap();
    queue.move_to(second.clone()).unwrap();
    queue.move_to(third.clone()).unwrap();
    let after = queue.launch_empty().unwrap();
    assert_eq!(
        second.write_index(),
        0,
        "nothing ran on the queue in between"
    );
    let wait = third.truth(0).unwrap();
    assert_eq!(
        wait.packet.u64_at(8),
        first
            .truth(before.aql_index())
            .unwrap()
            .completion_signal
            .handle
    );
    sim.run_until_idle();
    assert_eq!(after.status(), CommandStatus::Pending);
    flag.set();
    platform.run_while(|| queue.synchronize()).unwrap();
    assert_eq!(after.status(), CommandStatus::Complete);
    assert_eq!(queue.stats().order_waits, 1);
}

#[test]
fn the_old_queues_signal_stays_pinned_until_the_wait_on_the_new_queue_retired() {
    let (platform, device) = stepped();
    let sim = platform.sim();
    let queue = device.default_queue();
    let flag = HostFlag::new();
    queue
        .launch(sim.register_kernel(Kernel::SpinUntil(flag.clone())))
        .unwrap();
    let new = sim.create_queue(platform.sim_queue_config()).unwrap();
    queue.move_to(new).unwrap();
    queue.launch_empty().unwrap();
    assert_eq!(queue.with_tracker(|t| t.census().pins), 1);
    flag.set();
    platform.run_while(|| queue.synchronize()).unwrap();
    queue.with_tracker(|t| t.poll());
    assert_eq!(queue.with_tracker(|t| t.census().pins), 0);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

#[test]
fn a_stream_moved_back_and_forth_under_load_stays_in_order() {
    let (platform, device) = threaded();
    let sim = platform.sim();
    let queue = device.default_queue();
    let queues = [
        hardware(queue),
        sim.create_queue(platform.sim_queue_config()).unwrap(),
    ];
    let slow = sim.register_kernel(Kernel::Duration(std::time::Duration::from_micros(50)));
    let mut events = Vec::new();
    for round in 0..40 {
        queue.launch(slow).unwrap();
        events.push(queue.record_event().unwrap());
        queue.move_to(queues[(round + 1) % 2].clone()).unwrap();
    }
    queue.synchronize().unwrap();
    // In order: each event's end is no earlier than the one before.
    let mut previous = 0;
    for event in &events {
        assert!(event.query().is_done());
        let stamps = event.timestamps().expect("timed on a profiled queue");
        assert!(stamps.end >= previous, "an event ran before an earlier one");
        previous = stamps.end;
    }
    assert_eq!(queue.stats().queue_changes, 40);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}
