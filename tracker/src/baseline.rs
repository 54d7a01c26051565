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
//! returns [`Error::Backpressure`] (the caller waits, as for the retiring
//! tracker); and with device-memory signals each re-arm is followed by the
//! store fence (and HDP flush) that correctness needs.

use crate::backend::{Placement, QueueView, SignalMemory, Timestamps};
use crate::config::Config;
use crate::error::Error;
use crate::interface::{Acquired, Census, Tracker};
use crate::pin::{Attachments, Pin};
use crate::share::{CellPtr, Shared, SignalRef};
use crate::stats::Stats;
use crate::sync::Arc;
use crate::ticket::{Engine, Generation, Request, Status, Ticket};
use crate::wait::Waiter;

#[derive(Clone, Copy)]
struct SlotUse {
    seq: u64,
    generation: Generation,
    timed: bool,
    copy: bool,
    /// Operations that decrement the signal (its arming value).
    ops: u32,
    residual: u32,
}

struct Slot<S> {
    cell: CellPtr<S>,
    last_use: Option<SlotUse>,
}

/// CLR's original tracker behind the [`Tracker`] interface.
///
/// ```
/// use tracker::{Config, Request, Status, Tracker, sim_backend};
///
/// let (mut baseline, queue) = sim_backend::stepped_baseline(Config::default());
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
    /// The first sequence number of the current generation.
    generation_start: u64,
    /// Signals replaced because they were still referenced.
    replaced: usize,
    attachments: Attachments<M>,
    stats: Stats,
    scratch: Vec<(M::Signal, Placement)>,
}

impl<M: SignalMemory, Q: QueueView> BaselineTracker<M, Q> {
    /// A baseline tracker for `queue` with `config.initial_size` signals.
    pub fn new(memory: Arc<M>, queue: Q, config: Config) -> Result<Self, Error> {
        config.validate()?;
        let mut tracker = Self {
            shared: Arc::new(Shared::new(memory, false)),
            queue,
            config,
            slots: Vec::with_capacity(config.initial_size),
            current: config.initial_size - 1,
            next_seq: 1,
            generation: Generation::new(0, config.generation_bits),
            generation_start: 1,
            replaced: 0,
            attachments: Attachments::default(),
            stats: Stats::default(),
            scratch: Vec::new(),
        };
        for _ in 0..config.initial_size {
            let cell = tracker.create_signal()?;
            tracker.slots.push(Slot {
                cell,
                last_use: None,
            });
        }
        Ok(tracker)
    }

    /// A new signal, as CLR creates one: individually, on demand.
    fn create_signal(&mut self) -> Result<CellPtr<M::Signal>, Error> {
        self.scratch.clear();
        self.shared
            .memory
            .allocate(1, self.config.signals, &mut self.scratch)?;
        let (signal, placement) = self
            .scratch
            .pop()
            .ok_or(Error::InvalidConfig("allocation returned no signals"))?;
        self.stats.signals_created += 1;
        Ok(self.shared.adopt(signal, placement))
    }

    fn load(&mut self, cell: CellPtr<M::Signal>) -> i64 {
        // SAFETY: the cell belongs to `self.shared`.
        let c = unsafe { cell.get() };
        self.stats.accesses[c.placement.index()].loads += 1;
        // SAFETY: the signal came from this memory, kept alive by `self.shared`.
        unsafe { self.shared.memory.load(c.signal) }
    }

    fn cell_of(&self, ticket: &Ticket) -> Result<CellPtr<M::Signal>, Error> {
        self.shared.cell_of(ticket).ok_or(Error::ForeignTicket)?;
        Ok(CellPtr::from_erased(ticket.cell))
    }

    /// Whether the slot's previous use finished, by loading its signal.
    fn previous_use_done(&mut self, slot: usize) -> bool {
        let Some(u) = self.slots[slot].last_use else {
            return true;
        };
        let cell = self.slots[slot].cell;
        // SAFETY: the cell belongs to `self.shared`.
        let c = unsafe { cell.get() };
        if let Some(status) = self.shared.known_status(u.seq, c) {
            return status == Status::Complete || self.residual_done(cell, u);
        }
        let value = self.load(cell);
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

    fn residual_done(&mut self, cell: CellPtr<M::Signal>, u: SlotUse) -> bool {
        u.residual == 0 || {
            let value = self.load(cell);
            value < 0 || value == i64::from(u.residual)
        }
    }

    fn note_failed(&mut self, _seq: u64) {
        self.stats.failed += 1;
    }

    fn use_ticket(&self, slot: usize, seq: u64) -> Ticket {
        let generation = self.slots[slot]
            .last_use
            .filter(|u| u.seq == seq)
            .map_or(self.generation, |u| u.generation);
        Ticket {
            seq,
            cell: self.slots[slot].cell.erase(),
            owner: self.shared.id,
            generation,
        }
    }

    fn acquire_slot(&mut self, request: Request) -> Result<Acquired, Error> {
        let n = self.slots.len();
        // Peek two ahead: a busy signal there means the ring is about to run
        // out, so grow by one new signal right after the current slot.
        let ahead = (self.current + 2) % n;
        let mut grew = false;
        if n < self.config.max_in_flight() && self.slots[ahead].last_use.is_some() {
            let cell = self.slots[ahead].cell;
            if self.load(cell) > 0 {
                let cell = self.create_signal()?;
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
        }
        let next = (self.current + 1) % self.slots.len();
        if !grew && !self.previous_use_done(next) {
            self.stats.backpressure += 1;
            let seq = self.slots[next].last_use.map_or(0, |u| u.seq);
            return Err(Error::Backpressure {
                wait_for: self.use_ticket(next, seq),
                in_flight: self.slots.len(),
            });
        }
        if let Some(u) = self.slots[next].last_use.take() {
            self.stats.rearms += 1;
            // SAFETY: the cell belongs to `self.shared`.
            if unsafe { self.slots[next].cell.get() }.phase_of(u.seq) == Some(Some(Status::Failed))
            {
                self.shared.record_failures(u.seq, u.seq);
            }
            self.attachments.release_through(u.seq);
            self.shared.publish_retired_through(u.seq);
            // SAFETY: the cell belongs to `self.shared`.
            if unsafe { self.slots[next].cell.get() }.holds() > 0 {
                // Still referenced (an event, a handler, a waiter): CLR creates a new signal.
                self.slots[next].cell = self.create_signal()?;
                self.replaced += 1;
            }
        }
        self.current = next;

        let cell = self.slots[next].cell;
        // SAFETY: the cell belongs to `self.shared`.
        let c = unsafe { cell.get() };
        self.stats.accesses[c.placement.index()].stores += 1;
        // SAFETY: as in `load`.
        unsafe { self.shared.memory.store(c.signal, i64::from(request.ops)) };
        let copy = matches!(request.engine(), Engine::Copy);
        if c.placement == Placement::Device {
            self.shared.memory.store_fence();
            self.stats.accesses[c.placement.index()].fences += 1;
            if copy || !self.queue.ring_in_device_memory() {
                self.shared.memory.hdp_flush();
                self.stats.accesses[c.placement.index()].flushes += 1;
            }
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        c.begin_use(seq);
        self.slots[next].last_use = Some(SlotUse {
            generation: self.generation,
            seq,
            timed: request.is_timed(),
            copy,
            ops: request.ops,
            residual: 0,
        });
        self.stats.uses += 1;
        Ok(Acquired {
            ticket: self.use_ticket(next, seq),
            signal: self.shared.memory.packet_handle(c.signal),
            placement: c.placement,
        })
    }

    fn slot_of(&self, seq: u64) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.last_use.is_some_and(|u| u.seq == seq))
    }

    fn observe(&mut self, seq: u64, cell: CellPtr<M::Signal>) -> Status {
        // SAFETY: the cell belongs to `self.shared`.
        let c = unsafe { cell.get() };
        if let Some(status) = self.shared.known_status(seq, c) {
            return status;
        }
        let value = self.load(cell);
        if value == 0 {
            if c.complete(seq) {
                self.stats.retired += 1;
                self.stats.retired_by_load += 1;
            }
            return Status::Complete;
        }
        if value < 0 && c.fail(seq) {
            self.note_failed(seq);
        }
        self.shared.known_status(seq, c).unwrap_or(Status::Pending)
    }
}

impl<M: SignalMemory, Q: QueueView> Tracker for BaselineTracker<M, Q> {
    type Memory = M;
    type Queue = Q;

    #[inline]
    fn acquire(&mut self, request: Request) -> Result<Acquired, Error> {
        self.acquire_slot(request)
    }

    fn query(&mut self, ticket: &Ticket) -> Result<Status, Error> {
        let cell = self.cell_of(ticket)?;
        Ok(self.observe(ticket.seq, cell))
    }

    fn known_status(&self, ticket: &Ticket) -> Result<Option<Status>, Error> {
        let cell = self.cell_of(ticket)?;
        // SAFETY: the cell belongs to `self.shared`.
        Ok(self.shared.known_status(ticket.seq, unsafe { cell.get() }))
    }

    fn waiter(&self) -> Waiter<M> {
        Waiter {
            shared: self.shared.clone(),
        }
    }

    fn hold(&mut self, ticket: &Ticket) -> Result<Option<SignalRef<M>>, Error> {
        let cell = self.cell_of(ticket)?;
        if self.observe(ticket.seq, cell).is_done() {
            // Complete or failed: nothing to hold, and its signal may serve a
            // later use already.
            return Ok(None);
        }
        Ok(Some(SignalRef::new(&self.shared, cell, ticket.seq)))
    }

    fn pin(&mut self, ticket: &Ticket) -> Result<Option<Pin<M>>, Error> {
        let cell = self.cell_of(ticket)?;
        match self.observe(ticket.seq, cell) {
            Status::Complete => {
                self.stats.dependencies_elided += 1;
                Ok(None)
            }
            Status::Failed => Err(Error::InvalidState {
                seq: ticket.seq,
                action: "be waited on",
                state: "failed",
            }),
            Status::Pending => {
                // The consumer may publish through a ring in system memory.
                // SAFETY: the cell belongs to `self.shared`.
                if unsafe { cell.get() }.placement == Placement::Device {
                    self.shared.memory.hdp_flush();
                    self.stats.accesses[Placement::Device.index()].flushes += 1;
                }
                self.stats.pins += 1;
                Ok(Some(Pin::new(SignalRef::new(
                    &self.shared,
                    cell,
                    ticket.seq,
                ))))
            }
        }
    }

    fn attach(&mut self, consumer: &Ticket, pin: Pin<M>) -> Result<(), Error> {
        self.cell_of(consumer)?;
        if self.slot_of(consumer.seq).is_some() {
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

    fn timestamps(&mut self, ticket: &Ticket) -> Result<Option<Timestamps>, Error> {
        let cell = self.cell_of(ticket)?;
        // SAFETY: the cell belongs to `self.shared`.
        let c = unsafe { cell.get() };
        if c.phase_of(ticket.seq) == Some(None)
            || self.observe(ticket.seq, cell) != Status::Complete
        {
            // Re-armed for a later use (its stamps are gone), or not complete.
            return Ok(None);
        }
        let timed = self
            .slot_of(ticket.seq)
            .and_then(|s| self.slots[s].last_use)
            .is_none_or(|u| u.timed);
        if !timed {
            return Ok(None);
        }
        // CLR reads the stamps from the signal each time they are asked for.
        self.stats.accesses[c.placement.index()].timestamp_reads += 1;
        // SAFETY: as in `load`.
        Ok(Some(unsafe { self.shared.memory.timestamps(c.signal) }))
    }

    fn note_queue_change(&mut self, queue: Q) {
        self.queue = queue;
        self.generation = self.generation.next(self.config.generation_bits);
        self.generation_start = self.next_seq;
    }

    /// CLR's original tracker has no notion of a drained queue.
    fn note_drained(&mut self) {}

    /// A queue error: each pending use of the current queue is settled by a
    /// load of its signal (0: it completed before the error).
    fn fail_queue(&mut self) -> usize {
        let mut failed = 0;
        for i in 0..self.slots.len() {
            let Some(u) = self.slots[i]
                .last_use
                .filter(|u| !u.copy && u.seq >= self.generation_start)
            else {
                continue;
            };
            let cell = self.slots[i].cell;
            // SAFETY: the cell belongs to `self.shared`.
            let c = unsafe { cell.get() };
            if self.shared.known_status(u.seq, c).is_some() {
                continue;
            }
            if self.load(cell) == 0 {
                if c.complete(u.seq) {
                    self.stats.retired += 1;
                    self.stats.retired_by_load += 1;
                }
            } else if c.fail(u.seq) {
                self.note_failed(u.seq);
                failed += 1;
            }
        }
        failed
    }

    fn fail_submission(&mut self, ticket: &Ticket, issued: u32) -> Result<(), Error> {
        let cell = self.cell_of(ticket)?;
        let invalid = |state| Error::InvalidState {
            seq: ticket.seq,
            action: "fail its submission",
            state,
        };
        let slot = self.slot_of(ticket.seq).ok_or(invalid("retired"))?;
        // SAFETY: the cell belongs to `self.shared`.
        let c = unsafe { cell.get() };
        if self.shared.known_status(ticket.seq, c).is_some() {
            return Err(invalid("done"));
        }
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

    fn queue(&self) -> &Q {
        &self.queue
    }

    fn generation(&self) -> Generation {
        self.generation
    }

    fn stats(&self) -> Stats {
        let mut stats = self.stats;
        self.shared.counters.add_to(&mut stats);
        stats
    }

    fn census(&self) -> Census {
        let in_flight = self.slots.iter().filter(|s| s.last_use.is_some()).count();
        Census {
            in_flight,
            armed: self.slots.len() - in_flight,
            parked: 0,
            retired: self.replaced,
            created: self.stats.signals_created as usize,
        }
    }
}

#[cfg(all(test, not(loom), feature = "sim"))]
mod tests;
