//! What a waiter learned from its recent waits: how long they lasted, and
//! how late a doze wakes. The hybrid wait's guess comes from here.
//!
//! One history per waiter (the tracker keeps one per hardware queue,
//! [`Waiter::history`](crate::Waiter::history)); any number of threads
//! read and feed it with no lock: two words, each a moving average that a
//! wait updates with one load and one store. Two waits ending at once may
//! lose one of their samples (the later store wins), which a moving
//! average shrugs off; a torn value cannot happen (each word is one
//! atomic).
//!
//! | word | 0 | otherwise |
//! |---|---|---|
//! | `typical` | no sample yet: no guess, the wait runs as `blocking` | nanoseconds from a wait's start to its work's completion, averaged (weight 1/2 per narrow sample, 1/4 per wide one) |
//! | `oversleep` | no doze measured yet: the policy's `early` margin alone | nanoseconds a doze overran its time: a running median (each sample moves it towards itself by at most an eighth of it, 250 ns at least), capped at 200 us per sample |
//!
//! What a wait knows of its completion is a bracket: the work was pending
//! at its last unanswered look and done at the answering one. A wait that
//! spun through the completion knows it within a spin, one that dozed or
//! sleep-polled past it within a recheck or a back-off sleep: a narrow
//! bracket (200 us at most), whose middle is the sample
//! ([`Wait::completion`](crate::wait::Wait::completion)), unless it is
//! wider than a quarter of the guess: a short wait whose one doze overran
//! its work brackets the completion from the wait's start, and there the
//! sample is the guess clamped into the bracket (the guess moves only
//! where the bracket rules it out). A wide one comes from
//! a wait that slept on a wake (no guess yet, or a guess too short): the
//! answer came a wake-up's latency after the work's end, so the sample is
//! the answer itself. A guess that errs long costs a recheck's lateness
//! for a wait or two while narrow samples bring it down; one that errs
//! short costs a wake each time, so the rule leans long. A narrow sample
//! moves the guess halfway, a wide one (or one from a thread preempted
//! mid-spin, which looks the same) a quarter. A wait answered at its first look says
//! nothing about the work (it may have ended long before) and teaches
//! nothing.

use crate::sync::{AtomicU64, Ordering};
use std::time::Duration;

/// The most one doze's overrun counts for: a thread preempted for
/// milliseconds does not move the margin by milliseconds (200 us: a
/// back-off sleep's cap in `WaitPolicy::blocking`).
const OVERSLEEP_CAP: Duration = Duration::from_micros(200);

/// The widest bracket whose middle is a sample (a blocking wait's longest
/// back-off sleep, twice a doze's recheck).
const NARROW: Duration = Duration::from_micros(200);

/// The smallest step of the overrun's median (nanoseconds): a margin near
/// zero still moves.
const MEDIAN_STEP_NS: u64 = 250;

/// A waiter's recent waits: the hybrid wait's guess and margin (see the
/// module docs).
///
/// ```
/// use sigretire_tracker::wait::{Wait, WaitHistory};
/// use sigretire_tracker::WaitPolicy;
/// use std::time::Duration;
///
/// let history = WaitHistory::new();
/// assert_eq!(history.guess(), None);
/// history.record(Duration::from_micros(1000));
/// history.record(Duration::from_micros(1400));
/// assert_eq!(history.guess(), Some(Duration::from_micros(1200)));
/// // A hybrid wait learning from it dozes until shortly before 1.2 ms.
/// let wait = Wait::new(WaitPolicy::hybrid()).learning(&history);
/// assert_eq!(wait.guess(), Some(Duration::from_micros(1200)));
/// ```
#[derive(Debug)]
pub struct WaitHistory {
    typical: AtomicU64,
    oversleep: AtomicU64,
}

impl Default for WaitHistory {
    fn default() -> Self {
        Self::new()
    }
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// `old` moved towards `sample` by `1 / 2^shift` (the sample itself when
/// there is no `old`, 0).
fn average(old: u64, sample: u64, shift: u32) -> u64 {
    if old == 0 {
        return sample.max(1);
    }
    let moved = if sample >= old {
        old + ((sample - old) >> shift)
    } else {
        old - ((old - sample) >> shift)
    };
    moved.max(1)
}

impl WaitHistory {
    /// Nothing learned yet.
    pub fn new() -> Self {
        Self {
            typical: AtomicU64::new(0),
            oversleep: AtomicU64::new(0),
        }
    }

    /// How long a wait lasts, from its start to its work's completion, as
    /// recent waits went; `None` before the first sample.
    pub fn guess(&self) -> Option<Duration> {
        match self.typical.load(Ordering::Relaxed) {
            0 => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }

    /// How late a doze of this waiter's threads wakes, as recent ones did
    /// (zero before the first).
    pub fn oversleep(&self) -> Duration {
        Duration::from_nanos(self.oversleep.load(Ordering::Relaxed))
    }

    /// Adds one wait's length, start to completion, known to within a
    /// spin or a recheck: the guess moves halfway to it.
    pub fn record(&self, lasted: Duration) {
        self.record_weighted(lasted, 1);
    }

    /// Adds a rough length (a wide bracket's answer): the guess moves a
    /// quarter of the way (the first sets it).
    pub fn record_rough(&self, lasted: Duration) {
        self.record_weighted(lasted, 2);
    }

    fn record_weighted(&self, lasted: Duration, shift: u32) {
        let old = self.typical.load(Ordering::Relaxed);
        self.typical
            .store(average(old, nanos(lasted), shift), Ordering::Relaxed);
    }

    /// Adds one doze's overrun. The margin tracks the overruns' median:
    /// it steps towards each sample by at most an eighth of itself (250 ns
    /// at least), so one late wake-up (a preemption, an interrupt storm)
    /// moves it by an eighth, not by its lateness. A doze aimed by the
    /// median wakes after its work about half the time, by about the
    /// overruns' spread (a few microseconds of latency), and otherwise
    /// spins about as long: an upper envelope would make every wait spin
    /// through the gap between its typical overrun and the worst recent one.
    pub fn record_oversleep(&self, overran: Duration) {
        let old = self.oversleep.load(Ordering::Relaxed);
        let sample = nanos(overran.min(OVERSLEEP_CAP));
        let step = (old / 8).max(MEDIAN_STEP_NS);
        let moved = if old == 0 {
            sample
        } else if sample >= old {
            old + (sample - old).min(step)
        } else {
            old - (old - sample).min(step)
        };
        self.oversleep.store(moved.max(1), Ordering::Relaxed);
    }

    /// Learns from a finished wait: `bracket`, when it last saw its work
    /// pending and when it saw it done (from its start), and how much its
    /// last doze overran ([`Wait::teach`](crate::wait::Wait::teach) passes
    /// a hybrid wait's).
    pub fn learn(&self, bracket: Option<(Duration, Duration)>, overran: Option<Duration>) {
        if let Some((missed, answered)) = bracket {
            let width = answered - missed;
            match self.guess() {
                _ if width > NARROW => self.record_rough(answered),
                // A bracket wider than a quarter of the guess says little
                // of where in it the work ended: a doze that overran the
                // completion of a short wait brackets it from the wait's
                // start, and the bracket's middle would halve the guess.
                // The guess, clamped into the bracket, moves only where
                // the bracket rules it out.
                Some(guess) if width > guess / 4 => self.record(guess.clamp(missed, answered)),
                _ => self.record(missed + width / 2),
            }
        }
        if let Some(overran) = overran {
            self.record_oversleep(overran);
        }
    }
}
