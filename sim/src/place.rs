//! Where things are in the simulated system: the GPU agents, and the two
//! kinds of memory a signal's block lives in. Plain values that the memory,
//! its counters, the cost profile and the errors all name.

use std::fmt;

/// Where a signal's 64-byte block lives.
///
/// ```
/// use sigretire_sim::{AgentId, Placement, Sim, SimConfig};
///
/// let sim = Sim::new(SimConfig::default());
/// let device = sim.allocate(1, Placement::Device, AgentId(0))?[0];
/// assert_eq!(sim.placement(device), Placement::Device);
/// // Without device memory (no large BAR), a request falls back to host memory.
/// sim.set_device_memory_available(false);
/// let fallback = sim.allocate(1, Placement::Device, AgentId(0))?[0];
/// assert_eq!(sim.placement(fallback), Placement::Host);
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Placement {
    /// System memory: cheap host loads and stores, coherent with the GPU, no
    /// fence or flush needed.
    Host,
    /// A GPU agent's VRAM seen through the large BAR: every host load is an
    /// uncached PCIe read, every host store is write-combined (fence it, and
    /// flush HDP where the consumer needs it).
    Device,
}

/// A GPU agent of the simulated system, numbered from 0 to
/// [`SimConfig::agents`](crate::SimConfig::agents) - 1.
///
/// Several agents share one signal memory, so a queue of one agent can wait
/// for a signal that another agent's queue completes:
///
/// ```
/// use sigretire_sim::{packets, AgentId, Placement, Sim, SimConfig, SimQueueConfig};
///
/// let sim = Sim::new(SimConfig { agents: 2, ..SimConfig::default() });
/// let gpu0 = sim.create_queue(SimQueueConfig { agent: AgentId(0), ..SimQueueConfig::default() })?;
/// let gpu1 = sim.create_queue(SimQueueConfig { agent: AgentId(1), ..SimQueueConfig::default() })?;
/// let produced = sim.allocate(1, Placement::Device, AgentId(0))?[0];
/// assert_eq!(sim.agent_of(produced), AgentId(0));
/// sim.store(produced, 1);
/// sim.store_fence();
///
/// let waits = gpu1.submit(packets::barrier_and(&[produced], None))?;
/// gpu1.run_until_idle();
/// assert!(!gpu1.truth(waits).unwrap().completed);
/// gpu0.submit(packets::kernel(0, Some(produced)))?;
/// sim.run_until_idle(); // drives every queue of every agent
/// assert!(gpu1.truth(waits).unwrap().completed);
/// assert_eq!(AgentId(1).to_string(), "agent 1");
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgentId(pub u32);

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "agent {}", self.0)
    }
}
