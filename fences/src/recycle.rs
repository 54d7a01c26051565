//! What a warm queue reuses instead of allocating: the status cells of its
//! commands, the entry buffers of its batches, and the boxes of its
//! completion-thread jobs.
//!
//! A launch needs a status cell that its batch's completion and the user's
//! command handle share, and every closed batch needs a buffer and a job
//! box. Allocating those on each launch would put the allocator on the
//! submit path, the one cost the tracker below keeps at zero. Each kind is a
//! [`Pool`] instead: a bounded stack behind its own lock, taken from under
//! the execution lock and given back by whoever lets go last.
//!
//! A status cell goes back only when it is provably unshared
//! ([`Arc::get_mut`]): by the batch's completion if the user already dropped
//! the command, or by the command's drop if its batch already completed.
//! When both let go at the same moment neither may see it unshared; the
//! cell is then freed, never reused while referenced.

use crate::sync::{Arc, Mutex};

/// At most this many of each kind are kept per queue, so a burst does not
/// pin its memory for the queue's life.
pub(crate) const POOL_BOUND: usize = 4096;

/// A bounded stack of reusable values.
#[derive(Debug)]
pub(crate) struct Pool<X> {
    items: Mutex<Vec<X>>,
}

impl<X> Default for Pool<X> {
    fn default() -> Self {
        Self {
            items: Mutex::new(Vec::new()),
        }
    }
}

impl<X> Pool<X> {
    /// One value, if the pool has one.
    pub(crate) fn take(&self) -> Option<X> {
        self.items.lock().pop()
    }

    /// Moves every pooled value into `spare` (which must be empty) in one
    /// lock: the two vectors trade places, so neither gives up its capacity.
    pub(crate) fn take_all_into(&self, spare: &mut Vec<X>) {
        debug_assert!(spare.is_empty());
        core::mem::swap(&mut *self.items.lock(), spare);
    }

    /// Keeps `item` for reuse, or drops it if the pool is full.
    pub(crate) fn give(&self, item: X) {
        let mut items = self.items.lock();
        if items.len() < POOL_BOUND {
            items.push(item);
        }
    }

    /// Keeps each of `items` (one lock for all), dropping what does not fit.
    pub(crate) fn give_all(&self, items: impl IntoIterator<Item = X>) {
        let mut pooled = self.items.lock();
        for item in items {
            if pooled.len() < POOL_BOUND {
                pooled.push(item);
            }
        }
    }

    #[cfg(all(test, not(sigretire_loom)))]
    pub(crate) fn len(&self) -> usize {
        self.items.lock().len()
    }
}

impl<X> Pool<Arc<X>> {
    /// An unshared `Arc` holding `value`: a pooled one, refilled, when the
    /// pool has one (no allocation), else a new one.
    pub(crate) fn fresh(&self, value: X) -> Arc<X> {
        match self.take() {
            // The pool keeps only unshared values, so this always succeeds;
            // a new one is the safe answer if it ever did not.
            Some(mut pooled) => match Arc::get_mut(&mut pooled) {
                Some(slot) => {
                    *slot = value;
                    pooled
                }
                None => Arc::new(value),
            },
            None => Arc::new(value),
        }
    }

    /// Keeps `arc` for reuse if it is the last reference to its value, else
    /// only lets go of it.
    pub(crate) fn keep_if_last(&self, mut arc: Arc<X>) {
        if Arc::get_mut(&mut arc).is_some() {
            self.give(arc);
        }
    }

    /// As [`keep_if_last`](Self::keep_if_last), for a reference the caller
    /// cannot move out of (a field, in a `Drop`): the pool takes a second
    /// reference, and the caller's, which goes a moment later, must not be
    /// read again. Until it goes the value is shared, and [`fresh`]
    /// (Self::fresh) does not reuse it.
    pub(crate) fn keep_if_last_in_place(&self, arc: &mut Arc<X>) {
        if Arc::get_mut(arc).is_some() {
            self.give(arc.clone());
        }
    }

    /// Keeps, in one lock, those of `arcs` that are the last references to
    /// their values.
    pub(crate) fn keep_all_if_last(&self, arcs: impl IntoIterator<Item = Arc<X>>) {
        self.give_all(
            arcs.into_iter()
                .filter_map(|mut arc| Arc::get_mut(&mut arc).is_some().then_some(arc)),
        );
    }
}

/// Values handed out under a lock that is already held (the execution
/// lock), refilled from a shared [`Pool`] a whole pool at a time (the two
/// vectors trade places), so taking one takes no second lock.
#[derive(Debug)]
pub(crate) struct Stash<X> {
    spare: Vec<Arc<X>>,
    pool: Arc<Pool<Arc<X>>>,
}

impl<X> Stash<X> {
    pub(crate) fn new(pool: Arc<Pool<Arc<X>>>) -> Self {
        Self {
            spare: Vec::new(),
            pool,
        }
    }

    /// An unshared `Arc` holding `value`: a recycled one when there is one.
    pub(crate) fn fresh(&mut self, value: X) -> Arc<X> {
        if self.spare.is_empty() {
            self.pool.take_all_into(&mut self.spare);
        }
        match self.spare.pop() {
            // Pooled values are unshared; a new one if this one was not.
            Some(mut pooled) => match Arc::get_mut(&mut pooled) {
                Some(slot) => {
                    *slot = value;
                    pooled
                }
                None => Arc::new(value),
            },
            None => Arc::new(value),
        }
    }
}

#[cfg(all(test, not(sigretire_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_shared_value_is_never_pooled() {
        let pool = Pool::default();
        let value = Arc::new(7);
        let mut held = value.clone();
        pool.keep_if_last(value);
        assert_eq!(pool.len(), 0, "another holder still has it");
        pool.keep_if_last_in_place(&mut held);
        assert_eq!(pool.len(), 1, "the last holder gives it back");
        // Until the in-place holder lets go, the pooled value is shared.
        let fresh = pool.fresh(8);
        assert!(
            !Arc::ptr_eq(&fresh, &held),
            "a shared value is never reused"
        );
        assert_eq!((*fresh, *held), (8, 7));
        drop(held);
    }

    #[test]
    fn a_stash_takes_the_whole_pool_at_once_and_refills_what_it_reuses() {
        let pool = Arc::new(Pool::default());
        let value = Arc::new(1);
        let address = Arc::as_ptr(&value);
        pool.keep_all_if_last([value, Arc::new(2)]);
        let mut stash = Stash::new(pool.clone());
        let reused = stash.fresh(3);
        assert_eq!(*reused, 3);
        assert_eq!(pool.len(), 0, "the stash took the whole pool at once");
        let second = stash.fresh(4);
        assert!(
            [Arc::as_ptr(&reused), Arc::as_ptr(&second)].contains(&address),
            "pooled values are reused"
        );
        // Empty pool and stash: a new one.
        assert_eq!(*stash.fresh(5), 5);
    }

    #[test]
    fn the_pool_is_bounded() {
        let pool = Pool::default();
        pool.give_all(0..POOL_BOUND + 10);
        pool.give(1);
        assert_eq!(pool.len(), POOL_BOUND);
    }
}
