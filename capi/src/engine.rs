//! One C handle over every kind of tracker: the object-safe traits the
//! handles call, implemented once for any `Tracker` whose queue this
//! library knows how to publish on (or knows it cannot).
//!
//! The Rust `Tracker` trait has associated types (its signal memory, its
//! queue), so trackers of different backends are different types; a C
//! handle holds one behind `Box<dyn Core>` (the `&mut` side, behind the
//! handle's mutex) and `Box<dyn WaitSide>` (the lock-free side). Holds and
//! pins are boxed the same way; a pin is attached only to a tracker of its
//! own memory type, checked with `Any`.

use crate::status::{
    Outcome, SIGRETIRE_ERR_QUEUE_FAILED, SIGRETIRE_ERR_QUEUE_FULL, SIGRETIRE_ERR_UNSUPPORTED,
    SIGRETIRE_ERR_WRONG_BACKEND, fail,
};
use ::sigretire_tracker::{
    AcquireError, Acquired, Census, FailSubmissionError, ForeignTicket, Generation, Pin, PinError,
    Placement, PublishError, SignalRef, Stats, Status, Ticket, Timestamps, TimestampsError,
    Tracker, WaitError, WaitPolicy, Waiter, Work,
    backend::{Publication, QueueError, QueueView, SignalMemory},
};
use std::any::Any;
use std::time::Duration;

/// A queue type the C handle can carry: whether and how it publishes.
pub(crate) trait CQueue: QueueView + Sized + 'static {
    /// Reserves the next packet slot.
    fn reserve_slot(&self) -> Outcome<u64>;
    /// Publishes `work` as `publication` says, and rings the doorbell.
    fn publish_work(&self, publication: Publication, work: Work<'_>) -> Outcome;
    /// Whether a tracker on `self` may move to `other` (the same simulator,
    /// the same ROCr device).
    fn may_move_to(&self, other: &Self) -> bool;
}

/// A `QueueError` as a status.
pub(crate) fn queue_failure<T>(error: QueueError) -> Outcome<T> {
    let status = match error {
        QueueError::Full => SIGRETIRE_ERR_QUEUE_FULL,
        QueueError::Failed(_) => SIGRETIRE_ERR_QUEUE_FAILED,
        QueueError::Unsupported(_) => SIGRETIRE_ERR_UNSUPPORTED,
    };
    fail(status, error.to_string())
}

/// A hold (`SignalRef`) of any backend.
pub(crate) trait HoldObject: Send + Sync {
    fn status(&self) -> Status;
    fn known_status(&self) -> Option<Status>;
    fn harvest(&self) -> Option<Option<Timestamps>>;
    fn packet_handle(&self) -> u64;
    fn placement(&self) -> Placement;
    fn clone_box(&self) -> Box<dyn HoldObject>;
}

impl<M: SignalMemory> HoldObject for SignalRef<M> {
    fn status(&self) -> Status {
        SignalRef::status(self)
    }
    fn known_status(&self) -> Option<Status> {
        SignalRef::known_status(self)
    }
    fn harvest(&self) -> Option<Option<Timestamps>> {
        SignalRef::harvest(self)
    }
    fn packet_handle(&self) -> u64 {
        SignalRef::packet_handle(self)
    }
    fn placement(&self) -> Placement {
        SignalRef::placement(self)
    }
    fn clone_box(&self) -> Box<dyn HoldObject> {
        Box::new(self.clone())
    }
}

/// A pin of any backend.
pub(crate) trait PinObject: Send + Sync {
    fn packet_handle(&self) -> u64;
    fn status(&self) -> Status;
    fn as_any(&self) -> &dyn Any;
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

impl<M: SignalMemory> PinObject for Pin<M> {
    fn packet_handle(&self) -> u64 {
        Pin::packet_handle(self)
    }
    fn status(&self) -> Status {
        Pin::status(self)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// Why an attach did not take the pin; the pin comes back.
pub(crate) struct Refused {
    pub(crate) failure: crate::status::Fail,
    pub(crate) pin: Box<dyn PinObject>,
}

/// The `&mut` side of a tracker, behind the handle's mutex.
pub(crate) trait Core: Send {
    fn acquire(&mut self, request: ::sigretire_tracker::Request) -> Result<Acquired, AcquireError>;
    fn query(&mut self, ticket: &Ticket) -> Result<Status, ForeignTicket>;
    fn known_status(&self, ticket: &Ticket) -> Result<Option<Status>, ForeignTicket>;
    fn hold(&mut self, ticket: &Ticket) -> Result<Option<Box<dyn HoldObject>>, ForeignTicket>;
    fn pin(&mut self, ticket: &Ticket) -> Result<Option<Box<dyn PinObject>>, PinError>;
    fn attach(&mut self, consumer: &Ticket, pin: Box<dyn PinObject>) -> Result<(), Refused>;
    /// Whether `pin` is of this tracker's memory type.
    fn accepts(&self, pin: &dyn PinObject) -> bool;
    fn probe(&mut self) -> bool;
    fn poll(&mut self) -> usize;
    fn reclaim(&mut self) -> usize;
    fn timestamps(&mut self, ticket: &Ticket) -> Result<Option<Timestamps>, TimestampsError>;
    /// Moves to `queue`, a `Box` of this tracker's queue type.
    fn note_queue_change(&mut self, queue: Box<dyn Any>) -> Outcome;
    /// The publication of a use in flight that may still be published.
    fn publication(&self, ticket: &Ticket) -> Result<Publication, PublishError>;
    fn note_drained(&mut self);
    fn fail_queue(&mut self) -> usize;
    fn fail_submission(&mut self, ticket: &Ticket, issued: u32) -> Result<(), FailSubmissionError>;
    fn generation(&self) -> Generation;
    fn stats(&self) -> Stats;
    fn census(&self) -> Census;
    fn reserve(&self) -> Outcome<u64>;
    fn publish(&self, publication: Publication, work: Work<'_>) -> Outcome;
    /// The queue, for backend-specific calls (ROCr's `report_error`).
    fn queue(&self) -> &dyn Any;
}

/// A tracker behind the C handle.
pub(crate) struct Engine<T>(pub(crate) T);

impl<T> Core for Engine<T>
where
    T: Tracker,
    T::Queue: CQueue,
{
    fn acquire(&mut self, request: ::sigretire_tracker::Request) -> Result<Acquired, AcquireError> {
        self.0.acquire(request)
    }

    fn query(&mut self, ticket: &Ticket) -> Result<Status, ForeignTicket> {
        self.0.query(ticket)
    }

    fn known_status(&self, ticket: &Ticket) -> Result<Option<Status>, ForeignTicket> {
        self.0.known_status(ticket)
    }

    fn hold(&mut self, ticket: &Ticket) -> Result<Option<Box<dyn HoldObject>>, ForeignTicket> {
        Ok(self
            .0
            .hold(ticket)?
            .map(|r| Box::new(r) as Box<dyn HoldObject>))
    }

    fn pin(&mut self, ticket: &Ticket) -> Result<Option<Box<dyn PinObject>>, PinError> {
        Ok(self
            .0
            .pin(ticket)?
            .map(|p| Box::new(p) as Box<dyn PinObject>))
    }

    fn accepts(&self, pin: &dyn PinObject) -> bool {
        pin.as_any().is::<Pin<T::Memory>>()
    }

    fn attach(&mut self, consumer: &Ticket, pin: Box<dyn PinObject>) -> Result<(), Refused> {
        if !self.accepts(pin.as_ref()) {
            return Err(Refused {
                failure: wrong_backend_pin(),
                pin,
            });
        }
        let pin = match pin.into_any().downcast::<Pin<T::Memory>>() {
            Ok(pin) => *pin,
            // Checked just above: cannot happen. The pin is dropped (its
            // signal released), which is what a refused attach of a pin
            // nobody else holds comes to.
            Err(_) => return Ok(()),
        };
        self.0.attach(consumer, pin).map_err(|refused| Refused {
            failure: crate::status::Fail {
                status: crate::status::SIGRETIRE_ERR_BAD_TICKET,
                message: format!(
                    "the consumer ticket is not one this tracker issued as it is: {}",
                    refused.error
                ),
            },
            pin: Box::new(refused.pin),
        })
    }

    fn probe(&mut self) -> bool {
        self.0.probe()
    }

    fn poll(&mut self) -> usize {
        self.0.poll()
    }

    fn reclaim(&mut self) -> usize {
        self.0.reclaim()
    }

    fn timestamps(&mut self, ticket: &Ticket) -> Result<Option<Timestamps>, TimestampsError> {
        self.0.timestamps(ticket)
    }

    fn note_queue_change(&mut self, queue: Box<dyn Any>) -> Outcome {
        let Ok(queue) = queue.downcast::<T::Queue>() else {
            return fail(
                SIGRETIRE_ERR_WRONG_BACKEND,
                "the new queue is of another backend than the tracker's",
            );
        };
        if !self.0.queue().may_move_to(&queue) {
            return fail(
                crate::status::SIGRETIRE_ERR_INVALID_ARGUMENT,
                "the new queue cannot name this tracker's signals (another simulator, or \
                 another ROCr device)",
            );
        }
        self.0.note_queue_change(*queue);
        Ok(())
    }

    fn publication(&self, ticket: &Ticket) -> Result<Publication, PublishError> {
        self.0.publication(ticket)
    }

    fn note_drained(&mut self) {
        self.0.note_drained()
    }

    fn fail_queue(&mut self) -> usize {
        self.0.fail_queue()
    }

    fn fail_submission(&mut self, ticket: &Ticket, issued: u32) -> Result<(), FailSubmissionError> {
        self.0.fail_submission(ticket, issued)
    }

    fn generation(&self) -> Generation {
        self.0.generation()
    }

    fn stats(&self) -> Stats {
        self.0.stats()
    }

    fn census(&self) -> Census {
        self.0.census()
    }

    fn reserve(&self) -> Outcome<u64> {
        self.0.queue().reserve_slot()
    }

    fn publish(&self, publication: Publication, work: Work<'_>) -> Outcome {
        self.0.queue().publish_work(publication, work)
    }

    fn queue(&self) -> &dyn Any {
        self.0.queue()
    }
}

fn wrong_backend_pin() -> crate::status::Fail {
    crate::status::Fail {
        status: SIGRETIRE_ERR_WRONG_BACKEND,
        message: "the pin is of a tracker of another backend (its signal memory is not this \
                  tracker's kind): attach it to a tracker whose queue can name its signal"
            .into(),
    }
}

/// The side of a tracker other threads use without its mutex.
pub(crate) trait WaitSide: Send + Sync {
    fn known_status(&self, ticket: &Ticket) -> Result<Option<Status>, ForeignTicket>;
    fn wait(
        &self,
        ticket: &Ticket,
        timeout: Duration,
        policy: WaitPolicy,
    ) -> Result<Status, WaitError>;
    fn timestamp_frequency(&self) -> u64;
}

impl<M: SignalMemory> WaitSide for Waiter<M> {
    fn known_status(&self, ticket: &Ticket) -> Result<Option<Status>, ForeignTicket> {
        Waiter::known_status(self, ticket)
    }

    fn wait(
        &self,
        ticket: &Ticket,
        timeout: Duration,
        policy: WaitPolicy,
    ) -> Result<Status, WaitError> {
        Waiter::wait(self, ticket, timeout, policy)
    }

    fn timestamp_frequency(&self) -> u64 {
        self.memory().timestamp_clock().frequency()
    }
}

/// The status of a ticket the tracker refused: one it did not issue as it
/// is (it checks every field against its own state).
pub(crate) fn bad_ticket<T>(_: ForeignTicket) -> Outcome<T> {
    fail(
        crate::status::SIGRETIRE_ERR_BAD_TICKET,
        "the ticket is not one this tracker issued as it is: another tracker's, a zeroed one, \
         or one altered or made up",
    )
}
