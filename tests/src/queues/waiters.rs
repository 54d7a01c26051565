//! Blocking calls (synchronize, event synchronize, `Command::wait`) run on
//! helper threads while the driver steps the GPU. Each helper judges its
//! own answer against the machine's truth the moment the call returns, so
//! an early return is caught even if the GPU moves on right after.

use super::gpu::Gpu;
use super::ledger::{HwId, Judge, Required};
use sigretire_queue::Error;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Which blocking call a helper makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaitKind {
    /// `HostQueue::synchronize`.
    Synchronize,
    /// `Event::synchronize`.
    EventSync,
    /// `Command::wait`.
    CommandWait,
}

impl WaitKind {
    /// The answer's name in failures.
    pub const fn subject(self) -> &'static str {
        match self {
            WaitKind::Synchronize => "synchronize",
            WaitKind::EventSync => "event synchronize",
            WaitKind::CommandWait => "command wait",
        }
    }
}

/// How a helper's call ended.
#[derive(Clone, Debug)]
pub struct Ended {
    /// What it returned.
    pub result: Result<(), Error>,
    /// With `Ok`: the first packet of its work that had not completed when
    /// the helper looked, right after the call returned.
    pub incomplete_at_return: Option<(HwId, u64)>,
}

/// A helper thread and what the driver needs to judge it.
pub struct Waiter {
    /// Which call.
    pub kind: WaitKind,
    /// The stream whose call it is (for an event or a command: the stream
    /// it was published on).
    pub stream: usize,
    /// The stream's device.
    pub device: usize,
    /// Its work: everything that must have completed for `Ok`.
    pub required: Required,
    /// Where a failure must show for `QueueFailed`.
    pub evidence: Required,
    /// For an event's or command's wait, its own packets: once they are
    /// final the wait must end (whatever else runs on its queues).
    pub awaited: Option<Vec<(HwId, u64)>>,
    /// The operation that started it.
    pub started_at: usize,
    started: Arc<AtomicBool>,
    ended: Arc<Mutex<Option<Ended>>>,
    thread: Option<JoinHandle<()>>,
}

/// What a helper is to do and how it is judged (see [`Waiter`]).
pub struct Call {
    /// Which call.
    pub kind: WaitKind,
    /// Whose (see [`Waiter::stream`]).
    pub stream: usize,
    /// The stream's device.
    pub device: usize,
    /// Everything that must have completed for `Ok`.
    pub required: Required,
    /// Where a failure must show for `QueueFailed`.
    pub evidence: Required,
    /// An event's or command's own packets.
    pub awaited: Option<Vec<(HwId, u64)>>,
    /// The operation that starts it.
    pub started_at: usize,
}

impl Waiter {
    /// Starts `call` on a new thread, judged by `judge` when it returns.
    pub fn spawn<G: Gpu>(
        call: Call,
        judge: Judge<G>,
        f: impl FnOnce() -> Result<(), Error> + Send + 'static,
    ) -> Self {
        let started = Arc::new(AtomicBool::new(false));
        let ended = Arc::new(Mutex::new(None));
        let (theirs, their_end) = (started.clone(), ended.clone());
        let thread = std::thread::Builder::new()
            .name(format!("queue-driver-{}", call.kind.subject()))
            .spawn(move || {
                theirs.store(true, Ordering::Release);
                let result = f();
                let incomplete_at_return = match result {
                    Ok(()) => judge.first_incomplete(),
                    Err(_) => None,
                };
                drop(judge);
                *their_end.lock().unwrap() = Some(Ended {
                    result,
                    incomplete_at_return,
                });
            })
            .expect("a helper thread");
        Self {
            kind: call.kind,
            stream: call.stream,
            device: call.device,
            required: call.required,
            evidence: call.evidence,
            awaited: call.awaited,
            started_at: call.started_at,
            started,
            ended,
            thread: Some(thread),
        }
    }

    /// Whether the thread has begun its call.
    pub fn has_started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    /// Whether the call has returned (and the helper judged it).
    pub fn has_ended(&self) -> bool {
        self.ended.lock().unwrap().is_some()
    }

    /// How the call ended, once it has; joins the thread.
    pub fn take_end(&mut self) -> Option<Ended> {
        let ended = self.ended.lock().unwrap().take()?;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        Some(ended)
    }

    /// Gives up on a helper that never returned: its thread is left to end
    /// at its wait's timeout.
    pub fn abandon(mut self) {
        drop(self.thread.take());
    }
}
