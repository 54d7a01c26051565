//! The tracker on NVIDIA GPUs, through CUDA's driver API.
//!
//! A runtime makes a context on a GPU and a tracker over a stream of it;
//! packets are kernel launches, each completing its own signal:
//!
//! ```no_run
//! use sigretire_cuda::CudaContext;
//! use sigretire_tracker::backend::HardwareQueue;
//! use sigretire_tracker::{Config, Purpose, Request, Status, Tracker, Work};
//!
//! let context = CudaContext::new(0)?;
//! println!("{}", context.report());
//! let (mut tracker, queue) = context.retiring_tracker(Config::default())?;
//!
//! // 64 empty kernels, each completing its own signal, then an event.
//! for _ in 0..64 {
//!     let index = queue.reserve().unwrap();
//!     let acquired = tracker.acquire(Request::packet(index).barrier(true)).unwrap();
//!     queue.publish(acquired.publication, Work::Empty).unwrap();
//! }
//! let index = queue.reserve().unwrap();
//! let event = tracker
//!     .acquire(Request::packet(index).barrier(true).purpose(Purpose::Event).timed(true))
//!     .unwrap();
//! queue.publish(event.publication, Work::Empty).unwrap();
//!
//! queue.synchronize()?;
//! tracker.poll(); // one host load of the newest signal retires all 65
//! assert_eq!(tracker.query(&event.ticket).unwrap(), Status::Complete);
//! assert_eq!(tracker.stats().host().loads, 1);
//! let stamps = tracker.timestamps(&event.ticket).unwrap().unwrap();
//! println!("the event's kernel ran for {} ns", stamps.ticks());
//! # Ok::<(), sigretire_cuda::Error>(())
//! ```
//!
//! The queue layer (`sigretire-queue`) builds streams and events on such a
//! tracker; without a GPU, the same tracker runs on the simulator
//! (`sigretire-sim`), where the tracker's and the queue layer's examples run.
//!
//! # How it works
//!
//! A completion signal here is a 64-bit word in pinned, device-mapped host
//! memory ([`CudaMemory`]). A use's work runs on a CUDA stream
//! ([`CudaQueue`]); after it, the stream writes 0 into the signal with a
//! stream memory operation (`cuStreamWriteValue64`, batched with
//! `cuStreamBatchMemOp`), or the empty-work kernel writes it itself as its
//! last act (one launch instead of a launch and a driver call); another
//! stream waits for it on the GPU with
//! `cuStreamWaitValue64`. A stream runs in order, so every use is a fence and
//! one host load of the newest completed signal retires every use before it
//! (docs/design.md sections 3 and 5). The tracker's read index is a progress word
//! the stream writes after each completion; it only nominates, and the
//! tracker confirms with one load.
//!
//! A CUDA runtime that launches its own work (its kernels, cuBLAS, copies)
//! keeps its own stream and adopts it ([`CudaContext::adopt_stream`],
//! [`CudaContext::adopt_cudarc_stream`]; a runtime on cudarc builds this
//! library's context from its own with [`CudaContext::from_cudarc`]): it
//! publishes a
//! [`Work::Marker`](sigretire_tracker::Work::Marker) after its launches, and
//! the library gives it completion, events and synchronize on that stream,
//! never destroying it.
//!
//! Empty work is a real kernel launch: a tiny kernel written in PTX and
//! JIT-compiled by the driver ([`kernel`]), so the build needs no CUDA
//! toolkit, which writes the GPU's `%globaltimer` into its signal's
//! timestamps. A runtime's own kernels become tracked, timed work the same
//! way: registered with [`CudaContext::register_kernel`], each takes its
//! use's signal block first and may stamp it.
//!
//! `libcuda` is loaded at run time through cudarc (`dynamic-loading`): the
//! crate builds and its CPU-side tests run on machines without a GPU, and
//! every constructor returns a typed [`Error`] there
//! ([`Error::LibraryMissing`], [`Error::NoDevice`],
//! [`Error::MissingCapability`], ...) instead of panicking, as cudarc would.
//!
//! Layout, one idea per module, each importing only modules below it (the
//! context is a leaf: queues, memory, streams and events hold an
//! `Arc` of it, and what builds them on a context lives with them):
//! `version` ([`CudaVersion`]), [`error`](Error) (the error enum), `driver`
//! (library guard, versions the driver reports), `device` (capabilities),
//! `signal` (a signal's block and addresses), `pinned` (pinned allocations
//! and their lifetime), `batch` (carving signals out of batches), `drain`
//! (the fences the context waits for before freeing what adopted streams
//! may still write), `wake` (wake signals and their mailbox), [`kernel`]
//! (the PTX and registered launches), `context` ([`CudaContext`]: primary
//! context, arena, registry), `memory` (the
//! [`SignalMemory`](sigretire_tracker::backend::SignalMemory) implementation), `ops`
//! (the memory operations a publication enqueues), `order` (index-ordered
//! publication), `stream` (an owned or adopted stream), `relay` (where
//! wakes' host functions run), `hardware_queue` (the
//! [`HardwareQueue`](sigretire_tracker::backend::HardwareQueue), and the queues a
//! context makes), `trackers` (a tracker and its queue in one call),
//! `report` ([`SystemReport`]: what a measurement was taken on), and, with
//! the `queue` feature, `queue` (the queue layer's handles on CUDA, and a
//! device from a cudarc stream in one call). CUDA's own events, which the
//! benchmarks compare with, are the benchmarks' own.
//!
//! **The queue layer.** With the `queue` feature, `sigretire_cuda::queue`
//! names the queue layer's types on this backend (`queue::Device`,
//! `queue::HostQueue`, `queue::Event`, `queue::Command`: aliases, no
//! generic parameter to write, nothing added to the hot path) and makes
//! them in one call, from a cudarc stream (`queue::adopt`) or from a device
//! ordinal (`queue::open`).
//!
//! **CUDA versions.** The program that links this crate picks the CUDA
//! headers cudarc binds, with one of cudarc's `cuda-*` features; this crate
//! passes its own `cuda-*` features on to cudarc (`cuda-12080` by default)
//! and needs nothing newer than CUDA 12.0's API. A program that depends on
//! cudarc itself with another version turns the default off
//! (`default-features = false`) and enables the matching feature here, or
//! none (its own cudarc feature then applies to both).

#![warn(missing_docs)]

mod batch;
mod context;
mod device;
mod drain;
mod driver;
mod error;
mod hardware_queue;
pub mod kernel;
mod memory;
mod ops;
mod order;
mod pinned;
#[cfg(feature = "queue")]
pub mod queue;
mod relay;
mod report;
mod signal;
mod stream;
mod trackers;
mod version;
mod wake;

/// The cudarc this crate is built on, whose types its API names (`CUstream`,
/// `CUresult`, `CudaStream`): a runtime that makes its own driver calls
/// (the streams it adopts, its launches) can use the same version.
pub use cudarc;

pub use context::CudaContext;
pub use device::{DeviceInfo, device_count};
pub use driver::{driver_version, kernel_module_version, library_present};
pub use error::{Error, Result, check};
pub use hardware_queue::{CudaQueue, QueueFailure};
pub use kernel::{KernelHandle, KernelLaunch};
pub use memory::CudaMemory;
pub use report::SystemReport;
pub use signal::{CudaSignal, SignalBlock};
pub use version::CudaVersion;
pub use wake::WakeStats;

/// The crate README's examples, run as doctests so they cannot go stale.
#[cfg(all(doctest, feature = "queue"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
