//! A GPU small enough for the crate's own unit tests: host-memory signals
//! (placed where they were asked for, so device-signal paths run), a store
//! fence and HDP flush counted by the memory itself, and queues of packets
//! that complete in order when the test says so. The simulator, with every
//! packet type and the ground truth, backs the cross-crate scenarios; these
//! tests look inside the tracker and only need signals to go to 0.

use crate::backend::HostMemory;
use crate::backend::{AllocError, Placement, QueueView, SignalMemory, TimestampClock, Timestamps};
use crate::sync::Arc;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Signals in host memory that report the placement asked for, and count
/// the store fences and HDP flushes the tracker issues.
#[derive(Debug)]
pub(crate) struct TestMemory {
    host: HostMemory,
    placements: Mutex<Vec<Placement>>,
    pub(crate) fences: AtomicU64,
    pub(crate) flushes: AtomicU64,
}

impl TestMemory {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            host: HostMemory::new(capacity),
            placements: Mutex::new(vec![Placement::Host; capacity]),
            fences: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
        }
    }
}

impl SignalMemory for TestMemory {
    type Signal = usize;

    fn allocate(
        &self,
        count: usize,
        placement: Placement,
        out: &mut Vec<(usize, Placement)>,
    ) -> Result<(), AllocError> {
        let first = out.len();
        self.host.allocate(count, placement, out)?;
        let mut placements = self.placements.lock();
        for entry in &mut out[first..] {
            placements[entry.0] = placement;
            entry.1 = placement;
        }
        Ok(())
    }

    unsafe fn load(&self, signal: usize) -> i64 {
        // SAFETY: forwarded caller guarantee.
        unsafe { self.host.load(signal) }
    }

    unsafe fn store(&self, signal: usize, value: i64) {
        // SAFETY: forwarded caller guarantee.
        unsafe { self.host.store(signal, value) }
    }

    fn store_fence(&self) {
        self.fences.fetch_add(1, Ordering::Relaxed);
    }

    fn hdp_flush(&self) {
        self.flushes.fetch_add(1, Ordering::Relaxed);
    }

    unsafe fn timestamps(&self, _: usize) -> Option<Timestamps> {
        None
    }

    fn timestamp_clock(&self) -> TimestampClock {
        TimestampClock::NANOSECONDS
    }

    fn packet_handle(&self, signal: usize) -> u64 {
        self.host.packet_handle(signal)
    }

    fn shares_signals_with(&self, other: &Self) -> bool {
        core::ptr::eq(self, other)
    }
}

#[derive(Debug)]
struct Packet {
    /// The completion handle (0: none).
    signal: u64,
    done: bool,
}

#[derive(Debug)]
struct QueueState {
    memory: Arc<TestMemory>,
    packets: Mutex<Vec<Packet>>,
    read_index: AtomicU64,
    ring_in_device_memory: bool,
}

/// An in-order hardware queue: packets are published at consecutive
/// indices and complete, oldest first, when the test runs the queue.
#[derive(Clone, Debug)]
pub(crate) struct TestQueue(std::sync::Arc<QueueState>);

impl TestQueue {
    pub(crate) fn new(memory: &Arc<TestMemory>) -> Self {
        Self(std::sync::Arc::new(QueueState {
            memory: memory.clone(),
            packets: Mutex::new(Vec::new()),
            read_index: AtomicU64::new(0),
            ring_in_device_memory: true,
        }))
    }

    /// The next packet's index.
    pub(crate) fn write_index(&self) -> u64 {
        self.0.packets.lock().len() as u64
    }

    /// Publishes a packet completing `signal` (a packet handle; 0: none)
    /// and returns its index.
    pub(crate) fn publish(&self, signal: u64) -> u64 {
        let mut packets = self.0.packets.lock();
        packets.push(Packet {
            signal,
            done: false,
        });
        packets.len() as u64 - 1
    }

    /// Completes every published packet in order and moves the read index
    /// past them.
    pub(crate) fn run_until_idle(&self) {
        let mut packets = self.0.packets.lock();
        for packet in packets.iter_mut().filter(|p| !p.done) {
            if packet.signal != 0 {
                self.0.memory.host.complete(packet.signal);
            }
            packet.done = true;
        }
        self.0
            .read_index
            .store(packets.len() as u64, Ordering::Release);
    }
}

impl QueueView for TestQueue {
    fn read_index(&self) -> u64 {
        self.0.read_index.load(Ordering::Acquire)
    }

    fn ring_in_device_memory(&self) -> bool {
        self.0.ring_in_device_memory
    }
}

/// A tracker of kind `T` (made by `make`) on a fresh test GPU of `capacity`
/// signals, and its queue.
pub(crate) fn on_a_test_gpu<T>(
    config: crate::Config,
    make: impl FnOnce(Arc<TestMemory>, TestQueue, crate::Config) -> Result<T, crate::CreateError>,
) -> (T, TestQueue) {
    let memory = Arc::new(TestMemory::new(4096));
    let queue = TestQueue::new(&memory);
    let tracker = make(memory, queue.clone(), config).expect("a valid test configuration");
    (tracker, queue)
}

/// Acquires one use shared by `ops` packets and publishes them, naming its
/// signal in the first `issued` only (the rest name none, as a queue layer
/// publishes a failed submission's unissued part). The caller decides
/// whether to fail it.
pub(crate) fn submit_part<T: crate::Tracker<Queue = TestQueue>>(
    tracker: &mut T,
    queue: &TestQueue,
    ops: u32,
    issued: u32,
) -> crate::Ticket {
    let first = queue.write_index();
    let last = first + u64::from(ops) - 1;
    let acquired = tracker
        .acquire(crate::Request::packet(last).ops(ops))
        .unwrap();
    for op in 0..ops {
        let signal = if op < issued { acquired.signal } else { 0 };
        queue.publish(signal);
    }
    acquired.ticket
}
