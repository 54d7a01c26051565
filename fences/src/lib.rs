//! The queue layer of a GPU runtime: host queues with a HIP stream's
//! semantics on top of the completion tracker. Launch work, record events,
//! make one queue wait for another's event on the GPU, query, synchronize,
//! time work between two events. A queue's lock covers submission only: a
//! CPU wait for the GPU runs after the lock is released, so no thread that
//! submits to or queries a queue ever waits behind another thread's wait.
//!
//! # On a GPU
//!
//! Each backend names the queue layer's handles for its tracker and makes a
//! device in one call (its `queue` feature): `sigretire_cuda::queue` on
//! NVIDIA GPUs (from an ordinal, or from a cudarc stream the runtime keeps:
//! `queue::adopt`), `sigretire_hsa::queue` on ROCr. On CUDA:
//!
//! ```no_run
//! use sigretire_cuda::queue::{self, DeviceConfig, QueueConfig};
//!
//! // A typed error without a driver or a GPU (`OpenError::is_no_gpu`).
//! let (device, stream) = queue::open(0, DeviceConfig::default(), QueueConfig::default())?;
//! let start: queue::Event = stream.record_event()?;
//! stream.launch_empty()?; // a runtime's own kernel: CudaContext::register_kernel
//! let stop = stream.record_event()?;
//! stop.synchronize()?;
//! println!("{:?} on the GPU", start.elapsed_to(&stop)?);
//! device.synchronize()?; // every queue of the device
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A runtime that keeps its own streams or AQL queues and launches its own
//! kernels adopts them in the backend and gets completion, events and
//! synchronize on them: the repository's `fences/examples/cuda_runtime.rs`
//! (CUDA) and `fences/examples/rocr_runtime.rs` (ROCr) walk through it.
//!
//! # Without a GPU
//!
//! With the `sim` feature, `sim` builds devices on the simulator (a software
//! AQL packet processor) and re-exports it: the same queues, for tests and
//! for trying the crate out.
//!
//! ```toml
//! [dependencies]
//! sigretire-queue = { version = "0.1", features = ["sim"] }
//! ```
//!
#![cfg_attr(feature = "sim", doc = "```")]
#![cfg_attr(feature = "sim", doc = include_str!("../examples/first_look/body.rs"))]
#![cfg_attr(feature = "sim", doc = "```")]
#![cfg_attr(
    not(feature = "sim"),
    doc = "(This build's documentation has no `sim` feature; docs.rs builds it with one, \
           where the simulator example and `sim` module appear here.)"
)]
//!
//! # What it does
//!
//! - [`HostQueue`]: packet publication (reserve a slot, acquire a signal for
//!   that AQL index, publish; under tracker back-pressure, wait outside the
//!   lock and retry), submission batches ([`BatchLimits`]), markers, query,
//!   and [`synchronize`](HostQueue::synchronize), whose CPU wait for a
//!   small batch's marker runs after the lock is released (CLR's
//!   CompleteCpuWait).
//! - [`Event`]: created on a device ([`Event::new`]) or recorded at once
//!   ([`HostQueue::record_event`]), recorded again on any queue of its
//!   device ([`HostQueue::record`]); query, synchronize (which completes the
//!   queue's batch through the event's marker), elapsed time from
//!   timestamps harvested into host memory.
//! - Cross-queue waits ([`HostQueue::wait_event`]): barrier-AND packets of at
//!   most five pinned producer signals, chained.
//! - A completion thread (the async-handler analogue) for larger batches,
//!   which never tears down a signal or a queue on its own thread.
//! - [`Device`]: the device error state, with a "do not abort" option:
//!   waits return early without completion and nobody hangs.
//! - Beyond waiting, three consumers of the same completion, served by the
//!   machinery above with no thread of their own (a per-queue watch list
//!   fired as each batch is completed): futures
//!   ([`Command::wait_async`], [`Event::wait_async`],
//!   [`HostQueue::synchronize_async`], `.await` on `&Command` / `&Event`)
//!   on any executor; callbacks ([`Command::on_complete`] and friends) run
//!   on a callback thread, never in the GPU stream; and deferred release
//!   ([`Command::release_after`], [`HostQueue::release_after_all`]): a
//!   value dropped once its batch's proof retired it, with no memory read
//!   per value.
//!
//! It is generic over any [`Tracker`] whose queue is a [`HardwareQueue`]
//! ([`QueueTracker`]). Each backend names the types for its tracker, so a
//! runtime never writes the parameter: `sim::Device`, `sim::HostQueue`,
//! `sim::Event` and `sim::Command` on the simulator (feature `sim`), and the
//! same names in `sigretire_cuda::queue` and `sigretire_hsa::queue` (their
//! `queue` features). Everything its API names is re-exported here: the
//! whole tracker crate as [`tracker`], and the tracker's types a caller
//! builds or passes on ([`Work`], [`Ticket`], [`WaitPolicy`], ...) at the
//! crate root too. One dependency besides a backend is enough.
//!
//! # Background
//!
//! The crate reproduces AMD CLR's fix "wait for a small-batch sync marker
//! after releasing lock" (CLR's CompleteCpuWait) and the queue-side parts of
//! its retiring signal tracker. The design behind it is in the repository's
//! `docs/design.md`, section 4.
//!
//! # Glossary
//!
//! - *command*: what one submission published ([`Command`]): a launch, a
//!   caller's work, a wait packet. Its *status* is a [`CommandStatus`]:
//!   what the layer settled for it (pending, complete, failed, or released
//!   by the device error state).
//! - *use status*: what a completion signal says of a use
//!   ([`tracker::Status`]: pending, complete, failed), the answer of the
//!   queries that read a signal ([`HostQueue::query`], [`Event::query`]).
//!   It stays the tracker's type, under [`tracker`], so the root has one
//!   status type.
//! - *marker*: a packet with no work that only completes, published so
//!   that a synchronize, an event or a wait has a point to complete with.
//! - *event*: a handle of one point on a queue (a recording), or of none
//!   yet ([`Event::new`]). *Recording* it makes it that point; *recording
//!   again* replaces the point; a clone is a snapshot of one recording.
//! - *kernel object*: the backend's handle of a kernel
//!   ([`HostQueue::launch`]; never 0). The *empty packet*
//!   ([`HostQueue::launch_empty`], [`Work::Empty`]) runs like a kernel
//!   that does nothing.
//! - Three configurations, one per layer: [`QueueConfig`] (a host queue:
//!   batches, waits, profiling), the tracker's [`tracker::Config`] (its
//!   ring of signals), and the simulator's `SimQueueConfig` (a simulated
//!   hardware queue: ring size and placement, agent, ordering; `sim`
//!   feature, `sim::engine::SimQueueConfig`).
//!
//! # The concurrency protocol (for model checkers)
//!
//! Every lock and atomic comes from one module (`sync`), which switches to
//! loom under `--cfg sigretire_loom` (without the `sim` feature: the simulator
//! helpers are not loom-aware). The state is:
//!
//! - the execution lock, protecting the tracker, the open batch, the newest
//!   command and the marker in flight;
//! - three lock-free command numbers: `submitted`, `taken_through` (left
//!   the open batch) and `synced_through` (left it and completed on the GPU);
//! - per marker, a `finished` flag and its outcome.
//!
//! Synchronize (small batch) is: lock; publish marker M (submitted := M);
//! take the batch (taken_through := M); in_flight := M; unlock — wait for
//! M's use with the tracker's waiter — lock; harvest timing; if the newest
//! command is still M, note the queue drained; clear in_flight; unlock —
//! complete the batch; synced_through := M. A concurrent submit is: lock;
//! publish (submitted := N > M); unlock. The property to model: a drain is
//! noted only if no command was published after M, and no command is
//! reported complete before its packet completed. `tests/loom_queue.rs`
//! models exactly this against the real code (`RUSTFLAGS="--cfg sigretire_loom" cargo
//! test -p sigretire-queue --release --test loom_queue`). The
//! completion thread's protocol ("async handler versus finish") is in
//! `completion_thread`'s docs.

#![warn(missing_docs)]

// The planted-bug hook (`planted!`, `false` outside the teeth's builds),
// shared with the tracker, whose `planted.rs` lists this crate's bugs too.
#[macro_use]
extern crate sigretire_tracker as _;

mod batch;
mod callback;
mod command;
mod completion;
mod completion_thread;
mod config;
mod cpu_wait;
mod cross_wait;
mod device;
mod device_state;
mod error;
mod event;
mod frontier;
mod future;
mod marker;
mod move_queue;
mod notify;
mod progress;
mod publish;
mod query;
mod queue;
mod recycle;
mod release;
#[cfg(feature = "sim")]
pub mod sim;
mod stats;
mod status;
mod submission;
mod sync;
mod synchronize;
mod wake;
mod watch;

pub use callback::CallbackStats;
pub use command::Command;
pub use config::{BatchLimits, DeviceConfig, MAX_WAKE_SIGNALS, QueueConfig};
pub use cross_wait::{CrossWait, MAX_DEPENDENCIES_PER_PACKET};
pub use device::{Device, DeviceStats};
pub use error::{
    ElapsedError, Error, InvalidConfig, MoveError, RecordError, SubmitError, SyncError,
    TimestampsError, WaitError, WaitEventError,
};
pub use event::{Event, EventFlags};
pub use future::{SyncFuture, WaitFuture};
pub use publish::QueueTracker;
pub use queue::HostQueue;
/// The tracker crate the queue layer runs on, whole.
pub use sigretire_tracker as tracker;
// Not the tracker's `Status`: at this crate's root a status is a
// command's ([`CommandStatus`]); a query's answer, what a signal says of a
// use, stays the tracker's (`tracker::Status`), as the glossary says.
pub use sigretire_tracker::{
    Placement, Purpose, Ticket, TimestampClock, Timestamps, Tracker, WaitPolicy, Work,
    backend::{HardwareQueue, QueueError, QueueView, SignalMemory},
};
pub use stats::QueueStats;
pub use status::CommandStatus;

/// What a runtime names beside the queue layer's handles, but the handles
/// themselves (which each backend names for its tracker): configs, flags,
/// statuses, stats, errors, futures and the work a queue takes. A backend's
/// `queue` module re-exports it whole (`sigretire_cuda::queue`,
/// `sigretire_hsa::queue`), so a runtime needs one `use` per backend.
///
/// ```
/// use sigretire_queue::prelude::*;
/// let config = QueueConfig::default();
/// assert!(config.validate().is_ok());
/// assert!(EventFlags::default().timing);
/// ```
pub mod prelude {
    /// What [`HostQueue::query`](crate::HostQueue::query) and
    /// [`Event::query`](crate::Event::query) answer.
    pub use crate::tracker::Status;
    pub use crate::{
        BatchLimits, CallbackStats, CommandStatus, CrossWait, DeviceConfig, DeviceStats,
        ElapsedError, Error, EventFlags, InvalidConfig, MoveError, QueueConfig, QueueStats,
        RecordError, SubmitError, SyncError, SyncFuture, Timestamps, TimestampsError, WaitError,
        WaitEventError, WaitFuture, WaitPolicy, Work,
    };
}

/// The crate README's example, run as a doctest so it cannot go stale.
#[cfg(all(doctest, feature = "sim"))]
#[doc = include_str!("../README.md")]
struct ReadmeExample;
