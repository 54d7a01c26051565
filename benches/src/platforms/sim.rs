//! The simulator with the MI300X-like cost profile: a device-memory load
//! costs 1.1 us, a completion written into host memory a PCIe round trip,
//! empty work completes in a few microseconds, in real time on a processor
//! thread.

use crate::platform::Platform;
use sigretire_baseline::sim::SimBaseline;
use sigretire_queue::sim::{SimPlatform, SimTracker};
use sigretire_sim::{
    CostProfile, Kernel, Mode, Placement as RingPlacement, Sim, SimConfig, SimQueueConfig,
};
use sigretire_tracker::{Config, Placement};
use std::time::Duration;

/// The threaded simulator as a sigbench backend.
pub struct SimBench {
    sim: Sim,
    /// Hardware queues get a wake relay ([`SimPlatform::with_wake_relay`]).
    wake_relay: bool,
}

impl SimBench {
    /// A threaded simulator with the MI300X-like profile, rings in device
    /// memory (so re-armed signals need a store fence, not an HDP flush),
    /// profiling on.
    pub fn new() -> Self {
        Self {
            sim: Sim::new(SimConfig {
                mode: Mode::Threaded,
                profile: CostProfile::mi300x(),
                ..SimConfig::default()
            }),
            wake_relay: false,
        }
    }

    /// The simulator every tracker of this backend runs on (what a model
    /// that reads signal memory itself, as `seed_table`'s CLR driving does,
    /// reads through).
    pub fn sim(&self) -> &Sim {
        &self.sim
    }

    /// The hardware queues this backend's trackers run on: 4096 packets,
    /// ring in device memory, profiled.
    pub fn queue_config() -> SimQueueConfig {
        SimQueueConfig {
            ring: RingPlacement::Device,
            profiling: true,
            size: 4096,
            ..SimQueueConfig::default()
        }
    }

    fn platform(&self, config: Config) -> SimPlatform {
        let platform = SimPlatform::new(self.sim.clone())
            .with_tracker_config(config)
            .with_sim_queue_config(Self::queue_config());
        match self.wake_relay {
            true => platform.with_wake_relay(),
            false => platform,
        }
    }
}

impl Default for SimBench {
    fn default() -> Self {
        Self::new()
    }
}

impl Platform for SimBench {
    type Retiring = SimTracker;
    type Baseline = SimBaseline;

    fn backend(&self) -> &'static str {
        "sim"
    }

    fn machine(&self) -> String {
        let p = self.sim.profile();
        format!(
            "software AQL packet processor, MI300X-like costs (device-memory load {:?}, HDP flush {:?}, \
             launch {:?} + empty kernel {:?}, completion write {:?} to host memory and {:?} to device memory) on {}",
            p.device_load,
            p.hdp_flush,
            p.launch_latency,
            p.kernel_execution,
            p.completion_host,
            p.completion_device,
            host_cpu()
        )
    }

    fn placements(&self) -> Vec<Placement> {
        vec![Placement::Host, Placement::Device]
    }

    fn retiring(&self, config: Config) -> Result<SimTracker, String> {
        self.platform(config).tracker().map_err(|e| e.to_string())
    }

    fn baseline(&self, config: Config) -> Result<SimBaseline, String> {
        // On a new hardware queue of the platform's simulator, as its
        // retiring trackers are.
        let platform = self.platform(config);
        let queue = platform
            .sim()
            .create_queue(platform.sim_queue_config())
            .map_err(|e| e.to_string())?;
        sigretire_baseline::sim::on(platform.sim(), queue, platform.tracker_config())
            .map(|(tracker, _)| tracker)
            .map_err(|e| e.to_string())
    }

    fn long_kernel(&self, duration: Duration) -> Result<u64, String> {
        // Every queue of this simulator runs it: they share its kernel table.
        Ok(self.sim.register_kernel(Kernel::Duration(duration)))
    }
}

/// The host CPU's model name, from /proc/cpuinfo where there is one.
pub fn host_cpu() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "an unknown CPU".into());
    format!("{model} ({cores} threads)")
}

impl crate::waits::WaitLab for SimBench {
    /// The kernel's packet index on its hardware queue.
    type Probe = u64;
    /// The simulated GPU's clock, in ticks.
    type Now = u64;

    fn late_from(&self) -> &'static str {
        "the simulated GPU's clock when the wait returned, less the kernel's own end stamp (its ground truth)"
    }

    fn launch_marked(
        &self,
        queue: &sigretire_queue::HostQueue<SimTracker>,
        kernel: u64,
    ) -> Result<u64, String> {
        let command = queue.launch(kernel).map_err(|e| e.to_string())?;
        Ok(command.aql_index())
    }

    fn now(&self) -> u64 {
        self.sim.now_ticks()
    }

    fn late(
        &self,
        queue: &sigretire_queue::HostQueue<SimTracker>,
        index: u64,
        now: u64,
    ) -> Result<Duration, String> {
        use sigretire_tracker::Tracker as _;
        let truth = queue
            .with_tracker(|t| t.queue().truth(index))
            .ok_or("the kernel's ground truth is gone")?;
        let end = truth.end_ts.ok_or("a waited-for kernel has no end stamp")?;
        let ticks = u32::try_from(now.saturating_sub(end)).unwrap_or(u32::MAX);
        Ok(self.sim.profile().gpu_tick * ticks)
    }
}

impl crate::scaling::ScalingLab for SimBench {}

impl SimBench {
    /// The end stamp of packet `index` of `queue`'s hardware queue.
    fn end_of(
        &self,
        queue: &sigretire_queue::HostQueue<SimTracker>,
        index: u64,
    ) -> Result<u64, String> {
        use sigretire_tracker::Tracker as _;
        queue
            .with_tracker(|t| t.queue().truth(index))
            .ok_or("the kernel's ground truth is gone")?
            .end_ts
            .ok_or_else(|| "a finished kernel has no end stamp".to_string())
    }

    fn ticks(&self, ticks: u64) -> Duration {
        self.sim.profile().gpu_tick * u32::try_from(ticks).unwrap_or(u32::MAX)
    }
}

impl crate::callbacks::CallbackLab for SimBench {
    fn late_from(&self) -> &'static str {
        "the simulated GPU's clock as the callback started, less the kernel's own end stamp"
    }

    fn gap_from(&self) -> &'static str {
        "the next kernel's end stamp less the first kernel's (the simulator's ground truth)"
    }

    fn hold(&self, hold: Duration) -> crate::callbacks::Hold {
        crate::callbacks::Hold::Sleep(hold)
    }

    fn with_wake_relay(&self) -> Option<Self> {
        Some(Self {
            sim: self.sim.clone(),
            wake_relay: true,
        })
    }

    fn our_callback(
        &self,
        queue: &sigretire_queue::HostQueue<SimTracker>,
        first: u64,
        next: u64,
        seen: Option<crate::callbacks::Seen>,
    ) -> Result<crate::callbacks::CallbackSample, String> {
        let command = std::sync::Arc::new(queue.launch(first).map_err(|e| e.to_string())?);
        let a = command.aql_index();
        let stamps = seen.map(|seen| {
            let sim = self.sim.clone();
            crate::callbacks::stamp_when_seen(&command, move || sim.now_ticks(), seen)
        });
        let b = queue.launch(next).map_err(|e| e.to_string())?.aql_index();
        queue.synchronize().map_err(|e| e.to_string())?;
        let first_end = self.end_of(queue, a)?;
        let (late, cpu) = match stamps {
            Some(stamps) => {
                let (now, cpu) = crate::callbacks::stamp(&stamps)?;
                (Some(self.ticks(now.saturating_sub(first_end))), cpu)
            }
            None => (None, None),
        };
        let gap = self.ticks(self.end_of(queue, b)?.saturating_sub(first_end));
        Ok(crate::callbacks::CallbackSample { late, gap, cpu })
    }
}
