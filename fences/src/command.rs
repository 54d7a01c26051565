//! A command's handle: ask about the command or wait for it from any
//! thread, with no lock.

use crate::batch::{CommandState, Entry, StatePool};
use crate::cpu_wait;
use crate::cpu_wait::{UseWait, WaitSettings, Wakes, look};
use crate::device_state::DeviceState;
use crate::error::WaitError;
use crate::status::CommandStatus;
use crate::sync::Arc;
use crate::watch::WatchLink;
use sigretire_tracker::{Status, Ticket, Waiter, backend::SignalMemory};
use std::time::Duration;

/// A submitted command: ask about it or wait for it from any thread, with
/// no lock.
///
/// ```
/// use sigretire_queue::CommandStatus;
/// use sigretire_queue::sim::SimPlatform;
///
/// let platform = SimPlatform::stepped();
/// let device = platform.device(Default::default(), Default::default())?;
/// let command = device.default_queue().launch_empty()?; // the empty kernel
/// assert_eq!(command.status(), CommandStatus::Pending);
/// platform.sim().run_until_idle(); // the GPU runs it
/// assert_eq!(command.status(), CommandStatus::Complete);
/// assert!(!command.is_released()); // its batch is still open
/// device.default_queue().synchronize()?;
/// assert!(command.is_released());
/// # Ok::<(), sigretire_queue::Error>(())
/// ```
pub struct Command<M: SignalMemory> {
    /// The command (its status cell taken out, into `state`).
    entry: Entry,
    /// Its status cell, which its batch shares: `None` only once the
    /// handle's drop gave it back.
    state: Option<Arc<CommandState>>,
    queue: u64,
    waiter: Waiter<M>,
    device: Arc<DeviceState>,
    /// How its waits wait (the queue's policy, timeout and error-check
    /// interval; not the whole configuration, which a handle per command
    /// would copy for nothing).
    settings: WaitSettings,
    /// Where the status cell goes back if this handle is its last holder.
    states: Arc<StatePool>,
    /// Its queue, where the policy sleeps: a sleeping wait has the GPU
    /// complete one of the queue's wake signals.
    wakes: Option<QueueLink<M>>,
    /// Its queue's watch list (futures, callbacks, releases: `future`),
    /// without keeping the queue alive.
    watch: Option<WatchLink>,
}

/// A command's link to its queue's wake signals: a std `Arc` of the
/// queue's submission, so that it can be a trait object (the queue's
/// tracker type is not the command's business).
pub(crate) type QueueLink<M> = std::sync::Arc<dyn Wakes<M>>;

/// The link to `queue`: the queue's own `Arc`, with no allocation.
#[cfg(not(sigretire_loom))]
pub(crate) fn link<M: SignalMemory, Q: Wakes<M> + 'static>(queue: &Arc<Q>) -> QueueLink<M> {
    queue.clone()
}

/// The link to `queue`: loom's modelled `Arc` cannot be a trait object, so
/// the models pay one allocation per command for a std one around it.
#[cfg(sigretire_loom)]
pub(crate) fn link<M: SignalMemory, Q: Wakes<M> + 'static>(queue: &Arc<Q>) -> QueueLink<M> {
    struct Linked<Q>(Arc<Q>);
    impl<M: SignalMemory, Q: Wakes<M>> Wakes<M> for Linked<Q> {
        fn arm(
            &self,
            ticket: &Ticket,
        ) -> Result<Option<crate::wake::Armed<M>>, sigretire_tracker::Error> {
            self.0.arm(ticket)
        }
        fn released(&self) {
            self.0.released();
        }
        fn release_pending(&self) {
            self.0.release_pending();
        }
    }
    std::sync::Arc::new(Linked(queue.clone()))
}

impl<M: SignalMemory> Command<M> {
    /// A handle for `entry`, a command of queue `queue`.
    pub(crate) fn new(
        mut entry: Entry,
        queue: u64,
        waiter: Waiter<M>,
        device: Arc<DeviceState>,
        settings: WaitSettings,
        states: Arc<StatePool>,
        wakes: Option<QueueLink<M>>,
    ) -> Self {
        Self {
            state: entry.state.take(),
            entry,
            queue,
            waiter,
            device,
            settings,
            states,
            wakes,
            watch: None,
        }
    }

    /// The handle, linked to its queue's watch list.
    pub(crate) fn watching(mut self, watch: Option<WatchLink>) -> Self {
        self.watch = watch;
        self
    }

    /// Its queue's watch list, if the queue is still there.
    pub(crate) fn watch_link(&self) -> Option<&WatchLink> {
        self.watch.as_ref()
    }

    /// Its queue's id.
    pub(crate) fn queue_id(&self) -> u64 {
        self.queue
    }

    /// What its batch's completion settled (host memory, no load).
    pub(crate) fn settled_status(&self) -> CommandStatus {
        self.settled()
    }
}

impl<M: SignalMemory> Drop for Command<M> {
    fn drop(&mut self) {
        // If the batch completed and let go first, this handle is the
        // cell's last holder: the cell is pooled for a later command (also
        // when the batch lets go at this very moment, see `recycle`).
        if let Some(state) = self.state.take() {
            self.states.keep_if_last(state);
        }
    }
}

impl<M: SignalMemory> Command<M> {
    /// What its batch's completion settled (pending until then; a command
    /// is always made with a cell, so it is never missing before the drop).
    fn settled(&self) -> CommandStatus {
        self.state
            .as_ref()
            .map_or(CommandStatus::Pending, |state| state.settled())
    }

    /// The command's number on its queue (1, 2, 3... in submission order).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let first = device.default_queue().launch_empty()?;
    /// let second = device.default_queue().launch_empty()?;
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
    /// let command = device.default_queue().launch_empty()?;
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
    /// let command = device.default_queue().launch_empty()?;
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
    /// let command = device.default_queue().launch_empty()?;
    /// assert!(!command.is_released());
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn is_released(&self) -> bool {
        self.settled().is_done()
    }

    /// The command's status: settled by its batch, else from its signal
    /// (one load at most, none once the tracker knows).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let command = device.default_queue().launch_empty()?;
    /// assert_eq!(command.status(), sigretire_queue::CommandStatus::Pending);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn status(&self) -> CommandStatus {
        match self.settled() {
            CommandStatus::Pending => {
                let status = CommandStatus::from(
                    self.waiter
                        .status(&self.entry.ticket)
                        .unwrap_or(Status::Pending),
                );
                if status == CommandStatus::Failed {
                    self.queue_failed();
                }
                status
            }
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
    /// let command = device.default_queue().launch_empty()?;
    /// // The stepped GPU runs on this thread while the wait runs on another.
    /// platform.run_while(|| command.wait())?;
    /// assert_eq!(command.status(), sigretire_queue::CommandStatus::Complete);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn wait(&self) -> Result<(), WaitError> {
        self.wait_within(self.settings)
    }

    /// Waits for the command as [`wait`](Self::wait) does, but gives up
    /// after `timeout` (this call's deadline, in place of the queue's
    /// [`wait_timeout`](crate::QueueConfig::wait_timeout)) with
    /// [`WaitError::TimedOut`]: the command has not completed, and may
    /// still. Nothing was given up on: wait again, or
    /// [`status`](Self::status) later. A zero `timeout` looks once.
    ///
    /// ```
    /// use sigretire_queue::WaitError;
    /// use std::time::Duration;
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let command = device.default_queue().launch_empty()?;
    /// // Nobody runs the stepped GPU: the wait gives up after 1 ms.
    /// let timeout = Duration::from_millis(1);
    /// assert_eq!(command.wait_timeout(timeout), Err(WaitError::TimedOut(timeout)));
    /// platform.sim().run_until_idle();
    /// command.wait_timeout(timeout)?;
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn wait_timeout(&self, timeout: Duration) -> Result<(), WaitError> {
        self.wait_within(WaitSettings {
            timeout: Some(timeout),
            ..self.settings
        })
    }

    /// The wait, with `settings`.
    fn wait_within(&self, settings: WaitSettings) -> Result<(), WaitError> {
        let wait = UseWait {
            settings,
            device: &self.device,
            waiter: &self.waiter,
        };
        let ticket = &self.entry.ticket;
        let ended = wait.run(
            ticket,
            || match self.settled() {
                CommandStatus::Complete => Some(Ok(Status::Complete)),
                CommandStatus::Failed => Some(Ok(Status::Failed)),
                // Released by a device error: the wait ends on the device
                // error state, which its stop check sees.
                CommandStatus::DeviceError => None,
                CommandStatus::Pending => look(self.waiter.status(ticket)),
            },
            self.wakes.as_deref(),
        )?;
        // The wake pin, if it slept: no lock is taken after a command's wait.
        if let Some(wakes) = &self.wakes {
            wakes.release_pending();
        }
        // A handle has no queue counters to count an early return in.
        cpu_wait::result(ended, &self.device, || self.queue_failed())
    }

    /// The command failed, seen through this handle: its queue is failed
    /// for good and its tracker told, as a wait on the queue would have
    /// done, so the queue refuses new work from now on rather than once
    /// its completion thread comes to the batch. (A handle that outlived
    /// its queue has nothing to tell.) Returns the error naming the queue.
    fn queue_failed(&self) -> WaitError {
        match self.watch.as_ref().and_then(std::sync::Weak::upgrade) {
            Some(queue) => queue.report_failure(&self.entry.ticket),
            None => WaitError::QueueFailed { queue: self.queue },
        }
    }
}

impl<M: SignalMemory> core::fmt::Debug for Command<M> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Command")
            .field("queue", &self.queue)
            .field("seq", &self.entry.seq)
            .field("aql_index", &self.entry.index)
            .field("settled", &self.settled())
            .finish()
    }
}
