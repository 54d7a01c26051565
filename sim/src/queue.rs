//! Queues: the AQL ring, its read and write indices, the doorbell, and
//! publication, where the visibility checks run. The step-mode controls on
//! [`Queue`] hand over to the [processor](crate::processor) rules.

use crate::error::{SimError, StepError};
use crate::memory::{Signal, Visibility};
use crate::place::{AgentId, Placement};
use crate::processor;
use crate::profile::pay;
use crate::record::{Packet, UnknownHandle, Work};
use crate::simulator::Sim;
use crate::state::{Core, Mode, QueueCore, SimQueueConfig};
use crate::threaded;
use crate::truth::{PacketTruth, Violation};
use hsa_sys::{HSA_PACKET_TYPE_INVALID, PacketHeader, PacketWords};
use std::fmt;
use std::sync::Arc;

/// Packets a wake relay's ring holds: more than a queue has wake signals
/// (each has at most one packet waiting, and a queue at most 64).
const WAKE_RELAY_SIZE: u32 = 256;

/// The largest ring: 131072 packets, the `HSA_AGENT_INFO_QUEUE_MAX_SIZE` ROCr
/// reports for MI300X.
///
/// ```
/// use sigretire_sim::{Sim, SimConfig, SimQueueConfig, MAX_QUEUE_SIZE};
///
/// let sim = Sim::new(SimConfig::default());
/// let too_big = SimQueueConfig { size: MAX_QUEUE_SIZE * 2, ..SimQueueConfig::default() };
/// assert!(sim.create_queue(too_big).is_err());
/// ```
pub const MAX_QUEUE_SIZE: u32 = 1 << 17;

/// An AQL queue of a [`Sim`]: a ring of 64-byte slots, a write index the
/// producers reserve from, a read index the processor advances, a doorbell.
///
/// Clones share the queue. A queue lives as long as its simulator: dropping
/// every handle does not stop the processor from finishing its packets.
///
/// Producer side, in HSA order: [`reserve`](Queue::reserve) an index,
/// [`write`](Queue::write) the packet (publication: body, then header by a
/// release store), [`ring_doorbell`](Queue::ring_doorbell); or all three with
/// [`submit`](Queue::submit).
///
/// Step-mode control ([`Mode::Stepped`] only, else [`StepError::WrongMode`]):
/// [`launch`](Queue::launch), [`complete`](Queue::complete),
/// [`advance_read_index`](Queue::advance_read_index),
/// [`run_until_idle`](Queue::run_until_idle). [`fail`](Queue::fail) and
/// [`stall`](Queue::stall) work in both modes.
///
/// ```
/// use sigretire_sim::{packets, AgentId, Placement, Sim, SimConfig, SimQueueConfig};
///
/// let sim = Sim::new(SimConfig::default());
/// let queue = sim.create_queue(SimQueueConfig { size: 4, ..SimQueueConfig::default() })?;
/// let signal = sim.allocate(1, Placement::Host, AgentId(0))?[0];
/// sim.store(signal, 1);
/// let index = queue.submit(packets::kernel(0, Some(signal)))?;
///
/// assert_eq!(queue.launch(), Ok(index));
/// assert_eq!(queue.advance_read_index(), Ok(1)); // consumed, not complete
/// assert_eq!(sim.load(signal), 1);
/// queue.complete(index).unwrap();
/// assert_eq!(sim.load(signal), 0);
/// assert!(queue.truth(index).unwrap().completed);
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
#[derive(Clone)]
pub struct Queue {
    sim: Sim,
    core: Arc<QueueCore>,
}

impl Queue {
    fn create(
        sim: &Sim,
        id: u64,
        config: SimQueueConfig,
    ) -> Result<(Queue, Arc<QueueCore>), SimError> {
        sim.core().memory.check_agent(config.agent)?;
        if !config.size.is_power_of_two() || !(2..=MAX_QUEUE_SIZE).contains(&config.size) {
            return Err(SimError::InvalidConfig(format!(
                "queue size {} must be a power of two from 2 to {MAX_QUEUE_SIZE}",
                config.size
            )));
        }
        let core = Arc::new(QueueCore::new(id, config));
        let queue = Queue {
            sim: sim.clone(),
            core: core.clone(),
        };
        Ok((queue, core))
    }

    /// The queue's id, unique within its simulator (the order of creation).
    pub fn id(&self) -> u64 {
        self.core.id
    }

    /// The agent that runs the queue.
    pub fn agent(&self) -> AgentId {
        self.core.config.agent
    }

    /// Where the ring lives.
    pub fn ring_placement(&self) -> Placement {
        self.core.config.ring
    }

    /// Ring size in packets.
    pub fn size(&self) -> u32 {
        self.core.config.size
    }

    /// The configuration the queue was created with.
    pub fn config(&self) -> SimQueueConfig {
        self.core.config
    }

    /// The simulator the queue belongs to.
    pub fn sim(&self) -> &Sim {
        &self.sim
    }

    /// Reserves the next packet index (write index += 1, atomically; safe from
    /// several producer threads).
    ///
    /// # Errors
    /// [`SimError::QueueFull`] when the slot is still in use: the packet
    /// `size` indices back has not been consumed (read index).
    pub fn reserve(&self) -> Result<u64, SimError> {
        self.core.reserve()
    }

    /// Publishes `packet` at reserved `index`: body, then header by a release
    /// store ([`AqlSlot::publish`](hsa_sys::AqlSlot::publish)). This is the
    /// moment of publication, so the visibility checks run here, on every
    /// signal the packet names:
    /// [`Violation::Unfenced`], [`Violation::Unflushed`],
    /// [`Violation::UnknownSignal`]. From now until the packet completes or
    /// fails, a host store to its completion signal or to a dependency is a
    /// [`Violation::StoreWhileInFlight`].
    ///
    /// A write to an index that was not reserved or is already published, or
    /// with an INVALID header, is ignored and recorded as
    /// [`Violation::InvalidWrite`]. On a failed queue the packet fails at
    /// once (its completion signal goes negative), so no one waits for it.
    ///
    /// ```
    /// use sigretire_sim::{packets, Sim, SimConfig, SimQueueConfig, Violation};
    ///
    /// let sim = Sim::new(SimConfig::default());
    /// let queue = sim.create_queue(SimQueueConfig::default())?;
    /// // HSA order: reserve, write (publish), ring the doorbell.
    /// let index = queue.reserve()?;
    /// queue.write(index, packets::kernel(0, None));
    /// assert!(queue.truth(index).unwrap().published);
    /// queue.ring_doorbell(index);
    /// queue.run_until_idle();
    /// assert!(queue.truth(index).unwrap().completed);
    ///
    /// // Publishing the same index twice is a producer bug: ignored, recorded.
    /// queue.write(index, packets::kernel(0, None));
    /// assert!(matches!(sim.violations()[..], [Violation::InvalidWrite { index: 0, .. }]));
    /// # Ok::<(), sigretire_sim::SimError>(())
    /// ```
    pub fn write(&self, index: u64, packet: PacketWords) {
        let core = self.sim.core();
        let q = &*self.core;
        let mut st = q.state.lock();
        let invalid = |reason| {
            core.violations.record(Violation::InvalidWrite {
                queue: q.id,
                index,
                reason,
            })
        };
        if let Err(reason) = st.check_writable(index, q.write_index()) {
            return invalid(reason);
        }
        if PacketHeader::from_bits(packet.header()).packet_type == HSA_PACKET_TYPE_INVALID {
            return invalid("its header is INVALID, so the processor would never consume it");
        }
        let mut named_unknown = false;
        let decoded = Packet::decode(packet, &core.kernels, |handle| {
            let Some(signal) = core.memory.resolve(handle) else {
                named_unknown = true;
                core.violations.record(Violation::UnknownSignal {
                    queue: q.id,
                    index,
                    handle,
                });
                return Err(UnknownHandle);
            };
            self.check_visibility(core, index, signal);
            Ok(signal)
        });
        if let (Work::Malformed(reason), false) = (&decoded.work, named_unknown) {
            core.violations.record(Violation::MalformedPacket {
                queue: q.id,
                index,
                reason,
            });
        }
        q.slot(index).publish(packet);
        processor::publish(core, q, &mut st, index, decoded);
        drop(st);
        // HSA order rings the doorbell after this, but a producer that rang
        // it first must not leave a parked processor unaware of the packet.
        if let (true, Some(wake)) = (index < q.doorbell(), &core.wake) {
            wake.notify();
        }
    }

    fn check_visibility(&self, core: &Core, index: u64, signal: Signal) {
        let queue = self.core.id;
        match core.memory.visibility(signal, self.core.config.ring) {
            Visibility::Visible => {}
            Visibility::Unfenced => core.violations.record(Violation::Unfenced {
                queue,
                index,
                signal,
            }),
            Visibility::Unflushed => core.violations.record(Violation::Unflushed {
                queue,
                index,
                signal,
                agent: core.memory.meta(signal).agent,
            }),
        }
    }

    /// Rings the doorbell: the processor may consume packets up to and
    /// including `index` (a lower index than an earlier ring changes nothing).
    /// Costs the profile's `doorbell`.
    pub fn ring_doorbell(&self, index: u64) {
        let core = self.sim.core();
        pay(core.profile.doorbell);
        let end = index.saturating_add(1);
        match &core.wake {
            Some(wake) => {
                self.core.ring_doorbell(end, Some(&core.clock));
                wake.notify();
            }
            None => self.core.ring_doorbell(end, None),
        }
    }

    /// [`reserve`](Queue::reserve), [`write`](Queue::write) and
    /// [`ring_doorbell`](Queue::ring_doorbell): returns the packet's index.
    ///
    /// # Errors
    /// [`SimError::QueueFull`], as for `reserve`.
    pub fn submit(&self, packet: PacketWords) -> Result<u64, SimError> {
        let index = self.reserve()?;
        self.write(index, packet);
        self.ring_doorbell(index);
        Ok(index)
    }

    /// The read index (acquire load): packets before it were consumed, and
    /// their slots may be reused. Consumed does not mean complete.
    pub fn read_index(&self) -> u64 {
        self.core.read_index()
    }

    /// The id of the simulator the queue runs on ([`Sim::id`]).
    #[cfg(feature = "tracker")]
    pub(crate) fn sim_id(&self) -> u64 {
        self.sim.id()
    }

    /// The write index: the next index `reserve` hands out.
    pub fn write_index(&self) -> u64 {
        self.core.write_index()
    }

    fn stepped(&self) -> Result<&Core, StepError> {
        let core = self.sim.core();
        match core.mode {
            Mode::Stepped => Ok(core),
            Mode::Threaded => Err(StepError::WrongMode),
        }
    }

    /// Launches the next packet in order and returns its index. It needs a
    /// doorbell rung for it, a published header, no earlier barrier packet
    /// still waiting, and, with the barrier bit, every earlier packet
    /// complete. Writes `start_ts` on a profiled queue. Does not move the
    /// read index.
    ///
    /// # Errors
    /// [`StepError::NotLaunchable`] with the reason; `QueueFailed`, `Stalled`,
    /// `WrongMode`; [`StepError::MalformedPacket`] after failing the queue.
    pub fn launch(&self) -> Result<u64, StepError> {
        let core = self.stepped()?;
        processor::launch(core, &self.core, &mut self.core.state.lock())
    }

    /// Completes launched packet `index`: runs a `Compute` kernel's work,
    /// writes `end_ts` (profiled queue) and decrements its completion
    /// signal. A `SpinUntil` kernel needs its flag set; a barrier packet
    /// needs its condition to hold (a negative dependency of a
    /// barrier-AND/OR fails the queue instead). An in-order queue completes
    /// its oldest incomplete packet first.
    ///
    /// # Errors
    /// `NotLaunched`, `NotReady`, `OutOfOrder`, `AlreadyComplete`,
    /// `QueueFailed`, `Stalled`, `WrongMode`.
    ///
    /// # Panics
    /// With the panic of a [`Kernel::Compute`](crate::Kernel::Compute)
    /// kernel's work, after failing the queue (so does `run_until_idle`).
    pub fn complete(&self, index: u64) -> Result<(), StepError> {
        let core = self.stepped()?;
        processor::complete(core, &self.core, &mut self.core.state.lock(), index)
    }

    /// Consumes the packet at the read index (which must have launched) and
    /// returns the new read index.
    ///
    /// # Errors
    /// [`StepError::NotLaunched`] when the read index reached the next
    /// packet to launch; `QueueFailed`, `Stalled`, `WrongMode`.
    pub fn advance_read_index(&self) -> Result<u64, StepError> {
        self.stepped()?;
        processor::advance_read_index(&self.core, &self.core.state.lock())
    }

    /// Stepped mode: launches, completes in index order and consumes until
    /// nothing can progress (all done, or blocked on a condition, an unset
    /// flag, a doorbell, a stall). Deterministic. Other queues are not
    /// driven: use [`Sim::run_until_idle`] for cross-queue waits.
    ///
    /// Threaded mode: waits until the processor has nothing left it can do on
    /// this queue without a host action.
    ///
    /// A queue's wake relay ([`add_wake_relay`](Self::add_wake_relay)) runs
    /// with it, after it.
    pub fn run_until_idle(&self) {
        let core = self.sim.core();
        for queue in std::iter::once(&self.core).chain(self.core.wake_relay.get()) {
            match core.mode {
                Mode::Stepped => {
                    processor::run_until_idle(core, queue, &mut queue.state.lock());
                }
                Mode::Threaded => threaded::wait_until_quiescent(core, queue),
            }
        }
    }

    /// Gives the queue a wake relay: a small in-order queue of its own, on
    /// the same agent, that runs the wake packets the queue layer asks for
    /// beside this queue (the tracker backend's
    /// `HardwareQueue::publish_wake_aside`, with the `tracker` feature)
    /// instead of in its ring, as a CUDA queue's relay stream does: none of
    /// them then holds up this queue's later packets. Made once; a second
    /// call does nothing. The relay is one of the simulator's queues (so
    /// its packets are checked as every packet is) and runs with this one
    /// in [`run_until_idle`](Self::run_until_idle).
    ///
    /// ```
    /// use sigretire_sim::{Sim, SimConfig, SimQueueConfig};
    /// let sim = Sim::new(SimConfig::default());
    /// let queue = sim.create_queue(SimQueueConfig::default())?;
    /// assert!(queue.wake_relay().is_none());
    /// queue.add_wake_relay()?;
    /// let relay = queue.wake_relay().expect("made");
    /// assert_ne!(relay.id(), queue.id());
    /// # Ok::<(), sigretire_sim::SimError>(())
    /// ```
    ///
    /// # Errors
    /// The relay's creation's.
    pub fn add_wake_relay(&self) -> Result<(), SimError> {
        if self.core.wake_relay.get().is_some() {
            return Ok(());
        }
        let relay = self.sim.create_queue(SimQueueConfig {
            agent: self.core.config.agent,
            size: WAKE_RELAY_SIZE,
            ring: self.core.config.ring,
            profiling: false,
            out_of_order: false,
            truth_history: WAKE_RELAY_SIZE as usize,
        })?;
        // A racing call made one too: it stays idle, as an unused queue.
        let _ = self.core.wake_relay.set(relay.core);
        Ok(())
    }

    /// The queue's wake relay, if it has one.
    pub fn wake_relay(&self) -> Option<Queue> {
        self.core.wake_relay.get().map(|core| Queue {
            sim: self.sim.clone(),
            core: core.clone(),
        })
    }

    /// Fails the queue (a queue error): every published, incomplete packet
    /// fails and its completion signal is set to
    /// [`FAILED_SIGNAL_VALUE`](crate::FAILED_SIGNAL_VALUE); nothing on the
    /// queue progresses any more, and packets published later fail at once.
    ///
    /// ```
    /// use sigretire_sim::{packets, AgentId, Placement, Sim, SimConfig, SimQueueConfig, StepError};
    /// use sigretire_sim::FAILED_SIGNAL_VALUE;
    ///
    /// let sim = Sim::new(SimConfig::default());
    /// let queue = sim.create_queue(SimQueueConfig::default())?;
    /// let signals = sim.allocate(2, Placement::Host, AgentId(0))?;
    /// sim.store_many(&signals, 1);
    /// let done = queue.submit(packets::kernel(0, Some(signals[0])))?;
    /// let pending = queue.submit(packets::kernel(0, Some(signals[1])))?;
    /// queue.launch().unwrap();
    /// queue.complete(done).unwrap();
    ///
    /// queue.fail();
    /// assert!(queue.is_failed());
    /// assert_eq!(sim.load(signals[0]), 0); // completed before the failure
    /// assert_eq!(sim.load(signals[1]), FAILED_SIGNAL_VALUE);
    /// assert!(queue.truth(pending).unwrap().failed);
    /// assert_eq!(queue.launch(), Err(StepError::QueueFailed));
    /// # Ok::<(), sigretire_sim::SimError>(())
    /// ```
    pub fn fail(&self) {
        let core = self.sim.core();
        processor::fail_queue(core, &mut self.core.state.lock());
        // Barriers on other queues may wait on the signals that just went
        // negative: they fail too, and the processor must notice.
        if let Some(wake) = &core.wake {
            wake.notify();
        }
    }

    /// While stalled, the processor makes no progress on this queue (no
    /// launch, completion or read-index move; step calls answer
    /// [`StepError::Stalled`]).
    ///
    /// ```
    /// use sigretire_sim::{packets, Sim, SimConfig, SimQueueConfig, StepError};
    ///
    /// let sim = Sim::new(SimConfig::default());
    /// let queue = sim.create_queue(SimQueueConfig::default())?;
    /// queue.submit(packets::kernel(0, None))?;
    /// queue.stall(true);
    /// assert_eq!(queue.launch(), Err(StepError::Stalled));
    /// queue.run_until_idle(); // does nothing while stalled
    /// assert!(!queue.is_idle());
    /// queue.stall(false);
    /// queue.run_until_idle();
    /// assert!(queue.is_idle());
    /// # Ok::<(), sigretire_sim::SimError>(())
    /// ```
    pub fn stall(&self, stalled: bool) {
        self.core.state.lock().set_stalled(stalled);
        if let (false, Some(wake)) = (stalled, &self.sim.core().wake) {
            wake.notify();
        }
    }

    /// Whether the queue failed.
    pub fn is_failed(&self) -> bool {
        self.core.state.lock().is_failed()
    }

    /// The ground truth of packet `index`: `None` if it was never reserved
    /// or has left the [`truth_history`](SimQueueConfig::truth_history) window.
    pub fn truth(&self, index: u64) -> Option<PacketTruth> {
        self.core.state.lock().truth(index, self.core.write_index())
    }

    /// Whether every published packet completed or failed.
    pub fn is_idle(&self) -> bool {
        self.core.state.lock().is_idle()
    }
}

/// Building a queue is the simulator's: its `create_queue` lives here,
/// beside the [`Queue`] it builds, so the simulator names no queue.
impl Sim {
    /// Creates an AQL queue.
    ///
    /// # Errors
    /// [`SimError::InvalidConfig`] for a size that is not a power of two from
    /// 2 to [`MAX_QUEUE_SIZE`]; [`SimError::UnknownAgent`].
    pub fn create_queue(&self, config: SimQueueConfig) -> Result<Queue, SimError> {
        let mut queues = self.core().queues.write();
        let (queue, core) = Queue::create(self, queues.len() as u64, config)?;
        queues.push(core);
        Ok(queue)
    }
}

impl fmt::Debug for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue")
            .field("id", &self.core.id)
            .field("config", &self.core.config)
            .field("read_index", &self.read_index())
            .field("write_index", &self.write_index())
            .finish()
    }
}

// Handles cross threads freely.
const _: fn() = || {
    fn check<T: Send + Sync>() {}
    check::<Queue>();
};
