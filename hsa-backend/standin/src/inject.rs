//! Failure injection that needs no runtime: any ROCr function that returns a
//! status can be made to fail, and some can be made to answer success with a
//! result a real ROCr would not give ([`Malformed`]). Both are set through the
//! control interface, before `hsa_init` as well as after (so initialisation
//! and discovery can fail), and hold for this copy of the library until used
//! up, across runtimes.
//!
//! Injections made while the runtime exists and that only make sense with
//! one (exhausted pools, failing signal creations) live with the instance
//! instead (`memory.rs`).

use crate::abi::Malformed;
use hsa_sys::hsa_status_t;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Calls of one function that fail.
#[derive(Debug)]
struct CallFailure {
    symbol: &'static str,
    /// Calls to let through first.
    skip: u64,
    /// Calls that fail after those.
    count: u64,
    status: hsa_status_t,
}

/// Whether any call failure is pending: the fast path of every call.
static ARMED: AtomicBool = AtomicBool::new(false);
static CALL_FAILURES: Mutex<Vec<CallFailure>> = Mutex::new(Vec::new());
/// Pending malformed answers, per [`Malformed`] kind.
static MALFORMED: [AtomicU64; Malformed::ALL.len()] =
    [const { AtomicU64::new(0) }; Malformed::ALL.len()];

/// After `skip` more calls of `symbol`, the next `count` answer `status`
/// without doing anything. Replaces an earlier injection for `symbol`.
pub(crate) fn fail_calls(symbol: &'static str, skip: u64, count: u64, status: hsa_status_t) {
    let mut failures = CALL_FAILURES.lock();
    failures.retain(|f| f.symbol != symbol);
    if count > 0 {
        failures.push(CallFailure {
            symbol,
            skip,
            count,
            status,
        });
    }
    ARMED.store(!failures.is_empty(), Ordering::Release);
}

/// The status a call of `symbol` must answer instead of running, if one is
/// injected for this call.
pub(crate) fn injected(symbol: &str) -> Option<hsa_status_t> {
    if !ARMED.load(Ordering::Acquire) {
        return None;
    }
    let mut failures = CALL_FAILURES.lock();
    let position = failures.iter().position(|f| f.symbol == symbol)?;
    let failure = &mut failures[position];
    if failure.skip > 0 {
        failure.skip -= 1;
        return None;
    }
    let status = failure.status;
    failure.count -= 1;
    if failure.count == 0 {
        failures.swap_remove(position);
        ARMED.store(!failures.is_empty(), Ordering::Release);
    }
    Some(status)
}

/// The next `count` calls that could answer `kind` do.
pub(crate) fn malform(kind: Malformed, count: u64) {
    MALFORMED[kind as usize].store(count, Ordering::Release);
}

/// Whether this call answers `kind` (using one of the injected answers).
pub(crate) fn take_malformed(kind: Malformed) -> bool {
    MALFORMED[kind as usize]
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
        .is_ok()
}

/// A return type of an exported function, as injection sees it: only
/// statuses can be injected (other answers, such as a signal's value or a
/// queue index, have no way to say "failed").
pub(crate) trait Answer: Sized {
    /// `status` as this type's answer, if the type is a status.
    fn from_status(status: hsa_status_t) -> Option<Self>;
}

impl Answer for hsa_status_t {
    fn from_status(status: hsa_status_t) -> Option<Self> {
        Some(status)
    }
}

impl Answer for i64 {
    fn from_status(_: hsa_status_t) -> Option<Self> {
        None
    }
}

impl Answer for u64 {
    fn from_status(_: hsa_status_t) -> Option<Self> {
        None
    }
}
