//! The one place the crate takes its atomics, locks, condition variables
//! and threads from.
//!
//! Under `--cfg sigretire_loom` everything here comes from loom (the `Arc` is built
//! on loom's atomics, where loom's own differs from std's), so the models in `tests/loom_queue.rs` explore every
//! interleaving of the real code; otherwise it is std and parking_lot. Nothing outside this module
//! names `std::sync` or `parking_lot` directly.

#[cfg(sigretire_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU8, AtomicU64};
#[cfg(sigretire_loom)]
pub(crate) use modelled_arc::Arc;
#[cfg(not(sigretire_loom))]
pub(crate) use std::sync::Arc;
#[cfg(not(sigretire_loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64};

pub(crate) use core::sync::atomic::Ordering;
use std::time::Duration;

/// Takes the value out of `arc` if this was its last strong reference, in
/// one atomic step.
pub(crate) fn arc_into_inner<T>(arc: Arc<T>) -> Option<T> {
    Arc::into_inner(arc)
}

/// An `Arc` for models. Loom's has no `into_inner`, and `try_unwrap` then a
/// drop is not one step: another holder can let go in between, making that
/// drop the last and tearing the value down on the wrong thread (a model of
/// the completion thread's teardown finds exactly that). This one counts
/// strong references with a loom atomic, as std does (release decrement,
/// acquire fence by the last), so `into_inner` and the last drop are one
/// modelled step; the value itself sits in a std `Arc` that is released
/// with the count, with no loom operation in between.
#[cfg(sigretire_loom)]
mod modelled_arc {
    use loom::sync::atomic::{AtomicUsize, Ordering, fence};

    pub(crate) struct Arc<T> {
        /// `None` only while being dropped or taken apart.
        value: Option<std::sync::Arc<T>>,
        strong: std::sync::Arc<AtomicUsize>,
    }

    impl<T> Arc<T> {
        pub(crate) fn new(value: T) -> Self {
            Self {
                value: Some(std::sync::Arc::new(value)),
                strong: std::sync::Arc::new(AtomicUsize::new(1)),
            }
        }

        pub(crate) fn ptr_eq(this: &Self, other: &Self) -> bool {
            std::sync::Arc::ptr_eq(&this.strong, &other.strong)
        }

        /// The value, if this is its only reference (an acquire load of
        /// the count, as std's: it sees every other holder's release).
        pub(crate) fn get_mut(this: &mut Self) -> Option<&mut T> {
            if this.strong.load(Ordering::Acquire) != 1 {
                return None;
            }
            std::sync::Arc::get_mut(this.value.as_mut()?)
        }

        pub(crate) fn into_inner(mut this: Self) -> Option<T> {
            let value = this.value.take().expect("a live Arc has its value");
            if this.strong.fetch_sub(1, Ordering::Release) != 1 {
                return None;
            }
            fence(Ordering::Acquire);
            Some(std::sync::Arc::into_inner(value).expect("the last holder has the last reference"))
        }
    }

    impl<T> Clone for Arc<T> {
        fn clone(&self) -> Self {
            self.strong.fetch_add(1, Ordering::Relaxed);
            Self {
                value: self.value.clone(),
                strong: self.strong.clone(),
            }
        }
    }

    impl<T> Drop for Arc<T> {
        fn drop(&mut self) {
            if let Some(value) = self.value.take() {
                if self.strong.fetch_sub(1, Ordering::Release) == 1 {
                    fence(Ordering::Acquire);
                }
                drop(value);
            }
        }
    }

    impl<T> core::ops::Deref for Arc<T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.value.as_ref().expect("a live Arc has its value")
        }
    }

    impl<T: core::fmt::Debug> core::fmt::Debug for Arc<T> {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            core::fmt::Debug::fmt(&**self, f)
        }
    }
}

/// A mutual-exclusion lock with parking_lot's infallible `lock()`.
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(
    #[cfg(sigretire_loom)] loom::sync::Mutex<T>,
    #[cfg(not(sigretire_loom))] parking_lot::Mutex<T>,
);

/// The guard of a [`Mutex`].
#[cfg(not(sigretire_loom))]
pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

/// The guard of a [`Mutex`] (loom's guard moves through `Condvar::wait`, so it
/// sits in an option while it does).
#[cfg(sigretire_loom)]
pub(crate) struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>);

#[cfg(sigretire_loom)]
impl<T> core::ops::Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0
            .as_ref()
            .expect("guard present outside Condvar::wait")
    }
}

#[cfg(sigretire_loom)]
impl<T> core::ops::DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0
            .as_mut()
            .expect("guard present outside Condvar::wait")
    }
}

#[cfg(not(sigretire_loom))]
impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(parking_lot::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock()
    }

    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.0.try_lock()
    }
}

#[cfg(sigretire_loom)]
impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(loom::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        // A poisoned lock means a model thread panicked; loom reports that.
        MutexGuard(Some(self.0.lock().unwrap()))
    }

    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.0.try_lock().ok().map(|g| MutexGuard(Some(g)))
    }
}

/// A reader-writer lock with parking_lot's infallible `read()`/`write()`.
#[derive(Debug, Default)]
pub(crate) struct RwLock<T>(
    #[cfg(sigretire_loom)] loom::sync::RwLock<T>,
    #[cfg(not(sigretire_loom))] parking_lot::RwLock<T>,
);

#[cfg(not(sigretire_loom))]
impl<T> RwLock<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(parking_lot::RwLock::new(value))
    }

    pub(crate) fn read(&self) -> impl core::ops::Deref<Target = T> + '_ {
        self.0.read()
    }

    pub(crate) fn write(&self) -> impl core::ops::DerefMut<Target = T> + '_ {
        self.0.write()
    }
}

#[cfg(sigretire_loom)]
impl<T> RwLock<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(loom::sync::RwLock::new(value))
    }

    pub(crate) fn read(&self) -> impl core::ops::Deref<Target = T> + '_ {
        // A poisoned lock means a model thread panicked; loom reports that.
        self.0.read().unwrap()
    }

    pub(crate) fn write(&self) -> impl core::ops::DerefMut<Target = T> + '_ {
        self.0.write().unwrap()
    }
}

/// A condition variable for [`Mutex`].
#[derive(Debug, Default)]
pub(crate) struct Condvar(
    #[cfg(sigretire_loom)] loom::sync::Condvar,
    #[cfg(not(sigretire_loom))] parking_lot::Condvar,
);

impl Condvar {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Waits for a notification or `timeout` (loom: a notification only, as
    /// loom has no time; callers re-check their condition either way).
    pub(crate) fn wait_for<T>(&self, guard: &mut MutexGuard<'_, T>, timeout: Duration) {
        #[cfg(not(sigretire_loom))]
        {
            self.0.wait_for(guard, timeout);
        }
        #[cfg(sigretire_loom)]
        {
            let _ = timeout;
            let inner = guard.0.take().expect("guard present");
            guard.0 = Some(self.0.wait(inner).unwrap());
        }
    }

    /// Waits for a notification (callers re-check their condition).
    pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
        #[cfg(not(sigretire_loom))]
        {
            self.0.wait(guard);
        }
        #[cfg(sigretire_loom)]
        {
            let inner = guard.0.take().expect("guard present");
            guard.0 = Some(self.0.wait(inner).unwrap());
        }
    }

    /// Waits for a notification or `timeout`, for a caller that must wake
    /// on time alone (no one may notify it). Loom has no time, and a model
    /// must not block where only time would wake it: there the lock is let
    /// go for one scheduling point instead.
    pub(crate) fn nap<'a, T>(
        &self,
        mutex: &'a Mutex<T>,
        mut guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> MutexGuard<'a, T> {
        #[cfg(not(sigretire_loom))]
        {
            let _ = mutex;
            self.0.wait_for(&mut guard, timeout);
            guard
        }
        #[cfg(sigretire_loom)]
        {
            let _ = timeout;
            drop(guard.0.take());
            loom::thread::yield_now();
            mutex.lock()
        }
    }

    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}

/// Threads: the completion thread is the only one this crate starts.
pub(crate) mod thread {
    #[cfg(sigretire_loom)]
    pub(crate) use loom::thread::JoinHandle;
    #[cfg(not(sigretire_loom))]
    pub(crate) use std::thread::JoinHandle;

    /// Starts a named thread.
    pub(crate) fn spawn<F>(name: String, body: F) -> std::io::Result<JoinHandle<()>>
    where
        F: FnOnce() + Send + 'static,
    {
        #[cfg(not(sigretire_loom))]
        {
            std::thread::Builder::new().name(name).spawn(body)
        }
        #[cfg(sigretire_loom)]
        {
            // Named as under std, so a model can tell where a drop ran.
            loom::thread::Builder::new().name(name).spawn(body)
        }
    }
}

/// Threads as this crate's checks tell them apart: whether the current
/// thread holds an execution lock, and which thread is the completion
/// thread. Loom models run every thread on one OS thread, where neither a
/// thread-local nor a thread id tells them apart: there the answers are
/// "no" and "unknown", and the checks that use them see nothing.
pub(crate) mod identity {
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
        #[cfg(not(sigretire_loom))]
        {
            Some(std::thread::current().id())
        }
        #[cfg(sigretire_loom)]
        {
            None
        }
    }

    /// The id of the thread `handle` runs, where threads have real ones.
    pub(crate) fn of<T>(handle: &super::thread::JoinHandle<T>) -> Option<std::thread::ThreadId> {
        #[cfg(not(sigretire_loom))]
        {
            Some(handle.thread().id())
        }
        #[cfg(sigretire_loom)]
        {
            let _ = handle;
            None
        }
    }
}

/// Sleeps (loom: a scheduling point; loom has no time).
pub(crate) fn sleep(duration: Duration) {
    #[cfg(sigretire_loom)]
    {
        let _ = duration;
        loom::thread::yield_now();
    }
    #[cfg(not(sigretire_loom))]
    std::thread::sleep(duration);
}
