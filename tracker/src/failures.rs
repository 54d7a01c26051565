//! Which retired uses failed: a record any thread reads without a lock, at
//! a cost that does not grow with the number of failures, in memory that
//! stays within a bound for the tracker's life.
//!
//! A ticket never expires, and a retired use's cell soon serves later
//! uses, so what became of the use must be kept elsewhere. Completion is
//! the rule and failure the exception: the record keeps the failures.
//!
//! - The **window** keeps one bit per use (failed or not) for the most
//!   recent [`WINDOW_USES`] uses up to the newest failure: exact, one word
//!   read per question. It moves forward when a failure lands past its end.
//! - Failures that leave the window go to a short list of **older ranges**
//!   (sorted, at most [`OLDER_RANGES`]), read under a lock by a binary
//!   search. When one more range is needed, the two closest merge into
//!   one, so a completed use between them reads `Failed` from then on:
//!   the bound has a price, and it is paid where it can mislead nobody
//!   into using a result that does not exist. A failed use always reads
//!   `Failed`; only a use more than [`WINDOW_USES`] uses before the newest
//!   failure, between two older failures, can read `Failed` though it
//!   completed, and only once more than [`OLDER_RANGES`] separate runs of
//!   failures left the window.
//!
//! The tracker's owner writes (it records a failure when it retires the
//! use, before the cell can serve another); every thread reads. Moving the
//! window is a seqlock: the owner makes `version` odd, moves the window's
//! failures to the ranges, clears their words, moves `first`, and makes
//! `version` even again, all under the ranges' lock. A reader that saw the
//! same even `version` before and after its reads saw a window that was
//! whole; otherwise it asks again under the lock, which a move holds.

use crate::sync::{AtomicBool, AtomicU64, Mutex, Ordering, fence};

/// Uses one window word keeps, a bit each (a handful under loom, so that a
/// model moves the window within a few uses).
const WORD_USES: u64 = if cfg!(sigretire_loom) { 2 } else { 64 };

/// The uses whose outcomes the window keeps exactly: 65,536.
const WINDOW_USES: u64 = if cfg!(sigretire_loom) { 4 } else { 1 << 16 };

/// Words in the window: 1024 (8 KiB).
const WINDOW_WORDS: u64 = WINDOW_USES / WORD_USES;

/// The most ranges of failures older than the window that are kept (1 KiB).
const OLDER_RANGES: usize = if cfg!(sigretire_loom) { 2 } else { 64 };

/// The failed uses of one tracker.
pub(crate) struct Failures {
    /// Whether anything ever failed: until then every retired use
    /// completed, and a question reads nothing else.
    any: AtomicBool,
    /// Even while the window is whole; odd while the owner moves it.
    version: AtomicU64,
    /// The window keeps the uses from `first * WORD_USES` on.
    first: AtomicU64,
    /// Word `block % WINDOW_WORDS` keeps block `block`'s bits, for the
    /// blocks `first..first + WINDOW_WORDS`.
    words: Box<[AtomicU64]>,
    /// Failed uses older than the window: inclusive ranges, sorted, apart.
    older: Mutex<Vec<(u64, u64)>>,
}

impl Failures {
    pub(crate) fn new() -> Self {
        Self {
            any: AtomicBool::new(false),
            version: AtomicU64::new(0),
            first: AtomicU64::new(0),
            words: (0..WINDOW_WORDS).map(|_| AtomicU64::new(0)).collect(),
            older: Mutex::new(Vec::new()),
        }
    }

    fn word(&self, block: u64) -> &AtomicU64 {
        // The remainder is below WINDOW_WORDS, the slice's length.
        &self.words[(block % WINDOW_WORDS) as usize]
    }

    const fn bit(seq: u64) -> u64 {
        1 << (seq % WORD_USES)
    }

    /// Records that use `seq` failed. The owner only, before anything can
    /// learn that the use retired (its retirement published, its cell
    /// serving another use), so whoever asks about it finds it here.
    pub(crate) fn record(&self, seq: u64) {
        let block = seq / WORD_USES;
        // Only the owner moves `first`: its own last store.
        let first = self.first.load(Ordering::Relaxed);
        if block < first {
            // Older than the window (a failure recorded out of order).
            add(&mut self.older.lock(), seq);
        } else {
            if block >= first + WINDOW_WORDS {
                self.advance(first, block + 1 - WINDOW_WORDS);
            }
            self.word(block).fetch_or(Self::bit(seq), Ordering::Release);
        }
        self.any.store(true, Ordering::Release);
    }

    /// Moves the window to start at block `to` (from `from`): the failures
    /// of the blocks that leave it go to the older ranges, and their words
    /// are cleared for the blocks that enter. Cold: a failure far from the
    /// previous one.
    #[cold]
    fn advance(&self, from: u64, to: u64) {
        let mut older = self.older.lock();
        let version = self.version.load(Ordering::Relaxed);
        self.version.store(version + 1, Ordering::Relaxed);
        // Readers that see anything below see the odd version after it.
        fence(Ordering::Release);
        for block in from..to.min(from + WINDOW_WORDS) {
            let word = self.word(block);
            let mut bits = word.load(Ordering::Relaxed);
            while bits != 0 {
                add(
                    &mut older,
                    block * WORD_USES + u64::from(bits.trailing_zeros()),
                );
                bits &= bits - 1;
            }
            word.store(0, Ordering::Relaxed);
        }
        self.first.store(to, Ordering::Relaxed);
        self.version.store(version + 2, Ordering::Release);
    }

    /// Whether use `seq`, known to be retired, failed. Lock-free unless the
    /// use is older than the window, or the window moved while it was read.
    pub(crate) fn failed(&self, seq: u64) -> bool {
        if !self.any.load(Ordering::Acquire) {
            return false;
        }
        let block = seq / WORD_USES;
        let version = self.version.load(Ordering::Acquire);
        if version.is_multiple_of(2) {
            let first = self.first.load(Ordering::Relaxed);
            let answer = self.in_window(seq, block, first, Ordering::Relaxed);
            fence(Ordering::Acquire);
            if self.version.load(Ordering::Relaxed) == version
                && let Some(failed) = answer
            {
                return failed;
            }
        }
        // Older than the window, or it moved meanwhile: ask under the lock,
        // which every move holds.
        let older = self.older.lock();
        let first = self.first.load(Ordering::Relaxed);
        self.in_window(seq, block, first, Ordering::Acquire)
            .unwrap_or_else(|| contains(&older, seq))
    }

    /// What the window starting at block `first` says of use `seq` (in
    /// block `block`): `None` if it is older than the window. A use past
    /// the window did not fail: its failure would have moved the window
    /// before anyone could learn it retired.
    fn in_window(&self, seq: u64, block: u64, first: u64, order: Ordering) -> Option<bool> {
        if block < first {
            return None;
        }
        if block >= first + WINDOW_WORDS {
            return Some(false);
        }
        count_scanned(1);
        Some(self.word(block).load(order) & Self::bit(seq) != 0)
    }

    /// The bytes the record takes on the heap.
    #[cfg(all(test, not(sigretire_loom)))]
    pub(crate) fn bytes(&self) -> usize {
        self.words.len() * core::mem::size_of::<AtomicU64>()
            + self.older.lock().capacity() * core::mem::size_of::<(u64, u64)>()
    }
}

/// Adds failed use `seq` to `ranges`, merging the two closest ranges when
/// more than [`OLDER_RANGES`] would be kept.
fn add(ranges: &mut Vec<(u64, u64)>, seq: u64) {
    if ranges.capacity() == 0 {
        // Once, for good: one more than kept, for the insertion before a
        // merge.
        ranges.reserve_exact(OLDER_RANGES + 1);
    }
    let at = ranges.partition_point(|&(_, last)| last < seq);
    if ranges.get(at).is_some_and(|&(first, _)| first <= seq) {
        return;
    }
    let joins_before = at > 0 && ranges[at - 1].1 + 1 == seq;
    let joins_after = ranges.get(at).is_some_and(|&(first, _)| first == seq + 1);
    match (joins_before, joins_after) {
        (true, true) => {
            ranges[at - 1].1 = ranges[at].1;
            ranges.remove(at);
        }
        (true, false) => ranges[at - 1].1 = seq,
        (false, true) => ranges[at].0 = seq,
        (false, false) => {
            ranges.insert(at, (seq, seq));
            if ranges.len() > OLDER_RANGES {
                merge_closest(ranges);
            }
        }
    }
}

/// Merges the two neighbouring ranges with the fewest uses between them.
fn merge_closest(ranges: &mut Vec<(u64, u64)>) {
    let Some(at) = (1..ranges.len()).min_by_key(|&i| ranges[i].0 - ranges[i - 1].1) else {
        return;
    };
    ranges[at - 1].1 = ranges[at].1;
    ranges.remove(at);
}

/// Whether `seq` is in one of `ranges`: a binary search.
fn contains(ranges: &[(u64, u64)], seq: u64) -> bool {
    let (mut lo, mut hi) = (0, ranges.len());
    while lo < hi {
        count_scanned(1);
        let mid = lo + (hi - lo) / 2;
        let (first, last) = ranges[mid];
        if seq < first {
            hi = mid;
        } else if seq > last {
            lo = mid + 1;
        } else {
            return true;
        }
    }
    false
}

#[cfg(all(test, not(sigretire_loom)))]
std::thread_local! {
    static SCANNED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Counts entries a question examined (window words, ranges), for the
/// tests that bound it.
#[inline(always)]
fn count_scanned(entries: usize) {
    #[cfg(all(test, not(sigretire_loom)))]
    SCANNED.with(|n| n.set(n.get() + entries));
    let _ = entries;
}

/// Entries examined by questions on this thread so far.
#[cfg(all(test, not(sigretire_loom)))]
pub(crate) fn scanned() -> usize {
    SCANNED.with(std::cell::Cell::get)
}

#[cfg(all(test, not(sigretire_loom)))]
mod tests {
    use super::*;

    #[test]
    fn nothing_failed_until_something_did() {
        let failures = Failures::new();
        assert!(!failures.failed(1));
        failures.record(3);
        assert!(failures.failed(3));
        assert!(!failures.failed(2) && !failures.failed(4));
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "327,680 uses recorded: hours under Miri (the other tests here reach the same code)"
    )]
    fn the_window_keeps_the_most_recent_uses_exactly_as_it_moves() {
        let failures = Failures::new();
        let failed = |seq: u64| seq.is_multiple_of(3);
        let last = 5 * WINDOW_USES;
        for seq in (1..=last).filter(|&seq| failed(seq)) {
            failures.record(seq);
        }
        for seq in last - WINDOW_USES + WORD_USES..=last + 10 {
            assert_eq!(
                failures.failed(seq),
                failed(seq) && seq <= last,
                "use {seq}"
            );
        }
        // Older ones: every failure still reads failed.
        for seq in (1..=last).step_by(997).filter(|&seq| failed(seq)) {
            assert!(failures.failed(seq), "use {seq}");
        }
    }

    #[test]
    fn older_runs_stay_exact_until_there_are_too_many_then_the_closest_merge() {
        let mut ranges = Vec::new();
        for seq in [10, 11, 12, 20, 14, 13] {
            add(&mut ranges, seq);
        }
        assert_eq!(ranges, [(10, 14), (20, 20)]);
        let mut ranges = Vec::new();
        // Runs 100 apart, but the 40th only 2 from the 39th: those merge.
        let mut starts: Vec<u64> = (0..OLDER_RANGES as u64).map(|k| 100 * k).collect();
        starts.push(starts[39] + 2);
        starts.sort_unstable();
        for &seq in &starts {
            add(&mut ranges, seq);
        }
        assert_eq!(ranges.len(), OLDER_RANGES);
        assert!(ranges.contains(&(3900, 3902)), "{ranges:?}");
        assert!(
            contains(&ranges, 3901),
            "a completed use between them: now failed"
        );
        assert!(!contains(&ranges, 3950), "the others stay exact");
        assert_eq!(ranges.capacity(), OLDER_RANGES + 1, "allocated once");
    }
}
