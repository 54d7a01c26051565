//! Drain fences: how the context learns that an adopted stream has run
//! everything the library enqueued on it, without owning the stream.
//!
//! An owned stream is drained when its queue goes (`stream.rs`). An adopted
//! stream is the runtime's: it may carry the runtime's own work for as long
//! as the runtime likes (work it enqueued before and after the queue was
//! dropped), and the queue must not block its owner on that. What the
//! library needs is narrower: nothing it frees may still be written by the
//! GPU. It frees nothing when a queue goes (the progress word and the
//! signals belong to the context's arena, freed only with the context), so
//! the queue's drop only records a CUDA event on the stream, a fence behind
//! the library's last memory operation there, and hands it to the context.
//! The context, before it frees the arena, waits (bounded) for every fence;
//! one that never completes makes it keep the arena rather than free memory
//! a stream may still write.
//!
//! Fences that have completed are destroyed whenever a new one is handed
//! over, so a context that adopts and drops many queues holds only the
//! fences still pending.

use crate::error::{Result, check};
use cudarc::driver::sys::{self, CUevent, CUresult, CUstream};
use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// How long the library waits for a stream's work before giving up on it:
/// dropping an owned stream drains it this long, and the context waits this
/// long for the fences of adopted ones. A stream still blocked after this
/// (a `cuStreamWaitValue64` nobody satisfies) is destroyed (or left) anyway,
/// and the context then keeps its pinned memory rather than free memory the
/// stream may still write.
pub(crate) const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// A recorded event marking the end of the library's work on one stream.
#[derive(Debug)]
struct Fence(CUevent);

// SAFETY: an event handle may be used from any thread on which its context
// is current; every use below happens with the context bound.
unsafe impl Send for Fence {}

/// Where a fence stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Pending,
    /// Complete, or failed: a failed query means the context is lost or the
    /// event unusable, and then nothing more runs that could write memory.
    Done,
}

impl Fence {
    /// # Safety
    /// The event's context is bound to this thread and the event not yet
    /// destroyed.
    unsafe fn state(&self) -> State {
        // SAFETY: the caller's contract.
        match unsafe { sys::cuEventQuery(self.0) } {
            CUresult::CUDA_ERROR_NOT_READY => State::Pending,
            _ => State::Done,
        }
    }

    /// # Safety
    /// As for [`Fence::state`]; the event is not used again.
    unsafe fn destroy(self) {
        // SAFETY: the caller's contract; a pending event is released by the
        // driver once it completes.
        unsafe { sys::cuEventDestroy_v2(self.0) };
    }
}

/// The context's pending fences.
#[derive(Debug, Default)]
pub(crate) struct Drains {
    pending: Mutex<Vec<Fence>>,
}

impl Drains {
    /// Records a fence on `stream`, behind everything enqueued on it so far,
    /// and keeps it; destroys the fences that have completed meanwhile.
    ///
    /// # Safety
    /// The context that owns `self` is bound to this thread and `stream` is
    /// a live stream of it.
    pub(crate) unsafe fn fence(&self, stream: CUstream) -> Result<()> {
        let mut event = core::ptr::null_mut();
        // SAFETY: the context is bound (caller); `event` is a live local.
        check("cuEventCreate", unsafe {
            sys::cuEventCreate(
                &mut event,
                sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32,
            )
        })?;
        let fence = Fence(event);
        // SAFETY: `stream` is live and of the bound context (caller), and so
        // is the event just created.
        if let Err(error) = check("cuEventRecord", unsafe {
            sys::cuEventRecord(event, stream)
        }) {
            // SAFETY: created above, never recorded, not used again.
            unsafe { fence.destroy() };
            return Err(error);
        }
        let mut pending = self.pending.lock();
        let mut kept = Vec::with_capacity(pending.len() + 1);
        for old in pending.drain(..) {
            // SAFETY: the context is bound; each fence is destroyed once,
            // here or in `wait_all`, after being taken out of the list.
            match unsafe { old.state() } {
                State::Pending => kept.push(old),
                // SAFETY: as above.
                State::Done => unsafe { old.destroy() },
            }
        }
        kept.push(fence);
        *pending = kept;
        Ok(())
    }

    /// Waits until every fence has completed, or `timeout` has passed;
    /// destroys them all either way. True if all completed.
    ///
    /// # Safety
    /// The owning context is bound to this thread.
    pub(crate) unsafe fn wait_all(&self, timeout: Duration) -> bool {
        let fences = core::mem::take(&mut *self.pending.lock());
        let deadline = Instant::now() + timeout;
        let mut drained = true;
        for fence in fences {
            // SAFETY: the context is bound (caller); the fence is not yet
            // destroyed.
            while drained && unsafe { fence.state() } == State::Pending {
                if Instant::now() >= deadline {
                    drained = false;
                } else {
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
            // SAFETY: taken out of the list above, destroyed once.
            unsafe { fence.destroy() };
        }
        drained
    }

    /// Fences still kept (pending when last looked at).
    #[cfg(test)]
    pub(crate) fn kept(&self) -> usize {
        self.pending.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_fences_is_drained_at_once_without_a_driver_call() {
        let drains = Drains::default();
        assert_eq!(drains.kept(), 0);
        // SAFETY: with no fence kept, no driver call is made.
        assert!(unsafe { drains.wait_all(Duration::ZERO) });
    }
}
