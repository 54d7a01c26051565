//! Packet publication, under the execution lock: reserve a slot, acquire a
//! signal for that AQL index, publish.
//!
//! The tracker never blocks. When it cannot hand out a signal after the slot
//! was reserved, the slot is filled with empty work and no completion signal
//! (every reserved slot must be published, or the packet processor stalls
//! at it); under back-pressure the caller then waits, outside the lock, for
//! the use the tracker named and retries ([`QueueCore::with_publication`](crate::queue::QueueCore)).

use crate::batch::Entry;
use crate::error::Error;
use crate::queue::{Inner, QueueTracker};
use crate::stats::{Counters, bump};
use sigretire_tracker::{
    HardwareQueue, Purpose, QueueError, Request, SignalMemory, SignalRef, Ticket, Work,
};

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
}

/// What one publication attempt did.
pub(crate) enum Attempt<M: SignalMemory> {
    Published(Published<M>),
    /// The tracker is at its limit: wait for this use outside the lock.
    Backpressure(Ticket),
    /// The hardware ring is full: retry once the GPU consumed packets.
    RingFull,
}

/// What one step under the lock did: finished, or must wait and retry.
pub(crate) enum Step<R> {
    Done(R),
    Backpressure(Ticket),
    RingFull,
}

/// Unwraps a publication inside a step, turning "wait and retry" into the
/// step's own result.
macro_rules! published {
    ($attempt:expr) => {
        match $attempt {
            $crate::publish::Attempt::Published(published) => published,
            $crate::publish::Attempt::Backpressure(ticket) => {
                return Ok($crate::publish::Step::Backpressure(ticket));
            }
            $crate::publish::Attempt::RingFull => return Ok($crate::publish::Step::RingFull),
        }
    };
}
pub(crate) use published;

impl<T: QueueTracker> Inner<T> {
    /// Publishes one packet (under the lock). Returns the command entry; the
    /// caller adds it to a batch.
    pub(crate) fn publish(
        &mut self,
        counters: &Counters,
        packet: Packet<'_>,
    ) -> Result<Attempt<T::Memory>, Error> {
        let index = match self.tracker.queue().reserve() {
            Ok(index) => index,
            Err(QueueError::Full) => return Ok(Attempt::RingFull),
            Err(error) => return Err(error.into()),
        };
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
                        Ok(Attempt::Backpressure(wait_for))
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
            .publish(index, packet.work, true, acquired.signal)
        {
            // Nothing will decrement the armed signal: fail the use so the
            // tracker retires it without waiting for a packet that never runs.
            let _ = self.tracker.fail_submission(&acquired.ticket, 0);
            return Err(error.into());
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.signals = acquired.placement;
        self.last = Some((seq, acquired.ticket));
        bump(&counters.commands);
        if packet.purpose != Purpose::Completion {
            bump(&counters.markers);
        }
        Ok(Attempt::Published(Published {
            entry: Entry {
                seq,
                index,
                ticket: acquired.ticket,
                timed: packet.timed,
                state: self.states.fresh(),
            },
            signal,
        }))
    }

    /// Fills a reserved slot with empty work and no completion signal.
    fn fill_empty(&mut self, counters: &Counters, index: u64) -> Result<(), Error> {
        self.tracker.queue().publish(index, Work::Marker, true, 0)?;
        bump(&counters.empty_packets);
        Ok(())
    }
}
