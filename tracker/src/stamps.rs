//! Harvested timestamps, kept per use: a timed use's stamps belong to the
//! use, not to its signal, so they answer for its ticket after the signal
//! has served later uses.
//!
//! A signal's own stamp fields (and the copy in its cell, which lock-free
//! readers use) describe only its latest use. The history keeps the last
//! `limit` timed uses' stamps in host memory, oldest first, found by binary
//! search on the use's sequence number. Only the tracker's owner touches it.
//! Its `limit` entries (24 bytes each) are allocated at once, at the first
//! harvest, so a tracker that times nothing pays nothing and one that does
//! allocates nothing per use (growing it as it fills would allocate in the
//! middle of a run, up to the `limit`-th timed use); what falls out of it
//! is reported as expired, never as "no stamps".

use crate::backend::{SignalMemory, Timestamps};
use crate::share::Cell;
use crate::signals::Signals;
use crate::stats::Stats;
use std::collections::VecDeque;

/// What a signal's stamp fields say of its use: `None` when nothing wrote
/// them. A queue that does not profile leaves them at zero (ROCr's
/// unprofiled queues, the simulator's), and no clock reads zero at both
/// ends of real work, so a pair of zeros is no stamps, not stamps.
pub fn written(stamps: Option<Timestamps>) -> Option<Timestamps> {
    stamps.filter(|&stamps| stamps != Timestamps::default())
}

/// What the history knows about a timed use's stamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kept {
    /// The use's stamps.
    Stamps(Timestamps),
    /// The use was harvested, and nothing stamped it (no work ran).
    Unstamped,
    /// The use was harvested, but so many timed uses followed that its
    /// entry was dropped.
    Expired,
    /// Never harvested (still pending, failed, or never timed).
    Unknown,
}

/// One harvested use: 24 bytes, as [`Config::stamp_history`](crate::Config)
/// documents (an `Option<Timestamps>` beside the number would take 32).
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// The use's sequence number, with [`UNSTAMPED`] set when nothing
    /// stamped it (sequence numbers stay far below that bit: a cell packs
    /// them shifted left by two).
    seq: u64,
    start: u64,
    end: u64,
}

/// The bit of [`Entry::seq`] that says the use was harvested unstamped.
const UNSTAMPED: u64 = 1 << 63;

const _: () = assert!(core::mem::size_of::<Entry>() == 24);

impl Entry {
    fn new(seq: u64, stamps: Option<Timestamps>) -> Self {
        match stamps {
            Some(Timestamps { start, end }) => Self { seq, start, end },
            None => Self {
                seq: seq | UNSTAMPED,
                start: 0,
                end: 0,
            },
        }
    }

    fn seq(&self) -> u64 {
        self.seq & !UNSTAMPED
    }

    fn stamps(&self) -> Option<Timestamps> {
        (self.seq & UNSTAMPED == 0).then_some(Timestamps {
            start: self.start,
            end: self.end,
        })
    }
}

/// The stamps of the most recent timed uses, by sequence number.
#[derive(Debug)]
pub struct StampHistory {
    /// In increasing sequence number.
    entries: VecDeque<Entry>,
    limit: usize,
    /// The newest sequence number dropped to stay within `limit` (0: none).
    dropped_through: u64,
}

impl StampHistory {
    /// A history keeping the stamps of the last `limit` timed uses.
    pub fn new(limit: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            limit,
            dropped_through: 0,
        }
    }

    /// Harvest: reads use `seq`'s stamps from its signal (`cell`'s), once,
    /// into the cell (for lock-free readers while the signal serves it) and
    /// into the history (for its ticket, after the signal serves later
    /// uses).
    pub(crate) fn harvest<M: SignalMemory>(
        &mut self,
        seq: u64,
        cell: &Cell<M::Signal>,
        signals: &mut Signals<M>,
        stats: &mut Stats,
    ) {
        let stamps = written(signals.read_stamps(cell));
        cell.store_stamps(seq, stamps);
        self.record(seq, stamps);
        stats.harvests += 1;
    }

    /// Keeps use `seq`'s harvest. Uses are harvested in any order (a query
    /// may harvest a later use before the walk reaches an earlier one), so
    /// the entry goes where its number belongs.
    pub fn record(&mut self, seq: u64, stamps: Option<Timestamps>) {
        let at = match self.entries.binary_search_by_key(&seq, Entry::seq) {
            Ok(at) => {
                self.entries[at] = Entry::new(seq, stamps);
                return;
            }
            Err(at) => at,
        };
        if self.entries.len() == self.limit {
            // Full: the oldest entry makes room, unless the new one is older
            // still (then it expires at once).
            match self.entries.front().map(Entry::seq) {
                Some(oldest) if oldest < seq => {
                    self.entries.pop_front();
                    self.dropped_through = self.dropped_through.max(oldest);
                }
                _ => {
                    self.dropped_through = self.dropped_through.max(seq);
                    return;
                }
            }
            self.entries.insert(at - 1, Entry::new(seq, stamps));
            return;
        }
        if self.entries.capacity() == 0 {
            self.entries.reserve_exact(self.limit);
        }
        self.entries.insert(at, Entry::new(seq, stamps));
    }

    /// What is kept for use `seq`.
    pub fn get(&self, seq: u64) -> Kept {
        match self.entries.binary_search_by_key(&seq, Entry::seq) {
            Ok(at) => match self.entries[at].stamps() {
                Some(stamps) => Kept::Stamps(stamps),
                None => Kept::Unstamped,
            },
            Err(_) if seq <= self.dropped_through => Kept::Expired,
            Err(_) => Kept::Unknown,
        }
    }

    /// How many uses' stamps are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// How many entries its memory holds.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    /// The bytes its entries take on the heap.
    #[cfg(test)]
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.entries.capacity() * core::mem::size_of::<Entry>()
    }
}

#[cfg(all(test, not(sigretire_loom)))]
mod tests {
    use super::*;

    fn stamps(n: u64) -> Option<Timestamps> {
        Some(Timestamps {
            start: n * 10,
            end: n * 10 + 5,
        })
    }

    #[test]
    fn keeps_each_use_its_own_stamps() {
        let mut history = StampHistory::new(8);
        for seq in [3, 5, 9] {
            history.record(seq, stamps(seq));
        }
        history.record(7, None);
        assert_eq!(history.get(5), Kept::Stamps(stamps(5).unwrap()));
        assert_eq!(history.get(9), Kept::Stamps(stamps(9).unwrap()));
        assert_eq!(history.get(7), Kept::Unstamped);
        assert_eq!(history.get(4), Kept::Unknown);
        assert_eq!(history.get(10), Kept::Unknown);
    }

    #[test]
    fn out_of_order_harvests_land_in_order() {
        let mut history = StampHistory::new(8);
        for seq in [10, 2, 6, 4] {
            history.record(seq, stamps(seq));
        }
        for seq in [2, 4, 6, 10] {
            assert_eq!(history.get(seq), Kept::Stamps(stamps(seq).unwrap()));
        }
    }

    #[test]
    fn past_the_limit_the_oldest_expire_and_say_so() {
        let mut history = StampHistory::new(3);
        for seq in 1..=5 {
            history.record(seq, stamps(seq));
        }
        assert_eq!(history.len(), 3);
        assert_eq!(history.get(1), Kept::Expired);
        assert_eq!(history.get(2), Kept::Expired);
        assert_eq!(history.get(3), Kept::Stamps(stamps(3).unwrap()));
        // A late harvest older than everything kept expires at once.
        history.record(0, stamps(0));
        assert_eq!(history.get(0), Kept::Expired);
        assert_eq!(history.len(), 3);
        // One between the kept ones pushes out the oldest.
        history.record(9, stamps(9));
        history.record(6, stamps(6));
        assert_eq!(history.get(4), Kept::Expired);
        assert_eq!(history.get(5), Kept::Stamps(stamps(5).unwrap()));
        assert_eq!(history.get(6), Kept::Stamps(stamps(6).unwrap()));
        assert_eq!(history.get(9), Kept::Stamps(stamps(9).unwrap()));
    }

    #[test]
    fn its_memory_is_allocated_once_at_the_first_harvest() {
        let mut history = StampHistory::new(100);
        assert_eq!(history.capacity(), 0);
        history.record(1, stamps(1));
        let capacity = history.capacity();
        assert!(capacity >= 100);
        for seq in 2..1000 {
            history.record(seq, stamps(seq));
        }
        assert_eq!(
            history.capacity(),
            capacity,
            "no allocation after the first"
        );
        assert_eq!(history.len(), 100);
    }

    /// What `Config::stamp_history` documents: 24 bytes an entry, 384 KiB
    /// for the default history, allocated at the first harvest.
    #[test]
    fn the_default_history_allocates_the_documented_384_kib() {
        let mut history = StampHistory::new(crate::Config::default().stamp_history);
        assert_eq!(history.allocated_bytes(), 0, "nothing before a harvest");
        history.record(1, stamps(1));
        assert_eq!(history.allocated_bytes(), 384 * 1024);
        history.record(2, None);
        assert_eq!(history.allocated_bytes(), 384 * 1024);
        assert_eq!(
            crate::Config::MAX_STAMP_HISTORY * history.allocated_bytes() / history.capacity(),
            384 << 20,
            "384 MiB for the largest history"
        );
    }

    #[test]
    fn a_zero_limit_keeps_nothing() {
        let mut history = StampHistory::new(0);
        history.record(4, stamps(4));
        assert_eq!(history.get(4), Kept::Expired);
        assert_eq!(history.len(), 0);
    }
}
