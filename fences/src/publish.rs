//! What the execution lock protects, and packet publication under it:
//! reserve a slot, acquire a signal for that AQL index, publish.
//!
//! The tracker never blocks. When it cannot hand out a signal after the slot
//! was reserved, the slot is filled with empty work and no completion signal
//! (every reserved slot must be published, or the packet processor stalls
//! at it); under back-pressure the caller then waits, outside the lock, for
//! the use the tracker named and retries ([`QueueCore::with_publication`](crate::queue::QueueCore)).

use crate::batch::{Batch, CommandState, Entry};
use crate::error::Error;
use crate::frontier::{Frontier, Horizon, Newest};
use crate::handler::Handoff;
use crate::marker::Marker;
use crate::recycle::Stash;
use crate::stats::{Counters, bump};
use crate::sync::Arc;
use crate::wake::Armed;
use sigretire_tracker::{
    HardwareQueue, Placement, Publication, Purpose, QueueError, Request, SignalMemory, SignalRef,
    Status, Ticket, Tracker, Work,
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

/// Everything the execution lock protects.
pub(crate) struct Inner<T: QueueTracker> {
    pub(crate) tracker: T,
    /// The open submission batch.
    pub(crate) batch: Batch,
    /// What the queue knows of its hardware queue: the newest command and
    /// packet, and so which shortcuts are sound (`frontier`).
    pub(crate) frontier: Frontier,
    /// The same, for threads without the lock.
    pub(crate) horizon: Arc<Horizon<T::Queue>>,
    pub(crate) next_seq: u64,
    /// The synchronize marker in flight, for a second synchronizing thread.
    pub(crate) in_flight_marker: Option<Arc<Marker>>,
    /// Where the queue's signals live (as the tracker hands them out).
    pub(crate) signals: Placement,
    /// Batches closed under the lock, handed out after it is released.
    pub(crate) closed: Vec<Handoff<T::Memory>>,
    /// Pins the tracker would not attach to their consumer (it cannot
    /// happen: the consumer's ticket is the queue's own). Their packets
    /// may already wait on them, so they are kept until the queue drains.
    pub(crate) unattached: Vec<sigretire_tracker::Pin<T::Memory>>,
    /// The status cells new commands get.
    pub(crate) states: Stash<CommandState>,
    /// After a move to another hardware queue, the old queue's newest
    /// command (pinned) while it may still run: the next packet published
    /// on the new queue is preceded by a barrier-AND waiting for it, so the
    /// stream stays in order across the move.
    pub(crate) order_debt: Option<sigretire_tracker::Pin<T::Memory>>,
    /// Hardware queues the stream left while its work there may still run:
    /// the queue layer's handles keep them alive (dropping a backend's last
    /// handle may destroy the queue), until a later move finds everything
    /// before it finished, or the host queue goes.
    pub(crate) left_queues: Vec<T::Queue>,
    /// The queue's wake signals, for waits that sleep (`sleep`).
    pub(crate) wakes: crate::wake::WakePool<T::Memory>,
}

impl<T: QueueTracker> Inner<T> {
    /// The newest command's number (0: none yet).
    pub(crate) fn last_seq(&self) -> u64 {
        self.frontier.newest_seq()
    }

    /// The newest command, if its completion proves everything on the
    /// hardware queue done and it has not failed (the frontier's premise,
    /// and the tracker's word on its outcome: no load for this).
    pub(crate) fn standing(&self) -> Result<Option<Newest>, Error> {
        let Some(newest) = self.frontier.standing(self.tracker.queue()).copied() else {
            return Ok(None);
        };
        let failed = self.tracker.known_status(&newest.ticket)? == Some(Status::Failed);
        Ok((!failed).then_some(newest))
    }

    /// The newest command, for a marker that would follow it at once: every
    /// packet is a fence, so a marker published now would complete when it
    /// does, and proves nothing more. `None` where a marker is needed: the
    /// newest command does not stand for the hardware queue (the
    /// frontier's premise: work the layer did not publish may follow it, it
    /// was refused in part or failed, the stream moved since), or there is
    /// none.
    ///
    /// `timed`: the marker would be timed. Shared only if the command ran
    /// work (which a profiled queue stamps), has a host-memory signal, and
    /// is still running, so that its end is when the GPU would have reached
    /// the marker; the tracker then harvests its stamps ([`Tracker::time`]),
    /// and the entry and the newest command are marked timed.
    pub(crate) fn newest_to_share(
        &mut self,
        timed: bool,
    ) -> Result<Option<CompletionPoint>, Error> {
        let Some(newest) = self.standing()? else {
            return Ok(None);
        };
        let ticket = if timed {
            // A timed marker on an idle queue is stamped when the GPU gets to
            // it, not when the work before it ended (an event recorded long
            // after a finished kernel must not report the kernel's end):
            // share only a command still running (one load at most). In
            // device memory that load is a PCIe read, and the harvest one
            // more: a timed marker of its own is cheaper.
            if !newest.stamped
                || newest.placement != Placement::Host
                || self.tracker.query(&newest.ticket)? != Status::Pending
            {
                return Ok(None);
            }
            let Some(timed) = self.tracker.time(&newest.ticket)? else {
                return Ok(None);
            };
            self.frontier.retime(newest.seq, timed);
            if let Some(entry) = self.batch.last_mut().filter(|e| e.seq == newest.seq) {
                entry.ticket = timed;
                entry.timed = true;
            }
            timed
        } else {
            newest.ticket
        };
        Ok(Some(CompletionPoint {
            seq: newest.seq,
            index: newest.index,
            ticket,
        }))
    }
}

/// The command an event completes with: its own marker, or the newest
/// command it shares.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CompletionPoint {
    pub(crate) seq: u64,
    pub(crate) index: u64,
    pub(crate) ticket: Ticket,
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
}

impl<'a> Packet<'a> {
    pub(crate) const fn new(work: Work<'a>, purpose: Purpose) -> Self {
        Self {
            work,
            purpose,
            timed: false,
            hold: false,
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
}

/// A published packet: its command entry and, if asked for, its signal.
pub(crate) struct Published<M: SignalMemory> {
    pub(crate) entry: Entry,
    pub(crate) signal: Option<SignalRef<M>>,
    /// Published only in part: the refusal the caller reports (the entry
    /// still joins the batch, as its issued packets run).
    pub(crate) refused: Option<Error>,
}

/// What one step under the lock did: finished (a publication, or what a
/// whole operation made of its publications), or must wait outside the
/// lock and retry.
pub(crate) enum Step<R> {
    Done(R),
    /// The tracker is at its limit: wait for this use outside the lock.
    Backpressure(Ticket),
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
            Step::Backpressure(ticket) => Err(Step::Backpressure(ticket)),
            Step::RingFull => Err(Step::RingFull),
        }
    }
}

impl<T: QueueTracker> Inner<T> {
    /// Publishes one packet (under the lock). Returns the command entry; the
    /// caller adds it to a batch.
    pub(crate) fn publish(
        &mut self,
        counters: &Counters,
        packet: Packet<'_>,
    ) -> Result<Step<Published<T::Memory>>, Error> {
        if let Err(retry) = self.pay_order_debt(counters)?.or_retry() {
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
                    sigretire_tracker::AcquireError::Backpressure { wait_for, .. } => {
                        Ok(Step::Backpressure(wait_for))
                    }
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
        self.signals = acquired.placement;
        self.frontier.note_command(Newest {
            seq,
            index: acquired.publication.index(),
            ticket: acquired.ticket,
            stamped: matches!(
                packet.work,
                Work::Empty | Work::Kernel(_) | Work::Dispatch(_)
            ),
            placement: acquired.placement,
            refused: false,
        });
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
                state: self.states.fresh(CommandState::default()),
            },
            signal,
            refused: None,
        }
    }

    /// Publishes one use of several operations (under the lock): `works`
    /// in consecutive slots, each decrementing the use's one signal, the use
    /// complete once all are. If a publication is refused after `k` were
    /// issued, the rest of the slots get empty packets, the use fails with
    /// its `k` issued operations still to finish (the tracker frees its
    /// signal once they did), and the refusal is returned.
    pub(crate) fn publish_all(
        &mut self,
        counters: &Counters,
        works: &[Work<'_>],
    ) -> Result<Step<Published<T::Memory>>, Error> {
        if let Err(retry) = self.pay_order_debt(counters)?.or_retry() {
            return Ok(retry);
        }
        let ops =
            u32::try_from(works.len())
                .ok()
                .filter(|&n| n >= 1)
                .ok_or(Error::InvalidConfig(
                    "a command needs 1 to 2^32 - 1 operations",
                ))?;
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
        let first = first.expect("at least one operation");
        let last = first + u64::from(ops) - 1;
        let request = Request::packet(last).barrier(true).ops(ops);
        let acquired = match self.tracker.acquire(request) {
            Ok(acquired) => acquired,
            Err(error) => {
                for index in first..=last {
                    self.fill_empty(counters, index)?;
                }
                return match error {
                    sigretire_tracker::AcquireError::Backpressure { wait_for, .. } => {
                        Ok(Step::Backpressure(wait_for))
                    }
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
            let packet = Packet::new(Work::Marker, Purpose::Completion);
            let mut published = self.published(counters, &packet, &acquired, None);
            self.frontier.note_refused();
            published.refused = Some(error.into());
            return Ok(Step::Done(published));
        }
        let packet = Packet::new(Work::Marker, Purpose::Completion);
        Ok(Step::Done(
            self.published(counters, &packet, &acquired, None),
        ))
    }

    /// Publishes the barrier-AND that orders a new hardware queue after the
    /// old one's newest command, if a move left one to publish. Its pin is
    /// attached to the wait's own use, so the old signal is not re-armed
    /// while the new queue may still read it. The wait is no command of its
    /// own: the packet published right after it (a fence, as every packet
    /// here) completes only after it.
    fn pay_order_debt(&mut self, counters: &Counters) -> Result<Step<()>, Error> {
        let Some(pin) = self.order_debt.take() else {
            return Ok(Step::Done(()));
        };
        let handle = [pin.packet_handle()];
        let packet = Packet::new(Work::Wait(&handle), Purpose::Completion);
        let not_done = match self.publish(counters, packet) {
            Ok(Step::Done(published)) => Ok(published),
            Ok(Step::Backpressure(ticket)) => Err(Ok(Step::Backpressure(ticket))),
            Ok(Step::RingFull) => Err(Ok(Step::RingFull)),
            Err(error) => Err(Err(error)),
        };
        let published = match not_done {
            Ok(published) => published,
            Err(outcome) => {
                // Not published: still owed, by the next attempt.
                self.order_debt = Some(pin);
                return outcome;
            }
        };
        bump(&counters.order_waits);
        if let Err(refused) = self.tracker.attach(&published.entry.ticket, pin) {
            // Cannot happen (the consumer is this queue's own use); the
            // packet may read the signal all the same: keep the pin.
            self.unattached.push(refused.pin);
            return Err(refused.error.into());
        }
        Ok(Step::Done(()))
    }

    /// Pins `ticket`'s use and publishes a barrier-AND on it (no barrier
    /// bit: it waits for the use, not for later work) completing a free
    /// wake signal, for a thread to sleep on (`sleep`). `None`: nothing to
    /// sleep on (no wake signal free, no room in the ring, the use already
    /// known done, or the queue would not take the packet); the thread
    /// polls.
    pub(crate) fn arm_wake(
        &mut self,
        counters: &Counters,
        memory: &T::Memory,
        ticket: &Ticket,
    ) -> Result<Option<Armed<T::Memory>>, Error> {
        if self.wakes.len() == 0 {
            return Ok(None);
        }
        let pin = match self.tracker.pin(ticket) {
            Ok(Some(pin)) => pin,
            // Known done, or failed: the look that follows sees it.
            Ok(None) | Err(sigretire_tracker::PinError::Failed { .. }) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        let dependency = [pin.packet_handle()];
        // Work submitted after the use runs before the wake packet, which
        // may then wake the thread late: it looks at the use between
        // sleeps as well.
        let behind = self
            .frontier
            .newest()
            .is_none_or(|newest| newest.ticket.seq() != ticket.seq())
            || self.frontier.followed_by_foreign_work(self.tracker.queue());
        let Ok(wake) = self.wakes.lend(memory, pin) else {
            return Ok(None);
        };
        let index = match self.tracker.queue().reserve() {
            Ok(index) => index,
            Err(_) => {
                drop(self.wakes.give_back(wake));
                return Ok(None);
            }
        };
        self.frontier.note_packet(index, &self.horizon);
        let publication = Publication::untracked(index, false, memory.packet_handle(wake));
        if self
            .tracker
            .queue()
            .publish(publication, Work::Wait(&dependency))
            .is_err()
        {
            // The slot still needs a packet, or the processor stalls at it.
            let _ = self.fill_empty(counters, index);
            drop(self.wakes.give_back(wake));
            return Ok(None);
        }
        Ok(Some(self.wakes.armed(wake, behind)))
    }

    /// Fills a reserved slot with empty work and no completion signal.
    pub(crate) fn fill_empty(&mut self, counters: &Counters, index: u64) -> Result<(), Error> {
        self.tracker
            .queue()
            .publish(Publication::unsignalled(index, true), Work::Marker)?;
        bump(&counters.empty_packets);
        Ok(())
    }
}
