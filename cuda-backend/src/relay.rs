//! The wake relay: where a wake signal's host function runs, so that it
//! holds up nothing of the queue's own.
//!
//! A stream holds everything enqueued after a host function until the
//! driver has run it (80-280 us of idle GPU per host function on an H200:
//! the benchmarks' example `host_function_stall`). So a publication that
//! completes a wake signal records an event on its stream, right behind its
//! memory operations, and the relay's own stream waits for that event and
//! runs the host function: the queue's stream goes on at once, and the
//! sleepers wake once the completion is written, as before.
//!
//! One event serves every wake: `cuStreamWaitEvent` waits for the record
//! made before it, and the queue's publisher lock orders each record with
//! its wait. The event is the driver's own, without timing (the cheapest
//! to record), owned by the relay, which a queue holds.
//!
//! Even that costs the queue's stream something: the wake's memory
//! operations and the record sit between its work and the next (about
//! 5 us of a stalled next kernel on an H200). So the queue layer's wakes
//! never go into the queue's stream: the relay's stream itself waits for
//! the awaited signal, completes the wake signal and runs the host function
//! ([`WakeRelay::wake_after`], the queue's
//! [`publish_wake_aside`](sigretire_tracker::backend::HardwareQueue::publish_wake_aside)).
//! Those waits run in the order they were enqueued, which the queue layer
//! knows (a sleeper behind another one's wait looks at its use between
//! sleeps).

use crate::context::CudaContext;
use crate::error::{Result, check};
use crate::ops::{MemOp, encode};
use crate::stream::Stream;
use crate::wake::Wakes;
use cudarc::driver::sys::{self, CUevent, CUevent_flags, CUstream};
use std::sync::Arc;

/// A queue's stream for its wakes' host functions, and the event that
/// hands each wake over to it. Made with the queue (a stream and an event
/// of the driver's: tens of microseconds once, none per wake).
#[derive(Debug)]
pub(crate) struct WakeRelay {
    stream: Stream,
    handed_over: HandOver,
}

/// The relay's event, destroyed with it.
#[derive(Debug)]
struct HandOver {
    raw: CUevent,
    context: Arc<CudaContext>,
}

// SAFETY: an event handle may be used from any thread on which its context
// is current; the relay uses it with the context bound, under the queue's
// publisher lock.
unsafe impl Send for HandOver {}
// SAFETY: as for `Send`.
unsafe impl Sync for HandOver {}

impl Drop for HandOver {
    fn drop(&mut self) {
        if self.context.bind().is_ok() {
            // SAFETY: the event is ours and destroyed once; a record still
            // pending is released by the driver once it completes.
            unsafe { sys::cuEventDestroy_v2(self.raw) };
        }
    }
}

impl WakeRelay {
    pub(crate) fn new(context: &Arc<CudaContext>) -> Result<Self> {
        let stream = Stream::new(context)?;
        let mut raw = core::ptr::null_mut();
        // SAFETY: `Stream::new` bound the context; `raw` is a live local.
        check("cuEventCreate", unsafe {
            sys::cuEventCreate(&mut raw, CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
        })?;
        Ok(Self {
            stream,
            handed_over: HandOver {
                raw,
                context: context.clone(),
            },
        })
    }

    /// Runs `wakes`' host function once everything enqueued on `from` so
    /// far has run, without holding up what `from` runs next. The context
    /// is bound; the caller holds the publisher lock of `from`'s queue.
    pub(crate) fn relay(&self, from: CUstream, wakes: &Wakes) -> Result<()> {
        // SAFETY: both handles are alive and of the bound context.
        check("cuEventRecord", unsafe {
            sys::cuEventRecord(self.handed_over.raw, from)
        })?;
        // SAFETY: as above; the wait is for the record just made.
        check("cuStreamWaitEvent", unsafe {
            sys::cuStreamWaitEvent(self.stream.raw(), self.handed_over.raw, 0)
        })?;
        self.wake_sleepers(wakes)
    }

    /// Completes the wake signal at `wake` (a device address) once the
    /// signal at `dependency` is 0, and then wakes `wakes`' sleepers, all
    /// on the relay's stream: the queue's own stream is not touched, so no
    /// work of it waits for any of this (a wait in it delayed the next
    /// kernel by about 5 us on an H200). The context is bound.
    ///
    /// `Ok(false)`: nothing was enqueued. `Ok(true)` once the wait and the
    /// write are, even where the host function then could not be: the
    /// signal still completes, and its sleeper, which looks at its use at
    /// least every error-check interval, finds the use done then.
    pub(crate) fn wake_after(&self, dependency: u64, wake: u64, wakes: &Wakes) -> bool {
        let mut params = [
            MemOp::WaitZero {
                address: dependency,
            },
            MemOp::Write {
                address: wake,
                value: 0,
            },
        ]
        .map(encode);
        if self.stream.memops(&mut params).is_err() {
            return false;
        }
        let _ = self.wake_sleepers(wakes);
        true
    }

    /// Enqueues the host function that wakes `wakes`' sleepers.
    fn wake_sleepers(&self, wakes: &Wakes) -> Result<()> {
        let (function, data) = wakes.host_function();
        // SAFETY: the relay's stream is live and of the bound context; the
        // driver calls `function` once with `data`, on its own thread.
        let enqueued = check("cuLaunchHostFunc", unsafe {
            sys::cuLaunchHostFunc(self.stream.raw(), Some(function), data)
        });
        if enqueued.is_err() {
            // SAFETY: not enqueued: the function will not run.
            unsafe { wakes.forget(data) };
        }
        enqueued
    }
}
