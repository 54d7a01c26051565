//! A device's callback thread: runs the closures registered to run once a
//! command, an event or a queue position completes or fails
//! ([`Command::on_complete`](crate::Command::on_complete),
//! [`Event::on_complete`](crate::Event::on_complete),
//! [`HostQueue::on_complete`](crate::HostQueue::on_complete)).
//!
//! Why a thread of its own. CUDA's `cuLaunchHostFunc` and HIP's
//! `hipStreamAddCallback` put the callback *in the stream*: the stream's
//! later work waits until the host ran it. Here nothing is added to the
//! GPU stream at all: a callback is a watch on its queue (`watch`), settled
//! when the queue layer observes the batch's completion, and run here —
//! never on the thread that submitted, the one that waits in a
//! synchronize, or the completion thread (a slow callback delays only the
//! callbacks after it, never a completion or a wake-up).
//!
//! Callbacks run one at a time, in the order their positions were settled:
//! per queue, queue order (the watch list posts under its lock). A
//! panicking callback is contained (`catch_unwind`), counted and its
//! message kept ([`CallbackStats`]); the thread carries on with the next.
//! The thread starts with the first callback and ends once the device and
//! its last queue are gone and every posted callback ran: dropping them
//! joins it (unless that drop runs in a callback, on this very thread:
//! then the thread ends by itself after its last callback).

use crate::status::CommandStatus;
use crate::sync::thread::{self, JoinHandle};
use crate::sync::{Arc, AtomicU64, Condvar, Mutex, Ordering, identity};
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;
use std::thread::ThreadId;

/// A registered callback: run once, with how its work ended.
pub(crate) type Callback = Box<dyn FnOnce(CommandStatus) + Send + 'static>;

/// What a device's callbacks did, so far.
///
/// ```
/// use sigretire_queue::sim::SimPlatform;
/// let platform = SimPlatform::threaded(sigretire_queue::sim::CostProfile::zero());
/// let device = platform.device(Default::default(), Default::default())?;
/// let command = device.default_queue().launch_empty()?;
/// command.on_complete(|_| panic!("contained"));
/// device.default_queue().synchronize()?;
/// # let start = std::time::Instant::now();
/// # while device.callback_stats().panicked == 0 && start.elapsed().as_secs() < 10 { std::thread::yield_now() }
/// let stats = device.callback_stats();
/// assert_eq!(stats.panicked, 1);
/// assert_eq!(stats.last_panic.as_deref(), Some("contained"));
/// # Ok::<(), sigretire_queue::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallbackStats {
    /// Callbacks that ran (returned or panicked).
    pub run: u64,
    /// Of those, callbacks that panicked (contained: the thread carried on).
    pub panicked: u64,
    /// Of those, callbacks run with [`CommandStatus::Pending`]: cancelled,
    /// their queue torn down before their work was seen done.
    pub cancelled: u64,
    /// The message of the latest panic (a `&str` or `String` payload).
    pub last_panic: Option<String>,
}

#[derive(Default)]
struct Counters {
    run: AtomicU64,
    panicked: AtomicU64,
    cancelled: AtomicU64,
    last_panic: Mutex<Option<String>>,
}

struct Inbox {
    jobs: VecDeque<(Callback, CommandStatus)>,
    /// Cleared when the runner is dropped: the thread ends once empty.
    open: bool,
}

struct Shared {
    inbox: Mutex<Inbox>,
    arrived: Condvar,
    counters: Counters,
}

/// The callback thread of one device, started with its first callback.
pub(crate) struct CallbackRunner {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    thread_id: OnceLock<ThreadId>,
}

impl Default for CallbackRunner {
    fn default() -> Self {
        Self::new()
    }
}

impl CallbackRunner {
    pub(crate) fn new() -> Self {
        Self {
            shared: Arc::new(Shared {
                inbox: Mutex::new(Inbox {
                    jobs: VecDeque::new(),
                    open: true,
                }),
                arrived: Condvar::new(),
                counters: Counters::default(),
            }),
            thread: Mutex::new(None),
            thread_id: OnceLock::new(),
        }
    }

    /// Queues `callback` to run with `outcome`, after every callback posted
    /// before; starts the thread if needed. Never runs the callback here. If
    /// the thread cannot start, the callback waits for a later post to
    /// start it, or for the runner's drop, which runs what is left.
    pub(crate) fn post(&self, callback: Callback, outcome: CommandStatus) {
        self.shared.inbox.lock().jobs.push_back((callback, outcome));
        self.shared.arrived.notify_all();
        let mut thread = self.thread.lock();
        if thread.is_none() {
            let shared = self.shared.clone();
            if let Ok(handle) = thread::spawn("fences-callbacks".into(), move || run(&shared)) {
                if let Some(id) = identity::of(&handle) {
                    let _ = self.thread_id.set(id);
                }
                *thread = Some(handle);
            }
        }
    }

    /// What the callbacks did so far.
    #[cfg_attr(sigretire_loom, allow(dead_code))]
    pub(crate) fn stats(&self) -> CallbackStats {
        let c = &self.shared.counters;
        CallbackStats {
            run: c.run.load(Ordering::Acquire),
            panicked: c.panicked.load(Ordering::Acquire),
            cancelled: c.cancelled.load(Ordering::Acquire),
            last_panic: c.last_panic.lock().clone(),
        }
    }
}

impl Drop for CallbackRunner {
    fn drop(&mut self) {
        self.shared.inbox.lock().open = false;
        self.shared.arrived.notify_all();
        let handle = self.thread.lock().take();
        let on_it = identity::current().is_some_and(|id| self.thread_id.get() == Some(&id));
        match handle {
            // It runs what is left, then ends.
            Some(handle) if !on_it => {
                let _ = handle.join();
            }
            Some(_) => {}
            // It never started: nothing is lost, what is left runs here.
            None => {
                while let Some(job) = self.shared.inbox.lock().jobs.pop_front() {
                    run_one(job, &self.shared.counters);
                }
            }
        }
    }
}

/// The thread: run callbacks in order until closed and empty.
fn run(shared: &Shared) {
    loop {
        let job = {
            let mut inbox = shared.inbox.lock();
            loop {
                if let Some(job) = inbox.jobs.pop_front() {
                    break job;
                }
                if !inbox.open {
                    return;
                }
                shared.arrived.wait(&mut inbox);
            }
        };
        run_one(job, &shared.counters);
    }
}

/// Runs one callback, containing a panic.
fn run_one((callback, outcome): (Callback, CommandStatus), counters: &Counters) {
    if outcome == CommandStatus::Pending {
        counters.cancelled.fetch_add(1, Ordering::AcqRel);
    }
    let result = catch_unwind(AssertUnwindSafe(move || callback(outcome)));
    if let Err(payload) = result {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a non-string panic payload".to_owned());
        *counters.last_panic.lock() = Some(message);
        counters.panicked.fetch_add(1, Ordering::AcqRel);
    }
    counters.run.fetch_add(1, Ordering::AcqRel);
}
