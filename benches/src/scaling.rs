//! `sigbench --wait-scaling`: whether waiting slows anyone else, and
//! whether many queues cost more per operation than one.
//!
//! - **Submission while K threads wait**: one thread submits in bursts of
//!   64 (launch + event record, and launch alone; a synchronize between
//!   bursts, not timed) for a fixed time, while K = 0, 1, 4, 16 other
//!   threads, each on its own queue, wait in a loop (a 1 ms kernel, an
//!   event, its synchronize). Ours: our submitter, our waiters spinning
//!   ([`WaitPolicy::spin`]) or hybrid ([`WaitPolicy::hybrid`]); on an
//!   NVIDIA GPU also CUDA's: `cuLaunchKernel` + `cuEventRecord` while the
//!   waiters loop on `cuEventSynchronize` (a spinning event) or poll
//!   `cuEventQuery`. Submissions per second, and the ratio to K = 0.
//! - **Many queues**: 1, 8 and 64 queues of one device, one thread each,
//!   looping launch (empty work) + event record + event synchronize for a
//!   fixed time: the mean cost per operation (a thread's time over its
//!   operations), and the ratio to one queue. Ours spinning and blocking,
//!   and CUDA's with a default event; and ours from one thread that goes
//!   round the N queues (launch + record on each, then each event's
//!   synchronize): the queues' state without the threads.
//!
//! On the project's 2-core machine the simulator's figures say little
//! (sixteen waiters and the simulated GPU share two cores); they show the
//! mode runs.

use crate::cpu::{thread_usage, thread_usage_closing};
use crate::measure::fail;
use crate::platform::{Platform, preferred_device, preferred_tracker};
use crate::report::render_table;
use serde::Serialize;
use sigretire_queue::{Device, HostQueue, QueueConfig};
use sigretire_tracker::WaitPolicy;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The waiter counts of the submission table.
pub const WAITERS: [usize; 4] = [0, 1, 4, 16];
/// The queue counts of the many-queues table.
pub const QUEUES: [usize; 3] = [1, 8, 64];
/// Submissions per timed burst.
pub const BURST: usize = 64;
/// How long the waiters' kernels run.
pub const WAITER_KERNEL: Duration = Duration::from_millis(1);

/// A backend's own calls for the scaling tables, where it has them.
pub trait NativeScaling {
    /// Submits `BURST` empty launches (each followed by an event record
    /// when `record`) and answers how long the submissions took (the
    /// drain after them not counted).
    fn submit_burst(&self, record: bool) -> Result<Duration, String>;
    /// Waits in a loop on a stream of its own until `stop`: `kernel`, an
    /// event, then `cuEventSynchronize` (or, `query`, `cuEventQuery` until
    /// it answers done).
    fn waiter_loop(&self, kernel: u64, query: bool, stop: &AtomicBool) -> Result<u64, String>;
    /// On a stream of its own, launch + event record + event synchronize
    /// until `stop`; answers the operations done.
    fn sync_loop(&self, stop: &AtomicBool) -> Result<u64, String>;
}

/// A backend the scaling tables run on.
pub trait ScalingLab: Platform + Sync {
    /// CUDA's own calls, or `None`.
    fn native_scaling(&self) -> Option<&(dyn NativeScaling + Sync)> {
        None
    }
}

/// One cell.
#[derive(Clone, Debug, Serialize)]
pub struct ScalingRow {
    /// `submit_with_waiters` or `queues`.
    pub table: &'static str,
    /// Who submits and waits (`ours spin`, `cuda query`, ...).
    pub who: String,
    /// What is submitted (`launch+record`, `launch`; `launch+record+sync`).
    pub op: &'static str,
    /// K waiters, or the number of queues.
    pub n: usize,
    /// Operations per second of the submitting thread (the submission
    /// table), or of all threads together (the queues table).
    pub ops_per_s: f64,
    /// Mean microseconds per operation of one thread.
    pub us_per_op: f64,
    /// `us_per_op` over the same row's at K = 0 (or one queue).
    pub ratio_to_first: f64,
    /// The queues table: every thread's CPU time over every operation,
    /// microseconds (`None` in the submission table). What the library
    /// costs per operation, where `us_per_op` also counts the wait for a
    /// GPU that N threads share.
    pub cpu_us_per_op: Option<f64>,
    /// `cpu_us_per_op` over the same row's at one queue.
    pub cpu_ratio_to_first: Option<f64>,
    /// The queues table: the median time of one launch + event record,
    /// over every thread's operations, microseconds: the submission's own
    /// cost (its locks included), apart from the synchronize's wait for a
    /// GPU the threads share. A median, so the rare window a preemption
    /// lands in does not count.
    pub submit_p50_us: Option<f64>,
    /// `submit_p50_us` over the same row's at one queue.
    pub submit_ratio_to_first: Option<f64>,
}

/// Everything `--wait-scaling` measured.
#[derive(Clone, Debug, Serialize)]
pub struct ScalingReport {
    /// `sim` or `cuda`.
    pub backend: &'static str,
    /// The machine, in words.
    pub machine: String,
    /// How long each cell ran, milliseconds.
    pub cell_ms: f64,
    /// Every cell.
    pub rows: Vec<ScalingRow>,
    /// How long the run took, seconds.
    pub seconds: f64,
}

/// Runs `work(i, stop)` for `i` in `0..n`, each on a thread of its own,
/// for `cell`, then raises `stop` and answers what each counted.
fn one_thread_each<F, R>(n: usize, cell: Duration, work: F) -> Result<Vec<R>, String>
where
    F: Fn(usize, &AtomicBool) -> Result<R, String> + Sync,
    R: Send,
{
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (stop, work) = (&stop, &work);
                s.spawn(move || work(i, stop))
            })
            .collect();
        std::thread::sleep(cell);
        stop.store(true, Ordering::Relaxed);
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| "a measuring thread panicked".to_string())?
            })
            .collect()
    })
}

fn queue_config(policy: WaitPolicy) -> QueueConfig {
    QueueConfig {
        wait_policy: policy,
        wait_timeout: Some(Duration::from_secs(30)),
        ..QueueConfig::default()
    }
}

fn device<L: ScalingLab>(lab: &L, policy: WaitPolicy) -> Result<Device<L::Retiring>, String> {
    preferred_device(lab, queue_config(policy))
}

/// Our submitter's bursts for `cell`: the submissions' time and count.
fn our_submitter<T: sigretire_queue::QueueTracker>(
    queue: &HostQueue<T>,
    record: bool,
    cell: Duration,
) -> Result<(Duration, u64), String> {
    let started = Instant::now();
    let (mut spent, mut ops) = (Duration::ZERO, 0u64);
    while started.elapsed() < cell {
        let burst = Instant::now();
        for _ in 0..BURST {
            queue.launch_empty().map_err(fail)?;
            if record {
                drop(queue.record_event().map_err(fail)?);
            }
        }
        spent += burst.elapsed();
        ops += BURST as u64;
        queue.synchronize().map_err(fail)?;
    }
    Ok((spent, ops))
}

/// One of our waiters: its own queue, a kernel, an event, its synchronize,
/// until `stop`.
fn our_waiter<T: sigretire_queue::QueueTracker>(
    queue: &HostQueue<T>,
    kernel: u64,
    stop: &AtomicBool,
) -> Result<u64, String> {
    let mut waits = 0;
    while !stop.load(Ordering::Relaxed) {
        queue.launch(kernel).map_err(fail)?;
        queue
            .record_event()
            .map_err(fail)?
            .synchronize()
            .map_err(fail)?;
        waits += 1;
    }
    Ok(waits)
}

fn row(
    table: &'static str,
    who: &str,
    op: &'static str,
    n: usize,
    ops: f64,
    us: f64,
) -> ScalingRow {
    ScalingRow {
        table,
        who: who.to_string(),
        op,
        n,
        ops_per_s: ops,
        us_per_op: us,
        ratio_to_first: 1.0,
        cpu_us_per_op: None,
        cpu_ratio_to_first: None,
        submit_p50_us: None,
        submit_ratio_to_first: None,
    }
}

/// Runs both tables on `lab`, each cell for `cell`.
pub fn measure<L: ScalingLab>(lab: &L, cell: Duration) -> Result<ScalingReport, String> {
    let started = Instant::now();
    let kernel = lab.long_kernel(WAITER_KERNEL)?;
    let mut rows = Vec::new();
    let progress = |what: String| {
        eprintln!(
            "[scaling] {what} ({:.1} s)",
            started.elapsed().as_secs_f64()
        );
    };
    // Submission while K threads wait.
    for (who, policy) in [
        ("ours spin", WaitPolicy::spin()),
        ("ours hybrid", WaitPolicy::hybrid()),
    ] {
        for record in [true, false] {
            let op = if record { "launch+record" } else { "launch" };
            for k in WAITERS {
                progress(format!("{who}: {op} with {k} waiting"));
                let submitter = device(lab, WaitPolicy::spin())?;
                let waiters = (0..k)
                    .map(|_| device(lab, policy))
                    .collect::<Result<Vec<_>, _>>()?;
                let stop = AtomicBool::new(false);
                let (spent, ops) = std::thread::scope(|s| {
                    let handles: Vec<_> = waiters
                        .iter()
                        .map(|d| {
                            let (queue, stop) = (d.default_queue(), &stop);
                            s.spawn(move || our_waiter(queue, kernel, stop))
                        })
                        .collect();
                    let submitted = our_submitter(submitter.default_queue(), record, cell);
                    stop.store(true, Ordering::Relaxed);
                    for h in handles {
                        h.join().map_err(|_| "a waiter panicked")??;
                    }
                    submitted
                })?;
                let us = spent.as_secs_f64() * 1e6 / ops.max(1) as f64;
                rows.push(row("submit_with_waiters", who, op, k, 1e6 / us, us));
            }
        }
    }
    if let Some(native) = lab.native_scaling() {
        for (who, query) in [("cuda sync", false), ("cuda query", true)] {
            for record in [true, false] {
                let op = if record { "launch+record" } else { "launch" };
                for k in WAITERS {
                    progress(format!("{who}: {op} with {k} waiting"));
                    let stop = AtomicBool::new(false);
                    let (spent, ops) = std::thread::scope(|s| {
                        let handles: Vec<_> = (0..k)
                            .map(|_| {
                                let stop = &stop;
                                s.spawn(move || native.waiter_loop(kernel, query, stop))
                            })
                            .collect();
                        let mut result = Ok((Duration::ZERO, 0u64));
                        let begun = Instant::now();
                        while begun.elapsed() < cell {
                            match native.submit_burst(record) {
                                Ok(took) => {
                                    if let Ok((spent, ops)) = &mut result {
                                        *spent += took;
                                        *ops += BURST as u64;
                                    }
                                }
                                Err(e) => {
                                    result = Err(e);
                                    break;
                                }
                            }
                        }
                        stop.store(true, Ordering::Relaxed);
                        for h in handles {
                            h.join().map_err(|_| "a waiter panicked")??;
                        }
                        result
                    })?;
                    let us = spent.as_secs_f64() * 1e6 / ops.max(1) as f64;
                    rows.push(row("submit_with_waiters", who, op, k, 1e6 / us, us));
                }
            }
        }
    }
    // Many queues, one thread each.
    for (who, policy) in [
        ("ours spin", WaitPolicy::spin()),
        ("ours blocking", WaitPolicy::blocking()),
    ] {
        for n in QUEUES {
            progress(format!("{who}: {n} queues"));
            let set = QueueSet::new(lab, policy, n)?;
            let all = set.all();
            let begun = Instant::now();
            let ops = one_thread_each(all.len(), cell, |i, stop| {
                let queue = all[i];
                let mut ops = 0;
                let mut submits = Vec::with_capacity(1 << 14);
                let before = thread_usage();
                while !stop.load(Ordering::Relaxed) {
                    submit_timed(queue, &mut submits)?
                        .synchronize()
                        .map_err(fail)?;
                    ops += 1;
                }
                let cpu = thread_usage_closing().since(&before).cpu;
                Ok(QueueThread { ops, cpu, submits })
            })?;
            rows.push(queues_row(who, n, &ops, begun.elapsed()));
        }
    }
    // The same queues from one thread, round robin: what N queues' state
    // costs a submission with no other thread to share the cores with.
    let who = "ours spin, one thread";
    for n in QUEUES {
        progress(format!("{who}: {n} queues"));
        let policy = WaitPolicy::spin();
        let set = QueueSet::new(lab, policy, n)?;
        let all = set.all();
        let begun = Instant::now();
        let (mut ops, mut submits, mut events) = (0, Vec::with_capacity(1 << 14), Vec::new());
        let before = thread_usage();
        while begun.elapsed() < cell {
            for queue in &all {
                events.push(submit_timed(queue, &mut submits)?);
            }
            for event in events.drain(..) {
                event.synchronize().map_err(fail)?;
                ops += 1;
            }
        }
        let cpu = thread_usage_closing().since(&before).cpu;
        let one = [QueueThread { ops, cpu, submits }];
        rows.push(queues_row(who, n, &one, begun.elapsed()));
    }
    if let Some(native) = lab.native_scaling() {
        for n in QUEUES {
            progress(format!("cuda: {n} streams"));
            let begun = Instant::now();
            let ops = one_thread_each(n, cell, |_, stop| {
                let before = thread_usage();
                let ops = native.sync_loop(stop)?;
                let cpu = thread_usage_closing().since(&before).cpu;
                Ok(QueueThread {
                    ops,
                    cpu,
                    submits: Vec::new(),
                })
            })?;
            rows.push(queues_row("cuda default event", n, &ops, begun.elapsed()));
        }
    }
    // Ratios to each series' first cell.
    let firsts: Vec<ScalingRow> = rows
        .iter()
        .filter(|r| r.n == WAITERS[0] || (r.table == "queues" && r.n == QUEUES[0]))
        .cloned()
        .collect();
    for r in &mut rows {
        if let Some(first) = firsts
            .iter()
            .find(|f| f.who == r.who && f.op == r.op && f.table == r.table)
        {
            r.ratio_to_first = r.us_per_op / first.us_per_op;
            r.cpu_ratio_to_first = r
                .cpu_us_per_op
                .zip(first.cpu_us_per_op)
                .map(|(cpu, first)| cpu / first);
            r.submit_ratio_to_first = r
                .submit_p50_us
                .zip(first.submit_p50_us)
                .map(|(p50, first)| p50 / first);
        }
    }
    Ok(ScalingReport {
        backend: lab.backend(),
        machine: lab.machine(),
        cell_ms: cell.as_secs_f64() * 1e3,
        rows,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// N queues of one device: its default queue and N - 1 created ones.
struct QueueSet<T: sigretire_queue::QueueTracker> {
    device: Device<T>,
    created: Vec<HostQueue<T>>,
}

impl<T: sigretire_queue::QueueTracker> QueueSet<T> {
    fn new<L: ScalingLab<Retiring = T>>(
        lab: &L,
        policy: WaitPolicy,
        n: usize,
    ) -> Result<Self, String> {
        let device = device(lab, policy)?;
        let created = (1..n)
            .map(|_| {
                device
                    .create_queue(preferred_tracker(lab)?, queue_config(policy))
                    .map_err(fail)
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { device, created })
    }

    /// Every queue, the default one first.
    fn all(&self) -> Vec<&HostQueue<T>> {
        std::iter::once(self.device.default_queue())
            .chain(&self.created)
            .collect()
    }
}

/// Launches empty work and records an event on `queue`, and adds how long
/// the two took to `submits`; answers the event.
fn submit_timed<T: sigretire_queue::QueueTracker>(
    queue: &HostQueue<T>,
    submits: &mut Vec<Duration>,
) -> Result<sigretire_queue::Event<T>, String> {
    let submit = Instant::now();
    queue.launch_empty().map_err(fail)?;
    let event = queue.record_event().map_err(fail)?;
    submits.push(submit.elapsed());
    Ok(event)
}

/// What one thread of the queues table counted.
struct QueueThread {
    ops: u64,
    /// Its CPU time over the cell.
    cpu: Duration,
    /// Each launch + record's time (ours only).
    submits: Vec<Duration>,
}

/// A row of the queues table from each thread's operations and CPU time.
fn queues_row(who: &str, n: usize, threads: &[QueueThread], took: Duration) -> ScalingRow {
    let total: u64 = threads.iter().map(|t| t.ops).sum();
    let cpu: Duration = threads.iter().map(|t| t.cpu).sum();
    let mut submits: Vec<Duration> = threads
        .iter()
        .flat_map(|t| t.submits.iter().copied())
        .collect();
    submits.sort_unstable();
    let submit_p50 = submits
        .get(submits.len() / 2)
        .map(|p50| p50.as_secs_f64() * 1e6);
    let seconds = took.as_secs_f64();
    let per_op = |spent: Duration| spent.as_secs_f64() * 1e6 / total.max(1) as f64;
    // A thread's time over its operations, averaged over the threads.
    let us = threads
        .iter()
        .map(|t| seconds * 1e6 / t.ops.max(1) as f64)
        .sum::<f64>()
        / threads.len().max(1) as f64;
    ScalingRow {
        cpu_us_per_op: Some(per_op(cpu)),
        submit_p50_us: submit_p50,
        ..row(
            "queues",
            who,
            "launch+record+sync",
            n,
            total as f64 / seconds,
            us,
        )
    }
}

impl ScalingReport {
    /// The two tables.
    pub fn table(&self, markdown: bool) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "backend: {}", self.backend);
        let _ = writeln!(out, "machine: {}", self.machine);
        for (table, title, n) in [
            (
                "submit_with_waiters",
                "one submitting thread while K threads wait",
                "K",
            ),
            ("queues", "N queues, one thread each", "N"),
        ] {
            let _ = writeln!(out, "\n{title} ({:.0} ms per cell)", self.cell_ms);
            let mut header = vec!["who", "op", n, "ops/s", "us/op", "x first"];
            if table == "queues" {
                header.extend([
                    "CPU us/op",
                    "CPU x first",
                    "submit p50 us",
                    "submit x first",
                ]);
            }
            let opt = |v: Option<f64>, digits: usize| {
                v.map_or("-".to_string(), |v| format!("{v:.digits$}"))
            };
            let lines: Vec<Vec<String>> = self
                .rows
                .iter()
                .filter(|r| r.table == table)
                .map(|r| {
                    let mut line = vec![
                        r.who.clone(),
                        r.op.to_string(),
                        r.n.to_string(),
                        format!("{:.0}", r.ops_per_s),
                        format!("{:.3}", r.us_per_op),
                        format!("{:.2}", r.ratio_to_first),
                    ];
                    if table == "queues" {
                        line.push(opt(r.cpu_us_per_op, 3));
                        line.push(opt(r.cpu_ratio_to_first, 2));
                        line.push(opt(r.submit_p50_us, 3));
                        line.push(opt(r.submit_ratio_to_first, 2));
                    }
                    line
                })
                .collect();
            render_table(&mut out, &header, &lines, 2, markdown);
        }
        let _ = writeln!(out, "({:.1} s)", self.seconds);
        out
    }
}
