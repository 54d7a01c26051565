//! A device's completion thread: the async-handler analogue that finishes
//! jobs (a queue's closed batches, `completion`) once their fence says so.
//!
//! A job holds a reference to the signal of its batch's last packet (a
//! fence: its completion proves the whole batch) and a reference to its
//! queue. The thread looks at every pending job with at most one load each,
//! finishes the jobs whose fence completed (or releases them early when the
//! device is in the error state), and, while nothing moves, sleeps. What a
//! job is, and how it finishes, is the job's ([`Job`]); the thread only
//! schedules them.
//!
//! # Sleeping
//!
//! The thread sleeps in the kernel on a wake signal of its oldest job's
//! queue: a barrier-AND packet on the job's fence completes it, so the GPU
//! wakes the thread as the fence completes, with no load of the fence's
//! signal meanwhile (each would be a PCIe read in device memory). Every
//! queue's wake signals serve this, whatever its wait policy
//! ([`QueueConfig::wake_signals`](crate::QueueConfig::wake_signals)). The
//! job gets its wake signal as its batch closes,
//! the packet right behind the fence, or, if none was free then, from the
//! thread when it is about to sleep (taking the queue's lock only if it is
//! free). A packet published behind later work may wake the thread only
//! once that work is done too, so the thread then looks at the job after
//! every sleep slice ([`MAX_WAKE_SLEEP`]). The other jobs are looked at
//! when a job arrives and at least every [`FULL_LOOK_EVERY`]. The thread
//! polls with a back-off ([`IDLE`]) only where it gets no wake signal: a
//! backend without them, a spent event budget, a busy lock or a full ring.
//! Each idle spell is one wait of the tracker's engine ([`Wait`]): its
//! sleeps on a wake, and its back-off.
//!
//! # Teardown order
//!
//! Neither the signal nor the queue may be destroyed on this thread (CLR
//! defers both to the runtime's own threads). A finished job therefore drops
//! its signal reference first — the queue it still holds keeps the tracker,
//! and with it the signal memory, alive, so this is never the signal's last
//! reference — and then lets go of its queue reference ([`let_go`]) with
//! [`Arc::into_inner`](std::sync::Arc::into_inner): if every handle and
//! event of the queue is already gone, that was the last reference, and the
//! queue is handed to a short-lived teardown thread instead of being
//! destroyed here. The thread itself holds only the device's error state,
//! so the device, and its join of this thread, is torn down elsewhere too.

use crate::device_state::DeviceState;
use crate::sync::thread::{self, JoinHandle};
use crate::sync::{Arc, Condvar, Mutex, Ordering, identity};
use sigretire_tracker::{
    WaitPolicy,
    wait::{Wait, WakeSource},
};
use std::time::{Duration, Instant};

/// How the thread passes an idle spell: with no wake signal to sleep on,
/// it polls with sleeps from 5 us doubling up to 200 us, each ended early
/// by a new job.
const IDLE: WaitPolicy = WaitPolicy {
    spin: Duration::ZERO,
    device_spin: Duration::ZERO,
    yield_for: Duration::ZERO,
    max_sleep: Duration::from_micros(200),
    interrupt: true,
    hybrid: None,
};
/// The idle back-off's first sleep.
const FIRST_IDLE_SLEEP: Duration = Duration::from_micros(5);
/// Jobs the thread's vectors have room for from the start, so a submission
/// does not grow them while the device warms up.
const JOBS_AT_ONCE: usize = 64;
/// The longest the thread sleeps on its first job's wake signal at a time:
/// jobs that arrive meanwhile, and the device error state, are looked at no
/// later than this.
const MAX_WAKE_SLEEP: Duration = Duration::from_millis(1);
/// While it sleeps on its first job, the thread still looks at every job at
/// least this often: one of another queue may complete before it.
const FULL_LOOK_EVERY: Duration = Duration::from_millis(10);
/// How a job finished on the calling thread ([`run_inline`]) polls: every
/// 50 us.
const INLINE: WaitPolicy = WaitPolicy {
    spin: Duration::ZERO,
    device_spin: Duration::ZERO,
    yield_for: Duration::ZERO,
    max_sleep: Duration::from_micros(50),
    interrupt: false,
    hybrid: None,
};

/// Work the completion thread finishes once its signal says so.
pub(crate) trait Job: Send {
    /// What the thread sleeps on while the job is the oldest pending.
    type Wake<'a>: WakeSource
    where
        Self: 'a;

    /// Whether the job can finish now: its signal completed or failed (one
    /// load at most), or the device is in the error state.
    fn ready(&mut self, device: &DeviceState) -> bool;

    /// Completes the batch and drops the references, in order.
    fn finish(self: Box<Self>, device: &DeviceState);

    /// Gives up on the job without completing its batch (see
    /// [`run_inline`]): drops the references, in order.
    fn abandon(self: Box<Self>, device: &DeviceState);

    /// A wake signal the GPU completes as the job's fence completes: the
    /// one the job holds, or one it arms now; `None` when it has none and
    /// can get none (the thread polls).
    fn wake(&mut self) -> Option<Self::Wake<'_>>;
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

/// Jobs on their way to the thread. A vector the thread swaps for its own
/// empty one, so neither side allocates once both have grown (a channel
/// would allocate a block every few dozen messages on the submitting
/// thread).
struct Inbox<J> {
    jobs: Vec<Box<J>>,
    /// Cleared when the thread's owner is dropped: the thread ends once it
    /// holds no job.
    open: bool,
}

struct Mailbox<J> {
    inbox: Mutex<Inbox<J>>,
    arrived: Condvar,
}

impl<J> Mailbox<J> {
    fn new() -> Self {
        Self {
            inbox: Mutex::new(Inbox {
                jobs: Vec::with_capacity(JOBS_AT_ONCE),
                open: true,
            }),
            arrived: Condvar::new(),
        }
    }

    /// Delivers `job`, or gives it back if the thread is ending.
    fn post(&self, job: Box<J>) -> Result<(), Box<J>> {
        let mut inbox = self.inbox.lock();
        if !inbox.open {
            return Err(job);
        }
        inbox.jobs.push(job);
        self.arrived.notify_all();
        Ok(())
    }

    fn close(&self) {
        self.inbox.lock().open = false;
        self.arrived.notify_all();
    }

    fn has_arrivals(&self) -> bool {
        !self.inbox.lock().jobs.is_empty()
    }
}

struct Running<J> {
    mailbox: Arc<Mailbox<J>>,
    thread: JoinHandle<()>,
}

/// The completion thread of one device, started with its first job.
pub(crate) struct CompletionThread<J: Job + 'static> {
    state: Arc<DeviceState>,
    running: Mutex<Option<Running<J>>>,
}

impl<J: Job + 'static> CompletionThread<J> {
    pub(crate) fn new(state: Arc<DeviceState>) -> Self {
        Self {
            state,
            running: Mutex::new(None),
        }
    }

    /// Hands `job` to the thread, starting it if needed; gives the job back
    /// if the thread cannot start (the caller then finishes it itself).
    pub(crate) fn submit(&self, job: Box<J>) -> Result<(), Box<J>> {
        let mut running = self.running.lock();
        if running.is_none() {
            let mailbox = Arc::new(Mailbox::new());
            let theirs = mailbox.clone();
            let state = self.state.clone();
            match thread::spawn("fences-completion".into(), move || run(&theirs, &state)) {
                Ok(thread) => {
                    // Known before the thread runs, so a teardown there is
                    // always recognised.
                    if let Some(id) = identity::of(&thread) {
                        let _ = self.state.handler_thread.set(id);
                    }
                    *running = Some(Running { mailbox, thread });
                }
                Err(_) => return Err(job),
            }
        }
        let Some(running) = running.as_ref() else {
            return Err(job);
        };
        running.mailbox.post(job)
    }
}

impl<J: Job + 'static> Drop for CompletionThread<J> {
    fn drop(&mut self) {
        // The last queue and the device are gone, so no job is pending (each
        // holds its queue): closing the inbox ends the thread at once.
        if let Some(Running { mailbox, thread }) = self.running.lock().take() {
            mailbox.close();
            let _ = thread.join();
        }
    }
}

/// The thread's loop: take jobs, poll them, finish the ready ones; while
/// nothing moves, sleep on the first job's wake or back off.
fn run<J: Job>(mailbox: &Mailbox<J>, state: &DeviceState) {
    if let Some(id) = identity::current() {
        let _ = state.handler_thread.set(id);
    }
    let mut pending: Vec<Box<J>> = Vec::with_capacity(JOBS_AT_ONCE);
    let mut arrived: Vec<Box<J>> = Vec::with_capacity(JOBS_AT_ONCE);
    // The wait of the idle spell now, if nothing moved at the last look.
    let mut idle: Option<Wait> = None;
    let mut last_full_look = Instant::now();
    loop {
        let open = {
            let mut inbox = mailbox.inbox.lock();
            while pending.is_empty() && inbox.jobs.is_empty() {
                if !inbox.open {
                    return;
                }
                mailbox.arrived.wait(&mut inbox);
            }
            core::mem::swap(&mut inbox.jobs, &mut arrived);
            inbox.open
        };
        // `append` leaves `arrived` empty with its capacity, for the next swap.
        pending.append(&mut arrived);
        // In arrival order, which the ones left keep: the thread sleeps on
        // the oldest, whose fence on its queue completes first.
        let mut progressed = false;
        for ready in pending.extract_if(.., |job| job.ready(state)) {
            ready.finish(state);
            progressed = true;
        }
        if progressed || pending.is_empty() {
            idle = None;
            continue;
        }
        // Nothing moved. The first job may have a wake signal: sleep on it
        // until the GPU completes it, in slices, between which only the
        // inbox and the device state are looked at (no signal is read),
        // and every job at least every `FULL_LOOK_EVERY` (another queue's
        // may finish first); else wait for a new job or the back-off,
        // whichever first.
        let wait = idle.get_or_insert_with(|| {
            Wait::new(IDLE)
                .slice(MAX_WAKE_SLEEP)
                .first_sleep(FIRST_IDLE_SLEEP)
                .naps_with(crate::sync::sleep)
        });
        if open && sleep_on_first(&mut pending, mailbox, state, &mut last_full_look, wait) {
            idle = None;
            continue;
        }
        if !open {
            wait.pause();
            continue;
        }
        let mut arrived_meanwhile = false;
        wait.pause_with(|nap| {
            let inbox = mailbox.inbox.lock();
            let inbox = if inbox.jobs.is_empty() && inbox.open {
                mailbox.arrived.nap(&mailbox.inbox, inbox, nap)
            } else {
                inbox
            };
            arrived_meanwhile = !inbox.jobs.is_empty();
        });
        if arrived_meanwhile {
            idle = None;
        }
    }
}

/// Sleeps on the oldest pending job's wake signal (see `run`), as the idle
/// spell's wait; false at once if it has none and can get none. Returns
/// when the job is worth a look (its signal was written, or its packet is
/// behind later work and a slice ended), a job arrived, the device is in
/// the error state, or every job is due a look.
fn sleep_on_first<J: Job>(
    pending: &mut [Box<J>],
    mailbox: &Mailbox<J>,
    state: &DeviceState,
    last_full_look: &mut Instant,
    idle: &mut Wait,
) -> bool {
    let Some(wake) = pending.first_mut().and_then(|first| first.wake()) else {
        return false;
    };
    // The thread looked at every job just now: the wait's first look says
    // nothing new; every later one comes after a wake worth a look.
    let mut looked = false;
    let _worth_a_look = idle.until_woken(
        || core::mem::replace(&mut looked, true).then_some(()),
        || {
            let due = last_full_look.elapsed() >= FULL_LOOK_EVERY;
            (due || state.has_error() || mailbox.has_arrivals()).then_some(())
        },
        || Some(wake),
    );
    *last_full_look = Instant::now();
    true
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

/// Lets go of a finished job's signal reference, then of its queue
/// reference, destroying neither on this thread.
///
/// The signal first: the queue, still held, keeps the tracker and its signal
/// memory alive, so this is never the signal's last reference. Then the
/// queue: if this was its last reference (every handle and event is gone),
/// it is torn down on another thread, not this one. The other order could
/// make the signal reference the last owner of the signal memory, destroyed
/// here once a teardown thread had dropped the queue.
pub(crate) fn let_go<S, Q: Send + 'static>(signal: S, queue: Arc<Q>, device: &DeviceState) {
    drop(signal);
    if let Some(orphan) = crate::sync::arc_into_inner(queue) {
        tear_down_elsewhere(orphan, device);
    }
}

/// Finishes `job` on the calling thread, when the completion thread cannot
/// start (the OS refused a thread). Polls every 50 us until the job is
/// ready (its fence completed or failed, or the device entered the error
/// state) or `timeout` passed: `Some(Duration::ZERO)` looks once, `None`
/// waits as long as the GPU takes (as every wait of this crate with
/// `wait_timeout: None` does). Past the timeout the job is abandoned: its
/// batch is never released (its commands still answer their status, and
/// their waits end, through their own signals) and its references are let
/// go as [`let_go`] does. Returns whether the job finished.
pub(crate) fn run_inline<J: Job>(
    mut job: Box<J>,
    device: &DeviceState,
    timeout: Option<Duration>,
) -> bool {
    let ready = Wait::new(INLINE)
        .timeout(timeout)
        .first_sleep(INLINE.max_sleep)
        .naps_with(crate::sync::sleep)
        .until(
            || job.ready(device).then_some(()),
            || None::<core::convert::Infallible>,
        );
    match ready {
        Ok(()) => {
            job.finish(device);
            true
        }
        Err(_) => {
            job.abandon(device);
            false
        }
    }
}

#[cfg(all(test, not(sigretire_loom)))]
mod tests {
    use super::*;
    use crate::config::DeviceConfig;
    use std::sync::Weak;
    use std::sync::mpsc as std_mpsc;
    use std::thread::ThreadId;

    /// Fails the test, instead of hanging it, if `f` runs past `limit`.
    fn within<R: Send + 'static>(limit: Duration, f: impl FnOnce() -> R + Send + 'static) -> R {
        let (tx, rx) = std_mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(limit)
            .expect("did not return in time (or panicked)")
    }

    #[derive(Debug, PartialEq, Eq)]
    enum Dropped {
        /// The signal reference, and whether its queue was still alive.
        Signal {
            queue_alive: bool,
            on: ThreadId,
        },
        Queue {
            on: ThreadId,
        },
    }

    type Log = Arc<std::sync::Mutex<Vec<Dropped>>>;

    /// Stands in for a signal reference: notes, as it is dropped, whether
    /// the queue that keeps its signal memory alive still is.
    struct SignalProbe {
        queue: Weak<QueueProbe>,
        log: Log,
    }

    impl Drop for SignalProbe {
        fn drop(&mut self) {
            let queue_alive = self.queue.upgrade().is_some();
            let on = std::thread::current().id();
            self.log
                .lock()
                .unwrap()
                .push(Dropped::Signal { queue_alive, on });
        }
    }

    struct QueueProbe {
        log: Log,
    }

    impl Drop for QueueProbe {
        fn drop(&mut self) {
            let on = std::thread::current().id();
            self.log.lock().unwrap().push(Dropped::Queue { on });
        }
    }

    #[test]
    fn a_job_lets_go_of_its_signal_while_the_queue_lives_and_never_destroys_the_queue() {
        let log = Log::default();
        let queue = Arc::new(QueueProbe { log: log.clone() });
        let signal = SignalProbe {
            queue: Arc::downgrade(&queue),
            log: log.clone(),
        };
        let device = Arc::new(DeviceState::new(DeviceConfig::default()));
        // The job's references are the last ones, as when every handle and
        // event of the queue is gone.
        let completion = {
            let device = device.clone();
            within(Duration::from_secs(10), move || {
                let_go(signal, queue, &device);
                std::thread::current().id()
            })
        };
        let start = Instant::now();
        while log.lock().unwrap().len() < 2 {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the queue was never torn down"
            );
            std::thread::yield_now();
        }
        let log = log.lock().unwrap();
        assert_eq!(
            log[0],
            Dropped::Signal {
                queue_alive: true,
                on: completion
            },
            "the signal goes first, while the queue keeps its memory alive"
        );
        assert!(matches!(log[1], Dropped::Queue { on } if on != completion));
        assert_eq!(device.teardowns_leaked.load(Ordering::Relaxed), 0);
    }

    /// A job whose fence completes after `polls` looks (never, for `None`).
    struct Fake {
        polls: Option<u32>,
        seen: Arc<std::sync::Mutex<Vec<&'static str>>>,
    }

    impl Job for Fake {
        type Wake<'a> = sigretire_tracker::wait::NoWake;

        fn wake(&mut self) -> Option<Self::Wake<'_>> {
            None
        }

        fn ready(&mut self, _: &DeviceState) -> bool {
            match &mut self.polls {
                Some(0) => true,
                Some(n) => {
                    *n -= 1;
                    false
                }
                None => false,
            }
        }
        fn finish(self: Box<Self>, _: &DeviceState) {
            self.seen.lock().unwrap().push("finish");
        }
        fn abandon(self: Box<Self>, _: &DeviceState) {
            self.seen.lock().unwrap().push("abandon");
        }
    }

    fn run_fake(polls: Option<u32>, timeout: Option<Duration>) -> (bool, Vec<&'static str>) {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let job = Box::new(Fake {
            polls,
            seen: seen.clone(),
        });
        let device = DeviceState::new(DeviceConfig::default());
        let finished = within(Duration::from_secs(10), move || {
            run_inline(job, &device, timeout)
        });
        let seen = seen.lock().unwrap().clone();
        (finished, seen)
    }

    #[test]
    fn an_inline_job_that_never_becomes_ready_is_abandoned_at_the_timeout() {
        let start = Instant::now();
        let (finished, seen) = run_fake(None, Some(Duration::from_millis(20)));
        assert!(!finished);
        assert_eq!(seen, ["abandon"]);
        assert!(start.elapsed() >= Duration::from_millis(20));
        // A zero timeout looks once and does not wait.
        assert_eq!(
            run_fake(None, Some(Duration::ZERO)),
            (false, vec!["abandon"])
        );
    }

    #[test]
    fn an_inline_job_that_becomes_ready_is_finished() {
        assert_eq!(run_fake(Some(3), None), (true, vec!["finish"]));
        assert_eq!(
            run_fake(Some(0), Some(Duration::ZERO)),
            (true, vec!["finish"])
        );
    }
}
