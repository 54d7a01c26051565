//! Unit tests of the back-off schedule and of the wait loop on host memory.

use super::*;
use crate::HostMemory;
use crate::share::host_cells;

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

#[test]
fn the_schedule_spins_then_yields_then_sleeps() {
    let mut backoff = Backoff::new(policy());
    let pauses: Vec<Pause> = [0, 9, 10, 29, 30]
        .into_iter()
        .map(|waited| backoff.next(us(waited), LONG))
        .collect();
    use Pause::{Sleep, Spin, Yield};
    assert_eq!(pauses, [Spin, Spin, Yield, Yield, Sleep(us(1))]);
}

#[test]
fn sleeps_double_up_to_the_cap() {
    let mut backoff = Backoff::new(policy());
    let sleeps: Vec<Pause> = (0..6).map(|_| backoff.next(us(100), LONG)).collect();
    let expected = [1, 2, 4, 8, 8, 8].map(|n| Pause::Sleep(us(n)));
    assert_eq!(sleeps, expected);
}

#[test]
fn spinning_and_yielding_do_not_grow_the_sleep() {
    let mut backoff = Backoff::new(policy());
    for waited in 0..30 {
        backoff.next(us(waited), LONG);
    }
    assert_eq!(backoff.next(us(30), LONG), Pause::Sleep(us(1)));
}

#[test]
fn a_sleep_never_passes_the_deadline() {
    let mut backoff = Backoff::new(policy());
    for _ in 0..4 {
        backoff.next(us(100), LONG); // the next sleep is 8 us
    }
    assert_eq!(backoff.next(us(97), us(100)), Pause::Sleep(us(3)));
    // Cut short only that once: the schedule itself is unchanged.
    assert_eq!(backoff.next(us(100), LONG), Pause::Sleep(us(8)));
}

#[test]
fn the_policies_differ_as_documented() {
    // Blocking spins 10 us, then gives the core away.
    let mut blocking = Backoff::new(WaitPolicy::blocking());
    assert_eq!(blocking.next(us(9), LONG), Pause::Spin);
    assert_eq!(blocking.next(us(10), LONG), Pause::Yield);
    assert_eq!(blocking.next(us(30), LONG), Pause::Sleep(us(1)));
    // Spin polls back to back for 50 us, then yields up to 1 ms.
    let mut spin = Backoff::new(WaitPolicy::default());
    assert_eq!(spin.next(us(49), LONG), Pause::Spin);
    assert_eq!(spin.next(us(50), LONG), Pause::Yield);
    assert_eq!(spin.next(us(1049), LONG), Pause::Yield);
    assert_eq!(spin.next(us(1050), LONG), Pause::Sleep(us(1)));
}

/// A `Shared` with one cell serving use 1, its signal armed at 1.
fn armed_use() -> (Shared<HostMemory>, crate::keys::CellKey) {
    let (shared, cells) = host_cells(1, true);
    let cell = shared.cell(cells[0]);
    // SAFETY: the signal came from this memory.
    unsafe { shared.memory.store(cell.signal, 1) };
    cell.begin_use(1);
    (shared, cells[0])
}

#[test]
fn a_wait_ends_when_the_signal_reaches_zero() {
    let (shared, cell) = armed_use();
    let cell = shared.cell(cell);
    let handle = shared.memory.packet_handle(cell.signal);
    let status = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(5));
            shared.memory.complete(handle);
        });
        wait_for_use(&shared, 1, cell, Duration::from_secs(10), policy())
    });
    assert_eq!(status, Ok(Status::Complete));
    assert_eq!(
        cell.phase_of(1),
        Some(Some(Status::Complete)),
        "recorded as a proof for the tracker"
    );
}

#[test]
fn a_wait_times_out_without_claiming_completion() {
    let (shared, cell) = armed_use();
    let cell = shared.cell(cell);
    let timeout = Duration::from_millis(2);
    let started = Instant::now();
    let result = wait_for_use(&shared, 1, cell, timeout, policy());
    assert_eq!(result, Err(crate::TimedOut(timeout)));
    assert!(started.elapsed() >= timeout);
    assert_eq!(cell.phase_of(1), None, "still pending");
}

#[test]
fn a_negative_signal_fails_the_wait() {
    let (shared, cell) = armed_use();
    let cell = shared.cell(cell);
    // SAFETY: as above.
    unsafe { shared.memory.store(cell.signal, -1) };
    let result = wait_for_use(&shared, 1, cell, LONG, policy());
    assert_eq!(result, Ok(Status::Failed));
}

#[test]
fn a_use_known_retired_is_answered_without_a_load() {
    let (shared, cell) = armed_use();
    let cell = shared.cell(cell);
    shared.publish_retired_through(1);
    let result = wait_for_use(&shared, 1, cell, LONG, policy());
    assert_eq!(result, Ok(Status::Complete), "the signal still reads 1");
    let mut stats = crate::Stats::default();
    shared.counters.add_to(&mut stats);
    assert_eq!(stats.host().polls, 0);
}
