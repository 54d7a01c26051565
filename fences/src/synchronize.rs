//! Synchronize: markers, and CLR's CompleteCpuWait.
//!
//! The protocol (CLR's fix of the wait under the lock), for a pending batch smaller than
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
//!
//! [`Synchronizer`] runs it; what it may skip (no marker where the newest
//! command stands for the queue, nothing at all where it is done) is the
//! frontier's to say.

use crate::batch::{Batch, Handoff};
use crate::completion::Completion;
use crate::cpu_wait::{Ended, Wakes, look};
use crate::error::{Fault, SyncError, WaitError};
use crate::frontier::Verdict;
use crate::marker::Marker;
use crate::publish::{Packet, QueueTracker, Step};
use crate::recycle::Pool;
use crate::stats::bump;
use crate::status::CommandStatus;
use crate::submission::{Held, Submission};
use crate::sync::Arc;
use sigretire_tracker::{Purpose, SignalRef, Ticket, Work, backend::SignalMemory};
use std::time::Duration;

/// What synchronize does once the lock is released.
enum Plan<M: SignalMemory> {
    /// Nothing submitted: nothing to wait for.
    Idle,
    /// The newest command was already done (or failed): complete its batch.
    Inline {
        batch: Batch,
        newest: Ticket,
        last_seq: u64,
        status: CommandStatus,
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

/// A queue's synchronize: its markers, recycled.
#[derive(Default)]
pub(crate) struct Synchronizer {
    markers: Pool<Arc<Marker>>,
}

impl Synchronizer {
    /// Waits until everything submitted to the queue so far completed,
    /// never holding the execution lock while it waits for the GPU; its
    /// waits for the GPU give up after `timeout` (`None`: as long as the GPU
    /// takes). The queue's [`QueueConfig::wait_timeout`](crate::QueueConfig)
    /// is the plain call's; a per-call deadline passes its own.
    pub(crate) fn synchronize<T: QueueTracker>(
        &self,
        submission: &Arc<Submission<T>>,
        completion: &Arc<Completion<T>>,
        timeout: Option<Duration>,
    ) -> Result<(), SyncError> {
        if submission.all_done_without_lock() {
            bump(&submission.stats().syncs_without_lock);
            return Ok(());
        }
        let plan = Completion::publish(completion, |held| self.plan(submission, held))?;
        match plan {
            Plan::Idle => Ok(()),
            Plan::Inline {
                batch,
                newest,
                last_seq,
                status,
            } => {
                completion.finish(batch, last_seq, status, false);
                match status {
                    CommandStatus::Complete => Ok(()),
                    _ => Err(submission.report_failure(&newest).into()),
                }
            }
            Plan::Join(marker) => Ok(self.join(submission, &marker, timeout)?),
            Plan::Own { marker, batch } => {
                Ok(self.complete_cpu_wait(submission, completion, marker, batch, timeout)?)
            }
            Plan::Handler {
                marker,
                batch,
                signal,
            } => Ok(Self::through_handler(
                submission, completion, marker, batch, signal, timeout,
            )?),
        }
    }

    /// Step 1, under the lock: decide, and publish the marker if one is
    /// needed.
    fn plan<T: QueueTracker>(
        &self,
        submission: &Submission<T>,
        held: &mut Held<'_, T>,
    ) -> Result<Step<Plan<T::Memory>>, Fault> {
        let standing = held.standing()?;
        if let Some(marker) = held.in_flight()
            && !marker.is_finished()
            && standing.is_some_and(|newest| newest.seq == marker.seq)
        {
            return Ok(Step::Done(Plan::Join(marker.clone())));
        }
        // The newest command is a fence: if it stands for the hardware
        // queue and is done, everything is, and no marker is needed (at
        // most one load to find out). A failure of it is the stream's
        // whatever follows it.
        let (newest, status) = match held.publisher().verdict_loaded()? {
            Verdict::Idle => return Ok(Step::Done(Plan::Idle)),
            Verdict::Done(newest) => (Some(newest), CommandStatus::Complete),
            Verdict::Failed(newest) => (Some(newest), CommandStatus::Failed),
            Verdict::Running { .. } | Verdict::Unknown => (None, CommandStatus::Pending),
        };
        if let Some(newest) = newest {
            let batch = held.take_batch();
            submission.progress().note_taken(newest.seq);
            if status == CommandStatus::Complete {
                held.process_timing(&batch);
                held.reset_state();
            }
            bump(&submission.stats().syncs_inline);
            return Ok(Step::Done(Plan::Inline {
                batch,
                newest: newest.ticket,
                last_seq: newest.seq,
                status,
            }));
        }
        let small = held.open_len() < submission.config().cpu_sync_batch;
        let (marker, signal) = if let Some(newest) = held.share_newest(false)? {
            // The newest command is the marker: one published after it
            // would complete when it does.
            bump(&submission.stats().shared_completions);
            let signal = if small {
                None
            } else {
                held.tracker().hold(&newest.ticket)?
            };
            (Marker::new(newest.seq, newest.ticket), signal)
        } else {
            // A synchronize's marker is never timed: it needs no work at all.
            let mut packet = Packet::new(Work::Marker, Purpose::CpuSync);
            if !small {
                // The completion thread holds a reference to the marker's signal.
                packet = packet.hold();
            }
            let published = match held.publish(packet)?.or_retry() {
                Ok(published) => published,
                Err(retry) => return Ok(retry),
            };
            let marker = Marker::new(published.entry.seq, published.entry.ticket);
            held.push(published.entry, false);
            (marker, published.signal)
        };
        let marker = self.markers.fresh(marker);
        let batch = held.take_batch();
        submission.progress().note_taken(marker.seq);
        if let Some(older) = held.set_in_flight(marker.clone()) {
            // Its synchronize is over by now, as a rule: reuse it.
            self.markers.keep_if_last(older);
        }
        if !small {
            bump(&submission.stats().syncs_by_handler);
            return Ok(Step::Done(Plan::Handler {
                marker,
                batch,
                signal,
            }));
        }
        Ok(Step::Done(Plan::Own { marker, batch }))
    }

    /// The CPU wait for a marker, counted while it runs, for at most
    /// `timeout`.
    fn wait_for_marker<T: QueueTracker>(
        submission: &Arc<Submission<T>>,
        marker: &Marker,
        timeout: Option<Duration>,
    ) -> Result<Ended, WaitError> {
        let wakes: &dyn Wakes<T::Memory> = &**submission;
        let mut wait = submission.use_wait();
        wait.settings.timeout = timeout;
        let ended = submission.stats().sync_waits.track(|| {
            wait.run(
                &marker.ticket,
                || look(submission.waiter().status(&marker.ticket)),
                Some(wakes),
            )
        })?;
        Ok(ended)
    }

    /// Steps 2-4 (CLR's CompleteCpuWait), called without the lock.
    fn complete_cpu_wait<T: QueueTracker>(
        &self,
        submission: &Arc<Submission<T>>,
        completion: &Arc<Completion<T>>,
        marker: Arc<Marker>,
        batch: Batch,
        timeout: Option<Duration>,
    ) -> Result<(), WaitError> {
        let ended = Self::wait_for_marker(submission, &marker, timeout)?;
        let Ok(outcome) = ended else {
            // The wait used up its time: the completion thread takes the
            // batch over, with no more waiting here.
            let signal = submission
                .lock()
                .tracker()
                .hold(&marker.ticket)
                .ok()
                .flatten();
            let last_seq = marker.seq;
            let handoff = Handoff {
                batch,
                signal,
                last_seq,
                marker: Some(marker),
                wake: None,
            };
            let _ = Completion::hand_over(completion, handoff, Some(Duration::ZERO));
            return submission.wait_result(ended, || unreachable!("timed out"));
        };
        if outcome == CommandStatus::Complete {
            // Step 3: the lock, once. (After a failure or in the error state
            // the GPU may still run: no timing, no reset.)
            let mut held = submission.lock();
            held.process_timing(&batch);
            if held.publisher().newest_seq() == marker.seq {
                held.reset_state();
            } else {
                // Newer work may still use the queue's state.
                bump(&submission.stats().state_resets_skipped);
                held.tracker().poll();
            }
            held.end_in_flight(&marker);
        }
        // Step 4: the batch is private to this thread (it left the open
        // batch under the lock), so it completes without it — in the error
        // state too, so no thread waiting on its commands hangs.
        completion.finish(batch, marker.seq, outcome, false);
        marker.finish(outcome);
        // No longer in flight: unless a joining thread still reads it, this
        // was its last reference.
        let ticket = marker.ticket;
        self.markers.keep_if_last(marker);
        // A wake pin the lock of step 3 did not let go of (there was none,
        // or its packet had not run then).
        submission.release_pending_wakes();
        submission.wait_result(ended, || submission.report_failure(&ticket))
    }

    /// A second synchronizing thread: waits on the marker in flight, without
    /// the lock. The marker's owner completes its batch.
    fn join<T: QueueTracker>(
        &self,
        submission: &Arc<Submission<T>>,
        marker: &Marker,
        timeout: Option<Duration>,
    ) -> Result<(), WaitError> {
        bump(&submission.stats().marker_joins);
        let ended = Self::wait_for_marker(submission, marker, timeout)?;
        if ended == Ok(CommandStatus::Complete) {
            submission.progress().note_synced(marker.seq);
        }
        submission.release_pending_wakes();
        submission.wait_result(ended, || submission.report_failure(&marker.ticket))
    }

    /// Hands a large batch to the completion thread and waits for its verdict.
    fn through_handler<T: QueueTracker>(
        submission: &Arc<Submission<T>>,
        completion: &Arc<Completion<T>>,
        marker: Arc<Marker>,
        batch: Batch,
        signal: Option<SignalRef<T::Memory>>,
        timeout: Option<Duration>,
    ) -> Result<(), WaitError> {
        let config = *submission.config();
        // If this thread must finish the batch itself, that is its wait.
        Completion::hand_over(
            completion,
            Handoff {
                batch,
                signal,
                last_seq: marker.seq,
                marker: Some(marker.clone()),
                wake: None,
            },
            timeout,
        )?;
        let ended = submission.stats().sync_waits.track(|| {
            marker.wait_finished(submission.device(), timeout, config.error_check_interval)
        });
        // The completion thread reported any failure already.
        submission.wait_result(ended, || WaitError::QueueFailed {
            queue: submission.id(),
        })
    }
}
