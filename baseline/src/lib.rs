//! The baseline: CLR's original signal tracker (`LegacySignalTracker`),
//! kept faithful so every benchmark can show what the retiring design saves.
//!
//! A ring of signals used in order. To hand out the next slot it peeks at the
//! signal two slots ahead and, if that one is still busy, inserts a new
//! signal (growth); then it loads the next slot's signal to make sure its
//! previous use finished, replaces the signal with a new one if something
//! else still references it, and re-arms it with one store. Its only proof
//! of retirement is a load of the use's own signal. It has no fence probing,
//! no parking (a shared signal is replaced by a newly created one), and reads
//! timestamps from the signal whenever they are asked for.
//!
//! Two adaptations keep it honest on this project's terms: where CLR would
//! block in `acquire` until the next slot's previous use completes, it
//! returns [`AcquireError::Backpressure`] (the caller waits, as for the retiring
//! tracker); and with device-memory signals each re-arm is followed by the
//! store fence (and HDP flush) that correctness needs.
//!
//! It lives outside the tracker crate (a runtime never picks it) and is
//! built on the tracker's own machinery ([`sigretire_tracker::kit`]): its
//! tickets, waiters, references and pins are the tracker's types and answer
//! the same way. Not published.

use sigretire_tracker::kit::{
    self, Arc, Attachments, Cell, CellKey, Kept, Shared, StampHistory, label, label_base, written,
};
use sigretire_tracker::{
    AcquireError, Acquired, AttachError, BackendError, Census, Config, CreateError,
    FailSubmissionError, ForeignTicket, Generation, Pin, PinError, Placement, PublishError,
    Request, SignalRef, Stats, Status, Ticket, Timestamps, TimestampsError, Tracker, Waiter,
    backend::{Publication, QueueView, SignalMemory},
};
use std::collections::VecDeque;

// The planted-bug hook (`planted!`, `false` outside the teeth's builds),
// shared with the tracker, whose `planted.rs` lists this crate's bugs too.
#[macro_use]
extern crate sigretire_tracker as _;

#[cfg(feature = "cuda")]
pub mod cuda;
pub mod sim;

#[derive(Clone, Copy)]
struct SlotUse {
    seq: u64,
    generation: Generation,
    /// Its AQL index (0 for a copy engine's) and barrier bit, for its
    /// publication.
    aql: u64,
    barrier: bool,
    timed: bool,
    copy: bool,
    /// Operations that decrement the signal (its arming value).
    ops: u32,
    residual: u32,
}

struct Slot<S> {
    /// Its signal's cell (the tracker's own reference).
    cell: Arc<Cell<S>>,
    last_use: Option<SlotUse>,
}

/// CLR's original tracker behind the [`Tracker`] interface.
///
/// ```
/// use sigretire_tracker::{Config, Request, Status, Tracker};
/// use sigretire_sim::backend as sim_backend;
///
/// let (mut baseline, queue) = sigretire_baseline::sim::stepped(Config::default())?;
/// let mut tickets = Vec::new();
/// for _ in 0..100 {
///     let index = queue.reserve().unwrap();
///     let acquired = baseline.acquire(Request::packet(index).barrier(true)).unwrap();
///     sim_backend::submit_barrier(&queue, index, acquired.signal);
///     tickets.push(acquired.ticket);
/// }
/// queue.run_until_idle();
/// for ticket in &tickets {
///     assert_eq!(baseline.query(ticket).unwrap(), Status::Complete);
/// }
/// // One load per use at least: the baseline proves nothing in batches.
/// assert!(baseline.stats().host().loads >= 100);
/// # Ok::<(), sigretire_tracker::Error>(())
/// ```
pub struct BaselineTracker<M: SignalMemory, Q: QueueView> {
    shared: Arc<Shared<M>>,
    queue: Q,
    config: Config,
    slots: Vec<Slot<M::Signal>>,
    /// The slot of the newest use.
    current: usize,
    next_seq: u64,
    generation: Generation,
    /// Width of the generation counter: 32, narrowed by tests
    /// ([`narrow_generations`](Self::narrow_generations)).
    generation_bits: u32,
    /// The first sequence number of the current generation.
    generation_start: u64,
    /// The first sequence numbers of the older generations that may still
    /// have uses in flight, oldest first: a generation's uses run up to the
    /// next one's first.
    older_starts: VecDeque<u64>,
    /// The AQL index of the current generation's newest AQL use: indices
    /// must grow within a generation, as for the retiring tracker.
    last_aql: Option<u64>,
    /// Signals replaced because they were still referenced.
    replaced: usize,
    attachments: Attachments<M>,
    /// Stamps of timed uses whose slot moved on (see `stamps.rs`).
    stamps: StampHistory,
    stats: Stats,
    scratch: Vec<(M::Signal, Placement)>,
}

impl<M: SignalMemory, Q: QueueView> BaselineTracker<M, Q> {
    /// A baseline tracker for `queue` with `config.initial_size` signals.
    pub fn new(memory: Arc<M>, queue: Q, config: Config) -> Result<Self, CreateError> {
        config.validate()?;
        let mut tracker = Self {
            shared: Arc::new(Shared::new(memory, false)),
            queue,
            config,
            slots: Vec::with_capacity(config.initial_size),
            current: config.initial_size - 1,
            next_seq: 1,
            generation: Generation::ZERO,
            generation_bits: 32,
            generation_start: 1,
            older_starts: VecDeque::new(),
            last_aql: None,
            replaced: 0,
            attachments: Attachments::default(),
            stamps: StampHistory::new(config.stamp_history),
            stats: Stats::default(),
            scratch: Vec::new(),
        };
        for _ in 0..config.initial_size {
            let cell = tracker
                .create_signal()
                .map_err(|shortfall| match shortfall {
                    AcquireError::OutOfSignals(error) => CreateError::OutOfSignals(error),
                    AcquireError::Backend(error) => CreateError::Backend(error),
                    other => CreateError::Backend(BackendError(other.to_string())),
                })?;
            tracker.slots.push(Slot {
                cell,
                last_use: None,
            });
        }
        Ok(tracker)
    }

    /// Counts generations in `bits` bits (1 to 32) from now on, so a test
    /// sees the counter wrap within a few queue changes.
    ///
    /// # Panics
    /// For `bits` outside 1..=32.
    pub fn narrow_generations(&mut self, bits: u32) {
        assert!((1..=32).contains(&bits), "generation bits: 1 to 32");
        self.generation_bits = bits;
        self.generation = Generation::new(self.generation.value(), bits);
    }

    /// A new signal, as CLR creates one: individually, on demand.
    fn create_signal(&mut self) -> Result<Arc<Cell<M::Signal>>, AcquireError> {
        self.scratch.clear();
        self.shared
            .memory
            .allocate(1, self.config.signals, &mut self.scratch)?;
        let (signal, placement) = self.scratch.pop().ok_or_else(|| {
            BackendError("allocate succeeded with no signal for the one asked".into())
        })?;
        self.stats.signals_created += 1;
        Ok(self.shared.adopt(signal, placement)?)
    }

    /// One counted load of the signal of slot `slot`.
    fn load(&mut self, slot: usize) -> i64 {
        load(&mut self.stats, &self.shared, &self.slots[slot].cell)
    }

    /// One counted load of the signal of the cell of `key` (a ticket's).
    fn load_key(&mut self, key: CellKey) -> i64 {
        load(&mut self.stats, &self.shared, self.shared.cell(key))
    }

    /// Reads the stamps of use `seq` (timed and complete) from its signal
    /// (counted), as CLR does each time they are asked for, and keeps them
    /// in its cell, where its references and, once its slot moved on, its
    /// ticket find them: a held signal is replaced, never reused, so its
    /// cell keeps them for as long as the use is held.
    fn read_stamps(&mut self, seq: u64, cell: CellKey) -> Option<Timestamps> {
        let c = self.shared.cell(cell);
        self.stats.accesses[c.placement.index()].timestamp_reads += 1;
        // SAFETY: as in `load`.
        let stamps = written(unsafe { self.shared.memory.timestamps(c.signal) });
        c.store_stamps(seq, stamps);
        stamps
    }

    fn cell_of(&self, ticket: &Ticket) -> Result<CellKey, ForeignTicket> {
        self.shared.key_of(ticket).ok_or(ForeignTicket)
    }

    /// Whether the slot's previous use finished, by loading its signal.
    fn previous_use_done(&mut self, slot: usize) -> bool {
        let Some(u) = self.slots[slot].last_use else {
            return true;
        };
        let c = &self.slots[slot].cell;
        if let Some(status) = self.shared.known_status(u.seq, c) {
            return status == Status::Complete || self.residual_done(slot, u);
        }
        let value = self.load(slot);
        let c = &self.slots[slot].cell;
        if value == 0 {
            if c.complete(u.seq) {
                self.stats.retired += 1;
                self.stats.retired_by_load += 1;
            }
            return true;
        }
        if value < 0 && c.fail(u.seq) {
            self.note_failed(u.seq);
            return true;
        }
        false
    }

    /// Whether use `u` of slot `slot`, a failed submission, has no issued
    /// part left running.
    fn residual_done(&mut self, slot: usize, u: SlotUse) -> bool {
        u.residual == 0 || {
            let value = self.load(slot);
            value < 0 || value == i64::from(u.residual)
        }
    }

    fn note_failed(&mut self, _seq: u64) {
        self.stats.failed += 1;
    }

    fn note_complete(&mut self, _seq: u64) {
        self.stats.retired += 1;
        self.stats.retired_by_load += 1;
    }

    /// Use `seq` (of `cell`) is known done, however it was learned (a load
    /// here, a waiter on another thread): once its packets have passed, the
    /// pins it held as a consumer go, as they will not read them any more.
    fn release_consumer(&mut self, seq: u64, cell: CellKey) {
        if !self.attachments.is_empty()
            && !planted!(BaselineKeepsPinsUntilReuse)
            && self.consumer_passed(seq, cell)
        {
            self.attachments.release_where(|consumer| consumer == seq);
        }
    }

    /// Whether every packet of use `seq` (known done) that may read a pin
    /// has passed: it completed, or it failed with nothing of it still
    /// running. A failed submission's issued part (a barrier-AND on a
    /// pinned producer, say) may still wait on the pins after the use is
    /// known failed: until it finished, they stay.
    fn consumer_passed(&mut self, seq: u64, cell: CellKey) -> bool {
        if self.shared.cell(cell).phase_of(seq) != Some(Some(Status::Failed)) {
            return true;
        }
        match self
            .slot_of(seq)
            .and_then(|slot| Some((slot, self.slots[slot].last_use?)))
        {
            // Its slot moved on, which releases its pins itself.
            None => true,
            Some((slot, u)) => self.residual_done(slot, u),
        }
    }

    fn use_ticket(&self, slot: usize, seq: u64) -> Ticket {
        let last = self.slots[slot].last_use.filter(|u| u.seq == seq);
        kit::ticket(
            self.shared.id,
            seq,
            self.slots[slot].cell.key,
            last.map_or(self.generation, |u| u.generation),
            last.is_some_and(|u| u.timed),
        )
    }

    /// Whether AQL index `index` may follow the generation's newest.
    fn check_order(&self, index: u64) -> Result<(), AcquireError> {
        match self.last_aql {
            Some(previous) if !kit::aql_before(previous, index) => {
                Err(AcquireError::AqlIndexOutOfOrder { index, previous })
            }
            _ => Ok(()),
        }
    }

    fn acquire_slot(&mut self, request: Request) -> Result<Acquired, AcquireError> {
        let aql = kit::aql_index(&request);
        if let Some(index) = aql {
            self.check_order(index)?;
        }
        let ops = kit::ops(&request);
        let n = self.slots.len();
        // Peek two ahead: a busy signal there means the ring is about to run
        // out, so grow by one new signal right after the current slot. A
        // failed allocation is no reason to fail: the next slot may be free.
        let ahead = (self.current + 2) % n;
        let mut grew = false;
        if n < self.config.max_in_flight()
            && self.slots[ahead].last_use.is_some()
            && self.load(ahead) > 0
            && let Ok(cell) = self.create_signal()
        {
            self.slots.insert(
                self.current + 1,
                Slot {
                    cell,
                    last_use: None,
                },
            );
            self.stats.ring_growths += 1;
            grew = true;
        }
        let next = (self.current + 1) % self.slots.len();
        if !grew && !self.previous_use_done(next) {
            self.stats.backpressure += 1;
            let seq = self.slots[next].last_use.map_or(0, |u| u.seq);
            return Err(AcquireError::Backpressure {
                wait_for: self.use_ticket(next, seq),
                in_flight: self.slots.len(),
            });
        }
        // Still referenced (an event, a handler, a waiter): CLR creates a
        // new signal. Made before anything changes, so that a failed
        // allocation leaves the slot, its use and its holders as they were.
        let held = self.slots[next].last_use.is_some() && self.slots[next].cell.holds() > 0;
        if planted!(BaselineFreesBeforeReplacing)
            && let Some(u) = self.slots[next].last_use.take()
        {
            self.retire_previous(next, u);
        }
        let replacement = if held {
            Some(self.create_signal()?)
        } else {
            None
        };
        if let Some(u) = self.slots[next].last_use.take() {
            self.retire_previous(next, u);
        }
        if let Some(cell) = replacement {
            self.slots[next].cell = cell;
            self.replaced += 1;
        }
        self.current = next;

        let c = &self.slots[next].cell;
        self.stats.accesses[c.placement.index()].stores += 1;
        // SAFETY: the signal came from this memory, kept alive by `self.shared`.
        unsafe { self.shared.memory.store(c.signal, i64::from(ops)) };
        let copy = aql.is_none();
        if c.placement == Placement::Device {
            self.shared.memory.store_fence();
            self.stats.accesses[c.placement.index()].fences += 1;
            if copy || !self.queue.ring_in_device_memory() {
                self.shared.memory.hdp_flush();
                self.stats.accesses[c.placement.index()].flushes += 1;
            }
        }
        if let Some(index) = aql {
            self.last_aql = Some(index);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        c.begin_use(seq);
        c.set_label(label(
            label_base(self.generation),
            if request.is_timed() { Ticket::TIMED } else { 0 },
        ));
        let (signal, placement) = (self.shared.memory.packet_handle(c.signal), c.placement);
        self.slots[next].last_use = Some(SlotUse {
            generation: self.generation,
            aql: aql.unwrap_or(0),
            barrier: request.is_fence(),
            seq,
            timed: request.is_timed(),
            copy,
            ops,
            residual: 0,
        });
        self.stats.uses += 1;
        let origin = kit::origin(self.shared.id, self.generation);
        Ok(Acquired {
            ticket: self.use_ticket(next, seq),
            signal,
            placement,
            publication: match aql {
                Some(index) => {
                    kit::publication_of_use(index, request.is_fence(), signal, ops, origin)
                }
                None => kit::publication_of_copy(signal, ops, origin),
            },
        })
    }

    /// The slot's previous use `u` is done and the slot moves on: record a
    /// failure, keep a timed use's stamps (its signal is re-armed or given
    /// up next), release the pins of consumers up to it.
    fn retire_previous(&mut self, slot: usize, u: SlotUse) {
        self.stats.rearms += 1;
        let phase = self.slots[slot].cell.phase_of(u.seq);
        if phase == Some(Some(Status::Failed)) {
            self.shared.record_failure(u.seq);
        } else if u.timed && self.stamps.get(u.seq) == Kept::Unknown {
            let stamps = self.read_stamps(u.seq, self.slots[slot].cell.key);
            self.stamps.record(u.seq, stamps);
            self.stats.harvests += 1;
        }
        self.attachments.release_through(u.seq);
        self.shared.publish_retired_through(u.seq);
    }

    /// A queue error on the hardware queue of the uses `uses` (one
    /// generation's): each of them in flight and pending is settled by a
    /// load of its signal (0: it completed before the error). A copy
    /// engine's use is not the queue's.
    fn fail_generation(&mut self, uses: core::ops::Range<u64>) -> usize {
        let mut failed = 0;
        for i in 0..self.slots.len() {
            let Some(u) = self.slots[i]
                .last_use
                .filter(|u| !u.copy && uses.contains(&u.seq))
            else {
                continue;
            };
            if self
                .shared
                .known_status(u.seq, &self.slots[i].cell)
                .is_some()
            {
                continue;
            }
            let value = self.load(i);
            let c = &self.slots[i].cell;
            let key = c.key;
            if value == 0 {
                if c.complete(u.seq) {
                    self.note_complete(u.seq);
                }
            } else if c.fail(u.seq) {
                self.note_failed(u.seq);
                failed += 1;
            }
            self.release_consumer(u.seq, key);
        }
        failed
    }

    fn slot_of(&self, seq: u64) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.last_use.is_some_and(|u| u.seq == seq))
    }

    fn observe(&mut self, seq: u64, cell: CellKey) -> Status {
        let status = match self.shared.known_status(seq, self.shared.cell(cell)) {
            Some(status) => status,
            None => {
                let value = self.load_key(cell);
                let c = self.shared.cell(cell);
                if value == 0 {
                    if c.complete(seq) {
                        self.note_complete(seq);
                    }
                    Status::Complete
                } else {
                    if value < 0 && c.fail(seq) {
                        self.note_failed(seq);
                    }
                    let c = self.shared.cell(cell);
                    self.shared.known_status(seq, c).unwrap_or(Status::Pending)
                }
            }
        };
        if status.is_done() {
            self.release_consumer(seq, cell);
        }
        status
    }
}

impl<M: SignalMemory, Q: QueueView> Tracker for BaselineTracker<M, Q> {
    type Memory = M;
    type Queue = Q;

    #[inline]
    fn acquire(&mut self, request: Request) -> Result<Acquired, AcquireError> {
        self.acquire_slot(request)
    }

    fn query(&mut self, ticket: &Ticket) -> Result<Status, ForeignTicket> {
        let cell = self.cell_of(ticket)?;
        Ok(self.observe(ticket.seq, cell))
    }

    fn known_status(&self, ticket: &Ticket) -> Result<Option<Status>, ForeignTicket> {
        let cell = self.cell_of(ticket)?;
        Ok(self.shared.known_status(ticket.seq, self.shared.cell(cell)))
    }

    fn waiter(&self) -> Waiter<M> {
        kit::waiter(&self.shared)
    }

    fn hold(&mut self, ticket: &Ticket) -> Result<Option<SignalRef<M>>, ForeignTicket> {
        let cell = self.cell_of(ticket)?;
        if self.observe(ticket.seq, cell).is_done() {
            // Complete or failed: nothing to hold, and its signal may serve a
            // later use already.
            return Ok(None);
        }
        Ok(Some(kit::hold(&self.shared, cell, ticket.seq)))
    }

    fn pin(&mut self, ticket: &Ticket) -> Result<Option<Pin<M>>, PinError> {
        let cell = self.cell_of(ticket)?;
        match self.observe(ticket.seq, cell) {
            Status::Complete => {
                self.stats.dependencies_elided += 1;
                Ok(None)
            }
            Status::Failed => Err(PinError::Failed { seq: ticket.seq }),
            Status::Pending => {
                // The consumer may publish through a ring in system memory.
                if self.shared.cell(cell).placement == Placement::Device {
                    self.shared.memory.hdp_flush();
                    self.stats.accesses[Placement::Device.index()].flushes += 1;
                }
                self.stats.pins += 1;
                Ok(Some(kit::pin(kit::hold(&self.shared, cell, ticket.seq))))
            }
        }
    }

    fn attach(&mut self, consumer: &Ticket, pin: Pin<M>) -> Result<(), AttachError<M>> {
        let cell = match self.cell_of(consumer) {
            Ok(cell) => cell,
            Err(error) => return Err(AttachError { error, pin }),
        };
        // Still its slot's use, and not known to have passed (complete, or
        // failed with no issued part still running): its packets may read
        // the pin. Otherwise the consumer already finished: the pin drops
        // here.
        let pending = self.shared.cell(cell).phase_of(consumer.seq).is_none();
        if self.slot_of(consumer.seq).is_some()
            && (pending || !self.consumer_passed(consumer.seq, cell))
        {
            self.attachments.attach(consumer.seq, pin);
        }
        Ok(())
    }

    /// The baseline proves nothing in batches: nothing to do.
    fn probe(&mut self) -> bool {
        false
    }

    /// The baseline proves nothing in batches: nothing to do.
    fn poll(&mut self) -> usize {
        0
    }

    /// The baseline re-arms in `acquire`: nothing to do.
    fn reclaim(&mut self) -> usize {
        0
    }

    fn time(&mut self, ticket: &Ticket) -> Result<Option<Ticket>, ForeignTicket> {
        let cell = self.cell_of(ticket)?;
        if ticket.is_timed() {
            return Ok(Some(*ticket));
        }
        // Still its slot's last use: its stamps are kept when the slot
        // moves on, as any timed use's.
        let Some(slot) = self.slot_of(ticket.seq) else {
            return Ok(None);
        };
        if let Some(last) = &mut self.slots[slot].last_use {
            last.timed = true;
        }
        self.shared.cell(cell).mark_timed_later(ticket.seq);
        Ok(Some(Ticket {
            flags: ticket.flags | Ticket::TIMED,
            ..*ticket
        }))
    }

    fn timestamps(&mut self, ticket: &Ticket) -> Result<Option<Timestamps>, TimestampsError> {
        let cell = self.cell_of(ticket)?;
        if !ticket.is_timed() {
            return Ok(None);
        }
        if self.shared.known_status(ticket.seq, self.shared.cell(cell)) == Some(Status::Failed) {
            return Ok(None);
        }
        // Slots move on in use order, each publishing its use retired.
        if ticket.seq > self.shared.retired_through() {
            // Still its slot's use: CLR reads the stamps from the signal
            // each time they are asked for, once it is complete.
            if self.observe(ticket.seq, cell) != Status::Complete {
                return Ok(None);
            }
            return Ok(self.read_stamps(ticket.seq, cell));
        }
        // Its slot moved on, keeping its stamps: in its cell for as long as
        // the use is held (its signal was replaced), in the history after.
        if let Some(harvested) = self.shared.cell(cell).harvest_of(ticket.seq) {
            return Ok(harvested);
        }
        match self.stamps.get(ticket.seq) {
            Kept::Stamps(stamps) => Ok(Some(stamps)),
            Kept::Expired => Err(TimestampsError::Expired { seq: ticket.seq }),
            // Unstamped; or not kept when its slot moved on, which happens
            // only to a use that failed.
            Kept::Unstamped | Kept::Unknown => Ok(None),
        }
    }

    fn note_queue_change(&mut self, queue: Q) {
        self.queue = queue;
        self.generation = self.generation.next(self.generation_bits);
        if self.next_seq > self.generation_start {
            self.older_starts.push_back(self.generation_start);
        }
        self.generation_start = self.next_seq;
        // Forget the older generations none of whose uses is in flight.
        let oldest = self
            .slots
            .iter()
            .filter_map(|slot| slot.last_use)
            .map(|u| u.seq)
            .min()
            .unwrap_or(self.next_seq);
        while !self.older_starts.is_empty()
            && self
                .older_starts
                .get(1)
                .copied()
                .unwrap_or(self.generation_start)
                <= oldest
        {
            self.older_starts.pop_front();
        }
        // The new queue's indices start afresh.
        self.last_aql = None;
    }

    /// CLR's original tracker has no notion of a drained queue: it retires
    /// nothing. But the consumers of the pins it holds ran on the drained
    /// queue (if they are of its current generation, and not a copy
    /// engine's): their pins go.
    fn note_drained(&mut self) {
        if planted!(BaselineKeepsPinsUntilReuse) {
            return;
        }
        let (slots, start) = (&self.slots, self.generation_start);
        self.attachments.release_where(|consumer| {
            slots
                .iter()
                .filter_map(|s| s.last_use)
                .find(|u| u.seq == consumer)
                .is_none_or(|u| u.seq >= start && !u.copy)
        });
    }

    /// A queue error: each pending use of the current queue is settled by a
    /// load of its signal (0: it completed before the error).
    fn fail_queue(&mut self) -> usize {
        self.fail_generation(self.generation_start..u64::MAX)
    }

    fn fail_queue_of(&mut self, ticket: &Ticket) -> usize {
        let copy = self
            .slot_of(ticket.seq)
            .and_then(|slot| self.slots[slot].last_use)
            .is_some_and(|u| u.copy);
        if self.cell_of(ticket).is_err() || copy {
            // Another tracker's, or a copy engine's use: it names no
            // hardware queue of this tracker's.
            return 0;
        }
        if ticket.seq >= self.generation_start {
            return self.fail_queue();
        }
        // The older generation it belongs to, if any of its uses is still
        // in flight.
        let at = self
            .older_starts
            .partition_point(|&start| start <= ticket.seq);
        if at == 0 {
            return 0;
        }
        let start = self.older_starts[at - 1];
        let end = self
            .older_starts
            .get(at)
            .copied()
            .unwrap_or(self.generation_start);
        self.fail_generation(start..end)
    }

    fn fail_submission(&mut self, ticket: &Ticket, issued: u32) -> Result<(), FailSubmissionError> {
        let cell = self.cell_of(ticket)?;
        let invalid = |state| FailSubmissionError::InvalidState {
            seq: ticket.seq,
            state,
        };
        let c = self.shared.cell(cell);
        // What the cell recorded, whether or not the baseline answers from
        // it: a use it once reported done stays done.
        match c.phase_of(ticket.seq) {
            Some(Some(Status::Complete)) => return Err(invalid("complete")),
            Some(Some(Status::Failed)) => return Err(invalid("failed")),
            Some(_) => return Err(invalid("retired")),
            None => {}
        }
        let slot = self.slot_of(ticket.seq).ok_or(invalid("retired"))?;
        // The count the use was armed with, not the signal's value: issued
        // operations that already ran (or failed) have changed that.
        let u = self.slots[slot]
            .last_use
            .as_mut()
            .expect("slot_of found the use");
        if issued >= u.ops {
            return Err(invalid("fully issued"));
        }
        u.residual = u.ops - issued;
        if c.fail(ticket.seq) {
            self.note_failed(ticket.seq);
        }
        Ok(())
    }

    fn check_publication(&self, publication: &Publication) -> Result<(), PublishError> {
        kit::check_publication(publication, self.shared.id, self.generation)
    }

    fn publication(&self, ticket: &Ticket) -> Result<Publication, PublishError> {
        let cell = self.cell_of(ticket)?;
        let seq = ticket.seq;
        let settled = |status| PublishError::Settled { seq, status };
        if let Some(status) = self.shared.known_status(seq, self.shared.cell(cell)) {
            return Err(settled(status));
        }
        let Some(u) = self.slot_of(seq).and_then(|slot| self.slots[slot].last_use) else {
            return Err(settled(self.shared.outcome_of_retired(seq)));
        };
        let signal = self
            .shared
            .memory
            .packet_handle(self.shared.cell(cell).signal);
        let origin = kit::origin(self.shared.id, self.generation);
        if u.copy {
            return Ok(kit::publication_of_copy(signal, u.ops, origin));
        }
        if seq < self.generation_start {
            return Err(PublishError::Stale {
                index: u.aql,
                made: u.generation,
                current: self.generation,
            });
        }
        Ok(kit::publication_of_use(
            u.aql, u.barrier, signal, u.ops, origin,
        ))
    }

    fn queue(&self) -> &Q {
        &self.queue
    }

    fn generation(&self) -> Generation {
        self.generation
    }

    fn stats(&self) -> Stats {
        let mut stats = self.stats;
        kit::add_shared_counters(&self.shared, &mut stats);
        stats
    }

    fn any_use_running(&mut self) -> bool {
        let (shared, stats) = (&self.shared, &mut self.stats);
        self.slots.iter().any(|slot| {
            let Some(last) = &slot.last_use else {
                return false;
            };
            shared.known_status(last.seq, &slot.cell).is_none()
                && load(stats, shared, &slot.cell) > 0
        })
    }

    fn census(&self) -> Census {
        let in_flight = self.slots.iter().filter(|s| s.last_use.is_some()).count();
        Census {
            in_flight,
            armed: self.slots.len() - in_flight,
            parked: 0,
            retired: self.replaced,
            created: self.stats.signals_created as usize,
            pins: self.attachments.len(),
        }
    }
}

/// One counted load of `cell`'s signal.
fn load<M: SignalMemory>(stats: &mut Stats, shared: &Shared<M>, cell: &Cell<M::Signal>) -> i64 {
    stats.accesses[cell.placement.index()].loads += 1;
    // SAFETY: the signal came from this memory, kept alive by `shared`.
    unsafe { shared.memory.load(cell.signal) }
}

#[cfg(test)]
mod tests;
