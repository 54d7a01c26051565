//! What threads without the execution lock read of a queue's progress:
//! three command numbers, each only ever growing.
//!
//! `submitted` is written under the lock as each command is published;
//! `taken_through` as commands leave the open batch (to a synchronize's
//! marker, the completion thread, or an event's synchronize);
//! `synced_through` as a batch that left it completes. A synchronize or a
//! query that finds everything submitted synced answers with no lock at all
//! (if nothing the layer did not publish follows: the frontier's
//! [`Horizon`](crate::frontier::Horizon) says).

use crate::sync::{AtomicU64, Ordering};

/// A queue's command numbers, read lock-free.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// The newest command published.
    submitted: AtomicU64,
    /// Every command up to this one left the open batch.
    taken_through: AtomicU64,
    /// Every command up to this one completed on the GPU and left the open
    /// batch.
    synced_through: AtomicU64,
}

impl Progress {
    pub(crate) fn submitted(&self) -> u64 {
        self.submitted.load(Ordering::Acquire)
    }

    pub(crate) fn taken_through(&self) -> u64 {
        self.taken_through.load(Ordering::Acquire)
    }

    pub(crate) fn synced_through(&self) -> u64 {
        self.synced_through.load(Ordering::Acquire)
    }

    /// Command `seq` was published (under the lock, in order).
    pub(crate) fn note_submitted(&self, seq: u64) {
        self.submitted.store(seq, Ordering::Release);
    }

    /// Every command up to `seq` was published, whether or not it joined a
    /// batch yet (under the lock, after each step of publication).
    pub(crate) fn note_submitted_through(&self, seq: u64) {
        self.submitted.fetch_max(seq, Ordering::AcqRel);
    }

    /// Every command up to `seq` left the open batch.
    pub(crate) fn note_taken(&self, seq: u64) {
        self.taken_through.fetch_max(seq, Ordering::AcqRel);
    }

    /// Every command up to `seq` completed and left the open batch.
    pub(crate) fn note_synced(&self, seq: u64) {
        self.synced_through.fetch_max(seq, Ordering::AcqRel);
    }

    /// Whether every command submitted so far completed and left the open
    /// batch.
    pub(crate) fn all_synced(&self) -> bool {
        self.synced_through() >= self.submitted()
    }
}
