//! Memory: pool allocations (`hsa_amd_memory_pool_allocate`), the access
//! grants on them (`hsa_amd_agents_allow_access`), and the signals ROCr
//! creates itself (`hsa_signal_create`, `hsa_amd_signal_create`).
//!
//! Every block handed out is one of the simulator's signal batches: real,
//! 64-byte aligned `amd_signal_t` blocks that its packet processor decrements
//! and whose handles [`sigretire_sim::Sim::resolve`] knows. So a backend that carves
//! its own signals out of pool memory, as ROCr's users do, gets signals the
//! simulated GPU can complete. Freed memory stays mapped (the simulator owns
//! it until shutdown), so a use after free is reported, not a crash.

use crate::abi::{AllocationInfo, PoolKind};
use crate::machine::{AgentKind, Machine, POOL_ALLOC_MAX, POOL_GRANULE, Pool};
use crate::violation::Violations;
use hsa_sys::*;
use parking_lot::{Mutex, RwLock};
use sigretire_sim::{AgentId, Placement, Sim};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

/// How far past a 64-byte boundary a misaligned block starts
/// ([`Malformed::AllocationMisaligned`](crate::Malformed::AllocationMisaligned)).
const MISALIGNMENT: u64 = 32;

/// One pool allocation.
#[derive(Clone, Debug)]
pub(crate) struct Allocation {
    pub(crate) base: u64,
    pub(crate) bytes: u64,
    pub(crate) kind: PoolKind,
    /// The GPU whose VRAM it is (0 for system memory).
    pub(crate) gpu: u32,
    /// The agents of the last `hsa_amd_agents_allow_access`.
    granted: Vec<AgentKind>,
    pub(crate) freed: bool,
}

impl Allocation {
    /// Whether `agent` may touch the block now.
    pub(crate) fn reachable_by(&self, agent: AgentKind) -> bool {
        let owner = match self.kind {
            PoolKind::System => AgentKind::Cpu,
            PoolKind::Device => AgentKind::Gpu(self.gpu),
        };
        agent == owner || self.granted.contains(&agent)
    }

    pub(crate) fn contains(&self, handle: u64) -> bool {
        (self.base..self.base + self.bytes).contains(&handle)
    }
}

/// KFD's events: each interrupt signal ROCr makes holds one of the
/// process's events until it is destroyed (ROCr's `hsa_signal_destroy`
/// destroys the signal's event), and past the budget of live events ROCr
/// makes polling signals. The stand-in keeps the book itself, as the
/// simulator's budget only counts down.
#[derive(Debug)]
pub(crate) struct Events {
    /// Events left for new interrupt signals.
    left: u32,
    /// Live signals holding an event, by handle.
    holders: HashSet<u64>,
    /// Interrupt signals asked for past the budget, made polling.
    pub(crate) degraded: u64,
}

impl Default for Events {
    fn default() -> Self {
        Self {
            left: sigretire_sim::EVENT_BUDGET,
            holders: HashSet::new(),
            degraded: 0,
        }
    }
}

impl Events {
    /// Interrupt signals alive, each holding an event.
    pub(crate) fn live(&self) -> u64 {
        self.holders.len() as u64
    }
}

/// The memory of one runtime instance.
#[derive(Default)]
pub(crate) struct Memory {
    allocations: Mutex<BTreeMap<u64, Allocation>>,
    /// Live signals ROCr created, by handle.
    signals: RwLock<HashMap<u64, sigretire_sim::Signal>>,
    /// The process's KFD events.
    pub(crate) events: Mutex<Events>,
    /// Handles of signals ROCr created and later destroyed.
    destroyed: Mutex<Vec<u64>>,
    /// Failure injection, per [`PoolKind`]: allocations fail with
    /// `HSA_STATUS_ERROR_OUT_OF_RESOURCES`.
    exhausted: [AtomicBool; 2],
    /// Failure injection: this many signal creations fail.
    signal_failures: AtomicU64,
}

impl Memory {
    pub(crate) fn set_exhausted(&self, kind: PoolKind, exhausted: bool) {
        self.exhausted[kind as usize].store(exhausted, Ordering::Release);
    }

    pub(crate) fn fail_signal_creations(&self, count: u64) {
        self.signal_failures.store(count, Ordering::Release);
    }

    /// `hsa_amd_memory_pool_allocate`: `size` rounded up to the granule.
    /// `misaligned` (failure injection): the block handed out, and recorded,
    /// starts [`MISALIGNMENT`] bytes into the allocation.
    pub(crate) fn allocate(
        &self,
        sim: &Sim,
        pool: Pool,
        size: usize,
        misaligned: bool,
    ) -> Result<u64, hsa_status_t> {
        if size == 0 {
            return Err(HSA_STATUS_ERROR_INVALID_ARGUMENT);
        }
        if size > POOL_ALLOC_MAX {
            return Err(HSA_STATUS_ERROR_INVALID_ALLOCATION);
        }
        if self.exhausted[pool.kind as usize].load(Ordering::Acquire) {
            return Err(HSA_STATUS_ERROR_OUT_OF_RESOURCES);
        }
        let bytes = size.div_ceil(POOL_GRANULE) * POOL_GRANULE;
        let (placement, gpu) = match (pool.kind, pool.owner) {
            (PoolKind::Device, AgentKind::Gpu(gpu)) => (Placement::Device, gpu),
            _ => (Placement::Host, 0),
        };
        let blocks = bytes / size_of::<amd_signal_t>();
        let signals = sim
            .allocate(blocks, placement, AgentId(gpu))
            .map_err(|_| HSA_STATUS_ERROR_OUT_OF_RESOURCES)?;
        // The simulator falls back to host memory on its own when told to;
        // a VRAM pool never hands out system memory, it fails.
        if sim.placement(signals[0]) != placement {
            return Err(HSA_STATUS_ERROR_OUT_OF_RESOURCES);
        }
        let offset = if misaligned { MISALIGNMENT } else { 0 };
        let base = signals[0].handle().handle + offset;
        self.allocations.lock().insert(
            base,
            Allocation {
                base,
                bytes: bytes as u64 - offset,
                kind: pool.kind,
                gpu,
                granted: Vec::new(),
                freed: false,
            },
        );
        Ok(base)
    }

    /// `hsa_amd_memory_pool_free`: the range released, for the checker
    /// (which the instance runs on it).
    pub(crate) fn free(
        &self,
        violations: &Violations,
        ptr: u64,
    ) -> Result<Range<u64>, hsa_status_t> {
        let released = {
            let mut allocations = self.allocations.lock();
            match allocations.get_mut(&ptr) {
                Some(allocation) if !allocation.freed => {
                    allocation.freed = true;
                    allocation.clone()
                }
                Some(_) => {
                    drop(allocations);
                    violations.record(
                        crate::ViolationKind::BadRelease,
                        format!("hsa_amd_memory_pool_free({ptr:#x}): freed twice"),
                    );
                    return Err(HSA_STATUS_ERROR_INVALID_ARGUMENT);
                }
                None => {
                    drop(allocations);
                    violations.record(crate::ViolationKind::BadRelease, format!(
                        "hsa_amd_memory_pool_free({ptr:#x}): not a block hsa_amd_memory_pool_allocate returned"
                    ));
                    return Err(HSA_STATUS_ERROR_INVALID_ARGUMENT);
                }
            }
        };
        Ok(released.base..released.base + released.bytes)
    }

    /// `hsa_amd_agents_allow_access`: afterwards exactly `agents` (and the
    /// owner) reach the block.
    pub(crate) fn allow_access(
        &self,
        machine: &Machine,
        agents: &[AgentKind],
        ptr: u64,
    ) -> hsa_status_t {
        let mut allocations = self.allocations.lock();
        let Some(allocation) = allocations.get_mut(&ptr).filter(|a| !a.freed) else {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        };
        let pool = match allocation.kind {
            PoolKind::System => machine.pools_of(AgentKind::Cpu).next(),
            PoolKind::Device => machine.pools_of(AgentKind::Gpu(allocation.gpu)).next(),
        };
        let Some(pool) = pool else {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        };
        if agents
            .iter()
            .any(|a| machine.access(*a, pool) == HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED)
        {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        }
        allocation.granted = agents.to_vec();
        HSA_STATUS_SUCCESS
    }

    /// The allocation that contains `handle`, freed or not.
    pub(crate) fn allocation_containing(&self, handle: u64) -> Option<Allocation> {
        let allocations = self.allocations.lock();
        let (_, allocation) = allocations.range(..=handle).next_back()?;
        allocation.contains(handle).then(|| allocation.clone())
    }

    pub(crate) fn info(&self, ptr: u64) -> Option<AllocationInfo> {
        let allocations = self.allocations.lock();
        let a = allocations.get(&ptr)?;
        Some(AllocationInfo {
            bytes: a.bytes,
            pool_kind: a.kind as u32,
            gpu: a.gpu,
            cpu_access: a.reachable_by(AgentKind::Cpu),
            gpu_access: match a.kind {
                PoolKind::System => a.granted.iter().any(|g| matches!(g, AgentKind::Gpu(_))),
                PoolKind::Device => true,
            },
            freed: a.freed,
        })
    }

    pub(crate) fn live_allocations(&self) -> u64 {
        self.allocations
            .lock()
            .values()
            .filter(|a| !a.freed)
            .count() as u64
    }

    /// `hsa_signal_create` / `hsa_amd_signal_create`: a signal in system
    /// memory holding `initial`; an interrupt signal if asked (and the
    /// event budget allows).
    pub(crate) fn create_signal(
        &self,
        sim: &Sim,
        initial: hsa_signal_value_t,
        interrupt: bool,
    ) -> Result<hsa_signal_t, hsa_status_t> {
        let injected = self
            .signal_failures
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        if injected {
            return Err(HSA_STATUS_ERROR_OUT_OF_RESOURCES);
        }
        // The book is held until the signal is listed, so an event taken is
        // either held by a listed signal or given back.
        let mut events = self.events.lock();
        let with_event = interrupt && events.left > 0;
        let signal = if with_event {
            sim.create_interrupt_signal(AgentId(0))
        } else {
            sim.allocate(1, Placement::Host, AgentId(0))
                .map(|signals| signals[0])
        }
        .map_err(|_| HSA_STATUS_ERROR_OUT_OF_RESOURCES)?;
        // ROCr initialises the block before handing it out: not a host store
        // the application made, so it bypasses the simulator's counters.
        // SAFETY: the block was just allocated by the simulator, which keeps
        // it for as long as this instance.
        unsafe { store_value(signal.handle().handle, initial) };
        let handle = signal.handle();
        self.signals.write().insert(handle.handle, signal);
        if with_event {
            events.left -= 1;
            events.holders.insert(handle.handle);
        } else if interrupt {
            events.degraded += 1;
        }
        Ok(handle)
    }

    /// Leaves `left` events for new interrupt signals (a test spending the
    /// budget); those already held stay held, and come back when destroyed.
    pub(crate) fn set_event_budget(&self, left: u32) {
        self.events.lock().left = left;
    }

    /// `hsa_signal_destroy`: the range released, for the checker (which
    /// the instance runs on it).
    pub(crate) fn destroy_signal(
        &self,
        violations: &Violations,
        signal: hsa_signal_t,
    ) -> Result<Range<u64>, hsa_status_t> {
        if self.signals.write().remove(&signal.handle).is_none() {
            violations.record(
                crate::ViolationKind::BadRelease,
                format!(
                    "hsa_signal_destroy({:#x}): not a live signal ROCr created \
                 (ROCr would free memory it does not own)",
                    signal.handle
                ),
            );
            return Err(HSA_STATUS_ERROR_INVALID_SIGNAL);
        }
        let mut events = self.events.lock();
        if events.holders.remove(&signal.handle) {
            events.left = events.left.saturating_add(1);
        }
        drop(events);
        self.destroyed.lock().push(signal.handle);
        Ok(signal.handle..signal.handle + 64)
    }

    /// The live signal ROCr created at `handle`.
    pub(crate) fn runtime_signal(&self, handle: u64) -> Option<sigretire_sim::Signal> {
        self.signals.read().get(&handle).copied()
    }

    pub(crate) fn was_destroyed(&self, handle: u64) -> bool {
        self.destroyed.lock().contains(&handle)
    }

    pub(crate) fn live_signals(&self) -> u64 {
        self.signals.read().len() as u64
    }
}

/// The `value` word of the block at `handle`, as the GPU reads it (an
/// uncounted acquire load).
///
/// # Safety
/// `handle` must be the address of a block the simulator owns (in a pool
/// allocation or a signal ROCr created, live or not): the simulator keeps
/// those mapped until the instance shuts down.
pub(crate) unsafe fn peek_value(handle: u64) -> i64 {
    // SAFETY: the caller guarantees a live, 64-byte aligned block; offset 8
    // is its 8-byte aligned `value` field, which everyone accesses atomically.
    unsafe { AtomicI64::from_ptr((handle + 8) as *mut i64) }.load(Ordering::Acquire)
}

/// Stores to the `value` word of the block at `handle` without counting.
///
/// # Safety
/// As for [`peek_value`].
unsafe fn store_value(handle: u64, value: i64) {
    // SAFETY: as in `peek_value`.
    unsafe { AtomicI64::from_ptr((handle + 8) as *mut i64) }.store(value, Ordering::Release);
}
