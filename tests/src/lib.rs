//! Evidence that the trackers are correct (docs/design.md section 6).
//!
//! Random operation sequences are applied to the real trackers on the
//! stepped simulator and, side by side, to a small reference [`model`]
//! (sharded-slab's pattern); after every operation the [`driver`] checks
//! every invariant against the simulator's ground truth ([`check::Check`]
//! names them). The same driver runs
//!
//! - as a bounded property test in `cargo test --workspace`
//!   (`tests/property.rs`), for the retiring tracker and the baseline, under
//!   every [`setup`] (tiny rings, tiny growth limits, narrow generation
//!   counters, so wrap-around and back-pressure happen all the time);
//! - as cargo-fuzz targets in `fuzz/` (`cargo fuzz run -s none retiring`),
//!   through [`fuzz_one`];
//! - under planted bugs, by the `teeth` binary (`.ci/teeth`), to show which
//!   check catches each and how fast.
//!
//! The queue layer has a driver of its own, [`queues`]: random sequences
//! of queue-layer operations on the stepped simulator (and, in
//! `tests/queue_property.rs`, on the ROCr stand-in), every answer judged
//! against the ground truth; `tests/queue_property.rs` runs it in `cargo
//! test` and `fuzz/fuzz_targets/queue.rs` under cargo-fuzz.
//!
//! A scenario replays from its seed:
//!
//! ```
//! use sigretire_scenarios::{TrackerKind, search, setup};
//!
//! let setup = setup::setups()[0];
//! let ops = search::generate(42);
//! let coverage = search::run(TrackerKind::Retiring, setup, &ops).expect("no invariant broken");
//! assert_eq!(coverage.ops, ops.len() as u64);
//! ```

pub mod check;
pub mod driver;
mod kind;
pub mod model;
mod observer;
pub mod ops;
pub mod queues;
pub mod replay;
pub mod search;
pub mod setup;

pub use check::{Check, Failure};
pub use driver::{Coverage, Driver, SimTracker};
pub use kind::TrackerKind;
pub use ops::Op;

use arbitrary::Unstructured;

/// One fuzz input for `kind`: its first byte picks the setup, the rest are
/// operations. Returns the number of operations applied; panics with the
/// failure (libFuzzer's crash) when an invariant breaks.
pub fn fuzz_one(kind: TrackerKind, data: &[u8]) -> u64 {
    let setups = setup::setups();
    let Some((&first, rest)) = data.split_first() else {
        return 0;
    };
    let setup = setups[usize::from(first) % setups.len()];
    let ops = ops::decode_ops(&mut Unstructured::new(rest), search::MAX_OPS);
    match search::run(kind, setup, &ops) {
        Ok(coverage) => coverage.ops,
        Err(failure) => {
            let mut report = format!("{kind:?} tracker, setup \"{}\": {failure}\n", setup.name);
            for (i, op) in ops.iter().enumerate().take(failure.step + 1) {
                report.push_str(&format!("  {i:3}: {op:?}\n"));
            }
            panic!("{report}");
        }
    }
}

/// The repository README's examples, run as doctests so they cannot go
/// stale (this crate can depend on every crate they name).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct RepositoryReadme;
