//! AMD GPUs through ROCr (`hsa-backend`), when `libhsa-runtime64.so.1`
//! loads and finds a GPU.

use crate::platform::{Platform, Skipped};
use sigretire_hsa::{AqlQueue, Device, QueueOptions, Runtime, SignalPool};
use sigretire_tracker::{BaselineTracker, Config, Placement, RetiringTracker};
use std::sync::Arc;

/// The first AMD GPU ROCr reports.
pub struct RocrBench {
    device: Device,
}

impl RocrBench {
    /// ROCr's first GPU, or why there is none.
    pub fn open() -> Result<Self, Skipped> {
        let skip = |reason: String| Skipped {
            backend: "rocr",
            reason,
        };
        let runtime = Runtime::load().map_err(|e| skip(e.to_string()))?;
        let device = runtime.device(0).map_err(|e| skip(e.to_string()))?;
        Ok(Self { device })
    }

    fn queue(&self) -> Result<AqlQueue, String> {
        AqlQueue::new(&self.device, QueueOptions::default()).map_err(|e| e.to_string())
    }
}

impl Platform for RocrBench {
    type Retiring = RetiringTracker<SignalPool, AqlQueue>;
    type Baseline = BaselineTracker<SignalPool, AqlQueue>;

    fn backend(&self) -> &'static str {
        "rocr"
    }

    fn machine(&self) -> String {
        format!(
            "{:?} through ROCr on {}",
            self.device,
            crate::platforms::sim::host_cpu()
        )
    }

    fn placements(&self) -> Vec<Placement> {
        if self.device.has_large_bar() {
            vec![Placement::Host, Placement::Device]
        } else {
            vec![Placement::Host]
        }
    }

    fn retiring(&self, config: Config) -> Result<Self::Retiring, String> {
        let memory = Arc::new(SignalPool::new(&self.device));
        RetiringTracker::new(memory, self.queue()?, config).map_err(|e| e.to_string())
    }

    fn baseline(&self, config: Config) -> Result<Self::Baseline, String> {
        let memory = Arc::new(SignalPool::new(&self.device));
        BaselineTracker::new(memory, self.queue()?, config).map_err(|e| e.to_string())
    }
}
