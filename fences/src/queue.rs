//! The host queue and its execution lock.
//!
//! The lock (`QueueCore::lock`) covers submission only: packet publication,
//! the open batch, the last command, the marker in flight, and the tracker
//! (which is `&mut` under it). No thread ever waits for the GPU while holding
//! it — CPU waits use the tracker's lock-free [`Waiter`] or a
//! [`SignalRef`](crate::tracker::SignalRef) — except in the old behaviour
//! ([`SyncWait::UnderLock`](crate::SyncWait)) kept to prove the regression
//! test catches it.
//!
//! What other threads read without the lock lives in `Progress` (three
//! counters of command numbers) and in the stats: that is what lets a
//! completed marker answer synchronize with no lock at all.
//!
//! A queue failure seen without the lock (by the completion thread, a CPU
//! wait, a query) must reach the tracker, which only the lock holder may
//! touch. Waiting for the lock there could stall the completion thread
//! behind a submitter, so the failure is recorded (`failure_pending`) and
//! passed on under the lock: at once if it is free, else by the next thread
//! to take it, before that thread touches the tracker. Nothing uses the
//! tracker without the lock, so no use of it can miss the failure.

use crate::batch::{Batch, Command, CommandStatus, Entry, StatePool};
use crate::config::QueueConfig;
use crate::cpu_wait::{self, Outcome, WaitSettings};
use crate::device_state::DeviceState;
use crate::error::Error;
use crate::frontier::{Frontier, Horizon};
use crate::handler::{BatchJob, BatchOwner, DeviceShared, Handoff, Job, JobCount};
use crate::marker::Marker;
use crate::publish::{Inner, Packet, QueueTracker, Step};
use crate::recycle::{Pool, Stash};
use crate::stats::{Counters, QueueStats, bump};
use crate::sync::{Arc, AtomicBool, AtomicU64, Mutex, MutexGuard, Ordering, identity};
use sigretire_tracker::{
    HardwareQueue, Placement, Purpose, QueueView, SignalMemory, Status, Ticket, Waiter, Work,
};
use std::time::{Duration, Instant};

/// Room an open batch's buffer has past the batch limit: the commands
/// pushed without closing it (a synchronize's or an event's marker).
const BATCH_SLACK: usize = 4;

/// Queue ids: unique in the process.
static NEXT_QUEUE_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Command numbers other threads read without the lock.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// The newest command published.
    pub(crate) submitted: AtomicU64,
    /// Every command up to this one left the open batch (to a marker, the
    /// completion thread, or an event's synchronize).
    pub(crate) taken_through: AtomicU64,
    /// Every command up to this one completed on the GPU and left the open
    /// batch: a synchronize that finds nothing newer returns at once.
    pub(crate) synced_through: AtomicU64,
}

impl Progress {
    pub(crate) fn submitted(&self) -> u64 {
        self.submitted.load(Ordering::Acquire)
    }

    pub(crate) fn synced_through(&self) -> u64 {
        self.synced_through.load(Ordering::Acquire)
    }

    pub(crate) fn taken_through(&self) -> u64 {
        self.taken_through.load(Ordering::Acquire)
    }

    pub(crate) fn note_synced(&self, seq: u64) {
        self.synced_through.fetch_max(seq, Ordering::AcqRel);
    }

    pub(crate) fn note_taken(&self, seq: u64) {
        self.taken_through.fetch_max(seq, Ordering::AcqRel);
    }
}

/// How a query is answered under the lock.
enum QueryPlan {
    /// From the newest command (its ticket; `None`: nothing ever ran).
    Known(Status, Option<Ticket>),
    /// From a marker published now.
    Marker,
}

/// One queue's shared state. Held by its handles, its events and the
/// completion thread's jobs; torn down on a user thread (see `handler`).
pub(crate) struct QueueCore<T: QueueTracker> {
    pub(crate) id: u64,
    pub(crate) config: QueueConfig,
    lock: Mutex<Inner<T>>,
    /// Lock-free waits and queries of the tracker's uses.
    pub(crate) waiter: Waiter<T::Memory>,
    pub(crate) device: Arc<DeviceShared>,
    pub(crate) progress: Progress,
    /// Whether work the layer did not publish follows its newest packet,
    /// for threads without the lock (`frontier`).
    pub(crate) horizon: Arc<Horizon<T::Queue>>,
    pub(crate) stats: Counters,
    pub(crate) jobs: Arc<JobCount>,
    /// The user's handles of the queue ([`HostQueue`]s; its events and
    /// the completion thread's jobs hold the core, not a handle).
    handles: AtomicU64,
    /// The queue failed and the tracker has not been told yet (see the
    /// module docs): the next thread to take the lock tells it.
    failure_pending: AtomicBool,
    /// A use of each hardware queue seen failed, for the tracker.
    failed_uses: Mutex<Vec<Ticket>>,
    /// Pins of wake packets to let go of once they ran (`apply_pending`).
    wakes_to_release: AtomicBool,
    /// Status cells, batch buffers and job boxes for reuse (see `recycle`).
    states: Arc<StatePool>,
    buffers: Pool<Vec<Entry>>,
    job_boxes: Pool<Box<BatchJob<Self>>>,
    pub(crate) markers: Pool<Arc<Marker>>,
    closed_lists: Pool<Vec<Handoff<T::Memory>>>,
}

/// Whether the current thread holds an execution lock. Batches must be
/// completed without one (docs/design.md section 4), and
/// [`QueueStats::batches_completed_under_lock`] counts the exceptions
/// (only the old behaviour makes any).
fn holds_an_execution_lock() -> bool {
    identity::holds_a_lock()
}

/// The execution lock, held: dereferences to what it protects, and counts
/// itself in the current thread's held locks until dropped.
pub(crate) struct Locked<'a, T: QueueTracker> {
    guard: MutexGuard<'a, Inner<T>>,
}

impl<'a, T: QueueTracker> Locked<'a, T> {
    fn new(guard: MutexGuard<'a, Inner<T>>) -> Self {
        identity::lock_taken();
        Self { guard }
    }
}

impl<T: QueueTracker> Drop for Locked<'_, T> {
    fn drop(&mut self) {
        identity::lock_released();
    }
}

impl<T: QueueTracker> core::ops::Deref for Locked<'_, T> {
    type Target = Inner<T>;
    fn deref(&self) -> &Inner<T> {
        &self.guard
    }
}

impl<T: QueueTracker> core::ops::DerefMut for Locked<'_, T> {
    fn deref_mut(&mut self) -> &mut Inner<T> {
        &mut self.guard
    }
}

impl<T: QueueTracker> QueueCore<T> {
    /// Takes the execution lock (counted).
    pub(crate) fn lock(&self) -> Locked<'_, T> {
        bump(&self.stats.lock_acquisitions);
        let mut guard = self.lock.lock();
        self.apply_pending(&mut guard);
        Locked::new(guard)
    }

    /// Takes the execution lock if it is free (counted when taken).
    pub(crate) fn try_lock(&self) -> Option<Locked<'_, T>> {
        let mut guard = self.lock.try_lock()?;
        bump(&self.stats.lock_acquisitions);
        self.apply_pending(&mut guard);
        Some(Locked::new(guard))
    }

    /// What threads without the lock left for its next holder: a queue
    /// failure for the tracker, and the pins of wake packets that ran (a
    /// completed batch's, `finish_batch`). One load each while there is
    /// none.
    fn apply_pending(&self, inner: &mut Inner<T>) {
        self.apply_pending_failure(inner);
        if self.wakes_to_release.load(Ordering::Acquire)
            && self.wakes_to_release.swap(false, Ordering::AcqRel)
            && inner.wakes.release_done(self.waiter.memory())
        {
            // A packet has not run yet: a later holder looks again.
            self.wakes_to_release.store(true, Ordering::Release);
        }
    }

    /// Lets go of the pins of wake packets that ran: now if the lock is
    /// free, else by its next holder (`apply_pending`). Never waits for the
    /// lock.
    pub(crate) fn release_wakes_soon(&self) {
        self.wakes_to_release.store(true, Ordering::Release);
        drop(self.try_lock());
    }

    /// Tells the tracker about a recorded queue failure (under the lock).
    /// One load while the queue is healthy.
    pub(crate) fn apply_pending_failure(&self, inner: &mut Inner<T>) {
        if self.failure_pending.load(Ordering::Acquire)
            && self.failure_pending.swap(false, Ordering::AcqRel)
        {
            let failed = core::mem::take(&mut *self.failed_uses.lock());
            for ticket in failed {
                // The hardware queue that use ran on failed: its pending
                // uses fail, not those of another hardware queue the
                // stream moved to (they may still run).
                inner.tracker.fail_queue_of(&ticket);
            }
        }
    }

    /// Records that the hardware queue `failed`'s use ran on failed, for
    /// the tracker: told now if the lock is free, else by the next thread
    /// to take it (see the module docs). Never waits for the lock.
    fn note_queue_failed(&self, failed: &Ticket) {
        self.failed_uses.lock().push(*failed);
        self.failure_pending.store(true, Ordering::Release);
        // Taking and dropping the lock applies it.
        drop(self.try_lock());
    }

    pub(crate) fn state(&self) -> &DeviceState {
        &self.device.state
    }

    pub(crate) fn settings(&self) -> WaitSettings {
        WaitSettings::from(&self.config)
    }

    /// A user handle for a published command.
    pub(crate) fn command(this: &Arc<Self>, entry: Entry) -> Command<T::Memory> {
        let settings = this.settings();
        Command {
            entry,
            queue: this.id,
            waiter: this.waiter.clone(),
            device: this.device.state.clone(),
            // Only a wait that sleeps needs the queue (its wake signals).
            sleeper: settings.policy.interrupt.then(|| crate::batch::link(this)),
            settings,
            states: this.states.clone(),
        }
    }

    /// Takes the open batch whole (under the lock), leaving a recycled
    /// buffer in its place.
    pub(crate) fn take_batch(&self, inner: &mut Inner<T>) -> Batch {
        let buffer = self.batch_buffer(inner.signals);
        inner.batch.take(buffer)
    }

    /// Takes the open batch's commands up to and including `seq` (under the
    /// lock).
    pub(crate) fn take_batch_through(&self, inner: &mut Inner<T>, seq: u64) -> Batch {
        let buffer = self.batch_buffer(inner.signals);
        inner.batch.split_through(seq, buffer)
    }

    /// An empty buffer for an open batch: a recycled one, or a new one with
    /// room for a whole batch (and the markers a synchronize adds past the
    /// limit), so an open batch never grows.
    fn batch_buffer(&self, signals: Placement) -> Vec<Entry> {
        self.buffers.take().unwrap_or_else(|| {
            Vec::with_capacity(self.config.batch_limits.for_signals(signals) + BATCH_SLACK)
        })
    }

    /// Lets go of a completed batch: its unshared status cells and its
    /// buffer (if it has a whole batch's room) go back for reuse.
    fn recycle(&self, batch: Batch) {
        let mut entries = batch.into_entries();
        self.states
            .keep_all_if_last(entries.drain(..).map(|entry| entry.state));
        let room = self
            .config
            .batch_limits
            .host_signals
            .min(self.config.batch_limits.device_signals);
        if entries.capacity() >= room {
            self.buffers.give(entries);
        }
    }

    /// A job box for a batch handed to the completion thread: a recycled
    /// one when there is one.
    fn job_box(&self, job: BatchJob<Self>) -> Box<BatchJob<Self>> {
        match self.job_boxes.take() {
            Some(mut reused) => {
                *reused = job;
                reused
            }
            None => Box::new(job),
        }
    }

    /// Adds a published command to the open batch, closing the batch when
    /// it reaches its limit (unless the caller takes it itself).
    pub(crate) fn push_command(&self, inner: &mut Inner<T>, entry: Entry, may_close: bool) {
        self.progress.submitted.store(entry.seq, Ordering::Release);
        inner.batch.push(entry);
        let limit = self.config.batch_limits.for_signals(inner.signals);
        if may_close && inner.batch.len() >= limit {
            self.close_batch(inner);
        }
    }

    /// Closes the open batch: it completes through the completion thread
    /// when its last command (a fence) completes.
    fn close_batch(&self, inner: &mut Inner<T>) {
        let batch = self.take_batch(inner);
        let Some(last) = batch.last() else {
            return;
        };
        let (last_seq, ticket) = (last.seq, last.ticket);
        // `None`: already known complete; the batch completes at once.
        let signal = inner.tracker.hold(&ticket).ok().flatten();
        // The completion thread sleeps on this batch, woken as its fence
        // completes, if a wake signal is free now (else it may arm one when
        // it gets to the batch).
        let wake = match signal {
            Some(_) => inner
                .arm_wake(&self.stats, self.waiter.memory(), &ticket)
                .ok()
                .flatten(),
            None => None,
        };
        self.progress.note_taken(last_seq);
        bump(&self.stats.batches_closed);
        inner.closed.push(Handoff {
            batch,
            signal,
            last_seq,
            marker: None,
            wake,
        });
    }

    /// Runs `step` under the lock until it is done, waiting outside the lock
    /// (for the use the tracker named, or for ring space) between attempts.
    /// Hands batches closed under the lock to the completion thread after
    /// each attempt.
    pub(crate) fn with_publication<R>(
        this: &Arc<Self>,
        mut step: impl FnMut(&Self, &mut Inner<T>) -> Result<Step<R>, Error>,
    ) -> Result<R, Error> {
        this.state().check_accepting()?;
        // Read the clock only once the ring is found full: the common
        // publication never needs it.
        let mut full_since: Option<Instant> = None;
        let mut ring_backoff = Duration::from_micros(10);
        let mut retrying = false;
        loop {
            let (outcome, closed) = {
                let mut inner = this.lock();
                if retrying {
                    // What the wait proved frees room: take it in.
                    inner.tracker.poll();
                }
                let outcome = step(this, &mut inner);
                // A fence published on the way (a move's order wait ahead of
                // a refused publication) counts as submitted too: nothing
                // lock-free may answer past it.
                this.progress
                    .submitted
                    .fetch_max(inner.last_seq(), Ordering::AcqRel);
                // Usually none closed; else a recycled list takes their place.
                let closed = (!inner.closed.is_empty()).then(|| {
                    let empty = this.closed_lists.take().unwrap_or_default();
                    core::mem::replace(&mut inner.closed, empty)
                });
                (outcome, closed)
            };
            if let Some(mut closed) = closed {
                QueueCore::dispatch_closed(this, &mut closed);
                this.closed_lists.give(closed);
            }
            retrying = true;
            match outcome? {
                Step::Done(result) => return Ok(result),
                Step::Backpressure(ticket) => {
                    bump(&this.stats.backpressure_waits);
                    this.wait_outside_lock(&ticket)?;
                }
                Step::RingFull => {
                    bump(&this.stats.ring_full_retries);
                    if let Some(error) = this.state().wait_error() {
                        bump(&this.stats.device_error_returns);
                        return Err(error);
                    }
                    let since = *full_since.get_or_insert_with(Instant::now);
                    if let Some(timeout) = this.config.wait_timeout
                        && since.elapsed() >= timeout
                    {
                        return Err(Error::RingFull(timeout));
                    }
                    crate::sync::sleep(ring_backoff);
                    ring_backoff = (ring_backoff * 2).min(Duration::from_millis(1));
                }
            }
        }
    }

    /// A query's answer from what the layer knows (under the lock), or the
    /// need for a marker.
    fn plan_query(&self, inner: &mut Inner<T>) -> Result<QueryPlan, Error> {
        // Where work the layer did not publish may run, the hardware's own
        // answer (if it has one) covers it; else a marker after it does.
        let unknown = |inner: &Inner<T>| match HardwareQueue::idle(inner.tracker.queue()) {
            Some(true) => QueryPlan::Known(Status::Complete, None),
            Some(false) => QueryPlan::Known(Status::Pending, None),
            None => QueryPlan::Marker,
        };
        let Some(newest) = inner.frontier.trusted().copied() else {
            let idle = inner.order_debt.is_none()
                && inner.frontier.idle_since_creation(inner.tracker.queue());
            return Ok(if idle {
                QueryPlan::Known(Status::Complete, None)
            } else {
                unknown(inner)
            });
        };
        // At most one load. Failed or still running, it answers for the
        // stream whatever follows it; complete, only if nothing does.
        let status = inner.tracker.query(&newest.ticket)?;
        let answers = status != Status::Complete
            || !inner
                .frontier
                .followed_by_foreign_work(inner.tracker.queue());
        Ok(if answers {
            QueryPlan::Known(status, Some(newest.ticket))
        } else {
            unknown(inner)
        })
    }

    /// What a new hardware queue must wait for before the stream's next
    /// packet runs there, when the stream moves (under the lock): the old
    /// queue's newest command where it stands for everything on that
    /// queue; else a marker published after everything there now (the
    /// runtime's own packets, a partly refused command's issued work).
    /// `None`: nothing was ever published there.
    fn owed_by_old_queue(&self, inner: &mut Inner<T>) -> Result<Option<Step<Ticket>>, Error> {
        if let Some(newest) = inner.frontier.trusted().copied()
            && (inner.frontier.standing(inner.tracker.queue()).is_some()
                || inner.tracker.known_status(&newest.ticket)? == Some(Status::Failed))
        {
            // A failed one is refused when it is pinned: the stream's work
            // failed, and what follows it in order may not run as if not.
            return Ok(Some(Step::Done(newest.ticket)));
        }
        if inner.frontier.newest().is_none()
            && inner.frontier.idle_since_creation(inner.tracker.queue())
        {
            return Ok(None);
        }
        let published =
            match inner.publish(&self.stats, Packet::new(Work::Marker, Purpose::GpuWaiter)) {
                Ok(step) => match step.or_retry() {
                    Ok(published) => published,
                    Err(retry) => return Ok(Some(retry)),
                },
                Err(error) => return Err(error),
            };
        let ticket = published.entry.ticket;
        self.push_command(inner, published.entry, true);
        Ok(Some(Step::Done(ticket)))
    }

    /// The user let go of the queue's last handle while its work may still
    /// run (`hipStreamDestroy` returns at once, and the stream's resources
    /// go once its work is done): a marker after everything, and the open
    /// batch with it, go to the completion thread, whose job holds the
    /// queue, its tracker, and the pins its packets wait on, until the
    /// marker completed. Nothing waits for the GPU here.
    fn last_handle_gone(this: &Arc<Self>) {
        let handoff = {
            let mut inner = this.lock();
            if !this.may_still_run(&mut inner) || this.state().check_accepting().is_err() {
                return;
            }
            let packet = Packet::new(Work::Marker, Purpose::CpuSync).hold();
            let Ok(Step::Done(published)) = inner.publish(&this.stats, packet) else {
                // No room or no signal now: a later drop of the queue's last
                // reference ends the tracker as before.
                return;
            };
            let last_seq = published.entry.seq;
            this.push_command(&mut inner, published.entry, false);
            this.progress.note_taken(last_seq);
            Handoff {
                batch: this.take_batch(&mut inner),
                signal: published.signal,
                last_seq,
                marker: None,
                wake: None,
            }
        };
        let _ = QueueCore::hand_to_handler(this, handoff, Some(Duration::ZERO));
    }

    /// Whether anything the layer published may still run (under the
    /// lock): a command not known complete, or a wake packet still waiting.
    fn may_still_run(&self, inner: &mut Inner<T>) -> bool {
        // The newest command, on whichever hardware queue, is a fence after
        // every other packet of the layer's that names a tracker's signal
        // (a move's order wait pins it or an earlier use): once it
        // completed, only wake packets may still read a signal. A refused
        // one answers Failed while its issued part may run: not done.
        let newest_done = match inner.frontier.newest().copied() {
            Some(newest) => inner.tracker.query(&newest.ticket).ok() == Some(Status::Complete),
            None => inner.order_debt.is_none(),
        };
        let memory = self.waiter.memory();
        !newest_done || inner.wakes.release_done(memory)
    }

    /// Waits for `ticket`'s use outside the lock (back-pressure).
    fn wait_outside_lock(&self, ticket: &Ticket) -> Result<(), Error> {
        let end = cpu_wait::wait_for(
            |slice, policy| self.waiter.wait(ticket, slice, policy),
            self.state(),
            &self.settings(),
        )?;
        end.into_result(Some(&self.stats), || self.report_failure(ticket))
    }

    /// Hands closed batches to the completion thread (outside the lock).
    pub(crate) fn dispatch_closed(this: &Arc<Self>, closed: &mut Vec<Handoff<T::Memory>>) {
        for handoff in closed.drain(..) {
            if handoff.signal.is_none() {
                // Its fence is already known done: nothing to wait for.
                let Handoff {
                    batch, last_seq, ..
                } = handoff;
                let fence = batch.last().map(|fence| this.waiter.status(&fence.ticket));
                let outcome = match fence {
                    Some(Ok(Status::Failed)) => Outcome::Failed,
                    _ => Outcome::Complete,
                };
                this.finish_batch(batch, last_seq, &outcome, this.state(), false);
                continue;
            }
            // A submission never waits for the GPU: if the batch must be
            // finished here, it is only if its fence is already done.
            let _ = QueueCore::hand_to_handler(this, handoff, Some(Duration::ZERO));
        }
    }

    /// Gives a batch to the completion thread. If the thread cannot start,
    /// the calling thread finishes the batch itself (outside the lock),
    /// waiting at most `inline_wait` for its fence (`None`: as long as the
    /// GPU takes); past that the batch is abandoned
    /// ([`run_inline`](crate::handler::run_inline)) and this returns
    /// [`Error::TimedOut`].
    pub(crate) fn hand_to_handler(
        this: &Arc<Self>,
        handoff: Handoff<T::Memory>,
        inline_wait: Option<Duration>,
    ) -> Result<(), Error> {
        this.jobs.add();
        let job = this.job_box(BatchJob::new(handoff, this.clone(), this.jobs.clone()));
        if let Err(job) = this.device.handler.submit(job as Box<dyn Job>) {
            // The completion thread could not start: finish the job here,
            // outside the lock.
            if !crate::handler::run_inline(job, this.state(), inline_wait) {
                return Err(Error::TimedOut(inline_wait.unwrap_or_default()));
            }
        }
        Ok(())
    }

    /// Completes a batch that left the open batch: settles its commands
    /// (outside the lock) and records what is now known.
    pub(crate) fn finish_batch(
        &self,
        batch: Batch,
        last_seq: u64,
        outcome: &Outcome,
        device: &DeviceState,
        poll: bool,
    ) {
        if holds_an_execution_lock() {
            bump(&self.stats.batches_completed_under_lock);
        }
        match outcome {
            Outcome::Complete => {
                self.progress.note_synced(last_seq);
                batch.complete(outcome, &self.waiter);
                if poll {
                    // Off the submit path: let go of the uses finished wake
                    // packets waited on (`apply_pending`: as the lock is
                    // taken, or by its next holder if it is busy), then
                    // retire and re-arm what completed, those uses too
                    // rather than parking them.
                    self.wakes_to_release.store(true, Ordering::Release);
                    if let Some(mut inner) = self.try_lock() {
                        inner.tracker.poll();
                    }
                }
            }
            Outcome::Failed => {
                device.report(format!("queue {} failed", self.id));
                batch.complete(outcome, &self.waiter);
                if let Some(fence) = batch.last() {
                    self.note_queue_failed(&fence.ticket);
                }
            }
            Outcome::DeviceError(_) => batch.complete(outcome, &self.waiter),
        }
        bump(&self.stats.batches_completed);
        self.recycle(batch);
    }

    /// `failed`'s use of this queue failed: the device enters the error
    /// state and the tracker is told (the pending uses of the hardware queue
    /// it ran on fail). Callable with or without the lock.
    pub(crate) fn report_failure(&self, failed: &Ticket) -> Error {
        self.state().report(format!("queue {} failed", self.id));
        self.note_queue_failed(failed);
        Error::QueueFailed { queue: self.id }
    }

    /// Harvests the timestamps of a completed batch's timed commands into
    /// host memory (under the lock), so elapsed-time reads need no PCIe read
    /// and no lock.
    pub(crate) fn process_timing(&self, inner: &mut Inner<T>, batch: &Batch) {
        if !self.config.profiling {
            return;
        }
        for entry in batch.entries().iter().filter(|e| e.timed) {
            let _ = inner.tracker.timestamps(&entry.ticket);
        }
        bump(&self.stats.timing_passes);
    }

    /// Resets queue state after a completed fence that is the newest
    /// command: the queue is idle, so the tracker may retire everything
    /// (and release the pins its waits held).
    pub(crate) fn reset_state(&self, inner: &mut Inner<T>) {
        // First the pins of the wake packets that ran (every one published
        // before the marker), so the drain retires their uses too rather
        // than parking them until a later reclaim. Not every wake packet
        // need have run: one published after the marker may still read its
        // use's signal, and keeps its pin.
        inner.wakes.release_done(self.waiter.memory());
        inner.tracker.note_drained();
        if !inner.left_queues.is_empty() {
            // The drain proves the current hardware queue's uses only. The
            // queues the stream left ran its older uses: each one's newest
            // fence, loaded once, retires them (and lets go of the pins
            // their waits held) rather than leaving them in flight.
            inner.tracker.poll();
        }
        inner.unattached.clear();
        bump(&self.stats.state_resets);
    }
}

impl<T: QueueTracker> BatchOwner for QueueCore<T> {
    type Memory = T::Memory;

    fn finish_batch(
        &self,
        batch: Batch,
        last_seq: u64,
        outcome: &Outcome,
        device: &DeviceState,
        poll: bool,
    ) {
        QueueCore::finish_batch(self, batch, last_seq, outcome, device, poll);
    }

    fn recycle_job_box(&self, job: Box<BatchJob<Self>>) {
        self.job_boxes.give(job);
    }

    fn note_completed_here(&self) {
        bump(&self.stats.handler_batches);
    }

    fn note_handler_sleep(&self) {
        bump(&self.stats.handler_sleeps);
    }

    fn sleep_on(&self, wake: <T::Memory as SignalMemory>::Signal, timeout: Duration) -> bool {
        // SAFETY: one of this queue's wake signals (the pool lent it to
        // the job's batch), from this memory.
        unsafe { self.waiter.memory().sleep_while(wake, 1, timeout) != 1 }
    }

    fn arm_wake_for(&self, fence: &Ticket) -> Option<crate::wake::Armed<T::Memory>> {
        let mut inner = self.try_lock()?;
        inner
            .arm_wake(&self.stats, self.waiter.memory(), fence)
            .ok()
            .flatten()
    }
}

impl<T: QueueTracker> Drop for QueueCore<T> {
    fn drop(&mut self) {
        self.device.state.note_teardown();
    }
}

/// A host queue (a HIP stream) on one hardware queue.
///
/// Cheap to clone; clones share the queue. Its execution lock covers
/// submission only: `launch`, `record_event`, `wait_event` and `query` take
/// it for microseconds, and no thread holds it while it waits for the GPU,
/// so a synchronize on one thread never blocks another thread's submission.
///
/// Dropping the last handle never waits for the GPU: the queue lives on
/// while its events or the completion thread's jobs hold it, and is torn
/// down by whichever lets go last, except that the completion thread hands
/// its last reference to a teardown thread rather than destroy the queue
/// itself.
///
/// ```
/// use sigretire_queue::sim::SimPlatform;
/// use sigretire_queue::tracker::Status;
///
/// let platform = SimPlatform::stepped();
/// let device = platform.device(Default::default(), Default::default())?;
/// let queue = device.default_queue();
/// let kernel = queue.launch(0)?;
/// assert_eq!(queue.query()?, Status::Pending);
/// platform.run_while(|| queue.synchronize())?; // the stepped GPU runs meanwhile
/// assert_eq!(queue.query()?, Status::Complete);
/// assert!(kernel.is_released());
/// # Ok::<(), sigretire_queue::Error>(())
/// ```
pub struct HostQueue<T: QueueTracker> {
    core: Arc<QueueCore<T>>,
}

impl<T: QueueTracker> Clone for HostQueue<T> {
    fn clone(&self) -> Self {
        self.core.handles.fetch_add(1, Ordering::Relaxed);
        Self {
            core: self.core.clone(),
        }
    }
}

impl<T: QueueTracker> Drop for HostQueue<T> {
    fn drop(&mut self) {
        // AcqRel: the last handle sees everything the others published.
        if self.core.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            QueueCore::last_handle_gone(&self.core);
        }
    }
}

impl<T: QueueTracker> HostQueue<T> {
    pub(crate) fn create(
        device: Arc<DeviceShared>,
        tracker: T,
        config: QueueConfig,
    ) -> Result<Self, Error> {
        config.validate()?;
        let waiter = tracker.waiter();
        // Wake signals serve the waits that sleep and the completion thread,
        // which sleeps on every closed batch whatever the wait policy.
        let wakes = crate::wake::WakePool::create(waiter.memory(), config.wake_signals);
        let stats = Counters::default();
        stats
            .wake_signals
            .store(wakes.len() as u64, Ordering::Relaxed);
        let states = Arc::new(StatePool::default());
        let horizon = Arc::new(Horizon::new(tracker.queue().clone()));
        let core = QueueCore {
            horizon: horizon.clone(),
            id: NEXT_QUEUE_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            config,
            lock: Mutex::new(Inner {
                frontier: Frontier::default(),
                horizon: horizon.clone(),
                tracker,
                batch: Batch::default(),
                next_seq: 1,
                in_flight_marker: None,
                signals: Placement::Host,
                closed: Vec::new(),
                unattached: Vec::new(),
                order_debt: None,
                left_queues: Vec::new(),
                wakes,
                states: Stash::new(states.clone()),
            }),
            waiter,
            device,
            progress: Progress::default(),
            stats,
            jobs: Arc::new(JobCount::default()),
            handles: AtomicU64::new(1),
            failure_pending: AtomicBool::new(false),
            failed_uses: Mutex::new(Vec::new()),
            wakes_to_release: AtomicBool::new(false),
            states,
            buffers: Pool::default(),
            job_boxes: Pool::default(),
            markers: Pool::default(),
            closed_lists: Pool::default(),
        };
        Ok(Self {
            core: Arc::new(core),
        })
    }

    pub(crate) fn core(&self) -> &Arc<QueueCore<T>> {
        &self.core
    }

    /// The queue's id, unique in the process.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// assert!(device.default_queue().id() > 0);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn id(&self) -> u64 {
        self.core().id
    }

    /// The queue's configuration.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// assert_eq!(device.default_queue().config().cpu_sync_batch, 8);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn config(&self) -> QueueConfig {
        self.core().config
    }

    /// Dispatches the kernel the backend knows by `kernel_object` (0: the
    /// empty kernel; on the simulator, see `Sim::register_kernel`). The
    /// packet carries the barrier bit (an in-order queue). Takes the lock for
    /// the publication only; under tracker back-pressure it waits for the
    /// named use *outside* the lock, then retries.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let copy = platform.sim().register_kernel(sigretire_queue::sim::Kernel::Duration(std::time::Duration::from_micros(50)));
    /// let command = device.default_queue().launch(copy)?;
    /// assert_eq!(command.seq(), 1);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn launch(&self, kernel_object: u64) -> Result<Command<T::Memory>, Error> {
        self.submit(if kernel_object == 0 {
            Work::Empty
        } else {
            Work::Kernel(kernel_object)
        })
    }

    /// Publishes the caller's `work` (any packet body it builds: its own
    /// kernel dispatch with its kernel arguments, a barrier-OR, an AMD
    /// barrier-value wait) as one command, with the events, synchronize,
    /// query and cross-queue waits of any other. The header (with the
    /// barrier bit: an in-order queue) and the completion signal are the
    /// library's. A backend that cannot express the work refuses it
    /// ([`Error::Queue`]); the queue keeps working.
    ///
    /// ```
    /// use sigretire_queue::tracker::{Dispatch, Work};
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// let dispatch = Dispatch::new(0).kernarg_address(0x1000).grid([256, 1, 1]).workgroup([64, 1, 1]);
    /// let command = queue.submit(Work::Dispatch(dispatch))?;
    /// platform.run_while(|| command.wait())?;
    /// assert!(command.status().is_done());
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn submit(&self, work: Work<'_>) -> Result<Command<T::Memory>, Error> {
        let core = self.core();
        let entry = QueueCore::with_publication(core, |core, inner| {
            let published = match inner
                .publish(&core.stats, Packet::new(work, Purpose::Completion))?
                .or_retry()
            {
                Ok(published) => published,
                Err(retry) => return Ok(retry),
            };
            let entry = published.entry;
            core.push_command(inner, entry.clone(), true);
            Ok(Step::Done(entry))
        })?;
        Ok(QueueCore::command(core, entry))
    }

    /// Publishes `works` as one command of several operations (a copy done
    /// line by line, a kernel split in parts): consecutive packets sharing
    /// one completion signal, the command complete once every one of them
    /// is. If the backend refuses one of them, the rest are replaced with
    /// empty packets, the command fails once the issued ones have finished,
    /// and the refusal is returned.
    ///
    /// ```
    /// use sigretire_queue::tracker::{Dispatch, Work};
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// let rows = [0, 1, 2].map(|row| Work::Dispatch(Dispatch::new(0).kernarg_address(0x1000 + 64 * row)));
    /// let command = queue.submit_all(&rows)?;
    /// assert_eq!(command.aql_index(), 2, "its last packet");
    /// platform.run_while(|| command.wait())?;
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn submit_all(&self, works: &[Work<'_>]) -> Result<Command<T::Memory>, Error> {
        let core = self.core();
        let (entry, refused) = QueueCore::with_publication(core, |core, inner| {
            let published = match inner.publish_all(&core.stats, works)?.or_retry() {
                Ok(published) => published,
                Err(retry) => return Ok(retry),
            };
            let entry = published.entry;
            let refused = published.refused.is_some();
            if refused {
                // Its issued packets run: it joins the batch (so what
                // completes the batch waits for them), failed from now on.
                entry.state.settle(CommandStatus::Failed);
            }
            // A refused command is no fence for its batch (its signal may
            // be known done before its issued packets are): the batch
            // closes at a later command.
            core.push_command(inner, entry.clone(), !refused);
            Ok(Step::Done((entry, published.refused)))
        })?;
        match refused {
            Some(error) => Err(error),
            None => Ok(QueueCore::command(core, entry)),
        }
    }

    /// The runtime moved the stream to another hardware queue: later
    /// commands are published on `queue`, and the tracker starts a new
    /// generation for it ([`Tracker::note_queue_change`](sigretire_tracker::Tracker::note_queue_change)). The stream stays
    /// in order: while the old queue's newest command may still run, the
    /// first packet on the new queue is a barrier-AND waiting for it (its
    /// signal pinned until that wait retires), so nothing on the new queue
    /// overtakes what was submitted before the move. Commands, events and
    /// waits from before the move keep working. Publishes nothing itself.
    ///
    /// The queue layer keeps its handle of the old queue (so a backend that
    /// destroys a queue with its last handle does not destroy this one
    /// under the stream's work) until a later move finds everything before
    /// it finished, or until the host queue is dropped.
    ///
    /// The new queue must share signal memory with the old one: the
    /// tracker's signals are what its packets complete.
    ///
    /// ```
    /// use sigretire_queue::sim::{HostFlag, Kernel};
    /// use sigretire_queue::CommandStatus;
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let sim = platform.sim();
    /// let queue = device.default_queue();
    /// let flag = HostFlag::new();
    /// let before = queue.launch(sim.register_kernel(Kernel::SpinUntil(flag.clone())))?;
    /// queue.move_to(sim.create_queue(Default::default()).unwrap())?;
    /// let after = queue.launch(0)?;
    /// sim.run_until_idle();
    /// assert_eq!(after.status(), CommandStatus::Pending, "ordered behind the old queue");
    /// flag.set();
    /// platform.run_while(|| queue.synchronize())?;
    /// assert!(before.status().is_done() && after.status().is_done());
    /// assert_eq!((queue.stats().queue_changes, queue.stats().order_waits), (1, 1));
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::ForeignSignalMemory`] for a queue whose packets cannot name
    /// the tracker's signals; [`Error::Tracker`] if the tracker cannot pin
    /// the old queue's newest command; [`Error::QueueFailed`] (the device
    /// then in the error state) if the stream's work on the old queue
    /// failed: work after it in stream order may not run as if it had not.
    /// A stream whose hardware queue failed is dropped, and a new one made.
    pub fn move_to(&self, queue: T::Queue) -> Result<(), Error> {
        let core = self.core();
        let memory_domain = core.waiter.memory().signal_domain();
        if let (Some(memory), Some(reached)) = (memory_domain, queue.signal_domain())
            && memory != reached
        {
            // Its packets could never name the tracker's signals.
            return Err(Error::ForeignSignalMemory);
        }
        let finished = QueueCore::with_publication(core, |core, inner| {
            // Moved before with nothing published since, the stream still
            // owes the queue before: that debt stands, unless work of
            // someone else's landed on the queue it leaves now, which a
            // marker there (paying the old debt first) must cover too.
            let owes_more = inner.order_debt.is_none()
                || inner
                    .frontier
                    .followed_by_foreign_work(inner.tracker.queue());
            if owes_more {
                let owed = match core.owed_by_old_queue(inner)?.map(Step::or_retry) {
                    None => None,
                    Some(Ok(owed)) => Some(owed),
                    Some(Err(retry)) => return Ok(retry),
                };
                if let Some(owed) = owed {
                    // `None`: known complete, nothing to order behind.
                    inner.order_debt = match inner.tracker.pin(&owed) {
                        Ok(pin) => pin,
                        Err(sigretire_tracker::PinError::Failed { .. }) => {
                            return Err(core.report_failure(&owed));
                        }
                        Err(error) => return Err(error.into()),
                    };
                }
            }
            // Everything before the move finished: the queues left earlier
            // run nothing of the stream any more. Their handles are dropped
            // after the lock is released, as dropping one may wait for the
            // GPU.
            let finished = match inner.order_debt {
                None => core::mem::take(&mut inner.left_queues),
                Some(_) => Vec::new(),
            };
            let old = inner.tracker.queue().clone();
            inner.left_queues.push(old);
            // The next command pays the order debt first; until then
            // nothing published on the old queue stands for the new one.
            inner.frontier.note_move();
            core.horizon.note_move(queue.clone());
            inner.tracker.note_queue_change(queue.clone());
            bump(&core.stats.queue_changes);
            Ok(Step::Done(finished))
        })?;
        drop(finished);
        Ok(())
    }

    /// Whether everything submitted so far completed: the status of the
    /// newest command (a fence), proven with at most one load. Takes the lock
    /// briefly (as `hipStreamQuery` does) unless a completed marker already
    /// covers everything submitted. A failed queue puts the device in the
    /// error state and answers [`Status::Failed`].
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// queue.launch(0)?;
    /// assert_eq!(queue.query()?, sigretire_queue::tracker::Status::Pending);
    /// platform.sim().run_until_idle();
    /// assert_eq!(queue.query()?, sigretire_queue::tracker::Status::Complete);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn query(&self) -> Result<Status, Error> {
        let core = self.core();
        if core.progress.synced_through() >= core.progress.submitted()
            && !core.horizon.foreign_work_possible()
        {
            return Ok(Status::Complete);
        }
        // Known without a marker: answered without asking whether the
        // device accepts work (a failed device still answers queries).
        let known = match core.plan_query(&mut core.lock())? {
            QueryPlan::Known(status, ticket) => Some((status, ticket)),
            QueryPlan::Marker => None,
        };
        let (status, ticket) = match known {
            Some(known) => known,
            None => QueueCore::with_publication(core, |core, inner| {
                Ok(match core.plan_query(inner)? {
                    QueryPlan::Known(status, ticket) => Step::Done((status, ticket)),
                    QueryPlan::Marker => {
                        // Nothing the layer published stands for the
                        // queue: a marker after everything on it does, now
                        // and for the queries after it while nothing else
                        // follows.
                        let published = match inner
                            .publish(&core.stats, Packet::new(Work::Marker, Purpose::CpuSync))?
                            .or_retry()
                        {
                            Ok(published) => published,
                            Err(retry) => return Ok(retry),
                        };
                        let ticket = published.entry.ticket;
                        core.push_command(inner, published.entry, true);
                        Step::Done((inner.tracker.query(&ticket)?, Some(ticket)))
                    }
                })
            })?,
        };
        if status == Status::Failed
            && let Some(ticket) = ticket
        {
            core.report_failure(&ticket);
        }
        Ok(status)
    }

    /// A snapshot of the queue's counters.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// device.default_queue().launch(0)?;
    /// assert_eq!(device.default_queue().stats().commands, 1);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn stats(&self) -> QueueStats {
        self.core().stats.snapshot()
    }

    /// Runs `f` on the tracker under the execution lock (for diagnostics:
    /// its stats, its census). Do not wait for the GPU inside `f`.
    ///
    /// ```
    /// use sigretire_queue::tracker::Tracker;
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// device.default_queue().launch(0)?;
    /// let uses = device.default_queue().with_tracker(|t| t.stats().uses);
    /// assert_eq!(uses, 1);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn with_tracker<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.core().lock().tracker)
    }

    /// How many closed batches the completion thread still holds for this
    /// queue.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// assert_eq!(device.default_queue().batches_in_completion(), 0);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn batches_in_completion(&self) -> usize {
        self.core().jobs.pending()
    }
}

impl<T: QueueTracker> core::fmt::Debug for HostQueue<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HostQueue")
            .field("id", &self.id())
            .field("config", &self.core().config)
            .field("stats", &self.stats())
            .finish()
    }
}
