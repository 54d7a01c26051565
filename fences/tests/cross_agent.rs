//! Devices on two agents of one simulator (`SimPlatform::on_agent`): a
//! queue of agent 1 waits for agent 0's device-memory signals, elapsed time
//! between the two devices' events is refused. (The long scenarios, on the
//! simulator and the ROCr stand-in, are tests/tests/backends/cross_agent.rs
//! of the `scenarios` crate.)

mod support;

use sigretire_queue::sim::engine::SimQueueConfig;
use sigretire_queue::sim::{AgentId, HostFlag, Kernel, Sim, SimConfig, SimPlatform};
use sigretire_queue::tracker::{Config, Placement, Status, Tracker};
use sigretire_queue::{CommandStatus, DeviceConfig, ElapsedError, Error};
use support::*;

/// A stepped simulator of two agents; trackers keep their signals in
/// device memory (of the agent their queue runs on).
fn two_agents() -> (SimPlatform, SimPlatform) {
    let gpu0 = SimPlatform::new(Sim::new(SimConfig {
        agents: 2,
        ..SimConfig::default()
    }))
    .with_tracker_config(Config {
        signals: Placement::Device,
        ..Config::default()
    });
    let gpu1 = gpu0.on_agent(AgentId(1));
    (gpu0, gpu1)
}

#[test]
fn a_platform_on_agent_one_makes_its_queues_and_signals_there() {
    let (gpu0, gpu1) = two_agents();
    let device0 = gpu0.device(DeviceConfig::default(), bounded()).unwrap();
    let device1 = gpu1.device(DeviceConfig::default(), bounded()).unwrap();
    for (device, agent) in [(&device0, AgentId(0)), (&device1, AgentId(1))] {
        let queue = device.default_queue();
        assert_eq!(queue.with_tracker(|t| t.queue().agent()), agent);
        let event = queue.record_event().unwrap();
        let packet = queue.with_tracker(|t| t.queue().truth(event.aql_index().unwrap()).unwrap());
        let signal = gpu0.sim().resolve(packet.completion_signal).unwrap();
        assert_eq!(gpu0.sim().agent_of(signal), agent, "its VRAM");
        assert_eq!(
            gpu0.sim().placement(signal),
            sigretire_sim::Placement::Device
        );
    }
    // Both platforms are one machine: one simulator drives both agents.
    assert_eq!(gpu0.sim().id(), gpu1.sim().id());
}

#[test]
fn agent_one_waits_for_agent_zeros_spinning_kernel_then_runs() {
    let (gpu0, gpu1) = two_agents();
    let device0 = gpu0.device(DeviceConfig::default(), bounded()).unwrap();
    let device1 = gpu1.device(DeviceConfig::default(), bounded()).unwrap();
    let (producer, consumer) = (device0.default_queue(), device1.default_queue());
    let sim = gpu0.sim();
    for round in 0..50 {
        let flag = HostFlag::new();
        producer
            .launch(sim.register_kernel(Kernel::SpinUntil(flag.clone())))
            .unwrap();
        let event = producer.record_event().unwrap();
        let wait = if round % 2 == 0 {
            consumer.wait_event(&event).unwrap()
        } else {
            consumer.wait_queue(producer).unwrap()
        };
        assert_eq!(wait.dependencies(), 1);
        let after = consumer.launch_empty().unwrap();
        sim.run_until_idle();
        assert_eq!(after.status(), CommandStatus::Pending, "round {round}");
        assert_eq!(event.query(), Status::Pending);
        flag.set();
        sim.run_until_idle();
        assert_eq!(after.status(), CommandStatus::Complete, "round {round}");
        let produced =
            producer.with_tracker(|t| t.queue().truth(event.aql_index().unwrap()).unwrap());
        let ran = consumer.with_tracker(|t| t.queue().truth(after.aql_index()).unwrap());
        assert!(
            ran.start_ts.unwrap() >= produced.end_ts.unwrap(),
            "round {round}"
        );
    }
    gpu0.run_while(|| consumer.synchronize()).unwrap();
    gpu0.run_while(|| producer.synchronize()).unwrap();
    // The completion thread may still be finishing a batch whose fence the
    // synchronize proved: it holds the fence's signal until it does (the
    // walk parks it meanwhile), as the backends' cross-agent scenario says.
    for queue in [consumer, producer] {
        wait_until("the completion thread finished its batches", || {
            queue.batches_in_completion() == 0
        });
    }
    let census = producer.with_tracker(|t| {
        t.poll();
        t.reclaim();
        t.census()
    });
    assert_eq!((census.parked, census.pins), (0, 0), "{census:?}");
    assert_eq!(consumer.with_tracker(|t| t.census().pins), 0);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

#[test]
fn elapsed_time_between_events_of_two_agents_is_refused() {
    let (gpu0, gpu1) = two_agents();
    let device0 = gpu0.device(DeviceConfig::default(), bounded()).unwrap();
    let device1 = gpu1.device(DeviceConfig::default(), bounded()).unwrap();
    let here = device0.default_queue().record_event().unwrap();
    device1.default_queue().wait_event(&here).unwrap();
    let there = device1.default_queue().record_event().unwrap();
    gpu0.sim().run_until_idle();
    here.synchronize().unwrap();
    there.synchronize().unwrap();
    // Ordered on the GPU (agent 1 waited for agent 0), still two clocks.
    assert_eq!(here.elapsed_to(&there), Err(ElapsedError::DifferentDevices));
    assert_eq!(there.elapsed_to(&here), Err(ElapsedError::DifferentDevices));
    assert_eq!(there.elapsed_to(&there), Ok(std::time::Duration::ZERO));
}

#[test]
fn an_agent_the_simulator_lacks_is_refused_when_a_queue_is_made() {
    let (gpu0, _) = two_agents();
    let absent = gpu0.on_agent(AgentId(2));
    assert!(matches!(
        absent.device(DeviceConfig::default(), bounded()),
        Err(Error::Queue(_))
    ));
}

/// Agent 1's ring in system memory, agent 0's in VRAM: agent 0's own
/// packets follow its re-arms through the BAR and need no HDP flush, but
/// agent 1's barrier reads agent 0's signal through a path the BAR does not
/// order, so the simulator asks for an HDP flush of agent 0 first. Agent
/// 0's tracker issues it when it pins the signal for the waiter, as for a
/// copy engine's use, round after round of recycled signals.
#[test]
fn a_consumer_ring_in_system_memory_gets_the_producers_flush_when_it_waits() {
    let (gpu0, gpu1) = two_agents();
    let host_ring = SimQueueConfig {
        ring: sigretire_sim::Placement::Host,
        ..gpu1.sim_queue_config()
    };
    let gpu1 = gpu1.with_sim_queue_config(host_ring);
    let device0 = gpu0.device(DeviceConfig::default(), bounded()).unwrap();
    let device1 = gpu1.device(DeviceConfig::default(), bounded()).unwrap();
    let (producer, consumer) = (device0.default_queue(), device1.default_queue());
    let sim = gpu0.sim();
    for round in 0..200 {
        // The event shares the kernel's completion: a device-memory signal.
        producer.launch_empty().unwrap();
        let event = producer.record_event().unwrap();
        let flushes = sim.counters().hdp_flushes;
        assert_eq!(consumer.wait_event(&event).unwrap().dependencies(), 1);
        assert!(
            sim.counters().hdp_flushes > flushes || round > 0,
            "the first wait flushes agent 0's HDP"
        );
        let after = consumer.launch_empty().unwrap();
        sim.run_until_idle();
        assert_eq!(after.status(), CommandStatus::Complete, "round {round}");
        assert!(
            sim.violations().is_empty(),
            "round {round}: {:?}",
            sim.violations()
        );
    }
    let stats = producer.with_tracker(|t| t.stats());
    assert!(stats.rearms > 100, "agent 0's signals were recycled");
    assert!(
        stats.device().flushes > 0,
        "agent 0 flushed for agent 1's reads"
    );
}
