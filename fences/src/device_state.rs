//! The device's error state, one flag every wait checks (set for a
//! device-wide fault only: a failed queue is failed on its own, in its
//! `Submission`), and the counters of its queues' teardowns.

use crate::config::DeviceConfig;
use crate::error::WaitError;
use crate::sync::{AtomicBool, AtomicU64, Mutex, Ordering, identity};
use std::sync::OnceLock;
use std::thread::ThreadId;

/// The device-wide state every queue and the completion thread share.
pub(crate) struct DeviceState {
    pub(crate) config: DeviceConfig,
    in_error: AtomicBool,
    reason: Mutex<Option<String>>,
    /// The completion thread, once started: a queue torn down there would be
    /// a bug, and tests check it never happens.
    pub(crate) handler_thread: OnceLock<ThreadId>,
    pub(crate) queue_teardowns: AtomicU64,
    pub(crate) teardowns_on_handler: AtomicU64,
    pub(crate) teardowns_leaked: AtomicU64,
}

impl DeviceState {
    pub(crate) fn new(config: DeviceConfig) -> Self {
        Self {
            config,
            in_error: AtomicBool::new(false),
            reason: Mutex::new(None),
            handler_thread: OnceLock::new(),
            queue_teardowns: AtomicU64::new(0),
            teardowns_on_handler: AtomicU64::new(0),
            teardowns_leaked: AtomicU64::new(0),
        }
    }

    /// Puts the device in the error state (the first reason is kept).
    pub(crate) fn report(&self, reason: String) {
        let mut slot = self.reason.lock();
        if slot.is_none() {
            *slot = Some(reason);
        }
        drop(slot);
        self.in_error.store(true, Ordering::Release);
    }

    pub(crate) fn has_error(&self) -> bool {
        self.in_error.load(Ordering::Acquire)
    }

    pub(crate) fn reason(&self) -> Option<String> {
        if !self.has_error() {
            return None;
        }
        self.reason.lock().clone()
    }

    /// The error a wait returns early with, if the device is in the error
    /// state: `DeviceError` where it was told not to abort, else `Aborted`.
    pub(crate) fn wait_error(&self) -> Option<WaitError> {
        let reason = self.reason()?;
        Some(if self.config.skip_abort_on_error {
            WaitError::DeviceError { reason }
        } else {
            WaitError::Aborted { reason }
        })
    }

    /// Refuses new work on an aborting device in the error state.
    pub(crate) fn check_accepting(&self) -> Result<(), WaitError> {
        match self.wait_error() {
            Some(error @ WaitError::Aborted { .. }) => Err(error),
            _ => Ok(()),
        }
    }

    /// Records a queue teardown and whether it ran on the completion thread.
    pub(crate) fn note_teardown(&self) {
        self.queue_teardowns.fetch_add(1, Ordering::Relaxed);
        if identity::current().is_some_and(|id| self.handler_thread.get() == Some(&id)) {
            self.teardowns_on_handler.fetch_add(1, Ordering::Relaxed);
        }
    }
}
