//! The scenarios driver on the baseline tracker: every input is a setup
//! and a sequence of operations; a broken invariant is a crash.
#![no_main]

mod tally;

use libfuzzer_sys::fuzz_target;
use sigretire_scenarios::{TrackerKind, fuzz_one};

fuzz_target!(|data: &[u8]| {
    tally::record(fuzz_one(TrackerKind::Baseline, data));
});
