//! Another thread in the scenario: the threaded variant of the property
//! test runs one next to the driver. It asks each tracker's lock-free
//! [`Waiter`] and clones of the references the scenario holds about recent
//! uses, over and over, while the driver's thread acquires (at the ring's
//! limit, often), polls and moves the simulated GPU. What it learns is
//! recorded in the trackers' host state exactly when a real runtime's other
//! threads would, so the owner meets completions it did not see coming.
//!
//! Its answers are judged on its own thread against the simulator's ground
//! truth read *after* each answer: the truth only moves forward, so a
//! completion or a failure that the truth does not show even then was
//! reported early.

use crate::check::{Check, Failure};
use sigretire_sim::Queue;
use sigretire_sim::backend::SimMemory;
use sigretire_tracker::{SignalRef, Status, Ticket, Waiter};
use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// A use the observer asks about.
pub(crate) struct Watched {
    pub(crate) waiter: Waiter<SimMemory>,
    pub(crate) ticket: Ticket,
    pub(crate) queue: Queue,
    /// The AQL indices of the packets its issued operations went to.
    pub(crate) issued: core::ops::Range<u64>,
    /// Its submission failed (it never completes).
    pub(crate) abandoned: bool,
}

impl Watched {
    /// Judges `said` against the truth as it is now.
    fn judge(&self, said: Status, by: &str) -> Result<(), Failure> {
        let truths: Vec<_> = self
            .issued
            .clone()
            .map(|index| self.queue.truth(index))
            .collect();
        let completed = !self.abandoned && truths.iter().all(|t| t.is_some_and(|t| t.completed));
        let failed = self.abandoned || truths.iter().any(|t| t.is_some_and(|t| t.failed));
        match crate::check::truthful(Some(said), completed, failed) {
            Ok(()) => Ok(()),
            Err(check) => Err(Failure {
                check,
                step: 0,
                detail: format!(
                    "another thread's {by} said use {} is {said:?}; its packets: {truths:?}",
                    self.ticket.seq()
                ),
            }),
        }
    }
}

enum Message {
    Watch(Watched),
    Hold(u64, SignalRef<SimMemory>, Box<Watched>),
    Release(u64),
}

/// The observer thread and how to reach it.
pub(crate) struct Observer {
    sender: Option<Sender<Message>>,
    thread: Option<JoinHandle<u64>>,
    failure: Arc<Mutex<Option<Failure>>>,
}

/// How many recent uses the observer keeps asking about.
const WATCHED: usize = 32;

impl Observer {
    pub(crate) fn start() -> Self {
        let (sender, receiver) = channel();
        let failure = Arc::new(Mutex::new(None));
        let found = failure.clone();
        let thread = std::thread::Builder::new()
            .name("scenario observer".into())
            .spawn(move || observe(receiver, found))
            .expect("the observer thread starts");
        Self {
            sender: Some(sender),
            thread: Some(thread),
            failure,
        }
    }

    fn send(&self, message: Message) {
        if let Some(sender) = &self.sender {
            // A stopped observer has nothing more to say.
            let _ = sender.send(message);
        }
    }

    pub(crate) fn watch(&self, watched: Watched) {
        self.send(Message::Watch(watched));
    }

    /// The observer takes a clone of a reference the scenario holds, and
    /// asks it too, until [`release`](Self::release).
    pub(crate) fn hold(&self, id: u64, reference: SignalRef<SimMemory>, watched: Watched) {
        self.send(Message::Hold(id, reference, Box::new(watched)));
    }

    pub(crate) fn release(&self, id: u64) {
        self.send(Message::Release(id));
    }

    /// The first wrong answer it saw, if any.
    pub(crate) fn failure(&self) -> Option<Failure> {
        self.failure.lock().expect("not poisoned").clone()
    }

    /// Stops the thread (dropping its clones of references) and returns
    /// how many answers it judged.
    pub(crate) fn stop(&mut self) -> u64 {
        self.sender = None;
        self.thread.take().map_or(0, |thread| {
            thread.join().expect("the observer does not panic")
        })
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn observe(receiver: Receiver<Message>, failure: Arc<Mutex<Option<Failure>>>) -> u64 {
    let mut watched: VecDeque<Watched> = VecDeque::new();
    let mut held: Vec<(u64, SignalRef<SimMemory>, Box<Watched>)> = Vec::new();
    let mut answers = 0u64;
    let record = |found: Failure| {
        let mut slot = failure.lock().expect("not poisoned");
        slot.get_or_insert(found);
    };
    loop {
        loop {
            match receiver.try_recv() {
                Ok(Message::Watch(w)) => {
                    watched.push_back(w);
                    if watched.len() > WATCHED {
                        watched.pop_front();
                    }
                }
                Ok(Message::Hold(id, reference, w)) => held.push((id, reference, w)),
                Ok(Message::Release(id)) => held.retain(|(held_id, _, _)| *held_id != id),
                Err(std::sync::mpsc::TryRecvError::Empty) => break,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => return answers,
            }
        }
        for w in &watched {
            match w.waiter.status(&w.ticket) {
                Ok(status) => {
                    answers += 1;
                    if status.is_done()
                        && let Err(found) = w.judge(status, "waiter")
                    {
                        record(found);
                    }
                }
                Err(error) => record(Failure {
                    check: Check::Unexpected,
                    step: 0,
                    detail: format!("another thread's waiter failed: {error}"),
                }),
            }
        }
        for (_, reference, w) in &held {
            answers += 1;
            let status = reference.status();
            if status.is_done()
                && let Err(found) = w.judge(status, "reference")
            {
                record(found);
            }
        }
        std::thread::yield_now();
    }
}
