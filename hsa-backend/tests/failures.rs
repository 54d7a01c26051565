//! Failure paths that need ROCr to misbehave, injected through the stand-in
//! (`Standin::fail_calls`, `Standin::malform`): each is the typed error its
//! documentation names, and nothing is left behind — no `hsa_init` without
//! its `hsa_shut_down`, no queue, no pool block, no signal, and no queue
//! count in the teardown that would hold released memory back.

mod support;

use hsa_sys::{
    HSA_STATUS_ERROR_EXCEPTION, HSA_STATUS_ERROR_INVALID_AGENT, HSA_STATUS_ERROR_OUT_OF_RESOURCES,
    StatusError,
};
use sigretire_hsa::{AqlQueue, Error, QueueOptions, Runtime, SignalPool};
use sigretire_rocr_standin::{Census, Config as Machine, Kernel, Malformed, Standin};
use sigretire_tracker::{
    Placement, Timestamps, Work,
    backend::{AllocError, HardwareQueue, Publication, SignalMemory},
};
use std::time::{Duration, Instant};
use support::{Gpu, batch_counts, within};

const OOR: u32 = HSA_STATUS_ERROR_OUT_OF_RESOURCES;

/// The `call` and status of an `Error::Call`, or a panic naming what came.
fn call_error(error: &Error) -> (&'static str, &StatusError) {
    match error {
        Error::Call { call, status } => (call, status),
        other => panic!("expected Error::Call, got {other:?}"),
    }
}

/// Initialisation failed after a successful `hsa_init`: it was balanced.
fn assert_rocr_shut_down(standin: &Standin) {
    assert_eq!(
        standin.census(),
        Census::default(),
        "ROCr is still initialised"
    );
    assert_eq!(
        standin.calls("hsa_init"),
        standin.calls("hsa_shut_down"),
        "every hsa_init balanced"
    );
    standin.assert_no_violations();
}

/// Nothing of a failed queue creation is left: no queue in ROCr, and the
/// runtime does not count one either (a pool's memory, dropped with no queue
/// alive, is freed at once instead of waiting for a queue to go).
fn assert_no_queue_left(gpu: &Gpu) {
    assert_eq!(gpu.standin.census().queues, 0);
    let pool = SignalPool::new(&gpu.device);
    let mut signals = Vec::new();
    pool.allocate(1, Placement::Device, &mut signals).unwrap();
    let allocations = gpu.standin.census().allocations;
    drop(pool);
    assert_eq!(
        gpu.runtime.deferred_releases(),
        0,
        "the runtime still counts a queue"
    );
    assert_eq!(gpu.standin.census().allocations, allocations - 1);
    gpu.standin.assert_no_violations();
}

#[test]
fn a_failing_agent_iteration_is_a_call_error_and_rocr_is_shut_down() {
    let standin = Standin::new(Machine::default()).unwrap();
    standin.fail_calls("hsa_iterate_agents", 0, 1, OOR);
    let error = Runtime::load_from(standin.library_path()).unwrap_err();
    let (call, status) = call_error(&error);
    assert_eq!((call, status.status()), ("hsa_iterate_agents", OOR));
    assert!(
        error
            .to_string()
            .starts_with("hsa_iterate_agents failed: HSA_STATUS_ERROR_OUT_OF_RESOURCES"),
        "{error}"
    );
    assert_rocr_shut_down(&standin);
}

#[test]
fn a_failing_agent_attribute_during_discovery_is_a_call_error() {
    // Discovery asks the CPU's device type, the GPU's, then the GPU's
    // features: fail each in turn.
    for skip in 0..3 {
        let standin = Standin::new(Machine::default()).unwrap();
        standin.fail_calls("hsa_agent_get_info", skip, 1, OOR);
        let error = Runtime::load_from(standin.library_path()).unwrap_err();
        let (call, status) = call_error(&error);
        assert_eq!(
            (call, status.status()),
            ("hsa_agent_get_info", OOR),
            "call {skip}"
        );
        assert_rocr_shut_down(&standin);
    }
}

#[test]
fn a_runtime_without_a_timestamp_clock_is_refused() {
    let standin = Standin::new(Machine::default()).unwrap();
    standin.malform(Malformed::ZeroTimestampFrequency, 1);
    let error = Runtime::load_from(standin.library_path()).unwrap_err();
    assert_eq!(error, sigretire_hsa::Error::NoTimestampClock);
    assert_rocr_shut_down(&standin);
    // Once ROCr reports a frequency, that is the clock the stamps count in.
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    assert_eq!(
        runtime.timestamp_clock().frequency(),
        runtime.timestamp_frequency()
    );
}

#[test]
fn a_runtime_that_lists_no_cpu_agent_is_a_call_error() {
    let standin = Standin::new(Machine::default()).unwrap();
    standin.malform(Malformed::NoCpuAgent, 1);
    let error = Runtime::load_from(standin.library_path()).unwrap_err();
    let (call, status) = call_error(&error);
    assert_eq!(
        (call, status.status()),
        ("hsa_iterate_agents", HSA_STATUS_ERROR_INVALID_AGENT)
    );
    assert!(error.to_string().contains("no CPU agent"), "{error}");
    assert_rocr_shut_down(&standin);
}

#[test]
fn a_failing_system_clock_query_fails_initialisation_and_later_reads() {
    let standin = Standin::new(Machine::default()).unwrap();
    standin.fail_calls("hsa_system_get_info", 0, 1, OOR);
    let error = Runtime::load_from(standin.library_path()).unwrap_err();
    let (call, status) = call_error(&error);
    assert_eq!((call, status.status()), ("hsa_system_get_info", OOR));
    assert_rocr_shut_down(&standin);

    // Initialised, then the clock fails once.
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    standin.fail_calls("hsa_system_get_info", 0, 1, OOR);
    let error = runtime.system_timestamp().unwrap_err();
    assert_eq!(call_error(&error).0, "hsa_system_get_info");
    assert!(runtime.system_timestamp().is_ok(), "only one call failed");
    drop(runtime);
    assert_rocr_shut_down(&standin);
}

#[test]
fn a_failing_pool_query_makes_describing_the_device_fail_and_nothing_else() {
    let standin = Standin::new(Machine::default()).unwrap();
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    standin.fail_calls("hsa_amd_agent_iterate_memory_pools", 0, 1, OOR);
    let error = runtime.device(0).unwrap_err();
    assert_eq!(call_error(&error).0, "hsa_amd_agent_iterate_memory_pools");
    assert!(
        runtime.device(0).unwrap().has_large_bar(),
        "the runtime still works"
    );
    drop(runtime);
    assert_rocr_shut_down(&standin);
}

#[test]
fn a_refused_queue_is_a_call_error_and_leaves_nothing_behind() {
    let gpu = Gpu::stepped();
    gpu.standin.fail_calls("hsa_queue_create", 0, 1, OOR);
    let error = AqlQueue::new(&gpu.device, QueueOptions::default()).unwrap_err();
    let (call, status) = call_error(&error);
    assert_eq!((call, status.status()), ("hsa_queue_create", OOR));
    assert_eq!(
        gpu.standin.calls("hsa_queue_destroy"),
        0,
        "there was no queue"
    );
    assert_no_queue_left(&gpu);
}

#[test]
fn a_null_queue_from_rocr_is_a_call_error() {
    let gpu = Gpu::stepped();
    gpu.standin.malform(Malformed::QueueNull, 1);
    let error = AqlQueue::new(&gpu.device, QueueOptions::default()).unwrap_err();
    let (call, status) = call_error(&error);
    assert_eq!(call, "hsa_queue_create");
    assert!(
        status
            .runtime_text()
            .is_some_and(|t| t.contains("no queue")),
        "{error}"
    );
    assert_no_queue_left(&gpu);
}

#[test]
fn a_queue_without_a_ring_is_destroyed_again() {
    let gpu = Gpu::stepped();
    gpu.standin.malform(Malformed::QueueWithoutRing, 1);
    let error = AqlQueue::new(&gpu.device, QueueOptions::default()).unwrap_err();
    let (call, status) = call_error(&error);
    assert_eq!(call, "hsa_queue_create");
    assert!(
        status.runtime_text().is_some_and(|t| t.contains("ring")),
        "{error}"
    );
    assert_eq!(gpu.standin.calls("hsa_queue_destroy"), 1);
    assert_no_queue_left(&gpu);
}

#[test]
fn a_refused_profiler_destroys_the_new_queue_without_draining_it() {
    // Stepped with a drain bound: a drain would wait out the whole second.
    let gpu = Gpu::stepped();
    gpu.standin
        .fail_calls("hsa_amd_profiling_set_profiler_enabled", 0, 1, OOR);
    let started = Instant::now();
    let error = AqlQueue::new(
        &gpu.device,
        QueueOptions {
            drain_timeout: Duration::from_secs(1),
            ..QueueOptions::default()
        },
    )
    .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
    let (call, status) = call_error(&error);
    assert_eq!(
        (call, status.status()),
        ("hsa_amd_profiling_set_profiler_enabled", OOR)
    );
    assert_eq!(gpu.standin.calls("hsa_queue_destroy"), 1);
    assert_eq!(gpu.standin.calls("hsa_amd_signal_create"), 0, "no drain");
    assert_no_queue_left(&gpu);
}

/// `count` device-placed signals of a fresh pool, and the pool.
fn device_signals(gpu: &Gpu, count: usize) -> (SignalPool, Result<Vec<Placement>, AllocError>) {
    let pool = SignalPool::new(&gpu.device);
    let mut out = Vec::new();
    let result = pool.allocate(count, Placement::Device, &mut out);
    let placements = out.iter().map(|(_, p)| *p).collect();
    (pool, result.map(|()| placements))
}

#[test]
fn a_refused_access_grant_frees_the_block_and_falls_back() {
    let gpu = Gpu::stepped();
    gpu.standin
        .fail_calls("hsa_amd_agents_allow_access", 0, 1, OOR);
    let (pool, placements) = device_signals(&gpu, 8);
    assert_eq!(placements.unwrap(), [Placement::Host; 8]);
    assert_eq!(batch_counts(&pool), (0, 1, 1));
    assert_eq!(gpu.standin.calls("hsa_amd_memory_pool_allocate"), 2);
    assert_eq!(
        gpu.standin.calls("hsa_amd_memory_pool_free"),
        1,
        "the VRAM block"
    );
    assert_eq!(
        gpu.standin.census().allocations,
        1,
        "the system batch alone"
    );
    drop(pool);
    assert_eq!(gpu.standin.census().allocations, 0);
    gpu.standin.assert_no_violations();
}

#[test]
fn when_every_grant_is_refused_the_error_says_so_and_nothing_is_kept() {
    let gpu = Gpu::stepped();
    gpu.standin
        .fail_calls("hsa_amd_agents_allow_access", 0, 2, OOR);
    gpu.standin.fail_signal_creations(1);
    let (pool, result) = device_signals(&gpu, 8);
    let AllocError::OutOfMemory(text) = result.unwrap_err();
    assert_eq!(
        text.matches("hsa_amd_agents_allow_access failed").count(),
        2,
        "{text}"
    );
    assert_eq!(gpu.standin.census().allocations, 0, "both blocks freed");
    assert_eq!(pool.batches(), []);
    gpu.standin.assert_no_violations();
}

#[test]
fn a_null_block_is_refused_and_never_freed() {
    let gpu = Gpu::stepped();
    gpu.standin.malform(Malformed::AllocationNull, 2);
    gpu.standin.fail_signal_creations(1);
    let (pool, result) = device_signals(&gpu, 8);
    let AllocError::OutOfMemory(text) = result.unwrap_err();
    assert_eq!(text.matches("null block").count(), 2, "{text}");
    assert_eq!(gpu.standin.calls("hsa_amd_memory_pool_free"), 0);
    assert_eq!(pool.batches(), []);
    // The next allocation is served again.
    let mut out = Vec::new();
    pool.allocate(8, Placement::Device, &mut out).unwrap();
    assert!(out.iter().all(|(_, p)| *p == Placement::Device));
    gpu.standin.assert_no_violations();
}

#[test]
fn a_misaligned_block_is_freed_and_falls_back() {
    let gpu = Gpu::stepped();
    gpu.standin.malform(Malformed::AllocationMisaligned, 1);
    let (pool, placements) = device_signals(&gpu, 8);
    assert_eq!(placements.unwrap(), [Placement::Host; 8]);
    assert_eq!(gpu.standin.calls("hsa_amd_memory_pool_free"), 1);
    assert_eq!(
        gpu.standin.calls("hsa_amd_agents_allow_access"),
        1,
        "only the good block"
    );
    assert_eq!(gpu.standin.census().allocations, 1);
    drop(pool);

    gpu.standin.malform(Malformed::AllocationMisaligned, 2);
    gpu.standin.fail_signal_creations(1);
    let (_pool, result) = device_signals(&gpu, 8);
    let AllocError::OutOfMemory(text) = result.unwrap_err();
    assert_eq!(text.matches("not 64-byte aligned").count(), 2, "{text}");
    assert_eq!(gpu.standin.census().allocations, 0);
    gpu.standin.assert_no_violations();
}

#[test]
fn more_signals_than_one_allocation_holds_are_refused_by_every_pool() {
    let gpu = Gpu::stepped();
    let largest = gpu.device.vram_pool().unwrap().max_allocation / 64;
    gpu.standin.fail_signal_creations(1);
    let (pool, result) = device_signals(&gpu, largest + 1);
    let AllocError::OutOfMemory(text) = result.unwrap_err();
    assert_eq!(text.matches("largest allocation").count(), 2, "{text}");
    assert_eq!(gpu.standin.calls("hsa_amd_memory_pool_allocate"), 0);
    assert_eq!(pool.batches(), []);
    gpu.standin.assert_no_violations();
}

#[test]
fn a_drain_whose_signal_cannot_be_made_is_a_call_error() {
    let gpu = Gpu::threaded();
    let queue = gpu.queue(QueueOptions::default());
    gpu.standin.fail_calls("hsa_amd_signal_create", 0, 1, OOR);
    let error = queue.drain(Duration::from_secs(10)).unwrap_err();
    assert_eq!(
        call_error(&error),
        (
            "hsa_amd_signal_create",
            &StatusError::new(OOR).with_runtime_text(gpu.runtime.api().status_string(OOR).unwrap())
        )
    );
    assert_eq!(queue.write_index(), 0, "nothing was published");
    queue.drain(Duration::from_secs(10)).unwrap();
    drop(queue);
    assert_eq!(gpu.standin.census().signals, 0);
    gpu.standin.assert_no_violations();
}

/// The drain's barrier completes with a negative value when the queue fails
/// under it: the drain says the queue failed, at once, and destroys its
/// signal.
#[test]
fn a_queue_failing_under_a_drain_is_queue_failed() {
    let gpu = Gpu::threaded();
    let queue = gpu.queue(QueueOptions::default());
    let control = gpu.control(&queue);
    let flag = gpu.standin.new_flag();
    let spin = gpu.standin.register_kernel(Kernel::SpinUntil(flag));
    let index = queue.reserve().unwrap();
    queue
        .publish(Publication::unsignalled(index, false), Work::Kernel(spin))
        .unwrap();
    let draining = queue.clone();
    let drain = std::thread::spawn(move || {
        let started = Instant::now();
        (draining.drain(Duration::from_secs(20)), started.elapsed())
    });
    // The drain's barrier is published behind the spinning kernel.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !control.truth(index + 1).is_some_and(|t| t.published) {
        assert!(
            Instant::now() < deadline,
            "the drain never published its barrier"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(gpu.standin.census().signals, 1, "the drain's signal");
    control.fail();
    let (outcome, waited) = within(Duration::from_secs(30), "the drain", move || {
        drain.join().unwrap()
    });
    let Err(Error::QueueFailed(status)) = &outcome else {
        panic!("expected QueueFailed, got {outcome:?}");
    };
    assert!(
        [HSA_STATUS_ERROR_EXCEPTION, hsa_sys::HSA_STATUS_ERROR].contains(&status.status()),
        "{status}"
    );
    assert!(
        waited < Duration::from_secs(15),
        "the failure went unnoticed: {waited:?}"
    );
    assert!(control.truth(index + 1).unwrap().failed);
    assert_eq!(
        gpu.standin.census().signals,
        0,
        "the drain's signal was destroyed"
    );
    let message = outcome.unwrap_err().to_string();
    assert!(message.contains("create a new queue"), "{message}");
    // A drain of the failed queue says so at once, with ROCr's status.
    let error = queue.drain(Duration::from_secs(10)).unwrap_err();
    assert_eq!(
        error.status().map(StatusError::status),
        Some(HSA_STATUS_ERROR_EXCEPTION),
        "{error:?}"
    );
    assert!(matches!(error, Error::QueueFailed(_)));
    drop(queue);
    assert_eq!(gpu.standin.census().queues, 0);
    gpu.standin.assert_no_violations();
}

#[test]
fn timestamps_rocr_cannot_convert_or_read_are_zero() {
    let gpu = Gpu::threaded();
    let queue = gpu.queue(QueueOptions::default());
    let pool = SignalPool::new(&gpu.device);
    // A batch signal (converted by the backend) and a ROCr signal (read by ROCr).
    let mut signals = Vec::new();
    pool.allocate(1, Placement::Device, &mut signals).unwrap();
    gpu.standin
        .set_pool_exhausted(sigretire_rocr_standin::PoolKind::Device, true);
    gpu.standin
        .set_pool_exhausted(sigretire_rocr_standin::PoolKind::System, true);
    pool.allocate(1, Placement::Host, &mut signals).unwrap();
    assert!(signals[1].0.is_rocr_signal());
    for (signal, _) in &signals {
        // SAFETY: the pool's own signals.
        unsafe { pool.store(*signal, 1) };
        pool.store_fence();
        let index = queue.reserve().unwrap();
        queue
            .publish(
                Publication::untracked(index, true, pool.packet_handle(*signal)),
                Work::Empty,
            )
            .unwrap();
        // SAFETY: as above.
        let value = unsafe { pool.wait_change(*signal, 1, Duration::from_secs(10)) };
        assert_eq!(value, 0);
    }
    let (batch, rocr) = (signals[0].0, signals[1].0);
    // SAFETY: as above; both packets completed.
    unsafe {
        let stamped = |stamps: Option<Timestamps>| stamps.is_some_and(|s| s.end > 0);
        assert!(stamped(pool.timestamps(batch)), "stamped");
        assert!(stamped(pool.timestamps(rocr)), "stamped");
        gpu.standin
            .fail_calls("hsa_amd_profiling_convert_tick_to_system_domain", 0, 2, OOR);
        assert_eq!(
            pool.timestamps(batch),
            None,
            "not convertible: none, not zeros"
        );
        gpu.standin
            .fail_calls("hsa_amd_profiling_get_dispatch_time", 0, 1, OOR);
        assert_eq!(pool.timestamps(rocr), None);
    }
    drop((pool, queue));
    gpu.standin.assert_no_violations();
}
