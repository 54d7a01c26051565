//! Publication order: a stream runs work in the order it was enqueued, while
//! a hardware queue's slots may be published in any order once reserved.
//!
//! The tracker reasons in queue-index order (a completed fence proves every
//! earlier index), so the CUDA queue must enqueue publications in index
//! order. [`Reorder`] does that: a publication whose index is next is
//! enqueued at once (the common case: the queue layer reserves and publishes
//! under one lock); one that arrives early is parked, never blocking its
//! thread, and enqueued by whichever thread publishes the index it waits for.
//! As on an AQL queue, a reserved index that is never published stalls
//! everything after it.

use std::collections::BTreeMap;

/// Whether a publication can be enqueued now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Its index is next: enqueue it, then [`Reorder::advance`].
    Now,
    /// An earlier index is still unpublished: [`Reorder::park`] it.
    Later,
}

/// The index was published before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AlreadyPublished(pub(crate) u64);

/// Puts publications in index order.
#[derive(Debug)]
pub(crate) struct Reorder<T> {
    next: u64,
    parked: BTreeMap<u64, T>,
}

impl<T> Reorder<T> {
    /// Order starting at index `first`.
    pub(crate) fn new(first: u64) -> Self {
        Self {
            next: first,
            parked: BTreeMap::new(),
        }
    }

    /// The next index to enqueue: every index before it was enqueued (or
    /// consumed by a failed publication).
    pub(crate) fn next(&self) -> u64 {
        self.next
    }

    /// Publications waiting for an earlier index.
    pub(crate) fn parked(&self) -> usize {
        self.parked.len()
    }

    /// Decides what to do with a publication of `index`.
    pub(crate) fn admit(&self, index: u64) -> Result<Admission, AlreadyPublished> {
        if index < self.next || self.parked.contains_key(&index) {
            return Err(AlreadyPublished(index));
        }
        Ok(if index == self.next {
            Admission::Now
        } else {
            Admission::Later
        })
    }

    /// Records that the next index was enqueued.
    pub(crate) fn advance(&mut self) {
        self.next += 1;
    }

    /// Keeps an early publication until its turn (after [`admit`](Self::admit)
    /// said [`Admission::Later`]).
    pub(crate) fn park(&mut self, index: u64, item: T) {
        debug_assert!(index > self.next);
        self.parked.insert(index, item);
    }

    /// The parked publication whose turn it is, if any: enqueue it, then
    /// [`advance`](Self::advance).
    pub(crate) fn take_ready(&mut self) -> Option<(u64, T)> {
        let item = self.parked.remove(&self.next)?;
        Some((self.next, item))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Publishes `index` the way the queue does, recording what gets enqueued.
    fn publish(order: &mut Reorder<char>, index: u64, item: char, enqueued: &mut Vec<(u64, char)>) {
        match order.admit(index).unwrap() {
            Admission::Later => order.park(index, item),
            Admission::Now => {
                enqueued.push((index, item));
                order.advance();
                while let Some(ready) = order.take_ready() {
                    enqueued.push(ready);
                    order.advance();
                }
            }
        }
    }

    #[test]
    fn in_order_publications_go_straight_through() {
        let (mut order, mut enqueued) = (Reorder::new(0), Vec::new());
        for (i, c) in "abc".chars().enumerate() {
            publish(&mut order, i as u64, c, &mut enqueued);
        }
        assert_eq!(enqueued, [(0, 'a'), (1, 'b'), (2, 'c')]);
        assert_eq!((order.next(), order.parked()), (3, 0));
    }

    #[test]
    fn early_publications_wait_for_the_index_before_them() {
        let (mut order, mut enqueued) = (Reorder::new(10), Vec::new());
        publish(&mut order, 12, 'c', &mut enqueued);
        publish(&mut order, 11, 'b', &mut enqueued);
        assert!(enqueued.is_empty(), "10 is still unpublished");
        assert_eq!(order.parked(), 2);
        publish(&mut order, 10, 'a', &mut enqueued);
        assert_eq!(enqueued, [(10, 'a'), (11, 'b'), (12, 'c')]);
        publish(&mut order, 14, 'e', &mut enqueued);
        assert_eq!(order.parked(), 1, "a gap at 13 holds 14 back");
    }

    #[test]
    fn an_index_is_published_once() {
        let (mut order, mut enqueued) = (Reorder::new(0), Vec::new());
        publish(&mut order, 0, 'a', &mut enqueued);
        publish(&mut order, 2, 'c', &mut enqueued);
        assert_eq!(order.admit(0), Err(AlreadyPublished(0)));
        assert_eq!(order.admit(2), Err(AlreadyPublished(2)));
        assert_eq!(order.admit(1), Ok(Admission::Now));
        assert_eq!(order.admit(3), Ok(Admission::Later));
    }

    #[test]
    fn any_permutation_comes_out_in_order() {
        // Every order of five publications (5! = 120) enqueues 0..5 in order.
        fn permutations(items: Vec<u64>) -> Vec<Vec<u64>> {
            if items.len() <= 1 {
                return vec![items];
            }
            let mut all = Vec::new();
            for i in 0..items.len() {
                let mut rest = items.clone();
                let first = rest.remove(i);
                for mut tail in permutations(rest) {
                    tail.insert(0, first);
                    all.push(tail);
                }
            }
            all
        }
        for permutation in permutations((0..5).collect()) {
            let (mut order, mut enqueued) = (Reorder::new(0), Vec::new());
            for &index in &permutation {
                publish(
                    &mut order,
                    index,
                    char::from(b'a' + index as u8),
                    &mut enqueued,
                );
            }
            let indices: Vec<u64> = enqueued.iter().map(|&(i, _)| i).collect();
            assert_eq!(indices, [0, 1, 2, 3, 4], "published as {permutation:?}");
        }
    }
}
