//! Moving the stream to another hardware queue
//! ([`HostQueue::move_to`](crate::HostQueue::move_to)): later commands are
//! published there, in a new generation of the tracker, and the first of
//! them waits, on the GPU, for what the old queue still runs.

use crate::completion::Completion;
use crate::error::{Fault, MoveError};
use crate::frontier::Verdict;
use crate::publish::{Packet, QueueTracker, Step};
use crate::submission::{Held, Submission};
use crate::sync::Arc;
use sigretire_tracker::{
    Purpose, Ticket, Work,
    backend::{QueueView, SignalMemory},
};

/// Moves the stream to `queue`. Publishes nothing itself, unless a marker
/// on the old queue must cover work the layer did not publish: the next
/// packet on the new queue is preceded by a wait for the old queue's newest
/// command (or that marker), if that may still run. A failed old queue
/// refuses the move: work after it in stream order may not run as if it
/// had not.
pub(crate) fn move_to<T: QueueTracker>(
    submission: &Arc<Submission<T>>,
    completion: &Arc<Completion<T>>,
    queue: T::Queue,
) -> Result<(), MoveError> {
    let memory_domain = submission.memory().signal_domain();
    if let (Some(memory), Some(reached)) = (memory_domain, queue.signal_domain())
        && memory != reached
    {
        // Its packets could never name the tracker's signals.
        return Err(MoveError::ForeignSignalMemory);
    }
    let finished = Completion::publish(completion, |held| {
        // Moved before with nothing published since, the stream still owes
        // the queue before: that debt stands, unless work of someone else's
        // landed on the queue it leaves now, which a marker there (paying
        // the old debt first) must cover too.
        if held.publisher().owes_more_order() {
            let owed = match owed_by_old_queue(held)?.map(Step::or_retry) {
                None => None,
                Some(Ok(owed)) => Some(owed),
                Some(Err(retry)) => return Ok(retry),
            };
            if let Some(owed) = owed
                && let Err(failed) = held.publisher().owe_order_wait(&owed)?
            {
                return Err(submission.report_failure(&failed).into());
            }
        }
        Ok(Step::Done(
            held.publisher().move_to(queue.clone(), submission.stats()),
        ))
    })?;
    // The queues left earlier run nothing of the stream any more; their
    // handles go after the lock is released, as dropping one may wait for
    // the GPU.
    drop(finished);
    Ok(())
}

/// What a new hardware queue must wait for before the stream's next packet
/// runs there (under the lock): the old queue's newest command where it
/// stands for everything on that queue (or failed: the move then fails);
/// else a marker published after everything there now (the runtime's own
/// packets, a partly refused command's issued work). `None`: nothing was
/// ever published there.
fn owed_by_old_queue<T: QueueTracker>(
    held: &mut Held<'_, T>,
) -> Result<Option<Step<Ticket>>, Fault> {
    if planted!(QueueMoveOwesNothing) {
        return Ok(None);
    }
    match held.publisher().verdict_known()? {
        Verdict::Idle => return Ok(None),
        // A failed one is refused when it is pinned: the stream's work
        // failed, and what follows it in order may not run as if not.
        Verdict::Done(newest)
        | Verdict::Failed(newest)
        | Verdict::Running {
            newest,
            stands: true,
        } => return Ok(Some(Step::Done(newest.ticket))),
        Verdict::Running { stands: false, .. } | Verdict::Unknown => {}
    }
    let packet = Packet::new(Work::Marker, Purpose::GpuWaiter);
    let published = match held.publish(packet)?.or_retry() {
        Ok(published) => published,
        Err(retry) => return Ok(Some(retry)),
    };
    let ticket = published.entry.ticket;
    held.push(published.entry, true);
    Ok(Some(Step::Done(ticket)))
}
