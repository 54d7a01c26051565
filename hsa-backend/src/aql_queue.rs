//! An AQL queue: creation with profiling, slot reservation, packet
//! publication in HSA order with the doorbell, the read index, queue errors,
//! and a teardown that drains within a bound, then destroys.

use crate::agent::Agent;
use crate::error::Error;
use crate::packet;
use crate::teardown::{Kind, QueueRecord, Release};
use crate::visibility::store_fence;
use crate::wait::system_ticks;
use hsa_sys::*;
use sigretire_tracker::{
    Work,
    backend::{HardwareQueue, Publication, QueueError, QueueView},
};
use std::ffi::c_void;
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How [`AqlQueue::new`] makes a queue.
///
/// ```
/// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
/// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
/// use sigretire_hsa::{AqlQueue, QueueOptions};
/// use std::time::Duration;
/// use sigretire_tracker::backend::QueueView;
///
/// let options = QueueOptions {
///     size: 1024,
///     ring_in_device_memory: true, // this runtime configured ROCr so
///     drain_timeout: Duration::from_millis(100),
///     ..QueueOptions::default()
/// };
/// let queue = AqlQueue::new(&device, options)?;
/// assert!(queue.is_profiled() && queue.ring_in_device_memory());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueOptions {
    /// Ring size in packets: a power of two within the device's
    /// [`queue_size_limits`](Agent::queue_size_limits).
    pub size: u32,
    /// The packet processor writes start and end timestamps into completion
    /// signals (`hsa_amd_profiling_set_profiler_enabled`).
    pub profiling: bool,
    /// Whether ROCr put the ring in VRAM. ROCr does not say; a runtime that
    /// knows (it configured ROCr so) may set it, and the tracker then skips
    /// the HDP flush before publishing, as the packets reach the ring through
    /// the same BAR after the signal stores. `false` is always safe.
    pub ring_in_device_memory: bool,
    /// How long dropping the last handle waits for the queue's work to finish
    /// before destroying it anyway (0: destroy at once).
    pub drain_timeout: Duration,
}

impl Default for QueueOptions {
    /// 4096 packets, profiled, ring assumed in system memory, 1 s drain.
    fn default() -> Self {
        Self {
            size: 4096,
            profiling: true,
            ring_in_device_memory: false,
            drain_timeout: Duration::from_secs(1),
        }
    }
}

/// How [`AqlQueue::adopt`] takes over a queue the runtime created.
///
/// ```
/// use sigretire_hsa::AdoptOptions;
/// let options = AdoptOptions { ring_in_device_memory: false, ..AdoptOptions::default() };
/// assert!(options.profiling);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdoptOptions {
    /// Enable profiling on the queue
    /// (`hsa_amd_profiling_set_profiler_enabled`; harmless if the runtime
    /// already did), so the tracker may ask for timestamps. `false` leaves
    /// the queue as it is and the tracker asks for none.
    pub profiling: bool,
    /// Whether the ring is in VRAM, as for [`QueueOptions::ring_in_device_memory`].
    pub ring_in_device_memory: bool,
    /// How long dropping the last handle waits for the packets published so
    /// far to finish. Unless they are known finished then, memory the
    /// backend releases that they name waits for one of the queue's fences
    /// to be seen complete, or for the runtime to shut down, as the
    /// runtime's queue may still run them (0: never wait, so always that).
    pub drain_timeout: Duration,
}

impl Default for AdoptOptions {
    /// Profiled, ring assumed in system memory, 1 s drain.
    fn default() -> Self {
        Self {
            profiling: true,
            ring_in_device_memory: false,
            drain_timeout: Duration::from_secs(1),
        }
    }
}

/// Where ROCr reports asynchronous queue errors (its event thread calls
/// [`on_queue_error`] with this as `data`).
#[derive(Debug, Default)]
struct ErrorCell {
    /// The first error status, 0 while none.
    status: AtomicU32,
}

/// `hsa_queue_create`'s callback: records the first error. Runs on ROCr's
/// event thread, so it only stores an atomic (and cannot unwind).
unsafe extern "C" fn on_queue_error(
    status: hsa_status_t,
    _queue: *mut hsa_queue_t,
    data: *mut c_void,
) {
    // SAFETY: `data` is the `ErrorCell` of `QueueInner::errors`, which stays
    // alive until after hsa_queue_destroy returns (no callback after that).
    let cell = unsafe { &*data.cast::<ErrorCell>() };
    cell.record(status);
}

impl ErrorCell {
    /// Keeps the first error (a 0 status counts as a generic error).
    fn record(&self, status: hsa_status_t) {
        let _ = self
            .status
            .compare_exchange(0, status.max(1), Ordering::AcqRel, Ordering::Acquire);
    }
}

/// An AQL queue on one GPU: the tracker's [`QueueView`] and the queue
/// layer's [`HardwareQueue`]. Cheap to clone; the queue is destroyed when
/// the last clone goes.
///
/// ```
/// # use sigretire_tracker::backend::Publication;
/// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
/// use sigretire_hsa::{AqlQueue, QueueOptions, Runtime};
/// use sigretire_tracker::backend::HardwareQueue;
/// use sigretire_tracker::Work;
///
/// let device = Runtime::load_from(standin.library_path())?.device(0)?;
/// let queue = AqlQueue::new(&device, QueueOptions::default())?;
/// let index = queue.reserve()?;
/// queue.publish(Publication::unsignalled(index, true), Work::Empty)?; // a barrier-AND, then the doorbell
/// queue.drain(std::time::Duration::from_secs(10))?;
/// assert_eq!(queue.read_index(), 2); // the packet and the drain's barrier
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct AqlQueue {
    inner: Arc<QueueInner>,
}

struct QueueInner {
    device: Agent,
    queue: NonNull<hsa_queue_t>,
    ring: NonNull<AqlSlot>,
    size: u32,
    doorbell: hsa_signal_t,
    id: u64,
    options: QueueOptions,
    /// Shared with ROCr's callback (as a raw `Arc`) until the queue is gone.
    errors: Arc<ErrorCell>,
    /// Store fences publication executed.
    store_fences: AtomicU64,
    /// Made by [`AqlQueue::new`] (destroyed with the last handle), not
    /// adopted from the runtime (never destroyed here).
    owned: bool,
    /// What the runtime's teardown knows of the queue: which pools' signals
    /// its packets named (see `teardown.rs`).
    record: Arc<QueueRecord>,
}

// SAFETY: the queue descriptor and ring belong to ROCr and stay mapped until
// `hsa_queue_destroy` in `Drop`; the backend touches them only through
// atomics (`write_dispatch_id`, the ring's `AqlSlot` words) and ROCr calls,
// which are thread-safe. The other fields are plain values or `Sync`.
unsafe impl Send for QueueInner {}
// SAFETY: as above.
unsafe impl Sync for QueueInner {}

impl fmt::Debug for AqlQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AqlQueue")
            .field("id", &self.inner.id)
            .field("size", &self.inner.size)
            .field("read_index", &self.read_index())
            .field("write_index", &self.write_index())
            .finish()
    }
}

impl AqlQueue {
    /// Creates a queue on `device` (`hsa_queue_create`, multi-producer) and
    /// enables profiling if asked.
    ///
    /// # Errors
    /// [`Error::InvalidQueueSize`]; [`Error::Call`] if ROCr refuses the queue
    /// or profiling, or answers a queue without a usable ring. Whatever was
    /// made by then is destroyed again.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// use sigretire_hsa::{AqlQueue, Error, QueueOptions, Runtime};
    ///
    /// let device = Runtime::load_from(standin.library_path())?.device(0)?;
    /// let queue = AqlQueue::new(&device, QueueOptions { size: 256, ..QueueOptions::default() })?;
    /// assert_eq!(queue.size(), 256);
    /// let odd = AqlQueue::new(&device, QueueOptions { size: 100, ..QueueOptions::default() });
    /// assert!(matches!(odd, Err(Error::InvalidQueueSize { size: 100, .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(device: &Agent, options: QueueOptions) -> Result<Self, Error> {
        let (min, max) = device.queue_size_limits();
        if !options.size.is_power_of_two() || options.size > max {
            return Err(Error::InvalidQueueSize {
                size: options.size,
                min,
                max,
            });
        }
        let api = device.api();
        let errors = Arc::new(ErrorCell::default());
        let data = Arc::into_raw(errors.clone()).cast_mut().cast::<c_void>();
        let teardown = &device.runtime().teardown;
        let record = teardown.queue_created(api);
        // Undoes the creation: destroys the queue, if there is one, then
        // takes back `data` and balances `queue_created`.
        let abandon = |queue: Option<NonNull<hsa_queue_t>>, error: Error| {
            if let Some(queue) = queue {
                // SAFETY: a live queue of this runtime that nobody else has
                // seen; nothing was published on it.
                unsafe { api.hsa_queue_destroy(queue.as_ptr()) };
            }
            // SAFETY: no queue exists (any more), and ROCr calls no callback
            // after hsa_queue_destroy returned, so ROCr holds no copy of the
            // reference `Arc::into_raw` made.
            drop(unsafe { Arc::from_raw(data.cast::<ErrorCell>()) });
            teardown.queue_gone(api, &record);
            error
        };
        let unusable = |text: &str| Error::Call {
            call: "hsa_queue_create",
            status: StatusError::new(HSA_STATUS_ERROR).with_runtime_text(text),
        };
        let mut queue: *mut hsa_queue_t = std::ptr::null_mut();
        // SAFETY: the runtime is initialised; `device.agent()` is a GPU that
        // runs dispatches; the callback only touches `data`, an `ErrorCell`
        // kept alive until after destruction; u32::MAX segment sizes mean
        // "no hint"; `queue` is a place for the pointer.
        let status = unsafe {
            api.hsa_queue_create(
                device.agent(),
                options.size,
                HSA_QUEUE_TYPE_MULTI,
                Some(on_queue_error),
                data,
                u32::MAX,
                u32::MAX,
                &raw mut queue,
            )
        };
        if let Err(error) = device.check("hsa_queue_create", status) {
            return Err(abandon(None, error));
        }
        let Some(queue) = NonNull::new(queue) else {
            return Err(abandon(None, unusable("it returned no queue")));
        };
        // SAFETY: ROCr returned a live descriptor; its fields are written
        // once at creation and read-only afterwards.
        let descriptor = unsafe { queue.as_ref() };
        let ring = match NonNull::new(descriptor.base_address.cast::<AqlSlot>()) {
            Some(ring) if ring.as_ptr().is_aligned() && descriptor.size.is_power_of_two() => ring,
            _ => {
                let text =
                    "the queue it returned has no 64-byte aligned ring of a power-of-two size";
                return Err(abandon(Some(queue), unusable(text)));
            }
        };
        if options.profiling {
            // SAFETY: a live queue of this runtime.
            let status = unsafe { api.hsa_amd_profiling_set_profiler_enabled(queue.as_ptr(), 1) };
            if let Err(error) = device.check("hsa_amd_profiling_set_profiler_enabled", status) {
                return Err(abandon(Some(queue), error));
            }
        }
        Ok(AqlQueue {
            inner: Arc::new(QueueInner {
                device: device.clone(),
                queue,
                ring,
                size: descriptor.size,
                doorbell: descriptor.doorbell_signal,
                id: descriptor.id,
                options,
                errors,
                store_fences: AtomicU64::new(0),
                owned: true,
                record,
            }),
        })
    }

    /// Takes over a queue the runtime created itself (`hsa_queue_create`),
    /// so the tracker and the queue layer can publish on it beside the
    /// runtime's own packets. The queue stays the runtime's: dropping the
    /// last handle drains what the backend published (within
    /// [`AdoptOptions::drain_timeout`]) but never destroys it. ROCr reports
    /// the queue's errors to the callback the runtime registered, not to
    /// the backend: forward them with [`AqlQueue::report_error`].
    ///
    /// Reservation is a compare-and-swap on the write index, so other
    /// producers may reserve beside the backend with ROCr's own
    /// `hsa_queue_add_write_index_*` or `_cas_write_index_*` (on a
    /// multi-producer queue); the packets between the tracker's own do not
    /// disturb it: a barrier bit orders everything before it.
    ///
    /// # Safety
    /// `queue` is a live queue of `device`'s agent, made by this runtime
    /// (the same loaded library), and stays live (the runtime does not
    /// destroy it) until the last clone of the returned handle is dropped;
    /// producers other than the backend reserve slots atomically and
    /// publish every slot they reserve.
    ///
    /// # Errors
    /// [`Error::InvalidQueue`] for a null queue or one without a usable
    /// ring; [`Error::Call`] if ROCr refuses to enable profiling.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// use hsa_sys::{HSA_QUEUE_TYPE_MULTI, hsa_queue_t};
    /// use sigretire_hsa::{AdoptOptions, AqlQueue, Runtime};
    /// use sigretire_tracker::backend::{HardwareQueue, Publication};
    /// use sigretire_tracker::Work;
    ///
    /// let device = Runtime::load_from(standin.library_path())?.device(0)?;
    /// // The runtime makes its own queue.
    /// let mut raw: *mut hsa_queue_t = std::ptr::null_mut();
    /// // SAFETY: a GPU agent of an initialised runtime; no callback.
    /// let status = unsafe {
    ///     device.runtime().api().hsa_queue_create(device.agent(), 256, HSA_QUEUE_TYPE_MULTI, None,
    ///         std::ptr::null_mut(), u32::MAX, u32::MAX, &raw mut raw)
    /// };
    /// assert_eq!(status, hsa_sys::HSA_STATUS_SUCCESS);
    /// // SAFETY: a live queue of this device, destroyed below after the handle.
    /// let queue = unsafe { AqlQueue::adopt(&device, raw, AdoptOptions::default())? };
    /// assert!(queue.is_adopted());
    /// let index = queue.reserve()?;
    /// queue.publish(Publication::unsignalled(index, true), Work::Empty)?;
    /// drop(queue); // drains; the queue stays the runtime's
    /// // SAFETY: the runtime's queue, no handle of the backend left.
    /// assert_eq!(unsafe { device.runtime().api().hsa_queue_destroy(raw) }, hsa_sys::HSA_STATUS_SUCCESS);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub unsafe fn adopt(
        device: &Agent,
        queue: *mut hsa_queue_t,
        options: AdoptOptions,
    ) -> Result<Self, Error> {
        let Some(queue) = NonNull::new(queue) else {
            return Err(Error::InvalidQueue("it is null"));
        };
        // SAFETY: the caller hands over a live descriptor; its fields are
        // written once at creation and read-only afterwards.
        let descriptor = unsafe { queue.as_ref() };
        let ring = match NonNull::new(descriptor.base_address.cast::<AqlSlot>()) {
            Some(ring) if ring.as_ptr().is_aligned() && descriptor.size.is_power_of_two() => ring,
            _ => {
                return Err(Error::InvalidQueue(
                    "it has no 64-byte aligned ring of a power-of-two size",
                ));
            }
        };
        let api = device.api();
        if options.profiling {
            // SAFETY: a live queue of this runtime (the caller's word).
            let status = unsafe { api.hsa_amd_profiling_set_profiler_enabled(queue.as_ptr(), 1) };
            device.check("hsa_amd_profiling_set_profiler_enabled", status)?;
        }
        // Recorded as live, so memory its packets name waits while the
        // queue may still run them (see `Drop`).
        let record = device.runtime().teardown.queue_created(api);
        Ok(AqlQueue {
            inner: Arc::new(QueueInner {
                device: device.clone(),
                queue,
                ring,
                size: descriptor.size,
                doorbell: descriptor.doorbell_signal,
                id: descriptor.id,
                options: QueueOptions {
                    size: descriptor.size,
                    profiling: options.profiling,
                    ring_in_device_memory: options.ring_in_device_memory,
                    drain_timeout: options.drain_timeout,
                },
                errors: Arc::new(ErrorCell::default()),
                store_fences: AtomicU64::new(0),
                owned: false,
                record,
            }),
        })
    }

    /// Whether the queue was adopted from the runtime ([`AqlQueue::adopt`])
    /// rather than made by [`AqlQueue::new`].
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// assert!(!sigretire_hsa::AqlQueue::new(&device, Default::default())?.is_adopted());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_adopted(&self) -> bool {
        !self.inner.owned
    }

    /// Records an error ROCr reported for the queue, as the callback
    /// `hsa_queue_create` registered received it: a runtime that adopted its
    /// queue forwards its callback's status here, and from then on the
    /// queue is failed for the backend ([`AqlQueue::error`]; reserving and
    /// publishing fail). The first error stays; `HSA_STATUS_SUCCESS` is
    /// taken as a generic error, as it cannot mean "no error" here.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// use hsa_sys::{HSA_STATUS_ERROR_EXCEPTION, HSA_STATUS_ERROR_INVALID_PACKET_FORMAT};
    /// use sigretire_tracker::backend::HardwareQueue;
    ///
    /// let queue = sigretire_hsa::AqlQueue::new(&device, Default::default())?;
    /// queue.report_error(HSA_STATUS_ERROR_EXCEPTION);
    /// queue.report_error(HSA_STATUS_ERROR_INVALID_PACKET_FORMAT);
    /// assert_eq!(queue.error().map(|e| e.status()), Some(HSA_STATUS_ERROR_EXCEPTION));
    /// assert!(queue.reserve().is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn report_error(&self, status: hsa_status_t) {
        self.inner.errors.record(status);
    }

    /// The device the queue runs on.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// let queue = sigretire_hsa::AqlQueue::new(&device, Default::default())?;
    /// assert_eq!(queue.device().agent(), device.agent());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn device(&self) -> &Agent {
        &self.inner.device
    }

    /// ROCr's queue (the address of its `amd_queue_t`), for ROCr calls the
    /// backend does not wrap. It stays valid while any clone of the queue
    /// lives.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// let queue = sigretire_hsa::AqlQueue::new(&device, Default::default())?;
    /// // SAFETY: the queue is live; ROCr's descriptor is read-only after creation.
    /// let descriptor = unsafe { &*queue.raw() };
    /// assert_eq!((descriptor.size, descriptor.id), (queue.size(), queue.id()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn raw(&self) -> *mut hsa_queue_t {
        self.inner.queue.as_ptr()
    }

    /// The queue id, unique in the process.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// let first = sigretire_hsa::AqlQueue::new(&device, Default::default())?;
    /// let second = sigretire_hsa::AqlQueue::new(&device, Default::default())?;
    /// assert_ne!(first.id(), second.id());
    /// assert_eq!(first.clone().id(), first.id(), "a clone is the same queue");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// Ring size in packets (ROCr may round the request up).
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// use sigretire_hsa::{AqlQueue, QueueOptions};
    /// let queue = AqlQueue::new(&device, QueueOptions { size: 4, ..QueueOptions::default() })?;
    /// assert_eq!(queue.size(), device.queue_size_limits().0, "rounded up to the smallest ROCr makes");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn size(&self) -> u32 {
        self.inner.size
    }

    /// Whether the packet processor writes timestamps.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// use sigretire_hsa::{AqlQueue, QueueOptions};
    /// assert!(AqlQueue::new(&device, QueueOptions::default())?.is_profiled());
    /// let plain = AqlQueue::new(&device, QueueOptions { profiling: false, ..QueueOptions::default() })?;
    /// assert!(!plain.is_profiled());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_profiled(&self) -> bool {
        self.inner.options.profiling
    }

    /// The first error ROCr reported for the queue (through the callback
    /// `hsa_queue_create` registered), if any. A failed queue runs nothing
    /// more: reserving and publishing on it fail.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// use hsa_sys::HSA_STATUS_ERROR_EXCEPTION;
    /// use sigretire_tracker::backend::HardwareQueue;
    ///
    /// let queue = sigretire_hsa::AqlQueue::new(&device, Default::default())?;
    /// assert_eq!(queue.error(), None);
    /// standin.queue(queue.raw()).fail(); // the stand-in's GPU fails the queue
    /// assert_eq!(queue.error().map(|e| e.status()), Some(HSA_STATUS_ERROR_EXCEPTION));
    /// assert!(queue.reserve().is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn error(&self) -> Option<StatusError> {
        self.inner.error()
    }

    /// The read index (`hsa_queue_load_read_index_scacquire`): packets below
    /// it were consumed, which says nothing about their completion.
    ///
    /// ```
    /// # use sigretire_tracker::backend::Publication;
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::stepped())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// use sigretire_hsa::{AqlQueue, QueueOptions};
    /// use sigretire_tracker::backend::HardwareQueue;
    /// use sigretire_tracker::Work;
    ///
    /// let options = QueueOptions { drain_timeout: std::time::Duration::ZERO, ..QueueOptions::default() };
    /// let queue = AqlQueue::new(&device, options)?;
    /// let index = queue.reserve()?;
    /// queue.publish(Publication::unsignalled(index, false), Work::Empty)?;
    /// assert_eq!(queue.read_index(), 0, "published, not yet consumed");
    /// let processor = standin.queue(queue.raw()); // the (stepped) packet processor
    /// processor.launch().unwrap();
    /// processor.advance_read_index().unwrap();
    /// assert_eq!(queue.read_index(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_index(&self) -> u64 {
        self.inner.read_index()
    }

    /// The write index: the next packet id a producer reserves.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// let queue = sigretire_hsa::AqlQueue::new(&device, Default::default())?;
    /// assert_eq!(queue.write_index(), 0);
    /// let index = queue.try_reserve()?;
    /// assert_eq!((index, queue.write_index()), (0, 1));
    /// # queue.publish_packet(sigretire_tracker::backend::Publication::unsignalled(index, false), sigretire_hsa::packet::barrier_and(&[], false, 0).unwrap())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_index(&self) -> u64 {
        self.inner.write_dispatch_id().load(Ordering::Acquire)
    }

    /// Reserves the next packet id, if its slot is free (the packet `size`
    /// ids back was consumed). Never blocks. Lock-free: a compare-and-swap on
    /// the write index, which other producers may race.
    ///
    /// A reserved id must be published ([`AqlQueue::publish_packet`]): the
    /// packet processor stops at the first unpublished slot.
    ///
    /// # Errors
    /// [`QueueError::Full`] while the ring is full; [`QueueError::Failed`] once
    /// the queue failed.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::stepped())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// use sigretire_hsa::{AqlQueue, QueueOptions, packet};
    /// use sigretire_tracker::backend::QueueError;
    ///
    /// let options = QueueOptions { size: 64, drain_timeout: std::time::Duration::ZERO, ..QueueOptions::default() };
    /// let queue = AqlQueue::new(&device, options)?;
    /// for _ in 0..64 {
    ///     let index = queue.try_reserve()?;
    ///     queue.publish_packet(sigretire_tracker::backend::Publication::unsignalled(index, false), packet::barrier_and(&[], false, 0).unwrap())?;
    /// }
    /// assert!(matches!(queue.try_reserve(), Err(QueueError::Full)), "nothing consumed yet");
    /// let processor = standin.queue(queue.raw());
    /// processor.launch().unwrap();
    /// processor.advance_read_index().unwrap();
    /// assert_eq!(queue.try_reserve()?, 64, "one slot free again");
    /// # queue.publish_packet(sigretire_tracker::backend::Publication::unsignalled(64, false), packet::barrier_and(&[], false, 0).unwrap())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_reserve(&self) -> Result<u64, QueueError> {
        self.inner.try_reserve()
    }

    /// Publishes a packet the caller built at the index `publication`
    /// names (reserved), in HSA order (docs/design.md section 2): the body,
    /// a store fence, the header by a release store, another store fence,
    /// then the doorbell (through `hsa_signal_store_screlease` on the
    /// doorbell signal). The packet's type and body are the caller's; its
    /// completion signal, barrier bit and memory scopes (system acquire and
    /// release) are set here from `publication`, so a packet completing a
    /// use is published as its tracker recorded it whatever the body said.
    /// The fences order write-combined stores to a ring in VRAM; both are
    /// executed and counted ([`AqlQueue::store_fences`]) for every ring.
    ///
    /// # Errors
    /// [`QueueError::Unsupported`] if the index is not reserved, or for a
    /// publication of several operations or of a copy-engine use;
    /// [`QueueError::Failed`] if the queue failed (the packet will not run).
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// use sigretire_hsa::{AqlQueue, packet};
    /// use sigretire_tracker::backend::Publication;
    ///
    /// let queue = AqlQueue::new(&device, Default::default())?;
    /// let index = queue.try_reserve()?;
    /// // The body claims no barrier bit; the publication's wins.
    /// let body = packet::barrier_and(&[], false, 0).unwrap();
    /// queue.publish_packet(Publication::unsignalled(index, true), body)?;
    /// assert_eq!(queue.store_fences(), 2, "body | header | doorbell");
    /// let later = Publication::unsignalled(index + 1, true);
    /// assert!(queue.publish_packet(later, body).is_err(), "not reserved");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn publish_packet(
        &self,
        publication: Publication,
        body: PacketWords,
    ) -> Result<(), QueueError> {
        QueueError::check_single(&publication)?;
        let packet = packet::with_publication(body, &publication);
        self.inner.publish_packet(publication.index(), packet)
    }

    /// Store fences executed by publication, two per packet (see
    /// [`AqlQueue::publish_packet`]); the drain's barriers count as well.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// let queue = sigretire_hsa::AqlQueue::new(&device, Default::default())?;
    /// assert_eq!(queue.store_fences(), 0);
    /// queue.drain(std::time::Duration::from_secs(10))?; // publishes one barrier
    /// assert_eq!(queue.store_fences(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn store_fences(&self) -> u64 {
        self.inner.store_fences.load(Ordering::Relaxed)
    }

    /// Waits until every packet published so far has completed, at most
    /// `timeout`: publishes a barrier-AND with the barrier bit that completes
    /// a signal ROCr creates for the purpose, and waits for it through ROCr.
    ///
    /// # Errors
    /// [`Error::TimedOut`] (the signal then lives until the barrier
    /// completed it or the queue is gone, as it may still complete it);
    /// [`Error::QueueFailed`] if the queue failed before or during the wait;
    /// [`Error::Call`] if ROCr cannot make the signal.
    ///
    /// ```
    /// # use sigretire_tracker::backend::Publication;
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// use sigretire_hsa::{AqlQueue, Error};
    /// use std::time::Duration;
    /// use sigretire_tracker::backend::HardwareQueue;
    /// use sigretire_tracker::Work;
    ///
    /// let queue = AqlQueue::new(&device, Default::default())?;
    /// let index = queue.reserve()?;
    /// queue.publish(Publication::unsignalled(index, false), Work::Empty)?;
    /// queue.drain(Duration::from_secs(10))?;
    /// assert!(queue.read_index() >= index + 1);
    ///
    /// standin.queue(queue.raw()).fail();
    /// assert!(matches!(queue.drain(Duration::from_secs(10)), Err(Error::QueueFailed(_))));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn drain(&self, timeout: Duration) -> Result<(), Error> {
        self.inner.drain(timeout)
    }
}

impl QueueInner {
    fn error(&self) -> Option<StatusError> {
        match self.errors.status.load(Ordering::Acquire) {
            0 => None,
            status => Some(match self.device.api().status_string(status) {
                Some(text) => StatusError::new(status).with_runtime_text(text),
                None => StatusError::new(status),
            }),
        }
    }

    fn failed(&self) -> Option<QueueError> {
        self.error()
            .map(|status| QueueError::Failed(status.to_string()))
    }

    fn read_index(&self) -> u64 {
        // SAFETY: a live queue of this runtime.
        unsafe {
            self.device
                .api()
                .hsa_queue_load_read_index_scacquire(self.queue.as_ptr())
        }
    }

    /// `amd_queue_t::write_dispatch_id`, the write index itself. ROCr's
    /// `hsa_queue_cas_write_index_scacq_screl` is a compare-and-swap on this
    /// very field; the backend does it directly, since the function table has
    /// no entry for it.
    fn write_dispatch_id(&self) -> &AtomicU64 {
        let block = self.queue.as_ptr().cast::<amd_queue_t>();
        // SAFETY: an `hsa_queue_t*` from ROCr is the first field of its
        // `amd_queue_t` (`amd_hsa_queue.h`), live until destruction; the field
        // is 8-byte aligned and every producer updates it atomically.
        unsafe { AtomicU64::from_ptr(&raw mut (*block).write_dispatch_id) }
    }

    fn slot(&self, index: u64) -> &AqlSlot {
        let offset = (index & u64::from(self.size - 1)) as usize;
        // SAFETY: the ring holds `size` 64-byte slots (ROCr's `base_address`,
        // 64-byte aligned) for as long as the queue lives, and slots are only
        // accessed through `AqlSlot`'s atomics.
        unsafe { &*self.ring.as_ptr().add(offset) }
    }

    fn try_reserve(&self) -> Result<u64, QueueError> {
        if let Some(failed) = self.failed() {
            return Err(failed);
        }
        let write = self.write_dispatch_id();
        let size = u64::from(self.size);
        let mut index = write.load(Ordering::Acquire);
        loop {
            if index.wrapping_sub(self.read_index()) >= size {
                return Err(QueueError::Full);
            }
            match write.compare_exchange_weak(index, index + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(index),
                Err(current) => index = current,
            }
        }
    }

    fn publish_packet(&self, index: u64, packet: PacketWords) -> Result<(), QueueError> {
        let write = self.write_dispatch_id().load(Ordering::Acquire);
        if index >= write || write - index > u64::from(self.size) {
            return Err(QueueError::Unsupported(format!(
                "packet id {index} is not reserved (write index {write})"
            )));
        }
        // Body, store fence, header (docs/design.md section 2), then another store
        // fence, so that a header still in a write-combining buffer reaches a
        // VRAM ring before the doorbell tells the packet processor to look.
        // Both are needed only for a ring in VRAM, which the backend cannot
        // verify (`ring_in_device_memory` is the caller's word), so it fences
        // every ring: a fence with no write-combined store pending is cheap.
        self.slot(index).publish_with(packet, || self.store_fence());
        self.store_fence();
        // SAFETY: the doorbell is the queue's own signal, live with it; its
        // value is the id of the packet just published.
        unsafe {
            self.device
                .api()
                .hsa_signal_store_screlease(self.doorbell, index as i64)
        };
        // Which pools the packet names, so none of them is freed while it
        // may run. After the doorbell: the caller holds what it names until
        // this returns.
        let runtime = self.device.runtime();
        runtime
            .teardown
            .record(runtime.api(), &self.record, index, &packet);
        match self.failed() {
            Some(failed) => Err(failed),
            None => Ok(()),
        }
    }

    fn store_fence(&self) {
        store_fence();
        self.store_fences.fetch_add(1, Ordering::Relaxed);
    }

    fn drain(&self, timeout: Duration) -> Result<(), Error> {
        let api = self.device.api();
        let start = Instant::now();
        let mut signal = hsa_signal_t::NULL;
        // SAFETY: the runtime is initialised; `signal` is a place for it.
        let status =
            unsafe { api.hsa_amd_signal_create(1, 0, std::ptr::null(), 0, &raw mut signal) };
        self.device.check("hsa_amd_signal_create", status)?;
        // The signal is released as a pool's memory is: at once if the
        // barrier completed (its signal below 1, failed included) or was
        // never published (a failed queue refuses it); else (a timeout, or a
        // queue that failed once the barrier was in it) once the barrier is
        // seen complete or the queue is gone.
        let teardown = &self.device.runtime().teardown;
        let owner = teardown.new_owner();
        teardown.register(owner, signal.handle, 64, Kind::Rocr);
        let outcome = self.drain_with(signal, start, timeout);
        teardown.owner_dropped(api, owner, vec![Release::Signal(signal)]);
        outcome
    }

    fn drain_with(
        &self,
        signal: hsa_signal_t,
        start: Instant,
        timeout: Duration,
    ) -> Result<(), Error> {
        let failed = |error: QueueError| {
            Error::QueueFailed(self.error().unwrap_or_else(|| {
                StatusError::new(HSA_STATUS_ERROR).with_runtime_text(error.to_string())
            }))
        };
        let index = loop {
            match self.try_reserve() {
                Ok(index) => break index,
                Err(QueueError::Full) if start.elapsed() < timeout => std::thread::yield_now(),
                Err(QueueError::Full) => return Err(Error::TimedOut(timeout)),
                Err(error) => return Err(failed(error)),
            }
        };
        let packet = packet::barrier_and(&[], true, signal.handle).expect("no dependencies");
        self.publish_packet(index, packet).map_err(failed)?;
        let api = self.device.api();
        loop {
            let left = timeout.saturating_sub(start.elapsed());
            // SAFETY: a live signal ROCr created.
            let value = unsafe {
                api.hsa_signal_wait_scacquire(
                    signal,
                    HSA_SIGNAL_CONDITION_LT,
                    1,
                    system_ticks(self.device.runtime(), left),
                    HSA_WAIT_STATE_BLOCKED,
                )
            };
            if value < 0 {
                return Err(failed(QueueError::Failed(
                    "the drain barrier failed".into(),
                )));
            }
            if value == 0 {
                return Ok(());
            }
            if start.elapsed() >= timeout {
                return Err(Error::TimedOut(timeout));
            }
        }
    }
}

impl Drop for QueueInner {
    /// The last handle is gone: drain within the bound (unless the queue
    /// failed, when nothing more will complete). A queue of the backend's
    /// own is then destroyed; an adopted one is left to the runtime, and
    /// counts as gone for the teardown only if its packets are known
    /// finished (drained, or failed), else memory its packets named keeps
    /// waiting, for one of its fences or the runtime's shutdown.
    fn drop(&mut self) {
        let failed = self.error().is_some();
        let drained = !failed
            && !self.options.drain_timeout.is_zero()
            && self.drain(self.options.drain_timeout).is_ok();
        let api = self.device.api();
        if self.owned {
            // SAFETY: the last handle is going, so nobody publishes any
            // more; the queue is live until this call.
            unsafe { api.hsa_queue_destroy(self.queue.as_ptr()) };
            // SAFETY: ROCr calls no callback after hsa_queue_destroy
            // returned, so the reference `new` gave it (`Arc::into_raw`) can
            // be taken back.
            drop(unsafe { Arc::from_raw(Arc::as_ptr(&self.errors)) });
        } else if !(failed || drained) {
            // The runtime's queue may still run packets naming the
            // backend's memory: its record stays while they name any (a
            // pool they named waits for one of its fences, or for the
            // runtime's shutdown).
            self.device.runtime().teardown.queue_lost(api, &self.record);
            return;
        }
        self.device.runtime().teardown.queue_gone(api, &self.record);
    }
}

impl QueueView for AqlQueue {
    fn read_index(&self) -> u64 {
        AqlQueue::read_index(self)
    }

    fn ring_in_device_memory(&self) -> bool {
        self.inner.options.ring_in_device_memory
    }
}

impl HardwareQueue for AqlQueue {
    fn reserve(&self) -> Result<u64, QueueError> {
        self.try_reserve()
    }

    /// Empty work and waits become barrier-AND (or -OR) packets, kernels
    /// dispatches, a value wait AMD's barrier-value packet
    /// ([`hsa_sys::aql_packet`]); then as [`AqlQueue::publish_packet`].
    fn publish(&self, publication: Publication, work: Work<'_>) -> Result<(), QueueError> {
        QueueError::check_single(&publication)?;
        let packet = hsa_sys::aql_packet(work, &publication)?;
        self.inner.publish_packet(publication.index(), packet)
    }

    /// From the write index, for a queue made here and an adopted one
    /// alike: the runtime reserves a slot before it writes a packet of its
    /// own, so a write index one past `newest` proves none followed.
    fn foreign_work_after(&self, newest: u64) -> bool {
        self.write_index() != newest.wrapping_add(1)
    }
}
