//! Tracker configuration.

use crate::backend::Placement;
use crate::error::InvalidConfig;

/// How a tracker sizes its ring and places its signals.
///
/// Every field has a range, which [`validate`](Self::validate) (and every
/// tracker's constructor) checks, so that no value can overflow an
/// addition, ask for an allocation the process cannot make, or stall the
/// tracker: see the `MAX_` constants.
///
/// ```
/// use sigretire_tracker::{Config, Placement};
/// let config = Config { signals: Placement::Device, ..Config::default() };
/// assert_eq!(config.initial_size, 64);
/// assert_eq!(config.max_in_flight(), 1024);
/// assert!(config.validate().is_ok());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Signals in the ring at start (CLR's `ROC_SIGNAL_POOL_SIZE`, 64).
    /// 1 to [`Config::MAX_INITIAL_SIZE`].
    pub initial_size: usize,
    /// The ring grows up to this many times `initial_size` (CLR: 16).
    /// 1 to [`Config::MAX_GROWTH_LIMIT`], and `initial_size * growth_limit`
    /// at most [`Config::MAX_IN_FLIGHT`].
    pub growth_limit: usize,
    /// Where the ring's signals live: `Device` for uses a GPU waiter or a CPU
    /// sync may read (timing-only uses always get host signals).
    pub signals: Placement,
    /// Signals allocated at once when a pool runs dry (growth, spares).
    /// 1 to [`Config::MAX_ALLOCATION_BATCH`].
    pub refill_batch: usize,
    /// Host signals allocated at once for the timing-only pool.
    /// 1 to [`Config::MAX_ALLOCATION_BATCH`].
    pub timing_batch: usize,
    /// How far from the oldest use back-pressure looks for a fence to wait
    /// for (at most the ring, whatever it says). 1 to
    /// [`Config::MAX_IN_FLIGHT`].
    pub backpressure_window: usize,
    /// [`Tracker::poll`](crate::Tracker::poll) loads a fence only once the
    /// read index has passed this many packets since the last probe, so a
    /// runtime that polls often still pays one load per interval. 1 (the
    /// default) probes on every poll. Probes that make room or answer a
    /// query are never held back. 1 to [`Config::MAX_IN_FLIGHT`].
    pub probe_interval: usize,
    /// How many of the most recent timed uses keep their harvested stamps
    /// answerable after their signal has served later uses (24 bytes each,
    /// allocated at once at the first harvest: 384 KiB by default, nothing
    /// for a tracker that times nothing). An older use's stamps are reported
    /// [`TimestampsError::Expired`](crate::TimestampsError::Expired). A use that is held (an event's
    /// reference) keeps its stamps as long as it is held, whatever this
    /// says. 0 to [`Config::MAX_STAMP_HISTORY`].
    pub stamp_history: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            initial_size: 64,
            growth_limit: 16,
            signals: Placement::Host,
            refill_batch: 32,
            timing_batch: 16,
            backpressure_window: 32,
            probe_interval: 1,
            stamp_history: 1 << 14,
        }
    }
}

impl Config {
    /// The largest `initial_size`.
    pub const MAX_INITIAL_SIZE: usize = 1 << 16;
    /// The largest `growth_limit`.
    pub const MAX_GROWTH_LIMIT: usize = 1 << 10;
    /// The most uses in flight any configuration allows (64 MiB of
    /// 64-byte signals).
    pub const MAX_IN_FLIGHT: usize = 1 << 20;
    /// The largest `refill_batch` and `timing_batch`.
    pub const MAX_ALLOCATION_BATCH: usize = 1 << 12;
    /// The largest `stamp_history` (384 MiB of stamps at most).
    pub const MAX_STAMP_HISTORY: usize = 1 << 24;

    /// The most uses in flight before back-pressure.
    pub const fn max_in_flight(&self) -> usize {
        self.initial_size.saturating_mul(self.growth_limit)
    }

    /// Checks every field against its documented range.
    ///
    /// ```
    /// use sigretire_tracker::{Config, InvalidConfig};
    /// let bad = Config { refill_batch: usize::MAX, ..Config::default() };
    /// let Err(InvalidConfig(why)) = bad.validate() else { panic!() };
    /// assert!(why.contains("refill_batch"));
    /// ```
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        let bad = |msg| Err(InvalidConfig(msg));
        if !(1..=Self::MAX_INITIAL_SIZE).contains(&self.initial_size) {
            return bad("initial_size must be 1 to Config::MAX_INITIAL_SIZE (65536)");
        }
        if !(1..=Self::MAX_GROWTH_LIMIT).contains(&self.growth_limit) {
            return bad("growth_limit must be 1 to Config::MAX_GROWTH_LIMIT (1024)");
        }
        if self.max_in_flight() > Self::MAX_IN_FLIGHT {
            return bad(
                "max_in_flight (initial_size * growth_limit) must be at most Config::MAX_IN_FLIGHT (2^20)",
            );
        }
        if !(1..=Self::MAX_ALLOCATION_BATCH).contains(&self.refill_batch) {
            return bad("refill_batch must be 1 to Config::MAX_ALLOCATION_BATCH (4096)");
        }
        if !(1..=Self::MAX_ALLOCATION_BATCH).contains(&self.timing_batch) {
            return bad("timing_batch must be 1 to Config::MAX_ALLOCATION_BATCH (4096)");
        }
        if !(1..=Self::MAX_IN_FLIGHT).contains(&self.backpressure_window) {
            return bad("backpressure_window must be 1 to Config::MAX_IN_FLIGHT (2^20)");
        }
        if !(1..=Self::MAX_IN_FLIGHT).contains(&self.probe_interval) {
            return bad("probe_interval must be 1 to Config::MAX_IN_FLIGHT (2^20)");
        }
        if self.stamp_history > Self::MAX_STAMP_HISTORY {
            return bad("stamp_history must be at most Config::MAX_STAMP_HISTORY (2^24)");
        }
        Ok(())
    }
}
