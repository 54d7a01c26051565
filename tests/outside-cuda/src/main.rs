//! A runtime on cudarc hands its stream to the queue layer in one call and
//! gets launches, events, synchronize and elapsed GPU time on it, while it
//! keeps enqueueing its own work on the same stream through cudarc.
//!
//! Its own cudarc and the CUDA backend use CUDA 13.0's headers: one set of
//! bindings, which both name. Without a driver or a GPU it says so and
//! exits 0.

use cudarc::driver::{CudaContext, CudaStream};
use sigretire_cuda::queue::{self, DeviceConfig, QueueConfig};
use std::process::ExitCode;
use std::sync::Arc;

/// Empty kernels the library launches between the two events.
const LAUNCHES: usize = 16;

fn main() -> ExitCode {
    let built_against = sigretire_cuda::CudaVersion::BUILT_AGAINST;
    assert_eq!(
        built_against,
        sigretire_cuda::CudaVersion::from_encoded(cudarc::driver::sys::CUDA_VERSION as i32),
        "one cudarc, one version"
    );
    println!("sigretire-cuda and this program's cudarc: CUDA {built_against} headers");

    // cudarc panics where there is no driver library: ask first (cudarc's
    // `is_culib_present`, asked once, safely).
    if !sigretire_cuda::library_present() {
        println!("no GPU here: the CUDA driver library (libcuda.so.1) is not installed; nothing to run");
        return ExitCode::SUCCESS;
    }
    let stream = match CudaContext::new(0).and_then(|context| context.new_stream()) {
        Ok(stream) => stream,
        Err(error) => {
            println!("no GPU here: cudarc could not open device 0 ({error}); nothing to run");
            return ExitCode::SUCCESS;
        }
    };
    match run(stream) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("failed: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(stream: Arc<CudaStream>) -> Result<(), Box<dyn std::error::Error>> {
    // The runtime's own work on its stream, through cudarc: a buffer cleared.
    let mut buffer = stream.alloc_zeros::<u32>(1 << 20)?;

    // One call: a queue-layer device whose default queue is this stream.
    let (device, host_queue) = match queue::adopt(
        stream.clone(),
        DeviceConfig::default(),
        QueueConfig::default(),
    ) {
        Err(error) if error.is_no_gpu() => {
            println!("no GPU here: {error}");
            return Ok(());
        }
        adopted => adopted?,
    };
    println!(
        "adopted cudarc's stream {:?} on {} (the runtime keeps it; the library never destroys it)",
        stream.cu_stream(),
        stream.context().name()?,
    );

    let start: queue::Event = host_queue.record_event()?;
    let mut last = None;
    for _ in 0..LAUNCHES {
        last = Some(host_queue.launch_empty()?); // the library's empty kernel
    }
    // The runtime enqueues more of its own; the next event lands after it.
    stream.memset_zeros(&mut buffer)?;
    let stop = host_queue.record_event()?;
    println!(
        "recorded an event, {LAUNCHES} launches, the runtime's memset, an event: stop is {:?}",
        stop.query()
    );

    stop.synchronize()?;
    let last: queue::Command = last.ok_or("no launch")?;
    println!(
        "after the stop event's synchronize: stop {:?}, last launch {:?}",
        stop.query(),
        last.status()
    );
    let elapsed = start.elapsed_to(&stop)?;
    println!(
        "GPU time between the events: {:.3} ms ({LAUNCHES} launches and the memset)",
        elapsed.as_secs_f64() * 1e3
    );

    host_queue.synchronize()?;
    let stats = host_queue.stats();
    println!(
        "after synchronize the queue is {:?}: {} commands on the runtime's stream",
        host_queue.query()?,
        stats.commands,
    );
    drop((device, host_queue, start, stop, last));
    stream.synchronize()?; // the stream is still the runtime's
    println!("done: the stream is still the runtime's, and idle");
    Ok(())
}
