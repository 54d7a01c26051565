//! A ROCr stand-in: ROCr's C functions, as the ROCr backend uses them, over
//! the project's software packet processor (the `sim` crate).
//!
//! No AMD GPU is available to the project, yet the backend's code must run
//! for real: its loading (`dlopen` and symbol resolution), its agent and
//! pool discovery, its batch allocation and access grants, its packet
//! publication and doorbells, its waits and its teardown. Built as a
//! `cdylib`, this crate is a shared library that exports the functions of
//! `libhsa-runtime64.so.1` the backend resolves (every symbol of
//! `hsa_sys::HsaApi`), with their exact C signatures and the semantics of
//! ROCr 5.2.3's headers, so the backend loads it by path in place of ROCr
//! and cannot tell the difference where it matters:
//!
//! - `hsa_signal_t.handle` is the address of a real 64-byte `amd_signal_t`
//!   block, and `hsa_queue_t*` the address of a real `amd_queue_t` block
//!   whose `base_address` ring the application writes packets into;
//! - memory pools hand out blocks that are the simulator's signal batches,
//!   so signals a backend carves out of them are completed by the simulated
//!   packet processor, in VRAM or system memory as the pool says;
//! - the doorbell hands the ring's published packets, in order, to the
//!   simulator's queue (see `queue.rs`), whose read index, timestamps and
//!   failures the application then observes through ROCr's calls.
//!
//! As a `rlib`, the crate is the test side: [`Standin`] loads a private copy
//! of the library (its own runtime, its own simulator), configures the
//! machine ([`Config`]: GPUs, large BAR, pools, HDP registers, threaded or
//! stepped), and drives and inspects it through `rocr_standin_*` control
//! functions: stepping queues ([`QueueControl`]), ground truth ([`Truth`]),
//! call counts of every ROCr function, failure injection (exhausted pools,
//! any status-returning function failing on chosen calls
//! ([`Standin::fail_calls`]), answers a real ROCr would not give
//! ([`Malformed`])), and violations —
//! host actions that ROCr or the hardware would not forgive (a re-armed
//! signal in flight, memory freed under a pending packet, a raw block passed
//! to ROCr's signal calls, a missing access grant), checked when packets are
//! fetched and memory is released.
//!
//! ```
//! use sigretire_rocr_standin::{Config, Standin};
//!
//! let standin = Standin::new(Config::stepped())?;
//! let api = hsa_sys::HsaApi::load_from(standin.library_path())?;
//! assert_eq!(api.status_string(hsa_sys::HSA_STATUS_ERROR_OUT_OF_RESOURCES).is_some(), true);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What only real hardware can show
//!
//! The stand-in runs the backend's code, not the GPU's physics:
//!
//! - **Write combining and store fences.** Host stores to VRAM signals are
//!   plain stores to host memory here; an `sfence` is executed but its
//!   absence could not be observed. (The backend counts its fences, and the
//!   tracker's own tests prove the fence discipline against the simulator.)
//! - **HDP flushes.** The registers `HSA_AMD_AGENT_INFO_HDP_FLUSH` returns are
//!   ordinary memory: a test sees that the backend wrote 1 to
//!   `HDP_MEM_FLUSH_CNTL`, not that any cache was flushed.
//! - **PCIe costs.** With `Config::mi300x_costs` the simulator charges its
//!   profile for accesses made through ROCr calls; the backend's direct loads
//!   and stores of its own signals cost what host memory costs.
//! - **Interrupt signals and sleeping waits.** ROCr's own signals are
//!   interrupt signals (the simulator's event mailboxes) unless made with
//!   `HSA_AMD_SIGNAL_AMD_GPU_ONLY`, each holding one of a budget of 4094
//!   events until it is destroyed, past which they poll as ROCr's silently
//!   do; `hsa_signal_wait_scacquire` with
//!   `HSA_WAIT_STATE_BLOCKED` sleeps on one until a write wakes it (any
//!   other wait polls). The interrupt's own latency in the kernel is not
//!   modelled: the sleeper wakes as soon as the host thread is scheduled.
//!   `hsa_amd_signal_async_handler` is not modelled (it answers
//!   `HSA_STATUS_ERROR`).
//! - **Clock calibration.** The GPU-to-system tick map is exact and linear;
//!   ROCr interpolates between calibrated clock pairs and drifts slightly.
//! - **Queue preemption.** `hsa_queue_destroy` stops the simulated processor
//!   at once; a real one drains or preempts in-flight work in the driver.
//! - **Faults.** A bad pointer in a packet is a recorded violation here, not
//!   a GPU page fault that kills the queue; failures are injected
//!   ([`QueueControl::fail`]) rather than caused.

#![warn(missing_docs)]

mod abi;
mod checker;
mod client;
mod control;
mod exports;
mod inject;
mod machine;
mod memory;
mod queue;
mod state;
mod violation;

pub use abi::{
    AllocationInfo, Census, Config, InterruptCounters, KernelKind, Malformed, PoolKind,
    SimCounters, StepOp, StepStatus, Truth,
};
pub use client::{
    Flag, Kernel, LIBRARY_ENV, LIBRARY_FILE, QueueControl, Standin, StandinError, library,
};
pub use exports::{EXPORTS, Export};
pub use violation::{Violation, ViolationKind};
