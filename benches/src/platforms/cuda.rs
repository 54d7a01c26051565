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

/// What a host function of the callback rows shares with its launcher: the
/// time it started, set once it returns.
struct HostCall {
    hold: crate::callbacks::Hold,
    started: std::sync::Mutex<Option<Instant>>,
    done: std::sync::Condvar,
}

/// The host function: stamps its start, holds its thread for `hold`.
extern "C" fn host_call(data: *mut core::ffi::c_void) {
    // SAFETY: `data` is the `Arc<HostCall>` that `launch_host_call` gave
    // up with `Arc::into_raw` for this one call; the driver runs a host
    // function exactly once, so it is taken back exactly once.
    let call = unsafe { Arc::from_raw(data.cast_const().cast::<HostCall>()) };
    let now = Instant::now();
    call.hold.hold();
    *call.started.lock().unwrap_or_else(|p| p.into_inner()) = Some(now);
    call.done.notify_all();
}

/// Enqueues `host_call` holding `hold` on `queue`'s stream
/// (`cuLaunchHostFunc`): the stream's later work waits for it.
fn launch_host_call(
    queue: &CudaQueue,
    hold: crate::callbacks::Hold,
) -> Result<Arc<HostCall>, String> {
    use sigretire_cuda::cudarc::driver::sys;
    let call = Arc::new(HostCall {
        hold,
        started: std::sync::Mutex::new(None),
        done: std::sync::Condvar::new(),
    });
    queue.context().bind().map_err(driver)?;
    // Work the queue did not publish.
    queue.note_foreign_work();
    let data = Arc::into_raw(call.clone())
        .cast_mut()
        .cast::<core::ffi::c_void>();
    // SAFETY: a live stream of the bound context; `host_call` makes no CUDA
    // call and owns `data` (one strong count) once the launch succeeded.
    let launched = sigretire_cuda::check("cuLaunchHostFunc", unsafe {
        sys::cuLaunchHostFunc(queue.as_raw(), Some(host_call), data)
    });
    if let Err(e) = launched {
        // SAFETY: the launch failed, so the driver never runs `host_call`:
        // the count given up above is taken back here, once.
        drop(unsafe { Arc::from_raw(data.cast_const().cast::<HostCall>()) });
        return Err(driver(e));
    }
    Ok(call)
}

/// When the host function started, once it returned (30 s at most).
fn host_call_started(call: &HostCall) -> Result<Instant, String> {
    let started = call.started.lock().unwrap_or_else(|p| p.into_inner());
    let (started, _) = call
        .done
        .wait_timeout_while(started, Duration::from_secs(30), |s| s.is_none())
        .unwrap_or_else(|p| p.into_inner());
    started.ok_or_else(|| "a host function never ran".to_string())
}

/// `cuEventQuery` with no bind of its own, as a runtime queries with its
/// context already current (`NOT_READY` is `false`).
fn query_bound(event: &Event) -> Result<bool, String> {
    use sigretire_cuda::cudarc::driver::sys;
    // SAFETY: the event is alive (borrowed); the caller bound its context on
    // this thread (were it not, the driver answers an error, nothing worse).
    match unsafe { sys::cuEventQuery(event.as_raw()) } {
        sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        code => sigretire_cuda::check("cuEventQuery", code)
            .map(|()| true)
            .map_err(driver),
    }
}

/// `cuEventRecord` on `queue`'s stream with no bind of its own.
fn record_bound(event: &Event, queue: &CudaQueue) -> Result<(), String> {
    use sigretire_cuda::cudarc::driver::sys;
    // SAFETY: both handles are alive (borrowed) and of one context, which
    // the caller bound on this thread (as for `query_bound`).
    sigretire_cuda::check("cuEventRecord", unsafe {
        sys::cuEventRecord(event.as_raw(), queue.as_raw())
    })
    .map_err(driver)
}

impl CudaBench {
    fn publish_kernel(&self, kernel: u64) -> Result<(), String> {
        let index = self.queue.reserve().map_err(|e| e.to_string())?;
        self.queue
            .publish(Publication::unsignalled(index, true), Work::Kernel(kernel))
            .map_err(|e| e.to_string())
    }
}

impl crate::callbacks::CallbackLab for CudaBench {
    fn late_from(&self) -> &'static str {
        "the callback's start less the moment an observer thread saw a pinned word written by a one-thread kernel launched right after the first kernel (ours is registered on the first kernel itself, so the flag kernel's own run, a few us, favours it; the host function follows the flag kernel)"
    }

    fn gap_from(&self) -> &'static str {
        "cuEventElapsedTime from an event recorded after the first kernel (and its flag kernel) to one after the next kernel"
    }

    fn hold(&self, hold: Duration) -> crate::callbacks::Hold {
        crate::callbacks::Hold::Spin(hold)
    }

    fn our_callback(
        &self,
        queue: &sigretire_queue::HostQueue<Self::Retiring>,
        first: u64,
        next: u64,
        seen: Option<crate::callbacks::Seen>,
    ) -> Result<crate::callbacks::CallbackSample, String> {
        use sigretire_tracker::Tracker as _;
        let (after_first, after_next) = (self.event(false)?, self.event(false)?);
        let observer = self.observe_end();
        let command = std::sync::Arc::new(queue.launch(first).map_err(|e| e.to_string())?);
        queue
            .with_tracker(|t| {
                launch_flag_writer(t.queue(), &self.end_flag)?;
                after_first.record(t.queue())
            })
            .map_err(driver)?;
        let stamps =
            seen.map(|seen| crate::callbacks::stamp_when_seen(&command, Instant::now, seen));
        queue.launch(next).map_err(|e| e.to_string())?;
        queue
            .with_tracker(|t| after_next.record(t.queue()))
            .map_err(driver)?;
        after_next.synchronize().map_err(driver)?;
        let (late, cpu) = match stamps {
            Some(stamps) => {
                let (now, cpu) = crate::callbacks::stamp(&stamps)?;
                (Some(Self::late_after(observer, now)?), cpu)
            }
            None => {
                Self::late_after(observer, Instant::now())?;
                (None, None)
            }
        };
        let gap = after_next.elapsed_since(&after_first).map_err(driver)?;
        Ok(crate::callbacks::CallbackSample { late, gap, cpu })
    }

    fn native_callback(
        &self,
        first: u64,
        next: u64,
        hold: Option<crate::callbacks::Hold>,
    ) -> Option<Result<crate::callbacks::CallbackSample, String>> {
        let sample = || -> Result<crate::callbacks::CallbackSample, String> {
            let (after_first, after_next) = (self.event(false)?, self.event(false)?);
            let observer = self.observe_end();
            self.publish_kernel(first)?;
            launch_flag_writer(&self.queue, &self.end_flag).map_err(driver)?;
            after_first.record(&self.queue).map_err(driver)?;
            let call = match hold {
                Some(hold) => Some(launch_host_call(&self.queue, hold)?),
                None => None,
            };
            self.publish_kernel(next)?;
            after_next.record(&self.queue).map_err(driver)?;
            after_next.synchronize().map_err(driver)?;
            let late = match call {
                Some(call) => Some(Self::late_after(observer, host_call_started(&call)?)?),
                None => {
                    Self::late_after(observer, Instant::now())?;
                    None
                }
            };
            let gap = after_next.elapsed_since(&after_first).map_err(driver)?;
            Ok(crate::callbacks::CallbackSample {
                late,
                gap,
                cpu: None,
            })
        };
        Some(sample())
    }

    fn native_release(
        &self,
        kernel: u64,
        blocks: usize,
        values: usize,
    ) -> Option<Result<crate::callbacks::ReleaseSample, String>> {
        let cell = || -> Result<crate::callbacks::ReleaseSample, String> {
            // The allocator's pool: one event per block, reused.
            let flags = EventFlags {
                timing: false,
                blocking_sync: false,
            };
            let pool = (0..blocks)
                .map(|_| Event::new(&self.context, flags))
                .collect::<Result<Vec<_>, _>>()
                .map_err(driver)?;
            let mut free: Vec<usize> = (0..blocks).collect();
            let mut outstanding = std::collections::VecDeque::with_capacity(blocks);
            let mut s = crate::callbacks::ReleaseSample::default();
            // What an allocation does first: query the oldest outstanding
            // blocks' events until one is not ready, freeing the ready ones.
            let process = |outstanding: &mut std::collections::VecDeque<usize>,
                           free: &mut Vec<usize>,
                           s: &mut crate::callbacks::ReleaseSample|
             -> Result<(), String> {
                while let Some(&block) = outstanding.front() {
                    s.driver_calls += 1;
                    if !query_bound(&pool[block])? {
                        break;
                    }
                    outstanding.pop_front();
                    free.push(block);
                    s.values += 1;
                }
                Ok(())
            };
            // Bound once, as a runtime's thread has its context current:
            // the calls timed are the queries and records alone.
            self.context.bind().map_err(driver)?;
            let rounds = (values / blocks).max(2);
            // Round 0 warms up, untimed and uncounted.
            for round in 0..=rounds {
                for _ in 0..blocks {
                    let start = Instant::now();
                    process(&mut outstanding, &mut free, &mut s)?;
                    let block = free.pop().ok_or("no free block after a synchronize")?;
                    let mut host = start.elapsed();
                    s.windows += 1;
                    self.publish_kernel(kernel)?;
                    let start = Instant::now();
                    record_bound(&pool[block], &self.queue)?;
                    s.driver_calls += 1;
                    outstanding.push_back(block);
                    host += start.elapsed();
                    s.windows += 1;
                    s.host += host;
                }
                self.queue.synchronize().map_err(driver)?;
                if round == 0 {
                    process(&mut outstanding, &mut free, &mut s)?;
                    s = crate::callbacks::ReleaseSample::default();
                }
            }
            let start = Instant::now();
            process(&mut outstanding, &mut free, &mut s)?;
            s.host += start.elapsed();
            s.windows += 1;
            Ok(s)
        };
        Some(cell())
    }
}
