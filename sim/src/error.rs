//! Errors: [`SimError`] for the host-facing API, [`StepError`] for the
//! step-mode control of the packet processor.

use crate::place::AgentId;
use thiserror::Error;

/// What a host-facing call of the simulator can fail with.
///
/// ```
/// use sigretire_sim::{packets, Sim, SimConfig, SimQueueConfig, SimError};
///
/// let sim = Sim::new(SimConfig::default());
/// let queue = sim.create_queue(SimQueueConfig { size: 2, ..SimQueueConfig::default() })?;
/// queue.submit(packets::kernel(0, None))?;
/// queue.submit(packets::kernel(0, None))?;
/// let full = queue.submit(packets::kernel(0, None));
/// assert_eq!(full, Err(SimError::QueueFull));
/// assert!(full.unwrap_err().to_string().contains("wait until its read index advances"));
/// # Ok::<(), SimError>(())
/// ```
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum SimError {
    /// Signal memory is exhausted (an injected failure, see
    /// [`Sim::fail_allocations`](crate::Sim::fail_allocations)).
    #[error("out of signal memory: reuse signals you already own, or retry the allocation later")]
    OutOfMemory,
    /// The ring has no free slot: the packet `size` slots back has not been
    /// consumed yet.
    #[error("the queue is full: wait until its read index advances, then reserve again")]
    QueueFull,
    /// A step-mode call on a threaded simulator.
    #[error(
        "this call drives the packet processor step by step: it needs a simulator in Mode::Stepped"
    )]
    WrongMode,
    /// The agent does not exist.
    #[error("{agent} does not exist: this simulator has agents 0 to {}", agents.saturating_sub(1))]
    UnknownAgent {
        /// The agent asked for.
        agent: AgentId,
        /// How many agents the simulator has.
        agents: u32,
    },
    /// A configuration the simulator cannot honour; the text says which value
    /// to change.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// The processor thread of a threaded simulator could not be started.
    #[error(
        "could not start the packet processor thread ({0}): free some threads or use Mode::Stepped"
    )]
    ProcessorThread(String),
}

/// Why a packet could not launch yet.
///
/// ```
/// use sigretire_sim::{packets, AgentId, Blocked, Placement, Sim, SimConfig, SimQueueConfig, StepError};
///
/// let sim = Sim::new(SimConfig::default());
/// let queue = sim.create_queue(SimQueueConfig::default())?;
/// let dep = sim.allocate(1, Placement::Host, AgentId(0))?[0];
/// sim.store(dep, 1);
/// let blocked = |index, reason| Err(StepError::NotLaunchable { index, reason });
///
/// let barrier = queue.submit(packets::barrier_and(&[dep], None))?;
/// let index = queue.reserve()?;
/// queue.write(index, packets::kernel(0, None));
/// queue.launch().unwrap(); // the barrier: it waits for `dep`
/// assert_eq!(queue.launch(), blocked(index, Blocked::DoorbellNotRung));
/// queue.ring_doorbell(index);
/// assert_eq!(queue.launch(), blocked(index, Blocked::BarrierPacket { index: barrier }));
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Blocked {
    /// No packet has been reserved at this index.
    NotReserved,
    /// The slot is reserved but its packet has not been published (its header
    /// is still INVALID).
    NotPublished,
    /// The doorbell has not been rung for this index.
    DoorbellNotRung,
    /// The packet has the barrier bit and the earlier packet `waiting_for` has
    /// not completed.
    BarrierBit {
        /// The oldest earlier packet that is not complete.
        waiting_for: u64,
    },
    /// An earlier barrier packet (barrier-AND, barrier-OR, barrier-value) is
    /// still waiting for its condition: it holds up every later packet.
    BarrierPacket {
        /// The index of that barrier packet.
        index: u64,
    },
}

/// Why a step-mode call made no progress.
///
/// Nothing changes when a step call fails, so a test can probe what the
/// processor may do next:
///
/// ```
/// use sigretire_sim::{packets, Sim, SimConfig, SimQueueConfig, StepError};
///
/// let sim = Sim::new(SimConfig::default());
/// let queue = sim.create_queue(SimQueueConfig::default())?; // in order
/// let first = queue.submit(packets::kernel(0, None))?;
/// let second = queue.submit(packets::kernel(0, None))?;
/// assert_eq!(queue.complete(first), Err(StepError::NotLaunched { index: first }));
/// queue.launch().unwrap();
/// queue.launch().unwrap();
/// let early = queue.complete(second);
/// assert_eq!(early, Err(StepError::OutOfOrder { index: second, oldest: first }));
/// assert!(early.unwrap_err().to_string().contains("in-order queue"));
/// queue.complete(first).unwrap();
/// queue.complete(second).unwrap();
/// assert_eq!(queue.complete(second), Err(StepError::AlreadyComplete { index: second }));
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq, Hash)]
pub enum StepError {
    /// The next packet cannot launch yet.
    #[error("packet {index} cannot launch yet: {reason:?}")]
    NotLaunchable {
        /// The next packet in order.
        index: u64,
        /// What it waits for.
        reason: Blocked,
    },
    /// The packet (or, for `advance_read_index`, the packet at the read
    /// index) has not been launched.
    #[error("packet {index} has not been launched: launch it first")]
    NotLaunched {
        /// The packet.
        index: u64,
    },
    /// The packet's completion condition does not hold yet (a dependency is
    /// not satisfied, or a spinning kernel's flag is not set).
    #[error("packet {index} is not ready to complete: satisfy its condition first")]
    NotReady {
        /// The packet.
        index: u64,
    },
    /// An in-order queue completes its oldest incomplete packet first.
    #[error("packet {index} cannot complete before packet {oldest} on an in-order queue")]
    OutOfOrder {
        /// The packet asked for.
        index: u64,
        /// The oldest incomplete packet.
        oldest: u64,
    },
    /// The packet already completed.
    #[error("packet {index} already completed")]
    AlreadyComplete {
        /// The packet.
        index: u64,
    },
    /// The queue failed; it makes no more progress.
    #[error("the queue failed and makes no more progress")]
    QueueFailed,
    /// The packet was malformed (unsupported type, unknown kernel object, a
    /// handle that is not a signal): launching it failed the queue.
    #[error("packet {index} is malformed ({reason}): launching it failed the queue")]
    MalformedPacket {
        /// The packet.
        index: u64,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The queue is stalled: see [`Queue::stall`](crate::Queue::stall).
    #[error("the queue is stalled: call stall(false) to let it progress")]
    Stalled,
    /// A step-mode call on a threaded simulator.
    #[error(
        "this call drives the packet processor step by step: it needs a simulator in Mode::Stepped"
    )]
    WrongMode,
}
