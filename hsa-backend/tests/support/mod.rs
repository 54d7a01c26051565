//! Test helpers for the ROCr backend's own tests: a private ROCr stand-in
//! with the backend's runtime and device loaded from it, visible skips, and
//! time bounds.
//!
//! The tracker's scenarios run on this backend too, from the `scenarios`
//! crate (`tests/tests/backends`), written once for every backend.
#![allow(dead_code)]

use sigretire_hsa::{Agent, AqlQueue, QueueOptions, Runtime, SignalPool};
use sigretire_rocr_standin::{Config as Machine, QueueControl, Standin};
use std::io::Write as _;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

/// Debian's ROCr.
pub const DEBIAN_ROCR: &str = "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1";

/// Skips the calling test, visibly (libtest captures `eprintln!`).
pub fn skip(reason: &str) {
    let _ = writeln!(std::io::stderr(), "SKIPPED: {reason}");
}

/// Set (to anything but empty or `0`) on a machine where Debian's ROCr is
/// installed and the tests against it must run, such as CI: their skips
/// become failures.
pub const REQUIRE_DEBIAN_ROCR: &str = "REQUIRE_DEBIAN_ROCR";

/// Skips a test of Debian's ROCr that cannot run here, or fails it if
/// [`REQUIRE_DEBIAN_ROCR`] is set.
#[track_caller]
pub fn skip_debian_rocr(reason: &str) {
    let required = std::env::var_os(REQUIRE_DEBIAN_ROCR).is_some_and(|v| !v.is_empty() && v != "0");
    assert!(!required, "{REQUIRE_DEBIAN_ROCR} is set, yet {reason}");
    skip(reason);
}

/// A machine behind a private stand-in, with the backend initialised on it.
pub struct Gpu {
    pub device: Agent,
    pub runtime: Arc<Runtime>,
    /// Last: the library copy outlives everything loaded from it.
    pub standin: Standin,
}

impl Gpu {
    pub fn new(machine: Machine) -> Self {
        let standin = Standin::new(machine).expect("the stand-in loads");
        let runtime = Runtime::load_from(standin.library_path()).expect("ROCr initialises");
        let device = runtime.device(0).expect("GPU 0");
        Self {
            device,
            runtime,
            standin,
        }
    }

    pub fn stepped() -> Self {
        Self::new(Machine::stepped())
    }

    pub fn threaded() -> Self {
        Self::new(Machine::default())
    }

    /// Queue options matching the machine: the ring where the stand-in puts
    /// it, and no drain at teardown when stepped (nothing would run it).
    pub fn queue_options(&self, machine: &Machine) -> QueueOptions {
        QueueOptions {
            size: 1 << 14,
            profiling: true,
            ring_in_device_memory: machine.ring_in_device_memory,
            drain_timeout: if machine.threaded {
                Duration::from_secs(5)
            } else {
                Duration::ZERO
            },
        }
    }

    pub fn queue(&self, options: QueueOptions) -> AqlQueue {
        AqlQueue::new(&self.device, options).expect("a queue")
    }

    pub fn control<'a>(&'a self, queue: &AqlQueue) -> QueueControl<'a> {
        self.standin.queue(queue.raw())
    }
}

/// Runs `f` on a thread and fails the test if it does not return within
/// `limit` (the thread is left behind: the process exit ends it).
pub fn within<R: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> R + Send + 'static,
) -> R {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(f());
    });
    receiver
        .recv_timeout(limit)
        .unwrap_or_else(|_| panic!("{what} did not return within {limit:?}"))
}

/// The pool's batch counters: (batches in VRAM, batches in system memory,
/// allocation attempts that fell back to the next kind of memory).
pub fn batch_counts(pool: &SignalPool) -> (u64, u64, u64) {
    let counters = pool.counters();
    (
        counters.vram_batches,
        counters.system_batches,
        counters.fallbacks,
    )
}
