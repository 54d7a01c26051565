//! Packet publication, under the execution lock: reserve a slot, acquire a
//! signal for that AQL index, publish; number the commands; order a new
//! hardware queue after the old one's newest command.
//!
//! The tracker never blocks. When it cannot hand out a signal after the slot
//! was reserved, the slot is filled with empty work and no completion signal
//! (every reserved slot must be published, or the packet processor stalls
//! at it); under back-pressure the caller then waits, outside the lock, for
//! the use the tracker named and retries ([`Step`],
//! [`Submission::publish_with`](crate::submission::Submission::publish_with)).

use crate::batch::{Batch, CommandState, Entry};
use crate::error::Fault;
use crate::frontier::{Frontier, Horizon, Newest, Verdict};
use crate::recycle::Stash;
use crate::stats::{Counters, bump};
use crate::sync::Arc;
use crate::wake::{Armed, WakePool};
use sigretire_tracker::{
    Pin, Placement, Purpose, Request, SignalRef, Ticket, Tracker, Work,
    backend::{HardwareQueue, Publication, QueueError, SignalMemory},
};

/// A tracker the queue layer can drive: any [`Tracker`] whose queue accepts
/// work ([`HardwareQueue`]). The simulator's, ROCr's and CUDA's all do.
///
/// ```
/// fn takes<T: sigretire_queue::QueueTracker>() {}
/// takes::<sigretire_queue::sim::SimTracker>();
/// ```
pub trait QueueTracker: Tracker<Queue: HardwareQueue> + 'static {}

impl<T> QueueTracker for T
where
    T: Tracker + 'static,
    T::Queue: HardwareQueue,
{
}

/// A packet to publish: every one carries the barrier bit (an in-order
/// queue, as a HIP stream is), so each is a fence.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Packet<'a> {
    pub(crate) work: Work<'a>,
    pub(crate) purpose: Purpose,
    /// Its timestamps are harvested (an event on a profiled queue).
    pub(crate) timed: bool,
    /// Take a reference to its signal before publication, so the reference
    /// exists even if the GPU finishes the packet at once.
    pub(crate) hold: bool,
    /// A [`Command`](crate::Command) handle is made for it: its entry gets
    /// a status cell (a marker's would be read by nobody).
    pub(crate) command: bool,
}

impl<'a> Packet<'a> {
    pub(crate) const fn new(work: Work<'a>, purpose: Purpose) -> Self {
        Self {
            work,
            purpose,
            timed: false,
            hold: false,
            command: false,
        }
    }

    pub(crate) const fn timed(mut self, timed: bool) -> Self {
        self.timed = timed;
        self
    }

    pub(crate) const fn hold(mut self) -> Self {
        self.hold = true;
        self
    }

    /// The caller makes a [`Command`](crate::Command) handle for it.
    pub(crate) const fn command(mut self) -> Self {
        self.command = true;
        self
    }
}

/// A published packet: its command entry and, if asked for, its signal.
pub(crate) struct Published<M: SignalMemory> {
    pub(crate) entry: Entry,
    pub(crate) signal: Option<SignalRef<M>>,
    /// Published only in part: the refusal the caller reports (the entry
    /// still joins the batch, as its issued packets run).
    pub(crate) refused: Option<Fault>,
}

/// What one step under the lock did: finished (a publication, or what a
/// whole operation made of its publications), or must wait outside the
/// lock and retry.
pub(crate) enum Step<R> {
    Done(R),
    /// The tracker is at its in-flight limit (the uses in flight, its
    /// `Config::max_in_flight()`): wait for this use outside the lock.
    Backpressure(Ticket, usize),
    /// The hardware ring is full: retry once the GPU consumed packets.
    RingFull,
}

impl<R> Step<R> {
    /// What was done, or the wait-and-retry that ends the whole step (as a
    /// step of any result): `match step.or_retry() { Ok(done) => done,
    /// Err(retry) => return Ok(retry) }`.
    pub(crate) fn or_retry<S>(self) -> Result<R, Step<S>> {
        match self {
            Step::Done(done) => Ok(done),
            Step::Backpressure(ticket, limit) => Err(Step::Backpressure(ticket, limit)),
            Step::RingFull => Err(Step::RingFull),
        }
    }
}

/// What a move to another hardware queue leaves behind.
struct Moves<T: QueueTracker> {
    /// The old queue's newest command (pinned) while it may still run: the
    /// next packet published on the new queue is preceded by a barrier-AND
    /// waiting for it, so the stream stays in order across the move.
    order_debt: Option<Pin<T::Memory>>,
    /// Hardware queues the stream left while its work there may still run:
    /// the queue layer's handles keep them alive (dropping a backend's last
    /// handle may destroy the queue), until a later move finds everything
    /// before it finished, or the host queue goes.
    left_queues: Vec<T::Queue>,
}

/// Packet publication on one hardware queue (under the execution lock).
pub(crate) struct Publisher<T: QueueTracker> {
    tracker: T,
    /// What the queue knows of its hardware queue (the shortcuts' rules).
    frontier: Frontier,
    /// The same, for threads without the lock.
    horizon: Arc<Horizon<T::Queue>>,
    next_seq: u64,
    /// Where the queue's signals live (as the tracker hands them out).
    placement: Placement,
    /// The status cells new commands get (those with a handle).
    states: Stash<CommandState>,
    moves: Moves<T>,
    /// Pins the tracker would not attach to their consumer (it cannot
    /// happen: the consumer's ticket is the queue's own). Their packets
    /// may already wait on them, so they are kept until the queue drains.
    unattached: Vec<Pin<T::Memory>>,
}

impl<T: QueueTracker> Publisher<T> {
    pub(crate) fn new(
        tracker: T,
        horizon: Arc<Horizon<T::Queue>>,
        states: Stash<CommandState>,
    ) -> Self {
        Self {
            tracker,
            frontier: Frontier::default(),
            horizon,
            next_seq: 1,
            placement: Placement::Host,
            states,
            moves: Moves {
                order_debt: None,
                left_queues: Vec::new(),
            },
            unattached: Vec::new(),
        }
    }

    /// The status cells kept for new commands here (not the pool's).
    #[cfg(all(test, feature = "sim", not(sigretire_loom)))]
    pub(crate) fn cells_kept(&self) -> usize {
        self.states.len()
    }

    /// The tracker (only the lock holder touches it).
    pub(crate) fn tracker(&mut self) -> &mut T {
        &mut self.tracker
    }

    /// The newest command's number (0: none yet).
    pub(crate) fn newest_seq(&self) -> u64 {
        self.frontier.newest_seq()
    }

    /// Where the queue's signals live.
    pub(crate) fn placement(&self) -> Placement {
        self.placement
    }

    /// What the newest command proves about the stream, from what the
    /// tracker knows without a load.
    pub(crate) fn verdict_known(&self) -> Result<Verdict, Fault> {
        let tracker = &self.tracker;
        let outlook = self.frontier.outlook(tracker.queue());
        Ok(outlook.verdict(|ticket| tracker.known_status(ticket))?)
    }

    /// What the newest command proves about the stream, from its status
    /// (one load at most).
    pub(crate) fn verdict_loaded(&mut self) -> Result<Verdict, Fault> {
        let outlook = self.frontier.outlook(self.tracker.queue());
        Ok(outlook.verdict(|ticket| self.tracker.query(ticket).map(Some))?)
    }

    /// Where nothing the layer knows answers, the hardware's word on the
    /// stream ([`Frontier::hardware_status`]); `None`: a marker must.
    pub(crate) fn hardware_status(&self) -> Option<sigretire_tracker::Status> {
        Frontier::hardware_status(self.tracker.queue(), self.owes_order_wait())
    }

    /// The newest command, if it stands for the hardware queue and is not
    /// known failed (no load).
    pub(crate) fn standing(&self) -> Result<Option<Newest>, Fault> {
        let tracker = &self.tracker;
        let outlook = self.frontier.outlook(tracker.queue());
        Ok(outlook.standing(|ticket| tracker.known_status(ticket))?)
    }

    /// Whether everything the layer published is done, as far as its
    /// newest command, on whichever hardware queue, says (one load at
    /// most); with none, whether no order wait is owed.
    pub(crate) fn published_work_done(&mut self) -> bool {
        if self.frontier.newest_seq() == 0 {
            return !self.owes_order_wait();
        }
        let tracker = &mut self.tracker;
        self.frontier
            .published_work_done(|ticket| tracker.query(ticket))
            .unwrap_or(false)
    }

    /// Makes `newest` timed, if a timed marker may share its completion
    /// ([`Frontier::shares_stamps`]; one load): its new ticket, whose
    /// stamps the tracker harvests.
    pub(crate) fn retime(&mut self, newest: &Newest) -> Result<Option<Ticket>, Fault> {
        if !Frontier::shares_stamps(newest, |ticket| self.tracker.query(ticket))? {
            return Ok(None);
        }
        let Some(timed) = self.tracker.time(&newest.ticket)? else {
            return Ok(None);
        };
        self.frontier.retime(newest.seq, timed);
        Ok(Some(timed))
    }

    /// Publishes one packet. Returns the command entry; the caller adds it
    /// to a batch. A move's order wait owed goes first, into `open` (the
    /// open batch).
    pub(crate) fn publish(
        &mut self,
        counters: &Counters,
        open: &mut Batch,
        packet: Packet<'_>,
    ) -> Result<Step<Published<T::Memory>>, Fault> {
        if let Err(retry) = self.pay_order_debt(counters, open)?.or_retry() {
            return Ok(retry);
        }
        let index = match self.tracker.queue().reserve() {
            Ok(index) => index,
            Err(QueueError::Full) => return Ok(Step::RingFull),
            Err(error) => return Err(error.into()),
        };
        self.frontier.note_packet(index, &self.horizon);
        let request = Request::packet(index)
            .barrier(true)
            .purpose(packet.purpose)
            .timed(packet.timed);
        let acquired = match self.tracker.acquire(request) {
            Ok(acquired) => acquired,
            Err(error) => {
                self.fill_empty(counters, index)?;
                return match error {
                    sigretire_tracker::AcquireError::Backpressure {
                        wait_for,
                        in_flight,
                    } => Ok(Step::Backpressure(wait_for, in_flight)),
                    other => Err(other.into()),
                };
            }
        };
        let signal = if packet.hold {
            match self.tracker.hold(&acquired.ticket) {
                Ok(signal) => signal,
                Err(error) => {
                    let _ = self.tracker.fail_submission(&acquired.ticket, 0);
                    self.fill_empty(counters, index)?;
                    return Err(error.into());
                }
            }
        } else {
            None
        };
        if let Err(error) = self
            .tracker
            .queue()
            .publish(acquired.publication, packet.work)
        {
            // The backend refused the work (or the queue failed): the slot
            // still needs a packet, or the processor stalls at it (a
            // backend that consumed the index refuses this too, harmlessly).
            // Nothing will decrement the armed signal: fail the use so the
            // tracker retires it without waiting for a packet that never runs.
            let _ = self.fill_empty(counters, index);
            let _ = self.tracker.fail_submission(&acquired.ticket, 0);
            return Err(error.into());
        }
        Ok(Step::Done(
            self.published(counters, &packet, &acquired, signal),
        ))
    }

    /// Records a published use as the queue's newest command.
    fn published(
        &mut self,
        counters: &Counters,
        packet: &Packet<'_>,
        acquired: &sigretire_tracker::Acquired,
        signal: Option<SignalRef<T::Memory>>,
    ) -> Published<T::Memory> {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.placement = acquired.placement;
        // A fence: it covers whatever ran before it on the queue.
        self.frontier.note_command(
            Newest {
                seq,
                index: acquired.publication.index(),
                ticket: acquired.ticket,
                stamped: matches!(
                    packet.work,
                    Work::Empty | Work::Kernel(_) | Work::Dispatch(_)
                ),
                placement: acquired.placement,
                refused: false,
            },
            &self.horizon,
        );
        bump(&counters.commands);
        if packet.purpose != Purpose::Completion {
            bump(&counters.markers);
        }
        Published {
            entry: Entry {
                seq,
                index: acquired.publication.index(),
                ticket: acquired.ticket,
                timed: packet.timed,
                hardware_queue: self.frontier.hardware_queue(),
                state: packet
                    .command
                    .then(|| self.states.fresh(CommandState::default())),
            },
            signal,
            refused: None,
        }
    }

    /// Publishes one use of several operations: `works` in consecutive
    /// slots, each decrementing the use's one signal, the use complete once
    /// all are. If a publication is refused after `k` were issued, the rest
    /// of the slots get empty packets, the use fails with its `k` issued
    /// operations still to finish (the tracker frees its signal once they
    /// did), and the refusal is returned.
    /// `ops` is the number of `works`, 1 at least (the caller checked).
    pub(crate) fn publish_all(
        &mut self,
        counters: &Counters,
        open: &mut Batch,
        works: &[Work<'_>],
        ops: u32,
    ) -> Result<Step<Published<T::Memory>>, Fault> {
        if let Err(retry) = self.pay_order_debt(counters, open)?.or_retry() {
            return Ok(retry);
        }
        let mut first = None;
        for reserved in 0..ops {
            match self.tracker.queue().reserve() {
                Ok(index) => {
                    self.frontier.note_packet(index, &self.horizon);
                    first.get_or_insert(index);
                }
                Err(error) => {
                    // Every slot reserved so far still needs a packet.
                    if let Some(first) = first {
                        for index in first..first + u64::from(reserved) {
                            self.fill_empty(counters, index)?;
                        }
                    }
                    return match error {
                        QueueError::Full => Ok(Step::RingFull),
                        error => Err(error.into()),
                    };
                }
            }
        }
        let first = first.expect("the caller passes 1 operation at least");
        let last = first + u64::from(ops) - 1;
        let request = Request::packet(last).barrier(true).ops(ops);
        let acquired = match self.tracker.acquire(request) {
            Ok(acquired) => acquired,
            Err(error) => {
                for index in first..=last {
                    self.fill_empty(counters, index)?;
                }
                return match error {
                    sigretire_tracker::AcquireError::Backpressure {
                        wait_for,
                        in_flight,
                    } => Ok(Step::Backpressure(wait_for, in_flight)),
                    other => Err(other.into()),
                };
            }
        };
        for (issued, (part, work)) in acquired.publication.operations().zip(works).enumerate() {
            let Err(error) = self.tracker.queue().publish(part, *work) else {
                continue;
            };
            let _ = self.fill_empty(counters, part.index());
            for index in part.index() + 1..=last {
                let _ = self.fill_empty(counters, index);
            }
            let _ = self
                .tracker
                .fail_submission(&acquired.ticket, issued as u32);
            if issued == 0 {
                // Nothing of it runs: the slots hold empty packets only.
                return Err(error.into());
            }
            // Its issued packets run and name its signal: it is the
            // stream's newest command all the same (a failed one, which
            // no shortcut trusts), so a synchronize waits for them.
            // A command of the caller's (`submit_all`), as below.
            let packet = Packet::new(Work::Marker, Purpose::Completion).command();
            let mut published = self.published(counters, &packet, &acquired, None);
            self.frontier.note_refused();
            published.refused = Some(error.into());
            return Ok(Step::Done(published));
        }
        // Only `submit_all` publishes this way: a command handle is made.
        let packet = Packet::new(Work::Marker, Purpose::Completion).command();
        Ok(Step::Done(
            self.published(counters, &packet, &acquired, None),
        ))
    }

    /// Publishes the barrier-AND that orders a new hardware queue after the
    /// old one's newest command, if a move left one to publish. Its pin is
    /// attached to the wait's own use, so the old signal is not re-armed
    /// while the new queue may still read it. The wait is a command of its
    /// own (a fence, as every packet here), the stream's newest until the
    /// packet published right after it: it joins the `open` batch there
    /// and then, even where that packet is not published after all.
    fn pay_order_debt(&mut self, counters: &Counters, open: &mut Batch) -> Result<Step<()>, Fault> {
        let Some(pin) = self.moves.order_debt.take() else {
            return Ok(Step::Done(()));
        };
        let handle = [pin.packet_handle()];
        let packet = Packet::new(Work::Wait(&handle), Purpose::Completion);
        let not_done = match self.publish(counters, open, packet) {
            Ok(Step::Done(published)) => Ok(published),
            Ok(Step::Backpressure(ticket, limit)) => Err(Ok(Step::Backpressure(ticket, limit))),
            Ok(Step::RingFull) => Err(Ok(Step::RingFull)),
            Err(error) => Err(Err(error)),
        };
        let published = match not_done {
            Ok(published) => published,
            Err(outcome) => {
                // Not published: still owed, by the next attempt.
                self.moves.order_debt = Some(pin);
                return outcome;
            }
        };
        bump(&counters.order_waits);
        // The stream's newest fence until the next command: it joins the
        // open batch, so that whatever completes the batch through it (a
        // synchronize answered by it, its failure) sees it as the fence,
        // on the queue it ran on.
        let consumer = published.entry.ticket;
        open.push(published.entry);
        self.attach(&consumer, pin)?;
        Ok(Step::Done(()))
    }

    /// Attaches `pin` to `consumer`, the use of a packet that waits on it:
    /// released when that use retires. A pin the tracker refuses (it cannot
    /// happen: the consumer is this queue's own use) is kept all the same,
    /// as the packet is out and may read its signal.
    pub(crate) fn attach(&mut self, consumer: &Ticket, pin: Pin<T::Memory>) -> Result<(), Fault> {
        if let Err(refused) = self.tracker.attach(consumer, pin) {
            self.unattached.push(refused.pin);
            return Err(sigretire_tracker::Error::from(refused.error).into());
        }
        Ok(())
    }

    /// Keeps `pin` until the queue drains: its packet is out, attached to
    /// nothing.
    pub(crate) fn keep_unattached(&mut self, pin: Pin<T::Memory>) {
        self.unattached.push(pin);
    }

    /// Whether a move left an order wait to publish.
    pub(crate) fn owes_order_wait(&self) -> bool {
        self.moves.order_debt.is_some()
    }

    /// Whether a move now must order the new queue behind more than the
    /// stream already owes: nothing is owed yet, or work the layer did not
    /// publish follows its packets on the queue it leaves (the old debt
    /// covers none of that).
    pub(crate) fn owes_more_order(&self) -> bool {
        !self.owes_order_wait() || self.frontier.followed_by_foreign_work(self.tracker.queue())
    }

    /// A move pins `owed` (the old queue's newest command, `None` when
    /// nothing is owed) for the next packet on the new queue to wait for;
    /// `Err` with the failed use when it failed (nothing may wait on it).
    pub(crate) fn owe_order_wait(&mut self, owed: &Ticket) -> Result<Result<(), Ticket>, Fault> {
        // `None`: known complete, nothing to order behind.
        self.moves.order_debt = match self.tracker.pin(owed) {
            Ok(pin) => pin,
            Err(sigretire_tracker::PinError::Failed { .. }) => return Ok(Err(*owed)),
            Err(error) => return Err(error.into()),
        };
        Ok(Ok(()))
    }

    /// The stream moves to `queue`: later packets go there, in a new
    /// generation of the tracker. Returns the hardware queues left earlier
    /// whose work all finished, for the caller to drop after the lock (as
    /// dropping one may wait for the GPU).
    pub(crate) fn move_to(&mut self, queue: T::Queue, counters: &Counters) -> Vec<T::Queue> {
        // Everything before the move finished: the queues left earlier run
        // nothing of the stream any more.
        let finished = match self.moves.order_debt {
            None => core::mem::take(&mut self.moves.left_queues),
            Some(_) => Vec::new(),
        };
        let old = self.tracker.queue().clone();
        self.moves.left_queues.push(old);
        // The next command pays the order debt first; until then nothing
        // published on the old queue stands for the new one.
        self.frontier.note_move(queue.clone(), &self.horizon);
        self.tracker.note_queue_change(queue);
        bump(&counters.queue_changes);
        finished
    }

    /// Pins `ticket`'s use and publishes a barrier-AND on it (no barrier
    /// bit: it waits for the use, not for later work) completing a free
    /// wake signal of `wakes`, for a thread to sleep on. `None`: nothing to
    /// sleep on (no wake signal free, no room in the ring, the use already
    /// known done, or the queue would not take the packet); the thread
    /// polls.
    pub(crate) fn arm_wake(
        &mut self,
        wakes: &mut WakePool<T::Memory>,
        counters: &Counters,
        memory: &T::Memory,
        ticket: &Ticket,
    ) -> Result<Option<Armed<T::Memory>>, sigretire_tracker::Error> {
        if wakes.len() == 0 {
            return Ok(None);
        }
        let pin = match self.tracker.pin(ticket) {
            Ok(Some(pin)) => pin,
            // Known done, or failed: the look that follows sees it.
            Ok(None) | Err(sigretire_tracker::PinError::Failed { .. }) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        let dependency = [pin.packet_handle()];
        let Ok(wake) = wakes.lend(memory, pin) else {
            return Ok(None);
        };
        // A backend with a channel beside the queue completes the wake
        // there, so that no later work of the queue waits behind it. Wakes
        // there run in the order they were armed, by every queue layer on
        // the hardware queue: one still waiting for a use that finishes
        // later (or never, if a runtime's gate holds it) holds this one up.
        // So the sleeper looks at its use after every sleep (a load per
        // error-check interval, which it wakes for anyway).
        let handle = memory.packet_handle(wake);
        match self
            .tracker
            .queue()
            .publish_wake_aside(dependency[0], handle)
        {
            Some(Ok(())) => return Ok(Some(wakes.armed(wake, true))),
            Some(Err(_)) => {
                drop(wakes.give_back(wake));
                return Ok(None);
            }
            None => {}
        }
        // Work submitted after the use runs before the wake packet, which
        // may then wake the thread late: it looks at the use between
        // sleeps as well.
        let behind = self.frontier.behind(self.tracker.queue(), ticket);
        let index = match self.tracker.queue().reserve() {
            Ok(index) => index,
            Err(_) => {
                drop(wakes.give_back(wake));
                return Ok(None);
            }
        };
        self.frontier.note_packet(index, &self.horizon);
        let publication = Publication::untracked(index, false, handle);
        if self
            .tracker
            .queue()
            .publish(publication, Work::Wait(&dependency))
            .is_err()
        {
            // The slot still needs a packet, or the processor stalls at it.
            let _ = self.fill_empty(counters, index);
            drop(wakes.give_back(wake));
            return Ok(None);
        }
        Ok(Some(wakes.armed(wake, behind)))
    }

    /// The queue is idle: the tracker may retire everything (and release
    /// the pins its waits held), and the pins kept unattached go.
    pub(crate) fn note_drained(&mut self) {
        self.tracker.note_drained();
        if !self.moves.left_queues.is_empty() {
            // The drain proves the current hardware queue's uses only. The
            // queues the stream left ran its older uses: each one's newest
            // fence, loaded once, retires them (and lets go of the pins
            // their waits held) rather than leaving them in flight.
            self.tracker.poll();
        }
        self.unattached.clear();
    }

    /// Fills a reserved slot with empty work and no completion signal.
    fn fill_empty(&mut self, counters: &Counters, index: u64) -> Result<(), Fault> {
        self.tracker
            .queue()
            .publish(Publication::unsignalled(index, true), Work::Marker)?;
        bump(&counters.empty_packets);
        Ok(())
    }
}
