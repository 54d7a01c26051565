//! What a scenario needs from a backend, and a rig that runs a scenario on
//! any backend that provides it.
//!
//! A scenario is written once, as `fn name<B: Backend>()`, against
//! [`Rig`]: a tracker on one of the backend's hardware queues, every use it
//! handed out, and a check of docs/design.md section 6's invariants against the
//! backend's ground truth and violations, to run after every step.
//! [`on_every_backend!`] turns it into one test per backend:
//!
//! - [`Simulator`]: the `sim` crate's packet processor and signal memory,
//!   through the tracker's own adapter (`sigretire_sim::backend`);
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

use sigretire_baseline::BaselineTracker;
use sigretire_scenarios::check::{Check, Failure, PacketTruth, census, judge_report, stamps_match};
use sigretire_tracker::{
    AcquireError, Config, CreateError, Placement, Purpose, Request, RetiringTracker, SignalRef,
    Status, Ticket, Timestamps, Tracker, Work,
    backend::{HardwareQueue, Publication, SignalMemory},
};
use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// One test per backend for each generic scenario `fn name<B: Backend>()` of
/// the calling module: `<module>::sim::name` and `<module>::rocr::name`
/// (so `cargo test -p sigretire-scenarios rocr::` runs everything on the stand-in).
macro_rules! on_every_backend {
    // And on the stand-in with every queue the runtime's own, adopted.
    (adopted; $($scenario:ident),* $(,)?) => {
        $crate::support::on_every_backend!($($scenario),*);

        mod rocr_adopted {
            $(
                #[test]
                fn $scenario() {
                    super::$scenario::<$crate::support::Standin<true>>();
                }
            )*
        }
    };
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
    /// GPU agents, numbered from 0 ([`Backend::queue_on`]); every agent's
    /// queues read every agent's signals. The simulator has at least two.
    pub gpus: u32,
}

impl Default for Machine {
    /// Stepped, rings in device memory, in order, a long truth history.
    fn default() -> Self {
        Self {
            threaded: false,
            ring: Placement::Device,
            out_of_order: false,
            truth_history: 1 << 14,
            gpus: 1,
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
    /// Its header was written (the packet reached the processor).
    pub published: bool,
    /// Its completion signal was decremented.
    pub completed: bool,
    /// It failed with its queue.
    pub failed: bool,
    /// GPU time of its launch, in ticks.
    pub start_ts: Option<u64>,
    /// GPU time of its completion, in ticks.
    pub end_ts: Option<u64>,
    /// Its header's barrier bit, as the machine received it.
    pub barrier: bool,
    /// The completion signal it names (a packet handle; 0: none).
    pub completion: u64,
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

/// A host action the machine would not forgive, as the machine reported it:
/// the invariant it breaks (mapped from the machine's own kind, never from
/// its wording) and its description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub check: Check,
    pub text: String,
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
    /// A new profiled hardware queue of 16384 packets on this machine's
    /// GPU 0.
    fn queue(&self) -> Self::Queue {
        self.queue_on(0)
    }
    /// As [`queue`](Backend::queue), on GPU `gpu` (below [`Machine::gpus`]).
    fn queue_on(&self, gpu: u32) -> Self::Queue;
    /// Signal memory for a tracker on `queue` (a pool of its own, of the
    /// queue's GPU: its device-memory signals live in that GPU's VRAM).
    fn memory(&self, queue: &Self::Queue) -> Arc<Self::Memory>;
    /// The next packet index `queue` hands out.
    fn write_index(queue: &Self::Queue) -> u64;
    /// The kernel object of a kernel that does nothing.
    fn empty_kernel(&self) -> u64;
    /// A kernel that spins until the returned closure is called.
    fn spin_kernel(&self) -> (u64, Release);
    /// A kernel that runs for `duration` on a threaded machine.
    fn timed_kernel(&self, duration: Duration) -> u64;
    /// One tick of the clock the backend's timestamps count in (as the
    /// machine itself says it: the simulator's profile, the stand-in's
    /// reported frequency).
    fn timestamp_period(&self) -> Duration;

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
    fn violations(&self) -> Vec<Violation>;
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
    /// Its packet had the barrier bit.
    pub fence: bool,
    /// The rig's count of queue changes when it was made (its generation,
    /// counted without wrapping).
    pub generation: usize,
    /// Its submission was failed on purpose (`fail_submission`).
    pub abandoned: bool,
}

/// A reference that keeps a use's signal from being re-armed (an event's,
/// a handler's), taken through [`Rig::hold`] so that the rig's checks know
/// it is held: while it (or a clone of it) lives, its signal must never be
/// handed out again, and what it reports must be the truth. Derefs to the
/// reference. (A `SignalRef` cloned out of it holds too, but the checks do
/// not see it.)
pub struct Held<M: SignalMemory> {
    reference: Arc<SignalRef<M>>,
}

impl<M: SignalMemory> Clone for Held<M> {
    /// The same reference, for another thread: held while any clone lives.
    fn clone(&self) -> Self {
        Self {
            reference: self.reference.clone(),
        }
    }
}

impl<M: SignalMemory> std::ops::Deref for Held<M> {
    type Target = SignalRef<M>;

    fn deref(&self) -> &SignalRef<M> {
        &self.reference
    }
}

/// What the rig's checks remember of a held reference.
struct Hold<M: SignalMemory> {
    /// The use (a position in `Rig::issued`).
    issued: usize,
    /// Gone once the scenario drops every clone of its `Held`.
    reference: Weak<SignalRef<M>>,
    /// The last final answer it gave.
    answered: Option<Status>,
}

/// What the rig's checks know of an issued use.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    /// The last final answer the tracker gave (judged truthful: its packet
    /// had finished).
    answer: Option<Status>,
    /// Its packet finished, or the machine forgot it (looked up only for a
    /// tracker that does not remember its answers).
    finished: bool,
}

/// Which tracker a rig drives, as far as its checks care.
#[derive(Clone, Copy, Debug)]
struct Kind {
    /// Proves retirement from fences the read index nominates.
    probes_fences: bool,
    /// Answers a completed use from host memory once it knows it (the
    /// baseline may answer "unknown" again between loads).
    remembers: bool,
}

/// A map from signal handles, with a cheap hash: the rig looks one up per
/// hand-out.
type ByHandle<V> = HashMap<u64, V, BuildHasherDefault<HandleHasher>>;

/// Hashes a signal handle (an address, 64-byte aligned: its low bits say
/// nothing) by a multiply that spreads its high bits over the low ones.
#[derive(Default)]
struct HandleHasher(u64);

impl Hasher for HandleHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0 ^ u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing; the high half folded down for the bucket index.
        let h = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 32);
    }
}

/// How many of the newest issued uses every check looks at again once
/// settled.
const RECENT: usize = 64;
/// How many issued uses every check looks at again in turn, round the whole
/// history, once settled: each is looked at again every
/// `issued.len() / ROTATION` checks.
const ROTATION: usize = 64;

/// A tracker on a hardware queue of a backend's machine.
///
/// Its checks are incremental, so that a scenario may check after every
/// step of a long run: a check looks at every unsettled use (one the
/// retiring tracker does not know done yet, at most its ring's bound of
/// them; for the baseline, one whose packet has not finished), the
/// [`RECENT`] newest and [`ROTATION`] more in turn, and the live holds; a
/// hand-out looks at the signal's previous use and the live holds; a poll
/// at the uses its probe newly proves.
pub struct Rig<B: Backend, T> {
    pub tracker: T,
    pub queue: B::Queue,
    pub memory: Arc<B::Memory>,
    pub config: Config,
    /// Every use `submit_request` handed out (since `forget_issued`).
    issued: Vec<Issued<B::Queue>>,
    /// What the checks know of each issued use, in step with `issued`.
    seen: Vec<Seen>,
    /// Issued uses whose ground truth or the tracker's answer may still
    /// change (positions in `issued`, ascending).
    unsettled: Vec<usize>,
    /// The position where the next check's turn round the history starts.
    rotation: usize,
    /// The newest issued use of each signal (a position in `issued`).
    last_use: ByHandle<usize>,
    /// The issued fences (positions in `issued`, ascending).
    fences: Vec<usize>,
    /// Every issued use of the current generation before this position was
    /// seen known complete after a probe.
    proven: usize,
    holds: Vec<Hold<B::Memory>>,
    /// Queue changes so far (`change_queue`).
    generation: usize,
    /// Checks so far (the step a failure names).
    checks: usize,
    kind: Kind,
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
    ) -> Result<Self, CreateError> {
        let kind = Kind {
            probes_fences: true,
            remembers: true,
        };
        Self::build(gpu, config, kind, prepare, RetiringTracker::new)
    }
}

impl<B: Backend> Rig<B, Baseline<B>> {
    pub fn baseline(config: Config) -> Self {
        Self::baseline_on(config, Machine::default())
    }

    pub fn baseline_on(config: Config, machine: Machine) -> Self {
        let kind = Kind {
            probes_fences: false,
            remembers: false,
        };
        Self::build(
            B::new(machine),
            config,
            kind,
            |_, _| {},
            BaselineTracker::new,
        )
        .unwrap()
    }
}

impl<B: Backend, T> Rig<B, T> {
    fn build(
        gpu: B,
        config: Config,
        kind: Kind,
        prepare: impl FnOnce(&B, &B::Memory),
        make: impl FnOnce(Arc<B::Memory>, B::Queue, Config) -> Result<T, CreateError>,
    ) -> Result<Self, CreateError> {
        let queue = gpu.queue();
        let memory = gpu.memory(&queue);
        prepare(&gpu, &memory);
        Ok(Rig {
            tracker: make(memory.clone(), queue.clone(), config)?,
            queue,
            memory,
            config,
            issued: Vec::new(),
            seen: Vec::new(),
            unsettled: Vec::new(),
            rotation: 0,
            last_use: ByHandle::default(),
            fences: Vec::new(),
            proven: 0,
            holds: Vec::new(),
            generation: 0,
            checks: 0,
            kind,
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

    /// Publishes an empty kernel as `publication` says (at its reserved
    /// index), bypassing the rig's bookkeeping.
    pub fn publish(&self, publication: Publication) {
        self.queue
            .publish(publication, Work::Kernel(self.gpu.empty_kernel()))
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

    /// Every use handed out through the rig (since `forget_issued`), oldest
    /// first.
    pub fn issued(&self) -> &[Issued<B::Queue>] {
        &self.issued
    }

    /// Forgets every use issued so far (a long scenario's warm-up): the
    /// checks look at later uses only.
    pub fn forget_issued(&mut self) {
        self.issued.clear();
        self.seen.clear();
        self.unsettled.clear();
        self.rotation = 0;
        self.last_use.clear();
        self.fences.clear();
        self.proven = 0;
        self.holds.clear();
    }

    /// The machine saw no violation; else panics naming the invariant it
    /// broke, as the property driver names it: a packet published before
    /// its signal's re-arm was fenced or flushed ([`Check::PublishOrder`]),
    /// a store to a signal an unfinished packet completes or a waiting
    /// barrier reads ([`Check::RearmWhileInFlight`]), anything else
    /// ([`Check::Unexpected`]).
    #[track_caller]
    pub fn assert_no_violations(&self) {
        let violations = self.gpu.violations();
        let Some(first) = violations.first() else {
            return;
        };
        self.broken(first.check, format!("the machine saw: {violations:#?}"));
    }

    /// The packet at `index` reached the machine as the tracker recorded
    /// its use: with barrier bit `fence` and completion signal `signal`
    /// ([`Check::HeaderMismatch`]).
    #[track_caller]
    fn check_header(&self, index: u64, fence: bool, signal: u64) {
        let Some(truth) = self.gpu.truth(&self.queue, index) else {
            return; // forgotten by the machine already
        };
        if truth.barrier != fence || truth.completion != signal {
            self.broken(
                Check::HeaderMismatch,
                format!(
                    "packet {index} reached the machine with barrier {} and completion {:#x}; \
                     the tracker recorded barrier {fence} and signal {signal:#x}",
                    truth.barrier, truth.completion
                ),
            );
        }
    }

    /// Panics with a broken invariant, named as the property driver names
    /// it (`sigretire_scenarios::Check`).
    #[track_caller]
    fn broken(&self, check: Check, detail: String) -> ! {
        let failure = Failure {
            check,
            step: self.checks,
            detail,
        };
        panic!("{failure}");
    }
}

impl<B: Backend, T: Tracker<Memory = B::Memory, Queue = B::Queue>> Rig<B, T> {
    /// Acquires a signal for the next packet and publishes an empty kernel
    /// completing it.
    #[track_caller]
    pub fn submit(
        &mut self,
        barrier: bool,
        purpose: Purpose,
    ) -> Result<Issued<B::Queue>, AcquireError> {
        self.submit_request(
            Request::packet(self.write_index())
                .barrier(barrier)
                .purpose(purpose),
            &[],
        )
    }

    /// As `submit`, with dependencies (packet handles) to wait on: then the
    /// packet is a barrier-AND. The signal handed out must not be busy: no
    /// issued use of it unfinished, no held reference on it.
    #[track_caller]
    pub fn submit_request(
        &mut self,
        request: Request,
        dependencies: &[u64],
    ) -> Result<Issued<B::Queue>, AcquireError> {
        let work = if dependencies.is_empty() {
            Work::Kernel(self.gpu.empty_kernel())
        } else {
            Work::Wait(dependencies)
        };
        self.submit_work(request, work)
    }

    /// As `submit_request`, publishing the caller's `work` (any shape of
    /// packet) as the use's publication says.
    #[track_caller]
    pub fn submit_work(
        &mut self,
        request: Request,
        work: Work<'_>,
    ) -> Result<Issued<B::Queue>, AcquireError> {
        self.submit_work_as(request, work, |acquired| acquired.publication)
    }

    /// As [`submit_work`](Rig::submit_work), publishing what `publication`
    /// makes of the tracker's handout: a caller that builds its own header
    /// (`Publication::untracked`) instead of publishing the tracker's.
    #[track_caller]
    pub fn submit_work_as(
        &mut self,
        request: Request,
        work: Work<'_>,
        publication: impl FnOnce(&sigretire_tracker::Acquired) -> Publication,
    ) -> Result<Issued<B::Queue>, AcquireError> {
        let index = self.write_index();
        let acquired = self.tracker.acquire(request)?;
        self.check_handout(acquired.signal);
        assert_eq!(self.queue.reserve().unwrap(), index);
        assert_eq!(acquired.publication.index(), index);
        self.queue.publish(publication(&acquired), work).unwrap();
        self.check_header(index, request.is_fence(), acquired.signal);
        let issued = Issued {
            queue: self.queue.clone(),
            ticket: acquired.ticket,
            index,
            signal: acquired.signal,
            placement: acquired.placement,
            timed: request.is_timed(),
            fence: request.is_fence(),
            generation: self.generation,
            abandoned: false,
        };
        let at = self.issued.len();
        self.unsettled.push(at);
        self.last_use.insert(issued.signal, at);
        if issued.fence {
            self.fences.push(at);
        }
        self.issued.push(issued.clone());
        self.seen.push(Seen::default());
        Ok(issued)
    }

    /// A cross-queue wait: a GPU-waiter use on this rig's queue, pinned, and
    /// on `consumer`'s queue a barrier-AND waiting for it, whose use (the one
    /// returned) holds the pin.
    #[track_caller]
    pub fn cross_queue_wait<U: Tracker<Memory = B::Memory, Queue = B::Queue>>(
        &mut self,
        consumer: &mut Rig<B, U>,
    ) -> Issued<B::Queue> {
        let produced = self.submit(true, Purpose::GpuWaiter).unwrap();
        let pin = self
            .tracker
            .pin(&produced.ticket)
            .unwrap()
            .expect("pending: a dependency");
        let consuming = consumer
            .submit_request(
                Request::packet(consumer.write_index()).barrier(true),
                &[pin.packet_handle()],
            )
            .unwrap();
        consumer.tracker.attach(&consuming.ticket, pin).unwrap();
        consuming
    }

    /// The runtime moved the stream to `queue`: a new generation.
    pub fn change_queue(&mut self, queue: B::Queue) {
        self.tracker.note_queue_change(queue.clone());
        self.queue = queue;
        self.generation += 1;
        // No fence of the new generation proves anything issued before.
        self.proven = self.issued.len();
    }

    /// A reference on `issued`'s signal (`Tracker::hold`), known to the
    /// checks while it lives. `None` when the use is already known done.
    pub fn hold(&mut self, issued: &Issued<B::Queue>) -> Option<Held<B::Memory>> {
        let reference = Arc::new(self.tracker.hold(&issued.ticket).unwrap()?);
        // Sequence numbers grow along `issued`.
        let at = self
            .issued
            .binary_search_by_key(&issued.ticket.seq(), |u| u.ticket.seq())
            .ok()
            .filter(|&at| self.issued[at].ticket == issued.ticket)
            .expect("a use this rig issued");
        self.holds.retain(|hold| hold.reference.strong_count() > 0);
        self.holds.push(Hold {
            issued: at,
            reference: Arc::downgrade(&reference),
            answered: None,
        });
        Some(Held { reference })
    }

    /// `Tracker::poll`, then every invariant, and the probe's promise
    /// (docs/design.md section 6, "every completed use retires once probed"):
    /// if the newest fence of the current generation that the read index
    /// passed has completed, every use up to it is known complete.
    #[track_caller]
    pub fn poll(&mut self) -> usize {
        let rearmed = self.tracker.poll();
        self.check();
        // A batched poll may skip its probe; the baseline has none.
        if self.kind.probes_fences && self.config.probe_interval <= 1 {
            self.check_probe();
        }
        rearmed
    }

    /// After a probe: every use up to the fence it nominates, if that fence
    /// completed, is known complete. Looks only at uses no earlier probe
    /// proved (a later change of answer is `check`'s to see).
    #[track_caller]
    fn check_probe(&mut self) {
        let read_index = sigretire_tracker::backend::QueueView::read_index(&self.queue);
        // Positions from `proven` on are all of the current generation.
        let nominated = self
            .fences
            .iter()
            .rev()
            .take_while(|&&f| f >= self.proven)
            .find(|&&f| self.issued[f].index < read_index)
            .copied();
        let Some(fence) = nominated else {
            return;
        };
        if !self.truth(&self.issued[fence]).is_some_and(|t| t.completed) {
            return;
        }
        for i in self.proven..=fence {
            let u = &self.issued[i];
            let known = self.tracker.known_status(&u.ticket).unwrap();
            // (`check` judges the answer; this only says it must be there.)
            if known != Some(Status::Complete) {
                let f = &self.issued[fence];
                self.broken(
                    Check::NotRetiredWhenProven,
                    format!(
                        "use {} (index {}) is known {known:?} after a probe: the read index \
                         {read_index} passed fence use {} (index {}), which completed",
                        u.ticket.seq(),
                        u.index,
                        f.ticket.seq(),
                        f.index
                    ),
                );
            }
        }
        self.proven = fence + 1;
    }

    /// `Tracker::timestamps`, checked: any stamps it gives are the packet
    /// processor's (in the time domain the backend reports).
    #[track_caller]
    pub fn timestamps(&mut self, issued: &Issued<B::Queue>) -> Option<Timestamps> {
        let stamps = self.tracker.timestamps(&issued.ticket).unwrap()?;
        self.check_stamps(issued, stamps, "the tracker");
        Some(stamps)
    }

    #[track_caller]
    fn check_stamps(&self, issued: &Issued<B::Queue>, stamps: Timestamps, who: &str) {
        let Some(truth) = self.truth(issued) else {
            return; // forgotten by the machine: nothing to compare with
        };
        let reported = |tick: Option<u64>| tick.map(|t| self.gpu.reported_time(t));
        if !truth.completed
            || !stamps_match(stamps, reported(truth.start_ts), reported(truth.end_ts))
        {
            self.broken(
                Check::Timestamps,
                format!(
                    "{who} gave use {} the stamps {stamps:?}; its packet {} is {truth:?}",
                    issued.ticket.seq(),
                    issued.index
                ),
            );
        }
    }

    /// A signal handed out must not be busy: its newest issued use (each
    /// earlier one was looked at when the next was handed out) has
    /// finished, and no live reference holds it.
    #[track_caller]
    fn check_handout(&self, signal: u64) {
        if let Some(&previous) = self.last_use.get(&signal) {
            let u = &self.issued[previous];
            if let Some(truth) = self.truth(u).filter(|t| !(t.completed || t.failed)) {
                self.broken(
                    Check::HandedOutBusySignal,
                    format!(
                        "{signal:#x} handed out, still the signal of use {} (packet {} is \
                         {truth:?})",
                        u.ticket.seq(),
                        u.index
                    ),
                );
            }
        }
        for hold in &self.holds {
            if hold.reference.strong_count() > 0 && self.issued[hold.issued].signal == signal {
                self.broken(
                    Check::RearmWhileHeld,
                    format!(
                        "{signal:#x} handed out while a reference on use {} holds it",
                        self.issued[hold.issued].ticket.seq()
                    ),
                );
            }
        }
    }

    /// Every invariant of docs/design.md section 6 that the rig can see without
    /// touching signal memory (so no counter a scenario asserts moves),
    /// judged as the property driver judges them (`sigretire_scenarios::check`), in
    /// this order (a false report first: what the tracker did wrong on the
    /// machine usually follows from it):
    ///
    /// - every report about an issued use, the tracker's and each held
    ///   reference's, is truthful (complete only if its packet completed,
    ///   failed only if it failed) and never changes once final; a false
    ///   one that another generation's fence or queue error explains is
    ///   named [`Check::CrossGeneration`];
    /// - a held reference's timestamps are the packet processor's;
    /// - the machine saw no violation: no store to a signal an unfinished
    ///   packet completes or a waiting barrier reads (re-armed while in
    ///   flight), no packet published before its signal's re-arm was
    ///   fenced (and flushed where needed; the stand-in cannot see either);
    /// - every signal is accounted for and the ring stays within its bound.
    ///
    /// With `submit_request` (no handed-out signal busy or held), `poll`
    /// (every completed use retires once probed) and `timestamps` (stamps
    /// are the ground truth) it covers them all but one: it cannot see a
    /// held signal's value without a counted load, so a held signal's
    /// re-arm shows when it is handed out again, not when it is stored.
    ///
    /// A use stays under watch at every check until both its packet and
    /// the tracker's answer are final; after that, a changed answer shows
    /// while it is among the [`RECENT`] newest or when the [`ROTATION`]
    /// comes round to it.
    #[track_caller]
    pub fn check(&mut self) {
        self.checks += 1;
        for i in std::mem::take(&mut self.unsettled) {
            if !self.look_at(i) {
                self.unsettled.push(i);
            }
        }
        // A settled use stays settled (its answer is final): looked at
        // again only to see that the answer stays.
        let n = self.issued.len();
        let start = if n == 0 { 0 } else { self.rotation % n };
        self.rotation = start + ROTATION;
        let recent = n.saturating_sub(RECENT)..n;
        let turn = (start..start + ROTATION.min(n)).map(|i| i % n);
        for i in recent.chain(turn) {
            if self.settled(i) {
                self.look_at(i);
            }
        }
        self.holds.retain(|hold| hold.reference.strong_count() > 0);
        for h in 0..self.holds.len() {
            let Some(reference) = self.holds[h].reference.upgrade() else {
                continue;
            };
            let i = self.holds[h].issued;
            let known = reference.known_status();
            let mut answered = self.holds[h].answered;
            self.judge_report(i, known, "a held reference", &mut answered);
            self.holds[h].answered = answered;
            if let Some(stamps) = reference.timestamps() {
                self.check_stamps(&self.issued[i], stamps, "a held reference");
            }
        }
        self.assert_no_violations();
        if let Err(failure) = census(&self.tracker.census(), self.config.max_in_flight()) {
            self.broken(failure.check, failure.detail);
        }
    }

    /// Whether issued use `i` is settled (see `look_at`).
    fn settled(&self, i: usize) -> bool {
        let seen = self.seen[i];
        seen.answer.is_some() || (seen.finished && !self.kind.remembers)
    }

    /// Judges what the tracker says about issued use `i`; returns whether
    /// the use is settled: answered (for the baseline, which may forget an
    /// answer, its packet finished). The ground truth is looked up only for
    /// a new answer (no answer is always truthful) and the baseline's
    /// unsettled uses.
    #[track_caller]
    fn look_at(&mut self, i: usize) -> bool {
        let said = self.tracker.known_status(&self.issued[i].ticket).unwrap();
        let Seen { answer, finished } = self.seen[i];
        let new = match said {
            Some(_) => said != answer,
            None => answer.is_some() && self.kind.remembers, // then a change
        };
        if new {
            let mut answered = answer;
            let finished = self.judge_report(i, said, "the tracker", &mut answered);
            self.seen[i] = Seen {
                answer: answered,
                finished: finished || self.seen[i].finished,
            };
        }
        if self.seen[i].answer.is_some() {
            return true;
        }
        if self.kind.remembers {
            return false;
        }
        if !finished {
            let u = &self.issued[i];
            self.seen[i].finished = self
                .truth(u)
                .is_none_or(|t| t.completed || t.failed || u.abandoned);
        }
        self.seen[i].finished
    }

    /// Judges one report about issued use `i` by the oracle's rule
    /// ([`judge_report`]), given the last final answer it knows
    /// (`answered`, updated); returns whether the use's ground truth is
    /// final (or forgotten).
    #[track_caller]
    fn judge_report(
        &self,
        i: usize,
        said: Option<Status>,
        who: &str,
        answered: &mut Option<Status>,
    ) -> bool {
        let u = &self.issued[i];
        let truth = self.truth(u);
        let packets = truth.map(|t| PacketTruth {
            completed: t.completed,
            failed: t.failed || u.abandoned,
        });
        let before = *answered;
        let judged = judge_report(answered, said, packets, !self.kind.remembers, |check| {
            self.other_generation_explains(u, check)
        });
        if let Err(wrong) = judged {
            let mut detail = format!(
                "{who} said {said:?} about use {} of generation {} (it said {before:?} \
                 before); packet {} is {truth:?}",
                u.ticket.seq(),
                u.generation,
                u.index
            );
            if let Some(why) = wrong.why {
                detail.push_str(&format!("; {why}"));
            }
            self.broken(wrong.check, detail);
        }
        packets.is_none_or(|p| p.completed || p.failed)
    }

    /// What another generation showed that explains a false report about
    /// `u` (the property driver's [`Check::CrossGeneration`]): a completed
    /// fence of another generation at or after its AQL index explains an
    /// early completion, another generation's failed packet a false
    /// failure. Looks only once a report is known false.
    fn other_generation_explains(&self, u: &Issued<B::Queue>, check: Check) -> Option<String> {
        let other = |o: &&Issued<B::Queue>| o.generation != u.generation;
        match check {
            Check::EarlyCompletion => self
                .fences
                .iter()
                .map(|&f| &self.issued[f])
                .filter(other)
                .find(|f| f.index >= u.index && self.truth(f).is_some_and(|t| t.completed))
                .map(|f| {
                    format!(
                        "fence use {} (index {}) of generation {} completed",
                        f.ticket.seq(),
                        f.index,
                        f.generation
                    )
                }),
            Check::FalseFailure => self
                .issued
                .iter()
                .filter(other)
                .find(|o| self.truth(o).is_some_and(|t| t.failed))
                .map(|o| {
                    format!(
                        "use {} of generation {} failed with its queue",
                        o.ticket.seq(),
                        o.generation
                    )
                }),
            _ => None,
        }
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

/// Runs the scenario `module::backend::scenario` of this test binary in a
/// child process with `bug` planted (the switch is process-wide), asserts
/// that it failed naming `check`, and answers what it said.
#[cfg(sigretire_planted)]
pub fn caught_in_child(
    bug: sigretire_tracker::planted::Bug,
    module: &str,
    backend: &str,
    scenario: &str,
    check: sigretire_scenarios::Check,
) -> String {
    let name = format!("{module}::{backend}::{scenario}");
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name.as_str(), "--exact", "--test-threads=1"])
        .env("TRACKER_PLANTED_BUG", bug.name())
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        said.contains("0 passed; 1 failed"),
        "{name} with {} planted should fail; it said:\n{said}",
        bug.name()
    );
    let named = format!("[{check}]");
    assert!(
        said.contains(&named),
        "{name} with {} planted should fail naming {named}; it said:\n{said}",
        bug.name()
    );
    said
}
