//! Signal memory: batches of `amd_signal_t` blocks the backend builds itself,
//! and the [`SignalMemory`] the tracker drives.
//!
//! ROCr 5.2 creates signals one at a time (10-50 us each, interrupt signals
//! spending a kernel event), so the backend makes its own: one
//! `hsa_amd_memory_pool_allocate` of N blocks, each initialised as a USER
//! signal (an `amd_signal_t` of kind 1, no event), the host granted access.
//! Any correctly laid-out block works for the packet processor (docs/design.md
//! section 2); only ROCr's own calls need ROCr's signals, and the backend
//! never passes them these.
//!
//! Where a signal lives, in order of preference for a `Device` request:
//! 1. a batch in the GPU's VRAM, reached through the large BAR;
//! 2. a batch in fine-grained system memory;
//! 3. signals from `hsa_amd_signal_create`, one by one.
//!
//! A `Host` request starts at 2. Each signal carries where it ended up, so
//! the tracker knows what its loads and stores cost and what they need.
//!
//! The host touches a batch block only through atomics (`value`, the
//! timestamps) and volatile stores (initialisation), since the GPU writes the
//! same memory concurrently; ROCr's signals only through ROCr's calls, since
//! only those replay the interrupt-event protocol that wakes sleeping waiters.

use crate::agent::{Agent, MemoryPool};
use crate::teardown::{Kind, Owner, Release};
use crate::timing::to_system_domain;
use crate::visibility::store_fence;
use crate::wait::{poll_at, rocr_wait_until_change};
use hsa_sys::*;
use parking_lot::Mutex;
use sigretire_tracker::{
    Placement, TimestampClock, Timestamps,
    backend::{AllocError, SignalMemory},
};
use std::ffi::c_void;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// Bytes of one signal block.
const BLOCK: usize = size_of::<amd_signal_t>();

/// A signal of a [`SignalPool`]: its handle and how the host must touch it.
///
/// ```
/// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
/// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
/// use sigretire_hsa::SignalPool;
/// use sigretire_tracker::backend::SignalMemory;
/// use sigretire_tracker::Placement;
///
/// let pool = SignalPool::new(&device);
/// let mut signals = Vec::new();
/// pool.allocate(2, Placement::Device, &mut signals)?;
/// let (signal, placement) = signals[0];
/// assert_eq!((signal.placement(), placement), (Placement::Device, Placement::Device));
/// // A packet names it by its handle, the address of its 64-byte block.
/// assert_eq!(pool.packet_handle(signal), signal.handle().handle);
/// assert_eq!(signals[1].0.handle().handle - signal.handle().handle, 64);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct HsaSignal {
    handle: u64,
    origin: Origin,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Origin {
    /// A block of one of the pool's batches, at this placement.
    Batch(Placement),
    /// A signal ROCr created (system memory).
    Rocr,
}

impl HsaSignal {
    /// The `hsa_signal_t`: the address of the signal's `amd_signal_t` block.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// use sigretire_hsa::SignalPool;
    /// use sigretire_tracker::backend::SignalMemory;
    /// use sigretire_tracker::Placement;
    ///
    /// let pool = SignalPool::new(&device);
    /// let mut signals = Vec::new();
    /// pool.allocate(1, Placement::Device, &mut signals)?;
    /// let handle = signals[0].0.handle();
    /// assert_eq!(handle.handle % 64, 0, "a 64-byte aligned amd_signal_t");
    /// assert_eq!(handle.handle, pool.batches()[0].base);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn handle(&self) -> hsa_signal_t {
        hsa_signal_t {
            handle: self.handle,
        }
    }

    /// Where the signal's block lives.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// use sigretire_hsa::SignalPool;
    /// use sigretire_tracker::backend::SignalMemory;
    /// use sigretire_tracker::Placement;
    ///
    /// let pool = SignalPool::new(&device);
    /// let mut signals = Vec::new();
    /// standin.set_pool_exhausted(sigretire_rocr_standin::PoolKind::Device, true);
    /// pool.allocate(1, Placement::Device, &mut signals)?; // VRAM is full: system memory
    /// assert_eq!(signals[0].0.placement(), Placement::Host);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn placement(&self) -> Placement {
        match self.origin {
            Origin::Batch(placement) => placement,
            Origin::Rocr => Placement::Host,
        }
    }

    /// Whether ROCr created the signal (`hsa_amd_signal_create`), so ROCr's
    /// own signal calls accept it.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// use sigretire_hsa::SignalPool;
    /// use sigretire_rocr_standin::PoolKind;
    /// use sigretire_tracker::backend::SignalMemory;
    /// use sigretire_tracker::Placement;
    ///
    /// let pool = SignalPool::new(&device);
    /// let mut signals = Vec::new();
    /// pool.allocate(64, Placement::Device, &mut signals)?; // a whole batch
    /// assert!(!signals[0].0.is_rocr_signal(), "a block of a batch");
    /// standin.set_pool_exhausted(PoolKind::Device, true);
    /// standin.set_pool_exhausted(PoolKind::System, true);
    /// pool.allocate(1, Placement::Device, &mut signals)?; // no pool memory: hsa_amd_signal_create
    /// assert!(signals[64].0.is_rocr_signal());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_rocr_signal(&self) -> bool {
        self.origin == Origin::Rocr
    }

    /// The block's `value` word.
    ///
    /// # Safety
    /// The signal is a batch block of a live pool.
    unsafe fn value(&self) -> &AtomicI64 {
        // SAFETY: the caller guarantees the block is allocated; `value` is
        // the 8-byte aligned word at offset 8 of a 64-byte aligned block, and
        // every party (host and packet processor) accesses it atomically.
        unsafe { AtomicI64::from_ptr((self.handle as usize + 8) as *mut i64) }
    }

    /// The block's arm epoch: the runtime's count of arming stores when the
    /// signal was last armed (see `teardown.rs`), in `reserved3` (offset
    /// 56), which the packet processor neither reads nor writes in a USER
    /// signal, and which ROCr never sees (the block is the backend's).
    ///
    /// # Safety
    /// As for `value`.
    unsafe fn arm_epoch(&self) -> &AtomicU64 {
        // SAFETY: the caller guarantees the block is allocated; offset 56 of
        // a 64-byte aligned block is 8-byte aligned, and the host accesses
        // it only atomically (the GPU not at all).
        unsafe { AtomicU64::from_ptr((self.handle as usize + 56) as *mut u64) }
    }

    /// Arms a batch block: its epoch, then its value.
    ///
    /// # Safety
    /// As for `value`.
    unsafe fn arm(&self, value: i64, epoch: u64) {
        // SAFETY: forwarded caller guarantee.
        let (word, stamp) = unsafe { (self.value(), self.arm_epoch()) };
        stamp.store(epoch, Ordering::Relaxed);
        word.store(value, Ordering::Release);
    }

    /// The block's `start_ts` (offset 32) or `end_ts` (offset 40).
    ///
    /// # Safety
    /// As for `value`.
    /// The block's `start_ts` and `end_ts` (offsets 32 and 40, one 16-byte
    /// aligned pair), read with one 16-byte access on x86-64: a block in
    /// VRAM costs one PCIe read for both, not one each.
    ///
    /// # Safety
    /// As for `value`: the block is alive.
    unsafe fn stamps(&self) -> (u64, u64) {
        let pair = (self.handle as usize + 32) as *const u64;
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: the block is alive (the caller) and 64-byte aligned, so
            // the pair at offset 32 is 16-byte aligned; a volatile load of one
            // SSE register is one 16-byte access (never split), as the rule
            // for GPU memory wants (atomic or volatile accesses only). The
            // packet processor wrote both before the completion the caller
            // observed with acquire.
            let both: core::arch::x86_64::__m128i =
                unsafe { core::ptr::read_volatile(pair.cast()) };
            // SAFETY: plain reinterpretation of 16 bytes as two u64s.
            let [start, end]: [u64; 2] = unsafe { core::mem::transmute(both) };
            (start, end)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            // SAFETY: as above; two 8-byte aligned words read atomically.
            unsafe {
                (
                    AtomicU64::from_ptr(pair.cast_mut()).load(Ordering::Acquire),
                    AtomicU64::from_ptr(pair.cast_mut().add(1)).load(Ordering::Acquire),
                )
            }
        }
    }
}

impl fmt::Debug for HsaSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HsaSignal({:#x}, {:?})", self.handle, self.origin)
    }
}

/// What a [`SignalPool`] has done, for tests and benchmarks.
///
/// ```
/// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
/// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
/// use sigretire_hsa::SignalPool;
/// use sigretire_tracker::backend::SignalMemory;
/// use sigretire_tracker::Placement;
///
/// let pool = SignalPool::new(&device);
/// let mut signals = Vec::new();
/// pool.allocate(4, Placement::Device, &mut signals)?;
/// // SAFETY: the pool's own signals.
/// signals.iter().for_each(|(signal, _)| unsafe { pool.store(*signal, 1) });
/// pool.store_fence(); // one fence for the four stores
/// pool.hdp_flush();
/// let counters = pool.counters();
/// assert_eq!((counters.vram_batches, counters.store_fences, counters.hdp_flushes), (1, 1, 1));
/// assert_eq!(counters.fallbacks, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Store fences executed.
    pub store_fences: u64,
    /// HDP flushes executed (writes of the flush register).
    pub hdp_flushes: u64,
    /// HDP flushes asked for on a GPU without flush registers (nothing to do).
    pub hdp_flushes_skipped: u64,
    /// Batches allocated in VRAM.
    pub vram_batches: u64,
    /// Batches allocated in system memory.
    pub system_batches: u64,
    /// Signals created one by one through `hsa_amd_signal_create`.
    pub rocr_signals: u64,
    /// Allocation attempts that fell back to the next kind of memory.
    pub fallbacks: u64,
    /// Waits done by ROCr (`hsa_signal_wait_scacquire`).
    pub rocr_waits: u64,
    /// Waits done by polling.
    pub polled_waits: u64,
    /// Wake signals made (`create_wake_signal`: ROCr interrupt signals).
    pub wake_signals: u64,
    /// Wake signals ROCr made polling ones (its KFD events were spent):
    /// destroyed again and not handed out, so waits poll, and say so.
    pub polling_wake_signals: u64,
    /// Sleeps in `hsa_signal_wait_scacquire` on a wake signal.
    pub sleeps: u64,
}

#[derive(Default)]
struct CounterCells {
    store_fences: AtomicU64,
    hdp_flushes: AtomicU64,
    hdp_flushes_skipped: AtomicU64,
    vram_batches: AtomicU64,
    system_batches: AtomicU64,
    rocr_signals: AtomicU64,
    fallbacks: AtomicU64,
    rocr_waits: AtomicU64,
    polled_waits: AtomicU64,
    wake_signals: AtomicU64,
    polling_wake_signals: AtomicU64,
    sleeps: AtomicU64,
}

fn bump(cell: &AtomicU64) {
    cell.fetch_add(1, Ordering::Relaxed);
}

/// One allocation of blocks.
///
/// ```
/// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
/// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
/// use sigretire_hsa::SignalPool;
/// use sigretire_tracker::backend::SignalMemory;
/// use sigretire_tracker::Placement;
///
/// let pool = SignalPool::new(&device);
/// let mut signals = Vec::new();
/// pool.allocate(10, Placement::Device, &mut signals)?;
/// let batch = pool.batches()[0];
/// assert_eq!((batch.len, batch.placement), (64, Placement::Device), "a 4 KiB page of blocks");
/// assert_eq!(batch.base, signals[0].0.handle().handle);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch {
    /// The address of the first block (what `hsa_amd_memory_pool_allocate`
    /// returned).
    pub base: u64,
    /// How many 64-byte blocks it holds.
    pub len: usize,
    /// Where it lives.
    pub placement: Placement,
}

#[derive(Default)]
struct PoolState {
    batches: Vec<Batch>,
    rocr_signals: Vec<hsa_signal_t>,
    /// Blocks of a batch beyond what its allocation was for (the granule
    /// rounds allocations up), handed out first by later allocations.
    leftovers: Vec<HsaSignal>,
}

/// Completion signals of one GPU, as the tracker's [`SignalMemory`].
///
/// Allocation is a cold path (a lock and ROCr calls); loads, stores, fences,
/// flushes and waits take no lock and allocate nothing. Dropping the pool
/// gives its memory back (batches, ROCr signals, wake signals and their KFD
/// events) at once if no packet named its signals, else once no packet that
/// did can still run: its queue destroyed, or a fence after it known
/// complete. Other queues of the runtime do not hold it up.
///
/// ```
/// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
/// use sigretire_hsa::{Runtime, SignalPool};
/// use sigretire_tracker::backend::SignalMemory;
/// use sigretire_tracker::Placement;
///
/// let device = Runtime::load_from(standin.library_path())?.device(0)?;
/// let pool = SignalPool::new(&device);
/// let mut signals = Vec::new();
/// pool.allocate(8, Placement::Device, &mut signals)?;
/// assert!(signals.iter().all(|(_, placement)| *placement == Placement::Device));
/// let (signal, _) = signals[0];
/// // SAFETY: the signal came from this pool.
/// unsafe { pool.store(signal, 1) };
/// pool.store_fence();
/// assert_eq!(unsafe { pool.load(signal) }, 1);
/// assert_eq!(pool.batches().len(), 1, "one allocation for all eight");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SignalPool {
    device: Agent,
    /// Who the runtime's teardown knows the pool's memory by.
    owner: Owner,
    state: Mutex<PoolState>,
    counters: CounterCells,
}

impl fmt::Debug for SignalPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignalPool")
            .field("device", &self.device.index())
            .field("counters", &self.counters())
            .finish_non_exhaustive()
    }
}

impl SignalPool {
    /// An empty pool for `device`'s signals.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// let pool = sigretire_hsa::SignalPool::new(&device);
    /// assert!(pool.batches().is_empty(), "nothing is allocated before it is asked for");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(device: &Agent) -> Self {
        Self {
            device: device.clone(),
            owner: device.runtime().teardown.new_owner(),
            state: Mutex::new(PoolState::default()),
            counters: CounterCells::default(),
        }
    }

    /// The device the signals belong to.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// let pool = sigretire_hsa::SignalPool::new(&device);
    /// assert_eq!(pool.device().agent(), device.agent());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn device(&self) -> &Agent {
        &self.device
    }

    /// A snapshot of the counters.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// use sigretire_tracker::backend::SignalMemory;
    /// use sigretire_tracker::Placement;
    ///
    /// let pool = sigretire_hsa::SignalPool::new(&device);
    /// let mut signals = Vec::new();
    /// pool.allocate(1, Placement::Host, &mut signals)?;
    /// assert_eq!(pool.counters().system_batches, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn counters(&self) -> Counters {
        let c = &self.counters;
        let get = |cell: &AtomicU64| cell.load(Ordering::Relaxed);
        Counters {
            store_fences: get(&c.store_fences),
            hdp_flushes: get(&c.hdp_flushes),
            hdp_flushes_skipped: get(&c.hdp_flushes_skipped),
            vram_batches: get(&c.vram_batches),
            system_batches: get(&c.system_batches),
            rocr_signals: get(&c.rocr_signals),
            wake_signals: get(&c.wake_signals),
            polling_wake_signals: get(&c.polling_wake_signals),
            sleeps: get(&c.sleeps),
            fallbacks: get(&c.fallbacks),
            rocr_waits: get(&c.rocr_waits),
            polled_waits: get(&c.polled_waits),
        }
    }

    /// Every batch allocated so far.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// use sigretire_tracker::backend::SignalMemory;
    /// use sigretire_tracker::Placement;
    ///
    /// let pool = sigretire_hsa::SignalPool::new(&device);
    /// let mut signals = Vec::new();
    /// pool.allocate(1, Placement::Device, &mut signals)?;
    /// pool.allocate(1, Placement::Host, &mut signals)?;
    /// let placements: Vec<_> = pool.batches().iter().map(|batch| batch.placement).collect();
    /// assert_eq!(placements, [Placement::Device, Placement::Host]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn batches(&self) -> Vec<Batch> {
        self.state.lock().batches.clone()
    }

    /// Allocates one batch of at least `count` blocks from `pool`, grants
    /// access, initialises every block as a USER signal of value 0, and
    /// returns them all.
    fn allocate_batch(
        &self,
        state: &mut PoolState,
        pool: &MemoryPool,
        placement: Placement,
        count: usize,
    ) -> Result<Vec<HsaSignal>, String> {
        let api = self.device.api();
        let bytes = count
            .checked_mul(BLOCK)
            .map(|b| b.div_ceil(pool.granule) * pool.granule)
            .filter(|b| *b <= pool.max_allocation)
            .ok_or_else(|| format!("{count} signals exceed the pool's largest allocation"))?;
        let mut base: *mut c_void = std::ptr::null_mut();
        // SAFETY: the runtime is initialised; `base` is a place for the
        // address; flags must be 0.
        let status =
            unsafe { api.hsa_amd_memory_pool_allocate(pool.handle(), bytes, 0, &raw mut base) };
        self.device
            .check("hsa_amd_memory_pool_allocate", status)
            .map_err(|e| e.to_string())?;
        if base.is_null() {
            return Err("the pool returned a null block".to_owned());
        }
        if !(base as usize).is_multiple_of(align_of::<amd_signal_t>()) {
            // SAFETY: `base` came from the allocation just made; nothing else
            // refers to it.
            unsafe { api.hsa_amd_memory_pool_free(base) };
            return Err(format!(
                "the pool returned a block at {base:p}, not 64-byte aligned"
            ));
        }
        if !pool.grants().is_empty() {
            // SAFETY: `base` is a live block of the pool; the agents are the
            // runtime's and could reach the pool (checked at discovery);
            // flags must be null.
            let status = unsafe {
                api.hsa_amd_agents_allow_access(
                    pool.grants().len() as u32,
                    pool.grants().as_ptr(),
                    std::ptr::null(),
                    base,
                )
            };
            if let Err(error) = self.device.check("hsa_amd_agents_allow_access", status) {
                // SAFETY: as above; nothing else refers to the block yet.
                unsafe { api.hsa_amd_memory_pool_free(base) };
                return Err(error.to_string());
            }
        }
        let len = bytes / BLOCK;
        let blocks = base.cast::<amd_signal_t>();
        for i in 0..len {
            // SAFETY: block `i` lies within the `bytes` just allocated, is
            // 64-byte aligned, and no one else has its address yet. The store
            // is volatile because the memory is the GPU's (the compiler must
            // neither elide nor merge it).
            unsafe { blocks.add(i).write_volatile(amd_signal_t::new_user(0)) };
        }
        let batch = Batch {
            base: base as u64,
            len,
            placement,
        };
        state.batches.push(batch);
        self.register(batch.base, (len * BLOCK) as u64, Kind::Block);
        Ok((0..len)
            .map(|i| HsaSignal {
                handle: batch.base + (i * BLOCK) as u64,
                origin: Origin::Batch(placement),
            })
            .collect())
    }

    /// Tells the runtime's teardown that `bytes` at `start` are the pool's,
    /// so a queue that publishes a packet naming them knows whose they are.
    fn register(&self, start: u64, bytes: u64, kind: Kind) {
        let teardown = &self.device.runtime().teardown;
        teardown.register(self.owner, start, bytes, kind);
    }

    /// Takes up to `count` signals placed at `placement`: leftovers first,
    /// then one new batch from `pool`. Returns how many it took.
    fn take_from(
        &self,
        state: &mut PoolState,
        pool: Option<&MemoryPool>,
        placement: Placement,
        count: usize,
        out: &mut Vec<(HsaSignal, Placement)>,
        failures: &mut Vec<String>,
    ) -> usize {
        let mut taken = 0;
        while taken < count {
            let Some(i) = state
                .leftovers
                .iter()
                .position(|s| s.placement() == placement)
            else {
                break;
            };
            out.push((state.leftovers.swap_remove(i), placement));
            taken += 1;
        }
        if taken == count {
            return taken;
        }
        let Some(pool) = pool else {
            failures.push(format!("no usable {placement:?} pool"));
            return taken;
        };
        match self.allocate_batch(state, pool, placement, count - taken) {
            Ok(mut signals) => {
                bump(match placement {
                    Placement::Device => &self.counters.vram_batches,
                    Placement::Host => &self.counters.system_batches,
                });
                let spare = signals.split_off(count - taken);
                out.extend(signals.into_iter().map(|s| (s, placement)));
                state.leftovers.extend(spare);
                count
            }
            Err(reason) => {
                failures.push(format!("{placement:?} batch: {reason}"));
                taken
            }
        }
    }

    /// Creates signals one by one through ROCr; returns how many it made.
    fn create_rocr_signals(
        &self,
        state: &mut PoolState,
        count: usize,
        out: &mut Vec<(HsaSignal, Placement)>,
        failures: &mut Vec<String>,
    ) -> usize {
        let api = self.device.api();
        for made in 0..count {
            let mut signal = hsa_signal_t::NULL;
            // SAFETY: the runtime is initialised; no consumers listed; 0
            // attributes (an interrupt signal when events remain, so ROCr's
            // waits can sleep); `signal` is a place for the handle.
            let status =
                unsafe { api.hsa_amd_signal_create(0, 0, std::ptr::null(), 0, &raw mut signal) };
            if let Err(error) = self.device.check("hsa_amd_signal_create", status) {
                failures.push(error.to_string());
                return made;
            }
            bump(&self.counters.rocr_signals);
            state.rocr_signals.push(signal);
            self.register(signal.handle, BLOCK as u64, Kind::Rocr);
            out.push((
                HsaSignal {
                    handle: signal.handle,
                    origin: Origin::Rocr,
                },
                Placement::Host,
            ));
        }
        count
    }
}

impl SignalMemory for SignalPool {
    type Signal = HsaSignal;

    /// Appends `count` signals: from VRAM if asked and possible, else system
    /// memory, else ROCr one by one. On failure the signals made so far are
    /// appended as well (the tracker adopts them) and the error says what
    /// each kind of memory answered.
    fn allocate(
        &self,
        count: usize,
        placement: Placement,
        out: &mut Vec<(HsaSignal, Placement)>,
    ) -> Result<(), AllocError> {
        let mut state = self.state.lock();
        let mut failures = Vec::new();
        let mut left = count;
        if placement == Placement::Device && left > 0 {
            left -= self.take_from(
                &mut state,
                self.device.vram_pool(),
                Placement::Device,
                left,
                out,
                &mut failures,
            );
            if left > 0 {
                bump(&self.counters.fallbacks);
            }
        }
        if left > 0 {
            left -= self.take_from(
                &mut state,
                self.device.system_pool(),
                Placement::Host,
                left,
                out,
                &mut failures,
            );
        }
        if left > 0 {
            bump(&self.counters.fallbacks);
            left -= self.create_rocr_signals(&mut state, left, out, &mut failures);
        }
        if left > 0 {
            return Err(AllocError::OutOfMemory(format!(
                "{left} of {count} signals could not be made: {}",
                failures.join("; ")
            )));
        }
        Ok(())
    }

    /// An atomic acquire load of a block, or `hsa_signal_load_scacquire`.
    unsafe fn load(&self, signal: HsaSignal) -> i64 {
        match signal.origin {
            // SAFETY: the tracker's contract: the signal came from this pool,
            // whose blocks live as long as it does.
            Origin::Batch(_) => unsafe { signal.value() }.load(Ordering::Acquire),
            // SAFETY: a live signal ROCr created for this pool.
            Origin::Rocr => unsafe { self.device.api().hsa_signal_load_scacquire(signal.handle()) },
        }
    }

    /// An atomic release store to a block (write-combined in VRAM until a
    /// [`store_fence`](SignalMemory::store_fence)), or through ROCr: silently
    /// when arming (no waiter waits for a positive value, and a store that
    /// wakes waiters costs a system call on an interrupt signal), with a
    /// wake-up otherwise.
    ///
    /// Arming a block (a positive value) also stamps it with a new arm
    /// epoch, so the teardown can tell a fence's signal re-armed for a later
    /// use (its use retired) from one still pending.
    unsafe fn store(&self, signal: HsaSignal, value: i64) {
        match signal.origin {
            Origin::Batch(_) if value > 0 => {
                let epoch = self.device.runtime().teardown.next_arm_epoch();
                // SAFETY: as in `load`.
                unsafe { signal.arm(value, epoch) }
            }
            // SAFETY: as in `load`.
            Origin::Batch(_) => unsafe { signal.value() }.store(value, Ordering::Release),
            Origin::Rocr if value > 0 => {
                // The release fence gives the relaxed store below release
                // semantics towards any acquire load that reads it.
                std::sync::atomic::fence(Ordering::Release);
                // SAFETY: as in `load`.
                unsafe {
                    self.device
                        .api()
                        .hsa_signal_silent_store_relaxed(signal.handle(), value)
                }
            }
            // SAFETY: as in `load`.
            Origin::Rocr => unsafe {
                self.device
                    .api()
                    .hsa_signal_store_screlease(signal.handle(), value)
            },
        }
    }

    /// As [`store`](SignalMemory::store) for each, with one arm epoch for
    /// the blocks a batched re-arm arms.
    unsafe fn store_many(&self, signals: &[HsaSignal], value: i64) {
        if value <= 0 {
            // SAFETY: forwarded caller guarantee, for each.
            signals
                .iter()
                .for_each(|s| unsafe { self.store(*s, value) });
            return;
        }
        let epoch = self.device.runtime().teardown.next_arm_epoch();
        for &signal in signals {
            match signal.origin {
                // SAFETY: as in `load`.
                Origin::Batch(_) => unsafe { signal.arm(value, epoch) },
                // SAFETY: as in `load`.
                Origin::Rocr => unsafe { self.store(signal, value) },
            }
        }
    }

    /// An x86 `sfence`, counted.
    fn store_fence(&self) {
        store_fence();
        bump(&self.counters.store_fences);
    }

    /// The device's HDP flush (write 1, read back), counted; nothing on a GPU
    /// without flush registers (counted apart).
    fn hdp_flush(&self) {
        match self.device.hdp_flush() {
            Some(hdp) => {
                hdp.flush();
                bump(&self.counters.hdp_flushes);
            }
            None => bump(&self.counters.hdp_flushes_skipped),
        }
    }

    /// The stamps in the system domain (see the `timing` module): one
    /// 16-byte read of the block's pair and two conversions, or
    /// `hsa_amd_profiling_get_dispatch_time` for a ROCr signal. `None` for
    /// stamps never written (zero) or not convertible.
    unsafe fn timestamps(&self, signal: HsaSignal) -> Option<Timestamps> {
        let api = self.device.api();
        let agent = self.device.agent();
        match signal.origin {
            Origin::Batch(_) => {
                // SAFETY: as in `load`.
                let (start, end) = unsafe { signal.stamps() };
                Some(Timestamps {
                    start: to_system_domain(api, agent, start)?,
                    end: to_system_domain(api, agent, end)?,
                })
            }
            Origin::Rocr => {
                let mut time = hsa_amd_profiling_dispatch_time_t::default();
                // SAFETY: a live ROCr signal of this pool, last used on this
                // device's queues; `time` is a place for the pair.
                let status = unsafe {
                    api.hsa_amd_profiling_get_dispatch_time(agent, signal.handle(), &raw mut time)
                };
                (status == HSA_STATUS_SUCCESS).then_some(Timestamps {
                    start: time.start,
                    end: time.end,
                })
            }
        }
    }

    /// Stamps are converted to ROCr's system domain
    /// (`HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY`).
    fn timestamp_clock(&self) -> TimestampClock {
        self.device.runtime().timestamp_clock()
    }

    fn packet_handle(&self, signal: HsaSignal) -> u64 {
        signal.handle
    }

    /// One ROCr per process: every agent's queues read every signal of it.
    fn shares_signals_with(&self, other: &Self) -> bool {
        Arc::ptr_eq(self.device.runtime(), other.device.runtime())
    }

    /// Polls a block with back-off, or lets ROCr wait for its own signal
    /// (`hsa_signal_wait_scacquire`, which may sleep).
    unsafe fn wait_change(&self, signal: HsaSignal, observed: i64, timeout: Duration) -> i64 {
        match signal.origin {
            Origin::Batch(placement) => {
                bump(&self.counters.polled_waits);
                // SAFETY: as in `load`.
                let value = unsafe { signal.value() };
                poll_at(
                    placement,
                    || value.load(Ordering::Acquire),
                    observed,
                    timeout,
                )
            }
            Origin::Rocr => {
                bump(&self.counters.rocr_waits);
                // SAFETY: a live ROCr signal of this pool's runtime.
                unsafe {
                    rocr_wait_until_change(
                        self.device.runtime(),
                        signal.handle(),
                        observed,
                        timeout,
                    )
                }
            }
        }
    }

    /// A ROCr interrupt signal (`hsa_amd_signal_create` with no
    /// attributes), released with the pool. Once the process's KFD events
    /// are spent ROCr makes a polling signal instead, without saying so; the
    /// pool tells by its empty event mailbox, destroys it and answers
    /// `None` ([`Counters::polling_wake_signals`]).
    fn create_wake_signal(&self) -> Result<Option<HsaSignal>, AllocError> {
        let mut state = self.state.lock();
        let mut signal = hsa_signal_t::NULL;
        // SAFETY: the runtime is initialised; no consumers listed; 0
        // attributes (an interrupt signal); `signal` is a place for the
        // handle.
        let status = unsafe {
            self.device
                .api()
                .hsa_amd_signal_create(1, 0, std::ptr::null(), 0, &raw mut signal)
        };
        self.device
            .check("hsa_amd_signal_create", status)
            .map_err(|error| AllocError::OutOfMemory(error.to_string()))?;
        // An interrupt signal has an event mailbox; past the process's KFD
        // events ROCr silently makes a polling one, which would wake nobody.
        let block = signal.handle as *const amd_signal_t;
        // SAFETY: ROCr's handle is the address of its live `amd_signal_t`,
        // whose mailbox field ROCr wrote once, at creation.
        let mailbox = unsafe { std::ptr::read_volatile(&raw const (*block).event_mailbox_ptr) };
        if mailbox == 0 {
            bump(&self.counters.polling_wake_signals);
            // SAFETY: created above, named by no packet.
            let _ = unsafe { self.device.api().hsa_signal_destroy(signal) };
            return Ok(None);
        }
        bump(&self.counters.wake_signals);
        state.rocr_signals.push(signal);
        self.register(signal.handle, BLOCK as u64, Kind::Rocr);
        Ok(Some(HsaSignal {
            handle: signal.handle,
            origin: Origin::Rocr,
        }))
    }

    /// `hsa_signal_wait_scacquire` with `HSA_WAIT_STATE_BLOCKED`: the thread
    /// sleeps on the signal's KFD event until a write wakes it.
    unsafe fn sleep_while(&self, signal: HsaSignal, observed: i64, timeout: Duration) -> i64 {
        if signal.origin != Origin::Rocr {
            // SAFETY: forwarded caller guarantee.
            return unsafe { self.wait_change(signal, observed, timeout) };
        }
        bump(&self.counters.sleeps);
        // SAFETY: a live ROCr signal of this pool's runtime.
        unsafe { rocr_wait_until_change(self.device.runtime(), signal.handle(), observed, timeout) }
    }
}

impl Drop for SignalPool {
    fn drop(&mut self) {
        let state = std::mem::take(&mut *self.state.lock());
        let memory = state
            .batches
            .iter()
            .map(|b| Release::PoolBlock(b.base as usize))
            .chain(state.rocr_signals.into_iter().map(Release::Signal))
            .collect();
        // Freed at once, or once no packet that named the pool's signals
        // can still run (see `teardown.rs`).
        let runtime = self.device.runtime();
        runtime
            .teardown
            .owner_dropped(runtime.api(), self.owner, memory);
    }
}
