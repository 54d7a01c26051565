//! Future wake-up against a thread blocked in synchronize, on the
//! simulator (threaded, MI300X-like profile), under the queue's default
//! wait policy for both.
//!
//! Each round launches one kernel that runs a fixed time; the kernel's
//! work callback stamps the host clock as it completes (just before its
//! completion signal is decremented). The waiter then either awaits
//! `command.wait_async()` (parked: a std-only executor, so no executor
//! dependency here either) or blocks in `queue.synchronize()`. The latency
//! is from that stamp to the waiter running again. Also printed: the
//! waiting thread's CPU time per round, and the process's (the
//! simulator's processor thread and the completion thread included, the
//! same for both).
//!
//! ```text
//! cargo run --release -p sigbench --example future_wakeup
//! ```

use sigretire_bench::callbacks::block_on;
use sigretire_bench::cpu;
use sigretire_queue::sim::{Compute, CostProfile, Kernel, SimPlatform};
use sigretire_queue::{DeviceConfig, QueueConfig};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Rounds per waiter.
const ROUNDS: usize = 2000;
/// How long each kernel runs.
const KERNEL: Duration = Duration::from_micros(200);

/// The process's CPU time so far (every thread).
fn process_cpu() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

#[derive(Clone, Copy, PartialEq)]
enum Waiter {
    Future,
    Synchronize,
}

struct Figures {
    p50: Duration,
    p99: Duration,
    thread_cpu: Duration,
    process_cpu: Duration,
}

fn measure(waiter: Waiter) -> Result<Figures, sigretire_queue::Error> {
    let platform = SimPlatform::threaded(CostProfile::mi300x());
    let completed_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let stamp = completed_at.clone();
    let kernel = platform.sim().register_kernel(Kernel::Compute(
        Compute::new(move |_| *stamp.lock().unwrap() = Some(Instant::now())).runs_for(KERNEL),
    ));
    let device = platform.device(DeviceConfig::default(), QueueConfig::default())?;
    let queue = device.default_queue();
    // Warm up: the completion thread runs, the pools are filled.
    for _ in 0..50 {
        let command = queue.launch(kernel)?;
        block_on(command.wait_async())?;
        queue.synchronize()?;
    }
    let mut latencies = Vec::with_capacity(ROUNDS);
    let thread_before = cpu::thread_usage();
    let process_before = process_cpu();
    for _ in 0..ROUNDS {
        *completed_at.lock().unwrap() = None;
        let command = queue.launch(kernel)?;
        match waiter {
            Waiter::Future => block_on(command.wait_async())?,
            Waiter::Synchronize => queue.synchronize()?,
        }
        let woke = Instant::now();
        let completed = completed_at.lock().unwrap().expect("the kernel completed");
        latencies.push(woke.saturating_duration_since(completed));
    }
    let thread_cpu = cpu::thread_usage().since(&thread_before).cpu;
    let process_cpu = process_cpu().saturating_sub(process_before);
    latencies.sort();
    Ok(Figures {
        p50: latencies[ROUNDS / 2],
        p99: latencies[ROUNDS * 99 / 100],
        thread_cpu: thread_cpu / ROUNDS as u32,
        process_cpu: process_cpu / ROUNDS as u32,
    })
}

fn main() -> Result<(), sigretire_queue::Error> {
    let future = measure(Waiter::Future)?;
    let sync = measure(Waiter::Synchronize)?;
    println!(
        "wake-up after a {KERNEL:?} kernel, simulator (MI300X-like profile), default wait policy, {ROUNDS} rounds each"
    );
    println!(
        "{:<28} {:>10} {:>10} {:>16} {:>16}",
        "waiter", "p50", "p99", "waiter CPU/round", "process CPU/round"
    );
    for (name, f) in [
        ("future (wait_async)", &future),
        ("thread in synchronize", &sync),
    ] {
        println!(
            "{name:<28} {:>10.1?} {:>10.1?} {:>16.1?} {:>16.1?}",
            f.p50, f.p99, f.thread_cpu, f.process_cpu
        );
    }
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-12);
    println!(
        "ratio future/synchronize: p50 {:.2}, p99 {:.2}, waiter CPU {:.2}, process CPU {:.2}",
        ratio(future.p50, sync.p50),
        ratio(future.p99, sync.p99),
        ratio(future.thread_cpu, sync.thread_cpu),
        ratio(future.process_cpu, sync.process_cpu),
    );
    Ok(())
}
