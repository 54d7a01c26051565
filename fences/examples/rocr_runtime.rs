//! A runtime author's walk-through on ROCr, with the runtime's own queues:
//! it makes them with `hsa_queue_create`, hands them to the library
//! (`AqlQueue::adopt`), and uses the queue layer on them for its kernel
//! dispatches (its kernel object, kernel arguments, grid and workgroup),
//! events, query, synchronize, elapsed time, a cross-queue wait and a
//! move of a stream to another queue. Every claim is checked by an
//! `assert!`.
//!
//! It runs on the ROCr stand-in, a library that exports ROCr's functions
//! over the project's simulator, so it needs no GPU. On a machine with
//! ROCm, `Runtime::load()` replaces `Runtime::load_from(standin.library_path())`,
//! the kernel objects come from the runtime's code objects and the kernel
//! arguments live in ROCr's kernarg pool.
//!
//! `cargo run --example rocr_runtime -p sigretire-queue`

use hsa_sys::{HSA_QUEUE_TYPE_MULTI, HSA_STATUS_SUCCESS, hsa_queue_t};
use sigretire_hsa::queue::{
    self, CommandStatus, Device, DeviceConfig, Dispatch, HsaTracker, QueueConfig, Status, Work,
};
use sigretire_hsa::{AdoptOptions, Agent as Gpu, AqlQueue, Runtime};
use sigretire_rocr_standin::{Kernel, Standin};
use std::error::Error;
use std::time::Duration;

/// How long the producer's kernel runs on the simulated GPU.
const KERNEL_TIME: Duration = Duration::from_millis(3);

/// A queue the runtime makes and owns, as any HSA runtime does.
fn runtime_queue(runtime: &Runtime, gpu: &Gpu) -> Result<*mut hsa_queue_t, Box<dyn Error>> {
    let mut queue: *mut hsa_queue_t = std::ptr::null_mut();
    // SAFETY: a GPU agent of an initialised runtime; no error callback (a
    // runtime with one forwards its status to `AqlQueue::report_error`).
    let status = unsafe {
        runtime.api().hsa_queue_create(
            gpu.agent(),
            1024,
            HSA_QUEUE_TYPE_MULTI,
            None,
            std::ptr::null_mut(),
            u32::MAX,
            u32::MAX,
            &raw mut queue,
        )
    };
    if status != HSA_STATUS_SUCCESS {
        return Err(format!("hsa_queue_create failed with status {status:#x}").into());
    }
    Ok(queue)
}

/// The library's tracker on one of the runtime's queues: signals in VRAM.
fn tracker_on(
    gpu: &Gpu,
    queue: *mut hsa_queue_t,
) -> Result<(AqlQueue, HsaTracker), Box<dyn Error>> {
    // SAFETY: a live queue of this GPU, destroyed by `main` only after every
    // handle of the library is gone.
    let adopted = unsafe { AqlQueue::adopt(gpu, queue, AdoptOptions::default())? };
    Ok((adopted.clone(), queue::tracker(adopted)?))
}

fn main() -> Result<(), Box<dyn Error>> {
    let standin = Standin::new(sigretire_rocr_standin::Config::default())?;
    let runtime = Runtime::load_from(standin.library_path())?;
    let gpu = runtime.device(0)?;
    println!("a runtime on ROCr (the stand-in: ROCr's functions over the simulator)");

    // 1. The runtime's own queues, adopted: the library never destroys them.
    let raw = [
        runtime_queue(&runtime, &gpu)?,
        runtime_queue(&runtime, &gpu)?,
        runtime_queue(&runtime, &gpu)?,
    ];
    let (producer_hw, producer_tracker) = tracker_on(&gpu, raw[0])?;
    let (consumer_hw, consumer_tracker) = tracker_on(&gpu, raw[1])?;
    let moved_hw = tracker_on(&gpu, raw[2])?.0;
    assert!(producer_hw.is_adopted() && consumer_hw.is_adopted());
    let device = Device::new(
        DeviceConfig::default(),
        producer_tracker,
        QueueConfig::default(),
    )?;
    let producer = device.default_queue();
    let consumer = device.create_queue(consumer_tracker, QueueConfig::default())?;
    println!(
        "1. adopted the runtime's queues {}, {} and {} (hsa_queue_create, 1024 packets)",
        producer_hw.id(),
        consumer_hw.id(),
        moved_hw.id()
    );

    // 2. Its kernels, with their arguments: a gate the example holds (so the
    //    "still pending" checks below cannot race the GPU; a runtime needs
    //    none) and a 3 ms kernel dispatched over a 1024 x 1 x 1 grid.
    let gate = standin.new_flag();
    let hold = standin.register_kernel(Kernel::SpinUntil(gate));
    let work = standin.register_kernel(Kernel::Duration(KERNEL_TIME));
    let arguments = [0u64; 8]; // the runtime's kernarg block
    let dispatch = Dispatch::new(work)
        .kernarg_address(arguments.as_ptr() as u64)
        .grid([1024, 1, 1])
        .workgroup([256, 1, 1])
        .segments(0, 4096);
    println!(
        "2. kernel object {work:#x}: kernarg {:#x}, grid [1024, 1, 1], workgroup [256, 1, 1], 4 KiB group segment",
        dispatch.kernarg_address
    );

    // 3. Submit: gate, event, kernel, event on the producer; the consumer
    //    waits for the last event on the GPU, then runs the kernel too.
    producer.submit(Work::Kernel(hold))?;
    let start = producer.record_event()?;
    let kernel = producer.submit(Work::Dispatch(dispatch))?;
    let stop = producer.record_event()?;
    let wait = consumer.wait_event(&stop)?;
    let after = consumer.submit(Work::Dispatch(dispatch))?;
    let done = consumer.record_event()?;
    assert_eq!((wait.packets(), wait.dependencies()), (1, 1));
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(stop.query(), Status::Pending);
    assert_eq!(producer.query()?, Status::Pending);
    assert_eq!(consumer.query()?, Status::Pending);
    assert_eq!(after.status(), CommandStatus::Pending);
    println!(
        "3. submitted; while the gate holds the GPU: stop {:?}, producer {:?}, consumer {:?}",
        stop.query(),
        producer.query()?,
        consumer.query()?
    );
    // The packet the GPU received: the runtime's body, the library's header.
    let truth = standin
        .queue(producer_hw.raw())
        .truth(kernel.aql_index())
        .ok_or("the kernel's packet is in the ring")?;
    assert!(truth.barrier, "an in-order stream: every packet a fence");
    assert_ne!(
        truth.completion_signal, 0,
        "the tracker's completion signal"
    );

    // 4. Let the GPU go; synchronize; elapsed time.
    standin.set_flag(gate, true);
    stop.synchronize()?;
    assert_eq!(kernel.status(), CommandStatus::Complete);
    consumer.synchronize()?;
    assert_eq!(after.status(), CommandStatus::Complete);
    assert_eq!(done.query(), Status::Complete);
    let elapsed = start.elapsed_to(&stop)?;
    assert!(elapsed >= KERNEL_TIME, "{elapsed:?}");
    assert!(elapsed < KERNEL_TIME * 10, "{elapsed:?}");
    println!(
        "4. synchronized: kernel {:?}, consumer's kernel {:?}; start -> stop {elapsed:?} (the kernel runs {KERNEL_TIME:?})",
        kernel.status(),
        after.status()
    );

    // 5. The runtime moves the consumer's stream to its third queue: later
    //    work runs there, after everything before the move.
    consumer.submit(Work::Kernel(work))?;
    consumer.move_to(moved_hw.clone())?;
    let moved = consumer.submit(Work::Dispatch(dispatch))?;
    consumer.synchronize()?;
    assert_eq!(moved.status(), CommandStatus::Complete);
    let order_waits = consumer.stats().order_waits;
    println!(
        "5. moved the consumer to queue {}: its next kernel ran there after the old queue's ({} ordering wait)",
        moved_hw.id(),
        order_waits
    );

    // 6. Teardown: the library lets go first, then the runtime destroys its
    //    queues (the library destroyed none of them).
    drop((start, stop, done, wait, kernel, after, moved));
    drop((consumer, device, producer_hw, consumer_hw, moved_hw));
    for queue in raw {
        // SAFETY: the runtime's queue; no handle of the library is left.
        let status = unsafe { runtime.api().hsa_queue_destroy(queue) };
        assert_eq!(status, HSA_STATUS_SUCCESS, "destroyed once, by its owner");
    }
    drop((gpu, runtime));
    let violations = standin.violations();
    assert!(violations.is_empty(), "{violations:#?}");
    println!("6. the runtime destroyed its queues; no protocol violation");
    Ok(())
}
