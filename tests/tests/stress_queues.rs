//! Stress on the queue layer (docs/design.md section 6, hip-tests' event-overflow
//! scenario, through `fences` rather than bare trackers): 4 threads over 12
//! queues of one device on the threaded simulator, for a bounded time.
//!
//! Each thread picks queues and operations from its own seeded generator
//! (the choices are reproducible; the interleavings are the scheduler's):
//! launch empty work or a short timed kernel (sometimes waiting for that
//! command alone), record an event, query events (its own and other
//! threads'), synchronize an event, synchronize or query a queue, make a
//! queue wait on the GPU for another queue's event (or, one time in five,
//! for everything the other queue was given), and take the elapsed time
//! between two completed events of one queue. Events are kept for a while,
//! passed to other threads through a shared pool and dropped later (by
//! whichever thread lets go last), so their signals are held while the
//! trackers cycle their rings: parking and returns happen by the ten
//! thousand. The queues differ: signals in host or device memory (fences
//! before publication), rings small or tiny (back-pressure), batch limits
//! default or tiny (closed batches on the completion thread), waits that
//! spin or block.
//!
//! Checks along the way, against the simulator's ground truth:
//! - an event or command reported complete really completed (`Queue::truth`);
//! - an event once reported complete never reads pending again (its signal
//!   was not re-armed while held);
//! - after a successful event synchronize the event queries complete, and
//!   its timestamps equal the ground truth;
//! - after a successful queue synchronize every command and event this
//!   thread submitted to the queue before it is complete;
//! - a cross-queue wait's packets never complete before the producer's
//!   event did, and a wait elided as "already complete" was;
//! - elapsed times: the stop event ends no earlier than the start event, and
//!   `elapsed_to` equals the stamps' difference;
//! - the simulator records no violation (the watchdog looks every 10 ms).
//!
//! A watchdog (the test's main thread) fails the test if any thread makes no
//! progress for more than a second, naming the thread, the operation, the
//! queue and how long. Every queue wait is bounded (`wait_timeout`), and
//! threads that still do not return are abandoned with a clear failure, so
//! the test ends even on a deadlock. At the end: every queue synchronized,
//! every event dropped, and every tracker's census balanced with nothing
//! parked and nothing in flight.
//!
//! Knobs (environment): `STRESS_QUEUES_SEED` (an integer) replays other
//! choices; `STRESS_QUEUES_MS` runs longer or shorter;
//! `STRESS_QUEUES_PROFILE=mi300x` uses the MI300X cost profile instead of the
//! zero one; `STRESS_QUEUES_HANG=1` plants a kernel that never completes on
//! queue 0, to watch the watchdog fail the test (and the test end). The
//! summary line (operations per kind, longest single call, paths taken) goes
//! to stderr: see it with `--nocapture`.

use sigretire_queue::sim::{QUEUE_SIZE, SimPlatform, SimTracker};
use sigretire_queue::{
    BatchLimits, Command, CommandStatus, CrossWait, DeviceConfig, Event, HostQueue, QueueConfig,
};
use sigretire_sim::backend::SimMemory;
use sigretire_sim::{CostProfile, Kernel};
use sigretire_tracker::{Census, Config, Placement, Status, Timestamps, Tracker, WaitPolicy};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const THREADS: usize = 4;
const QUEUES: usize = 12;
/// How long the threads run (debug build; CI has 2 cores).
const RUN_FOR: Duration = Duration::from_secs(2);
/// No thread may go this long without finishing an operation.
const STUCK_AFTER: Duration = Duration::from_secs(1);
/// Every queue-layer wait gives up after this (a lost completion becomes
/// an error, not a hang). Longer than `STUCK_AFTER`, so the watchdog speaks
/// first and says what the thread was doing.
const WAIT_TIMEOUT: Duration = Duration::from_millis(1500);
/// After the stop, threads must return within this (every wait is bounded
/// by `WAIT_TIMEOUT`); one that does not is stuck outside any bounded wait.
const JOIN_LIMIT: Duration = Duration::from_secs(4);
/// Events a thread keeps before it lets one go.
const HELD: usize = 24;
/// Slots of the pool through which threads share events.
const POOL: usize = 32;
/// Commands and cross-queue waits a thread remembers for later checks.
const REMEMBERED: usize = 32;
/// The default seed (`STRESS_QUEUES_SEED` overrides it).
const SEED: u64 = 0x5EED_0004;
/// GPU timestamp period of the device (the simulator's tick).
const TICK: Duration = Duration::from_nanos(10);

type Ev = Event<SimTracker>;
type Queue = HostQueue<SimTracker>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Launch,
    Record,
    QueryEvent,
    SyncEvent,
    SyncQueue,
    QueryQueue,
    WaitEvent,
    Elapsed,
    DropEvent,
}

const KINDS: usize = 9;
const ALL: [Op; KINDS] = [
    Op::Launch,
    Op::Record,
    Op::QueryEvent,
    Op::SyncEvent,
    Op::SyncQueue,
    Op::QueryQueue,
    Op::WaitEvent,
    Op::Elapsed,
    Op::DropEvent,
];

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Launch => "launch",
            Op::Record => "record",
            Op::QueryEvent => "query-event",
            Op::SyncEvent => "sync-event",
            Op::SyncQueue => "sync-queue",
            Op::QueryQueue => "query-queue",
            Op::WaitEvent => "wait-event",
            Op::Elapsed => "elapsed",
            Op::DropEvent => "drop-event",
        }
    }

    /// The mix, in percent.
    fn pick(roll: usize) -> Op {
        match roll {
            0..=19 => Op::Launch,
            20..=37 => Op::Record,
            38..=53 => Op::QueryEvent,
            54..=61 => Op::SyncEvent,
            62..=68 => Op::SyncQueue,
            69..=74 => Op::QueryQueue,
            75..=85 => Op::WaitEvent,
            86..=92 => Op::Elapsed,
            _ => Op::DropEvent,
        }
    }
}

/// splitmix64: small, seedable, good enough to pick operations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// What a thread publishes for the watchdog.
#[derive(Default)]
struct Heartbeat {
    /// Operations completed.
    ops: AtomicU64,
    /// When the last one completed (or the thread started), in nanoseconds
    /// since the test's epoch.
    at_ns: AtomicU64,
    /// What it is doing now: `op | queue << 8 | (other queue + 1) << 16`.
    doing: AtomicU64,
    /// The thread returned (the watchdog stops watching it).
    done: AtomicBool,
}

impl Heartbeat {
    fn begin(&self, op: Op, queue: usize, other: Option<usize>) {
        let other = other.map_or(0, |o| o as u64 + 1);
        self.doing.store(
            op as u64 | (queue as u64) << 8 | other << 16,
            Ordering::Relaxed,
        );
    }

    fn describe(&self) -> String {
        let doing = self.doing.load(Ordering::Relaxed);
        let op = ALL[(doing & 0xff) as usize];
        let queue = (doing >> 8) & 0xff;
        let ops = self.ops.load(Ordering::Relaxed);
        match doing >> 16 {
            0 => format!("{} on queue {queue} (after {ops} operations)", op.name()),
            other => format!(
                "{} on queue {queue} with queue {} (after {ops} operations)",
                op.name(),
                other - 1
            ),
        }
    }
}

/// An event in the shared pool, or held by a thread.
#[derive(Clone)]
struct Shared {
    queue: usize,
    event: Arc<Ev>,
}

/// Everything the threads share.
struct World {
    queues: Vec<Queue>,
    /// The hardware queue under each host queue: the ground truth.
    hardware: Vec<sigretire_sim::Queue>,
    /// Registered `Kernel::Duration` kernels.
    kernels: [u64; 3],
    /// `STRESS_QUEUES_HANG`: a kernel that never completes (it spins on a
    /// flag nobody sets), which thread 0 launches once on queue 0.
    hang: Option<u64>,
    pool: Vec<Mutex<Option<Shared>>>,
    stop: AtomicBool,
    epoch: Instant,
    beats: Vec<Heartbeat>,
}

impl World {
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// A copy of pool slot `slot`'s event (the lock is held only to clone).
    fn shared(&self, slot: usize) -> Option<Shared> {
        self.pool[slot].lock().unwrap().clone()
    }

    /// Puts `event` in `slot`; the event it replaces is let go here, after
    /// the slot's lock is released. Returns whether there was one.
    fn deposit(&self, slot: usize, event: Option<Shared>) -> bool {
        let old = std::mem::replace(&mut *self.pool[slot].lock().unwrap(), event);
        old.is_some()
    }
}

/// An event a thread holds, and whether it has seen it complete.
struct Held {
    shared: Shared,
    seen_complete: bool,
}

/// A command a thread launched.
struct Launched {
    queue: usize,
    command: Command<SimMemory>,
}

/// A cross-queue wait: the consumer's packets and a command after them.
struct Waited {
    consumer: usize,
    wait: CrossWait<SimMemory>,
    after: Command<SimMemory>,
    producer: Shared,
}

/// What a thread counted.
#[derive(Clone, Default)]
struct Tally {
    count: [u64; KINDS],
    longest: [Duration; KINDS],
    /// Completions confirmed against the ground truth.
    truth_checks: u64,
    /// Truth no longer kept (left the history window): not checkable.
    truth_gone: u64,
    /// Cross-queue waits that emitted a dependency / that were elided.
    dependencies: u64,
    elided: u64,
    /// Elapsed-time pairs measured, and the longest.
    elapsed_pairs: u64,
    elapsed_max: Duration,
    /// Event references this thread let go of (its own, or the pool's).
    drops: u64,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        for k in 0..KINDS {
            self.count[k] += other.count[k];
            self.longest[k] = self.longest[k].max(other.longest[k]);
        }
        self.truth_checks += other.truth_checks;
        self.truth_gone += other.truth_gone;
        self.dependencies += other.dependencies;
        self.elided += other.elided;
        self.elapsed_pairs += other.elapsed_pairs;
        self.elapsed_max = self.elapsed_max.max(other.elapsed_max);
        self.drops += other.drops;
    }
}

/// What a thread hands back when it stops: its counts, and the events and
/// commands it still holds (dropped only after every queue synchronized).
struct Out {
    tally: Tally,
    held: Vec<Held>,
    launched: Vec<Launched>,
    waited: Vec<Waited>,
}

impl Out {
    /// Drops what the thread still held; returns how many events that was.
    fn let_go(self) -> usize {
        let events = self.held.len();
        drop((self.held, self.launched, self.waited));
        events
    }
}

/// One thread's state while it runs.
struct Worker<'w> {
    world: &'w World,
    rng: Rng,
    tally: Tally,
    held: Vec<Held>,
    launched: Vec<Launched>,
    waited: Vec<Waited>,
}

type Checked = Result<(), String>;

impl<'w> Worker<'w> {
    /// Packet `index` of `queue` really completed (if the simulator still
    /// knows it); returns its truth.
    fn truly_complete(
        &mut self,
        queue: usize,
        index: u64,
        what: &str,
    ) -> Result<Option<sigretire_sim::PacketTruth>, String> {
        match self.world.hardware[queue].truth(index) {
            Some(truth) if truth.completed => {
                self.tally.truth_checks += 1;
                Ok(Some(truth))
            }
            Some(truth) => Err(format!(
                "{what} (queue {queue}, AQL index {index}) reported complete, but the simulator says {truth:?}"
            )),
            None => {
                self.tally.truth_gone += 1;
                Ok(None)
            }
        }
    }

    /// An event reported complete: true, and its stamps match the truth.
    fn event_complete(&mut self, shared: &Shared, what: &str) -> Checked {
        let truth = self.truly_complete(shared.queue, shared.event.aql_index().unwrap(), what)?;
        let stamps = shared
            .event
            .timestamps()
            .map_err(|e| format!("{what}: timestamps of a complete event: {e}"))?;
        if stamps.start > stamps.end {
            return Err(format!("{what}: stamps run backwards: {stamps:?}"));
        }
        if let Some(truth) = truth
            && (truth.start_ts, truth.end_ts) != (Some(stamps.start), Some(stamps.end))
        {
            return Err(format!(
                "{what}: timestamps {stamps:?} differ from the ground truth ({:?}, {:?})",
                truth.start_ts, truth.end_ts
            ));
        }
        Ok(())
    }

    fn pick_shared(&mut self) -> Option<Shared> {
        let slot = self.rng.below(POOL);
        self.world.shared(slot)
    }

    /// Another thread's event (from the pool) or one of this thread's own.
    fn pick_any(&mut self) -> Option<Shared> {
        if self.rng.below(2) == 0 && !self.held.is_empty() {
            let i = self.rng.below(self.held.len());
            Some(self.held[i].shared.clone())
        } else {
            self.pick_shared()
        }
    }

    /// A producer event for a cross-queue wait on `q` (often this thread's
    /// newest, likely still pending), and the consumer queue: `q`, or
    /// another queue if the event is on `q`.
    fn pick_producer(&mut self, q: usize) -> (usize, Option<Shared>) {
        let producer = match self.held.last() {
            Some(newest) if self.rng.below(2) == 0 => Some(newest.shared.clone()),
            _ => self.pick_any(),
        };
        match producer {
            Some(p) if p.queue == q => ((q + 1 + self.rng.below(QUEUES - 1)) % QUEUES, Some(p)),
            other => (q, other),
        }
    }

    fn remember_launch(&mut self, queue: usize, command: Command<SimMemory>) {
        if self.launched.len() >= REMEMBERED {
            self.launched.swap_remove(self.rng.below(REMEMBERED));
        }
        self.launched.push(Launched { queue, command });
    }

    fn launch(&mut self, q: usize) -> Checked {
        let queue = &self.world.queues[q];
        let command = match self.rng.below(2) {
            0 => queue.launch_empty(),
            _ => queue.launch(self.world.kernels[self.rng.below(3)]),
        }
        .map_err(|e| e.to_string())?;
        if self.rng.below(8) == 0 {
            // Wait for this command alone (no queue synchronize).
            command.wait().map_err(|e| format!("command wait: {e}"))?;
            if command.status() != CommandStatus::Complete {
                return Err(format!("a waited command is {:?}", command.status()));
            }
            self.truly_complete(q, command.aql_index(), "a waited command")?;
        }
        self.remember_launch(q, command);
        Ok(())
    }

    fn record(&mut self, q: usize) -> Checked {
        let event = self.world.queues[q]
            .record_event()
            .map_err(|e| e.to_string())?;
        if !event.is_timed() {
            return Err("an event of a profiled queue is not timed".into());
        }
        let shared = Shared {
            queue: q,
            event: Arc::new(event),
        };
        // Sometimes share it at once: both this thread and the pool hold it.
        if self.rng.below(4) == 0 {
            let slot = self.rng.below(POOL);
            self.tally.drops += u64::from(self.world.deposit(slot, Some(shared.clone())));
        }
        self.held.push(Held {
            shared,
            seen_complete: false,
        });
        if self.held.len() > HELD {
            // Let an old one go: to the pool (another thread may drop it
            // last), or dropped here. (`remove` keeps the newest last.)
            let gone = self.held.remove(self.rng.below(HELD));
            if self.rng.below(2) == 0 {
                let slot = self.rng.below(POOL);
                self.tally.drops += u64::from(self.world.deposit(slot, Some(gone.shared)));
            } else {
                self.tally.drops += 1;
            }
        }
        Ok(())
    }

    fn query_event(&mut self) -> Checked {
        if self.rng.below(2) == 0 && !self.held.is_empty() {
            let i = self.rng.below(self.held.len());
            let shared = self.held[i].shared.clone();
            match shared.event.query() {
                Status::Complete => {
                    self.held[i].seen_complete = true;
                    self.event_complete(&shared, "an own event")?;
                }
                Status::Pending if self.held[i].seen_complete => {
                    return Err(format!(
                        "own event (queue {}, AQL index {}) was complete and now reads pending: its signal was re-armed while held",
                        shared.queue,
                        shared.event.aql_index().unwrap()
                    ));
                }
                Status::Pending => {}
                Status::Failed => return Err("an own event failed".into()),
            }
        } else if let Some(shared) = self.pick_shared() {
            match shared.event.query() {
                Status::Complete => self.event_complete(&shared, "a shared event")?,
                Status::Pending => {}
                Status::Failed => return Err("a shared event failed".into()),
            }
        }
        // And one remembered cross-queue wait: nothing after it may have
        // completed before the producer's event did.
        if !self.waited.is_empty() {
            let i = self.rng.below(self.waited.len());
            let (consumer, producer) = (self.waited[i].consumer, self.waited[i].producer.clone());
            let after_done = self.waited[i].after.status() == CommandStatus::Complete;
            let waits_done = self.waited[i]
                .wait
                .commands()
                .iter()
                .any(|c| c.status() == CommandStatus::Complete);
            if after_done || waits_done {
                self.truly_complete(
                    producer.queue,
                    producer.event.aql_index().unwrap(),
                    &format!("the producer of a completed wait on queue {consumer}"),
                )?;
            }
        }
        Ok(())
    }

    fn sync_event(&mut self) -> Checked {
        let Some(shared) = self.pick_any() else {
            return Ok(());
        };
        shared.event.synchronize().map_err(|e| e.to_string())?;
        match shared.event.query() {
            Status::Complete => {}
            status => return Err(format!("a synchronized event queries {status:?}")),
        }
        self.event_complete(&shared, "a synchronized event")
    }

    fn sync_queue(&mut self, q: usize) -> Checked {
        self.world.queues[q]
            .synchronize()
            .map_err(|e| e.to_string())?;
        // Everything this thread submitted to q before is complete.
        let launched: Vec<(u64, CommandStatus)> = self
            .launched
            .iter()
            .filter(|l| l.queue == q)
            .map(|l| (l.command.aql_index(), l.command.status()))
            .collect();
        for (index, status) in launched {
            if status != CommandStatus::Complete {
                return Err(format!(
                    "after synchronize, a command launched before it (AQL index {index}) is {status:?}"
                ));
            }
            self.truly_complete(q, index, "a command before a synchronize")?;
        }
        for i in 0..self.held.len() {
            if self.held[i].shared.queue != q {
                continue;
            }
            let shared = self.held[i].shared.clone();
            match shared.event.query() {
                Status::Complete => self.held[i].seen_complete = true,
                status => {
                    return Err(format!(
                        "after synchronize, an event recorded before it (AQL index {}) queries {status:?}",
                        shared.event.aql_index().unwrap()
                    ));
                }
            }
            self.event_complete(&shared, "an event before a synchronize")?;
        }
        Ok(())
    }

    fn query_queue(&mut self, q: usize) -> Checked {
        match self.world.queues[q].query().map_err(|e| e.to_string())? {
            Status::Complete => {
                let indices: Vec<u64> = self
                    .launched
                    .iter()
                    .filter(|l| l.queue == q)
                    .map(|l| l.command.aql_index())
                    .collect();
                for index in indices {
                    self.truly_complete(q, index, "a command of a queue that queries complete")?;
                }
                Ok(())
            }
            Status::Pending => Ok(()),
            Status::Failed => Err("the queue failed".into()),
        }
    }

    fn wait_event(&mut self, q: usize, producer: &Shared) -> Checked {
        let queue = &self.world.queues[q];
        // Mostly hipStreamWaitEvent; sometimes a wait for everything the
        // producer's queue was given so far (which covers the event).
        let wait = if self.rng.below(5) == 0 {
            queue.wait_queue(&self.world.queues[producer.queue])
        } else {
            queue.wait_event(&producer.event)
        }
        .map_err(|e| e.to_string())?;
        let after = queue.launch_empty().map_err(|e| e.to_string())?;
        if wait.dependencies() + wait.elided() != 1 {
            return Err(format!("one event, but {wait:?}"));
        }
        if wait.elided() == 1 {
            // Elided only when already known complete.
            self.tally.elided += 1;
            self.truly_complete(
                producer.queue,
                producer.event.aql_index().unwrap(),
                "an event a wait elided as complete",
            )?;
        } else {
            self.tally.dependencies += 1;
        }
        if self.waited.len() >= REMEMBERED {
            self.waited.swap_remove(self.rng.below(REMEMBERED));
        }
        self.waited.push(Waited {
            consumer: q,
            wait,
            after,
            producer: producer.clone(),
        });
        Ok(())
    }

    /// Two events of queue `q`, older first: synchronize the newer, then
    /// the elapsed time between them.
    fn elapsed(&mut self, q: usize) -> Checked {
        let mut mine: Vec<&Held> = self.held.iter().filter(|h| h.shared.queue == q).collect();
        if mine.len() < 2 {
            return Ok(());
        }
        let a = self.rng.below(mine.len());
        let b = (a + 1 + self.rng.below(mine.len() - 1)) % mine.len();
        let (mut start, mut stop) = (mine.swap_remove(a.max(b)), mine.swap_remove(a.min(b)));
        if start.shared.event.seq() > stop.shared.event.seq() {
            std::mem::swap(&mut start, &mut stop);
        }
        let (start, stop) = (start.shared.clone(), stop.shared.clone());
        stop.event.synchronize().map_err(|e| e.to_string())?;
        if start.event.query() != Status::Complete {
            return Err("the older event of a synchronized pair is not complete".into());
        }
        let elapsed = start
            .event
            .elapsed_to(&stop.event)
            .map_err(|e| e.to_string())?;
        let (a, b): (Timestamps, Timestamps) = (
            start.event.timestamps().map_err(|e| e.to_string())?,
            stop.event.timestamps().map_err(|e| e.to_string())?,
        );
        if b.end < a.end {
            return Err(format!(
                "negative elapsed time: stop event ended at {} before start event at {}",
                b.end, a.end
            ));
        }
        let expected = TICK * u32::try_from(b.end - a.end).map_err(|e| e.to_string())?;
        if elapsed != expected {
            return Err(format!(
                "elapsed_to gave {elapsed:?}; the stamps say {expected:?}"
            ));
        }
        self.event_complete(&start, "the start of an elapsed pair")?;
        self.event_complete(&stop, "the stop of an elapsed pair")?;
        self.tally.elapsed_pairs += 1;
        self.tally.elapsed_max = self.tally.elapsed_max.max(elapsed);
        Ok(())
    }

    fn drop_event(&mut self) {
        if self.rng.below(2) == 0 && !self.held.is_empty() {
            let i = self.rng.below(self.held.len());
            drop(self.held.remove(i));
            self.tally.drops += 1;
        } else {
            let slot = self.rng.below(POOL);
            self.tally.drops += u64::from(self.world.deposit(slot, None));
        }
    }
}

fn run_worker(world: &World, t: usize, seed: u64) -> Result<Out, String> {
    let beat = &world.beats[t];
    let mut w = Worker {
        world,
        rng: Rng(seed),
        tally: Tally::default(),
        held: Vec::new(),
        launched: Vec::new(),
        waited: Vec::new(),
    };
    let mut n = 0u64;
    while !world.stop.load(Ordering::Relaxed) {
        let q = w.rng.below(QUEUES);
        let op = Op::pick(w.rng.below(100));
        if t == 0
            && n == 100
            && let Some(hang) = world.hang
        {
            // The planted hang: everything after it on queue 0 waits
            // forever; the watchdog must say so, and the test must end.
            world.queues[0].launch(hang).map_err(|e| e.to_string())?;
        }
        // A cross-queue wait: the producer's event is on another queue.
        let (q, producer) = match op {
            Op::WaitEvent => w.pick_producer(q),
            _ => (q, None),
        };
        beat.begin(op, q, producer.as_ref().map(|p| p.queue));
        let started = Instant::now();
        let result = match op {
            Op::Launch => w.launch(q),
            Op::Record => w.record(q),
            Op::QueryEvent => w.query_event(),
            Op::SyncEvent => w.sync_event(),
            Op::SyncQueue => w.sync_queue(q),
            Op::QueryQueue => w.query_queue(q),
            Op::WaitEvent => match &producer {
                Some(p) => w.wait_event(q, p),
                None => Ok(()),
            },
            Op::Elapsed => w.elapsed(q),
            Op::DropEvent => {
                w.drop_event();
                Ok(())
            }
        };
        let took = started.elapsed();
        result.map_err(|e| {
            format!(
                "thread {t}, operation {n} ({}) after {took:?}: {e}",
                beat.describe()
            )
        })?;
        let k = op as usize;
        w.tally.count[k] += 1;
        w.tally.longest[k] = w.tally.longest[k].max(took);
        n += 1;
        beat.ops.store(n, Ordering::Relaxed);
        beat.at_ns.store(world.now_ns(), Ordering::Relaxed);
    }
    Ok(Out {
        tally: w.tally,
        held: w.held,
        launched: w.launched,
        waited: w.waited,
    })
}

/// The queues' configuration: bounded waits; spinning or blocking waits;
/// every third queue closes its submission batches early (so closed batches
/// go to the completion thread between synchronizes).
fn queue_config(i: usize) -> QueueConfig {
    QueueConfig {
        wait_timeout: Some(WAIT_TIMEOUT),
        batch_limits: if i % 3 == 2 {
            BatchLimits {
                host_signals: 12,
                device_signals: 6,
            }
        } else {
            BatchLimits::default()
        },
        wait_policy: if (i / 2).is_multiple_of(2) {
            WaitPolicy::spin()
        } else {
            WaitPolicy::blocking()
        },
        ..QueueConfig::default()
    }
}

/// Small rings, so signals cycle (re-arm, park, back-pressure) within the
/// run (every fourth queue a tiny one); odd queues keep their signals in
/// device memory.
fn tracker_config(i: usize) -> Config {
    let (initial_size, growth_limit) = if i % 4 == 3 { (4, 2) } else { (16, 4) };
    Config {
        initial_size,
        growth_limit,
        signals: if i % 2 == 1 {
            Placement::Device
        } else {
            Placement::Host
        },
        ..Config::default()
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn four_threads_over_twelve_queues_of_the_queue_layer_keep_moving_and_lose_no_signal() {
    let seed = env_u64("STRESS_QUEUES_SEED").unwrap_or(SEED);
    let run_for = env_u64("STRESS_QUEUES_MS").map_or(RUN_FOR, Duration::from_millis);
    let profile = match std::env::var("STRESS_QUEUES_PROFILE").as_deref() {
        Ok("mi300x") => CostProfile::mi300x(),
        _ => CostProfile::zero(),
    };
    let profile_name = if profile == CostProfile::zero() {
        "zero"
    } else {
        "mi300x"
    };
    let platform =
        SimPlatform::threaded(profile).with_sim_queue_config(sigretire_sim::SimQueueConfig {
            size: QUEUE_SIZE,
            profiling: true,
            truth_history: 1 << 15,
            ..sigretire_sim::SimQueueConfig::default()
        });
    let device = platform
        .clone()
        .with_tracker_config(tracker_config(0))
        .device(DeviceConfig::default(), queue_config(0))
        .unwrap();
    let mut queues = vec![device.default_queue().clone()];
    for i in 1..QUEUES {
        let on = platform.clone().with_tracker_config(tracker_config(i));
        queues.push(on.create_queue(&device, queue_config(i)).unwrap());
    }
    let hardware = queues
        .iter()
        .map(|q| q.with_tracker(|t| t.queue().clone()))
        .collect();
    let sim = platform.sim().clone();
    let kernels =
        [2, 10, 40].map(|us| sim.register_kernel(Kernel::Duration(Duration::from_micros(us))));
    let world = Arc::new(World {
        queues,
        hardware,
        kernels,
        hang: std::env::var_os("STRESS_QUEUES_HANG")
            .map(|_| sim.register_kernel(Kernel::SpinUntil(sigretire_sim::HostFlag::new()))),
        pool: (0..POOL).map(|_| Mutex::new(None)).collect(),
        stop: AtomicBool::new(false),
        epoch: Instant::now(),
        beats: (0..THREADS).map(|_| Heartbeat::default()).collect(),
    });
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();

    let workers: Vec<JoinHandle<Option<Out>>> = (0..THREADS)
        .map(|t| {
            let (world, errors) = (world.clone(), errors.clone());
            world.beats[t]
                .at_ns
                .store(world.now_ns(), Ordering::Relaxed);
            std::thread::Builder::new()
                .name(format!("stress-queues-{t}"))
                .spawn(move || {
                    let thread_seed = seed ^ (t as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F);
                    let result = run_worker(&world, t, thread_seed);
                    world.beats[t].done.store(true, Ordering::Relaxed);
                    match result {
                        Ok(out) => Some(out),
                        Err(e) => {
                            errors.lock().unwrap().push(e);
                            world.stop.store(true, Ordering::Relaxed);
                            None
                        }
                    }
                })
                .unwrap()
        })
        .collect();

    // The watchdog: progress of every thread, and the simulator's oracle.
    let mut alarm: Option<String> = None;
    while !world.stop.load(Ordering::Relaxed) && world.epoch.elapsed() < run_for {
        std::thread::sleep(Duration::from_millis(10));
        let now = world.now_ns();
        for (t, beat) in world.beats.iter().enumerate() {
            let idle = Duration::from_nanos(now.saturating_sub(beat.at_ns.load(Ordering::Relaxed)));
            if !beat.done.load(Ordering::Relaxed) && idle > STUCK_AFTER {
                alarm.get_or_insert(format!(
                    "watchdog: thread {t} made no progress for {idle:?}, inside {}",
                    beat.describe()
                ));
            }
        }
        let violations = sim.violations();
        if !violations.is_empty() {
            alarm.get_or_insert(format!("the simulator saw violations: {violations:?}"));
        }
        if alarm.is_some() {
            break;
        }
    }
    world.stop.store(true, Ordering::Relaxed);
    let ran = world.epoch.elapsed();

    // Stop: every thread must return (each wait is bounded); one that does
    // not is stuck where no timeout reaches, and is abandoned.
    let stopped = Instant::now();
    while workers.iter().any(|w| !w.is_finished()) && stopped.elapsed() < JOIN_LIMIT {
        std::thread::sleep(Duration::from_millis(5));
    }
    let stuck: Vec<String> = workers
        .iter()
        .enumerate()
        .filter(|(_, w)| !w.is_finished())
        .map(|(t, _)| {
            format!(
                "thread {t} never returned from {}",
                world.beats[t].describe()
            )
        })
        .collect();
    if !stuck.is_empty() {
        // Not joined: the threads are left behind and the test ends.
        panic!(
            "deadlock: {}; {}; errors: {:?}",
            alarm.unwrap_or_default(),
            stuck.join("; "),
            errors.lock().unwrap()
        );
    }
    let outs: Vec<Option<Out>> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let errors = errors.lock().unwrap().clone();
    assert!(
        alarm.is_none() && errors.is_empty(),
        "{}{}{}",
        alarm.unwrap_or_default(),
        if errors.is_empty() { "" } else { "\n" },
        errors.join("\n")
    );
    let outs: Vec<Out> = outs.into_iter().map(Option::unwrap).collect();
    let mut total = Tally::default();
    for (t, out) in outs.iter().enumerate() {
        assert!(
            out.tally.count.iter().sum::<u64>() > 0,
            "thread {t} did nothing"
        );
        total.add(&out.tally);
    }

    // The leak check. Everything stopped: synchronize every queue (bounded),
    // then let go of every event, command and wait.
    for (i, queue) in world.queues.iter().enumerate() {
        queue
            .synchronize()
            .unwrap_or_else(|e| panic!("final synchronize of queue {i}: {e}"));
        assert_eq!(queue.query().unwrap(), Status::Complete, "queue {i}");
        assert!(
            world.hardware[i].is_idle(),
            "queue {i}: the GPU is not idle"
        );
    }
    let (mut parks, mut unparks, mut backpressure) = (0, 0, 0);
    let mut paths = sigretire_queue::QueueStats::default();
    for queue in &world.queues {
        let stats = queue.with_tracker(|t| t.stats());
        parks += stats.parks;
        unparks += stats.unparks;
        backpressure += stats.backpressure;
        let q = queue.stats();
        paths.marker_joins += q.marker_joins;
        paths.syncs_without_lock += q.syncs_without_lock;
        paths.syncs_inline += q.syncs_inline;
        paths.syncs_by_handler += q.syncs_by_handler;
        paths.cpu_waits += q.cpu_waits;
        paths.state_resets_skipped += q.state_resets_skipped;
        paths.event_syncs_without_lock += q.event_syncs_without_lock;
        paths.batches_closed += q.batches_closed;
        paths.wait_packets += q.wait_packets;
        paths.backpressure_waits += q.backpressure_waits;
    }
    let mut held_at_stop: usize = outs.into_iter().map(Out::let_go).sum();
    for slot in &world.pool {
        held_at_stop += usize::from(slot.lock().unwrap().take().is_some());
    }
    // The completion thread lets go of its batches (bounded).
    let settling = Instant::now();
    while world.queues.iter().any(|q| q.batches_in_completion() > 0) {
        assert!(
            settling.elapsed() < WAIT_TIMEOUT,
            "the completion thread still holds batches after every queue synchronized"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // Pins come back to their producers when the consumer's use retires:
    // reclaim every queue once, then look.
    for queue in &world.queues {
        queue.with_tracker(|t| t.reclaim());
    }
    let censuses: Vec<Census> = world
        .queues
        .iter()
        .map(|q| {
            q.with_tracker(|t| {
                t.reclaim();
                t.census()
            })
        })
        .collect();
    for (i, census) in censuses.iter().enumerate() {
        assert!(census.is_balanced(), "queue {i}: unbalanced {census:?}");
        assert_eq!(
            census.parked, 0,
            "queue {i}: signals still parked {census:?}"
        );
        assert_eq!(
            census.in_flight, 0,
            "queue {i}: uses still in flight {census:?}"
        );
    }
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
    assert_eq!(device.error(), None);
    assert_eq!(device.stats().teardowns_on_completion_thread, 0);

    let ops: u64 = total.count.iter().sum();
    let per_kind: Vec<String> = ALL
        .iter()
        .map(|op| {
            let k = *op as usize;
            format!(
                "{} {} (longest {:?})",
                op.name(),
                total.count[k],
                total.longest[k]
            )
        })
        .collect();
    let longest = ALL
        .iter()
        .max_by_key(|op| total.longest[**op as usize])
        .unwrap();
    eprintln!(
        "stress_queues: seed {seed:#x}, {profile_name} profile: {ops} operations by {THREADS} threads over {QUEUES} queues in {ran:.2?}; \
         {}; longest single call {:?} ({}); {} completions checked against the ground truth ({} no longer kept); \
         cross-queue waits {} with a dependency, {} elided; {} elapsed pairs (longest {:?}); {} events let go while running, {held_at_stop} at the end; \
         trackers: {parks} parks, {unparks} unparks, {backpressure} back-pressure; signals created {}; \
         queue paths: {} marker CPU waits, {} marker joins, {} syncs without lock, {} inline, {} by the completion thread, \
         {} resets skipped, {} event syncs without lock, {} batches closed, {} wait packets, {} back-pressure waits",
        per_kind.join(", "),
        total.longest[*longest as usize],
        longest.name(),
        total.truth_checks,
        total.truth_gone,
        total.dependencies,
        total.elided,
        total.elapsed_pairs,
        total.elapsed_max,
        total.drops,
        censuses.iter().map(|c| c.created).sum::<usize>(),
        paths.cpu_waits,
        paths.marker_joins,
        paths.syncs_without_lock,
        paths.syncs_inline,
        paths.syncs_by_handler,
        paths.state_resets_skipped,
        paths.event_syncs_without_lock,
        paths.batches_closed,
        paths.wait_packets,
        paths.backpressure_waits,
    );
}
