//! Helpers shared by the integration tests.
#![allow(dead_code)] // each test binary uses a subset

use sigretire_sim::{AgentId, Placement, Queue, Signal, Sim, SimConfig, SimQueueConfig};
use std::time::{Duration, Instant};

/// A stepped, zero-cost simulator with `agents` agents.
pub fn stepped(agents: u32) -> Sim {
    Sim::new(SimConfig {
        agents,
        ..SimConfig::default()
    })
}

/// A queue of `sim` with `config`.
pub fn queue(sim: &Sim, config: SimQueueConfig) -> Queue {
    sim.create_queue(config).expect("valid queue config")
}

/// `count` signals at `placement` of agent 0, armed to 1 and fenced.
pub fn armed(sim: &Sim, count: usize, placement: Placement) -> Vec<Signal> {
    armed_on(sim, count, placement, AgentId(0))
}

/// `count` signals at `placement` of `agent`, armed to 1, fenced and flushed.
pub fn armed_on(sim: &Sim, count: usize, placement: Placement, agent: AgentId) -> Vec<Signal> {
    let signals = sim.allocate(count, placement, agent).expect("allocation");
    for &s in &signals {
        sim.store(s, 1);
    }
    sim.store_fence();
    sim.hdp_flush(agent);
    signals
}

/// Polls `condition` until it holds or `limit` passes; returns whether it held.
pub fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if condition() {
            return true;
        }
        std::thread::yield_now();
    }
    condition()
}
