//! CPU waits: a thread waits for a use without the tracker's lock, so other
//! threads keep submitting to the same queue while it waits.
//!
//! A look at the use first asks the host-side state (was the use retired by
//! a fence, a drain, another waiter?), then loads the signal; between looks
//! the wait engine spins, yields, then sleeps with a growing back-off, until
//! the deadline. Seeing the signal at 0 is itself a proof of completion,
//! recorded so the tracker later retires the use without a load of its own.
//!
//! A runtime needs [`Waiter`] and [`WaitPolicy`] (both at the crate root).
//! The engine's own parts are here for layers that wait on something of
//! their own with the same policy (the queue layer's markers and wake
//! signals): [`Wait`] runs one wait, [`WakeSource`] and [`NoWake`] are what
//! wakes a sleeping one, [`WaitGauge`] and [`WaitCounts`] count what waits
//! cost, [`Pause`] and [`WaitStop`] say how a wait paused and ended,
//! [`Hybrid`] and [`WaitHistory`] are how a hybrid wait guesses.

use crate::backend::SignalMemory;
use crate::error::{ForeignTicket, TimedOut, WaitError};
use crate::share::{Cell, Shared};
use crate::sync::Arc;
use crate::ticket::{Status, Ticket};
use std::time::Duration;

mod engine;

pub use engine::{
    Hybrid, NoWake, Pause, Wait, WaitCounts, WaitGauge, WaitHistory, WaitPolicy, WaitStop,
    WakeSource,
};

/// Waits for, and asks about, a tracker's uses from any thread, with no lock.
///
/// Obtained from [`Tracker::waiter`](crate::Tracker::waiter); cheap to clone.
///
/// ```
/// use std::time::Duration;
/// use sigretire_tracker::{Request, Status, Tracker, WaitPolicy};
/// use sigretire_sim::backend as sim_backend;
///
/// let (mut tracker, queue) = sim_backend::stepped_tracker(Default::default()).unwrap();
/// let index = queue.reserve().unwrap();
/// let acquired = tracker.acquire(Request::packet(index).barrier(true)).unwrap();
/// sim_backend::submit_barrier(&queue, index, acquired.signal);
///
/// let waiter = tracker.waiter();
/// let ticket = acquired.ticket;
/// let thread = std::thread::spawn(move || waiter.wait(&ticket, Duration::from_secs(10), WaitPolicy::spin()));
/// queue.run_until_idle(); // the "GPU" finishes while the thread waits
/// assert_eq!(thread.join().unwrap(), Ok(Status::Complete));
/// ```
pub struct Waiter<M: SignalMemory> {
    pub(crate) shared: Arc<Shared<M>>,
}

impl<M: SignalMemory> Clone for Waiter<M> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<M: SignalMemory> core::fmt::Debug for Waiter<M> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Waiter")
            .field("tracker", &self.shared.id)
            .finish()
    }
}

impl<M: SignalMemory> Waiter<M> {
    /// The signal memory of the tracker's uses: where their signals live,
    /// which clock their stamps count in
    /// ([`SignalMemory::timestamp_clock`]), which queues can name them
    /// ([`SignalMemory::shares_signals_with`]).
    ///
    /// ```
    /// use sigretire_tracker::backend::SignalMemory;
    /// use sigretire_tracker::{TimestampClock, Tracker};
    /// use sigretire_sim::backend as sim_backend;
    /// let (tracker, _queue) = sim_backend::stepped_tracker(Default::default())?;
    /// // The simulator's MI300X-like counter: 100 MHz.
    /// assert_eq!(tracker.waiter().memory().timestamp_clock(), TimestampClock::from_frequency(100_000_000).unwrap());
    /// # Ok::<(), sigretire_tracker::Error>(())
    /// ```
    pub fn memory(&self) -> &M {
        &self.shared.memory
    }

    /// How long the tracker's recent hybrid waits lasted
    /// ([`WaitPolicy::hybrid`]): one history per tracker, so per hardware
    /// queue, which its waits and the queue layer's learn from and feed.
    pub fn history(&self) -> &WaitHistory {
        &self.shared.wait_history
    }

    fn cell(&self, ticket: &Ticket) -> Result<&Cell<M::Signal>, ForeignTicket> {
        self.shared.cell_of(ticket).ok_or(ForeignTicket)
    }

    /// What is known about the use without reading signal memory.
    pub fn known_status(&self, ticket: &Ticket) -> Result<Option<Status>, ForeignTicket> {
        Ok(self.shared.known_status(ticket.seq, self.cell(ticket)?))
    }

    /// Where the use's signal lives, which says what each poll of it costs
    /// (a PCIe read in device memory). A cell's placement never changes.
    ///
    /// ```
    /// use sigretire_tracker::backend::HardwareQueue;
    /// use sigretire_tracker::{Config, Placement, Request, Tracker};
    /// use sigretire_sim::backend as sim_backend;
    /// let config = Config { signals: Placement::Device, ..Config::default() };
    /// let (mut tracker, queue) = sim_backend::stepped_tracker(config)?;
    /// let index = queue.reserve().unwrap();
    /// let acquired = tracker.acquire(Request::packet(index).barrier(true)).unwrap();
    /// assert_eq!(tracker.waiter().placement(&acquired.ticket), Ok(Placement::Device));
    /// # Ok::<(), sigretire_tracker::Error>(())
    /// ```
    pub fn placement(&self, ticket: &Ticket) -> Result<crate::Placement, ForeignTicket> {
        Ok(self.cell(ticket)?.placement)
    }

    /// The use's status, loading its signal at most once.
    pub fn status(&self, ticket: &Ticket) -> Result<Status, ForeignTicket> {
        Ok(self.shared.poll(ticket.seq, self.cell(ticket)?))
    }

    /// Waits until the use completes or fails, or `timeout` passes
    /// ([`WaitError::TimedOut`]). Never reports completion that did not
    /// happen.
    pub fn wait(
        &self,
        ticket: &Ticket,
        timeout: Duration,
        policy: WaitPolicy,
    ) -> Result<Status, WaitError> {
        Ok(wait_for_use(
            &self.shared,
            ticket.seq,
            self.cell(ticket)?,
            timeout,
            policy,
        )?)
    }
}

/// The wait shared by [`Waiter`] and [`SignalRef`](crate::SignalRef): one
/// look is one poll of the use.
pub(crate) fn wait_for_use<M: SignalMemory>(
    shared: &Shared<M>,
    seq: u64,
    cell: &Cell<M::Signal>,
    timeout: Duration,
    policy: WaitPolicy,
) -> Result<Status, TimedOut> {
    let mut wait = Wait::new(policy)
        .at(cell.placement)
        .timeout(Some(timeout))
        .learning(&shared.wait_history);
    let status = wait
        .until(
            || Some(shared.poll(seq, cell)).filter(|status| status.is_done()),
            || None::<core::convert::Infallible>,
        )
        .map_err(|_| TimedOut(timeout))?;
    wait.teach(&shared.wait_history);
    Ok(status)
}

impl<M: SignalMemory> crate::SignalRef<M> {
    /// Waits until the use completes or fails, or `timeout` passes.
    pub fn wait(&self, timeout: Duration, policy: WaitPolicy) -> Result<Status, TimedOut> {
        let cell = self.shared().cell(self.cell_ptr());
        wait_for_use(self.shared(), self.seq(), cell, timeout, policy)
    }
}

#[cfg(all(test, not(sigretire_loom)))]
mod tests;
