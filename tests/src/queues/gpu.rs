//! What the queue driver needs of a machine: hardware queues and signal
//! memory for the queue layer, kernels that run until released, the stepped
//! packet processor to drive one step at a time, its ground truth and its
//! violations. [`SimGpu`] is the simulator; the ROCr stand-in implements it
//! in the test that runs the driver there (`tests/queue_property.rs`,
//! through the backends' support code).

use crate::check::Check;
use crate::queues::ops::QueueSetup;
use sigretire_sim::backend::SimMemory;
use sigretire_sim::{CostProfile, HostFlag, Kernel, Mode, Queue, Sim, SimConfig, SimQueueConfig};
use sigretire_tracker::backend::{HardwareQueue, SignalMemory};
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

/// Releases a gated kernel: every packet running it may then complete.
pub type Release = Arc<dyn Fn() + Send + Sync>;

/// What the machine says happened to one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truth {
    /// Its header was written.
    pub published: bool,
    /// Its completion signal was decremented.
    pub completed: bool,
    /// It failed with its queue.
    pub failed: bool,
    /// Its header's barrier bit.
    pub barrier: bool,
    /// The completion signal it names (a packet handle; 0: none).
    pub completion: u64,
    /// GPU time of its launch (ticks), once launched.
    pub start_ts: Option<u64>,
    /// GPU time of its completion (ticks), once completed.
    pub end_ts: Option<u64>,
}

impl Truth {
    /// Completed or failed: nothing will happen to it any more.
    pub const fn is_final(&self) -> bool {
        self.completed || self.failed
    }
}

/// Why the packet processor did not take a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The packet's condition does not hold yet (a gate, a dependency).
    NotReady,
    /// Anything else, as the machine words it.
    Other(String),
}

/// A host action the machine would not forgive: the invariant it breaks
/// (from the machine's own kind of violation, never from its wording) and
/// its description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachineViolation {
    /// The invariant.
    pub check: Check,
    /// What it is about, where the machine's kind of violation says more
    /// than the invariant (a re-arm under the use's own packet, or under a
    /// GPU waiter's): for grouping failures into classes.
    pub subject: &'static str,
    /// The machine's words.
    pub text: String,
}

/// A stepped machine the queue driver runs the queue layer on. A value is
/// a handle to one machine; clones share it.
pub trait Gpu: Clone + Send + Sync + 'static {
    /// Its signal memory.
    type Memory: SignalMemory;
    /// Its hardware queue.
    type Queue: HardwareQueue + Debug;

    /// A name for reports.
    const NAME: &'static str;

    /// A new stepped machine for `setup`: packets without the barrier bit
    /// may complete in any order once launched where it says
    /// `out_of_order`, and queues have a wake relay where it says
    /// `wake_relay` and the machine has one.
    fn new(setup: &QueueSetup) -> Self;
    /// A new profiled hardware queue (thousands of packets: a scenario
    /// never fills it).
    fn queue(&self) -> Self::Queue;
    /// Signal memory for a tracker on `queue`.
    fn memory(&self, queue: &Self::Queue) -> Arc<Self::Memory>;
    /// The next index `queue` hands out.
    fn write_index(&self, queue: &Self::Queue) -> u64;
    /// A kernel that does nothing.
    fn empty_kernel(&self) -> u64;
    /// A kernel that runs until the returned closure is called.
    fn gated_kernel(&self) -> (u64, Release);
    /// A kernel that runs for `duration` (on a stepped machine: until the
    /// driver completes it).
    fn timed_kernel(&self, duration: Duration) -> u64;
    /// One tick of the clock the machine's timestamps count in.
    fn timestamp_period(&self) -> Duration;
    /// A GPU tick in the time domain the backend reports timestamps in.
    fn reported_time(&self, tick: u64) -> u64;

    /// Runs `queue` until it can do nothing more.
    fn run(&self, queue: &Self::Queue);
    /// Runs every queue until none can do anything more.
    fn run_all(&self);
    /// Launches `queue`'s next packet; answers its index.
    fn launch(&self, queue: &Self::Queue) -> Result<u64, Refused>;
    /// Completes launched packet `index`.
    fn complete(&self, queue: &Self::Queue, index: u64) -> Result<(), Refused>;
    /// Consumes the packet at the read index.
    fn advance_read_index(&self, queue: &Self::Queue) -> Result<u64, Refused>;
    /// A queue error: the queue's pending packets fail.
    fn fail(&self, queue: &Self::Queue);

    /// What happened to packet `index` of `queue` (`None`: never reserved,
    /// or forgotten).
    fn truth(&self, queue: &Self::Queue, index: u64) -> Option<Truth>;
    /// Every violation the machine recorded so far.
    fn violations(&self) -> Vec<MachineViolation>;
    /// Wake packets published on queues' wake relays so far (none where
    /// the machine has no relay).
    fn relay_wakes(&self) -> u64 {
        0
    }
    /// Drops the machine's last handle (every queue, pool and tracker on
    /// it already gone) and says what it still holds or saw, if anything.
    fn tear_down(self) -> Result<(), String>;
}

/// The simulator: stepped, zero cost, one agent, rings in device memory.
#[derive(Clone, Debug)]
pub struct SimGpu {
    sim: Sim,
    queue_config: SimQueueConfig,
    /// Every queue gets a wake relay.
    wake_relay: bool,
    /// The relays made, for [`Gpu::relay_wakes`].
    relays: Arc<std::sync::Mutex<Vec<Queue>>>,
}

impl SimGpu {
    /// The simulator underneath.
    pub fn sim(&self) -> &Sim {
        &self.sim
    }
}

impl Gpu for SimGpu {
    type Memory = SimMemory;
    type Queue = Queue;

    const NAME: &'static str = "simulator";

    fn new(setup: &QueueSetup) -> Self {
        Self {
            sim: Sim::new(SimConfig {
                mode: Mode::Stepped,
                profile: CostProfile::zero(),
                ..SimConfig::default()
            }),
            queue_config: SimQueueConfig {
                size: 1 << 12,
                profiling: true,
                out_of_order: setup.out_of_order,
                truth_history: 1 << 14,
                ..SimQueueConfig::default()
            },
            wake_relay: setup.wake_relay,
            relays: Arc::default(),
        }
    }

    fn queue(&self) -> Queue {
        let queue = self
            .sim
            .create_queue(self.queue_config)
            .expect("a queue of the default configuration");
        if self.wake_relay {
            queue.add_wake_relay().expect("a relay of a valid queue");
            self.relays
                .lock()
                .expect("not poisoned")
                .extend(queue.wake_relay());
        }
        queue
    }

    fn memory(&self, queue: &Queue) -> Arc<SimMemory> {
        Arc::new(SimMemory::new(self.sim.clone(), queue.agent()))
    }

    fn write_index(&self, queue: &Queue) -> u64 {
        queue.write_index()
    }

    fn empty_kernel(&self) -> u64 {
        0 // kernel object 0 runs as the empty kernel
    }

    fn gated_kernel(&self) -> (u64, Release) {
        let flag = HostFlag::new();
        let kernel = self.sim.register_kernel(Kernel::SpinUntil(flag.clone()));
        (kernel, Arc::new(move || flag.set()))
    }

    fn timed_kernel(&self, duration: Duration) -> u64 {
        self.sim.register_kernel(Kernel::Duration(duration))
    }

    fn timestamp_period(&self) -> Duration {
        self.sim.profile().gpu_tick
    }

    fn reported_time(&self, tick: u64) -> u64 {
        tick // the adapter reports the processor's ticks as they are
    }

    fn run(&self, queue: &Queue) {
        queue.run_until_idle();
    }

    fn run_all(&self) {
        self.sim.run_until_idle();
    }

    fn launch(&self, queue: &Queue) -> Result<u64, Refused> {
        queue.launch().map_err(refused)
    }

    fn complete(&self, queue: &Queue, index: u64) -> Result<(), Refused> {
        queue.complete(index).map_err(refused)
    }

    fn advance_read_index(&self, queue: &Queue) -> Result<u64, Refused> {
        queue.advance_read_index().map_err(refused)
    }

    fn fail(&self, queue: &Queue) {
        queue.fail();
    }

    fn truth(&self, queue: &Queue, index: u64) -> Option<Truth> {
        queue.truth(index).map(|t| Truth {
            published: t.published,
            completed: t.completed,
            failed: t.failed,
            barrier: t.barrier,
            completion: t.completion_signal.handle,
            start_ts: t.start_ts,
            end_ts: t.end_ts,
        })
    }

    fn violations(&self) -> Vec<MachineViolation> {
        self.sim
            .violations()
            .iter()
            .map(|v| MachineViolation {
                check: Check::of_simulator(v),
                subject: subject_of(v),
                text: v.to_string(),
            })
            .collect()
    }

    fn relay_wakes(&self) -> u64 {
        self.relays
            .lock()
            .expect("not poisoned")
            .iter()
            .map(Queue::write_index)
            .sum()
    }

    fn tear_down(self) -> Result<(), String> {
        // The simulator keeps no census of live objects: violations only.
        let violations = self.violations();
        if violations.is_empty() {
            Ok(())
        } else {
            Err(format!("the simulator saw: {violations:?}"))
        }
    }
}

/// What a simulator violation is about (see [`MachineViolation::subject`]).
fn subject_of(violation: &sigretire_sim::Violation) -> &'static str {
    use sigretire_sim::Violation;
    match violation {
        Violation::StoreWhileInFlight { barriers: 0, .. } => "re-arm under its own packet",
        Violation::StoreWhileInFlight { completions: 0, .. } => "re-arm under a GPU waiter",
        Violation::StoreWhileInFlight { .. } => "re-arm under its packet and a GPU waiter",
        Violation::Unfenced { .. } | Violation::Unflushed { .. } => "re-arm not visible",
        Violation::UnknownSignal { .. } => "unknown signal",
        Violation::MalformedPacket { .. } => "malformed packet",
        Violation::InvalidWrite { .. } => "invalid write",
    }
}

fn refused(error: sigretire_sim::StepError) -> Refused {
    match error {
        sigretire_sim::StepError::NotReady { .. } => Refused::NotReady,
        other => Refused::Other(other.to_string()),
    }
}
