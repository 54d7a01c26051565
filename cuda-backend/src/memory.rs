//! Signal memory: completion signals as 64-bit words in pinned host memory.
//!
//! Each signal is a 32-byte [`SignalBlock`]: the value the GPU writes 0 into
//! when the use completes (`cuStreamWriteValue64`), and two timestamps the
//! signal kernels write from the GPU's `%globaltimer` (nanoseconds). Blocks
//! are carved from batch allocations ([`batch`](crate::batch)).
//!
//! **Placement.** The words are host memory, so a host load is an ordinary
//! cached load: every signal is [`Placement::Host`]. A request for
//! [`Placement::Device`] is served from host memory and reported as such for
//! each signal, as [`SignalMemory::allocate`] allows; configure the tracker
//! with `Placement::Host` (the default) to avoid the useless swap attempts.
//!
//! **Re-arming.** The tracker re-arms a retired signal with one host store of
//! 1, in batches, with no driver call. No re-arm needs a stream-ordered store
//! (`cuStreamBatchMemOp`): the tracker re-arms only signals whose use retired
//! (the GPU's write of 0 has landed) and that nobody holds (no waiter's
//! `cuStreamWaitValue64` can still read them), and the next write of 0 comes
//! from a stream operation or kernel enqueued after the store, through the driver's
//! doorbell, which is ordered after the host's earlier stores. So the host's
//! 1 always lands before the GPU's next 0, and no GPU reader sees the re-arm
//! early.

use crate::batch::{Carver, Chunk};
use crate::context::CudaContext;
use crate::signal::{CudaSignal, SignalBlock};
use core::sync::atomic::{AtomicU64, Ordering, fence};
use parking_lot::Mutex;
use sigretire_tracker::{
    Placement, TimestampClock, Timestamps,
    backend::{AllocError, SignalMemory},
};
use std::sync::Arc;
use std::time::Duration;

/// Completion signals in pinned, device-mapped host memory, allocated in
/// batches: the tracker's [`SignalMemory`] on CUDA.
///
/// ```no_run
/// use std::sync::Arc;
/// use sigretire_cuda::{CudaContext, CudaMemory};
/// use sigretire_tracker::backend::SignalMemory;
/// use sigretire_tracker::Placement;
///
/// let context = CudaContext::new(0)?;
/// let memory = Arc::new(CudaMemory::new(&context));
/// let mut signals = Vec::new();
/// memory.allocate(4, Placement::Device, &mut signals).unwrap();
/// // Device memory was asked for; pinned host memory is what this backend has.
/// assert!(signals.iter().all(|&(_, placement)| placement == Placement::Host));
/// # Ok::<(), sigretire_cuda::Error>(())
/// ```
#[derive(Debug)]
pub struct CudaMemory {
    context: Arc<CudaContext>,
    carver: Mutex<Carver>,
    device_requests: AtomicU64,
}

impl CudaMemory {
    /// Blocks per pinned allocation by default: one 4 KiB page.
    ///
    /// ```
    /// assert_eq!(sigretire_cuda::CudaMemory::DEFAULT_BATCH, 128);
    /// ```
    pub const DEFAULT_BATCH: usize = 4096 / SignalBlock::SIZE;

    /// Signal memory of `context`, allocating [`DEFAULT_BATCH`](Self::DEFAULT_BATCH)
    /// blocks at a time.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_cuda::CudaMemory;
    /// let memory = CudaMemory::new(&context);
    /// assert_eq!(memory.batches_allocated(), 0); // nothing is pinned until signals are asked for
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn new(context: &Arc<CudaContext>) -> Self {
        Self::with_batch(context, Self::DEFAULT_BATCH)
    }

    /// Signal memory that allocates at least `blocks` blocks at a time.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_cuda::CudaMemory;
    /// use sigretire_tracker::backend::SignalMemory;
    /// use sigretire_tracker::Placement;
    ///
    /// let memory = CudaMemory::with_batch(&context, 8);
    /// let mut signals = Vec::new();
    /// memory.allocate(8, Placement::Host, &mut signals).unwrap();
    /// assert_eq!(memory.batches_allocated(), 1);
    /// memory.allocate(1, Placement::Host, &mut signals).unwrap(); // the ninth needs a new batch
    /// assert_eq!(memory.batches_allocated(), 2);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn with_batch(context: &Arc<CudaContext>, blocks: usize) -> Self {
        Self {
            context: context.clone(),
            carver: Mutex::new(Carver::new(blocks)),
            device_requests: AtomicU64::new(0),
        }
    }

    /// The context whose memory this is.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_cuda::CudaMemory;
    /// let memory = CudaMemory::new(&context);
    /// assert_eq!(memory.context().as_raw(), context.as_raw());
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.context
    }

    /// Signals asked for in device memory and served from host memory.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_cuda::CudaMemory;
    /// use sigretire_tracker::backend::SignalMemory;
    /// use sigretire_tracker::Placement;
    ///
    /// let memory = CudaMemory::new(&context);
    /// let mut signals = Vec::new();
    /// memory.allocate(4, Placement::Device, &mut signals).unwrap();
    /// memory.allocate(2, Placement::Host, &mut signals).unwrap();
    /// assert_eq!(memory.device_requests_served_from_host(), 4);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn device_requests_served_from_host(&self) -> u64 {
        self.device_requests.load(Ordering::Relaxed)
    }

    /// Pinned allocations made so far.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_cuda::CudaMemory;
    /// use sigretire_tracker::backend::SignalMemory;
    /// use sigretire_tracker::Placement;
    ///
    /// let memory = CudaMemory::new(&context);
    /// let mut signals = Vec::new();
    /// memory.allocate(CudaMemory::DEFAULT_BATCH, Placement::Host, &mut signals).unwrap();
    /// assert_eq!(memory.batches_allocated(), 1);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn batches_allocated(&self) -> usize {
        self.carver.lock().chunks()
    }

    fn allocate_signals(
        &self,
        count: usize,
        out: &mut Vec<(CudaSignal, Placement)>,
    ) -> crate::Result<()> {
        let mut carver = self.carver.lock();
        carver.carve(
            count,
            |blocks| {
                let pinned = self.context.allocate_pinned(Carver::bytes_for(blocks)?)?;
                Ok(Chunk {
                    host: pinned.host.cast(),
                    device: pinned.device,
                    blocks,
                })
            },
            |signal| out.push((signal, Placement::Host)),
        )
    }
}

impl SignalMemory for CudaMemory {
    type Signal = CudaSignal;

    /// Carves `count` signals from the current batch, allocating a new
    /// pinned batch when it runs out. Every signal is `Placement::Host`.
    fn allocate(
        &self,
        count: usize,
        placement: Placement,
        out: &mut Vec<(CudaSignal, Placement)>,
    ) -> Result<(), AllocError> {
        self.allocate_signals(count, out)?;
        if placement == Placement::Device {
            self.device_requests
                .fetch_add(count as u64, Ordering::Relaxed);
        }
        Ok(())
    }

    unsafe fn load(&self, signal: CudaSignal) -> i64 {
        // SAFETY: the caller passes a signal of this memory, which keeps its
        // allocation alive (the context's arena outlives `self`).
        unsafe { signal.block() }.value.load(Ordering::Acquire)
    }

    unsafe fn store(&self, signal: CudaSignal, value: i64) {
        // SAFETY: as in `load`.
        unsafe { signal.block() }
            .value
            .store(value, Ordering::Release)
    }

    /// Host memory is coherent with the GPU's reads over PCIe, and the
    /// driver orders its doorbell after the host's earlier stores, so
    /// nothing is needed; a full fence is issued anyway, so a caller that
    /// relies on the call still gets an ordering point. (The tracker calls
    /// it only for device-memory signals, which this backend never has.)
    fn store_fence(&self) {
        fence(Ordering::SeqCst);
    }

    /// No HDP on NVIDIA GPUs: nothing to flush.
    fn hdp_flush(&self) {}

    /// The `%globaltimer` stamps (ns) the use's kernel wrote. The GPU
    /// wrote them before the completion value (its write carries a memory
    /// barrier), so once the tracker saw 0 they are the use's own. A
    /// publication that runs no kernel clears them (`ops.rs`): zeros mean
    /// no kernel stamped this use, and read as `None` (`%globaltimer` is
    /// never 0 on a running GPU).
    unsafe fn timestamps(&self, signal: CudaSignal) -> Option<Timestamps> {
        // SAFETY: as in `load`.
        let block = unsafe { signal.block() };
        let stamps = Timestamps {
            start: block.start_ns.load(Ordering::Acquire),
            end: block.end_ns.load(Ordering::Acquire),
        };
        (stamps != Timestamps::default()).then_some(stamps)
    }

    /// `%globaltimer` counts nanoseconds.
    fn timestamp_clock(&self) -> TimestampClock {
        TimestampClock::NANOSECONDS
    }

    fn packet_handle(&self, signal: CudaSignal) -> u64 {
        signal.device_address()
    }

    /// A pinned signal whose completions also run a host function that
    /// wakes its sleepers (`wake.rs`): no driver object per signal, so no
    /// budget to spend.
    fn create_wake_signal(&self) -> Result<Option<CudaSignal>, AllocError> {
        let mut out = Vec::with_capacity(1);
        self.allocate_signals(1, &mut out)?;
        let (signal, _) = out[0];
        self.context.wakes().register(signal.device_address());
        Ok(Some(signal))
    }

    unsafe fn sleep_while(&self, signal: CudaSignal, observed: i64, timeout: Duration) -> i64 {
        // SAFETY: as in `load`.
        let value = &unsafe { signal.block() }.value;
        self.context.wakes().sleep_while(value, observed, timeout)
    }

    /// Signals are pinned host memory, allocated portable (pinned for every
    /// context) and mapped: a stream of the same context names them by the
    /// address the mapping gave; with unified addressing on both devices
    /// that address is the host's, valid in every context, so a stream of
    /// another GPU waits on them too (a cross-device wait: GPU 1 waits for
    /// an event of GPU 0, the word in host memory both reach over PCIe).
    fn shares_signals_with(&self, other: &Self) -> bool {
        self.context.same_context(&other.context)
            || (self.context.info().unified_addressing && other.context.info().unified_addressing)
    }
}
