//! Synchronize: markers, and CLR's CompleteCpuWait.
//!
//! The protocol (CLR #13532), for a pending batch smaller than
//! [`QueueConfig::cpu_sync_batch`](crate::QueueConfig):
//!
//! 1. Under the execution lock: publish a marker (empty work, barrier bit:
//!    its completion proves every earlier packet complete), take the open
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

use crate::batch::{Batch, Outcome};
use crate::config::SyncWait;
use crate::cpu_wait::{self, WaitEnd, WaitSettings};
use crate::device::DeviceState;
use crate::error::Error;
use crate::publish::{Packet, Step, published};
use crate::queue::{HostQueue, Inner, QueueCore, QueueTracker};
use crate::stats::bump;
use crate::sync::{Arc, AtomicBool, Condvar, Mutex, Ordering};
use sigretire_tracker::{Purpose, SignalMemory, SignalRef, Status, Ticket, Work};
use std::time::{Duration, Instant};

/// A synchronize marker: the newest command when it was published.
#[derive(Debug)]
pub(crate) struct Marker {
    pub(crate) seq: u64,
    pub(crate) ticket: Ticket,
    finished: AtomicBool,
    outcome: Mutex<Option<Outcome>>,
    done: Condvar,
}

impl Marker {
    fn new(seq: u64, ticket: Ticket) -> Self {
        Self {
            seq,
            ticket,
            finished: AtomicBool::new(false),
            outcome: Mutex::new(None),
            done: Condvar::new(),
        }
    }

    /// Whether the marker's batch was completed (by its owner or the
    /// completion thread).
    pub(crate) fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Records how the marker's batch ended and wakes its waiters.
    pub(crate) fn finish(&self, outcome: Outcome) {
        let mut slot = self.outcome.lock();
        if slot.is_none() {
            *slot = Some(outcome);
        }
        self.finished.store(true, Ordering::Release);
        self.done.notify_all();
    }

    /// Waits for the completion thread's verdict (holding no queue lock).
    fn wait_finished(&self, device: &DeviceState, settings: &WaitSettings) -> WaitEnd {
        let start = Instant::now();
        let mut slot = self.outcome.lock();
        loop {
            if let Some(outcome) = slot.as_ref() {
                return match outcome {
                    Outcome::Complete => WaitEnd::Done(Status::Complete),
                    Outcome::Failed => WaitEnd::Done(Status::Failed),
                    Outcome::DeviceError(error) => WaitEnd::DeviceError(error.clone()),
                };
            }
            if let Some(error) = device.wait_error() {
                return WaitEnd::DeviceError(error);
            }
            if let Some(timeout) = settings.timeout
                && start.elapsed() >= timeout
            {
                return WaitEnd::TimedOut(timeout);
            }
            self.done.wait_for(&mut slot, settings.slice);
        }
    }
}

/// What synchronize does once the lock is released.
pub(crate) enum SyncPlan<M: SignalMemory> {
    /// Nothing left to do (nothing submitted, or the old behaviour did it
    /// all under the lock).
    Done(Result<(), Error>),
    /// The newest command was already done: complete its batch.
    Inline {
        batch: Batch,
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
    /// The wait under the lock timed out: the completion thread takes the
    /// batch over, and synchronize reports the timeout.
    HandOff {
        marker: Arc<Marker>,
        batch: Batch,
        signal: Option<SignalRef<M>>,
        error: Error,
    },
}

impl<T: QueueTracker> QueueCore<T> {
    /// Step 1, under the lock: decide, and publish the marker if one is needed.
    fn plan_sync(&self, inner: &mut Inner<T>) -> Result<Step<SyncPlan<T::Memory>>, Error> {
        if let Some(marker) = &inner.in_flight_marker
            && !marker.is_finished()
            && marker.seq == inner.last_seq()
        {
            return Ok(Step::Done(SyncPlan::Join(marker.clone())));
        }
        let Some((last_seq, ticket)) = inner.last else {
            return Ok(Step::Done(SyncPlan::Done(Ok(()))));
        };
        // The newest command is a fence: if it is done, everything is, and
        // no marker is needed (at most one load to find out).
        let status = inner.tracker.query(&ticket)?;
        if status.is_done() {
            let batch = self.take_batch(inner);
            self.progress.note_taken(last_seq);
            if status == Status::Complete {
                self.process_timing(inner, &batch);
                self.reset_state(inner);
            }
            bump(&self.stats.syncs_inline);
            return Ok(Step::Done(SyncPlan::Inline {
                batch,
                last_seq,
                status,
            }));
        }
        let small = inner.batch.len() < self.config.cpu_sync_batch;
        // A synchronize's marker is never timed: it needs no work at all.
        let mut packet = Packet::new(Work::Marker, Purpose::CpuSync);
        if !small {
            // The completion thread holds a reference to the marker's signal.
            packet = packet.hold();
        }
        let published = published!(inner.publish(&self.stats, packet)?);
        let marker = self
            .markers
            .fresh(Marker::new(published.entry.seq, published.entry.ticket));
        self.push_command(inner, published.entry, false);
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
                signal: published.signal,
            }));
        }
        Ok(Step::Done(match self.config.sync_wait {
            SyncWait::OutsideLock => SyncPlan::Own { marker, batch },
            SyncWait::UnderLock => self.complete_cpu_wait_under_lock(inner, marker, batch),
        }))
    }

    /// The CPU wait for a marker, counted while it runs.
    fn wait_for_marker(&self, marker: &Marker) -> Result<WaitEnd, Error> {
        bump(&self.stats.cpu_waits);
        self.stats
            .cpu_waits_in_progress
            .fetch_add(1, Ordering::AcqRel);
        let end = cpu_wait::wait_for(
            |slice, policy| self.waiter.wait(&marker.ticket, slice, policy),
            self.state(),
            &self.settings(),
        );
        self.stats
            .cpu_waits_in_progress
            .fetch_sub(1, Ordering::AcqRel);
        end
    }

    /// Steps 2-4 (CLR's CompleteCpuWait), called without the lock.
    fn complete_cpu_wait(this: &Arc<Self>, marker: Arc<Marker>, batch: Batch) -> Result<(), Error> {
        match this.wait_for_marker(&marker)? {
            WaitEnd::Done(Status::Complete) => {
                {
                    // Step 3: the lock, once.
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
                // Step 4: the batch is private to this thread (it left the
                // open batch under the lock), so it completes without it.
                this.finish_batch(batch, marker.seq, &Outcome::Complete, this.state(), false);
                marker.finish(Outcome::Complete);
                // No longer in flight: unless a joining thread still reads
                // it, this was its last reference.
                this.markers.keep_if_last(marker);
                Ok(())
            }
            WaitEnd::Done(_) => {
                let error = this.report_failure();
                this.finish_batch(batch, marker.seq, &Outcome::Failed, this.state(), false);
                marker.finish(Outcome::Failed);
                Err(error)
            }
            WaitEnd::DeviceError(error) => {
                // The GPU may still run: no timing, no reset. Release the
                // batch so no thread waiting on its commands hangs.
                let outcome = Outcome::DeviceError(error.clone());
                this.finish_batch(batch, marker.seq, &outcome, this.state(), false);
                marker.finish(outcome);
                Err(error)
            }
            WaitEnd::TimedOut(timeout) => {
                let signal = this.lock().tracker.hold(&marker.ticket).ok().flatten();
                // The wait already used up its time: no more inline.
                let _ = QueueCore::hand_to_handler(
                    this,
                    batch,
                    signal,
                    marker.seq,
                    Some(marker),
                    Some(Duration::ZERO),
                );
                Err(Error::TimedOut(timeout))
            }
        }
    }

    /// The old behaviour: steps 2-4 with the lock held throughout.
    fn complete_cpu_wait_under_lock(
        &self,
        inner: &mut Inner<T>,
        marker: Arc<Marker>,
        batch: Batch,
    ) -> SyncPlan<T::Memory> {
        let end = match self.wait_for_marker(&marker) {
            Ok(end) => end,
            Err(error) => return SyncPlan::Done(Err(error)),
        };
        let result = match end {
            WaitEnd::Done(Status::Complete) => {
                self.process_timing(inner, &batch);
                self.reset_state(inner);
                inner.in_flight_marker = None;
                self.finish_batch(batch, marker.seq, &Outcome::Complete, self.state(), false);
                marker.finish(Outcome::Complete);
                Ok(())
            }
            WaitEnd::Done(_) => {
                let error = self.report_failure();
                // This thread holds the lock: tell the tracker now.
                self.apply_pending_failure(inner);
                self.finish_batch(batch, marker.seq, &Outcome::Failed, self.state(), false);
                marker.finish(Outcome::Failed);
                Err(error)
            }
            WaitEnd::DeviceError(error) => {
                let outcome = Outcome::DeviceError(error.clone());
                self.finish_batch(batch, marker.seq, &outcome, self.state(), false);
                marker.finish(outcome);
                Err(error)
            }
            WaitEnd::TimedOut(timeout) => {
                let signal = inner.tracker.hold(&marker.ticket).ok().flatten();
                return SyncPlan::HandOff {
                    marker,
                    batch,
                    signal,
                    error: Error::TimedOut(timeout),
                };
            }
        };
        SyncPlan::Done(result)
    }

    /// A second synchronizing thread: waits on the marker in flight, without
    /// the lock. The marker's owner completes its batch.
    fn join_marker(&self, marker: &Marker) -> Result<(), Error> {
        bump(&self.stats.marker_joins);
        match self.wait_for_marker(marker)? {
            WaitEnd::Done(Status::Complete) => {
                self.progress.note_synced(marker.seq);
                Ok(())
            }
            WaitEnd::Done(_) => Err(self.report_failure()),
            WaitEnd::DeviceError(error) => {
                bump(&self.stats.device_error_returns);
                Err(error)
            }
            WaitEnd::TimedOut(timeout) => Err(Error::TimedOut(timeout)),
        }
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
            batch,
            signal,
            seq,
            Some(marker.clone()),
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
        match end {
            WaitEnd::Done(Status::Complete) => Ok(()),
            WaitEnd::Done(_) => Err(Error::QueueFailed { queue: this.id }),
            WaitEnd::DeviceError(error) => Err(error),
            WaitEnd::TimedOut(timeout) => Err(Error::TimedOut(timeout)),
        }
    }
}

impl<T: QueueTracker> HostQueue<T> {
    /// Waits until everything submitted to the queue so far completed
    /// (`hipStreamSynchronize`), never holding the execution lock while it
    /// waits for the GPU (unless configured with the old
    /// [`SyncWait::UnderLock`]).
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
        if core.progress.synced_through() >= core.progress.submitted() {
            bump(&core.stats.syncs_without_lock);
            return Ok(());
        }
        let plan = QueueCore::with_publication(core, |core, inner| core.plan_sync(inner))?;
        match plan {
            SyncPlan::Done(result) => result,
            SyncPlan::Inline {
                batch,
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
                    _ => Err(core.report_failure()),
                }
            }
            SyncPlan::Join(marker) => core.join_marker(&marker),
            SyncPlan::Own { marker, batch } => QueueCore::complete_cpu_wait(core, marker, batch),
            SyncPlan::Handler {
                marker,
                batch,
                signal,
            } => QueueCore::sync_through_handler(core, marker, batch, signal),
            SyncPlan::HandOff {
                marker,
                batch,
                signal,
                error,
            } => {
                let seq = marker.seq;
                // The wait under the lock already used up its time.
                let _ = QueueCore::hand_to_handler(
                    core,
                    batch,
                    signal,
                    seq,
                    Some(marker),
                    Some(Duration::ZERO),
                );
                Err(error)
            }
        }
    }
}
