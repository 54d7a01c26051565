//! The queue layer's own operation-sequence driver (docs/design.md
//! sections 4 and 6).
//!
//! Random sequences of queue-layer operations — launches (empty, gated on
//! a flag, timed, the caller's dispatch), single and multi-operation
//! submissions the backend refuses in part, timed and untimed events
//! (record, query, synchronize, timestamps, elapsed time), synchronize from
//! several threads, query, cross-queue waits on events and queues, moves
//! to another hardware queue, the runtime's own packets between the
//! layer's, queue failures with and without skip-abort, spinning and
//! sleeping waits, drops of every kind of handle, and single steps of the
//! GPU — are applied through the layer's public API to streams on a
//! stepped machine ([`Gpu`]: the simulator here, the ROCr stand-in in
//! `tests/queue_property.rs`). After every step every answer is judged
//! against the machine's ground truth and a reference model of what was
//! published on each hardware queue ([`ledger`]): nothing is reported
//! complete before its work completed, nothing failed that did not, no
//! final status changes, no signal is re-armed under a packet, a pin or a
//! sleeper, every blocking call (run on a helper thread) returns within a
//! bound once it must and never before, and at the end nothing is left
//! behind ([`QueueCheck`] names each check).
//!
//! The entry points take a setup and operations (or a seed and a case
//! count) and return a typed failure, so the property test, the fuzz
//! target and a run under planted bugs share them:
//!
//! ```
//! use sigretire_scenarios::queues::{SimGpu, queue_setups, search};
//!
//! let ops = search::generate(7);
//! let outcome = search::run::<SimGpu>(queue_setups()[0], &ops);
//! // Ok with what the scenario reached, or the check it broke and where.
//! if let Err(failure) = &outcome {
//!     eprintln!("{failure}");
//! }
//! ```

pub mod check;
pub mod driver;
pub mod gpu;
pub mod ledger;
pub mod ops;
pub mod search;
pub mod waiters;

pub use check::{QueueCheck, QueueFailure};
pub use driver::{QueueCoverage, QueueDriver};
pub use gpu::{Gpu, SimGpu};
pub use ops::{Op, QueueSetup, queue_setups};

use arbitrary::Unstructured;

/// One fuzz input on the simulator: its first byte picks the setup, the
/// rest are operations. Returns the number of operations applied; panics
/// with the failure and the scenario (libFuzzer's crash) when a check
/// breaks.
pub fn fuzz_queue(data: &[u8]) -> u64 {
    let setups = queue_setups();
    let Some((&first, rest)) = data.split_first() else {
        return 0;
    };
    let setup = setups[usize::from(first) % setups.len()];
    let ops = ops::decode_ops(&mut Unstructured::new(rest), search::MAX_QUEUE_OPS);
    match search::run::<SimGpu>(setup, &ops) {
        Ok(coverage) => coverage.ops,
        Err(failure) => {
            let mut report = format!("queue layer, setup \"{}\": {failure}\n", setup.name);
            for (i, op) in ops.iter().enumerate().take(failure.step + 1) {
                report.push_str(&format!("  {i:3}: {op:?}\n"));
            }
            panic!("{report}");
        }
    }
}
