//! The one place the crate takes its atomics, locks, condition variables,
//! channels and threads from.
//!
//! Under `--cfg loom` everything here comes from loom, so a model of the
//! queue's protocols ("CPU wait outside the lock versus concurrent submit",
//! "async handler versus finish") explores every interleaving of the real
//! code; otherwise it is std and parking_lot. Nothing outside this module
//! names `std::sync` or `parking_lot` directly.

#[cfg(loom)]
pub(crate) use loom::sync::Arc;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU8, AtomicU64};
#[cfg(not(loom))]
pub(crate) use std::sync::Arc;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64};

pub(crate) use core::sync::atomic::Ordering;
use std::time::Duration;

/// Takes the value out of `arc` if this was its last strong reference, in
/// one atomic step (loom has no `into_inner`: its models do not race
/// teardowns, so `try_unwrap` stands in).
pub(crate) fn arc_into_inner<T>(arc: Arc<T>) -> Option<T> {
    #[cfg(not(loom))]
    {
        Arc::into_inner(arc)
    }
    #[cfg(loom)]
    {
        Arc::try_unwrap(arc).ok()
    }
}

/// A mutual-exclusion lock with parking_lot's infallible `lock()`.
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(
    #[cfg(loom)] loom::sync::Mutex<T>,
    #[cfg(not(loom))] parking_lot::Mutex<T>,
);

/// The guard of a [`Mutex`].
#[cfg(not(loom))]
pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

/// The guard of a [`Mutex`] (loom's guard moves through `Condvar::wait`, so it
/// sits in an option while it does).
#[cfg(loom)]
pub(crate) struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>);

#[cfg(loom)]
impl<T> core::ops::Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0
            .as_ref()
            .expect("guard present outside Condvar::wait")
    }
}

#[cfg(loom)]
impl<T> core::ops::DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0
            .as_mut()
            .expect("guard present outside Condvar::wait")
    }
}

#[cfg(not(loom))]
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

#[cfg(loom)]
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

/// A condition variable for [`Mutex`].
#[derive(Debug, Default)]
pub(crate) struct Condvar(
    #[cfg(loom)] loom::sync::Condvar,
    #[cfg(not(loom))] parking_lot::Condvar,
);

impl Condvar {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Waits for a notification or `timeout` (loom: a notification only, as
    /// loom has no time; callers re-check their condition either way).
    pub(crate) fn wait_for<T>(&self, guard: &mut MutexGuard<'_, T>, timeout: Duration) {
        #[cfg(not(loom))]
        {
            self.0.wait_for(guard, timeout);
        }
        #[cfg(loom)]
        {
            let _ = timeout;
            let inner = guard.0.take().expect("guard present");
            guard.0 = Some(self.0.wait(inner).unwrap());
        }
    }

    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}

/// Channels to the completion thread.
pub(crate) mod mpsc {
    #[cfg(loom)]
    pub(crate) use loom::sync::mpsc::{Receiver, Sender, channel};
    #[cfg(not(loom))]
    pub(crate) use std::sync::mpsc::{Receiver, Sender, channel};

    /// What a bounded wait for a message found.
    pub(crate) enum Received<T> {
        Message(T),
        Nothing,
        Disconnected,
    }

    /// Waits up to `timeout` for a message (loom: does not wait, a
    /// scheduling point instead).
    pub(crate) fn recv_for<T>(rx: &Receiver<T>, timeout: std::time::Duration) -> Received<T> {
        #[cfg(not(loom))]
        {
            match rx.recv_timeout(timeout) {
                Ok(message) => Received::Message(message),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Received::Nothing,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Received::Disconnected,
            }
        }
        #[cfg(loom)]
        {
            let _ = timeout;
            match rx.try_recv() {
                Ok(message) => Received::Message(message),
                Err(std::sync::mpsc::TryRecvError::Empty) => {
                    loom::thread::yield_now();
                    Received::Nothing
                }
                Err(std::sync::mpsc::TryRecvError::Disconnected) => Received::Disconnected,
            }
        }
    }
}

/// Threads: the completion thread is the only one this crate starts.
pub(crate) mod thread {
    #[cfg(loom)]
    pub(crate) use loom::thread::JoinHandle;
    #[cfg(not(loom))]
    pub(crate) use std::thread::JoinHandle;

    /// Starts a named thread.
    pub(crate) fn spawn<F>(name: String, body: F) -> std::io::Result<JoinHandle<()>>
    where
        F: FnOnce() + Send + 'static,
    {
        #[cfg(not(loom))]
        {
            std::thread::Builder::new().name(name).spawn(body)
        }
        #[cfg(loom)]
        {
            let _ = name;
            Ok(loom::thread::spawn(body))
        }
    }
}

/// Sleeps (loom: a scheduling point; loom has no time).
pub(crate) fn sleep(duration: Duration) {
    #[cfg(loom)]
    {
        let _ = duration;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    std::thread::sleep(duration);
}
