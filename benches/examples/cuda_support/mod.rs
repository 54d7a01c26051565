//! Running on GPU 0, or saying why not, and a runtime stream that the
//! queue layer adopts and lets go of (the queue layer's CUDA examples have
//! the same helpers, `fences/examples/cuda_support`).

use sigretire_cuda::cudarc::driver::sys::{self, CUstream};
use sigretire_cuda::{CudaContext, Error as CudaError};
use std::process::ExitCode;
use std::sync::Arc;

pub type Failure = Box<dyn std::error::Error>;

/// Runs `run` on GPU 0. Without a driver or a device it prints the
/// library's typed refusal and succeeds; any other failure fails.
pub fn on_gpu(name: &str, run: impl FnOnce(&Arc<CudaContext>) -> Result<(), Failure>) -> ExitCode {
    let context = match CudaContext::new(0) {
        Ok(context) => context,
        // No driver or no device: the library says so with a typed error.
        Err(error @ (CudaError::LibraryMissing | CudaError::NoDevice { .. })) => {
            println!("{name}: no GPU to run on, nothing done.");
            println!("the library's answer: {error}");
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("{name}: the CUDA device cannot be used: {error}");
            return ExitCode::FAILURE;
        }
    };
    match run(&context) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{name} failed: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Destroys a runtime's stream once the queue layer lets go of it.
pub struct OwnedStream(pub CUstream);

// SAFETY: a stream handle may be used from any thread; the only use is
// `cuStreamDestroy` in `drop`.
unsafe impl Send for OwnedStream {}

impl Drop for OwnedStream {
    fn drop(&mut self) {
        // SAFETY: made by the example's runtime, destroyed once, here; the
        // queue drops its keeper after its last use of the stream, with the
        // stream's context current.
        unsafe { sys::cuStreamDestroy_v2(self.0) };
    }
}
