//! Signal memory: batches of real `amd_signal_t` blocks, the handles that
//! name them, counted host accesses, and the bookkeeping that says which host
//! stores the GPU can see yet.
//!
//! # Ownership
//!
//! Each [`Sim::allocate`](crate::Sim::allocate) call makes one batch: one
//! allocation of 64-byte aligned blocks, initialised as USER signals with
//! value 0, and a parallel array of side metadata (never inside the 64-byte
//! ABI block). Batches are never freed one by one: the simulator owns them
//! until its last handle is dropped. A [`Signal`] carries the id of the
//! simulator that allocated it, so a handle used with another simulator is
//! caught (a panic naming both) instead of reading freed memory.
//!
//! # Store visibility
//!
//! Host stores to device memory are write-combined: the GPU may not see them
//! until a store fence drains the buffers, and, where the consumer reads
//! through a path the BAR does not order (an AQL ring in system memory), until
//! an HDP flush of the signal's agent. Every device store takes a number from
//! a global sequence; a fence covers every number taken before it; a flush of
//! an agent covers what the last fence covered. A store is visible to a
//! publication when its number is covered. The model is global, not per
//! thread: a fence on any thread covers stores made before it on every thread
//! (on x86 the lock hand-off that orders two threads also drains the
//! write-combining buffers).

use crate::counters::CounterCells;
use crate::error::SimError;
use crate::interrupt::Interrupts;
use crate::place::{AgentId, Placement};
use crate::profile::{CostProfile, pay};
use hsa_sys::{amd_signal_t, hsa_signal_t};
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::fmt;
use std::mem::size_of;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// A completion signal allocated by a [`Sim`](crate::Sim): an opaque, copyable
/// handle to one 64-byte `amd_signal_t` block.
///
/// It is only valid with the simulator that allocated it; every `Sim` method
/// that takes a `Signal` panics if given one from another simulator.
///
/// ```
/// use sigretire_sim::{AgentId, Placement, Sim, SimConfig};
///
/// let sim = Sim::new(SimConfig::default());
/// let [signal] = sim.allocate(1, Placement::Host, AgentId(0))?[..] else { unreachable!() };
/// // The handle a packet names is the block's address, 64-byte aligned.
/// assert_eq!(signal.handle().handle % 64, 0);
/// assert_eq!(sim.resolve(signal.handle()), Some(signal));
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Signal {
    /// The id of the simulator that owns the block.
    sim: u64,
    /// The address of the `amd_signal_t` block.
    block: usize,
    /// The address of the block's [`SignalMeta`].
    meta: usize,
}

impl Signal {
    /// The `hsa_signal_t` to put in a packet: the address of the signal's
    /// `amd_signal_t` block.
    pub fn handle(&self) -> hsa_signal_t {
        hsa_signal_t {
            handle: self.block as u64,
        }
    }

    /// The id of the simulator that allocated this signal ([`Sim::id`](crate::Sim::id)).
    pub fn sim_id(&self) -> u64 {
        self.sim
    }
}

impl fmt::Debug for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Signal({:#x} of sim {})", self.block, self.sim)
    }
}

/// Side metadata of one signal. Everything the host or the processor updates
/// is an atomic; placement and agent never change after allocation.
#[derive(Debug)]
pub(crate) struct SignalMeta {
    pub(crate) placement: Placement,
    pub(crate) agent: AgentId,
    /// Sequence number of the last host store while the signal is in device
    /// memory (0: none since allocation, whose initial value is visible).
    ///
    /// Written with a plain store, not a maximum: a signal's stores come
    /// from its owner one at a time (a tracker, behind its queue's lock when
    /// shared), and each takes its number from `store_seq` after the one
    /// before it, so the newest number is also the largest.
    last_device_store: AtomicU64,
    /// Who the processor still has looking at the signal: see [`References`].
    pub(crate) references: References,
    /// The signal has an event mailbox: its writes wake sleepers
    /// (`interrupt.rs`). Set once, before the signal is handed out.
    pub(crate) interrupt: AtomicBool,
}

/// Who still looks at a signal that the host just stored to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InFlight {
    pub(crate) completions: u32,
    pub(crate) barriers: u32,
}

/// The processor's references to one signal: published, not yet completed
/// or failed packets naming it as their completion signal (the low half)
/// or as a barrier's dependency (the high half). One word, so a host store
/// checks both with one load: every re-arm pays that check. Neither count
/// can carry into the other: each is bounded by the packets a queue holds,
/// far below 2^32.
#[derive(Debug, Default)]
pub(crate) struct References(AtomicU64);

impl References {
    const BARRIER: u64 = 1 << 32;

    pub(crate) fn retain_completion(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn release_completion(&self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }

    pub(crate) fn retain_barrier(&self) {
        self.0.fetch_add(Self::BARRIER, Ordering::AcqRel);
    }

    pub(crate) fn release_barrier(&self) {
        self.0.fetch_sub(Self::BARRIER, Ordering::AcqRel);
    }

    /// Both counts, or `None` when the processor has no reference.
    #[inline]
    pub(crate) fn in_flight(&self) -> Option<InFlight> {
        let word = self.0.load(Ordering::Acquire);
        (word != 0).then_some(InFlight {
            completions: word as u32,
            barriers: (word >> 32) as u32,
        })
    }
}

/// Whether the GPU can see the last host store to a signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Visibility {
    Visible,
    /// A device store not covered by a later store fence.
    Unfenced,
    /// Fenced, but the consumer needs an HDP flush of the agent and none
    /// covered the store.
    Unflushed,
}

/// One allocation: `len` contiguous blocks and their metadata.
struct Batch {
    blocks: NonNull<amd_signal_t>,
    metas: NonNull<SignalMeta>,
    len: usize,
}

// SAFETY: a batch owns its two allocations (nothing else frees them). Every
// field of a block or of its metadata is either an atomic or never written
// after construction, so shared access from several threads is race free, and
// moving the owner between threads moves no memory.
unsafe impl Send for Batch {}
// SAFETY: as above.
unsafe impl Sync for Batch {}

impl Batch {
    fn new(len: usize, placement: Placement, agent: AgentId) -> Self {
        assert!(len > 0, "an empty batch has no address to key it by");
        let blocks: Box<[amd_signal_t]> = (0..len).map(|_| amd_signal_t::new_user(0)).collect();
        let metas: Box<[SignalMeta]> = (0..len)
            .map(|_| SignalMeta {
                placement,
                agent,
                last_device_store: AtomicU64::new(0),
                references: References::default(),
                interrupt: AtomicBool::new(false),
            })
            .collect();
        Self {
            // Leaked here, reclaimed in `Drop`: handles hold raw addresses
            // into these arrays, so no `Box` may claim unique access to them
            // while the batch lives.
            blocks: NonNull::from(Box::leak(blocks)).cast(),
            metas: NonNull::from(Box::leak(metas)).cast(),
            len,
        }
    }

    fn base(&self) -> usize {
        self.blocks.as_ptr() as usize
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        // SAFETY: both pointers came from `Box::leak` of boxed slices of
        // exactly `len` elements in `Batch::new`, and are reclaimed once,
        // here. The simulator drops its batches only when no handle can reach
        // them any more (its last clone is gone).
        unsafe {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.blocks.as_ptr(),
                self.len,
            )));
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.metas.as_ptr(),
                self.len,
            )));
        }
    }
}

/// The largest batch one `allocate` call may ask for (64 MiB of blocks).
pub(crate) const MAX_BATCH: usize = 1 << 20;

/// The signal memory of one simulator.
pub(crate) struct Memory {
    sim: u64,
    agents: u32,
    profile: CostProfile,
    /// Batches by the address of their first block, so a packet's handle can
    /// be looked up without ever dereferencing it.
    batches: RwLock<BTreeMap<usize, Batch>>,
    counters: CounterCells,
    /// The last sequence number handed to a device store.
    store_seq: AtomicU64,
    /// Device stores numbered up to this one are covered by a store fence.
    fenced_upto: AtomicU64,
    /// Per agent: device stores numbered up to this one are covered by an HDP
    /// flush of that agent.
    flushed_upto: Box<[AtomicU64]>,
    device_memory_available: AtomicBool,
    /// Allocation calls still to fail (failure injection).
    failures_left: AtomicU64,
    /// Allocation calls failed by injection so far.
    refused: AtomicU64,
    /// Runs at the start of the next allocation call (interleaving
    /// injection: what another thread does while the caller allocates).
    on_next_allocation: parking_lot::Mutex<Option<AllocationHook>>,
    /// Event mailboxes of interrupt signals.
    pub(crate) interrupts: Interrupts,
}

/// What [`Sim::on_next_allocation`](crate::Sim::on_next_allocation) runs.
pub(crate) type AllocationHook = Box<dyn FnOnce() + Send>;

impl Memory {
    pub(crate) fn new(sim: u64, agents: u32, profile: CostProfile) -> Self {
        Self {
            sim,
            agents,
            profile,
            batches: RwLock::new(BTreeMap::new()),
            counters: CounterCells::default(),
            store_seq: AtomicU64::new(0),
            fenced_upto: AtomicU64::new(0),
            flushed_upto: (0..agents).map(|_| AtomicU64::new(0)).collect(),
            device_memory_available: AtomicBool::new(true),
            failures_left: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            on_next_allocation: parking_lot::Mutex::new(None),
            interrupts: Interrupts::default(),
        }
    }

    /// A host-memory signal with an event mailbox, if the event budget
    /// allows (else a polling one: `false`).
    pub(crate) fn allocate_interrupt(&self, agent: AgentId) -> Result<(Signal, bool), SimError> {
        let [signal] = self.allocate(1, Placement::Host, agent)?[..] else {
            unreachable!("one signal asked for");
        };
        let interrupt = self.interrupts.take_event();
        if interrupt {
            // What ROCr's interrupt signals carry and its polling ones do
            // not: an event mailbox address and an event id, written once
            // before the signal is handed out (how a runtime tells the two
            // apart). Any nonzero address does: nothing reads through it.
            // The block's own address, as the batch allocated it (an `as`
            // cast of it exposed its provenance): written through that, not
            // through a shared reference.
            let block = signal.block as *mut amd_signal_t;
            // SAFETY: the block was allocated above and is not handed out
            // yet, so no reference to it is live and nothing else accesses
            // these fields, which nobody writes after this.
            unsafe {
                std::ptr::write_volatile(
                    &raw mut (*block).event_mailbox_ptr,
                    (&raw const self.interrupts) as u64,
                );
                std::ptr::write_volatile(
                    &raw mut (*block).event_id,
                    self.interrupts.stats().created as u32,
                );
            }
        }
        self.meta(signal)
            .interrupt
            .store(interrupt, Ordering::Release);
        Ok((signal, interrupt))
    }

    /// Whether `signal` has an event mailbox.
    pub(crate) fn is_interrupt(&self, signal: Signal) -> bool {
        self.meta(signal).interrupt.load(Ordering::Acquire)
    }

    /// A signal was written (by a packet or the host): if it has a mailbox,
    /// its sleepers wake.
    pub(crate) fn wrote(&self, signal: Signal) {
        self.wrote_meta(self.meta(signal));
    }

    /// [`wrote`](Self::wrote) for a signal whose parts the caller already
    /// has: the host's stores look at its flag once, not through a second
    /// look-up of the signal (that doubled what modelling interrupt signals
    /// added to every store).
    fn wrote_meta(&self, meta: &SignalMeta) {
        if meta.interrupt.load(Ordering::Acquire) {
            self.interrupts.wrote();
        }
    }

    /// Sleeps until the interrupt signal leaves `observed` (each read a
    /// counted host load), at most `timeout`; a polling signal is read once.
    pub(crate) fn sleep_while(&self, signal: Signal, observed: i64, timeout: Duration) -> i64 {
        if !self.is_interrupt(signal) {
            return self.load(signal);
        }
        let (block, meta) = self.parts(signal);
        // The interrupt's path to the thread is spent asleep, before the
        // woken thread reads the value again.
        let (value, _woken) = self.interrupts.sleep_while(
            &block.value,
            observed,
            timeout,
            self.profile.interrupt_wake,
            || {
                pay(self.profile.load(meta.placement));
                self.counters.loads(meta.placement, 1);
            },
        );
        value
    }

    pub(crate) fn agents(&self) -> u32 {
        self.agents
    }

    pub(crate) fn counters(&self) -> &CounterCells {
        &self.counters
    }

    pub(crate) fn check_agent(&self, agent: AgentId) -> Result<(), SimError> {
        if agent.0 < self.agents {
            Ok(())
        } else {
            Err(SimError::UnknownAgent {
                agent,
                agents: self.agents,
            })
        }
    }

    pub(crate) fn allocate(
        &self,
        count: usize,
        placement: Placement,
        agent: AgentId,
    ) -> Result<Vec<Signal>, SimError> {
        self.check_agent(agent)?;
        if count == 0 {
            return Ok(Vec::new());
        }
        // Taken first and run with no lock held: the hook may touch signals.
        let hook = self.on_next_allocation.lock().take();
        if let Some(hook) = hook {
            hook();
        }
        if count > MAX_BATCH {
            return Err(SimError::InvalidConfig(format!(
                "a batch of {count} signals is larger than the {MAX_BATCH} one allocation may hold"
            )));
        }
        let injected_failure = self
            .failures_left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(1)
            })
            .is_ok();
        if injected_failure {
            self.refused.fetch_add(1, Ordering::AcqRel);
            return Err(SimError::OutOfMemory);
        }
        let placement = match placement {
            Placement::Device if !self.device_memory_available.load(Ordering::Acquire) => {
                Placement::Host
            }
            other => other,
        };
        let batch = Batch::new(count, placement, agent);
        let base = batch.base();
        let metas = batch.metas.as_ptr() as usize;
        let signals = (0..count)
            .map(|i| Signal {
                sim: self.sim,
                block: base + i * size_of::<amd_signal_t>(),
                meta: metas + i * size_of::<SignalMeta>(),
            })
            .collect();
        self.batches.write().insert(base, batch);
        Ok(signals)
    }

    pub(crate) fn set_device_memory_available(&self, available: bool) {
        self.device_memory_available
            .store(available, Ordering::Release);
    }

    pub(crate) fn fail_allocations(&self, calls: u64) {
        self.failures_left.store(calls, Ordering::Release);
    }

    pub(crate) fn on_next_allocation(&self, hook: AllocationHook) {
        *self.on_next_allocation.lock() = Some(hook);
    }

    pub(crate) fn allocations_refused(&self) -> u64 {
        self.refused.load(Ordering::Acquire)
    }

    /// The signal of this simulator whose block is at `handle`, if any. Never
    /// dereferences `handle`: it is only compared with the batch table.
    pub(crate) fn resolve(&self, handle: hsa_signal_t) -> Option<Signal> {
        let address = usize::try_from(handle.handle).ok()?;
        let batches = self.batches.read();
        let (&base, batch) = batches.range(..=address).next_back()?;
        let offset = address - base;
        let index = offset / size_of::<amd_signal_t>();
        if offset % size_of::<amd_signal_t>() != 0 || index >= batch.len {
            return None;
        }
        Some(Signal {
            sim: self.sim,
            block: address,
            meta: batch.metas.as_ptr() as usize + index * size_of::<SignalMeta>(),
        })
    }

    /// The block and metadata of `signal`, without counting or cost: the GPU's
    /// view, and the host-side helpers' common first step.
    ///
    /// # Panics
    /// If `signal` was allocated by another simulator.
    pub(crate) fn parts(&self, signal: Signal) -> (&amd_signal_t, &SignalMeta) {
        if signal.sim != self.sim {
            wrong_simulator(signal.block, signal.sim, self.sim);
        }
        // SAFETY: `Signal`'s fields are private and only this module makes
        // them, from the addresses of a live batch of the simulator whose id
        // they carry (ids are never reused, see `Sim::new`). That simulator is
        // `self`, which owns the batch until it is dropped, and `&self` keeps
        // it alive for the returned lifetime. Both arrays are properly aligned
        // and initialised, and are only accessed through shared references
        // (their mutable fields are atomics).
        unsafe {
            (
                &*(signal.block as *const amd_signal_t),
                &*(signal.meta as *const SignalMeta),
            )
        }
    }

    pub(crate) fn block(&self, signal: Signal) -> &amd_signal_t {
        self.parts(signal).0
    }

    pub(crate) fn meta(&self, signal: Signal) -> &SignalMeta {
        self.parts(signal).1
    }

    /// A counted host load of `value`.
    pub(crate) fn load(&self, signal: Signal) -> i64 {
        let (block, meta) = self.parts(signal);
        pay(self.profile.load(meta.placement));
        self.counters.loads(meta.placement, 1);
        block.value.load(Ordering::Acquire)
    }

    /// A counted host load of both timestamps: two loads of the signal's
    /// placement.
    pub(crate) fn load_timestamps(&self, signal: Signal) -> (u64, u64) {
        let (block, meta) = self.parts(signal);
        // `start_ts` and `end_ts` are one 16-byte aligned pair: one access
        // (one PCIe read for a block in VRAM), as a backend reads them.
        pay(self.profile.load(meta.placement));
        self.counters.loads(meta.placement, 1);
        (
            block.start_ts.load(Ordering::Acquire),
            block.end_ts.load(Ordering::Acquire),
        )
    }

    /// A counted host store of `value`. Returns who still looked at the signal
    /// when it was overwritten, if anyone did.
    pub(crate) fn store(&self, signal: Signal, value: i64) -> Option<InFlight> {
        let (block, meta) = self.parts(signal);
        pay(self.profile.store(meta.placement));
        self.counters.store(meta.placement);
        if meta.placement == Placement::Device {
            let seq = self.store_seq.fetch_add(1, Ordering::AcqRel) + 1;
            meta.last_device_store.store(seq, Ordering::Release);
        }
        // The processor drops its references before it writes the value, and
        // the host only overwrites a value it saw reach its final state, so a
        // correct host always reads zeros here.
        let in_flight = meta.references.in_flight();
        block.value.store(value, Ordering::Release);
        self.wrote_meta(meta);
        in_flight
    }

    /// The same value stored to several signals, each counted, costed and
    /// checked as a store; the sequence number and the counters are updated
    /// once for the batch (a fence after it covers all of it). Calls
    /// `in_flight` with the position in `signals` of each store that hit a
    /// signal still in flight (a position, not the signal: the loop then
    /// keeps no copy of each signal for a call that almost never happens).
    pub(crate) fn store_many(
        &self,
        signals: &[Signal],
        value: i64,
        mut in_flight: impl FnMut(usize, InFlight),
    ) {
        if signals.is_empty() {
            return;
        }
        let seq = self.store_seq.fetch_add(1, Ordering::AcqRel) + 1;
        let mut device = 0;
        for (i, signal) in signals.iter().enumerate() {
            let (block, meta) = self.parts(*signal);
            if meta.placement == Placement::Device {
                device += 1;
                meta.last_device_store.store(seq, Ordering::Release);
            }
            let pending = meta.references.in_flight();
            block.value.store(value, Ordering::Release);
            self.wrote_meta(meta);
            if let Some(pending) = pending {
                report_in_flight(&mut in_flight, i, pending);
            }
        }
        let host = signals.len() as u64 - device;
        // The batch costs what its stores cost one by one, paid at once.
        let cost = |placement, n: u64| self.profile.store(placement) * n as u32;
        pay(cost(Placement::Host, host) + cost(Placement::Device, device));
        self.counters.stores(Placement::Host, host);
        self.counters.stores(Placement::Device, device);
    }

    /// A counted store fence: covers every device store made before it.
    pub(crate) fn store_fence(&self) {
        pay(self.profile.store_fence);
        self.counters.store_fence();
        let upto = self.store_seq.load(Ordering::Acquire);
        self.fenced_upto.fetch_max(upto, Ordering::AcqRel);
    }

    /// A counted HDP flush of `agent`: covers the stores the last fence covered.
    ///
    /// # Panics
    /// If `agent` is not an agent of this simulator.
    pub(crate) fn hdp_flush(&self, agent: AgentId) {
        if let Err(error) = self.check_agent(agent) {
            panic!("sim: hdp_flush: {error}");
        }
        pay(self.profile.hdp_flush);
        self.counters.hdp_flush();
        let upto = self.fenced_upto.load(Ordering::Acquire);
        self.flushed_upto[agent.0 as usize].fetch_max(upto, Ordering::AcqRel);
    }

    /// Whether a packet published now, through a ring at `ring`, sees the last
    /// host store to `signal`.
    pub(crate) fn visibility(&self, signal: Signal, ring: Placement) -> Visibility {
        let meta = self.meta(signal);
        if meta.placement == Placement::Host {
            return Visibility::Visible;
        }
        let last = meta.last_device_store.load(Ordering::Acquire);
        if last > self.fenced_upto.load(Ordering::Acquire) {
            Visibility::Unfenced
        } else if ring == Placement::Host
            && last > self.flushed_upto[meta.agent.0 as usize].load(Ordering::Acquire)
        {
            Visibility::Unflushed
        } else {
            Visibility::Visible
        }
    }
}

/// Reports a store that hit a signal still in flight: a host's bug, out of
/// the store loop's way.
#[cold]
#[inline(never)]
fn report_in_flight(report: &mut impl FnMut(usize, InFlight), position: usize, pending: InFlight) {
    report(position, pending);
}

/// A signal used with a simulator other than the one that allocated it: a
/// caller's bug, reported where it happened.
#[cold]
#[inline(never)]
#[track_caller]
///
/// Takes the signal's fields, not the signal: a `Signal` passed by value
/// made every caller's loop copy each signal to the stack first.
fn wrong_simulator(block: usize, owner: u64, sim: u64) -> ! {
    panic!(
        "sim: Signal({block:#x} of sim {owner}) was allocated by simulator {owner} \
         and used with simulator {sim}; a Signal is only valid with the Sim that allocated it",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory() -> Memory {
        Memory::new(7, 2, CostProfile::zero())
    }

    #[test]
    fn batches_are_contiguous_aligned_user_signals() {
        let memory = memory();
        let signals = memory.allocate(4, Placement::Device, AgentId(1)).unwrap();
        for (i, s) in signals.iter().enumerate() {
            assert_eq!(
                s.handle().handle,
                signals[0].handle().handle + 64 * i as u64
            );
            assert_eq!(s.handle().handle % 64, 0);
            let (block, meta) = memory.parts(*s);
            assert_eq!(block.kind, hsa_sys::AMD_SIGNAL_KIND_USER);
            assert_eq!(block.value.load(Ordering::Relaxed), 0);
            assert_eq!(
                (meta.placement, meta.agent),
                (Placement::Device, AgentId(1))
            );
        }
    }

    #[test]
    fn resolve_accepts_only_block_starts_of_this_memory() {
        let memory = memory();
        let signals = memory.allocate(3, Placement::Host, AgentId(0)).unwrap();
        let base = signals[0].handle().handle;
        assert_eq!(memory.resolve(signals[2].handle()), Some(signals[2]));
        for bad in [0, 8, base - 64, base + 8, base + 3 * 64, u64::MAX] {
            assert_eq!(
                memory.resolve(hsa_signal_t { handle: bad }),
                None,
                "{bad:#x}"
            );
        }
    }

    #[test]
    fn references_count_completions_and_barriers_apart_in_one_word() {
        let references = References::default();
        assert_eq!(references.in_flight(), None);
        references.retain_completion();
        for _ in 0..3 {
            references.retain_barrier();
        }
        let both = |completions, barriers| {
            Some(InFlight {
                completions,
                barriers,
            })
        };
        assert_eq!(references.in_flight(), both(1, 3));
        references.release_barrier();
        assert_eq!(references.in_flight(), both(1, 2));
        references.release_completion();
        assert_eq!(references.in_flight(), both(0, 2));
        references.release_barrier();
        references.release_barrier();
        assert_eq!(references.in_flight(), None);
    }

    #[test]
    fn visibility_follows_fences_and_flushes_per_agent() {
        let memory = memory();
        let s = memory.allocate(1, Placement::Device, AgentId(1)).unwrap()[0];
        assert_eq!(memory.visibility(s, Placement::Host), Visibility::Visible);
        memory.store(s, 1);
        assert_eq!(
            memory.visibility(s, Placement::Device),
            Visibility::Unfenced
        );
        memory.hdp_flush(AgentId(1)); // a flush without a fence covers nothing new
        memory.store_fence();
        assert_eq!(memory.visibility(s, Placement::Device), Visibility::Visible);
        assert_eq!(memory.visibility(s, Placement::Host), Visibility::Unflushed);
        memory.hdp_flush(AgentId(0)); // the wrong agent's HDP
        assert_eq!(memory.visibility(s, Placement::Host), Visibility::Unflushed);
        memory.hdp_flush(AgentId(1));
        assert_eq!(memory.visibility(s, Placement::Host), Visibility::Visible);
    }

    #[test]
    fn injected_failures_are_consumed_one_call_at_a_time() {
        let memory = memory();
        memory.fail_allocations(2);
        assert_eq!(
            memory.allocate(1, Placement::Host, AgentId(0)),
            Err(SimError::OutOfMemory)
        );
        assert_eq!(
            memory.allocate(1, Placement::Host, AgentId(0)),
            Err(SimError::OutOfMemory)
        );
        assert!(memory.allocate(1, Placement::Host, AgentId(0)).is_ok());
        assert_eq!(memory.allocations_refused(), 2);
    }
}
