//! The oracle can fail: each bug the stand-in's checks exist for, made on
//! purpose (through ROCr's raw functions where the backend would never make
//! it), is reported. Without these, a clean run of the other tests would
//! prove nothing.

mod support;

use hsa_sys::{amd_signal_t, hsa_signal_t};
use sigretire_hsa::{AqlQueue, QueueOptions, SignalPool};
use sigretire_rocr_standin::ViolationKind;
use sigretire_tracker::{
    Placement, Work,
    backend::{HardwareQueue, Publication, SignalMemory},
};
use std::ffi::c_void;
use support::Gpu;

fn queue(gpu: &Gpu) -> AqlQueue {
    gpu.queue(QueueOptions {
        size: 64,
        drain_timeout: std::time::Duration::ZERO,
        ..QueueOptions::default()
    })
}

fn signal(pool: &SignalPool) -> sigretire_hsa::HsaSignal {
    let mut out = Vec::new();
    pool.allocate(1, Placement::Device, &mut out).unwrap();
    out[0].0
}

fn publish(queue: &AqlQueue, work: Work<'_>, completion: u64) {
    let index = queue.reserve().unwrap();
    queue
        .publish(Publication::untracked(index, true, completion), work)
        .unwrap();
}

/// The stand-in reported exactly these violations so far, of these kinds.
#[track_caller]
fn assert_reported(gpu: &Gpu, expected: &[ViolationKind]) {
    let violations = gpu.standin.violations();
    let kinds: Vec<ViolationKind> = violations.iter().map(|v| v.kind).collect();
    assert_eq!(kinds, expected, "{violations:#?}");
}

/// A block of the device's VRAM pool, raw, as a buggy backend would make it;
/// `grant`: give the host access.
fn raw_block(gpu: &Gpu, grant: bool) -> *mut c_void {
    let api = gpu.runtime.api();
    let pool = gpu.device.vram_pool().unwrap();
    let mut block: *mut c_void = std::ptr::null_mut();
    // SAFETY: the runtime is initialised; flags 0; a place for the address.
    let status =
        unsafe { api.hsa_amd_memory_pool_allocate(pool.handle(), 4096, 0, &raw mut block) };
    api.check_status(status).unwrap();
    if grant {
        let cpu = gpu.runtime.cpu_agent();
        // SAFETY: a live block; one agent; flags null.
        let status = unsafe { api.hsa_amd_agents_allow_access(1, &cpu, std::ptr::null(), block) };
        api.check_status(status).unwrap();
    }
    // SAFETY: the block is 4096 bytes, 64-byte aligned, and ours alone.
    unsafe {
        block
            .cast::<amd_signal_t>()
            .write_volatile(amd_signal_t::new_user(1))
    };
    block
}

#[test]
fn a_signal_re_armed_while_its_packet_is_in_flight_is_reported() {
    let gpu = Gpu::stepped();
    let queue = queue(&gpu);
    let pool = SignalPool::new(&gpu.device);
    let s = signal(&pool);
    // SAFETY: signals of `pool`.
    unsafe { pool.store(s, 1) };
    pool.store_fence();
    publish(&queue, Work::Empty, pool.packet_handle(s));
    // SAFETY: as above (the bug: the first packet has not run).
    unsafe { pool.store(s, 1) };
    publish(&queue, Work::Empty, pool.packet_handle(s));
    assert_reported(&gpu, &[ViolationKind::RearmWhileInFlight]);
}

#[test]
fn a_signal_never_armed_is_reported() {
    let gpu = Gpu::stepped();
    let queue = queue(&gpu);
    let pool = SignalPool::new(&gpu.device);
    let s = signal(&pool);
    publish(&queue, Work::Empty, pool.packet_handle(s));
    assert_reported(&gpu, &[ViolationKind::RearmWhileInFlight]);
}

#[test]
fn memory_freed_under_a_pending_packet_is_reported() {
    let gpu = Gpu::stepped();
    let queue = queue(&gpu);
    let block = raw_block(&gpu, true);
    publish(&queue, Work::Empty, block as u64);
    // SAFETY: the block came from hsa_amd_memory_pool_allocate (the bug: a
    // pending packet still completes it).
    unsafe { gpu.runtime.api().hsa_amd_memory_pool_free(block) };
    assert_reported(&gpu, &[ViolationKind::BadRelease]);
}

#[test]
fn a_packet_naming_freed_memory_is_reported() {
    let gpu = Gpu::stepped();
    let queue = queue(&gpu);
    let block = raw_block(&gpu, true);
    // SAFETY: the block came from hsa_amd_memory_pool_allocate.
    unsafe { gpu.runtime.api().hsa_amd_memory_pool_free(block) };
    publish(&queue, Work::Empty, block as u64);
    assert_reported(&gpu, &[ViolationKind::BadSignal]);
}

#[test]
fn vram_the_host_was_never_granted_is_reported() {
    let gpu = Gpu::stepped();
    let queue = queue(&gpu);
    let block = raw_block(&gpu, false);
    publish(&queue, Work::Empty, block as u64);
    assert_reported(&gpu, &[ViolationKind::NoAccess]);
    drop(queue);
    // SAFETY: the block came from hsa_amd_memory_pool_allocate; its packet
    // never ran (stepped) and its queue is destroyed.
    unsafe { gpu.runtime.api().hsa_amd_memory_pool_free(block) };
}

#[test]
fn a_gpu_waiters_signal_re_armed_before_the_waiter_saw_it_is_reported() {
    let gpu = Gpu::stepped();
    let producer = queue(&gpu);
    let consumer = queue(&gpu);
    let pool = SignalPool::new(&gpu.device);
    let s = signal(&pool);
    let handle = pool.packet_handle(s);
    // SAFETY: a signal of `pool`.
    unsafe { pool.store(s, 1) };
    pool.store_fence();
    publish(&producer, Work::Empty, handle);
    publish(&consumer, Work::Wait(&[handle]), 0);
    gpu.control(&producer).run_until_idle(); // the use completes; the waiter has not run
    // SAFETY: as above (the bug: the waiter still needs to see the 0).
    unsafe { pool.store(s, 1) };
    publish(&producer, Work::Empty, handle);
    assert_reported(&gpu, &[ViolationKind::RearmWhileInFlight]);
}

#[test]
fn a_raw_block_passed_to_rocrs_signal_calls_is_reported() {
    let gpu = Gpu::stepped();
    let pool = SignalPool::new(&gpu.device);
    let s = signal(&pool);
    // SAFETY: the bug under test: ROCr would misread the block; the stand-in
    // reports it instead.
    unsafe { gpu.runtime.api().hsa_signal_load_scacquire(s.handle()) };
    assert_reported(&gpu, &[ViolationKind::BadSignal]);
    // SAFETY: as above.
    unsafe {
        gpu.runtime.api().hsa_signal_destroy(hsa_signal_t {
            handle: pool.packet_handle(s),
        })
    };
    assert_reported(&gpu, &[ViolationKind::BadSignal, ViolationKind::BadRelease]);
}

#[test]
fn what_is_left_at_shutdown_is_reported() {
    let gpu = Gpu::stepped();
    let api = gpu.runtime.api();
    let mut leaked: *mut hsa_sys::hsa_queue_t = std::ptr::null_mut();
    // SAFETY: a GPU agent; no callback; a place for the queue.
    let status = unsafe {
        api.hsa_queue_create(
            gpu.device.agent(),
            64,
            0,
            None,
            std::ptr::null_mut(),
            u32::MAX,
            u32::MAX,
            &raw mut leaked,
        )
    };
    api.check_status(status).unwrap();
    let Gpu {
        device,
        runtime,
        standin,
    } = gpu;
    drop((device, runtime)); // hsa_shut_down with the queue alive
    let violations = standin.violations();
    assert!(
        violations.iter().any(|v| v.kind == ViolationKind::Leak),
        "{violations:#?}"
    );
}
