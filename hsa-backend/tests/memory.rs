//! Signal memory: batches in VRAM with host access granted, the fallbacks to
//! system memory and to ROCr's own signals (recorded per signal), direct
//! atomic access to batch blocks versus ROCr calls for ROCr's signals, store
//! fences and HDP flushes, waits, and timestamps in the system domain.

mod support;

use hsa_sys::{AMD_SIGNAL_KIND_USER, amd_signal_t};
use sigretire_hsa::{HsaSignal, SignalPool};
use sigretire_rocr_standin::{Config as Machine, Kernel, PoolKind};
use sigretire_tracker::{
    Placement, Work,
    backend::{AllocError, HardwareQueue, Publication, SignalMemory},
};
use std::sync::Arc;
use std::time::Duration;
use support::{Gpu, batch_counts};

fn allocate(pool: &SignalPool, count: usize, placement: Placement) -> Vec<(HsaSignal, Placement)> {
    let mut out = Vec::new();
    pool.allocate(count, placement, &mut out).unwrap();
    assert_eq!(out.len(), count);
    out
}

#[test]
fn a_batch_is_one_vram_allocation_of_user_signals_with_host_access_granted() {
    let gpu = Gpu::stepped();
    let pool = SignalPool::new(&gpu.device);
    let signals = allocate(&pool, 64, Placement::Device);
    let batches = pool.batches();
    assert_eq!(batches.len(), 1);
    let batch = batches[0];
    assert_eq!((batch.len, batch.placement), (64, Placement::Device));
    assert_eq!(gpu.standin.calls("hsa_amd_memory_pool_allocate"), 1);
    assert_eq!(gpu.standin.calls("hsa_amd_agents_allow_access"), 1);
    let info = gpu.standin.allocation(batch.base).unwrap();
    assert_eq!(info.pool_kind, PoolKind::Device as u32);
    assert_eq!(info.bytes, 4096);
    assert!(
        info.cpu_access,
        "the host was granted access to the VRAM block"
    );
    for (i, (signal, placement)) in signals.iter().enumerate() {
        assert_eq!(*placement, Placement::Device);
        assert_eq!(signal.placement(), Placement::Device);
        assert!(!signal.is_rocr_signal());
        assert_eq!(signal.handle().handle, batch.base + 64 * i as u64);
        assert_eq!(pool.packet_handle(*signal), signal.handle().handle);
        let block = signal.handle().handle as *const amd_signal_t;
        // SAFETY: the block is live in `pool`; nothing else writes it now.
        let kind = unsafe { std::ptr::addr_of!((*block).kind).read_volatile() };
        assert_eq!(kind, AMD_SIGNAL_KIND_USER);
        // SAFETY: as above.
        assert_eq!(unsafe { pool.load(*signal) }, 0);
    }
    assert_eq!(pool.counters().vram_batches, 1);
}

#[test]
fn blocks_left_over_from_a_granule_serve_later_allocations() {
    let gpu = Gpu::stepped();
    let pool = SignalPool::new(&gpu.device);
    allocate(&pool, 10, Placement::Device);
    allocate(&pool, 20, Placement::Device);
    assert_eq!(
        pool.batches().len(),
        1,
        "30 signals fit the first 4 KiB block"
    );
    allocate(&pool, 40, Placement::Device);
    assert_eq!(
        pool.batches().len(),
        2,
        "34 left over, then a batch for 6 more"
    );
    assert_eq!(gpu.standin.calls("hsa_amd_memory_pool_allocate"), 2);
}

#[test]
fn full_vram_falls_back_to_system_memory_and_says_so_per_signal() {
    let gpu = Gpu::stepped();
    let pool = SignalPool::new(&gpu.device);
    gpu.standin.set_pool_exhausted(PoolKind::Device, true);
    let signals = allocate(&pool, 8, Placement::Device);
    assert!(
        signals
            .iter()
            .all(|(s, p)| *p == Placement::Host && s.placement() == Placement::Host)
    );
    assert_eq!(batch_counts(&pool), (0, 1, 1));
    let info = gpu.standin.allocation(pool.batches()[0].base).unwrap();
    assert_eq!(info.pool_kind, PoolKind::System as u32);
    assert!(
        info.gpu_access,
        "the GPU was granted access to the system block"
    );
    // VRAM is back: new device requests get VRAM again, host leftovers stay host.
    gpu.standin.set_pool_exhausted(PoolKind::Device, false);
    let signals = allocate(&pool, 8, Placement::Device);
    assert!(signals.iter().all(|(_, p)| *p == Placement::Device));
    let signals = allocate(&pool, 8, Placement::Host);
    assert!(signals.iter().all(|(_, p)| *p == Placement::Host));
    assert_eq!(
        pool.batches().len(),
        2,
        "the host request used the leftovers"
    );
}

#[test]
fn without_pools_signals_come_from_rocr_one_by_one() {
    let gpu = Gpu::stepped();
    let pool = SignalPool::new(&gpu.device);
    gpu.standin.set_pool_exhausted(PoolKind::Device, true);
    gpu.standin.set_pool_exhausted(PoolKind::System, true);
    let signals = allocate(&pool, 3, Placement::Device);
    assert!(
        signals
            .iter()
            .all(|(s, p)| *p == Placement::Host && s.is_rocr_signal())
    );
    assert_eq!(gpu.standin.calls("hsa_amd_signal_create"), 3);
    assert_eq!(pool.counters().rocr_signals, 3);
    assert_eq!(gpu.standin.census().signals, 3);
    drop(pool);
    assert_eq!(gpu.standin.census().signals, 0, "destroyed with the pool");
    gpu.standin.assert_no_violations();
}

#[test]
fn when_every_kind_of_memory_fails_the_error_says_what_each_answered() {
    let gpu = Gpu::stepped();
    let pool = SignalPool::new(&gpu.device);
    gpu.standin.set_pool_exhausted(PoolKind::Device, true);
    gpu.standin.set_pool_exhausted(PoolKind::System, true);
    gpu.standin.fail_signal_creations(1);
    let mut out = Vec::new();
    let AllocError::OutOfMemory(message) =
        pool.allocate(4, Placement::Device, &mut out).unwrap_err();
    assert!(out.is_empty());
    for part in [
        "4 of 4 signals",
        "Device batch",
        "Host batch",
        "hsa_amd_signal_create",
        "OUT_OF_RESOURCES",
    ] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
}

#[test]
fn batch_signals_are_touched_directly_and_rocr_signals_through_rocr() {
    let gpu = Gpu::stepped();
    let pool = SignalPool::new(&gpu.device);
    let (raw, _) = allocate(&pool, 1, Placement::Device)[0];
    // SAFETY: signals of `pool`.
    unsafe {
        pool.store(raw, 1);
        assert_eq!(pool.load(raw), 1);
    }
    for call in [
        "hsa_signal_load_scacquire",
        "hsa_signal_store_screlease",
        "hsa_signal_silent_store_relaxed",
    ] {
        assert_eq!(gpu.standin.calls(call), 0, "{call}");
    }
    // A fresh pool (the first one would serve its leftover blocks).
    let pool = SignalPool::new(&gpu.device);
    gpu.standin.set_pool_exhausted(PoolKind::Device, true);
    gpu.standin.set_pool_exhausted(PoolKind::System, true);
    let (rocr, _) = allocate(&pool, 1, Placement::Device)[0];
    assert!(rocr.is_rocr_signal());
    // SAFETY: signals of `pool`.
    unsafe {
        pool.store(rocr, 1); // arming: silent
        assert_eq!(pool.load(rocr), 1);
        pool.store(rocr, 0); // completing: wakes waiters
        assert_eq!(pool.load(rocr), 0);
    }
    assert_eq!(gpu.standin.calls("hsa_signal_silent_store_relaxed"), 1);
    assert_eq!(gpu.standin.calls("hsa_signal_store_screlease"), 1);
    assert_eq!(gpu.standin.calls("hsa_signal_load_scacquire"), 2);
    assert_eq!(
        gpu.standin.counters().host_stores,
        2,
        "the simulator saw ROCr's stores"
    );
    gpu.standin.assert_no_violations();
}

#[test]
fn store_fences_and_hdp_flushes_are_executed_and_counted() {
    let gpu = Gpu::stepped();
    let pool = SignalPool::new(&gpu.device);
    pool.store_fence();
    pool.store_fence();
    assert_eq!(gpu.standin.take_hdp_flush(0), Some(0));
    pool.hdp_flush();
    assert_eq!(
        gpu.standin.take_hdp_flush(0),
        Some(1),
        "1 written to HDP_MEM_FLUSH_CNTL"
    );
    let counters = pool.counters();
    assert_eq!(
        (
            counters.store_fences,
            counters.hdp_flushes,
            counters.hdp_flushes_skipped
        ),
        (2, 1, 0)
    );

    let apu = Gpu::new(Machine {
        hdp_registers: false,
        ..Machine::stepped()
    });
    let pool = SignalPool::new(&apu.device);
    pool.hdp_flush();
    assert_eq!(
        (
            pool.counters().hdp_flushes,
            pool.counters().hdp_flushes_skipped
        ),
        (0, 1)
    );
}

#[test]
fn waits_poll_batch_signals_and_let_rocr_wait_for_its_own() {
    let gpu = Gpu::stepped();
    let pool = Arc::new(SignalPool::new(&gpu.device));
    let (raw, _) = allocate(&pool, 1, Placement::Device)[0];
    // SAFETY: a signal of `pool`.
    unsafe { pool.store(raw, 1) };
    // SAFETY: as above.
    let seen = unsafe { pool.wait_change(raw, 1, Duration::from_millis(5)) };
    assert_eq!(seen, 1, "timed out");
    let completer = {
        let pool = pool.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            // SAFETY: a signal of `pool`.
            unsafe { pool.store(raw, 0) };
        })
    };
    // SAFETY: as above.
    let seen = unsafe { pool.wait_change(raw, 1, Duration::from_secs(10)) };
    assert_eq!(seen, 0);
    completer.join().unwrap();
    assert_eq!(gpu.standin.calls("hsa_signal_wait_scacquire"), 0);
    assert_eq!(pool.counters().polled_waits, 2);

    let pool = Arc::new(SignalPool::new(&gpu.device));
    gpu.standin.set_pool_exhausted(PoolKind::Device, true);
    gpu.standin.set_pool_exhausted(PoolKind::System, true);
    let (rocr, _) = allocate(&pool, 1, Placement::Device)[0];
    assert!(rocr.is_rocr_signal());
    // SAFETY: a signal of `pool`.
    unsafe { pool.store(rocr, 1) };
    let completer = {
        let pool = pool.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            // SAFETY: a signal of `pool`.
            unsafe { pool.store(rocr, 0) };
        })
    };
    // SAFETY: as above.
    let seen = unsafe { pool.wait_change(rocr, 1, Duration::from_secs(10)) };
    assert_eq!(seen, 0);
    completer.join().unwrap();
    assert!(gpu.standin.calls("hsa_signal_wait_scacquire") >= 1);
    assert_eq!(pool.counters().rocr_waits, 1);
    assert_eq!(pool.counters().polled_waits, 0);
    gpu.standin.assert_no_violations();
}

#[test]
fn timestamps_are_read_and_converted_to_the_system_domain() {
    let machine = Machine::default();
    let gpu = Gpu::new(machine);
    let queue = gpu.queue(gpu.queue_options(&machine));
    let pool = SignalPool::new(&gpu.device);
    let kernel = gpu
        .standin
        .register_kernel(Kernel::Duration(Duration::from_micros(50)));
    let rocr_pool = SignalPool::new(&gpu.device);
    let (raw, _) = allocate(&pool, 1, Placement::Device)[0];
    gpu.standin.set_pool_exhausted(PoolKind::Device, true);
    gpu.standin.set_pool_exhausted(PoolKind::System, true);
    let (rocr, _) = allocate(&rocr_pool, 1, Placement::Device)[0];
    assert!(rocr.is_rocr_signal());
    let pool_of = |signal: HsaSignal| {
        if signal.is_rocr_signal() {
            &rocr_pool
        } else {
            &pool
        }
    };
    let mut indices = Vec::new();
    for signal in [raw, rocr] {
        let pool = pool_of(signal);
        // SAFETY: signals of `pool`.
        unsafe { pool.store(signal, 1) };
        pool.store_fence();
        let index = queue.reserve().unwrap();
        queue
            .publish(
                Publication::untracked(index, true, pool.packet_handle(signal)),
                Work::Kernel(kernel),
            )
            .unwrap();
        // SAFETY: as above.
        let seen = unsafe { pool.wait_change(signal, 1, Duration::from_secs(10)) };
        assert_eq!(seen, 0);
        indices.push(index);
    }
    for (signal, index) in [raw, rocr].into_iter().zip(indices) {
        let pool = pool_of(signal);
        let truth = gpu.control(&queue).truth(index).unwrap();
        // SAFETY: a signal of `pool`, its use complete.
        let stamps = unsafe { pool.timestamps(signal) }.expect("stamped");
        assert_eq!(
            stamps.start,
            gpu.standin.gpu_to_system(truth.start_ts),
            "{signal:?}"
        );
        assert_eq!(
            stamps.end,
            gpu.standin.gpu_to_system(truth.end_ts),
            "{signal:?}"
        );
        assert!(stamps.end > stamps.start);
        let elapsed =
            sigretire_hsa::system_duration(stamps.ticks(), gpu.runtime.timestamp_frequency());
        assert!(elapsed >= Duration::from_micros(50), "{elapsed:?}");
    }
    assert_eq!(
        gpu.standin
            .calls("hsa_amd_profiling_convert_tick_to_system_domain"),
        2
    );
    assert_eq!(gpu.standin.calls("hsa_amd_profiling_get_dispatch_time"), 1);
    drop(queue);
    drop((pool, rocr_pool));
    gpu.standin.assert_no_violations();
}

#[test]
fn unstamped_signals_have_no_stamps() {
    let gpu = Gpu::stepped();
    let pool = SignalPool::new(&gpu.device);
    let (raw, _) = allocate(&pool, 1, Placement::Host)[0];
    // SAFETY: a signal of `pool`.
    let seen = unsafe { pool.timestamps(raw) };
    assert_eq!(seen, None);
}
