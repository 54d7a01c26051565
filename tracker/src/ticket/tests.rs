//! Unit tests of wrap-safe ordering (AQL indices, generations) and requests.

use super::*;

const HALF: u64 = 1 << 63;

#[test]
fn aql_before_is_a_strict_order() {
    assert!(aql_before(1, 2));
    assert!(!aql_before(2, 1));
    assert!(!aql_before(5, 5), "an index is not before itself");
    assert!(aql_before(0, 1_000_000));
}

#[test]
fn aql_before_survives_the_u64_wrap() {
    assert!(aql_before(u64::MAX, 0));
    assert!(!aql_before(0, u64::MAX));
    assert!(aql_before(u64::MAX - 10, 5));
    assert!(!aql_before(5, u64::MAX - 10));
}

#[test]
fn aql_before_holds_up_to_half_the_range_apart() {
    assert!(aql_before(0, HALF - 1));
    assert!(aql_before(u64::MAX, HALF - 2), "across the wrap too");
    // Exactly half apart, neither comes first.
    assert!(!aql_before(0, HALF));
    assert!(!aql_before(HALF, 0));
}

#[test]
fn generation_values_are_masked_to_their_bits() {
    assert_eq!(Generation::new(9, 3).value(), 1);
    assert_eq!(Generation::new(7, 3).next(3).value(), 0, "wraps at 8");
    assert_eq!(Generation::new(u32::MAX, 32).value(), u32::MAX);
    assert_eq!(Generation::new(u32::MAX, 32).next(32).value(), 0);
    // Out-of-range widths clamp to 1..=32 bits.
    assert_eq!(Generation::new(3, 0).value(), 1);
    assert_eq!(Generation::new(1, 0).next(0).value(), 0);
    assert_eq!(Generation::new(u32::MAX, 40).value(), u32::MAX);
}

#[test]
fn precedes_is_serial_number_arithmetic() {
    let bits = 3;
    for a in 0..8 {
        let g = Generation::new(a, bits);
        for distance in 0..8 {
            let later = Generation::new(a + distance, bits);
            // Ahead by 1..=3 of 8 values: older. By 4 (half): undefined, so
            // neither. By 5..=7: that is the other one being ahead.
            assert_eq!(
                g.precedes(later, bits),
                (1..=3).contains(&distance),
                "{a} precedes {a} + {distance}?"
            );
            assert_eq!(later.precedes(g, bits), (5..=7).contains(&distance));
        }
    }
}

#[test]
fn precedes_survives_the_u32_wrap() {
    let last = Generation::new(u32::MAX, 32);
    let first = last.next(32);
    assert!(last.precedes(first, 32));
    assert!(!first.precedes(last, 32));
    assert!(!last.precedes(last, 32));
}

#[test]
fn a_packet_request_has_the_defaults() {
    let request = Request::packet(42);
    assert_eq!(
        request.engine(),
        Engine::Aql {
            index: 42,
            barrier: false
        }
    );
    assert_eq!(request.purpose, Purpose::Completion);
    assert_eq!(request.flags, 0, "a plain use: the fast path takes it");
    assert_eq!(request.ops, 1);
    assert!(!request.is_fence());
    assert!(!request.is_timed());
}

#[test]
fn barrier_makes_an_aql_use_a_fence_and_nothing_else() {
    let fence = Request::packet(7).barrier(true);
    assert_eq!(
        fence.engine(),
        Engine::Aql {
            index: 7,
            barrier: true
        },
        "the index is kept"
    );
    assert!(fence.is_fence());
    assert!(!fence.barrier(false).is_fence());
    // A copy engine is not on the AQL queue: its barrier bit means nothing.
    let copy = Request::copy_engine().barrier(true);
    assert_eq!(copy.engine(), Engine::Copy);
    assert!(!copy.is_fence());
}

#[test]
fn builders_set_one_field_each() {
    let request = Request::packet(3)
        .purpose(Purpose::Event)
        .ops(4)
        .timed(true);
    assert_eq!(request.purpose, Purpose::Event);
    assert_eq!(request.ops, 4);
    assert!(request.is_timed());
    assert_eq!(
        request.engine(),
        Engine::Aql {
            index: 3,
            barrier: false
        }
    );
    assert_eq!(Request::packet(3).ops(0).ops, 1, "at least one operation");
}

#[test]
fn a_use_is_timed_when_profiled_or_when_it_exists_to_be_timed() {
    assert!(Request::packet(1).timed(true).is_timed());
    assert!(Request::packet(1).purpose(Purpose::TimingOnly).is_timed());
    assert!(Request::copy_engine().timed(true).is_timed());
    for purpose in [
        Purpose::Completion,
        Purpose::CpuSync,
        Purpose::Event,
        Purpose::GpuWaiter,
    ] {
        assert!(!purpose.is_timed());
        assert!(
            !Request::packet(1).purpose(purpose).is_timed(),
            "{purpose:?}"
        );
    }
}

#[test]
fn the_ready_made_flags_do_not_depend_on_the_builders_order() {
    let a = Request::packet(5).purpose(Purpose::TimingOnly).timed(false);
    let b = Request::packet(5).timed(false).purpose(Purpose::TimingOnly);
    assert_eq!(a, b);
    assert!(
        a.is_timed(),
        "a timing-only use is timed whatever was asked"
    );
    // Changing one's mind undoes exactly what was set.
    let undone = Request::packet(5)
        .timed(true)
        .purpose(Purpose::TimingOnly)
        .purpose(Purpose::Event)
        .timed(false)
        .ops(3)
        .ops(1)
        .barrier(true)
        .barrier(false);
    assert_eq!(undone, Request::packet(5).purpose(Purpose::Event));
    assert_eq!(undone.flags, 0);
    assert_eq!(
        Request::packet(5).barrier(true).timed(true).flags,
        flag::FENCE | flag::TIMED | flag::ASKED_TIMED
    );
    assert_eq!(Request::packet(5).ops(2).flags, flag::MULTI);
}
