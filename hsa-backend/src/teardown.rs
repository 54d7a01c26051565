//! Teardown order: signal memory is released only once no packet can still
//! touch it.
//!
//! A signal pool may be dropped while packets that name its signals are still
//! in a queue: a tracker dropped without draining, a GPU waiter on another
//! queue that never ran. Freeing the memory then would let the packet
//! processor decrement (or a barrier read) freed memory. So a dropped pool's
//! memory (its batches, its ROCr signals, wake signals included) waits for
//! the queues whose packets named any of its signals, each until one of:
//!
//! - the queue is destroyed: after `hsa_queue_destroy` returns, its
//!   processor writes nothing more (an adopted queue the backend let go of
//!   counts once its drain proved the backend's packets finished);
//! - a *fence* at or after the newest packet there that named the pool is
//!   known complete: a packet with the barrier bit whose completion signal,
//!   one of the backend's own and still alive, reads below 1, or was armed
//!   again since the fence was published (a tracker re-arms a signal only
//!   once its use retired: each arming store of a block stamps it with the
//!   runtime's count of arming stores, its *arm epoch*, and the fence
//!   remembers the count when it was published). The barrier bit kept it
//!   from starting before every earlier packet of the queue had completed,
//!   so none of them touches anything any more.
//!
//! A pool that no packet named goes at once, whatever queues live; one whose
//! queue is destroyed with its stream goes with that queue, not with the
//! runtime's last one. Each queue learns which pools its packets named as it
//! publishes them (`record`): the signal handles of every packet it
//! publishes (completion signal and dependencies), looked up in a registry
//! of the backend's signal memory through a small cache per queue. Releasing
//! never waits for the GPU, so teardown never hangs; a queue's own teardown
//! waits for it only within a bounded drain (see `aql_queue.rs`). A pool still
//! waited for is looked at again when a pool is dropped, a queue is made or
//! goes, and at a publication on a queue it waits for.
//!
//! A queue adopted from the runtime and let go of without a drain that
//! proved its packets finished is never destroyed here, so its record stays
//! until the runtime shuts down: a pool its packets named waits for one of
//! its fences, or for the shutdown. A packet a runtime writes into a queue
//! past the backend, or a kernel it hands a signal in its arguments, naming
//! a signal it was lent (a pin), is not recorded: the runtime keeps the pin
//! until that packet has passed.

use hsa_sys::{
    HSA_AMD_PACKET_TYPE_BARRIER_VALUE, HSA_PACKET_TYPE_BARRIER_AND, HSA_PACKET_TYPE_BARRIER_OR,
    HSA_PACKET_TYPE_VENDOR_SPECIFIC, HsaApi, PacketHeader, PacketWords, hsa_signal_t,
};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

/// Memory to give back to ROCr.
#[derive(Debug)]
pub(crate) enum Release {
    /// A block from `hsa_amd_memory_pool_allocate`, by address.
    PoolBlock(usize),
    /// A signal from `hsa_amd_signal_create`.
    Signal(hsa_signal_t),
}

impl Release {
    /// The address the registry knows the memory by.
    fn address(&self) -> u64 {
        match self {
            Release::PoolBlock(address) => *address as u64,
            Release::Signal(signal) => signal.handle,
        }
    }

    fn perform(self, api: &HsaApi) {
        // Failures are ignored: there is nobody to report them to during a
        // drop, and ROCr reclaims everything at hsa_shut_down anyway.
        match self {
            Release::PoolBlock(address) => {
                // SAFETY: the address came from hsa_amd_memory_pool_allocate
                // and is freed once (each `Release` is performed once), when
                // no packet can touch it any more.
                let _ = unsafe { api.hsa_amd_memory_pool_free(address as *mut c_void) };
            }
            Release::Signal(signal) => {
                // SAFETY: the signal came from hsa_amd_signal_create and is
                // destroyed once, when no packet can touch it any more.
                let _ = unsafe { api.hsa_signal_destroy(signal) };
            }
        }
    }
}

/// Who owns registered signal memory: a pool, or a drain's own signal.
/// Never 0 (the cache's "none"), never reused.
pub(crate) type Owner = u64;

/// How the host reads a registered signal's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A block of a batch: an atomic load of its `value` word.
    Block,
    /// A signal ROCr made: through ROCr.
    Rocr,
}

/// A registered range of signal memory.
#[derive(Clone, Copy, Debug)]
struct Range {
    end: u64,
    owner: Owner,
    kind: Kind,
}

/// Slots of a queue's cache of signal owners (a power of two): a tracker's
/// signals sit in a few pages (one slot each), so a queue's publications
/// find their owners here after the first.
const CACHE: usize = 256;

/// Fences a queue remembers: the newest ones with a completion signal of the
/// backend's. The newest is often still running; an older one may prove
/// what is needed.
const FENCES: usize = 8;

/// Publications a queue makes between two looks at the pools waiting for it
/// while a look proves nothing.
const RECHECK: u64 = 16;

/// A cache key for the 4 KiB page at `handle`: bit 0 set, which no signal
/// handle (64-byte aligned) has.
fn page_key(handle: u64) -> u64 {
    (handle & !0xfff) | 1
}

/// The cache slot of `key`: the top bits of a multiplicative hash (the low
/// bits of a page or block address say nothing).
fn slot_of(key: u64) -> usize {
    const BITS: u32 = CACHE.trailing_zeros();
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - BITS)) as usize
}

/// A fence a queue published: its index, its completion signal, the
/// signal's owner then, and the arm epochs handed out by then (the signal's
/// arming for this fence among them).
#[derive(Clone, Copy, Debug, Default)]
struct Fence {
    index: u64,
    completion: u64,
    owner: Owner,
    armed_by: u64,
}

/// What a queue's packets named, under its own lock.
struct Names {
    /// The registry's generation the cache was filled at.
    generation: u64,
    /// `(key, owner)` by [`slot_of`]: a page key (every block of the page is
    /// one owner's) or a handle; owner 0 for a handle the registry does not
    /// know. Key 0: an empty slot.
    cache: Box<[(u64, Owner)]>,
    /// Owners whose signals a packet named, and the newest such packet.
    named: Vec<(Owner, u64)>,
    /// The newest fences, [`FENCES`] at most, in a ring.
    fences: [Fence; FENCES],
    next_fence: usize,
    /// Every packet below this index is known complete.
    complete_below: u64,
    /// One past the newest packet recorded.
    published_below: u64,
}

impl Names {
    fn new() -> Self {
        Self {
            generation: 0,
            cache: vec![(0, 0); CACHE].into_boxed_slice(),
            named: Vec::new(),
            fences: [Fence::default(); FENCES],
            next_fence: 0,
            complete_below: 0,
            published_below: 0,
        }
    }

    fn cached(&self, key: u64) -> Option<Owner> {
        let (cached, owner) = self.cache[slot_of(key)];
        (cached == key).then_some(owner)
    }

    fn note(&mut self, owner: Owner, index: u64) {
        match self.named.iter_mut().find(|(o, _)| *o == owner) {
            Some((_, newest)) => *newest = (*newest).max(index),
            None => self.named.push((owner, index)),
        }
    }
}

/// The teardown's record of one queue (made with the queue).
pub(crate) struct QueueRecord {
    names: Mutex<Names>,
    /// An adopted queue the backend let go of without knowing its packets
    /// finished (set under the teardown's lock): kept while a packet there
    /// may name memory of the backend's.
    lost: AtomicBool,
    /// A publication at this index or later looks again at the pools that
    /// wait for the queue (`u64::MAX`: none waits).
    recheck_at: AtomicU64,
}

impl std::fmt::Debug for QueueRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueRecord").finish_non_exhaustive()
    }
}

/// A dropped owner's memory, waiting for packets that name it.
#[derive(Debug)]
struct Pending {
    memory: Vec<Release>,
    /// (queue, newest packet there naming the memory), for each queue.
    waits: Vec<(Arc<QueueRecord>, u64)>,
}

#[derive(Debug, Default)]
struct State {
    /// Queues created and not yet gone.
    queues: Vec<Arc<QueueRecord>>,
    /// Memory of dropped owners that packets may still touch.
    pending: Vec<Pending>,
}

/// The runtime's record of its signal memory, its queues and what their
/// packets named, and the releases that wait for them.
///
/// Locks, always taken in this order: `state`, a queue's names, `registry`.
#[derive(Debug)]
pub(crate) struct Teardown {
    state: Mutex<State>,
    /// The backend's live signal memory, by start address.
    registry: Mutex<BTreeMap<u64, Range>>,
    /// Bumped at every change of `registry`: queues' caches are refilled.
    generation: AtomicU64,
    next_owner: AtomicU64,
    /// Arm epochs handed out: arming stores to batch blocks.
    arm_epochs: AtomicU64,
}

impl Default for Teardown {
    fn default() -> Self {
        Self {
            state: Mutex::default(),
            registry: Mutex::default(),
            generation: AtomicU64::new(1),
            next_owner: AtomicU64::new(1),
            arm_epochs: AtomicU64::new(0),
        }
    }
}

impl Teardown {
    /// A new arm epoch, for an arming store (or a batch of them) to stamp
    /// its blocks with.
    pub(crate) fn next_arm_epoch(&self) -> u64 {
        // Relaxed: each block is armed by one tracker at a time, in order,
        // and a fence only compares epochs (the counter's modification order).
        self.arm_epochs.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// A new owner of signal memory.
    pub(crate) fn new_owner(&self) -> Owner {
        self.next_owner.fetch_add(1, Ordering::Relaxed)
    }

    /// `bytes` of signal memory at `start` now belong to `owner`, until its
    /// release ([`Teardown::owner_dropped`]). Registered before any packet
    /// can name it.
    pub(crate) fn register(&self, owner: Owner, start: u64, bytes: u64, kind: Kind) {
        let range = Range {
            end: start + bytes,
            owner,
            kind,
        };
        self.registry.lock().insert(start, range);
        // A queue may have cached the address as nobody's.
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// A queue is about to be created (or was adopted): its record.
    pub(crate) fn queue_created(&self, api: &HsaApi) -> Arc<QueueRecord> {
        let record = Arc::new(QueueRecord {
            names: Mutex::new(Names::new()),
            lost: AtomicBool::new(false),
            recheck_at: AtomicU64::new(u64::MAX),
        });
        let mut state = self.state.lock();
        state.queues.push(record.clone());
        let ready = self.settle(&mut state, api);
        drop(state);
        ready.into_iter().for_each(|r| r.perform(api));
        record
    }

    /// A queue was destroyed (or its creation failed), or an adopted queue
    /// was let go with none of the backend's packets left to run: nothing
    /// waits for it any more.
    pub(crate) fn queue_gone(&self, api: &HsaApi, record: &Arc<QueueRecord>) {
        let mut state = self.state.lock();
        state.queues.retain(|q| !Arc::ptr_eq(q, record));
        for pending in &mut state.pending {
            pending.waits.retain(|(q, _)| !Arc::ptr_eq(q, record));
        }
        let ready = self.settle(&mut state, api);
        drop(state);
        ready.into_iter().for_each(|r| r.perform(api));
    }

    /// An adopted queue was let go of while its packets may still run: its
    /// record stays while they may name memory of the backend's (its
    /// fences may still prove them complete), and goes as `queue_gone`
    /// once none does.
    pub(crate) fn queue_lost(&self, api: &HsaApi, record: &Arc<QueueRecord>) {
        let mut state = self.state.lock();
        record.lost.store(true, Ordering::Relaxed);
        let ready = self.settle(&mut state, api);
        drop(state);
        ready.into_iter().for_each(|r| r.perform(api));
    }

    /// `owner` is gone, with `memory` (registered, or never named by a
    /// packet): released now if no packet that may still run names it,
    /// else once none does.
    pub(crate) fn owner_dropped(&self, api: &HsaApi, owner: Owner, memory: Vec<Release>) {
        let mut state = self.state.lock();
        let mut waits = Vec::new();
        for queue in &state.queues {
            let mut names = queue.names.lock();
            let Some(at) = names.named.iter().position(|(o, _)| *o == owner) else {
                continue;
            };
            let (_, newest) = names.named.swap_remove(at);
            if newest >= names.complete_below {
                waits.push((queue.clone(), newest));
            }
        }
        state.pending.push(Pending { memory, waits });
        let ready = self.settle(&mut state, api);
        drop(state);
        ready.into_iter().for_each(|r| r.perform(api));
    }

    /// Records a packet `queue` just published at `index`: which owners'
    /// signals it names, and whether it is a fence. Costs a lock of the
    /// queue's own and a look in its cache per signal named; the registry's
    /// lock only for a signal the cache does not know.
    pub(crate) fn record(
        &self,
        api: &HsaApi,
        queue: &QueueRecord,
        index: u64,
        packet: &PacketWords,
    ) {
        let header = PacketHeader::from_bits(packet.header());
        let completion = packet.completion_signal().handle;
        let dependencies = dependencies(packet, header);
        {
            let mut names = queue.names.lock();
            let generation = self.generation.load(Ordering::Acquire);
            if names.generation != generation {
                names.cache.fill((0, 0));
                names.generation = generation;
            }
            names.published_below = names.published_below.max(index + 1);
            for handle in dependencies.into_iter().filter(|h| *h != 0) {
                if let Some(owner) = self.owner_of(&mut names, handle) {
                    names.note(owner, index);
                }
            }
            if completion != 0
                && let Some(owner) = self.owner_of(&mut names, completion)
            {
                names.note(owner, index);
                if header.barrier {
                    let next = names.next_fence;
                    names.fences[next] = Fence {
                        index,
                        completion,
                        owner,
                        // The signal's arming for this fence happened before
                        // its publication, so before this load: an epoch
                        // above it is a later arming.
                        armed_by: self.arm_epochs.load(Ordering::Relaxed),
                    };
                    names.next_fence = (next + 1) % FENCES;
                }
            }
        }
        if index >= queue.recheck_at.load(Ordering::Relaxed) {
            self.recheck(api, queue, index);
        }
    }

    /// The owner of the signal at `handle`, from the queue's cache or else
    /// the registry (then cached); `None` for memory not the backend's.
    fn owner_of(&self, names: &mut Names, handle: u64) -> Option<Owner> {
        let owner = match names
            .cached(page_key(handle))
            .or_else(|| names.cached(handle))
        {
            Some(owner) => owner,
            None => {
                let registry = self.registry.lock();
                let found = registry
                    .range(..=handle)
                    .next_back()
                    .filter(|(_, range)| handle < range.end);
                let page = handle & !0xfff;
                let (key, owner) = match found {
                    // Every block of the page is this owner's.
                    Some((&start, range)) if start <= page && page + 0x1000 <= range.end => {
                        (page_key(handle), range.owner)
                    }
                    Some((_, range)) => (handle, range.owner),
                    None => (handle, 0),
                };
                drop(registry);
                names.cache[slot_of(key)] = (key, owner);
                owner
            }
        };
        (owner != 0).then_some(owner)
    }

    /// Looks again at what waits for `queue`, from its publication at
    /// `index`, unless another thread holds the teardown's lock (it looks
    /// itself). Never blocks the publication.
    fn recheck(&self, api: &HsaApi, queue: &QueueRecord, index: u64) {
        let Some(mut state) = self.state.try_lock() else {
            return;
        };
        let ready = self.settle(&mut state, api);
        if queue.recheck_at.load(Ordering::Relaxed) != u64::MAX {
            // Still waited for: not at every publication.
            queue.recheck_at.store(index + RECHECK, Ordering::Relaxed);
        }
        drop(state);
        ready.into_iter().for_each(|r| r.perform(api));
    }

    /// Proves what it can of the pending releases (one signal read per
    /// queue waited for, or a few), takes those no packet may touch any
    /// more out of the registry and returns them, to be performed once the
    /// lock is let go.
    fn settle(&self, state: &mut State, api: &HsaApi) -> Vec<Release> {
        // A lost queue whose packets name nothing of the backend's that is
        // still alive, and that nothing waits for, is forgotten.
        state.queues.retain(|queue| {
            !queue.lost.load(Ordering::Relaxed)
                || !queue.names.lock().named.is_empty()
                || state
                    .pending
                    .iter()
                    .any(|p| p.waits.iter().any(|(q, _)| Arc::ptr_eq(q, queue)))
        });
        if state.pending.is_empty() {
            return Vec::new();
        }
        let mut looked: Vec<*const QueueRecord> = Vec::new();
        for pending in &state.pending {
            for (queue, _) in &pending.waits {
                if !looked.contains(&Arc::as_ptr(queue)) {
                    looked.push(Arc::as_ptr(queue));
                    self.prove(api, queue);
                }
            }
        }
        let mut ready = Vec::new();
        state.pending.retain_mut(|pending| {
            pending
                .waits
                .retain(|(queue, newest)| *newest >= queue.names.lock().complete_below);
            if pending.waits.is_empty() {
                ready.append(&mut pending.memory);
                false
            } else {
                true
            }
        });
        if !ready.is_empty() {
            let mut registry = self.registry.lock();
            for release in &ready {
                registry.remove(&release.address());
            }
            drop(registry);
            // Queues' caches must not name the freed memory's old owner.
            self.generation.fetch_add(1, Ordering::Release);
        }
        for queue in &state.queues {
            let waited = state
                .pending
                .iter()
                .any(|p| p.waits.iter().any(|(q, _)| Arc::ptr_eq(q, queue)));
            if !waited {
                queue.recheck_at.store(u64::MAX, Ordering::Relaxed);
            } else if queue.recheck_at.load(Ordering::Relaxed) == u64::MAX {
                // Its next publication looks again.
                let next = queue.names.lock().published_below;
                queue.recheck_at.store(next, Ordering::Relaxed);
            }
        }
        ready
    }

    /// Raises the queue's `complete_below` past the newest of its fences
    /// whose completion signal, still the same owner's, reads below 1.
    fn prove(&self, api: &HsaApi, queue: &QueueRecord) {
        let mut names = queue.names.lock();
        let mut fences = names.fences;
        fences.sort_by_key(|fence| std::cmp::Reverse(fence.index));
        let registry = self.registry.lock();
        for fence in fences {
            if fence.owner == 0 || fence.index < names.complete_below {
                break;
            }
            let Some((_, range)) = registry
                .range(..=fence.completion)
                .next_back()
                .filter(|(_, range)| fence.completion < range.end && range.owner == fence.owner)
            else {
                // Its owner's memory is gone: nothing to read.
                continue;
            };
            // The signal was armed (at least 1) before the fence was
            // published, and is armed again only after the use it completes
            // retired: below 1, or armed since, the fence completed (or
            // failed, when the queue runs nothing more).
            let complete = match range.kind {
                Kind::Block => {
                    let block = fence.completion as usize;
                    // SAFETY: a registered block, so its batch is allocated
                    // (the registry lock keeps it so: memory is taken out of
                    // the registry before it is freed); `value` (offset 8)
                    // and the arm epoch (offset 56) are 8-byte aligned words
                    // of the 64-byte block, accessed atomically by every
                    // party.
                    let (value, epoch) = unsafe {
                        (
                            AtomicI64::from_ptr((block + 8) as *mut i64).load(Ordering::Acquire),
                            AtomicU64::from_ptr((block + 56) as *mut u64).load(Ordering::Acquire),
                        )
                    };
                    value < 1 || epoch > fence.armed_by
                }
                // SAFETY: a registered ROCr signal, so not destroyed yet.
                Kind::Rocr => unsafe {
                    api.hsa_signal_load_scacquire(hsa_signal_t {
                        handle: fence.completion,
                    }) < 1
                },
            };
            if complete {
                names.complete_below = fence.index + 1;
                break;
            }
        }
    }

    /// Performs every pending release (the runtime is going away, so every
    /// queue is gone).
    pub(crate) fn release_all(&self, api: &HsaApi) {
        let pending = std::mem::take(&mut self.state.lock().pending);
        self.registry.lock().clear();
        pending
            .into_iter()
            .flat_map(|p| p.memory)
            .for_each(|r| r.perform(api));
    }

    /// How many releases wait for packets to finish or queues to go.
    pub(crate) fn deferred(&self) -> usize {
        self.state
            .lock()
            .pending
            .iter()
            .map(|p| p.memory.len())
            .sum()
    }
}

/// The signals a packet waits on: barrier-AND/OR dependencies, or a
/// barrier-value packet's signal (0 for an empty slot).
fn dependencies(packet: &PacketWords, header: PacketHeader) -> [u64; 5] {
    let mut handles = [0; 5];
    match header.packet_type {
        HSA_PACKET_TYPE_BARRIER_AND | HSA_PACKET_TYPE_BARRIER_OR => {
            for (k, handle) in handles.iter_mut().enumerate() {
                *handle = packet.u64_at(8 + 8 * k);
            }
        }
        HSA_PACKET_TYPE_VENDOR_SPECIFIC
            if (packet.0[0] >> 16) as u8 == HSA_AMD_PACKET_TYPE_BARRIER_VALUE =>
        {
            handles[0] = packet.u64_at(8);
        }
        _ => {}
    }
    handles
}
