//! What the CUDA examples share: running on GPU 0 through cudarc, or saying
//! why not.

use sigretire_cuda::Error as CudaError;
use sigretire_cuda::cudarc::driver::CudaContext as CudarcContext;
use std::process::ExitCode;
use std::sync::Arc;

pub type Failure = Box<dyn std::error::Error>;

/// Runs `run` on cudarc's context of GPU 0. Without a driver or a device it
/// prints the library's typed refusal and succeeds; any other failure
/// fails. The library answers first: cudarc panics where there is no
/// driver.
pub fn on_gpu(
    name: &str,
    run: impl FnOnce(&Arc<CudarcContext>) -> Result<(), Failure>,
) -> ExitCode {
    let no_gpu = |error: CudaError| {
        println!("{name}: no GPU to run on, nothing done.");
        println!("the library's answer: {error}");
        ExitCode::SUCCESS
    };
    match sigretire_cuda::device_count() {
        Ok(0) => {
            return no_gpu(CudaError::NoDevice {
                requested: 0,
                found: 0,
            });
        }
        Ok(_) => {}
        // No driver: the library says so with a typed error.
        Err(error @ (CudaError::LibraryMissing | CudaError::NoDevice { .. })) => {
            return no_gpu(error);
        }
        Err(error) => {
            eprintln!("{name}: the CUDA driver cannot be used: {error}");
            return ExitCode::FAILURE;
        }
    }
    let result = CudarcContext::new(0)
        .map_err(Failure::from)
        .and_then(|context| run(&context));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{name} failed: {error}");
            ExitCode::FAILURE
        }
    }
}
