//! Tracker configuration.

use crate::backend::Placement;
use crate::error::Error;

/// How a tracker sizes its ring and places its signals.
///
/// ```
/// use tracker::{Config, Placement};
/// let config = Config { signals: Placement::Device, ..Config::default() };
/// assert_eq!(config.initial_size, 64);
/// assert_eq!(config.max_in_flight(), 1024);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Signals in the ring at start (CLR's `ROC_SIGNAL_POOL_SIZE`, 64).
    pub initial_size: usize,
    /// The ring grows up to this many times `initial_size` (CLR: 16).
    pub growth_limit: usize,
    /// Where the ring's signals live: `Device` for uses a GPU waiter or a CPU
    /// sync may read (timing-only uses always get host signals).
    pub signals: Placement,
    /// Signals allocated at once when a pool runs dry (growth, spares).
    pub refill_batch: usize,
    /// Host signals allocated at once for the timing-only pool.
    pub timing_batch: usize,
    /// Width of the generation counter (1-32 bits). Narrow counters are for
    /// tests: retirement never compares generation numbers.
    pub generation_bits: u32,
    /// How far from the oldest use back-pressure looks for a fence to wait for.
    pub backpressure_window: usize,
    /// [`Tracker::poll`](crate::Tracker::poll) loads a fence only once the
    /// read index has passed this many packets since the last probe, so a
    /// runtime that polls often still pays one load per batch. 1 (the
    /// default) probes on every poll. Probes that make room or answer a
    /// query are never held back.
    pub probe_batch: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            initial_size: 64,
            growth_limit: 16,
            signals: Placement::Host,
            refill_batch: 32,
            timing_batch: 16,
            generation_bits: 32,
            backpressure_window: 32,
            probe_batch: 1,
        }
    }
}

impl Config {
    /// The most uses in flight before back-pressure.
    pub const fn max_in_flight(&self) -> usize {
        self.initial_size.saturating_mul(self.growth_limit)
    }

    pub(crate) fn validate(&self) -> Result<(), Error> {
        let bad = |msg| Err(Error::InvalidConfig(msg));
        if self.initial_size == 0 {
            return bad("initial_size must be at least 1");
        }
        if self.growth_limit == 0 {
            return bad("growth_limit must be at least 1");
        }
        if self.refill_batch == 0 || self.timing_batch == 0 {
            return bad("refill_batch and timing_batch must be at least 1");
        }
        if !(1..=32).contains(&self.generation_bits) {
            return bad("generation_bits must be between 1 and 32");
        }
        if self.probe_batch == 0 {
            return bad("probe_batch must be at least 1");
        }
        if self.backpressure_window == 0 {
            return bad("backpressure_window must be at least 1");
        }
        Ok(())
    }
}
