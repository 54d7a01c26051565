//! Ground truth and violations: what really happened to each packet, and
//! every host action that would be a bug on real hardware.
//!
//! Tests use both as their oracle: a tracker may only report a use complete
//! when [`PacketTruth::completed`] says so, and a correct tracker leaves
//! [`Sim::violations`](crate::Sim::violations) empty.

use crate::memory::Signal;
use crate::place::AgentId;
use hsa_sys::{PacketWords, hsa_packet_type_t, hsa_signal_t};
use parking_lot::Mutex;
use thiserror::Error;

/// What really happened to one packet of a queue.
///
/// Timestamps are true GPU ticks ([`Sim::now_ticks`](crate::Sim::now_ticks)),
/// recorded whether or not the queue is profiled; on a profiled queue the same
/// values are written into the completion signal's block.
///
/// ```
/// use sigretire_sim::{packets, Sim, SimConfig, SimQueueConfig, STEPPED_TICKS_PER_EVENT};
///
/// let sim = Sim::new(SimConfig::default());
/// let queue = sim.create_queue(SimQueueConfig::default())?;
/// let index = queue.reserve()?;
/// let reserved = queue.truth(index).unwrap();
/// assert!(!reserved.published && !reserved.is_done());
///
/// queue.write(index, packets::kernel(0, None));
/// queue.ring_doorbell(index);
/// queue.launch().unwrap();
/// queue.complete(index).unwrap();
/// let truth = queue.truth(index).unwrap();
/// assert!(truth.published && truth.launched && truth.completed && !truth.failed);
/// assert!(truth.is_done());
/// // Stepped mode: one clock step per event, launch then completion.
/// assert_eq!(truth.end_ts.unwrap() - truth.start_ts.unwrap(), STEPPED_TICKS_PER_EVENT);
/// assert!(queue.truth(index + 1).is_none(), "never reserved");
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketTruth {
    /// The packet's AQL index.
    pub index: u64,
    /// Bits 0-7 of the header (`HSA_PACKET_TYPE_*`); INVALID while unpublished.
    pub packet_type: hsa_packet_type_t,
    /// The header's barrier bit.
    pub barrier: bool,
    /// The packet as published (all zeros while unpublished).
    pub packet: PacketWords,
    /// The completion signal the packet names (may be null).
    pub completion_signal: hsa_signal_t,
    /// Its header was written ([`Queue::write`](crate::Queue::write)).
    pub published: bool,
    /// The processor launched it.
    pub launched: bool,
    /// It completed: its completion signal was decremented.
    pub completed: bool,
    /// The queue failed before it completed: its completion signal was set
    /// negative.
    pub failed: bool,
    /// GPU time of the launch.
    pub start_ts: Option<u64>,
    /// GPU time of the completion.
    pub end_ts: Option<u64>,
}

impl PacketTruth {
    /// Whether the packet reached a final state (completed or failed).
    pub fn is_done(&self) -> bool {
        self.completed || self.failed
    }
}

/// A host action that would be a bug on real hardware.
///
/// Violations are recorded, not returned: the simulator carries on as the
/// hardware would, and a test checks [`Sim::violations`](crate::Sim::violations)
/// afterwards.
///
/// ```
/// use sigretire_sim::{packets, AgentId, Placement, Sim, SimConfig, SimQueueConfig, Violation};
///
/// let sim = Sim::new(SimConfig::default());
/// let queue = sim.create_queue(SimQueueConfig::default())?;
/// let signal = sim.allocate(1, Placement::Device, AgentId(0))?[0];
///
/// sim.store(signal, 1); // no store fence before publication
/// queue.submit(packets::kernel(0, Some(signal)))?;
/// sim.store(signal, 1); // re-armed while the packet is still pending
///
/// let violations = sim.take_violations();
/// assert!(matches!(
///     violations[..],
///     [
///         Violation::Unfenced { queue: 0, index: 0, .. },
///         Violation::StoreWhileInFlight { completions: 1, barriers: 0, .. },
///     ]
/// ));
/// assert!(violations[0].to_string().contains("not fenced"));
/// assert!(sim.violations().is_empty(), "taken");
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum Violation {
    /// A packet was published naming a device-memory signal whose last host
    /// store was not followed by a store fence: the GPU may read the old value.
    #[error(
        "queue {queue} packet {index}: {signal:?} was stored to but not fenced before publication"
    )]
    Unfenced {
        /// The queue's id.
        queue: u64,
        /// The packet's index.
        index: u64,
        /// The signal.
        signal: Signal,
    },
    /// A packet was published through a ring in system memory naming a
    /// device-memory signal whose last host store was fenced but not flushed
    /// by an HDP flush of the signal's agent after that fence.
    ///
    /// ```
    /// use sigretire_sim::{packets, AgentId, Placement, Sim, SimConfig, SimQueueConfig, Violation};
    ///
    /// let sim = Sim::new(SimConfig::default());
    /// let ring_in_host = SimQueueConfig { ring: Placement::Host, ..SimQueueConfig::default() };
    /// let host_ring = sim.create_queue(ring_in_host)?;
    /// let device_ring = sim.create_queue(SimQueueConfig::default())?;
    /// let signals = sim.allocate(2, Placement::Device, AgentId(0))?;
    /// sim.store_many(&signals, 1);
    /// sim.store_fence(); // enough for a ring in device memory only
    /// device_ring.submit(packets::kernel(0, Some(signals[0])))?;
    /// host_ring.submit(packets::kernel(0, Some(signals[1])))?;
    /// assert_eq!(
    ///     sim.violations(),
    ///     [Violation::Unflushed {
    ///         queue: host_ring.id(),
    ///         index: 0,
    ///         signal: signals[1],
    ///         agent: AgentId(0),
    ///     }]
    /// );
    /// # Ok::<(), sigretire_sim::SimError>(())
    /// ```
    #[error(
        "queue {queue} packet {index}: {signal:?} was fenced but needs an HDP flush of {agent} before publication"
    )]
    Unflushed {
        /// The queue's id.
        queue: u64,
        /// The packet's index.
        index: u64,
        /// The signal.
        signal: Signal,
        /// The agent whose HDP must be flushed.
        agent: AgentId,
    },
    /// The host stored to a signal that a published, incomplete packet names
    /// as its completion signal, or that a pending barrier packet waits on:
    /// re-armed while its use is incomplete or while a GPU waiter looks at it.
    #[error(
        "{signal:?} was stored ({value}) while {completions} incomplete packet(s) complete it and \
         {barriers} pending barrier(s) wait on it"
    )]
    StoreWhileInFlight {
        /// The signal.
        signal: Signal,
        /// The value stored.
        value: i64,
        /// Incomplete packets naming it as completion signal.
        completions: u32,
        /// Pending barrier packets naming it as a dependency.
        barriers: u32,
    },
    /// A packet names an address that is not a signal of this simulator
    /// (launching it fails the queue, as a page fault would).
    #[error("queue {queue} packet {index}: {handle:?} is not a signal of this simulator")]
    UnknownSignal {
        /// The queue's id.
        queue: u64,
        /// The packet's index.
        index: u64,
        /// The handle found in the packet.
        handle: hsa_signal_t,
    },
    /// A packet the processor cannot execute (unsupported type, unregistered
    /// kernel object); launching it fails the queue.
    #[error("queue {queue} packet {index} is malformed: {reason}")]
    MalformedPacket {
        /// The queue's id.
        queue: u64,
        /// The packet's index.
        index: u64,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A write to a slot the producer does not own (not reserved, already
    /// published) or with an INVALID header; the write was ignored.
    #[error("queue {queue} packet {index}: invalid write ({reason}); it was ignored")]
    InvalidWrite {
        /// The queue's id.
        queue: u64,
        /// The index written.
        index: u64,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// Every violation a simulator observed, in order.
#[derive(Debug, Default)]
pub(crate) struct ViolationLog {
    violations: Mutex<Vec<Violation>>,
}

impl ViolationLog {
    pub(crate) fn record(&self, violation: Violation) {
        self.violations.lock().push(violation);
    }

    pub(crate) fn snapshot(&self) -> Vec<Violation> {
        self.violations.lock().clone()
    }

    pub(crate) fn take(&self) -> Vec<Violation> {
        std::mem::take(&mut *self.violations.lock())
    }
}
