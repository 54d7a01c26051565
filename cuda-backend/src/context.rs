//! The context: one device's primary context, with the empty kernel loaded,
//! the pinned-memory arena, and the registered launches.
//!
//! A leaf, as cudarc's `CudaContext` is: [`CudaContext::new`] hands out an
//! `Arc<CudaContext>`, and queues, signal memory, streams and events each
//! hold a clone of that `Arc`, so the context (and with it every pinned
//! allocation a stream may still write) lives until the last of them is
//! gone. This module names none of them: what builds a queue or a tracker
//! on a context lives with the queue (`hardware_queue.rs`) and the trackers
//! (`trackers.rs`), in `impl CudaContext` blocks of their own. It uses the device's *primary* context, the one the
//! CUDA runtime uses, so native CUDA code in the same process (a
//! benchmark's baseline, a HIP-like runtime) shares it.
//!
//! Driver calls need the context current on the calling thread. Every entry
//! point that calls the driver binds it first ([`CudaContext::bind`]): one
//! `cuCtxGetCurrent`, and a `cuCtxSetCurrent` only when another context was
//! current. Host loads and stores of signals need no context at all.

use crate::device::{DeviceInfo, device_handle};
use crate::drain::{DRAIN_TIMEOUT, Drains};
use crate::driver::initialize;
use crate::error::{Error, Result, check};
use crate::kernel::{KernelHandle, KernelLaunch, Kernels, Registry};
use crate::pinned::{Arena, Pinned};
use crate::wake::{WakeStats, Wakes};
use core::fmt;
use core::sync::atomic::{AtomicBool, Ordering};
use cudarc::driver::sys::{self, CUcontext, CUdevice, CUstream};
use std::sync::Arc;

/// A device's primary context, ready for completion signals.
///
/// ```no_run
/// use sigretire_cuda::CudaContext;
/// use sigretire_tracker::backend::HardwareQueue;
/// use sigretire_tracker::{Config, Request, Status, Tracker, Work};
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
pub struct CudaContext {
    raw: CUcontext,
    device: CUdevice,
    info: DeviceInfo,
    kernels: Kernels,
    registry: Registry,
    arena: Arena,
    /// Fences behind the library's work on adopted streams, waited for
    /// before the arena is freed.
    drains: Drains,
    /// Wake signals and their mailbox (`wake.rs`).
    wakes: Wakes,
    /// A stream was destroyed before its work drained (or an adopted one's
    /// fence could not be recorded): pinned memory may still be written, so
    /// it must not be freed.
    undrained: AtomicBool,
}

// SAFETY: a primary context handle may be used from any thread (that is
// what binding is for); the other fields are `Send + Sync` themselves.
unsafe impl Send for CudaContext {}
// SAFETY: as for `Send`: the handle is only passed to the driver, which
// synchronises internally.
unsafe impl Sync for CudaContext {}

impl CudaContext {
    /// Opens device `ordinal`'s primary context, checks that the device can
    /// carry completion signals, and loads the empty kernel. The context
    /// comes in an `Arc`: every queue, signal memory, stream and event made
    /// on it holds a clone, and it is released when the last goes.
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
    pub fn new(ordinal: u32) -> Result<Arc<Self>> {
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
        Ok(Arc::new(Self {
            raw,
            device,
            info,
            kernels,
            registry: Registry::default(),
            arena: Arena::default(),
            drains: Drains::default(),
            wakes: Wakes::default(),
            undrained: AtomicBool::new(false),
        }))
    }

    /// This library's context on the device of cudarc's `context`, for a
    /// runtime built on cudarc: the same primary context (cudarc's
    /// `CudaContext::new` retains it too), so cudarc's streams, events and
    /// allocations and this context's queues and signals are of one
    /// context. Checked, not assumed: a cudarc context that is not its
    /// device's primary one is refused.
    ///
    /// Errors: those of [`new`](Self::new) for cudarc's ordinal, and
    /// [`ForeignContext`](crate::Error::ForeignContext) for a context of
    /// cudarc's `new_non_primary`, `new_cig` or `from_raw_context`.
    ///
    /// ```
    /// use sigretire_cuda::{CudaContext, Error};
    ///
    /// // cudarc panics where there is no driver: ask first.
    /// if !sigretire_cuda::library_present() {
    ///     return Ok(()); // no driver here
    /// }
    /// let Ok(runtime) = cudarc::driver::CudaContext::new(0) else {
    ///     return Ok(()); // no device here
    /// };
    /// let context = CudaContext::from_cudarc(&runtime)?;
    /// assert_eq!(context.as_raw(), runtime.cu_ctx());
    /// assert_eq!(context.info().ordinal, 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn from_cudarc(context: &Arc<cudarc::driver::CudaContext>) -> Result<Arc<Self>> {
        // An ordinal past u32 is no device the driver has: `new` says so.
        let ordinal = u32::try_from(context.ordinal()).unwrap_or(u32::MAX);
        let ours = Self::new(ordinal)?;
        if !context.is_primary()
            || context.cu_ctx() != ours.raw
            || context.cu_device() != ours.device
        {
            return Err(Error::ForeignContext {
                ordinal,
                cudarc_context: context.cu_ctx() as usize,
                primary: ours.raw as usize,
            });
        }
        Ok(ours)
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
        &self.info
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
    /// // Clones of the `Arc` are the one context.
    /// assert_eq!(context.clone().as_raw(), context.as_raw());
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn as_raw(&self) -> CUcontext {
        self.raw
    }

    /// Whether `other` is the same CUDA context (clones and every
    /// `CudaContext::new` of one device share its primary context), whose
    /// streams can name this context's signals.
    pub fn same_context(&self, other: &CudaContext) -> bool {
        self.raw == other.raw
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
        if current != self.raw {
            // SAFETY: the context is retained for as long as `self` lives.
            check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(self.raw) })?;
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

    /// Registers a kernel of the caller's own as tracked work: the handle
    /// a queue of this context publishes it by ([`KernelHandle::work`]).
    /// Each publication is one `cuLaunchKernel` of `kernel` on the queue's
    /// stream with the use's signal block (its device address, or 0) as
    /// the first argument, then [`KernelLaunch::args`]; the use's
    /// completion and the queue's progress follow it on the stream, so the
    /// use completes when the kernel has finished. A kernel that writes the
    /// block's stamps ([`KernelLaunch::writes_stamps`]) gives a timed use
    /// its GPU start and end. This is how a runtime's own kernels become
    /// tracked, timed work without adopting a stream of its own
    /// ([`adopt_stream`](Self::adopt_stream) is the way for work the runtime
    /// enqueues itself). A handle cannot be unregistered; a launch that the
    /// driver refuses (a block too wide, say) fails its publication with
    /// the driver's error, as any other enqueue error does.
    ///
    /// # Safety
    /// - `kernel.function()` is a kernel of a module loaded in this
    ///   context (its primary context, [`as_raw`](Self::as_raw)), and the
    ///   module stays loaded for as long as any queue of this context may
    ///   publish the handle and until that work has run (simplest: never
    ///   unload it while the context lives);
    /// - it declares exactly `1 + kernel.args().len()` parameters, each 64
    ///   bits (`.param .u64`, or `unsigned long long` / a pointer in CUDA
    ///   C): the block's address, then the arguments;
    /// - it writes nothing of the block but the two 64-bit stamps at
    ///   [`SignalBlock::START_OFFSET`](crate::SignalBlock::START_OFFSET) and
    ///   [`END_OFFSET`](crate::SignalBlock::END_OFFSET) (the value word is
    ///   the completion the queue writes after it), and whatever memory its
    ///   arguments name stays valid, and safe for it to use, while it runs.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_cuda::{KernelLaunch, check, cudarc::driver::sys};
    /// use sigretire_tracker::backend::HardwareQueue;
    /// use sigretire_tracker::{Config, Request, Tracker};
    ///
    /// // A runtime's kernel: spins for `ns` nanoseconds, then stamps the block.
    /// const PTX: &core::ffi::CStr = cr"
    /// .version 7.0
    /// .target sm_50
    /// .address_size 64
    /// .visible .entry wait_ns(.param .u64 wait_ns_block, .param .u64 wait_ns_ns)
    /// {
    ///     .reg .pred %p<3>;
    ///     .reg .b64 %rd<6>;
    ///     ld.param.u64 %rd1, [wait_ns_block];
    ///     ld.param.u64 %rd2, [wait_ns_ns];
    ///     mov.u64 %rd3, %globaltimer;
    ///     add.u64 %rd4, %rd3, %rd2;
    /// SPIN:
    ///     mov.u64 %rd5, %globaltimer;
    ///     setp.lt.u64 %p1, %rd5, %rd4;
    ///     @%p1 bra SPIN;
    ///     setp.eq.u64 %p2, %rd1, 0;
    ///     @%p2 bra DONE;
    ///     cvta.to.global.u64 %rd1, %rd1;
    ///     st.volatile.global.u64 [%rd1+8], %rd3;
    ///     st.volatile.global.u64 [%rd1+16], %rd5;
    /// DONE:
    ///     ret;
    /// }
    /// ";
    /// context.bind()?; // the module is loaded into the bound context
    /// let (mut module, mut function) = (std::ptr::null_mut(), std::ptr::null_mut());
    /// // SAFETY: a NUL-terminated PTX image; live locals for the results.
    /// check("cuModuleLoadData", unsafe { sys::cuModuleLoadData(&mut module, PTX.as_ptr().cast()) })?;
    /// // SAFETY: `module` was just loaded; the name is NUL-terminated.
    /// check("cuModuleGetFunction", unsafe {
    ///     sys::cuModuleGetFunction(&mut function, module, c"wait_ns".as_ptr())
    /// })?;
    /// let launch = KernelLaunch::new(function, &[200_000]).writes_stamps(true);
    /// // SAFETY: `wait_ns` is of this context's module, never unloaded while
    /// // the context lives; it takes (block, ns), both 64-bit, and writes only
    /// // the block's stamps.
    /// let wait = unsafe { context.register_kernel(launch) };
    ///
    /// let (mut tracker, queue) = context.retiring_tracker(Config::default())?;
    /// let index = queue.reserve().unwrap();
    /// let acquired = tracker.acquire(Request::packet(index).barrier(true).timed(true)).unwrap();
    /// queue.publish(acquired.publication, wait.work()).unwrap();
    /// queue.synchronize()?;
    /// let stamps = tracker.timestamps(&acquired.ticket).unwrap().unwrap();
    /// assert!(stamps.ticks() >= 200_000); // %globaltimer nanoseconds
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub unsafe fn register_kernel(&self, kernel: KernelLaunch) -> KernelHandle {
        self.registry.register(kernel)
    }

    /// Bytes of pinned host memory this context holds.
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
    /// let before = context.pinned_bytes();
    /// let memory = CudaMemory::with_batch(&context, 1);
    /// memory.allocate(1, Placement::Host, &mut Vec::new()).unwrap(); // one block
    /// assert!(context.pinned_bytes() >= before + SignalBlock::SIZE);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn pinned_bytes(&self) -> usize {
        self.arena.bytes()
    }

    pub(crate) fn allocate_pinned(&self, bytes: usize) -> Result<Pinned> {
        self.bind()?;
        self.arena.allocate(bytes)
    }

    pub(crate) fn kernels(&self) -> &Kernels {
        &self.kernels
    }

    pub(crate) fn wakes(&self) -> &Wakes {
        &self.wakes
    }

    /// What the context's wake signals did: the queue layer's sleeping
    /// waits sleep on them, woken by a host function the driver runs when
    /// the stream reached their completion.
    ///
    /// ```no_run
    /// let context = sigretire_cuda::CudaContext::new(0)?;
    /// assert_eq!(context.wake_stats().sleeps, 0);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn wake_stats(&self) -> WakeStats {
        self.wakes.stats()
    }

    /// The launch a queue's `Work::Kernel(handle)` names, if registered.
    pub(crate) fn launch(&self, handle: u64) -> Option<KernelLaunch> {
        self.registry.get(handle)
    }

    /// A stream went away with work still pending on it.
    pub(crate) fn note_undrained(&self) {
        self.undrained.store(true, Ordering::Release);
    }

    /// Leaves a fence behind everything enqueued on `stream` so far, which
    /// the context waits for before freeing its pinned memory.
    ///
    /// # Safety
    /// The context is bound to this thread and `stream` is a live stream of
    /// it.
    pub(crate) unsafe fn fence_drain(&self, stream: CUstream) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.drains.fence(stream) }
    }
}

impl fmt::Debug for CudaContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaContext")
            .field("ordinal", &self.info.ordinal)
            .field("name", &self.info.name)
            .finish_non_exhaustive()
    }
}

impl Drop for CudaContext {
    fn drop(&mut self) {
        // Restore whatever context the thread had once done.
        // SAFETY: the context is still retained.
        if unsafe { sys::cuCtxPushCurrent_v2(self.raw) } == sys::CUresult::CUDA_SUCCESS {
            // Adopted streams may still be running the library's last
            // operations (their queues did not wait): wait for their fences,
            // bounded as an owned stream's drain is.
            // SAFETY: the context is bound (pushed above).
            let adopted_drained = unsafe { self.drains.wait_all(DRAIN_TIMEOUT) };
            if adopted_drained && !self.undrained.load(Ordering::Acquire) {
                // SAFETY: every queue is gone (each held a clone) and either
                // drained its owned stream or left a fence that has now
                // completed, so no launch of the library is pending and no
                // stream writes pinned memory; the context is bound.
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
