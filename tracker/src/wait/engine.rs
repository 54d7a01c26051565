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
//! A **hybrid** wait ([`WaitPolicy::hybrid`]) that expects to be long puts
//! a phase before these: it **dozes** until shortly before the work is
//! likely done, then spins through the expected end, and only past that
//! (the guess was wrong) goes on as above. A doze longer than two
//! `recheck`s sleeps on a wake armed as it starts (the GPU ends it where
//! the work finishes first) until two `recheck`s are left, which it dozes
//! on a timer; a shorter doze, or one with no wake to be had, looks every
//! `recheck`. The
//! guess is the caller's ([`Hybrid::expected`]) or the waiter's recent
//! waits' ([`WaitHistory`], [`Wait::learning`]); a doze sleeps with the
//! thread's timer slack lowered ([`doze`](self::doze)), and wakes early by
//! the margin the policy asks for plus what recent dozes overran (their
//! median: about half the dozes end in the spin, half a little past the
//! work).
//!
//! No pause passes the deadline, nor the wait's slice ([`Wait::slice`]), so
//! the stop check runs at least once per slice however long the policy
//! sleeps. A new policy is a change to this file alone: [`WaitPolicy`] says
//! how long each phase lasts, [`Wait::next_pause`] how a phase is spent.

use crate::backend::Placement;
use crate::sync::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod doze;

pub use crate::wait_history::WaitHistory;

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
    /// Before all that, a wait expected to be long dozes until shortly
    /// before its work is likely done and spins the last stretch
    /// ([`WaitPolicy::hybrid`]); `None`: no doze.
    pub hybrid: Option<Hybrid>,
}

/// How a hybrid wait guesses, dozes and falls back ([`WaitPolicy::hybrid`]).
///
/// With a guess `G` (from the wait's start to the work's completion), the
/// wait dozes until `G - early - oversleep` (the median overrun of recent
/// dozes): on a wake armed as the doze starts while more than two
/// `recheck`s are left and the waiter can arrange one, else (and for
/// those last two) looking every `recheck`; spins until
/// `G + late + G/32`; then, the guess wrong, waits as the rest of the
/// policy says (a wake where the waiter can arrange one, else yield and
/// sleep-poll). A guess under `min_guess` (or none) skips the doze.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hybrid {
    /// The caller's guess of how long the wait lasts from its start; `None`
    /// takes the waiter's history's ([`Wait::learning`]).
    pub expected: Option<Duration>,
    /// Wake this long before the guess, the overruns' median (which the
    /// history measures) on top: half the dozes then overrun into the
    /// spin, the other half past the work, by a few microseconds either
    /// way. A larger margin buys latency at the price of CPU spun.
    pub early: Duration,
    /// Spin at most this long past the guess (plus 1/32 of it) before
    /// falling back: what a guess that was short costs in CPU.
    pub late: Duration,
    /// Look at least this often while dozing without a wake: how late a
    /// wait whose work ended far sooner than guessed can be. A doze with
    /// more than two of these ahead sleeps on a wake until two are left,
    /// where it can arrange one.
    pub recheck: Duration,
    /// A shorter guess is not worth a doze: the wait runs as if it had none.
    pub min_guess: Duration,
}

impl Hybrid {
    /// Wake 2 us before the guess (plus the overruns' median), spin up to
    /// 20 us past it (plus 1/32), look every 100 us while dozing (about
    /// the wake-up latency of a sleeping wait woken by an interrupt: 108 us
    /// for CUDA's blocking-sync event after a 1 ms kernel on an H200, so a
    /// far-too-long guess costs no more), no doze for a guess under 50 us
    /// (about two wake-ups of a sleeping thread).
    pub const fn new() -> Self {
        Self {
            expected: None,
            early: Duration::from_micros(2),
            late: Duration::from_micros(20),
            recheck: Duration::from_micros(100),
            min_guess: Duration::from_micros(50),
        }
    }

    /// When a wait with `guess` stops dozing and when it stops spinning,
    /// waited from its start, where `oversleep` is what its dozes overrun;
    /// `None` for no doze.
    pub fn window(&self, guess: Duration, oversleep: Duration) -> Option<(Duration, Duration)> {
        if guess < self.min_guess {
            return None;
        }
        let mut wake = guess.saturating_sub(self.early.saturating_add(oversleep));
        if planted!(HybridWakesTooLate) {
            wake = guess;
        }
        let spin_until = guess.saturating_add(self.late).saturating_add(guess / 32);
        Some((wake, spin_until))
    }
}

impl Default for Hybrid {
    fn default() -> Self {
        Self::new()
    }
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
            hybrid: None,
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
            hybrid: None,
        }
    }

    /// A blocking wait that returns like a spin: for a wait expected to be
    /// long, doze until shortly before the work is likely done, then spin
    /// the last stretch; where the guess was wrong, wait as
    /// [`blocking`](Self::blocking) does. The guess is the waiter's recent
    /// waits' ([`WaitHistory`]: the tracker keeps one per hardware queue),
    /// or the caller's ([`expecting`](Self::expecting)). It never burns a
    /// core for the whole wait (it spins from shortly before the guess to
    /// shortly after), never answers before the work is done (only a look
    /// answers), and a guess far too long costs at most a `recheck` (100
    /// us) of lateness, or, where its doze was long enough to arm a wake,
    /// a wake-up's; one far too short a spin of `late` (20 us) plus
    /// 1/32 of the guess, then [`blocking`](Self::blocking)'s wait. See
    /// [`Hybrid`].
    ///
    /// ```
    /// use sigretire_tracker::{Request, Status, Tracker, WaitPolicy};
    /// use sigretire_sim::backend as sim_backend;
    /// use std::time::Duration;
    ///
    /// let (mut tracker, queue) = sim_backend::stepped_tracker(Default::default()).unwrap();
    /// let index = queue.reserve().unwrap();
    /// let acquired = tracker.acquire(Request::packet(index).barrier(true)).unwrap();
    /// sim_backend::submit_barrier(&queue, index, acquired.signal);
    ///
    /// let waiter = tracker.waiter();
    /// let ticket = acquired.ticket;
    /// // Expected to take about 2 ms: the thread dozes until shortly before.
    /// let policy = WaitPolicy::hybrid().expecting(Duration::from_millis(2));
    /// let thread = std::thread::spawn(move || waiter.wait(&ticket, Duration::from_secs(10), policy));
    /// std::thread::sleep(Duration::from_millis(2));
    /// queue.run_until_idle(); // the "GPU" finishes
    /// assert_eq!(thread.join().unwrap(), Ok(Status::Complete));
    /// ```
    pub const fn hybrid() -> Self {
        Self {
            hybrid: Some(Hybrid::new()),
            ..Self::blocking()
        }
    }

    /// The policy, hybrid, with the caller's guess of how long its waits
    /// last from their start (in place of the waiter's history).
    ///
    /// ```
    /// use sigretire_tracker::WaitPolicy;
    /// use std::time::Duration;
    /// let policy = WaitPolicy::hybrid().expecting(Duration::from_millis(1));
    /// assert_eq!(policy.hybrid.unwrap().expected, Some(Duration::from_millis(1)));
    /// ```
    #[must_use]
    pub const fn expecting(self, expected: Duration) -> Self {
        let hybrid = match self.hybrid {
            Some(hybrid) => hybrid,
            None => Hybrid::new(),
        };
        Self {
            hybrid: Some(Hybrid {
                expected: Some(expected),
                ..hybrid
            }),
            ..self
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
    /// Sleep this long, then look (the back-off).
    Sleep(Duration),
    /// Doze this long with a fine timer slack, then look: a hybrid wait
    /// before its guess.
    Doze(Duration),
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
    /// Dozes before a hybrid wait's guess.
    pub dozes: u64,
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
    /// The waiter's history's guess (the policy's own comes first).
    guess: Option<Duration>,
    /// What the waiter's dozes overrun, as its history measured.
    oversleep: Duration,
    /// Time waited just before the last look that did not answer.
    last_miss: Option<Duration>,
    /// Time waited just after the look that answered.
    answered: Option<Duration>,
    /// How much the last doze overran.
    overran: Option<Duration>,
    /// Whether the wait runs in [`until_woken`](Self::until_woken), which
    /// gives the thread its timer slack back as it ends (else each doze
    /// does).
    running: bool,
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
            guess: None,
            oversleep: Duration::ZERO,
            last_miss: None,
            answered: None,
            overran: None,
            running: false,
        }
    }

    /// The wait guesses from `history` how long it lasts (where the policy
    /// is hybrid and has no guess of its own), and wakes from its dozes
    /// early by what the history's dozes overran. Feed the history back
    /// once the wait ended ([`Wait::teach`]).
    #[must_use]
    pub fn learning(mut self, history: &WaitHistory) -> Self {
        if self.policy.hybrid.is_some() {
            self.guess = history.guess();
            self.oversleep = history.oversleep();
        }
        self
    }

    /// The wait's policy.
    pub fn policy(&self) -> &WaitPolicy {
        &self.policy
    }

    /// The guess a hybrid wait dozes by: the policy's, else its history's.
    pub fn guess(&self) -> Option<Duration> {
        let hybrid = self.policy.hybrid?;
        hybrid.expected.or(self.guess)
    }

    /// When the wait stops dozing and stops spinning, waited from its
    /// start (`None`: no doze, as for a policy that is not hybrid or a
    /// guess too short to doze).
    pub fn window(&self) -> Option<(Duration, Duration)> {
        let hybrid = self.policy.hybrid?;
        hybrid.window(self.guess()?, self.oversleep)
    }

    /// The end of the wait's spin: the policy's spin, or a hybrid wait's
    /// spin past its guess.
    fn spin_end(&self) -> Duration {
        match self.window() {
            Some((_, spin_until)) => spin_until.max(self.spin),
            None => self.spin,
        }
    }

    /// When the wait's work completed, from the wait's start, as well as
    /// the wait knows it: after its last unanswered look, by its answering
    /// one. `None` for a wait not (yet) answered, answered at its first
    /// look (the work may have ended long before), or not hybrid (only a
    /// hybrid wait reads the clock around its looks, to learn from it).
    pub fn bracket(&self) -> Option<(Duration, Duration)> {
        let answered = self.answered?;
        Some((self.last_miss?.min(answered), answered))
    }

    /// The middle of the wait's [`bracket`](Self::bracket).
    pub fn completion(&self) -> Option<Duration> {
        let (missed, answered) = self.bracket()?;
        Some(missed + (answered - missed) / 2)
    }

    /// How much the wait's last doze overran its time (`None`: no doze).
    pub fn oversleep_seen(&self) -> Option<Duration> {
        self.overran
    }

    /// Feeds `history` what this wait learned, if it is a hybrid one (any
    /// other teaches nothing): when it saw its work complete
    /// ([`bracket`](Self::bracket)), and how late its last doze woke.
    pub fn teach(&self, history: &WaitHistory) {
        if self.policy.hybrid.is_some() {
            history.learn(self.bracket(), self.overran);
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
        if let (Some(hybrid), Some((wake, _))) = (self.policy.hybrid, self.window())
            && waited < wake
        {
            let mut doze = (wake - waited).min(hybrid.recheck).min(self.slice);
            if let Some(timeout) = self.timeout {
                doze = doze.min(timeout.saturating_sub(waited));
            }
            return Pause::Doze(doze);
        }
        let spin = self.spin_end();
        if waited < spin {
            Pause::Spin
        } else if waited < spin.saturating_add(self.policy.yield_for) {
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
            Pause::Doze(time) => {
                self.counts.dozes += 1;
                let before = self.elapsed();
                doze::doze(time);
                self.overran = Some(self.elapsed().saturating_sub(before + time));
                if !self.running {
                    doze::restore();
                }
            }
        }
    }

    /// How long a hybrid wait `waited` into it may doze on a wake: while
    /// more than two `recheck`s are left of its doze (to that point, a
    /// slice at most, never past the deadline). Arming costs what one or
    /// two timed wake-ups do (a packet, or on CUDA two driver calls on the
    /// relay stream), and spares the rechecks of that stretch: its thread
    /// wakes once per slice, or when the GPU finishes first (a guess far
    /// too long then costs what a blocking wait's wake-up does). The last
    /// two rechecks' stretch is dozed on a timer as before, so that a
    /// guess about right is seen within a recheck or by the spin: the wait
    /// learns from a narrow bracket, not from a wake-up's lateness.
    fn far_doze(&self, waited: Duration) -> Option<Duration> {
        let hybrid = self.policy.hybrid?;
        let (wake, _) = self.window()?;
        let far_end = wake.checked_sub(hybrid.recheck.saturating_mul(2))?;
        let mut doze = far_end.checked_sub(waited).filter(|d| !d.is_zero())?;
        doze = doze.min(self.slice);
        if let Some(timeout) = self.timeout {
            doze = doze.min(timeout.saturating_sub(waited));
        }
        Some(doze)
    }

    /// Dozes on `wake` for `time` at most, with the fine timer slack of a
    /// timed doze, until the GPU wakes it or the time is up.
    fn doze_on(&mut self, wake: &mut impl WakeSource, time: Duration) {
        self.counts.dozes += 1;
        self.counts.wake_sleeps += 1;
        doze::fine_slack();
        wake.sleep(time);
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
        look: impl FnMut() -> Option<T>,
        stop: impl FnMut() -> Option<E>,
        arm: impl FnOnce() -> Option<W>,
    ) -> Result<T, WaitStop<E>> {
        /// Gives the thread its timer slack back however the wait ends.
        struct Running;
        impl Drop for Running {
            fn drop(&mut self) {
                doze::restore();
            }
        }
        let _slack = self.policy.hybrid.map(|_| Running);
        self.running = true;
        let ended = self.run_woken(look, stop, arm);
        self.running = false;
        ended
    }

    /// The loop of [`until_woken`](Self::until_woken).
    fn run_woken<T, E, W: WakeSource>(
        &mut self,
        mut look: impl FnMut() -> Option<T>,
        mut stop: impl FnMut() -> Option<E>,
        arm: impl FnOnce() -> Option<W>,
    ) -> Result<T, WaitStop<E>> {
        let mut arm = Some(arm);
        let mut wake: Option<W> = None;
        // Only a hybrid wait learns when its work completed (`teach`): the
        // others read no clock around their looks, which would double a
        // spinning look's cost for nothing.
        let learns = self.policy.hybrid.is_some();
        loop {
            self.counts.looks += 1;
            // Read before the look: the work was pending at least until
            // then if the look does not answer (the lower end of the
            // completion's bracket), and done by the reading after it if
            // it does.
            let looking = learns.then(|| self.elapsed());
            if let Some(answer) = look() {
                if self.last_miss.is_some() {
                    self.answered = Some(self.elapsed());
                }
                return Ok(answer);
            }
            if looking.is_some() {
                self.last_miss = looking;
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
                // A hybrid wait with a long doze ahead arms its wake as
                // the doze starts (see `far_doze`); any other wait
                // once its spin is spent.
                let far = self.far_doze(waited);
                if (waited >= self.spin_end() || far.is_some())
                    && let Some(arm) = arm.take()
                {
                    wake = arm();
                }
                if let (Some(time), Some(sleeping)) = (far, wake.as_mut()) {
                    // Woken or not, the look is due: the work completed,
                    // a slice ended, or the doze's last stretch begins.
                    self.doze_on(sleeping, time);
                    break;
                }
                // The doze's last stretch (or all of it, without a wake)
                // rechecks on a timer, so that the wait learns its work's
                // length from a narrow bracket; then the spin spins. Only
                // past the spin does a wake armed for the doze serve again.
                let past_spin = waited >= self.spin_end();
                let Some(sleeping) = wake.as_mut().filter(|_| past_spin) else {
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
