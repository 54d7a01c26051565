//! The reference model: every use a scenario created, what the simulator
//! says really happened to its packet, who holds its signal, and what a
//! tracker may therefore say about it.
//!
//! It is deliberately naive: a list of every use ever made, answered by
//! scanning, with no cleverness to get wrong. The rules:
//!
//! - A use may be reported complete only if its packet completed, and
//!   failed only if its packet did not complete. Once a ticket said
//!   complete or failed, it says so forever.
//! - A question that may read memory (a query, a wait, a handler's status)
//!   gets the truth: complete if the packet completed, failed if it failed,
//!   pending otherwise (a wait: timed out).
//! - A signal is busy while a packet of its use is neither complete nor
//!   failed, while an event or a handler holds a reference to it, and while
//!   a GPU waiter's pin is attached to a consumer use that its tracker does
//!   not yet know to be done. A busy signal keeps the value its use's
//!   packets left in it (its operations not yet completed: 1 while a
//!   single packet is pending, 0 once complete; negative once one failed)
//!   and is never handed out.
//! - A use may be decremented by several packets (`Request::ops`): it
//!   completes when all of them did. A submission that failed after issuing
//!   some of them (`Tracker::fail_submission`) is failed from then on, and
//!   its signal stays busy until the issued ones finished.
//! - A copy-engine use (`Request::copy_engine`) runs on the stream's copy
//!   engine, a queue of its own: no fence of the AQL queue says anything
//!   about it.
//! - Timestamps, when given, are the packet processor's: those it left in
//!   the signal, the last launch's start and the last completion's end (for
//!   a single packet, its own).

use crate::check::{Check, Failure, PacketTruth, Wrong, fail, judge_report, stamps_match};
use crate::kind::TrackerKind;
use sigretire_sim::backend::SimMemory;
use sigretire_sim::{FAILED_SIGNAL_VALUE, Queue};
use sigretire_tracker::{SignalRef, Status, Ticket, Timestamps};
use std::cell::Cell;

/// One use a scenario made.
#[derive(Clone, Debug)]
pub struct UseRecord {
    /// The stream (0 or 1) whose tracker issued it.
    pub stream: usize,
    /// Its ticket.
    pub ticket: Ticket,
    /// The stream's generation when it was made (counted without wrapping).
    pub generation: usize,
    /// The hardware queue its packets went to (the stream's copy engine
    /// for a copy-engine use).
    pub queue: Queue,
    /// The AQL index of its first packet.
    pub first: u64,
    /// The AQL index of its last packet (the one its request named).
    pub index: u64,
    /// How many operations decrement its signal (`Request::ops`); packets
    /// `first..=index` were reserved for them.
    pub ops: u32,
    /// How many of them were issued (packets `first..first + issued` name
    /// its signal; the rest are empty packets that name none). Fewer than
    /// `ops` only for an abandoned submission.
    pub issued: u32,
    /// Its submission failed (`Tracker::fail_submission`): it never completes.
    pub abandoned: bool,
    /// It ran on the copy engine, not the AQL queue.
    pub copy: bool,
    /// It is a fence: its last packet had the barrier bit, and its
    /// submission did not fail (a fence that never completes as a whole
    /// proves nothing).
    pub fence: bool,
    /// Its timestamps are harvested.
    pub timed: bool,
    /// The signal's packet handle.
    pub signal: u64,
    /// The same signal, as the simulator names it.
    pub sim_signal: sigretire_sim::Signal,
    /// The use its packet waits on (a barrier-AND's dependency), if any.
    pub dependency: Option<usize>,
    /// The last final answer its tracker gave about it (complete or failed).
    pub answered: Option<Status>,
    /// Its truth, once every issued packet finished: it cannot change
    /// after that, and the checks ask for it after every step.
    pub settled_truth: Cell<Option<UseTruth>>,
}

impl UseRecord {
    /// What the packet processor did with the use's packets.
    pub fn truth(&self) -> UseTruth {
        if let Some(truth) = self.settled_truth.get() {
            return truth;
        }
        let mut truth = UseTruth {
            completed: !self.abandoned,
            failed: self.abandoned,
            queue_error: false,
            settled: true,
            launched: false,
            start_ts: None,
            end_ts: None,
            value: i64::from(self.ops),
        };
        for index in self.first..=self.index {
            let packet = self
                .queue
                .truth(index)
                .expect("every queue keeps more truth history than a scenario makes packets");
            if index >= self.first + u64::from(self.issued) {
                continue; // an empty packet in place of work never issued
            }
            truth.settled &= packet.is_done();
            truth.completed &= packet.completed;
            truth.launched |= packet.launched;
            truth.start_ts = truth.start_ts.max(packet.start_ts);
            truth.end_ts = truth.end_ts.max(packet.end_ts);
            if packet.completed {
                truth.value -= 1;
            }
            if packet.failed {
                // The processor set the signal negative for good.
                truth.failed = true;
                truth.queue_error = true;
            }
        }
        if truth.queue_error {
            truth.value = FAILED_SIGNAL_VALUE;
        }
        truth.completed &= !truth.failed;
        if truth.settled {
            self.settled_truth.set(Some(truth));
        }
        truth
    }

    /// Whether every packet reserved for the use finished, the empty ones
    /// that stand in for work never issued included.
    pub fn packets_done(&self) -> bool {
        (self.first..=self.index).all(|index| self.queue.truth(index).is_some_and(|p| p.is_done()))
    }
}

/// What the packet processor did with a use's packets, summed up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UseTruth {
    /// Every operation's packet completed (never for an abandoned
    /// submission).
    pub completed: bool,
    /// A packet failed with its queue, or the submission was abandoned.
    pub failed: bool,
    /// A packet failed with its queue.
    pub queue_error: bool,
    /// Every packet issued for it finished (completed or failed): nothing
    /// on the GPU will touch its signal any more.
    pub settled: bool,
    /// One of its packets launched.
    pub launched: bool,
    /// GPU time of its last packet's launch.
    pub start_ts: Option<u64>,
    /// GPU time of its last packet's completion.
    pub end_ts: Option<u64>,
    /// The value its packets left in its signal: the decrements still
    /// outstanding, or negative once one failed with its queue.
    pub value: i64,
}

impl UseTruth {
    /// Whether the use reached a final state (complete or failed), which a
    /// tracker may report. Its signal may still be busy: see `settled`.
    pub fn is_done(&self) -> bool {
        self.completed || self.failed
    }
}

/// The truth of a use as a status.
pub fn true_status(truth: &UseTruth) -> Status {
    if truth.completed {
        Status::Complete
    } else if truth.failed {
        Status::Failed
    } else {
        Status::Pending
    }
}

/// The value a busy signal must hold: what its use's packets left in it.
pub fn expected_value(truth: &UseTruth) -> i64 {
    truth.value
}

/// Why a reference is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holder {
    /// A user's event: dropped whenever the user destroys it.
    Event,
    /// An async handler: dropped once it has seen its use done.
    Handler,
}

/// A reference the scenario holds on a use's signal.
#[derive(Debug)]
pub struct HeldReference {
    /// A number of its own, unique in the scenario.
    pub id: u64,
    /// The use (an index into [`Model::uses`]).
    pub use_id: usize,
    /// Who holds it.
    pub holder: Holder,
    /// The reference itself.
    pub reference: SignalRef<SimMemory>,
    /// The last final answer the reference gave. A reference sees only
    /// what its tracker published (its view may lag the tracker's own), but
    /// it never changes its mind either.
    pub answered: Option<Status>,
}

/// A GPU waiter: the producer use's signal, pinned until the consumer use
/// (on the other stream) has retired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PinRecord {
    /// The use waited on.
    pub producer: usize,
    /// The barrier-AND packet's use that waits.
    pub consumer: usize,
}

/// Everything the model knows.
#[derive(Debug, Default)]
pub struct Model {
    /// Every use, in the order they were made.
    pub uses: Vec<UseRecord>,
    /// References held by events and handlers.
    pub references: Vec<HeldReference>,
    /// Pins attached to consumer uses.
    pub pins: Vec<PinRecord>,
    /// Each stream's current generation.
    pub generations: [usize; 2],
    /// Which tracker the scenario drives (only known bugs depend on it).
    pub kind: Option<TrackerKind>,
}

impl Model {
    /// The uses of `stream`, oldest first, as indices into `uses`.
    pub fn uses_of(&self, stream: usize) -> impl Iterator<Item = usize> + '_ {
        self.uses
            .iter()
            .enumerate()
            .filter(move |(_, u)| u.stream == stream)
            .map(|(i, _)| i)
    }

    /// One of the 16 most recent uses of `stream`: operations aim at uses
    /// still in play rather than ones retired long ago.
    pub fn recent_use(&self, stream: usize, pick: u8) -> Option<usize> {
        let recent: Vec<usize> = self.uses_of(stream).collect();
        let window = recent.len().min(16);
        (window > 0).then(|| recent[recent.len() - 1 - usize::from(pick) % window])
    }

    /// Checks a report a tracker made without being asked to read memory
    /// (a known status, an answer to `hold` or `pin`) by the oracle's rule
    /// ([`judge_report`]).
    pub fn judge_report(&mut self, use_id: usize, said: Option<Status>) -> Result<(), Failure> {
        let forgets = self.kind.is_some_and(|k| !k.remembers_completions());
        let mut answered = self.uses[use_id].answered;
        let judged = judge_report(
            &mut answered,
            said,
            Some(self.packet_truth(use_id)),
            forgets,
            |check| self.other_generation(use_id, check),
        );
        self.uses[use_id].answered = answered;
        judged.map_err(|wrong| self.failure(use_id, said, wrong, ""))
    }

    /// Checks what a held reference says about its use (see
    /// [`HeldReference::answered`]), by the same rule.
    pub fn judge_reference(&mut self, reference: usize) -> Result<(), Failure> {
        let held = &self.references[reference];
        let (use_id, said) = (held.use_id, held.reference.known_status());
        let mut answered = held.answered;
        let judged = judge_report(
            &mut answered,
            said,
            Some(self.packet_truth(use_id)),
            false,
            |check| self.other_generation(use_id, check),
        );
        self.references[reference].answered = answered;
        judged.map_err(|wrong| self.failure(use_id, said, wrong, "a reference: "))
    }

    fn packet_truth(&self, use_id: usize) -> PacketTruth {
        let truth = self.uses[use_id].truth();
        PacketTruth {
            completed: truth.completed,
            failed: truth.failed,
        }
    }

    /// What another generation of the use's stream showed that explains a
    /// false report: a completed foreign fence covering it by AQL index (an
    /// early completion), a failed foreign queue (a false failure). In the
    /// stepped simulator a packet fails the moment its queue does, so a
    /// tracker that says "failed" about a pending packet is wrong already.
    fn other_generation(&self, use_id: usize, check: Check) -> Option<String> {
        match check {
            Check::EarlyCompletion => self.foreign_fence(use_id).map(|fence| {
                format!(
                    "a fence of generation {} (use {}, index {}) completed and would cover \
                     it by AQL index alone",
                    self.uses[fence].generation,
                    self.uses[fence].ticket.seq(),
                    self.uses[fence].index,
                )
            }),
            Check::FalseFailure => self.foreign_error(use_id).map(|queue| {
                format!(
                    "its own queue did not fail, but queue {queue} of another generation of \
                     its stream did"
                )
            }),
            _ => None,
        }
    }

    fn failure(&self, use_id: usize, said: Option<Status>, wrong: Wrong, who: &str) -> Failure {
        let said = self.said(use_id, said, None);
        Failure {
            check: wrong.check,
            step: 0,
            detail: match wrong.why {
                Some(why) => format!("{who}{said}; {why}"),
                None => format!("{who}{said}"),
            },
        }
    }

    /// The explanation of a false completion that is a cross-generation
    /// proof: a completed fence of the same stream but another generation
    /// (another hardware queue, whose AQL indices mean nothing here) whose
    /// index is at or past the use's, when nothing in the use's own
    /// generation explains it (no fence of it at or past the use that the
    /// read index passed, which a tracker trusting the read index would
    /// take as complete). Whichever generation is older: an old fence
    /// proving a new use is as wrong as a new fence proving an old one.
    fn foreign_fence(&self, use_id: usize) -> Option<usize> {
        let u = &self.uses[use_id];
        if u.copy {
            return None; // its packets are on the copy engine, not an AQL queue
        }
        let read_index = u.queue.read_index();
        let covering: Vec<usize> = self
            .uses_of(u.stream)
            .filter(|&i| self.uses[i].fence && self.uses[i].index >= u.index)
            .collect();
        let own_passed = covering.iter().any(|&i| {
            let f = &self.uses[i];
            f.generation == u.generation && f.index < read_index
        });
        if own_passed {
            return None;
        }
        covering.into_iter().find(|&i| {
            let f = &self.uses[i];
            f.generation != u.generation && f.truth().completed
        })
    }

    /// The explanation of a false failure that is a cross-generation one:
    /// the use's own queue did not fail, but another generation's queue of
    /// its stream did, and its error was taken for this one's. Returns that
    /// queue's id.
    fn foreign_error(&self, use_id: usize) -> Option<u64> {
        let u = &self.uses[use_id];
        if u.copy || u.queue.is_failed() {
            return None;
        }
        self.uses_of(u.stream)
            .map(|i| &self.uses[i])
            .find(|v| !v.copy && v.generation != u.generation && v.queue.is_failed())
            .map(|v| v.queue.id())
    }

    fn said(&self, use_id: usize, said: Option<Status>, before: Option<Status>) -> String {
        let u = &self.uses[use_id];
        let before = before.map_or(String::new(), |b| format!(" (it said {b:?} before)"));
        format!(
            "use {} (stream {}, generation {}, queue {} index {}) said {said:?}{before}; its packet: {}",
            u.ticket.seq(),
            u.stream,
            u.generation,
            u.queue.id(),
            u.index,
            describe(&u.truth())
        )
    }

    /// Checks the answer to a question that may read memory (a query, a
    /// wait, a handler's status): it must be the truth.
    pub fn judge_answer(&mut self, use_id: usize, said: Status) -> Result<(), Failure> {
        self.judge_report(use_id, Some(said).filter(|s| s.is_done()))?;
        let u = &self.uses[use_id];
        let truth = u.truth();
        if said != true_status(&truth) {
            // An older generation's use whose queue failed it is failed by
            // its own negative value (no later generation's error or fence
            // says anything about it): "pending" means the tracker took the
            // error it read for the current generation's.
            let old = u.generation < self.generations[u.stream] && !u.copy;
            let check = if old && said == Status::Pending && truth.queue_error {
                Check::CrossGeneration
            } else {
                Check::NotRetiredWhenProven
            };
            return fail(
                check,
                format!(
                    "use {} (generation {}, the stream is in {}) answered {said:?} to a question \
                     that may read its signal; its packet: {}",
                    u.ticket.seq(),
                    u.generation,
                    self.generations[u.stream],
                    describe(&truth)
                ),
            );
        }
        Ok(())
    }

    /// Checks timestamps a tracker gave for a use.
    pub fn judge_timestamps(&self, use_id: usize, stamps: Timestamps) -> Result<(), Failure> {
        let u = &self.uses[use_id];
        let truth = u.truth();
        if !truth.completed || !stamps_match(stamps, truth.start_ts, truth.end_ts) {
            return fail(
                Check::Timestamps,
                format!(
                    "use {} has timestamps {stamps:?}; its packet: {}",
                    u.ticket.seq(),
                    describe(&truth)
                ),
            );
        }
        Ok(())
    }

    /// The uses whose signals are busy because somebody holds them: every
    /// held reference's use, and every pinned producer whose consumer its
    /// tracker does not know to be done (`consumer_done` asks it).
    pub fn held_uses(&self, mut consumer_done: impl FnMut(usize) -> bool) -> Vec<(usize, String)> {
        let mut held: Vec<(usize, String)> = self
            .references
            .iter()
            .map(|r| (r.use_id, format!("{:?} reference", r.holder)))
            .collect();
        for pin in &self.pins {
            if !consumer_done(pin.consumer) {
                held.push((
                    pin.producer,
                    format!(
                        "pin of consumer use {}",
                        self.uses[pin.consumer].ticket.seq()
                    ),
                ));
            }
        }
        held
    }
}

/// A use's truth in a few words.
pub fn describe(truth: &UseTruth) -> String {
    format!(
        "{:?} (launched: {}, settled: {}, value {}, start {:?}, end {:?})",
        true_status(truth),
        truth.launched,
        truth.settled,
        truth.value,
        truth.start_ts,
        truth.end_ts
    )
}
