//! CPU waits: a thread waits for a use without the tracker's lock, so other
//! threads keep submitting to the same queue while it waits.
//!
//! A wait first asks the host-side state (was the use retired by a fence, a
//! drain, another waiter?), then loads the signal; it spins for a while, then
//! yields, then sleeps with a growing back-off, until the deadline. Seeing the
//! signal at 0 is itself a proof of completion, recorded so the tracker later
//! retires the use without a load of its own.

use crate::backend::SignalMemory;
use crate::error::{ForeignTicket, TimedOut, WaitError};
use crate::share::{Cell, Shared};
use crate::sync::Arc;
use crate::ticket::{Status, Ticket};
use std::time::{Duration, Instant};

/// How a CPU wait spends its time.
///
/// ```
/// use std::time::Duration;
/// let policy = sigretire_tracker::WaitPolicy::blocking();
/// assert_eq!(policy.spin, Duration::from_micros(10));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitPolicy {
    /// Poll back to back for this long (lowest latency, one core busy),
    /// where the use's signal is in host memory.
    pub spin: Duration,
    /// The spin in place of `spin` where the use's signal is in device
    /// memory: there each poll is a read across PCIe (about 1 us on
    /// MI300X), so a wait that means to sleep gains little by spinning and
    /// pays for every poll.
    pub device_spin: Duration,
    /// Then poll with a yield between polls for this long.
    pub yield_for: Duration,
    /// Then sleep between polls, doubling from 1 us up to this.
    pub max_sleep: Duration,
    /// After the spin, sleep in the kernel until the GPU wakes the thread,
    /// where the waiter can arrange a wake-up: the queue layer's waits,
    /// which publish a packet completing a wake signal
    /// ([`SignalMemory::create_wake_signal`](crate::SignalMemory::create_wake_signal)).
    /// A wait that cannot (no wake signal free, or the tracker's own
    /// [`Waiter`], which publishes nothing) yields and sleep-polls as the
    /// other fields say.
    pub interrupt: bool,
}

impl WaitPolicy {
    /// Spin first, as a default HIP event does (CLR polls actively for 100 us
    /// before it blocks; we spin 50 us, then yield up to 1 ms).
    pub const fn spin() -> Self {
        Self {
            spin: Duration::from_micros(50),
            device_spin: Duration::from_micros(50),
            yield_for: Duration::from_millis(1),
            max_sleep: Duration::from_micros(500),
            interrupt: false,
        }
    }

    /// Give the core away almost at once, as a blocking-sync event does:
    /// spin 10 us, then sleep until woken where the waiter can arrange it,
    /// else yield briefly and sleep-poll. The short spin serves work that
    /// was nearly done, for which a wake-up (a wake packet, then an
    /// interrupt or a driver callback, then the scheduler: 15-20 us for
    /// CUDA's own blocking-sync event after empty work on an H200) costs
    /// more than the wait; a 1 ms wait spends 1 % of its time in it. No
    /// spin on device-memory signals (`device_spin`), where each poll is a
    /// PCIe read and not issuing them is the point.
    pub const fn blocking() -> Self {
        Self {
            spin: Duration::from_micros(10),
            device_spin: Duration::ZERO,
            yield_for: Duration::from_micros(20),
            max_sleep: Duration::from_micros(200),
            interrupt: true,
        }
    }
}

impl WaitPolicy {
    /// The spin for a use whose signal lives in `placement`: `spin` or
    /// `device_spin`.
    ///
    /// ```
    /// use sigretire_tracker::{Placement, WaitPolicy};
    /// use std::time::Duration;
    /// let policy = WaitPolicy::blocking();
    /// assert_eq!(policy.spin_for(Placement::Host), Duration::from_micros(10));
    /// assert_eq!(policy.spin_for(Placement::Device), Duration::ZERO);
    /// ```
    pub const fn spin_for(&self, placement: crate::Placement) -> Duration {
        match placement {
            crate::Placement::Host => self.spin,
            crate::Placement::Device => self.device_spin,
        }
    }

    /// The policy with `spin` and `device_spin` both set to `spin`.
    ///
    /// ```
    /// use sigretire_tracker::{Placement, WaitPolicy};
    /// use std::time::Duration;
    /// let policy = WaitPolicy::spin().with_spin(Duration::from_micros(100));
    /// assert_eq!(policy.spin_for(Placement::Device), Duration::from_micros(100));
    /// ```
    #[must_use]
    pub const fn with_spin(self, spin: Duration) -> Self {
        Self {
            spin,
            device_spin: spin,
            ..self
        }
    }
}

impl Default for WaitPolicy {
    fn default() -> Self {
        Self::spin()
    }
}

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
    /// use sigretire_tracker::{SignalMemory, TimestampClock, Tracker};
    /// use sigretire_sim::backend as sim_backend;
    /// let (tracker, _queue) = sim_backend::stepped_tracker(Default::default())?;
    /// // The simulator's MI300X-like counter: 100 MHz.
    /// assert_eq!(tracker.waiter().memory().timestamp_clock(), TimestampClock::from_frequency(100_000_000).unwrap());
    /// # Ok::<(), sigretire_tracker::Error>(())
    /// ```
    pub fn memory(&self) -> &M {
        &self.shared.memory
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
    /// use sigretire_tracker::{Config, HardwareQueue, Placement, Request, Tracker};
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

/// The wait loop shared by [`Waiter`] and [`SignalRef`](crate::SignalRef).
pub(crate) fn wait_for_use<M: SignalMemory>(
    shared: &Shared<M>,
    seq: u64,
    cell: &Cell<M::Signal>,
    timeout: Duration,
    policy: WaitPolicy,
) -> Result<Status, TimedOut> {
    let start = Instant::now();
    let mut backoff = Backoff::new(WaitPolicy {
        spin: policy.spin_for(cell.placement),
        ..policy
    });
    loop {
        let status = shared.poll(seq, cell);
        if status.is_done() {
            return Ok(status);
        }
        let waited = start.elapsed();
        if waited >= timeout {
            return Err(TimedOut(timeout));
        }
        match backoff.next(waited, timeout) {
            Pause::Spin => crate::sync::spin_hint(),
            Pause::Yield => crate::sync::yield_now(),
            Pause::Sleep(sleep) => std::thread::sleep(sleep),
        }
    }
}

/// What a wait does between two polls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pause {
    Spin,
    Yield,
    Sleep(Duration),
}

/// A wait's back-off schedule, apart from the clock and the polls so that
/// it can be tested as a plain function of the time waited.
struct Backoff {
    policy: WaitPolicy,
    /// The next sleep: 1 us at first, doubling up to `policy.max_sleep`.
    sleep: Duration,
}

impl Backoff {
    fn new(policy: WaitPolicy) -> Self {
        Self {
            policy,
            sleep: Duration::from_micros(1),
        }
    }

    /// The pause after a poll `waited` into a wait of `timeout` (not yet
    /// reached): spin, then yield, then sleep, never past the deadline.
    fn next(&mut self, waited: Duration, timeout: Duration) -> Pause {
        if waited < self.policy.spin {
            Pause::Spin
        } else if waited < self.policy.spin + self.policy.yield_for {
            Pause::Yield
        } else {
            let sleep = self.sleep.min(timeout - waited);
            self.sleep = (self.sleep * 2).min(self.policy.max_sleep);
            Pause::Sleep(sleep)
        }
    }
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
