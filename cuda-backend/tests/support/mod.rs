//! What both GPU test binaries need: the device, or a visible skip where
//! there is none (as in CI), so `cargo test --workspace` stays green.

use sigretire_cuda::cudarc::driver::sys::{self, CUevent, CUresult, CUstream};
use sigretire_cuda::{CudaContext, CudaQueue, Error, check, cudarc};
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

/// A CUDA event of the runtime's, recorded with raw driver calls (CUDA's
/// own completion tracking, which the tests measure against; the
/// benchmarks have their own). Used by two of the test binaries.
#[allow(dead_code)]
pub struct RawEvent {
    context: Arc<CudaContext>,
    raw: CUevent,
}

#[allow(dead_code)]
impl RawEvent {
    pub fn new(context: &Arc<CudaContext>) -> Self {
        context.bind().unwrap();
        let mut raw = core::ptr::null_mut();
        // SAFETY: the context is bound; `raw` is a live local.
        check("cuEventCreate", unsafe {
            sys::cuEventCreate(&mut raw, sys::CUevent_flags::CU_EVENT_DEFAULT as u32)
        })
        .unwrap();
        Self {
            context: context.clone(),
            raw,
        }
    }

    pub fn record(&self, stream: CUstream) {
        self.context.bind().unwrap();
        // SAFETY: the event and the stream are live, of the bound context.
        check("cuEventRecord", unsafe {
            sys::cuEventRecord(self.raw, stream)
        })
        .unwrap();
    }

    /// Makes `queue`'s stream wait on the GPU for the latest record (work
    /// the library did not publish: announced as foreign).
    pub fn make_wait(&self, queue: &CudaQueue) {
        // The stream's context (another device's, for a cross-device wait).
        queue.context().bind().unwrap();
        queue.note_foreign_work();
        // SAFETY: the event and the stream are live; the stream's context
        // is bound.
        check("cuStreamWaitEvent", unsafe {
            sys::cuStreamWaitEvent(queue.as_raw(), self.raw, 0)
        })
        .unwrap();
    }

    /// `cuEventQuery`'s answer, as the driver gives it.
    pub fn query(&self) -> CUresult {
        self.context.bind().unwrap();
        // SAFETY: the event is live, of the bound context.
        unsafe { sys::cuEventQuery(self.raw) }
    }

    /// Waits on the host until the latest record completed.
    pub fn synchronize(&self) {
        self.context.bind().unwrap();
        // SAFETY: the event is live, of the bound context.
        check("cuEventSynchronize", unsafe {
            sys::cuEventSynchronize(self.raw)
        })
        .unwrap();
    }

    /// GPU time from `start` to `self` (`cuEventElapsedTime`).
    pub fn since(&self, start: &RawEvent) -> Duration {
        self.context.bind().unwrap();
        // cudarc's wrapper: the entry point of the build's CUDA headers
        // (`cuEventElapsedTime`, only `_v2` from CUDA 13.0 on).
        // SAFETY: both events are live, recorded and complete (the caller's).
        let ms = unsafe { cudarc::driver::result::event::elapsed(start.raw, self.raw) }
            .unwrap_or_else(|error| panic!("cuEventElapsedTime: {error:?}"));
        Duration::from_secs_f64(f64::from(ms) / 1e3)
    }
}

impl Drop for RawEvent {
    fn drop(&mut self) {
        if self.context.bind().is_ok() {
            // SAFETY: created in `new`, destroyed once.
            unsafe { sys::cuEventDestroy_v2(self.raw) };
        }
    }
}
