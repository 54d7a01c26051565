//! Cross-queue waits (`hipStreamWaitEvent`): barrier-AND packets on the
//! consumer queue carrying pinned producer signals.
//!
//! For each producer use the consumer must wait for, the producer's tracker
//! pins its signal ([`Tracker::pin`], under the producer's lock, briefly) —
//! or answers that the use is already known complete, and then no
//! dependency is emitted at all. The pins go into barrier-AND packets of at
//! most five dependencies each, chained on the consumer queue (every packet
//! carries the barrier bit, so the chain is in order), and each pin is
//! attached to the consumer use that waits on it ([`Tracker::attach`]): it is
//! released when that use retires, never earlier, so the producer cannot
//! re-arm the signal while the GPU may still read it.
//!
//! The producer's and the consumer's locks are never held together, so two
//! queues waiting on each other cannot deadlock.

use crate::batch::Entry;
use crate::command::Command;
use crate::error::{Fault, WaitEventError};
use crate::event::Event;
use crate::frontier::Verdict;
use crate::publish::{Packet, QueueTracker, Step};
use crate::stats::{add, bump};
use crate::submission::{Held, Submission};
use sigretire_tracker::{Pin, Purpose, Status, Ticket, Tracker, Work, backend::SignalMemory};
use std::collections::VecDeque;

/// Dependencies a barrier-AND packet carries at most (the AQL packet
/// format: `hsa_barrier_and_packet_t` has five `dep_signal` fields). A wait
/// on more producer uses chains packets of at most this many.
///
/// ```
/// use sigretire_queue::MAX_DEPENDENCIES_PER_PACKET;
/// # let platform = sigretire_queue::sim::SimPlatform::stepped();
/// # let device = platform.device(Default::default(), Default::default())?;
/// # let producer = platform.create_queue(&device, Default::default())?;
/// let events: Vec<_> = (0..=MAX_DEPENDENCIES_PER_PACKET)
///     .map(|_| producer.record_event())
///     .collect::<Result<_, _>>()?;
/// let refs: Vec<_> = events.iter().collect();
/// let wait = device.default_queue().wait_events(&refs)?;
/// assert_eq!(wait.packets(), 2); // one more than fits in a packet: a second one
/// # Ok::<(), sigretire_queue::Error>(())
/// ```
pub const MAX_DEPENDENCIES_PER_PACKET: usize = 5;

/// What a cross-queue wait emitted.
///
/// ```
/// # let platform = sigretire_queue::sim::SimPlatform::stepped();
/// # let device = platform.device(Default::default(), Default::default())?;
/// # let other = platform.create_queue(&device, Default::default())?;
/// let event = other.record_event()?;
/// let wait = device.default_queue().wait_event(&event)?;
/// assert_eq!((wait.packets(), wait.dependencies(), wait.elided()), (1, 1, 0));
/// # Ok::<(), sigretire_queue::Error>(())
/// ```
pub struct CrossWait<M: SignalMemory> {
    commands: Vec<Command<M>>,
    dependencies: usize,
    elided: usize,
}

impl<M: SignalMemory> CrossWait<M> {
    /// Barrier-AND packets published on the consumer queue.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let event = device.default_queue().record_event()?;
    /// platform.sim().run_until_idle();
    /// event.synchronize()?; // known complete: nothing to wait for
    /// assert_eq!(device.default_queue().wait_event(&event)?.packets(), 0);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn packets(&self) -> usize {
        self.commands.len()
    }

    /// Producer signals the packets wait on (pinned).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// # let other = platform.create_queue(&device, Default::default())?;
    /// let events: Vec<_> = (0..7).map(|_| other.record_event()).collect::<Result<_, _>>()?;
    /// let refs: Vec<_> = events.iter().collect();
    /// let wait = device.default_queue().wait_events(&refs)?;
    /// assert_eq!((wait.packets(), wait.dependencies()), (2, 7)); // 5 + 2, chained
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn dependencies(&self) -> usize {
        self.dependencies
    }

    /// Producer uses that needed no dependency (already known complete),
    /// and events never recorded (nothing to wait for).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let wait = device.default_queue().wait_events::<sigretire_queue::sim::SimTracker>(&[])?;
    /// assert_eq!(wait.elided(), 0);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn elided(&self) -> usize {
        self.elided
    }

    /// The barrier-AND packets, as commands of the consumer queue.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// # let other = platform.create_queue(&device, Default::default())?;
    /// let event = other.record_event()?;
    /// let wait = device.default_queue().wait_event(&event)?;
    /// assert_eq!(wait.commands()[0].status(), sigretire_queue::CommandStatus::Pending);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn commands(&self) -> &[Command<M>] {
        &self.commands
    }
}

impl<M: SignalMemory> core::fmt::Debug for CrossWait<M> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CrossWait")
            .field("packets", &self.commands.len())
            .field("dependencies", &self.dependencies)
            .field("elided", &self.elided)
            .finish()
    }
}

impl<M: SignalMemory> CrossWait<M> {
    /// What a wait emitted: its packets as commands, the dependencies
    /// they carry, the producer uses that needed none.
    pub(crate) fn new(commands: Vec<Command<M>>, dependencies: usize, elided: usize) -> Self {
        Self {
            commands,
            dependencies,
            elided,
        }
    }
}

/// Pins `ticket`'s use on `producer` (under its lock, briefly). `None`: the
/// use is already known complete.
pub(crate) fn pin_on<P: QueueTracker>(
    producer: &Submission<P>,
    ticket: &Ticket,
) -> Result<Option<Pin<P::Memory>>, Fault> {
    let pinned = producer.lock().tracker().pin(ticket);
    match pinned {
        Ok(pin) => Ok(pin),
        Err(sigretire_tracker::PinError::Failed { .. }) => {
            Err(producer.report_failure(ticket).into())
        }
        Err(error) => Err(error.into()),
    }
}

/// Pins every event of `events` a queue of `consumer` memory must wait
/// for; counts those already known complete (no dependency). Refused
/// before anything is pinned where a producer's signals live in memory the
/// consumer cannot read: a packet waiting on them would never pass.
pub(crate) fn pin_events<P, M>(
    events: &[&Event<P>],
    consumer: &M,
) -> Result<(VecDeque<Pin<M>>, usize), WaitEventError>
where
    P: QueueTracker + Tracker<Memory = M>,
    M: SignalMemory,
{
    // An event never recorded has no signals: nothing to wait for.
    if events.iter().any(|event| {
        event
            .submission()
            .is_some_and(|producer| !producer.memory().shares_signals_with(consumer))
    }) {
        return Err(WaitEventError::ForeignSignalMemory);
    }
    let mut pins = VecDeque::with_capacity(events.len());
    let mut elided = 0;
    for event in events {
        // Known complete without a load or a lock (or never recorded): no
        // dependency. The recording the event holds now is the one pinned:
        // recording it again later leaves this pin alone.
        let (Some(producer), Some(ticket)) = (event.submission(), event.ticket()) else {
            elided += 1;
            continue;
        };
        if event.known_status() == Some(Status::Complete) {
            elided += 1;
            continue;
        }
        match pin_on(producer, &ticket)? {
            Some(pin) => pins.push_back(pin),
            None => elided += 1,
        }
    }
    Ok((pins, elided))
}

/// Under the producer's lock: the use a consumer waits on to wait for
/// everything submitted to the producer so far (its newest command where a
/// marker would complete with it, else a marker), pinned; `None` where
/// nothing is left to wait for (the frontier's verdict, with no load).
pub(crate) fn pin_producer<P: QueueTracker>(
    producer: &Submission<P>,
    held: &mut Held<'_, P>,
) -> Result<Step<Option<Pin<P::Memory>>>, Fault> {
    if let Verdict::Idle | Verdict::Done(_) = held.publisher().verdict_known()? {
        return Ok(Step::Done(None));
    }
    let ticket = if let Some(newest) = held.share_newest(false)? {
        // A marker after the newest command would complete with it.
        bump(&producer.stats().shared_completions);
        newest.ticket
    } else {
        let packet = Packet::new(Work::Marker, Purpose::GpuWaiter);
        let published = match held.publish(packet)?.or_retry() {
            Ok(published) => published,
            Err(retry) => return Ok(retry),
        };
        let ticket = published.entry.ticket;
        held.push(published.entry, true);
        ticket
    };
    match held.tracker().pin(&ticket) {
        Ok(pin) => Ok(Step::Done(pin)),
        Err(sigretire_tracker::PinError::Failed { .. }) => {
            Err(producer.report_failure(&ticket).into())
        }
        Err(error) => Err(error.into()),
    }
}

/// Under the consumer's lock: publishes the chained barrier-AND packets for
/// `pins` (those left of them, after an earlier attempt had to wait) and
/// attaches each pin to the packet that waits on it; the packets' entries
/// go to `entries`.
pub(crate) fn publish_waits<T: QueueTracker>(
    consumer: &Submission<T>,
    held: &mut Held<'_, T>,
    pins: &mut VecDeque<Pin<T::Memory>>,
    entries: &mut Vec<Entry>,
) -> Result<Step<()>, Fault> {
    let stats = consumer.stats();
    while !pins.is_empty() {
        let count = pins.len().min(MAX_DEPENDENCIES_PER_PACKET);
        let mut handles = [0u64; MAX_DEPENDENCIES_PER_PACKET];
        for (handle, pin) in handles.iter_mut().zip(pins.iter()) {
            *handle = pin.packet_handle();
        }
        // Each is a command of the consumer queue (`CrossWait::commands`).
        let packet = Packet::new(Work::Wait(&handles[..count]), Purpose::Completion).command();
        let published = match held.publish(packet)?.or_retry() {
            Ok(published) => published,
            Err(retry) => return Ok(retry),
        };
        let consumer_use = published.entry.ticket;
        let mut refused = None;
        for pin in pins.drain(..count) {
            // Released when the consumer use retires. The packet is out: a
            // pin the tracker refuses must outlive it all the same.
            if refused.is_some() {
                held.publisher().keep_unattached(pin);
            } else if let Err(error) = held.publisher().attach(&consumer_use, pin) {
                refused = Some(error);
            }
        }
        if let Some(error) = refused {
            return Err(error);
        }
        bump(&stats.wait_packets);
        add(&stats.dependencies, count as u64);
        held.push(published.entry.clone(), true);
        entries.push(published.entry);
    }
    Ok(Step::Done(()))
}
