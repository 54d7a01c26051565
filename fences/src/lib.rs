//! The queue layer: a host queue (a HIP stream) on top of the completion
//! tracker, whose execution lock covers submission only.
//!
//! This crate reproduces AMD CLR's fix "wait for a small-batch sync marker
//! after releasing lock" and the queue-side parts of the retiring
//! signal tracker work (docs/design.md section 4):
//!
//! - [`HostQueue`]: packet publication (reserve a slot, acquire a signal for
//!   that AQL index, publish; under tracker back-pressure, wait outside the
//!   lock and retry), submission batches ([`BatchLimits`]), markers, query,
//!   and [`synchronize`](HostQueue::synchronize), whose CPU wait for a
//!   small batch's marker runs after the lock is released (CLR's
//!   CompleteCpuWait).
//! - [`Event`]: record, query, synchronize (which completes the queue's
//!   batch through the event's marker), elapsed time from timestamps
//!   harvested into host memory.
//! - Cross-queue waits ([`HostQueue::wait_event`]): barrier-AND packets of at
//!   most five pinned producer signals, chained.
//! - A completion thread (the async-handler analogue) for larger batches,
//!   which never tears down a signal or a queue on its own thread.
//! - [`Device`]: the device error state, with CLR's "do not abort" option:
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
//! ([`QueueTracker`]). Everything its API names is re-exported here: the
//! tracker's types at the crate root and the whole tracker crate as
//! [`tracker`]; with the `sim` feature, the `sim` module builds devices
//! on the simulator and re-exports it. One dependency is enough:
//!
//! ```toml
//! [dependencies]
//! sigretire-queue = { version = "0.1", features = ["sim"] }
//! ```
//!
//! The design behind it is in the repository's `docs/design.md`.
//!
//! ```
#![cfg_attr(feature = "sim", doc = include_str!("../examples/first_look/body.rs"))]
#![cfg_attr(
    not(feature = "sim"),
    doc = "// (the example needs the `sim` feature)\nfn main() {}"
)]
//! ```
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
    ElapsedError, Error, InvalidConfig, MoveError, SubmitError, SyncError, TimestampsError,
    WaitError, WaitEventError,
};
pub use event::{Event, EventFlags};
pub use future::{SyncFuture, WaitFuture};
pub use publish::QueueTracker;
pub use queue::HostQueue;
/// The tracker crate the queue layer runs on, whole.
pub use sigretire_tracker as tracker;
pub use sigretire_tracker::{
    Placement, Purpose, Status, Ticket, TimestampClock, Timestamps, Tracker, WaitPolicy, Work,
    backend::{HardwareQueue, QueueError, QueueView, SignalMemory},
};
pub use stats::QueueStats;
pub use status::CommandStatus;

/// The crate README's example, run as a doctest so it cannot go stale.
#[cfg(all(doctest, feature = "sim"))]
#[doc = include_str!("../README.md")]
struct ReadmeExample;
