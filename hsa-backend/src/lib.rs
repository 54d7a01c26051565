//! The ROCr backend of the completion-signal tracker: AMD GPUs through the
//! HSA runtime, loaded at run time.
//!
//! `hsa-sys` is the raw layer (ROCr's C ABI and a table of its functions);
//! this crate is the safe layer above it and owns every invariant the raw
//! calls leave to the caller: what is initialised, what is alive, which
//! memory the GPU may still touch, what the host must do before the GPU sees
//! its stores.
//!
//! # On an AMD GPU
//!
//! A runtime loads ROCr, takes a GPU, and makes a tracker over an AQL queue
//! and a pool of completion signals in VRAM:
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
//! let signals = Arc::new(SignalPool::new(&device));
//! let config = Config { signals: Placement::Device, ..Config::default() };
//! let mut tracker = RetiringTracker::new(signals, queue.clone(), config)?;
//! let index = queue.reserve()?;
//! let acquired = tracker.acquire(Request::packet(index).barrier(true))?;
//! queue.publish(acquired.publication, Work::Empty)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `AqlQueue::adopt` takes a runtime's own `hsa_queue_t` instead; the queue
//! layer (`sigretire-queue`) builds streams and events on such a tracker.
//!
//! # What it does
//!
//! - [`Runtime`] loads `libhsa-runtime64.so.1`, runs `hsa_init` under a
//!   deadline and finds the agents; a missing library, a missing symbol, a
//!   failed `hsa_init` (with ROCr's status text) and a machine without a GPU
//!   are each an [`Error`], never a panic or a hang.
//! - [`Agent`] is a GPU agent (ROCr's word for a GPU): its VRAM pool,
//!   whether the host reaches it through a large BAR, its system-memory
//!   pool, its HDP flush registers.
//! - [`SignalPool`] is the tracker's [`SignalMemory`](sigretire_tracker::backend::SignalMemory):
//!   signals built in batches (one allocation of N `amd_signal_t` blocks in
//!   VRAM, falling back to system memory, then to ROCr's own signals), armed
//!   with direct atomic stores, made visible with a store fence and, where
//!   needed, an HDP flush ([`visibility`](store_fence)), waited for by
//!   polling or by ROCr.
//! - [`AqlQueue`] is the tracker's [`QueueView`](sigretire_tracker::backend::QueueView) and the
//!   queue layer's [`HardwareQueue`](sigretire_tracker::backend::HardwareQueue): a profiled AQL
//!   queue that publishes packets in HSA order and rings its doorbell.
//! - With the `queue` feature, `sigretire_hsa::queue` names the queue
//!   layer's types on this backend (`queue::Device`, `queue::HostQueue`,
//!   `queue::Event`, `queue::Command`: aliases, no generic parameter to
//!   write) and makes a device on an [`Agent`] in one call (`queue::open`).
//! - Teardown never frees memory the GPU may still touch, and holds it no
//!   longer than a packet may: a dropped pool's memory is released at once
//!   if no packet named its signals, else once every queue whose packets
//!   did is destroyed or has completed a fence after them (each queue
//!   records what its packets name as it publishes them); a queue drains
//!   within a bound before it is destroyed.
//!
//! # Without a GPU
//!
//! No GPU is needed to run any of it: the `rocr-standin` crate builds a
//! library that exports ROCr's functions over the project's simulator, and
//! every example and test here loads it in place of ROCr. On a machine with
//! ROCm, replace `Runtime::load_from(library)` with [`Runtime::load`].
//!
//! ```
//! # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
//! # let library = standin.library_path();
//! use sigretire_hsa::{AqlQueue, QueueOptions, Runtime, SignalPool};
//! use std::{sync::Arc, time::Duration};
//! use sigretire_tracker::backend::HardwareQueue;
//! use sigretire_tracker::{Config, Placement, Request, RetiringTracker, Status, Tracker, WaitPolicy, Work};
//!
//! let runtime = Runtime::load_from(library)?;
//! let device = runtime.device(0)?;
//! let queue = AqlQueue::new(&device, QueueOptions::default())?;
//! let signals = Arc::new(SignalPool::new(&device));
//! let config = Config { signals: Placement::Device, ..Config::default() };
//! let mut tracker = RetiringTracker::new(signals, queue.clone(), config)?;
//!
//! // One packet with the barrier bit (a fence): the tracker hands out an
//! // armed VRAM signal whose arming the GPU can already see.
//! let index = queue.reserve()?;
//! let acquired = tracker.acquire(Request::packet(index).barrier(true))?;
//! assert_eq!(acquired.placement, Placement::Device);
//! queue.publish(acquired.publication, Work::Empty)?;
//!
//! // Another thread could wait, without the tracker's lock.
//! let status = tracker.waiter().wait(&acquired.ticket, Duration::from_secs(10), WaitPolicy::spin())?;
//! assert_eq!(status, Status::Complete);
//! # drop((tracker, queue));
//! # standin.assert_no_violations();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

//!
//! # What runs without a GPU, and what only a GPU shows
//!
//! Against the stand-in, the tests run every ROCr call the backend makes
//! (`hsa_init`/`hsa_shut_down`, agent and pool iteration and attributes,
//! `hsa_amd_memory_pool_allocate`/`_free`, `hsa_amd_agents_allow_access`,
//! `hsa_amd_signal_create`, `hsa_signal_destroy`, ROCr's signal loads,
//! stores, silent stores and waits, `hsa_queue_create`/`_destroy`, the read
//! and write indices, the doorbell, `hsa_amd_profiling_set_profiler_enabled`,
//! `hsa_amd_profiling_get_dispatch_time`,
//! `hsa_amd_profiling_convert_tick_to_system_domain`, `hsa_system_get_info`,
//! `hsa_status_string`) and the code paths above them, failure paths
//! included: each error of [`Error`]; failures of the ROCr calls behind
//! initialisation, discovery, queue creation and profiling, allocation and
//! access grants, drains and timestamps, each cleaned up after (the stand-in
//! injects them: `Standin::fail_calls`); answers a real ROCr would not give
//! (a null or ring-less queue, a null or misaligned block, no CPU agent:
//! `Standin::malform`); pool exhaustion and every fallback; queue errors,
//! during a drain too; hung queues at teardown. Against Debian's real ROCr,
//! loading and the failing `hsa_init` of a machine without a GPU.
//!
//! Not run by any test: `hsa_init` on the caller's thread when no thread can
//! be spawned to bound it, and `hsa_signal_wait_scacquire` returning before
//! its condition holds (allowed by HSA; the stand-in's waits never do).
//!
//! Only hardware shows: that an `sfence` really drains write-combined VRAM
//! stores and an HDP flush really makes them visible (the stand-in sees the
//! register written, not a cache flushed); PCIe costs of the backend's own
//! loads; interrupt signals sleeping in `hsa_signal_wait_scacquire`; ROCr's
//! clock calibration; the driver's preemption of a destroyed busy queue; and
//! whether ROCr placed a ring in VRAM ([`QueueOptions::ring_in_device_memory`]
//! must be told).
//!

#![warn(missing_docs)]

mod agent;
mod aql_queue;
mod error;
mod memory;
pub mod packet;
#[cfg(feature = "queue")]
pub mod queue;
mod runtime;
mod teardown;
mod timing;
mod visibility;
mod wait;

pub use agent::{Agent, MemoryPool};
pub use aql_queue::{AdoptOptions, AqlQueue, QueueOptions};
pub use error::Error;
pub use memory::{Batch, Counters, HsaSignal, SignalPool};
pub use runtime::{InitOptions, Runtime};
pub use timing::system_duration;
pub use visibility::{HdpFlush, store_fence};
pub use wait::poll_until_change;

/// The crate README's examples, run as doctests so they cannot go stale.
#[cfg(all(doctest, feature = "queue"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
