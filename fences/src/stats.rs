//! Per-queue counters: exact, lock-free, so tests can assert which path a
//! call took (did synchronize take the lock? did a second thread join the
//! marker in flight?) and the example can report them.

use crate::sync::{AtomicU64, Ordering};
use sigretire_tracker::wait::WaitGauge;

macro_rules! counters {
    (
        $(#[$doc:meta])* $name:ident {
            $($(#[$fdoc:meta])* $field:ident,)*
        }
        $(#[$bdoc:meta])* $begun:ident,
        $(#[$idoc:meta])* $in_progress:ident,
    ) => {
        /// The live counters, updated with relaxed atomics, and the gauge of
        /// the synchronize marker waits.
        #[derive(Debug, Default)]
        pub(crate) struct Counters {
            $(pub(crate) $field: AtomicU64,)*
            /// The CPU waits for a synchronize marker (owner or joiner).
            pub(crate) sync_waits: WaitGauge,
        }

        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $($(#[$fdoc])* pub $field: u64,)*
            $(#[$bdoc])* pub $begun: u64,
            $(#[$idoc])* pub $in_progress: u64,
        }

        impl Counters {
            pub(crate) fn snapshot(&self) -> $name {
                $name {
                    $($field: self.$field.load(Ordering::Relaxed),)*
                    $begun: self.sync_waits.begun(),
                    $in_progress: self.sync_waits.in_progress(),
                }
            }
        }
    };
}

counters! {
    /// A snapshot of a queue's counters ([`HostQueue::stats`](crate::HostQueue::stats)).
    ///
    /// ```
    /// let stats = sigretire_queue::QueueStats::default();
    /// assert_eq!(stats.lock_acquisitions, 0);
    /// ```
    QueueStats {
        /// Times the execution lock was taken.
        lock_acquisitions,
        /// Packets published with a completion signal (commands, markers,
        /// event markers, cross-queue waits).
        commands,
        /// Of those, markers (synchronize, event record, GPU-waiter markers).
        markers,
        /// Markers not published because the newest command's completion
        /// stood for them: an event recorded, a synchronize or a cross-queue
        /// wait right after a command, on a queue that runs only what it
        /// publishes.
        shared_completions,
        /// Empty packets without a completion signal, published because the
        /// tracker refused a signal after the slot was reserved.
        empty_packets,
        /// Times a submission waited, outside the lock, for the use the
        /// tracker named under back-pressure.
        backpressure_waits,
        /// Times a submission found the hardware ring full and retried.
        ring_full_retries,
        /// Synchronizes that found a marker in flight and waited on it.
        marker_joins,
        /// Synchronizes that returned without taking the lock (a completed
        /// marker covered everything submitted).
        syncs_without_lock,
        /// Synchronizes whose last command was already done: no marker sent.
        syncs_inline,
        /// Synchronizes that sent their batch to the completion thread.
        syncs_by_handler,
        /// Queue-state resets after a completed marker (the tracker was told
        /// the queue drained).
        state_resets,
        /// Resets skipped because work was submitted after the marker.
        state_resets_skipped,
        /// Times the timing of a completed batch was processed.
        timing_passes,
        /// Batches closed by the batch limit.
        batches_closed,
        /// Batches completed (by any thread).
        batches_completed,
        /// Of those, completed by a thread holding an execution lock (of
        /// any queue): 0 unless a caller synchronizes inside another
        /// queue's [`HostQueue::with_tracker`](crate::HostQueue::with_tracker),
        /// as the layer completes every batch (a synchronize marker's
        /// included) after the lock is released.
        batches_completed_under_lock,
        /// Of those, by the completion thread.
        handler_batches,
        /// Times the completion thread slept (up to 1 ms each) on one of
        /// the queue's wake signals, woken as a batch's fence completed,
        /// instead of polling it.
        handler_sleeps,
        /// Event synchronizes that returned without taking the lock.
        event_syncs_without_lock,
        /// Barrier-AND packets published for cross-queue waits.
        wait_packets,
        /// Pinned producer signals those packets wait on.
        dependencies,
        /// Cross-queue waits that needed no dependency (the producer's use
        /// was already known complete).
        dependencies_elided,
        /// Waits that returned early because the device is in the error state.
        device_error_returns,
        /// Times the stream moved to another hardware queue
        /// ([`HostQueue::move_to`](crate::HostQueue::move_to)).
        queue_changes,
        /// Barrier-AND packets that made a new hardware queue wait for the
        /// old one's newest command (one per move with work pending).
        order_waits,
        /// Wake signals the queue made when it was created (never more).
        wake_signals,
        /// Waits that slept on a wake signal (their policy asked for it).
        sleeping_waits,
        /// Waits whose policy asked to sleep but that polled: no wake signal
        /// free or none at all, or no room in the ring.
        wake_fallbacks,
    }
    /// CPU waits for a synchronize marker that began (owner or joiner).
    cpu_waits,
    /// CPU waits for a synchronize marker in progress right now.
    cpu_waits_in_progress,
}

/// Increments a counter.
pub(crate) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Adds to a counter.
pub(crate) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}
