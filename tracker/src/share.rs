//! Signal cells and the references other threads hold to them.
//!
//! Every signal the tracker owns has a [`Cell`]: its handle, its placement,
//! and the host-side state other threads read without the tracker's lock —
//! which use it currently serves, how many references are held on it, whether
//! it is parked, and the timestamps harvested from its last timed use.
//!
//! A [`SignalRef`] (an event's reference, an async handler's, a GPU waiter's
//! pin) keeps its signal from being re-armed. When the tracker retires a use
//! whose signal is referenced, it *parks* the signal and hands out an armed
//! spare instead; the parked signal comes back, re-armed, once the last
//! reference is dropped. Dropping a reference takes no lock: it decrements the
//! count and, if it was the last one on a parked signal, leaves a hint the
//! tracker picks up on its next reclaim.

use crate::backend::{AllocError, Placement, SignalMemory, Timestamps};
use crate::failures::Failures;
use crate::keys::{CellKey, Directory};
use crate::registry;
use crate::stats::SharedCounters;
use crate::sync::{Arc, AtomicU32, AtomicU64, AtomicUsize, Mutex, Ordering, fence};
use crate::ticket::{Generation, Status, Ticket};
use core::fmt;

// A cell's two packed words.
//
// `state`: `seq << 2 | phase`, the use the signal serves or last served and
// what is known of it, read together so a reader never pairs one use's
// number with another's phase.
//
// | phase | name       | meaning                           | written by |
// |------:|------------|-----------------------------------|------------|
// | 0     | `LIVE`     | serving `seq`, outcome not known  | the tracker, as it hands the signal to use `seq` (a store) |
// | 1     | `COMPLETE` | `seq` completed                   | the tracker (a proof) or a CPU waiter (it saw 0): CAS from `LIVE` of the same `seq`, first wins |
// | 2     | `FAILED`   | `seq` failed                      | the tracker (a queue error, a failed submission): CAS from `LIVE` of the same `seq` |
//
// Only `LIVE(seq) -> COMPLETE(seq) | FAILED(seq)` and, by the tracker once
// `seq` retired, `* -> LIVE(seq')` with `seq' > seq`. A reader asking about
// `seq` that finds a larger number knows `seq` retired before.
//
// `holds`: `count | PARKED << 31`, the references held outside the tracker
// and whether the signal is set aside waiting for them.
//
// | PARKED | count | meaning                                    | next |
// |:------:|------:|--------------------------------------------|------|
// | 0      | 0     | free: the walk re-arms it in place         | a reference is taken (count + 1) |
// | 0      | n > 0 | held: the walk parks it (`fetch_or PARKED`) | the last holder lets go first (count 0: park sees it, clears the bit, re-arms) |
// | 1      | n > 0 | parked, an armed spare in its slot         | the last holder's `fetch_sub` sees `PARKED | 1` and leaves a hint |
// | 1      | 0     | its holders are gone                       | the tracker takes the hint, clears the bit, re-arms it as a spare |
//
// One word for both, so the parking RMW and the last holder's decrement are
// ordered by the word's RMW order: one of them sees the other, never
// neither, and no parked signal is forgotten.
//
// `label`: `generation << 32 | flags`, what the use `state` names was
// handed out as (its ticket's generation and flags, with
// [`LABEL_TIMED_LATER`] for a use marked timed afterwards), so that a
// ticket is checked against its use without the tracker's lock. The
// tracker stores it after `state`, with Release: a reader that loads a
// later use's label (Acquire) then loads that later use's `state` too, so
// it never mistakes a label for its own.

/// The phase of a cell's current use, in the low two bits of its state word.
const LIVE: u64 = 0;
const COMPLETE: u64 = 1;
const FAILED: u64 = 2;

/// Packs a use's sequence number and phase into one atomic word, so a reader
/// sees both from the same moment.
const fn pack(seq: u64, phase: u64) -> u64 {
    seq << 2 | phase
}

const fn unpack(word: u64) -> (u64, u64) {
    (word >> 2, word & 3)
}

/// The bit of a cell's hold word that says it is parked.
const PARKED: u32 = 1 << 31;

/// The bit of a cell's `stamps_seq` that says its use was harvested with no
/// stamps (sequence numbers stay below it: `pack` shifts them left by two).
const UNSTAMPED: u64 = 1 << 63;

/// A label's bit: the use was marked timed after it was acquired
/// ([`Tracker::time`](crate::Tracker::time)), so its ticket may say either.
/// (A ticket's own flags sit below it.)
const LABEL_TIMED_LATER: u64 = 1 << 31;

const _: () = assert!(Ticket::TIMED < LABEL_TIMED_LATER);

/// The generation part of the labels of a generation's uses, which the
/// tracker works out once per generation.
#[inline(always)]
pub const fn label_base(generation: Generation) -> u64 {
    (generation.value() as u64) << 32
}

/// The label of a use of a generation whose [`label_base`] is `base` and
/// whose ticket's flags are `ticket_flags`.
#[inline(always)]
pub const fn label(base: u64, ticket_flags: u64) -> u64 {
    base | ticket_flags
}

/// A signal and the host-side state shared with other threads.
pub struct Cell<S> {
    /// The signal.
    pub signal: S,
    /// Where it lives.
    pub placement: Placement,
    /// Its key in its tracker's tables: the slot its tickets carry.
    pub key: CellKey,
    /// `pack(seq, phase)` of the use the signal serves or last served.
    state: AtomicU64,
    /// The [`label`] of that use.
    label: AtomicU64,
    /// References held outside the tracker (events, pins, handlers), and the
    /// [`PARKED`] bit while the signal waits for them to let go. One word, so
    /// the last holder and the parking tracker agree on who saw whom through
    /// the total order of read-modify-writes on it.
    holds: AtomicU32,
    /// The use whose timestamps `start` and `end` hold (0: none).
    stamps_seq: AtomicU64,
    start: AtomicU64,
    end: AtomicU64,
}

impl<S> Cell<S> {
    pub(crate) fn new(signal: S, placement: Placement, key: CellKey) -> Self {
        Self {
            signal,
            placement,
            key,
            state: AtomicU64::new(pack(0, COMPLETE)),
            label: AtomicU64::new(0),
            holds: AtomicU32::new(0),
            stamps_seq: AtomicU64::new(0),
            start: AtomicU64::new(0),
            end: AtomicU64::new(0),
        }
    }

    /// Marks the cell as serving use `seq` (the tracker's owner only).
    pub fn begin_use(&self, seq: u64) {
        self.state.store(pack(seq, LIVE), Ordering::Release);
    }

    /// Labels the use [`begin_use`](Self::begin_use) just began, before its
    /// ticket leaves the tracker (the owner only): see [`label`].
    #[inline(always)]
    pub fn set_label(&self, label: u64) {
        self.label.store(label, Ordering::Release);
    }

    /// Use `seq`, which the cell serves, was marked timed after it was
    /// acquired: its ticket may now say timed as well (the owner only).
    pub fn mark_timed_later(&self, seq: u64) {
        if unpack(self.state.load(Ordering::Acquire)).0 == seq {
            // The owner is the label's only writer: a load and a store, no
            // read-modify-write.
            let label = self.label.load(Ordering::Relaxed);
            self.label
                .store(label | LABEL_TIMED_LATER, Ordering::Release);
        }
    }

    /// The generation the use the cell serves (or last served) was
    /// acquired in.
    pub fn generation(&self) -> Generation {
        Generation::new((self.label.load(Ordering::Acquire) >> 32) as u32, 32)
    }

    /// Whether `ticket`, which names use `seq` (the one the cell serves),
    /// says what the use was handed out as: its generation, and timed only
    /// if it is.
    fn label_fits(&self, ticket: &Ticket) -> bool {
        let label = self.label.load(Ordering::Acquire);
        let timed = ticket.is_timed();
        (label >> 32) as u32 == ticket.generation
            && (timed == (label & Ticket::TIMED != 0) || (timed && label & LABEL_TIMED_LATER != 0))
    }

    /// Records that use `seq` completed. Returns false when someone (a CPU
    /// waiter) recorded it first, so each completion is counted once.
    pub fn complete(&self, seq: u64) -> bool {
        self.transition(seq, COMPLETE)
    }

    /// Records that use `seq` failed; false if it was already complete or failed.
    pub fn fail(&self, seq: u64) -> bool {
        self.transition(seq, FAILED)
    }

    fn transition(&self, seq: u64, phase: u64) -> bool {
        self.state
            .compare_exchange(
                pack(seq, LIVE),
                pack(seq, phase),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// The phase of use `seq` as far as this cell knows: `None` while the cell
    /// still serves it and nobody recorded an outcome, `Some(None)` when the
    /// cell has moved on to a later use (so `seq` was retired earlier).
    pub fn phase_of(&self, seq: u64) -> Option<Option<Status>> {
        let (current, phase) = unpack(self.state.load(Ordering::Acquire));
        if current > seq {
            return Some(None);
        }
        if current < seq {
            // Cannot happen for a ticket this tracker issued; treat as pending.
            return None;
        }
        match phase {
            COMPLETE => Some(Some(Status::Complete)),
            FAILED => Some(Some(Status::Failed)),
            _ => None,
        }
    }

    /// The references held on it.
    pub fn holds(&self) -> u32 {
        // Acquire: pairs with the Release decrement in `SignalRef::drop`, so
        // every access a holder made happens before a re-arm that follows.
        self.holds.load(Ordering::Acquire) & !PARKED
    }

    pub(crate) fn add_hold(&self) {
        // Relaxed, as for `Arc::clone`: a new reference is made either by the
        // tracker's owner or from an existing reference, so the count cannot be
        // observed at zero in between.
        self.holds.fetch_add(1, Ordering::Relaxed);
    }

    /// Publishes the harvest of use `seq` (the owner only): its stamps, or
    /// `None` when nothing stamped it, which the cell remembers as well, so
    /// that a held use says "no stamps" as long as it says anything.
    ///
    /// A small seqlock: `stamps_seq` is cleared while the pair is rewritten,
    /// so a reader either sees the pair that belongs to the `seq` it asked
    /// for or gives up. Held signals are never rewritten, so readers that hold
    /// a reference never give up.
    pub fn store_stamps(&self, seq: u64, stamps: Option<Timestamps>) {
        self.stamps_seq.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        let (tag, pair) = match stamps {
            Some(stamps) => (seq, stamps),
            None => (seq | UNSTAMPED, Timestamps::default()),
        };
        self.start.store(pair.start, Ordering::Relaxed);
        self.end.store(pair.end, Ordering::Relaxed);
        self.stamps_seq.store(tag, Ordering::Release);
    }

    /// The harvest of use `seq`, if the cell holds it: `Some(None)` when
    /// nothing stamped the use, `None` when the cell holds no harvest of it.
    pub fn harvest_of(&self, seq: u64) -> Option<Option<Timestamps>> {
        let tag = self.stamps_seq.load(Ordering::Acquire);
        if tag == seq | UNSTAMPED {
            return Some(None);
        }
        if tag != seq {
            return None;
        }
        let stamps = Timestamps {
            start: self.start.load(Ordering::Relaxed),
            end: self.end.load(Ordering::Relaxed),
        };
        fence(Ordering::Acquire);
        (self.stamps_seq.load(Ordering::Relaxed) == seq).then_some(Some(stamps))
    }

    /// The harvested timestamps of use `seq`, if they are the ones held.
    pub(crate) fn stamps(&self, seq: u64) -> Option<Timestamps> {
        self.harvest_of(seq).flatten()
    }
}

/// The state a tracker shares with waiters, references and pins: the signal
/// memory, every cell, and what is known about retired uses.
pub struct Shared<M: SignalMemory> {
    /// The tracker's id, which its tickets carry.
    pub id: u64,
    /// Where its signals live.
    pub memory: Arc<M>,
    /// Every cell, by key, for every thread.
    directory: Directory<Cell<M::Signal>>,
    /// The next key. Locked only to adopt a signal.
    next_key: Mutex<u32>,
    /// Every use with a sequence number up to this one is retired (complete
    /// or failed) and has been reclaimed.
    retired_through: AtomicU64,
    /// Hints that a parked signal's last holder let go.
    returns: AtomicUsize,
    /// Which retired uses failed (bounded, lock-free to read).
    failures: Failures,
    /// Whether host-side knowledge of completions answers questions (the
    /// retiring design), or only a load of the signal does (CLR's original
    /// design, which the baseline keeps faithfully). Failures are always
    /// remembered: a failed use's signal may never say so itself.
    remembers_completions: bool,
    pub(crate) counters: SharedCounters,
    /// How long recent hybrid waits on this tracker's uses lasted.
    pub(crate) wait_history: crate::wait_history::WaitHistory,
}

/// Tracker ids: 64-bit, so they never wrap (2^64 trackers would take
/// centuries at a billion a second).
static NEXT_TRACKER_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl<M: SignalMemory> Shared<M> {
    /// The shared state of a new tracker on `memory`, which answers from
    /// what it knows of completions if `remembers_completions` (else only
    /// loads prove them, as in CLR's original design).
    pub fn new(memory: Arc<M>, remembers_completions: bool) -> Self {
        Self {
            id: NEXT_TRACKER_ID.fetch_add(1, core::sync::atomic::Ordering::Relaxed),
            memory,
            directory: Directory::default(),
            next_key: Mutex::new(0),
            retired_through: AtomicU64::new(0),
            returns: AtomicUsize::new(0),
            failures: Failures::new(),
            remembers_completions,
            counters: SharedCounters::default(),
            wait_history: crate::wait_history::WaitHistory::new(),
        }
    }

    /// Takes ownership of a new signal under the next key and returns its
    /// cell, which the caller keeps in its own [`Table`](crate::keys::Table).
    /// Fails only once 2^32 signals were adopted.
    pub fn adopt(
        &self,
        signal: M::Signal,
        placement: Placement,
    ) -> Result<Arc<Cell<M::Signal>>, AllocError> {
        let mut next = self.next_key.lock();
        let key = *next;
        let Some(after) = key.checked_add(1) else {
            return Err(AllocError::OutOfMemory(
                "a tracker adopts at most 2^32 signals (its tickets' slots are 32-bit)".into(),
            ));
        };
        let cell = Arc::new(Cell::new(signal, placement, CellKey(key)));
        let inserted = self.directory.insert(key, cell.clone());
        debug_assert!(inserted, "each key is handed out once");
        *next = after;
        registry::register(self.memory.packet_handle(signal));
        Ok(cell)
    }

    /// The cell of `key`: one this `Shared` adopted (a signal reference's,
    /// a checked ticket's).
    ///
    /// # Panics
    /// For a key no cell was adopted under, which only a bug here makes.
    #[inline]
    pub fn cell(&self, key: CellKey) -> &Cell<M::Signal> {
        self.directory
            .get(key.0)
            .expect("a key this tracker handed out names a cell")
    }

    /// The key of the cell `ticket` names, if the ticket is one this
    /// tracker issued, unchanged (see [`cell_of`](Self::cell_of)).
    #[inline]
    pub fn key_of(&self, ticket: &Ticket) -> Option<CellKey> {
        self.cell_of(ticket).map(|cell| cell.key)
    }

    /// The cell `ticket` names, if the ticket is one this tracker issued,
    /// unchanged: its tracker is this one, its slot holds a cell, and that
    /// cell either serves the ticket's use, labelled as the ticket says
    /// (its generation, timed only if it is), or serves a later use, the
    /// ticket's having retired before (every use up to
    /// [`retired_through`](Self::retired_through) has). Anything else — a
    /// made-up or altered ticket, a use not issued yet, another tracker's —
    /// is refused. A retired use's ticket answers from what is known of its
    /// sequence number alone (its outcome, its kept stamps), so no field of
    /// it that can no longer be checked can change an answer. Takes no lock.
    pub(crate) fn cell_of(&self, ticket: &Ticket) -> Option<&Cell<M::Signal>> {
        if ticket.tracker != self.id || !ticket.is_well_formed() {
            return None;
        }
        let cell = self.directory.get(ticket.slot)?;
        // A use retired already: what a tracker that remembers completions
        // answers of it comes from its sequence number alone, never from a
        // cell, so one load settles it. (One that answers from loads of the
        // cell, CLR's design, also needs the cell to have served it.)
        if ticket.seq <= self.retired_through() {
            let served = self.remembers_completions
                || unpack(cell.state.load(Ordering::Acquire)).0 >= ticket.seq;
            return served.then_some(&**cell);
        }
        let (serving, _) = unpack(cell.state.load(Ordering::Acquire));
        if serving == ticket.seq {
            if cell.label_fits(ticket) {
                return Some(cell);
            }
            // A label that does not fit is the ticket's fault, unless the
            // cell moved on to a later use meanwhile (whose label it read).
            if unpack(cell.state.load(Ordering::Acquire)).0 == ticket.seq {
                return None;
            }
        } else if serving < ticket.seq {
            return None; // never this cell's (yet)
        }
        // The cell serves a later use: the ticket's retired before it did,
        // and said so before the cell moved on (a genuine ticket's use is
        // retired by now), or the ticket names a cell its use never had.
        (ticket.seq <= self.retired_through()).then_some(&**cell)
    }

    /// Every use up to this one is retired and reclaimed.
    pub fn retired_through(&self) -> u64 {
        self.retired_through.load(Ordering::Acquire)
    }

    /// Every use up to `seq` is retired and reclaimed (the owner only, in
    /// increasing order, before any of their signals serves a later use).
    pub fn publish_retired_through(&self, seq: u64) {
        self.retired_through.store(seq, Ordering::Release);
    }

    /// Records that use `seq` failed. The owner calls it when it reclaims
    /// a failed use, before the cell can serve another use, so a ticket
    /// asked about later still answers `Failed`.
    pub fn record_failure(&self, seq: u64) {
        self.failures.record(seq);
    }

    /// The bytes the record of failures takes on the heap.
    #[cfg(all(test, not(sigretire_loom)))]
    pub(crate) fn failure_record_bytes(&self) -> usize {
        self.failures.bytes()
    }

    /// Entries of the record of failures examined so far by lookups on
    /// this thread.
    #[cfg(all(test, not(sigretire_loom)))]
    pub(crate) fn failure_entries_scanned(&self) -> usize {
        crate::failures::scanned()
    }

    /// The outcome of a use known to be retired.
    pub fn outcome_of_retired(&self, seq: u64) -> Status {
        if self.failures.failed(seq) {
            Status::Failed
        } else {
            Status::Complete
        }
    }

    /// What is known about use `seq` of `cell` without reading signal memory.
    pub fn known_status(&self, seq: u64, cell: &Cell<M::Signal>) -> Option<Status> {
        if self.remembers_completions && seq <= self.retired_through() {
            return Some(self.outcome_of_retired(seq));
        }
        match cell.phase_of(seq)? {
            Some(Status::Complete) if !self.remembers_completions => None,
            Some(status) => Some(status),
            // The cell serves a later use: this one retired.
            None => Some(self.outcome_of_retired(seq)),
        }
    }

    /// What is known about use `seq`, loading its signal once if the host
    /// state does not say. A load of 0 is a proof of completion (recorded in
    /// the cell, so the tracker retires the use without a load of its own); a
    /// negative value is a queue error.
    pub(crate) fn poll(&self, seq: u64, cell: &Cell<M::Signal>) -> Status {
        if let Some(status) = self.known_status(seq, cell) {
            return status;
        }
        self.counters.load(cell.placement);
        // SAFETY: the cell's signal came from `self.memory`, which `self` keeps alive.
        let value = unsafe { self.memory.load(cell.signal) };
        self.observe(seq, cell, value)
    }

    /// Turns a value loaded from `cell`'s signal while it served `seq` (or a
    /// later use) into a status.
    pub(crate) fn observe(&self, seq: u64, cell: &Cell<M::Signal>, value: i64) -> Status {
        // The load saw the arming for `seq` or a later store: the tracker arms a
        // signal before it issues a ticket, and re-arms only retired uses. So 0
        // means `seq` completed (or a later use did, after `seq` retired).
        if value == 0 {
            if cell.complete(seq) {
                self.counters
                    .retired_by_cpu_wait
                    .fetch_add(1, Ordering::Relaxed);
            }
            return self.known_status(seq, cell).unwrap_or(Status::Complete);
        }
        if value < 0 && cell.fail(seq) {
            self.counters.failed.fetch_add(1, Ordering::Relaxed);
            return Status::Failed;
        }
        self.known_status(seq, cell).unwrap_or(Status::Pending)
    }

    /// Takes the "a holder let go" hints; true if there were any.
    pub(crate) fn take_returns(&self) -> bool {
        self.returns.swap(0, Ordering::Acquire) != 0
    }

    /// Marks `cell` parked. Returns false if its holders already let go, in
    /// which case the caller re-arms it at once instead.
    pub(crate) fn park(&self, cell: &Cell<M::Signal>) -> bool {
        // The flag and the count share one word: either this RMW comes after
        // the last holder's decrement (and sees no holders), or that decrement
        // comes after it (and sees the flag, and leaves a hint). Never neither,
        // so no parked signal is forgotten.
        let before = cell.holds.fetch_or(PARKED, Ordering::AcqRel);
        if before & !PARKED == 0 {
            cell.holds.fetch_and(!PARKED, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Clears the parked flag of a cell whose holders let go.
    pub(crate) fn unpark(&self, cell: &Cell<M::Signal>) {
        cell.holds.fetch_and(!PARKED, Ordering::Relaxed);
    }

    /// Drops one reference on `cell`.
    pub(crate) fn release(&self, cell: &Cell<M::Signal>) {
        // Release: the holder's reads of the signal happen before the re-arm
        // that follows the tracker's Acquire of the count.
        if cell.holds.fetch_sub(1, Ordering::AcqRel) == PARKED | 1 {
            self.returns.fetch_add(1, Ordering::Release);
        }
    }
}

impl<M: SignalMemory> Drop for Shared<M> {
    fn drop(&mut self) {
        // Nothing can name these signals any more: every reference, pin and
        // waiter holds this `Shared`.
        for cell in self.directory.cells() {
            registry::unregister(self.memory.packet_handle(cell.signal));
        }
    }
}

/// A counted reference to the signal of one use: it keeps the signal from
/// being re-armed until dropped, from any thread, without the tracker's lock.
///
/// Events, async handlers and GPU waiters (through [`Pin`](crate::Pin)) hold
/// one. Its status and timestamps are answered from host memory whenever the
/// tracker already knows them.
///
/// ```
/// use sigretire_tracker::{Purpose, Request, Status, Tracker};
/// use sigretire_sim::backend as sim_backend;
///
/// let (mut tracker, queue) = sim_backend::stepped_tracker(Default::default()).unwrap();
/// let index = queue.reserve().unwrap();
/// let acquired = tracker.acquire(Request::packet(index).barrier(true).purpose(Purpose::Event)).unwrap();
/// let event = tracker.hold(&acquired.ticket).unwrap().expect("pending use");
/// sim_backend::submit_barrier(&queue, index, acquired.signal);
/// queue.run_until_idle();
/// // The event's holder learns completion from one load, from any thread.
/// assert_eq!(std::thread::spawn(move || event.status()).join().unwrap(), Status::Complete);
/// ```
pub struct SignalRef<M: SignalMemory> {
    shared: Arc<Shared<M>>,
    cell: CellKey,
    seq: u64,
}

impl<M: SignalMemory> SignalRef<M> {
    /// Takes a new reference on `cell` (one of `shared`'s, found by the
    /// caller) for use `seq` (the tracker's owner only).
    #[inline]
    pub(crate) fn new(shared: &Arc<Shared<M>>, cell: &Cell<M::Signal>, seq: u64) -> Self {
        cell.add_hold();
        Self {
            shared: shared.clone(),
            cell: cell.key,
            seq,
        }
    }

    fn cell(&self) -> &Cell<M::Signal> {
        self.shared.cell(self.cell)
    }

    /// The sequence number of the use this reference was taken for.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The value for a packet field that names this signal.
    pub fn packet_handle(&self) -> u64 {
        self.shared.memory.packet_handle(self.cell().signal)
    }

    /// Where the signal lives.
    pub fn placement(&self) -> Placement {
        self.cell().placement
    }

    /// What is known without reading signal memory.
    pub fn known_status(&self) -> Option<Status> {
        self.shared.known_status(self.seq, self.cell())
    }

    /// The use's status, loading the signal at most once.
    pub fn status(&self) -> Status {
        self.shared.poll(self.seq, self.cell())
    }

    /// The use's timestamps once the tracker harvested them (no signal
    /// read): the retiring tracker as it retires the use or answers its
    /// ticket's [`timestamps`](crate::Tracker::timestamps); the baseline
    /// when it answers that, or when the use's slot moves on. `None` before,
    /// and for a use nothing stamped.
    pub fn timestamps(&self) -> Option<Timestamps> {
        self.cell().stamps(self.seq)
    }

    /// [`known_status`](Self::known_status), else [`status`](Self::status)
    /// (one load at most), and, where that says complete,
    /// [`timestamps`](Self::timestamps): what an event's elapsed time asks,
    /// with one look-up of the cell instead of two.
    pub fn status_and_timestamps(&self) -> (Status, Option<Timestamps>) {
        let cell = self.cell();
        let status = self
            .shared
            .known_status(self.seq, cell)
            .unwrap_or_else(|| self.shared.poll(self.seq, cell));
        let stamps = match status {
            Status::Complete => cell.stamps(self.seq),
            _ => None,
        };
        (status, stamps)
    }

    /// What the tracker harvested for the use (no signal read): `None`
    /// before the harvest, `Some(None)` once it found nothing stamped the
    /// use (a queue without profiling), `Some(Some(stamps))` after it read
    /// them.
    pub fn harvest(&self) -> Option<Option<Timestamps>> {
        self.cell().harvest_of(self.seq)
    }

    pub(crate) fn shared(&self) -> &Arc<Shared<M>> {
        &self.shared
    }

    pub(crate) fn cell_ptr(&self) -> CellKey {
        self.cell
    }
}

impl<M: SignalMemory> Clone for SignalRef<M> {
    fn clone(&self) -> Self {
        self.cell().add_hold();
        Self {
            shared: self.shared.clone(),
            cell: self.cell,
            seq: self.seq,
        }
    }
}

impl<M: SignalMemory> Drop for SignalRef<M> {
    fn drop(&mut self) {
        self.shared.release(self.cell());
    }
}

impl<M: SignalMemory> fmt::Debug for SignalRef<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignalRef")
            .field("seq", &self.seq)
            .field("cell", &self.cell)
            .finish()
    }
}

/// A `Shared` over host memory with `count` cells, signal `i` in cell `i`,
/// for unit tests that need real cells (this module's, the ring's, the
/// proofs', the wait loop's). The `Shared` owns the cells: keep it alive
/// while they are used.
#[cfg(all(test, not(sigretire_loom)))]
pub(crate) fn host_cells(
    count: usize,
    remembers_completions: bool,
) -> (Shared<crate::backend::HostMemory>, Vec<CellKey>) {
    let shared = Shared::new(
        Arc::new(crate::backend::HostMemory::new(count)),
        remembers_completions,
    );
    let mut signals = Vec::new();
    shared
        .memory
        .allocate(count, Placement::Host, &mut signals)
        .expect("the memory holds exactly `count` signals");
    let cells = signals
        .into_iter()
        .map(|(signal, placement)| shared.adopt(signal, placement).expect("few").key)
        .collect();
    (shared, cells)
}

/// [`host_cells`], as the tracker's own references to them (what its ring
/// and spares hold); signal `i` under key `i`.
#[cfg(all(test, not(sigretire_loom)))]
pub(crate) fn host_cell_refs(
    count: usize,
) -> (Shared<crate::backend::HostMemory>, Vec<Arc<Cell<usize>>>) {
    let (shared, keys) = host_cells(count, true);
    let cells = keys
        .into_iter()
        .map(|key| {
            shared
                .directory
                .get(key.0)
                .expect("adopted just now")
                .clone()
        })
        .collect();
    (shared, cells)
}

// Not under loom: the tests use std threads and atomics outside a model.
#[cfg(all(test, not(sigretire_loom)))]
mod tests;
