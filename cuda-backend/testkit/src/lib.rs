//! Kernels and host flags for testing and benchmarking `sigretire-cuda`
//! on a GPU. Not published: the backend's own tests (a path-only
//! dev-dependency) and the benchmarks use it.
//!
//! Everything here goes through the backend's public API: the kit loads a
//! PTX module of its own into the context (`module`), registers its kernels
//! as tracked work with [`CudaContext::register_kernel`] (each takes the
//! use's signal block first and stamps it), and keeps its host flags in
//! the backend's own pinned signal memory ([`CudaMemory`]).
//!
//! - [`busy_kernel`]: work of a known duration (spins on `%globaltimer`);
//! - [`HostFlag`] and [`spin_kernel`]: a kernel that runs until the host
//!   releases a flag, or gives up after a timeout and says so in the flag
//!   (the queue layer's regression test, docs/design.md section 4);
//! - [`launch_flag_writer`]: untracked work whose only effect is a write of
//!   a flag, the floor every completion mechanism pays (benchmarks).
//!
//! Layout: `module` (the PTX, loaded once per context), `flag` (host
//! flags), `kernels` (registering and launching the kit's kernels).
//!
//! ```no_run
//! use std::time::Duration;
//! use sigretire_cuda::CudaContext;
//! use sigretire_cuda_testkit::{FlagState, HostFlag, spin_kernel};
//! use sigretire_tracker::backend::{HardwareQueue, Publication, QueueView};
//!
//! let context = CudaContext::new(0)?;
//! let flag = HostFlag::new(&context).unwrap();
//! let spin = spin_kernel(&context, &flag, Duration::from_secs(5))?;
//! let queue = context.create_queue()?;
//! let index = queue.reserve().unwrap();
//! queue.publish(Publication::unsignalled(index, true), spin.work()).unwrap();
//! assert_eq!(queue.read_index(), 0); // still spinning
//! flag.release();
//! queue.synchronize()?;
//! assert_eq!(flag.state(), FlagState::Released);
//! # Ok::<(), sigretire_cuda::Error>(())
//! ```
//!
//! [`CudaContext::register_kernel`]: sigretire_cuda::CudaContext::register_kernel
//! [`CudaMemory`]: sigretire_cuda::CudaMemory

mod flag;
mod kernels;
mod module;

pub use flag::{FlagState, HostFlag};
pub use kernels::{busy_kernel, launch_flag_writer, spin_kernel};
