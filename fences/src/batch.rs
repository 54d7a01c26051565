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

use crate::cpu_wait::{self, Outcome, WaitEnd, WaitSettings};
use crate::device_state::DeviceState;
use crate::error::Error;
use crate::recycle::Pool;
use crate::sync::{Arc, AtomicU8, Ordering};
use sigretire_tracker::{SignalMemory, Status, Ticket, WaitError, WaitPolicy, Waiter};
use std::time::Duration;

/// What is known about a command.
///
/// ```
/// use sigretire_queue::CommandStatus;
/// assert!(CommandStatus::Complete.is_done());
/// assert!(!CommandStatus::Pending.is_done());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CommandStatus {
    /// Not shown to be complete yet.
    Pending,
    /// The command's work completed.
    Complete,
    /// The command's work failed (a queue error).
    Failed,
    /// The device entered the error state before the command was seen
    /// complete; its batch was released without completion (the GPU may
    /// still run it).
    DeviceError,
}

impl CommandStatus {
    /// Whether the command reached a final state: complete, failed, or
    /// released by a device error (only `Pending` may still change).
    ///
    /// ```
    /// use sigretire_queue::CommandStatus;
    /// assert!(!CommandStatus::Pending.is_done());
    /// assert!(CommandStatus::Complete.is_done());
    /// assert!(CommandStatus::Failed.is_done());
    /// assert!(CommandStatus::DeviceError.is_done());
    /// ```
    pub const fn is_done(self) -> bool {
        !matches!(self, CommandStatus::Pending)
    }

    const fn code(self) -> u8 {
        match self {
            CommandStatus::Pending => 0,
            CommandStatus::Complete => 1,
            CommandStatus::Failed => 2,
            CommandStatus::DeviceError => 3,
        }
    }

    const fn from_code(code: u8) -> Self {
        match code {
            1 => CommandStatus::Complete,
            2 => CommandStatus::Failed,
            3 => CommandStatus::DeviceError,
            _ => CommandStatus::Pending,
        }
    }

    pub(crate) const fn from_status(status: Status) -> Self {
        match status {
            Status::Pending => CommandStatus::Pending,
            Status::Complete => CommandStatus::Complete,
            Status::Failed => CommandStatus::Failed,
        }
    }
}

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
    pub(crate) state: Arc<CommandState>,
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

    /// Completes the batch: settles every command by the outcome of the
    /// fence that ends it (its last command). A completed fence proves
    /// every command complete; otherwise each command is asked about (one
    /// load at most) so only real completions are reported. A command still
    /// pending when the fence failed failed with it only if it ran on the
    /// fence's hardware queue: one the stream left before is settled by its
    /// own signal, and stays unsettled here.
    pub(crate) fn complete<M: SignalMemory>(&self, outcome: &Outcome, waiter: &Waiter<M>) {
        let fence_queue = self.entries.last().map(|fence| fence.hardware_queue);
        for entry in &self.entries {
            let status = match outcome {
                Outcome::Complete => CommandStatus::Complete,
                Outcome::Failed | Outcome::DeviceError(_) => {
                    match waiter.status(&entry.ticket).unwrap_or(Status::Pending) {
                        Status::Complete => CommandStatus::Complete,
                        Status::Failed => CommandStatus::Failed,
                        Status::Pending if matches!(outcome, Outcome::Failed) => {
                            if Some(entry.hardware_queue) != fence_queue {
                                continue;
                            }
                            CommandStatus::Failed
                        }
                        Status::Pending => CommandStatus::DeviceError,
                    }
                }
            };
            entry.state.settle(status);
        }
    }
}

/// A submitted command: ask about it or wait for it from any thread, with
/// no lock.
///
/// ```
/// use sigretire_queue::CommandStatus;
/// use sigretire_queue::sim::SimPlatform;
///
/// let platform = SimPlatform::stepped();
/// let device = platform.device(Default::default(), Default::default())?;
/// let command = device.default_queue().launch(0)?; // the empty kernel
/// assert_eq!(command.status(), CommandStatus::Pending);
/// platform.sim().run_until_idle(); // the GPU runs it
/// assert_eq!(command.status(), CommandStatus::Complete);
/// assert!(!command.is_released()); // its batch is still open
/// device.default_queue().synchronize()?;
/// assert!(command.is_released());
/// # Ok::<(), sigretire_queue::Error>(())
/// ```
pub struct Command<M: SignalMemory> {
    pub(crate) entry: Entry,
    pub(crate) queue: u64,
    pub(crate) waiter: Waiter<M>,
    pub(crate) device: Arc<DeviceState>,
    /// How its waits wait (the queue's policy, timeout and error-check
    /// interval; not the whole configuration, which a handle per command
    /// would copy for nothing).
    pub(crate) settings: WaitSettings,
    /// Where the status cell goes back if this handle is its last holder.
    pub(crate) states: Arc<StatePool>,
    /// Its queue, where the policy sleeps: a sleeping wait has the GPU
    /// complete one of the queue's wake signals.
    pub(crate) sleeper: Option<QueueLink<M>>,
}

/// A command's link to its queue's sleeping waits: a std `Arc` of the
/// queue, so that it can be a trait object (the queue's tracker type is not
/// the command's business).
pub(crate) type QueueLink<M> = std::sync::Arc<dyn SleepingWaits<M>>;

/// The link to `queue`: the queue's own `Arc`, with no allocation.
#[cfg(not(sigretire_loom))]
pub(crate) fn link<M: SignalMemory, Q: SleepingWaits<M> + 'static>(queue: &Arc<Q>) -> QueueLink<M> {
    queue.clone()
}

/// The link to `queue`: loom's modelled `Arc` cannot be a trait object, so
/// the models pay one allocation per command for a std one around it.
#[cfg(sigretire_loom)]
pub(crate) fn link<M: SignalMemory, Q: SleepingWaits<M> + 'static>(queue: &Arc<Q>) -> QueueLink<M> {
    struct Linked<Q>(Arc<Q>);
    impl<M: SignalMemory, Q: SleepingWaits<M>> SleepingWaits<M> for Linked<Q> {
        fn wait_sleeping(
            &self,
            ticket: &Ticket,
            wait_slice: &mut dyn FnMut(Duration, WaitPolicy) -> Result<Status, WaitError>,
        ) -> Result<WaitEnd, Error> {
            self.0.wait_sleeping(ticket, wait_slice)
        }
    }
    std::sync::Arc::new(Linked(queue.clone()))
}

/// A queue's waits that sleep on its wake signals, for a command's handle
/// (which knows its memory, not its tracker).
pub(crate) trait SleepingWaits<M: SignalMemory>: Send + Sync {
    /// Waits for `ticket`'s use with `wait_slice` (a tracker wait bounded
    /// by its first argument), sleeping after the policy's spin.
    fn wait_sleeping(
        &self,
        ticket: &Ticket,
        wait_slice: &mut dyn FnMut(Duration, WaitPolicy) -> Result<Status, WaitError>,
    ) -> Result<WaitEnd, Error>;
}

impl<M: SignalMemory> Drop for Command<M> {
    fn drop(&mut self) {
        // If the batch completed and let go first, this handle is the
        // cell's last holder: the cell is pooled for a later command.
        self.states.keep_if_last_in_place(&mut self.entry.state);
    }
}

impl<M: SignalMemory> Command<M> {
    /// The command's number on its queue (1, 2, 3... in submission order).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let first = device.default_queue().launch(0)?;
    /// let second = device.default_queue().launch(0)?;
    /// assert_eq!((first.seq(), second.seq()), (1, 2));
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn seq(&self) -> u64 {
        self.entry.seq
    }

    /// The AQL index of the command's packet.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let command = device.default_queue().launch(0)?;
    /// assert_eq!(command.aql_index(), 0);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn aql_index(&self) -> u64 {
        self.entry.index
    }

    /// The tracker's ticket for the command's signal use.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let command = device.default_queue().launch(0)?;
    /// assert_eq!(command.ticket().seq(), 1);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn ticket(&self) -> Ticket {
        self.entry.ticket
    }

    /// Whether the command's batch was completed (its status settled on the
    /// host side).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let command = device.default_queue().launch(0)?;
    /// assert!(!command.is_released());
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn is_released(&self) -> bool {
        self.entry.state.settled().is_done()
    }

    /// The command's status: settled by its batch, else from its signal
    /// (one load at most, none once the tracker knows).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let command = device.default_queue().launch(0)?;
    /// assert_eq!(command.status(), sigretire_queue::CommandStatus::Pending);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn status(&self) -> CommandStatus {
        match self.entry.state.settled() {
            CommandStatus::Pending => CommandStatus::from_status(
                self.waiter
                    .status(&self.entry.ticket)
                    .unwrap_or(Status::Pending),
            ),
            settled => settled,
        }
    }

    /// Waits for the command, holding no lock, until it completes, fails, or
    /// its batch is released by a device error; bounded by the queue's
    /// [`wait_timeout`](crate::QueueConfig::wait_timeout).
    ///
    /// ```
    /// use sigretire_queue::sim::SimPlatform;
    /// let platform = SimPlatform::stepped();
    /// let device = platform.device(Default::default(), Default::default())?;
    /// let command = device.default_queue().launch(0)?;
    /// // The stepped GPU runs on this thread while the wait runs on another.
    /// platform.run_while(|| command.wait())?;
    /// assert_eq!(command.status(), sigretire_queue::CommandStatus::Complete);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn wait(&self) -> Result<(), Error> {
        let mut wait_slice = |slice, policy| {
            match self.entry.state.settled() {
                CommandStatus::Pending => {}
                CommandStatus::Complete => return Ok(Status::Complete),
                CommandStatus::Failed => return Ok(Status::Failed),
                // Released by a device error: end the wait below.
                CommandStatus::DeviceError => {
                    return Err(sigretire_tracker::TimedOut(slice).into());
                }
            }
            self.waiter.wait(&self.entry.ticket, slice, policy)
        };
        let end = match &self.sleeper {
            Some(queue) => queue.wait_sleeping(&self.entry.ticket, &mut wait_slice)?,
            None => cpu_wait::wait_for(wait_slice, &self.device, &self.settings)?,
        };
        // A handle has no queue counters to count an early return in.
        end.into_result(None, || Error::QueueFailed { queue: self.queue })
    }
}

impl<M: SignalMemory> core::fmt::Debug for Command<M> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Command")
            .field("queue", &self.queue)
            .field("seq", &self.entry.seq)
            .field("aql_index", &self.entry.index)
            .field("settled", &self.entry.state.settled())
            .finish()
    }
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
            state: Arc::new(CommandState::default()),
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
