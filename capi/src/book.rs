//! The ticket book: how a plain-old-data C ticket is turned back into the
//! tracker's own `Ticket`, without ever trusting what C wrote.
//!
//! A Rust `Ticket` carries a pointer the issuing tracker dereferences, so a
//! C caller may never build one: a forged pointer would be undefined
//! behaviour. Instead the library keeps the `Ticket` (and the publication
//! recorded with it) of each of the newest uses, found by sequence number,
//! and hands C only numbers and a check word. The check word is a keyed
//! hash (SipHash with a key drawn per tracker) of the ticket's fields, so a
//! ticket whose fields were changed, or one made up, is refused even for a
//! use whose record was dropped.
//!
//! Memory stays bounded: once more than the configured number of uses are
//! recorded, the oldest records are dropped as long as they are known done
//! (every use older than the most uses in flight is, since the ring holds
//! every use that has not retired). A dropped use still answers its
//! outcome: complete, unless it is in the list of failed ranges kept here.
//! The record of a use that a C hold (`sigretire_hold`) still holds is kept
//! past that window, until the last such hold is released, so that its
//! ticket keeps answering what the tracker keeps for a held use (its
//! timestamps).

use crate::status::{Outcome, SIGRETIRE_ERR_BAD_TICKET, fail};
use crate::types::{SIGRETIRE_TICKET_TIMED, sigretire_ticket};
use ::sigretire_tracker::{Publication, Status, Ticket};
use parking_lot::Mutex;
use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::Arc;

/// The uses of one tracker that C holds (`sigretire_hold` handles) keep,
/// by sequence number, with how many holds each.
#[derive(Debug, Default)]
pub(crate) struct HeldUses(Mutex<HashMap<u64, usize>>);

impl HeldUses {
    fn contains(&self, seq: u64) -> bool {
        self.0.lock().contains_key(&seq)
    }
}

/// One hold's mark on its use: while any mark of a use lives, the book
/// keeps the use's record. Made under the tracker's lock, with the hold.
#[derive(Debug)]
pub(crate) struct HeldMark {
    uses: Arc<HeldUses>,
    seq: u64,
}

impl HeldMark {
    pub(crate) fn new(uses: &Arc<HeldUses>, seq: u64) -> Self {
        *uses.0.lock().entry(seq).or_insert(0) += 1;
        Self {
            uses: uses.clone(),
            seq,
        }
    }
}

impl Clone for HeldMark {
    fn clone(&self) -> Self {
        Self::new(&self.uses, self.seq)
    }
}

impl Drop for HeldMark {
    fn drop(&mut self) {
        let mut uses = self.uses.0.lock();
        if let Some(count) = uses.get_mut(&self.seq) {
            *count -= 1;
            if *count == 0 {
                uses.remove(&self.seq);
            }
        }
    }
}

/// What the book knows of one recorded use.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    pub(crate) ticket: Ticket,
    pub(crate) publication: Publication,
    /// How many queue changes the tracker had taken when it handed the use
    /// out: its slots were reserved on the queue of that count.
    pub(crate) queue_changes: u64,
}

/// What a valid C ticket names.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Found {
    /// A use whose record is kept.
    Live(Entry),
    /// A use whose record was dropped: long retired, with this outcome.
    Gone { status: Status, timed: bool },
}

/// The records of one tracker's newest uses.
pub(crate) struct Book {
    /// The sequence number of `entries[0]`.
    first: u64,
    /// Records by sequence number from `first` (`None`: a number no use
    /// was issued with).
    entries: VecDeque<Option<Entry>>,
    /// How many records to keep at least.
    limit: usize,
    /// Dropped uses that failed, as inclusive ranges in increasing order.
    failed: Vec<(u64, u64)>,
    /// The uses C holds.
    held: Arc<HeldUses>,
    /// Records older than `first` kept because their uses were held when
    /// they left the window; each goes once no hold of its use is left.
    kept: BTreeMap<u64, Entry>,
}

impl Book {
    /// An empty book keeping the newest `limit` records, and those of the
    /// uses `held` names.
    pub(crate) fn new(limit: usize, held: Arc<HeldUses>) -> Self {
        Self {
            first: 1,
            entries: VecDeque::new(),
            limit: limit.max(1),
            failed: Vec::new(),
            held,
            kept: BTreeMap::new(),
        }
    }

    /// One past the newest sequence number recorded.
    fn next_seq(&self) -> u64 {
        self.first + self.entries.len() as u64
    }

    /// Records a use just acquired, then drops the oldest records beyond
    /// the limit that `known` says are done.
    pub(crate) fn record(&mut self, entry: Entry, known: impl Fn(&Ticket) -> Option<Status>) {
        let seq = entry.ticket.seq();
        if seq < self.next_seq() {
            // A tracker numbers its uses in increasing order: a number seen
            // before cannot come again. Keep the first record.
            return;
        }
        let gap = seq - self.next_seq();
        if gap > self.limit as u64 {
            // Never happens: a tracker numbers its uses 1, 2, 3... and a
            // failed acquire consumes no number. Were it to, the use is
            // left unrecorded, so its ticket answers SIGRETIRE_ERR_BAD_TICKET
            // rather than a made-up status.
            return;
        }
        for _ in 0..gap {
            self.entries.push_back(None);
        }
        self.entries.push_back(Some(entry));
        while self.entries.len() > self.limit && self.pop_front_if_done(&known) {}
        if !self.kept.is_empty() {
            let held = &self.held;
            self.kept.retain(|&seq, _| held.contains(seq));
        }
    }

    /// Drops the oldest record if its use is known done; false if not.
    fn pop_front_if_done(&mut self, known: &impl Fn(&Ticket) -> Option<Status>) -> bool {
        let Some(front) = self.entries.front().copied() else {
            return false;
        };
        if let Some(entry) = front {
            let seq = entry.ticket.seq();
            match known(&entry.ticket) {
                Some(Status::Complete) => {}
                Some(Status::Failed) => self.remember_failure(seq),
                Some(Status::Pending) | None => return false,
            }
            if self.held.contains(seq) {
                self.kept.insert(seq, entry);
            }
        }
        self.entries.pop_front();
        self.first += 1;
        true
    }

    fn remember_failure(&mut self, seq: u64) {
        match self.failed.last_mut() {
            Some(range) if range.1 + 1 == seq => range.1 = seq,
            _ => self.failed.push((seq, seq)),
        }
    }

    /// What use `seq` is, if one was issued with it. `timed` is the C
    /// ticket's word for it (checked by the caller's check word).
    pub(crate) fn find(&self, seq: u64, timed: bool) -> Option<Found> {
        if seq == 0 || seq >= self.next_seq() {
            return None;
        }
        if seq < self.first {
            if let Some(entry) = self.kept.get(&seq) {
                return Some(Found::Live(*entry));
            }
            let failed = self
                .failed
                .binary_search_by(|&(a, b)| {
                    if b < seq {
                        std::cmp::Ordering::Less
                    } else if a > seq {
                        std::cmp::Ordering::Greater
                    } else {
                        std::cmp::Ordering::Equal
                    }
                })
                .is_ok();
            let status = if failed {
                Status::Failed
            } else {
                Status::Complete
            };
            return Some(Found::Gone { status, timed });
        }
        let entry = self.entries[(seq - self.first) as usize]?;
        Some(Found::Live(entry))
    }

    /// How many records are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The keys and the id that make and check a tracker's C tickets.
pub(crate) struct Seal {
    pub(crate) tracker: u64,
    key: RandomState,
}

impl Seal {
    /// A seal with a fresh random key for the tracker `tracker`.
    pub(crate) fn new(tracker: u64) -> Self {
        Self {
            tracker,
            key: RandomState::new(),
        }
    }

    fn check_word(&self, t: &sigretire_ticket) -> u64 {
        self.key.hash_one((t.tracker, t.seq, t.generation, t.flags))
    }

    /// The C ticket of `ticket`.
    pub(crate) fn seal(&self, ticket: &Ticket) -> sigretire_ticket {
        let mut c = sigretire_ticket {
            tracker: self.tracker,
            seq: ticket.seq(),
            generation: ticket.generation().value(),
            flags: if ticket.is_timed() {
                SIGRETIRE_TICKET_TIMED
            } else {
                0
            },
            check: 0,
        };
        c.check = self.check_word(&c);
        c
    }

    /// Checks that `c` is a ticket this seal made, unchanged.
    pub(crate) fn open(&self, c: &sigretire_ticket) -> Outcome {
        if c.tracker != self.tracker {
            return fail(
                SIGRETIRE_ERR_BAD_TICKET,
                format!(
                    "the ticket names tracker {}, not this one ({}): another tracker's (or a \
                     zeroed or forged ticket)",
                    c.tracker, self.tracker
                ),
            );
        }
        if c.check != self.check_word(c) {
            return fail(
                SIGRETIRE_ERR_BAD_TICKET,
                format!(
                    "ticket {} of this tracker fails its check: its fields were changed, or it \
                     was made up",
                    c.seq
                ),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::sigretire_tracker::{Config, Request, Tracker};
    use sigretire_sim::backend as sim_backend;

    #[test]
    fn records_beyond_the_limit_go_once_their_uses_are_done() {
        let (mut tracker, queue) = sim_backend::stepped_tracker(Config::default()).unwrap();
        let mut book = Book::new(8, Arc::default());
        let waiter = tracker.waiter();
        let mut tickets = Vec::new();
        for _ in 0..20 {
            let index = queue.reserve().unwrap();
            let acquired = tracker
                .acquire(Request::packet(index).barrier(true))
                .unwrap();
            sim_backend::submit_barrier(&queue, index, acquired.signal);
            book.record(
                Entry {
                    ticket: acquired.ticket,
                    publication: acquired.publication,
                    queue_changes: 0,
                },
                |t| waiter.known_status(t).ok().flatten(),
            );
            tickets.push(acquired.ticket);
        }
        assert_eq!(book.len(), 20, "all pending: nothing may go");
        queue.run_until_idle();
        tracker.poll();
        let index = queue.reserve().unwrap();
        let last = tracker.acquire(Request::packet(index)).unwrap();
        book.record(
            Entry {
                ticket: last.ticket,
                publication: last.publication,
                queue_changes: 0,
            },
            |t| waiter.known_status(t).ok().flatten(),
        );
        assert_eq!(book.len(), 8);
        assert!(matches!(
            book.find(1, false),
            Some(Found::Gone {
                status: Status::Complete,
                ..
            })
        ));
        assert!(matches!(book.find(21, false), Some(Found::Live(_))));
        assert!(book.find(0, false).is_none());
        assert!(book.find(22, false).is_none());
    }

    #[test]
    fn a_changed_field_breaks_the_seal() {
        let (mut tracker, queue) = sim_backend::stepped_tracker(Config::default()).unwrap();
        let ticket = tracker
            .acquire(Request::packet(queue.reserve().unwrap()))
            .unwrap()
            .ticket;
        let seal = Seal::new(7);
        let c = seal.seal(&ticket);
        assert!(seal.open(&c).is_ok());
        for changed in [
            sigretire_ticket {
                seq: c.seq + 1,
                ..c
            },
            sigretire_ticket {
                generation: c.generation + 1,
                ..c
            },
            sigretire_ticket { flags: 1, ..c },
            sigretire_ticket { tracker: 8, ..c },
            sigretire_ticket::default(),
        ] {
            assert_eq!(
                seal.open(&changed).unwrap_err().status,
                SIGRETIRE_ERR_BAD_TICKET
            );
        }
        assert!(Seal::new(7).open(&c).is_err(), "another key");
    }

    #[test]
    fn a_held_record_outlives_the_window_until_its_last_hold_goes() {
        let (mut tracker, queue) = sim_backend::stepped_tracker(Config::default()).unwrap();
        let held = Arc::new(HeldUses::default());
        let mut book = Book::new(2, held.clone());
        let waiter = tracker.waiter();
        let mut record = |book: &mut Book| {
            let index = queue.reserve().unwrap();
            let acquired = tracker
                .acquire(Request::packet(index).barrier(true))
                .unwrap();
            sim_backend::submit_barrier(&queue, index, acquired.signal);
            queue.run_until_idle();
            tracker.poll();
            book.record(
                Entry {
                    ticket: acquired.ticket,
                    publication: acquired.publication,
                    queue_changes: 0,
                },
                |t| waiter.known_status(t).ok().flatten(),
            );
        };
        record(&mut book);
        let mark = HeldMark::new(&held, 1);
        let copy = mark.clone();
        for _ in 0..4 {
            record(&mut book);
        }
        assert!(matches!(book.find(1, false), Some(Found::Live(_))), "held");
        assert!(matches!(book.find(2, false), Some(Found::Gone { .. })));
        drop(mark);
        record(&mut book);
        assert!(
            matches!(book.find(1, false), Some(Found::Live(_))),
            "a copy holds"
        );
        drop(copy);
        record(&mut book);
        assert!(matches!(book.find(1, false), Some(Found::Gone { .. })));
    }

    #[test]
    fn failed_ranges_merge() {
        let mut book = Book::new(1, Arc::default());
        for seq in [3, 4, 5, 9] {
            book.remember_failure(seq);
        }
        assert_eq!(book.failed, [(3, 5), (9, 9)]);
    }
}
