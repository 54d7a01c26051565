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
use crate::error::Error;
use crate::interface::{Acquired, Census, Tracker};
use crate::pin::{Attachments, Pin};
use crate::reclaim::StoreOrder;
use crate::retire::Proofs;
use crate::ring::{Armed, Ring, Use};
use crate::share::{CellPtr, Shared, SignalRef};
use crate::stats::Stats;
use crate::sync::Arc;
use crate::ticket::{Engine, Generation, Purpose, Request, Status, Ticket};
use crate::wait::Waiter;

/// The retiring tracker for one hardware queue.
///
/// Per use, in steady state: one store to re-arm, no load of its own (a
/// batch of uses retires with one load of its newest fence), no allocation,
/// no signal created, and a store fence (plus an HDP flush where one is
/// needed) once per batch of re-armed signals.
///
/// ```
/// use tracker::{Config, Request, Status, Tracker, sim_backend};
///
/// let (mut tracker, queue) = sim_backend::stepped_tracker(Config::default());
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
    pub(crate) next_seq: u64,
    pub(crate) proofs: Proofs,
    pub(crate) order: StoreOrder,
    pub(crate) attachments: Attachments<M>,
    pub(crate) stats: Stats,
    /// Reused buffer for batch allocations.
    scratch: Vec<(M::Signal, Placement)>,
}

impl<M: SignalMemory, Q: QueueView> RetiringTracker<M, Q> {
    /// A tracker for `queue` whose signals come from `memory`. Allocates and
    /// arms `config.initial_size` signals up front.
    pub fn new(memory: Arc<M>, queue: Q, config: Config) -> Result<Self, Error> {
        config.validate()?;
        let order = StoreOrder::new(!queue.ring_in_device_memory());
        let mut tracker = Self {
            shared: Arc::new(Shared::new(memory)),
            queue,
            config,
            ring: Ring::new(config.initial_size, config.max_in_flight()),
            parked: Vec::new(),
            next_seq: 1,
            proofs: Proofs::new(config.generation_bits, config.max_in_flight()),
            order,
            attachments: Attachments::default(),
            stats: Stats::default(),
            scratch: Vec::with_capacity(config.refill_batch.max(config.initial_size)),
        };
        tracker.allocate(config.initial_size, config.signals)?;
        Ok(tracker)
    }

    pub(crate) fn memory(&self) -> &M {
        &self.shared.memory
    }

    pub(crate) fn cell_of(&self, ticket: &Ticket) -> Result<CellPtr<M::Signal>, Error> {
        self.shared.cell_of(ticket).ok_or(Error::ForeignTicket)?;
        Ok(CellPtr::from_erased(ticket.cell))
    }

    fn placement_for(&self, purpose: Purpose) -> Placement {
        match purpose {
            // Only the profiler reads it: keep its stamps out of PCIe's way.
            Purpose::TimingOnly => Placement::Host,
            _ => self.config.signals,
        }
    }

    fn acquire_use(&mut self, request: Request) -> Result<Acquired, Error> {
        let (aql, flags) = match request.engine {
            Engine::Aql { index, barrier } => {
                self.proofs.check_order(index)?;
                (index, if barrier { Use::<M::Signal>::FENCE } else { 0 })
            }
            Engine::Copy => (0, Use::<M::Signal>::COPY),
        };
        if self.ring.is_full() {
            self.make_room()?;
        }
        let mut armed = self.take_signal(self.placement_for(request.purpose))?;
        // SAFETY: the cell belongs to `self.shared`, which outlives this call.
        let cell = unsafe { armed.cell.get() };
        if cell.placement != self.config.signals {
            self.stats.spare_swaps += 1;
        }
        if request.ops > 1 {
            // Several operations will each decrement the signal.
            self.store(armed.cell, i64::from(request.ops));
            armed.store = self.order.stores_issued;
        }
        self.make_visible(
            cell.placement,
            armed.store,
            flags & Use::<M::Signal>::COPY != 0,
        );

        let seq = self.next_seq;
        self.next_seq += 1;
        cell.begin_use(seq);
        let timed = if request.is_timed() {
            Use::<M::Signal>::TIMED
        } else {
            0
        };
        self.ring.push(Use {
            seq,
            aql,
            cell: armed.cell,
            flags: flags | timed,
            ops: request.ops,
            residual: 0,
        });
        if let Engine::Aql { index, barrier } = request.engine {
            self.proofs.note_packet(seq, index, barrier);
        }
        self.stats.uses += 1;
        Ok(Acquired {
            ticket: Ticket {
                seq,
                cell: armed.cell.erase(),
                owner: self.shared.id,
                generation: self.proofs.generation(),
            },
            signal: self.memory().packet_handle(cell.signal),
            placement: cell.placement,
        })
    }

    /// The ring is full: free a slot without blocking, or say what to wait for.
    fn make_room(&mut self) -> Result<(), Error> {
        self.reclaim_uses();
        if !self.ring.is_full() {
            return Ok(());
        }
        self.probe();
        self.reclaim_uses();
        if !self.ring.is_full() {
            return Ok(());
        }
        // No fence of this queue can prove an older generation's use or a
        // copy-engine use; only its own signal can.
        if let Some(oldest) = self.ring.oldest().copied()
            && !self.proofs.fences_can_prove(&oldest)
        {
            self.load_own(oldest.seq);
            self.reclaim_uses();
            if !self.ring.is_full() {
                return Ok(());
            }
        }
        if self.ring.grow() {
            self.stats.ring_growths += 1;
            return Ok(());
        }
        self.stats.backpressure += 1;
        Err(Error::Backpressure {
            wait_for: self.backpressure_ticket(),
            in_flight: self.ring.in_flight(),
        })
    }

    /// The use to wait for under back-pressure: the newest fence near the
    /// front (its completion retires everything before it), else the oldest.
    fn backpressure_ticket(&self) -> Ticket {
        let oldest = *self.ring.oldest().expect("a full ring holds uses");
        let pick = self
            .ring
            .uses()
            .take(self.config.backpressure_window)
            .filter(|u| u.is(Use::<M::Signal>::FENCE) && self.proofs.fences_can_prove(&oldest))
            .last()
            .copied()
            .unwrap_or(oldest);
        Ticket {
            seq: pick.seq,
            cell: pick.cell.erase(),
            owner: self.shared.id,
            generation: self.proofs.generation_of(pick.seq),
        }
    }

    /// An armed signal of `wanted` placement: from its pool, from retired uses
    /// or parked signals that came back, or from a new batch; a host signal
    /// when device memory ran out (the slot keeps a signal that works, just
    /// slower).
    fn take_signal(&mut self, wanted: Placement) -> Result<Armed<M::Signal>, Error> {
        if let Some(armed) = self.ring.take_armed(wanted) {
            return Ok(armed);
        }
        // The pool ran dry: signals are out with uses in flight or parked.
        // Take back what has retired before creating more.
        if self.reclaim_uses() > 0
            && let Some(armed) = self.ring.take_armed(wanted)
        {
            return Ok(armed);
        }
        if self.probe()
            && self.reclaim_uses() > 0
            && let Some(armed) = self.ring.take_armed(wanted)
        {
            return Ok(armed);
        }
        let batch = if wanted == Placement::Host && self.config.signals == Placement::Device {
            self.config.timing_batch
        } else {
            self.config.refill_batch
        };
        let allocated = self.allocate(batch, wanted);
        let fallback = match wanted {
            Placement::Host => Placement::Device,
            Placement::Device => Placement::Host,
        };
        self.ring
            .take_armed(wanted)
            .or_else(|| self.ring.take_armed(fallback))
            .ok_or_else(|| {
                allocated
                    .err()
                    .unwrap_or(Error::InvalidConfig("allocation returned no signals"))
            })
    }

    /// Creates `count` signals (placed as the backend could), arms them and
    /// adds them to their pools.
    pub(crate) fn allocate(&mut self, count: usize, placement: Placement) -> Result<(), Error> {
        let mut scratch = core::mem::take(&mut self.scratch);
        scratch.clear();
        let result = self.shared.memory.allocate(count, placement, &mut scratch);
        for (signal, actual) in scratch.drain(..) {
            let cell = self.shared.adopt(signal, actual);
            self.stats.signals_created += 1;
            self.arm(cell);
        }
        self.scratch = scratch;
        result.map_err(Error::from)
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

    fn acquire(&mut self, request: Request) -> Result<Acquired, Error> {
        self.acquire_use(request)
    }

    fn query(&mut self, ticket: &Ticket) -> Result<Status, Error> {
        self.query_use(ticket)
    }

    fn known_status(&self, ticket: &Ticket) -> Result<Option<Status>, Error> {
        let cell = self.cell_of(ticket)?;
        Ok(self.known(ticket.seq, cell))
    }

    fn waiter(&self) -> Waiter<M> {
        Waiter {
            shared: self.shared.clone(),
        }
    }

    fn hold(&mut self, ticket: &Ticket) -> Result<Option<SignalRef<M>>, Error> {
        let cell = self.cell_of(ticket)?;
        if self.known(ticket.seq, cell) == Some(Status::Complete) {
            return Ok(None);
        }
        Ok(Some(SignalRef::new(&self.shared, cell, ticket.seq)))
    }

    fn pin(&mut self, ticket: &Ticket) -> Result<Option<Pin<M>>, Error> {
        self.pin_use(ticket)
    }

    fn attach(&mut self, consumer: &Ticket, pin: Pin<M>) -> Result<(), Error> {
        self.attach_pin(consumer, pin)
    }

    fn poll(&mut self) -> usize {
        self.probe();
        self.reclaim_uses()
    }

    fn reclaim(&mut self) -> usize {
        self.reclaim_uses()
    }

    fn timestamps(&mut self, ticket: &Ticket) -> Result<Option<Timestamps>, Error> {
        self.timestamps_of(ticket)
    }

    fn note_queue_change(&mut self, queue: Q) {
        self.order
            .set_flush_before_publish(!queue.ring_in_device_memory());
        self.queue = queue;
        self.proofs.new_generation(self.next_seq);
    }

    fn note_drained(&mut self) {
        self.proofs.drain_through(self.next_seq - 1);
        self.reclaim_uses();
    }

    fn fail_queue(&mut self) -> usize {
        self.fail_pending()
    }

    fn fail_submission(&mut self, ticket: &Ticket, issued: u32) -> Result<(), Error> {
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
            armed: self.ring.armed(Placement::Host) + self.ring.armed(Placement::Device),
            parked: self.parked.len(),
            retired: 0,
            created: self.stats.signals_created as usize,
        }
    }
}
