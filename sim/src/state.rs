//! The state a simulator's parts share, as plain data: who drives the
//! processor ([`Mode`]), the simulator's [`Core`] (memory, clock, kernels,
//! violations, queues, the processor thread's wake-up) and each queue's
//! [`QueueCore`] (its configuration, ring, indices, doorbell and processor
//! records). The [`Sim`](crate::Sim) and [`Queue`](crate::Queue) handles,
//! the [processor](crate::processor) and the [processor
//! thread](crate::threaded) all take these, and none of them is named here.

use crate::clock::Clock;
use crate::error::SimError;
use crate::kernel::KernelTable;
use crate::memory::Memory;
use crate::place::{AgentId, Placement};
use crate::profile::CostProfile;
use crate::record::QueueState;
use crate::truth::ViolationLog;
use crate::wake::Wake;
use hsa_sys::AqlSlot;
use parking_lot::{Mutex, RwLock};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Who drives the packet processor.
///
/// In threaded mode a processor thread launches and completes packets by
/// itself; the host only submits, and waits or polls:
///
/// ```
/// use sigretire_sim::{packets, AgentId, Mode, Placement, Sim, SimConfig, SimQueueConfig, StepError};
///
/// let sim = Sim::new(SimConfig { mode: Mode::Threaded, ..SimConfig::default() });
/// let queue = sim.create_queue(SimQueueConfig::default())?;
/// let signal = sim.allocate(1, Placement::Host, AgentId(0))?[0];
/// sim.store(signal, 1);
/// let index = queue.submit(packets::kernel(0, Some(signal)))?;
/// queue.run_until_idle(); // waits for the processor thread
/// assert_eq!(sim.load(signal), 0);
/// assert!(queue.truth(index).unwrap().completed);
/// // The caller no longer chooses events.
/// assert_eq!(queue.launch(), Err(StepError::WrongMode));
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// The caller chooses every event ([`Queue::launch`](crate::Queue::launch), [`Queue::complete`](crate::Queue::complete),
    /// [`Queue::advance_read_index`](crate::Queue::advance_read_index),
    /// [`Queue::run_until_idle`](crate::Queue::run_until_idle)) and the GPU
    /// clock advances by [`STEPPED_TICKS_PER_EVENT`](crate::STEPPED_TICKS_PER_EVENT)
    /// per event: runs are reproducible.
    #[default]
    Stepped,
    /// A processor thread drives every queue in real time with the profile's
    /// latencies.
    Threaded,
}

/// Everything a simulator's handles, queues and processor thread share.
pub(crate) struct Core {
    pub(crate) id: u64,
    pub(crate) mode: Mode,
    pub(crate) profile: CostProfile,
    pub(crate) seed: u64,
    pub(crate) memory: Memory,
    pub(crate) clock: Clock,
    pub(crate) kernels: KernelTable,
    pub(crate) violations: ViolationLog,
    pub(crate) queues: RwLock<Vec<Arc<QueueCore>>>,
    /// The processor thread's wake-up, in threaded mode.
    pub(crate) wake: Option<Arc<Wake>>,
}

/// How to create a [`Queue`](crate::Queue).
///
/// ```
/// use sigretire_sim::{AgentId, Placement, Sim, SimConfig, SimQueueConfig, SimError};
///
/// let sim = Sim::new(SimConfig { agents: 2, ..SimConfig::default() });
/// let config = SimQueueConfig {
///     agent: AgentId(1),
///     size: 64,
///     ring: Placement::Host,
///     profiling: true,
///     out_of_order: true,
///     ..SimQueueConfig::default()
/// };
/// let queue = sim.create_queue(config)?;
/// assert_eq!((queue.agent(), queue.size()), (AgentId(1), 64));
/// assert_eq!(queue.config(), config);
///
/// // Sizes are powers of two; agents must exist.
/// assert!(matches!(
///     sim.create_queue(SimQueueConfig { size: 100, ..SimQueueConfig::default() }),
///     Err(SimError::InvalidConfig(_))
/// ));
/// assert!(matches!(
///     sim.create_queue(SimQueueConfig { agent: AgentId(2), ..SimQueueConfig::default() }),
///     Err(SimError::UnknownAgent { agents: 2, .. })
/// ));
/// # Ok::<(), SimError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SimQueueConfig {
    /// The GPU agent that runs the queue.
    pub agent: AgentId,
    /// Ring size in packets: a power of two from 2 to [`MAX_QUEUE_SIZE`](crate::MAX_QUEUE_SIZE).
    pub size: u32,
    /// Where the ring lives. `Device`: in VRAM, written through the same BAR
    /// as device-memory signals, so packets arrive after the fenced stores
    /// before them and a store fence suffices. `Host`: in system memory (like
    /// a copy engine's ring), so device-memory signal stores also need an HDP
    /// flush of the signal's agent before publication.
    pub ring: Placement,
    /// The processor writes `start_ts`/`end_ts` into completion signals.
    pub profiling: bool,
    /// Non-barrier packets may complete in any order once launched (several
    /// kernels running at once); otherwise packets complete in index order.
    pub out_of_order: bool,
    /// How many of the newest packets keep their [`Queue::truth`](crate::Queue::truth) once
    /// finished; older finished packets are forgotten so long runs stay
    /// bounded (unfinished packets are always kept).
    pub truth_history: usize,
}

impl Default for SimQueueConfig {
    /// Agent 0, 1024 packets, ring in device memory, not profiled, in order,
    /// truth kept for the newest 16384 packets.
    fn default() -> Self {
        Self {
            agent: AgentId(0),
            size: 1024,
            ring: Placement::Device,
            profiling: false,
            out_of_order: false,
            truth_history: 1 << 14,
        }
    }
}

/// The shared part of a queue: the ring, its indices and the processor state.
pub(crate) struct QueueCore {
    pub(crate) id: u64,
    pub(crate) config: SimQueueConfig,
    ring: Box<[AqlSlot]>,
    /// The next index a producer will reserve.
    write_index: AtomicU64,
    /// The next index the processor will consume.
    read_index: AtomicU64,
    /// One past the highest index a doorbell was rung for.
    doorbell: AtomicU64,
    /// Threaded mode: every doorbell that moved `doorbell`, oldest first, as
    /// (its new `doorbell`, when it was rung in ns since start), until the
    /// processor has stamped the packets it covers. Each packet launches
    /// the launch latency after the doorbell that first covered it, however
    /// late the processor thread gets to it.
    rings: Mutex<VecDeque<(u64, u64)>>,
    pub(crate) state: Mutex<QueueState>,
    /// The queue beside it that runs its wake packets, if it has one
    /// ([`Queue::add_wake_relay`](crate::Queue::add_wake_relay)).
    pub(crate) wake_relay: std::sync::OnceLock<Arc<QueueCore>>,
}

impl QueueCore {
    pub(crate) fn new(id: u64, config: SimQueueConfig) -> Self {
        Self {
            id,
            config,
            ring: (0..config.size).map(|_| AqlSlot::invalid()).collect(),
            write_index: AtomicU64::new(0),
            read_index: AtomicU64::new(0),
            doorbell: AtomicU64::new(0),
            // Each entry covers at least one packet the processor has not
            // stamped, so there are never more than the ring has slots: a
            // queue whose processor falls behind never grows it.
            rings: Mutex::new(VecDeque::with_capacity(config.size as usize)),
            state: Mutex::new(QueueState::with_capacity(
                config.size as usize + config.truth_history.min(4096),
            )),
            wake_relay: std::sync::OnceLock::new(),
        }
    }

    /// Reserves the next packet index (write index += 1, atomically; safe
    /// from several producer threads).
    ///
    /// # Errors
    /// [`SimError::QueueFull`] when the slot is still in use: the packet
    /// `size` indices back has not been consumed (read index).
    pub(crate) fn reserve(&self) -> Result<u64, SimError> {
        let size = u64::from(self.config.size);
        let mut index = self.write_index.load(Ordering::Acquire);
        loop {
            if index.wrapping_sub(self.read_index()) >= size {
                return Err(SimError::QueueFull);
            }
            match self.write_index.compare_exchange_weak(
                index,
                index + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(index),
                Err(current) => index = current,
            }
        }
    }

    /// Moves the doorbell to `end` (one past the highest index rung for; a
    /// lower one changes nothing). Threaded mode (`clock`): records when,
    /// under the lock, so the processor never sees a doorbell whose ring
    /// time is not recorded yet.
    pub(crate) fn ring_doorbell(&self, end: u64, clock: Option<&Clock>) {
        match clock {
            Some(clock) => {
                let mut rings = self.rings.lock();
                if self.doorbell.fetch_max(end, Ordering::AcqRel) < end {
                    rings.push_back((end, clock.now_ns()));
                }
            }
            None => {
                self.doorbell.fetch_max(end, Ordering::AcqRel);
            }
        }
    }

    pub(crate) fn write_index(&self) -> u64 {
        self.write_index.load(Ordering::Acquire)
    }

    pub(crate) fn read_index(&self) -> u64 {
        self.read_index.load(Ordering::Acquire)
    }

    pub(crate) fn doorbell(&self) -> u64 {
        self.doorbell.load(Ordering::Acquire)
    }

    /// Threaded mode: when the first doorbell covering `index` was rung
    /// (ns since start), `None` if none did yet. Asked for increasing
    /// indices, it forgets the doorbells before `index`.
    pub(crate) fn rung_at_ns(&self, index: u64) -> Option<u64> {
        let mut rings = self.rings.lock();
        while rings.front().is_some_and(|&(end, _)| end <= index) {
            rings.pop_front();
        }
        rings.front().map(|&(_, at)| at)
    }

    pub(crate) fn slot(&self, index: u64) -> &AqlSlot {
        &self.ring[(index & u64::from(self.config.size - 1)) as usize]
    }

    /// The processor is done with the slot of `index` (the packet at the read
    /// index): it marks the slot INVALID and moves the read index past it, so
    /// a producer may reuse it. Returns the new read index.
    pub(crate) fn consume(&self, index: u64) -> u64 {
        debug_assert_eq!(index, self.read_index());
        self.slot(index).invalidate();
        self.read_index.store(index + 1, Ordering::Release);
        index + 1
    }
}
