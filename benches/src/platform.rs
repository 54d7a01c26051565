//! Where sigbench runs: the backend it found, how to make trackers on it,
//! and what its native API offers to compare against.
//!
//! The choice, best first: ROCr with an AMD GPU, CUDA with an NVIDIA GPU,
//! otherwise the simulator with its MI300X-like cost profile. Each backend
//! either answers with a platform or says why it cannot, and sigbench prints
//! every reason, so a user knows what was tried.

use crate::measure::{Sample, fail};
use sigretire_queue::{Device, DeviceConfig, QueueConfig, QueueTracker};
use sigretire_tracker::{Config, Placement};
use std::fmt;
use std::time::Duration;

/// A backend sigbench can run on.
pub trait Platform {
    /// The retiring tracker on this backend.
    type Retiring: QueueTracker;
    /// The baseline tracker on this backend.
    type Baseline: QueueTracker;

    /// `"sim"`, `"rocr"` or `"cuda"`.
    fn backend(&self) -> &'static str;

    /// The machine, in words (device, driver, runtime).
    fn machine(&self) -> String;

    /// The signal placements the backend offers.
    fn placements(&self) -> Vec<Placement>;

    /// A retiring tracker on a new hardware queue.
    fn retiring(&self, config: Config) -> Result<Self::Retiring, String>;

    /// A baseline tracker on a new hardware queue.
    fn baseline(&self, config: Config) -> Result<Self::Baseline, String>;

    /// Registers a kernel that runs for about `duration` on the GPU and
    /// answers the kernel object a queue launches it by (the work before
    /// the event of the `*_long` rows), or why the backend has none.
    fn long_kernel(&self, duration: Duration) -> Result<u64, String>;

    /// The backend's own event and synchronize calls, if it has any worth
    /// comparing with (CUDA's).
    fn native(&self) -> Option<&dyn Native> {
        None
    }
}

/// The placement the queue-layer benchmarks (waits, scaling, callbacks)
/// put signals in: the backend's last offered one, device memory wherever
/// the backend has it.
pub(crate) fn preferred_placement<L: Platform>(lab: &L) -> Placement {
    *lab.placements()
        .last()
        .expect("a backend offers a placement")
}

/// A retiring tracker on a new hardware queue, its signals in the
/// [`preferred_placement`].
pub(crate) fn preferred_tracker<L: Platform>(lab: &L) -> Result<L::Retiring, String> {
    lab.retiring(Config {
        signals: preferred_placement(lab),
        ..Config::default()
    })
}

/// A device of ours on `lab`, its default queue on a
/// [`preferred_tracker`] with `config`.
pub(crate) fn preferred_device<L: Platform>(
    lab: &L,
    config: QueueConfig,
) -> Result<Device<L::Retiring>, String> {
    Device::new(DeviceConfig::default(), preferred_tracker(lab)?, config).map_err(fail)
}

/// A backend's own API, measured the same way as the trackers' rows (the
/// wall clock and the calling thread's usage around the call alone:
/// [`Timer`](crate::measure::Timer)).
pub trait Native {
    /// Empty work, then wait for an event recorded after it (default or
    /// blocking-sync event).
    fn event_synchronize(&self, blocking: bool) -> Result<Sample, String>;
    /// The kernel `kernel` (what [`Platform::long_kernel`] answered), then
    /// wait for an event recorded after it (default or blocking-sync event).
    fn event_synchronize_after(&self, kernel: u64, blocking: bool) -> Result<Sample, String>;
    /// Query an event that has completed.
    fn event_query(&self) -> Result<Sample, String>;
    /// Empty work, then synchronize the stream.
    fn stream_synchronize(&self) -> Result<Sample, String>;
    /// Synchronize a stream with nothing pending.
    fn stream_synchronize_completed(&self) -> Result<Sample, String>;
    /// Empty work on two streams, then synchronize the device.
    fn device_synchronize(&self) -> Result<Sample, String>;
    /// Record an event after empty work.
    fn event_record(&self) -> Result<Sample, String>;
    /// Elapsed time between two completed events.
    fn event_elapsed_time(&self) -> Result<Sample, String>;
    /// The floor ([`Api::Floor`](crate::measure::Api::Floor)): an empty
    /// kernel writing a pinned word while the host spins on it, or `None`
    /// where the backend cannot launch one.
    fn floor(&self) -> Option<Result<Sample, String>> {
        None
    }
}

/// Why a backend was not used.
#[derive(Clone, Debug)]
pub struct Skipped {
    /// The backend.
    pub backend: &'static str,
    /// Why.
    pub reason: String,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.backend, self.reason)
    }
}
