//! A loom model of the queue's central protocol, "CPU wait outside the lock
//! versus concurrent submit", run with
//! `RUSTFLAGS="--cfg loom" cargo test -p fences --no-default-features --release --test loom_queue`
//! (a separate target dir keeps `--cfg loom` from invalidating the normal
//! build). It runs the real queue code on the tracker's host-memory backend
//! (`tracker::HostMemory`, loom-aware); only the hardware queue is a small
//! stand-in, and the "GPU" is the model's main thread completing published
//! packets in order.
#![cfg(loom)]

use fences::{Device, DeviceConfig, QueueConfig};
use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use loom::sync::{Arc, Mutex};
use std::time::Duration;
use tracker::{
    Config, HardwareQueue, HostMemory, QueueError, QueueView, RetiringTracker, Status, Ticket,
    Tracker, WaitPolicy, Work,
};

/// A hardware queue: published packets' completion handles, in order.
struct Ring {
    memory: Arc<HostMemory>,
    write: AtomicU64,
    read: AtomicU64,
    /// Packets before this index completed (recorded before the signal's
    /// decrement, which is what the host can observe).
    completed: AtomicU64,
    /// `Some(handle)` once published (handle 0: no completion signal).
    packets: Mutex<Vec<Option<u64>>>,
}

#[derive(Clone)]
struct LoomQueue(Arc<Ring>);

impl QueueView for LoomQueue {
    fn read_index(&self) -> u64 {
        self.0.read.load(Ordering::Acquire)
    }

    fn ring_in_device_memory(&self) -> bool {
        true
    }
}

impl HardwareQueue for LoomQueue {
    fn reserve(&self) -> Result<u64, QueueError> {
        let index = self.0.write.fetch_add(1, Ordering::AcqRel);
        let mut packets = self.0.packets.lock().unwrap();
        if packets.len() <= index as usize {
            packets.resize(index as usize + 1, None);
        }
        Ok(index)
    }

    fn publish(&self, index: u64, _: Work<'_>, _: bool, completion: u64) -> Result<(), QueueError> {
        self.0.packets.lock().unwrap()[index as usize] = Some(completion);
        Ok(())
    }
}

impl LoomQueue {
    /// The GPU completes the next packet if it is published; true if it did.
    fn complete_next(&self) -> bool {
        let next = self.0.read.load(Ordering::Acquire);
        let handle = match self.0.packets.lock().unwrap().get(next as usize) {
            Some(Some(handle)) => *handle,
            _ => return false,
        };
        self.0.completed.store(next + 1, Ordering::Release);
        if handle != 0 {
            self.0.memory.complete(handle);
        }
        self.0.read.store(next + 1, Ordering::Release);
        true
    }

    fn completed(&self, index: u64) -> bool {
        self.0.completed.load(Ordering::Acquire) > index
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = builder.preemption_bound.or(Some(2));
    builder.check(f);
}

/// Synchronize waits for its marker outside the lock while another thread
/// submits: synchronize returns only after the GPU completed everything
/// before its marker, the queue-state reset (a drain) never retires the
/// concurrent submission early, and the submission never waits for the GPU.
#[test]
fn cpu_wait_outside_the_lock_versus_concurrent_submit() {
    model(|| {
        let memory = Arc::new(HostMemory::new(6));
        let hw = LoomQueue(Arc::new(Ring {
            memory: memory.clone(),
            write: AtomicU64::new(0),
            read: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            packets: Mutex::new(Vec::new()),
        }));
        let tracker = RetiringTracker::new(
            memory,
            hw.clone(),
            Config {
                initial_size: 4,
                growth_limit: 1,
                refill_batch: 1,
                ..Config::default()
            },
        )
        .unwrap();
        let config = QueueConfig {
            // Every poll of a wait is a loom yield (the tracker's spin phase).
            wait_policy: WaitPolicy {
                spin: Duration::from_secs(3600),
                yield_for: Duration::ZERO,
                max_sleep: Duration::ZERO,
            },
            error_check_interval: Duration::from_secs(3600),
            ..QueueConfig::default()
        };
        let device = Device::new(DeviceConfig::default(), tracker, config).unwrap();
        let queue = device.default_queue().clone();
        let first = queue.launch(0).unwrap();
        let submitted: Arc<Mutex<Option<(Ticket, u64)>>> = Arc::new(Mutex::new(None));
        let done = Arc::new(AtomicBool::new(false));

        let syncing = {
            let (queue, hw, submitted, done) =
                (queue.clone(), hw.clone(), submitted.clone(), done.clone());
            loom::thread::spawn(move || {
                queue.synchronize().unwrap();
                assert!(hw.completed(first.aql_index()), "returned before the GPU");
                // Whatever the reset did, it did not retire work the GPU has
                // not completed.
                let concurrent = *submitted.lock().unwrap();
                if let Some((ticket, index)) = concurrent {
                    let known = queue.with_tracker(|t| t.known_status(&ticket).unwrap());
                    if known == Some(Status::Complete) {
                        assert!(hw.completed(index), "a submission retired early");
                    }
                }
                done.store(true, Ordering::Release);
            })
        };
        let submitting = {
            let (queue, submitted) = (queue.clone(), submitted.clone());
            loom::thread::spawn(move || {
                let command = queue.launch(0).unwrap();
                *submitted.lock().unwrap() = Some((command.ticket(), command.aql_index()));
            })
        };
        // The GPU: complete published packets in order until synchronize
        // returned, then the rest.
        while !done.load(Ordering::Acquire) {
            if !hw.complete_next() {
                loom::thread::yield_now();
            }
        }
        submitting.join().unwrap();
        syncing.join().unwrap();
        while hw.complete_next() {}
        assert_eq!(queue.query().unwrap(), Status::Complete);
    });
}
