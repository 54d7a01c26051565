//! Futures: commands, events and queue synchronization awaited on any
//! executor ([`Command::wait_async`](crate::Command::wait_async),
//! [`Event::wait_async`](crate::Event::wait_async),
//! [`HostQueue::synchronize_async`](crate::HostQueue::synchronize_async)).
//!
//! A pending future costs no thread and no CPU. Its first poll registers a
//! [`std::task::Waker`] slot on its queue's watch list (`watch`) and makes
//! sure the batch holding its position has left the open batch, so the
//! queue's completion machinery will complete it: the device's completion
//! thread, which already sleeps on a wake signal that the GPU completes
//! right behind the batch's fence (or any thread that completes the batch
//! first: a synchronize, an event synchronize). Completing the batch fires
//! the watch list, which settles the slot and wakes the task: the waking
//! thread is whichever completed the batch, usually the completion thread.
//!
//! # Cancellation
//!
//! Dropping a pending future removes its slot from the list (one lock, no
//! GPU interaction): nothing stays registered, pinned or armed for it. The
//! batch it flushed is completed as any other batch would be. So a future
//! can be raced against a timer (`tokio::time::timeout`, `select!`): the
//! futures take no deadline of their own and the queue's
//! [`wait_timeout`](crate::QueueConfig::wait_timeout) does not bound them
//! (nothing would poll them at the deadline without an executor timer);
//! compose with the executor's timeout instead, which is exactly a
//! blocking call's `TimedOut`: the work has not completed, and may still.
//!
//! # Errors
//!
//! A future ends with the blocking call's typed error: a failed queue's
//! `QueueFailed`, the device error state's `DeviceError` or `Aborted`
//! (the completion thread releases every batch it holds when the device
//! enters the error state, which fires their watches).
//!
//! # Limits
//!
//! A waker is woken on the thread that completed the batch; like any
//! waker it must not poll the task inline. If the completion thread cannot
//! start (the OS refuses a thread), a batch handed to it is abandoned as
//! any closed batch is, and its futures stay pending.

// Under loom only the watch list is built: the queue-facing half needs
// weak references, which the modelled `Arc` lacks.
#![cfg_attr(sigretire_loom, allow(unused_imports, dead_code))]

use crate::batch::Handoff;
use crate::command::Command;
use crate::completion::Completion;
use crate::cpu_wait;
use crate::error::{Fault, SyncError, WaitError};
use crate::event::Event;
use crate::frontier::Verdict;
use crate::publish::{Packet, QueueTracker, Step};
use crate::queue::HostQueue;
use crate::status::CommandStatus;
use crate::sync::Arc;
use crate::watch::{Position, QueueWatch, Slot, Watchers};
use sigretire_tracker::{Purpose, Status, Ticket, Work};
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};

impl<T: QueueTracker> QueueWatch for Completion<T> {
    fn watchers(&self) -> &Watchers {
        self.watchers()
    }

    fn status(&self, ticket: &Ticket) -> Status {
        self.submission()
            .waiter()
            .status(ticket)
            .unwrap_or(Status::Pending)
    }

    fn known(&self, ticket: &Ticket) -> Option<Status> {
        self.submission()
            .waiter()
            .known_status(ticket)
            .ok()
            .flatten()
    }

    #[cfg(not(sigretire_loom))]
    fn flush_through(self: std::sync::Arc<Self>, seq: u64) {
        let submission = self.submission();
        let progress = submission.progress();
        if progress.taken_through() >= seq {
            return;
        }
        let handoff = {
            let mut held = submission.lock();
            if progress.taken_through() >= seq {
                return;
            }
            let batch = held.take_batch_through(seq);
            let Some(last) = batch.last() else {
                return;
            };
            let (last_seq, ticket) = (last.seq, last.ticket);
            // As a batch closed at its limit: the completion thread holds
            // the fence's signal and sleeps on a wake signal behind it.
            let signal = held.tracker().hold(&ticket).ok().flatten();
            let wake = match signal {
                Some(_) => held.arm_wake(&ticket).ok().flatten(),
                None => None,
            };
            progress.note_taken(last_seq);
            Handoff {
                batch,
                signal,
                last_seq,
                marker: None,
                wake,
            }
        };
        Completion::dispatch(&self, &mut vec![handoff]);
    }

    #[cfg(sigretire_loom)]
    fn flush_through(self: std::sync::Arc<Self>, _: u64) {}

    fn result(&self, outcome: CommandStatus, ticket: &Ticket) -> Result<(), WaitError> {
        let submission = self.submission();
        cpu_wait::result(Ok(outcome), submission.device(), || {
            submission.report_failure(ticket)
        })
    }

    fn report_failure(&self, ticket: &Ticket) -> WaitError {
        self.submission().report_failure(ticket)
    }
}

/// The position a synchronize issued now waits for: the newest command if
/// it stands for the queue, else a marker published now; `None` when
/// nothing can still run. Publishing may wait for room as a launch does.
#[cfg(not(sigretire_loom))]
pub(crate) fn sync_position<T: QueueTracker>(
    completion: &Arc<Completion<T>>,
) -> Result<Option<Position>, SyncError> {
    if completion.submission().all_done_without_lock() {
        return Ok(None);
    }
    Completion::publish(completion, |held| {
        if matches!(held.publisher().verdict_loaded()?, Verdict::Idle) {
            return Ok(Step::Done(None));
        }
        if let Some(newest) = held.share_newest(false)? {
            return Ok(Step::Done(Some(Position {
                seq: newest.seq,
                ticket: newest.ticket,
            })));
        }
        let packet = Packet::new(Work::Marker, Purpose::CpuSync);
        let published = match held.publish(packet)?.or_retry() {
            Ok(published) => published,
            Err(retry) => return Ok(retry),
        };
        let position = Position {
            seq: published.entry.seq,
            ticket: published.entry.ticket,
        };
        held.push(published.entry, true);
        Ok::<_, Fault>(Step::Done(Some(position)))
    })
    .map_err(SyncError::from)
}

/// A future of one queue position: resolves once the position's batch
/// completed, with the blocking wait's result.
///
/// Made by [`Command::wait_async`], [`Event::wait_async`] (or `.await` on
/// a `&Command` / `&Event`); [`SyncFuture`] wraps one for
/// [`HostQueue::synchronize_async`]. Lazy: nothing happens until the
/// first poll. `Send`, `Unpin`; see the module docs of the crate's
/// `future` for who wakes it and how dropping it cancels.
///
/// ```
/// use sigretire_queue::sim::{CostProfile, SimPlatform};
/// let platform = SimPlatform::threaded(CostProfile::zero());
/// let device = platform.device(Default::default(), Default::default())?;
/// let command = device.default_queue().launch_empty()?;
/// pollster::block_on(command.wait_async())?;
/// assert!(command.status().is_done());
/// # Ok::<(), sigretire_queue::Error>(())
/// ```
#[must_use = "a future does nothing unless polled"]
pub struct WaitFuture {
    state: State,
}

enum State {
    /// Answered without the queue (or already returned: `None`).
    Ready(Option<Result<(), WaitError>>),
    /// Not polled yet.
    Idle {
        queue: std::sync::Arc<dyn QueueWatch>,
        position: Position,
    },
    /// Registered on the queue's watch list under `key`.
    Watching {
        queue: std::sync::Arc<dyn QueueWatch>,
        position: Position,
        slot: Arc<Slot>,
        key: u64,
    },
}

impl WaitFuture {
    pub(crate) fn ready(result: Result<(), WaitError>) -> Self {
        Self {
            state: State::Ready(Some(result)),
        }
    }

    pub(crate) fn new(queue: std::sync::Arc<dyn QueueWatch>, position: Position) -> Self {
        Self {
            state: State::Idle { queue, position },
        }
    }
}

impl Future for WaitFuture {
    type Output = Result<(), WaitError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let outcome = match &this.state {
            State::Ready(result) => {
                return Poll::Ready(
                    result
                        .clone()
                        .expect("a WaitFuture polled after it returned"),
                );
            }
            State::Idle { queue, position } => {
                let (queue, position) = (queue.clone(), *position);
                // Host knowledge only: no signal is read for a future (the
                // batch's proof settles it).
                let status = queue.known(&position.ticket).unwrap_or(Status::Pending);
                if status.is_done() {
                    // Done: its batch is completed now if nobody took it
                    // yet (values released up to it are dropped).
                    queue.clone().flush_through(position.seq);
                    Some((queue, position, CommandStatus::from(status)))
                } else {
                    let slot = Arc::new(Slot::new(cx.waker().clone()));
                    let registered = queue.watchers().watch(
                        position.seq,
                        position.ticket,
                        slot.clone(),
                        |ticket| queue.status(ticket),
                    );
                    match registered {
                        Err(outcome) => Some((queue, position, outcome)),
                        Ok(key) => {
                            // After registering: a batch completed by the
                            // flush itself (its fence already done) fires
                            // this slot.
                            queue.clone().flush_through(position.seq);
                            let outcome = slot.poll(cx.waker());
                            this.state = State::Watching {
                                queue: queue.clone(),
                                position,
                                slot,
                                key,
                            };
                            outcome.map(|outcome| (queue, position, outcome))
                        }
                    }
                }
            }
            State::Watching {
                queue,
                position,
                slot,
                ..
            } => slot
                .poll(cx.waker())
                .map(|outcome| (queue.clone(), *position, outcome)),
        };
        match outcome {
            None => Poll::Pending,
            Some((queue, position, outcome)) => {
                let result = queue.result(outcome, &position.ticket);
                this.state = State::Ready(None);
                Poll::Ready(result)
            }
        }
    }
}

impl Drop for WaitFuture {
    fn drop(&mut self) {
        if let State::Watching {
            queue,
            position,
            key,
            ..
        } = &self.state
        {
            // Settled or not: the key is gone from the list once fired.
            queue.watchers().cancel(position.seq, *key);
        }
    }
}

impl core::fmt::Debug for WaitFuture {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let state = match &self.state {
            State::Ready(Some(_)) => "ready",
            State::Ready(None) => "returned",
            State::Idle { .. } => "not polled",
            State::Watching { .. } => "watching",
        };
        f.debug_struct("WaitFuture").field("state", &state).finish()
    }
}

/// A queue's synchronize as a future ([`HostQueue::synchronize_async`]):
/// everything submitted before the call completed.
///
/// ```
/// use sigretire_queue::sim::{CostProfile, SimPlatform};
/// let platform = SimPlatform::threaded(CostProfile::zero());
/// let device = platform.device(Default::default(), Default::default())?;
/// let queue = device.default_queue();
/// let command = queue.launch_empty()?;
/// pollster::block_on(queue.synchronize_async())?;
/// assert!(command.status().is_done());
/// # Ok::<(), sigretire_queue::Error>(())
/// ```
#[must_use = "a future does nothing unless polled"]
#[derive(Debug)]
pub struct SyncFuture {
    inner: Result<WaitFuture, Option<SyncError>>,
}

impl Future for SyncFuture {
    type Output = Result<(), SyncError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.inner {
            Ok(wait) => Pin::new(wait).poll(cx).map_err(SyncError::from),
            Err(error) => Poll::Ready(Err(error
                .take()
                .expect("a SyncFuture polled after it returned"))),
        }
    }
}

impl<M: sigretire_tracker::backend::SignalMemory> Command<M> {
    /// A future of the command: resolves as [`wait`](Self::wait) returns,
    /// with no thread waiting (see [`WaitFuture`]). `(&command).await` is
    /// the same.
    ///
    /// Nothing bounds it in time: race it against the executor's timer
    /// (dropping it cancels it cleanly).
    ///
    /// ```
    /// use sigretire_queue::sim::{CostProfile, SimPlatform};
    /// let platform = SimPlatform::threaded(CostProfile::zero());
    /// let device = platform.device(Default::default(), Default::default())?;
    /// let command = device.default_queue().launch_empty()?;
    /// pollster::block_on(async { (&command).await })?;
    /// assert!(command.is_released(), "its batch was completed");
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn wait_async(&self) -> WaitFuture {
        let position = Position {
            seq: self.seq(),
            ticket: self.ticket(),
        };
        match self.watch_link().and_then(|link| link.upgrade()) {
            Some(queue) => WaitFuture::new(queue, position),
            // The queue is gone: its last batch was completed, and the
            // command's cell says how the command ended (else the queue
            // was torn down without ever seeing it done).
            None => WaitFuture::ready(match self.status() {
                CommandStatus::Complete => Ok(()),
                CommandStatus::Failed => Err(WaitError::QueueFailed {
                    queue: self.queue_id(),
                }),
                _ => Err(WaitError::DeviceError {
                    reason: "the command's queue was torn down before it was seen done".into(),
                }),
            }),
        }
    }
}

impl<M: sigretire_tracker::backend::SignalMemory> IntoFuture for &Command<M> {
    type Output = Result<(), WaitError>;
    type IntoFuture = WaitFuture;

    fn into_future(self) -> WaitFuture {
        self.wait_async()
    }
}

#[cfg(not(sigretire_loom))]
impl<T: QueueTracker> Event<T> {
    /// A future of the event: resolves as [`synchronize`](Self::synchronize)
    /// returns (without completing the queue's batch through the event
    /// itself: the completion machinery does), with no thread waiting (see
    /// [`WaitFuture`]). `(&event).await` is the same.
    ///
    /// ```
    /// use sigretire_queue::sim::{CostProfile, SimPlatform};
    /// let platform = SimPlatform::threaded(CostProfile::zero());
    /// let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// queue.launch_empty()?;
    /// let event = queue.record_event()?;
    /// pollster::block_on(event.wait_async())?;
    /// assert_eq!(event.query(), sigretire_queue::tracker::Status::Complete);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    ///
    /// An event never recorded is complete: its future is ready at once
    /// (as its [`synchronize`](Event::synchronize) returns at once).
    pub fn wait_async(&self) -> WaitFuture {
        match self.position() {
            Some((completion, seq, ticket)) => {
                WaitFuture::new(completion.clone(), Position { seq, ticket })
            }
            None => WaitFuture::ready(Ok(())),
        }
    }
}

#[cfg(not(sigretire_loom))]
impl<T: QueueTracker> IntoFuture for &Event<T> {
    type Output = Result<(), WaitError>;
    type IntoFuture = WaitFuture;

    fn into_future(self) -> WaitFuture {
        self.wait_async()
    }
}

#[cfg(not(sigretire_loom))]
impl<T: QueueTracker> HostQueue<T> {
    /// A future of everything submitted to the queue so far
    /// ([`synchronize`](Self::synchronize) without a waiting thread): the
    /// position is taken now — the newest command where it stands for the
    /// queue, else a marker published now (which, as a launch, may wait for
    /// room in a full ring) — and the future resolves once it completed,
    /// with synchronize's errors (a failed queue or an aborting device
    /// answers at the first poll). Nothing bounds it in time: race it
    /// against the executor's timer.
    ///
    /// ```
    /// use sigretire_queue::sim::{CostProfile, SimPlatform};
    /// let platform = SimPlatform::threaded(CostProfile::zero());
    /// let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// let commands: Vec<_> = (0..100).map(|_| queue.launch_empty()).collect::<Result<_, _>>()?;
    /// pollster::block_on(queue.synchronize_async())?;
    /// assert!(commands.iter().all(|c| c.status().is_done()));
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn synchronize_async(&self) -> SyncFuture {
        let completion = self.completion();
        let inner = match sync_position(completion) {
            Ok(None) => Ok(WaitFuture::ready(Ok(()))),
            Ok(Some(position)) => Ok(WaitFuture::new(completion.clone(), position)),
            Err(error) => Err(Some(error)),
        };
        SyncFuture { inner }
    }
}
