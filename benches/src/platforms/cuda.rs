//! NVIDIA GPUs through the CUDA driver (`cuda-backend`), with CUDA's own
//! events and synchronize calls measured in the same process.

use super::cuda_events::{Event, EventFlags};
use crate::measure::{Sample, Timer};
use crate::platform::{Native, Platform, Skipped};
use sigretire_baseline::BaselineTracker;
use sigretire_cuda::{CudaContext, CudaMemory, CudaQueue};
use sigretire_cuda_testkit::{FlagState, HostFlag, busy_kernel, launch_flag_writer};
use sigretire_tracker::{
    Config, Placement, RetiringTracker, Work,
    backend::{HardwareQueue, Publication},
};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The first CUDA device.
pub struct CudaBench {
    context: Arc<CudaContext>,
    queue: CudaQueue,
    other: CudaQueue,
    /// The word the floor probe's kernel writes.
    flag: HostFlag,
    /// The word the wait table's flag kernel writes after each kernel, for
    /// an observer thread to see the kernel's end by.
    end_flag: Arc<HostFlag>,
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
        let flag = HostFlag::new(&context).map_err(|e| skip(e.to_string()))?;
        let end_flag = Arc::new(HostFlag::new(&context).map_err(|e| skip(e.to_string()))?);
        Ok(Self {
            context,
            queue,
            other,
            flag,
            end_flag,
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

/// An observer thread spinning on the end flag: it answers when it saw
/// the flag written (or `None` if it never was, within 30 s).
type Observer = std::thread::JoinHandle<Option<Instant>>;

impl CudaBench {
    /// Resets the end flag and starts an observer spinning on it; returns
    /// once the observer spins.
    fn observe_end(&self) -> Observer {
        self.end_flag.reset();
        let flag = self.end_flag.clone();
        let spinning = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let started = spinning.clone();
        let observer = std::thread::spawn(move || {
            started.store(true, std::sync::atomic::Ordering::Release);
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if flag.state() != FlagState::Held {
                    return Some(Instant::now());
                }
                if Instant::now() > deadline {
                    return None;
                }
                std::hint::spin_loop();
            }
        });
        while !spinning.load(std::sync::atomic::Ordering::Acquire) {
            std::thread::yield_now();
        }
        observer
    }

    /// How long after the observer saw the end flag `now` was (0 where the
    /// observer, descheduled, saw it later than the waiter returned).
    fn late_after(observer: Observer, now: Instant) -> Result<Duration, String> {
        let seen = observer
            .join()
            .map_err(|_| "the end observer panicked")?
            .ok_or("the kernel's end flag was never written")?;
        Ok(now.saturating_duration_since(seen))
    }
}

impl crate::waits::WaitLab for CudaBench {
    type Probe = Observer;
    type Now = Instant;

    fn late_from(&self) -> &'static str {
        "the wait's return less the moment an observer thread saw a pinned word written by a one-thread kernel launched right after the work"
    }

    fn launch_marked(
        &self,
        queue: &sigretire_queue::HostQueue<Self::Retiring>,
        kernel: u64,
    ) -> Result<Observer, String> {
        let observer = self.observe_end();
        queue.launch(kernel).map_err(|e| e.to_string())?;
        // Untracked work the queue is told of: its event waits for it too.
        queue
            .with_tracker(|t| {
                use sigretire_tracker::Tracker as _;
                launch_flag_writer(t.queue(), &self.end_flag)
            })
            .map_err(driver)?;
        Ok(observer)
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn late(
        &self,
        _queue: &sigretire_queue::HostQueue<Self::Retiring>,
        observer: Observer,
        now: Instant,
    ) -> Result<Duration, String> {
        Self::late_after(observer, now)
    }

    fn native_wait(
        &self,
        kernel: u64,
        blocking: bool,
    ) -> Option<Result<crate::waits::WaitSample, String>> {
        let wait = || -> Result<crate::waits::WaitSample, String> {
            let event = self.event(blocking)?;
            let observer = self.observe_end();
            let index = self.queue.reserve().map_err(|e| e.to_string())?;
            self.queue
                .publish(Publication::unsignalled(index, true), Work::Kernel(kernel))
                .map_err(|e| e.to_string())?;
            launch_flag_writer(&self.queue, &self.end_flag).map_err(driver)?;
            event.record(&self.queue).map_err(driver)?;
            let timer = Timer::start();
            event.synchronize().map_err(driver)?;
            let now = Instant::now();
            let stopped = timer.stop();
            Ok(crate::waits::WaitSample {
                late: Self::late_after(observer, now)?,
                wall: stopped.call,
                cpu: stopped.usage.cpu,
            })
        };
        Some(wait())
    }
}

impl crate::scaling::ScalingLab for CudaBench {
    fn native_scaling(&self) -> Option<&(dyn crate::scaling::NativeScaling + Sync)> {
        Some(self)
    }
}

impl crate::scaling::NativeScaling for CudaBench {
    fn submit_burst(&self, record: bool) -> Result<Duration, String> {
        let event = self.event(false)?;
        let started = Instant::now();
        for _ in 0..crate::scaling::BURST {
            self.queue.launch_empty().map_err(driver)?;
            if record {
                event.record(&self.queue).map_err(driver)?;
            }
        }
        let took = started.elapsed();
        self.queue.synchronize().map_err(driver)?;
        Ok(took)
    }

    fn waiter_loop(
        &self,
        kernel: u64,
        query: bool,
        stop: &std::sync::atomic::AtomicBool,
    ) -> Result<u64, String> {
        let queue = self.context.create_queue().map_err(driver)?;
        let event = self.event(false)?;
        let mut waits = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let index = queue.reserve().map_err(|e| e.to_string())?;
            queue
                .publish(Publication::unsignalled(index, true), Work::Kernel(kernel))
                .map_err(|e| e.to_string())?;
            event.record(&queue).map_err(driver)?;
            if query {
                while !event.is_complete().map_err(driver)? {
                    std::hint::spin_loop();
                }
            } else {
                event.synchronize().map_err(driver)?;
            }
            waits += 1;
        }
        Ok(waits)
    }

    fn sync_loop(&self, stop: &std::sync::atomic::AtomicBool) -> Result<u64, String> {
        let queue = self.context.create_queue().map_err(driver)?;
        // One event, re-recorded, as a runtime keeps its events.
        let event = self.event(false)?;
        let mut ops = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            queue.launch_empty().map_err(driver)?;
            event.record(&queue).map_err(driver)?;
            event.synchronize().map_err(driver)?;
            ops += 1;
        }
        Ok(ops)
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
        sigretire_baseline::cuda::baseline_tracker(&self.context, host_signals(config))
            .map(|(t, _)| t)
            .map_err(|e| e.to_string())
    }

    fn long_kernel(&self, duration: Duration) -> Result<u64, String> {
        // The test kit's busy kernel, one thread: it spins on the GPU's clock for
        // `duration`. The trackers' queues and the native stream are all of
        // this context, so each can launch it.
        busy_kernel(&self.context, duration, 1)
            .map(|kernel| kernel.raw())
            .map_err(driver)
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
        let timer = Timer::start();
        event.synchronize().map_err(driver)?;
        Ok(timer.stop().after_submission(began))
    }

    fn event_synchronize_after(&self, kernel: u64, blocking: bool) -> Result<Sample, String> {
        let event = self.event(blocking)?;
        let began = Instant::now();
        // The same busy kernel the trackers' rows launch, as untracked work
        // on the native stream (no signal), then CUDA's own event after it.
        let index = self.queue.reserve().map_err(|e| e.to_string())?;
        self.queue
            .publish(Publication::unsignalled(index, true), Work::Kernel(kernel))
            .map_err(|e| e.to_string())?;
        event.record(&self.queue).map_err(driver)?;
        let timer = Timer::start();
        event.synchronize().map_err(driver)?;
        Ok(timer.stop().after_submission(began))
    }

    fn event_query(&self) -> Result<Sample, String> {
        let event = self.event(false)?;
        self.queue.launch_empty().map_err(driver)?;
        event.record(&self.queue).map_err(driver)?;
        event.synchronize().map_err(driver)?;
        let timer = Timer::start();
        let complete = event.is_complete().map_err(driver)?;
        let stopped = timer.stop();
        if !complete {
            return Err("cuEventQuery said a synchronized event is not complete".into());
        }
        Ok(stopped.alone())
    }

    fn stream_synchronize(&self) -> Result<Sample, String> {
        let began = Instant::now();
        self.queue.launch_empty().map_err(driver)?;
        let timer = Timer::start();
        self.queue.synchronize().map_err(driver)?;
        Ok(timer.stop().after_submission(began))
    }

    fn stream_synchronize_completed(&self) -> Result<Sample, String> {
        self.queue.launch_empty().map_err(driver)?;
        self.queue.synchronize().map_err(driver)?;
        let timer = Timer::start();
        self.queue.synchronize().map_err(driver)?;
        Ok(timer.stop().alone())
    }

    fn device_synchronize(&self) -> Result<Sample, String> {
        let began = Instant::now();
        self.queue.launch_empty().map_err(driver)?;
        self.other.launch_empty().map_err(driver)?;
        let timer = Timer::start();
        self.context.synchronize().map_err(driver)?;
        Ok(timer.stop().after_submission(began))
    }

    fn event_record(&self) -> Result<Sample, String> {
        let event = self.event(false)?;
        self.queue.launch_empty().map_err(driver)?;
        let timer = Timer::start();
        event.record(&self.queue).map_err(driver)?;
        let stopped = timer.stop();
        event.synchronize().map_err(driver)?;
        Ok(stopped.alone())
    }

    fn floor(&self) -> Option<Result<Sample, String>> {
        let probe = || -> Result<Sample, String> {
            self.flag.reset();
            let began = Instant::now();
            launch_flag_writer(&self.queue, &self.flag).map_err(driver)?;
            let timer = Timer::start();
            let deadline = Instant::now() + Duration::from_secs(10);
            while self.flag.state() == FlagState::Held {
                if Instant::now() > deadline {
                    return Err("the floor kernel's write never arrived".into());
                }
                std::hint::spin_loop();
            }
            Ok(timer.stop().after_submission(began))
        };
        Some(probe())
    }

    fn event_elapsed_time(&self) -> Result<Sample, String> {
        let (first, second) = (self.event(false)?, self.event(false)?);
        first.record(&self.queue).map_err(driver)?;
        self.queue.launch_empty().map_err(driver)?;
        second.record(&self.queue).map_err(driver)?;
        second.synchronize().map_err(driver)?;
        let timer = Timer::start();
        let elapsed = second.elapsed_since(&first).map_err(driver)?;
        let stopped = timer.stop();
        std::hint::black_box(elapsed);
        Ok(stopped.alone())
    }
}
