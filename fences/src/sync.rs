//! The one place the crate takes its atomics, locks, condition variables
//! and threads from: `sigretire-sync`, which is std and parking_lot in a
//! normal build and loom under `--cfg sigretire_loom` (so the models in
//! `tests/loom_queue.rs` explore every interleaving of the real code).
//! Nothing outside this module names `std::sync`, `parking_lot` or `loom`
//! for a primitive a model must see.
//!
//! The queue layer's `Arc` is the shim's modelled one: a queue is torn down
//! by whichever holder lets go last, and a model must see that last drop
//! (and `into_inner`) as one step, or it would tear a queue down on the
//! wrong thread.
//!
//! What the shim has no notion of lives here: which threads this crate's
//! checks tell apart ([`identity`]).

pub(crate) use sigretire_sync::ModelledArc as Arc;
pub(crate) use sigretire_sync::{
    AtomicBool, AtomicU8, AtomicU64, Condvar, Mutex, MutexGuard, Ordering, RwLock, arc_into_inner,
    sleep, thread,
};

/// Threads as this crate's checks tell them apart: whether the current
/// thread holds an execution lock, and which thread is the completion
/// thread. Loom models run every thread on one OS thread, where neither a
/// thread-local nor a thread id tells them apart: there the answers are
/// "no" and "unknown", and the checks that use them see nothing.
pub(crate) mod identity {
    use super::thread;

    #[cfg(not(sigretire_loom))]
    std::thread_local! {
        /// Execution locks (of any queue) the current thread holds.
        static LOCKS_HELD: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
    }

    /// The current thread took an execution lock.
    pub(crate) fn lock_taken() {
        #[cfg(not(sigretire_loom))]
        LOCKS_HELD.with(|held| held.set(held.get() + 1));
    }

    /// The current thread released an execution lock.
    pub(crate) fn lock_released() {
        #[cfg(not(sigretire_loom))]
        LOCKS_HELD.with(|held| held.set(held.get() - 1));
    }

    /// Whether the current thread holds an execution lock.
    pub(crate) fn holds_a_lock() -> bool {
        #[cfg(not(sigretire_loom))]
        {
            LOCKS_HELD.with(|held| held.get() > 0)
        }
        #[cfg(sigretire_loom)]
        {
            false
        }
    }

    /// The current thread's id, where threads have real ones.
    pub(crate) fn current() -> Option<std::thread::ThreadId> {
        thread::current_id()
    }

    /// The id of the thread `handle` runs, where threads have real ones.
    pub(crate) fn of<T>(handle: &thread::JoinHandle<T>) -> Option<std::thread::ThreadId> {
        thread::id_of(handle)
    }
}
