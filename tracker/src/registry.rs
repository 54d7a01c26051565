//! Which completion signals trackers own, process-wide, by packet handle:
//! what lets a queue refuse a publication that names a tracker's signal
//! under a header the tracker did not make ([`Publication::untracked`]).
//!
//! A tracker proves retirement from what it recorded of each use, its
//! barrier bit above all. A packet completing its signal with another
//! barrier bit would make a fence it trusts no fence, and it would report
//! unfinished work complete. So every signal a tracker adopts is registered
//! here until the tracker (its shared state) is gone, and
//! [`QueueError::check_single`](crate::backend::QueueError::check_single), every
//! backend's first check, refuses an untracked publication of one.
//!
//! Signals are registered when a tracker creates them (in batches, or one
//! by one for the baseline's replacements), never per use; the check runs
//! only for publications no tracker made, never for a tracker's own. A
//! packet handle is an address on every backend that publishes (the
//! simulator's, ROCr's and CUDA's signal blocks), unique while its signal
//! lives, and a registered signal lives as long as its registration: the
//! tracker's shared state holds the memory. Handles of host-memory test
//! backends may repeat across memories, hence a count per handle.
//!
//! A process-wide table, not a protocol under test: a plain lock, held for
//! a hash-table operation and nothing else (never across a loom yield).
//!
//! [`Publication::untracked`]: crate::backend::Publication::untracked

use std::collections::HashMap;

/// Registered packet handles and how many live signals have each.
static SIGNALS: parking_lot::Mutex<Option<HashMap<u64, u32>>> = parking_lot::Mutex::new(None);

/// A tracker adopted the signal whose packet handle is `handle`.
pub(crate) fn register(handle: u64) {
    *SIGNALS
        .lock()
        .get_or_insert_with(HashMap::new)
        .entry(handle)
        .or_insert(0) += 1;
}

/// The tracker that adopted the signal of `handle` is gone.
pub(crate) fn unregister(handle: u64) {
    let mut signals = SIGNALS.lock();
    let Some(table) = signals.as_mut() else {
        return;
    };
    if let Some(count) = table.get_mut(&handle) {
        *count -= 1;
        if *count == 0 {
            table.remove(&handle);
        }
    }
}

/// Whether a live tracker owns the signal of `handle`.
pub(crate) fn is_a_trackers(handle: u64) -> bool {
    SIGNALS
        .lock()
        .as_ref()
        .is_some_and(|table| table.contains_key(&handle))
}
