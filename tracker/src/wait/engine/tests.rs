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
