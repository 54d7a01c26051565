//! NVIDIA GPUs through the CUDA driver (`cuda-backend`), with CUDA's own
//! events and synchronize calls measured in the same process.

use crate::measure::Sample;
use crate::platform::{Native, Platform, Skipped};
use sigretire_cuda::native::{Event, EventFlags};
use sigretire_cuda::{CudaContext, CudaMemory, CudaQueue};
use sigretire_tracker::{BaselineTracker, Config, Placement, RetiringTracker};
use std::time::Instant;

/// The first CUDA device.
pub struct CudaBench {
    context: CudaContext,
    queue: CudaQueue,
    other: CudaQueue,
}

impl CudaBench {
    /// Device 0, or why there is none.
    pub fn open() -> Result<Self, Skipped> {
        let skip = |reason: String| Skipped {
            backend: "cuda",
            reason,
        };
        let context = CudaContext::new(0).map_err(|e| skip(e.to_string()))?;
        let queue = context.create_queue().map_err(|e| skip(e.to_string()))?;
        let other = context.create_queue().map_err(|e| skip(e.to_string()))?;
        Ok(Self {
            context,
            queue,
            other,
        })
    }

    fn event(&self, blocking_sync: bool) -> Result<Event, String> {
        Event::new(
            &self.context,
            EventFlags {
                timing: true,
                blocking_sync,
            },
        )
        .map_err(|e| e.to_string())
    }
}

fn host_signals(config: Config) -> Config {
    // Pinned host memory is the only kind this backend has.
    Config {
        signals: Placement::Host,
        ..config
    }
}

impl Platform for CudaBench {
    type Retiring = RetiringTracker<CudaMemory, CudaQueue>;
    type Baseline = BaselineTracker<CudaMemory, CudaQueue>;

    fn backend(&self) -> &'static str {
        "cuda"
    }

    fn machine(&self) -> String {
        format!(
            "{} on {}",
            self.context.report(),
            crate::platforms::sim::host_cpu()
        )
    }

    fn placements(&self) -> Vec<Placement> {
        vec![Placement::Host]
    }

    fn retiring(&self, config: Config) -> Result<Self::Retiring, String> {
        self.context
            .retiring_tracker(host_signals(config))
            .map(|(t, _)| t)
            .map_err(|e| e.to_string())
    }

    fn baseline(&self, config: Config) -> Result<Self::Baseline, String> {
        self.context
            .baseline_tracker(host_signals(config))
            .map(|(t, _)| t)
            .map_err(|e| e.to_string())
    }

    fn native(&self) -> Option<&dyn Native> {
        Some(self)
    }
}

fn driver(e: sigretire_cuda::Error) -> String {
    e.to_string()
}

impl Native for CudaBench {
    fn event_synchronize(&self, blocking: bool) -> Result<Sample, String> {
        let event = self.event(blocking)?;
        let began = Instant::now();
        self.queue.launch_empty().map_err(driver)?;
        event.record(&self.queue).map_err(driver)?;
        let start = Instant::now();
        event.synchronize().map_err(driver)?;
        Ok(submitted(began, start))
    }

    fn event_query(&self) -> Result<Sample, String> {
        let event = self.event(false)?;
        self.queue.launch_empty().map_err(driver)?;
        event.record(&self.queue).map_err(driver)?;
        event.synchronize().map_err(driver)?;
        let start = Instant::now();
        let complete = event.is_complete().map_err(driver)?;
        let took = start.elapsed();
        if !complete {
            return Err("cuEventQuery said a synchronized event is not complete".into());
        }
        Ok(Sample::alone(took))
    }

    fn stream_synchronize(&self) -> Result<Sample, String> {
        let began = Instant::now();
        self.queue.launch_empty().map_err(driver)?;
        let start = Instant::now();
        self.queue.synchronize().map_err(driver)?;
        Ok(submitted(began, start))
    }

    fn stream_synchronize_completed(&self) -> Result<Sample, String> {
        self.queue.launch_empty().map_err(driver)?;
        self.queue.synchronize().map_err(driver)?;
        let start = Instant::now();
        self.queue.synchronize().map_err(driver)?;
        Ok(Sample::alone(start.elapsed()))
    }

    fn device_synchronize(&self) -> Result<Sample, String> {
        let began = Instant::now();
        self.queue.launch_empty().map_err(driver)?;
        self.other.launch_empty().map_err(driver)?;
        let start = Instant::now();
        self.context.synchronize().map_err(driver)?;
        Ok(submitted(began, start))
    }

    fn event_record(&self) -> Result<Sample, String> {
        let event = self.event(false)?;
        self.queue.launch_empty().map_err(driver)?;
        let start = Instant::now();
        event.record(&self.queue).map_err(driver)?;
        let took = start.elapsed();
        event.synchronize().map_err(driver)?;
        Ok(Sample::alone(took))
    }

    fn event_elapsed_time(&self) -> Result<Sample, String> {
        let (first, second) = (self.event(false)?, self.event(false)?);
        first.record(&self.queue).map_err(driver)?;
        self.queue.launch_empty().map_err(driver)?;
        second.record(&self.queue).map_err(driver)?;
        second.synchronize().map_err(driver)?;
        let start = Instant::now();
        let elapsed = second.elapsed_since(&first).map_err(driver)?;
        let took = start.elapsed();
        std::hint::black_box(elapsed);
        Ok(Sample::alone(took))
    }
}

/// A call that started at `start`, after a submission that started at
/// `began`, and has just returned.
fn submitted(began: Instant, start: Instant) -> Sample {
    let end = Instant::now();
    Sample {
        call: end - start,
        with_submission: end - began,
    }
}
