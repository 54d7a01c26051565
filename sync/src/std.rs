//! A normal build's primitives: std's atomics and `Arc`, parking_lot's
//! locks (infallible, no poisoning), std's threads.

pub use core::sync::atomic::Ordering;
pub use std::sync::Arc;
/// An `Arc` whose last drop and `into_inner` a loom model sees as one step
/// (under loom a counted one of the shim's own; here std's).
pub use std::sync::Arc as ModelledArc;
pub use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, fence,
};
use std::time::{Duration, Instant};

/// A mutual-exclusion lock whose `lock()` cannot fail.
#[derive(Debug, Default)]
pub struct Mutex<T>(parking_lot::Mutex<T>);

/// The guard of a [`Mutex`].
pub type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    /// A lock around `value`.
    pub fn new(value: T) -> Self {
        Self(parking_lot::Mutex::new(value))
    }

    /// Takes the lock.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock()
    }

    /// Takes the lock if nobody holds it.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.0.try_lock()
    }
}

/// A reader-writer lock whose `read()` and `write()` cannot fail.
#[derive(Debug, Default)]
pub struct RwLock<T>(parking_lot::RwLock<T>);

impl<T> RwLock<T> {
    /// A lock around `value`.
    pub fn new(value: T) -> Self {
        Self(parking_lot::RwLock::new(value))
    }

    /// Takes the lock to read.
    pub fn read(&self) -> impl core::ops::Deref<Target = T> + '_ {
        self.0.read()
    }

    /// Takes the lock to write.
    pub fn write(&self) -> impl core::ops::DerefMut<Target = T> + '_ {
        self.0.write()
    }
}

/// A condition variable for [`Mutex`] (spurious wake-ups allowed: callers
/// re-check their condition).
#[derive(Debug, Default)]
pub struct Condvar(parking_lot::Condvar);

impl Condvar {
    /// A condition variable nobody waits on yet.
    pub fn new() -> Self {
        Self(parking_lot::Condvar::new())
    }

    /// Waits for a notification.
    pub fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
        self.0.wait(guard);
    }

    /// Waits for a notification or `timeout`.
    pub fn wait_for<T>(&self, guard: &mut MutexGuard<'_, T>, timeout: Duration) {
        self.0.wait_for(guard, timeout);
    }

    /// Waits for a notification or `deadline`.
    pub fn wait_until<'a, T>(
        &self,
        mut guard: MutexGuard<'a, T>,
        deadline: Instant,
    ) -> MutexGuard<'a, T> {
        self.0.wait_until(&mut guard, deadline);
        guard
    }

    /// Waits for a notification or `timeout`, for a caller that must wake
    /// on time alone (nobody may notify it): under loom, which has no time,
    /// the lock is let go for one scheduling point instead.
    pub fn nap<'a, T>(
        &self,
        mutex: &'a Mutex<T>,
        mut guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> MutexGuard<'a, T> {
        let _ = mutex;
        self.0.wait_for(&mut guard, timeout);
        guard
    }

    /// Wakes every waiter.
    pub fn notify_all(&self) {
        self.0.notify_all();
    }
}

/// Threads.
pub mod thread {
    pub use std::thread::JoinHandle;

    /// Starts a thread named `name`.
    pub fn spawn<F>(name: String, body: F) -> std::io::Result<JoinHandle<()>>
    where
        F: FnOnce() + Send + 'static,
    {
        std::thread::Builder::new().name(name).spawn(body)
    }

    /// The current thread's id, where threads have real ones (under loom
    /// every model thread runs on one OS thread: `None`).
    pub fn current_id() -> Option<std::thread::ThreadId> {
        Some(std::thread::current().id())
    }

    /// The id of the thread `handle` runs, where threads have real ones.
    pub fn id_of<T>(handle: &JoinHandle<T>) -> Option<std::thread::ThreadId> {
        Some(handle.thread().id())
    }
}

/// Gives other threads a chance to run between two polls: a spin hint
/// (under loom, a yield point: a spin loop without one never ends).
pub fn spin_hint() {
    core::hint::spin_loop();
}

/// Yields the processor (under loom, a scheduling point).
pub fn yield_now() {
    std::thread::yield_now();
}

/// Sleeps (under loom, which has no time, a scheduling point).
pub fn sleep(duration: Duration) {
    std::thread::sleep(duration);
}
