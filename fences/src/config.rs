//! Queue and device configuration, with CLR's names and defaults.

use crate::error::InvalidConfig;
use sigretire_tracker::{Placement, WaitPolicy};
use std::time::Duration;

/// When a submission batch closes and is handed to the completion thread.
///
/// ```
/// use sigretire_queue::BatchLimits;
/// use sigretire_queue::tracker::Placement;
/// let limits = BatchLimits::default();
/// assert_eq!(limits.for_signals(Placement::Host), 1000);
/// assert_eq!(limits.for_signals(Placement::Device), 64);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BatchLimits {
    /// Commands per batch when the queue's signals live in host memory
    /// (CLR's `DEBUG_CLR_MAX_BATCH_SIZE`, 1000).
    pub host_signals: usize,
    /// Commands per batch when they live in device memory (CLR: 64 with
    /// `DEBUG_CLR_DEV_SIGNALS`, so a record/sync loop does not keep hundreds
    /// of signals referenced and parked).
    pub device_signals: usize,
}

impl Default for BatchLimits {
    fn default() -> Self {
        Self {
            host_signals: 1000,
            device_signals: 64,
        }
    }
}

impl BatchLimits {
    /// The limit for a queue whose signals are at `placement`.
    ///
    /// ```
    /// use sigretire_queue::BatchLimits;
    /// use sigretire_queue::tracker::Placement;
    /// let limits = BatchLimits { host_signals: 100, device_signals: 16 };
    /// assert_eq!(limits.for_signals(Placement::Host), 100);
    /// assert_eq!(limits.for_signals(Placement::Device), 16);
    /// ```
    pub const fn for_signals(&self, placement: Placement) -> usize {
        match placement {
            Placement::Host => self.host_signals,
            Placement::Device => self.device_signals,
        }
    }
}

/// How a [`HostQueue`](crate::HostQueue) batches, synchronizes and waits.
///
/// ```
/// use sigretire_queue::QueueConfig;
/// let config = QueueConfig::default();
/// assert_eq!(config.cpu_sync_batch, 8);
/// assert!(config.validate().is_ok());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// When a submission batch closes.
    pub batch_limits: BatchLimits,
    /// A synchronize whose pending batch has fewer commands than this waits
    /// for its marker on the calling thread (CLR's
    /// `DEBUG_CLR_BATCH_CPU_SYNC_SIZE`, 8); a larger batch completes through
    /// the completion thread. 0 sends every batch to the completion thread.
    /// Either way the wait runs after the execution lock is released.
    pub cpu_sync_batch: usize,
    /// The hardware queue writes timestamps: events recorded on it are timed.
    pub profiling: bool,
    /// How CPU waits spend their time (spin, yield, sleep).
    pub wait_policy: WaitPolicy,
    /// The longest a wait may take before [`SyncError::TimedOut`](crate::SyncError::TimedOut); `None` waits
    /// as long as the GPU takes (as HIP does). `Some(Duration::ZERO)` is
    /// refused: every wait would time out before looking at the GPU once.
    pub wait_timeout: Option<Duration>,
    /// How often a wait checks the device error state.
    pub error_check_interval: Duration,
    /// Wake signals the queue makes when it is created (at most
    /// [`MAX_WAKE_SIGNALS`]), never more: interrupt signals, from a
    /// per-process budget (KFD's 4094 events). Waits whose policy sleeps
    /// ([`WaitPolicy::interrupt`]) sleep on them, as many at once as there
    /// are; others poll. The completion thread sleeps on them too, one per
    /// closed batch until its fence completes, whatever the policy. 5, as
    /// CLR keeps; 0 spends none of the budget (the completion thread and
    /// every wait then poll); none are made where the backend has none.
    pub wake_signals: usize,
}

/// The most wake signals a queue may have ([`QueueConfig::wake_signals`]):
/// they come from a per-process budget of interrupt events.
pub const MAX_WAKE_SIGNALS: usize = 64;

impl Default for QueueConfig {
    fn default() -> Self {
        Self {
            batch_limits: BatchLimits::default(),
            cpu_sync_batch: 8,
            profiling: true,
            wait_policy: WaitPolicy::spin(),
            wait_timeout: None,
            error_check_interval: Duration::from_millis(1),
            wake_signals: 5,
        }
    }
}

impl QueueConfig {
    /// Checks every value is in range: batch limits of at least 1, an
    /// error-check interval and a wait timeout (if any) longer than zero.
    /// Queue creation ([`Device::new`](crate::Device::new),
    /// [`Device::create_queue`](crate::Device::create_queue)) calls it.
    ///
    /// ```
    /// use sigretire_queue::{BatchLimits, InvalidConfig, QueueConfig};
    /// use std::time::Duration;
    /// let bad = QueueConfig {
    ///     batch_limits: BatchLimits { host_signals: 0, device_signals: 64 },
    ///     ..QueueConfig::default()
    /// };
    /// assert!(matches!(bad.validate(), Err(InvalidConfig(_))));
    /// let bad = QueueConfig { wait_timeout: Some(Duration::ZERO), ..QueueConfig::default() };
    /// assert!(matches!(bad.validate(), Err(InvalidConfig(_))));
    /// ```
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        if self.batch_limits.host_signals == 0 || self.batch_limits.device_signals == 0 {
            return Err(InvalidConfig("batch limits must be at least 1"));
        }
        if self.wake_signals > MAX_WAKE_SIGNALS {
            return Err(InvalidConfig(
                "wake_signals must be at most MAX_WAKE_SIGNALS",
            ));
        }
        if self.error_check_interval.is_zero() {
            return Err(InvalidConfig(
                "error_check_interval must be longer than zero",
            ));
        }
        if self.wait_timeout.is_some_and(|timeout| timeout.is_zero()) {
            return Err(InvalidConfig(
                "wait_timeout must be longer than zero (None waits as long as the GPU takes)",
            ));
        }
        Ok(())
    }
}

/// How a [`Device`](crate::Device) reacts to errors.
///
/// Time is not configured: elapsed times count in the clock the backend's
/// stamps come from ([`crate::tracker::backend::SignalMemory::timestamp_clock`]), a fact of
/// its hardware that no setting can contradict.
///
/// ```
/// use sigretire_queue::DeviceConfig;
/// let config = DeviceConfig::default();
/// assert!(!config.skip_abort_on_error);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DeviceConfig {
    /// Keep going after a GPU error (CLR's `HIP_SKIP_ABORT_ON_GPU_ERROR`):
    /// waits return `DeviceError` early and queues accept work.
    /// Without it the device refuses all further work (`Aborted`)
    /// where CLR would abort the process.
    pub skip_abort_on_error: bool,
}
