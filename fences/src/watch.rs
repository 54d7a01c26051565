//! A queue's watches: what waits on one of its queue positions without a
//! thread — a future's waker, a callback, a value to release — settled by
//! the completion the queue layer already observes.
//!
//! Every batch that leaves the open batch is completed once, by whichever
//! thread finds its fence done (the completion thread, a synchronize, an
//! event synchronize, a submission that finds it already done), through
//! `Completion::finish`. That is the one place a queue *learns* that its
//! work up to a command retired, and it is where the watches are settled:
//! [`Watchers::fire`] takes every watch at or before the batch's fence, in
//! queue order, with no memory read (the batch's own proof covers them:
//! one load of its fence, or none, for the whole batch).
//!
//! # What each watch gets
//!
//! | the batch ended   | a waker / callback gets                | a value to release is       |
//! |-------------------|----------------------------------------|-----------------------------|
//! | complete          | `Complete`                             | dropped                     |
//! | failed            | its use's status: `Complete`, else `Failed` | dropped (nothing at or before a failed fence still runs) |
//! | device error      | `Complete`/`Failed` if its use says so, else `DeviceError` | kept (the GPU may still read it) until the queue is torn down |
//!
//! A watch registered after its position was settled is answered at once
//! from what the list remembers (`completed_through`, `failed_through`,
//! the device error), so a registration racing the firing is never lost:
//! both run under the list's lock, and the firing records before it
//! drains.
//!
//! # Order and locks
//!
//! Positions only grow; firings take the prefix up to the fence, so each
//! kind of watch is settled in queue order. Callbacks are handed to the
//! device's callback thread (`callback`) under the list's lock, so two
//! firings on two threads post them in queue order; released values are
//! dropped after the list's lock is let go, under a second lock that keeps
//! two firings' drops in queue order (a value's `Drop` must not use its
//! own queue: it runs where that queue's batch is being completed). Wakers are woken last,
//! with no lock held: a task woken for a position finds every value up to
//! it already released.

use crate::callback::{Callback, CallbackRunner};
use crate::error::WaitError;
use crate::status::CommandStatus;
use crate::sync::{Arc, Mutex};
use sigretire_tracker::{Status, Ticket};
use std::collections::{BTreeMap, VecDeque};
use std::task::Waker;

/// A value handed to a queue to drop once a position retired.
pub(crate) type Value = Box<dyn Send + 'static>;

/// A queue position: a command's number on its queue and its use.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Position {
    pub(crate) seq: u64,
    pub(crate) ticket: Ticket,
}

/// What a future, a callback or a release needs of its queue, with the
/// queue's tracker type erased: its watch list, its uses' status, and the
/// flush that hands the open batch through a position to the completion
/// machinery. The queue's `Completion` is the one implementation.
pub(crate) trait QueueWatch: Send + Sync {
    fn watchers(&self) -> &Watchers;

    /// The use's status: one load at most, none once the tracker knows.
    fn status(&self, ticket: &Ticket) -> Status;

    /// The use's status from host memory only (no load).
    fn known(&self, ticket: &Ticket) -> Option<Status>;

    /// Makes sure every command up to `seq` left the open batch, so its
    /// batch is completed (by the completion thread, or here if its fence
    /// is already known done). Takes the execution lock briefly, only if
    /// `seq` is still in the open batch.
    fn flush_through(self: std::sync::Arc<Self>, seq: u64);

    /// A wait's result for `outcome`, as the blocking calls answer it.
    fn result(&self, outcome: CommandStatus, ticket: &Ticket) -> Result<(), WaitError>;

    /// `ticket`'s use failed, seen through a handle: the queue is failed
    /// for good and its tracker told, as a wait on the queue would do.
    /// Returns the error that names the queue.
    fn report_failure(&self, ticket: &Ticket) -> WaitError;
}

/// A link to a queue's watch list from a handle that does not keep the
/// queue alive (a command's).
pub(crate) type WatchLink = std::sync::Weak<dyn QueueWatch>;

/// The weak link to a queue's watch list, for its commands. (Not under
/// loom: the modelled `Arc` has no weak references.)
#[cfg(not(sigretire_loom))]
pub(crate) fn weak<Q: QueueWatch + 'static>(queue: &Arc<Q>) -> WatchLink {
    let weak: std::sync::Weak<Q> = Arc::downgrade(queue);
    weak
}

/// Where a future learns its outcome: set once by the firing, read by the
/// future's polls. One lock: the firing sets the outcome and takes the
/// waker under it; a poll reads the outcome and leaves its waker under it,
/// so a wake is never lost between the two (the waker hand-off the loom
/// model below checks).
pub(crate) struct Slot {
    state: Mutex<SlotState>,
}

struct SlotState {
    outcome: CommandStatus,
    waker: Option<Waker>,
}

impl Slot {
    /// An unsettled slot whose future will be woken through `waker`.
    pub(crate) fn new(waker: Waker) -> Self {
        Self {
            state: Mutex::new(SlotState {
                outcome: CommandStatus::Pending,
                waker: Some(waker),
            }),
        }
    }

    /// The outcome if settled; else keeps `waker` (the latest poll's) for
    /// the firing.
    pub(crate) fn poll(&self, waker: &Waker) -> Option<CommandStatus> {
        let mut state = self.state.lock();
        if state.outcome.is_done() {
            return Some(state.outcome);
        }
        match &mut state.waker {
            Some(kept) if kept.will_wake(waker) => {}
            kept => *kept = Some(waker.clone()),
        }
        None
    }

    /// Settles the slot; the waker to wake (outside every lock).
    fn settle(&self, outcome: CommandStatus) -> Option<Waker> {
        let mut state = self.state.lock();
        state.outcome = outcome;
        state.waker.take()
    }
}

/// One watch on a position.
enum Watch {
    /// A pending future.
    Wake { ticket: Ticket, slot: Arc<Slot> },
    /// A callback, run on the callback thread (the loom build has no
    /// callback API to register one).
    #[cfg_attr(sigretire_loom, allow(dead_code))]
    Call { ticket: Ticket, callback: Callback },
}

/// The list's state, under its lock.
struct List {
    /// Futures and callbacks, by (position, registration).
    waits: BTreeMap<(u64, u64), Watch>,
    /// Values to release, by position (registered in order, as a rule:
    /// appended; an older position is inserted in its place).
    releases: VecDeque<(u64, Value)>,
    next_key: u64,
    /// Every position up to this one was settled complete.
    completed_through: u64,
    /// Every position up to this one ended with a failed fence.
    failed_through: u64,
    /// A batch was released by the device error state.
    device_error: bool,
}

/// What a firing leaves to do outside the list's lock.
#[derive(Default)]
pub(crate) struct Fired {
    wakers: Vec<Waker>,
    values: Vec<Value>,
}

/// The watches of one queue (see the module docs).
pub(crate) struct Watchers {
    list: Mutex<List>,
    /// Held while a firing drops its values, so two firings drop in queue
    /// order.
    dropping: Mutex<()>,
    callbacks: Arc<CallbackRunner>,
}

/// What a registration found: settled already (`Err`), or registered under
/// a key (`Ok`).
pub(crate) type Registered = Result<u64, CommandStatus>;

impl Watchers {
    pub(crate) fn new(callbacks: Arc<CallbackRunner>) -> Self {
        Self {
            list: Mutex::new(List {
                waits: BTreeMap::new(),
                releases: VecDeque::new(),
                next_key: 0,
                completed_through: 0,
                failed_through: 0,
                device_error: false,
            }),
            dropping: Mutex::new(()),
            callbacks,
        }
    }

    /// The device's callback thread.
    #[cfg_attr(sigretire_loom, allow(dead_code))]
    pub(crate) fn callbacks(&self) -> &Arc<CallbackRunner> {
        &self.callbacks
    }

    /// A future's slot for position `seq` (the use `ticket`): its outcome if
    /// the list already settled that position, else its key.
    /// `status` answers a use's status (one load at most), asked only where
    /// a failure or the device error settled the position.
    pub(crate) fn watch(
        &self,
        seq: u64,
        ticket: Ticket,
        slot: Arc<Slot>,
        status: impl Fn(&Ticket) -> Status,
    ) -> Registered {
        let mut list = self.list.lock();
        if let Some(outcome) = list.settled(seq, &ticket, &status) {
            return Err(outcome);
        }
        Ok(list.insert(seq, Watch::Wake { ticket, slot }))
    }

    /// A callback for position `seq`: posted to the callback thread at once
    /// (with `known`, else what the list settled) if that position is done
    /// and no older position's callback waits, else kept for the firing of
    /// its batch (which the caller makes sure is on its way).
    #[cfg_attr(sigretire_loom, allow(dead_code))]
    pub(crate) fn call(
        &self,
        seq: u64,
        ticket: Ticket,
        known: Option<CommandStatus>,
        callback: Callback,
        status: impl Fn(&Ticket) -> Status,
    ) {
        let mut list = self.list.lock();
        // An older position's callback still waiting runs first: this one
        // waits behind it, for its own batch's firing.
        let older_waits = list
            .waits
            .first_key_value()
            .is_some_and(|(&(oldest, _), _)| oldest < seq);
        let outcome = match older_waits {
            true => None,
            false => known.or_else(|| list.settled(seq, &ticket, &status)),
        };
        match outcome {
            // Posted under the list's lock: after every callback the list
            // posted before, in queue order.
            Some(outcome) => self.callbacks.post(callback, outcome),
            None => {
                list.insert(seq, Watch::Call { ticket, callback });
            }
        }
    }

    /// A value to drop once position `seq` retired: dropped now (on this
    /// thread) if the list or `known_done` (host knowledge, no memory read)
    /// says it did.
    ///
    /// In queue order still: a value is dropped at once only if no older one
    /// is held (else it waits behind it, for the firing that is about to
    /// free that one, or a later one), and under the drop lock, after every
    /// value a firing took before it.
    pub(crate) fn release(&self, seq: u64, known_done: bool, value: Value) {
        let mut list = self.list.lock();
        let done = known_done || seq <= list.completed_through || seq <= list.failed_through;
        let older_held = list
            .releases
            .front()
            .is_some_and(|&(oldest, _)| oldest < seq);
        if done && !older_held {
            let dropping = self.dropping.lock();
            drop(list);
            drop(value);
            drop(dropping);
            return;
        }
        let at = match list.releases.back() {
            Some(&(newest, _)) if newest > seq => list.releases.partition_point(|(s, _)| *s <= seq),
            _ => list.releases.len(),
        };
        list.releases.insert(at, (seq, value));
    }

    /// A future let go of its registration (dropped while pending).
    pub(crate) fn cancel(&self, seq: u64, key: u64) {
        let removed = self.list.lock().waits.remove(&(seq, key));
        // The slot's last references go outside the lock.
        drop(removed);
    }

    /// How many futures and callbacks wait, and how many values are held.
    #[cfg_attr(sigretire_loom, allow(dead_code))]
    pub(crate) fn pending(&self) -> (usize, usize) {
        let list = self.list.lock();
        (list.waits.len(), list.releases.len())
    }

    /// The batch whose fence is command `last_seq` ended with `outcome`:
    /// settles every watch at or before it (see the module docs); the
    /// caller wakes and drops what is returned with [`Fired::finish`].
    /// Callbacks are posted here, under the lock. No memory read unless the
    /// batch failed or was released by the device error state (then
    /// `status`, one load at most per future and callback settled).
    pub(crate) fn fire(
        &self,
        last_seq: u64,
        outcome: CommandStatus,
        status: impl Fn(&Ticket) -> Status,
    ) -> Option<FiredGuard<'_>> {
        let mut list = self.list.lock();
        let release_values = match outcome {
            CommandStatus::Pending => return None,
            CommandStatus::Complete => {
                list.completed_through = list.completed_through.max(last_seq);
                true
            }
            CommandStatus::Failed => {
                list.failed_through = list.failed_through.max(last_seq);
                true
            }
            CommandStatus::DeviceError => {
                list.device_error = true;
                false
            }
        };
        let no_waits = list
            .waits
            .first_key_value()
            .is_none_or(|((s, _), _)| *s > last_seq);
        let no_values = !release_values || list.releases.front().is_none_or(|(s, _)| *s > last_seq);
        if no_waits && no_values {
            return None;
        }
        let mut fired = Fired::default();
        while let Some(entry) = list.waits.first_entry() {
            if entry.key().0 > last_seq {
                break;
            }
            let watch = entry.remove();
            let ticket = match &watch {
                Watch::Wake { ticket, .. } | Watch::Call { ticket, .. } => *ticket,
            };
            let settled = match outcome {
                CommandStatus::Complete => CommandStatus::Complete,
                ended => match status(&ticket) {
                    Status::Complete => CommandStatus::Complete,
                    Status::Failed => CommandStatus::Failed,
                    Status::Pending => ended,
                },
            };
            match watch {
                Watch::Wake { slot, .. } => fired.wakers.extend(slot.settle(settled)),
                Watch::Call { callback, .. } => self.callbacks.post(callback, settled),
            }
        }
        if release_values {
            while list.releases.front().is_some_and(|(s, _)| *s <= last_seq) {
                fired
                    .values
                    .extend(list.releases.pop_front().map(|(_, v)| v));
            }
        }
        // Taken before the list is let go: a later firing drops after this one.
        let dropping = self.dropping.lock();
        drop(list);
        Some(FiredGuard {
            fired,
            _dropping: dropping,
        })
    }
}

impl List {
    /// The outcome of position `seq` if the list settled it already.
    fn settled(
        &self,
        seq: u64,
        ticket: &Ticket,
        status: &impl Fn(&Ticket) -> Status,
    ) -> Option<CommandStatus> {
        if seq <= self.completed_through {
            return Some(CommandStatus::Complete);
        }
        let ended = if seq <= self.failed_through {
            CommandStatus::Failed
        } else if self.device_error {
            CommandStatus::DeviceError
        } else {
            return None;
        };
        Some(match status(ticket) {
            Status::Complete => CommandStatus::Complete,
            Status::Failed => CommandStatus::Failed,
            Status::Pending => ended,
        })
    }

    fn insert(&mut self, seq: u64, watch: Watch) -> u64 {
        let key = self.next_key;
        self.next_key += 1;
        self.waits.insert((seq, key), watch);
        key
    }
}

/// A firing's wakers and values, dropped and woken by [`finish`](Self::finish)
/// with no list lock held.
pub(crate) struct FiredGuard<'a> {
    fired: Fired,
    _dropping: crate::sync::MutexGuard<'a, ()>,
}

impl FiredGuard<'_> {
    /// Drops the values in queue order, then wakes the futures (so a task
    /// woken for a position finds every value up to it released).
    pub(crate) fn finish(self) {
        let FiredGuard { fired, _dropping } = self;
        // In order, oldest first (a Vec drops its elements in order).
        drop(fired.values);
        drop(_dropping);
        for waker in fired.wakers {
            waker.wake();
        }
    }
}

impl Drop for Watchers {
    /// The queue is torn down: a callback still waiting is cancelled (run
    /// with [`CommandStatus::Pending`]); a value still held is dropped
    /// (nothing proves its work retired, but nothing will ever again: the
    /// queue's last reference is gone). No future waits here: a pending
    /// future holds the queue.
    fn drop(&mut self) {
        let mut list = self.list.lock();
        for (_, watch) in core::mem::take(&mut list.waits) {
            match watch {
                Watch::Call { callback, .. } => {
                    self.callbacks.post(callback, CommandStatus::Pending)
                }
                Watch::Wake { slot, .. } => {
                    if let Some(waker) = slot.settle(CommandStatus::Pending) {
                        waker.wake();
                    }
                }
            }
        }
        list.releases.clear();
    }
}

/// The waker hand-off, modelled: a future registers and polls while a
/// firing settles its position, and another future registers and is
/// dropped (cancelled) meanwhile. The pending future is always either
/// settled through its waker or finds its outcome itself; the cancelled
/// one's slot is never left in the list
/// (`RUSTFLAGS="--cfg sigretire_loom" cargo test -p sigretire-queue
/// --release --lib loom`).
#[cfg(all(test, sigretire_loom))]
mod loom_model {
    use super::*;
    use crate::sync::{AtomicBool, Ordering};
    use std::task::Wake;

    struct Flag(AtomicBool);

    impl Wake for Flag {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.store(true, Ordering::Release);
        }
    }

    fn ticket() -> Ticket {
        Ticket {
            tracker: 1,
            seq: 1,
            slot: 0,
            generation: 0,
            flags: 0,
        }
    }

    #[test]
    fn a_registered_future_is_woken_or_finds_its_outcome_and_a_cancelled_one_leaves_nothing() {
        loom::model(|| {
            let watchers = Arc::new(Watchers::new(Arc::new(CallbackRunner::new())));
            let flag = std::sync::Arc::new(Flag(AtomicBool::new(false)));
            let waker = Waker::from(flag.clone());
            let slot = Arc::new(Slot::new(waker.clone()));
            let firing = {
                let watchers = watchers.clone();
                loom::thread::spawn(move || {
                    if let Some(fired) =
                        watchers.fire(1, CommandStatus::Complete, |_| Status::Pending)
                    {
                        fired.finish();
                    }
                })
            };
            let cancelled = {
                let watchers = watchers.clone();
                loom::thread::spawn(move || {
                    let other = Arc::new(Slot::new(Waker::noop().clone()));
                    if let Ok(key) = watchers.watch(2, ticket(), other, |_| Status::Pending) {
                        watchers.cancel(2, key);
                    }
                })
            };
            let registered = watchers.watch(1, ticket(), slot.clone(), |_| Status::Pending);
            let outcome = match registered {
                Err(outcome) => Some(outcome),
                Ok(_) => slot.poll(&waker),
            };
            firing.join().unwrap();
            cancelled.join().unwrap();
            match outcome {
                Some(outcome) => assert_eq!(outcome, CommandStatus::Complete),
                None => {
                    assert!(
                        flag.0.load(Ordering::Acquire),
                        "a pending future was never woken"
                    );
                    assert_eq!(slot.poll(&waker), Some(CommandStatus::Complete));
                }
            }
            assert_eq!(watchers.pending(), (0, 0), "a cancelled watch was left");
        });
    }
}

/// The callback queue, modelled: two firings of one queue on two threads
/// post their callbacks while the callback thread runs them; every
/// callback runs exactly once, in queue order, and the runner's drop
/// leaves none behind (`RUSTFLAGS="--cfg sigretire_loom" cargo test -p
/// sigretire-queue --release --lib loom`). It lives with the list, which
/// posts to the queue.
#[cfg(all(test, sigretire_loom))]
mod loom_callbacks {
    use super::*;
    use crate::callback::CallbackRunner;
    use crate::sync::Mutex;

    fn ticket(seq: u64) -> Ticket {
        Ticket {
            tracker: 1,
            seq,
            slot: 0,
            generation: 0,
            flags: 0,
        }
    }

    #[test]
    fn callbacks_run_once_each_in_queue_order() {
        loom::model(|| {
            let ran = Arc::new(Mutex::new(Vec::new()));
            let runner = Arc::new(CallbackRunner::new());
            let watchers = Arc::new(Watchers::new(runner.clone()));
            for seq in 1..=2 {
                let ran = ran.clone();
                watchers.call(
                    seq,
                    ticket(seq),
                    None,
                    Box::new(move |outcome| ran.lock().push((seq, outcome))),
                    |_| Status::Pending,
                );
            }
            let firings: Vec<_> = [1, 2]
                .into_iter()
                .map(|last| {
                    let watchers = watchers.clone();
                    loom::thread::spawn(move || {
                        if let Some(fired) =
                            watchers.fire(last, CommandStatus::Complete, |_| Status::Pending)
                        {
                            fired.finish();
                        }
                    })
                })
                .collect();
            for firing in firings {
                firing.join().unwrap();
            }
            drop(watchers);
            drop(crate::sync::arc_into_inner(runner).expect("the last reference"));
            assert_eq!(
                *ran.lock(),
                [(1, CommandStatus::Complete), (2, CommandStatus::Complete)]
            );
        });
    }
}

#[cfg(all(test, not(sigretire_loom)))]
mod tests {
    use super::*;

    fn ticket(seq: u64) -> Ticket {
        Ticket {
            tracker: 1,
            seq,
            slot: 0,
            generation: 0,
            flags: 0,
        }
    }

    /// A queue torn down with callbacks still waiting (its work never seen
    /// done) cancels them: each runs once, with `Pending`, on the callback
    /// thread; its held values are dropped.
    #[test]
    fn a_torn_down_list_cancels_its_callbacks_once_and_drops_its_values() {
        let runner = Arc::new(CallbackRunner::new());
        let watchers = Watchers::new(runner.clone());
        let (sent, got) = std::sync::mpsc::channel();
        for seq in 1..=3 {
            let sent = sent.clone();
            watchers.call(
                seq,
                ticket(seq),
                None,
                Box::new(move |status| sent.send((seq, status)).unwrap()),
                |_| Status::Pending,
            );
        }
        let dropped = std::sync::Arc::new(());
        watchers.release(1, false, Box::new(dropped.clone()));
        assert_eq!(watchers.pending(), (3, 1));
        drop(watchers);
        assert_eq!(std::sync::Arc::strong_count(&dropped), 1, "dropped");
        let runs: Vec<_> = (0..3)
            .map(|_| {
                got.recv_timeout(std::time::Duration::from_secs(10))
                    .unwrap()
            })
            .collect();
        assert_eq!(
            runs,
            [1, 2, 3].map(|seq| (seq, CommandStatus::Pending)).to_vec()
        );
        drop(runner);
        assert!(got.try_recv().is_err(), "nothing ran twice");
    }

    /// A value registered after its position settled, while an older value
    /// still waits, waits behind it: values go in queue order.
    #[test]
    fn a_value_known_done_waits_behind_an_older_one() {
        let watchers = Watchers::new(Arc::new(CallbackRunner::new()));
        let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        struct Logged(u64, std::sync::Arc<std::sync::Mutex<Vec<u64>>>);
        impl Drop for Logged {
            fn drop(&mut self) {
                self.1.lock().unwrap().push(self.0);
            }
        }
        watchers.release(1, false, Box::new(Logged(1, order.clone())));
        watchers.release(2, true, Box::new(Logged(2, order.clone())));
        assert!(order.lock().unwrap().is_empty(), "2 waits behind 1");
        watchers
            .fire(2, CommandStatus::Complete, |_| Status::Pending)
            .unwrap()
            .finish();
        assert_eq!(*order.lock().unwrap(), [1, 2]);
        // Now nothing older waits: a value known done goes at once.
        watchers.release(3, true, Box::new(Logged(3, order.clone())));
        assert_eq!(*order.lock().unwrap(), [1, 2, 3]);
    }
}
