//! `sigbench --callbacks`: what a completion callback and a deferred
//! release cost, ours beside CUDA's own ways on an NVIDIA GPU.
//!
//! **Callbacks.** A 100 us kernel, a callback registered after it that holds
//! its thread for 200 us of host time, then a 20 us kernel. Ours is
//! [`Command::on_complete`] on the first kernel: a watch on the queue, run
//! on the device's callback thread, with nothing enqueued in the stream for
//! it (closing its batch may arm a wake signal, whose packet is: hence a
//! row without wake signals too). CUDA's is
//! `cuLaunchHostFunc`, which sits *in* the stream: the next kernel waits
//! until the driver ran it. Two figures per row:
//!
//! - **late**: from the first kernel's end to the callback starting to
//!   run, measured as `--waits` measures a wait's lateness (the simulator's
//!   end stamp; on a GPU an observer thread that sees a flag kernel's
//!   write);
//! - **stall**: how much later the next kernel ends, after the first one's
//!   end, than without the callback (the simulator's end stamps; on a GPU
//!   two timing events, one after each kernel). Ours should be zero: the
//!   stream never waits for a callback of ours.
//!
//! **Deferred release.** Rounds of `B` blocks in flight: each block goes
//! with a 10 us kernel that reads it and is handed back as the kernel is
//! submitted; a synchronize ends the round. Ours is
//! [`Command::release_after`](sigretire_queue::Command::release_after); the
//! figure is the submitting thread's time in it per released value, and the
//! tracker's signal reads (loads, its exact counters) per released value,
//! beside the same rounds without releases: the bar is no read of its own.
//! CUDA's is the PyTorch caching allocator's: one pooled event recorded
//! after each block's work, and on every allocation `cuEventQuery` over the
//! outstanding blocks' events, oldest first, until one is not ready; the
//! figures are the time in those calls and their number per released value.

use crate::measure::fail;
use crate::platform::{Platform, preferred_device, preferred_placement};
use crate::report::render_table;
use serde::Serialize;
use sigretire_queue::{Command, Device, HostQueue, QueueConfig};
use sigretire_tracker::Tracker as _;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// The kernel a callback follows.
pub const FIRST: Duration = Duration::from_micros(100);
/// The kernel submitted after the callback.
pub const NEXT: Duration = Duration::from_micros(20);
/// Host time a callback holds its thread for.
pub const HOLD: Duration = Duration::from_micros(200);
/// The kernel each released block goes with.
pub const BLOCK_KERNEL: Duration = Duration::from_micros(10);
/// Blocks in flight per round.
pub const BLOCKS: [usize; 3] = [1, 64, 4096];

/// Untimed samples before a callback cell's timed ones.
const WARMUP: usize = 5;

/// One callback sample.
#[derive(Clone, Copy, Debug)]
pub struct CallbackSample {
    /// From the first kernel's end to the callback starting, or the
    /// awaiting task or the blocked thread running again (none without
    /// any).
    pub late: Option<Duration>,
    /// The next kernel's end less the first kernel's end.
    pub gap: Duration,
    /// The awaiting or blocked thread's CPU time over its wait (none for a
    /// callback, or without one).
    pub cpu: Option<Duration>,
}

/// How the first kernel's completion is seen in a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// A callback that holds its thread ([`Command::on_complete`]).
    Callback(Hold),
    /// A task awaiting the command ([`Command::wait_async`]) on a thread
    /// of its own that parks between polls (the smallest executor).
    Await,
    /// A thread blocked in [`Command::wait`], under the queue's policy.
    Wait,
}

/// One deferred-release cell.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReleaseSample {
    /// Values released (and seen freed).
    pub values: u64,
    /// Time the submitting thread spent releasing and reclaiming them.
    pub host: Duration,
    /// Timed windows `host` was read in (each costs two clock readings,
    /// taken off).
    pub windows: u64,
    /// Driver calls made for it (CUDA's pattern; none for ours).
    pub driver_calls: u64,
    /// The tracker's signal loads over the rounds (ours).
    pub loads: u64,
    /// The same rounds' loads without any release (ours).
    pub loads_without: u64,
}

/// A backend the callback table runs on.
pub trait CallbackLab: Platform {
    /// How lateness is measured here, in words.
    fn late_from(&self) -> &'static str;

    /// How the stall is measured here, in words.
    fn gap_from(&self) -> &'static str;

    /// How a callback holds its thread for `hold` here.
    fn hold(&self, hold: Duration) -> Hold;

    /// The same backend with its queues' wakes beside them, where that is
    /// an option (the simulator's wake relay); `None` where it is not (on
    /// CUDA every wake already runs on the queue's relay stream).
    fn with_wake_relay(&self) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }

    /// `first` on `queue`, its completion seen as `seen` says (a callback
    /// of ours registered after it, a task awaiting it, a thread blocked
    /// on it; `None`: nothing), then `next`; returns once both ran and the
    /// completion was seen.
    fn our_callback(
        &self,
        queue: &HostQueue<Self::Retiring>,
        first: u64,
        next: u64,
        seen: Option<Seen>,
    ) -> Result<CallbackSample, String>;

    /// The same with CUDA's `cuLaunchHostFunc` on a stream of its own, or
    /// `None` where the backend has none.
    fn native_callback(
        &self,
        _first: u64,
        _next: u64,
        _hold: Option<Hold>,
    ) -> Option<Result<CallbackSample, String>> {
        None
    }

    /// The PyTorch caching allocator's event pattern over `blocks` blocks
    /// for about `values` values, or `None` where the backend has none.
    fn native_release(
        &self,
        _kernel: u64,
        _blocks: usize,
        _values: usize,
    ) -> Option<Result<ReleaseSample, String>> {
        None
    }
}

/// Sees `command` complete as `seen` says, and sends `clock()` as whoever
/// sees it runs: a callback of ours ([`Command::on_complete`]) as it
/// starts, before it holds its thread; a task awaiting the command, or a
/// thread blocked on it, as it runs again, with its CPU time over the wait.
pub fn stamp_when_seen<M, N>(
    command: &Arc<Command<M>>,
    clock: impl Fn() -> N + Send + 'static,
    seen: Seen,
) -> Receiver<(N, Option<Duration>)>
where
    M: sigretire_tracker::backend::SignalMemory,
    Command<M>: Send + Sync + 'static,
    N: Send + 'static,
{
    let (send, stamps) = channel();
    match seen {
        Seen::Callback(hold) => command.on_complete(move |_| {
            let _ = send.send((clock(), None));
            hold.hold();
        }),
        Seen::Await | Seen::Wait => {
            let (command, future) = (command.clone(), command.wait_async());
            std::thread::spawn(move || {
                let before = crate::cpu::thread_usage();
                let _ = match seen {
                    Seen::Await => block_on(future),
                    _ => command.wait(),
                };
                let now = clock();
                let cpu = crate::cpu::thread_usage_closing().since(&before).cpu;
                let _ = send.send((now, Some(cpu)));
            });
        }
    }
    stamps
}

/// The smallest executor: polls `future` on this thread, parking between
/// wakes (no executor dependency, and nothing of the library's own).
///
/// ```
/// assert_eq!(sigretire_bench::callbacks::block_on(async { 7 }), 7);
/// ```
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park();
    }
}

/// What a callback does with its thread for [`HOLD`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    /// Busy host work: on a GPU, whose work runs without the host's cores.
    Spin(Duration),
    /// A sleep: on the simulator, whose GPU is a host thread that a
    /// spinning callback would take a core from (this machine has two).
    Sleep(Duration),
}

impl Hold {
    fn name(self) -> &'static str {
        match self {
            Hold::Spin(_) => "spin",
            Hold::Sleep(_) => "sleep",
        }
    }

    /// Holds the calling thread.
    pub fn hold(self) {
        match self {
            Hold::Spin(hold) => {
                let start = Instant::now();
                while start.elapsed() < hold {
                    std::hint::spin_loop();
                }
            }
            Hold::Sleep(hold) => std::thread::sleep(hold),
        }
    }
}

/// The callback's stamp, once the callback returned (its sender dropped,
/// so that the next sample's callback does not queue behind this one), or
/// an error after 30 s.
pub fn stamp<N>(stamps: &Receiver<N>) -> Result<N, String> {
    let now = stamps
        .recv_timeout(Duration::from_secs(30))
        .map_err(|_| "a completion callback never ran".to_string())?;
    match stamps.recv_timeout(Duration::from_secs(30)) {
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Ok(now),
        _ => Err("a completion callback never returned".to_string()),
    }
}

/// Who ran the callback, or released the values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Who {
    /// The queue layer: `on_complete` / `release_after`.
    Ours,
    /// The queue layer without wake signals (`QueueConfig::wake_signals`
    /// 0): a closed batch puts no wake packet behind its fence, and the
    /// completion thread polls.
    OursNoWake,
    /// CUDA: `cuLaunchHostFunc` / the caching allocator's event queries.
    Cuda,
    /// The queue layer with the backend's wakes beside its queues (the
    /// simulator's wake relay), where that is an option.
    OursRelay,
    /// A task awaiting the command ([`Command::wait_async`]).
    OursAwait,
    /// A thread blocked in [`Command::wait`].
    OursWait,
}

impl Who {
    fn name(self, release: bool) -> &'static str {
        match (self, release) {
            (Who::Ours, false) => "ours on_complete",
            (Who::OursNoWake, false) => "ours on_complete, no wake signals",
            (Who::OursNoWake, true) => "ours release_after, no wake signals",
            (Who::Cuda, false) => "cuda cuLaunchHostFunc",
            (Who::Ours, true) => "ours release_after",
            (Who::Cuda, true) => "cuda event per block",
            (Who::OursRelay, _) => "ours on_complete, wake relay",
            (Who::OursAwait, _) => "ours await (wait_async)",
            (Who::OursWait, _) => "ours thread blocked in wait",
        }
    }
}

/// One callback row.
#[derive(Clone, Debug, Serialize)]
pub struct CallbackRow {
    /// Who ran it.
    pub who: Who,
    /// From the first kernel's end to the callback starting, median, us.
    pub late_p50_us: f64,
    /// Its 99th percentile.
    pub late_p99_us: f64,
    /// The next kernel's end after the first's, median, with the callback.
    pub gap_p50_us: f64,
    /// The same without a callback.
    pub gap_without_p50_us: f64,
    /// How much later the next kernel ended for the callback, median, us.
    pub stall_p50_us: f64,
    /// Its 99th percentile (p99 with less p50 without).
    pub stall_p99_us: f64,
    /// The awaiting or blocked thread's CPU per completion seen, median,
    /// us (none for callbacks).
    pub waiter_cpu_p50_us: Option<f64>,
    /// Timed samples with the callback.
    pub samples: usize,
}

/// One deferred-release row.
#[derive(Clone, Debug, Serialize)]
pub struct ReleaseRow {
    /// Who released.
    pub who: Who,
    /// Blocks in flight per round.
    pub blocks: usize,
    /// Values released.
    pub values: u64,
    /// Host time per released value, nanoseconds (the clock readings
    /// around each timed window taken off).
    pub host_ns_per_value: f64,
    /// Driver calls per released value (CUDA's pattern).
    pub driver_calls_per_value: Option<f64>,
    /// The tracker's signal loads per released value (ours).
    pub loads_per_value: Option<f64>,
    /// The same rounds without releases: loads per value.
    pub loads_without_per_value: Option<f64>,
}

/// Everything `--callbacks` measured.
#[derive(Clone, Debug, Serialize)]
pub struct CallbackReport {
    /// `sim` or `cuda`.
    pub backend: &'static str,
    /// The machine, in words.
    pub machine: String,
    /// Where the tracker's signals live in the release rows.
    pub signals: &'static str,
    /// How lateness was measured.
    pub late_from: &'static str,
    /// How the stall was measured.
    pub gap_from: &'static str,
    /// How each callback holds its thread: `spin` or `sleep`.
    pub hold: &'static str,
    /// For how long, microseconds.
    pub hold_us: f64,
    /// The callback rows.
    pub callbacks: Vec<CallbackRow>,
    /// The deferred-release rows.
    pub releases: Vec<ReleaseRow>,
    /// What the clock readings of one timed window cost, nanoseconds
    /// (taken off the release rows' host time).
    pub clock_floor_ns: f64,
    /// How long the run took, seconds.
    pub seconds: f64,
}

/// A device of ours on `lab` (its preferred placement), with `wake_signals`.
fn device<L: Platform>(lab: &L, wake_signals: usize) -> Result<Device<L::Retiring>, String> {
    preferred_device(
        lab,
        QueueConfig {
            wait_timeout: Some(Duration::from_secs(30)),
            wake_signals,
            ..QueueConfig::default()
        },
    )
}

fn micros(v: &[Duration], q: f64) -> f64 {
    let i = ((v.len().saturating_sub(1)) as f64 * q).round() as usize;
    v.get(i).map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

/// `run` with the completion seen as `seen` says and without,
/// alternately: `WARMUP` pairs, then `samples` pairs, answered apart.
fn paired<S: Copy>(
    samples: usize,
    seen: S,
    run: impl Fn(Option<S>) -> Result<CallbackSample, String>,
) -> Result<(Vec<CallbackSample>, Vec<CallbackSample>), String> {
    for _ in 0..WARMUP {
        run(Some(seen))?;
        run(None)?;
    }
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        with.push(run(Some(seen))?);
        without.push(run(None)?);
    }
    Ok((with, without))
}

fn callback_row(who: Who, with: &[CallbackSample], without: &[CallbackSample]) -> CallbackRow {
    let sorted = |samples: &[CallbackSample], f: fn(&CallbackSample) -> Option<Duration>| {
        let mut v: Vec<Duration> = samples.iter().filter_map(f).collect();
        v.sort_unstable();
        v
    };
    let late = sorted(with, |s| s.late);
    let gap = sorted(with, |s| Some(s.gap));
    let base = sorted(without, |s| Some(s.gap));
    let cpu = sorted(with, |s| s.cpu);
    CallbackRow {
        who,
        late_p50_us: micros(&late, 0.5),
        late_p99_us: micros(&late, 0.99),
        gap_p50_us: micros(&gap, 0.5),
        gap_without_p50_us: micros(&base, 0.5),
        stall_p50_us: micros(&gap, 0.5) - micros(&base, 0.5),
        stall_p99_us: micros(&gap, 0.99) - micros(&base, 0.5),
        waiter_cpu_p50_us: (!cpu.is_empty()).then(|| micros(&cpu, 0.5)),
        samples: with.len(),
    }
}

/// A value whose drop counts itself: a block back on a free list.
struct Block(Arc<AtomicU64>);

impl Drop for Block {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
}

/// Ours: rounds of `blocks` kernels, each with a block released after it
/// (or none: `release` false), a synchronize after each round.
fn our_rounds<L: Platform>(
    lab: &L,
    kernel: u64,
    blocks: usize,
    values: usize,
    release: bool,
) -> Result<ReleaseSample, String> {
    let device = device(lab, QueueConfig::default().wake_signals)?;
    let queue = device.default_queue();
    let rounds = (values / blocks).max(2);
    let freed = Arc::new(AtomicU64::new(0));
    let placement = preferred_placement(lab).index();
    // A warm-up round: signals created, threads started.
    for _ in 0..blocks.min(64) {
        queue.launch(kernel).map_err(fail)?;
    }
    queue.synchronize().map_err(fail)?;
    let before = queue.with_tracker(|t| t.stats()).accesses[placement].loads;
    let mut host = Duration::ZERO;
    let mut windows = 0;
    for _ in 0..rounds {
        for _ in 0..blocks {
            let command = queue.launch(kernel).map_err(fail)?;
            if release {
                let block = Block(freed.clone());
                let start = Instant::now();
                command.release_after(block);
                host += start.elapsed();
                windows += 1;
            }
        }
        queue.synchronize().map_err(fail)?;
    }
    let loads = queue.with_tracker(|t| t.stats()).accesses[placement].loads - before;
    let released = (rounds * blocks) as u64;
    if release {
        // Dropped by whoever completed the last batch: wait for it.
        let deadline = Instant::now() + Duration::from_secs(30);
        while freed.load(Ordering::Acquire) < released {
            if Instant::now() > deadline {
                return Err(format!(
                    "{} of {released} released values were never freed",
                    released - freed.load(Ordering::Acquire)
                ));
            }
            std::thread::yield_now();
        }
    }
    Ok(ReleaseSample {
        values: released,
        host,
        windows,
        driver_calls: 0,
        loads,
        loads_without: 0,
    })
}

/// What one timed window (`Instant::now` and `elapsed`) costs on this
/// machine, the median of 101 batches.
fn clock_floor() -> Duration {
    let mut batches: Vec<Duration> = (0..101)
        .map(|_| {
            let outer = Instant::now();
            for _ in 0..1000 {
                std::hint::black_box(Instant::now().elapsed());
            }
            outer.elapsed() / 1000
        })
        .collect();
    batches.sort_unstable();
    batches[batches.len() / 2]
}

fn release_row(who: Who, blocks: usize, s: ReleaseSample, floor: Duration) -> ReleaseRow {
    let n = s.values.max(1) as f64;
    let floor = floor.as_secs_f64() * s.windows as f64;
    ReleaseRow {
        who,
        blocks,
        values: s.values,
        host_ns_per_value: (s.host.as_secs_f64() - floor).max(0.0) * 1e9 / n,
        driver_calls_per_value: (who == Who::Cuda).then(|| s.driver_calls as f64 / n),
        loads_per_value: (who != Who::Cuda).then(|| s.loads as f64 / n),
        loads_without_per_value: (who != Who::Cuda).then(|| s.loads_without as f64 / n),
    }
}

/// Runs the whole table on `lab`: `samples` timed callbacks per row, about
/// `values` released values per cell; progress on stderr.
pub fn measure<L: CallbackLab>(
    lab: &L,
    samples: usize,
    values: usize,
) -> Result<CallbackReport, String> {
    let started = Instant::now();
    let progress = |what: &str| {
        eprintln!(
            "[callbacks] {what} ({:.1} s)",
            started.elapsed().as_secs_f64()
        );
    };
    let first = lab.long_kernel(FIRST)?;
    let next = lab.long_kernel(NEXT)?;
    let hold = lab.hold(HOLD);
    let block_kernel = lab.long_kernel(BLOCK_KERNEL)?;
    let mut callbacks = Vec::new();

    for (who, wake_signals) in [
        (Who::Ours, QueueConfig::default().wake_signals),
        (Who::OursNoWake, 0),
    ] {
        progress(who.name(false));
        let device = device(lab, wake_signals)?;
        let queue = device.default_queue();
        let (with, without) = paired(samples, Seen::Callback(hold), |seen| {
            lab.our_callback(queue, first, next, seen)
        })?;
        callbacks.push(callback_row(who, &with, &without));
    }
    if let Some(relayed) = lab.with_wake_relay() {
        progress(Who::OursRelay.name(false));
        let device = device(&relayed, QueueConfig::default().wake_signals)?;
        let queue = device.default_queue();
        let (with, without) = paired(samples, Seen::Callback(hold), |seen| {
            relayed.our_callback(queue, first, next, seen)
        })?;
        callbacks.push(callback_row(Who::OursRelay, &with, &without));
    }
    // The same completion awaited, and waited for by a blocked thread,
    // with the queue's defaults.
    for (who, seen) in [(Who::OursAwait, Seen::Await), (Who::OursWait, Seen::Wait)] {
        progress(who.name(false));
        let device = device(lab, QueueConfig::default().wake_signals)?;
        let queue = device.default_queue();
        let (with, without) = paired(samples, seen, |seen| {
            lab.our_callback(queue, first, next, seen)
        })?;
        callbacks.push(callback_row(who, &with, &without));
    }

    if lab
        .native_callback(first, next, None)
        .transpose()?
        .is_some()
    {
        progress("cuda cuLaunchHostFunc");
        let (with, without) = paired(samples, hold, |hold| {
            lab.native_callback(first, next, hold)
                .expect("the backend has host functions")
        })?;
        callbacks.push(callback_row(Who::Cuda, &with, &without));
    }

    let mut releases = Vec::new();
    let floor = clock_floor();
    for blocks in BLOCKS {
        progress(&format!("ours release_after, {blocks} blocks in flight"));
        let mut sample = our_rounds(lab, block_kernel, blocks, values, true)?;
        sample.loads_without = our_rounds(lab, block_kernel, blocks, values, false)?.loads;
        releases.push(release_row(Who::Ours, blocks, sample, floor));
        if let Some(native) = lab.native_release(block_kernel, blocks, values) {
            progress(&format!("cuda event per block, {blocks} blocks in flight"));
            releases.push(release_row(Who::Cuda, blocks, native?, floor));
        }
    }
    Ok(CallbackReport {
        backend: lab.backend(),
        machine: lab.machine(),
        signals: match preferred_placement(lab) {
            sigretire_tracker::Placement::Host => "host",
            sigretire_tracker::Placement::Device => "device",
        },
        late_from: lab.late_from(),
        gap_from: lab.gap_from(),
        hold: hold.name(),
        hold_us: HOLD.as_secs_f64() * 1e6,
        callbacks,
        releases,
        clock_floor_ns: floor.as_secs_f64() * 1e9,
        seconds: started.elapsed().as_secs_f64(),
    })
}

fn ratio(ours: f64, theirs: f64) -> String {
    if ours > 0.0 && theirs > 0.0 {
        format!("{:.2}", theirs / ours)
    } else {
        "-".into()
    }
}

impl CallbackReport {
    /// Both tables: callbacks (lateness and the next kernel's stall, each
    /// with CUDA's over ours where both ran), then deferred release per
    /// blocks in flight (CUDA's host time over ours).
    pub fn table(&self, markdown: bool) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "backend: {}", self.backend);
        let _ = writeln!(out, "machine: {}", self.machine);
        let _ = writeln!(out, "late: {}", self.late_from);
        let _ = writeln!(out, "stall: {}", self.gap_from);
        let _ = writeln!(
            out,
            "callbacks: a {} us kernel, a callback after it that holds its thread ({} {} us), a {} us kernel",
            FIRST.as_micros(),
            self.hold,
            self.hold_us,
            NEXT.as_micros()
        );
        let ours = self.callbacks.iter().find(|r| r.who == Who::Ours);
        let lines: Vec<Vec<String>> = self
            .callbacks
            .iter()
            .map(|r| {
                vec![
                    r.who.name(false).to_string(),
                    format!("{:.1}", r.late_p50_us),
                    format!("{:.1}", r.late_p99_us),
                    ours.map_or("-".into(), |o| ratio(o.late_p50_us, r.late_p50_us)),
                    format!("{:.1}", r.gap_without_p50_us),
                    format!("{:.1}", r.gap_p50_us),
                    format!("{:+.1}", r.stall_p50_us),
                    format!("{:+.1}", r.stall_p99_us),
                    r.waiter_cpu_p50_us
                        .map_or("-".into(), |cpu| format!("{cpu:.1}")),
                    r.samples.to_string(),
                ]
            })
            .collect();
        render_table(
            &mut out,
            &[
                "callback",
                "late p50 us",
                "late p99 us",
                "late / ours",
                "next end, none us",
                "next end, with us",
                "stall p50 us",
                "stall p99 us",
                "waiter CPU p50 us",
                "samples",
            ],
            &lines,
            1,
            markdown,
        );
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "deferred release: rounds of B blocks, a {} us kernel each, a synchronize per round; signals in {} memory",
            BLOCK_KERNEL.as_micros(),
            self.signals
        );
        let opt = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}"));
        let lines: Vec<Vec<String>> = self
            .releases
            .iter()
            .map(|r| {
                let ours = self
                    .releases
                    .iter()
                    .find(|o| o.who == Who::Ours && o.blocks == r.blocks);
                vec![
                    r.who.name(true).to_string(),
                    r.blocks.to_string(),
                    format!("{:.1}", r.host_ns_per_value),
                    ours.map_or("-".into(), |o| {
                        ratio(o.host_ns_per_value, r.host_ns_per_value)
                    }),
                    opt(r.driver_calls_per_value),
                    opt(r.loads_per_value),
                    opt(r.loads_without_per_value),
                    r.values.to_string(),
                ]
            })
            .collect();
        render_table(
            &mut out,
            &[
                "release",
                "blocks",
                "host ns/value",
                "host / ours",
                "driver calls/value",
                "loads/value",
                "loads/value, no release",
                "values",
            ],
            &lines,
            1,
            markdown,
        );
        let _ = writeln!(out, "({:.1} s)", self.seconds);
        out
    }
}
