//! Submission batches and the commands in them.
//!
//! Every packet the queue publishes with a completion signal is a command,
//! numbered in submission order, and joins the queue's open batch. A batch
//! is *completed* when the fence that ends it (a marker, an event's marker,
//! or its last command: every packet carries the barrier bit) is known done:
//! each command's host-side status is settled and its waiters are released.
//! A batch closes after [`BatchLimits`](crate::BatchLimits) commands and
//! completes through the completion thread; synchronize and event
//! synchronize complete the part before their marker themselves.
//!
//! When the fence failed or the device entered the error state, the batch is
//! still completed, but each command is settled with what is actually known
//! about it (complete, failed, or abandoned by the device error): nothing is
//! ever reported complete that did not complete.

use crate::marker::Marker;
use crate::recycle::Pool;
use crate::status::CommandStatus;
use crate::sync::{Arc, AtomicU8, Ordering};
use crate::wake::Armed;
use sigretire_tracker::{SignalRef, Status, Ticket, Waiter, backend::SignalMemory};

/// The status cells of one queue's commands, for reuse (see `recycle`).
pub(crate) type StatePool = Pool<Arc<CommandState>>;

/// The host-side status a command's batch completion settles.
#[derive(Debug, Default)]
pub(crate) struct CommandState {
    status: AtomicU8,
}

impl CommandState {
    /// Settles the command (once; later calls change nothing).
    pub(crate) fn settle(&self, status: CommandStatus) {
        let _ = self.status.compare_exchange(
            CommandStatus::Pending.code(),
            status.code(),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    pub(crate) fn settled(&self) -> CommandStatus {
        CommandStatus::from_code(self.status.load(Ordering::Acquire))
    }
}

/// One command in a batch.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) seq: u64,
    pub(crate) index: u64,
    pub(crate) ticket: Ticket,
    /// Its timestamps are harvested when its batch's timing is processed.
    pub(crate) timed: bool,
    /// The hardware queue it was published on: the stream's count of moves
    /// then (a failure there says nothing of another's commands).
    pub(crate) hardware_queue: u32,
    /// The status cell its handle and the batch share; `None` for a packet
    /// no handle is made for (an event's, a synchronize's or a query's
    /// marker, a move's order wait): nothing would read it.
    pub(crate) state: Option<Arc<CommandState>>,
}

/// Commands in submission order, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    entries: Vec<Entry>,
}

impl Batch {
    pub(crate) fn push(&mut self, entry: Entry) {
        self.entries.push(entry);
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn last(&self) -> Option<&Entry> {
        self.entries.last()
    }

    pub(crate) fn last_mut(&mut self) -> Option<&mut Entry> {
        self.entries.last_mut()
    }

    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Takes the whole batch, leaving an empty one that fills `buffer`
    /// (empty; a recycled one keeps its capacity, so the next commands
    /// need no allocation).
    pub(crate) fn take(&mut self, buffer: Vec<Entry>) -> Batch {
        debug_assert!(buffer.is_empty());
        Batch {
            entries: core::mem::replace(&mut self.entries, buffer),
        }
    }

    /// Takes the commands up to and including `seq`, leaving the rest, moved
    /// into `buffer` (empty, as for [`take`](Self::take)).
    pub(crate) fn split_through(&mut self, seq: u64, mut buffer: Vec<Entry>) -> Batch {
        debug_assert!(buffer.is_empty());
        let at = self.entries.partition_point(|e| e.seq <= seq);
        buffer.extend(self.entries.drain(at..));
        Batch {
            entries: core::mem::replace(&mut self.entries, buffer),
        }
    }

    /// The batch's entries, for recycling once it is completed.
    pub(crate) fn into_entries(self) -> Vec<Entry> {
        self.entries
    }

    /// Completes the batch: settles every command by how the fence that
    /// ends it (its last command) ended: `Complete`, `Failed`, or
    /// `DeviceError` (released by the device error state). A completed
    /// fence proves every command complete; otherwise each command is asked
    /// about (one load at most) so only real completions are reported. A
    /// command still pending when the fence failed failed with it only if
    /// it ran on the fence's hardware queue: one the stream left before is
    /// settled by its own signal, and stays unsettled here.
    ///
    /// `first_failure` is called with the ticket of the first command of
    /// a handle it settles failed, before that command is settled (a batch released by
    /// a device error may hold one, and its queue is then failed as well:
    /// before anyone can see the command failed and submit more).
    pub(crate) fn complete<M: SignalMemory>(
        &self,
        outcome: CommandStatus,
        waiter: &Waiter<M>,
        first_failure: impl FnOnce(&Ticket),
    ) {
        let fence_queue = self.entries.last().map(|fence| fence.hardware_queue);
        let mut first_failure = Some(first_failure);
        for entry in &self.entries {
            let status = match outcome {
                // Not ended: nothing to settle.
                CommandStatus::Pending => return,
                CommandStatus::Complete => CommandStatus::Complete,
                CommandStatus::Failed | CommandStatus::DeviceError => {
                    match waiter.status(&entry.ticket).unwrap_or(Status::Pending) {
                        Status::Complete => CommandStatus::Complete,
                        Status::Failed => CommandStatus::Failed,
                        Status::Pending if outcome == CommandStatus::Failed => {
                            if Some(entry.hardware_queue) != fence_queue {
                                continue;
                            }
                            CommandStatus::Failed
                        }
                        Status::Pending => CommandStatus::DeviceError,
                    }
                }
            };
            // Only a command with a handle: one failed means its hardware
            // queue failed (a command refused in part keeps no cell, and
            // the tracker's verdict on it says nothing of the queue).
            if let Some(state) = &entry.state {
                if status == CommandStatus::Failed
                    && let Some(report) = first_failure.take()
                {
                    report(&entry.ticket);
                }
                state.settle(status);
            }
        }
    }
}

/// A batch that left the open batch to be completed when the fence that
/// ends it completes: closed at its limit, a synchronize's, or the last
/// handle's.
pub(crate) struct Handoff<M: SignalMemory> {
    pub(crate) batch: Batch,
    /// The fence's signal; `None` when it was already known complete.
    pub(crate) signal: Option<SignalRef<M>>,
    /// The batch's last command (the fence).
    pub(crate) last_seq: u64,
    /// The synchronize waiting for this batch's verdict, if any.
    pub(crate) marker: Option<Arc<Marker>>,
    /// A wake signal whose packet completes with the fence, for the
    /// completion thread to sleep on; `None` if none was free.
    pub(crate) wake: Option<Armed<M>>,
}

#[cfg(all(test, feature = "sim"))]
mod tests {
    use super::*;

    fn entry(seq: u64) -> Entry {
        // A ticket is only an identifier; these are never looked up.
        let (mut tracker, queue) =
            sigretire_sim::backend::stepped_tracker(Default::default()).unwrap();
        let index = queue.reserve().unwrap();
        let acquired = sigretire_tracker::Tracker::acquire(
            &mut tracker,
            sigretire_tracker::Request::packet(index),
        )
        .unwrap();
        Entry {
            seq,
            index,
            ticket: acquired.ticket,
            timed: false,
            hardware_queue: 0,
            state: Some(Arc::new(CommandState::default())),
        }
    }

    #[test]
    fn split_through_takes_the_prefix() {
        let mut batch = Batch::default();
        for seq in 1..=5 {
            batch.push(entry(seq));
        }
        let head = batch.split_through(3, Vec::with_capacity(8));
        assert_eq!(
            head.entries().iter().map(|e| e.seq).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert_eq!(
            batch.entries().iter().map(|e| e.seq).collect::<Vec<_>>(),
            [4, 5]
        );
        // The rest went into the buffer given: its capacity is kept.
        assert!(batch.entries.capacity() >= 8);
        assert_eq!(batch.split_through(0, Vec::new()).len(), 0);
        assert_eq!(batch.split_through(99, Vec::new()).len(), 2);
        assert_eq!(batch.len(), 0);
    }

    #[test]
    fn a_command_settles_once() {
        let state = CommandState::default();
        assert_eq!(state.settled(), CommandStatus::Pending);
        state.settle(CommandStatus::DeviceError);
        state.settle(CommandStatus::Complete);
        assert_eq!(state.settled(), CommandStatus::DeviceError);
    }
}
