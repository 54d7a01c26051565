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
//! [`BaselineTracker`] is CLR's original design behind the same [`Tracker`]
//! interface, so every benchmark shows both.
//!
//! The tracker is generic over a backend: [`SignalMemory`] (where signals live
//! and how the host touches them) and [`QueueView`] (the queue's read index).
//! [`sim_backend`] adapts the software packet processor of the `sim` crate.
//!
//! ```
//! use tracker::{Config, Placement, Purpose, Request, Status, Tracker, sim_backend};
//!
//! let config = Config { signals: Placement::Device, ..Config::default() };
//! let (mut tracker, queue) = sim_backend::stepped_tracker(config).unwrap();
//!
//! // Submit 64 kernels with the barrier bit (each is a fence) and an event.
//! for _ in 0..64 {
//!     let index = queue.reserve().unwrap();
//!     let acquired = tracker.acquire(Request::packet(index).barrier(true)).unwrap();
//!     sim_backend::submit_barrier(&queue, index, acquired.signal);
//! }
//! let index = queue.reserve().unwrap();
//! let event = tracker.acquire(Request::packet(index).barrier(true).purpose(Purpose::Event)).unwrap();
//! sim_backend::submit_barrier(&queue, index, event.signal);
//!
//! queue.run_until_idle(); // the "GPU" runs everything
//! tracker.poll();         // one PCIe load of the newest fence retires all 65
//! assert_eq!(tracker.query(&event.ticket).unwrap(), Status::Complete);
//! assert_eq!(tracker.stats().device().loads, 1);
//! assert_eq!(tracker.stats().retired, 65);
//! ```

#![warn(missing_docs)]

mod backend;
mod baseline;
mod config;
mod error;
mod host_memory;
mod interface;
mod pin;
#[cfg(feature = "planted-bugs")]
pub mod planted;
#[cfg(not(feature = "planted-bugs"))]
mod planted;
mod reclaim;
mod retire;
mod retiring;
mod ring;
mod share;
#[cfg(feature = "sim")]
pub mod sim_backend;
mod stamps;
mod stats;
mod sync;
mod ticket;
mod timing;
mod wait;

pub use backend::{
    AllocError, HardwareQueue, Placement, QueueError, QueueView, SignalMemory, TimestampClock,
    Timestamps, Work,
};
pub use baseline::BaselineTracker;
pub use config::Config;
pub use error::Error;
pub use host_memory::HostMemory;
pub use interface::{Acquired, Census, Tracker};
pub use pin::{AttachError, Pin};
pub use retiring::RetiringTracker;
pub use share::SignalRef;
pub use stats::{Accesses, Stats};
pub use ticket::{Generation, Purpose, Request, Status, Ticket};
pub use wait::{WaitPolicy, Waiter};

/// The README's example, run as a doctest so it cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeExample;
