//! The ring: uses in flight, oldest first, and the armed signals ready for
//! the next ones, bounded by a capacity that grows up to a limit.
//!
//! A slot is a use in flight; the ring's size is how many may be in flight at
//! once. Armed signals wait in one pool per placement, in the order they were
//! re-armed, each tagged with the number of the store that armed it, so the
//! tracker fences only when it hands out a signal whose arming is not yet
//! fenced.

use crate::backend::Placement;
use crate::share::CellPtr;
use std::collections::VecDeque;

/// One use in flight.
#[derive(Clone, Copy)]
pub(crate) struct Use<S> {
    pub(crate) seq: u64,
    /// AQL index (meaningless for copy-engine uses).
    pub(crate) aql: u64,
    pub(crate) cell: CellPtr<S>,
    pub(crate) flags: u8,
    /// Operations that decrement the signal (its arming value).
    pub(crate) ops: u32,
    /// Decrements the signal still expects once the issued part of a failed
    /// submission finished (0: none).
    pub(crate) residual: u32,
}

impl<S> Use<S> {
    pub(crate) const FENCE: u8 = 1;
    pub(crate) const COPY: u8 = 2;
    pub(crate) const TIMED: u8 = 4;
    pub(crate) const HARVESTED: u8 = 8;

    pub(crate) fn is(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// An armed signal and the number of the store that armed it.
pub(crate) struct Armed<S> {
    pub(crate) cell: CellPtr<S>,
    pub(crate) store: u64,
}

pub(crate) struct Ring<S> {
    live: VecDeque<Use<S>>,
    armed: [VecDeque<Armed<S>>; 2],
    capacity: usize,
    limit: usize,
}

impl<S> Ring<S> {
    pub(crate) fn new(capacity: usize, limit: usize) -> Self {
        Self {
            live: VecDeque::with_capacity(capacity),
            armed: [
                VecDeque::with_capacity(capacity),
                VecDeque::with_capacity(capacity),
            ],
            capacity,
            limit,
        }
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.live.len()
    }

    pub(crate) fn is_full(&self) -> bool {
        self.live.len() >= self.capacity
    }

    /// Doubles the capacity, up to the limit. Reserves room for the new uses
    /// now, so pushing them later allocates nothing.
    pub(crate) fn grow(&mut self) -> bool {
        if self.capacity >= self.limit {
            return false;
        }
        self.capacity = (self.capacity * 2).min(self.limit);
        self.live.reserve(self.capacity - self.live.len());
        for pool in &mut self.armed {
            pool.reserve(self.capacity.saturating_sub(pool.len()));
        }
        true
    }

    pub(crate) fn push(&mut self, entry: Use<S>) {
        self.live.push_back(entry);
    }

    pub(crate) fn oldest(&self) -> Option<&Use<S>> {
        self.live.front()
    }

    pub(crate) fn pop_oldest(&mut self) -> Option<Use<S>> {
        self.live.pop_front()
    }

    /// The use with sequence number `seq`, if it is in flight. Uses are
    /// numbered consecutively, so this is an index, not a search.
    pub(crate) fn get(&self, seq: u64) -> Option<&Use<S>> {
        let first = self.live.front()?.seq;
        self.live
            .get(usize::try_from(seq.checked_sub(first)?).ok()?)
    }

    pub(crate) fn get_mut(&mut self, seq: u64) -> Option<&mut Use<S>> {
        let first = self.live.front()?.seq;
        self.live
            .get_mut(usize::try_from(seq.checked_sub(first)?).ok()?)
    }

    pub(crate) fn uses(&self) -> impl DoubleEndedIterator<Item = &Use<S>> + ExactSizeIterator {
        self.live.iter()
    }

    pub(crate) fn take_armed(&mut self, placement: Placement) -> Option<Armed<S>> {
        self.armed[placement.index()].pop_front()
    }

    pub(crate) fn put_armed(&mut self, placement: Placement, armed: Armed<S>) {
        self.armed[placement.index()].push_back(armed);
    }

    pub(crate) fn armed(&self, placement: Placement) -> usize {
        self.armed[placement.index()].len()
    }
}
