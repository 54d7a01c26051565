//! Violations: the checks at publication (fences, HDP flushes, unknown
//! handles, malformed packets) and stores to signals still in use.

mod common;

use common::{armed, queue, stepped};
use sigretire_sim::hsa_sys::{
    HSA_PACKET_TYPE_AGENT_DISPATCH, HSA_PACKET_TYPE_INVALID, HSA_SIGNAL_CONDITION_EQ, PacketHeader,
    PacketWords, hsa_barrier_and_packet_t, hsa_signal_t,
};
use sigretire_sim::{
    AgentId, Placement, Queue, Sim, SimQueueConfig, StepError, Violation, packets,
};

fn ring_in(ring: Placement) -> SimQueueConfig {
    SimQueueConfig {
        ring,
        ..SimQueueConfig::default()
    }
}

/// Allocates one signal, re-arms it with `prepare`, then publishes a packet
/// completing it through a ring at `ring`.
fn publish_after(
    placement: Placement,
    ring: Placement,
    prepare: impl FnOnce(&Sim, sigretire_sim::Signal),
) -> Vec<Violation> {
    let sim = stepped(2);
    let q = queue(&sim, ring_in(ring));
    let s = sim.allocate(1, placement, AgentId(1)).unwrap()[0];
    prepare(&sim, s);
    q.submit(packets::kernel(0, Some(s))).unwrap();
    sim.violations()
}

#[test]
fn an_unfenced_device_store_is_caught_at_publication() {
    let violations = publish_after(Placement::Device, Placement::Device, |sim, s| {
        sim.store(s, 1)
    });
    assert!(
        matches!(
            violations[..],
            [Violation::Unfenced {
                queue: 0,
                index: 0,
                ..
            }]
        ),
        "{violations:?}"
    );
}

#[test]
fn a_fence_suffices_for_a_ring_in_device_memory() {
    let violations = publish_after(Placement::Device, Placement::Device, |sim, s| {
        sim.store(s, 1);
        sim.store_fence();
    });
    assert_eq!(violations, []);
}

#[test]
fn a_ring_in_host_memory_also_needs_an_hdp_flush() {
    let violations = publish_after(Placement::Device, Placement::Host, |sim, s| {
        sim.store(s, 1);
        sim.store_fence();
    });
    assert!(
        matches!(
            violations[..],
            [Violation::Unflushed {
                agent: AgentId(1),
                ..
            }]
        ),
        "{violations:?}"
    );
}

#[test]
fn fenced_and_flushed_stores_are_visible_through_a_host_ring() {
    let violations = publish_after(Placement::Device, Placement::Host, |sim, s| {
        sim.store(s, 1);
        sim.store_fence();
        sim.hdp_flush(AgentId(1));
    });
    assert_eq!(violations, []);
}

#[test]
fn a_flush_before_the_fence_or_of_another_agent_does_not_count() {
    let violations = publish_after(Placement::Device, Placement::Host, |sim, s| {
        sim.store(s, 1);
        sim.hdp_flush(AgentId(1));
        sim.store_fence();
    });
    assert!(
        matches!(violations[..], [Violation::Unflushed { .. }]),
        "{violations:?}"
    );
    let violations = publish_after(Placement::Device, Placement::Host, |sim, s| {
        sim.store(s, 1);
        sim.store_fence();
        sim.hdp_flush(AgentId(0));
    });
    assert!(
        matches!(violations[..], [Violation::Unflushed { .. }]),
        "{violations:?}"
    );
}

#[test]
fn a_fence_covers_only_earlier_stores() {
    let violations = publish_after(Placement::Device, Placement::Device, |sim, s| {
        sim.store_fence();
        sim.store(s, 1);
    });
    assert!(
        matches!(violations[..], [Violation::Unfenced { .. }]),
        "{violations:?}"
    );
}

#[test]
fn host_memory_signals_need_neither_fence_nor_flush() {
    for ring in [Placement::Device, Placement::Host] {
        assert_eq!(
            publish_after(Placement::Host, ring, |sim, s| sim.store(s, 1)),
            []
        );
    }
}

#[test]
fn every_signal_a_packet_names_is_checked() {
    let sim = stepped(1);
    let q = queue(&sim, SimQueueConfig::default());
    let s = sim.allocate(3, Placement::Device, AgentId(0)).unwrap();
    sim.store(s[0], 1);
    sim.store_fence();
    sim.store(s[1], 1); // dependency, unfenced
    q.submit(packets::barrier_and(&[s[1]], Some(s[0]))).unwrap();
    sim.store(s[2], 1); // barrier-value signal, unfenced
    q.submit(packets::barrier_value(
        s[2],
        HSA_SIGNAL_CONDITION_EQ,
        0,
        -1,
        None,
    ))
    .unwrap();
    let unfenced: Vec<_> = sim
        .violations()
        .into_iter()
        .map(|v| match v {
            Violation::Unfenced { index, signal, .. } => (index, signal),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(unfenced, [(0, s[1]), (1, s[2])]);
}

#[test]
fn re_arming_a_signal_before_its_packet_completed_is_caught() {
    let sim = stepped(1);
    let q = queue(&sim, SimQueueConfig::default());
    let s = armed(&sim, 1, Placement::Device)[0];
    q.submit(packets::kernel(0, Some(s))).unwrap();
    q.launch().unwrap();
    q.advance_read_index().unwrap(); // consumed is not complete
    sim.store(s, 1);
    assert!(
        matches!(
            sim.take_violations()[..],
            [Violation::StoreWhileInFlight {
                completions: 1,
                barriers: 0,
                value: 1,
                ..
            }]
        ),
        "re-armed while its use is incomplete"
    );
    q.complete(0).unwrap();
    sim.store(s, 1);
    assert_eq!(sim.violations(), []);
}

#[test]
fn re_arming_a_signal_a_gpu_waiter_still_looks_at_is_caught() {
    let sim = stepped(1);
    let (waiter, producer) = (
        queue(&sim, SimQueueConfig::default()),
        queue(&sim, SimQueueConfig::default()),
    );
    let s = armed(&sim, 1, Placement::Device)[0];
    producer.submit(packets::kernel(0, Some(s))).unwrap();
    producer.run_until_idle();
    // The producer's use is complete (0), but a barrier published on another
    // queue still waits on it.
    let barrier = waiter.submit(packets::barrier_and(&[s], None)).unwrap();
    sim.store(s, 1);
    assert!(
        matches!(
            sim.take_violations()[..],
            [Violation::StoreWhileInFlight {
                completions: 0,
                barriers: 1,
                ..
            }]
        ),
        "re-armed while a GPU waiter looks at it"
    );
    sim.store(s, 0);
    sim.take_violations();
    waiter.run_until_idle();
    assert!(waiter.truth(barrier).unwrap().completed);
    sim.store(s, 1);
    assert_eq!(sim.violations(), []);
}

#[test]
fn a_batched_store_is_checked_and_counted_like_single_stores() {
    let sim = stepped(1);
    let q = queue(&sim, SimQueueConfig::default());
    let s = armed(&sim, 3, Placement::Device);
    q.submit(packets::kernel(0, Some(s[1]))).unwrap();
    let before = sim.counters();
    sim.store_many(&s, 1);
    // The one still in flight is caught, the others are not.
    assert!(matches!(
        sim.take_violations()[..],
        [Violation::StoreWhileInFlight { signal, completions: 1, .. }] if signal == s[1]
    ));
    assert_eq!(sim.counters().since(before).device.stores, 3);
    q.run_until_idle();
    // Unfenced until a fence covers the whole batch.
    sim.store_many(&s[..1], 1);
    q.submit(packets::kernel(0, Some(s[0]))).unwrap();
    assert!(matches!(
        sim.take_violations()[..],
        [Violation::Unfenced { .. }]
    ));
    q.run_until_idle();
    sim.store_many(&s, 1);
    sim.store_fence();
    q.submit(packets::kernel(0, Some(s[2]))).unwrap();
    assert_eq!(sim.violations(), []);
}

fn barrier_naming(handle: u64) -> PacketWords {
    hsa_barrier_and_packet_t {
        header: PacketHeader::new(sigretire_sim::hsa_sys::HSA_PACKET_TYPE_BARRIER_AND).bits(),
        dep_signal: [
            hsa_signal_t { handle },
            hsa_signal_t::NULL,
            hsa_signal_t::NULL,
            hsa_signal_t::NULL,
            hsa_signal_t::NULL,
        ],
        ..Default::default()
    }
    .into()
}

fn unknown_handle_fails_the_queue(q: &Queue, sim: &Sim, handle: u64) {
    let index = q.submit(barrier_naming(handle)).unwrap();
    let violations = sim.take_violations();
    assert_eq!(
        violations,
        [Violation::UnknownSignal {
            queue: q.id(),
            index,
            handle: hsa_signal_t { handle }
        }],
        "{handle:#x}"
    );
    assert!(matches!(q.launch(), Err(StepError::MalformedPacket { .. })));
    assert!(q.is_failed());
}

#[test]
fn a_handle_that_is_not_a_signal_is_reported_and_never_dereferenced() {
    let sim = stepped(1);
    let other = stepped(1);
    let mine = sim.allocate(2, Placement::Host, AgentId(0)).unwrap();
    let theirs = other.allocate(1, Placement::Host, AgentId(0)).unwrap()[0];
    for handle in [
        0xdead_beef_0000,             // nowhere
        mine[0].handle().handle + 8,  // inside a block
        mine[1].handle().handle + 64, // just past the batch
        theirs.handle().handle,       // another simulator's signal
    ] {
        let q = queue(&sim, SimQueueConfig::default());
        unknown_handle_fails_the_queue(&q, &sim, handle);
    }
}

#[test]
fn malformed_packets_are_reported_and_fail_the_queue_on_launch() {
    let sim = stepped(1);
    let unregistered = queue(&sim, SimQueueConfig::default());
    unregistered.submit(packets::kernel(42, None)).unwrap();
    let mut agent_dispatch = packets::kernel(0, None);
    agent_dispatch.0[0] = u32::from(PacketHeader::new(HSA_PACKET_TYPE_AGENT_DISPATCH).bits());
    let unsupported = queue(&sim, SimQueueConfig::default());
    unsupported.submit(agent_dispatch).unwrap();
    let reasons: Vec<_> = sim
        .violations()
        .into_iter()
        .map(|v| match v {
            Violation::MalformedPacket { reason, .. } => reason,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(reasons.len(), 2);
    for q in [unregistered, unsupported] {
        assert!(matches!(
            q.launch(),
            Err(StepError::MalformedPacket { index: 0, .. })
        ));
        assert!(q.is_failed());
    }
}

#[test]
fn writes_to_slots_the_producer_does_not_own_are_ignored_and_reported() {
    let sim = stepped(1);
    let q = queue(&sim, SimQueueConfig::default());
    q.write(0, packets::kernel(0, None)); // not reserved
    let index = q.reserve().unwrap();
    let mut invalid = packets::kernel(0, None);
    invalid.0[0] = u32::from(HSA_PACKET_TYPE_INVALID);
    q.write(index, invalid); // INVALID header
    q.write(index, packets::kernel(0, None));
    q.write(index, packets::kernel(0, None)); // published twice
    let reasons: Vec<_> = sim
        .violations()
        .into_iter()
        .map(|v| match v {
            Violation::InvalidWrite {
                index: 0, reason, ..
            } => reason,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(q.truth(0).unwrap().published);
}

#[test]
fn violations_explain_themselves() {
    let violations = publish_after(Placement::Device, Placement::Host, |sim, s| {
        sim.store(s, 1);
        sim.store_fence();
    });
    let text = violations[0].to_string();
    assert!(text.contains("HDP flush of agent 1"), "{text}");
}
