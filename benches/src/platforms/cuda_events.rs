//! CUDA's own completion tracking, for measuring against: native events
//! (`cuEventCreate`), recorded where the tracker would acquire a signal and
//! synchronised, queried and timed next to the tracker's own answers in
//! the same process. The benchmarks' alone (moved here from the CUDA
//! backend, which ships only what a runtime uses).

use cudarc::driver::sys::{self, CUevent, CUevent_flags};
use cudarc::driver::{DriverError, result};
use sigretire_cuda::{CudaContext, CudaQueue, Result, check, cudarc};
use std::sync::Arc;
use std::time::Duration;

/// How an event is created.
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
    pub fn synchronize(&self) -> Result<()> {
        self.context.bind()?;
        // SAFETY: the event is alive and its context bound.
        check("cuEventSynchronize", unsafe {
            sys::cuEventSynchronize(self.raw)
        })
    }

    /// Whether the event has completed (`cuEventQuery`; `NOT_READY` is
    /// `false`, not an error).
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
}
