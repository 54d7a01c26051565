//! CPU waits, always outside the execution lock (except in the old
//! behaviour this crate keeps for its regression test).
//!
//! A wait runs the tracker's own lock-free wait ([`crate::tracker::Waiter::wait`] or
//! [`crate::tracker::SignalRef::wait`]) in slices of
//! [`QueueConfig::error_check_interval`], so that between slices it can
//! notice the device error state (and return early, without completion) and
//! its deadline. The spin and yield phases of the wait policy are spent once
//! over the whole wait, not once per slice.

use crate::config::QueueConfig;
use crate::device_state::DeviceState;
use crate::error::Error;
use crate::stats::{Counters, bump};
#[cfg(test)]
use sigretire_tracker::TimedOut;
use sigretire_tracker::{Status, WaitError, WaitPolicy};
use std::time::{Duration, Instant};

/// How long and how a wait runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WaitSettings {
    pub(crate) policy: WaitPolicy,
    pub(crate) timeout: Option<Duration>,
    pub(crate) slice: Duration,
}

impl From<&QueueConfig> for WaitSettings {
    fn from(config: &QueueConfig) -> Self {
        Self {
            policy: config.wait_policy,
            timeout: config.wait_timeout,
            slice: config.error_check_interval,
        }
    }
}

/// How a batch ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Its fence completed: every command in it completed.
    Complete,
    /// Its fence failed (a queue error).
    Failed,
    /// The device entered the error state before the fence was seen done.
    DeviceError(Error),
}

/// How a wait ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum WaitEnd {
    /// The use completed or failed.
    Done(Status),
    /// The device entered the error state first: the wait returns early.
    DeviceError(Error),
    /// The deadline passed first.
    TimedOut(Duration),
}

impl WaitEnd {
    /// How the batch the wait was for completes: as its fence ended, or
    /// released by the device error; `None` after the deadline (the batch
    /// is not done, and the caller hands it on).
    pub(crate) fn outcome(&self) -> Option<Outcome> {
        match self {
            WaitEnd::Done(Status::Complete) => Some(Outcome::Complete),
            WaitEnd::Done(_) => Some(Outcome::Failed),
            WaitEnd::DeviceError(error) => Some(Outcome::DeviceError(error.clone())),
            WaitEnd::TimedOut(_) => None,
        }
    }

    /// What the caller returns: every wait of the crate reads its end here.
    /// A failure is `failed()` (the caller knows whether the queue failure
    /// is still to be reported or already was); an early return in the
    /// device error state is counted in `counters` (the queue's, where the
    /// caller has them).
    pub(crate) fn into_result(
        self,
        counters: Option<&Counters>,
        failed: impl FnOnce() -> Error,
    ) -> Result<(), Error> {
        match self {
            WaitEnd::Done(Status::Complete) => Ok(()),
            WaitEnd::Done(_) => Err(failed()),
            WaitEnd::DeviceError(error) => {
                if let Some(counters) = counters {
                    bump(&counters.device_error_returns);
                }
                Err(error)
            }
            WaitEnd::TimedOut(timeout) => Err(Error::TimedOut(timeout)),
        }
    }
}

/// What is left of `policy`'s spin and yield phases after `elapsed`.
fn remaining(policy: WaitPolicy, elapsed: Duration) -> WaitPolicy {
    let spin = policy.spin.saturating_sub(elapsed);
    let yield_for = (policy.spin + policy.yield_for)
        .saturating_sub(elapsed)
        .saturating_sub(spin);
    WaitPolicy {
        spin,
        yield_for,
        ..policy
    }
}

/// Waits with `wait_slice` (a tracker wait bounded by its first argument)
/// until the use is done, the device is in the error state, or the deadline.
pub(crate) fn wait_for(
    mut wait_slice: impl FnMut(Duration, WaitPolicy) -> Result<Status, WaitError>,
    device: &DeviceState,
    settings: &WaitSettings,
) -> Result<WaitEnd, Error> {
    let start = Instant::now();
    loop {
        let elapsed = start.elapsed();
        let mut slice = settings.slice;
        if let Some(timeout) = settings.timeout {
            slice = slice.min(timeout.saturating_sub(elapsed));
        }
        if device.has_error() {
            // Look once, then return early if the work is not done.
            slice = Duration::ZERO;
        }
        match wait_slice(slice, remaining(settings.policy, elapsed)) {
            Ok(status) if status.is_done() => return Ok(WaitEnd::Done(status)),
            Ok(_) | Err(WaitError::TimedOut(_)) => {}
            Err(WaitError::Foreign(error)) => {
                return Err(sigretire_tracker::Error::from(error).into());
            }
        }
        if let Some(error) = device.wait_error() {
            return Ok(WaitEnd::DeviceError(error));
        }
        if let Some(timeout) = settings.timeout
            && start.elapsed() >= timeout
        {
            return Ok(WaitEnd::TimedOut(timeout));
        }
    }
}

/// As [`wait_for`], for a wait that sleeps, having just looked at the use:
/// `sleep` sleeps, at most its argument, until the GPU wakes the thread,
/// and says whether it did. The use is looked at (`wait_slice` given no
/// time) after every wake and, with `look_each_slice`, after every sleep;
/// the device error state and the deadline are checked first and after
/// every sleep.
pub(crate) fn sleep_for(
    mut wait_slice: impl FnMut(Duration, WaitPolicy) -> Result<Status, WaitError>,
    mut sleep: impl FnMut(Duration) -> bool,
    look_each_slice: bool,
    device: &DeviceState,
    settings: &WaitSettings,
) -> Result<WaitEnd, Error> {
    let start = Instant::now();
    let mut look = false;
    loop {
        if look {
            match wait_slice(Duration::ZERO, settings.policy) {
                Ok(status) if status.is_done() => return Ok(WaitEnd::Done(status)),
                Ok(_) | Err(WaitError::TimedOut(_)) => {}
                Err(WaitError::Foreign(error)) => {
                    return Err(sigretire_tracker::Error::from(error).into());
                }
            }
        }
        if let Some(error) = device.wait_error() {
            return Ok(WaitEnd::DeviceError(error));
        }
        let elapsed = start.elapsed();
        let mut slice = settings.slice;
        if let Some(timeout) = settings.timeout {
            if elapsed >= timeout {
                return Ok(WaitEnd::TimedOut(timeout));
            }
            slice = slice.min(timeout - elapsed);
        }
        look = sleep(slice) || look_each_slice;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DeviceConfig;

    #[test]
    fn the_policy_is_spent_once_over_the_wait() {
        let policy = WaitPolicy {
            spin: Duration::from_micros(50),
            device_spin: Duration::from_micros(50),
            yield_for: Duration::from_micros(100),
            max_sleep: Duration::from_micros(7),
            interrupt: false,
        };
        assert_eq!(remaining(policy, Duration::ZERO), policy);
        let later = remaining(policy, Duration::from_micros(80));
        assert_eq!(later.spin, Duration::ZERO);
        assert_eq!(later.yield_for, Duration::from_micros(70));
        let done = remaining(policy, Duration::from_millis(1));
        assert_eq!(
            (done.spin, done.yield_for),
            (Duration::ZERO, Duration::ZERO)
        );
        assert_eq!(done.max_sleep, policy.max_sleep);
    }

    #[test]
    fn a_device_error_ends_a_wait_early() {
        let device = DeviceState::new(DeviceConfig {
            skip_abort_on_error: true,
        });
        let settings = WaitSettings {
            policy: WaitPolicy::blocking(),
            timeout: None,
            slice: Duration::from_micros(100),
        };
        let mut polls = 0;
        let end = wait_for(
            |slice, _| {
                polls += 1;
                if polls == 3 {
                    device.report("injected".into());
                }
                Err(WaitError::TimedOut(TimedOut(slice)))
            },
            &device,
            &settings,
        )
        .unwrap();
        assert_eq!(
            end,
            WaitEnd::DeviceError(Error::DeviceError {
                reason: "injected".into()
            })
        );
        assert_eq!(polls, 3);
    }

    #[test]
    fn a_done_use_wins_over_a_device_error() {
        let device = DeviceState::new(DeviceConfig::default());
        device.report("injected".into());
        let settings = WaitSettings {
            policy: WaitPolicy::blocking(),
            timeout: Some(Duration::from_secs(1)),
            slice: Duration::from_millis(1),
        };
        let end = wait_for(|_, _| Ok(Status::Complete), &device, &settings).unwrap();
        assert_eq!(end, WaitEnd::Done(Status::Complete));
    }

    #[test]
    fn a_wait_times_out() {
        let device = DeviceState::new(DeviceConfig::default());
        let settings = WaitSettings {
            policy: WaitPolicy::blocking(),
            timeout: Some(Duration::from_millis(3)),
            slice: Duration::from_millis(1),
        };
        let end = wait_for(
            |slice, _| {
                std::thread::sleep(slice);
                Err(WaitError::TimedOut(TimedOut(slice)))
            },
            &device,
            &settings,
        )
        .unwrap();
        assert_eq!(end, WaitEnd::TimedOut(Duration::from_millis(3)));
    }
}
