//! The loom models' primitives (`--cfg sigretire_loom`): the interface of
//! `std.rs`, on loom's atomics, locks and threads.

pub use core::sync::atomic::Ordering;
pub use loom::sync::Arc;
pub use loom::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, fence,
};
pub use modelled_arc::Arc as ModelledArc;
use std::time::{Duration, Instant};

/// The [`ModelledArc`]: an `Arc` for models. Loom's has no `into_inner`, and `try_unwrap` then a
/// drop is not one step: another holder can let go in between, making that
/// drop the last and tearing the value down on the wrong thread. This one
/// counts strong references with a loom atomic, as std does (release
/// decrement, acquire fence by the last), so `into_inner` and the last drop
/// are one modelled step; the value itself sits in a std `Arc` that is
/// released with the count, with no loom operation in between.
mod modelled_arc {
    use loom::sync::atomic::{AtomicUsize, Ordering, fence};

    /// A shared value, counted as std's `Arc` counts it.
    pub struct Arc<T> {
        /// `None` only while being dropped or taken apart.
        value: Option<std::sync::Arc<T>>,
        strong: std::sync::Arc<AtomicUsize>,
    }

    impl<T> Arc<T> {
        /// Shares `value`.
        pub fn new(value: T) -> Self {
            Self {
                value: Some(std::sync::Arc::new(value)),
                strong: std::sync::Arc::new(AtomicUsize::new(1)),
            }
        }

        /// Whether both share one value.
        pub fn ptr_eq(this: &Self, other: &Self) -> bool {
            std::sync::Arc::ptr_eq(&this.strong, &other.strong)
        }

        /// The value, if this is its only reference (an acquire load of
        /// the count, as std's: it sees every other holder's release).
        pub fn get_mut(this: &mut Self) -> Option<&mut T> {
            if this.strong.load(Ordering::Acquire) != 1 {
                return None;
            }
            std::sync::Arc::get_mut(this.value.as_mut()?)
        }

        /// The value, if this was its last reference.
        pub fn into_inner(mut this: Self) -> Option<T> {
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

/// A mutual-exclusion lock whose `lock()` cannot fail (a poisoned lock
/// means a model thread panicked, which loom reports).
#[derive(Debug, Default)]
pub struct Mutex<T>(loom::sync::Mutex<T>);

/// The guard of a [`Mutex`] (loom's guard moves through `Condvar::wait`,
/// so it sits in an option while it does).
pub struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>);

impl<T> core::ops::Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0
            .as_ref()
            .expect("guard present outside Condvar::wait")
    }
}

impl<T> core::ops::DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0
            .as_mut()
            .expect("guard present outside Condvar::wait")
    }
}

impl<T> Mutex<T> {
    /// A lock around `value`.
    pub fn new(value: T) -> Self {
        Self(loom::sync::Mutex::new(value))
    }

    /// Takes the lock.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        MutexGuard(Some(self.0.lock().unwrap()))
    }

    /// Takes the lock if nobody holds it.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.0.try_lock().ok().map(|g| MutexGuard(Some(g)))
    }
}

/// A reader-writer lock whose `read()` and `write()` cannot fail.
#[derive(Debug, Default)]
pub struct RwLock<T>(loom::sync::RwLock<T>);

impl<T> RwLock<T> {
    /// A lock around `value`.
    pub fn new(value: T) -> Self {
        Self(loom::sync::RwLock::new(value))
    }

    /// Takes the lock to read.
    pub fn read(&self) -> impl core::ops::Deref<Target = T> + '_ {
        self.0.read().unwrap()
    }

    /// Takes the lock to write.
    pub fn write(&self) -> impl core::ops::DerefMut<Target = T> + '_ {
        self.0.write().unwrap()
    }
}

/// A condition variable for [`Mutex`]. Loom has no time: every timed wait
/// waits for a notification (a lost wake-up is then a deadlock the model
/// reports), except [`nap`](Self::nap).
#[derive(Debug, Default)]
pub struct Condvar(loom::sync::Condvar);

impl Condvar {
    /// A condition variable nobody waits on yet.
    pub fn new() -> Self {
        Self(loom::sync::Condvar::new())
    }

    /// Waits for a notification.
    pub fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
        let inner = guard.0.take().expect("guard present");
        guard.0 = Some(self.0.wait(inner).unwrap());
    }

    /// Waits for a notification.
    pub fn wait_for<T>(&self, guard: &mut MutexGuard<'_, T>, timeout: Duration) {
        let _ = timeout;
        self.wait(guard);
    }

    /// Waits for a notification.
    pub fn wait_until<'a, T>(
        &self,
        mut guard: MutexGuard<'a, T>,
        deadline: Instant,
    ) -> MutexGuard<'a, T> {
        let _ = deadline;
        self.wait(&mut guard);
        guard
    }

    /// Lets the lock go for one scheduling point: a model must not block
    /// where only time would wake it.
    pub fn nap<'a, T>(
        &self,
        mutex: &'a Mutex<T>,
        mut guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> MutexGuard<'a, T> {
        let _ = timeout;
        drop(guard.0.take());
        loom::thread::yield_now();
        mutex.lock()
    }

    /// Wakes every waiter.
    pub fn notify_all(&self) {
        self.0.notify_all();
    }
}

/// Threads.
pub mod thread {
    pub use loom::thread::JoinHandle;

    /// Starts a thread named `name` (named as under std, so a model can
    /// tell where a drop ran).
    pub fn spawn<F>(name: String, body: F) -> std::io::Result<JoinHandle<()>>
    where
        F: FnOnce() + Send + 'static,
    {
        loom::thread::Builder::new().name(name).spawn(body)
    }

    /// Model threads share one OS thread: no id tells them apart.
    pub fn current_id() -> Option<std::thread::ThreadId> {
        None
    }

    /// Model threads share one OS thread: no id tells them apart.
    pub fn id_of<T>(handle: &JoinHandle<T>) -> Option<std::thread::ThreadId> {
        let _ = handle;
        None
    }
}

/// A yield point: a spin loop without one never ends under loom.
pub fn spin_hint() {
    loom::thread::yield_now();
}

/// A scheduling point.
pub fn yield_now() {
    loom::thread::yield_now();
}

/// A scheduling point (loom has no time).
pub fn sleep(duration: Duration) {
    let _ = duration;
    loom::thread::yield_now();
}
