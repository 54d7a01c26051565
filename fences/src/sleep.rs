//! Waits that sleep: with a policy that asks for it
//! ([`WaitPolicy::interrupt`](sigretire_tracker::WaitPolicy::interrupt)),
//! a CPU wait spends no CPU while the GPU works, instead of polling.
//!
//! First the policy's spin (its `device_spin` on a device-memory signal,
//! none in [`WaitPolicy::blocking`](sigretire_tracker::WaitPolicy::blocking):
//! there each poll is a PCIe read): work that was nearly done ends there,
//! with no packet and no wake-up to pay.
//!
//! The use's own signal may be in device memory, whose writes wake nobody
//! (and each poll of it crosses PCIe). So the waiter takes the lock briefly
//! and publishes a barrier-AND on the use's signal, pinned, whose
//! completion signal is one of the queue's wake signals (`wake`); then it
//! sleeps on that signal outside the lock. The packet processor completes
//! it when the use is done (or fails it when the use failed), which wakes
//! the thread, and one look at the use ends the wait. The barrier-AND
//! carries no barrier bit: it waits for the use, not for what was
//! submitted after it. Between sleeps the waiter still looks at the use
//! once per [`QueueConfig::error_check_interval`](crate::QueueConfig::error_check_interval),
//! so a wake packet queued behind later work delays nothing by more than
//! that, and the device error state is seen as in any wait.
//!
//! A wait finds no wake signal free (all lent to sleeping waits whose
//! packets have not run), no room in the ring, or a queue without wake
//! signals: it polls as its policy's yield and sleep phases say, counted in
//! [`QueueStats::wake_fallbacks`](crate::QueueStats::wake_fallbacks).

use crate::batch::SleepingWaits;
use crate::cpu_wait::{self, WaitEnd};
use crate::error::Error;
use crate::publish::QueueTracker;
use crate::queue::QueueCore;
use crate::stats::bump;
use sigretire_tracker::{SignalMemory, Status, Ticket, WaitError, WaitPolicy};
use std::time::Duration;

impl<T: QueueTracker> QueueCore<T> {
    /// Waits for `ticket`'s use with `wait_slice` (a tracker wait bounded by
    /// its first argument), sleeping on a wake signal after the policy's
    /// spin if the policy asks for it and one is free.
    pub(crate) fn wait_maybe_sleeping(
        &self,
        ticket: &Ticket,
        mut wait_slice: impl FnMut(Duration, WaitPolicy) -> Result<Status, WaitError>,
    ) -> Result<WaitEnd, Error> {
        // The spin that suits where the use's signal lives, for the whole
        // wait (the policy's `device_spin` on device memory); no lookup
        // where both are the same, as in `WaitPolicy::spin()`.
        let mut settings = self.settings();
        if settings.policy.spin != settings.policy.device_spin {
            let placement = self.waiter.placement(ticket)?;
            settings.policy = settings
                .policy
                .with_spin(settings.policy.spin_for(placement));
        }
        if !settings.policy.interrupt {
            return cpu_wait::wait_for(wait_slice, self.state(), &settings);
        }
        // The spin phase, once: a use that ends within it costs no packet.
        let spin = settings.timeout.map_or(settings.policy.spin, |timeout| {
            settings.policy.spin.min(timeout)
        });
        let spin_only = WaitPolicy {
            yield_for: Duration::ZERO,
            ..settings.policy
        };
        if let Ok(status) = wait_slice(spin, spin_only)
            && status.is_done()
        {
            return Ok(WaitEnd::Done(status));
        }
        let memory = self.waiter.memory();
        let armed = self.lock().arm_wake(&self.stats, memory, ticket)?;
        let Some(armed) = armed else {
            bump(&self.stats.wake_fallbacks);
            return cpu_wait::wait_for(wait_slice, self.state(), &settings);
        };
        bump(&self.stats.sleeping_waits);
        let end = cpu_wait::sleep_for(
            wait_slice,
            // SAFETY: a wake signal of this queue's memory, lent to this
            // wait; it leaves 1 when its packet completes or fails.
            |slice| unsafe { memory.sleep_while(armed.wake, 1, slice) } != 1,
            armed.behind,
            self.state(),
            &settings,
        );
        // Done reading the wake signal: it may be lent again once its
        // packet ran. The pin goes then too (usually the packet just woke
        // this thread): let go of it now if the lock is free, else its next
        // holder does (`apply_pending`).
        drop(armed);
        self.release_wakes_soon();
        end
    }
}

impl<T: QueueTracker> SleepingWaits<T::Memory> for QueueCore<T> {
    fn wait_sleeping(
        &self,
        ticket: &Ticket,
        wait_slice: &mut dyn FnMut(Duration, WaitPolicy) -> Result<Status, WaitError>,
    ) -> Result<WaitEnd, Error> {
        self.wait_maybe_sleeping(ticket, wait_slice)
    }
}
