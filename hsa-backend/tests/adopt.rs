//! A queue the runtime made itself, adopted: the runtime's own packets and
//! the tracker's share the ring, the backend never destroys what it does
//! not own, errors reach it only when the runtime forwards them, and its
//! memory is freed only once nothing on the runtime's queue can touch it.

use hsa_sys::{
    AqlSlot, HSA_QUEUE_TYPE_MULTI, HSA_STATUS_ERROR_EXCEPTION, HSA_STATUS_SUCCESS, HsaApi,
    amd_queue_t, hsa_queue_t,
};
use sigretire_hsa::{AdoptOptions, AqlQueue, Error, Runtime, SignalPool, packet};
use sigretire_rocr_standin::{Config as Machine, Kernel, Standin};
use sigretire_tracker::{
    Config, Placement, Request, RetiringTracker, Status, Tracker, WaitPolicy, Work,
    backend::{HardwareQueue, QueueError},
};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The runtime's side: its queue, made and destroyed by itself.
struct RuntimeQueue<'a> {
    api: &'a HsaApi,
    raw: *mut hsa_queue_t,
}

impl<'a> RuntimeQueue<'a> {
    fn create(runtime: &'a Runtime, device: &sigretire_hsa::Agent) -> Self {
        let mut raw: *mut hsa_queue_t = std::ptr::null_mut();
        // SAFETY: a GPU agent of an initialised runtime; no callback.
        let status = unsafe {
            runtime.api().hsa_queue_create(
                device.agent(),
                256,
                HSA_QUEUE_TYPE_MULTI,
                None,
                std::ptr::null_mut(),
                u32::MAX,
                u32::MAX,
                &raw mut raw,
            )
        };
        assert_eq!(status, HSA_STATUS_SUCCESS);
        Self {
            api: runtime.api(),
            raw,
        }
    }

    /// Publishes a barrier-AND of the runtime's own, as a runtime does:
    /// reserve with an atomic add on the write index, body, header, doorbell.
    fn publish_own_barrier(&self) -> u64 {
        // SAFETY: the runtime's live queue: its descriptor begins an
        // `amd_queue_t` whose write index every producer updates atomically.
        let write = unsafe {
            AtomicU64::from_ptr(&raw mut (*self.raw.cast::<amd_queue_t>()).write_dispatch_id)
        };
        let index = write.fetch_add(1, Ordering::AcqRel);
        // SAFETY: as above; the ring holds `size` 64-byte slots.
        let (ring, size, doorbell) = unsafe {
            let q = &*self.raw;
            (q.base_address.cast::<AqlSlot>(), q.size, q.doorbell_signal)
        };
        // SAFETY: the slot of a reserved index, inside the ring.
        let slot = unsafe { &*ring.add((index & u64::from(size - 1)) as usize) };
        slot.publish(packet::barrier_and(&[], true, 0).unwrap());
        // SAFETY: the queue's own doorbell.
        unsafe { self.api.hsa_signal_store_screlease(doorbell, index as i64) };
        index
    }

    fn destroy(self) {
        // SAFETY: the runtime's queue, destroyed once, after the backend
        // let go of it.
        let status = unsafe { self.api.hsa_queue_destroy(self.raw) };
        assert_eq!(status, HSA_STATUS_SUCCESS);
    }
}

fn device_signals() -> Config {
    Config {
        signals: Placement::Device,
        ..Config::default()
    }
}

#[test]
fn the_trackers_uses_and_the_runtimes_own_packets_share_an_adopted_queue() {
    let standin = Standin::new(Machine::default()).unwrap();
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    let device = runtime.device(0).unwrap();
    let own = RuntimeQueue::create(&runtime, &device);
    // SAFETY: a live queue of this device, destroyed after the handle.
    let queue = unsafe { AqlQueue::adopt(&device, own.raw, AdoptOptions::default()) }.unwrap();
    assert!(queue.is_adopted() && queue.is_profiled());
    let pool = Arc::new(SignalPool::new(&device));
    let mut tracker = RetiringTracker::new(pool.clone(), queue.clone(), device_signals()).unwrap();
    let slow = standin.register_kernel(Kernel::Duration(Duration::from_millis(2)));
    let mut tickets = Vec::new();
    for round in 0..16u64 {
        let first_own = own.publish_own_barrier();
        let index = queue.reserve().unwrap();
        assert_eq!(index, first_own + 1, "after the runtime's packet");
        let acquired = tracker
            .acquire(Request::packet(index).barrier(round % 2 == 0))
            .unwrap();
        queue
            .publish(acquired.publication, Work::Kernel(slow))
            .unwrap();
        tickets.push(acquired.ticket);
    }
    let waiter = tracker.waiter();
    for ticket in &tickets {
        let status = waiter
            .wait(ticket, Duration::from_secs(10), WaitPolicy::spin())
            .unwrap();
        assert_eq!(status, Status::Complete);
    }
    assert_eq!(queue.read_index(), 32, "16 packets of each");
    drop((waiter, tracker, pool, queue));
    assert_eq!(
        standin.calls("hsa_queue_destroy"),
        0,
        "the backend destroys nothing it does not own"
    );
    // The runtime's queue still works after the backend let go.
    let after = own.publish_own_barrier();
    standin.queue(own.raw).run_until_idle();
    // SAFETY: the runtime's live queue.
    assert!(unsafe { runtime.api().hsa_queue_load_read_index_scacquire(own.raw) } > after);
    own.destroy();
    assert_eq!(runtime.deferred_releases(), 0, "drained: freed at once");
    drop((device, runtime));
    assert_eq!(standin.census(), sigretire_rocr_standin::Census::default());
    standin.assert_no_violations();
}

#[test]
fn memory_of_an_adopted_queue_that_did_not_drain_waits_for_the_runtime_to_shut_down() {
    let standin = Standin::new(Machine::stepped()).unwrap();
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    let device = runtime.device(0).unwrap();
    let own = RuntimeQueue::create(&runtime, &device);
    let options = AdoptOptions {
        drain_timeout: Duration::ZERO,
        ..AdoptOptions::default()
    };
    // SAFETY: a live queue of this device, destroyed after the handle.
    let queue = unsafe { AqlQueue::adopt(&device, own.raw, options) }.unwrap();
    let pool = Arc::new(SignalPool::new(&device));
    let mut tracker = RetiringTracker::new(pool.clone(), queue.clone(), device_signals()).unwrap();
    let index = queue.reserve().unwrap();
    let acquired = tracker
        .acquire(Request::packet(index).barrier(true))
        .unwrap();
    queue.publish(acquired.publication, Work::Empty).unwrap();
    let blocks = pool.batches().len();
    drop((tracker, pool, queue));
    // Nothing ran (stepped) and nothing drained: the packet may still
    // write the pool's memory.
    assert_eq!(standin.calls("hsa_amd_memory_pool_free"), 0);
    assert_eq!(runtime.deferred_releases(), blocks);
    standin.queue(own.raw).run_until_idle();
    own.destroy();
    assert_eq!(
        runtime.deferred_releases(),
        blocks,
        "the backend cannot know"
    );
    drop((device, runtime)); // the runtime shuts down: everything goes
    assert_eq!(standin.census(), sigretire_rocr_standin::Census::default());
    standin.assert_no_violations();
}

#[test]
fn an_adopted_queue_fails_when_the_runtime_forwards_its_callbacks_error() {
    let standin = Standin::new(Machine::stepped()).unwrap();
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    let device = runtime.device(0).unwrap();
    let own = RuntimeQueue::create(&runtime, &device);
    let options = AdoptOptions {
        drain_timeout: Duration::ZERO,
        ..AdoptOptions::default()
    };
    // SAFETY: a live queue of this device, destroyed after the handle.
    let queue = unsafe { AqlQueue::adopt(&device, own.raw, options) }.unwrap();
    let pool = Arc::new(SignalPool::new(&device));
    let mut tracker = RetiringTracker::new(pool.clone(), queue.clone(), device_signals()).unwrap();
    let index = queue.reserve().unwrap();
    let acquired = tracker.acquire(Request::packet(index)).unwrap();
    queue.publish(acquired.publication, Work::Empty).unwrap();
    standin.queue(own.raw).fail();
    // ROCr told the runtime's callback (here: none), not the backend.
    assert_eq!(queue.error(), None);
    queue.report_error(HSA_STATUS_ERROR_EXCEPTION);
    assert!(matches!(queue.reserve(), Err(QueueError::Failed(_))));
    assert_eq!(tracker.fail_queue(), 1);
    assert_eq!(tracker.query(&acquired.ticket).unwrap(), Status::Failed);
    drop((tracker, pool, queue));
    // A failed queue runs nothing more: its memory is freed at once.
    assert_eq!(runtime.deferred_releases(), 0);
    own.destroy();
    drop((device, runtime));
    standin.assert_no_violations();
}

#[test]
fn a_null_queue_is_refused() {
    let standin = Standin::new(Machine::stepped()).unwrap();
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    let device = runtime.device(0).unwrap();
    // SAFETY: a null queue is checked before anything reads it.
    let refused =
        unsafe { AqlQueue::adopt(&device, std::ptr::null_mut(), AdoptOptions::default()) };
    let error = refused.unwrap_err();
    assert!(matches!(error, Error::InvalidQueue(_)), "{error}");
    assert!(error.to_string().contains("null"), "{error}");
    assert_eq!(runtime.deferred_releases(), 0);
}
