//! AQL queues: a ROCr-style queue (an `amd_queue_t` block, a ring of packet
//! slots the application writes, a doorbell signal) in front of a simulator
//! queue.
//!
//! The application sees exactly what ROCr gives it: `hsa_queue_t*` is the
//! address of an `amd_queue_t` whose `base_address` ring it writes packets
//! into, whose `write_dispatch_id` it advances, and whose doorbell it rings
//! with `hsa_signal_store_*`. The simulator's queue has a ring of its own, so
//! a doorbell is where the two meet: like a packet processor fetching packets,
//! the adapter takes every published packet up to the rung index, in order,
//! checks it ([`Checker`](crate::checker::Checker)), hands it to the
//! simulator and marks the application's slot INVALID again. The read index
//! the application sees is the simulator's.

use crate::abi::{Config, StepStatus};
use crate::violation::Violations;
use hsa_sys::*;
use parking_lot::{Mutex, RwLock};
use sigretire_sim::{Placement, Sim, SimQueueConfig, StepError};
use std::collections::HashMap;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// The error callback of `hsa_queue_create`.
pub(crate) type QueueCallback =
    Option<unsafe extern "C" fn(status: hsa_status_t, source: *mut hsa_queue_t, data: *mut c_void)>;

/// The adapter's progress through the application's ring.
#[derive(Debug, Default)]
struct Fetch {
    /// The next packet to hand to the simulator.
    next: u64,
    /// One past the highest packet id a doorbell was rung with.
    rung: u64,
}

/// One queue created by `hsa_queue_create`.
pub(crate) struct QueueAdapter {
    pub(crate) id: u64,
    pub(crate) gpu: u32,
    size: u32,
    block: NonNull<amd_queue_t>,
    ring: NonNull<AqlSlot>,
    doorbell: NonNull<amd_signal_t>,
    profiling: AtomicBool,
    sim_config: SimQueueConfig,
    sim_queue: OnceLock<sigretire_sim::Queue>,
    fetch: Mutex<Fetch>,
    callback: QueueCallback,
    /// The callback's `data`, an address the application owns.
    data: usize,
    destroyed: AtomicBool,
}

// SAFETY: the three blocks are owned by the adapter (allocated in `new`,
// freed in `Drop`). The application and the adapter touch their mutable parts
// only through atomics (`write_dispatch_id`, `read_dispatch_id`, the ring's
// `AqlSlot` words); everything else is written once, before the queue is
// published. `data` is an address passed back verbatim, never dereferenced.
unsafe impl Send for QueueAdapter {}
// SAFETY: as above.
unsafe impl Sync for QueueAdapter {}

impl QueueAdapter {
    /// Whether the simulated queue behind the ring failed.
    pub(crate) fn is_failed(&self) -> bool {
        self.sim_queue.get().is_some_and(|queue| queue.is_failed())
    }

    fn new(
        config: &Config,
        id: u64,
        gpu: u32,
        size: u32,
        callback: QueueCallback,
        data: usize,
    ) -> Self {
        let ring: Box<[AqlSlot]> = (0..size).map(|_| AqlSlot::invalid()).collect();
        let ring = NonNull::from(Box::leak(ring)).cast::<AqlSlot>();
        let mut doorbell = Box::new(amd_signal_t::new_user(0));
        doorbell.kind = AMD_SIGNAL_KIND_DOORBELL;
        let doorbell = NonNull::from(Box::leak(doorbell));
        // SAFETY: every field of `amd_queue_t` is an integer, an array of
        // integers, a raw pointer or a handle, for which all-zero bytes are a
        // valid value (as ROCr's own zero-initialised block).
        let mut block: Box<amd_queue_t> = Box::new(unsafe { std::mem::zeroed() });
        block.hsa_queue = hsa_queue_t {
            type_: HSA_QUEUE_TYPE_MULTI,
            features: HSA_QUEUE_FEATURE_KERNEL_DISPATCH,
            base_address: ring.as_ptr().cast(),
            doorbell_signal: hsa_signal_t {
                handle: doorbell.as_ptr() as u64,
            },
            size,
            reserved1: 0,
            id,
        };
        let block = NonNull::from(Box::leak(block));
        Self {
            id,
            gpu,
            size,
            block,
            ring,
            doorbell,
            profiling: AtomicBool::new(false),
            sim_config: SimQueueConfig {
                agent: sigretire_sim::AgentId(gpu),
                size,
                ring: if config.ring_in_device_memory {
                    Placement::Device
                } else {
                    Placement::Host
                },
                profiling: false,
                out_of_order: config.out_of_order,
                truth_history: usize::try_from(config.truth_history).unwrap_or(usize::MAX),
            },
            sim_queue: OnceLock::new(),
            fetch: Mutex::new(Fetch::default()),
            callback,
            data,
            destroyed: AtomicBool::new(false),
        }
    }

    /// The `hsa_queue_t*` the application holds.
    pub(crate) fn hsa_queue(&self) -> *mut hsa_queue_t {
        self.block.as_ptr().cast()
    }

    fn doorbell_handle(&self) -> u64 {
        self.doorbell.as_ptr() as u64
    }

    pub(crate) fn is_destroyed(&self) -> bool {
        self.destroyed.load(Ordering::Acquire)
    }

    /// `write_dispatch_id`, which producers advance.
    pub(crate) fn write_index(&self) -> &AtomicU64 {
        // SAFETY: the block lives as long as `self`; the field is 8-byte
        // aligned and every party accesses it atomically.
        unsafe { AtomicU64::from_ptr(&raw mut (*self.block.as_ptr()).write_dispatch_id) }
    }

    fn read_dispatch_id(&self) -> &AtomicU64 {
        // SAFETY: as in `write_index`.
        unsafe { AtomicU64::from_ptr(&raw mut (*self.block.as_ptr()).read_dispatch_id) }
    }

    fn slot(&self, index: u64) -> &AqlSlot {
        let offset = (index & u64::from(self.size - 1)) as usize;
        // SAFETY: the ring holds `size` slots and lives as long as `self`.
        unsafe { &*self.ring.as_ptr().add(offset) }
    }

    /// `hsa_amd_profiling_set_profiler_enabled`.
    pub(crate) fn set_profiling(&self, violations: &Violations, enabled: bool) {
        self.profiling.store(enabled, Ordering::Release);
        if let Some(queue) = self.sim_queue.get()
            && queue.config().profiling != enabled
        {
            violations.record(
                crate::ViolationKind::BadQueueUse,
                format!(
                    "queue {}: profiling switched {} after its first packet; the simulator \
                 keeps the setting a queue started with (only hardware switches mid-stream)",
                    self.id,
                    if enabled { "on" } else { "off" }
                ),
            );
        }
    }

    /// The simulator's queue, created at first use so that it starts with the
    /// profiling setting of that moment (the simulator cannot switch it).
    pub(crate) fn sim_queue(&self, sim: &Sim) -> &sigretire_sim::Queue {
        self.sim_queue.get_or_init(|| {
            let config = SimQueueConfig {
                profiling: self.profiling.load(Ordering::Acquire),
                ..self.sim_config
            };
            sim.create_queue(config)
                .expect("hsa_queue_create validated the size and agent")
        })
    }

    /// `hsa_queue_load_read_index_scacquire`.
    pub(crate) fn read_index(&self) -> u64 {
        let read = self
            .sim_queue
            .get()
            .map_or(0, sigretire_sim::Queue::read_index);
        self.read_dispatch_id().fetch_max(read, Ordering::AcqRel);
        read
    }

    /// A doorbell write: fetch every published packet up to `value` (a
    /// packet id), let `before_publish` check it (the instance's checker),
    /// and hand it to the simulator.
    pub(crate) fn ring_doorbell(
        self: &Arc<Self>,
        sim: &Sim,
        violations: &Violations,
        value: i64,
        mut before_publish: impl FnMut(&Arc<Self>, u64, &PacketWords),
    ) {
        if self.is_destroyed() {
            violations.record(
                crate::ViolationKind::BadQueueUse,
                format!("queue {}: doorbell rung after hsa_queue_destroy", self.id),
            );
            return;
        }
        let Ok(value) = u64::try_from(value) else {
            violations.record(
                crate::ViolationKind::BadQueueUse,
                format!(
                    "queue {}: doorbell rung with negative packet id {value}",
                    self.id
                ),
            );
            return;
        };
        let write_index = self.write_index().load(Ordering::Acquire);
        if value >= write_index {
            violations.record(crate::ViolationKind::BadQueueUse, format!(
                "queue {}: doorbell rung with packet id {value}, but only {write_index} were reserved",
                self.id
            ));
        }
        let queue = self.sim_queue(sim);
        let mut fetch = self.fetch.lock();
        fetch.rung = fetch.rung.max(value.saturating_add(1));
        let first = fetch.next;
        while fetch.next < fetch.rung.min(write_index) {
            let index = fetch.next;
            let slot = self.slot(index);
            if slot.header().is_none() {
                // Reserved but not yet published: its producer rings again.
                break;
            }
            let packet = slot.read();
            before_publish(self, index, &packet);
            match queue.reserve() {
                Ok(reserved) if reserved == index => {}
                outcome => {
                    violations.record(crate::ViolationKind::BadQueueUse, format!(
                        "queue {}: packet {index} was written over a slot the packet processor \
                         had not consumed (reserve the slot only once index - read index < size): {outcome:?}",
                        self.id
                    ));
                    break;
                }
            }
            queue.write(index, packet);
            // The processor has the packet: the slot is free for reuse once
            // the read index passes it, as after a real fetch.
            slot.invalidate();
            fetch.next += 1;
        }
        if fetch.next > first {
            queue.ring_doorbell(fetch.next - 1);
        }
    }

    /// A queue error: the simulator fails the queue, then ROCr calls the
    /// application's callback, on a thread of its own as ROCr's event thread
    /// would.
    pub(crate) fn fail(&self, sim: &Sim, violations: &Violations) {
        self.sim_queue(sim).fail();
        if let Some(callback) = self.callback {
            let queue = self.hsa_queue() as usize;
            let data = self.data;
            let thread = std::thread::spawn(move || {
                // SAFETY: the application registered `callback` with `data`
                // for this queue, which is not destroyed (its destruction
                // removes the adapter first).
                unsafe {
                    callback(
                        HSA_STATUS_ERROR_EXCEPTION,
                        queue as *mut hsa_queue_t,
                        data as *mut c_void,
                    )
                }
            });
            if thread.join().is_err() {
                violations.record(
                    crate::ViolationKind::BadQueueUse,
                    format!("queue {}: the error callback panicked", self.id),
                );
            }
        }
    }

    /// A step of the simulator's processor on this queue (stepped mode).
    pub(crate) fn step(
        &self,
        sim: &Sim,
        violations: &Violations,
        op: crate::abi::StepOp,
        index: u64,
    ) -> Result<u64, StepStatus> {
        use crate::abi::StepOp::*;
        let queue = self.sim_queue(sim);
        let flatten = |error: StepError| match error {
            StepError::NotLaunchable { .. } => StepStatus::NotLaunchable,
            StepError::NotLaunched { .. } => StepStatus::NotLaunched,
            StepError::NotReady { .. } => StepStatus::NotReady,
            StepError::OutOfOrder { .. } => StepStatus::OutOfOrder,
            StepError::AlreadyComplete { .. } => StepStatus::AlreadyComplete,
            StepError::QueueFailed => StepStatus::QueueFailed,
            StepError::MalformedPacket { .. } => StepStatus::Malformed,
            StepError::Stalled => StepStatus::Stalled,
            StepError::WrongMode => StepStatus::WrongMode,
        };
        match op {
            Launch => queue.launch().map_err(flatten),
            Complete => queue.complete(index).map(|()| index).map_err(flatten),
            AdvanceReadIndex => queue.advance_read_index().map_err(flatten),
            RunUntilIdle => {
                queue.run_until_idle();
                Ok(queue.read_index())
            }
            Fail => {
                self.fail(sim, violations);
                Ok(0)
            }
            Stall => {
                queue.stall(true);
                Ok(0)
            }
            Unstall => {
                queue.stall(false);
                Ok(0)
            }
        }
    }

    /// The ground truth of packet `index`, if the simulator has seen it.
    pub(crate) fn truth(&self, index: u64) -> Option<sigretire_sim::PacketTruth> {
        self.sim_queue.get()?.truth(index)
    }

    /// Whether packet `index` may still write its signals: published to the
    /// simulator, not finished, and the queue not destroyed.
    pub(crate) fn is_pending(&self, index: u64) -> bool {
        !self.is_destroyed()
            && self
                .truth(index)
                .is_some_and(|t| t.published && !t.is_done())
    }

    /// `hsa_queue_destroy`: the packet processor stops (the simulator's queue
    /// stalls for good), so nothing on it writes a signal any more.
    fn destroy(&self) {
        self.destroyed.store(true, Ordering::Release);
        if let Some(queue) = self.sim_queue.get() {
            queue.stall(true);
        }
    }
}

impl Drop for QueueAdapter {
    fn drop(&mut self) {
        // SAFETY: the three blocks came from `Box::leak` in `new` (the ring as
        // a boxed slice of `size` slots) and are reclaimed once, here, when
        // the last reference to the adapter goes (at shutdown at the latest).
        unsafe {
            drop(Box::from_raw(self.block.as_ptr()));
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.ring.as_ptr(),
                self.size as usize,
            )));
            drop(Box::from_raw(self.doorbell.as_ptr()));
        }
    }
}

/// Every queue of one runtime instance.
#[derive(Default)]
pub(crate) struct Queues {
    by_address: RwLock<HashMap<u64, Arc<QueueAdapter>>>,
    by_doorbell: RwLock<HashMap<u64, Arc<QueueAdapter>>>,
    /// Destroyed queues stay allocated until shutdown, so an application
    /// that touches one after `hsa_queue_destroy` is reported, not crashed.
    destroyed: Mutex<Vec<Arc<QueueAdapter>>>,
    next_id: AtomicU64,
}

impl Queues {
    pub(crate) fn create(
        &self,
        config: &Config,
        gpu: u32,
        size: u32,
        callback: QueueCallback,
        data: usize,
    ) -> *mut hsa_queue_t {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let adapter = Arc::new(QueueAdapter::new(config, id, gpu, size, callback, data));
        let address = adapter.hsa_queue();
        self.by_doorbell
            .write()
            .insert(adapter.doorbell_handle(), adapter.clone());
        self.by_address.write().insert(address as u64, adapter);
        address
    }

    pub(crate) fn get(&self, queue: *const hsa_queue_t) -> Option<Arc<QueueAdapter>> {
        self.by_address.read().get(&(queue as u64)).cloned()
    }

    pub(crate) fn by_doorbell(&self, handle: u64) -> Option<Arc<QueueAdapter>> {
        self.by_doorbell.read().get(&handle).cloned()
    }

    pub(crate) fn destroy(&self, queue: *const hsa_queue_t) -> hsa_status_t {
        let Some(adapter) = self.by_address.write().remove(&(queue as u64)) else {
            return HSA_STATUS_ERROR_INVALID_QUEUE;
        };
        self.by_doorbell.write().remove(&adapter.doorbell_handle());
        adapter.destroy();
        self.destroyed.lock().push(adapter);
        HSA_STATUS_SUCCESS
    }

    /// Destroys every live queue (shutdown); returns how many there were.
    pub(crate) fn destroy_all(&self) -> u64 {
        let live: Vec<u64> = self.by_address.read().keys().copied().collect();
        for address in &live {
            self.destroy(*address as *const hsa_queue_t);
        }
        live.len() as u64
    }

    pub(crate) fn live(&self) -> u64 {
        self.by_address.read().len() as u64
    }
}
