//! Unit tests of the cell state machine, holds and parking, the stamps
//! seqlock, and what `Shared` answers about retired uses.

use super::*;
use crate::backend::HostMemory;
use crate::sync::AtomicBool;
use std::sync::Barrier;

fn cell() -> Cell<usize> {
    Cell::new(0, Placement::Host, CellKey(0))
}

/// The raw hold word, PARKED bit included.
fn hold_word(cell: &Cell<usize>) -> u32 {
    cell.holds.load(Ordering::Relaxed)
}

#[test]
fn pack_and_unpack_round_trip() {
    for seq in [0, 1, 2, 42, u64::MAX >> 2] {
        let words = [LIVE, COMPLETE, FAILED].map(|phase| pack(seq, phase));
        for (phase, word) in [LIVE, COMPLETE, FAILED].into_iter().zip(words) {
            assert_eq!(unpack(word), (seq, phase));
        }
        // A phase never bleeds into the sequence number, or vice versa.
        assert_ne!(words[0], words[1]);
        assert_ne!(words[1], words[2]);
        assert_ne!(pack(seq + 1, LIVE) >> 2, seq);
    }
}

#[test]
fn a_new_cell_serves_no_use() {
    let cell = cell();
    // It answers for use 0 (none) as done, so nothing can complete it again...
    assert_eq!(cell.phase_of(0), Some(Some(Status::Complete)));
    assert!(!cell.complete(0));
    assert!(!cell.fail(0));
    // ...and knows nothing about a use it has not begun.
    assert_eq!(cell.phase_of(1), None);
    assert!(!cell.complete(1));
}

#[test]
fn begin_use_makes_the_use_pending_and_earlier_ones_retired() {
    let cell = cell();
    cell.begin_use(5);
    assert_eq!(cell.phase_of(5), None);
    assert_eq!(cell.phase_of(4), Some(None), "moved on: 4 retired earlier");
    assert_eq!(cell.phase_of(6), None);
}

#[test]
fn complete_happens_exactly_once() {
    let cell = cell();
    cell.begin_use(5);
    assert!(cell.complete(5));
    assert!(!cell.complete(5), "a second completion is not counted");
    assert!(!cell.fail(5), "a completed use never fails");
    assert_eq!(cell.phase_of(5), Some(Some(Status::Complete)));
}

#[test]
fn fail_happens_exactly_once() {
    let cell = cell();
    cell.begin_use(5);
    assert!(cell.fail(5));
    assert!(!cell.fail(5), "a second failure is not counted");
    assert!(!cell.complete(5), "a failed use never completes");
    assert_eq!(cell.phase_of(5), Some(Some(Status::Failed)));
}

#[test]
fn a_stale_or_future_sequence_number_changes_nothing() {
    let cell = cell();
    cell.begin_use(5);
    assert!(!cell.complete(4));
    assert!(!cell.fail(4));
    assert!(!cell.complete(6));
    assert!(!cell.fail(6));
    assert_eq!(cell.phase_of(5), None, "use 5 is still pending");
    assert!(cell.complete(5));
}

#[test]
fn a_racing_completion_is_counted_once() {
    const THREADS: usize = 4;
    let cell = cell();
    for seq in 1..=200 {
        cell.begin_use(seq);
        let start = Barrier::new(THREADS);
        let wins: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|i| {
                    let (cell, start) = (&cell, &start);
                    s.spawn(move || {
                        start.wait();
                        // Half complete, half fail: still one winner.
                        usize::from(if i % 2 == 0 {
                            cell.complete(seq)
                        } else {
                            cell.fail(seq)
                        })
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(wins, 1, "use {seq}");
    }
}

#[test]
fn holds_count_references_and_hide_the_parked_bit() {
    let (shared, cells) = host_cells(1, true);
    let cell = shared.cell(cells[0]);
    cell.add_hold();
    cell.add_hold();
    assert_eq!(cell.holds(), 2);
    assert!(shared.park(cell), "held: parks");
    assert_eq!(hold_word(cell), PARKED | 2);
    assert_eq!(cell.holds(), 2, "the parked bit is not a hold");

    shared.release(cell);
    assert!(!shared.take_returns(), "one holder is left");
    shared.release(cell);
    assert!(shared.take_returns(), "the last holder leaves a hint");
    assert!(!shared.take_returns(), "the hint is taken once");

    assert_eq!(hold_word(cell), PARKED);
    shared.unpark(cell);
    assert_eq!(hold_word(cell), 0);
}

#[test]
fn parking_an_unheld_cell_fails_and_leaves_it_unparked() {
    let (shared, cells) = host_cells(1, true);
    let cell = shared.cell(cells[0]);
    assert!(!shared.park(cell));
    assert_eq!(hold_word(cell), 0);
}

#[test]
fn the_last_release_of_an_unparked_cell_leaves_no_hint() {
    let (shared, cells) = host_cells(1, true);
    let cell = shared.cell(cells[0]);
    cell.add_hold();
    shared.release(cell);
    assert_eq!(cell.holds(), 0);
    assert!(!shared.take_returns());
}

/// The ticket `shared` issued for use `seq` of `cell`, labelled as `label`
/// says.
fn ticket(
    shared: &Shared<HostMemory>,
    cell: CellKey,
    seq: u64,
    generation: u32,
    timed: bool,
) -> Ticket {
    Ticket::issue(
        shared.id,
        seq,
        cell.0,
        Generation::new(generation, 32),
        timed,
    )
}

#[test]
fn a_ticket_is_checked_against_the_use_its_cell_serves() {
    let (shared, cells) = host_cells(2, true);
    let (a, b) = (cells[0], cells[1]);
    let cell_a = shared.cell(a);
    cell_a.begin_use(3);
    cell_a.set_label(label(label_base(Generation::new(5, 32)), Ticket::TIMED));
    let good = ticket(&shared, a, 3, 5, true);
    assert!(shared.cell_of(&good).is_some());
    assert_eq!(shared.key_of(&good), Some(a));
    let refused = [
        ("untimed", ticket(&shared, a, 3, 5, false)),
        ("another generation", ticket(&shared, a, 3, 4, true)),
        (
            "a use the cell has not served yet",
            ticket(&shared, a, 4, 5, true),
        ),
        (
            "a cell that never served it",
            ticket(&shared, b, 3, 5, true),
        ),
        ("no such cell", ticket(&shared, CellKey(9), 3, 5, true)),
        ("seq 0", Ticket { seq: 0, ..good }),
        (
            "an unknown flag",
            Ticket {
                flags: good.flags | 1,
                ..good
            },
        ),
        (
            "another tracker",
            Ticket {
                tracker: good.tracker + 1,
                ..good
            },
        ),
    ];
    for (why, bad) in refused {
        assert!(shared.cell_of(&bad).is_none(), "{why}");
    }
    // The cell moves on to use 8: use 3 is a retired use once the tracker
    // says so, whatever its label was; until then its ticket is refused.
    cell_a.begin_use(8);
    cell_a.set_label(label(label_base(Generation::new(6, 32)), 0));
    assert!(shared.cell_of(&good).is_none(), "moved on, not retired");
    shared.publish_retired_through(3);
    assert!(shared.cell_of(&good).is_some());
    assert_eq!(shared.known_status(3, cell_a), Some(Status::Complete));
    // A use marked timed later: either ticket names it.
    let now = ticket(&shared, a, 8, 6, false);
    assert!(shared.cell_of(&ticket(&shared, a, 8, 6, true)).is_none());
    cell_a.mark_timed_later(8);
    assert!(shared.cell_of(&now).is_some());
    assert!(shared.cell_of(&ticket(&shared, a, 8, 6, true)).is_some());
    assert_eq!(cell_a.generation(), Generation::new(6, 32));
}

#[test]
fn stamps_answer_only_their_own_use() {
    let cell = cell();
    assert_eq!(cell.stamps(7), None);
    let first = Timestamps { start: 10, end: 20 };
    cell.store_stamps(7, Some(first));
    assert_eq!(cell.stamps(7), Some(first));
    assert_eq!(cell.stamps(6), None);
    assert_eq!(cell.stamps(8), None);

    let second = Timestamps { start: 30, end: 50 };
    cell.store_stamps(8, Some(second));
    assert_eq!(cell.stamps(7), None, "use 7's stamps were overwritten");
    assert_eq!(cell.stamps(8), Some(second));
    assert_eq!(cell.harvest_of(7), None, "not harvested here any more");

    cell.store_stamps(9, None);
    assert_eq!(cell.harvest_of(9), Some(None), "harvested, with no stamps");
    assert_eq!(cell.harvest_of(8), None);
    assert_eq!(cell.stamps(9), None);
}

#[test]
fn stamps_readers_never_see_another_uses_pair() {
    // A reader that asks for the use the cell names at that moment gets that
    // use's pair or nothing, never a pair torn between two writes. A stress
    // test: it cannot force the interleaving a torn read needs, but without
    // the re-check in `stamps` it failed within a second in each of 3 runs.
    fn pair(seq: u64) -> Timestamps {
        Timestamps {
            start: seq,
            end: seq * 3,
        }
    }
    const READS: u64 = 20_000;
    let cell = cell();
    let done = AtomicBool::new(false);
    let seen = std::thread::scope(|s| {
        // The writer keeps rewriting until the reader has read enough, so the
        // test does not depend on how the two threads get scheduled.
        s.spawn(|| {
            let mut seq = 1;
            while !done.load(Ordering::Relaxed) {
                cell.store_stamps(seq, Some(pair(seq)));
                seq += 1;
            }
        });
        // Stop the writer however the reader ends, a failed assertion included.
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop = StopOnDrop(&done);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut seen = 0u64;
        while seen < READS && std::time::Instant::now() < deadline {
            let seq = cell.stamps_seq.load(Ordering::Relaxed);
            if seq == 0 {
                continue; // mid-write, or nothing written yet: no use to ask about
            }
            if let Some(stamps) = cell.stamps(seq) {
                assert_eq!(stamps, pair(seq), "torn read for use {seq}");
                seen += 1;
            }
        }
        seen
    });
    assert!(seen > 0, "the reader never read a pair");
}

#[test]
fn failures_answer_for_retired_uses() {
    let (shared, _cells) = host_cells(0, true);
    assert_eq!(shared.outcome_of_retired(3), Status::Complete);
    for seq in [3, 4, 5, 8] {
        shared.record_failure(seq);
    }
    let outcomes: Vec<_> = (2..=9).map(|seq| shared.outcome_of_retired(seq)).collect();
    use Status::{Complete as C, Failed as F};
    assert_eq!(outcomes, [C, F, F, F, C, C, F, C]);
}

/// Failed uses, each between two that completed (a queue layer's failed
/// submission, then its next command): asking about a retired use examines
/// a handful of entries however many failed before, and the record's
/// memory stays within a bound for the tracker's life. Every failed use
/// reads Failed; the completed ones read Complete, exactly, among the most
/// recent 65,536 uses.
#[test]
#[cfg_attr(
    miri,
    ignore = "30,000 failed uses: far too long under Miri (the failure record's own tests run there)"
)]
fn the_failure_record_is_bounded_and_answers_at_a_constant_cost() {
    const BOUND: usize = 10 * 1024;
    for failed in [30_000u64, 100_000] {
        let (shared, _cells) = host_cells(0, true);
        let last = 2 * failed;
        for k in 1..=failed {
            shared.record_failure(2 * k);
        }
        assert!(
            shared.failure_record_bytes() <= BOUND,
            "{failed} failures: {} bytes",
            shared.failure_record_bytes()
        );
        let asked = [last, last - 1, last / 2, last / 2 + 1, 3, 2, 1];
        let scanned = shared.failure_entries_scanned();
        for &seq in &asked {
            let outcome = shared.outcome_of_retired(seq);
            if seq % 2 == 0 {
                assert_eq!(outcome, Status::Failed, "use {seq} of {failed} failures");
            } else if last - seq < 65_536 {
                assert_eq!(outcome, Status::Complete, "use {seq} of {failed} failures");
            }
        }
        let scanned = shared.failure_entries_scanned() - scanned;
        assert!(
            scanned <= 8 * asked.len(),
            "{failed} failures: {scanned} entries scanned for {} lookups",
            asked.len()
        );
    }
}

#[test]
fn known_status_uses_completions_only_where_the_design_remembers_them() {
    for remembers in [true, false] {
        let (shared, cells) = host_cells(1, remembers);
        let cell = shared.cell(cells[0]);
        cell.begin_use(3);
        assert_eq!(shared.known_status(3, cell), None, "pending");
        assert!(cell.complete(3));
        let expected = remembers.then_some(Status::Complete);
        assert_eq!(
            shared.known_status(3, cell),
            expected,
            "remembers={remembers}"
        );

        // Failures are known either way.
        cell.begin_use(4);
        assert!(cell.fail(4));
        assert_eq!(shared.known_status(4, cell), Some(Status::Failed));

        // A cell that moved on answers for its earlier uses.
        cell.begin_use(9);
        assert_eq!(shared.known_status(4, cell), Some(Status::Complete));
        shared.record_failure(4);
        assert_eq!(shared.known_status(4, cell), Some(Status::Failed));
    }
}

#[test]
fn retired_through_answers_without_the_cell() {
    let (shared, cells) = host_cells(1, true);
    let cell = shared.cell(cells[0]);
    cell.begin_use(5); // the cell says pending...
    shared.publish_retired_through(5);
    // ...but everything through 5 was reclaimed.
    assert_eq!(shared.known_status(5, cell), Some(Status::Complete));
    assert_eq!(shared.retired_through(), 5);
}

#[test]
fn observe_records_a_cpu_wait_proof_once() {
    let (shared, cells) = host_cells(1, true);
    let cell = shared.cell(cells[0]);
    let counted = |shared: &Shared<HostMemory>| {
        let mut stats = crate::Stats::default();
        shared.counters.add_to(&mut stats);
        (stats.retired_by_cpu_wait, stats.failed)
    };
    cell.begin_use(3);
    assert_eq!(shared.observe(3, cell, 1), Status::Pending);
    assert_eq!(shared.observe(3, cell, 0), Status::Complete);
    assert_eq!(shared.observe(3, cell, 0), Status::Complete);
    assert_eq!(counted(&shared), (1, 0), "one proof, counted once");
    assert_eq!(cell.phase_of(3), Some(Some(Status::Complete)));

    cell.begin_use(4);
    assert_eq!(shared.observe(4, cell, -1), Status::Failed);
    assert_eq!(shared.observe(4, cell, -1), Status::Failed);
    assert_eq!(counted(&shared), (1, 1), "one failure, counted once");
}

#[test]
fn poll_loads_only_what_the_host_does_not_know() {
    let (shared, cells) = host_cells(1, true);
    let cell = shared.cell(cells[0]);
    let polls = |shared: &Shared<HostMemory>| {
        let mut stats = crate::Stats::default();
        shared.counters.add_to(&mut stats);
        stats.host().polls
    };
    // SAFETY: the signal came from this memory.
    unsafe { shared.memory.store(cell.signal, 1) };
    cell.begin_use(1);
    assert_eq!(shared.poll(1, cell), Status::Pending);
    assert_eq!(polls(&shared), 1);
    shared
        .memory
        .complete(shared.memory.packet_handle(cell.signal));
    assert_eq!(shared.poll(1, cell), Status::Complete);
    assert_eq!(polls(&shared), 2);
    // Recorded: the next answer costs no load.
    assert_eq!(shared.poll(1, cell), Status::Complete);
    assert_eq!(polls(&shared), 2);
}
