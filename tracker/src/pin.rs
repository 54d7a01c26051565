//! Pins: lending a use's signal to a packet on another queue that waits for it
//! on the GPU (a barrier-AND dependency).
//!
//! Re-arming the signal while the waiter may still read it would hide the use
//! from the waiter, so the pin is a counted reference: the producer parks the
//! signal instead of re-arming it. The consumer's tracker keeps the pin until
//! the consuming packet has retired; the producer re-arms in use order, so
//! every earlier use of the producer has retired too before the signal is
//! reused. A drained consumer queue retires its uses and so releases its pins.
//! A use already known complete yields no pin and no dependency at all.

use crate::backend::SignalMemory;
use crate::error::ForeignTicket;
use crate::share::SignalRef;
use crate::ticket::Status;
use std::collections::VecDeque;

/// A signal lent to a GPU waiter on another queue.
///
/// Put [`packet_handle`](Self::packet_handle) in the consumer packet's
/// `dep_signal`, then give the pin to the consumer queue's tracker with
/// [`Tracker::attach`](crate::Tracker::attach).
///
/// ```
/// use sigretire_tracker::{Request, Tracker};
/// use sigretire_sim::backend as sim_backend;
///
/// let (mut producer, queue_a) = sim_backend::stepped_tracker(Default::default()).unwrap();
/// let index = queue_a.reserve().unwrap();
/// let acquired = producer.acquire(Request::packet(index).barrier(true)).unwrap();
/// sim_backend::submit_barrier(&queue_a, index, acquired.signal);
///
/// let pin = producer.pin(&acquired.ticket).unwrap().expect("still pending");
/// assert_eq!(pin.packet_handle(), acquired.signal);
/// queue_a.run_until_idle();
/// producer.poll();
/// // Retired, but pinned: parked rather than re-armed.
/// assert_eq!(producer.census().parked, 1);
/// drop(pin);
/// producer.reclaim();
/// assert_eq!(producer.census().parked, 0);
/// ```
#[derive(Debug)]
pub struct Pin<M: SignalMemory> {
    reference: SignalRef<M>,
}

impl<M: SignalMemory> Pin<M> {
    pub(crate) fn new(reference: SignalRef<M>) -> Self {
        Self { reference }
    }

    /// The value for the consumer packet's dependency field.
    pub fn packet_handle(&self) -> u64 {
        self.reference.packet_handle()
    }

    /// The producer use's sequence number.
    pub fn producer_seq(&self) -> u64 {
        self.reference.seq()
    }

    /// The producer use's status, as a holder sees it.
    pub fn status(&self) -> Status {
        self.reference.status()
    }
}

/// [`Tracker::attach`](crate::Tracker::attach) refused: why, and the pin,
/// handed back so that the signal stays pinned while the caller decides
/// (a consumer packet may already wait on it).
///
/// ```
/// use sigretire_tracker::{ForeignTicket, Request, Tracker};
/// use sigretire_sim::backend as sim_backend;
///
/// let (mut producer, queue) = sim_backend::stepped_tracker(Default::default())?;
/// let (mut stranger, other) = sim_backend::stepped_tracker(Default::default())?;
/// let (mut consumer, _) = sim_backend::stepped_tracker(Default::default())?;
/// let produced = producer.acquire(Request::packet(queue.reserve()?).barrier(true))?;
/// let pin = producer.pin(&produced.ticket)?.expect("pending");
/// let foreign = stranger.acquire(Request::packet(other.reserve()?))?.ticket;
/// let refused = consumer.attach(&foreign, pin).unwrap_err();
/// assert_eq!(refused.error, ForeignTicket);
/// let pin = refused.pin; // still pinned: attach it where it belongs, or drop it
/// # drop(pin);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct AttachError<M: SignalMemory> {
    /// Why the pin was not attached: the consumer's ticket is another
    /// tracker's.
    pub error: ForeignTicket,
    /// The pin, still holding the producer's signal.
    pub pin: Pin<M>,
}

impl<M: SignalMemory> core::fmt::Debug for AttachError<M> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AttachError")
            .field("error", &self.error)
            .field("producer_seq", &self.pin.producer_seq())
            .finish()
    }
}

impl<M: SignalMemory> core::fmt::Display for AttachError<M> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "the pin was not attached (it is handed back): {}",
            self.error
        )
    }
}

impl<M: SignalMemory> std::error::Error for AttachError<M> {}

/// Pins a tracker holds for its consuming uses, ordered by consumer sequence
/// number, each released when its consumer retires.
pub struct Attachments<M: SignalMemory> {
    pins: VecDeque<(u64, Pin<M>)>,
}

impl<M: SignalMemory> Default for Attachments<M> {
    fn default() -> Self {
        Self {
            pins: VecDeque::new(),
        }
    }
}

impl<M: SignalMemory> Attachments<M> {
    /// Keeps `pin` until use `consumer` retired.
    pub fn attach(&mut self, consumer: u64, pin: Pin<M>) {
        let at = self.pins.partition_point(|&(seq, _)| seq <= consumer);
        self.pins.insert(at, (consumer, pin));
    }

    /// Whether no pin is kept.
    pub fn is_empty(&self) -> bool {
        self.pins.is_empty()
    }

    /// How many pins are kept.
    pub fn len(&self) -> usize {
        self.pins.len()
    }

    /// Drops the pins whose consumer `done` says is done.
    pub fn release_where(&mut self, mut done: impl FnMut(u64) -> bool) {
        self.pins.retain(|&(consumer, _)| !done(consumer));
    }

    /// Drops the pins of every consumer up to `seq`.
    #[inline]
    pub fn release_through(&mut self, seq: u64) {
        while self
            .pins
            .front()
            .is_some_and(|&(consumer, _)| consumer <= seq)
        {
            self.pins.pop_front();
        }
    }
}
