//! A runtime's `hsa_queue_t` under a stream, and the runtime's word for
//! when it may destroy it.
//!
//! The queue layer lets go of a stream's hardware queue when it is done
//! with it, which may be after every C handle is gone (a batch the
//! completion thread still completes, a teardown thread's drain). A
//! runtime that owns the `hsa_queue_t` cannot know when that is, so a
//! stream's queue carries the runtime's release callback: it runs once the
//! last user of the queue let go of it (after the adopted queue's drain),
//! and the runtime destroys the queue then, not before.

use crate::release::{Release, sigretire_release_callback};
use ::sigretire_tracker::{
    Work,
    backend::{HardwareQueue, Publication, QueueError, QueueView},
};
use sigretire_hsa::AqlQueue;
use std::ffi::c_void;
use std::sync::Arc;

/// An adopted ROCr queue and the runtime's callback for when the library
/// is done with it: the hardware queue of a ROCr stream.
#[derive(Clone)]
pub(crate) struct KeptQueue {
    /// First: dropped (the last clone drains) before the release runs.
    queue: AqlQueue,
    _release: Option<Arc<Release>>,
}

impl KeptQueue {
    /// `queue`, whose raw `hsa_queue_t` `raw` goes back to the runtime
    /// through `release` (if any) with `user`, once no clone is left.
    pub(crate) fn new(
        queue: AqlQueue,
        raw: *mut c_void,
        release: sigretire_release_callback,
        user: *mut c_void,
    ) -> Self {
        Self {
            queue,
            _release: Release::new(release, raw, user).map(Arc::new),
        }
    }

    /// The adopted queue.
    pub(crate) fn queue(&self) -> &AqlQueue {
        &self.queue
    }
}

impl QueueView for KeptQueue {
    fn read_index(&self) -> u64 {
        self.queue.read_index()
    }

    fn ring_in_device_memory(&self) -> bool {
        QueueView::ring_in_device_memory(&self.queue)
    }

    fn signal_domain(&self) -> Option<u64> {
        QueueView::signal_domain(&self.queue)
    }
}

impl HardwareQueue for KeptQueue {
    fn reserve(&self) -> Result<u64, QueueError> {
        HardwareQueue::reserve(&self.queue)
    }

    fn publish(&self, publication: Publication, work: Work<'_>) -> Result<(), QueueError> {
        HardwareQueue::publish(&self.queue, publication, work)
    }

    fn foreign_work_after(&self, newest: u64) -> bool {
        self.queue.foreign_work_after(newest)
    }

    fn idle(&self) -> Option<bool> {
        self.queue.idle()
    }
}
