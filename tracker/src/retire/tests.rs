//! Unit tests of the proof state: index order, fences, proofs, drains and
//! generations, on `Proofs` alone; then, on a tracker, what a failed
//! submission leaves behind: the fences its uses name, and whether its
//! slot still waits for the GPU.

use super::*;
use crate::ring::Spare;
use crate::share::host_cell_refs;
use crate::sync::Arc;

/// A host spare of `cell`, armed by store 0.
fn spare(cell: &Arc<Cell<usize>>) -> Spare<usize> {
    Spare {
        cell: cell.clone(),
        placement: crate::Placement::Host,
        store: 0,
    }
}

const BITS: u32 = 8;

#[test]
fn a_fresh_generation_accepts_any_index() {
    let proofs = Proofs::new(BITS);
    for index in [0, 1, u64::MAX] {
        assert!(proofs.in_order(index));
        assert_eq!(proofs.check_order(index), Ok(()));
    }
    assert_eq!(proofs.last_aql(), 0);
    assert_eq!(proofs.last_fence(), 0);
    assert_eq!(proofs.generation_start(), 1);
    assert_eq!(proofs.snapshot(), (1, None, 0));
}

#[test]
fn indices_must_increase_within_a_generation() {
    let mut proofs = Proofs::new(BITS);
    proofs.note_packet(1, 10, false);
    assert_eq!(proofs.last_aql(), 10);
    assert!(proofs.in_order(11));
    assert!(proofs.in_order(1000), "gaps are fine");
    assert!(!proofs.in_order(10), "not the same index twice");
    assert!(!proofs.in_order(9));
    assert_eq!(proofs.check_order(11), Ok(()));
    assert_eq!(
        proofs.check_order(9),
        Err(crate::AcquireError::AqlIndexOutOfOrder {
            index: 9,
            previous: 10
        })
    );
}

#[test]
fn index_order_survives_the_u64_wrap() {
    let mut proofs = Proofs::new(BITS);
    proofs.note_packet(1, u64::MAX, false);
    assert!(proofs.in_order(0));
    assert_eq!(proofs.check_order(0), Ok(()));
    assert!(!proofs.in_order(u64::MAX - 1));
    assert!(proofs.check_order(u64::MAX - 1).is_err());
}

#[test]
fn only_barrier_packets_become_the_last_fence() {
    let mut proofs = Proofs::new(BITS);
    proofs.note_packet(1, 10, true);
    assert_eq!(proofs.last_fence(), 1);
    proofs.note_packet(2, 11, false);
    assert_eq!(proofs.last_fence(), 1, "a plain packet is no fence");
    proofs.note_packet(3, 12, true);
    assert_eq!(proofs.last_fence(), 3);
}

#[test]
fn forgetting_the_newest_fence_goes_back_to_the_one_before_it() {
    let mut proofs = Proofs::new(BITS);
    proofs.note_packet(1, 10, true);
    proofs.note_packet(2, 11, false);
    proofs.note_packet(3, 12, true);
    proofs.forget_fence(1, 0);
    assert_eq!(
        proofs.last_fence(),
        3,
        "forgetting an older fence changes nothing"
    );
    proofs.forget_fence(3, 1);
    assert_eq!(
        proofs.last_fence(),
        1,
        "not none: the fence before it still proves what precedes it"
    );
    proofs.forget_fence(1, 0);
    assert_eq!(proofs.last_fence(), 0, "no fence before the first");
}

#[test]
fn a_proof_covers_every_index_up_to_its_own() {
    let mut proofs = Proofs::new(BITS);
    assert!(!proofs.is_proven(0), "nothing proven yet");
    proofs.prove(4, 10);
    assert!(proofs.is_proven(10));
    assert!(proofs.is_proven(9));
    assert!(proofs.is_proven(0));
    assert!(!proofs.is_proven(11));
    assert_eq!(proofs.snapshot().1, Some(10));
    assert_eq!(proofs.proven_through, 4, "the fence's own use");
}

#[test]
fn proofs_only_move_forward() {
    let mut proofs = Proofs::new(BITS);
    proofs.prove(4, 10);
    proofs.prove(2, 5); // an older fence learned complete later
    assert_eq!(proofs.snapshot().1, Some(10));
    assert_eq!(proofs.proven_through, 4);
    assert!(proofs.is_proven(10));
    proofs.prove(6, 12);
    assert_eq!(proofs.proven_through, 6);
    assert!(proofs.is_proven(12));
    assert!(!proofs.is_proven(13));
}

#[test]
fn proofs_survive_the_u64_wrap() {
    let mut proofs = Proofs::new(BITS);
    proofs.prove(1, u64::MAX - 1);
    assert!(!proofs.is_proven(0), "0 comes after u64::MAX - 1");
    proofs.prove(4, 1);
    assert_eq!(proofs.snapshot().1, Some(1), "1 is later than u64::MAX - 1");
    assert!(proofs.is_proven(u64::MAX));
    assert!(proofs.is_proven(0));
    assert!(!proofs.is_proven(2));
    proofs.prove(2, u64::MAX);
    assert_eq!(proofs.snapshot().1, Some(1), "u64::MAX is older than 1");
    assert_eq!(proofs.proven_through, 4);
}

#[test]
fn a_drain_proves_the_generation_through_its_newest_aql_use() {
    let mut proofs = Proofs::new(BITS);
    proofs.drain();
    assert_eq!(proofs.snapshot(), (1, None, 0), "nothing to prove yet");
    proofs.note_packet(1, 100, true);
    proofs.note_packet(2, 101, false);
    proofs.note_packet(3, 104, false);
    proofs.drain();
    assert!(proofs.is_proven(104) && proofs.is_proven(100));
    assert!(!proofs.is_proven(105));
    assert_eq!(proofs.proven_through, 3);
    assert_eq!(proofs.snapshot(), (1, Some(104), 3));
    assert_eq!(proofs.drained_among(1, 5), 3);
    assert_eq!(proofs.drained_among(3, 5), 1);
    assert_eq!(proofs.drained_among(4, 5), 0);
}

#[test]
fn a_new_generation_forgets_order_fences_and_proofs_drains_included() {
    let mut proofs = Proofs::new(BITS);
    proofs.note_packet(1, 100, true);
    proofs.note_packet(6, 105, true);
    proofs.prove(6, 105);
    proofs.drain();
    proofs.probed_at = 105;
    let first = proofs.generation();

    proofs.new_generation(7, 1);
    assert!(first.precedes(proofs.generation(), BITS));
    assert_eq!(proofs.generation_start(), 7);
    assert!(proofs.in_order(0), "the new queue's indices start afresh");
    assert_eq!(proofs.last_aql(), 0);
    assert_eq!(proofs.last_fence(), 0);
    assert!(
        !proofs.is_proven(0),
        "the old queue's fences prove nothing here"
    );
    assert_eq!(proofs.probed_at, 0);
    assert_eq!(proofs.proven_through, 0);
    // A drain of the new queue proves nothing of the old one: with no use
    // of its own yet, nothing at all.
    proofs.drain();
    assert_eq!(proofs.snapshot().1, None);
    proofs.note_packet(7, 0, false);
    proofs.drain();
    assert_eq!(proofs.snapshot(), (7, Some(0), 7));
}

#[test]
fn generations_wrap_at_their_bits() {
    let mut proofs = Proofs::new(2);
    let values: Vec<u32> = (1..=5)
        .map(|start| {
            proofs.new_generation(start, 1);
            proofs.generation().value()
        })
        .collect();
    assert_eq!(values, [1, 2, 3, 0, 1]);
}

#[test]
fn fences_prove_only_aql_uses_of_the_current_generation() {
    let (_shared, cells) = host_cell_refs(1);
    let mut slot = Slot::new(spare(&cells[0]));
    slot.aql = 20;
    let mut proofs = Proofs::new(BITS);
    proofs.new_generation(10, 1);
    assert!(
        !proofs.fences_can_prove(9, &slot),
        "an earlier generation's use"
    );
    assert!(proofs.fences_can_prove(10, &slot));
    assert!(proofs.fences_can_prove(11, &slot));

    assert!(!proofs.fence_proves(10, &slot), "nothing proven yet");
    proofs.prove(11, 19);
    assert!(!proofs.fence_proves(10, &slot), "proven only up to 19");
    proofs.prove(12, 25);
    assert!(proofs.fence_proves(10, &slot));
    assert!(
        !proofs.fence_proves(9, &slot),
        "still not across generations"
    );

    slot.flags = flag::COPY;
    assert!(
        !proofs.fences_can_prove(10, &slot),
        "a copy engine is off the queue"
    );
    assert!(!proofs.fence_proves(10, &slot));
}

/// Failed submissions on a retiring tracker over the test GPU.
mod on_a_tracker {
    use crate::RetiringTracker;
    use crate::interface::Tracker;
    use crate::test_gpu::{TestMemory, TestQueue, on_a_test_gpu, submit_part};
    use crate::ticket::{Request, Status, Ticket};

    type Sim = RetiringTracker<TestMemory, TestQueue>;

    fn tracker(config: crate::Config) -> (Sim, TestQueue) {
        on_a_test_gpu(config, RetiringTracker::new)
    }

    fn submit(tracker: &mut Sim, queue: &TestQueue, barrier: bool) -> Ticket {
        let index = queue.write_index();
        let acquired = tracker
            .acquire(Request::packet(index).barrier(barrier))
            .unwrap();
        queue.publish(acquired.signal);
        acquired.ticket
    }

    /// A fence whose submission fails before issuing anything: its packet
    /// becomes an empty one that names no signal, as the queue layer does.
    fn submit_failed_fence(tracker: &mut Sim, queue: &TestQueue) -> Ticket {
        let index = queue.write_index();
        let acquired = tracker
            .acquire(Request::packet(index).barrier(true))
            .unwrap();
        queue.publish(0);
        tracker.fail_submission(&acquired.ticket, 0).unwrap();
        acquired.ticket
    }

    fn named_fence(tracker: &Sim, ticket: &Ticket) -> u64 {
        tracker.ring().get(ticket.seq).unwrap().last_fence
    }

    #[test]
    fn a_failed_fence_hands_its_uses_to_the_fence_before_it() {
        let (mut tracker, queue) = tracker(Default::default());
        let fence = submit(&mut tracker, &queue, true);
        // The fence's submission fails after a plain use was handed out
        // behind it: both named it as their fence.
        let index = queue.write_index();
        let failed = tracker
            .acquire(Request::packet(index).barrier(true))
            .unwrap()
            .ticket;
        queue.publish(0);
        let after = submit(&mut tracker, &queue, false);
        assert_eq!(named_fence(&tracker, &after), failed.seq);
        tracker.fail_submission(&failed, 0).unwrap();
        assert_eq!(named_fence(&tracker, &failed), fence.seq);
        assert_eq!(named_fence(&tracker, &after), fence.seq);
        assert_eq!(tracker.proofs().last_fence(), fence.seq);
        let next = submit(&mut tracker, &queue, false);
        assert_eq!(named_fence(&tracker, &next), fence.seq);

        queue.run_until_idle();
        let loads = tracker.stats().host().loads;
        assert!(
            tracker.probe(),
            "the read index nominates the earlier fence"
        );
        assert_eq!(
            tracker.stats().host().loads - loads,
            1,
            "one load proves it"
        );
        assert_eq!(
            tracker.known_status(&fence).unwrap(),
            Some(Status::Complete)
        );
        assert_eq!(tracker.known_status(&failed).unwrap(), Some(Status::Failed));
        assert_eq!(
            tracker.known_status(&after).unwrap(),
            None,
            "a fence proves only the uses before it"
        );
        // A newer fence is the newest again, and proves the rest.
        let newer = submit(&mut tracker, &queue, true);
        assert_eq!(named_fence(&tracker, &newer), newer.seq);
        queue.run_until_idle();
        tracker.poll();
        assert_eq!(
            tracker.known_status(&after).unwrap(),
            Some(Status::Complete)
        );
        assert_eq!(tracker.known_status(&next).unwrap(), Some(Status::Complete));
    }

    #[test]
    fn a_failed_fence_with_no_fence_before_it_in_flight_names_none() {
        let (mut tracker, queue) = tracker(Default::default());
        // The fence before it retired already.
        let fence = submit(&mut tracker, &queue, true);
        queue.run_until_idle();
        tracker.poll();
        assert_eq!(
            tracker.known_status(&fence).unwrap(),
            Some(Status::Complete)
        );
        let failed = submit_failed_fence(&mut tracker, &queue);
        assert_eq!(
            tracker.ring().head(),
            failed.seq,
            "the earlier fence is reclaimed"
        );
        assert_eq!(named_fence(&tracker, &failed), 0);
        assert_eq!(tracker.proofs().last_fence(), 0);

        // The fence before it is of another queue: it proves nothing here.
        let fence = submit(&mut tracker, &queue, true);
        tracker.note_queue_change(queue.clone());
        let failed = submit_failed_fence(&mut tracker, &queue);
        assert_eq!(named_fence(&tracker, &fence), fence.seq);
        assert_eq!(named_fence(&tracker, &failed), 0);
        assert_eq!(tracker.proofs().last_fence(), 0);
    }

    #[test]
    fn a_failed_plain_use_changes_no_fence() {
        let (mut tracker, queue) = tracker(Default::default());
        let fence = submit(&mut tracker, &queue, true);
        let plain = submit(&mut tracker, &queue, false);
        let after = submit(&mut tracker, &queue, false);
        tracker.fail_submission(&plain, 0).unwrap();
        assert_eq!(named_fence(&tracker, &plain), fence.seq);
        assert_eq!(named_fence(&tracker, &after), fence.seq);
        assert_eq!(tracker.proofs().last_fence(), fence.seq);
    }

    /// A use of `ops` operations of which the first `issued` were published
    /// (`test_gpu::submit_part`), failed.
    fn submit_failed_part(tracker: &mut Sim, queue: &TestQueue, ops: u32, issued: u32) -> Ticket {
        let ticket = submit_part(tracker, queue, ops, issued);
        tracker.fail_submission(&ticket, issued).unwrap();
        ticket
    }

    fn loads(tracker: &Sim) -> u64 {
        tracker.stats().host().loads + tracker.stats().device().loads
    }

    #[test]
    fn a_failed_submission_awaits_the_gpu_until_its_issued_part_ran() {
        let (mut tracker, queue) = tracker(Default::default());
        let failed = submit_failed_part(&mut tracker, &queue, 3, 2);
        let plain = submit(&mut tracker, &queue, false);
        assert_eq!(tracker.known_status(&failed).unwrap(), Some(Status::Failed));
        assert!(
            tracker.proof_procedures().awaits_gpu(failed.seq),
            "known failed, but its part runs"
        );
        assert!(
            tracker.proof_procedures().awaits_gpu(plain.seq),
            "not known done"
        );
        queue.run_until_idle();
        assert!(
            !tracker.proof_procedures().awaits_gpu(failed.seq),
            "its issued part ran"
        );

        // A fence after it proves its issued part ran, with no load.
        let failed = submit_failed_part(&mut tracker, &queue, 2, 1);
        let fence = submit(&mut tracker, &queue, true);
        queue.run_until_idle();
        assert!(tracker.probe());
        let before = loads(&tracker);
        assert!(!tracker.proof_procedures().awaits_gpu(failed.seq));
        assert!(!tracker.proof_procedures().awaits_gpu(fence.seq));
        assert_eq!(loads(&tracker), before, "the fence proves it");
    }

    /// A tracker whose ring holds two uses and may not grow, its AQL queue,
    /// and a copy engine (another queue of the same simulator).
    fn two_slots_and_a_copy_engine() -> (Sim, TestQueue, TestQueue) {
        let config = crate::Config {
            initial_size: 2,
            growth_limit: 1,
            refill_batch: 1,
            ..Default::default()
        };
        let (tracker, queue) = tracker(config);
        let copy_engine = TestQueue::new(&tracker.signals().shared().memory);
        (tracker, queue, copy_engine)
    }

    /// A full ring whose oldest use is a failed copy-engine submission still
    /// running pushes back naming it, not "out of signals": its issued part
    /// finishing frees the slot.
    #[test]
    fn back_pressure_names_a_failed_submission_whose_issued_part_runs() {
        let (mut tracker, queue, copy_engine) = two_slots_and_a_copy_engine();
        let copy = tracker.acquire(Request::copy_engine().ops(2)).unwrap();
        copy_engine.publish(copy.signal);
        tracker.fail_submission(&copy.ticket, 1).unwrap();
        let fence = submit(&mut tracker, &queue, true);
        queue.run_until_idle();
        assert_eq!(tracker.query(&fence).unwrap(), Status::Complete);

        let next = Request::packet(queue.write_index()).barrier(true);
        match tracker.acquire(next) {
            Err(crate::AcquireError::Backpressure {
                wait_for,
                in_flight,
            }) => {
                assert_eq!((wait_for, in_flight), (copy.ticket, 2));
            }
            other => panic!("expected back-pressure, got {other:?}"),
        }
        copy_engine.run_until_idle();
        assert!(tracker.acquire(next).is_ok(), "its issued part ran: room");
        assert_eq!(tracker.query(&copy.ticket).unwrap(), Status::Failed);
    }

    /// A full ring whose oldest use runs on a copy engine names that use,
    /// not the pending fence behind it: no fence of the AQL queue proves a
    /// copy-engine use, so the fence completing would free nothing.
    #[test]
    fn back_pressure_names_an_oldest_copy_engine_use_not_a_fence_behind_it() {
        let (mut tracker, queue, copy_engine) = two_slots_and_a_copy_engine();
        let copy = tracker.acquire(Request::copy_engine()).unwrap();
        copy_engine.publish(copy.signal);
        let fence = submit(&mut tracker, &queue, true);

        let next = Request::packet(queue.write_index()).barrier(true);
        match tracker.acquire(next) {
            Err(crate::AcquireError::Backpressure { wait_for, .. }) => {
                assert_eq!(wait_for, copy.ticket, "not the fence {fence:?}");
            }
            other => panic!("expected back-pressure, got {other:?}"),
        }
        // The fence completing frees nothing: the copy-engine use is still
        // the oldest, and still named.
        queue.run_until_idle();
        assert_eq!(tracker.query(&fence).unwrap(), Status::Complete);
        match tracker.acquire(next) {
            Err(crate::AcquireError::Backpressure { wait_for, .. }) => {
                assert_eq!(wait_for, copy.ticket);
            }
            other => panic!("expected back-pressure, got {other:?}"),
        }
        copy_engine.run_until_idle();
        assert!(tracker.acquire(next).is_ok(), "the named use done: room");
    }
}

/// The reclaim walk's fast path asks `proven_run` how far a fence's proof
/// reaches from the oldest use; the slow path asks `fence_proves` use by
/// use. Over a generation of AQL uses with increasing indices (gaps
/// included), a drain and a new generation, the two agree on every use, a
/// run ending where its generation does.
#[test]
fn the_walks_run_and_the_per_use_proof_agree() {
    let (_shared, cells) = host_cell_refs(1);
    let mut proofs = Proofs::new(BITS);
    // seq -> AQL index, with gaps; every third use a fence.
    let mut slots = Vec::new();
    let check = |proofs: &Proofs, slots: &[(u64, Slot<usize>)]| {
        for head in 1..=slots.len() as u64 + 1 {
            let run = proofs.proven_run(head);
            let per_use = slots
                .iter()
                .filter(|(seq, _)| *seq >= head)
                // A run stays within one generation: the walk asks again
                // where the next begins.
                .take_while(|(seq, slot)| {
                    proofs.same_generation(head, *seq) && proofs.fence_proves(*seq, slot)
                })
                .count() as u64;
            assert_eq!(run, per_use, "from use {head}");
        }
    };
    let mut aql = 100;
    for seq in 1..=12u64 {
        aql += 1 + seq % 3;
        let mut slot = Slot::new(spare(&cells[0]));
        slot.aql = aql;
        proofs.note_packet(seq, aql, seq % 3 == 0);
        slots.push((seq, slot));
        check(&proofs, &slots);
        if seq % 3 == 0 && seq != 12 {
            proofs.prove(seq, aql);
            check(&proofs, &slots);
        }
    }
    proofs.drain();
    check(&proofs, &slots);
    assert_eq!(proofs.proven_run(1), 12, "the drain proves every use");
    // A new generation (its indices start afresh, below the old ones):
    // nothing of it is proven; the older generation keeps what its drain
    // proved, and a run from one of its uses ends at its last.
    proofs.new_generation(13, 1);
    for seq in 13..=15u64 {
        let mut slot = Slot::new(spare(&cells[0]));
        slot.aql = seq;
        proofs.note_packet(seq, seq, true);
        slots.push((seq, slot));
    }
    check(&proofs, &slots);
    assert_eq!(proofs.proven_run(13), 0);
    assert_eq!(proofs.proven_run(5), 8, "an older generation's use");
    // The new generation's fence proves its own uses, none of the older.
    proofs.prove(14, 14);
    check(&proofs, &slots);
    assert_eq!(proofs.proven_run(13), 2);
    assert_eq!(proofs.proven_run(12), 1, "the older run stops at its end");
}

/// An older generation keeps its newest fence and what its fences proved,
/// until its last use retired; its own fences prove only its own uses.
#[test]
fn an_older_generation_proves_its_own_uses_only() {
    let mut proofs = Proofs::new(BITS);
    for seq in 1..=4 {
        proofs.note_packet(seq, 10 + seq, seq % 2 == 0);
    }
    proofs.prove(2, 12);
    proofs.new_generation(5, 1);
    assert_eq!(
        proofs.older().iter().copied().collect::<Vec<_>>(),
        [Older {
            start: 1,
            end: 5,
            newest_fence: 4,
            proven_through: 2
        }]
    );
    assert_eq!(proofs.generation_of(3), Some(1..5));
    assert_eq!(proofs.generation_of(5), Some(5..u64::MAX));
    assert!(proofs.same_generation(1, 4) && !proofs.same_generation(4, 5));
    proofs.note_packet(5, 0, true);
    proofs.prove_in_generation(4, 14);
    assert_eq!(proofs.older()[0].proven_through, 4);
    assert_eq!(proofs.snapshot().1, None, "nothing of the new generation");
    proofs.prove_in_generation(5, 0);
    assert_eq!(proofs.older()[0].proven_through, 4, "nothing of the older");
    proofs.forget_retired_generations(4);
    assert_eq!(proofs.older().len(), 1, "use 4 is still in flight");
    proofs.forget_retired_generations(5);
    assert!(proofs.older().is_empty());
    assert_eq!(proofs.generation_of(3), None, "none of its uses in flight");
    // A generation none of whose uses is in flight at its change is not
    // kept at all.
    proofs.new_generation(9, 9);
    assert!(proofs.older().is_empty());
}
