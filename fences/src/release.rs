//! Deferred release: a value handed to a queue with the queue position
//! whose completion frees it ([`Command::release_after`],
//! [`HostQueue::release_after_all`]), dropped once the queue layer has
//! proven that position retired.
//!
//! This is what a kernel-argument ring, a staging pool or a caching
//! allocator sits on: a block may be reused only once the GPU work that
//! reads it is done. PyTorch's caching allocator records a CUDA event per
//! freed block and queries each, in order, on every allocation; here the
//! proof that retires a whole batch (one load of its fence, or none) frees
//! every value released against it, with **no memory read per value**:
//!
//! - registering reads host memory only (the list's settled positions, the
//!   command's settled cell, the tracker's host-side knowledge), and drops
//!   the value at once when its position is already known done;
//! - the values wait in one queue per hardware queue, in position order
//!   (amortised O(1): an append, and a pop when fired), bounded by the work
//!   in flight: a value's batch is completed at the batch limit
//!   ([`BatchLimits`](crate::BatchLimits)), by a synchronize, an event
//!   synchronize, or a future or callback on a later position; a release
//!   never closes a batch by itself, so releasing costs the stream nothing;
//! - they are dropped in queue order by the thread that completed the
//!   batch (usually the completion thread), after its locks are let go: a
//!   value's `Drop` should be short (return a block to a free list) and
//!   must not use its own queue (release, submit, wait): it may run where
//!   that queue's batch is being completed.
//!
//! A failed batch frees its values too (nothing at or before a failed fence
//! still runs). A batch released by the device error state does not (the
//! GPU may still read them): they are kept until the queue is torn down.
//! Values still held when the queue is torn down are dropped then.

// Under loom only the watch list is built: the queue-facing half needs
// weak references, which the modelled `Arc` lacks.
#![cfg_attr(sigretire_loom, allow(unused_imports, dead_code))]

use crate::command::Command;
use crate::publish::QueueTracker;
use crate::queue::HostQueue;
use crate::status::CommandStatus;
use sigretire_tracker::{Status, backend::SignalMemory};

impl<M: SignalMemory> Command<M> {
    /// Drops `value` once this command is proven retired: at once if that
    /// is already known (no memory read), else when its batch completes
    /// (see the `release` module: no read per value, in queue order).
    ///
    /// ```
    /// use sigretire_queue::sim::SimPlatform;
    /// use std::sync::{Arc, atomic::{AtomicBool, Ordering}};
    ///
    /// struct Block(Arc<AtomicBool>);
    /// impl Drop for Block {
    ///     fn drop(&mut self) { self.0.store(true, Ordering::Release) }
    /// }
    ///
    /// let platform = SimPlatform::stepped();
    /// let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// let freed = Arc::new(AtomicBool::new(false));
    /// let command = queue.launch_empty()?; // reads the block
    /// command.release_after(Block(freed.clone()));
    /// platform.sim().run_until_idle(); // the GPU ran it...
    /// assert!(!freed.load(Ordering::Acquire)); // ...but nobody proved it yet
    /// platform.run_while(|| queue.synchronize())?; // the batch's proof
    /// assert!(freed.load(Ordering::Acquire));
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn release_after<V: Send + 'static>(&self, value: V) {
        let settled = matches!(
            self.settled_status(),
            CommandStatus::Complete | CommandStatus::Failed
        );
        match self.watch_link().and_then(|link| link.upgrade()) {
            Some(queue) => {
                let known = settled
                    || matches!(
                        queue.known(&self.ticket()),
                        Some(Status::Complete | Status::Failed)
                    );
                queue.watchers().release(self.seq(), known, Box::new(value));
            }
            // The queue is gone: its last batch completed, so the command
            // is settled, unless the queue was torn down without seeing it
            // done; then nothing proves the GPU is done with the value, and
            // it is never dropped.
            None => match self.status() {
                CommandStatus::Complete | CommandStatus::Failed => drop(value),
                _ => core::mem::forget(value),
            },
        }
    }
}

#[cfg(not(sigretire_loom))]
impl<T: QueueTracker> HostQueue<T> {
    /// Drops `value` once everything this queue published so far is proven
    /// retired (the newest command's position; at once if nothing was
    /// published or everything is known done). Work enqueued on the
    /// hardware queue by others is not covered.
    ///
    /// ```
    /// use sigretire_queue::sim::SimPlatform;
    /// let platform = SimPlatform::stepped();
    /// let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// queue.launch_empty()?;
    /// queue.launch_empty()?;
    /// queue.release_after_all(vec![0u8; 4096]); // a staging buffer both read
    /// assert_eq!(queue.values_held(), 1);
    /// platform.run_while(|| queue.synchronize())?;
    /// assert_eq!(queue.values_held(), 0);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn release_after_all<V: Send + 'static>(&self, value: V) {
        let completion = self.completion();
        let progress = completion.submission().progress();
        let seq = progress.submitted();
        let known = seq == 0 || progress.synced_through() >= seq;
        completion.watchers().release(seq, known, Box::new(value));
    }

    /// How many released values the queue still holds (their work not yet
    /// proven retired).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// assert_eq!(device.default_queue().values_held(), 0);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn values_held(&self) -> usize {
        self.completion().watchers().pending().1
    }

    /// How many futures and callbacks wait on the queue's positions (a
    /// dropped future leaves none behind).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// assert_eq!(device.default_queue().watches_pending(), 0);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn watches_pending(&self) -> usize {
        self.completion().watchers().pending().0
    }
}
