//! The queue layer: a host queue (a HIP stream) on top of the completion
//! tracker, whose execution lock covers submission only.
//!
//! This crate reproduces AMD CLR's fix "wait for a small-batch sync marker
//! after releasing lock" (#13532) and the queue-side parts of the retiring
//! signal tracker work (DESIGN.md section 4):
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
//!
//! It is generic over any [`tracker::Tracker`] whose queue is a
//! [`tracker::HardwareQueue`] ([`QueueTracker`]); [`sim`] builds devices on
//! the simulator.
//!
//! ```
//! use fences::sim::SimPlatform;
//! use fences::{CommandStatus, DeviceConfig, QueueConfig};
//! use tracker::Status;
//!
//! let platform = SimPlatform::stepped();
//! let device = platform.device(DeviceConfig::default(), QueueConfig::default())?;
//! let producer = platform.create_queue(&device, QueueConfig::default())?;
//! let consumer = device.default_queue();
//!
//! let work = producer.launch(0)?;
//! let done = producer.record_event()?;
//! let wait = consumer.wait_event(&done)?; // a barrier-AND on the consumer, pinned
//! assert_eq!(wait.dependencies(), 1);
//! let after = consumer.launch(0)?;
//!
//! // Synchronize the consumer while the (stepped) GPU runs.
//! platform.run_while(|| consumer.synchronize())?;
//! assert_eq!(after.status(), CommandStatus::Complete);
//! assert_eq!(work.status(), CommandStatus::Complete);
//! assert_eq!(done.query(), Status::Complete);
//! assert!(platform.sim().violations().is_empty());
//! # Ok::<(), fences::Error>(())
//! ```
//!
//! # The concurrency protocol (for model checkers)
//!
//! Every lock and atomic comes from one module (`sync`), which switches to
//! loom under `--cfg loom` (build with `--no-default-features`: the
//! simulator helpers are not loom-aware). The state is:
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
//! models exactly this against the real code (`RUSTFLAGS="--cfg loom" cargo
//! test -p fences --no-default-features --release --test loom_queue`). The
//! completion thread's protocol ("async handler versus finish") is in
//! `handler`'s docs.

#![warn(missing_docs)]

mod batch;
mod config;
mod cpu_wait;
mod device;
mod error;
mod event;
mod handler;
mod marker;
mod publish;
mod queue;
#[cfg(feature = "sim")]
pub mod sim;
mod stats;
mod sync;
mod wait;

pub use batch::{Command, CommandStatus};
pub use config::{BatchLimits, DeviceConfig, QueueConfig, SyncWait};
pub use device::{Device, DeviceStats};
pub use error::Error;
pub use event::Event;
pub use queue::{HostQueue, QueueTracker};
pub use stats::QueueStats;
pub use wait::{CrossWait, MAX_DEPENDENCIES_PER_PACKET};
