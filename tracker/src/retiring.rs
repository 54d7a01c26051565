//! The retiring tracker: CLR's newest design, with every proof made explicit.
//!
//! The mechanism is split by idea: [`ring`](crate::ring) holds the uses in
//! flight and the armed signals, [`retire`](crate::retire) proves retirement,
//! [`reclaim`](crate::reclaim) re-arms and orders stores, [`share`](crate::share)
//! parks signals held elsewhere, [`pin`](crate::pin) lends signals to GPU
//! waiters, and [`timing`](crate::timing) harvests timestamps. This module ties
//! them together and hands out signals.

use crate::backend::{Placement, QueueView, SignalMemory, Timestamps};
use crate::config::Config;
use crate::error::{
    AcquireError, BackendError, CreateError, FailSubmissionError, ForeignTicket, PinError,
    TimestampsError,
};
use crate::interface::{Acquired, Census, Tracker};
use crate::pin::{AttachError, Attachments, Pin};
use crate::planted::{self, Bug};
use crate::reclaim::{REARM_BATCH, StoreOrder};
use crate::retire::Proofs;
use crate::ring::{Ring, Slot, Spare};
use crate::share::{CellPtr, Shared, SignalRef};
use crate::stamps::StampHistory;
use crate::stats::Stats;
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
    pub(crate) shared: Arc<Shared<M>>,
    pub(crate) queue: Q,
    pub(crate) config: Config,
    pub(crate) ring: Ring<M::Signal>,
    /// Signals of retired uses still held elsewhere, waiting to come back.
    pub(crate) parked: Vec<CellPtr<M::Signal>>,
    pub(crate) proofs: Proofs,
    pub(crate) order: StoreOrder,
    pub(crate) attachments: Attachments<M>,
    /// Harvested stamps of the latest timed uses.
    pub(crate) stamps: StampHistory,
    pub(crate) stats: Stats,
    /// A device-memory allocation came back in host memory: the device has
    /// none to give. From then on the tracker stops asking for it: new
    /// signals are host signals, and a slot with a host signal keeps it
    /// (the device signals it still has stay in use where they are).
    pub(crate) device_fell_back: bool,
    /// Reused buffer for batch allocations.
    scratch: Vec<(M::Signal, Placement)>,
}

impl<M: SignalMemory, Q: QueueView> RetiringTracker<M, Q> {
    /// A tracker for `queue` whose signals come from `memory`. Allocates and
    /// arms `config.initial_size` signals up front, in one batch.
    pub fn new(memory: Arc<M>, queue: Q, config: Config) -> Result<Self, CreateError> {
        config.validate()?;
        let order = StoreOrder::new(!queue.ring_in_device_memory());
        let mut tracker = Self {
            shared: Arc::new(Shared::new(memory, true)),
            queue,
            config,
            ring: Ring::new(Vec::new(), config.max_in_flight()),
            parked: Vec::new(),
            proofs: Proofs::new(config.generation_bits),
            order,
            attachments: Attachments::default(),
            stamps: StampHistory::new(config.stamp_history),
            stats: Stats::default(),
            device_fell_back: false,
            scratch: Vec::with_capacity(config.refill_batch.max(config.initial_size)),
        };
        tracker.allocate_spares(config.initial_size, config.signals)?;
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

    pub(crate) fn cell_of(&self, ticket: &Ticket) -> Result<CellPtr<M::Signal>, ForeignTicket> {
        self.shared.cell_ptr_of(ticket).ok_or(ForeignTicket)
    }

    /// Whether a use that wants `wanted` takes a slot's signal of
    /// `placement` as it is: the placement it wants, or a host signal when
    /// the device has run out of memory for more.
    #[inline]
    fn keeps(&self, placement: Placement, wanted: Placement) -> bool {
        placement == wanted || (self.device_fell_back && placement == Placement::Host)
    }

    #[inline]
    fn placement_for(&self, purpose: Purpose) -> Placement {
        match purpose {
            // Only the profiler reads it: keep its stamps out of PCIe's way.
            Purpose::TimingOnly => Placement::Host,
            _ => self.config.signals,
        }
    }

    /// The hot path: take the next slot's armed signal, make its arming
    /// visible, record the use. No allocation and no lock in steady state.
    #[inline]
    fn acquire_use(&mut self, request: Request) -> Result<Acquired, AcquireError> {
        match self.acquire_fast(&request) {
            Some(acquired) => Ok(acquired),
            None => self.acquire_slow(request),
        }
    }

    /// The common case, kept small: a single-operation AQL packet, in order,
    /// a free slot whose signal has the wanted placement and whose arming is
    /// already fenced (and flushed where needed). Anything else goes the slow
    /// way, which handles every case (this one included).
    #[inline(always)]
    fn acquire_fast(&mut self, request: &Request) -> Option<Acquired> {
        // Copy engines, several operations and timing-only placement are the
        // slow path's.
        const SLOW: u8 = flag::COPY | flag::MULTI | flag::TIMING_ONLY;
        if request.flags & SLOW != 0 || self.ring.is_full() || !self.proofs.in_order(request.index)
        {
            return None;
        }
        let slot = self.ring.next_mut();
        let placement = self.shared.cell(slot.cell).placement;
        let store = slot.store;
        if !self.keeps(placement, self.config.signals) || !self.order.is_visible(placement, store) {
            return None;
        }
        Some(self.hand_out(request.index, 1, request.flags))
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
        let placement = self.shared.cell(self.ring.next_mut().cell).placement;
        if !self.keeps(placement, wanted) {
            self.swap_for(wanted);
        }
        if request.ops > 1 {
            self.arm_for_ops(request.ops);
        }
        let slot = self.ring.next_mut();
        let placement = self.shared.cell(slot.cell).placement;
        let store = slot.store;
        self.make_visible(placement, store, copy);
        Ok(self.hand_out(aql, request.ops, request.flags))
    }

    /// Records a use in the next slot, whose signal is armed and visible to
    /// the GPU, and hands it out. `request_flags` are the request's own; the
    /// slot keeps the ones it shares with it.
    #[inline(always)]
    fn hand_out(&mut self, aql: u64, ops: u32, request_flags: u8) -> Acquired {
        let flags = request_flags & Slot::<M::Signal>::FROM_REQUEST;
        let fence = flags & Slot::<M::Signal>::FENCE != 0;
        let seq = self.ring.tail();
        let last_fence = if fence { seq } else { self.proofs.last_fence() };
        let generation = self.proofs.generation();
        let slot = self.ring.next_mut();
        slot.aql = aql;
        slot.ops = ops;
        slot.residual = 0;
        slot.last_fence = last_fence;
        slot.generation = generation;
        slot.flags = flags;
        let cell_ptr = slot.cell;
        let cell = self.shared.cell(cell_ptr);
        self.ring.advance_tail();
        cell.begin_use(seq);
        if flags & Slot::<M::Signal>::COPY == 0 {
            self.proofs.note_packet(seq, aql, fence);
        }
        self.stats.uses += 1;
        Acquired {
            ticket: Ticket {
                seq,
                cell: cell_ptr.erase(),
                owner: self.shared.id,
                generation,
                timed: flags & Slot::<M::Signal>::TIMED != 0,
            },
            signal: self.shared.memory.packet_handle(cell.signal),
            placement: cell.placement,
        }
    }

    /// Several operations will each decrement the next slot's signal: arm it
    /// with their count.
    #[cold]
    #[inline(never)]
    fn arm_for_ops(&mut self, ops: u32) {
        let cell = self.ring.next_mut().cell;
        self.store(cell, i64::from(ops));
        self.ring.next_mut().store = self.order.stores_issued;
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
            let _ = self.allocate_spares(batch, wanted);
        }
        let Some(spare) = self.ring.take_spare(wanted) else {
            return;
        };
        let slot = self.ring.next_mut();
        let old = Spare {
            cell: slot.cell,
            store: slot.store,
        };
        slot.cell = spare.cell;
        slot.store = spare.store;
        let placement = self.shared.cell(old.cell).placement;
        self.ring.put_spare(placement, old);
        self.stats.spare_swaps += 1;
    }

    /// The ring is full: free a slot without blocking, or say what to wait for.
    #[inline(never)]
    fn make_room(&mut self) -> Result<(), AcquireError> {
        let head = self.ring.head();
        self.reclaim_uses();
        if self.ring.is_full() {
            // A probe may prove a batch, or meet a queue error and fail the
            // pending uses; a caller that waited for the use back-pressure
            // named may have seen it complete: either way, reclaim after it.
            self.probe_fence(1);
            if !planted::active(Bug::NamedFenceUnconsulted) {
                self.prove_recorded_near_oldest();
            }
            self.reclaim_uses();
        }
        // No fence of this queue can prove an older generation's use or a
        // copy-engine use; only its own signal can.
        let oldest = self.ring.head();
        if self.ring.is_full()
            && let Some(slot) = self.ring.oldest().copied()
            && !self.proofs.fences_can_prove(oldest, &slot)
        {
            self.load_own(oldest);
            self.reclaim_uses();
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
        if let Some(wait_for) = self.backpressure() {
            self.stats.backpressure += 1;
            return Err(wait_for);
        }
        // Every use in flight is known done: another thread's waiter or
        // reference may have learned the last completions after the walks
        // above. Nothing undoes "done", so one more walk frees every slot
        // whose signal nobody holds.
        if !planted::active(Bug::GiveUpWhenAllDone) {
            self.reclaim_uses();
        }
        if !self.ring.is_full() {
            return Ok(());
        }
        let held = (self.ring.head()..self.ring.tail())
            .filter(|&seq| {
                self.ring
                    .get(seq)
                    .is_some_and(|slot| self.shared.cell(slot.cell).holds() > 0)
            })
            .count();
        Err(AcquireError::SignalsHeld { held })
    }

    /// Doubles the ring (up to its limit) with spares, allocating a batch
    /// first if there are not enough.
    fn grow(&mut self) -> bool {
        if !self.ring.can_grow() {
            return false;
        }
        let placement = if self.device_fell_back {
            Placement::Host
        } else {
            self.config.signals
        };
        let step = self.ring.growth_step();
        if self.ring.spares(placement) < step {
            let missing = step - self.ring.spares(placement);
            let _ = self.allocate_spares(missing.max(self.config.refill_batch), placement);
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

    /// Where back-pressure looks for a fence to name: the window from the
    /// oldest use (only fences of the current generation qualify).
    fn backpressure_candidates(&self) -> core::ops::Range<u64> {
        let oldest = self.ring.head();
        let window = self.config.backpressure_window as u64;
        oldest..oldest.saturating_add(window).min(self.ring.tail())
    }

    /// Proves through the newest fence among back-pressure's candidates
    /// that a CPU wait recorded complete: the use back-pressure named is
    /// one of them, so a caller that waited for it and retries gets room.
    fn prove_recorded_near_oldest(&mut self) {
        let candidates = self.backpressure_candidates();
        for seq in candidates.rev() {
            if self.try_recorded_fence(seq) {
                return;
            }
        }
    }

    /// What to do when the ring is full and cannot grow: name a use whose
    /// completion frees room. That is the oldest use that still waits for
    /// the GPU (not known done, or a failed submission whose issued part
    /// still runs: known failed, but its slot frees only once that part
    /// finished) — or, when fences can prove that use, the newest fence near
    /// it that is not known done, which retires everything before it at
    /// once (and which `prove_recorded_near_oldest` consults on the retry).
    /// A fence proves nothing about a copy-engine use or an older
    /// generation's, so for those the use itself is named. `None` if no use
    /// in flight waits for the GPU.
    fn backpressure(&mut self) -> Option<AcquireError> {
        let tail = self.ring.tail();
        let oldest = (self.ring.head()..tail).find(|&seq| self.awaits_gpu(seq))?;
        let slot = *self.ring.get(oldest).expect("in flight");
        let fence = if self.proofs.fences_can_prove(oldest, &slot) {
            let candidates = self.backpressure_candidates();
            (oldest.max(candidates.start)..candidates.end)
                .rev()
                .find(|&seq| {
                    self.ring.get(seq).is_some_and(|slot| {
                        slot.is(Slot::<M::Signal>::FENCE)
                            && self.proofs.fences_can_prove(seq, slot)
                            && self.known(seq, slot.cell).is_none()
                    })
                })
        } else {
            None
        };
        let seq = fence.unwrap_or(oldest);
        let slot = self.ring.get(seq).expect("in flight");
        Some(AcquireError::Backpressure {
            wait_for: Ticket {
                seq,
                cell: slot.cell.erase(),
                owner: self.shared.id,
                generation: slot.generation,
                timed: slot.is(Slot::<M::Signal>::TIMED),
            },
            in_flight: self.ring.in_flight(),
        })
    }

    /// Creates `count` signals (placed as the backend could), arms them and
    /// adds them to the spares of their actual placement.
    pub(crate) fn allocate_spares(
        &mut self,
        count: usize,
        placement: Placement,
    ) -> Result<(), crate::backend::AllocError> {
        let mut scratch = core::mem::take(&mut self.scratch);
        scratch.clear();
        let result = self.shared.memory.allocate(count, placement, &mut scratch);
        if placement == Placement::Device && scratch.iter().any(|&(_, actual)| actual != placement)
        {
            self.device_fell_back = true;
        }
        for (signal, actual) in scratch.drain(..) {
            let cell = self.shared.adopt(signal, actual);
            self.stats.signals_created += 1;
            self.store(cell, 1);
            self.ring.put_spare(
                actual,
                Spare {
                    cell,
                    store: self.order.stores_issued,
                },
            );
        }
        self.scratch = scratch;
        result
    }

    /// The stats counted by the owner and by other threads, together.
    fn snapshot(&self) -> Stats {
        let mut stats = self.stats;
        self.shared.counters.add_to(&mut stats);
        stats
    }
}

impl<M: SignalMemory, Q: QueueView> Tracker for RetiringTracker<M, Q> {
    type Memory = M;
    type Queue = Q;

    #[inline]
    fn acquire(&mut self, request: Request) -> Result<Acquired, AcquireError> {
        self.acquire_use(request)
    }

    fn query(&mut self, ticket: &Ticket) -> Result<Status, ForeignTicket> {
        self.query_use(ticket)
    }

    fn known_status(&self, ticket: &Ticket) -> Result<Option<Status>, ForeignTicket> {
        let cell = self.cell_of(ticket)?;
        Ok(self.known(ticket.seq, cell))
    }

    fn waiter(&self) -> Waiter<M> {
        Waiter {
            shared: self.shared.clone(),
        }
    }

    fn hold(&mut self, ticket: &Ticket) -> Result<Option<SignalRef<M>>, ForeignTicket> {
        let cell = self.cell_of(ticket)?;
        if self.known(ticket.seq, cell).is_some() {
            // Done (complete or failed): nothing left to hold, and its signal
            // may already serve a later use.
            return Ok(None);
        }
        Ok(Some(SignalRef::new(&self.shared, cell, ticket.seq)))
    }

    fn pin(&mut self, ticket: &Ticket) -> Result<Option<Pin<M>>, PinError> {
        self.pin_use(ticket)
    }

    fn attach(&mut self, consumer: &Ticket, pin: Pin<M>) -> Result<(), AttachError<M>> {
        self.attach_pin(consumer, pin)
    }

    fn probe(&mut self) -> bool {
        self.probe_fence(1)
    }

    fn poll(&mut self) -> usize {
        self.probe_fence(self.config.probe_interval as u64);
        self.reclaim_uses()
    }

    fn reclaim(&mut self) -> usize {
        self.reclaim_uses()
    }

    fn timestamps(&mut self, ticket: &Ticket) -> Result<Option<Timestamps>, TimestampsError> {
        self.timestamps_of(ticket)
    }

    fn note_queue_change(&mut self, queue: Q) {
        self.reclaim_uses();
        self.record_fence_proofs();
        self.order
            .set_flush_before_publish(!queue.ring_in_device_memory());
        self.queue = queue;
        self.proofs.new_generation(self.ring.tail());
    }

    fn note_drained(&mut self) {
        if planted::active(Bug::DrainRetiresEverything) {
            for seq in self.ring.head()..self.ring.tail() {
                let cell = self.ring.get(seq).expect("in flight").cell;
                self.shared.cell(cell).complete(seq);
            }
        }
        self.proofs.drain();
        // The walk releases the pins of the uses it retires; a consumer
        // behind a use the drain cannot prove (a copy engine's, an older
        // generation's) retired all the same: let go of its pins now.
        self.reclaim_uses();
        let (ring, proofs) = (&self.ring, &self.proofs);
        self.attachments.release_where(|consumer| {
            ring.get(consumer)
                .is_none_or(|slot| proofs.fence_proves(consumer, slot))
        });
    }

    fn fail_queue(&mut self) -> usize {
        self.fail_pending()
    }

    fn fail_submission(&mut self, ticket: &Ticket, issued: u32) -> Result<(), FailSubmissionError> {
        self.fail_use(ticket, issued)
    }

    fn queue(&self) -> &Q {
        &self.queue
    }

    fn generation(&self) -> Generation {
        self.proofs.generation()
    }

    fn stats(&self) -> Stats {
        self.snapshot()
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
