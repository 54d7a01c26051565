//! A CUDA stream as the tracker's hardware queue.

use crate::context::CudaContext;
use crate::error::{Error, Result};
use crate::ops::{self, MemOp, encode, plan, progress_after};
use crate::order::{Admission, AlreadyPublished, Reorder};
use crate::pinned::Pinned;
use crate::relay::WakeRelay;
use crate::stream::Stream;
use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use cudarc::driver::sys::{CUstream, CUstreamBatchMemOpParams};
use parking_lot::Mutex;
use sigretire_tracker::{
    Work,
    backend::{HardwareQueue, Publication, QueueError, QueueView},
};
use std::sync::Arc;

/// A stream that accepts the tracker's work.
///
/// **Indices.** A stream has no packet ring, so [`reserve`](HardwareQueue::reserve)
/// just hands out consecutive indices (it is never full), and
/// [`publish`](HardwareQueue::publish) enqueues in index order (a
/// publication that arrives early waits for the earlier ones): work, then the
/// completion write, then the progress write.
///
/// **Every use is a fence.** A stream runs its work in order, so when a use's
/// completion lands, every earlier use's has. Callers should publish with
/// `barrier: true` (the argument is otherwise ignored: nothing on a stream
/// can overtake) and tell the tracker so with `Request::barrier(true)`; then
/// one load of the newest completed use retires everything before it.
///
/// **The read index.** A stream has none, so the queue makes one: each
/// publication's last memory operation writes `index + 1` into a progress
/// word in pinned host memory, after (in stream order, behind the driver's
/// memory barrier) its completion write. [`read_index`](QueueView::read_index)
/// is one cached host load of that word. It is the tracker's read index with
/// the same meaning and the same limit: it only *nominates* the newest fence
/// below it, and the tracker confirms with one load of that fence's signal
/// before retiring anything ("the read index is never trusted alone"). Here
/// the nomination is almost always right, since the word is written after
/// the completion, but the tracker does not rely on that: a progress word
/// seen ahead of its completion (or one corrupted) costs a wasted probe,
/// never a false retirement.
///
/// **Failure.** A driver error while enqueueing fails the queue for good, as
/// a queue error does on AQL: the failing call's [`QueueError::Failed`] names
/// the error, later calls refuse, and [`failure`](CudaQueue::failure) tells
/// from which index on no completion will be written. Work enqueued before
/// the failure still runs and completes, so its uses retire normally (the
/// progress word and the signals keep working): the queue layer should call
/// `fail_submission` for the uses from that index on, *not* `fail_queue`
/// (which would re-arm signals the stream is still going to write), then move
/// to a new queue with `note_queue_change`. Only when [`health`](CudaQueue::health)
/// reports a lost context is `fail_queue` right: then nothing runs any more.
///
/// **Adopted streams.** A queue from [`CudaContext::adopt_stream`] (or
/// [`adopt_stream_with`](CudaContext::adopt_stream_with),
/// [`adopt_cudarc_stream`](CudaContext::adopt_cudarc_stream)) publishes on a
/// stream a CUDA runtime owns and launches its own work on: the runtime
/// keeps its kernels, libraries and copies, publishes a [`Work::Marker`]
/// after them, and gets completion, events and synchronize from the library.
/// Everything above holds unchanged; in addition each publication first asks
/// whether the stream is being captured into a graph, and dropping the last
/// clone never destroys the stream (see `adopt_stream`).
///
/// ```no_run
/// use sigretire_cuda::{CudaContext, CudaMemory};
/// use std::sync::Arc;
/// use sigretire_tracker::backend::HardwareQueue;
/// use sigretire_tracker::{Config, Request, RetiringTracker, Status, Tracker, Work};
///
/// let context = CudaContext::new(0)?;
/// let queue = context.create_queue()?;
/// let memory = Arc::new(CudaMemory::new(&context));
/// let mut tracker = RetiringTracker::new(memory, queue.clone(), Config::default())?;
/// let mut tickets = Vec::new();
/// for _ in 0..64 {
///     let index = queue.reserve().unwrap();
///     let acquired = tracker.acquire(Request::packet(index).barrier(true)).unwrap();
///     queue.publish(acquired.publication, Work::Empty).unwrap();
///     tickets.push(acquired.ticket);
/// }
/// queue.synchronize()?;
/// tracker.poll(); // one host load of the newest use retires all 64
/// assert_eq!(tracker.stats().host().loads, 1);
/// assert!(tickets.iter().all(|t| tracker.known_status(t).unwrap() == Some(Status::Complete)));
/// # Ok::<(), sigretire_cuda::Error>(())
/// ```
#[derive(Clone)]
pub struct CudaQueue {
    inner: Arc<QueueInner>,
}

struct QueueInner {
    context: Arc<CudaContext>,
    stream: Stream,
    /// The progress word: `index + 1` of the newest publication whose
    /// completion was written.
    progress: Pinned,
    /// The next index `reserve` hands out.
    reserved: AtomicU64,
    /// Mirrors `publisher.failure.is_some()`, for `reserve` without the lock.
    failed: AtomicBool,
    /// Work enqueued on the stream that no publication made (the queue's
    /// own untracked launches, or what a runtime announced with
    /// [`CudaQueue::note_foreign_work`]) may follow every index below this
    /// one: `reserved` when it was enqueued, an upper bound of what was
    /// enqueued before it. 0: none.
    foreign_below: AtomicU64,
    publisher: Mutex<Publisher>,
}

/// What `publish` needs under its lock: the order, the queue's failure, and
/// buffers reused by every publication (no allocation in steady state).
struct Publisher {
    order: Reorder<Parked>,
    plan: Vec<MemOp>,
    params: Vec<CUstreamBatchMemOpParams>,
    failure: Option<QueueFailure>,
    /// Where wakes' host functions run: made with the queue, so that the
    /// first wait that sleeps creates no stream.
    relay: WakeRelay,
}

/// A publication parked until the index before it is published.
enum Parked {
    Work {
        work: OwnedWork,
        completion: u64,
    },
    /// A rejected publication: its index is consumed, nothing is enqueued.
    Nothing,
}

enum OwnedWork {
    Empty,
    Marker,
    Kernel(u64),
    Wait(Vec<u64>),
}

impl OwnedWork {
    fn from_work(work: Work<'_>) -> Self {
        match work {
            Work::Empty => OwnedWork::Empty,
            Work::Marker => OwnedWork::Marker,
            Work::Kernel(handle) => OwnedWork::Kernel(handle),
            Work::Wait(dependencies) => OwnedWork::Wait(dependencies.to_vec()),
            // Refused before anything is parked (`reject`).
            Work::WaitAny(_) | Work::Dispatch(_) | Work::WaitValue(_) => OwnedWork::Marker,
        }
    }

    fn as_work(&self) -> Work<'_> {
        match self {
            OwnedWork::Empty => Work::Empty,
            OwnedWork::Marker => Work::Marker,
            OwnedWork::Kernel(handle) => Work::Kernel(*handle),
            OwnedWork::Wait(dependencies) => Work::Wait(dependencies),
        }
    }
}

/// Why a queue stopped accepting work.
///
/// ```
/// use sigretire_cuda::{Error, QueueFailure};
/// use cudarc::driver::sys::CUresult;
///
/// let failure = QueueFailure {
///     index: 7,
///     error: Error::Driver { call: "cuStreamBatchMemOp_v2", code: CUresult::CUDA_ERROR_INVALID_VALUE },
/// };
/// let text = failure.to_string();
/// assert!(text.contains("no completion is written from index 7 on"));
/// assert!(text.contains("cuStreamBatchMemOp_v2"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "publication {index} failed ({error}); no completion is written from index {index} on: \
     fail those uses' submissions and move to a new queue"
)]
pub struct QueueFailure {
    /// The first index whose completion will never be written.
    pub index: u64,
    /// The driver error.
    pub error: Error,
}

impl CudaQueue {
    /// A queue on a new stream of its own.
    pub(crate) fn new(context: &Arc<CudaContext>) -> Result<Self> {
        Self::on(context, Stream::new(context)?)
    }

    /// A queue on `stream`, owned or adopted.
    pub(crate) fn on(context: &Arc<CudaContext>, stream: Stream) -> Result<Self> {
        let progress = context.allocate_pinned(8)?;
        Ok(Self {
            inner: Arc::new(QueueInner {
                context: context.clone(),
                stream,
                progress,
                reserved: AtomicU64::new(0),
                failed: AtomicBool::new(false),
                foreign_below: AtomicU64::new(0),
                publisher: Mutex::new(Publisher {
                    order: Reorder::new(0),
                    plan: Vec::with_capacity(8),
                    params: Vec::with_capacity(8),
                    failure: None,
                    relay: WakeRelay::new(context)?,
                }),
            }),
        })
    }

    /// The context the stream belongs to.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// let queue = context.create_queue()?;
    /// assert_eq!(queue.context().as_raw(), context.as_raw());
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.inner.context
    }

    /// The raw stream, for native CUDA calls on it.
    ///
    /// **Work enqueued through it must be announced.** The queue layer
    /// answers a synchronize, a query or a cross-queue wait from the newest
    /// completion it published, which proves nothing about work it did not
    /// publish. Call [`note_foreign_work`](Self::note_foreign_work) after
    /// enqueuing anything through the raw handle (a kernel, a copy, a
    /// `cuStreamWaitEvent`), or adopt the stream instead, whose every
    /// answer assumes work of the runtime's own may follow. Calls that
    /// enqueue nothing that waits or runs (`cuEventRecord`, queries) need
    /// no notice.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// let (first, second) = (context.create_queue()?, context.create_queue()?);
    /// assert!(!first.as_raw().is_null());
    /// assert_ne!(first.as_raw(), second.as_raw()); // each queue owns its stream
    /// // Clones share it.
    /// assert_eq!(first.clone().as_raw(), first.as_raw());
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn as_raw(&self) -> CUstream {
        self.inner.stream.raw()
    }

    /// Whether the stream is a runtime's, adopted
    /// ([`CudaContext::adopt_stream`] and its siblings), rather than the
    /// queue's own ([`CudaContext::create_queue`]). An adopted stream is
    /// never destroyed by the queue, and each publication on it first asks
    /// the driver whether it is being captured into a graph
    /// ([`Error::StreamCapturing`]).
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// assert!(!context.create_queue()?.is_adopted());
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn is_adopted(&self) -> bool {
        self.inner.stream.is_adopted()
    }

    /// Tells the queue that work it did not publish was just enqueued on
    /// its stream (through [`as_raw`](Self::as_raw)): until a later
    /// publication completes, no completion published before counts as
    /// proof that the stream is idle ([`HardwareQueue::foreign_work_after`]).
    /// One atomic store; the queue's own untracked launches announce
    /// themselves. Adopted streams need no notice: every answer there
    /// already assumes the runtime's work may follow.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_tracker::backend::{HardwareQueue, Publication};
    /// use sigretire_tracker::Work;
    ///
    /// let queue = context.create_queue()?;
    /// let index = queue.reserve().unwrap();
    /// queue.publish(Publication::unsignalled(index, true), Work::Marker).unwrap();
    /// assert!(!queue.foreign_work_after(index));
    /// queue.note_foreign_work(); // say, a kernel launched on queue.as_raw()
    /// assert!(queue.foreign_work_after(index));
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn note_foreign_work(&self) {
        let reserved = self.inner.reserved.load(Ordering::Acquire);
        self.inner
            .foreign_below
            .fetch_max(reserved, Ordering::AcqRel);
    }

    /// Blocks until everything published so far has run
    /// (`cuStreamSynchronize`). On an adopted stream that includes the
    /// runtime's own work enqueued before the call, from any thread.
    ///
    /// ```
    /// # use sigretire_tracker::backend::Publication;
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_tracker::backend::{HardwareQueue, QueueView};
    /// use sigretire_tracker::Work;
    ///
    /// let queue = context.create_queue()?;
    /// let index = queue.reserve().unwrap();
    /// queue.publish(Publication::unsignalled(index, true), Work::Empty).unwrap();
    /// queue.synchronize()?;
    /// assert_eq!(queue.read_index(), index + 1); // its progress write has landed
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn synchronize(&self) -> Result<()> {
        self.inner.context.bind()?;
        self.inner.stream.synchronize()
    }

    /// Whether everything published so far has run (`cuStreamQuery`). On an
    /// adopted stream, the runtime's own work counts too.
    ///
    /// ```
    /// # use sigretire_tracker::backend::Publication;
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_tracker::backend::HardwareQueue;
    /// use sigretire_tracker::Work;
    ///
    /// let queue = context.create_queue()?;
    /// assert!(queue.is_idle()?);
    /// let index = queue.reserve().unwrap();
    /// queue.publish(Publication::unsignalled(index, true), Work::Empty).unwrap();
    /// queue.synchronize()?;
    /// assert!(queue.is_idle()?); // everything published has run
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn is_idle(&self) -> Result<bool> {
        self.inner.context.bind()?;
        self.inner.stream.is_idle()
    }

    /// `Ok` while the stream can run work; the driver's error once the
    /// context is lost (then [`Error::is_context_lost`] is true and no
    /// published work will complete).
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// let queue = context.create_queue()?;
    /// queue.launch_empty()?;
    /// assert_eq!(queue.health(), Ok(()));
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn health(&self) -> Result<()> {
        self.is_idle().map(|_| ())
    }

    /// Why the queue stopped accepting work, if it did.
    ///
    /// ```
    /// # use sigretire_tracker::backend::Publication;
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_tracker::backend::HardwareQueue;
    /// use sigretire_tracker::Work;
    ///
    /// let queue = context.create_queue()?;
    /// let index = queue.reserve().unwrap();
    /// queue.publish(Publication::unsignalled(index, true), Work::Marker).unwrap();
    /// assert_eq!(queue.failure(), None); // only a driver error while enqueueing fails a queue
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn failure(&self) -> Option<QueueFailure> {
        self.inner.publisher.lock().failure.clone()
    }

    /// Indices handed out by `reserve` so far.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_tracker::backend::HardwareQueue;
    ///
    /// let queue = context.create_queue()?;
    /// let (first, second) = (queue.reserve().unwrap(), queue.reserve().unwrap());
    /// assert_eq!((first, second), (0, 1));
    /// assert_eq!(queue.reserved(), 2);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn reserved(&self) -> u64 {
        self.inner.reserved.load(Ordering::Acquire)
    }

    /// Indices enqueued (or consumed by a rejected publication) so far: the
    /// first index still waiting to be published.
    ///
    /// ```
    /// # use sigretire_tracker::backend::Publication;
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_tracker::backend::HardwareQueue;
    /// use sigretire_tracker::Work;
    ///
    /// let queue = context.create_queue()?;
    /// let index = queue.reserve().unwrap();
    /// queue.reserve().unwrap(); // reserved, not yet published
    /// queue.publish(Publication::unsignalled(index, true), Work::Marker).unwrap();
    /// assert_eq!((queue.reserved(), queue.published()), (2, 1));
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn published(&self) -> u64 {
        self.inner.publisher.lock().order.next()
    }

    /// Publications parked until an earlier index is published.
    ///
    /// ```
    /// # use sigretire_tracker::backend::Publication;
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_tracker::backend::HardwareQueue;
    /// use sigretire_tracker::Work;
    ///
    /// let queue = context.create_queue()?;
    /// let (first, second) = (queue.reserve().unwrap(), queue.reserve().unwrap());
    /// queue.publish(Publication::unsignalled(second, true), Work::Marker).unwrap(); // waits for `first`
    /// assert_eq!((queue.parked(), queue.published()), (1, 0));
    /// queue.publish(Publication::unsignalled(first, true), Work::Marker).unwrap(); // both go, in order
    /// assert_eq!((queue.parked(), queue.published()), (0, 2));
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn parked(&self) -> usize {
        self.inner.publisher.lock().order.parked()
    }

    /// Launches the empty kernel with no signal and no index: untracked
    /// work, for native baselines (an event recorded after it).
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_tracker::backend::QueueView;
    ///
    /// let queue = context.create_queue()?;
    /// queue.launch_empty()?;
    /// queue.synchronize()?;
    /// // Untracked: no index was used and no progress is written.
    /// assert_eq!((queue.reserved(), queue.read_index()), (0, 0));
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn launch_empty(&self) -> Result<()> {
        let _ordered = self.inner.publisher.lock();
        self.inner.context.bind()?;
        self.inner.stream.refuse_capture()?;
        let kernels = self.inner.context.kernels();
        // Announced before it is enqueued, as any untracked work.
        self.note_foreign_work();
        self.inner.stream.launch_empty(kernels.empty, &[0, 0, 0])
    }

    fn progress(&self) -> &AtomicU64 {
        // SAFETY: 8 bytes of a page-aligned pinned allocation that the
        // context's arena keeps alive while `inner.context` is held; the GPU
        // writes it only with 64-bit stream writes, the host only reads it.
        unsafe { AtomicU64::from_ptr(self.inner.progress.host.as_ptr().cast()) }
    }

    /// Why `work` cannot be published at all (nothing is enqueued for it).
    fn reject(&self, work: Work<'_>) -> Option<QueueError> {
        match work {
            Work::Kernel(handle) if handle != 0 && self.inner.context.launch(handle).is_none() => {
                Some(QueueError::Unsupported(format!(
                    "kernel handle {handle} was not registered on this queue's context \
                     (register it with CudaContext::register_kernel)"
                )))
            }
            Work::Dispatch(_) => Some(QueueError::Unsupported(
                "Work::Dispatch is an AQL kernel packet, which a CUDA stream cannot run: a CUDA \
                 runtime launches its own kernels (cuLaunchKernel, cuBLAS, copies) on its own \
                 stream, adopts that stream (CudaContext::adopt_stream, or adopt_cudarc_stream \
                 for a cudarc stream), and publishes a Work::Marker after them for completion, \
                 events and synchronize"
                    .into(),
            )),
            Work::WaitAny(_) => Some(QueueError::Unsupported(
                "a CUDA stream cannot wait for any one of several signals".into(),
            )),
            Work::WaitValue(_) => Some(QueueError::Unsupported(
                "value waits other than a signal's completion are not offered on CUDA: a \
                 runtime enqueues its own cuStreamWaitValue64 on its adopted stream \
                 (CudaContext::adopt_stream), then publishes a Work::Marker after it"
                    .into(),
            )),
            _ => None,
        }
    }

    /// Enqueues publication `index`: its work, then its memory operations.
    /// The context is bound and the publisher locked.
    fn enqueue(
        &self,
        publisher: &mut Publisher,
        index: u64,
        work: Work<'_>,
        completion: u64,
    ) -> Result<()> {
        let stream = &self.inner.stream;
        // A capture would take what follows into a graph instead of running
        // it (adopted streams only: nobody else enqueues on an owned one).
        stream.refuse_capture()?;
        let kernels = self.inner.context.kernels();
        let mut kernel_writes_stamps = false;
        let dependencies: &[u64] = match work {
            // Empty work without a completion signal has nothing to show,
            // and a marker needs no work at all: only the memory operations
            // (completion and progress) are written, in stream order.
            Work::Empty | Work::Kernel(0) if completion == 0 => &[],
            Work::Marker => &[],
            Work::Empty | Work::Kernel(0) => {
                // The empty kernel writes the completion and the progress
                // word itself, in the order the memory operations would
                // (kernel.rs): one launch, no `cuStreamBatchMemOp` after it.
                let progress = self.inner.progress.device;
                let args = [completion, progress, progress_after(index)];
                return stream.launch_empty(kernels.empty, &args);
            }
            Work::Kernel(handle) => {
                let Some(kernel) = self.inner.context.launch(handle) else {
                    unreachable!("rejected before admission")
                };
                // SAFETY: registered on this queue's context (the registry
                // is the context's), whose `register_kernel` contract says
                // the function is of a module still loaded there and takes
                // the block's address and then exactly its arguments.
                unsafe { stream.launch_registered(&kernel, completion)? };
                kernel_writes_stamps = kernel.stamps();
                &[]
            }
            Work::Wait(dependencies) => dependencies,
            Work::WaitAny(_) | Work::Dispatch(_) | Work::WaitValue(_) => {
                unreachable!("rejected before admission")
            }
        };
        let publication = ops::Publication {
            index,
            dependencies,
            completion,
            // Only a kernel writes stamps: a marker, a wait or a registered
            // kernel that writes none clears its signal's, so a timed use
            // never reports an earlier use's.
            clear_stamps: matches!(work, Work::Wait(_) | Work::Marker)
                || (matches!(work, Work::Kernel(_)) && !kernel_writes_stamps),
        };
        plan(publication, self.inner.progress.device, &mut publisher.plan);
        publisher.params.clear();
        publisher
            .params
            .extend(publisher.plan.iter().map(|&op| encode(op)));
        stream.memops(&mut publisher.params)?;
        let wakes = self.inner.context.wakes();
        if wakes.is_wake(completion) {
            // Wakes sleepers once the completion above is written, on the
            // relay's stream, so this one's later work does not wait for
            // the driver to run the host function (`relay.rs`).
            publisher.relay.relay(stream.raw(), wakes)?;
        }
        Ok(())
    }

    /// Records the queue's failure at `index`.
    fn fail(&self, publisher: &mut Publisher, index: u64, error: Error) -> QueueError {
        let failure = QueueFailure { index, error };
        let reported = QueueError::Failed(failure.to_string());
        publisher.failure = Some(failure);
        self.inner.failed.store(true, Ordering::Release);
        reported
    }
}

impl QueueView for CudaQueue {
    /// The progress word: `index + 1` of the newest publication whose
    /// completion the stream has written (one cached host load).
    fn read_index(&self) -> u64 {
        self.progress().load(Ordering::Acquire)
    }

    /// Always true: no HDP flush is ever needed. Signals are host memory,
    /// and commands reach the GPU through the driver, which orders its
    /// doorbell after the host's earlier stores.
    fn ring_in_device_memory(&self) -> bool {
        true
    }
}

impl HardwareQueue for CudaQueue {
    /// The next index. Never [`QueueError::Full`]: a stream has no ring.
    fn reserve(&self) -> Result<u64, QueueError> {
        if self.inner.failed.load(Ordering::Acquire) {
            return Err(self.failure().map_or_else(
                || QueueError::Failed("the queue failed".into()),
                |f| QueueError::Failed(f.to_string()),
            ));
        }
        Ok(self.inner.reserved.fetch_add(1, Ordering::AcqRel))
    }

    /// Enqueues `work` at the publication's index, then writes its
    /// completion signal to 0 and the progress word to `index + 1`.
    ///
    /// The barrier bit is moot: on a stream every use is a fence (the
    /// tracker's record of a fence can only be right). A use that several
    /// publications share (`Request::ops(n)`, one per
    /// [`Publication::operations`]) completes with the last of them only:
    /// the stream writes 0 rather than decrementing, and stream order makes
    /// the last one finish last.
    ///
    /// Errors: [`QueueError::Unsupported`] for an unreserved or already
    /// published index or an unregistered kernel (the index is consumed, the
    /// queue keeps working); [`QueueError::Failed`] for a driver error (the
    /// queue fails: see **Failure** in [`CudaQueue`]'s docs).
    fn publish(&self, publication: Publication, work: Work<'_>) -> Result<(), QueueError> {
        QueueError::check_single(&publication)?;
        let index = publication.index();
        let completion = if publication.is_last_operation() {
            publication.completion()
        } else {
            0
        };
        let reserved = self.reserved();
        if index >= reserved {
            return Err(QueueError::Unsupported(format!(
                "index {index} was not reserved (the next reserved index is {reserved})"
            )));
        }
        let rejection = self.reject(work);
        let mut publisher = self.inner.publisher.lock();
        if let Some(failure) = &publisher.failure {
            return Err(QueueError::Failed(failure.to_string()));
        }
        match publisher.order.admit(index) {
            Err(AlreadyPublished(index)) => {
                return Err(QueueError::Unsupported(format!(
                    "index {index} was already published"
                )));
            }
            Ok(Admission::Later) => {
                let parked = match rejection {
                    Some(_) => Parked::Nothing,
                    None => Parked::Work {
                        work: OwnedWork::from_work(work),
                        completion,
                    },
                };
                publisher.order.park(index, parked);
                return rejection.map_or(Ok(()), Err);
            }
            Ok(Admission::Now) => {}
        }
        let publisher = &mut *publisher;
        // Bound before anything is enqueued, this one or those parked behind it.
        if let Err(error) = self.inner.context.bind() {
            return Err(self.fail(publisher, index, error));
        }
        let outcome = match rejection {
            // The index is consumed, so later publications are not held up.
            Some(rejection) => Err(rejection),
            None => match self.enqueue(publisher, index, work, completion) {
                Ok(()) => Ok(()),
                Err(error) => return Err(self.fail(publisher, index, error)),
            },
        };
        publisher.order.advance();
        // Publications parked behind this one may go now. A failure here is
        // the queue's (recorded in `failure`), not this publication's.
        while let Some((ready, parked)) = publisher.order.take_ready() {
            let enqueued = match &parked {
                Parked::Nothing => Ok(()),
                Parked::Work { work, completion } => {
                    self.enqueue(publisher, ready, work.as_work(), *completion)
                }
            };
            publisher.order.advance();
            if let Err(error) = enqueued {
                self.fail(publisher, ready, error);
                break;
            }
        }
        outcome
    }

    /// On an adopted stream, always: the runtime launches work of its own
    /// on it, unannounced. On an owned one, if anyone else reserved an
    /// index since `newest`, or work the queue did not publish was
    /// enqueued after it ([`note_foreign_work`](Self::note_foreign_work),
    /// the queue's own untracked launches).
    /// The driver's answer (`cuStreamQuery`, which takes its lock: the
    /// queue layer asks only where work it did not publish may run, as on
    /// an adopted stream).
    fn idle(&self) -> Option<bool> {
        self.is_idle().ok()
    }

    /// On the queue's relay stream (`relay.rs`): a wait for `dependency`,
    /// the write of `wake`, and the host function waking its sleepers. The
    /// queue's own stream gets nothing. Refused (nothing enqueued) once the
    /// queue failed or where the driver refuses the wait.
    fn publish_wake_aside(&self, dependency: u64, wake: u64) -> Option<Result<(), QueueError>> {
        let publisher = self.inner.publisher.lock();
        if let Some(failure) = &publisher.failure {
            return Some(Err(QueueError::Failed(failure.to_string())));
        }
        if let Err(error) = self.inner.context.bind() {
            return Some(Err(QueueError::Failed(error.to_string())));
        }
        let wakes = self.inner.context.wakes();
        Some(match publisher.relay.wake_after(dependency, wake, wakes) {
            true => Ok(()),
            false => Err(QueueError::Failed(
                "the relay stream refused the wake's wait".into(),
            )),
        })
    }

    fn foreign_work_after(&self, newest: u64) -> bool {
        self.is_adopted()
            || self.inner.reserved.load(Ordering::Acquire) != newest.wrapping_add(1)
            || self.inner.foreign_below.load(Ordering::Acquire) > newest
    }
}

impl fmt::Debug for CudaQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaQueue")
            .field("reserved", &self.reserved())
            .field("read_index", &self.read_index())
            .field("failed", &self.inner.failed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Queues on a context's streams: a new stream of its own, or a runtime's,
/// adopted.
impl CudaContext {
    /// A new queue: a stream of this context (see [`CudaQueue`]).
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_tracker::backend::QueueView;
    /// let queue = context.create_queue()?;
    /// assert_eq!((queue.reserved(), queue.read_index()), (0, 0));
    /// assert!(queue.is_idle()?);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn create_queue(self: &Arc<Self>) -> Result<CudaQueue> {
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
    /// use sigretire_tracker::backend::HardwareQueue;
    /// use sigretire_tracker::{Config, Request, RetiringTracker, Status, Tracker, WaitPolicy, Work};
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
    pub unsafe fn adopt_stream(self: &Arc<Self>, stream: CUstream) -> Result<CudaQueue> {
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
        self: &Arc<Self>,
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
    /// use sigretire_tracker::backend::{HardwareQueue, Publication};
    /// use sigretire_tracker::Work;
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
        self: &Arc<Self>,
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
}
