//! CUDA's own events (the benchmarks' yardstick) through the CUDA backend's
//! context and queues, on a real GPU; skipped, saying so, without one.

use sigretire_bench::platforms::cuda_events::{Event, EventFlags};
use sigretire_cuda::{CudaContext, Error};
use std::time::Duration;

#[test]
fn native_events_and_synchronization_work_through_the_same_driver() {
    let context = match CudaContext::new(0) {
        Ok(context) => context,
        Err(error @ (Error::LibraryMissing | Error::NoDevice { .. })) => {
            eprintln!("CUDA's own events: SKIPPED (they pass vacuously here): {error}");
            return;
        }
        Err(error) => panic!("a CUDA driver is present but unusable: {error}"),
    };
    let queue = context.create_queue().unwrap();
    let (start, end) = (
        Event::new(&context, EventFlags::default()).unwrap(),
        Event::new(&context, EventFlags::default()).unwrap(),
    );
    start.record(&queue).unwrap();
    queue.launch_empty().unwrap();
    end.record(&queue).unwrap();
    end.synchronize().unwrap();
    assert!(end.is_complete().unwrap() && start.is_complete().unwrap());
    let elapsed = end.elapsed_since(&start).unwrap();
    assert!(elapsed < Duration::from_millis(100), "{elapsed:?}");
    queue.synchronize().unwrap();
    context.synchronize().unwrap();
    assert!(queue.is_idle().unwrap());

    let untimed = Event::new(
        &context,
        EventFlags {
            timing: false,
            blocking_sync: true,
        },
    )
    .unwrap();
    untimed.record(&queue).unwrap();
    untimed.synchronize().unwrap();
    let error = untimed.elapsed_since(&start).unwrap_err();
    assert!(error.code_name().is_some(), "a typed driver error: {error}");
    println!("elapsed time of an untimed event: {error}");
    println!(
        "driver {}, kernel module {:?}, pinned bytes held {}",
        sigretire_cuda::driver_version().unwrap(),
        sigretire_cuda::kernel_module_version(),
        context.pinned_bytes()
    );
}
