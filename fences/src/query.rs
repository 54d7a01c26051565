//! A queue's query (`hipStreamQuery`): whether everything submitted so far
//! completed, from what is known (the frontier's verdict on the newest
//! command, one load at most; where that knows nothing, the hardware's own
//! answer if the backend has one), else from a marker published after
//! everything, which then answers the queries after it too while nothing
//! else follows.

use crate::completion::Completion;
use crate::error::{Fault, SyncError};
use crate::frontier::Verdict;
use crate::publish::{Packet, QueueTracker, Step};
use crate::submission::{Held, Submission};
use crate::sync::Arc;
use sigretire_tracker::{Purpose, Status, Ticket, Work};

/// How a query is answered under the lock.
enum Answer {
    /// From the newest command (its ticket; `None`: nothing ever ran).
    Known(Status, Option<Ticket>),
    /// From a marker published now.
    Marker,
}

/// The queue's answer from what it knows (under the lock), or the need for
/// a marker.
fn known<T: QueueTracker>(held: &mut Held<'_, T>) -> Result<Answer, Fault> {
    // Failed or still running, the newest command answers for the stream
    // whatever follows it; complete, only if nothing does.
    Ok(match held.publisher().verdict_loaded()? {
        Verdict::Idle => Answer::Known(Status::Complete, None),
        Verdict::Done(newest) => Answer::Known(Status::Complete, Some(newest.ticket)),
        Verdict::Running { newest, .. } => Answer::Known(Status::Pending, Some(newest.ticket)),
        Verdict::Failed(newest) => Answer::Known(Status::Failed, Some(newest.ticket)),
        // Where work the layer did not publish may run, the hardware's own
        // answer (if it has one) covers it; else a marker after it does.
        Verdict::Unknown => match held.publisher().hardware_status() {
            Some(status) => Answer::Known(status, None),
            None => Answer::Marker,
        },
    })
}

/// Whether everything submitted to the queue so far completed. Takes the
/// lock briefly unless a completed marker already covers everything
/// submitted; a failure puts the device in the error state. Never waits
/// for the GPU: a marker that cannot be published at once answers Pending.
pub(crate) fn query<T: QueueTracker>(
    submission: &Arc<Submission<T>>,
    completion: &Arc<Completion<T>>,
) -> Result<Status, SyncError> {
    if submission.all_done_without_lock() {
        return Ok(Status::Complete);
    }
    // Known without a marker: answered without asking whether the device
    // accepts work (a failed device still answers queries).
    let known_now = match known(&mut submission.lock())? {
        Answer::Known(status, ticket) => Some((status, ticket)),
        Answer::Marker => None,
    };
    let (status, ticket) = match known_now {
        Some(known_now) => known_now,
        None => Completion::publish(completion, |held| {
            Ok(match known(held)? {
                Answer::Known(status, ticket) => Step::Done((status, ticket)),
                Answer::Marker => {
                    // Nothing the layer published stands for the queue: a
                    // marker after everything on it does.
                    let packet = Packet::new(Work::Marker, Purpose::CpuSync);
                    let published = match held.publish(packet)?.or_retry::<()>() {
                        Ok(published) => published,
                        // A query never waits: the tracker named a use to
                        // wait for (one of this queue's, pending) or the
                        // ring is full (the GPU has packets to consume):
                        // either way the queue is busy.
                        Err(_busy) => return Ok(Step::Done((Status::Pending, None))),
                    };
                    let ticket = published.entry.ticket;
                    held.push(published.entry, true);
                    let status = held.tracker().query(&ticket).map_err(Fault::from)?;
                    Step::Done((status, Some(ticket)))
                }
            })
        })?,
    };
    if status == Status::Failed
        && let Some(ticket) = ticket
    {
        submission.report_failure(&ticket);
    }
    Ok(status)
}
