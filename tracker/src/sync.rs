//! The one place the crate takes its atomics, locks and thread hooks from.
//!
//! Under `--cfg sigretire_loom` everything here comes from loom, so the model tests in
//! `tests/loom_*.rs` explore every interleaving of the real protocol code;
//! otherwise it is std (and parking_lot for the lock). Nothing outside this
//! module names `std::sync` directly.

#[cfg(sigretire_loom)]
pub(crate) use loom::sync::Arc;
#[cfg(sigretire_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize};
#[cfg(not(sigretire_loom))]
pub(crate) use std::sync::Arc;
#[cfg(not(sigretire_loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize};

pub(crate) use core::sync::atomic::Ordering;
#[cfg(sigretire_loom)]
pub(crate) use loom::sync::atomic::fence;
#[cfg(not(sigretire_loom))]
pub(crate) use std::sync::atomic::fence;

/// A mutual-exclusion lock with parking_lot's infallible `lock()`.
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(
    #[cfg(sigretire_loom)] loom::sync::Mutex<T>,
    #[cfg(not(sigretire_loom))] parking_lot::Mutex<T>,
);

#[cfg(not(sigretire_loom))]
impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(parking_lot::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> parking_lot::MutexGuard<'_, T> {
        self.0.lock()
    }
}

#[cfg(sigretire_loom)]
impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(loom::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
        // A poisoned lock means a model thread panicked; loom reports that.
        self.0.lock().unwrap()
    }
}

/// Gives other threads a chance to run: a spin hint normally, a yield point
/// under loom (where a spin loop without one would never terminate).
pub(crate) fn spin_hint() {
    #[cfg(sigretire_loom)]
    loom::thread::yield_now();
    #[cfg(not(sigretire_loom))]
    core::hint::spin_loop();
}

/// Yields the processor (loom: a scheduling point).
pub(crate) fn yield_now() {
    #[cfg(sigretire_loom)]
    loom::thread::yield_now();
    #[cfg(not(sigretire_loom))]
    std::thread::yield_now();
}

/// A condition variable paired with [`Mutex`] (loom's under the model).
#[derive(Debug, Default)]
pub(crate) struct Condvar(
    #[cfg(sigretire_loom)] loom::sync::Condvar,
    #[cfg(not(sigretire_loom))] parking_lot::Condvar,
);

#[cfg(not(sigretire_loom))]
impl Condvar {
    pub(crate) fn new() -> Self {
        Self(parking_lot::Condvar::new())
    }

    /// Sleeps until notified or `deadline` (spurious wake-ups allowed).
    pub(crate) fn wait_until<'a, T>(
        &self,
        mut guard: parking_lot::MutexGuard<'a, T>,
        deadline: std::time::Instant,
    ) -> parking_lot::MutexGuard<'a, T> {
        self.0.wait_until(&mut guard, deadline);
        guard
    }

    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}

#[cfg(sigretire_loom)]
impl Condvar {
    pub(crate) fn new() -> Self {
        Self(loom::sync::Condvar::new())
    }

    /// Sleeps until notified: loom has no time, so no deadline (a lost
    /// wake-up is then a deadlock the model reports).
    pub(crate) fn wait_until<'a, T>(
        &self,
        guard: loom::sync::MutexGuard<'a, T>,
        _deadline: std::time::Instant,
    ) -> loom::sync::MutexGuard<'a, T> {
        self.0.wait(guard).unwrap()
    }

    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}
