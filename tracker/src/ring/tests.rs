//! Unit tests of the ring: accounting, position arithmetic across the wrap
//! point, the reclaim walk's cursor, the binary search, growth and spares.
//!
//! Slots are told apart by their signal: `host_cells` puts signal `i` in
//! cell `i`, and the rings below start with cells `0..size` in order.

use super::*;
use crate::backend::HostMemory;
use crate::share::{Shared, host_cell_refs};
use crate::ticket::aql_before;

/// The signal a slot (or spare) holds: a cell's signal never changes, and
/// `host_cell_refs` adopts signal `i` under key `i`.
fn id(cell: &Cell<usize>) -> usize {
    cell.key.index()
}

/// An armed spare of `placement`.
fn spare(cell: &Arc<Cell<usize>>, placement: Placement, store: u64) -> Spare<usize> {
    Spare {
        cell: cell.clone(),
        placement,
        store,
    }
}

/// A ring of `size` slots (slot `i` holds signal `i`, armed by store `i`)
/// that may grow to `limit`, and `spares` more cells, not yet placed.
fn new_ring(
    size: usize,
    limit: usize,
    spares: usize,
) -> (Shared<HostMemory>, Ring<usize>, Vec<Arc<Cell<usize>>>) {
    let (shared, mut cells) = host_cell_refs(size + spares);
    let rest = cells.split_off(size);
    let slots = cells
        .iter()
        .enumerate()
        .map(|(i, cell)| Slot::new(spare(cell, Placement::Host, i as u64)))
        .collect();
    (shared, Ring::new(slots, limit), rest)
}

/// Hands out and retires `n` uses, so the head sits at position `n % size`.
fn rotate(ring: &mut Ring<usize>, n: usize) {
    for _ in 0..n {
        ring.advance_tail();
        ring.advance_head();
    }
}

/// Hands out uses until the ring is full; returns their sequence numbers.
fn fill_up(ring: &mut Ring<usize>) -> Vec<u64> {
    let mut seqs = Vec::new();
    while !ring.is_full() {
        seqs.push(ring.advance_tail());
    }
    seqs
}

/// The signal of each in-flight use, oldest first.
fn in_flight_ids(ring: &Ring<usize>) -> Vec<usize> {
    (ring.head()..ring.tail())
        .map(|seq| id(&ring.get(seq).expect("in flight").cell))
        .collect()
}

#[test]
fn a_new_ring_has_nothing_in_flight() {
    let (_shared, ring, _) = new_ring(4, 8, 0);
    assert_eq!(ring.capacity(), 4);
    assert_eq!(ring.in_flight(), 0);
    assert!(!ring.is_full());
    assert_eq!(
        (ring.head(), ring.tail()),
        (1, 1),
        "uses are numbered from 1"
    );
    assert!(ring.get(0).is_none());
    assert!(ring.get(1).is_none());
    assert!(ring.oldest().is_none());
}

#[test]
fn in_flight_and_full_follow_tail_and_head() {
    let (_shared, mut ring, _) = new_ring(4, 8, 0);
    for expected in 1..=4 {
        assert!(!ring.is_full());
        assert_eq!(ring.advance_tail(), expected);
        assert_eq!(ring.in_flight(), expected as usize);
    }
    assert!(ring.is_full());
    assert!(ring.get(5).is_none(), "not handed out yet");

    ring.advance_head();
    assert!(!ring.is_full());
    assert_eq!(ring.in_flight(), 3);
    assert_eq!((ring.head(), ring.tail()), (2, 5));
    assert!(ring.get(1).is_none(), "reclaimed");
    assert!(ring.get_mut(1).is_none(), "reclaimed");
    assert_eq!(id(&ring.oldest().unwrap().cell), 1);
    assert_eq!(in_flight_ids(&ring), [1, 2, 3]);
}

#[test]
fn positions_wrap_around_the_end() {
    let (_shared, mut ring, _) = new_ring(4, 8, 0);
    rotate(&mut ring, 3); // uses 1..=3 came and went: the head is at position 3
    // Each new use takes the slot `next_mut` showed it.
    for (seq, expected_pos) in [(4, 3), (5, 0), (6, 1), (7, 2)] {
        assert_eq!(id(&ring.next_mut().cell), expected_pos);
        assert_eq!(ring.advance_tail(), seq);
        assert_eq!(ring.position(seq), expected_pos, "use {seq}");
        assert_eq!(id(&ring.get(seq).unwrap().cell), expected_pos, "use {seq}");
    }
    assert!(ring.is_full());
    assert_eq!(id(&ring.oldest().unwrap().cell), 3);

    // `get_mut` reaches the same slot as `get`, across the wrap point too.
    for seq in 4..=7 {
        ring.get_mut(seq).unwrap().aql = 100 + seq;
    }
    for seq in 4..=7 {
        assert_eq!(ring.get(seq).unwrap().aql, 100 + seq);
    }
    assert_eq!(ring.oldest_mut().unwrap().aql, 104);

    // The head wraps the same way.
    ring.advance_head();
    assert_eq!(id(&ring.oldest().unwrap().cell), 0);
    assert_eq!(ring.position(5), 0);
}

#[test]
fn take_oldest_while_stops_at_the_first_refused_use() {
    let (_shared, mut ring, _) = new_ring(4, 8, 0);
    rotate(&mut ring, 2);
    let seqs = fill_up(&mut ring); // uses 3..=6 at positions 2, 3, 0, 1
    assert_eq!(seqs, [3, 4, 5, 6]);
    let mut visited = Vec::new();
    let taken = ring.take_oldest_while(10, |seq, slot| {
        visited.push((seq, id(&slot.cell)));
        seq != 5
    });
    assert_eq!(taken, 2);
    assert_eq!(
        visited,
        [(3, 2), (4, 3), (5, 0)],
        "asked in order, up to the refusal"
    );
    assert_eq!(ring.head(), 5, "the refused use stays the oldest");
    assert_eq!(id(&ring.oldest().unwrap().cell), 0, "head_pos wrapped to 0");
    assert_eq!(in_flight_ids(&ring), [0, 1]);
    assert!(ring.get(4).is_none());

    // What the walk writes to a slot it takes stays with the slot.
    let taken = ring.take_oldest_while(10, |_, slot| {
        slot.store = 99;
        true
    });
    assert_eq!(taken, 2);
    assert_eq!(ring.head(), ring.tail());
    assert!(ring.oldest().is_none());
    rotate(&mut ring, 2); // uses 7 and 8, at positions 2 and 3
    assert_eq!(ring.advance_tail(), 9);
    assert_eq!(id(&ring.get(9).unwrap().cell), 0);
    assert_eq!(ring.get(9).unwrap().store, 99);
    assert_eq!(id(&ring.next_mut().cell), 1, "head_pos followed the walk");
}

#[test]
fn take_oldest_while_respects_max_and_the_tail() {
    let (_shared, mut ring, _) = new_ring(4, 8, 0);
    rotate(&mut ring, 3);
    fill_up(&mut ring); // uses 4..=7

    let mut calls = 0;
    let mut take_all = |ring: &mut Ring<usize>, max| {
        ring.take_oldest_while(max, |_, _| {
            calls += 1;
            true
        })
    };
    assert_eq!(take_all(&mut ring, 0), 0, "max 0 takes nothing");
    assert_eq!(ring.head(), 4);

    assert_eq!(take_all(&mut ring, 2), 2);
    assert_eq!(ring.head(), 6);
    assert_eq!(id(&ring.oldest().unwrap().cell), 1);

    // More room than uses: stops at the tail.
    assert_eq!(take_all(&mut ring, 32), 2);
    assert_eq!(ring.in_flight(), 0);
    assert_eq!(take_all(&mut ring, 32), 0);
    assert_eq!(calls, 4, "asked about each use once, none past the tail");
}

/// A full ring of 8 whose head is at position 5 and whose uses' AQL indices
/// cross the u64 wrap: `u64::MAX - 5, u64::MAX - 3, u64::MAX - 1, 0, 2, ..., 8`.
fn wrapped_aql_ring() -> (Shared<HostMemory>, Ring<usize>) {
    let (shared, mut ring, _) = new_ring(8, 8, 0);
    rotate(&mut ring, 5);
    let mut aql = u64::MAX - 5;
    for seq in fill_up(&mut ring) {
        ring.get_mut(seq).unwrap().aql = aql;
        aql = aql.wrapping_add(2);
    }
    (shared, ring)
}

#[test]
fn last_before_finds_the_last_use_before_an_index() {
    let (_shared, ring) = wrapped_aql_ring();
    let (head, tail) = (ring.head(), ring.tail());
    // None of the uses is before the first index.
    assert_eq!(ring.last_before(head, tail, u64::MAX - 5), None);
    // All are before one past the last.
    assert_eq!(ring.last_before(head, tail, 9), Some(tail - 1));
    // Across the AQL wrap: u64::MAX - 1 (use head + 2) is the last before 0,
    // index 0 itself (use head + 3) the last before 1 and 2.
    assert_eq!(ring.last_before(head, tail, 0), Some(head + 2));
    assert_eq!(ring.last_before(head, tail, 1), Some(head + 3));
    assert_eq!(ring.last_before(head, tail, 2), Some(head + 3));
    assert_eq!(ring.last_before(head, tail, 3), Some(head + 4));
    // One-element and empty ranges.
    assert_eq!(ring.last_before(head + 4, head + 5, 9), Some(head + 4));
    assert_eq!(ring.last_before(head + 4, head + 5, 0), None);
    assert_eq!(ring.last_before(head + 4, head + 4, 9), None);
}

/// A full ring of 16 uses whose AQL indices step by `steps` (0: a
/// copy-engine use repeating the index before it; more than 1: a use of
/// several packets, or foreign packets between uses), starting at `first`
/// and wrapped around the ring's end.
fn stepped_aql_ring(first: u64, steps: &[u64]) -> (Shared<HostMemory>, Ring<usize>) {
    let (shared, mut ring, _) = new_ring(16, 16, 0);
    rotate(&mut ring, 11);
    let mut aql = first;
    for (k, seq) in fill_up(&mut ring).into_iter().enumerate() {
        ring.get_mut(seq).unwrap().aql = aql;
        aql = aql.wrapping_add(steps[k % steps.len()]);
    }
    (shared, ring)
}

#[test]
fn last_before_matches_a_linear_scan_over_every_range() {
    // Back to back (the guess is right), with gaps and with repeated
    // indices (the guess is wrong and the search finishes the job), across
    // the AQL wrap and not.
    let shapes: [&[u64]; 6] = [
        &[1],
        &[2],
        &[1, 0, 1],
        &[0, 3, 1],
        &[5, 1, 1, 0],
        &[1, 1, 7],
    ];
    for first in [3, u64::MAX - 9] {
        for steps in shapes {
            let (_shared, ring) = stepped_aql_ring(first, steps);
            let (head, tail) = (ring.head(), ring.tail());
            let aqls: Vec<u64> = (head..tail).map(|seq| ring.get(seq).unwrap().aql).collect();
            let span = aqls[aqls.len() - 1].wrapping_sub(aqls[0]) + 3;
            for k in 0..span + 3 {
                let read_index = first.wrapping_sub(2).wrapping_add(k);
                for lo in head..=tail {
                    for hi in lo..=tail {
                        let linear = (lo..hi)
                            .rfind(|&seq| aql_before(aqls[(seq - head) as usize], read_index));
                        assert_eq!(
                            ring.last_before(lo, hi, read_index),
                            linear,
                            "steps {steps:?} from {first}, range {lo}..{hi}, read index {read_index}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn grow_puts_the_oldest_use_first_and_keeps_order() {
    let (_shared, mut ring, spares) = new_ring(4, 8, 5);
    for (i, cell) in spares.iter().enumerate() {
        ring.put_spare(spare(cell, Placement::Host, 100 + i as u64));
    }
    rotate(&mut ring, 2);
    let seqs = fill_up(&mut ring); // uses 3..=6 at positions 2, 3, 0, 1
    ring.get_mut(3).unwrap().aql = 33;
    let before = in_flight_ids(&ring);
    assert_eq!(before, [2, 3, 0, 1]);

    assert_eq!(ring.growth_step(), 4);
    assert_eq!(ring.grow(Placement::Host), 4);
    assert_eq!(ring.capacity(), 8);
    assert_eq!(ring.spares(Placement::Host), 1, "4 of the 5 spares used");
    assert_eq!(in_flight_ids(&ring), before, "every use keeps its slot");
    assert_eq!(ring.get(3).unwrap().aql, 33, "and its slot's contents");
    assert_eq!(
        ring.position(seqs[0]),
        0,
        "the oldest use moved to position 0"
    );
    assert_eq!((ring.head(), ring.tail()), (3, 7));
    assert!(!ring.is_full());

    // The new slots follow the newest use, holding spares (last put, first
    // taken) with the stores that armed them.
    let mut added = Vec::new();
    while !ring.is_full() {
        let slot = ring.next_mut();
        added.push((id(&slot.cell), slot.store, slot.aql, slot.flags));
        ring.advance_tail();
    }
    let from_spare = |i: usize| (id(&spares[i]), 100 + i as u64, 0, 0);
    assert_eq!(
        added,
        [from_spare(4), from_spare(3), from_spare(2), from_spare(1)]
    );

    // At the limit: no more growth, and nothing changes trying.
    assert!(!ring.can_grow());
    assert_eq!(ring.growth_step(), 0);
    assert_eq!(ring.grow(Placement::Host), 0);
    assert_eq!(ring.capacity(), 8);
    assert_eq!(ring.spares(Placement::Host), 1);

    // After growth the ring wraps at its new size.
    ring.advance_head();
    assert_eq!(ring.advance_tail(), 11);
    assert_eq!(ring.position(11), 0);
    assert_eq!(id(&ring.get(11).unwrap().cell), 2);
}

#[test]
fn grow_is_bounded_by_the_limit_and_the_spares_of_its_placement() {
    // The limit caps doubling.
    let (_shared, mut ring, spares) = new_ring(4, 6, 5);
    for cell in &spares {
        ring.put_spare(spare(cell, Placement::Device, 0));
    }
    assert_eq!(ring.growth_step(), 2);
    assert_eq!(ring.grow(Placement::Device), 2);
    assert_eq!((ring.capacity(), ring.spares(Placement::Device)), (6, 3));

    // Fewer spares than the step: takes what there is.
    let (_shared, mut ring, spares) = new_ring(4, 16, 1);
    ring.put_spare(spare(&spares[0], Placement::Host, 0));
    assert_eq!(ring.grow(Placement::Host), 1);
    assert_eq!(ring.capacity(), 5);

    // Only the other placement's spares: grows by nothing, changes nothing.
    let (_shared, mut ring, spares) = new_ring(4, 16, 2);
    rotate(&mut ring, 1);
    ring.advance_tail();
    for cell in &spares {
        ring.put_spare(spare(cell, Placement::Device, 0));
    }
    assert_eq!(ring.grow(Placement::Host), 0);
    assert_eq!(ring.capacity(), 4);
    assert_eq!(ring.spares(Placement::Device), 2);
    assert_eq!(ring.position(2), 1, "not rebuilt");
}

#[test]
fn fill_prefers_its_placement_then_takes_the_other() {
    let (_shared, cells) = host_cell_refs(5);
    let mut ring = Ring::new(Vec::new(), 16);
    for cell in &cells[..2] {
        ring.put_spare(spare(cell, Placement::Host, 7));
    }
    for cell in &cells[2..] {
        ring.put_spare(spare(cell, Placement::Device, 9));
    }
    assert_eq!(ring.fill(4, Placement::Device), 4);
    assert_eq!(ring.spares(Placement::Device), 0);
    assert_eq!(ring.spares(Placement::Host), 1);
    // The three device spares (last put first), then one host spare; each
    // slot keeps the store that armed its signal.
    let mut filled = Vec::new();
    while !ring.is_full() {
        let slot = ring.next_mut();
        filled.push((id(&slot.cell), slot.store));
        ring.advance_tail();
    }
    assert_eq!(filled, [(4, 9), (3, 9), (2, 9), (1, 7)]);
}

#[test]
fn fill_adds_what_is_missing_and_what_the_spares_allow() {
    // Already that big: nothing to add.
    let (_shared, mut ring, spares) = new_ring(4, 16, 1);
    ring.put_spare(spare(&spares[0], Placement::Host, 0));
    assert_eq!(ring.fill(4, Placement::Host), 4);
    assert_eq!(ring.spares(Placement::Host), 1);
    // Not enough spares: as many as there are.
    assert_eq!(ring.fill(8, Placement::Host), 5);
    assert_eq!(ring.spares(Placement::Host), 0);
}

#[test]
fn spares_are_kept_per_placement() {
    let (_shared, cells) = host_cell_refs(3);
    let mut ring: Ring<usize> = Ring::new(Vec::new(), 16);
    let numbered = |i: usize, placement| spare(&cells[i], placement, i as u64);
    ring.put_spare(numbered(0, Placement::Host));
    ring.put_spare(numbered(1, Placement::Device));
    ring.put_spare(numbered(2, Placement::Host));
    assert_eq!(ring.spares(Placement::Host), 2);
    assert_eq!(ring.spares(Placement::Device), 1);

    let take = |ring: &mut Ring<usize>, p| ring.take_spare(p).map(|s| (id(&s.cell), s.store));
    assert_eq!(take(&mut ring, Placement::Device), Some((1, 1)));
    assert_eq!(
        take(&mut ring, Placement::Device),
        None,
        "no device spare left"
    );
    assert_eq!(take(&mut ring, Placement::Host), Some((2, 2)));
    assert_eq!(take(&mut ring, Placement::Host), Some((0, 0)));
    assert_eq!(take(&mut ring, Placement::Host), None);
}

#[test]
fn slot_flags_are_independent_bits() {
    let (_shared, cells) = host_cell_refs(1);
    let mut slot = Slot::new(spare(&cells[0], Placement::Host, 5));
    let fields = (
        slot.store,
        slot.aql,
        slot.last_fence,
        slot.ops,
        slot.residual,
    );
    assert_eq!(fields, (5, 0, 0, 1, 0), "a new slot serves one operation");
    use crate::ticket::flag;
    let all = [
        flag::FENCE,
        flag::COPY,
        flag::TIMED,
        flag::HARVESTED,
        flag::ASKED_TIMED,
        flag::MULTI,
        flag::TIMING_ONLY,
    ];
    // One bit each, none shared: the table in `ticket::flag` holds.
    assert_eq!(all.iter().fold(0, |bits, &f| bits | f).count_ones(), 7);
    assert!(all.iter().all(|&f| f.count_ones() == 1));
    assert!(all.iter().all(|&f| !slot.is(f)));
    slot.flags = flag::FENCE | flag::TIMED;
    let set: Vec<bool> = all.iter().map(|&f| slot.is(f)).collect();
    assert_eq!(set, [true, false, true, false, false, false, false]);
    assert_eq!(flag::FROM_REQUEST, flag::FENCE | flag::COPY | flag::TIMED);
}
