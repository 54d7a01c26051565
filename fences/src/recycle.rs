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
//! Every holder lets go through the pool ([`Pool::keep_if_last`],
//! [`Pool::keep_all_if_last`]), and one that finds the value still shared
//! drops its reference under the pool's lock, after looking again there:
//! of two holders letting go at the same moment, the second to take the
//! lock sees the first's reference gone and keeps the value. So a cell is
//! never lost to that race (a pool only grows when more cells are out at
//! once than ever before), and never reused while referenced.

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
    /// only lets go of it. Where another reference is seen, it is looked at
    /// again and dropped under the pool's lock: a second holder letting go
    /// at the same moment (through this pool, as every holder does) then
    /// sees this one gone and keeps the value, rather than both dropping
    /// theirs and the value being freed.
    pub(crate) fn keep_if_last(&self, mut arc: Arc<X>) {
        if Arc::get_mut(&mut arc).is_some() {
            // The last reference: no other holder is letting go.
            self.give(arc);
            return;
        }
        let mut items = self.items.lock();
        if Arc::get_mut(&mut arc).is_some() && items.len() < POOL_BOUND {
            items.push(arc);
        } else {
            drop(arc);
        }
        drop(items);
    }

    /// Keeps, in one lock, those of `arcs` that are the last references to
    /// their values; the others are dropped under that lock (as
    /// [`keep_if_last`](Self::keep_if_last) does).
    pub(crate) fn keep_all_if_last(&self, arcs: impl IntoIterator<Item = Arc<X>>) {
        let mut items = self.items.lock();
        for mut arc in arcs {
            if Arc::get_mut(&mut arc).is_some() && items.len() < POOL_BOUND {
                items.push(arc);
            } else {
                drop(arc);
            }
        }
        drop(items);
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

    /// The values it holds, not counting its pool's.
    #[cfg(all(test, feature = "sim", not(sigretire_loom)))]
    pub(crate) fn len(&self) -> usize {
        self.spare.len()
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
        let address = Arc::as_ptr(&value);
        let held = value.clone();
        pool.keep_if_last(value);
        assert_eq!(pool.len(), 0, "another holder still has it");
        pool.keep_if_last(held);
        assert_eq!(pool.len(), 1, "the last holder gives it back");
        let fresh = pool.fresh(8);
        assert_eq!(Arc::as_ptr(&fresh), address, "and it is reused");
        assert_eq!(*fresh, 8);
    }

    /// A command's handle and its batch's completion may let go of the
    /// status cell at the same moment, on two threads: each used to see the
    /// other's reference, both dropped theirs, and the cell was freed (a
    /// later launch allocating its replacement). Every round here is such a
    /// pair, the two threads starting it together: every value must come
    /// back.
    #[test]
    fn two_holders_letting_go_at_once_keep_the_value() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        const ROUNDS: usize = POOL_BOUND;
        let pool = Pool::default();
        let arrived = AtomicUsize::new(0);
        // Both threads arrive, then both let go: no sleeping barrier, so
        // the two are at once as often as the cores allow.
        let together = |round: usize| {
            arrived.fetch_add(1, Ordering::AcqRel);
            while arrived.load(Ordering::Acquire) < 2 * (round + 1) {
                std::hint::spin_loop();
            }
        };
        let (mine, theirs): (Vec<_>, Vec<_>) = (0..ROUNDS)
            .map(|round| {
                let value = Arc::new(round);
                (value.clone(), value)
            })
            .unzip();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for (round, value) in theirs.into_iter().enumerate() {
                    together(round);
                    pool.keep_if_last(value);
                }
            });
            for (round, value) in mine.into_iter().enumerate() {
                together(round);
                // Both ways a holder lets go: alone, and with a batch.
                if round % 2 == 0 {
                    pool.keep_if_last(value);
                } else {
                    pool.keep_all_if_last([value]);
                }
            }
        });
        assert_eq!(pool.len(), ROUNDS, "a value was freed, not kept");
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
        for item in 0..POOL_BOUND + 10 {
            pool.give(item);
        }
        assert_eq!(pool.len(), POOL_BOUND);
        let shared = Pool::default();
        shared.keep_all_if_last((0..POOL_BOUND + 10).map(Arc::new));
        shared.keep_if_last(Arc::new(1));
        assert_eq!(shared.len(), POOL_BOUND);
    }
}
