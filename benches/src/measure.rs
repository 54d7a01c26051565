//! The measurements: the seed's latency table (one cell per API, tracker
//! and signal placement) and the steady-state counters, generic over any
//! tracker the queue layer runs on.
//!
//! Every cell times the API call alone (what the seed's "host time per
//! call" means), after the work it needs was submitted, over `iterations`
//! samples after a warm-up, and counts the tracker's memory traffic during
//! the timed calls only. Around the same window it reads the calling
//! thread's own CPU time and voluntary context switches ([`crate::cpu`]):
//! what the wait cost the machine, and whether the thread slept in the
//! kernel, next to how long it took.

use crate::alloc;
use crate::cpu::{self, ThreadUsage};
use serde::Serialize;
use sigretire_queue::{Device, DeviceConfig, HostQueue, QueueConfig, QueueTracker};
use sigretire_tracker::{Placement, Request, Stats, WaitPolicy, Work, backend::HardwareQueue};
use std::time::{Duration, Instant};

/// An error as the benchmarks report it: its text.
pub(crate) fn fail(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// An API the seed's tables time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// Empty work, record an event, synchronize it.
    EventSynchronize,
    /// The same with a blocking-sync event.
    EventSynchronizeBlocking,
    /// Query an event already complete.
    EventQuery,
    /// Empty work, synchronize the queue.
    StreamSynchronize,
    /// Synchronize a queue with nothing pending.
    StreamSynchronizeCompleted,
    /// Empty work on two queues, synchronize the device.
    DeviceSynchronize,
    /// Record an event after empty work.
    EventRecord,
    /// Elapsed time between two completed events.
    EventElapsedTime,
    /// A kernel of about [`LONG_WORK`], record an event, synchronize it.
    EventSynchronizeLong,
    /// The same with a blocking-sync event.
    EventSynchronizeBlockingLong,
    /// The floor, a reference and no API: an empty kernel whose only effect
    /// is a write to a pinned host word, while the host spins on the word
    /// (launch to completion seen on the host, nothing tracked). Not in
    /// [`Api::ALL`]: measured only where the backend can launch it.
    #[serde(rename = "floor_empty_kernel_host_spin")]
    Floor,
}

/// How long the kernel before the event of the `*_long` rows runs: long
/// enough that a wait is mostly waiting, so its CPU time and whether it
/// slept show what the wait policy does with a core.
pub const LONG_WORK: Duration = Duration::from_millis(1);

impl Api {
    /// Every row, in the seed's order, then the waits for a long kernel.
    pub const ALL: [Api; 10] = [
        Api::EventSynchronize,
        Api::EventSynchronizeBlocking,
        Api::EventQuery,
        Api::StreamSynchronize,
        Api::StreamSynchronizeCompleted,
        Api::DeviceSynchronize,
        Api::EventRecord,
        Api::EventElapsedTime,
        Api::EventSynchronizeLong,
        Api::EventSynchronizeBlockingLong,
    ];

    /// Every row a report shows: [`Api::ALL`], then the floor.
    pub fn reported() -> impl Iterator<Item = Api> {
        Api::ALL.into_iter().chain([Api::Floor])
    }

    /// The row's name in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Api::EventSynchronize => "event_synchronize",
            Api::EventSynchronizeBlocking => "event_synchronize_blocking",
            Api::EventQuery => "event_query",
            Api::StreamSynchronize => "stream_synchronize",
            Api::StreamSynchronizeCompleted => "stream_synchronize_completed",
            Api::DeviceSynchronize => "device_synchronize",
            Api::EventRecord => "event_record",
            Api::EventElapsedTime => "event_elapsed_time",
            Api::EventSynchronizeLong => "event_synchronize_long",
            Api::EventSynchronizeBlockingLong => "event_synchronize_blocking_long",
            Api::Floor => "floor_empty_kernel_host_spin",
        }
    }

    /// Whether the work before the call is a kernel of about [`LONG_WORK`]
    /// rather than empty work (these rows take fewer samples).
    pub const fn is_long(self) -> bool {
        matches!(
            self,
            Api::EventSynchronizeLong | Api::EventSynchronizeBlockingLong
        )
    }

    /// Whether the call waits with a blocking-sync event
    /// ([`WaitPolicy::blocking`]; the others spin first).
    pub const fn is_blocking(self) -> bool {
        matches!(
            self,
            Api::EventSynchronizeBlocking | Api::EventSynchronizeBlockingLong
        )
    }

    /// Whether the call waits for empty work submitted just before it (its
    /// row then also has the submission-plus-call time).
    pub const fn waits_for_submission(self) -> bool {
        matches!(
            self,
            Api::EventSynchronize
                | Api::EventSynchronizeBlocking
                | Api::StreamSynchronize
                | Api::DeviceSynchronize
                | Api::EventSynchronizeLong
                | Api::EventSynchronizeBlockingLong
                | Api::Floor
        )
    }
}

/// One timed call, and the same call together with the submission it
/// waits for (the two are equal for calls that wait for nothing), with what
/// the calling thread spent during the call.
///
/// A synchronize's own time depends on how much GPU work is still left when
/// it starts, so it favours whichever API took longer to submit; the total
/// does not.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// The API call alone.
    pub call: Duration,
    /// Submission (empty work, and the event record) plus the call.
    pub with_submission: Duration,
    /// CPU time of the calling thread during the call.
    pub cpu: Duration,
    /// Voluntary context switches of the calling thread during the call
    /// (it slept in the kernel that many times).
    pub voluntary_switches: u64,
}

/// A timed call in progress: opened just before the call, closed just
/// after it, on the thread that makes it.
///
/// ```
/// let timer = sigretire_bench::measure::Timer::start();
/// std::thread::sleep(std::time::Duration::from_millis(1));
/// let sample = timer.stop().alone();
/// assert!(sample.call >= std::time::Duration::from_millis(1));
/// assert!(sample.cpu < sample.call);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Timer {
    usage: ThreadUsage,
    start: Instant,
}

impl Timer {
    /// Reads the thread's usage, then the clock (so that the wall-clock
    /// window holds none of the usage readings).
    pub fn start() -> Self {
        let usage = cpu::thread_usage();
        Self {
            usage,
            start: Instant::now(),
        }
    }

    /// Reads the clock, then the thread's usage.
    pub fn stop(&self) -> Stopped {
        let end = Instant::now();
        let usage = cpu::thread_usage_closing().since(&self.usage);
        Stopped {
            call: end - self.start,
            end,
            usage,
        }
    }
}

/// The CPU time that the usage readings themselves put inside an empty
/// [`Timer`] window (the end of one `clock_gettime` system call, the two
/// clock reads, the start of the other): the median over 1000 windows with
/// nothing in them. [`row`] takes it off every row's CPU time, so that a
/// call of 0.05 us does not show the readings' own (about 0.4 us on the
/// project's 2-core machine).
///
/// ```
/// let floor = sigretire_bench::measure::cpu_floor();
/// assert!(floor < std::time::Duration::from_millis(1));
/// ```
pub fn cpu_floor() -> Duration {
    let mut windows: Vec<Duration> = (0..1000).map(|_| Timer::start().stop().usage.cpu).collect();
    windows.sort_unstable();
    windows[windows.len() / 2]
}

/// A timed call that has returned.
#[derive(Clone, Copy, Debug)]
pub struct Stopped {
    /// The call's wall-clock time.
    pub call: Duration,
    /// When it returned.
    pub end: Instant,
    /// What the thread spent during it.
    pub usage: ThreadUsage,
}

impl Stopped {
    /// A call that waits for no submission of its own.
    pub fn alone(self) -> Sample {
        Sample {
            with_submission: self.call,
            ..self.after_submission(self.end)
        }
    }

    /// A call after a submission that started at `began`.
    pub fn after_submission(self, began: Instant) -> Sample {
        Sample {
            call: self.call,
            with_submission: self.end.saturating_duration_since(began),
            cpu: self.usage.cpu,
            voluntary_switches: self.usage.voluntary_switches,
        }
    }
}

/// One cell of the table.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The API.
    pub api: Api,
    /// `retiring`, `baseline` or `native`.
    pub tracker: &'static str,
    /// `host`, `device` or `native`.
    pub signals: &'static str,
    /// Median, 10th and 90th percentile, microseconds.
    pub p50_us: f64,
    /// 10th percentile.
    pub p10_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// Mean CPU time of the calling (waiting) thread per call,
    /// microseconds (`CLOCK_THREAD_CPUTIME_ID` read before and after each
    /// timed call, on that thread), less the readings' own
    /// ([`cpu_floor`], the report's `cpu_floor_us`), at least 0.
    pub cpu_us_per_op: f64,
    /// Whether the calling thread slept in the kernel: the median call had
    /// at least one voluntary context switch (`getrusage(RUSAGE_THREAD)`'s
    /// `ru_nvcsw` before and after it).
    pub slept: bool,
    /// Mean voluntary context switches of the calling thread per call.
    pub voluntary_switches_per_op: f64,
    /// Polls of the completion signal per call by the call's CPU wait (the
    /// tracker's `polls` counter, all placements); `None` (JSON `null`)
    /// where nothing counts them (CUDA's own calls).
    pub polls_per_op: Option<f64>,
    /// Loads of device-memory signals per call (timestamp reads count two).
    pub device_loads_per_op: f64,
    /// Store fences per call.
    pub fences_per_op: f64,
    /// HDP flushes per call.
    pub flushes_per_op: f64,
    /// Signals created during the timed calls.
    pub signals_created: u64,
    /// Median of the submission plus the call (equal to `p50_us` for calls
    /// that wait for no submission of their own).
    pub with_submission_p50_us: f64,
    /// Samples.
    pub samples: usize,
}

/// Percentiles and counters of a set of samples; `traffic` is `None` where
/// no tracker counted the calls' memory traffic (the backend's own API):
/// its counters read 0 and its polls are unknown. `cpu_floor` is what the
/// usage readings cost inside each window ([`cpu_floor`]).
pub fn row(
    api: Api,
    tracker: &'static str,
    signals: &'static str,
    samples: Vec<Sample>,
    traffic: Option<Traffic>,
    cpu_floor: Duration,
) -> Row {
    let sorted = |f: fn(&Sample) -> Duration| {
        let mut v: Vec<Duration> = samples.iter().map(f).collect();
        v.sort_unstable();
        v
    };
    let (calls, totals) = (sorted(|s| s.call), sorted(|s| s.with_submission));
    let at = |v: &[Duration], q: f64| {
        if v.is_empty() {
            return 0.0;
        }
        let i = ((v.len() - 1) as f64 * q).round() as usize;
        v[i].as_secs_f64() * 1e6
    };
    let n = samples.len().max(1) as f64;
    let cpu: Duration = samples.iter().map(|s| s.cpu).sum();
    let mut switches: Vec<u64> = samples.iter().map(|s| s.voluntary_switches).collect();
    switches.sort_unstable();
    // The median call, picked as `p50_us` picks it.
    let median_switches = switches
        .get((switches.len().saturating_sub(1) as f64 * 0.5).round() as usize)
        .copied()
        .unwrap_or(0);
    let counted = traffic.is_some();
    let traffic = traffic.unwrap_or_default();
    Row {
        api,
        tracker,
        signals,
        p50_us: at(&calls, 0.5),
        p10_us: at(&calls, 0.1),
        p90_us: at(&calls, 0.9),
        cpu_us_per_op: ((cpu.as_secs_f64() / n - cpu_floor.as_secs_f64()) * 1e6).max(0.0),
        slept: median_switches >= 1,
        voluntary_switches_per_op: switches.iter().sum::<u64>() as f64 / n,
        polls_per_op: counted.then(|| traffic.polls as f64 / n),
        device_loads_per_op: traffic.device_loads as f64 / n,
        fences_per_op: traffic.fences as f64 / n,
        flushes_per_op: traffic.flushes as f64 / n,
        signals_created: traffic.signals_created,
        with_submission_p50_us: at(&totals, 0.5),
        samples: samples.len(),
    }
}

/// Tracker traffic accumulated over the timed calls.
#[derive(Clone, Copy, Debug, Default)]
pub struct Traffic {
    device_loads: u64,
    polls: u64,
    fences: u64,
    flushes: u64,
    signals_created: u64,
}

impl Traffic {
    fn add(&mut self, before: &Stats, after: &Stats) {
        let d = after.since(before);
        let device = d.device();
        // Everything read across PCIe: the tracker's proofs, the waits' polls,
        // timestamp pairs (one 16-byte read each).
        self.device_loads += device.loads + device.polls + device.timestamp_reads;
        // The CPU waits' loads of the completion signal, wherever it lives.
        self.polls += d.host().polls + d.device().polls;
        self.fences += d.store_fences();
        self.flushes += d.hdp_flushes();
        self.signals_created += d.signals_created;
    }
}

fn stats<T: QueueTracker>(queues: &[&HostQueue<T>]) -> Stats {
    let mut total = Stats::default();
    for q in queues {
        let s = q.with_tracker(|t| t.stats());
        for (a, b) in total.accesses.iter_mut().zip(s.accesses) {
            a.loads += b.loads;
            a.polls += b.polls;
            a.stores += b.stores;
            a.timestamp_reads += b.timestamp_reads;
            a.fences += b.fences;
            a.flushes += b.flushes;
        }
        total.signals_created += s.signals_created;
    }
    total
}

/// [`stats`], adding the time it took to `spent`.
fn timed_stats<T: QueueTracker>(queues: &[&HostQueue<T>], spent: &mut Duration) -> Stats {
    let start = Instant::now();
    let stats = stats(queues);
    *spent += start.elapsed();
    stats
}

/// Measures one API on a fresh device whose queues come from `make`.
/// `long_kernel` is the kernel object the `*_long` rows launch before their
/// event (a kernel of about [`LONG_WORK`] the platform registered); the
/// other rows launch empty work.
pub fn measure<T: QueueTracker>(
    api: Api,
    make: &dyn Fn() -> Result<T, String>,
    iterations: usize,
    warmup: usize,
    long_kernel: u64,
) -> Result<(Vec<Sample>, Traffic), String> {
    let config = QueueConfig {
        wait_policy: if api.is_blocking() {
            WaitPolicy::blocking()
        } else {
            WaitPolicy::spin()
        },
        // A lost completion must end the run with an error, not hang it.
        wait_timeout: Some(Duration::from_secs(30)),
        ..QueueConfig::default()
    };
    let device = Device::new(DeviceConfig::default(), make()?, config).map_err(fail)?;
    let queue = device.default_queue().clone();
    let other = device.create_queue(make()?, config).map_err(fail)?;
    let mut samples = Vec::with_capacity(iterations);
    let mut traffic = Traffic::default();
    for i in 0..warmup + iterations {
        let queues = [&queue, &other];
        // Set-up (untimed), then the timed call between two snapshots of the
        // counters, inside them the thread's usage, inside that the clock.
        let began = Instant::now();
        // The counters' first snapshot falls between the submission and the
        // call: its time is taken out of the submission-plus-call figure.
        let mut snapshot = Duration::ZERO;
        let (stopped, before, after) = match api {
            Api::EventSynchronize
            | Api::EventSynchronizeBlocking
            | Api::EventSynchronizeLong
            | Api::EventSynchronizeBlockingLong => {
                if api.is_long() {
                    queue.launch(long_kernel).map_err(fail)?;
                } else {
                    queue.launch_empty().map_err(fail)?;
                }
                let event = queue.record_event().map_err(fail)?;
                let before = timed_stats(&queues, &mut snapshot);
                let timer = Timer::start();
                event.synchronize().map_err(fail)?;
                (timer.stop(), before, stats(&queues))
            }
            Api::EventQuery => {
                queue.launch_empty().map_err(fail)?;
                let event = queue.record_event().map_err(fail)?;
                event.synchronize().map_err(fail)?;
                let before = timed_stats(&queues, &mut snapshot);
                let timer = Timer::start();
                let status = event.query();
                let stopped = timer.stop();
                if status != sigretire_tracker::Status::Complete {
                    return Err(format!("a synchronized event answered {status:?}"));
                }
                (stopped, before, stats(&queues))
            }
            Api::StreamSynchronize => {
                queue.launch_empty().map_err(fail)?;
                let before = timed_stats(&queues, &mut snapshot);
                let timer = Timer::start();
                queue.synchronize().map_err(fail)?;
                (timer.stop(), before, stats(&queues))
            }
            Api::StreamSynchronizeCompleted => {
                queue.launch_empty().map_err(fail)?;
                queue.synchronize().map_err(fail)?;
                let before = timed_stats(&queues, &mut snapshot);
                let timer = Timer::start();
                queue.synchronize().map_err(fail)?;
                (timer.stop(), before, stats(&queues))
            }
            Api::DeviceSynchronize => {
                queue.launch_empty().map_err(fail)?;
                other.launch_empty().map_err(fail)?;
                let before = timed_stats(&queues, &mut snapshot);
                let timer = Timer::start();
                queue.synchronize().map_err(fail)?;
                other.synchronize().map_err(fail)?;
                (timer.stop(), before, stats(&queues))
            }
            Api::EventRecord => {
                queue.launch_empty().map_err(fail)?;
                let before = timed_stats(&queues, &mut snapshot);
                let timer = Timer::start();
                let event = queue.record_event().map_err(fail)?;
                let stopped = timer.stop();
                let after = stats(&queues);
                if i % 32 == 31 {
                    event.synchronize().map_err(fail)?;
                }
                (stopped, before, after)
            }
            Api::EventElapsedTime => {
                let first = queue.record_event().map_err(fail)?;
                queue.launch_empty().map_err(fail)?;
                let second = queue.record_event().map_err(fail)?;
                second.synchronize().map_err(fail)?;
                let before = timed_stats(&queues, &mut snapshot);
                let timer = Timer::start();
                let elapsed = first.elapsed_to(&second).map_err(fail)?;
                let stopped = timer.stop();
                std::hint::black_box(elapsed);
                (stopped, before, stats(&queues))
            }
            Api::Floor => return Err("the floor is no tracker's row".into()),
        };
        if i >= warmup {
            samples.push(if api.waits_for_submission() {
                stopped.after_submission(began + snapshot)
            } else {
                stopped.alone()
            });
            traffic.add(&before, &after);
        }
    }
    queue.synchronize().map_err(fail)?;
    other.synchronize().map_err(fail)?;
    Ok((samples, traffic))
}

/// The steady-state bars of docs/design.md section 7 for one tracker.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Steady {
    /// The tracker's own loads of its signals per retired use (device memory
    /// where the backend has it; on CUDA, pinned host memory), timestamp
    /// reads counting two, CPU waits' polls reported apart, in the runtime
    /// loop: bursts of kernels, each ended by a synchronize.
    pub device_loads_per_retired_use: f64,
    /// Polls of device-memory signals by the synchronizes' CPU waits, per use.
    pub device_polls_per_use: f64,
    /// HDP flushes per re-armed signal.
    pub flushes_per_rearm: f64,
    /// Store fences per re-armed signal.
    pub fences_per_rearm: f64,
    /// Signals created after the warm-up.
    pub signals_created_after_warmup: u64,
    /// Heap allocations per use in the tracker's calls after the warm-up.
    pub allocations_per_use: f64,
    /// The tracker's own device-memory loads per retired use when the
    /// producer outruns the GPU with no synchronize at all (the ring at its
    /// limit, back-pressure every few dozen uses): the worst steady case.
    pub saturated_device_loads_per_retired_use: f64,
    /// Uses measured (in each loop).
    pub uses: u64,
    /// Where the signals lived.
    pub signals: &'static str,
}

/// Uses between two synchronizes in the runtime loop.
pub const BURST: usize = 64;

/// The steady state of one tracker, driven directly on the backend's queue
/// (acquire, publish, and under back-pressure a wait outside any lock),
/// empty work with the barrier bit as CLR dispatches it. Two loops after
/// `warmup` uses each: the runtime loop (bursts of [`BURST`] uses, each
/// ended by a CPU wait for its last use and a poll, as a stream synchronize
/// does), which gives the bars; and a saturated loop with no wait at all.
/// `make` builds a fresh tracker for each.
pub fn steady<T: QueueTracker>(
    make: &dyn Fn() -> Result<T, String>,
    placement: Placement,
    warmup: usize,
    uses: usize,
) -> Result<Steady, String> {
    let runtime = drive(make()?, placement, warmup, uses, Some(BURST))?;
    let saturated = drive(make()?, placement, warmup, uses, None)?;
    Ok(Steady {
        saturated_device_loads_per_retired_use: saturated.device_loads_per_retired_use,
        ..runtime
    })
}

fn drive<T: QueueTracker>(
    mut tracker: T,
    placement: Placement,
    warmup: usize,
    uses: usize,
    sync_every: Option<usize>,
) -> Result<Steady, String> {
    let waiter = tracker.waiter();
    let mut before = None;
    let mut allocations = 0;
    for i in 0..warmup + uses {
        if i == warmup {
            before = Some(tracker.stats());
            allocations = alloc::allocations();
        }
        let ticket = submit_one(&mut tracker, &waiter, true)?;
        match sync_every {
            Some(n) if i % n == n - 1 => {
                waiter
                    .wait(&ticket, Duration::from_secs(30), WaitPolicy::spin())
                    .map_err(fail)?;
                alloc::counted(|| tracker.poll());
            }
            None if i % 32 == 31 => {
                alloc::counted(|| tracker.poll());
            }
            _ => {}
        }
    }
    let allocations = alloc::allocations() - allocations;
    // Let the GPU finish, then account for what retired.
    let last = submit_one(&mut tracker, &waiter, false)?;
    waiter
        .wait(&last, Duration::from_secs(30), WaitPolicy::spin())
        .map_err(fail)?;
    tracker.poll();
    let d = tracker.stats().since(&before.expect("uses > 0"));
    Ok(Steady {
        device_loads_per_retired_use: d.loads_per_retired_use(placement),
        device_polls_per_use: d.accesses[placement.index()].polls as f64 / uses as f64,
        flushes_per_rearm: d.flushes_per_rearm(),
        fences_per_rearm: d.fences_per_rearm(),
        signals_created_after_warmup: d.signals_created,
        allocations_per_use: allocations as f64 / uses as f64,
        saturated_device_loads_per_retired_use: 0.0,
        uses: uses as u64,
        signals: "",
    })
}

/// Submits one use of empty work with the barrier bit: reserve, acquire
/// (counting the tracker's allocations when `count` is set), publish; under
/// back-pressure, wait for the named use outside any lock and retry.
fn submit_one<T: QueueTracker>(
    tracker: &mut T,
    waiter: &sigretire_tracker::Waiter<T::Memory>,
    count: bool,
) -> Result<sigretire_tracker::Ticket, String> {
    let queue = tracker.queue().clone();
    let index = queue.reserve().map_err(fail)?;
    loop {
        let request = Request::packet(index).barrier(true);
        let result = if count {
            alloc::counted(|| tracker.acquire(request))
        } else {
            tracker.acquire(request)
        };
        match result {
            Ok(acquired) => {
                queue
                    .publish(acquired.publication, Work::Empty)
                    .map_err(fail)?;
                return Ok(acquired.ticket);
            }
            Err(sigretire_tracker::AcquireError::Backpressure { wait_for, .. }) => {
                waiter
                    .wait(&wait_for, Duration::from_secs(30), WaitPolicy::spin())
                    .map_err(fail)?;
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}
