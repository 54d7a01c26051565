//! The GPU clock: real time in threaded mode, a deterministic virtual clock in
//! stepped mode, both counting in GPU ticks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How far the stepped clock moves per processor event (a launch or a
/// completion): 100 ticks, one microsecond of the MI300X's 100 MHz counter,
/// so stepped timestamps read like real ones and every event gets a distinct,
/// increasing stamp.
///
/// ```
/// use sigretire_sim::{packets, Sim, SimConfig, SimQueueConfig, STEPPED_TICKS_PER_EVENT};
///
/// let sim = Sim::new(SimConfig::default());
/// let queue = sim.create_queue(SimQueueConfig::default())?;
/// queue.submit(packets::kernel(0, None))?;
/// queue.run_until_idle(); // two events: a launch and a completion
/// assert_eq!(sim.now_ticks(), 2 * STEPPED_TICKS_PER_EVENT);
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
pub const STEPPED_TICKS_PER_EVENT: u64 = 100;

#[derive(Debug)]
pub(crate) enum Clock {
    /// Advanced only by processor events.
    Stepped { ticks: AtomicU64 },
    /// Real time since `epoch`, in ticks of `tick_ns` nanoseconds.
    RealTime { epoch: Instant, tick_ns: u64 },
}

impl Clock {
    pub(crate) fn stepped() -> Self {
        Clock::Stepped {
            ticks: AtomicU64::new(0),
        }
    }

    pub(crate) fn real_time(tick: Duration) -> Self {
        Clock::RealTime {
            epoch: Instant::now(),
            tick_ns: u64::try_from(tick.as_nanos()).unwrap_or(u64::MAX).max(1),
        }
    }

    /// The current GPU time in ticks.
    pub(crate) fn now_ticks(&self) -> u64 {
        match self {
            Clock::Stepped { ticks } => ticks.load(Ordering::Acquire),
            Clock::RealTime { tick_ns, .. } => self.now_ns() / tick_ns,
        }
    }

    /// The time of a processor event in ticks: stepped, the clock moves
    /// forward first, so every event has its own stamp.
    pub(crate) fn event(&self) -> u64 {
        match self {
            Clock::Stepped { ticks } => {
                ticks.fetch_add(STEPPED_TICKS_PER_EVENT, Ordering::AcqRel) + STEPPED_TICKS_PER_EVENT
            }
            Clock::RealTime { .. } => self.now_ticks(),
        }
    }

    /// The time of a completion that cost the packet processor `cost`
    /// ([`CostProfile::completion`](crate::CostProfile::completion)):
    /// stepped, the virtual clock also moves by that cost (in whole ticks of
    /// `tick`), so the packet's `end_ts` shows it; in real time the
    /// processor already waited for it.
    pub(crate) fn completion_event(&self, cost: Duration, tick: Duration) -> u64 {
        match self {
            Clock::Stepped { ticks } => {
                let charged =
                    u64::try_from(cost.as_nanos() / tick.as_nanos().max(1)).unwrap_or(u64::MAX);
                let step = STEPPED_TICKS_PER_EVENT.saturating_add(charged);
                ticks.fetch_add(step, Ordering::AcqRel).saturating_add(step)
            }
            Clock::RealTime { .. } => self.now_ticks(),
        }
    }

    /// Real nanoseconds since the simulator started (0 in stepped mode, where
    /// nothing waits for real time).
    pub(crate) fn now_ns(&self) -> u64 {
        match self {
            Clock::Stepped { .. } => 0,
            Clock::RealTime { epoch, .. } => {
                u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
            }
        }
    }

    /// The instant `ns` nanoseconds after the simulator started.
    pub(crate) fn instant_at(&self, ns: u64) -> Instant {
        match self {
            Clock::Stepped { .. } => Instant::now(),
            Clock::RealTime { epoch, .. } => *epoch + Duration::from_nanos(ns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stepped_events_are_distinct_and_increasing() {
        let clock = Clock::stepped();
        let a = clock.event();
        let b = clock.event();
        assert_eq!(b - a, STEPPED_TICKS_PER_EVENT);
        assert_eq!(clock.now_ticks(), b);
    }

    #[test]
    fn stepped_completions_are_charged_their_cost_in_ticks() {
        let clock = Clock::stepped();
        let tick = Duration::from_nanos(10);
        let free = clock.completion_event(Duration::ZERO, tick);
        assert_eq!(free, STEPPED_TICKS_PER_EVENT);
        let costly = clock.completion_event(Duration::from_nanos(1_100), tick);
        assert_eq!(costly - free, STEPPED_TICKS_PER_EVENT + 110);
    }

    #[test]
    fn real_time_counts_ticks() {
        let clock = Clock::real_time(Duration::from_nanos(10));
        std::thread::sleep(Duration::from_millis(1));
        assert!(clock.now_ticks() >= 100_000);
    }
}
