//! The context: one device's primary context, with the signal kernels loaded,
//! the pinned-memory arena, and the registered launches.
//!
//! A [`CudaContext`] is a cheap, cloneable handle; queues, signal memory and
//! host flags each hold one, so the context (and with it every pinned
//! allocation a stream may still write) lives until the last of them is gone.
//! It uses the device's *primary* context, the one the CUDA runtime uses, so
//! native CUDA code in the same process (a benchmark's baseline, a HIP-like
//! runtime) shares it.
//!
//! Driver calls need the context current on the calling thread. Every entry
//! point that calls the driver binds it first ([`CudaContext::bind`]): one
//! `cuCtxGetCurrent`, and a `cuCtxSetCurrent` only when another context was
//! current. Host loads and stores of signals need no context at all.

use crate::device::{DeviceInfo, device_handle};
use crate::driver::initialize;
use crate::error::{Result, check};
use crate::kernel::{HostFlag, KernelHandle, Kernels, Launch, Registry, nanos};
use crate::memory::CudaMemory;
use crate::pinned::{Arena, Pinned};
use crate::queue::CudaQueue;
use core::fmt;
use core::sync::atomic::{AtomicBool, Ordering};
use cudarc::driver::sys::{self, CUcontext, CUdevice};
use sigretire_tracker::{BaselineTracker, Config, RetiringTracker};
use std::sync::Arc;
use std::time::Duration;

/// A device's primary context, ready for completion signals.
///
/// ```no_run
/// use sigretire_cuda::CudaContext;
/// use sigretire_tracker::{Config, Request, Status, Tracker, HardwareQueue, Work};
///
/// let context = CudaContext::new(0)?;
/// println!("{}", context.report());
/// let (mut tracker, queue) = context.retiring_tracker(Config::default())?;
/// let index = queue.reserve().unwrap();
/// let acquired = tracker.acquire(Request::packet(index).barrier(true)).unwrap();
/// queue.publish(acquired.publication, Work::Empty).unwrap();
/// queue.synchronize()?;
/// assert_eq!(tracker.query(&acquired.ticket).unwrap(), Status::Complete);
/// # Ok::<(), sigretire_cuda::Error>(())
/// ```
#[derive(Clone)]
pub struct CudaContext {
    inner: Arc<ContextInner>,
}

struct ContextInner {
    raw: CUcontext,
    device: CUdevice,
    info: DeviceInfo,
    kernels: Kernels,
    registry: Registry,
    arena: Arena,
    /// A stream was destroyed before its work drained: pinned memory may
    /// still be written, so it must not be freed.
    undrained: AtomicBool,
}

// SAFETY: a primary context handle may be used from any thread (that is
// what binding is for); the other fields are `Send + Sync` themselves.
unsafe impl Send for ContextInner {}
// SAFETY: as for `Send`: the handle is only passed to the driver, which
// synchronises internally.
unsafe impl Sync for ContextInner {}

impl CudaContext {
    /// Opens device `ordinal`'s primary context, checks that the device can
    /// carry completion signals, and loads the signal kernels.
    ///
    /// Errors: [`LibraryMissing`](crate::Error::LibraryMissing) without the
    /// driver, [`NoDevice`](crate::Error::NoDevice),
    /// [`DriverTooOld`](crate::Error::DriverTooOld),
    /// [`MissingCapability`](crate::Error::MissingCapability) without
    /// mapped host memory or 64-bit stream memory operations.
    ///
    /// ```
    /// use sigretire_cuda::{CudaContext, Error};
    ///
    /// // No driver or no device is a typed error, never a panic.
    /// assert!(matches!(
    ///     CudaContext::new(u32::MAX),
    ///     Err(Error::LibraryMissing | Error::NoDevice { requested: u32::MAX, .. })
    /// ));
    /// let context = match CudaContext::new(0) {
    ///     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    ///     context => context?,
    /// };
    /// assert_eq!(context.info().ordinal, 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn new(ordinal: u32) -> Result<Self> {
        initialize()?;
        let device = device_handle(ordinal)?;
        let info = DeviceInfo::query(ordinal, device)?;
        info.require_signal_support()?;
        let mut raw = core::ptr::null_mut();
        // SAFETY: `device` came from `cuDeviceGet`; `raw` is a live local.
        check("cuDevicePrimaryCtxRetain", unsafe {
            sys::cuDevicePrimaryCtxRetain(&mut raw, device)
        })?;
        let loaded = (|| {
            // SAFETY: `raw` was just retained.
            check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(raw) })?;
            Kernels::load()
        })();
        let kernels = match loaded {
            Ok(kernels) => kernels,
            Err(error) => {
                // SAFETY: retained above, released once here.
                unsafe { sys::cuDevicePrimaryCtxRelease_v2(device) };
                return Err(error);
            }
        };
        Ok(Self {
            inner: Arc::new(ContextInner {
                raw,
                device,
                info,
                kernels,
                registry: Registry::default(),
                arena: Arena::default(),
                undrained: AtomicBool::new(false),
            }),
        })
    }

    /// The device's name, capabilities and driver version.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_cuda::CudaVersion;
    /// // `new` checked these, so every context has them.
    /// assert!(context.info().can_map_host_memory && context.info().stream_mem_ops_64);
    /// assert!(context.info().driver >= CudaVersion::MINIMUM);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn info(&self) -> &DeviceInfo {
        &self.inner.info
    }

    /// The raw primary context, for native CUDA calls in the same process.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// assert!(!context.as_raw().is_null());
    /// // Clones share the one primary context.
    /// assert_eq!(context.clone().as_raw(), context.as_raw());
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn as_raw(&self) -> CUcontext {
        self.inner.raw
    }

    /// Whether `other` is the same CUDA context (clones and every
    /// `CudaContext::new` of one device share its primary context), whose
    /// streams can name this context's signals.
    pub fn same_context(&self, other: &CudaContext) -> bool {
        self.inner.raw == other.inner.raw
    }

    /// Makes the context current on this thread (if it is not already).
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use cudarc::driver::sys::cuCtxGetCurrent;
    ///
    /// // A new thread has no current context until it binds one.
    /// std::thread::scope(|scope| {
    ///     scope
    ///         .spawn(|| {
    ///             context.bind()?;
    ///             let mut current = std::ptr::null_mut();
    ///             // SAFETY: the driver is initialised; `current` is a live local.
    ///             sigretire_cuda::check("cuCtxGetCurrent", unsafe { cuCtxGetCurrent(&mut current) })?;
    ///             assert_eq!(current, context.as_raw());
    ///             Ok::<(), sigretire_cuda::Error>(())
    ///         })
    ///         .join()
    ///         .unwrap()
    /// })?;
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn bind(&self) -> Result<()> {
        let mut current = core::ptr::null_mut();
        // SAFETY: the driver is initialised (a context exists); `current` is
        // a live local.
        check("cuCtxGetCurrent", unsafe {
            sys::cuCtxGetCurrent(&mut current)
        })?;
        if current != self.inner.raw {
            // SAFETY: the context is retained for as long as `self` lives.
            check("cuCtxSetCurrent", unsafe {
                sys::cuCtxSetCurrent(self.inner.raw)
            })?;
        }
        Ok(())
    }

    /// Waits until every stream of the context is idle (`cuCtxSynchronize`).
    /// Blocks for as long as the GPU works: a `cuStreamWaitValue64` whose
    /// signal nobody completes blocks it for good.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// let (first, second) = (context.create_queue()?, context.create_queue()?);
    /// first.launch_empty()?;
    /// second.launch_empty()?;
    /// context.synchronize()?; // waits for both streams
    /// assert!(first.is_idle()? && second.is_idle()?);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        // SAFETY: the context is bound to this thread.
        check("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })
    }

    /// A new queue: a stream of this context (see [`CudaQueue`]).
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_tracker::QueueView;
    /// let queue = context.create_queue()?;
    /// assert_eq!((queue.reserved(), queue.read_index()), (0, 0));
    /// assert!(queue.is_idle()?);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn create_queue(&self) -> Result<CudaQueue> {
        CudaQueue::new(self)
    }

    /// A retiring tracker with its own signal memory on a new queue, and the
    /// queue. Use `Placement::Host` signals (the default): this backend has
    /// no other kind.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_tracker::{Config, HardwareQueue, Request, Status, Tracker, Work};
    ///
    /// let (mut tracker, queue) = context.retiring_tracker(Config::default())?;
    /// let index = queue.reserve().unwrap();
    /// let acquired = tracker.acquire(Request::packet(index).barrier(true)).unwrap();
    /// queue.publish(acquired.publication, Work::Empty).unwrap();
    /// queue.synchronize()?;
    /// assert_eq!(tracker.query(&acquired.ticket).unwrap(), Status::Complete);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn retiring_tracker(
        &self,
        config: Config,
    ) -> Result<(RetiringTracker<CudaMemory, CudaQueue>, CudaQueue)> {
        let queue = self.create_queue()?;
        let memory = Arc::new(CudaMemory::new(self));
        Ok((RetiringTracker::new(memory, queue.clone(), config)?, queue))
    }

    /// The baseline tracker with its own signal memory on a new queue, and
    /// the queue.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_tracker::{Config, HardwareQueue, Request, Status, Tracker, Work};
    ///
    /// let (mut baseline, queue) = context.baseline_tracker(Config::default())?;
    /// let index = queue.reserve().unwrap();
    /// let acquired = baseline.acquire(Request::packet(index).barrier(true)).unwrap();
    /// queue.publish(acquired.publication, Work::Empty).unwrap();
    /// queue.synchronize()?;
    /// assert_eq!(baseline.query(&acquired.ticket).unwrap(), Status::Complete);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn baseline_tracker(
        &self,
        config: Config,
    ) -> Result<(BaselineTracker<CudaMemory, CudaQueue>, CudaQueue)> {
        let queue = self.create_queue()?;
        let memory = Arc::new(CudaMemory::new(self));
        Ok((BaselineTracker::new(memory, queue.clone(), config)?, queue))
    }

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
    pub fn host_flag(&self) -> Result<HostFlag> {
        Ok(HostFlag::new(self.clone(), self.allocate_pinned(8)?))
    }

    /// Registers `sigpool_busy` for `duration`, launched with `threads`
    /// threads in one block (1 is plenty; more than the device's limit,
    /// 1024 on current GPUs, makes every launch fail with
    /// `CUDA_ERROR_INVALID_VALUE`).
    ///
    /// ```
    /// # use sigretire_tracker::Publication;
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use std::time::{Duration, Instant};
    /// use sigretire_tracker::HardwareQueue;
    ///
    /// let busy = context.register_busy_kernel(Duration::from_millis(2), 1);
    /// let queue = context.create_queue()?;
    /// let start = Instant::now();
    /// let index = queue.reserve().unwrap();
    /// queue.publish(Publication::unsignalled(index, true), busy.work()).unwrap();
    /// queue.synchronize()?;
    /// assert!(start.elapsed() >= Duration::from_millis(2));
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn register_busy_kernel(&self, duration: Duration, threads: u32) -> KernelHandle {
        self.inner.registry.register(Launch::Busy {
            nanos: nanos(duration),
            threads,
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
        self.inner.registry.register(Launch::SpinUntil {
            flag: flag.device_address(),
            timeout_nanos: nanos(timeout),
        })
    }

    /// Bytes of pinned host memory this context holds.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// let before = context.pinned_bytes();
    /// let _flag = context.host_flag()?; // one pinned 64-bit word
    /// assert_eq!(context.pinned_bytes(), before + 8);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn pinned_bytes(&self) -> usize {
        self.inner.arena.bytes()
    }

    /// What to print next to a measurement: device, driver, kernel module,
    /// and the CUDA API this crate was built against.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_cuda::CudaVersion;
    /// let report = context.report();
    /// assert_eq!(report.device, context.info().name);
    /// assert_eq!(report.built_against, CudaVersion::BUILT_AGAINST);
    /// println!("{report}");
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn report(&self) -> crate::native::SystemReport {
        crate::native::SystemReport::of(self)
    }

    pub(crate) fn allocate_pinned(&self, bytes: usize) -> Result<Pinned> {
        self.bind()?;
        self.inner.arena.allocate(bytes)
    }

    pub(crate) fn kernels(&self) -> &Kernels {
        &self.inner.kernels
    }

    pub(crate) fn launch(&self, handle: u64) -> Option<Launch> {
        self.inner.registry.get(handle)
    }

    /// A stream went away with work still pending on it.
    pub(crate) fn note_undrained(&self) {
        self.inner.undrained.store(true, Ordering::Release);
    }
}

impl fmt::Debug for CudaContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaContext")
            .field("ordinal", &self.inner.info.ordinal)
            .field("name", &self.inner.info.name)
            .finish_non_exhaustive()
    }
}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // Restore whatever context the thread had once done.
        // SAFETY: the context is still retained.
        if unsafe { sys::cuCtxPushCurrent_v2(self.raw) } == sys::CUresult::CUDA_SUCCESS {
            if !self.undrained.load(Ordering::Acquire) {
                // SAFETY: every queue is gone (each held a clone) and drained
                // its stream, so no launch is pending and no stream writes
                // pinned memory; the context is bound.
                unsafe {
                    self.kernels.unload();
                    self.arena.free_all();
                }
            }
            let mut popped = core::ptr::null_mut();
            // SAFETY: pops the context pushed above.
            unsafe { sys::cuCtxPopCurrent_v2(&mut popped) };
        }
        // SAFETY: retained once in `new`, released once here.
        unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device) };
    }
}
