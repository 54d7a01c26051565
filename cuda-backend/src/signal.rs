//! One completion signal's memory: the 32-byte block the GPU writes (its
//! value and two `%globaltimer` stamps), and the pair of addresses that
//! names it on the host and on the GPU.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicI64, AtomicU64};

/// The memory behind one signal: 32 bytes, 32-byte aligned.
///
/// The kernels write `start_ns` and `end_ns` at byte offsets 8 and 16 of the
/// block whose address they are given (the signal's packet handle), so the
/// layout is part of the PTX's contract; it is asserted at compile time.
///
/// ```
/// use sigretire_cuda::{CudaMemory, SignalBlock};
/// assert_eq!((SignalBlock::SIZE, core::mem::align_of::<SignalBlock>()), (32, 32));
/// assert_eq!(CudaMemory::DEFAULT_BATCH * SignalBlock::SIZE, 4096); // one page per batch
/// ```
#[repr(C, align(32))]
#[derive(Debug, Default)]
pub struct SignalBlock {
    /// The signal's value: 1 armed, 0 complete.
    pub(crate) value: AtomicI64,
    /// `%globaltimer` when the use's kernel started (ns).
    pub(crate) start_ns: AtomicU64,
    /// `%globaltimer` when the use's kernel finished (ns).
    pub(crate) end_ns: AtomicU64,
    _reserved: AtomicU64,
}

impl SignalBlock {
    /// Bytes per block.
    ///
    /// ```
    /// assert_eq!(sigretire_cuda::SignalBlock::SIZE, 32);
    /// ```
    pub const SIZE: usize = core::mem::size_of::<SignalBlock>();

    /// Where the kernels write the start stamp.
    ///
    /// ```
    /// assert_eq!(sigretire_cuda::SignalBlock::START_OFFSET, 8); // right after the value
    /// ```
    pub const START_OFFSET: usize = core::mem::offset_of!(SignalBlock, start_ns);

    /// Where the kernels write the end stamp.
    ///
    /// ```
    /// assert_eq!(sigretire_cuda::SignalBlock::END_OFFSET, 16);
    /// ```
    pub const END_OFFSET: usize = core::mem::offset_of!(SignalBlock, end_ns);
}

const _: () = {
    assert!(SignalBlock::SIZE == 32);
    assert!(core::mem::align_of::<SignalBlock>() == 32);
    assert!(core::mem::offset_of!(SignalBlock, value) == 0);
    assert!(SignalBlock::START_OFFSET == 8);
    assert!(SignalBlock::END_OFFSET == 16);
};

/// A signal: the host and device addresses of its block.
///
/// Cheap to copy; meaningful only to the [`CudaMemory`](crate::CudaMemory) that allocated it.
///
/// ```
/// # use sigretire_cuda::{CudaContext, Error};
/// # let context = match CudaContext::new(0) {
/// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
/// #     context => context?,
/// # };
/// use sigretire_cuda::{CudaMemory, SignalBlock};
/// use sigretire_tracker::backend::SignalMemory;
/// use sigretire_tracker::Placement;
///
/// let memory = CudaMemory::new(&context);
/// let mut signals = Vec::new();
/// memory.allocate(2, Placement::Host, &mut signals).unwrap();
/// let (first, second) = (signals[0].0, signals[1].0);
/// // Consecutive blocks of one pinned batch.
/// assert_eq!(second.device_address() - first.device_address(), SignalBlock::SIZE as u64);
/// # Ok::<(), sigretire_cuda::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CudaSignal {
    block: NonNull<SignalBlock>,
    device: u64,
}

// SAFETY: a signal is two addresses; it grants access only through
// `SignalMemory`'s unsafe methods, whose contract keeps the memory alive.
unsafe impl Send for CudaSignal {}
// SAFETY: as for `Send`.
unsafe impl Sync for CudaSignal {}

impl CudaSignal {
    pub(crate) fn new(block: NonNull<SignalBlock>, device: u64) -> Self {
        Self { block, device }
    }

    /// The value word's address as the GPU sees it: what a stream memory
    /// operation writes or waits on, and the signal's packet handle.
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
    /// memory.allocate(1, Placement::Host, &mut signals).unwrap();
    /// let signal = signals[0].0;
    /// // What a stream writes is what a packet names.
    /// assert_eq!(memory.packet_handle(signal), signal.device_address());
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn device_address(&self) -> u64 {
        self.device
    }

    /// The block's address as the host sees it.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_cuda::{CudaMemory, SignalBlock};
    /// use sigretire_tracker::backend::SignalMemory;
    /// use sigretire_tracker::Placement;
    ///
    /// let memory = CudaMemory::new(&context);
    /// let mut signals = Vec::new();
    /// memory.allocate(1, Placement::Host, &mut signals).unwrap();
    /// let signal = signals[0].0;
    /// assert_eq!(signal.host_address() as usize % SignalBlock::SIZE, 0);
    /// if context.info().unified_addressing {
    ///     // One address space: the GPU's address of the word is the host's.
    ///     assert_eq!(signal.host_address() as u64, signal.device_address());
    /// }
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn host_address(&self) -> *const SignalBlock {
        self.block.as_ptr()
    }

    /// The block.
    ///
    /// # Safety
    /// The memory that allocated the signal is alive.
    pub(crate) unsafe fn block(&self) -> &SignalBlock {
        // SAFETY: the caller keeps the allocation alive; every field is an
        // atomic, so a shared reference is sound while the GPU writes it.
        unsafe { self.block.as_ref() }
    }
}
