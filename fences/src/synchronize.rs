//! Synchronize: markers, and CLR's CompleteCpuWait.
//!
//! The protocol (CLR #13532), for a pending batch smaller than
//! [`QueueConfig::cpu_sync_batch`](crate::QueueConfig):
//!
//! 1. Under the execution lock: publish a marker (empty work, barrier bit:
//!    its completion proves every earlier packet complete; on a queue that
//!    runs only what it publishes the newest command is that marker, as
//!    every packet is a fence, and nothing is published), take the open
//!    batch (the marker's batch is now private to this thread), note the
//!    marker as in flight. Release the lock.
//! 2. Without the lock: wait for the marker's use (the tracker's lock-free
//!    waiter). Other threads keep submitting, querying and waiting on the
//!    queue meanwhile; a second synchronizing thread finds the marker in
//!    flight and waits on it, also without the lock.
//! 3. Take the lock once: harvest the batch's timestamps, and reset queue
//!    state (tell the tracker the queue drained) only if no command was
//!    published after the marker — newer work may still be running.
//! 4. Without the lock: complete the marker's batch.
//!
//! If the device enters the error state during step 2, the wait returns
//! early: steps 3 is skipped (the GPU may still run), step 4 runs so nobody
//! waiting on the batch's commands hangs. A larger batch is handed, with the
//! marker, to the completion thread, and the synchronizing thread waits for
//! that thread's verdict (again without the lock). A marker that already
//! completed, with nothing submitted since, answers synchronize without the
//! lock.

use crate::batch::Batch;
use crate::cpu_wait::{Outcome, WaitEnd};
use crate::error::Error;
use crate::handler::Handoff;
use crate::marker::Marker;
use crate::publish::{Inner, Packet, QueueTracker, Step};
use crate::queue::{HostQueue, QueueCore};
use crate::stats::bump;
use crate::sync::{Arc, Ordering};
use sigretire_tracker::{Purpose, SignalMemory, SignalRef, Status, Ticket, Work};
use std::time::Duration;

/// What synchronize does once the lock is released.
pub(crate) enum SyncPlan<M: SignalMemory> {
    /// Nothing left to do (nothing submitted).
    Done(Result<(), Error>),
    /// The newest command was already done: complete its batch.
    Inline {
        batch: Batch,
        newest: Ticket,
        last_seq: u64,
        status: Status,
    },
    /// Another thread's marker is in flight and covers everything: wait on it.
    Join(Arc<Marker>),
    /// Wait for this thread's marker, then complete its batch (CompleteCpuWait).
    Own { marker: Arc<Marker>, batch: Batch },
    /// The completion thread completes the batch; wait for its verdict.
    Handler {
        marker: Arc<Marker>,
        batch: Batch,
        signal: Option<SignalRef<M>>,
    },
}

impl<T: QueueTracker> QueueCore<T> {
    /// Step 1, under the lock: decide, and publish the marker if one is needed.
    fn plan_sync(&self, inner: &mut Inner<T>) -> Result<Step<SyncPlan<T::Memory>>, Error> {
        let standing = inner.standing()?;
        if let Some(marker) = &inner.in_flight_marker
            && !marker.is_finished()
            && standing.is_some_and(|newest| newest.seq == marker.seq)
        {
            return Ok(Step::Done(SyncPlan::Join(marker.clone())));
        }
        if inner.frontier.newest().is_none()
            && inner.order_debt.is_none()
            && inner.frontier.idle_since_creation(inner.tracker.queue())
        {
            return Ok(Step::Done(SyncPlan::Done(Ok(()))));
        }
        // The newest command is a fence: if it stands for the hardware
        // queue and is done, everything is, and no marker is needed (at
        // most one load to find out). A failure of it is the stream's
        // whatever follows it.
        if let Some(newest) = inner.frontier.trusted().copied() {
            let status = inner.tracker.query(&newest.ticket)?;
            let answers =
                status == Status::Failed || (status == Status::Complete && standing.is_some());
            if answers {
                let batch = self.take_batch(inner);
                self.progress.note_taken(newest.seq);
                if status == Status::Complete {
                    self.process_timing(inner, &batch);
                    self.reset_state(inner);
                }
                bump(&self.stats.syncs_inline);
                return Ok(Step::Done(SyncPlan::Inline {
                    batch,
                    newest: newest.ticket,
                    last_seq: newest.seq,
                    status,
                }));
            }
        }
        let small = inner.batch.len() < self.config.cpu_sync_batch;
        let (marker, signal) = if let Some(newest) = inner.newest_to_share(false)? {
            // The newest command is the marker: one published after it
            // would complete when it does.
            bump(&self.stats.shared_completions);
            let signal = if small {
                None
            } else {
                inner.tracker.hold(&newest.ticket)?
            };
            (Marker::new(newest.seq, newest.ticket), signal)
        } else {
            // A synchronize's marker is never timed: it needs no work at all.
            let mut packet = Packet::new(Work::Marker, Purpose::CpuSync);
            if !small {
                // The completion thread holds a reference to the marker's signal.
                packet = packet.hold();
            }
            let published = match inner.publish(&self.stats, packet)?.or_retry() {
                Ok(published) => published,
                Err(retry) => return Ok(retry),
            };
            let marker = Marker::new(published.entry.seq, published.entry.ticket);
            self.push_command(inner, published.entry, false);
            (marker, published.signal)
        };
        let marker = self.markers.fresh(marker);
        let batch = self.take_batch(inner);
        self.progress.note_taken(marker.seq);
        if let Some(older) = inner.in_flight_marker.replace(marker.clone()) {
            // Its synchronize is over by now, as a rule: reuse it.
            self.markers.keep_if_last(older);
        }
        if !small {
            bump(&self.stats.syncs_by_handler);
            return Ok(Step::Done(SyncPlan::Handler {
                marker,
                batch,
                signal,
            }));
        }
        Ok(Step::Done(SyncPlan::Own { marker, batch }))
    }

    /// The CPU wait for a marker, counted while it runs.
    fn wait_for_marker(&self, marker: &Marker) -> Result<WaitEnd, Error> {
        bump(&self.stats.cpu_waits);
        self.stats
            .cpu_waits_in_progress
            .fetch_add(1, Ordering::AcqRel);
        let end = self.wait_maybe_sleeping(&marker.ticket, |slice, policy| {
            self.waiter.wait(&marker.ticket, slice, policy)
        });
        self.stats
            .cpu_waits_in_progress
            .fetch_sub(1, Ordering::AcqRel);
        end
    }

    /// Steps 2-4 (CLR's CompleteCpuWait), called without the lock.
    fn complete_cpu_wait(this: &Arc<Self>, marker: Arc<Marker>, batch: Batch) -> Result<(), Error> {
        let end = this.wait_for_marker(&marker)?;
        let Some(outcome) = end.outcome() else {
            // The wait used up its time: the completion thread takes the
            // batch over, with no more waiting here.
            let signal = this.lock().tracker.hold(&marker.ticket).ok().flatten();
            let handoff = Handoff {
                batch,
                signal,
                last_seq: marker.seq,
                marker: Some(marker),
                wake: None,
            };
            let _ = QueueCore::hand_to_handler(this, handoff, Some(Duration::ZERO));
            return end.into_result(Some(&this.stats), || unreachable!("timed out"));
        };
        if outcome == Outcome::Complete {
            // Step 3: the lock, once. (After a failure or in the error state
            // the GPU may still run: no timing, no reset.)
            let mut inner = this.lock();
            this.process_timing(&mut inner, &batch);
            if inner.last_seq() == marker.seq {
                this.reset_state(&mut inner);
            } else {
                // Newer work may still use the queue's state.
                bump(&this.stats.state_resets_skipped);
                inner.tracker.poll();
            }
            if inner
                .in_flight_marker
                .as_ref()
                .is_some_and(|m| Arc::ptr_eq(m, &marker))
            {
                inner.in_flight_marker = None;
            }
        }
        // Step 4: the batch is private to this thread (it left the open
        // batch under the lock), so it completes without it — in the error
        // state too, so no thread waiting on its commands hangs.
        this.finish_batch(batch, marker.seq, &outcome, this.state(), false);
        marker.finish(outcome);
        // No longer in flight: unless a joining thread still reads it, this
        // was its last reference.
        let ticket = marker.ticket;
        this.markers.keep_if_last(marker);
        end.into_result(Some(&this.stats), || this.report_failure(&ticket))
    }

    /// A second synchronizing thread: waits on the marker in flight, without
    /// the lock. The marker's owner completes its batch.
    fn join_marker(&self, marker: &Marker) -> Result<(), Error> {
        bump(&self.stats.marker_joins);
        let end = self.wait_for_marker(marker)?;
        if end.outcome() == Some(Outcome::Complete) {
            self.progress.note_synced(marker.seq);
        }
        end.into_result(Some(&self.stats), || self.report_failure(&marker.ticket))
    }

    /// Hands a large batch to the completion thread and waits for its verdict.
    fn sync_through_handler(
        this: &Arc<Self>,
        marker: Arc<Marker>,
        batch: Batch,
        signal: Option<SignalRef<T::Memory>>,
    ) -> Result<(), Error> {
        let seq = marker.seq;
        // If this thread must finish the batch itself, that is its wait.
        QueueCore::hand_to_handler(
            this,
            Handoff {
                batch,
                signal,
                last_seq: seq,
                marker: Some(marker.clone()),
                wake: None,
            },
            this.config.wait_timeout,
        )?;
        bump(&this.stats.cpu_waits);
        this.stats
            .cpu_waits_in_progress
            .fetch_add(1, Ordering::AcqRel);
        let end = marker.wait_finished(this.state(), &this.settings());
        this.stats
            .cpu_waits_in_progress
            .fetch_sub(1, Ordering::AcqRel);
        // The completion thread reported any failure already.
        end.into_result(Some(&this.stats), || Error::QueueFailed { queue: this.id })
    }
}

impl<T: QueueTracker> HostQueue<T> {
    /// Waits until everything submitted to the queue so far completed
    /// (`hipStreamSynchronize`), never holding the execution lock while it
    /// waits for the GPU.
    ///
    /// - Nothing submitted since a completed marker: returns at once,
    ///   without the lock.
    /// - The newest command already done: completes the batch, no marker.
    /// - A marker in flight (another thread synchronizing): waits on it.
    /// - A small pending batch: a marker, waited for by this thread after
    ///   the lock is released; the lock is then taken once for timing and
    ///   the queue-state reset, and the batch completed without it.
    /// - A larger batch: a marker completed by the completion thread.
    ///
    /// Returns [`Error::DeviceError`] early (without completion) when the
    /// device enters the error state with `skip_abort_on_error`,
    /// [`Error::Aborted`] without it, [`Error::QueueFailed`] when the
    /// queue's work failed, [`Error::TimedOut`] past the wait timeout.
    ///
    /// ```
    /// use sigretire_queue::sim::SimPlatform;
    ///
    /// let platform = SimPlatform::stepped();
    /// let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// let command = queue.launch(0)?;
    /// platform.run_while(|| queue.synchronize())?; // the marker is waited for outside the lock
    /// assert!(command.is_released());
    /// let locks = queue.stats().lock_acquisitions;
    /// queue.synchronize()?; // the completed marker covers everything: no lock
    /// assert_eq!(queue.stats().lock_acquisitions, locks);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn synchronize(&self) -> Result<(), Error> {
        let core = self.core();
        if core.progress.synced_through() >= core.progress.submitted()
            && !core.horizon.foreign_work_possible()
        {
            bump(&core.stats.syncs_without_lock);
            return Ok(());
        }
        let plan = QueueCore::with_publication(core, |core, inner| core.plan_sync(inner))?;
        match plan {
            SyncPlan::Done(result) => result,
            SyncPlan::Inline {
                batch,
                newest,
                last_seq,
                status,
            } => {
                let outcome = if status == Status::Complete {
                    Outcome::Complete
                } else {
                    Outcome::Failed
                };
                core.finish_batch(batch, last_seq, &outcome, core.state(), false);
                match outcome {
                    Outcome::Complete => Ok(()),
                    _ => Err(core.report_failure(&newest)),
                }
            }
            SyncPlan::Join(marker) => core.join_marker(&marker),
            SyncPlan::Own { marker, batch } => QueueCore::complete_cpu_wait(core, marker, batch),
            SyncPlan::Handler {
                marker,
                batch,
                signal,
            } => QueueCore::sync_through_handler(core, marker, batch, signal),
        }
    }
}
