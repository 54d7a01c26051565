//! `sigbench --waits`: how late a wait returns after its work ended, and
//! what it burned meanwhile, for kernels of 20 us, 100 us, 1 ms and
//! 10 ms: the queue layer's event synchronize under
//! [`WaitPolicy::spin`], [`WaitPolicy::blocking`] and
//! [`WaitPolicy::hybrid`], and, on an NVIDIA GPU, CUDA's own spinning and
//! blocking-sync `cuEventSynchronize` after the same kernel. Then the wrong
//! guess: waits trained on 1 ms kernels meet one far shorter (20 us) or far
//! longer (10 ms).
//!
//! **Late** is the time from the kernel's end to the wait's return: on the
//! simulator, the GPU clock when the wait returned less the kernel's own
//! end stamp (its ground truth, 10 ns ticks); on a GPU, the wait's return
//! less the moment an observer thread, spinning on a pinned word that a
//! one-thread kernel launched right after the work writes, saw that word
//! change (the end as the host can first see it; the flag kernel's own
//! launch, a few microseconds, is in every row alike). **CPU** is the
//! waiting thread's own (`CLOCK_THREAD_CPUTIME_ID` around the wait), and
//! its share of the wait's wall time.

use crate::measure::{Timer, fail};
use crate::platform::{Platform, preferred_device};
use crate::report::render_table;
use serde::Serialize;
use sigretire_queue::{Device, HostQueue, QueueConfig};
use sigretire_tracker::WaitPolicy;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// The kernel lengths of the steady rows.
pub const LENGTHS: [Duration; 4] = [
    Duration::from_micros(20),
    Duration::from_micros(100),
    Duration::from_millis(1),
    Duration::from_millis(10),
];

/// The kernel the wrong-guess rows train on, and the two they then meet.
const USUAL: Duration = Duration::from_millis(1);
const SHORTER: Duration = Duration::from_micros(20);
const LONGER: Duration = Duration::from_millis(10);

/// Waits on the usual kernel before each wrong-guess sample.
const TRAIN: usize = 8;

/// Untimed waits before a steady cell's timed ones.
const WARMUP: usize = 10;

/// Who waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Waiter {
    /// The queue layer's event synchronize, [`WaitPolicy::spin`].
    Spin,
    /// The same, [`WaitPolicy::blocking`] (today's sleeping wait).
    Blocking,
    /// The same, [`WaitPolicy::hybrid`].
    Hybrid,
    /// CUDA's `cuEventSynchronize` on a default (spinning) event.
    CudaSpin,
    /// CUDA's `cuEventSynchronize` on a blocking-sync event.
    CudaBlocking,
}

impl Waiter {
    const OURS: [Waiter; 3] = [Waiter::Spin, Waiter::Blocking, Waiter::Hybrid];
    const CUDAS: [Waiter; 2] = [Waiter::CudaSpin, Waiter::CudaBlocking];

    /// The row's name.
    pub fn name(self) -> &'static str {
        match self {
            Waiter::Spin => "ours spin",
            Waiter::Blocking => "ours blocking",
            Waiter::Hybrid => "ours hybrid",
            Waiter::CudaSpin => "cuda spin",
            Waiter::CudaBlocking => "cuda blocking-sync",
        }
    }

    fn policy(self) -> WaitPolicy {
        match self {
            Waiter::Spin => WaitPolicy::spin(),
            Waiter::Hybrid => WaitPolicy::hybrid(),
            _ => WaitPolicy::blocking(),
        }
    }
}

/// Which rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Case {
    /// Every wait on the same kernel.
    Steady,
    /// After waits on 1 ms kernels, a 20 us one.
    Shorter,
    /// After waits on 1 ms kernels, a 10 ms one.
    Longer,
}

/// One timed wait.
#[derive(Clone, Copy, Debug)]
pub struct WaitSample {
    /// From the kernel's end to the wait's return.
    pub late: Duration,
    /// The wait's wall time.
    pub wall: Duration,
    /// The waiting thread's CPU time during the wait.
    pub cpu: Duration,
}

/// One cell of the table.
#[derive(Clone, Debug, Serialize)]
pub struct WaitRow {
    /// Steady, or which wrong guess.
    pub case: Case,
    /// The kernel waited for, microseconds.
    pub kernel_us: f64,
    /// Who waited.
    pub waiter: Waiter,
    /// Median lateness, microseconds.
    pub late_p50_us: f64,
    /// 99th percentile of the lateness.
    pub late_p99_us: f64,
    /// Median wall time of the wait call.
    pub wall_p50_us: f64,
    /// Mean CPU time of the waiting thread per wait, microseconds.
    pub cpu_us_per_wait: f64,
    /// Mean CPU time over mean wall time of the wait, percent.
    pub cpu_percent_of_wall: f64,
    /// Timed waits.
    pub samples: usize,
}

/// Everything `--waits` measured.
#[derive(Clone, Debug, Serialize)]
pub struct WaitReport {
    /// `sim`, `rocr` or `cuda`.
    pub backend: &'static str,
    /// The machine, in words.
    pub machine: String,
    /// How lateness was measured on this backend.
    pub late_from: &'static str,
    /// Every cell.
    pub rows: Vec<WaitRow>,
    /// How long the run took, seconds.
    pub seconds: f64,
}

/// A backend the wait table runs on: how it marks a kernel's end and tells
/// how late a wait returned after it, and CUDA's own waits where it has
/// them.
pub trait WaitLab: Platform {
    /// What a launch leaves to find its kernel's end with.
    type Probe;
    /// A reading of the clock lateness is measured in.
    type Now;

    /// How lateness is measured here, in words.
    fn late_from(&self) -> &'static str;

    /// Launches `kernel` on `queue`, and what marks its end.
    fn launch_marked(
        &self,
        queue: &HostQueue<Self::Retiring>,
        kernel: u64,
    ) -> Result<Self::Probe, String>;

    /// The clock, read as a wait returns.
    fn now(&self) -> Self::Now;

    /// How long after the probed kernel's end `now` was.
    fn late(
        &self,
        queue: &HostQueue<Self::Retiring>,
        probe: Self::Probe,
        now: Self::Now,
    ) -> Result<Duration, String>;

    /// One wait of CUDA's own (`blocking`: a blocking-sync event) after
    /// `kernel`, or `None` where the backend has none.
    fn native_wait(&self, _kernel: u64, _blocking: bool) -> Option<Result<WaitSample, String>> {
        None
    }
}

/// One timed wait of ours: the kernel, an event after it, its synchronize.
fn our_wait<L: WaitLab>(
    lab: &L,
    queue: &HostQueue<L::Retiring>,
    kernel: u64,
) -> Result<WaitSample, String> {
    let probe = lab.launch_marked(queue, kernel)?;
    let event = queue.record_event().map_err(fail)?;
    let timer = Timer::start();
    event.synchronize().map_err(fail)?;
    let now = lab.now();
    let stopped = timer.stop();
    Ok(WaitSample {
        late: lab.late(queue, probe, now)?,
        wall: stopped.call,
        cpu: stopped.usage.cpu,
    })
}

fn device<L: WaitLab>(lab: &L, waiter: Waiter) -> Result<Device<L::Retiring>, String> {
    preferred_device(
        lab,
        QueueConfig {
            wait_policy: waiter.policy(),
            wait_timeout: Some(Duration::from_secs(30)),
            ..QueueConfig::default()
        },
    )
}

fn row(case: Case, kernel: Duration, waiter: Waiter, samples: &[WaitSample]) -> WaitRow {
    let sorted = |f: fn(&WaitSample) -> Duration| {
        let mut v: Vec<Duration> = samples.iter().map(f).collect();
        v.sort_unstable();
        v
    };
    let at = |v: &[Duration], q: f64| {
        let i = ((v.len().saturating_sub(1)) as f64 * q).round() as usize;
        v.get(i).map_or(0.0, |d| d.as_secs_f64() * 1e6)
    };
    let (late, wall) = (sorted(|s| s.late), sorted(|s| s.wall));
    let n = samples.len().max(1) as f64;
    let cpu: f64 = samples.iter().map(|s| s.cpu.as_secs_f64()).sum::<f64>() / n;
    let walls: f64 = samples.iter().map(|s| s.wall.as_secs_f64()).sum::<f64>() / n;
    WaitRow {
        case,
        kernel_us: kernel.as_secs_f64() * 1e6,
        waiter,
        late_p50_us: at(&late, 0.5),
        late_p99_us: at(&late, 0.99),
        wall_p50_us: at(&wall, 0.5),
        cpu_us_per_wait: cpu * 1e6,
        cpu_percent_of_wall: if walls > 0.0 {
            100.0 * cpu / walls
        } else {
            0.0
        },
        samples: samples.len(),
    }
}

/// Timed waits per cell for a kernel of `length`: `samples`, a quarter of
/// it for 10 ms kernels (at least 5).
fn samples_for(length: Duration, samples: usize) -> usize {
    if length >= Duration::from_millis(10) {
        (samples / 4).max(5)
    } else {
        samples
    }
}

/// Runs the whole table on `lab`, `samples` timed waits per cell (a
/// quarter for 10 ms kernels, a tenth for the wrong-guess rows, at least
/// 5), printing progress on stderr.
pub fn measure<L: WaitLab>(lab: &L, samples: usize) -> Result<WaitReport, String> {
    let started = Instant::now();
    let mut rows = Vec::new();
    let mut kernels = Vec::new();
    for length in LENGTHS {
        kernels.push((length, lab.long_kernel(length)?));
    }
    let kernel_of = |length: Duration| {
        kernels
            .iter()
            .find(|(l, _)| *l == length)
            .map(|(_, k)| *k)
            .expect("every length registered")
    };
    let progress = |what: String| {
        eprintln!("[waits] {what} ({:.1} s)", started.elapsed().as_secs_f64());
    };
    let has_native = lab
        .native_wait(kernel_of(SHORTER), false)
        .transpose()?
        .is_some();
    for &(length, kernel) in &kernels {
        let n = samples_for(length, samples);
        for waiter in Waiter::OURS {
            progress(format!("{} after {length:?}", waiter.name()));
            let device = device(lab, waiter)?;
            let queue = device.default_queue();
            for _ in 0..WARMUP {
                our_wait(lab, queue, kernel)?;
            }
            let timed = (0..n)
                .map(|_| our_wait(lab, queue, kernel))
                .collect::<Result<Vec<_>, _>>()?;
            rows.push(row(Case::Steady, length, waiter, &timed));
        }
        if has_native {
            for waiter in Waiter::CUDAS {
                progress(format!("{} after {length:?}", waiter.name()));
                let blocking = waiter == Waiter::CudaBlocking;
                let native = |_| {
                    lab.native_wait(kernel, blocking)
                        .expect("the backend has native waits")
                };
                (0..WARMUP.min(3)).try_for_each(|i| native(i).map(drop))?;
                let timed = (0..n).map(native).collect::<Result<Vec<_>, _>>()?;
                rows.push(row(Case::Steady, length, waiter, &timed));
            }
        }
    }
    // The wrong guesses: trained on the usual kernel, then one far off.
    let n = (samples / 10).max(5);
    for waiter in Waiter::OURS {
        progress(format!("{} on a wrong guess", waiter.name()));
        let device = device(lab, waiter)?;
        let queue = device.default_queue();
        let mut off = [
            (Case::Shorter, SHORTER, Vec::new()),
            (Case::Longer, LONGER, Vec::new()),
        ];
        for _ in 0..n {
            for (_, length, timed) in &mut off {
                for _ in 0..TRAIN {
                    our_wait(lab, queue, kernel_of(USUAL))?;
                }
                timed.push(our_wait(lab, queue, kernel_of(*length))?);
            }
        }
        for (case, length, timed) in off {
            rows.push(row(case, length, waiter, &timed));
        }
    }
    Ok(WaitReport {
        backend: lab.backend(),
        machine: lab.machine(),
        late_from: lab.late_from(),
        rows,
        seconds: started.elapsed().as_secs_f64(),
    })
}

impl WaitReport {
    fn find(&self, case: Case, kernel_us: f64, waiter: Waiter) -> Option<&WaitRow> {
        self.rows
            .iter()
            .find(|r| r.case == case && r.kernel_us == kernel_us && r.waiter == waiter)
    }

    /// The table: one row per cell, with each row's lateness beside our
    /// spin's (its excess over the spin, microseconds) and its CPU per wait
    /// beside CUDA's blocking-sync event's (or, without CUDA, our blocking
    /// wait's), as a ratio.
    pub fn table(&self, markdown: bool) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "backend: {}", self.backend);
        let _ = writeln!(out, "machine: {}", self.machine);
        let _ = writeln!(out, "late: {}", self.late_from);
        let header = [
            "case",
            "kernel",
            "waiter",
            "late p50 us",
            "late p99 us",
            "late - spin p50",
            "CPU us/wait",
            "CPU % of wall",
            "CPU / blocking ref",
            "wall p50 us",
            "samples",
        ];
        let lines: Vec<[String; 11]> = self
            .rows
            .iter()
            .map(|r| {
                let spin = self.find(Case::Steady, r.kernel_us, Waiter::Spin);
                let reference = self
                    .find(Case::Steady, r.kernel_us, Waiter::CudaBlocking)
                    .or_else(|| self.find(Case::Steady, r.kernel_us, Waiter::Blocking));
                let kernel = if r.kernel_us >= 1000.0 {
                    format!("{} ms", r.kernel_us / 1000.0)
                } else {
                    format!("{} us", r.kernel_us)
                };
                [
                    format!("{:?}", r.case).to_lowercase(),
                    kernel,
                    r.waiter.name().to_string(),
                    format!("{:.1}", r.late_p50_us),
                    format!("{:.1}", r.late_p99_us),
                    spin.map_or("-".into(), |s| {
                        format!("{:+.1}", r.late_p50_us - s.late_p50_us)
                    }),
                    format!("{:.1}", r.cpu_us_per_wait),
                    format!("{:.1}", r.cpu_percent_of_wall),
                    reference
                        .filter(|b| b.cpu_us_per_wait > 0.0)
                        .map_or("-".into(), |b| {
                            format!("{:.2}", r.cpu_us_per_wait / b.cpu_us_per_wait)
                        }),
                    format!("{:.1}", r.wall_p50_us),
                    r.samples.to_string(),
                ]
            })
            .collect();
        render_table(&mut out, &header, &lines, 3, markdown);
        let _ = writeln!(out, "({:.1} s)", self.seconds);
        out
    }
}
