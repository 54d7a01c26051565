//! A completion-signal pool and retirement tracker for GPU queues.
//!
//! A GPU runtime submits packets to a hardware queue and must learn when they
//! finished. On AMD GPUs that knowledge lives in *completion signals*, 64-bit
//! words the packet processor decrements when a packet completes. Signals are
//! expensive to create, so a runtime re-arms them; every re-arm is a hazard
//! (someone may still look at the previous use) and every read is a cost (a
//! device-memory signal costs an uncached PCIe read of about 1.1 us).
//!
//! [`RetiringTracker`] proves retirement from host-side knowledge — queue
//! order, barrier bits, one confirming load per batch (fence probing) —
//! re-arms in batches with one store fence, never re-arms a signal anyone else
//! still holds (it parks it and hands out a spare), lends signals to GPU
//! waiters under pins, harvests timestamps once into host memory, and never
//! blocks: a full ring answers with the use to wait for, and waits happen on
//! other threads through a [`Waiter`] without the tracker's lock.
//! Every tracker implements [`Tracker`]; the workspace's benchmarks and
//! tests show CLR's original design beside this one through it (their own
//! crate, which no runtime needs).
//!
//! The tracker is generic over a backend: [`SignalMemory`](backend::SignalMemory) (where signals live
//! and how the host touches them) and [`QueueView`](backend::QueueView) (the queue's read index).
//! `sigretire-sim` adapts its software packet processor to these traits
//! (its `backend` module, feature `tracker`): the examples below run on it,
//! and a runtime's build never includes it. The design behind all
//! of it is the repository's `docs/design.md`.
//!
//! # On a GPU
//!
//! A runtime makes the tracker over its backend's signal memory and queue
//! (`sigretire-hsa` on ROCr, `sigretire-cuda` on NVIDIA GPUs), acquires a
//! signal for each packet it publishes, and asks which uses completed. On
//! ROCr:
//!
//! ```no_run
//! use sigretire_hsa::{AqlQueue, QueueOptions, Runtime, SignalPool};
//! use sigretire_tracker::backend::HardwareQueue;
//! use sigretire_tracker::{Config, Placement, Request, RetiringTracker, Tracker, Work};
//! use std::sync::Arc;
//!
//! let runtime = Runtime::load()?; // a typed error without ROCm or a GPU
//! let device = runtime.device(0)?;
//! let queue = AqlQueue::new(&device, QueueOptions::default())?;
//! let config = Config { signals: Placement::Device, ..Config::default() };
//! let mut tracker = RetiringTracker::new(Arc::new(SignalPool::new(&device)), queue.clone(), config)?;
//! let index = queue.reserve()?;
//! let acquired = tracker.acquire(Request::packet(index).barrier(true))?;
//! queue.publish(acquired.publication, Work::Empty)?; // the packet carries the tracker's signal
//! tracker.poll();
//! println!("{:?}", tracker.query(&acquired.ticket)?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The queue layer (`sigretire-queue`) builds streams and events on it.
//!
//! # Without a GPU
//!
//! The same on the simulator, whose every step the caller runs:
//!
//! ```
//! use sigretire_tracker::backend::HardwareQueue;
//! use sigretire_tracker::{Config, Placement, Purpose, Request, Status, Tracker, Work};
//! use sigretire_sim::backend as sim_backend;
//!
//! let config = Config { signals: Placement::Device, ..Config::default() };
//! let (mut tracker, queue) = sim_backend::stepped_tracker(config).unwrap();
//!
//! // Submit 64 kernels with the barrier bit (each is a fence) and an event.
//! for _ in 0..64 {
//!     let index = queue.reserve().unwrap();
//!     let acquired = tracker.acquire(Request::packet(index).barrier(true)).unwrap();
//!     // Published as the tracker recorded it: the same barrier bit, its signal.
//!     queue.publish(acquired.publication, Work::Kernel(0)).unwrap();
//! }
//! let index = queue.reserve().unwrap();
//! let event = tracker.acquire(Request::packet(index).barrier(true).purpose(Purpose::Event)).unwrap();
//! queue.publish(event.publication, Work::Marker).unwrap();
//!
//! queue.run_until_idle(); // the "GPU" runs everything
//! tracker.poll();         // one PCIe load of the newest fence retires all 65
//! assert_eq!(tracker.query(&event.ticket).unwrap(), Status::Complete);
//! assert_eq!(tracker.stats().device().loads, 1);
//! assert_eq!(tracker.stats().retired, 65);
//! ```
//!
//! # Words
//!
//! Each of these means one thing here, and only that:
//!
//! - **signal**: a 64-bit completion word the GPU decrements; the tracker
//!   owns it for good and reuses it.
//! - **use**: one packet's (or one submission's) claim on a signal, from
//!   [`Tracker::acquire`] until it *retires*. A **ticket** names a use,
//!   never a signal.
//! - **fence**: a use whose packet carries the barrier bit: its completion
//!   proves every earlier packet of its queue completed.
//! - **generation**: the hardware queue a use ran on; a queue change starts
//!   a new one.
//! - **retire**: a use is proven done (complete or failed) and leaves the
//!   ring; its signal may then be **re-armed** (a store of its arming value).
//! - **probe**: one read of the fence the read index nominates
//!   ([`Tracker::probe`]); [`Config::probe_interval`] spaces them out.
//! - **re-arm batch**: the signals a walk re-arms with one store call and
//!   covers with one store fence (up to 32).
//! - **allocation batch**: signals created with one call to the backend
//!   ([`Config::refill_batch`], [`Config::timing_batch`]).
//! - **hold**: a counted reference to a use's signal ([`SignalRef`]) that
//!   keeps it from being re-armed; a **pin** is the hold a GPU waiter on
//!   another queue keeps until its consuming packet passed.
//! - **park**: what the tracker does with a retired use's signal that is
//!   still held: sets it aside and gives its slot a **spare** (an armed
//!   signal waiting for a slot). Never a thread going to sleep.
//! - **drain**: the queue the tracker watches is known idle
//!   ([`Tracker::note_drained`]).
//! - **harvest**: reading a timed use's timestamps from its signal, once,
//!   into host memory.
//! - **back-pressure**: the answer of an acquire at the ring's limit: which
//!   use to wait for, outside your locks, before retrying.
//!
//! (The queue layer's *submission batch*, a run of commands completed
//! together, is that crate's word, not this one's.)

#![warn(missing_docs)]

/// Whether the planted bug `$bug` (see `planted.rs`) is on, at the one place
/// that mistake would be made. A normal build has no planted bugs: the hook
/// is `false` and its branch compiles away. A test build with `--cfg
/// sigretire_planted` (`.ci/teeth`, never a build that ships; `planted.rs`
/// is not even in the published package) asks the switch there.
///
/// Exported (hidden) for the other crates whose bugs `planted.rs` lists, the
/// queue layer's and the baseline's, which take it with `#[macro_use]`.
#[doc(hidden)]
#[macro_export]
#[cfg(not(sigretire_planted))]
macro_rules! planted {
    ($bug:ident) => {
        false
    };
}
#[doc(hidden)]
#[macro_export]
#[cfg(sigretire_planted)]
macro_rules! planted {
    ($bug:ident) => {
        $crate::planted::active($crate::planted::Bug::$bug)
    };
}

pub mod backend;
mod config;
mod error;
mod failures;
mod interface;
mod keys;
#[doc(hidden)]
pub mod kit;
mod mailbox;
mod pin;
#[cfg(sigretire_planted)]
#[doc(hidden)]
pub mod planted;
mod publication;
mod reclaim;
mod registry;
mod retire;
mod retiring;
mod ring;
mod share;
mod signals;
mod stamps;
mod stats;
mod supply;
mod sync;
#[cfg(all(test, not(sigretire_loom)))]
mod test_gpu;
mod ticket;
pub mod wait;
mod wait_history;

pub use backend::{Placement, TimestampClock, Timestamps, Work};
pub use config::Config;
pub use error::{
    AcquireError, BackendError, CreateError, Error, FailSubmissionError, ForeignTicket,
    InvalidConfig, PinError, PublishError, TimedOut, TimestampsError, WaitError,
};
pub use interface::{Acquired, Census, Tracker};
pub use pin::{AttachError, Pin};
pub use retiring::RetiringTracker;
pub use share::SignalRef;
pub use stats::{Accesses, Stats};
pub use ticket::{Generation, Purpose, Request, Status, Ticket};
pub use wait::{WaitPolicy, Waiter};

/// The crate README's example, run as a doctest so it cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExample;
