//! What a scenario needs from a backend, and a rig that runs a scenario on
//! any backend that provides it.
//!
//! A scenario is written once, as `fn name<B: Backend>()`, against
//! [`Rig`]: a tracker on one of the backend's hardware queues, every use it
//! handed out, and a check of DESIGN.md section 6's invariants against the
//! backend's ground truth and violations, to run after every step.
//! [`on_every_backend!`] turns it into one test per backend:
//!
//! - [`Simulator`]: the `sim` crate's packet processor and signal memory,
//!   through the tracker's own adapter (`tracker::sim_backend`);
//! - [`Standin`]: the ROCr backend (`hsa-backend`) loaded from a private copy
//!   of the ROCr stand-in, so every signal is a block the backend carved out
//!   of a ROCr pool and every packet goes through its publication and
//!   doorbell; the stand-in's test hooks step the same simulator underneath.
//!
//! Both are stepped unless the scenario asks for a threaded machine: nothing
//! runs on the "GPU" until the scenario runs a queue or steps it.
//!
//! The queue layer's scenarios use the same backends through [`Platform`]:
//! `fences` devices and queues whose trackers sit on the backend's hardware
//! queues.
#![allow(dead_code)]

mod queue_layer;
mod simulator;
mod standin;

#[allow(unused_imports)] // the allocations binary needs no queue layer
pub use queue_layer::{Platform, Watchdog, bounded, wait_until, waiting};
pub use simulator::Simulator;
pub use standin::Standin;

use fences::DeviceConfig;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;
use tracker::{
    BaselineTracker, Config, Error, HardwareQueue, Placement, Purpose, Request, RetiringTracker,
    SignalMemory, Status, Ticket, Tracker, Work,
};

/// One test per backend for each generic scenario `fn name<B: Backend>()` of
/// the calling module: `<module>::sim::name` and `<module>::rocr::name`
/// (so `cargo test -p scenarios rocr::` runs everything on the stand-in).
macro_rules! on_every_backend {
    ($($scenario:ident),* $(,)?) => {
        mod sim {
            $(
                #[test]
                fn $scenario() {
                    super::$scenario::<$crate::support::Simulator>();
                }
            )*
        }

        mod rocr {
            $(
                #[test]
                fn $scenario() {
                    super::$scenario::<$crate::support::Standin>();
                }
            )*
        }
    };
}
pub(crate) use on_every_backend;

/// The machine a scenario asks for; each backend builds its closest match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Machine {
    /// A processor thread runs the queues in real time; otherwise stepped.
    pub threaded: bool,
    /// Where the hardware queues' rings live (every queue of the machine).
    pub ring: Placement,
    /// Non-barrier packets may complete out of order.
    pub out_of_order: bool,
    /// How many finished packets per queue keep their ground truth.
    pub truth_history: u64,
}

impl Default for Machine {
    /// Stepped, rings in device memory, in order, a long truth history.
    fn default() -> Self {
        Self {
            threaded: false,
            ring: Placement::Device,
            out_of_order: false,
            truth_history: 1 << 14,
        }
    }
}

impl Machine {
    /// The default machine with a processor thread.
    pub fn threaded() -> Self {
        Self {
            threaded: true,
            ..Self::default()
        }
    }
}

/// Why a step of the packet processor did not happen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The packet's completion condition does not hold yet.
    NotReady,
    /// Any other reason, as the backend words it.
    Other(String),
}

/// The ground truth of one packet, from the packet processor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truth {
    /// Its completion signal was decremented.
    pub completed: bool,
    /// It failed with its queue.
    pub failed: bool,
    /// GPU time of its launch, in ticks.
    pub start_ts: Option<u64>,
    /// GPU time of its completion, in ticks.
    pub end_ts: Option<u64>,
}

/// What the backend itself executed or counted, for comparison with what the
/// tracker says it asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Executed {
    /// Store fences executed.
    pub store_fences: u64,
    /// HDP flushes executed.
    pub hdp_flushes: u64,
    /// Device-memory requests served from system memory (`None`: the backend
    /// does not count them).
    pub fallbacks: Option<u64>,
    /// Signals made by the runtime's own signal call instead of carved from
    /// a pool (`None`: the backend has no such call).
    pub runtime_signals: Option<u64>,
}

/// Releases a spinning kernel (see [`Backend::spin_kernel`]).
pub type Release = Arc<dyn Fn() + Send + Sync>;

/// What a scenario needs from a backend: a machine, hardware queues and
/// signal memory on it, the "GPU" to run or step, its ground truth and
/// violations, and failures to inject. A value is a handle to one machine;
/// clones share it.
pub trait Backend: Clone + Send + Sync + Sized + 'static {
    /// The backend's signal memory.
    type Memory: SignalMemory;
    /// The backend's hardware queue.
    type Queue: HardwareQueue + Debug;

    /// A new machine.
    fn new(machine: Machine) -> Self;
    /// A new profiled hardware queue of 16384 packets on this machine.
    fn queue(&self) -> Self::Queue;
    /// Signal memory for a tracker on `queue` (a pool of its own).
    fn memory(&self, queue: &Self::Queue) -> Arc<Self::Memory>;
    /// The next packet index `queue` hands out.
    fn write_index(queue: &Self::Queue) -> u64;
    /// The kernel object of a kernel that does nothing.
    fn empty_kernel(&self) -> u64;
    /// A kernel that spins until the returned closure is called.
    fn spin_kernel(&self) -> (u64, Release);
    /// A kernel that runs for `duration` on a threaded machine.
    fn timed_kernel(&self, duration: Duration) -> u64;
    /// The queue layer's device configuration for this machine.
    fn device_config(&self) -> DeviceConfig;

    /// Stepped: runs `queue` until it can do nothing more. Threaded: waits
    /// until it can do nothing more without the host.
    fn run(&self, queue: &Self::Queue);
    /// As [`run`](Backend::run), for every queue (cross-queue waits resolve).
    fn run_all(&self);
    /// Launches `queue`'s next packet; answers its index.
    fn launch(&self, queue: &Self::Queue) -> Result<u64, Refused>;
    /// Completes launched packet `index`.
    fn complete(&self, queue: &Self::Queue, index: u64) -> Result<(), Refused>;
    /// Consumes the packet at the read index; answers the new read index.
    fn advance_read_index(&self, queue: &Self::Queue) -> Result<u64, Refused>;
    /// A queue error: its pending packets fail. Where the backend has an
    /// error report of its own, this also checks that it reported it.
    fn fail(&self, queue: &Self::Queue);

    /// The ground truth of packet `index` of `queue`.
    fn truth(&self, queue: &Self::Queue, index: u64) -> Option<Truth>;
    /// Every violation the machine recorded.
    fn violations(&self) -> Vec<String>;
    /// Drops this, the machine's last handle (every queue, pool and tracker
    /// on it already gone), and checks that nothing made on it is left
    /// behind, as far as the machine can tell, and that it saw no violation.
    fn tear_down(self);
    /// A GPU tick in the time domain the backend reports timestamps in.
    fn reported_time(&self, tick: u64) -> u64;
    /// Where the signal whose handle is `signal` really lives.
    fn placement(&self, memory: &Self::Memory, signal: u64) -> Placement;
    /// What `memory` (or the machine) executed.
    fn executed(&self, memory: &Self::Memory) -> Executed;
    /// Loads of device-memory signals the machine has seen so far.
    fn device_loads_seen(&self) -> u64;
    /// The HDP flush register's last written value, then reset to 0 (`None`:
    /// the machine has no such register).
    fn take_hdp_flush_register(&self) -> Option<u32>;

    /// From now on, requests for device memory are served from system memory.
    fn exhaust_device_memory(&self, memory: &Self::Memory);
    /// The next allocation of signal memory from `memory` fails (the
    /// simulator fails that one; the stand-in's pools stay out of memory).
    fn fail_allocations(&self, memory: &Self::Memory);
}

/// The default tracker configuration with signals in device memory.
pub fn device_signals() -> Config {
    Config {
        signals: Placement::Device,
        ..Config::default()
    }
}

pub type Retiring<B> = RetiringTracker<<B as Backend>::Memory, <B as Backend>::Queue>;
pub type Baseline<B> = BaselineTracker<<B as Backend>::Memory, <B as Backend>::Queue>;

/// One use the rig handed out.
#[derive(Clone, Debug)]
pub struct Issued<Q> {
    /// The queue its packet went to.
    pub queue: Q,
    pub ticket: Ticket,
    /// The AQL index of its packet.
    pub index: u64,
    pub signal: u64,
    /// Where the tracker says its signal lives.
    pub placement: Placement,
    pub timed: bool,
    /// Its submission was failed on purpose (`fail_submission`).
    pub abandoned: bool,
}

/// A tracker on a hardware queue of a backend's machine.
pub struct Rig<B: Backend, T> {
    pub tracker: T,
    pub queue: B::Queue,
    pub memory: Arc<B::Memory>,
    pub config: Config,
    pub issued: Vec<Issued<B::Queue>>,
    /// Last: dropped after every tracker, queue and pool on the machine
    /// (neighbours share it).
    pub gpu: B,
}

impl<B: Backend> Rig<B, Retiring<B>> {
    pub fn retiring(config: Config) -> Self {
        Self::retiring_on(config, Machine::default())
    }

    pub fn retiring_on(config: Config, machine: Machine) -> Self {
        Self::try_retiring_with(B::new(machine), config, |_, _| {}).unwrap()
    }

    /// A retiring tracker on a new queue of `gpu`; `prepare` runs on the
    /// queue's signal memory before the tracker allocates its ring (to
    /// inject failures).
    pub fn try_retiring_with(
        gpu: B,
        config: Config,
        prepare: impl FnOnce(&B, &B::Memory),
    ) -> Result<Self, Error> {
        Self::build(gpu, config, prepare, RetiringTracker::new)
    }
}

impl<B: Backend> Rig<B, Baseline<B>> {
    pub fn baseline(config: Config) -> Self {
        Self::baseline_on(config, Machine::default())
    }

    pub fn baseline_on(config: Config, machine: Machine) -> Self {
        Self::build(B::new(machine), config, |_, _| {}, BaselineTracker::new).unwrap()
    }
}

impl<B: Backend, T> Rig<B, T> {
    fn build(
        gpu: B,
        config: Config,
        prepare: impl FnOnce(&B, &B::Memory),
        make: impl FnOnce(Arc<B::Memory>, B::Queue, Config) -> Result<T, Error>,
    ) -> Result<Self, Error> {
        let queue = gpu.queue();
        let memory = gpu.memory(&queue);
        prepare(&gpu, &memory);
        Ok(Rig {
            tracker: make(memory.clone(), queue.clone(), config)?,
            queue,
            memory,
            config,
            issued: Vec::new(),
            gpu,
        })
    }

    /// Another retiring tracker, on a new queue of the same machine with a
    /// pool of its own: for cross-queue waits.
    pub fn neighbour(&self, config: Config) -> Rig<B, Retiring<B>> {
        Rig::try_retiring_with(self.gpu.clone(), config, |_, _| {}).unwrap()
    }

    /// Runs the rig's queue until it can do nothing more (other queues do
    /// not move).
    pub fn run_queue(&self) {
        self.gpu.run(&self.queue);
    }

    pub fn launch(&self) -> Result<u64, Refused> {
        self.gpu.launch(&self.queue)
    }

    pub fn complete(&self, index: u64) -> Result<(), Refused> {
        self.gpu.complete(&self.queue, index)
    }

    pub fn advance_read_index(&self) -> Result<u64, Refused> {
        self.gpu.advance_read_index(&self.queue)
    }

    /// Publishes an empty kernel completing `signal` at reserved `index`,
    /// bypassing the rig's bookkeeping.
    pub fn publish(&self, index: u64, signal: u64, barrier: bool) {
        self.queue
            .publish(
                index,
                Work::Kernel(self.gpu.empty_kernel()),
                barrier,
                signal,
            )
            .unwrap();
    }

    pub fn write_index(&self) -> u64 {
        B::write_index(&self.queue)
    }

    /// Where the signal of `issued` really lives.
    pub fn placement(&self, issued: &Issued<B::Queue>) -> Placement {
        self.gpu.placement(&self.memory, issued.signal)
    }

    pub fn executed(&self) -> Executed {
        self.gpu.executed(&self.memory)
    }

    pub fn truth(&self, issued: &Issued<B::Queue>) -> Option<Truth> {
        self.gpu.truth(&issued.queue, issued.index)
    }

    #[track_caller]
    pub fn assert_no_violations(&self) {
        let violations = self.gpu.violations();
        assert!(violations.is_empty(), "the machine saw: {violations:#?}");
    }
}

impl<B: Backend, T: Tracker<Memory = B::Memory, Queue = B::Queue>> Rig<B, T> {
    /// Acquires a signal for the next packet and publishes an empty kernel
    /// completing it.
    pub fn submit(&mut self, barrier: bool, purpose: Purpose) -> Result<Issued<B::Queue>, Error> {
        self.submit_request(
            Request::packet(self.write_index())
                .barrier(barrier)
                .purpose(purpose),
            &[],
        )
    }

    /// As `submit`, with dependencies (packet handles) to wait on: then the
    /// packet is a barrier-AND.
    pub fn submit_request(
        &mut self,
        request: Request,
        dependencies: &[u64],
    ) -> Result<Issued<B::Queue>, Error> {
        let index = self.write_index();
        let acquired = self.tracker.acquire(request)?;
        assert_eq!(self.queue.reserve().unwrap(), index);
        let work = if dependencies.is_empty() {
            Work::Kernel(self.gpu.empty_kernel())
        } else {
            Work::Wait(dependencies)
        };
        self.queue
            .publish(index, work, request.is_fence(), acquired.signal)
            .unwrap();
        let issued = Issued {
            queue: self.queue.clone(),
            ticket: acquired.ticket,
            index,
            signal: acquired.signal,
            placement: acquired.placement,
            timed: request.is_timed(),
            abandoned: false,
        };
        self.issued.push(issued.clone());
        Ok(issued)
    }

    /// Every invariant of DESIGN.md section 6 that the rig can see.
    #[track_caller]
    pub fn check(&mut self) {
        self.assert_no_violations();
        for issued in &self.issued {
            let known = self.tracker.known_status(&issued.ticket).unwrap();
            let Some(truth) = self.truth(issued) else {
                continue;
            };
            match known {
                Some(Status::Complete) => assert!(
                    truth.completed,
                    "use {} reported complete, but packet {} is {truth:?}",
                    issued.ticket.seq(),
                    issued.index
                ),
                Some(Status::Failed) => assert!(
                    truth.failed || issued.abandoned || !truth.completed,
                    "use {} reported failed, but its packet completed",
                    issued.ticket.seq()
                ),
                _ => {}
            }
        }
        let census = self.tracker.census();
        assert!(census.is_balanced(), "a signal went missing: {census:?}");
        assert!(
            census.in_flight <= self.config.max_in_flight(),
            "ring past its bound: {census:?}"
        );
    }

    /// Runs the rig's queue until it can do nothing more, then checks.
    #[track_caller]
    pub fn run(&mut self) {
        self.run_queue();
        self.check();
    }

    pub fn status(&mut self, issued: &Issued<B::Queue>) -> Status {
        self.tracker.query(&issued.ticket).unwrap()
    }
}
