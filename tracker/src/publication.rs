//! How the packet that completes a use is published: the tracker's record
//! and the packet's header come from this one value.
//!
//! A tracker proves retirement from what it recorded about a use: its AQL
//! index and whether its packet carries the barrier bit (a fence, whose
//! completion proves every earlier packet complete). If the packet were
//! published with another barrier bit than the one recorded, a fence the
//! tracker trusts would not be one, and it would report unfinished work
//! complete and re-arm signals still in flight. So the tracker hands out a
//! [`Publication`] with every use, and
//! [`HardwareQueue::publish`](crate::backend::HardwareQueue::publish) takes nothing
//! else: only the tracker can make one that names its completion signal.
//! A caller's own signal goes out as [`Publication::untracked`], with any
//! header; a queue refuses that for a signal a live tracker owns
//! ([`QueueError::check_single`](crate::backend::QueueError::check_single), every
//! backend's first check), so the barrier bit published with a tracker's
//! signal is always the one its tracker recorded.
//!
//! A publication also carries the queue generation its use was acquired
//! in: its index was reserved on that generation's hardware queue, and
//! [`Tracker::publish`](crate::Tracker::publish) refuses it on another
//! ([`PublishError::Stale`](crate::PublishError::Stale)).

use crate::ticket::Generation;

/// What a packet completing a use is published with: its AQL index, the
/// barrier bit the tracker recorded, and the completion signal. Made by
/// [`Tracker::acquire`](crate::Tracker::acquire) (in
/// [`Acquired::publication`](crate::Acquired::publication)); a packet that
/// completes no use gets [`Publication::unsignalled`].
///
/// ```
/// use sigretire_tracker::backend::HardwareQueue;
/// use sigretire_tracker::{Request, Tracker, Work};
/// use sigretire_sim::backend as sim_backend;
///
/// let (mut tracker, queue) = sim_backend::stepped_tracker(Default::default())?;
/// let index = queue.reserve()?;
/// let acquired = tracker.acquire(Request::packet(index).barrier(true))?;
/// let publication = acquired.publication;
/// assert_eq!((publication.index(), publication.barrier()), (index, true));
/// assert_eq!(publication.completion(), acquired.signal);
/// queue.publish(publication, Work::Kernel(0))?; // the header says what the tracker recorded
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Publication {
    index: u64,
    completion: u64,
    /// Who made it, and for which hardware queue: its tracker's tag above
    /// the queue generation its use was acquired in (see [`origin`]); 0
    /// when no tracker made it.
    origin: u64,
    ops: u32,
    /// [`BARRIER`], [`COPY`], [`NOT_LAST`]: one byte, so a use's
    /// publication costs the hot path one store for all three (and for a
    /// use of one AQL packet, the byte is its barrier bit as it comes).
    flags: u8,
}

/// The packet carries the barrier bit (the bit a request's fence flag
/// has).
const BARRIER: u8 = 1;
/// A copy engine completes the use, not an AQL packet.
const COPY: u8 = 2;
/// Not the use's last operation: one that finishes before its last, in an
/// in-order queue.
const NOT_LAST: u8 = 4;

const _: () = assert!(BARRIER == crate::ticket::flag::FENCE);

/// What a tracker's publications carry to say they are its own and which
/// generation they were made in: `tag << 32 | generation`, where the tag is
/// the tracker's id folded into 32 bits and never 0 (ids are 64-bit; two
/// trackers' tags meet only 2^32 - 1 trackers apart). The tracker works it
/// out once per generation, so a use's publication costs one more store.
pub(crate) const fn origin(tracker: u64, generation: Generation) -> u64 {
    (tag(tracker) as u64) << 32 | generation.value() as u64
}

/// Tracker `tracker`'s tag: its id folded into 1..=u32::MAX.
const fn tag(tracker: u64) -> u32 {
    (tracker.wrapping_sub(1) % (u32::MAX as u64) + 1) as u32
}

const fn flags(barrier: bool, copy: bool, last: bool) -> u8 {
    (if barrier { BARRIER } else { 0 })
        | (if copy { COPY } else { 0 })
        | if last { 0 } else { NOT_LAST }
}

impl Publication {
    /// A use's: `index` is its last packet's (of `ops`), `completion` its
    /// signal's packet handle; `origin`, its tracker's [`origin`].
    #[inline]
    pub(crate) const fn of_use(
        index: u64,
        barrier: bool,
        completion: u64,
        ops: u32,
        origin: u64,
    ) -> Self {
        Self {
            index,
            completion,
            origin,
            ops,
            flags: flags(barrier, false, true),
        }
    }

    /// A copy-engine use's: its signal is decremented by the copy engine,
    /// not by an AQL packet, so no AQL queue accepts it.
    #[inline]
    pub(crate) const fn of_copy(completion: u64, ops: u32, origin: u64) -> Self {
        Self {
            index: 0,
            completion,
            origin,
            ops,
            flags: flags(false, true, true),
        }
    }

    /// Whether tracker `tracker` made it (a publication no tracker made is
    /// nobody's).
    pub(crate) const fn made_by(&self, tracker: u64) -> bool {
        (self.origin >> 32) as u32 == tag(tracker)
    }

    /// A packet that completes no use (an empty packet filling a reserved
    /// slot, a wait whose completion nobody asks about): any barrier bit.
    ///
    /// ```
    /// # use sigretire_tracker::backend::Publication;
    /// let filler = sigretire_tracker::backend::Publication::unsignalled(7, true);
    /// assert_eq!((filler.index(), filler.barrier(), filler.completion()), (7, true, 0));
    /// ```
    pub const fn unsignalled(index: u64, barrier: bool) -> Self {
        Self {
            index,
            completion: 0,
            origin: 0,
            ops: 1,
            flags: flags(barrier, false, true),
        }
    }

    /// A packet completing a signal no tracker handed out: the caller's
    /// own, which no tracker's record can disagree with. Never a tracker's
    /// signal: publish those with the
    /// [`Acquired::publication`](crate::Acquired::publication) the tracker
    /// handed out with them; a queue refuses an untracked publication of a
    /// signal a live tracker owns
    /// ([`QueueError::check_single`](crate::backend::QueueError::check_single)).
    ///
    /// ```
    /// # use sigretire_tracker::backend::Publication;
    /// let own = sigretire_tracker::backend::Publication::untracked(3, false, 0x1000);
    /// assert_eq!((own.index(), own.barrier(), own.completion()), (3, false, 0x1000));
    /// ```
    pub const fn untracked(index: u64, barrier: bool, completion: u64) -> Self {
        Self {
            index,
            completion,
            origin: 0,
            ops: 1,
            flags: flags(barrier, false, true),
        }
    }

    /// The AQL index of the packet (for a use of several operations, of the
    /// last: see [`operations`](Self::operations)).
    pub const fn index(&self) -> u64 {
        self.index
    }

    /// The queue generation its use was acquired in, whose hardware queue
    /// its index was reserved on; `None` for a publication no tracker made.
    /// [`Tracker::publish`](crate::Tracker::publish) refuses one of an
    /// earlier generation than the tracker's.
    pub const fn generation(&self) -> Option<Generation> {
        if self.origin == 0 {
            None
        } else {
            Some(Generation::new(self.origin as u32, 32))
        }
    }

    /// Whether the packet carries the barrier bit.
    pub const fn barrier(&self) -> bool {
        self.flags & BARRIER != 0
    }

    /// The packet's `completion_signal` (a packet handle; 0: none).
    pub const fn completion(&self) -> u64 {
        self.completion
    }

    /// How many packets decrement the signal (a use of several operations).
    pub const fn ops(&self) -> u32 {
        self.ops
    }

    /// Whether the use runs on a copy engine (no AQL packet completes it).
    pub const fn is_copy(&self) -> bool {
        self.flags & COPY != 0
    }

    /// Whether this is the use's last operation (or its only one). A
    /// backend whose completion is a write rather than a decrement (a CUDA
    /// stream's) completes the signal with this one only.
    pub const fn is_last_operation(&self) -> bool {
        self.flags & NOT_LAST == 0
    }

    /// The packets of the use, oldest first, one per operation, each
    /// naming the signal once: indices `index - ops + 1 ..= index`, each
    /// with the recorded barrier bit. A use of one operation is its own.
    ///
    /// ```
    /// use sigretire_tracker::backend::HardwareQueue;
    /// use sigretire_tracker::{Request, Tracker, Work};
    /// use sigretire_sim::backend as sim_backend;
    ///
    /// let (mut tracker, queue) = sim_backend::stepped_tracker(Default::default())?;
    /// let first = queue.reserve()?;
    /// let last = queue.reserve()?; // a copy split in two, one signal
    /// let acquired = tracker.acquire(Request::packet(last).ops(2).barrier(true))?;
    /// let parts: Vec<_> = acquired.publication.operations().collect();
    /// assert_eq!(parts.iter().map(|p| p.index()).collect::<Vec<_>>(), [first, last]);
    /// for part in parts {
    ///     queue.publish(part, Work::Kernel(0))?;
    /// }
    /// queue.run_until_idle();
    /// assert!(tracker.query(&acquired.ticket)?.is_done());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn operations(self) -> impl ExactSizeIterator<Item = Publication> {
        let first = self.index.wrapping_sub(u64::from(self.ops) - 1);
        let ops = self.ops;
        (0..ops).map(move |k| Publication {
            index: first.wrapping_add(u64::from(k)),
            ops: 1,
            flags: (self.flags & !NOT_LAST) | if k + 1 == ops { 0 } else { NOT_LAST },
            ..self
        })
    }

    /// Whether it names a completion signal but no tracker made it
    /// ([`untracked`](Self::untracked)).
    pub(crate) const fn names_signal_untracked(&self) -> bool {
        self.origin == 0 && self.completion != 0
    }

    /// A copy-engine use's operations as packets of an AQL queue that
    /// stands in for its copy engine (a test's, a simulated engine): one
    /// per operation, at `first_index` on, oldest first, each naming the
    /// use's signal, none with the barrier bit (the tracker proves nothing
    /// from a copy engine's work, and recorded none). `None` for a use
    /// that is not a copy engine's: an AQL use is published as its
    /// [`operations`](Self::operations).
    ///
    /// ```
    /// use sigretire_tracker::backend::HardwareQueue;
    /// use sigretire_tracker::{Request, Status, Tracker, Work};
    /// use sigretire_sim::backend as sim_backend;
    ///
    /// let (mut tracker, queue) = sim_backend::stepped_tracker(Default::default())?;
    /// let engine = queue.sim().create_queue(Default::default())?; // stands in for SDMA
    /// let copy = tracker.acquire(Request::copy_engine().ops(2))?;
    /// let first = engine.reserve()?;
    /// engine.reserve()?;
    /// for packet in copy.publication.copy_engine_packets(first).expect("a copy-engine use") {
    ///     engine.publish(packet, Work::Kernel(0))?;
    /// }
    /// engine.run_until_idle();
    /// assert_eq!(tracker.query(&copy.ticket)?, Status::Complete);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn copy_engine_packets(
        self,
        first_index: u64,
    ) -> Option<impl ExactSizeIterator<Item = Publication>> {
        if !self.is_copy() {
            return None;
        }
        let ops = self.ops;
        Some((0..ops).map(move |k| Publication {
            index: first_index.wrapping_add(u64::from(k)),
            ops: 1,
            flags: flags(false, false, k + 1 == ops),
            ..self
        }))
    }

    /// This publication without its completion signal, for an operation a
    /// failed submission never issued (its packet still fills its slot).
    pub const fn without_completion(self) -> Self {
        Self {
            completion: 0,
            ..self
        }
    }
}

#[cfg(all(test, not(sigretire_loom)))]
mod tests {
    use super::*;
    use crate::error::PublishError;

    #[test]
    fn a_use_of_several_operations_publishes_each_once_in_order() {
        let publication = Publication::of_use(10, true, 0xabc0, 3, origin(1, Generation::ZERO));
        let parts: Vec<Publication> = publication.operations().collect();
        let expected = [8, 9, 10].map(|index| Publication {
            flags: BARRIER | if index == 10 { 0 } else { NOT_LAST },
            ..Publication::of_use(index, true, 0xabc0, 1, origin(1, Generation::ZERO))
        });
        assert_eq!(parts, expected);
        assert!(parts[2].is_last_operation() && !parts[0].is_last_operation());
        let one = Publication::of_use(4, false, 0x40, 1, origin(1, Generation::ZERO));
        assert_eq!(one.operations().collect::<Vec<_>>(), [one]);
    }

    #[test]
    fn indices_wrap_as_aql_indices_do() {
        let publication = Publication::of_use(1, false, 0x40, 3, origin(1, Generation::ZERO));
        let indices: Vec<u64> = publication.operations().map(|p| p.index()).collect();
        assert_eq!(indices, [u64::MAX, 0, 1]);
    }

    #[test]
    fn only_its_own_trackers_current_generation_publishes_a_use() {
        let (zero, one) = (Generation::ZERO, Generation::ZERO.next(32));
        let made = Publication::of_use(7, true, 0x40, 2, origin(3, zero));
        assert_eq!(made.generation(), Some(zero));
        assert_eq!(PublishError::check(&made, 3, zero), Ok(()));
        for part in made.operations() {
            assert_eq!(PublishError::check(&part, 3, zero), Ok(()));
            assert!(
                matches!(PublishError::check(&part, 3, one), Err(PublishError::Stale { index, .. }) if index == part.index()),
                "each operation"
            );
        }
        assert_eq!(
            PublishError::check(&made.without_completion(), 3, one),
            Err(PublishError::Stale {
                index: 7,
                made: zero,
                current: one
            }),
            "its unissued part fills the old queue's slot, not the new one's"
        );
        assert_eq!(
            PublishError::check(&made, 4, zero),
            Err(PublishError::Foreign { index: 7 })
        );
        // Nobody's: nothing to be stale about.
        for nobodys in [
            Publication::unsignalled(7, true),
            Publication::untracked(7, false, 0x80),
        ] {
            assert_eq!(nobodys.generation(), None);
            assert_eq!(PublishError::check(&nobodys, 3, one), Ok(()));
        }
        // Tags: never 0, and a tracker's own.
        assert_eq!(tag(1), 1);
        assert_eq!(
            tag(u64::from(u32::MAX) + 1),
            1,
            "folded 2^32 - 1 trackers apart"
        );
        assert_ne!(tag(u64::from(u32::MAX)), 0);
        assert!(made.made_by(3) && !made.made_by(4));
        // A copy engine is no hardware queue of the tracker's.
        let copy = Publication::of_copy(0x40, 1, origin(3, zero));
        assert_eq!(PublishError::check(&copy, 3, one), Ok(()));
    }

    #[test]
    fn an_unissued_operation_names_no_signal_and_keeps_its_header() {
        let part =
            Publication::of_use(9, true, 0x80, 1, origin(1, Generation::ZERO)).without_completion();
        assert_eq!(
            (part.index(), part.barrier(), part.completion()),
            (9, true, 0)
        );
        assert!(Publication::of_copy(0x80, 1, origin(1, Generation::ZERO)).is_copy());
    }
}
