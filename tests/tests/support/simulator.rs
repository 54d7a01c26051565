//! The simulator as a scenario backend: `sim`'s packet processor and signal
//! memory through the tracker's adapter. The simulator is the oracle itself,
//! so its ground truth and counters are read directly.

use super::{Backend, Executed, Machine, Refused, Release, Truth, Violation};
use sigretire_scenarios::check::Check;
use sigretire_sim::backend::SimMemory;
use sigretire_sim::{CostProfile, Mode, Queue, Sim, SimConfig, SimQueueConfig, StepError};
use sigretire_tracker::Placement;
use std::sync::Arc;
use std::time::Duration;

/// A simulator (two agents, or the machine's GPUs if more) and the
/// configuration of its queues (on agent 0 unless made with `queue_on`).
#[derive(Clone, Debug)]
pub struct Simulator {
    pub sim: Sim,
    pub queue_config: SimQueueConfig,
}

const fn to_sim(placement: Placement) -> sigretire_sim::Placement {
    match placement {
        Placement::Host => sigretire_sim::Placement::Host,
        Placement::Device => sigretire_sim::Placement::Device,
    }
}

impl From<StepError> for Refused {
    fn from(error: StepError) -> Self {
        match error {
            StepError::NotReady { .. } => Refused::NotReady,
            other => Refused::Other(other.to_string()),
        }
    }
}

impl Backend for Simulator {
    type Memory = SimMemory;
    type Queue = Queue;

    fn new(machine: Machine) -> Self {
        let mode = if machine.threaded {
            Mode::Threaded
        } else {
            Mode::Stepped
        };
        Self {
            sim: Sim::new(SimConfig {
                agents: machine.gpus.max(2),
                mode,
                profile: CostProfile::zero(),
                ..SimConfig::default()
            }),
            queue_config: SimQueueConfig {
                size: 1 << 14,
                profiling: true,
                ring: to_sim(machine.ring),
                out_of_order: machine.out_of_order,
                truth_history: usize::try_from(machine.truth_history).unwrap(),
                ..SimQueueConfig::default()
            },
        }
    }

    fn queue_on(&self, gpu: u32) -> Queue {
        let config = SimQueueConfig {
            agent: sigretire_sim::AgentId(gpu),
            ..self.queue_config
        };
        self.sim.create_queue(config).unwrap()
    }

    fn memory(&self, queue: &Queue) -> Arc<SimMemory> {
        Arc::new(SimMemory::new(self.sim.clone(), queue.agent()))
    }

    fn write_index(queue: &Queue) -> u64 {
        queue.write_index()
    }

    fn empty_kernel(&self) -> u64 {
        0 // the simulator runs kernel object 0 as an empty kernel
    }

    fn spin_kernel(&self) -> (u64, Release) {
        let flag = sigretire_sim::HostFlag::new();
        let kernel = self
            .sim
            .register_kernel(sigretire_sim::Kernel::SpinUntil(flag.clone()));
        (kernel, Arc::new(move || flag.set()))
    }

    fn timed_kernel(&self, duration: Duration) -> u64 {
        self.sim
            .register_kernel(sigretire_sim::Kernel::Duration(duration))
    }

    fn timestamp_period(&self) -> Duration {
        self.sim.profile().gpu_tick
    }

    fn run(&self, queue: &Queue) {
        queue.run_until_idle();
    }

    fn run_all(&self) {
        self.sim.run_until_idle();
    }

    fn launch(&self, queue: &Queue) -> Result<u64, Refused> {
        Ok(queue.launch()?)
    }

    fn complete(&self, queue: &Queue, index: u64) -> Result<(), Refused> {
        Ok(queue.complete(index)?)
    }

    fn advance_read_index(&self, queue: &Queue) -> Result<u64, Refused> {
        Ok(queue.advance_read_index()?)
    }

    fn fail(&self, queue: &Queue) {
        queue.fail();
    }

    fn truth(&self, queue: &Queue, index: u64) -> Option<Truth> {
        queue.truth(index).map(|t| Truth {
            published: t.published,
            completed: t.completed,
            failed: t.failed,
            start_ts: t.start_ts,
            end_ts: t.end_ts,
            barrier: t.barrier,
            completion: t.completion_signal.handle,
        })
    }

    fn violations(&self) -> Vec<Violation> {
        self.sim
            .violations()
            .iter()
            .map(|v| Violation {
                check: Check::of_simulator(v),
                text: v.to_string(),
            })
            .collect()
    }

    fn tear_down(self) {
        // The simulator keeps no census of live objects: violations only.
        let violations = self.violations();
        assert!(violations.is_empty(), "the simulator saw: {violations:#?}");
    }

    fn reported_time(&self, tick: u64) -> u64 {
        tick // the adapter reports the packet processor's ticks as they are
    }

    fn placement(&self, _memory: &SimMemory, signal: u64) -> Placement {
        let signal = self
            .sim
            .resolve(hsa_sys::hsa_signal_t { handle: signal })
            .unwrap();
        match self.sim.placement(signal) {
            sigretire_sim::Placement::Host => Placement::Host,
            sigretire_sim::Placement::Device => Placement::Device,
        }
    }

    fn executed(&self, _memory: &SimMemory) -> Executed {
        let counters = self.sim.counters();
        Executed {
            store_fences: counters.store_fences,
            hdp_flushes: counters.hdp_flushes,
            fallbacks: None,
            runtime_signals: None,
        }
    }

    fn device_loads_seen(&self) -> u64 {
        self.sim.counters().device.loads
    }

    fn take_hdp_flush_register(&self) -> Option<u32> {
        None
    }

    fn exhaust_device_memory(&self, _memory: &SimMemory) {
        self.sim.set_device_memory_available(false);
    }

    fn fail_allocations(&self, _memory: &SimMemory) {
        self.sim.fail_allocations(1);
    }
}
