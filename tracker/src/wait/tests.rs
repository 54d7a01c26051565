//! Unit tests of the wait for a use on host memory (the schedule's own are
//! the engine's).

use super::*;
use crate::backend::HostMemory;
use crate::share::host_cells;

const fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

use std::time::Instant;

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
