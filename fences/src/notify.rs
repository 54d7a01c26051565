//! Callbacks on completion, the API: [`Command::on_complete`],
//! [`Event::on_complete`], [`HostQueue::on_complete`], and what the
//! device's callbacks did ([`Device::callback_stats`]). A callback is a
//! watch on its queue's list (`watch`), run on the device's callback
//! thread (`callback`, which says why a thread of its own and never the
//! GPU stream).

#![cfg(not(sigretire_loom))]

use crate::callback::{Callback, CallbackStats};
use crate::command::Command;
use crate::device::Device;
use crate::error::SyncError;
use crate::event::Event;
use crate::future::sync_position;
use crate::publish::QueueTracker;
use crate::queue::HostQueue;
use crate::status::CommandStatus;
use crate::watch::QueueWatch;
use sigretire_tracker::{Status, Ticket, backend::SignalMemory};

/// Registers `callback` for position `seq` of `queue` and hands the
/// open batch through it to the completion machinery.
fn register(queue: std::sync::Arc<dyn QueueWatch>, seq: u64, ticket: Ticket, callback: Callback) {
    let known = queue
        .known(&ticket)
        .filter(|status| status.is_done())
        .map(CommandStatus::from);
    queue
        .watchers()
        .call(seq, ticket, known, callback, |ticket| queue.status(ticket));
    // Even when known done: a callback kept behind an older one is run
    // by its own batch's firing.
    queue.flush_through(seq);
}

impl<M: SignalMemory> Command<M> {
    /// Runs `callback` once the command completed or failed, with how
    /// it ended, on the device's callback thread: never on this thread
    /// or a waiting one, never in the GPU stream (nothing is enqueued:
    /// the stream's later work never waits for it), after the callbacks
    /// of earlier positions of the queue. At once (on that thread) if
    /// the command is already known done. A panic in it is contained and
    /// counted ([`Device::callback_stats`]).
    ///
    /// It runs with [`CommandStatus::DeviceError`] if the device error
    /// state released the command, and with [`CommandStatus::Pending`]
    /// (cancelled) only if the queue is torn down without its work ever
    /// being seen done; a queue whose last handle is dropped still runs
    /// its callbacks as its work completes.
    ///
    /// ```
    /// use sigretire_queue::CommandStatus;
    /// use sigretire_queue::sim::{CostProfile, SimPlatform};
    /// let platform = SimPlatform::threaded(CostProfile::zero());
    /// let device = platform.device(Default::default(), Default::default())?;
    /// let (done, ended) = std::sync::mpsc::channel();
    /// device.default_queue().launch_empty()?.on_complete(move |status| done.send(status).unwrap());
    /// assert_eq!(ended.recv().unwrap(), CommandStatus::Complete);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn on_complete(&self, callback: impl FnOnce(CommandStatus) + Send + 'static) {
        match self.watch_link().and_then(|link| link.upgrade()) {
            Some(queue) => register(queue, self.seq(), self.ticket(), Box::new(callback)),
            // The queue is gone (its work was seen done unless it was
            // torn down without it): a thread of its own runs it.
            None => {
                let status = self.status();
                let _ = std::thread::Builder::new()
                    .name("fences-callback".into())
                    .spawn(move || callback(status));
            }
        }
    }
}

impl<T: QueueTracker> Event<T> {
    /// Runs `callback` once the event completed or failed, as
    /// [`Command::on_complete`] does.
    ///
    /// ```
    /// use sigretire_queue::sim::{CostProfile, SimPlatform};
    /// let platform = SimPlatform::threaded(CostProfile::zero());
    /// let device = platform.device(Default::default(), Default::default())?;
    /// let (done, ended) = std::sync::mpsc::channel();
    /// device.default_queue().record_event()?.on_complete(move |status| done.send(status).unwrap());
    /// assert!(ended.recv().unwrap().is_done());
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    ///
    /// An event never recorded is complete: the callback runs on the
    /// device's callback thread with [`CommandStatus::Complete`].
    pub fn on_complete(&self, callback: impl FnOnce(CommandStatus) + Send + 'static) {
        match self.position() {
            Some((completion, seq, ticket)) => {
                let queue: std::sync::Arc<dyn QueueWatch> = completion.clone();
                register(queue, seq, ticket, Box::new(callback));
            }
            None => self
                .callbacks()
                .post(Box::new(callback), CommandStatus::Complete),
        }
    }
}

impl<T: QueueTracker> HostQueue<T> {
    /// Runs `callback` once everything submitted to the queue so far
    /// completed or failed, as [`Command::on_complete`] does. The
    /// position is taken as [`synchronize_async`](Self::synchronize_async)
    /// takes it (the newest command, or a marker published now). An
    /// `Err` (a failed queue, an aborting device) registers nothing: the
    /// callback is dropped without running.
    ///
    /// ```
    /// use sigretire_queue::sim::{CostProfile, SimPlatform};
    /// let platform = SimPlatform::threaded(CostProfile::zero());
    /// let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// queue.launch_empty()?;
    /// let (done, ended) = std::sync::mpsc::channel();
    /// queue.on_complete(move |status| done.send(status).unwrap())?;
    /// assert!(ended.recv().unwrap().is_done());
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn on_complete(
        &self,
        callback: impl FnOnce(CommandStatus) + Send + 'static,
    ) -> Result<(), SyncError> {
        let completion = self.completion();
        let queue: std::sync::Arc<dyn QueueWatch> = completion.clone();
        match sync_position(completion)? {
            Some(position) => register(queue, position.seq, position.ticket, Box::new(callback)),
            None => queue.watchers().call(
                0,
                position_none(),
                Some(CommandStatus::Complete),
                Box::new(callback),
                |_| Status::Complete,
            ),
        }
        Ok(())
    }

    /// What the device's callbacks did so far (the device's numbers).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// assert_eq!(device.default_queue().callback_stats().run, 0);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn callback_stats(&self) -> CallbackStats {
        self.completion().watchers().callbacks().stats()
    }
}

/// A ticket for a position with no use (nothing was ever submitted):
/// never looked up.
fn position_none() -> Ticket {
    Ticket {
        tracker: 0,
        seq: 0,
        slot: 0,
        generation: 0,
        flags: 0,
    }
}

impl<T: QueueTracker> Device<T> {
    /// What the device's callbacks did so far: how many ran, panicked
    /// (contained), or were cancelled, and the latest panic's message.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// assert_eq!(device.callback_stats(), Default::default());
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn callback_stats(&self) -> CallbackStats {
        self.default_queue().callback_stats()
    }
}
