//! The operation-sequence driver: two streams, each a tracker on its own
//! simulated hardware queues of one stepped simulator, driven one
//! [`Op`] at a time, with every invariant of docs/design.md section 6 checked
//! against the simulator's ground truth and the [`Model`] after each step.

use crate::check::{Check, Failure, fail};
pub use crate::kind::TrackerKind;
use crate::model::{
    HeldReference, Holder, Model, PinRecord, UseRecord, describe, expected_value, true_status,
};
use crate::observer::{Observer, Watched};
use crate::ops::{EngineStep, Op, StreamId};
use crate::setup::{QUEUE_SIZE, Setup, TRUTH_HISTORY};
use sigretire_baseline::BaselineTracker;
use sigretire_sim::backend::SimMemory;
use sigretire_sim::hsa_sys::hsa_signal_t;
use sigretire_sim::{AgentId, Placement as RingPlacement, Queue, Sim, SimConfig, SimQueueConfig};
use sigretire_tracker::{
    AcquireError, Config, CreateError, ForeignTicket, Generation, PinError, Purpose, Request,
    RetiringTracker, Status, Ticket, TimestampsError, Tracker, WaitError, WaitPolicy, Work,
    backend::{Condition, Dispatch, HardwareQueue, Publication, WaitValue},
};
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

/// A tracker the driver can build on the simulator.
pub trait SimTracker: Tracker<Memory = SimMemory, Queue = Queue> + Sized {
    /// Which one it is.
    const KIND: TrackerKind;

    /// A tracker for `queue` with signals from `memory`, its generation
    /// counter `generation_bits` wide.
    fn create(
        memory: Arc<SimMemory>,
        queue: Queue,
        config: Config,
        generation_bits: u32,
    ) -> Result<Self, CreateError>;
}

impl SimTracker for RetiringTracker<SimMemory, Queue> {
    const KIND: TrackerKind = TrackerKind::Retiring;

    fn create(
        memory: Arc<SimMemory>,
        queue: Queue,
        config: Config,
        generation_bits: u32,
    ) -> Result<Self, CreateError> {
        let mut tracker = RetiringTracker::new(memory, queue, config)?;
        sigretire_tracker::kit::narrow_generations(&mut tracker, generation_bits);
        Ok(tracker)
    }
}

impl SimTracker for BaselineTracker<SimMemory, Queue> {
    const KIND: TrackerKind = TrackerKind::Baseline;

    fn create(
        memory: Arc<SimMemory>,
        queue: Queue,
        config: Config,
        generation_bits: u32,
    ) -> Result<Self, CreateError> {
        let mut tracker = BaselineTracker::new(memory, queue, config)?;
        tracker.narrow_generations(generation_bits);
        Ok(tracker)
    }
}

/// How often a scenario reached the states that matter, summed over
/// scenarios to show the tests get where the bugs live.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Operations applied.
    pub ops: u64,
    /// Uses handed out.
    pub uses: u64,
    /// Uses several operations decrement (`Request::ops`).
    pub multi_op_uses: u64,
    /// Copy-engine uses.
    pub copy_uses: u64,
    /// Submissions that failed (`Tracker::fail_submission`), and those of
    /// them that issued part of their work first.
    pub failed_submissions: u64,
    /// See `failed_submissions`.
    pub partly_issued: u64,
    /// Acquires answered with back-pressure (the growth limit reached).
    pub backpressure: u64,
    /// Times a ring grew.
    pub growths: u64,
    /// Queue changes that wrapped the generation counter to 0.
    pub generation_wraps: u64,
    /// Held signals parked, and parked signals that came back.
    pub parks: u64,
    /// Parked signals re-armed after their last holder let go.
    pub unparks: u64,
    /// Pins attached to consumer uses.
    pub pins: u64,
    /// Drains told to a tracker.
    pub drains: u64,
    /// Uses retired by a fence proof, by a CPU wait's observation, by a
    /// load of their own signal.
    pub retired_by_fence: u64,
    /// See `retired_by_fence`.
    pub retired_by_cpu_wait: u64,
    /// See `retired_by_fence`.
    pub retired_by_load: u64,
    /// Uses that failed.
    pub failed: u64,
    /// Timestamp pairs harvested.
    pub harvests: u64,
    /// HDP flushes issued.
    pub flushes: u64,
    /// Signal allocations the trackers asked for that an injected failure
    /// refused.
    pub refused_allocations: u64,
    /// Retries after the caller waited for the use back-pressure named.
    pub retries_after_wait: u64,
    /// Drains while an older generation's or a copy engine's use was
    /// still pending.
    pub drains_beside_pending: u64,
    /// Pins a tracker refused to attach to a foreign ticket, and handed back.
    pub refused_attaches: u64,
    /// Answers another thread's waiters and references gave (threaded
    /// variant).
    pub observed_answers: u64,
    /// Kernel dispatches the caller built (`Work::Dispatch`).
    pub caller_dispatches: u64,
    /// Barrier-OR waits (`Work::WaitAny`).
    pub any_waits: u64,
    /// AMD barrier-value waits (`Work::WaitValue`).
    pub value_waits: u64,
}

impl Coverage {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Coverage) {
        self.ops += other.ops;
        self.uses += other.uses;
        self.multi_op_uses += other.multi_op_uses;
        self.copy_uses += other.copy_uses;
        self.failed_submissions += other.failed_submissions;
        self.partly_issued += other.partly_issued;
        self.backpressure += other.backpressure;
        self.growths += other.growths;
        self.generation_wraps += other.generation_wraps;
        self.parks += other.parks;
        self.unparks += other.unparks;
        self.pins += other.pins;
        self.drains += other.drains;
        self.retired_by_fence += other.retired_by_fence;
        self.retired_by_cpu_wait += other.retired_by_cpu_wait;
        self.retired_by_load += other.retired_by_load;
        self.failed += other.failed;
        self.harvests += other.harvests;
        self.flushes += other.flushes;
        self.refused_allocations += other.refused_allocations;
        self.retries_after_wait += other.retries_after_wait;
        self.drains_beside_pending += other.drains_beside_pending;
        self.refused_attaches += other.refused_attaches;
        self.observed_answers += other.observed_answers;
        self.caller_dispatches += other.caller_dispatches;
        self.any_waits += other.any_waits;
        self.value_waits += other.value_waits;
    }
}

/// The most hardware queues (generations) one stream moves through.
const MAX_GENERATIONS: usize = 8;

/// A CPU wait that never sleeps long: the stepped simulator cannot move
/// while the driver's own thread waits.
const QUICK_WAIT: WaitPolicy = WaitPolicy {
    spin: Duration::ZERO,
    device_spin: Duration::ZERO,
    yield_for: Duration::ZERO,
    max_sleep: Duration::from_micros(5),
    interrupt: false,
    hybrid: None,
};

struct Stream<T> {
    tracker: T,
    /// One hardware queue per generation, oldest first: the last is current.
    queues: Vec<Queue>,
    /// The copy engine: a queue of its own (ring in system memory, in
    /// order) that no queue change moves. Made for the first copy-engine
    /// submission (a queue costs more than most scenarios).
    copy: Option<Queue>,
    agent: AgentId,
}

impl<T> Stream<T> {
    /// Every queue of the stream, the copy engine included.
    fn all_queues(&self) -> impl Iterator<Item = &Queue> {
        self.queues.iter().chain(&self.copy)
    }
}

/// Two streams on one stepped simulator, and the model of what they did.
pub struct Driver<T: SimTracker> {
    sim: Sim,
    setup: Setup,
    streams: Vec<Stream<T>>,
    model: Model,
    step: usize,
    coverage: Coverage,
    /// Another thread asking about recent uses (the threaded variant).
    observer: Option<Observer>,
    /// The next held reference's id.
    next_reference: u64,
    /// The next acquire meets another thread's waiter (and the GPU)
    /// inside its first allocation (`Op::FailAllocations`).
    meanwhile: bool,
}

impl<T: SimTracker> Driver<T> {
    /// Two fresh streams under `setup`.
    pub fn new(setup: Setup) -> Result<Self, Failure> {
        let sim = Sim::new(SimConfig {
            agents: 2,
            ..SimConfig::default()
        });
        let mut streams = Vec::new();
        for agent in [AgentId(0), AgentId(1)] {
            let queue = create_queue(&sim, &setup, agent, setup.first_ring);
            let memory = Arc::new(SimMemory::new(sim.clone(), agent));
            let tracker = T::create(memory, queue.clone(), setup.tracker, setup.generation_bits)
                .or_else(|e| {
                    fail(
                        Check::Unexpected,
                        format!("creating the tracker failed: {e}"),
                    )
                })?;
            streams.push(Stream {
                tracker,
                queues: vec![queue],
                copy: None,
                agent,
            });
        }
        Ok(Self {
            sim,
            setup,
            streams,
            model: Model {
                kind: Some(T::KIND),
                ..Model::default()
            },
            step: 0,
            coverage: Coverage::default(),
            observer: None,
            next_reference: 0,
            meanwhile: false,
        })
    }

    /// Two fresh streams under `setup`, with another thread that asks each
    /// tracker's `Waiter` and clones of the scenario's references about
    /// recent uses all the while (see `observer.rs`).
    pub fn with_observer(setup: Setup) -> Result<Self, Failure> {
        let mut driver = Self::new(setup)?;
        driver.observer = Some(Observer::start());
        Ok(driver)
    }

    /// The observer's view of use `use_id`.
    fn watched(&self, use_id: usize) -> Watched {
        let u = &self.model.uses[use_id];
        Watched {
            waiter: self.streams[u.stream].tracker.waiter(),
            ticket: u.ticket,
            queue: u.queue.clone(),
            issued: u.first..u.first + u64::from(u.issued),
            abandoned: u.abandoned,
        }
    }

    /// Removes held reference `at` (the scenario let go of it).
    fn remove_reference(&mut self, at: usize) -> HeldReference {
        let held = self.model.references.remove(at);
        if let Some(observer) = &self.observer {
            observer.release(held.id);
        }
        held
    }

    /// Applies one operation, then checks every invariant.
    pub fn apply(&mut self, op: Op) -> Result<(), Failure> {
        if std::env::var("SCENARIO_TRACE").is_ok() {
            for (s, stream) in self.streams.iter().enumerate() {
                eprintln!("  stream {s}: {:?}", stream.tracker.census());
            }
            eprintln!("{}: {op:?}", self.step);
        }
        let result = match self.apply_op(op) {
            Ok(()) => self.check_invariants().and_then(|()| {
                match self.observer.as_ref().and_then(Observer::failure) {
                    Some(failure) => Err(failure),
                    None => Ok(()),
                }
            }),
            // A step may break a liveness invariant (an answer that knows
            // too little) and a safety one (a false report) at once: the
            // safety one says more about what went wrong, so it is reported.
            Err(f) if f.check == Check::NotRetiredWhenProven => {
                Err(self.check_invariants().err().unwrap_or(f))
            }
            Err(f) => Err(f),
        };
        self.step += 1;
        self.coverage.ops += 1;
        result.map_err(|f| Failure {
            step: self.step - 1,
            ..f
        })
    }

    /// Lets every holder go, runs every queue to the end, asks about every
    /// use and reclaims: then nothing may be pending, parked, hung or lost.
    pub fn finish(mut self) -> Result<Coverage, Failure> {
        let step = self.step;
        self.finish_checks()
            .map_err(|f| Failure { step, ..f })
            .map(|()| self.coverage)
    }

    fn finish_checks(&mut self) -> Result<(), Failure> {
        self.coverage.refused_allocations = self.sim.allocations_refused();
        // Memory is there again: a tracker waiting for a spare gets one.
        self.sim.fail_allocations(0);
        if let Some(mut observer) = self.observer.take() {
            // Its clones of references go with it.
            self.coverage.observed_answers += observer.stop();
            if let Some(failure) = observer.failure() {
                return Err(failure);
            }
        }
        self.model.references.clear();
        for stream in &self.streams {
            for queue in stream.all_queues() {
                queue.stall(false);
            }
        }
        self.probe_old_generations()?;
        self.sim.run_until_idle();
        for use_id in 0..self.model.uses.len() {
            let u = &self.model.uses[use_id];
            let truth = u.truth();
            if !truth.is_done() || !u.packets_done() {
                let waits_on = u.dependency.map_or(String::new(), |d| {
                    let dep = &self.model.uses[d];
                    let later: Vec<String> = self
                        .model
                        .uses
                        .iter()
                        .filter(|v| v.sim_signal == dep.sim_signal && v.ticket.seq() > dep.ticket.seq() && v.stream == dep.stream)
                        .map(|v| format!("use {} ({})", v.ticket.seq(), describe(&v.truth())))
                        .collect();
                    format!(
                        "; it waits on use {} of stream {} ({}), whose signal {:?} now holds {} and later served {later:?}",
                        dep.ticket.seq(),
                        dep.stream,
                        describe(&dep.truth()),
                        dep.sim_signal,
                        self.sim.load(dep.sim_signal),
                    )
                });
                return fail(
                    Check::Hang,
                    format!(
                        "use {} of stream {} (queue {}{}) never finished with every queue run and none stalled: {}{waits_on}",
                        u.ticket.seq(),
                        u.stream,
                        u.queue.id(),
                        if u.queue.is_failed() { ", failed" } else { "" },
                        describe(&truth)
                    ),
                );
            }
            let ticket = u.ticket;
            let status = self.streams[u.stream]
                .tracker
                .query(&ticket)
                .or_else(|e| fail(Check::Unexpected, format!("query failed: {e}")))?;
            self.model.judge_answer(use_id, status)?;
        }
        // Until nothing changes: a consumer's retirement drops its pin
        // after the producer's reclaim may have run, and uses of the two
        // streams may pin each other's signals in a chain, each link
        // freed by the other stream's next reclaim.
        for _ in 0..64 {
            let before: Vec<_> = self.streams.iter().map(|s| s.tracker.census()).collect();
            let rearmed: usize = self.streams.iter_mut().map(|s| s.tracker.reclaim()).sum();
            let after: Vec<_> = self.streams.iter().map(|s| s.tracker.census()).collect();
            if rearmed == 0 && before == after {
                break;
            }
        }
        self.check_invariants()?;
        for (s, stream) in self.streams.iter().enumerate() {
            let census = stream.tracker.census();
            if census.pins > 0 {
                return fail(
                    Check::PinHeldTooLong,
                    format!(
                        "stream {s} keeps {} pins after every consumer finished and was asked about",
                        census.pins
                    ),
                );
            }
            let stuck = census.parked > 0 || (T::KIND.empties_ring() && census.in_flight > 0);
            if stuck || !census.is_balanced() {
                return fail(
                    Check::Leak,
                    format!(
                        "stream {s} after every use finished and every holder let go: {census:?}"
                    ),
                );
            }
            let stats = stream.tracker.stats();
            let c = &mut self.coverage;
            c.growths += stats.ring_growths;
            c.parks += stats.parks;
            c.unparks += stats.unparks;
            c.retired_by_fence += stats.retired_by_fence;
            c.retired_by_cpu_wait += stats.retired_by_cpu_wait;
            c.retired_by_load += stats.retired_by_load;
            c.failed += stats.failed;
            c.harvests += stats.harvests;
            c.flushes += stats.hdp_flushes();
        }
        Ok(())
    }

    /// The final checks' cross-generation probe. A tracker that lets a
    /// fence of one generation prove another's uses gives itself away only
    /// when an older generation's fence completes, and it learns so, while
    /// the current generation has work pending. Random steps rarely line
    /// that up; here it is every scenario's end: with the current queues
    /// held back, the older generations' queues run to the end and the
    /// newest completed fence of each is asked about (its own proof: the
    /// tracker loads it), every invariant checked after each answer.
    fn probe_old_generations(&mut self) -> Result<(), Failure> {
        for stream in &self.streams {
            let (_current, older) = stream.queues.split_last().expect("a current queue");
            for queue in older {
                queue.run_until_idle();
            }
        }
        let mut newest: Vec<usize> = Vec::new();
        for (use_id, u) in self.model.uses.iter().enumerate().rev() {
            let old = u.generation < self.model.generations[u.stream];
            let seen = newest.iter().any(|&n| {
                let v = &self.model.uses[n];
                (v.stream, v.generation) == (u.stream, u.generation)
            });
            if old && u.fence && !seen && u.truth().completed {
                newest.push(use_id);
            }
        }
        for use_id in newest {
            let u = &self.model.uses[use_id];
            let (stream, ticket) = (u.stream, u.ticket);
            let status = self.streams[stream]
                .tracker
                .query(&ticket)
                .or_else(|e| fail(Check::Unexpected, format!("query failed: {e}")))?;
            self.model.judge_answer(use_id, status)?;
            self.check_invariants()?;
        }
        Ok(())
    }

    fn stream(&self, id: StreamId) -> &Stream<T> {
        &self.streams[id.index()]
    }

    fn current_queue(&self, stream: usize) -> Queue {
        self.streams[stream]
            .queues
            .last()
            .expect("a stream always has a queue")
            .clone()
    }

    /// One of the stream's queues: 0 the current one, then older ones.
    fn pick_queue(&self, id: StreamId, pick: u8) -> Queue {
        let queues = &self.stream(id).queues;
        queues[queues.len() - 1 - usize::from(pick) % queues.len()].clone()
    }

    /// A step of the stream's copy engine, if it has one yet.
    fn copy_engine_step(&mut self, id: StreamId, step: EngineStep) {
        let Some(engine) = self.stream(id).copy.clone() else {
            return;
        };
        // Nothing to do is a normal answer to each.
        match step {
            EngineStep::Launch => {
                let _ = engine.launch();
            }
            EngineStep::Complete => self.complete_on(&engine, id.index(), 0),
            EngineStep::AdvanceReadIndex => {
                let _ = engine.advance_read_index();
            }
            EngineStep::Run => engine.run_until_idle(),
            EngineStep::Fail => engine.fail(),
            EngineStep::Stall => engine.stall(true),
            EngineStep::Release => engine.stall(false),
        }
    }

    fn known(&self, use_id: usize) -> Result<Option<Status>, Failure> {
        let u = &self.model.uses[use_id];
        self.streams[u.stream]
            .tracker
            .known_status(&u.ticket)
            .or_else(|e| fail(Check::Unexpected, format!("known_status failed: {e}")))
    }

    fn apply_op(&mut self, op: Op) -> Result<(), Failure> {
        match op {
            Op::Submit {
                stream,
                barrier,
                purpose,
                timed,
            } => {
                let packet = Packet::single(barrier, purpose.into(), timed);
                self.submit(stream.index(), packet, None).map(|_| ())
            }
            Op::SubmitOps {
                stream,
                ops,
                barrier,
                purpose,
                timed,
            } => {
                let packet = Packet {
                    ops: u32::from(ops.max(1)),
                    ..Packet::single(barrier, purpose.into(), timed)
                };
                self.submit(stream.index(), packet, None).map(|_| ())
            }
            Op::SubmitCopy {
                stream,
                ops,
                purpose,
                timed,
            } => {
                let packet = Packet {
                    ops: u32::from(ops.max(1)),
                    copy: true,
                    ..Packet::single(false, purpose.into(), timed)
                };
                self.submit(stream.index(), packet, None).map(|_| ())
            }
            Op::FailSubmission {
                stream,
                copy,
                ops,
                issued,
                barrier,
                purpose,
                timed,
            } => {
                let ops = ops.max(1);
                let packet = Packet {
                    ops: u32::from(ops),
                    copy,
                    issued: Some(u32::from(issued.min(ops - 1))),
                    ..Packet::single(barrier && !copy, purpose.into(), timed)
                };
                self.submit(stream.index(), packet, None).map(|_| ())
            }
            Op::HoldEvent { stream, pick } => self.hold(stream, pick, Holder::Event),
            Op::HoldHandler { stream, pick } => self.hold(stream, pick, Holder::Handler),
            Op::DropEvent { pick } => {
                self.drop_reference(Holder::Event, pick);
                Ok(())
            }
            Op::RunHandler { pick } => self.run_handler(pick),
            Op::PinAcross {
                producer,
                pick,
                barrier,
                wrong_consumer,
            } => self.pin_across(producer, pick, barrier, wrong_consumer),
            Op::ConsumerPasses { pick } => self.consumer_passes(pick),
            Op::Launch { stream, queue } => {
                // Nothing to launch is a normal answer.
                let _ = self.pick_queue(stream, queue).launch();
                Ok(())
            }
            Op::Complete {
                stream,
                queue,
                pick,
            } => {
                self.complete(stream, queue, pick);
                Ok(())
            }
            Op::AdvanceReadIndex { stream, queue } => {
                // Nothing launched past the read index is a normal answer.
                let _ = self.pick_queue(stream, queue).advance_read_index();
                Ok(())
            }
            Op::RunQueue { stream, queue } => {
                self.pick_queue(stream, queue).run_until_idle();
                Ok(())
            }
            Op::FailQueue {
                stream,
                queue,
                notify,
            } => {
                let failing = self.pick_queue(stream, queue);
                failing.fail();
                // The runtime's error callback names the failed queue: the
                // one the tracker watches (`fail_queue`), or an older one,
                // through a use published there (`fail_queue_of`). Without
                // it a tracker learns of the error from its signals.
                if notify {
                    let s = stream.index();
                    if failing.id() == self.current_queue(s).id() {
                        self.streams[s].tracker.fail_queue();
                    } else if let Some(ticket) = self
                        .model
                        .uses
                        .iter()
                        .find(|u| u.stream == s && !u.copy && u.queue.id() == failing.id())
                        .map(|u| u.ticket)
                    {
                        self.streams[s].tracker.fail_queue_of(&ticket);
                    }
                }
                Ok(())
            }
            Op::CopyEngine { stream, step } => {
                self.copy_engine_step(stream, step);
                Ok(())
            }
            Op::Stall {
                stream,
                queue,
                stalled,
            } => {
                self.pick_queue(stream, queue).stall(stalled);
                Ok(())
            }
            Op::QueueChange { stream, host_ring } => {
                self.queue_change(stream.index(), host_ring);
                Ok(())
            }
            Op::Drain { stream, run_all } => self.drain(stream.index(), run_all),
            Op::FailAllocations {
                calls,
                waiter_meanwhile,
            } => {
                self.sim.fail_allocations(u64::from(calls));
                self.meanwhile = waiter_meanwhile;
                Ok(())
            }
            Op::Poll { stream } => self.poll(stream.index()),
            Op::Query { stream, pick } => {
                let Some(use_id) = self.model.recent_use(stream.index(), pick) else {
                    return Ok(());
                };
                let ticket = self.model.uses[use_id].ticket;
                let status = self.streams[stream.index()]
                    .tracker
                    .query(&ticket)
                    .or_else(|e| fail(Check::Unexpected, format!("query failed: {e}")))?;
                self.model.judge_answer(use_id, status)
            }
            Op::Reclaim { stream } => {
                self.streams[stream.index()].tracker.reclaim();
                Ok(())
            }
            Op::CpuWait {
                stream,
                pick,
                deadline,
            } => self.cpu_wait(stream.index(), pick, deadline.duration()),
            Op::Timestamps { stream, pick } => self.timestamps(stream.index(), pick),
        }
    }

    /// Acquires a signal for the stream's next packets and publishes them:
    /// empty kernels (on the AQL queue or the copy engine), or one
    /// barrier-AND waiting on `dependency`. A submission that fails
    /// (`packet.issued`) publishes only part of its work, fills the rest of
    /// its reserved slots with empty packets that name no signal, and tells
    /// the tracker. Returns the new use, or `None` when the tracker pushed
    /// back or the queue was full.
    fn submit(
        &mut self,
        stream: usize,
        packet: Packet,
        dependency: Option<(usize, u64)>,
    ) -> Result<Option<usize>, Failure> {
        let queue = if packet.copy {
            let s = &mut self.streams[stream];
            s.copy
                .get_or_insert_with(|| create_copy_engine(&self.sim, s.agent))
                .clone()
        } else {
            self.current_queue(stream)
        };
        let ops = packet.ops.max(1);
        if queue.write_index() - queue.read_index() + u64::from(ops) > u64::from(QUEUE_SIZE) {
            // The packet ring is full: a runtime waits for the GPU first.
            return Ok(None);
        }
        let first = queue.write_index();
        let last = first + u64::from(ops) - 1;
        let request = if packet.copy {
            Request::copy_engine()
        } else {
            Request::packet(last).barrier(packet.barrier)
        }
        .purpose(packet.purpose)
        .timed(packet.timed)
        .ops(ops);
        let refused_before = self.sim.allocations_refused();
        if std::mem::take(&mut self.meanwhile) {
            self.arm_meanwhile();
        }
        let mut attempt = self.streams[stream].tracker.acquire(request);
        // Only the acquire meets it.
        self.sim.on_next_allocation(|| {});
        if let Err(AcquireError::Backpressure {
            wait_for,
            in_flight,
        }) = attempt
        {
            let named = self.judge_backpressure(stream, wait_for, in_flight, refused_before)?;
            // The caller waits for the named use outside its locks and
            // retries. Meanwhile the GPU runs its queue up to it, with the
            // read index left where it was (it may lag completion). Once
            // that use completed, the retry must not push back with the
            // same answer.
            self.run_up_to(named);
            let waiter = self.streams[stream].tracker.waiter();
            let waited = match waiter.wait(&wait_for, Duration::ZERO, QUICK_WAIT) {
                Ok(status) => status,
                Err(WaitError::TimedOut(_)) => Status::Pending,
                Err(e) => return fail(Check::Unexpected, format!("wait failed: {e}")),
            };
            self.model.judge_answer(named, waited)?;
            if waited != Status::Complete {
                return Ok(None);
            }
            self.coverage.retries_after_wait += 1;
            let refused_before_retry = self.sim.allocations_refused();
            attempt = self.streams[stream].tracker.acquire(request);
            if let Err(AcquireError::Backpressure {
                wait_for: again,
                in_flight,
            }) = attempt
            {
                // Its completion freed room (a fence's proves the uses
                // before it): only a spare that could not be allocated for
                // a held signal may still stand in the way.
                if self.sim.allocations_refused() == refused_before_retry {
                    return fail(
                        Check::RingBound,
                        format!(
                            "the caller waited for use {} as back-pressure said, it completed, \
                             and the retry was pushed back again (naming use {})",
                            wait_for.seq(),
                            again.seq()
                        ),
                    );
                }
                self.judge_backpressure(stream, again, in_flight, refused_before)?;
                return Ok(None);
            }
        }
        let acquired = match attempt {
            Ok(acquired) => acquired,
            // An injected allocation failure met the call while a done use's
            // signal is held (it needs a spare, or the baseline a new
            // signal): refusing is fair, and the checks after the step show
            // nothing changed.
            // (The observer thread may still hold clones of references the
            // scenario dropped: with it, the model cannot tell.)
            Err(AcquireError::OutOfSignals(_) | AcquireError::SignalsHeld { .. })
                if self.sim.allocations_refused() > refused_before
                    && (self.observer.is_some() || self.a_done_use_is_held(stream)?) =>
            {
                return Ok(None);
            }
            Err(e) => return fail(Check::Unexpected, format!("acquire failed: {e}")),
        };
        self.check_handout(stream, acquired.signal)?;
        let expected = Generation::new(
            self.model.generations[stream] as u32,
            self.setup.generation_bits,
        );
        if acquired.ticket.generation() != expected {
            return fail(
                Check::Unexpected,
                format!(
                    "use {} is labelled generation {:?}, the stream is in {expected:?}",
                    acquired.ticket.seq(),
                    acquired.ticket.generation()
                ),
            );
        }
        let issued = packet.issued.unwrap_or(ops).min(ops);
        // A copy engine decrements a copy use's signal itself: its packets
        // are the engine's own (no barrier bit, nothing a fence proves).
        let parts: Vec<Publication> = if packet.copy {
            match acquired.publication.copy_engine_packets(first) {
                Some(packets) => packets.collect(),
                None => fail(
                    Check::Unexpected,
                    "a copy-engine use's publication is not a copy engine's",
                )?,
            }
        } else {
            acquired.publication.operations().collect()
        };
        for (k, part) in parts.into_iter().enumerate() {
            let index = part.index();
            let reserved = queue
                .reserve()
                .or_else(|e| fail(Check::Unexpected, format!("reserve failed: {e}")))?;
            assert_eq!(reserved, index, "a stream has one producer");
            if k as u32 >= issued {
                // Work never issued: an empty packet keeps the queue going.
                publish(&queue, part.without_completion(), Work::Kernel(0))?;
                continue;
            }
            // The caller's work, in every shape a runtime builds it: its own
            // dispatch, or a wait as barrier-AND, barrier-OR or AMD's
            // barrier-value packet (each completes as its dependency does).
            let deps = dependency
                .as_ref()
                .map(|(_, handle)| std::slice::from_ref(handle));
            let work = match (deps, index % 3) {
                (None, 0) => Work::Kernel(0),
                (None, _) => {
                    Work::Dispatch(Dispatch::new(0).grid([64, 2, 1]).workgroup([64, 1, 1]))
                }
                (Some(deps), 0) => Work::Wait(deps),
                (Some(deps), 1) => Work::WaitAny(deps),
                // Below 1: done, or failed (a failed producer's signal is
                // negative; "equal to 0" would wait for ever).
                (Some(deps), _) => Work::WaitValue(WaitValue {
                    signal: deps[0],
                    condition: Condition::Less,
                    value: 1,
                    mask: u64::MAX,
                }),
            };
            match work {
                Work::Dispatch(_) => self.coverage.caller_dispatches += 1,
                Work::WaitAny(_) => self.coverage.any_waits += 1,
                Work::WaitValue(_) => self.coverage.value_waits += 1,
                _ => {}
            }
            publish(&queue, part, work)?;
            if !packet.copy {
                self.check_header(&queue, part, request.is_fence(), acquired.signal)?;
            }
        }
        let abandoned = issued < ops;
        if abandoned {
            self.streams[stream]
                .tracker
                .fail_submission(&acquired.ticket, issued)
                .or_else(|e| {
                    fail(
                        Check::Unexpected,
                        format!("failing a submission after {issued} of {ops} operations: {e}"),
                    )
                })?;
        }
        let Some(sim_signal) = self.sim.resolve(hsa_signal_t {
            handle: acquired.signal,
        }) else {
            return fail(
                Check::Unexpected,
                format!("{:#x} is not a signal of the simulator", acquired.signal),
            );
        };
        self.model.uses.push(UseRecord {
            stream,
            ticket: acquired.ticket,
            generation: self.model.generations[stream],
            queue,
            first,
            index: last,
            ops,
            issued,
            abandoned,
            copy: packet.copy,
            fence: request.is_fence() && !abandoned,
            timed: request.is_timed(),
            signal: acquired.signal,
            sim_signal,
            dependency: dependency.map(|(use_id, _)| use_id),
            answered: None,
            settled_truth: Cell::new(None),
        });
        if let Some(observer) = &self.observer {
            observer.watch(self.watched(self.model.uses.len() - 1));
        }
        let c = &mut self.coverage;
        c.uses += 1;
        c.multi_op_uses += u64::from(ops > 1);
        c.copy_uses += u64::from(packet.copy);
        c.failed_submissions += u64::from(abandoned);
        c.partly_issued += u64::from(abandoned && issued > 0);
        Ok(Some(self.model.uses.len() - 1))
    }

    /// A handed-out signal must not be busy: no unfinished use of it, no holder.
    fn check_handout(&self, stream: usize, signal: u64) -> Result<(), Failure> {
        for u in self.model.uses.iter().filter(|u| u.signal == signal) {
            let truth = u.truth();
            // A failed submission's use is done at once, but its signal is
            // busy until the part it issued has finished.
            if !truth.is_done() || !truth.settled {
                return fail(
                    Check::HandedOutBusySignal,
                    format!(
                        "stream {stream} handed out {signal:#x}, still the signal of use {} of stream {}: {}",
                        u.ticket.seq(),
                        u.stream,
                        describe(&truth)
                    ),
                );
            }
        }
        for (use_id, why) in self.held_uses()? {
            if self.model.uses[use_id].signal == signal {
                return fail(
                    Check::RearmWhileHeld,
                    format!(
                        "stream {stream} handed out {signal:#x}, held by the {why} on use {}",
                        self.model.uses[use_id].ticket.seq()
                    ),
                );
            }
        }
        Ok(())
    }

    fn held_uses(&self) -> Result<Vec<(usize, String)>, Failure> {
        let mut consumer_done = Vec::with_capacity(self.model.pins.len());
        for pin in &self.model.pins {
            // A tracker that keeps no host-side record of completions may
            // release a pin once a load showed its consumer complete, and
            // then not say so: for it, the consumer's packet having finished
            // is the condition.
            let done = self.known(pin.consumer)?.is_some()
                || (!T::KIND.remembers_completions()
                    && self.model.uses[pin.consumer].truth().is_done());
            consumer_done.push((pin.consumer, done));
        }
        Ok(self
            .model
            .held_uses(|consumer| consumer_done.iter().any(|&(c, done)| c == consumer && done)))
    }

    /// The packet processor launches and completes the packets of
    /// `use_id`'s queue in order up to the use's last, consuming none (the
    /// read index stays), until the use completed or nothing can move.
    fn run_up_to(&self, use_id: usize) {
        let u = &self.model.uses[use_id];
        for _ in 0..2 * QUEUE_SIZE {
            if u.truth().is_done() {
                return;
            }
            let launched = u.queue.launch().is_ok();
            let oldest = (u.queue.read_index()..=u.index).find(|&index| {
                u.queue
                    .truth(index)
                    .is_some_and(|p| p.launched && !p.is_done())
            });
            let completed = oldest.is_some_and(|index| u.queue.complete(index).is_ok());
            if !launched && !completed {
                return;
            }
        }
    }

    /// Arms `Op::FailAllocations`'s `waiter_meanwhile`: at the next
    /// allocation, the GPU runs and a waiter polls every recent use.
    fn arm_meanwhile(&self) {
        let watched: Vec<_> = (0..self.streams.len())
            .flat_map(|s| {
                let waiter = self.streams[s].tracker.waiter();
                (0..16)
                    .filter_map(|pick| self.model.recent_use(s, pick))
                    .map(move |i| (waiter.clone(), i))
                    .collect::<Vec<_>>()
            })
            .map(|(waiter, i)| (waiter, self.model.uses[i].ticket))
            .collect();
        let sim = self.sim.clone();
        self.sim.on_next_allocation(move || {
            sim.run_until_idle();
            for (waiter, ticket) in &watched {
                // What it learns lands in the tracker's host state; the
                // checks after the step judge it.
                let _ = waiter.status(ticket);
            }
        });
    }

    /// Whether a use of `stream` whose packets finished may have its signal
    /// held: by a reference, or by a pin its consumer's tracker may not
    /// have released yet (a tracker releases a pin when it learns its
    /// consumer done, which may be later than the packet finished).
    fn a_done_use_is_held(&self, stream: usize) -> Result<bool, Failure> {
        let done_here = |use_id: usize| {
            let u = &self.model.uses[use_id];
            u.stream == stream && u.truth().is_done()
        };
        let referenced = self.model.references.iter().any(|r| done_here(r.use_id));
        let pinned = self.model.pins.iter().any(|p| {
            done_here(p.producer)
                && self.streams[self.model.uses[p.consumer].stream]
                    .tracker
                    .census()
                    .pins
                    > 0
        });
        Ok(referenced || pinned)
    }

    /// Checks a back-pressure answer; returns the named use.
    /// `refused_before` is the simulator's count of refused allocations
    /// before the call: a ring that could not grow because one was refused
    /// pushes back below its limit, fairly.
    fn judge_backpressure(
        &mut self,
        stream: usize,
        wait_for: Ticket,
        in_flight: usize,
        refused_before: u64,
    ) -> Result<usize, Failure> {
        self.coverage.backpressure += 1;
        let limit = self.setup.tracker.max_in_flight();
        let could_not_grow = self.sim.allocations_refused() > refused_before;
        if T::KIND.backpressure_only_at_limit() && in_flight != limit && !could_not_grow {
            return fail(
                Check::RingBound,
                format!("back-pressure with {in_flight} uses in flight, below the limit {limit}"),
            );
        }
        let Some(use_id) = self
            .model
            .uses_of(stream)
            .find(|&i| self.model.uses[i].ticket.seq() == wait_for.seq())
        else {
            return fail(
                Check::RingBound,
                format!(
                    "back-pressure names use {}, which this stream never made",
                    wait_for.seq()
                ),
            );
        };
        let u = &self.model.uses[use_id];
        // A failed submission is known failed at once, but its slot frees
        // only when the GPU has finished the part it issued: no ticket
        // names that, so naming the failed use is the best there is.
        let issued_part_running = u.abandoned && !u.truth().settled;
        // Another thread's waiter may learn the use complete between the
        // answer and this check: only a tracker alone is held to it.
        if let Some(status) = self.known(use_id)?
            && !issued_part_running
            && self.observer.is_none()
        {
            return fail(
                Check::RingBound,
                format!(
                    "back-pressure names use {}, already known {status:?}: waiting for it frees nothing",
                    wait_for.seq()
                ),
            );
        }
        Ok(use_id)
    }

    fn hold(&mut self, stream: StreamId, pick: u8, holder: Holder) -> Result<(), Failure> {
        let Some(use_id) = self.model.recent_use(stream.index(), pick) else {
            return Ok(());
        };
        let ticket = self.model.uses[use_id].ticket;
        match self.streams[stream.index()].tracker.hold(&ticket) {
            // Nothing to hold: the tracker says the use is done; it must
            // know which way (complete or failed), and be right.
            Ok(None) => match if T::KIND.remembers_completions() {
                self.known(use_id)?
            } else {
                // It keeps no record: ask again, reading memory.
                Some(
                    self.streams[stream.index()]
                        .tracker
                        .query(&ticket)
                        .or_else(|e| fail(Check::Unexpected, format!("query failed: {e}")))?,
                )
                .filter(|s| s.is_done())
            } {
                Some(status) => self.model.judge_report(use_id, Some(status)),
                None => fail(
                    Check::Unexpected,
                    format!(
                        "hold on use {} returned nothing, but the use is not known done",
                        ticket.seq()
                    ),
                ),
            },
            Ok(Some(reference)) => {
                let u = &self.model.uses[use_id];
                let (truth, value) = (u.truth(), self.sim.load(u.sim_signal));
                if value != expected_value(&truth) {
                    return fail(
                        Check::RearmWhileHeld,
                        format!(
                            "hold on use {} returned a reference to a signal already re-armed \
                             (it holds {value}); its packet: {}",
                            u.ticket.seq(),
                            describe(&truth)
                        ),
                    );
                }
                let id = self.next_reference;
                self.next_reference += 1;
                if let Some(observer) = &self.observer {
                    observer.hold(id, reference.clone(), self.watched(use_id));
                }
                self.model.references.push(HeldReference {
                    id,
                    use_id,
                    holder,
                    reference,
                    answered: None,
                });
                Ok(())
            }
            Err(e) => fail(Check::Unexpected, format!("hold failed: {e}")),
        }
    }

    fn drop_reference(&mut self, holder: Holder, pick: u8) -> Option<HeldReference> {
        let of_holder: Vec<usize> = (0..self.model.references.len())
            .filter(|&i| self.model.references[i].holder == holder)
            .collect();
        if of_holder.is_empty() {
            return None;
        }
        let at = of_holder[usize::from(pick) % of_holder.len()];
        Some(self.remove_reference(at))
    }

    fn run_handler(&mut self, pick: u8) -> Result<(), Failure> {
        let handlers: Vec<usize> = (0..self.model.references.len())
            .filter(|&i| self.model.references[i].holder == Holder::Handler)
            .collect();
        if handlers.is_empty() {
            return Ok(());
        }
        let at = handlers[usize::from(pick) % handlers.len()];
        let held = &self.model.references[at];
        let (use_id, status) = (held.use_id, held.reference.status());
        self.model.judge_answer(use_id, status)?;
        if status.is_done() {
            // The handler processed its use: it lets go.
            self.remove_reference(at);
        }
        Ok(())
    }

    fn pin_across(
        &mut self,
        producer: StreamId,
        pick: u8,
        barrier: bool,
        wrong_consumer: bool,
    ) -> Result<(), Failure> {
        let Some(use_id) = self.model.recent_use(producer.index(), pick) else {
            return Ok(());
        };
        let consumer = producer.other().index();
        let queue = self.current_queue(consumer);
        if queue.write_index() - queue.read_index() >= u64::from(QUEUE_SIZE) {
            return Ok(());
        }
        let ticket = self.model.uses[use_id].ticket;
        let pin = match self.streams[producer.index()].tracker.pin(&ticket) {
            // No dependency: the tracker says the use is complete.
            Ok(None) => return self.model.judge_report(use_id, Some(Status::Complete)),
            Ok(Some(pin)) => pin,
            Err(PinError::Failed { .. }) => {
                // A failed use cannot be waited on: it must be known failed.
                let known = self.known(use_id)?;
                if known != Some(Status::Failed) {
                    return fail(
                        Check::Unexpected,
                        format!(
                            "pin refused use {} as failed, but it is known {known:?}",
                            ticket.seq()
                        ),
                    );
                }
                return Ok(());
            }
            Err(e) => return fail(Check::Unexpected, format!("pin failed: {e}")),
        };
        if pin.packet_handle() != self.model.uses[use_id].signal {
            return fail(
                Check::Unexpected,
                format!(
                    "the pin of use {} names {:#x}, not the use's signal",
                    ticket.seq(),
                    pin.packet_handle()
                ),
            );
        }
        let packet = Packet::single(barrier, Purpose::Completion, false);
        let Some(consumer_id) = self.submit(
            consumer,
            packet,
            Some((use_id, self.model.uses[use_id].signal)),
        )?
        else {
            // No consumer packet was published: the pin drops unused.
            return Ok(());
        };
        let consumer_ticket = self.model.uses[consumer_id].ticket;
        let mut pin = pin;
        if wrong_consumer {
            // The producer's own ticket: not one the consumer issued. The
            // pin must come back, still pinned (the packet waits on it).
            match self.streams[consumer].tracker.attach(&ticket, pin) {
                Err(refused) if refused.error == ForeignTicket => {
                    self.coverage.refused_attaches += 1;
                    pin = refused.pin;
                }
                Err(refused) => {
                    return fail(
                        Check::Unexpected,
                        format!("attach to a foreign ticket failed with {}", refused.error),
                    );
                }
                Ok(()) => {
                    return fail(
                        Check::Unexpected,
                        "attach took a ticket the consumer's tracker never issued",
                    );
                }
            }
            self.check_invariants()?;
        }
        self.streams[consumer]
            .tracker
            .attach(&consumer_ticket, pin)
            .or_else(|e| fail(Check::Unexpected, format!("attach failed: {}", e.error)))?;
        self.model.pins.push(PinRecord {
            producer: use_id,
            consumer: consumer_id,
        });
        self.coverage.pins += 1;
        Ok(())
    }

    fn consumer_passes(&mut self, pick: u8) -> Result<(), Failure> {
        if self.model.pins.is_empty() {
            return Ok(());
        }
        let pin = self.model.pins[usize::from(pick) % self.model.pins.len()];
        let (producer, consumer) = (
            &self.model.uses[pin.producer],
            &self.model.uses[pin.consumer],
        );
        producer.queue.run_until_idle();
        consumer.queue.run_until_idle();
        let (consumer_stream, consumer_ticket) = (consumer.stream, consumer.ticket);
        let status = self.streams[consumer_stream]
            .tracker
            .query(&consumer_ticket)
            .or_else(|e| fail(Check::Unexpected, format!("query failed: {e}")))?;
        self.model.judge_answer(pin.consumer, status)?;
        self.streams[consumer_stream].tracker.reclaim();
        self.streams[1 - consumer_stream].tracker.reclaim();
        Ok(())
    }

    /// Completes one launched packet of the queue (on an in-order queue,
    /// the oldest: nothing else may complete): any packet of a use, the
    /// empty ones that stand in for work never issued included.
    fn complete(&mut self, stream: StreamId, queue: u8, pick: u8) {
        let queue = self.pick_queue(stream, queue);
        self.complete_on(&queue, stream.index(), pick);
    }

    fn complete_on(&self, queue: &Queue, stream: usize, pick: u8) {
        let mut launched: Vec<u64> = self
            .model
            .uses
            .iter()
            .filter(|u| u.queue.id() == queue.id() && u.stream == stream)
            .flat_map(|u| u.first..=u.index)
            .filter(|&index| {
                queue
                    .truth(index)
                    .is_some_and(|packet| packet.launched && !packet.is_done())
            })
            .collect();
        launched.sort_unstable();
        if !queue.config().out_of_order {
            launched.truncate(1);
        }
        if launched.is_empty() {
            return;
        }
        // A barrier waiting on an unfinished dependency is not ready: a
        // normal answer.
        let _ = queue.complete(launched[usize::from(pick) % launched.len()]);
    }

    fn queue_change(&mut self, stream: usize, host_ring: bool) {
        if self.streams[stream].queues.len() >= MAX_GENERATIONS {
            return;
        }
        let ring = if host_ring && self.setup.host_rings {
            RingPlacement::Host
        } else {
            RingPlacement::Device
        };
        let queue = create_queue(&self.sim, &self.setup, self.streams[stream].agent, ring);
        let s = &mut self.streams[stream];
        s.tracker.note_queue_change(queue.clone());
        s.queues.push(queue);
        self.model.generations[stream] += 1;
        if s.tracker.generation().value() == 0 {
            self.coverage.generation_wraps += 1;
        }
    }

    fn drain(&mut self, stream: usize, run_all: bool) -> Result<(), Failure> {
        // A runtime knows a queue idle after waiting for it: run it (and,
        // sometimes, everything else).
        let current = self.current_queue(stream);
        if run_all {
            self.sim.run_until_idle();
        } else {
            current.run_until_idle();
        }
        // Every packet on the current queue finished: each use on it
        // completed, or its submission failed and every packet reserved for
        // it ran. Older generations and the copy engine are not asked.
        let on_current = |u: &UseRecord| u.stream == stream && u.queue.id() == current.id();
        let idle = current.is_idle()
            && self.model.uses.iter().filter(|u| on_current(u)).all(|u| {
                let truth = u.truth();
                truth.completed || (u.abandoned && !truth.queue_error && u.packets_done())
            });
        if !idle {
            // Not idle (stalled, failed or waiting): the drain's contract
            // does not hold, so the runtime would not call it.
            return Ok(());
        }
        let pending_elsewhere = self
            .model
            .uses
            .iter()
            .any(|u| u.stream == stream && !on_current(u) && !u.truth().is_done());
        self.streams[stream].tracker.note_drained();
        self.coverage.drains += 1;
        self.coverage.drains_beside_pending += u64::from(pending_elsewhere);
        // Nothing may be reported complete early: the checks after every
        // step judge every use, the old generations' and the copy engine's
        // included. What the drain must also do:
        let census = self.streams[stream].tracker.census();
        let may_hold = self
            .model
            .pins
            .iter()
            .filter(|p| {
                let consumer = &self.model.uses[p.consumer];
                consumer.stream == stream && !on_current(consumer)
            })
            .count();
        if census.pins > may_hold {
            return fail(
                Check::PinHeldTooLong,
                format!(
                    "stream {stream} keeps {} pins after its queue drained; only {may_hold} have \
                     consumers off the drained queue",
                    census.pins
                ),
            );
        }
        if !T::KIND.retires_on_drain() {
            return Ok(());
        }
        for use_id in self.model.uses_of(stream).collect::<Vec<_>>() {
            if !on_current(&self.model.uses[use_id]) {
                continue;
            }
            let known = self.known(use_id)?;
            let expected = true_status(&self.model.uses[use_id].truth());
            if known != Some(expected) {
                return fail(
                    Check::NotRetiredWhenProven,
                    format!(
                        "use {} is known {known:?} after its queue drained",
                        self.model.uses[use_id].ticket.seq()
                    ),
                );
            }
        }
        Ok(())
    }

    /// Fence probing: if the newest fence of the current generation that
    /// the read index passed has completed, every use of its queue up to it
    /// is retired (complete; failed, for a failed submission). Copy-engine
    /// uses are on another queue: the fence says nothing about them.
    fn poll(&mut self, stream: usize) -> Result<(), Failure> {
        self.streams[stream].tracker.poll();
        if !T::KIND.probes_fences() {
            return Ok(());
        }
        let read_index = self.current_queue(stream).read_index();
        let generation = self.model.generations[stream];
        let in_generation: Vec<usize> = self
            .model
            .uses_of(stream)
            .filter(|&i| {
                let u = &self.model.uses[i];
                u.generation == generation && !u.copy
            })
            .collect();
        let nominated = in_generation.iter().copied().rfind(|&i| {
            let u = &self.model.uses[i];
            u.fence && u.index < read_index
        });
        let Some(fence) = nominated else {
            return Ok(());
        };
        if !self.model.uses[fence].truth().completed {
            return Ok(());
        }
        let fence_index = self.model.uses[fence].index;
        for use_id in in_generation {
            let u = &self.model.uses[use_id];
            if u.index > fence_index {
                break;
            }
            let known = self.known(use_id)?;
            if known != Some(true_status(&u.truth())) {
                return fail(
                    Check::NotRetiredWhenProven,
                    format!(
                        "use {} (index {}) is known {known:?} after a probe: the read index {read_index} \
                         passed fence use {} (index {fence_index}), which completed",
                        u.ticket.seq(),
                        u.index,
                        self.model.uses[fence].ticket.seq()
                    ),
                );
            }
        }
        Ok(())
    }

    fn cpu_wait(&mut self, stream: usize, pick: u8, deadline: Duration) -> Result<(), Failure> {
        let Some(use_id) = self.model.recent_use(stream, pick) else {
            return Ok(());
        };
        let ticket = self.model.uses[use_id].ticket;
        let waiter = self.streams[stream].tracker.waiter();
        match waiter.wait(&ticket, deadline, QUICK_WAIT) {
            Ok(status) => self.model.judge_answer(use_id, status),
            Err(WaitError::TimedOut(_)) => self.model.judge_answer(use_id, Status::Pending),
            Err(e) => fail(Check::Unexpected, format!("wait failed: {e}")),
        }
    }

    fn timestamps(&mut self, stream: usize, pick: u8) -> Result<(), Failure> {
        let Some(use_id) = self.model.recent_use(stream, pick) else {
            return Ok(());
        };
        let ticket = self.model.uses[use_id].ticket;
        let u = &self.model.uses[use_id];
        // Stamps fall out of the history only after that many later timed
        // uses of the same tracker.
        let later_timed = self
            .model
            .uses_of(stream)
            .filter(|&i| self.model.uses[i].timed && self.model.uses[i].ticket.seq() > ticket.seq())
            .count();
        let may_expire = later_timed >= self.setup.tracker.stamp_history;
        let stamps = match self.streams[stream].tracker.timestamps(&ticket) {
            Ok(stamps) => stamps,
            Err(TimestampsError::Expired { .. }) if u.timed && may_expire => return Ok(()),
            Err(e) => return fail(Check::Timestamps, format!("use {}: {e}", ticket.seq())),
        };
        match stamps {
            Some(_) if !u.timed => fail(
                Check::Timestamps,
                format!("untimed use {} answered with timestamps", ticket.seq()),
            ),
            Some(stamps) => self.model.judge_timestamps(use_id, stamps),
            None => {
                // The call proves completion itself (a load at most), and
                // harvested stamps belong to the use: a timed use that
                // completed has them, whatever its signal served since. A
                // use reported failed has none (a false failure is a known
                // bug the model judged already).
                let failed = u.answered == Some(Status::Failed);
                if u.timed && u.truth().completed && !failed {
                    return fail(
                        Check::Timestamps,
                        format!(
                            "completed, timed use {} has no timestamps ({later_timed} later timed uses)",
                            u.ticket.seq()
                        ),
                    );
                }
                Ok(())
            }
        }
    }

    /// Every invariant that holds after any step.
    fn check_invariants(&mut self) -> Result<(), Failure> {
        self.check_simulator()?;
        for use_id in 0..self.model.uses.len() {
            let known = self.known(use_id)?;
            self.model.judge_report(use_id, known)?;
        }
        for (use_id, why) in self.held_uses()? {
            let u = &self.model.uses[use_id];
            let truth = u.truth();
            let value = self.sim.load(u.sim_signal);
            if value != expected_value(&truth) {
                return fail(
                    Check::RearmWhileHeld,
                    format!(
                        "the signal of use {} (stream {}) holds {value} under the {why}; its packet: {}",
                        u.ticket.seq(),
                        u.stream,
                        describe(&truth)
                    ),
                );
            }
        }
        for i in 0..self.model.references.len() {
            self.model.judge_reference(i)?;
            let held = &self.model.references[i];
            let (use_id, stamps) = (held.use_id, held.reference.timestamps());
            if let Some(stamps) = stamps {
                self.model.judge_timestamps(use_id, stamps)?;
            }
        }
        for (s, stream) in self.streams.iter().enumerate() {
            let limit = self.setup.tracker.max_in_flight();
            crate::check::census(&stream.tracker.census(), limit).map_err(|f| Failure {
                detail: format!("stream {s}: {}", f.detail),
                ..f
            })?;
            let timed = self
                .model
                .uses_of(s)
                .filter(|&i| self.model.uses[i].timed)
                .count() as u64;
            let harvests = stream.tracker.stats().harvests;
            if harvests > timed {
                return fail(
                    Check::Timestamps,
                    format!("stream {s}: {harvests} harvests for {timed} timed uses (once each)"),
                );
            }
        }
        Ok(())
    }

    /// The packet the machine received for a use is the one the tracker
    /// recorded: its barrier bit the request's, its completion signal the
    /// use's ([`Check::HeaderMismatch`]).
    fn check_header(
        &self,
        queue: &Queue,
        part: Publication,
        fence: bool,
        signal: u64,
    ) -> Result<(), Failure> {
        let Some(truth) = queue.truth(part.index()) else {
            return fail(
                Check::Unexpected,
                format!("packet {} has no truth", part.index()),
            );
        };
        if truth.barrier != fence || truth.completion_signal.handle != signal {
            return fail(
                Check::HeaderMismatch,
                format!(
                    "packet {} was published with barrier {} and completion {:#x}; the tracker \
                     recorded barrier {fence} and signal {signal:#x}",
                    part.index(),
                    truth.barrier,
                    truth.completion_signal.handle
                ),
            );
        }
        Ok(())
    }

    fn check_simulator(&self) -> Result<(), Failure> {
        // Taken, so each violation is judged once.
        let violations = self.sim.take_violations();
        let Some(first) = violations.first() else {
            return Ok(());
        };
        fail(
            Check::of_simulator(first),
            format!("the simulator saw: {violations:?}"),
        )
    }
}

/// A stream's copy engine: an in-order, profiled queue with its ring in
/// system memory (device-memory signals need an HDP flush before it reads
/// them).
fn create_copy_engine(sim: &Sim, agent: AgentId) -> Queue {
    sim.create_queue(SimQueueConfig {
        agent,
        size: QUEUE_SIZE,
        ring: RingPlacement::Host,
        profiling: true,
        out_of_order: false,
        truth_history: TRUTH_HISTORY,
    })
    .expect("a valid queue configuration")
}

fn create_queue(sim: &Sim, setup: &Setup, agent: AgentId, ring: RingPlacement) -> Queue {
    sim.create_queue(SimQueueConfig {
        agent,
        size: QUEUE_SIZE,
        ring,
        profiling: true,
        out_of_order: setup.out_of_order,
        truth_history: TRUTH_HISTORY,
    })
    .expect("a valid queue configuration")
}

/// Publishes `work` as `part` says (a backend's refusal is a failure).
fn publish(queue: &Queue, part: Publication, work: Work<'_>) -> Result<(), Failure> {
    queue
        .publish(part, work)
        .or_else(|e| fail(Check::Unexpected, format!("publication refused: {e}")))
}

/// What a submission asks for, besides its AQL index (the queue's write index).
#[derive(Clone, Copy, Debug)]
struct Packet {
    barrier: bool,
    purpose: Purpose,
    timed: bool,
    /// Operations that decrement the signal, one packet each.
    ops: u32,
    /// On the stream's copy engine.
    copy: bool,
    /// The submission fails after issuing this many operations (fewer than
    /// `ops`); `None`: all are issued.
    issued: Option<u32>,
}

impl Packet {
    /// One fully issued packet on the AQL queue.
    fn single(barrier: bool, purpose: Purpose, timed: bool) -> Self {
        Self {
            barrier,
            purpose,
            timed,
            ops: 1,
            copy: false,
            issued: None,
        }
    }
}
