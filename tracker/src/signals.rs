//! Every host access the tracker makes to signal memory: counted loads,
//! numbered stores, and the store ordering that makes a store visible to
//! the GPU before a packet relies on it.
//!
//! Stores are numbered. A store fence covers every store issued before it,
//! an HDP flush every store fenced before it, so "is this signal's arming
//! visible" is one comparison of its store number with how far fences (and,
//! where packets need them, flushes) have reached. Device memory is
//! write-combined: its stores need a fence before the GPU may see them, and
//! an HDP flush when the packet that relies on them reaches the GPU another
//! way (a queue ring in system memory, or a copy engine). Host memory needs
//! neither.

use crate::backend::{AllocError, Placement, SignalMemory, Timestamps};
use crate::share::{Cell, Shared};
use crate::stats::Accesses;
use crate::sync::Arc;
use arrayvec::ArrayVec;

/// Re-arms stored with one backend call.
pub(crate) const REARM_BATCH: usize = 32;

/// The tracker's view of its signals: the cells it shares with waiters and
/// holders, and the only way it reads or writes signal memory.
pub(crate) struct Signals<M: SignalMemory> {
    shared: Arc<Shared<M>>,
    /// Stores issued so far (the newest store's number).
    stores_issued: u64,
    fenced_through: u64,
    flushed_through: u64,
    /// The queue's ring is in system memory: packets do not follow the signal
    /// stores through the BAR, so an HDP flush must come between them.
    flush_before_publish: bool,
    /// Device stores an AQL packet may rely on with no more work: the fenced
    /// ones, or the flushed ones when packets need a flush too. One number,
    /// so the acquire fast path compares once.
    visible_through: u64,
    accesses: [Accesses; 2],
}

impl<M: SignalMemory> Signals<M> {
    pub(crate) fn new(shared: Arc<Shared<M>>, flush_before_publish: bool) -> Self {
        Self {
            shared,
            stores_issued: 0,
            fenced_through: 0,
            flushed_through: 0,
            flush_before_publish,
            visible_through: 0,
            accesses: [Accesses::default(); 2],
        }
    }

    /// The cells, shared with waiters and signal references.
    #[inline]
    pub(crate) fn shared(&self) -> &Arc<Shared<M>> {
        &self.shared
    }

    /// Takes a new signal from this memory into the cells, under the next
    /// key.
    pub(crate) fn adopt(
        &mut self,
        signal: M::Signal,
        placement: Placement,
    ) -> Result<Arc<Cell<M::Signal>>, AllocError> {
        self.shared.adopt(signal, placement)
    }

    /// What the tracker's own accesses cost, per placement.
    pub(crate) fn accesses(&self) -> [Accesses; 2] {
        self.accesses
    }

    /// The number of the newest store issued (0: none).
    #[inline]
    pub(crate) fn stores_issued(&self) -> u64 {
        self.stores_issued
    }

    /// The queue moved: packets reach the GPU through its ring, in system
    /// memory (`true`) or device memory.
    pub(crate) fn set_flush_before_publish(&mut self, flush: bool) {
        self.flush_before_publish = flush;
        self.update_visible();
    }

    fn update_visible(&mut self) {
        self.visible_through = if self.flush_before_publish {
            self.fenced_through.min(self.flushed_through)
        } else {
            self.fenced_through
        };
    }

    /// Whether an AQL packet may use a signal of `placement` armed by store
    /// `store` without a fence or flush first.
    #[inline]
    pub(crate) fn is_visible(&self, placement: Placement, store: u64) -> bool {
        placement != Placement::Device || store <= self.visible_through
    }

    /// One counted load of a signal.
    #[inline]
    pub(crate) fn load(&mut self, c: &Cell<M::Signal>) -> i64 {
        self.accesses[c.placement.index()].loads += 1;
        // SAFETY: the signal came from this memory's `allocate`, and the
        // memory lives as long as `self.shared`.
        unsafe { self.shared.memory.load(c.signal) }
    }

    /// One counted store; returns its number.
    pub(crate) fn store(&mut self, c: &Cell<M::Signal>, value: i64) -> u64 {
        self.accesses[c.placement.index()].stores += 1;
        self.stores_issued += 1;
        // SAFETY: as in `load`.
        unsafe { self.shared.memory.store(c.signal, value) };
        self.stores_issued
    }

    /// Re-arms `batch`'s signals with one backend call, as one numbered
    /// store (the number its slots recorded). Returns how many.
    pub(crate) fn store_batch(&mut self, batch: &mut RearmBatch<M::Signal>) -> u64 {
        let Some(placement) = batch.placement.take() else {
            return 0;
        };
        if batch.signals.is_empty() {
            return 0;
        }
        let n = batch.signals.len() as u64;
        // SAFETY: every signal came from this memory, kept alive by `self.shared`.
        unsafe { self.shared.memory.store_many(&batch.signals, 1) };
        self.accesses[placement.index()].stores += n;
        self.stores_issued = batch.number;
        batch.signals.clear();
        batch.number += 1;
        n
    }

    /// A batch whose signals will be stored next, as one store.
    pub(crate) fn rearm_batch(&self) -> RearmBatch<M::Signal> {
        RearmBatch {
            signals: ArrayVec::new(),
            placement: None,
            number: self.stores_issued + 1,
        }
    }

    /// Reads a signal's timestamps (two loads, counted as one read).
    pub(crate) fn read_stamps(&mut self, c: &Cell<M::Signal>) -> Option<Timestamps> {
        self.accesses[c.placement.index()].timestamp_reads += 1;
        // SAFETY: the signal came from this memory, which `self.shared` keeps alive.
        unsafe { self.shared.memory.timestamps(c.signal) }
    }

    /// Makes the arming store `store` of a signal of `placement` visible to
    /// the GPU before the packet using it is published: a store fence for
    /// write-combined device memory, plus an HDP flush when the packet
    /// reaches the GPU by another path (a ring in system memory, or a copy
    /// engine).
    #[inline]
    pub(crate) fn make_visible(&mut self, placement: Placement, store: u64, copy_engine: bool) {
        if placement == Placement::Device
            && (store > self.fenced_through
                || ((copy_engine || self.flush_before_publish) && store > self.flushed_through))
        {
            self.fence_and_flush(store, copy_engine);
        }
    }

    /// The slow half of `make_visible`: once per batch of re-arms.
    #[cold]
    #[inline(never)]
    fn fence_and_flush(&mut self, store: u64, copy_engine: bool) {
        let device = Placement::Device.index();
        if store > self.fenced_through {
            if !planted!(SkipStoreFence) {
                self.shared.memory.store_fence();
            }
            self.fenced_through = self.stores_issued;
            self.accesses[device].fences += 1;
        }
        if (copy_engine || self.flush_before_publish) && store > self.flushed_through {
            if !planted!(SkipHdpFlush) {
                self.shared.memory.hdp_flush();
            }
            self.flushed_through = self.fenced_through;
            self.accesses[device].flushes += 1;
        }
        self.update_visible();
    }
}

/// Signals re-armed together: one placement, one store number, one backend
/// call. Fences compare store numbers, so the batch counts as one store.
pub(crate) struct RearmBatch<S> {
    signals: ArrayVec<S, REARM_BATCH>,
    placement: Option<Placement>,
    /// The store number every slot in the batch records.
    number: u64,
}

impl<S> RearmBatch<S> {
    /// The store number the batch's slots record.
    pub(crate) fn number(&self) -> u64 {
        self.number
    }

    /// Starts a batch of `placement`'s signals (the walk checks each use's).
    /// The batch must be empty: its signals are stored with one placement.
    pub(crate) fn begin(&mut self, placement: Placement) {
        debug_assert!(self.signals.is_empty(), "a batch holds one placement");
        self.placement = Some(placement);
    }

    /// A filler that adds signals of the batch's placement after those it
    /// holds, without the check that the batch has room (the walk's inner
    /// loop: its bound already is the room, so the check would be paid per
    /// re-armed signal for nothing). The filler counts in a local and sets
    /// the batch's length once, when dropped: written through the batch's
    /// own length, every push reloaded and stored it, as atomics sit
    /// between the pushes.
    pub(crate) fn filler(&mut self) -> Filler<'_, S> {
        debug_assert!(self.placement.is_some(), "begin the batch first");
        let start = self.signals.len();
        Filler {
            batch: self,
            start,
            filled: 0,
        }
    }

    pub(crate) fn is_full(&self) -> bool {
        self.signals.is_full()
    }

    pub(crate) fn room(&self) -> usize {
        self.signals.remaining_capacity()
    }

    /// Stores issued on their own since the batch began: the next batch
    /// comes after them.
    pub(crate) fn renumber(&mut self, stores_issued: u64) {
        debug_assert!(self.signals.is_empty());
        self.number = stores_issued + 1;
    }
}

/// Adds signals to a [`RearmBatch`]: see [`RearmBatch::filler`].
pub(crate) struct Filler<'a, S> {
    batch: &'a mut RearmBatch<S>,
    /// The batch's length when the filler began.
    start: usize,
    /// Signals written after `start`, not yet counted in the batch.
    filled: usize,
}

impl<S> Filler<'_, S> {
    /// Adds `signal`.
    ///
    /// # Safety
    /// The batch has room: the caller pushes at most
    /// [`room`](RearmBatch::room) signals, asked for before the filler began.
    #[inline(always)]
    pub(crate) unsafe fn push(&mut self, signal: S) {
        let at = self.start + self.filled;
        debug_assert!(at < REARM_BATCH, "pushed past the room asked for");
        // SAFETY: the caller guarantees room, so `at` is below the batch's
        // capacity: the write stays inside its array, into a place past its
        // length (uninitialised, or a value already moved out), which
        // `drop` then counts. Nothing reads or drops it before that.
        unsafe { self.batch.signals.as_mut_ptr().add(at).write(signal) };
        self.filled += 1;
    }
}

impl<S> Drop for Filler<'_, S> {
    fn drop(&mut self) {
        // SAFETY: the places up to `start + filled` hold initialised
        // signals (the first `start` already counted, the rest written by
        // `push`), and `push`'s contract keeps that within the capacity.
        unsafe { self.batch.signals.set_len(self.start + self.filled) };
    }
}

#[cfg(all(test, not(sigretire_loom)))]
mod tests;
