//! What both GPU test binaries need: the device, or a visible skip where
//! there is none (as in CI), so `cargo test --workspace` stays green.

use sigretire_cuda::{CudaContext, Error};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

/// The longest any wait in these tests may take: far above what the GPU
/// needs, so a timeout means a bug, never a hang.
pub const WAIT: Duration = Duration::from_secs(10);

/// The device, or `None` (said once on stderr) where there is no driver or
/// no device. `suite` names the tests that skip; a driver that is present
/// but unusable fails the test instead.
pub fn gpu(suite: &str) -> Option<Arc<CudaContext>> {
    match CudaContext::new(0) {
        Ok(context) => Some(context),
        Err(error @ (Error::LibraryMissing | Error::NoDevice { .. })) => {
            // Straight to the stderr handle, past the harness's capture, once.
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                let _ = writeln!(
                    std::io::stderr(),
                    "cuda-backend {suite} tests SKIPPED (they pass vacuously here): {error}"
                );
            });
            None
        }
        Err(error) => panic!("{suite}: a CUDA driver is present but unusable: {error}"),
    }
}
