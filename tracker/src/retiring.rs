//! The retiring tracker: CLR's newest design, with every proof made explicit.
//!
//! A coordinator over components that each own one idea:
//! [`Ring`](crate::ring) the uses in flight and the armed signals,
//! [`Proofs`](crate::retire) what is proven and the procedures that prove
//! more, [`Reclaimer`](crate::reclaim) the walk that retires and re-arms and
//! the parking of held signals, [`Signals`](crate::signals) every access to
//! signal memory and the store ordering, [`Supply`](crate::supply) new
//! signals, [`Attachments`](crate::pin) the pins lent to GPU waiters and
//! [`StampHistory`](crate::stamps) harvested timestamps. This module hands
//! out signals and implements [`Tracker`] over them.

use crate::backend::{Placement, QueueView, SignalMemory, Timestamps};
use crate::config::Config;
use crate::error::{
    AcquireError, BackendError, CreateError, FailSubmissionError, ForeignTicket, PinError,
    PublishError, TimestampsError,
};
use crate::interface::{Acquired, Census, Tracker};
use crate::keys::CellKey;
use crate::pin::{AttachError, Attachments, Pin};
use crate::publication::{self, Publication};
use crate::reclaim::{Parked, Reclaimer};
use crate::retire::{Proofs, Prover};
use crate::ring::Ring;
use crate::share::Cell;
use crate::share::{self, Shared, SignalRef};
use crate::signals::{REARM_BATCH, Signals};
use crate::stamps::{Kept, StampHistory};
use crate::stats::Stats;
use crate::supply::Supply;
use crate::sync::Arc;
use crate::ticket::{Engine, Generation, Purpose, Request, Status, Ticket, flag};
use crate::wait::Waiter;

/// The retiring tracker for one hardware queue.
///
/// Per use, in steady state: one store to re-arm, no load of its own (a
/// batch of uses retires with one load of its newest fence), no allocation,
/// no signal created, and a store fence (plus an HDP flush where one is
/// needed) once per batch of re-armed signals.
///
/// ```
/// use sigretire_tracker::{Config, Request, Status, Tracker};
/// use sigretire_sim::backend as sim_backend;
///
/// let (mut tracker, queue) = sim_backend::stepped_tracker(Config::default()).unwrap();
/// let mut tickets = Vec::new();
/// for _ in 0..100 {
///     let index = queue.reserve().unwrap();
///     let acquired = tracker.acquire(Request::packet(index).barrier(true)).unwrap();
///     sim_backend::submit_barrier(&queue, index, acquired.signal);
///     tickets.push(acquired.ticket);
/// }
/// queue.run_until_idle();
/// tracker.poll(); // one load of the newest fence retires all 100
/// assert!(tickets.iter().all(|t| tracker.known_status(t).unwrap() == Some(Status::Complete)));
/// assert_eq!(tracker.stats().host().loads, 1);
/// ```
pub struct RetiringTracker<M: SignalMemory, Q: QueueView> {
    signals: Signals<M>,
    queue: Q,
    config: Config,
    ring: Ring<M::Signal>,
    proofs: Proofs,
    parked: Parked<M::Signal>,
    attachments: Attachments<M>,
    stamps: StampHistory,
    supply: Supply<M>,
    /// What the tracker counts itself (its signal accesses are the
    /// `signals`' to count, other threads' the cells').
    stats: Stats,
    /// The use back-pressure last named: a caller that waited for it and
    /// retries finds its completion recorded in its cell, which the next
    /// `make_room` consults (0: none named since).
    named: u64,
    /// The tracker's id, which its tickets carry (its shared state's, kept
    /// here so that handing out a use reads it without going there).
    id: u64,
    /// What this generation's publications carry: this tracker, this
    /// generation ([`publication::origin`](crate::publication::origin)).
    origin: u64,
    /// What this generation's uses' labels start from
    /// ([`share::label_base`]).
    label_base: u64,
}

impl<M: SignalMemory, Q: QueueView> RetiringTracker<M, Q> {
    /// A tracker for `queue` whose signals come from `memory`. Allocates and
    /// arms `config.initial_size` signals up front, in one batch.
    pub fn new(memory: Arc<M>, queue: Q, config: Config) -> Result<Self, CreateError> {
        config.validate()?;
        let signals = Signals::new(
            Arc::new(Shared::new(memory, true)),
            !queue.ring_in_device_memory(),
        );
        let proofs = Proofs::new(32);
        let id = signals.shared().id;
        let origin = publication::origin(id, proofs.generation());
        let label_base = share::label_base(proofs.generation());
        let mut tracker = Self {
            signals,
            queue,
            config,
            ring: Ring::new(Vec::new(), config.max_in_flight()),
            proofs,
            parked: Parked::default(),
            attachments: Attachments::default(),
            stamps: StampHistory::new(config.stamp_history),
            supply: Supply::new(
                config.refill_batch,
                config.refill_batch.max(config.initial_size),
            ),
            stats: Stats::default(),
            named: 0,
            id,
            origin,
            label_base,
        };
        tracker.allocate(config.initial_size, config.signals)?;
        if tracker.ring.fill(config.initial_size, config.signals) < config.initial_size {
            return Err(BackendError(format!(
                "allocate gave {} signals for the {} asked",
                tracker.ring.capacity(),
                config.initial_size
            ))
            .into());
        }
        Ok(tracker)
    }

    /// The key of the cell `ticket` names, if this tracker issued it as
    /// it is ([`Shared::cell_of`](crate::share::Shared::cell_of)).
    fn cell_of(&self, ticket: &Ticket) -> Result<CellKey, ForeignTicket> {
        self.signals.shared().key_of(ticket).ok_or(ForeignTicket)
    }

    /// The cell `ticket` names, if this tracker issued it as it is: the
    /// check of [`cell_of`](Self::cell_of), and the cell it found, so the
    /// caller does not look the key up again.
    #[inline]
    fn checked(&self, ticket: &Ticket) -> Result<&Cell<M::Signal>, ForeignTicket> {
        self.signals.shared().cell_of(ticket).ok_or(ForeignTicket)
    }

    /// [`known`](Self::known), of a cell already found.
    #[inline]
    fn known_in(&self, seq: u64, cell: &Cell<M::Signal>) -> Option<Status> {
        self.proofs.known(seq, cell, &self.ring, &self.signals)
    }

    /// The cell of `key` (a checked ticket's).
    fn cell(&self, key: CellKey) -> &Cell<M::Signal> {
        self.signals.shared().cell(key)
    }

    /// What is known about use `seq` (whose cell's key is `cell`) without
    /// reading signal memory.
    fn known(&self, seq: u64, cell: CellKey) -> Option<Status> {
        self.proofs
            .known(seq, self.cell(cell), &self.ring, &self.signals)
    }

    fn prover(&mut self) -> Prover<'_, M> {
        Prover {
            proofs: &mut self.proofs,
            ring: &mut self.ring,
            signals: &mut self.signals,
            stats: &mut self.stats,
        }
    }

    fn reclaimer(&mut self) -> Reclaimer<'_, M> {
        Reclaimer {
            prover: Prover {
                proofs: &mut self.proofs,
                ring: &mut self.ring,
                signals: &mut self.signals,
                stats: &mut self.stats,
            },
            attachments: &mut self.attachments,
            parked: &mut self.parked,
            stamps: &mut self.stamps,
            supply: &mut self.supply,
        }
    }

    /// Fence probing: see [`Prover::probe`].
    fn probe_fence(&mut self, min_batch: u64) -> bool {
        let window = self.config.backpressure_window;
        let queue = &self.queue;
        Prover {
            proofs: &mut self.proofs,
            ring: &mut self.ring,
            signals: &mut self.signals,
            stats: &mut self.stats,
        }
        .probe(min_batch, window, || queue.read_index())
    }

    fn allocate(
        &mut self,
        count: usize,
        placement: Placement,
    ) -> Result<(), crate::backend::AllocError> {
        self.supply.allocate(
            count,
            placement,
            &mut self.signals,
            &mut self.ring,
            &mut self.stats,
        )
    }

    /// Whether a use that wants `wanted` takes a slot's signal of
    /// `placement` as it is: the placement it wants, or a host signal when
    /// the device has run out of memory for more.
    #[inline]
    fn keeps(&self, placement: Placement, wanted: Placement) -> bool {
        placement == wanted || (self.supply.fell_back() && placement == Placement::Host)
    }

    #[inline]
    fn placement_for(&self, purpose: Purpose) -> Placement {
        match purpose {
            // Only the profiler reads it: keep its stamps out of PCIe's way.
            Purpose::TimingOnly => Placement::Host,
            _ => self.config.signals,
        }
    }

    /// The common case, kept small: a single-operation AQL packet, in order,
    /// a free slot whose signal has the wanted placement and whose arming is
    /// already fenced (and flushed where needed). Anything else goes the slow
    /// way, which handles every case (this one included).
    /// Whether `request` takes the fast path (then [`hand_out`](Self::hand_out)
    /// records it as is, straight into the caller's result).
    #[inline(always)]
    fn takes_fast_path(&mut self, request: &Request) -> bool {
        // Copy engines, several operations and timing-only placement are the
        // slow path's.
        const SLOW: u8 = flag::COPY | flag::MULTI | flag::TIMING_ONLY;
        if request.flags & SLOW != 0 || self.ring.is_full() || !self.proofs.in_order(request.index)
        {
            return false;
        }
        let slot = self.ring.next_mut();
        let (placement, store) = (slot.placement, slot.store);
        self.keeps(placement, self.config.signals) && self.signals.is_visible(placement, store)
    }

    /// Every case: makes room, swaps placement, arms for several operations,
    /// fences and flushes as needed.
    #[inline(never)]
    fn acquire_slow(&mut self, request: Request) -> Result<Acquired, AcquireError> {
        let (aql, copy) = match request.engine() {
            Engine::Aql { index, .. } => {
                self.proofs.check_order(index)?;
                (index, false)
            }
            // Off the AQL queue: keep indices ordered along the ring.
            Engine::Copy => (self.proofs.last_aql(), true),
        };
        if self.ring.is_full() {
            self.make_room()?;
        }
        let wanted = self.placement_for(request.purpose);
        let placement = self.ring.next_mut().placement;
        if !self.keeps(placement, wanted) {
            self.swap_for(wanted);
        }
        if request.ops > 1 {
            self.arm_for_ops(request.ops);
        }
        let slot = self.ring.next_mut();
        let (placement, store) = (slot.placement, slot.store);
        self.signals.make_visible(placement, store, copy);
        Ok(self.hand_out(aql, request.ops, request.flags))
    }

    /// Records a use in the next slot, whose signal is armed and visible to
    /// the GPU, and hands it out. `request_flags` are the request's own; the
    /// slot keeps the ones it shares with it.
    #[inline(always)]
    fn hand_out(&mut self, aql: u64, ops: u32, request_flags: u8) -> Acquired {
        let flags = request_flags & flag::FROM_REQUEST;
        let fence = flags & flag::FENCE != 0;
        let seq = self.ring.tail();
        let last_fence = if fence { seq } else { self.proofs.last_fence() };
        let generation = self.proofs.generation();
        let slot = self.ring.next_mut();
        slot.aql = aql;
        slot.ops = ops;
        slot.residual = 0;
        slot.last_fence = last_fence;
        slot.flags = flags;
        let placement = slot.placement;
        let cell: &Cell<M::Signal> = &slot.cell;
        let ticket = Ticket::of_flags(self.id, seq, cell.key.0, generation, flags);
        cell.begin_use(seq);
        cell.set_label(share::label(self.label_base, ticket.flags));
        let signal = self.signals.shared().memory.packet_handle(cell.signal);
        self.ring.advance_tail();
        if flags & flag::COPY == 0 {
            self.proofs.note_packet(seq, aql, fence);
        }
        Acquired {
            ticket,
            signal,
            placement,
            publication: if flags & flag::COPY == 0 {
                Publication::of_use(aql, fence, signal, ops, self.origin)
            } else {
                Publication::of_copy(signal, ops, self.origin)
            },
        }
    }

    /// Several operations will each decrement the next slot's signal: arm it
    /// with their count.
    #[cold]
    #[inline(never)]
    fn arm_for_ops(&mut self, ops: u32) {
        let slot = self.ring.next_mut();
        slot.store = self.signals.store(&slot.cell, i64::from(ops));
    }

    /// Gives the next slot a signal of `wanted` placement from the spares (a
    /// new batch if there are none), keeping its own signal as a spare. If the
    /// batch fell back to the other placement, the slot keeps its signal:
    /// it works, just not where the use would like it.
    #[cold]
    #[inline(never)]
    fn swap_for(&mut self, wanted: Placement) {
        if self.ring.spares(wanted) == 0 {
            let batch = if wanted == Placement::Host && self.config.signals == Placement::Device {
                self.config.timing_batch
            } else {
                self.config.refill_batch
            };
            // A failed allocation leaves the slot's signal in place.
            let _ = self.allocate(batch, wanted);
        }
        let Some(spare) = self.ring.take_spare(wanted) else {
            return;
        };
        let old = self.ring.next_mut().swap_signal(spare);
        self.ring.put_spare(old);
        self.stats.spare_swaps += 1;
    }

    /// The ring is full: free a slot without blocking, or say what to wait for.
    #[inline(never)]
    fn make_room(&mut self) -> Result<(), AcquireError> {
        let head = self.ring.head();
        let window = self.config.backpressure_window;
        let named = core::mem::take(&mut self.named);
        self.reclaimer().walk();
        if self.ring.is_full() {
            // A probe may prove a batch, or meet a queue error and fail the
            // pending uses; a caller that waited for the use back-pressure
            // named may have seen it complete: either way, reclaim after it.
            self.probe_fence(1);
            if !self.proofs.older().is_empty() {
                self.prover().probe_older();
            }
            if named != 0 && !planted!(NamedFenceUnconsulted) {
                self.prover().try_recorded_fence(named);
            }
            self.reclaimer().walk();
        }
        // No fence can prove a copy-engine use, or an older generation's
        // after that generation's newest fence; only its own signal can.
        let oldest = self.ring.head();
        if self.ring.is_full()
            && self
                .ring
                .oldest()
                .is_some_and(|slot| !self.proofs.fences_can_prove(oldest, slot))
        {
            self.prover().load_own(oldest);
            self.reclaimer().walk();
        }
        if !self.ring.is_full() {
            // The GPU keeps most of the ring busy: every refill this small
            // would pay a probe and a fence for a handful of uses. Grow, so
            // that later refills come a whole batch at a time.
            let freed = (self.ring.head() - head) as usize;
            if freed < REARM_BATCH.min(self.ring.capacity() / 2) {
                self.grow();
            }
            return Ok(());
        }
        if self.grow() {
            return Ok(());
        }
        if let Some(wait_for) = self.prover().backpressure(window) {
            if let AcquireError::Backpressure { wait_for, .. } = &wait_for {
                self.named = wait_for.seq;
            }
            self.stats.backpressure += 1;
            return Err(wait_for);
        }
        // Every use in flight is known done: another thread's waiter or
        // reference may have learned the last completions after the walks
        // above. Nothing undoes "done", so one more walk frees every slot
        // whose signal nobody holds.
        if !planted!(GiveUpWhenAllDone) {
            self.reclaimer().walk();
        }
        if !self.ring.is_full() {
            return Ok(());
        }
        let held = (self.ring.head()..self.ring.tail())
            .filter(|&seq| self.ring.get(seq).is_some_and(|slot| slot.cell.holds() > 0))
            .count();
        Err(AcquireError::SignalsHeld { held })
    }

    /// Doubles the ring (up to its limit) with spares, allocating a batch
    /// first if there are not enough.
    fn grow(&mut self) -> bool {
        if !self.ring.can_grow() {
            return false;
        }
        let placement = if self.supply.fell_back() {
            Placement::Host
        } else {
            self.config.signals
        };
        let step = self.ring.growth_step();
        if self.ring.spares(placement) < step {
            let missing = step - self.ring.spares(placement);
            let _ = self.allocate(missing.max(self.config.refill_batch), placement);
        }
        let added = match self.ring.grow(placement) {
            0 => self.ring.grow(placement.other()),
            added => added,
        };
        if added > 0 {
            self.stats.ring_growths += 1;
        }
        added > 0
    }

    /// What the tracker counts itself: its counters, its signal accesses,
    /// and its uses, numbered 1, 2, 3... (the next one's number less one:
    /// no counter on the hot path).
    pub(crate) fn own_stats(&self) -> Stats {
        let mut stats = self.stats;
        stats.accesses = self.signals.accesses();
        stats.uses = self.ring.tail() - 1;
        stats
    }

    /// Narrows the generation counter to `bits` bits, for the tests that
    /// make it wrap ([`kit::narrow_generations`](crate::kit::narrow_generations)).
    pub(crate) fn narrow_generations(&mut self, bits: u32) {
        self.proofs.narrow(bits);
        self.origin = publication::origin(self.id, self.proofs.generation());
        self.label_base = share::label_base(self.proofs.generation());
    }

    /// What the history says of a timed use, as an answer; `None` if it
    /// was never harvested.
    fn kept(&self, seq: u64) -> Option<Result<Option<Timestamps>, TimestampsError>> {
        match self.stamps.get(seq) {
            Kept::Stamps(stamps) => Some(Ok(Some(stamps))),
            Kept::Unstamped => Some(Ok(None)),
            Kept::Expired => Some(Err(TimestampsError::Expired { seq })),
            Kept::Unknown => None,
        }
    }
}

impl<M: SignalMemory, Q: QueueView> Tracker for RetiringTracker<M, Q> {
    type Memory = M;
    type Queue = Q;

    /// The hot path: take the next slot's armed signal, make its arming
    /// visible, record the use. No allocation and no lock in steady state.
    #[inline]
    fn acquire(&mut self, request: Request) -> Result<Acquired, AcquireError> {
        if self.takes_fast_path(&request) {
            return Ok(self.hand_out(request.index, 1, request.flags));
        }
        self.acquire_slow(request)
    }

    fn query(&mut self, ticket: &Ticket) -> Result<Status, ForeignTicket> {
        let (known, cell) = {
            let cell = self.checked(ticket)?;
            (self.known_in(ticket.seq, cell), cell.key)
        };
        if let Some(status) = known {
            self.prover().learn_fence(ticket.seq, status);
            return Ok(status);
        }
        if self.probe_fence(1) {
            // Publish what the probe proved, so waiters and holders on other
            // threads learn it without a load of their own.
            self.reclaimer().walk();
        }
        if let Some(status) = self.known(ticket.seq, cell) {
            return Ok(status);
        }
        Ok(self.prover().load_own(ticket.seq))
    }

    fn known_status(&self, ticket: &Ticket) -> Result<Option<Status>, ForeignTicket> {
        let cell = self.checked(ticket)?;
        Ok(self.known_in(ticket.seq, cell))
    }

    fn waiter(&self) -> Waiter<M> {
        Waiter {
            shared: self.signals.shared().clone(),
        }
    }

    fn hold(&mut self, ticket: &Ticket) -> Result<Option<SignalRef<M>>, ForeignTicket> {
        let cell = self.checked(ticket)?;
        if self.known_in(ticket.seq, cell).is_some() {
            // Done (complete or failed): nothing left to hold, and its signal
            // may already serve a later use.
            return Ok(None);
        }
        Ok(Some(SignalRef::new(
            self.signals.shared(),
            cell,
            ticket.seq,
        )))
    }

    fn pin(&mut self, ticket: &Ticket) -> Result<Option<Pin<M>>, PinError> {
        let cell = self.checked(ticket)?;
        match self.known_in(ticket.seq, cell) {
            Some(Status::Complete) => {
                self.stats.dependencies_elided += 1;
                Ok(None)
            }
            Some(Status::Failed) => Err(PinError::Failed { seq: ticket.seq }),
            _ => {
                let reference = SignalRef::new(self.signals.shared(), cell, ticket.seq);
                // The consumer may publish through a ring in system memory (a
                // copy engine's, another agent's): flush the arming as for a
                // copy-engine use, if this queue's own publishing did not.
                if let Some(slot) = self.ring.get(ticket.seq) {
                    self.signals.make_visible(slot.placement, slot.store, true);
                }
                self.stats.pins += 1;
                Ok(Some(Pin::new(reference)))
            }
        }
    }

    fn attach(&mut self, consumer: &Ticket, pin: Pin<M>) -> Result<(), AttachError<M>> {
        if let Err(error) = self.cell_of(consumer) {
            return Err(AttachError { error, pin });
        }
        if self.ring.get(consumer.seq).is_some() {
            self.attachments.attach(consumer.seq, pin);
        }
        // Otherwise the consumer already retired: the pin drops here.
        Ok(())
    }

    fn probe(&mut self) -> bool {
        self.probe_fence(1)
    }

    fn poll(&mut self) -> usize {
        self.probe_fence(self.config.probe_interval as u64);
        if !self.proofs.older().is_empty() {
            self.prover().probe_older();
        }
        self.reclaimer().walk()
    }

    fn reclaim(&mut self) -> usize {
        self.reclaimer().walk()
    }

    fn time(&mut self, ticket: &Ticket) -> Result<Option<Ticket>, ForeignTicket> {
        let cell = self.cell_of(ticket)?;
        if ticket.is_timed() {
            return Ok(Some(*ticket));
        }
        // In the ring, the walk has not retired it: it harvests it as it
        // retires it, as any timed use.
        let Some(slot) = self.ring.get_mut(ticket.seq) else {
            return Ok(None);
        };
        slot.flags |= flag::TIMED;
        slot.cell.mark_timed_later(ticket.seq);
        debug_assert_eq!(slot.cell.key, cell);
        Ok(Some(ticket.timed()))
    }

    fn timestamps(&mut self, ticket: &Ticket) -> Result<Option<Timestamps>, TimestampsError> {
        let cell = self.cell_of(ticket)?;
        if !ticket.is_timed() {
            return Ok(None);
        }
        if self
            .ring
            .get(ticket.seq)
            .is_some_and(|slot| !slot.is(flag::HARVESTED))
        {
            // In flight and not harvested: harvest it now if it is complete.
            if self.query(ticket)? != Status::Complete {
                return Ok(None);
            }
            // The query may have retired (and harvested) it already.
            if let Some(slot) = self.ring.get_mut(ticket.seq)
                && !slot.is(flag::HARVESTED)
            {
                slot.flags |= flag::HARVESTED;
                self.stamps
                    .harvest(ticket.seq, &slot.cell, &mut self.signals, &mut self.stats);
            }
        }
        // Harvested: its cell keeps the harvest for as long as its signal
        // serves the use (in flight, or parked while held), whatever the
        // history has room for; the history keeps it after that.
        if let Some(harvested) = self.cell(cell).harvest_of(ticket.seq) {
            return Ok(harvested);
        }
        if self.known(ticket.seq, cell) == Some(Status::Failed) || planted!(StampsOnlyInTheCell) {
            return Ok(None);
        }
        if planted!(HarvestAfterRearm) && self.kept(ticket.seq).is_none() {
            let shared = self.signals.shared().clone();
            self.stamps.harvest(
                ticket.seq,
                shared.cell(cell),
                &mut self.signals,
                &mut self.stats,
            );
        }
        // Retired: harvested on the way out (a failed use has no stamps).
        self.kept(ticket.seq).unwrap_or(Ok(None))
    }

    fn note_queue_change(&mut self, queue: Q) {
        self.reclaimer().walk();
        self.prover().record_fence_proofs();
        self.signals
            .set_flush_before_publish(!queue.ring_in_device_memory());
        self.queue = queue;
        self.proofs
            .new_generation(self.ring.tail(), self.ring.head());
        self.origin = publication::origin(self.id, self.proofs.generation());
        self.label_base = share::label_base(self.proofs.generation());
    }

    fn note_drained(&mut self) {
        if planted!(DrainRetiresEverything) {
            for seq in self.ring.head()..self.ring.tail() {
                self.ring.get(seq).expect("in flight").cell.complete(seq);
            }
        }
        self.proofs.drain();
        // The walk releases the pins of the uses it retires; a consumer
        // behind a use the drain cannot prove (a copy engine's, an older
        // generation's) retired all the same: let go of its pins now.
        self.reclaimer().walk();
        let (ring, proofs) = (&self.ring, &self.proofs);
        self.attachments.release_where(|consumer| {
            ring.get(consumer)
                .is_none_or(|slot| proofs.fence_proves(consumer, slot))
        });
    }

    fn fail_queue(&mut self) -> usize {
        self.prover().fail_pending()
    }

    fn fail_queue_of(&mut self, ticket: &Ticket) -> usize {
        if self.cell_of(ticket).is_err()
            || self
                .ring
                .get(ticket.seq)
                .is_some_and(|slot| slot.is(flag::COPY))
        {
            // Another tracker's, or a copy engine's use: it names no
            // hardware queue of this tracker's.
            return 0;
        }
        match self.proofs.generation_of(ticket.seq) {
            Some(uses) => self.prover().fail_range(uses),
            // Its generation has no use in flight any more.
            None => 0,
        }
    }

    fn fail_submission(&mut self, ticket: &Ticket, issued: u32) -> Result<(), FailSubmissionError> {
        let cell = self.cell_of(ticket)?;
        self.prover().fail_use(ticket.seq, cell, issued)
    }

    fn check_publication(&self, publication: &Publication) -> Result<(), PublishError> {
        PublishError::check(
            publication,
            self.signals.shared().id,
            self.proofs.generation(),
        )
    }

    fn publication(&self, ticket: &Ticket) -> Result<Publication, PublishError> {
        let cell = self.checked(ticket)?;
        let seq = ticket.seq;
        let settled = |status| PublishError::Settled { seq, status };
        if let Some(status) = self.known_in(seq, cell) {
            return Err(settled(status));
        }
        let Some(slot) = self.ring.get(seq) else {
            return Err(settled(self.signals.shared().outcome_of_retired(seq)));
        };
        let signal = self.signals.shared().memory.packet_handle(slot.cell.signal);
        if slot.is(flag::COPY) {
            // A copy engine's: no AQL queue's slot, whatever the generation.
            return Ok(Publication::of_copy(signal, slot.ops, self.origin));
        }
        if seq < self.proofs.generation_start() {
            return Err(PublishError::Stale {
                index: slot.aql,
                made: slot.cell.generation(),
                current: self.proofs.generation(),
            });
        }
        Ok(Publication::of_use(
            slot.aql,
            slot.is(flag::FENCE),
            signal,
            slot.ops,
            self.origin,
        ))
    }

    fn queue(&self) -> &Q {
        &self.queue
    }

    fn generation(&self) -> Generation {
        self.proofs.generation()
    }

    fn stats(&self) -> Stats {
        let mut stats = self.own_stats();
        self.signals.shared().counters.add_to(&mut stats);
        stats
    }

    fn any_use_running(&mut self) -> bool {
        (self.ring.head()..self.ring.tail()).any(|seq| {
            let Some(slot) = self.ring.get(seq) else {
                return false;
            };
            if self
                .proofs
                .known(seq, &slot.cell, &self.ring, &self.signals)
                .is_some()
            {
                return false;
            }
            self.signals.load(&slot.cell) > 0
        })
    }

    fn census(&self) -> Census {
        Census {
            in_flight: self.ring.in_flight(),
            armed: self.ring.capacity() - self.ring.in_flight()
                + self.ring.spares(Placement::Host)
                + self.ring.spares(Placement::Device),
            parked: self.parked.len(),
            retired: 0,
            created: self.stats.signals_created as usize,
            pins: self.attachments.len(),
        }
    }
}

/// The components, for the crate's unit tests.
#[cfg(all(test, not(sigretire_loom)))]
impl<M: SignalMemory, Q: QueueView> RetiringTracker<M, Q> {
    pub(crate) fn ring(&self) -> &Ring<M::Signal> {
        &self.ring
    }

    pub(crate) fn ring_mut(&mut self) -> &mut Ring<M::Signal> {
        &mut self.ring
    }

    pub(crate) fn proofs(&self) -> &Proofs {
        &self.proofs
    }

    pub(crate) fn signals(&self) -> &Signals<M> {
        &self.signals
    }

    pub(crate) fn signals_mut(&mut self) -> &mut Signals<M> {
        &mut self.signals
    }

    pub(crate) fn proof_procedures(&mut self) -> Prover<'_, M> {
        self.prover()
    }
}
