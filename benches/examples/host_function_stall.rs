//! What a driver host function in a stream costs the work after it, and
//! that the queue layer's wakes no longer pay it: the measurement behind
//! the CUDA backend's wake relay (`cuda-backend/src/relay.rs`).
//!
//! First, a runtime's own stream, adopted by the queue layer, runs a 20 us
//! kernel 4000 times, and the runtime adds a no-op `cuLaunchHostFunc` to
//! the stream every `N` launches. The stream holds everything after a host
//! function until the driver has run it, so the GPU idles meanwhile:
//! printed is the extra time per host function. Then the queue layer's own
//! queue runs the same launches with batches of `N` commands, whose
//! completion thread sleeps on a wake signal per closed batch (its host
//! function on the relay's stream), against the same queue without wake
//! signals (the thread polls): printed is the extra time per closed batch.
//! In alternating rounds.
//!
//! ```sh
//! cargo run --release --example host_function_stall -p sigbench
//! ```
//!
//! Without an NVIDIA driver or GPU it prints the library's typed refusal and
//! exits 0.

mod cuda_support;

use core::ffi::c_void;
use cuda_support::{Failure, OwnedStream};
use sigretire_cuda::cudarc::driver::sys::{self, CUstream};
use sigretire_cuda::{CudaContext, CudaMemory, check};
use sigretire_cuda_testkit::busy_kernel;
use sigretire_queue::tracker::{Config, RetiringTracker};
use sigretire_queue::{BatchLimits, Device, DeviceConfig, QueueConfig};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

const LAUNCHES: usize = 4000;
const KERNEL: Duration = Duration::from_micros(20);
const ROUNDS: usize = 3;

fn main() -> ExitCode {
    cuda_support::on_gpu("host_function_stall", run)
}

/// Does nothing: the cost is the stream's wait for the driver to run it.
extern "C" fn nothing(_: *mut c_void) {}

fn run(context: &Arc<CudaContext>) -> Result<(), Failure> {
    println!("{}", context.report());
    context.bind()?;
    let mut stream: CUstream = core::ptr::null_mut();
    // SAFETY: the context is bound; `stream` is a live local.
    check("cuStreamCreate", unsafe {
        sys::cuStreamCreate(
            &mut stream,
            sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
        )
    })?;
    // SAFETY: a live stream of this context, destroyed only by the keeper.
    let queue = unsafe { context.adopt_stream_with(stream, OwnedStream(stream))? };
    let memory = Arc::new(CudaMemory::new(context));
    let tracker = RetiringTracker::new(memory, queue, Config::default())?;
    let device = Device::new(DeviceConfig::default(), tracker, QueueConfig::default())?;
    let queue = device.default_queue();
    let kernel = busy_kernel(context, KERNEL, 1)?;

    // `every`: a host function after every `every` launches (0: none).
    let time = |every: usize| -> Result<Duration, Failure> {
        let start = Instant::now();
        for i in 1..=LAUNCHES {
            queue.launch(kernel.raw())?;
            if every > 0 && i % every == 0 {
                // SAFETY: a live stream of the bound context; `nothing`
                // takes no data and may run on any thread.
                check("cuLaunchHostFunc", unsafe {
                    sys::cuLaunchHostFunc(stream, Some(nothing), core::ptr::null_mut())
                })?;
            }
        }
        queue.synchronize()?;
        Ok(start.elapsed())
    };
    time(0)?; // warm-up
    println!(
        "{LAUNCHES} launches of a {KERNEL:?} kernel, {ROUNDS} rounds; a host function every N launches"
    );
    println!(
        "{:>5}  {:>6}  {:>14}  {:>22}",
        "round", "N", "us per launch", "extra us per host fn"
    );
    for round in 1..=ROUNDS {
        let base = time(0)?;
        println!(
            "{round:>5}  {:>6}  {:>14.2}  {:>22}",
            "none",
            base.as_secs_f64() * 1e6 / LAUNCHES as f64,
            "-"
        );
        for every in [1000, 100, 16] {
            let with = time(every)?;
            let functions = (LAUNCHES / every) as f64;
            println!(
                "{round:>5}  {every:>6}  {:>14.2}  {:>22.1}",
                with.as_secs_f64() * 1e6 / LAUNCHES as f64,
                (with.as_secs_f64() - base.as_secs_f64()) * 1e6 / functions
            );
        }
    }
    println!();
    println!(
        "the queue layer's own queue, batches of N; its completion thread sleeps (5 wake signals) or polls (none)"
    );
    println!(
        "{:>5}  {:>6}  {:>22}  {:>22}  {:>14}",
        "round", "N", "us per launch, polls", "us per launch, sleeps", "extra us/batch"
    );
    for round in 1..=ROUNDS {
        for batch in [1000, 16] {
            let polls = batches(context, &kernel, batch, 0)?;
            let sleeps = batches(context, &kernel, batch, 5)?;
            println!(
                "{round:>5}  {batch:>6}  {:>22.2}  {:>22.2}  {:>14.1}",
                polls.as_secs_f64() * 1e6 / LAUNCHES as f64,
                sleeps.as_secs_f64() * 1e6 / LAUNCHES as f64,
                (sleeps.as_secs_f64() - polls.as_secs_f64()) * 1e6 / (LAUNCHES / batch) as f64
            );
        }
    }
    Ok(())
}

/// The launches on a queue of the queue layer's own whose batches close
/// every `batch` commands, with `wake_signals`, warmed up first.
fn batches(
    context: &Arc<CudaContext>,
    kernel: &sigretire_cuda::KernelHandle,
    batch: usize,
    wake_signals: usize,
) -> Result<Duration, Failure> {
    let config = QueueConfig {
        wake_signals,
        batch_limits: BatchLimits {
            host_signals: batch,
            device_signals: batch,
        },
        ..QueueConfig::default()
    };
    let tracker = context.retiring_tracker(Config::default())?.0;
    let device = Device::new(DeviceConfig::default(), tracker, config)?;
    let queue = device.default_queue();
    for _ in 0..100 {
        queue.launch(kernel.raw())?;
    }
    queue.synchronize()?;
    let start = Instant::now();
    for _ in 0..LAUNCHES {
        queue.launch(kernel.raw())?;
    }
    queue.synchronize()?;
    Ok(start.elapsed())
}
