//! The queue layer's waits for a use, always outside the execution lock, on
//! the tracker's wait engine ([`Wait`]).
//!
//! A wait looks at the use (what the host knows, else one load of its
//! signal), and between looks spins, then, where the policy asks to sleep
//! ([`WaitPolicy::interrupt`](sigretire_tracker::WaitPolicy::interrupt)) and
//! the queue has a wake signal free, sleeps on it: the queue publishes a
//! barrier-AND on the use's signal, pinned, whose completion signal is that
//! wake signal ([`Wakes`]), and the GPU wakes the thread as the use
//! completes (or fails), with no poll of the use's signal meanwhile (each
//! one a PCIe read in device memory). The barrier-AND carries no barrier
//! bit: it waits for the use, not for what was submitted after it; where
//! later work runs before it anyway, the thread looks at the use after
//! every sleep. With no wake signal free, no room in the ring, or none at
//! all, it yields and sleep-polls as the policy says. Every slice
//! ([`QueueConfig::error_check_interval`]) it checks the device error state
//! (and returns early, without completion) and its deadline.

use crate::config::QueueConfig;
use crate::device_state::DeviceState;
use crate::error::WaitError;
use crate::status::CommandStatus;
use crate::wake::Armed;
use sigretire_tracker::{
    ForeignTicket, Status, Ticket, TimedOut, WaitPolicy, Waiter,
    backend::SignalMemory,
    wait::{Wait, WaitStop, WakeSource},
};
use std::cell::Cell;
use std::time::Duration;

/// How a queue's waits run: its policy, its timeout, and the slice between
/// two checks of the device error state.
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

/// How a wait for a use ended: as the use did (`Complete`, `Failed`), or
/// released early by the device error state (`DeviceError`); out of time,
/// without an outcome.
pub(crate) type Ended = Result<CommandStatus, TimedOut>;

/// What one look at a use found: `None` while it is pending; its status
/// once done; or that its ticket is another tracker's.
pub(crate) type Look = Option<Result<Status, ForeignTicket>>;

/// A look from a status: `None` while pending.
pub(crate) fn look(status: Result<Status, ForeignTicket>) -> Look {
    match status {
        Ok(status) if !status.is_done() => None,
        found => Some(found),
    }
}

/// What a caller returns for a wait that ended as `ended`: `failed()` for
/// a failure (the caller knows whether the queue failure is still to be
/// reported or already was); the device's error for an early return in the
/// device error state.
pub(crate) fn result(
    ended: Ended,
    device: &DeviceState,
    failed: impl FnOnce() -> WaitError,
) -> Result<(), WaitError> {
    match ended {
        Ok(CommandStatus::Complete) => Ok(()),
        Ok(CommandStatus::Failed) => Err(failed()),
        // The error state is for good: it is there to read.
        Ok(CommandStatus::DeviceError | CommandStatus::Pending) => {
            Err(device.wait_error().unwrap_or(WaitError::DeviceError {
                reason: "the device is in the error state".into(),
            }))
        }
        Err(timed_out) => Err(WaitError::TimedOut(timed_out.0)),
    }
}

/// Where a waiting thread gets a wake to sleep on: its queue, which
/// publishes a packet completing one of its wake signals.
pub(crate) trait Wakes<M: SignalMemory>: Send + Sync {
    /// A wake for `ticket`'s use, its packet published (taking the queue's
    /// lock briefly); `None` when the queue has none free or no room.
    fn arm(&self, ticket: &Ticket) -> Result<Option<Armed<M>>, sigretire_tracker::Error>;

    /// A sleeper let go of its wake: the queue's next lock holder lets go
    /// of the wake packet's pin once the packet ran.
    fn released(&self);

    /// Lets go of released wakes' pins now if the lock is free and one is
    /// waiting for a holder (a waiter that takes the lock after its wait
    /// anyway has no need); never waits for the lock.
    fn release_pending(&self);
}

/// A wake signal a sleeping wait holds, and the memory it lives in.
struct Sleeper<'a, M: SignalMemory> {
    armed: Armed<M>,
    memory: &'a M,
}

impl<M: SignalMemory> WakeSource for Sleeper<'_, M> {
    fn sleep(&mut self, timeout: Duration) -> bool {
        // SAFETY: the queue lent the signal from a pool made from its
        // tracker's memory, which `memory` is (the waiter's).
        unsafe { self.armed.sleep(self.memory, timeout) }
    }

    fn look_after_every_sleep(&self) -> bool {
        self.armed.behind()
    }
}

/// Why a wait stopped early.
enum Stop {
    DeviceError,
    /// The queue could not arm a wake for a reason other than having none.
    Arming(sigretire_tracker::Error),
}

/// A wait for a use of one tracker: what it needs besides the use.
pub(crate) struct UseWait<'a, M: SignalMemory> {
    pub(crate) settings: WaitSettings,
    pub(crate) device: &'a DeviceState,
    pub(crate) waiter: &'a Waiter<M>,
}

impl<M: SignalMemory> UseWait<'_, M> {
    /// Waits for `ticket`'s use, looking with `look` (its status, with at
    /// most one load), sleeping on a wake from `wakes` once the spin is
    /// spent if the policy asks to. A wake it slept on is released for the
    /// queue's next lock holder ([`Wakes::released`]).
    pub(crate) fn run(
        &self,
        ticket: &Ticket,
        look: impl FnMut() -> Look,
        wakes: Option<&dyn Wakes<M>>,
    ) -> Result<Ended, sigretire_tracker::Error> {
        let policy = self.settings.policy;
        // A hybrid policy guesses from, and teaches, the tracker's history
        // (one per hardware queue); any other ignores it.
        let history = self.waiter.history();
        let mut wait = Wait::new(policy)
            .timeout(self.settings.timeout)
            .slice(self.settings.slice)
            .learning(history);
        // No lookup where the spin is the same everywhere (`WaitPolicy::spin()`).
        if policy.spin != policy.device_spin {
            wait = wait.at(self.waiter.placement(ticket)?);
        }
        let wakes = wakes.filter(|_| policy.interrupt);
        let arming_failed = Cell::new(None);
        let slept = Cell::new(false);
        let ended = wait.until_woken(
            look,
            || match arming_failed.take() {
                Some(error) => Some(Stop::Arming(error)),
                None => self.device.has_error().then_some(Stop::DeviceError),
            },
            || {
                let armed = match wakes?.arm(ticket) {
                    Ok(armed) => armed?,
                    Err(error) => {
                        arming_failed.set(Some(error));
                        return None;
                    }
                };
                slept.set(true);
                Some(Sleeper {
                    armed,
                    memory: self.waiter.memory(),
                })
            },
        );
        // Done reading the wake signal (the engine dropped it): it may be
        // lent again once its packet ran, and the pin goes then too.
        if slept.get()
            && let Some(wakes) = wakes
        {
            wakes.released();
        }
        if ended.is_ok() {
            wait.teach(history);
        }
        match ended {
            Ok(Ok(status)) => Ok(Ok(CommandStatus::from(status))),
            Ok(Err(foreign)) => Err(foreign.into()),
            Err(WaitStop::Halted(Stop::DeviceError)) => Ok(Ok(CommandStatus::DeviceError)),
            Err(WaitStop::Halted(Stop::Arming(error))) => Err(error),
            Err(WaitStop::TimedOut(timeout)) => Ok(Err(TimedOut(timeout))),
        }
    }
}

#[cfg(all(test, feature = "sim"))]
mod tests {
    use super::*;
    use crate::config::DeviceConfig;
    use sigretire_tracker::{Request, Tracker};
    use std::cell::Cell;

    /// A use of a tracker on a stepped simulator nobody drives: it never
    /// completes by itself.
    fn pending_use() -> (Waiter<sigretire_sim::backend::SimMemory>, Ticket) {
        let (mut tracker, queue) =
            sigretire_sim::backend::stepped_tracker(Default::default()).unwrap();
        let index = queue.reserve().unwrap();
        let ticket = tracker.acquire(Request::packet(index)).unwrap().ticket;
        (tracker.waiter(), ticket)
    }

    fn settings(timeout: Option<Duration>, slice: Duration) -> WaitSettings {
        WaitSettings {
            policy: WaitPolicy::blocking(),
            timeout,
            slice,
        }
    }

    #[test]
    fn a_device_error_ends_a_wait_early() {
        let device = DeviceState::new(DeviceConfig {
            skip_abort_on_error: true,
        });
        let (waiter, ticket) = pending_use();
        let wait = UseWait {
            settings: settings(None, Duration::from_micros(100)),
            device: &device,
            waiter: &waiter,
        };
        let looks = Cell::new(0);
        let ended = wait
            .run(
                &ticket,
                || {
                    looks.set(looks.get() + 1);
                    if looks.get() == 3 {
                        device.report("injected".into());
                    }
                    look(Ok(Status::Pending))
                },
                None,
            )
            .unwrap();
        assert_eq!(ended, Ok(CommandStatus::DeviceError));
        assert_eq!(looks.get(), 3);
        assert_eq!(
            result(ended, &device, || unreachable!("not failed")),
            Err(WaitError::DeviceError {
                reason: "injected".into()
            })
        );
    }

    #[test]
    fn a_done_use_wins_over_a_device_error() {
        let device = DeviceState::new(DeviceConfig::default());
        device.report("injected".into());
        let (waiter, ticket) = pending_use();
        let wait = UseWait {
            settings: settings(Some(Duration::from_secs(1)), Duration::from_millis(1)),
            device: &device,
            waiter: &waiter,
        };
        let ended = wait
            .run(&ticket, || look(Ok(Status::Complete)), None)
            .unwrap();
        assert_eq!(ended, Ok(CommandStatus::Complete));
    }

    #[test]
    fn a_wait_times_out() {
        let device = DeviceState::new(DeviceConfig::default());
        let (waiter, ticket) = pending_use();
        let wait = UseWait {
            settings: settings(Some(Duration::from_millis(3)), Duration::from_millis(1)),
            device: &device,
            waiter: &waiter,
        };
        let ended = wait
            .run(&ticket, || look(Ok(Status::Pending)), None)
            .unwrap();
        assert_eq!(ended, Err(TimedOut(Duration::from_millis(3))));
    }

    #[test]
    fn a_failed_use_ends_the_wait_failed() {
        let device = DeviceState::new(DeviceConfig::default());
        let (waiter, ticket) = pending_use();
        let wait = UseWait {
            settings: settings(None, Duration::from_millis(1)),
            device: &device,
            waiter: &waiter,
        };
        let ended = wait
            .run(&ticket, || look(Ok(Status::Failed)), None)
            .unwrap();
        assert_eq!(ended, Ok(CommandStatus::Failed));
    }
}
