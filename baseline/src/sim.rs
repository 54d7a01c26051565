//! The baseline on the simulator: what the tests, the fuzz targets and the
//! examples make in one call.

use crate::BaselineTracker;
use sigretire_sim::Queue;
use sigretire_sim::backend::{self as sim_backend, SimMemory};
use sigretire_tracker::kit::Arc;
use sigretire_tracker::{Config, CreateError};

/// The baseline on a simulated queue.
pub type SimBaseline = BaselineTracker<SimMemory, Queue>;

/// A baseline tracker on a fresh stepped simulator, and its queue.
///
/// ```
/// use sigretire_tracker::{Config, Request, Status, Tracker};
/// use sigretire_sim::backend as sim_backend;
///
/// let (mut tracker, queue) = sigretire_baseline::sim::stepped(Config::default()).unwrap();
/// let index = queue.reserve().unwrap();
/// let acquired = tracker.acquire(Request::packet(index).barrier(true)).unwrap();
/// sim_backend::submit_barrier(&queue, index, acquired.signal);
/// queue.run_until_idle();
/// let loads = |t: &sigretire_baseline::sim::SimBaseline| t.stats().host().loads + t.stats().device().loads;
/// let before = loads(&tracker);
/// assert_eq!(tracker.query(&acquired.ticket).unwrap(), Status::Complete);
/// // The baseline's only proof: a load of the use's own signal.
/// assert_eq!(loads(&tracker) - before, 1);
/// ```
pub fn stepped(config: Config) -> Result<(SimBaseline, Queue), CreateError> {
    let (sim, queue) = sim_backend::stepped_queue();
    on(&sim, queue, config)
}

/// A baseline tracker on `queue` of `sim`, with signals in `sim`'s memory
/// of the queue's agent.
pub fn on(
    sim: &sigretire_sim::Sim,
    queue: Queue,
    config: Config,
) -> Result<(SimBaseline, Queue), CreateError> {
    let memory = Arc::new(SimMemory::new(sim.clone(), queue.agent()));
    let tracker = BaselineTracker::new(memory, queue.clone(), config)?;
    Ok((tracker, queue))
}
