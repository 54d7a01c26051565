//! The completion thread: the async-handler analogue that completes batches
//! too large for a CPU wait on the synchronizing thread.
//!
//! A job holds a reference to the signal of its batch's last packet (a
//! fence: its completion proves the whole batch) and a reference to its
//! queue. The thread polls every pending job with at most one load each,
//! completes the batches whose fence completed (or releases them early when
//! the device is in the error state), and backs off while nothing moves.
//!
//! # Teardown order
//!
//! Neither the signal nor the queue may be destroyed on this thread (CLR
//! defers both to the runtime's own threads). A finished job therefore drops
//! its signal reference first — the queue it still holds keeps the tracker,
//! and with it the signal memory, alive, so this is never the signal's last
//! reference — and then lets go of its queue reference with
//! [`Arc::into_inner`](std::sync::Arc::into_inner): if every handle and
//! event of the queue is already gone, that was the last reference, and the
//! queue is handed to a short-lived teardown thread instead of being
//! destroyed here. The thread itself holds only the device's error state,
//! so the device, and its join of this thread, is torn down elsewhere too.

use crate::batch::{Batch, Outcome};
use crate::device::DeviceState;
use crate::marker::Marker;
use crate::queue::{QueueCore, QueueTracker};
use crate::sync::mpsc::{self, Received};
use crate::sync::thread::{self, JoinHandle};
use crate::sync::{Arc, Mutex, Ordering};
use std::time::Duration;
use tracker::{SignalRef, Status};

/// The completion thread's first and longest back-off between polls.
const MIN_BACKOFF: Duration = Duration::from_micros(5);
const MAX_BACKOFF: Duration = Duration::from_micros(200);

/// Work the completion thread finishes once its signal says so.
pub(crate) trait Job: Send {
    /// Whether the job can finish now: its signal completed or failed (one
    /// load at most), or the device is in the error state.
    fn ready(&mut self, device: &DeviceState) -> bool;

    /// Completes the batch and drops the references, in order.
    fn finish(self: Box<Self>, device: &DeviceState);
}

/// Counts a queue's jobs on the completion thread.
#[derive(Debug, Default)]
pub(crate) struct JobCount {
    pending: Mutex<usize>,
}

impl JobCount {
    pub(crate) fn add(&self) {
        *self.pending.lock() += 1;
    }

    pub(crate) fn done(&self) {
        let mut pending = self.pending.lock();
        *pending = pending.saturating_sub(1);
    }

    pub(crate) fn pending(&self) -> usize {
        *self.pending.lock()
    }
}

struct Running {
    sender: mpsc::Sender<Box<dyn Job>>,
    thread: JoinHandle<()>,
}

/// The completion thread of one device, started with its first job.
pub(crate) struct Handler {
    state: Arc<DeviceState>,
    running: Mutex<Option<Running>>,
}

impl Handler {
    pub(crate) fn new(state: Arc<DeviceState>) -> Self {
        Self {
            state,
            running: Mutex::new(None),
        }
    }

    /// Hands `job` to the thread, starting it if needed; gives the job back
    /// if the thread cannot start (the caller then finishes it itself).
    pub(crate) fn submit(&self, job: Box<dyn Job>) -> Result<(), Box<dyn Job>> {
        let mut running = self.running.lock();
        if running.is_none() {
            let (sender, receiver) = mpsc::channel();
            let state = self.state.clone();
            match thread::spawn("fences-completion".into(), move || run(&receiver, &state)) {
                Ok(thread) => {
                    // Known before the thread runs, so a teardown there is
                    // always recognised.
                    #[cfg(not(loom))]
                    let _ = self.state.handler_thread.set(thread.thread().id());
                    *running = Some(Running { sender, thread });
                }
                Err(_) => return Err(job),
            }
        }
        let Some(running) = running.as_ref() else {
            return Err(job);
        };
        running.sender.send(job).map_err(|error| error.0)
    }
}

impl Drop for Handler {
    fn drop(&mut self) {
        // The last queue and the device are gone, so no job is pending (each
        // holds its queue): closing the channel ends the thread at once.
        if let Some(Running { sender, thread }) = self.running.lock().take() {
            drop(sender);
            let _ = thread.join();
        }
    }
}

/// The thread's loop: take jobs, poll them, finish the ready ones, back off.
fn run(receiver: &mpsc::Receiver<Box<dyn Job>>, state: &DeviceState) {
    #[cfg(not(loom))]
    let _ = state.handler_thread.set(std::thread::current().id());
    let mut pending: Vec<Box<dyn Job>> = Vec::new();
    let mut backoff = MIN_BACKOFF;
    let mut connected = true;
    loop {
        if pending.is_empty() {
            if !connected {
                return;
            }
            match receiver.recv() {
                Ok(job) => pending.push(job),
                Err(_) => return,
            }
        }
        while connected {
            match receiver.try_recv() {
                Ok(job) => pending.push(job),
                Err(std::sync::mpsc::TryRecvError::Empty) => break,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => connected = false,
            }
        }
        let mut progressed = false;
        let mut i = 0;
        while i < pending.len() {
            if pending[i].ready(state) {
                pending.swap_remove(i).finish(state);
                progressed = true;
            } else {
                i += 1;
            }
        }
        if progressed || pending.is_empty() {
            backoff = MIN_BACKOFF;
            continue;
        }
        // Nothing moved: wait for a new job or the back-off, whichever first.
        if connected {
            match mpsc::recv_for(receiver, backoff) {
                Received::Message(job) => {
                    pending.push(job);
                    backoff = MIN_BACKOFF;
                    continue;
                }
                Received::Nothing => {}
                Received::Disconnected => connected = false,
            }
        } else {
            crate::sync::sleep(backoff);
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Destroys `orphan` on a short-lived thread of its own. If no thread can
/// be started, the orphan is leaked (and counted) rather than destroyed here.
fn tear_down_elsewhere<C: Send + 'static>(orphan: C, device: &DeviceState) {
    let slot = Arc::new(Mutex::new(Some(orphan)));
    let theirs = slot.clone();
    let started = thread::spawn("fences-teardown".into(), move || {
        let orphan = theirs.lock().take();
        drop(orphan);
    });
    match started {
        Ok(handle) => drop(handle), // detached: it ends once the drop is done
        Err(_) => {
            if let Some(orphan) = slot.lock().take() {
                core::mem::forget(orphan);
                device.teardowns_leaked.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Finishes `job` on the calling thread (when the completion thread cannot
/// start), polling with a short back-off.
pub(crate) fn run_inline(mut job: Box<dyn Job>, device: &DeviceState) {
    while !job.ready(device) {
        crate::sync::sleep(Duration::from_micros(50));
    }
    job.finish(device);
}

/// Completes one closed batch (or a large synchronize's marker batch) when
/// the fence that ends it completes.
pub(crate) struct BatchJob<T: QueueTracker> {
    /// The fence's signal; `None` when it was already known complete.
    pub(crate) signal: Option<SignalRef<T::Memory>>,
    pub(crate) batch: Batch,
    /// The batch's last command (the fence).
    pub(crate) last_seq: u64,
    /// The synchronize waiting for this batch, if any.
    pub(crate) marker: Option<Arc<Marker>>,
    pub(crate) queue: Option<Arc<QueueCore<T>>>,
    pub(crate) jobs: Arc<JobCount>,
    pub(crate) outcome: Option<Outcome>,
}

impl<T: QueueTracker> Job for BatchJob<T> {
    fn ready(&mut self, device: &DeviceState) -> bool {
        let status = self
            .signal
            .as_ref()
            .map_or(Status::Complete, |s| s.status());
        self.outcome = match status {
            Status::Complete => Some(Outcome::Complete),
            Status::Failed => Some(Outcome::Failed),
            Status::Pending => device.wait_error().map(Outcome::DeviceError),
        };
        self.outcome.is_some()
    }

    fn finish(mut self: Box<Self>, device: &DeviceState) {
        let outcome = self.outcome.take().unwrap_or(Outcome::Complete);
        let signal = self.signal.take();
        let Some(queue) = self.queue.take() else {
            return;
        };
        let batch = core::mem::take(&mut self.batch);
        queue.stats.handler_batches.fetch_add(1, Ordering::Relaxed);
        queue.finish_batch(batch, self.last_seq, &outcome, device, true);
        if let Some(marker) = self.marker.take() {
            marker.finish(outcome);
        }
        self.jobs.done();
        // First the signal: the queue, still held, keeps the tracker and its
        // signal memory alive, so this is never the signal's last reference.
        drop(signal);
        // Then the queue. If this was its last reference (every handle and
        // event is gone), it is torn down on another thread, not this one.
        if let Some(orphan) = crate::sync::arc_into_inner(queue) {
            tear_down_elsewhere(orphan, device);
        }
    }
}
