//! The wait engine: one [`Wait`] owns a CPU wait from its start to its end.
//!
//! Every wait of the workspace is one: the tracker's [`Waiter`](crate::Waiter)
//! and [`SignalRef::wait`](crate::SignalRef::wait), the queue layer's waits
//! (a use, a synchronize marker's verdict, room in a full ring, a batch
//! finished on the calling thread), the queue layer's completion thread
//! between two looks at its jobs, and the ROCr backend's waits on a signal.
//! A wait *looks* at what it waits for; when the look does not answer, it
//! asks whether to stop early (the caller's check: a device error state),
//! checks its deadline, and pauses as its [`WaitPolicy`] says:
//!
//! 1. **spin**: look again at once, for the policy's `spin` (its
//!    `device_spin` where each look is a read across PCIe, [`Wait::at`]);
//! 2. **sleep on a wake**, once the spin is spent, where the waiter can
//!    arrange one ([`WakeSource`]: a wake signal the GPU completes, a
//!    condition variable another thread notifies), looking after every
//!    wake;
//! 3. otherwise **yield** between looks for `yield_for`,
//! 4. then **sleep** between looks, doubling from 1 us up to `max_sleep`.
//!
//! No pause passes the deadline, nor the wait's slice ([`Wait::slice`]), so
//! the stop check runs at least once per slice however long the policy
//! sleeps. A new policy is a change to this file alone: [`WaitPolicy`] says
//! how long each phase lasts, [`Wait::next_pause`] how a phase is spent.

use crate::backend::Placement;
use crate::sync::{AtomicU64, Ordering};
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
    /// ([`SignalMemory::create_wake_signal`](crate::backend::SignalMemory::create_wake_signal)).
    /// A wait that cannot (no wake signal free, or the tracker's own
    /// [`Waiter`](crate::Waiter), which publishes nothing) yields and
    /// sleep-polls as the other fields say.
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
    pub const fn spin_for(&self, placement: Placement) -> Duration {
        match placement {
            Placement::Host => self.spin,
            Placement::Device => self.device_spin,
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

/// What a wait does between two looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pause {
    /// Look again at once (a spin hint between).
    Spin,
    /// Give the processor away once, then look.
    Yield,
    /// Sleep this long, then look.
    Sleep(Duration),
}

/// Why a wait ended without an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitStop<E> {
    /// The deadline passed first: the wait's timeout.
    TimedOut(Duration),
    /// The caller's stop check answered first (a device error state, say).
    Halted(E),
}

/// What a wait sleeps on once its spin is spent: a wake signal whose packet
/// the GPU completes when the awaited work is done, a condition variable
/// another thread notifies.
pub trait WakeSource {
    /// Sleeps until woken or until `timeout` passes; says whether it was
    /// woken (the wait then looks).
    fn sleep(&mut self, timeout: Duration) -> bool;

    /// Whether the wait looks after every sleep, woken or not: the wake may
    /// come late (a wake packet published behind later work completes only
    /// after that work too).
    fn look_after_every_sleep(&self) -> bool {
        false
    }
}

/// The wake of a wait that has none to sleep on.
#[derive(Debug)]
pub enum NoWake {}

impl WakeSource for NoWake {
    fn sleep(&mut self, _: Duration) -> bool {
        match *self {}
    }
}

/// How one wait spent its time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitCounts {
    /// Looks at what the wait waits for (each may be a load of a signal).
    pub looks: u64,
    /// Spins between looks.
    pub spins: u64,
    /// Yields between looks.
    pub yields: u64,
    /// Sleeps between looks (the back-off).
    pub sleeps: u64,
    /// Sleeps on a wake ([`WakeSource`]).
    pub wake_sleeps: u64,
}

/// Waits of one kind, begun and in progress (a queue's synchronizes): a
/// gauge the caller keeps and its waits run under ([`WaitGauge::track`]).
#[derive(Debug)]
pub struct WaitGauge {
    begun: AtomicU64,
    in_progress: AtomicU64,
}

impl Default for WaitGauge {
    fn default() -> Self {
        Self::new()
    }
}

impl WaitGauge {
    /// No wait begun.
    pub fn new() -> Self {
        Self {
            begun: AtomicU64::new(0),
            in_progress: AtomicU64::new(0),
        }
    }

    /// Runs `wait`, counted as begun and, while it runs, in progress.
    ///
    /// ```
    /// let gauge = sigretire_tracker::wait::WaitGauge::new();
    /// let seen = gauge.track(|| gauge.in_progress());
    /// assert_eq!((seen, gauge.in_progress(), gauge.begun()), (1, 0, 1));
    /// ```
    pub fn track<R>(&self, wait: impl FnOnce() -> R) -> R {
        /// Ends the count as the wait ends, however it ends.
        struct InProgress<'a>(&'a AtomicU64);
        impl Drop for InProgress<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        self.begun.fetch_add(1, Ordering::Relaxed);
        self.in_progress.fetch_add(1, Ordering::AcqRel);
        let _running = InProgress(&self.in_progress);
        wait()
    }

    /// Waits begun so far.
    pub fn begun(&self) -> u64 {
        self.begun.load(Ordering::Relaxed)
    }

    /// Waits in progress now.
    pub fn in_progress(&self) -> u64 {
        self.in_progress.load(Ordering::Acquire)
    }
}

/// The first sleep of a wait's back-off.
const FIRST_SLEEP: Duration = Duration::from_micros(1);

/// One CPU wait, from its start to its end (see the module docs).
///
/// ```
/// use sigretire_tracker::wait::{Wait, WaitStop};
/// use sigretire_tracker::WaitPolicy;
/// use std::time::Duration;
///
/// let mut looks = 0;
/// let answer = Wait::new(WaitPolicy::spin()).until(
///     || { looks += 1; (looks == 3).then_some("done") },
///     || None::<()>,
/// );
/// assert_eq!(answer, Ok("done"));
///
/// let never = Wait::new(WaitPolicy::blocking())
///     .timeout(Some(Duration::from_millis(1)))
///     .until(|| None::<()>, || None::<()>);
/// assert_eq!(never, Err(WaitStop::TimedOut(Duration::from_millis(1))));
/// ```
#[derive(Clone, Debug)]
pub struct Wait {
    policy: WaitPolicy,
    /// The policy's spin for where the looks read.
    spin: Duration,
    started: Instant,
    timeout: Option<Duration>,
    slice: Duration,
    /// The back-off's next sleep.
    next_sleep: Duration,
    /// How a back-off sleep sleeps.
    nap: fn(Duration),
    counts: WaitCounts,
}

impl Wait {
    /// A wait starting now, spending its time as `policy` says, with no
    /// deadline and no slice; it spins for `policy.spin`.
    pub fn new(policy: WaitPolicy) -> Self {
        Self {
            policy,
            spin: policy.spin,
            started: Instant::now(),
            timeout: None,
            slice: Duration::MAX,
            next_sleep: FIRST_SLEEP,
            nap: std::thread::sleep,
            counts: WaitCounts::default(),
        }
    }

    /// The wait's looks read a signal in `placement`: it spins for the
    /// policy's spin there ([`WaitPolicy::spin_for`]).
    #[must_use]
    pub fn at(mut self, placement: Placement) -> Self {
        self.spin = self.policy.spin_for(placement);
        self
    }

    /// The wait gives up `timeout` after it started (`None`: never).
    #[must_use]
    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// No pause is longer than `slice`: the stop check, and a look where a
    /// wake asks for one, come at least this often.
    #[must_use]
    pub fn slice(mut self, slice: Duration) -> Self {
        self.slice = slice;
        self
    }

    /// The back-off starts from `sleep` rather than 1 us.
    #[must_use]
    pub fn first_sleep(mut self, sleep: Duration) -> Self {
        self.next_sleep = sleep;
        self
    }

    /// A back-off sleep sleeps with `nap` rather than
    /// [`std::thread::sleep`] (a model checker's scheduling point, say).
    #[must_use]
    pub fn naps_with(mut self, nap: fn(Duration)) -> Self {
        self.nap = nap;
        self
    }

    /// How long the wait has run.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// How the wait spent its time so far.
    pub fn counts(&self) -> WaitCounts {
        self.counts
    }

    /// The wait's timeout, once it passed.
    pub fn timed_out(&self) -> Option<Duration> {
        self.timeout.filter(|&timeout| self.elapsed() >= timeout)
    }

    /// The pause after a look `waited` into the wait: the policy's phase
    /// then (spin, yield, sleep); a sleep never past the deadline nor longer
    /// than the slice. Each sleep doubles the next, up to `max_sleep`;
    /// spins and yields leave it be. A plain function of the time waited,
    /// so the schedule can be tested without a clock.
    pub fn next_pause(&mut self, waited: Duration) -> Pause {
        if waited < self.spin {
            Pause::Spin
        } else if waited < self.spin.saturating_add(self.policy.yield_for) {
            Pause::Yield
        } else {
            let mut sleep = self.next_sleep.min(self.slice);
            if let Some(timeout) = self.timeout {
                sleep = sleep.min(timeout.saturating_sub(waited));
            }
            self.next_sleep = self.next_sleep.saturating_mul(2).min(self.policy.max_sleep);
            Pause::Sleep(sleep)
        }
    }

    /// Pauses once, as [`next_pause`](Self::next_pause) says for the time
    /// waited so far: a sleep sleeps the thread ([`naps_with`](Self::naps_with)).
    pub fn pause(&mut self) {
        self.pause_with(self.nap);
    }

    /// As [`pause`](Self::pause), sleeping with `nap` where it sleeps (a
    /// condition variable's timed wait, so a notification ends it early).
    pub fn pause_with(&mut self, nap: impl FnOnce(Duration)) {
        match self.next_pause(self.elapsed()) {
            Pause::Spin => {
                self.counts.spins += 1;
                crate::sync::spin_hint();
            }
            Pause::Yield => {
                self.counts.yields += 1;
                crate::sync::yield_now();
            }
            Pause::Sleep(sleep) => {
                self.counts.sleeps += 1;
                nap(sleep);
            }
        }
    }

    /// Sleeps once on `wake`, for a slice at most and never past the
    /// deadline; whether it was woken.
    pub fn sleep_on(&mut self, wake: &mut impl WakeSource) -> bool {
        let mut slice = self.slice;
        if let Some(timeout) = self.timeout {
            slice = slice.min(timeout.saturating_sub(self.elapsed()));
        }
        self.counts.wake_sleeps += 1;
        wake.sleep(slice)
    }

    /// Runs the wait to its end: `look` until it answers; between looks,
    /// `stop` (an answer ends the wait early), the deadline, and a pause.
    pub fn until<T, E>(
        &mut self,
        look: impl FnMut() -> Option<T>,
        stop: impl FnMut() -> Option<E>,
    ) -> Result<T, WaitStop<E>> {
        self.until_woken(look, stop, || None::<NoWake>)
    }

    /// As [`until`](Self::until), sleeping on a wake once the spin is
    /// spent: `arm` is asked for one then, once. With a wake, the wait
    /// sleeps on it slice by slice, checking `stop` and the deadline
    /// between, and looks after every wake (and after every sleep, where
    /// the wake asks); without one it pauses as the policy says. The wake
    /// is dropped before this returns.
    pub fn until_woken<T, E, W: WakeSource>(
        &mut self,
        mut look: impl FnMut() -> Option<T>,
        mut stop: impl FnMut() -> Option<E>,
        arm: impl FnOnce() -> Option<W>,
    ) -> Result<T, WaitStop<E>> {
        let mut arm = Some(arm);
        let mut wake: Option<W> = None;
        loop {
            self.counts.looks += 1;
            if let Some(answer) = look() {
                return Ok(answer);
            }
            // Pause until the next look is due.
            loop {
                if let Some(reason) = stop() {
                    return Err(WaitStop::Halted(reason));
                }
                let waited = self.elapsed();
                if let Some(timeout) = self.timeout
                    && waited >= timeout
                {
                    return Err(WaitStop::TimedOut(timeout));
                }
                if waited >= self.spin
                    && let Some(arm) = arm.take()
                {
                    wake = arm();
                }
                let Some(sleeping) = wake.as_mut() else {
                    self.pause();
                    break;
                };
                if self.sleep_on(sleeping) || sleeping.look_after_every_sleep() {
                    break;
                }
            }
        }
    }
}

#[cfg(all(test, not(sigretire_loom)))]
mod tests;
