//! CUDA's own completion tracking, for measuring against: events, stream
//! and context synchronisation, through the same driver and context.
//!
//! A benchmark records a native [`Event`] where the tracker would acquire a
//! signal, and times `cuEventSynchronize` / `cuEventQuery` /
//! `cuEventElapsedTime` / `cuStreamSynchronize` / `cuCtxSynchronize` in the
//! same process, next to the tracker's own answers. [`SystemReport`] says on
//! what machine the figures were taken.
//!
//! ```no_run
//! use sigretire_cuda::{CudaContext, native::{Event, EventFlags, SystemReport}};
//!
//! let context = CudaContext::new(0)?;
//! let queue = context.create_queue()?;
//! let (start, end) = (Event::new(&context, EventFlags::default())?, Event::new(&context, EventFlags::default())?);
//! start.record(&queue)?;
//! queue.launch_empty()?;
//! end.record(&queue)?;
//! end.synchronize()?;
//! assert!(end.is_complete()?);
//! println!("empty kernel: {:?} on {}", end.elapsed_since(&start)?, SystemReport::of(&context));
//! # Ok::<(), sigretire_cuda::Error>(())
//! ```

use crate::context::CudaContext;
use crate::driver::kernel_module_version;
use crate::error::{Result, check};
use crate::queue::CudaQueue;
use crate::version::CudaVersion;
use core::fmt;
use cudarc::driver::sys::{self, CUevent, CUevent_flags};
use cudarc::driver::{DriverError, result};
use std::sync::Arc;
use std::time::Duration;

/// How an event is created.
///
/// ```
/// use sigretire_cuda::native::EventFlags;
///
/// // The cheapest event to record and query: no timestamps, spin on sync.
/// let cheap = EventFlags { timing: false, ..EventFlags::default() };
/// assert!(!cheap.timing && !cheap.blocking_sync);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventFlags {
    /// Record timestamps (`cuEventElapsedTime`); without them an event is
    /// cheaper to record and query (`CU_EVENT_DISABLE_TIMING`).
    pub timing: bool,
    /// Block in the kernel rather than spin in `cuEventSynchronize`
    /// (`CU_EVENT_BLOCKING_SYNC`, a blocking-sync event).
    pub blocking_sync: bool,
}

impl Default for EventFlags {
    /// Timing on, spinning synchronisation: `cudaEventDefault`.
    ///
    /// ```
    /// use sigretire_cuda::native::EventFlags;
    /// assert_eq!(EventFlags::default(), EventFlags { timing: true, blocking_sync: false });
    /// ```
    fn default() -> Self {
        Self {
            timing: true,
            blocking_sync: false,
        }
    }
}

impl EventFlags {
    fn bits(self) -> u32 {
        let mut bits = CUevent_flags::CU_EVENT_DEFAULT as u32;
        if !self.timing {
            bits |= CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        }
        if self.blocking_sync {
            bits |= CUevent_flags::CU_EVENT_BLOCKING_SYNC as u32;
        }
        bits
    }
}

/// A native CUDA event (`cuEventCreate`), destroyed on drop.
///
/// ```
/// # use sigretire_cuda::{CudaContext, Error};
/// # let context = match CudaContext::new(0) {
/// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
/// #     context => context?,
/// # };
/// use sigretire_cuda::native::{Event, EventFlags};
///
/// let queue = context.create_queue()?;
/// let event = Event::new(&context, EventFlags::default())?;
/// queue.launch_empty()?;
/// event.record(&queue)?; // completes once the launch before it has run
/// event.synchronize()?;
/// assert!(event.is_complete()?);
/// # Ok::<(), sigretire_cuda::Error>(())
/// ```
#[derive(Debug)]
pub struct Event {
    raw: CUevent,
    context: Arc<CudaContext>,
}

// SAFETY: an event handle may be used from any thread on which its context
// is current; every method binds it first.
unsafe impl Send for Event {}
// SAFETY: as for `Send`; the driver synchronises concurrent use of an event.
unsafe impl Sync for Event {}

impl Event {
    /// A new event of `context`.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_cuda::native::{Event, EventFlags};
    /// let event = Event::new(&context, EventFlags::default())?;
    /// assert!(event.is_complete()?); // an event never recorded counts as complete
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn new(context: &Arc<CudaContext>, flags: EventFlags) -> Result<Self> {
        context.bind()?;
        let mut raw = core::ptr::null_mut();
        // SAFETY: the context is bound; `raw` is a live local.
        check("cuEventCreate", unsafe {
            sys::cuEventCreate(&mut raw, flags.bits())
        })?;
        Ok(Self {
            raw,
            context: context.clone(),
        })
    }

    /// Records the event on `queue`'s stream (`cuEventRecord`): it completes
    /// when everything published before it has run.
    ///
    /// ```
    /// # use sigretire_tracker::Publication;
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use std::time::Duration;
    /// use sigretire_cuda::native::{Event, EventFlags};
    /// use sigretire_tracker::HardwareQueue;
    ///
    /// let queue = context.create_queue()?;
    /// let flag = context.host_flag()?;
    /// let spin = context.register_spin_kernel(&flag, Duration::from_secs(5));
    /// let index = queue.reserve().unwrap();
    /// queue.publish(Publication::unsignalled(index, true), spin.work()).unwrap();
    /// let event = Event::new(&context, EventFlags::default())?;
    /// event.record(&queue)?;
    /// assert!(!event.is_complete()?); // behind the spinning kernel
    /// flag.release();
    /// event.synchronize()?;
    /// assert!(event.is_complete()?);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn record(&self, queue: &CudaQueue) -> Result<()> {
        self.context.bind()?;
        // SAFETY: both handles are alive and of the bound context (a queue
        // of another context makes the driver return an error).
        check("cuEventRecord", unsafe {
            sys::cuEventRecord(self.raw, queue.as_raw())
        })
    }

    /// Makes `queue`'s stream wait, on the GPU, for the event's latest
    /// record (`cuStreamWaitEvent`); the queue may be of another device's
    /// context.
    ///
    /// ```
    /// # use sigretire_tracker::Publication;
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use std::time::Duration;
    /// use sigretire_cuda::native::{Event, EventFlags};
    /// use sigretire_tracker::HardwareQueue;
    ///
    /// let (producer, consumer) = (context.create_queue()?, context.create_queue()?);
    /// let flag = context.host_flag()?;
    /// let spin = context.register_spin_kernel(&flag, Duration::from_secs(5));
    /// let index = producer.reserve().unwrap();
    /// producer.publish(Publication::unsignalled(index, true), spin.work()).unwrap();
    /// let event = Event::new(&context, EventFlags::default())?;
    /// event.record(&producer)?;
    /// event.make_wait(&consumer)?;
    /// consumer.launch_empty()?;
    /// assert!(!consumer.is_idle()?, "behind the spinning kernel");
    /// flag.release();
    /// consumer.synchronize()?;
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn make_wait(&self, queue: &CudaQueue) -> Result<()> {
        queue.context().bind()?;
        // Work the queue did not publish: its completions before it no
        // longer prove the stream idle.
        queue.note_foreign_work();
        // SAFETY: both handles are alive; the stream's context is bound.
        check("cuStreamWaitEvent", unsafe {
            sys::cuStreamWaitEvent(queue.as_raw(), self.raw, 0)
        })
    }

    /// Blocks until the event completes (`cuEventSynchronize`).
    ///
    /// ```
    /// # use sigretire_tracker::Publication;
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use std::time::Duration;
    /// use sigretire_cuda::native::{Event, EventFlags};
    /// use sigretire_tracker::HardwareQueue;
    ///
    /// let queue = context.create_queue()?;
    /// let busy = context.register_busy_kernel(Duration::from_millis(1), 1);
    /// let index = queue.reserve().unwrap();
    /// queue.publish(Publication::unsignalled(index, true), busy.work()).unwrap();
    /// let event = Event::new(&context, EventFlags { blocking_sync: true, ..EventFlags::default() })?;
    /// event.record(&queue)?;
    /// event.synchronize()?; // sleeps in the driver rather than spinning
    /// assert!(queue.is_idle()?);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn synchronize(&self) -> Result<()> {
        self.context.bind()?;
        // SAFETY: the event is alive and its context bound.
        check("cuEventSynchronize", unsafe {
            sys::cuEventSynchronize(self.raw)
        })
    }

    /// Whether the event has completed (`cuEventQuery`; `NOT_READY` is
    /// `false`, not an error).
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_cuda::native::{Event, EventFlags};
    ///
    /// let queue = context.create_queue()?;
    /// let event = Event::new(&context, EventFlags::default())?;
    /// event.record(&queue)?; // nothing before it on the stream
    /// queue.synchronize()?;
    /// assert!(event.is_complete()?);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn is_complete(&self) -> Result<bool> {
        self.context.bind()?;
        // SAFETY: the event is alive and its context bound.
        match unsafe { sys::cuEventQuery(self.raw) } {
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            code => check("cuEventQuery", code).map(|()| true),
        }
    }

    /// GPU time from `start` to this event (`cuEventElapsedTime`, about
    /// 0.5 us resolution). Both must have completed and have timing on.
    ///
    /// ```
    /// # use sigretire_tracker::Publication;
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use std::time::Duration;
    /// use sigretire_cuda::native::{Event, EventFlags};
    /// use sigretire_tracker::HardwareQueue;
    ///
    /// let queue = context.create_queue()?;
    /// let busy = context.register_busy_kernel(Duration::from_millis(2), 1);
    /// let start = Event::new(&context, EventFlags::default())?;
    /// let end = Event::new(&context, EventFlags::default())?;
    /// start.record(&queue)?;
    /// let index = queue.reserve().unwrap();
    /// queue.publish(Publication::unsignalled(index, true), busy.work()).unwrap();
    /// end.record(&queue)?;
    /// end.synchronize()?;
    /// // Events keep their own clock; allow for its 0.5 us resolution and more.
    /// assert!(end.elapsed_since(&start)? >= Duration::from_millis(1));
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn elapsed_since(&self, start: &Event) -> Result<Duration> {
        self.context.bind()?;
        // cudarc's wrapper, which calls the entry point the build's CUDA
        // headers have (`cuEventElapsedTime` up to 12.x, only `_v2` from
        // 13.0 on): the headers are the program's choice, not this crate's.
        // SAFETY: both events are alive and of the bound context.
        let milliseconds = match unsafe { result::event::elapsed(start.raw, self.raw) } {
            Ok(milliseconds) => milliseconds,
            Err(DriverError(code)) => {
                return check("cuEventElapsedTime", code).map(|()| Duration::ZERO);
            }
        };
        Ok(Duration::from_secs_f64(
            f64::from(milliseconds.max(0.0)) / 1e3,
        ))
    }

    /// The raw event, for other native calls.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_cuda::native::{Event, EventFlags};
    /// let event = Event::new(&context, EventFlags::default())?;
    /// assert!(!event.as_raw().is_null());
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn as_raw(&self) -> CUevent {
        self.raw
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.context.bind().is_ok() {
            // SAFETY: the event is ours and destroyed once; a recorded event
            // still pending is released by the driver once it completes.
            unsafe { sys::cuEventDestroy_v2(self.raw) };
        }
    }
}

/// The machine a figure was measured on: device, driver, kernel module, and
/// the CUDA API this crate was built against.
///
/// ```
/// use sigretire_cuda::{CudaVersion, native::SystemReport};
///
/// let report = SystemReport {
///     device: "NVIDIA H200".into(),
///     compute_capability: (9, 0),
///     cuda_driver: CudaVersion::new(13, 0),
///     kernel_module: None,
///     built_against: CudaVersion::BUILT_AGAINST,
/// };
/// assert_eq!(
///     report.to_string(),
///     "NVIDIA H200 (compute 9.0), driver unknown (CUDA 13.0), built against CUDA 12.8"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SystemReport {
    /// The device's name (`NVIDIA H200`).
    pub device: String,
    /// Its compute capability.
    pub compute_capability: (u32, u32),
    /// The CUDA version the driver supports (`cuDriverGetVersion`).
    pub cuda_driver: CudaVersion,
    /// The NVIDIA kernel module's version (`580.159.04`), where readable.
    pub kernel_module: Option<String>,
    /// The CUDA headers this crate's bindings come from.
    pub built_against: CudaVersion,
}

impl SystemReport {
    /// The report for `context`'s device.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_cuda::native::SystemReport;
    /// let report = SystemReport::of(&context);
    /// assert_eq!(report.compute_capability, context.info().compute_capability);
    /// assert_eq!(report.kernel_module, sigretire_cuda::kernel_module_version());
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn of(context: &CudaContext) -> Self {
        let info = context.info();
        Self {
            device: info.name.clone(),
            compute_capability: info.compute_capability,
            cuda_driver: info.driver,
            kernel_module: kernel_module_version(),
            built_against: CudaVersion::BUILT_AGAINST,
        }
    }
}

impl fmt::Display for SystemReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (compute {}.{}), driver {} (CUDA {}), built against CUDA {}",
            self.device,
            self.compute_capability.0,
            self.compute_capability.1,
            self.kernel_module.as_deref().unwrap_or("unknown"),
            self.cuda_driver,
            self.built_against,
        )
    }
}

/// What a context's figures were measured on.
impl CudaContext {
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
    pub fn report(&self) -> SystemReport {
        SystemReport::of(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_flags_map_to_the_drivers_bits() {
        assert_eq!(EventFlags::default().bits(), 0);
        let cheap = EventFlags {
            timing: false,
            blocking_sync: false,
        };
        assert_eq!(cheap.bits(), 2);
        let blocking = EventFlags {
            timing: true,
            blocking_sync: true,
        };
        assert_eq!(blocking.bits(), 1);
    }

    #[test]
    fn a_report_reads_as_one_line() {
        let report = SystemReport {
            device: "NVIDIA H200".into(),
            compute_capability: (9, 0),
            cuda_driver: CudaVersion::new(13, 0),
            kernel_module: Some("580.159.04".into()),
            built_against: CudaVersion::BUILT_AGAINST,
        };
        assert_eq!(
            report.to_string(),
            "NVIDIA H200 (compute 9.0), driver 580.159.04 (CUDA 13.0), built against CUDA 12.8"
        );
    }
}
