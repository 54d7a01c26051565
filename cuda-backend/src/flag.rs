//! Host flags: words in pinned host memory that spin kernels poll until
//! the host releases them (the queue layer's regression test: a kernel that
//! runs until the host says so), and the registration of such a kernel on
//! a context.

use crate::context::CudaContext;
use crate::error::Result;
use crate::kernel::{KernelHandle, Launch, nanos};
use crate::pinned::Pinned;
use core::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What a [`HostFlag`] says.
///
/// ```
/// # use sigretire_cuda::{CudaContext, Error};
/// # let context = match CudaContext::new(0) {
/// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
/// #     context => context?,
/// # };
/// use sigretire_cuda::FlagState;
///
/// let flag = context.host_flag()?;
/// assert_eq!(flag.state(), FlagState::Held); // a new flag holds its spin kernels
/// flag.release();
/// assert_eq!(flag.state(), FlagState::Released);
/// # Ok::<(), sigretire_cuda::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagState {
    /// Set by no one: spin kernels on it keep spinning.
    Held,
    /// Released by the host.
    Released,
    /// A spin kernel gave up waiting (its timeout passed) and said so.
    GaveUp,
}

/// A word in pinned host memory that spin kernels poll: the host releases
/// them by setting it.
///
/// ```no_run
/// # use sigretire_tracker::Publication;
/// use std::time::Duration;
/// use sigretire_cuda::{CudaContext, FlagState};
/// use sigretire_tracker::{HardwareQueue, QueueView};
///
/// let context = CudaContext::new(0)?;
/// let flag = context.host_flag()?;
/// let spin = context.register_spin_kernel(&flag, Duration::from_secs(5));
/// let queue = context.create_queue()?;
/// let index = queue.reserve().unwrap();
/// queue.publish(Publication::unsignalled(index, true), spin.work()).unwrap();
/// assert_eq!(queue.read_index(), 0); // still spinning
/// flag.release();
/// queue.synchronize()?;
/// assert_eq!(flag.state(), FlagState::Released);
/// # Ok::<(), sigretire_cuda::Error>(())
/// ```
#[derive(Debug)]
pub struct HostFlag {
    _context: Arc<CudaContext>,
    word: Pinned,
}

impl HostFlag {
    fn word(&self) -> &AtomicU64 {
        // SAFETY: the word is 8 bytes of a page-aligned pinned allocation
        // that the context's arena keeps alive while `_context` is held; it
        // is only ever accessed atomically (by the host) or by volatile
        // 64-bit accesses (by the GPU).
        unsafe { AtomicU64::from_ptr(self.word.host.as_ptr().cast()) }
    }

    /// Releases every spin kernel on this flag.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_cuda::FlagState;
    /// let flag = context.host_flag()?;
    /// flag.release();
    /// assert_eq!(flag.state(), FlagState::Released);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn release(&self) {
        self.word().store(1, Ordering::Release);
    }

    /// Holds later spin kernels again.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_cuda::FlagState;
    /// let flag = context.host_flag()?;
    /// flag.release();
    /// flag.reset();
    /// assert_eq!(flag.state(), FlagState::Held);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn reset(&self) {
        self.word().store(0, Ordering::Release);
    }

    /// What the flag says now.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_cuda::FlagState;
    /// let flag = context.host_flag()?;
    /// assert_eq!(flag.state(), FlagState::Held);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn state(&self) -> FlagState {
        match self.word().load(Ordering::Acquire) {
            0 => FlagState::Held,
            2 => FlagState::GaveUp,
            _ => FlagState::Released,
        }
    }

    /// The flag's address as the GPU sees it.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// let flag = context.host_flag()?;
    /// // What a spin kernel polls: a 64-bit word, so 8-byte aligned.
    /// assert_eq!(flag.device_address() % 8, 0);
    /// assert_ne!(flag.device_address(), 0);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn device_address(&self) -> u64 {
        self.word.device
    }
}

/// Making flags, and the kernels that spin on them, on a context.
impl CudaContext {
    /// A new [`HostFlag`], held.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_cuda::FlagState;
    /// let flag = context.host_flag()?;
    /// assert_eq!(flag.state(), FlagState::Held);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn host_flag(self: &Arc<Self>) -> Result<HostFlag> {
        Ok(HostFlag {
            _context: self.clone(),
            word: self.allocate_pinned(8)?,
        })
    }

    /// Registers `sigpool_spin_until` on `flag`: it runs until the host
    /// releases the flag, or until `timeout` passes (then the flag says
    /// [`GaveUp`](crate::FlagState::GaveUp)).
    ///
    /// ```
    /// # use sigretire_tracker::Publication;
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use std::time::Duration;
    /// use sigretire_cuda::FlagState;
    /// use sigretire_tracker::HardwareQueue;
    ///
    /// let flag = context.host_flag()?;
    /// let spin = context.register_spin_kernel(&flag, Duration::from_millis(1));
    /// let queue = context.create_queue()?;
    /// let index = queue.reserve().unwrap();
    /// queue.publish(Publication::unsignalled(index, true), spin.work()).unwrap();
    /// queue.synchronize()?; // nobody releases the flag: the kernel gives up after 1 ms
    /// assert_eq!(flag.state(), FlagState::GaveUp);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn register_spin_kernel(&self, flag: &HostFlag, timeout: Duration) -> KernelHandle {
        self.register(Launch::SpinUntil {
            flag: flag.device_address(),
            timeout_nanos: nanos(timeout),
        })
    }
}
