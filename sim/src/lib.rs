//! A software AQL packet processor and signal memory: the project's default
//! backend and its tests' oracle.
//!
//! On a GPU a runtime uses the ROCr backend (`sigretire-hsa`) or the CUDA
//! backend (`sigretire-cuda`); this crate is where the same tracker and
//! queue layer run without one: in tests, in CI, and to try the crates out
//! (`sigretire-queue`'s `sim` feature; this crate's `tracker` feature for the
//! tracker alone).
//!
//! The simulator models what a completion-signal tracker can observe on an
//! AMD GPU (docs/design.md sections 2 and 5), with the real ROCr layouts from
//! [`hsa_sys`]:
//!
//! - **Signal memory** ([`Sim::allocate`]): batches of 64-byte `amd_signal_t`
//!   blocks in host or device memory. Every host load, store, store fence and
//!   HDP flush is counted by placement ([`Counters`]) and costs its
//!   [`CostProfile`] duration (an MI300X device-memory load: 1.1 us).
//! - **Queues** ([`Queue`]): an AQL ring with read and write indices and a
//!   doorbell. Publication ([`Queue::write`]) checks that every signal the
//!   packet names is visible to the GPU: device-memory stores must be fenced,
//!   and flushed (HDP) when the ring is in system memory.
//! - **A packet processor**: launches in order, honours barrier bits, lets
//!   barrier packets halt the queue, completes out of order on
//!   `out_of_order` queues, advances the read index possibly before
//!   completion, decrements completion signals, writes timestamps on
//!   profiled queues, evaluates barrier-AND/OR/value packets, runs simulated
//!   [`Kernel`]s (a [`Kernel::Compute`] one does real work in a callback
//!   that sees the dispatch's kernel arguments and sizes), and fails queues
//!   on demand.
//! - **Two modes** ([`Mode`]): `Stepped`, in which the caller chooses every
//!   event and runs are reproducible, and `Threaded`, in which a processor
//!   thread drives every queue in real time.
//! - **Ground truth** ([`Queue::truth`]) and **violations**
//!   ([`Sim::violations`]): what really completed, and every host action
//!   that would be a bug on hardware (an unfenced re-arm, a re-arm while a
//!   packet or a GPU waiter still uses the signal, an unknown handle).
//!
//! # Example
//!
//! A tracker's life in miniature: re-arm a device-memory signal, publish a
//! kernel and a fence that completes it, watch the read index run ahead of
//! completion, retire the fence with one load, and check the oracle.
//!
//! ```
//! use sigretire_sim::{packets, AgentId, Blocked, Placement, Sim, SimConfig, SimQueueConfig, StepError};
//!
//! let sim = Sim::new(SimConfig::default()); // stepped, zero cost, one agent
//! let queue = sim.create_queue(SimQueueConfig { profiling: true, ..SimQueueConfig::default() })?;
//! let signals = sim.allocate(2, Placement::Device, AgentId(0))?;
//! let (kernel_done, fence_done) = (signals[0], signals[1]);
//!
//! // Arm both signals, then fence the write-combined stores before publishing.
//! sim.store(kernel_done, 1);
//! sim.store(fence_done, 1);
//! sim.store_fence();
//! let kernel = queue.submit(packets::kernel(0, Some(kernel_done)))?;
//! let fence = queue.submit(packets::with_barrier_bit(packets::barrier_and(&[], Some(fence_done))))?;
//!
//! // The kernel launches and is consumed: the read index passes it before it completes.
//! assert_eq!(queue.launch(), Ok(kernel));
//! assert_eq!(queue.advance_read_index(), Ok(1));
//! assert!(!queue.truth(kernel).unwrap().completed);
//! // The fence (barrier bit) cannot launch before the kernel completed.
//! assert_eq!(
//!     queue.launch(),
//!     Err(StepError::NotLaunchable { index: fence, reason: Blocked::BarrierBit { waiting_for: kernel } })
//! );
//! queue.run_until_idle();
//! assert!(queue.is_idle());
//!
//! // One load of the fence's signal retires both uses.
//! let before = sim.counters();
//! assert_eq!(sim.load(fence_done), 0);
//! assert_eq!(sim.counters().since(before).device.loads, 1);
//!
//! // Timestamps on a profiled queue equal the ground truth.
//! let truth = queue.truth(fence).unwrap();
//! let (start, end) = sim.load_timestamps(fence_done);
//! assert_eq!((Some(start), Some(end)), (truth.start_ts, truth.end_ts));
//! assert!(sim.violations().is_empty());
//!
//! // Re-arming without a fence before the next publication is caught.
//! sim.store(kernel_done, 1);
//! queue.submit(packets::kernel(0, Some(kernel_done)))?;
//! assert!(matches!(sim.violations()[..], [sigretire_sim::Violation::Unfenced { .. }]));
//! # Ok::<(), sigretire_sim::SimError>(())
//! ```
//!
//! # Safety of handles
//!
//! Signal blocks are owned by the simulator until its last handle is
//! dropped; handles are never freed one by one. A [`Signal`] used with
//! another simulator is detected and panics; a packet naming an address that
//! is not one of this simulator's signals is looked up in a table, never
//! dereferenced ([`Violation::UnknownSignal`]).

#[cfg(feature = "tracker")]
pub mod backend;
mod clock;
mod counters;
mod error;
mod interrupt;
mod kernel;
mod memory;
pub mod packets;
mod place;
mod processor;
mod profile;
mod queue;
mod record;
mod simulator;
mod state;
mod threaded;
mod truth;
mod wake;

pub use clock::STEPPED_TICKS_PER_EVENT;
pub use counters::{Access, Counters};
pub use error::{Blocked, SimError, StepError};
pub use hsa_sys;
pub use interrupt::{EVENT_BUDGET, InterruptStats};
pub use kernel::{Compute, HostFlag, Kernel, KernelDispatch};
pub use memory::Signal;
pub use place::{AgentId, Placement};
pub use profile::CostProfile;
pub use queue::{MAX_QUEUE_SIZE, Queue};
pub use record::FAILED_SIGNAL_VALUE;
pub use simulator::{MAX_AGENTS, Sim, SimConfig};
pub use state::{Mode, SimQueueConfig};
pub use truth::{PacketTruth, Violation};

/// The crate README's example, run as a doctest so it cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExample;
