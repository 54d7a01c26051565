//! Completion: a queue's batches that left the open batch, completed once
//! the fence that ends each one completes, by the thread that finds it done
//! or by the device's completion thread ([`CompletionThread`]), which
//! finishes them itself: a job holds this component, and everything a
//! finished batch changes (its commands' status, the progress numbers, the
//! device error state, the tracker's retirement, the reuse of its buffers)
//! is reached through it, never through the queue that closed the batch.
//!
//! A batch completes without the execution lock: its commands are settled
//! by what its fence proves, or, after a failure or in the device error
//! state, each by what is known of it ([`Batch::complete`]). The lock is
//! taken afterwards, only if it is free, to retire and re-arm what
//! completed (`Submission::retire_soon`).

use crate::batch::{Batch, Handoff};
use crate::callback::CallbackRunner;
use crate::completion_thread::{CompletionThread, Job, JobCount, let_go, run_inline};
use crate::device_state::DeviceState;
use crate::error::{Fault, WaitError};
use crate::marker::Marker;
use crate::publish::{Packet, QueueTracker, Step};
use crate::recycle::Pool;
use crate::stats::{Counters, bump};
use crate::status::CommandStatus;
use crate::submission::{Held, Submission, held_by_this_thread};
use crate::sync::Arc;
use crate::wake::Armed;
use crate::watch::Watchers;
use sigretire_tracker::{
    Purpose, SignalRef, Status, Work, backend::SignalMemory, wait::WakeSource,
};
use std::time::Duration;

/// What queues hold of their device: its error state, and its completion
/// thread. Dropped (on a user thread, see `completion_thread`) after the
/// last queue.
pub(crate) struct DeviceShared<T: QueueTracker> {
    state: Arc<DeviceState>,
    thread: CompletionThread<BatchJob<T>>,
    /// The thread the queues' callbacks run on (`callback`).
    callbacks: Arc<CallbackRunner>,
}

impl<T: QueueTracker> DeviceShared<T> {
    pub(crate) fn new(state: Arc<DeviceState>) -> Self {
        Self {
            thread: CompletionThread::new(state.clone()),
            state,
            callbacks: Arc::new(CallbackRunner::new()),
        }
    }

    pub(crate) fn state(&self) -> &Arc<DeviceState> {
        &self.state
    }

    /// The thread the device's callbacks run on.
    pub(crate) fn callbacks(&self) -> &Arc<CallbackRunner> {
        &self.callbacks
    }
}

/// The batches of one queue on their way to completion.
pub(crate) struct Completion<T: QueueTracker> {
    submission: Arc<Submission<T>>,
    device: Arc<DeviceShared<T>>,
    /// Boxes of finished jobs, for reuse (see `recycle`).
    job_boxes: Pool<Box<BatchJob<T>>>,
    /// The queue's jobs on the completion thread.
    jobs: JobCount,
    /// What waits on the queue's positions without a thread (futures,
    /// callbacks, values to release: `watch`), fired by [`Completion::finish`].
    watchers: Watchers,
}

impl<T: QueueTracker> Completion<T> {
    pub(crate) fn new(submission: Arc<Submission<T>>, device: Arc<DeviceShared<T>>) -> Self {
        Self {
            watchers: Watchers::new(device.callbacks.clone()),
            submission,
            device,
            job_boxes: Pool::default(),
            jobs: JobCount::default(),
        }
    }

    /// The queue's watch list.
    pub(crate) fn watchers(&self) -> &Watchers {
        &self.watchers
    }

    /// The submission whose batches these are.
    pub(crate) fn submission(&self) -> &Arc<Submission<T>> {
        &self.submission
    }

    /// How many closed batches the completion thread still holds.
    pub(crate) fn pending_jobs(&self) -> usize {
        self.jobs.pending()
    }

    /// Runs `step` under the execution lock until it is done
    /// ([`Submission::publish_with`]); the batches it closed go to the
    /// completion thread after each attempt.
    pub(crate) fn publish<R>(
        this: &Arc<Self>,
        step: impl FnMut(&mut Held<'_, T>) -> Result<Step<R>, Fault>,
    ) -> Result<R, Fault> {
        // The queue's commands reach its watch list through this link.
        #[cfg(not(sigretire_loom))]
        this.submission
            .watch_link()
            .get_or_init(|| crate::watch::weak(this));
        this.submission
            .publish_with(step, |closed| Completion::dispatch(this, closed))
    }

    /// Hands closed batches on (outside the lock): to the completion thread,
    /// or, where the fence is already known done, completed here.
    pub(crate) fn dispatch(this: &Arc<Self>, closed: &mut Vec<Handoff<T::Memory>>) {
        for handoff in closed.drain(..) {
            if handoff.signal.is_none() {
                // Its fence is already known done: nothing to wait for.
                let Handoff {
                    batch, last_seq, ..
                } = handoff;
                let waiter = this.submission.waiter();
                let fence = batch.last().map(|fence| waiter.status(&fence.ticket));
                let outcome = match fence {
                    Some(Ok(Status::Failed)) => CommandStatus::Failed,
                    _ => CommandStatus::Complete,
                };
                this.finish(batch, last_seq, outcome, false);
                continue;
            }
            // A submission never waits for the GPU: if the batch must be
            // finished here, it is only if its fence is already done.
            let _ = Completion::hand_over(this, handoff, Some(Duration::ZERO));
        }
    }

    /// Gives a batch to the completion thread. If the thread cannot start,
    /// the calling thread finishes the batch itself (outside the lock),
    /// waiting at most `inline_wait` for its fence (`None`: as long as the
    /// GPU takes); past that the batch is abandoned ([`run_inline`]) and
    /// this returns [`WaitError::TimedOut`].
    pub(crate) fn hand_over(
        this: &Arc<Self>,
        handoff: Handoff<T::Memory>,
        inline_wait: Option<Duration>,
    ) -> Result<(), WaitError> {
        this.jobs.add();
        let job = BatchJob::new(handoff, this.clone());
        let job = match this.job_boxes.take() {
            Some(mut reused) => {
                *reused = job;
                reused
            }
            None => Box::new(job),
        };
        if let Err(job) = this.device.thread.submit(job) {
            // The completion thread could not start: finish the job here,
            // outside the lock.
            if !run_inline(job, this.device.state(), inline_wait) {
                return Err(WaitError::TimedOut(inline_wait.unwrap_or_default()));
            }
        }
        Ok(())
    }

    /// The user let go of the queue's last handle while its work may still
    /// run (`hipStreamDestroy` returns at once, and the stream's resources
    /// go once its work is done): a marker after everything, and the open
    /// batch with it, go to the completion thread, whose job holds the
    /// queue, its tracker, and the pins its packets wait on, until the
    /// marker completed. Nothing waits for the GPU here.
    pub(crate) fn last_handle_gone(this: &Arc<Self>) {
        match Completion::last_marker(this) {
            Some(handoff) => {
                let _ = Completion::hand_over(this, handoff, Some(Duration::ZERO));
            }
            // No marker: nothing stands for the queue that may still run,
            // it takes no more work, or it has no room or signal now. But
            // a use of it on a hardware queue it moved off (which may not
            // have failed with it) may still run and read what it pinned.
            None => Completion::keep_while_running(this),
        }
    }

    /// The marker after everything a queue's last handle leaves, published
    /// with the open batch, if the queue takes one and anything may still
    /// run.
    fn last_marker(this: &Arc<Self>) -> Option<Handoff<T::Memory>> {
        let submission = &this.submission;
        let mut held = submission.lock();
        if !held.may_still_run()
            || submission.has_failed()
            || submission.device().check_accepting().is_err()
        {
            return None;
        }
        let packet = Packet::new(Work::Marker, Purpose::CpuSync).hold();
        let Ok(Step::Done(published)) = held.publish(packet) else {
            return None;
        };
        let last_seq = published.entry.seq;
        held.push(published.entry, false);
        submission.progress().note_taken(last_seq);
        Some(Handoff {
            batch: held.take_batch(),
            signal: published.signal,
            last_seq,
            marker: None,
            wake: None,
        })
    }

    /// Whether a use of the queue may still run (see the tracker's
    /// `any_use_running`), or a wake packet. Never blocks on the lock: a
    /// busy lock counts as something running (whoever asks looks again).
    fn anything_may_run(&self) -> bool {
        self.submission
            .try_lock()
            .is_none_or(|mut held| held.anything_may_run())
    }

    /// If something of the queue may still run, the completion thread
    /// keeps the queue (its tracker, its pins, its signal memory) as a
    /// draining job ([`BatchJob::draining`]) until nothing may, whoever
    /// lets go of it last.
    fn keep_while_running(this: &Arc<Self>) {
        if this.anything_may_run() {
            Completion::hand_over_drain(this);
        }
    }

    /// Gives the completion thread a queue to keep until nothing of it may
    /// still run (see [`BatchJob::draining`]). If the thread cannot start,
    /// looks once here, as `last_handle_gone` does for a batch.
    /// Not counted among the queue's batches on their way (it holds none).
    fn hand_over_drain(this: &Arc<Self>) {
        let job = Box::new(BatchJob::draining(this.clone()));
        if let Err(job) = this.device.thread.submit(job) {
            run_inline(job, this.device.state(), Some(Duration::ZERO));
        }
    }

    /// Completes a batch that left the open batch, whose fence (its command
    /// `last_seq`) ended with `outcome`: settles its commands (outside the
    /// lock) and records what is now known. `retire`: take the lock, if
    /// free, to retire what completed (off the submit path).
    pub(crate) fn finish(&self, batch: Batch, last_seq: u64, outcome: CommandStatus, retire: bool) {
        let submission = &self.submission;
        let stats = submission.stats();
        if held_by_this_thread() {
            bump(&stats.batches_completed_under_lock);
        }
        let waiter = submission.waiter();
        match outcome {
            CommandStatus::Complete => {
                submission.progress().note_synced(last_seq);
                batch.complete(outcome, waiter, |_| {});
                if retire {
                    submission.retire_soon();
                }
            }
            CommandStatus::Failed => {
                submission.mark_failed();
                batch.complete(outcome, waiter, |_| {});
                if let Some(fence) = batch.last() {
                    submission.note_queue_failed(&fence.ticket);
                }
            }
            CommandStatus::DeviceError | CommandStatus::Pending => {
                // Released by a device error: a command of it that failed
                // on its own fails its queue too, before it is settled (its
                // handle then answers what is settled here, without asking
                // again, and the queue must already refuse new work).
                batch.complete(outcome, waiter, |failed| {
                    submission.report_failure(failed);
                });
            }
        }
        bump(&stats.batches_completed);
        // What waits on these positions without a thread: settled by the
        // batch's own proof (no load unless it failed).
        let fired = self.watchers.fire(last_seq, outcome, |ticket| {
            waiter.status(ticket).unwrap_or(Status::Pending)
        });
        submission.recycle(batch);
        if let Some(fired) = fired {
            fired.finish();
        }
    }
}

/// Completes one handed-off batch when the fence that ends it completes.
pub(crate) struct BatchJob<T: QueueTracker> {
    signal: Option<SignalRef<T::Memory>>,
    batch: Batch,
    last_seq: u64,
    marker: Option<Arc<Marker>>,
    wake: Option<Armed<T::Memory>>,
    /// Its queue's completion, which keeps the queue (and its tracker)
    /// alive until the job lets go of it (see `completion_thread`).
    queue: Option<Arc<Completion<T>>>,
    outcome: Option<CommandStatus>,
    /// The queue's last job, kept until nothing of it may still run: no
    /// batch and no signal (see [`draining`](Self::draining)).
    drains: bool,
}

impl<T: QueueTracker> BatchJob<T> {
    fn new(handoff: Handoff<T::Memory>, queue: Arc<Completion<T>>) -> Self {
        let Handoff {
            batch,
            signal,
            last_seq,
            marker,
            wake,
        } = handoff;
        Self {
            signal,
            batch,
            last_seq,
            marker,
            wake,
            queue: Some(queue),
            outcome: None,
            drains: false,
        }
    }

    /// The job that keeps a queue whose last reference is going while its
    /// uses may still run: a failed queue's, on a hardware queue it moved
    /// off (which may not have failed with it), still waiting on what they
    /// pinned or about to write their own signals. Ready once none may
    /// (each asked its own signal; a use on a failed hardware queue says
    /// so with its signal where the processor writes it). No signal to
    /// sleep on (a failed queue takes no wake packet): the thread polls
    /// it, which only a queue let go of with work still pending elsewhere
    /// ever costs. Where a hardware queue fails without writing its
    /// packets' signals, the queue is kept until the device goes: a
    /// tracker kept, never a signal re-armed under a packet.
    fn draining(queue: Arc<Completion<T>>) -> Self {
        Self {
            signal: None,
            batch: Batch::default(),
            last_seq: 0,
            marker: None,
            wake: None,
            queue: Some(queue),
            outcome: None,
            drains: true,
        }
    }

    /// Whether a draining job's queue has nothing left that may run, the
    /// device's error state or not. Never blocks on the queue's lock: a
    /// busy lock is looked at again later.
    fn drained(&self) -> bool {
        let Some(queue) = &self.queue else {
            return true;
        };
        // Not the device error state: it is the library's verdict, and
        // the GPU (kept going where errors skip the abort) may still run a
        // barrier that reads what the queue pinned.
        !queue.anything_may_run()
    }
}

/// The completion thread's sleep on a job's wake signal.
pub(crate) struct JobWake<'a, M: SignalMemory> {
    armed: &'a Armed<M>,
    memory: &'a M,
    stats: &'a Counters,
}

impl<M: SignalMemory> WakeSource for JobWake<'_, M> {
    fn sleep(&mut self, timeout: Duration) -> bool {
        bump(&self.stats.handler_sleeps);
        // SAFETY: one of the queue's wake signals, lent from a pool made
        // from its tracker's memory, which `memory` is.
        unsafe { self.armed.sleep(self.memory, timeout) }
    }

    fn look_after_every_sleep(&self) -> bool {
        self.armed.behind()
    }
}

impl<T: QueueTracker> Job for BatchJob<T> {
    type Wake<'a> = JobWake<'a, T::Memory>;

    fn ready(&mut self, device: &DeviceState) -> bool {
        if self.drains {
            return self.drained();
        }
        let status = self
            .signal
            .as_ref()
            .map_or(Status::Complete, |s| s.status());
        self.outcome = match status {
            Status::Complete => Some(CommandStatus::Complete),
            Status::Failed => Some(CommandStatus::Failed),
            Status::Pending => device.has_error().then_some(CommandStatus::DeviceError),
        };
        self.outcome.is_some()
    }

    fn finish(mut self: Box<Self>, device: &DeviceState) {
        if self.drains {
            // No batch to complete: let go of the queue (its tracker goes
            // with its last reference, on a teardown thread).
            return self.abandon(device);
        }
        let outcome = self.outcome.take().unwrap_or(CommandStatus::Complete);
        let signal = self.signal.take();
        // Done with the wake signal: it may be lent again once its packet
        // ran (the pin goes as the batch's completion retires what it can).
        drop(self.wake.take());
        let Some(queue) = self.queue.take() else {
            return;
        };
        // The fence's signal is read no more: let go of it first, while the
        // queue (still held) keeps its memory alive, so that the retirement
        // below retires its use instead of parking it under this reference
        // (the order `let_go` keeps: the signal before the queue).
        drop(signal);
        let batch = core::mem::take(&mut self.batch);
        bump(&queue.submission.stats().handler_batches);
        queue.finish(batch, self.last_seq, outcome, true);
        if let Some(marker) = self.marker.take() {
            marker.finish(outcome);
        }
        // Emptied of every reference: the queue may reuse the box. Before
        // the job counts as done, so whoever waits for the queue's jobs to
        // end finds everything back in place.
        queue.job_boxes.give(self);
        // A failed fence says nothing of a hardware queue the stream moved
        // off, where a barrier may still wait on what it pinned, and a
        // failed queue's last marker fails at once, with the user's last
        // handle going just after. A batch the device error state released
        // says nothing at all: its fence had not completed, and the GPU
        // may go on. (A completed fence proves the older queues' work done
        // too: the move's order wait put it behind them.)
        if outcome != CommandStatus::Complete {
            Completion::keep_while_running(&queue);
        }
        queue.jobs.done();
        let_go((), queue, device);
    }

    fn abandon(mut self: Box<Self>, device: &DeviceState) {
        let signal = self.signal.take();
        drop(self.wake.take());
        let Some(queue) = self.queue.take() else {
            return;
        };
        if !self.drains {
            queue.jobs.done();
        }
        let_go(signal, queue, device);
    }

    fn wake(&mut self) -> Option<Self::Wake<'_>> {
        if self.drains {
            return None;
        }
        let queue = self.queue.as_ref()?;
        if self.wake.is_none() {
            // A signal already known complete never gets here (the job is
            // ready at once), so the batch has its fence. The thread never
            // blocks on a queue's lock: a synchronize under it may be
            // waiting for this very thread.
            let fence = self.batch.last()?.ticket;
            let mut held = queue.submission.try_lock()?;
            self.wake = held.arm_wake(&fence).ok().flatten();
        }
        Some(JobWake {
            armed: self.wake.as_ref()?,
            memory: queue.submission.memory(),
            stats: queue.submission.stats(),
        })
    }
}
