//! Unit tests of the wait engine: its schedule as a plain function of the
//! time waited, and whole waits (answers, deadlines, stops, wakes).

use super::*;
use std::cell::Cell;

const fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

fn policy() -> WaitPolicy {
    WaitPolicy {
        spin: us(10),
        device_spin: us(10),
        yield_for: us(20),
        max_sleep: us(8),
        interrupt: false,
        hybrid: None,
    }
}

const LONG: Duration = Duration::from_secs(1);

fn schedule(policy: WaitPolicy) -> Wait {
    Wait::new(policy).timeout(Some(LONG))
}

#[test]
fn the_schedule_spins_then_yields_then_sleeps() {
    let mut wait = schedule(policy());
    let pauses: Vec<Pause> = [0, 9, 10, 29, 30]
        .into_iter()
        .map(|waited| wait.next_pause(us(waited)))
        .collect();
    use Pause::{Sleep, Spin, Yield};
    assert_eq!(pauses, [Spin, Spin, Yield, Yield, Sleep(us(1))]);
}

#[test]
fn sleeps_double_up_to_the_cap() {
    let mut wait = schedule(policy());
    let sleeps: Vec<Pause> = (0..6).map(|_| wait.next_pause(us(100))).collect();
    let expected = [1, 2, 4, 8, 8, 8].map(|n| Pause::Sleep(us(n)));
    assert_eq!(sleeps, expected);
}

#[test]
fn spinning_and_yielding_do_not_grow_the_sleep() {
    let mut wait = schedule(policy());
    for waited in 0..30 {
        wait.next_pause(us(waited));
    }
    assert_eq!(wait.next_pause(us(30)), Pause::Sleep(us(1)));
}

#[test]
fn a_sleep_never_passes_the_deadline() {
    let mut wait = Wait::new(policy()).timeout(Some(us(100)));
    for _ in 0..4 {
        wait.next_pause(us(40)); // the next sleep is 8 us
    }
    assert_eq!(wait.next_pause(us(97)), Pause::Sleep(us(3)));
    // Cut short only that once: the schedule itself is unchanged.
    assert_eq!(wait.next_pause(us(40)), Pause::Sleep(us(8)));
}

#[test]
fn a_sleep_is_never_longer_than_the_slice() {
    let mut wait = schedule(policy()).slice(us(3));
    for _ in 0..4 {
        wait.next_pause(us(100));
    }
    assert_eq!(wait.next_pause(us(100)), Pause::Sleep(us(3)));
}

#[test]
fn the_policy_is_spent_once_over_the_wait_whatever_its_slices() {
    // Slices bound the sleeps; they do not restart the spin and yield.
    let mut wait = schedule(policy()).slice(us(2));
    assert_eq!(wait.next_pause(us(9)), Pause::Spin);
    assert_eq!(wait.next_pause(us(12)), Pause::Yield);
    assert_eq!(wait.next_pause(us(40)), Pause::Sleep(us(1)));
    assert_eq!(wait.next_pause(us(41)), Pause::Sleep(us(2)));
    assert_eq!(
        wait.next_pause(us(43)),
        Pause::Sleep(us(2)),
        "the slice caps it"
    );
}

#[test]
fn the_policies_differ_as_documented() {
    // Blocking spins 10 us, then gives the core away.
    let mut blocking = schedule(WaitPolicy::blocking());
    assert_eq!(blocking.next_pause(us(9)), Pause::Spin);
    assert_eq!(blocking.next_pause(us(10)), Pause::Yield);
    assert_eq!(blocking.next_pause(us(30)), Pause::Sleep(us(1)));
    // ... and does not spin at all on device memory.
    let mut device = schedule(WaitPolicy::blocking()).at(Placement::Device);
    assert_eq!(device.next_pause(us(0)), Pause::Yield);
    // Spin polls back to back for 50 us, then yields up to 1 ms.
    let mut spin = schedule(WaitPolicy::default());
    assert_eq!(spin.next_pause(us(49)), Pause::Spin);
    assert_eq!(spin.next_pause(us(50)), Pause::Yield);
    assert_eq!(spin.next_pause(us(1049)), Pause::Yield);
    assert_eq!(spin.next_pause(us(1050)), Pause::Sleep(us(1)));
}

#[test]
fn a_wait_ends_with_the_first_answer_and_counts_its_looks() {
    let mut looks = 0;
    let mut wait = Wait::new(policy());
    let answer = wait.until(
        || {
            looks += 1;
            (looks == 4).then_some(looks)
        },
        || None::<()>,
    );
    assert_eq!(answer, Ok(4));
    assert_eq!(wait.counts().looks, 4);
}

#[test]
fn a_stop_ends_a_wait_after_a_look_and_an_answer_wins_over_it() {
    let looks = Cell::new(0);
    let stopped = Wait::new(policy()).until(
        || {
            looks.set(looks.get() + 1);
            None::<()>
        },
        || (looks.get() == 3).then_some("device error"),
    );
    assert_eq!(stopped, Err(WaitStop::Halted("device error")));
    assert_eq!(looks.get(), 3);
    let answered = Wait::new(policy()).until(|| Some(1), || Some("device error"));
    assert_eq!(answered, Ok(1));
}

#[test]
fn a_wait_times_out_after_its_timeout() {
    let timeout = Duration::from_millis(3);
    let started = Instant::now();
    let result = Wait::new(policy())
        .timeout(Some(timeout))
        .until(|| None::<()>, || None::<()>);
    assert_eq!(result, Err(WaitStop::TimedOut(timeout)));
    assert!(started.elapsed() >= timeout);
}

/// A wake that wakes on its `wake_at`-th sleep, logging every sleep.
struct Scripted<'a> {
    sleeps: &'a Cell<u32>,
    wake_at: u32,
    every_sleep: bool,
}

impl WakeSource for Scripted<'_> {
    fn sleep(&mut self, timeout: Duration) -> bool {
        assert!(
            timeout <= Duration::from_millis(1),
            "a sleep past the slice"
        );
        self.sleeps.set(self.sleeps.get() + 1);
        self.sleeps.get() == self.wake_at
    }

    fn look_after_every_sleep(&self) -> bool {
        self.every_sleep
    }
}

#[test]
fn a_wake_is_armed_once_the_spin_is_spent_and_looked_after_only_when_woken() {
    let sleeps = Cell::new(0);
    let looks = Cell::new(0);
    let armed = Cell::new(0);
    let mut wait = Wait::new(WaitPolicy::blocking()).slice(Duration::from_millis(1));
    let answer = wait.until_woken(
        || {
            looks.set(looks.get() + 1);
            (sleeps.get() >= 3).then_some(())
        },
        || None::<()>,
        || {
            armed.set(armed.get() + 1);
            Some(Scripted {
                sleeps: &sleeps,
                wake_at: 3,
                every_sleep: false,
            })
        },
    );
    assert_eq!(answer, Ok(()));
    assert_eq!(armed.get(), 1);
    assert_eq!(sleeps.get(), 3, "slept until woken");
    // The spin's looks, then one after the wake: none between the sleeps.
    assert_eq!(wait.counts().looks, looks.get() as u64);
    assert_eq!(wait.counts().wake_sleeps, 3);
    assert_eq!(wait.counts().sleeps, 0, "no back-off while a wake serves");
}

#[test]
fn a_late_wake_is_looked_after_every_sleep() {
    let sleeps = Cell::new(0);
    let looks_after_spin = Cell::new(0);
    let mut wait =
        Wait::new(WaitPolicy::blocking().with_spin(Duration::ZERO)).slice(Duration::from_millis(1));
    let answer = wait.until_woken(
        || {
            if sleeps.get() > 0 {
                looks_after_spin.set(looks_after_spin.get() + 1);
            }
            (sleeps.get() == 2).then_some(())
        },
        || None::<()>,
        || {
            Some(Scripted {
                sleeps: &sleeps,
                wake_at: u32::MAX,
                every_sleep: true,
            })
        },
    );
    assert_eq!(answer, Ok(()));
    assert_eq!(looks_after_spin.get(), 2, "a look after each sleep");
}

#[test]
fn without_a_wake_the_wait_backs_off() {
    let sleeps_at_once = WaitPolicy {
        yield_for: Duration::ZERO,
        ..WaitPolicy::blocking().with_spin(Duration::ZERO)
    };
    let timeout = Duration::from_millis(20);
    let mut wait = Wait::new(sleeps_at_once).timeout(Some(timeout));
    let result = wait.until_woken(|| None::<()>, || None::<()>, || None::<NoWake>);
    assert_eq!(result, Err(WaitStop::TimedOut(timeout)));
    let counts = wait.counts();
    assert!(counts.sleeps > 0, "{counts:?}");
    assert_eq!(counts.wake_sleeps, 0);
}

#[test]
fn a_gauge_counts_a_wait_in_progress_until_it_ends() {
    let gauge = WaitGauge::new();
    let during = gauge.track(|| gauge.in_progress());
    assert_eq!((during, gauge.in_progress(), gauge.begun()), (1, 0, 1));
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        gauge.track(|| panic!("a wait that panics"))
    }));
    assert!(unwound.is_err());
    assert_eq!((gauge.in_progress(), gauge.begun()), (0, 2));
}

// The hybrid wait.

/// A hybrid wait guessing `guess`, with `oversleep` measured.
fn hybrid(guess: Duration, oversleep: Duration) -> Wait {
    let history = WaitHistory::new();
    history.record(guess);
    if !oversleep.is_zero() {
        history.record_oversleep(oversleep);
    }
    Wait::new(WaitPolicy::hybrid())
        .timeout(Some(LONG))
        .learning(&history)
}

#[test]
fn a_hybrid_wait_dozes_until_shortly_before_its_guess_then_spins_through_it() {
    // Guess 1 ms: doze (looking every 100 us) until 998 us, spin until
    // 1000 + 20 + 1000/32 us, then wait as blocking does.
    let mut wait = hybrid(us(1000), Duration::ZERO);
    assert_eq!(
        wait.window(),
        Some((us(998), Duration::from_nanos(1_051_250)))
    );
    assert_eq!(wait.next_pause(us(0)), Pause::Doze(us(100)));
    assert_eq!(wait.next_pause(us(950)), Pause::Doze(us(48)));
    assert_eq!(wait.next_pause(us(997)), Pause::Doze(us(1)));
    assert_eq!(
        wait.next_pause(us(998)),
        Pause::Spin,
        "awake before the guess"
    );
    assert_eq!(wait.next_pause(us(1051)), Pause::Spin);
    assert_eq!(wait.next_pause(us(1052)), Pause::Yield);
    assert_eq!(wait.next_pause(us(1072)), Pause::Sleep(us(1)));
}

#[test]
fn a_hybrid_wait_wakes_earlier_by_what_its_dozes_overran() {
    let mut wait = hybrid(us(1000), us(40));
    assert_eq!(wait.next_pause(us(957)), Pause::Doze(us(1)));
    assert_eq!(wait.next_pause(us(958)), Pause::Spin);
}

#[test]
fn a_doze_never_passes_the_deadline_nor_the_slice() {
    let mut wait = hybrid(us(10_000), Duration::ZERO)
        .timeout(Some(us(1000)))
        .slice(us(30));
    assert_eq!(wait.next_pause(us(0)), Pause::Doze(us(30)));
    assert_eq!(wait.next_pause(us(990)), Pause::Doze(us(10)));
}

#[test]
fn without_a_guess_worth_a_doze_a_hybrid_wait_is_a_blocking_one() {
    let blocking: Vec<Pause> = {
        let mut wait = schedule(WaitPolicy::blocking());
        [0, 9, 10, 29, 30, 40]
            .map(|t| wait.next_pause(us(t)))
            .to_vec()
    };
    for guess in [None, Some(us(29))] {
        let history = WaitHistory::new();
        if let Some(guess) = guess {
            history.record(guess);
        }
        let mut wait = schedule(WaitPolicy::hybrid()).learning(&history);
        assert_eq!(wait.window(), None, "{guess:?}");
        let hybrid = [0, 9, 10, 29, 30, 40].map(|t| wait.next_pause(us(t)));
        assert_eq!(hybrid.to_vec(), blocking, "{guess:?}");
    }
}

#[test]
fn the_callers_guess_comes_before_the_historys() {
    let history = WaitHistory::new();
    history.record(us(5000));
    let wait = Wait::new(WaitPolicy::hybrid().expecting(us(200))).learning(&history);
    assert_eq!(wait.guess(), Some(us(200)));
    // A policy that is not hybrid takes no guess from a history.
    let blocking = Wait::new(WaitPolicy::blocking()).learning(&history);
    assert_eq!((blocking.guess(), blocking.window()), (None, None));
}

#[test]
fn the_history_settles_on_a_steady_length_and_moves_halfway_on_a_wrong_guess() {
    let history = WaitHistory::new();
    for _ in 0..8 {
        history.record(us(1000));
    }
    assert_eq!(history.guess(), Some(us(1000)));
    history.record(us(20)); // one short kernel
    assert_eq!(history.guess(), Some(us(510)));
    for _ in 0..8 {
        history.record(us(1000));
    }
    let back = history.guess().unwrap();
    assert!(back > us(997) && back <= us(1000), "{back:?}");
    // The overrun's median: the first sample sets it, each later one moves
    // it by at most an eighth of itself, so one preemption of seconds
    // moves a 16 us margin by 2 us; a run of smaller overruns brings it
    // down to them.
    history.record_oversleep(us(16));
    history.record_oversleep(Duration::from_secs(2));
    assert_eq!(history.oversleep(), us(18));
    history.record_oversleep(us(17));
    assert_eq!(history.oversleep(), us(17));
    for _ in 0..40 {
        history.record_oversleep(us(3));
    }
    assert_eq!(history.oversleep(), us(3));
}

#[test]
fn a_bracket_wide_against_the_guess_moves_it_only_where_it_rules_it_out() {
    let learned = |guess: u64, bracket: (u64, u64)| {
        let history = WaitHistory::new();
        history.record(us(guess));
        history.learn(Some((us(bracket.0), us(bracket.1))), None);
        history.guess().unwrap()
    };
    // A 100 us wait whose one doze overran the work: the bracket runs
    // from the wait's start; its middle (50 us) would halve the guess.
    assert_eq!(learned(100, (0, 101)), us(100), "the guess is in it");
    assert_eq!(
        learned(100, (0, 90)),
        us(95),
        "done by 90 us: halfway there"
    );
    assert_eq!(
        learned(100, (120, 130)),
        us(112) + Duration::from_nanos(500)
    );
    // A 1 ms wait's last recheck brackets within a tenth of the guess: its
    // middle is the sample, so a guess too long by less than a recheck
    // still comes down.
    assert_eq!(learned(1000, (898, 998)), us(974));
    // A wide bracket (a wake's answer) moves the guess a quarter of the way
    // to its answer.
    assert_eq!(learned(100, (10, 500)), us(200));
}

#[test]
// Real time: under Miri's interpreter the 2 ms pass before the first look.
#[cfg_attr(miri, ignore)]
fn a_wait_knows_its_completion_between_its_last_miss_and_its_answer() {
    let done_at = Duration::from_millis(2);
    // A hybrid wait (only those learn) with no guess to doze by, spinning.
    let mut wait = Wait::new(WaitPolicy::hybrid().with_spin(Duration::from_secs(1)));
    // The work's clock starts after the wait's, by at most `skew`.
    let started = Instant::now();
    let skew = wait.elapsed();
    wait.until(
        || (started.elapsed() >= done_at).then_some(()),
        || None::<()>,
    )
    .unwrap();
    // The work was pending just before the last look that missed, and
    // done just after the one that answered, however the thread was
    // scheduled.
    let (missed, answered) = wait.bracket().expect("answered after a miss");
    assert!(
        missed < done_at + skew && done_at <= answered,
        "{missed:?} {answered:?}"
    );
    let completion = wait.completion().unwrap();
    assert!(missed <= completion && completion <= answered);
    // Answered at the first look: no completion to learn from.
    let mut at_once = Wait::new(WaitPolicy::hybrid());
    at_once.until(|| Some(()), || None::<()>).unwrap();
    assert_eq!(at_once.completion(), None);
    // A wait that does not learn reads no clock around its looks.
    let mut spin = Wait::new(WaitPolicy::spin().with_spin(Duration::from_secs(1)));
    spin.until(
        || (started.elapsed() >= done_at * 2).then_some(()),
        || None::<()>,
    )
    .unwrap();
    assert_eq!(spin.bracket(), None);
}

// The real-time tests below measure wall-clock lateness and thread CPU
// time, which mean nothing under Miri's interpreter (nor can Miri read a
// thread's CPU clock): the schedule tests above check the same policy
// without a clock.

/// Runs hybrid waits on work that completes `done_at` after each wait's
/// start (a look answers once that much time passed), learning from
/// `history`; answers each wait's lateness (its return after `done_at`)
/// and the thread CPU time it spent.
#[cfg(all(target_os = "linux", not(miri)))]
fn late_by(
    policy: WaitPolicy,
    history: &WaitHistory,
    done_at: Duration,
    waits: usize,
) -> Vec<(Duration, Duration)> {
    (0..waits)
        .map(|_| {
            let cpu = thread_cpu();
            let started = Instant::now();
            let mut wait = Wait::new(policy)
                .timeout(Some(Duration::from_secs(5)))
                .learning(history);
            wait.until(
                || (started.elapsed() >= done_at).then_some(()),
                || None::<()>,
            )
            .unwrap();
            let late = started.elapsed() - done_at;
            wait.teach(history);
            (late, thread_cpu() - cpu)
        })
        .collect()
}

#[cfg(all(target_os = "linux", not(miri)))]
fn thread_cpu() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec that outlives the call.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(status, 0);
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

#[cfg(all(target_os = "linux", not(miri)))]
fn median(mut durations: Vec<Duration>) -> Duration {
    durations.sort_unstable();
    durations[durations.len() / 2]
}

#[cfg(all(target_os = "linux", not(miri)))]
#[test]
fn a_right_guess_returns_like_a_spin_and_burns_a_fraction_of_the_wait() {
    // 4 ms of work, the guess learned from the first waits: the median
    // wait returns well within a blocking sleep-poll's 200 us of the
    // work's end (within a few microseconds on a quiet machine; tens on
    // this project's shared 2-core one; a doze past the guess by a tenth
    // would be 400 us late), burning under a quarter of the wait's time (a
    // spin burns all of it).
    let history = WaitHistory::new();
    let done_at = Duration::from_millis(4);
    let runs = late_by(WaitPolicy::hybrid(), &history, done_at, 16);
    let steady = &runs[6..];
    let late = median(steady.iter().map(|r| r.0).collect());
    let cpu = median(steady.iter().map(|r| r.1).collect());
    assert!(late < us(150), "late by {late:?}: {runs:?}");
    assert!(cpu < done_at / 4, "{cpu:?} of CPU per wait: {runs:?}");
    let guess = history.guess().unwrap();
    assert!(guess > us(3900) && guess < us(5000), "{guess:?}");
}

#[cfg(all(target_os = "linux", not(miri)))]
#[test]
fn a_wrong_guess_costs_a_recheck_or_a_blocking_wait_not_the_guess() {
    // Guessed 20 ms, done after 1 ms: found at a recheck, not at 20 ms.
    let history = WaitHistory::new();
    let runs = late_by(
        WaitPolicy::hybrid().expecting(Duration::from_millis(20)),
        &history,
        Duration::from_millis(1),
        5,
    );
    let late = median(runs.iter().map(|r| r.0).collect());
    assert!(late < us(1000), "late by {late:?}: {runs:?}");
    // Guessed 200 us, done after 5 ms: a blocking wait's sleep-poll finds
    // it (sleeps of 200 us at most), and the spin past the guess is short.
    let runs = late_by(
        WaitPolicy::hybrid().expecting(us(200)),
        &history,
        Duration::from_millis(5),
        5,
    );
    let late = median(runs.iter().map(|r| r.0).collect());
    let cpu = median(runs.iter().map(|r| r.1).collect());
    assert!(late < us(1000), "late by {late:?}: {runs:?}");
    assert!(cpu < Duration::from_millis(2), "{cpu:?}: {runs:?}");
}

#[test]
fn a_long_doze_sleeps_on_a_wake_until_two_rechecks_are_left() {
    // Guess 5 ms: the doze ends at 4998 us; until 4798 us it may sleep on
    // a wake, a slice at most, then the last two rechecks go on a timer.
    let mut wait = hybrid(us(5000), Duration::ZERO).slice(us(1000));
    assert_eq!(wait.far_doze(us(0)), Some(us(1000)));
    assert_eq!(wait.far_doze(us(4600)), Some(us(198)));
    assert_eq!(wait.far_doze(us(4798)), None);
    assert_eq!(wait.next_pause(us(4798)), Pause::Doze(us(100)));
    assert_eq!(wait.next_pause(us(4998)), Pause::Spin);
}

#[test]
fn a_long_doze_arms_its_wake_as_it_starts_and_the_gpu_ends_it() {
    // Guess 5 s (no machine, Miri included, gets near it here): a wake is
    // armed at once and the doze sleeps on it, with no timed recheck; the
    // GPU's wake (the second sleep) ends it.
    let sleeps = Cell::new(0);
    let armed = Cell::new(0);
    let mut wait = hybrid(Duration::from_secs(5), Duration::ZERO).slice(Duration::from_millis(1));
    let answer = wait.until_woken(
        || (sleeps.get() >= 2).then_some(()),
        || None::<()>,
        || {
            armed.set(armed.get() + 1);
            Some(Scripted {
                sleeps: &sleeps,
                wake_at: 2,
                every_sleep: false,
            })
        },
    );
    assert_eq!(answer, Ok(()));
    assert_eq!(armed.get(), 1);
    assert_eq!(sleeps.get(), 2);
    assert_eq!(wait.counts().wake_sleeps, 2);
    assert_eq!(wait.counts().dozes, 2, "every doze was on the wake");
    assert_eq!(
        wait.counts().looks,
        3,
        "one look before, one after each sleep"
    );
}

#[test]
fn a_short_doze_rechecks_on_a_timer_and_asks_for_no_wake() {
    // Guess 150 us: its doze (to 148 us) is under two rechecks.
    let mut wait = hybrid(us(150), Duration::ZERO);
    assert_eq!(wait.far_doze(us(0)), None);
    assert_eq!(wait.next_pause(us(0)), Pause::Doze(us(100)));
    assert_eq!(wait.next_pause(us(100)), Pause::Doze(us(48)));
}
