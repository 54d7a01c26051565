//! Submission to one hardware queue: the execution lock and what it
//! protects (the tracker, packet publication, the open batch, the newest
//! command, the synchronize marker in flight, the wake signals), and what
//! threads without it read (the command numbers, [`Progress`]; whether
//! work the layer did not publish follows, [`Horizon`]).
//!
//! The lock covers submission only. No thread ever waits for the GPU while
//! holding it: CPU waits run on the tracker's lock-free [`Waiter`] or a
//! [`SignalRef`](sigretire_tracker::SignalRef) after it is released
//! ([`UseWait`]), and a publication that must wait (for the use the
//! tracker names, or for room in a full ring) waits outside it and retries
//! ([`Submission::publish_with`]).
//!
//! A queue failure seen without the lock (by the completion thread, a CPU
//! wait, a query) must reach the tracker, which only the lock holder may
//! touch. Waiting for the lock there could stall the completion thread
//! behind a submitter, so the failure is recorded and passed on under the
//! lock: at once if it is free, else by the next thread to take it, before
//! that thread touches the tracker. Nothing uses the tracker without the
//! lock, so no use of it can miss the failure. The pins of wake packets
//! that ran are let go of the same way.
//!
//! A queue failure fails this queue alone (CUDA's split): it is marked
//! failed for good, and every later publication on it is refused
//! (`QueueFailed`, naming it). The device's error state is not touched:
//! the device and its other queues keep working.

use crate::batch::{Batch, Entry, Handoff, StatePool};
use crate::command::{Command, link};
use crate::config::QueueConfig;
use crate::cpu_wait::{UseWait, WaitSettings, Wakes, look};
use crate::device_state::DeviceState;
use crate::error::{Fault, WaitError};
use crate::frontier::{Horizon, Newest, Verdict};
use crate::marker::Marker;
use crate::progress::Progress;
use crate::publish::{Packet, Published, Publisher, QueueTracker, Step};
use crate::recycle::{Pool, Stash};
use crate::stats::{Counters, bump};
use crate::sync::{Arc, AtomicBool, Mutex, MutexGuard, Ordering, identity};
use crate::wake::{Armed, WakePool};
use crate::watch::WatchLink;
use sigretire_tracker::{Placement, Ticket, WaitPolicy, Waiter, Work, wait::Wait};
use std::time::Duration;

/// Room an open batch's buffer has past the batch limit: the commands
/// pushed without closing it (a synchronize's or an event's marker).
const BATCH_SLACK: usize = 4;

/// How a publication waits for room in a full ring: polls with a back-off
/// from 10 us to 1 ms (the ring empties as the GPU consumes packets, which
/// nothing announces).
const RING_FULL: WaitPolicy = WaitPolicy {
    spin: Duration::ZERO,
    device_spin: Duration::ZERO,
    yield_for: Duration::ZERO,
    max_sleep: Duration::from_millis(1),
    interrupt: false,
    hybrid: None,
};

/// The command an event completes with: its own marker, or the newest
/// command it shares.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CompletionPoint {
    pub(crate) seq: u64,
    pub(crate) index: u64,
    pub(crate) ticket: Ticket,
}

/// Everything the execution lock protects.
struct Exclusive<T: QueueTracker> {
    publisher: Publisher<T>,
    /// The open submission batch.
    open: Batch,
    /// Batches closed under the lock, handed out after it is released.
    closed: Vec<Handoff<T::Memory>>,
    /// The synchronize marker in flight, for a second synchronizing thread.
    in_flight: Option<Arc<Marker>>,
    /// The queue's wake signals, for waits that sleep and the completion
    /// thread.
    wakes: WakePool<T::Memory>,
}

/// What threads without the lock leave for its next holder.
#[derive(Debug)]
struct Deferred {
    /// The queue failed and the tracker has not been told yet, or its
    /// newest command may still fail unseen on the hardware queue it runs
    /// on now (see `Held::settle_current_queue`).
    failure_pending: AtomicBool,
    /// A use of each hardware queue seen failed, for the tracker.
    failed_uses: Mutex<Vec<Ticket>>,
    /// Pins of wake packets to let go of once they ran.
    wakes_to_release: AtomicBool,
}

/// Submission to one hardware queue (see the module docs). The tracker
/// lives here: whoever lets go of this last tears the queue down.
pub(crate) struct Submission<T: QueueTracker> {
    id: u64,
    config: QueueConfig,
    lock: Mutex<Exclusive<T>>,
    deferred: Deferred,
    /// The queue failed (a use of it failed): it takes no more work.
    failed: AtomicBool,
    progress: Progress,
    horizon: Arc<Horizon<T::Queue>>,
    /// Lock-free waits and queries of the tracker's uses.
    waiter: Waiter<T::Memory>,
    device: Arc<DeviceState>,
    stats: Counters,
    /// Status cells, batch buffers and lists of closed batches for reuse
    /// (see `recycle`).
    states: Arc<StatePool>,
    buffers: Pool<Vec<Entry>>,
    closed_lists: Pool<Vec<Handoff<T::Memory>>>,
    /// Its commands' link to the queue's watch list (`future`), set by the
    /// queue's first publication.
    watch_link: std::sync::OnceLock<WatchLink>,
}

impl<T: QueueTracker> Submission<T> {
    /// Submission for queue `id` to `tracker`'s hardware queue, with the
    /// wake signals `config` asks for (made now, never later).
    pub(crate) fn new(id: u64, tracker: T, config: QueueConfig, device: Arc<DeviceState>) -> Self {
        let waiter = tracker.waiter();
        // Wake signals serve the waits that sleep and the completion thread,
        // which sleeps on every closed batch whatever the wait policy.
        let wakes = WakePool::create(waiter.memory(), config.wake_signals);
        let stats = Counters::default();
        stats
            .wake_signals
            .store(wakes.len() as u64, Ordering::Relaxed);
        let states = Arc::new(StatePool::default());
        let horizon = Arc::new(Horizon::new(tracker.queue().clone()));
        let publisher = Publisher::new(tracker, horizon.clone(), Stash::new(states.clone()));
        Self {
            id,
            config,
            lock: Mutex::new(Exclusive {
                publisher,
                open: Batch::default(),
                closed: Vec::new(),
                in_flight: None,
                wakes,
            }),
            deferred: Deferred {
                failure_pending: AtomicBool::new(false),
                failed_uses: Mutex::new(Vec::new()),
                wakes_to_release: AtomicBool::new(false),
            },
            failed: AtomicBool::new(false),
            progress: Progress::default(),
            horizon,
            waiter,
            device,
            stats,
            states,
            buffers: Pool::default(),
            closed_lists: Pool::default(),
            watch_link: std::sync::OnceLock::new(),
        }
    }

    /// Its commands' link to the queue's watch list.
    #[cfg_attr(sigretire_loom, allow(dead_code))]
    pub(crate) fn watch_link(&self) -> &std::sync::OnceLock<WatchLink> {
        &self.watch_link
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn config(&self) -> &QueueConfig {
        &self.config
    }

    pub(crate) fn waiter(&self) -> &Waiter<T::Memory> {
        &self.waiter
    }

    pub(crate) fn memory(&self) -> &T::Memory {
        self.waiter.memory()
    }

    pub(crate) fn device(&self) -> &Arc<DeviceState> {
        &self.device
    }

    pub(crate) fn stats(&self) -> &Counters {
        &self.stats
    }

    /// Whether the queue failed: a use of it failed, seen by any wait,
    /// query or the completion thread. For good.
    pub(crate) fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Marks the queue failed (for good): it takes no more work. The
    /// device's error state is untouched.
    pub(crate) fn mark_failed(&self) {
        self.failed.store(true, Ordering::Release);
    }

    pub(crate) fn progress(&self) -> &Progress {
        &self.progress
    }

    /// The status cells kept for reuse: the pool's and the stash's (the
    /// cells the queue ever made, less those still out).
    #[cfg(all(test, feature = "sim", not(sigretire_loom)))]
    pub(crate) fn cells_kept(&self) -> usize {
        self.states.len() + self.lock.lock().publisher.cells_kept()
    }

    /// Whether everything submitted is known done, without the lock (the
    /// frontier's lock-free answer).
    pub(crate) fn all_done_without_lock(&self) -> bool {
        self.horizon.all_done(&self.progress)
    }

    /// A wait for one of this queue's uses, with its settings.
    pub(crate) fn use_wait(&self) -> UseWait<'_, T::Memory> {
        UseWait {
            settings: WaitSettings::from(&self.config),
            device: &self.device,
            waiter: &self.waiter,
        }
    }

    /// A user handle for a published command.
    pub(crate) fn command(this: &Arc<Self>, entry: Entry) -> Command<T::Memory> {
        let settings = WaitSettings::from(&this.config);
        // Only a wait that sleeps needs the queue (its wake signals).
        let wakes = settings.policy.interrupt.then(|| link(this));
        Command::new(
            entry,
            this.id,
            this.waiter.clone(),
            this.device.clone(),
            settings,
            this.states.clone(),
            wakes,
        )
        .watching(this.watch_link.get().cloned())
    }

    /// Takes the execution lock (counted).
    pub(crate) fn lock(&self) -> Held<'_, T> {
        bump(&self.stats.lock_acquisitions);
        Held::new(self, self.lock.lock())
    }

    /// Takes the execution lock if it is free (counted when taken).
    pub(crate) fn try_lock(&self) -> Option<Held<'_, T>> {
        let guard = self.lock.try_lock()?;
        bump(&self.stats.lock_acquisitions);
        Some(Held::new(self, guard))
    }

    /// Runs `step` under the lock until it is done, waiting outside the lock
    /// (for the use the tracker named, or for room in the ring) between
    /// attempts. After each attempt the batches closed under the lock go to
    /// `dispatch`, outside it.
    pub(crate) fn publish_with<R>(
        &self,
        mut step: impl FnMut(&mut Held<'_, T>) -> Result<Step<R>, Fault>,
        mut dispatch: impl FnMut(&mut Vec<Handoff<T::Memory>>),
    ) -> Result<R, Fault> {
        self.device.check_accepting()?;
        if self.has_failed() {
            return Err(Fault::QueueFailed { queue: self.id });
        }
        // Made only once the ring is found full: the common publication
        // never reads the clock.
        let mut ring_full: Option<Wait> = None;
        let mut retrying = false;
        loop {
            let (outcome, closed) = {
                let mut held = self.lock();
                if retrying {
                    // What the wait proved frees room: take it in.
                    held.tracker().poll();
                }
                let outcome = step(&mut held);
                // A fence published on the way (a move's order wait ahead
                // of a refused publication) counts as submitted too:
                // nothing lock-free may answer past it.
                let newest = held.publisher().newest_seq();
                self.progress.note_submitted_through(newest);
                (outcome, held.take_closed())
            };
            if let Some(mut closed) = closed {
                dispatch(&mut closed);
                self.closed_lists.give(closed);
            }
            retrying = true;
            match outcome? {
                Step::Done(result) => return Ok(result),
                Step::Backpressure(ticket, limit) => {
                    bump(&self.stats.backpressure_waits);
                    // No timeout: this blocks until the use completes (or
                    // fails, or the device enters its error state).
                    self.wait_for_room(&ticket).map_err(|error| match error {
                        WaitError::TimedOut(waited) => Fault::InFlightLimit {
                            limit,
                            wait_for: ticket.seq(),
                            waited,
                        },
                        other => other.into(),
                    })?;
                }
                Step::RingFull => {
                    bump(&self.stats.ring_full_retries);
                    if let Some(error) = self.device.wait_error() {
                        bump(&self.stats.device_error_returns);
                        return Err(error.into());
                    }
                    let wait = ring_full.get_or_insert_with(|| {
                        Wait::new(RING_FULL)
                            .timeout(self.config.wait_timeout)
                            .first_sleep(Duration::from_micros(10))
                    });
                    if let Some(timeout) = wait.timed_out() {
                        return Err(Fault::RingFull(timeout));
                    }
                    wait.pause_with(crate::sync::sleep);
                }
            }
        }
    }

    /// Waits outside the lock for `ticket`'s use, which the tracker named
    /// under back-pressure: its completion frees room.
    fn wait_for_room(&self, ticket: &Ticket) -> Result<(), WaitError> {
        let ended = self
            .use_wait()
            .run(ticket, || look(self.waiter.status(ticket)), None)?;
        self.wait_result(ended, || self.report_failure(ticket))
    }

    /// What a caller returns for a wait that ended as `ended`: `failed()`
    /// for a failure (the caller knows whether the queue failure is still
    /// to be reported or already was); the device's error, counted, for an
    /// early return in the device error state.
    pub(crate) fn wait_result(
        &self,
        ended: crate::cpu_wait::Ended,
        failed: impl FnOnce() -> WaitError,
    ) -> Result<(), WaitError> {
        let result = crate::cpu_wait::result(ended, &self.device, failed);
        if matches!(
            result,
            Err(WaitError::DeviceError { .. } | WaitError::Aborted { .. })
        ) {
            bump(&self.stats.device_error_returns);
        }
        result
    }

    /// `failed`'s use of this queue failed: the queue is failed for good
    /// (the device is not: its other queues keep working), and the tracker
    /// is told (the pending uses of the hardware queue it ran on fail).
    /// Callable with or without the lock.
    pub(crate) fn report_failure(&self, failed: &Ticket) -> WaitError {
        self.mark_failed();
        self.note_queue_failed(failed);
        WaitError::QueueFailed { queue: self.id }
    }

    /// Records that the hardware queue `failed`'s use ran on failed, for
    /// the tracker: told now if the lock is free, else by the next thread
    /// to take it. Never waits for the lock.
    pub(crate) fn note_queue_failed(&self, failed: &Ticket) {
        {
            // A handle asked again and again while the lock is busy adds
            // its use once.
            let mut failed_uses = self.deferred.failed_uses.lock();
            if !failed_uses.contains(failed) {
                failed_uses.push(*failed);
            }
        }
        self.deferred.failure_pending.store(true, Ordering::Release);
        // Taking and dropping the lock applies it.
        drop(self.try_lock());
    }

    /// Lets go of the pins of wake packets that ran: by the lock's next
    /// holder.
    pub(crate) fn release_wakes_with_next_lock(&self) {
        self.deferred
            .wakes_to_release
            .store(true, Ordering::Release);
    }

    /// Lets go of the pins of wake packets that ran, if some wait for the
    /// lock's next holder: now if the lock is free. One load when none
    /// does; never waits for the lock.
    pub(crate) fn release_pending_wakes(&self) {
        if self.deferred.wakes_to_release.load(Ordering::Acquire) {
            drop(self.try_lock());
        }
    }

    /// After a batch completed, off the submit path: lets go of the uses
    /// finished wake packets waited on (as the lock is taken, or by its
    /// next holder if it is busy), then retires and re-arms what completed,
    /// those uses too rather than parking them.
    pub(crate) fn retire_soon(&self) {
        self.deferred
            .wakes_to_release
            .store(true, Ordering::Release);
        if let Some(mut held) = self.try_lock() {
            held.tracker().poll();
        }
    }

    /// Lets go of a completed batch: its unshared status cells and its
    /// buffer (if it has a whole batch's room) go back for reuse.
    pub(crate) fn recycle(&self, batch: Batch) {
        let mut entries = batch.into_entries();
        self.states
            .keep_all_if_last(entries.drain(..).filter_map(|entry| entry.state));
        let room = self
            .config
            .batch_limits
            .host_signals
            .min(self.config.batch_limits.device_signals);
        if entries.capacity() >= room {
            self.buffers.give(entries);
        }
    }

    /// An empty buffer for an open batch: a recycled one, or a new one with
    /// room for a whole batch (and the markers a synchronize adds past the
    /// limit), so an open batch never grows.
    fn batch_buffer(&self, signals: Placement) -> Vec<Entry> {
        self.buffers.take().unwrap_or_else(|| {
            Vec::with_capacity(self.config.batch_limits.for_signals(signals) + BATCH_SLACK)
        })
    }
}

impl<T: QueueTracker> Wakes<T::Memory> for Submission<T> {
    fn arm(&self, ticket: &Ticket) -> Result<Option<Armed<T::Memory>>, sigretire_tracker::Error> {
        let armed = self.lock().arm_wake(ticket)?;
        match armed {
            Some(_) => bump(&self.stats.sleeping_waits),
            None => bump(&self.stats.wake_fallbacks),
        }
        Ok(armed)
    }

    fn released(&self) {
        self.release_wakes_with_next_lock();
    }

    fn release_pending(&self) {
        self.release_pending_wakes();
    }
}

impl<T: QueueTracker> Drop for Submission<T> {
    fn drop(&mut self) {
        self.device.note_teardown();
    }
}

/// Whether the current thread holds an execution lock (of any queue).
/// Batches must be completed without one (docs/design.md section 4), and
/// [`QueueStats::batches_completed_under_lock`](crate::QueueStats::batches_completed_under_lock)
/// counts the exceptions.
pub(crate) fn held_by_this_thread() -> bool {
    identity::holds_a_lock()
}

/// The execution lock, held: what it protects, and the submission it
/// belongs to. Counts itself in the current thread's held locks until
/// dropped. Taking it first applies what threads without the lock left
/// for its holder.
pub(crate) struct Held<'a, T: QueueTracker> {
    guard: MutexGuard<'a, Exclusive<T>>,
    submission: &'a Submission<T>,
}

impl<T: QueueTracker> Drop for Held<'_, T> {
    fn drop(&mut self) {
        identity::lock_released();
    }
}

impl<'a, T: QueueTracker> Held<'a, T> {
    fn new(submission: &'a Submission<T>, guard: MutexGuard<'a, Exclusive<T>>) -> Self {
        identity::lock_taken();
        let mut held = Self { guard, submission };
        held.apply_deferred();
        held
    }

    /// What threads without the lock left for its holder: a queue failure
    /// for the tracker, and the pins of wake packets that ran. One load
    /// each while there is none.
    fn apply_deferred(&mut self) {
        let deferred = &self.submission.deferred;
        if deferred.failure_pending.load(Ordering::Acquire)
            && deferred.failure_pending.swap(false, Ordering::AcqRel)
        {
            let failed = core::mem::take(&mut *deferred.failed_uses.lock());
            for ticket in failed {
                // The hardware queue that use ran on failed: its pending
                // uses fail, not those of another hardware queue the
                // stream moved to (they may still run).
                if planted!(QueueFailsTheCurrentQueue) {
                    self.guard.publisher.tracker().fail_queue();
                } else {
                    self.guard.publisher.tracker().fail_queue_of(&ticket);
                }
            }
            if !self.settle_current_queue() {
                // Its newest command may still fail: a later holder looks
                // again.
                deferred.failure_pending.store(true, Ordering::Release);
            }
        }
        if deferred.wakes_to_release.load(Ordering::Acquire)
            && deferred.wakes_to_release.swap(false, Ordering::AcqRel)
            && self.guard.wakes.release_done(self.submission.memory())
        {
            // A packet has not run yet: a later holder looks again.
            deferred.wakes_to_release.store(true, Ordering::Release);
        }
    }

    /// The queue failed: the hardware queue it runs on now may have failed
    /// too, unseen. The failure named the hardware queue of the use seen
    /// failed, and a stream that moved off it may since have failed the
    /// new one as well (the move's order wait there waits on the old
    /// queue's newest signal, which the failure made negative); the failed
    /// queue takes no more work, so no command of its own would ever look
    /// there again (the tracker's fence probing goes by the read index,
    /// which stops at the failed packet), and its uses there, never to
    /// run, would stay in flight with what their packets pinned (another
    /// queue's signals among them) for as long as the queue lives. Its
    /// newest command there, a fence, tells with one load: failed, that
    /// hardware queue failed, and the tracker fails its pending uses too
    /// (each settled by a load of its own signal), which the next walk
    /// retires, letting go of their pins. Nothing is failed on a guess: a
    /// use not seen failed may still run on a healthy queue and read what
    /// it pinned. Nor does this walk: the processor may still be writing
    /// the failure into the signals of packets after the one seen failed,
    /// and a re-arm now could land under such a write. Returns `false`
    /// while that command may still run: a later holder looks again.
    /// (Where nothing of the layer's was published there since a move, or
    /// its newest command was refused in part, which then says nothing of
    /// the queue, there is nothing more to learn from it.)
    fn settle_current_queue(&mut self) -> bool {
        let publisher = &mut self.guard.publisher;
        match publisher.verdict_loaded() {
            Ok(Verdict::Running { .. }) => false,
            Ok(Verdict::Failed(newest)) => {
                publisher.tracker().fail_queue_of(&newest.ticket);
                true
            }
            Ok(Verdict::Idle | Verdict::Done(_) | Verdict::Unknown) | Err(_) => true,
        }
    }

    /// The tracker (the lock holder's alone).
    pub(crate) fn tracker(&mut self) -> &mut T {
        self.guard.publisher.tracker()
    }

    /// Packet publication.
    pub(crate) fn publisher(&mut self) -> &mut Publisher<T> {
        &mut self.guard.publisher
    }

    /// Publishes one packet (see [`Publisher::publish`]).
    pub(crate) fn publish(
        &mut self,
        packet: Packet<'_>,
    ) -> Result<Step<Published<T::Memory>>, Fault> {
        let stats = &self.submission.stats;
        let Exclusive {
            publisher, open, ..
        } = &mut *self.guard;
        publisher.publish(stats, open, packet)
    }

    /// Publishes one command of several operations (see
    /// [`Publisher::publish_all`]).
    pub(crate) fn publish_all(
        &mut self,
        works: &[Work<'_>],
        ops: u32,
    ) -> Result<Step<Published<T::Memory>>, Fault> {
        let stats = &self.submission.stats;
        let Exclusive {
            publisher, open, ..
        } = &mut *self.guard;
        publisher.publish_all(stats, open, works, ops)
    }

    /// Publishes one command and adds it to the open batch (closing the
    /// batch at its limit).
    pub(crate) fn submit(&mut self, packet: Packet<'_>) -> Result<Step<Entry>, Fault> {
        let published = match self.publish(packet)?.or_retry() {
            Ok(published) => published,
            Err(retry) => return Ok(retry),
        };
        self.push(published.entry.clone(), true);
        Ok(Step::Done(published.entry))
    }

    /// Publishes one command of `ops` operations (`works`, 1 at least) and
    /// adds it to the open batch; with the refusal, if the backend refused
    /// one of them after issuing the others.
    pub(crate) fn submit_all(
        &mut self,
        works: &[Work<'_>],
        ops: u32,
    ) -> Result<Step<(Entry, Option<Fault>)>, Fault> {
        let mut published = match self.publish_all(works, ops)?.or_retry() {
            Ok(published) => published,
            Err(retry) => return Ok(retry),
        };
        let refused = published.refused.is_some();
        if refused {
            // Its issued packets run: it joins the batch (so what completes
            // the batch waits for them). No handle is made for it (the
            // caller gets the refusal), so it keeps no status cell: its
            // batch settles only what a handle reads, and the tracker's
            // failed verdict on it (a refusal, not a failure of the
            // hardware queue) must not fail the queue there.
            published.entry.state = None;
        }
        // A refused command is no fence for its batch (its signal may be
        // known done before its issued packets are): the batch closes at a
        // later command.
        self.push(published.entry.clone(), !refused);
        Ok(Step::Done((published.entry, published.refused)))
    }

    /// Adds a published command to the open batch, closing the batch when
    /// it reaches its limit (unless `may_close` is false: the caller takes
    /// the batch itself, or the command is no fence for it).
    pub(crate) fn push(&mut self, entry: Entry, may_close: bool) {
        self.submission.progress.note_submitted(entry.seq);
        self.guard.open.push(entry);
        let placement = self.guard.publisher.placement();
        let limit = self.submission.config.batch_limits.for_signals(placement);
        if may_close && self.guard.open.len() >= limit {
            self.close_batch();
        }
    }

    /// Closes the open batch: it completes through the completion thread
    /// when its last command (a fence) completes.
    fn close_batch(&mut self) {
        let batch = self.take_batch();
        let Some(last) = batch.last() else {
            return;
        };
        let (last_seq, ticket) = (last.seq, last.ticket);
        // `None`: already known complete; the batch completes at once.
        let signal = self.tracker().hold(&ticket).ok().flatten();
        // The completion thread sleeps on this batch, woken as its fence
        // completes, if a wake signal is free now (else it may arm one when
        // it gets to the batch).
        let wake = match signal {
            Some(_) => self.arm_wake(&ticket).ok().flatten(),
            None => None,
        };
        self.submission.progress.note_taken(last_seq);
        bump(&self.submission.stats.batches_closed);
        self.guard.closed.push(Handoff {
            batch,
            signal,
            last_seq,
            marker: None,
            wake,
        });
    }

    /// Takes the open batch whole, leaving a recycled buffer in its place.
    pub(crate) fn take_batch(&mut self) -> Batch {
        let buffer = self
            .submission
            .batch_buffer(self.guard.publisher.placement());
        self.guard.open.take(buffer)
    }

    /// Takes the open batch's commands up to and including `seq`.
    pub(crate) fn take_batch_through(&mut self, seq: u64) -> Batch {
        let buffer = self
            .submission
            .batch_buffer(self.guard.publisher.placement());
        self.guard.open.split_through(seq, buffer)
    }

    /// How many commands the open batch holds.
    pub(crate) fn open_len(&self) -> usize {
        self.guard.open.len()
    }

    /// The batches closed under the lock, if any, for the caller to hand
    /// out after it is released (a recycled list takes their place).
    fn take_closed(&mut self) -> Option<Vec<Handoff<T::Memory>>> {
        if self.guard.closed.is_empty() {
            return None;
        }
        let empty = self.submission.closed_lists.take().unwrap_or_default();
        Some(core::mem::replace(&mut self.guard.closed, empty))
    }

    /// The newest command, for a marker that would follow it at once: every
    /// packet is a fence, so a marker published now would complete when it
    /// does, and proves nothing more. `None` where a marker is needed (the
    /// frontier's verdict: work the layer did not publish may follow it, it
    /// was refused in part or failed, the stream moved since), or there is
    /// none.
    ///
    /// `timed`: the marker would be timed, and the newest command is shared
    /// only where its stamps stand for the marker's
    /// ([`Frontier::shares_stamps`](crate::frontier::Frontier::shares_stamps));
    /// the tracker then harvests them, and the entry and the newest command
    /// are marked timed.
    pub(crate) fn share_newest(&mut self, timed: bool) -> Result<Option<CompletionPoint>, Fault> {
        let Some(newest) = self.guard.publisher.standing()? else {
            return Ok(None);
        };
        let ticket = if timed {
            let Some(timed) = self.guard.publisher.retime(&newest)? else {
                return Ok(None);
            };
            if let Some(entry) = self.guard.open.last_mut().filter(|e| e.seq == newest.seq) {
                entry.ticket = timed;
                entry.timed = true;
            }
            timed
        } else {
            newest.ticket
        };
        Ok(Some(CompletionPoint {
            seq: newest.seq,
            index: newest.index,
            ticket,
        }))
    }

    /// The newest command, if it stands for the hardware queue (no load).
    pub(crate) fn standing(&self) -> Result<Option<Newest>, Fault> {
        self.guard.publisher.standing()
    }

    /// The synchronize marker in flight, if any.
    pub(crate) fn in_flight(&self) -> Option<&Arc<Marker>> {
        self.guard.in_flight.as_ref()
    }

    /// `marker` is now the synchronize marker in flight; returns the one it
    /// replaces.
    pub(crate) fn set_in_flight(&mut self, marker: Arc<Marker>) -> Option<Arc<Marker>> {
        self.guard.in_flight.replace(marker)
    }

    /// `marker`'s synchronize is over: no longer in flight, if it still is.
    pub(crate) fn end_in_flight(&mut self, marker: &Arc<Marker>) {
        if self
            .guard
            .in_flight
            .as_ref()
            .is_some_and(|m| Arc::ptr_eq(m, marker))
        {
            self.guard.in_flight = None;
        }
    }

    /// Arms a wake for `ticket`'s use (see [`Publisher::arm_wake`]).
    pub(crate) fn arm_wake(
        &mut self,
        ticket: &Ticket,
    ) -> Result<Option<Armed<T::Memory>>, sigretire_tracker::Error> {
        let Exclusive {
            publisher, wakes, ..
        } = &mut *self.guard;
        publisher.arm_wake(
            wakes,
            &self.submission.stats,
            self.submission.memory(),
            ticket,
        )
    }

    /// Whether anything the layer published may still run: its newest
    /// command, on whichever hardware queue, not known complete (the
    /// frontier's word; an order wait owed pins that command), or a wake
    /// packet still waiting.
    pub(crate) fn may_still_run(&mut self) -> bool {
        !self.guard.publisher.published_work_done() || self.wakes_waiting()
    }

    /// Whether anything of the queue's may still run, on any hardware
    /// queue: a use in flight whose own signal says its packets have not
    /// finished (see the tracker's `any_use_running`), or a wake packet
    /// not yet run. What the queue's last reference waits for before its
    /// tracker, pins and signal memory may go.
    pub(crate) fn anything_may_run(&mut self) -> bool {
        self.tracker().any_use_running() || self.wakes_waiting()
    }

    /// Whether a wake packet has not run yet (one load per wake signal
    /// waiting); lets go of the pins of those that ran.
    pub(crate) fn wakes_waiting(&mut self) -> bool {
        let memory = self.submission.memory();
        self.guard.wakes.release_done(memory)
    }

    /// Harvests the timestamps of a completed batch's timed commands into
    /// host memory, so elapsed-time reads need no PCIe read and no lock.
    pub(crate) fn process_timing(&mut self, batch: &Batch) {
        if !self.submission.config.profiling {
            return;
        }
        for entry in batch.entries().iter().filter(|e| e.timed) {
            let _ = self.tracker().timestamps(&entry.ticket);
        }
        bump(&self.submission.stats.timing_passes);
    }

    /// Resets queue state after a completed fence that is the newest
    /// command: the queue is idle, so the tracker may retire everything
    /// (and release the pins its waits held).
    pub(crate) fn reset_state(&mut self) {
        // First the pins of the wake packets that ran (every one published
        // before the fence), so the drain retires their uses too rather
        // than parking them until a later reclaim. Not every wake packet
        // need have run: one published after the fence may still read its
        // use's signal, and keeps its pin.
        self.wakes_waiting();
        self.guard.publisher.note_drained();
        bump(&self.submission.stats.state_resets);
    }
}
