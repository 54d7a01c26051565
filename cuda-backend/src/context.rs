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
use crate::drain::Drains;
use crate::driver::initialize;
use crate::error::{Result, check};
use crate::kernel::{HostFlag, KernelHandle, Kernels, Launch, Registry, nanos};
use crate::memory::CudaMemory;
use crate::pinned::{Arena, Pinned};
use crate::queue::CudaQueue;
use crate::stream::{DRAIN_TIMEOUT, Stream};
use core::fmt;
use core::sync::atomic::{AtomicBool, Ordering};
use cudarc::driver::sys::{self, CUcontext, CUdevice, CUstream};
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
    /// Fences behind the library's work on adopted streams, waited for
    /// before the arena is freed.
    drains: Drains,
    /// Wake signals and their mailbox (`wake.rs`).
    wakes: crate::wake::Wakes,
    /// A stream was destroyed before its work drained (or an adopted one's
    /// fence could not be recorded): pinned memory may still be written, so
    /// it must not be freed.
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
                drains: Drains::default(),
                wakes: crate::wake::Wakes::default(),
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

    /// A queue on a stream the runtime created and owns, so that a CUDA
    /// runtime keeps launching its own work on its own stream
    /// (`cuLaunchKernel`, cuBLAS, copies, its own `cuStreamWaitValue64`s)
    /// and uses the library only for completion, events and synchronize.
    ///
    /// A stream runs in the order its driver calls were made, so a
    /// publication (a [`Work::Marker`](sigretire_tracker::Work::Marker): the
    /// completion and progress writes, stream memory operations and nothing
    /// else) lands after everything the runtime enqueued on the stream
    /// before the `publish` call: on the same thread, or on one the call is
    /// ordered after (by a lock, a channel, a join). Its signal completing
    /// therefore proves the runtime's work before it finished, and the
    /// tracker, the waiter and the queue layer work on it unchanged. The
    /// library's own work ([`Work::Empty`](sigretire_tracker::Work::Empty),
    /// registered kernels, GPU waits) runs on the stream too, in the same
    /// order. [`CudaQueue::synchronize`] and [`CudaQueue::is_idle`] see the
    /// runtime's work as well.
    ///
    /// **Never destroyed.** Dropping the last clone of the queue does not
    /// destroy the stream, synchronise it or wait for the runtime's work:
    /// it records a CUDA event behind the library's last operation on the
    /// stream and leaves it with the context. The queue frees nothing (its
    /// progress word and the signals belong to the context's pinned-memory
    /// arena), and the context, before it frees the arena, waits for every
    /// such event, as long as it waits for an owned stream to drain; one that
    /// does not complete in that time makes it keep the arena (leaked, not
    /// freed under a GPU that may still write it).
    ///
    /// **Graphs.** The stream must not be captured into a CUDA graph while
    /// the queue is in use: the library's writes would be captured instead of
    /// run, so no completion would land (and a launch of the graph would
    /// later write signals the tracker has since reused). A capture in
    /// progress is refused here, and every publication on an adopted stream
    /// first asks the driver (`cuStreamIsCapturing`, one call) and fails the
    /// queue with [`Error::StreamCapturing`](crate::Error::StreamCapturing)
    /// rather than enqueue into a capture; a capture begun on another thread
    /// between that question and the enqueue cannot be caught.
    ///
    /// # Errors
    /// [`Error::DefaultStream`](crate::Error::DefaultStream) for the null
    /// stream, `CU_STREAM_LEGACY` or `CU_STREAM_PER_THREAD`;
    /// [`Error::ForeignStream`](crate::Error::ForeignStream) for a stream
    /// of another context (`cuStreamGetCtx`); [`Error::StreamCapturing`](crate::Error::StreamCapturing)
    /// for a stream being captured; [`Error::Driver`](crate::Error::Driver)
    /// if the driver refuses those questions or the progress word's
    /// allocation. Never a panic.
    ///
    /// # Safety
    /// `stream` is null or a default-stream handle (both refused), or a live
    /// stream, of any context (another context's is refused), that the
    /// runtime does not destroy until every clone of the returned queue is
    /// dropped: the clones held by trackers, and by the queue layer's queues,
    /// which may let go of their last one later, on a thread of their own
    /// (then hand the stream's lifetime over with
    /// [`adopt_stream_with`](CudaContext::adopt_stream_with), or use
    /// [`adopt_cudarc_stream`](CudaContext::adopt_cudarc_stream)). Destroying
    /// it after that is sound even with the library's work still pending on
    /// it: CUDA runs a destroyed stream's work to completion, and the
    /// context waits for it as described above.
    ///
    /// ```no_run
    /// use cudarc::driver::sys;
    /// use sigretire_cuda::{CudaContext, CudaMemory, check};
    /// use sigretire_tracker::{
    ///     Config, HardwareQueue, Request, RetiringTracker, Status, Tracker, WaitPolicy, Work,
    /// };
    /// use std::{sync::Arc, time::Duration};
    ///
    /// let context = CudaContext::new(0)?;
    /// context.bind()?;
    /// // The runtime's own stream and buffer.
    /// let (mut stream, mut buffer) = (std::ptr::null_mut(), 0);
    /// // SAFETY: the context is bound; both outputs are live locals.
    /// unsafe {
    ///     let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
    ///     check("cuStreamCreate", sys::cuStreamCreate(&mut stream, flags))?;
    ///     check("cuMemAlloc", sys::cuMemAlloc_v2(&mut buffer, 1 << 20))?;
    /// }
    /// // SAFETY: a live stream, destroyed below only once the queue and the
    /// // tracker (which holds a clone of it) are gone.
    /// let queue = unsafe { context.adopt_stream(stream)? };
    /// let memory = Arc::new(CudaMemory::new(&context));
    /// let mut tracker = RetiringTracker::new(memory, queue.clone(), Config::default())?;
    ///
    /// // The runtime's work, enqueued by the runtime itself ...
    /// // SAFETY: `buffer` holds 1 MiB of device memory; the stream is live.
    /// check("cuMemsetD8Async", unsafe { sys::cuMemsetD8Async(buffer, 7, 1 << 20, stream) })?;
    /// // ... then the library's completion behind it.
    /// let index = queue.reserve()?;
    /// let done = tracker.acquire(Request::packet(index).barrier(true))?;
    /// queue.publish(done.publication, Work::Marker)?;
    /// let waited = tracker.waiter().wait(&done.ticket, Duration::from_secs(10), WaitPolicy::spin());
    /// assert_eq!(waited?, Status::Complete); // so the memset has finished too
    ///
    /// drop((tracker, queue)); // leaves the stream alone
    /// // SAFETY: no clone of the queue is left; the buffer's last user is done.
    /// unsafe {
    ///     check("cuMemFree", sys::cuMemFree_v2(buffer))?;
    ///     check("cuStreamDestroy", sys::cuStreamDestroy_v2(stream))?;
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// Refusals are typed, and need no live stream:
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// // SAFETY: the null stream is refused before any driver call.
    /// let refused = unsafe { context.adopt_stream(std::ptr::null_mut()) };
    /// assert!(matches!(refused, Err(Error::DefaultStream { handle: 0 })));
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub unsafe fn adopt_stream(&self, stream: CUstream) -> Result<CudaQueue> {
        // SAFETY: the caller's contract is `Stream::adopt`'s.
        let stream = unsafe { Stream::adopt(self, stream, None)? };
        CudaQueue::on(self, stream)
    }

    /// [`adopt_stream`](CudaContext::adopt_stream), handing the stream's
    /// lifetime to the queue: `keeper` (the runtime's own reference-counted
    /// stream object, or a guard whose `Drop` destroys the stream) is
    /// dropped once the last clone of the queue is gone, right after the
    /// queue has recorded its drain event, on the thread that drops that
    /// clone, with this context current. The runtime then need not know
    /// when that is, which the queue layer (dropping its last clone on a
    /// thread of its own) makes hard to know. If the adoption fails,
    /// `keeper` is dropped before this returns.
    ///
    /// # Safety
    /// `stream` is null or a default-stream handle (both refused), or a live
    /// stream that stays live until `keeper` is dropped (at the latest: the
    /// runtime may hold it longer). The runtime may keep using the stream's
    /// handle itself while it holds a clone of the queue, or anything that
    /// keeps one (a tracker, the queue layer's `Device` or `HostQueue`).
    ///
    /// ```no_run
    /// use cudarc::driver::sys;
    /// use sigretire_cuda::{CudaContext, check};
    ///
    /// /// The runtime's stream, destroyed when the library is done with it.
    /// struct OwnedStream(sys::CUstream);
    /// // SAFETY: a stream handle may be used from any thread.
    /// unsafe impl Send for OwnedStream {}
    /// impl Drop for OwnedStream {
    ///     fn drop(&mut self) {
    ///         // SAFETY: created below, destroyed once, here (the queue drops
    ///         // its keeper with the stream's context current).
    ///         unsafe { sys::cuStreamDestroy_v2(self.0) };
    ///     }
    /// }
    ///
    /// let context = CudaContext::new(0)?;
    /// context.bind()?;
    /// let mut stream = std::ptr::null_mut();
    /// // SAFETY: the context is bound; `stream` is a live local.
    /// check("cuStreamCreate", unsafe { sys::cuStreamCreate(&mut stream, 0) })?;
    /// // SAFETY: a live stream, destroyed only by the keeper.
    /// let queue = unsafe { context.adopt_stream_with(stream, OwnedStream(stream))? };
    /// assert!(queue.is_adopted());
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub unsafe fn adopt_stream_with<K: Send + 'static>(
        &self,
        stream: CUstream,
        keeper: K,
    ) -> Result<CudaQueue> {
        // SAFETY: the caller's contract is `Stream::adopt`'s: the stream is
        // live until the `Stream` drops its keeper, its last act.
        let stream = unsafe { Stream::adopt(self, stream, Some(Box::new(keeper)))? };
        CudaQueue::on(self, stream)
    }

    /// [`adopt_stream`](CudaContext::adopt_stream) for a stream of cudarc's
    /// safe API: the queue holds the `Arc`, so the stream lives (cudarc
    /// destroys a stream it created only when its last `Arc` goes) until the
    /// last clone of the queue is gone, and no `unsafe` is needed. The
    /// runtime may keep enqueueing on it through cudarc meanwhile, as the
    /// stream's other user. cudarc's default streams
    /// (`CudaContext::default_stream`, `per_thread_stream`) are refused
    /// ([`Error::DefaultStream`](crate::Error::DefaultStream)), and so is a
    /// stream of another context; cudarc's contexts are the device's primary
    /// context, as this one is.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_tracker::{HardwareQueue, Publication, Work};
    ///
    /// // The driver is there (`CudaContext::new` said so), so cudarc can open it.
    /// let runtime = cudarc::driver::CudaContext::new(0).expect("cudarc's context");
    /// let stream = runtime.new_stream().expect("a cudarc stream");
    /// let queue = context.adopt_cudarc_stream(stream.clone())?;
    /// assert_eq!(queue.as_raw(), stream.cu_stream());
    /// let index = queue.reserve().unwrap();
    /// queue.publish(Publication::unsignalled(index, true), Work::Marker).unwrap();
    /// queue.synchronize()?;
    /// // The default stream is no stream of the runtime's own.
    /// let refused = context.adopt_cudarc_stream(runtime.default_stream());
    /// assert!(matches!(refused, Err(Error::DefaultStream { handle: 0 })));
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn adopt_cudarc_stream(
        &self,
        stream: Arc<cudarc::driver::CudaStream>,
    ) -> Result<CudaQueue> {
        let raw = stream.cu_stream();
        // SAFETY: a `CudaStream`'s handle is null, a default-stream handle,
        // or a live stream for as long as the `CudaStream` lives (cudarc
        // destroys a stream it created only in `CudaStream`'s `Drop`, and
        // `wrap_borrowed_stream`'s caller promised as much for a borrowed
        // one); the keeper holds the `Arc` until the `Stream` is done.
        let stream = unsafe { Stream::adopt(self, raw, Some(Box::new(stream)))? };
        CudaQueue::on(self, stream)
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

    pub(crate) fn wakes(&self) -> &crate::wake::Wakes {
        &self.inner.wakes
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
    pub fn wake_stats(&self) -> crate::WakeStats {
        self.inner.wakes.stats()
    }

    pub(crate) fn launch(&self, handle: u64) -> Option<Launch> {
        self.inner.registry.get(handle)
    }

    /// A stream went away with work still pending on it.
    pub(crate) fn note_undrained(&self) {
        self.inner.undrained.store(true, Ordering::Release);
    }

    /// Leaves a fence behind everything enqueued on `stream` so far, which
    /// the context waits for before freeing its pinned memory.
    ///
    /// # Safety
    /// The context is bound to this thread and `stream` is a live stream of
    /// it.
    pub(crate) unsafe fn fence_drain(&self, stream: CUstream) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.drains.fence(stream) }
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
