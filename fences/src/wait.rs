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

use crate::batch::Command;
use crate::error::Error;
use crate::event::Event;
use crate::publish::QueueTracker;
use crate::publish::{Packet, Step};
use crate::queue::{HostQueue, QueueCore};
use crate::stats::{add, bump};
use crate::sync::Arc;
use sigretire_tracker::{Pin, Purpose, SignalMemory, Status, Ticket, Tracker, Work};
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

    /// Producer uses that needed no dependency (already known complete).
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

/// Pins `ticket`'s use on `producer` (under its lock, briefly). `None`: the
/// use is already known complete.
fn pin_on<P: QueueTracker>(
    producer: &QueueCore<P>,
    ticket: &Ticket,
) -> Result<Option<Pin<P::Memory>>, Error> {
    let pinned = producer.lock().tracker.pin(ticket);
    match pinned {
        Ok(pin) => Ok(pin),
        Err(sigretire_tracker::PinError::Failed { .. }) => Err(producer.report_failure(ticket)),
        Err(error) => Err(error.into()),
    }
}

impl<T: QueueTracker> HostQueue<T> {
    /// Makes this queue wait, on the GPU, for `event` (recorded on any queue
    /// of the same signal memory): `hipStreamWaitEvent`. Emits nothing when
    /// the event is already known complete.
    ///
    /// ```
    /// use sigretire_queue::CommandStatus;
    /// use sigretire_queue::sim::SimPlatform;
    ///
    /// let platform = SimPlatform::stepped();
    /// let device = platform.device(Default::default(), Default::default())?;
    /// let producer = platform.create_queue(&device, Default::default())?;
    /// let consumer = device.default_queue();
    /// let flag = sigretire_queue::sim::HostFlag::new();
    /// let spin = platform.sim().register_kernel(sigretire_queue::sim::Kernel::SpinUntil(flag.clone()));
    /// producer.launch(spin)?;
    /// let event = producer.record_event()?;
    /// consumer.wait_event(&event)?;
    /// let after = consumer.launch(0)?;
    /// platform.sim().run_until_idle();
    /// assert_eq!(after.status(), CommandStatus::Pending); // waits for the producer
    /// flag.set();
    /// platform.sim().run_until_idle();
    /// assert_eq!(after.status(), CommandStatus::Complete);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn wait_event<P>(&self, event: &Event<P>) -> Result<CrossWait<T::Memory>, Error>
    where
        P: QueueTracker + Tracker<Memory = T::Memory>,
    {
        self.wait_events(&[event])
    }

    /// Makes this queue wait for every event in `events`, with barrier-AND
    /// packets of at most [`MAX_DEPENDENCIES_PER_PACKET`] dependencies,
    /// chained.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// # let other = platform.create_queue(&device, Default::default())?;
    /// let a = other.record_event()?;
    /// let b = other.record_event()?;
    /// let wait = device.default_queue().wait_events(&[&a, &b])?;
    /// assert_eq!((wait.packets(), wait.dependencies()), (1, 2));
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn wait_events<P>(&self, events: &[&Event<P>]) -> Result<CrossWait<T::Memory>, Error>
    where
        P: QueueTracker + Tracker<Memory = T::Memory>,
    {
        self.core().state().check_accepting()?;
        // Refused before anything is pinned or published: a packet waiting
        // on a signal its queue cannot read would never pass.
        let consumer_memory = self.core().waiter.memory();
        if events.iter().any(|event| {
            !event
                .queue_core()
                .waiter
                .memory()
                .shares_signals_with(consumer_memory)
        }) {
            return Err(Error::ForeignSignalMemory);
        }
        let mut pins = VecDeque::with_capacity(events.len());
        let mut elided = 0;
        for event in events {
            // Known complete without a load or a lock: no dependency.
            if event.known_status() == Some(Status::Complete) {
                elided += 1;
                continue;
            }
            match pin_on(event.queue_core(), &event.ticket())? {
                Some(pin) => pins.push_back(pin),
                None => elided += 1,
            }
        }
        self.wait_pins(pins, elided)
    }

    /// Makes this queue wait for everything submitted to `producer` so far:
    /// a marker on the producer ([`Purpose::GpuWaiter`]) whose signal this
    /// queue waits on, pinned; or the producer's newest command itself
    /// where a marker would complete with it (a queue that runs only what
    /// it publishes). Emits nothing when the producer's newest command is
    /// already known complete.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// # let producer = platform.create_queue(&device, Default::default())?;
    /// producer.launch(0)?;
    /// let wait = device.default_queue().wait_queue(&producer)?;
    /// assert_eq!((wait.packets(), wait.dependencies()), (1, 1));
    /// // The waiting packet waits for the launch's own signal: no marker.
    /// assert_eq!((producer.stats().markers, producer.stats().shared_completions), (0, 1));
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn wait_queue<P>(&self, producer: &HostQueue<P>) -> Result<CrossWait<T::Memory>, Error>
    where
        P: QueueTracker + Tracker<Memory = T::Memory>,
    {
        let producer = producer.core();
        if !producer
            .waiter
            .memory()
            .shares_signals_with(self.core().waiter.memory())
        {
            return Err(Error::ForeignSignalMemory);
        }
        let pin = QueueCore::with_publication(producer, |core, inner| {
            if inner.frontier.newest().is_none()
                && inner.order_debt.is_none()
                && inner.frontier.idle_since_creation(inner.tracker.queue())
            {
                return Ok(Step::Done(None));
            }
            // Done, and standing for the producer's hardware queue: nothing
            // to wait for (no load: only what the tracker knows).
            if let Some(newest) = inner.standing()?
                && inner.tracker.known_status(&newest.ticket)? == Some(Status::Complete)
            {
                return Ok(Step::Done(None));
            }
            let ticket = if let Some(newest) = inner.newest_to_share(false)? {
                // A marker after the newest command would complete with it.
                bump(&core.stats.shared_completions);
                newest.ticket
            } else {
                let published = match inner
                    .publish(&core.stats, Packet::new(Work::Marker, Purpose::GpuWaiter))?
                    .or_retry()
                {
                    Ok(published) => published,
                    Err(retry) => return Ok(retry),
                };
                let ticket = published.entry.ticket;
                core.push_command(inner, published.entry, true);
                ticket
            };
            match inner.tracker.pin(&ticket) {
                Ok(pin) => Ok(Step::Done(pin)),
                Err(sigretire_tracker::PinError::Failed { .. }) => {
                    Err(core.report_failure(&ticket))
                }
                Err(error) => Err(error.into()),
            }
        })?;
        let (pins, elided) = match pin {
            Some(pin) => (VecDeque::from([pin]), 0),
            None => (VecDeque::new(), 1),
        };
        self.wait_pins(pins, elided)
    }

    /// Publishes the chained barrier-AND packets for `pins` and attaches
    /// each pin to the packet that waits on it.
    fn wait_pins(
        &self,
        mut pins: VecDeque<Pin<T::Memory>>,
        elided: usize,
    ) -> Result<CrossWait<T::Memory>, Error> {
        let core: &Arc<QueueCore<T>> = self.core();
        add(&core.stats.dependencies_elided, elided as u64);
        let dependencies = pins.len();
        let mut entries = Vec::with_capacity(dependencies.div_ceil(MAX_DEPENDENCIES_PER_PACKET));
        if !pins.is_empty() {
            QueueCore::with_publication(core, |core, inner| {
                while !pins.is_empty() {
                    let count = pins.len().min(MAX_DEPENDENCIES_PER_PACKET);
                    let mut handles = [0u64; MAX_DEPENDENCIES_PER_PACKET];
                    for (handle, pin) in handles.iter_mut().zip(pins.iter()) {
                        *handle = pin.packet_handle();
                    }
                    let published = match inner
                        .publish(
                            &core.stats,
                            Packet::new(Work::Wait(&handles[..count]), Purpose::Completion),
                        )?
                        .or_retry()
                    {
                        Ok(published) => published,
                        Err(retry) => return Ok(retry),
                    };
                    let consumer = published.entry.ticket;
                    let mut refused = None;
                    for pin in pins.drain(..count) {
                        // Released when the consumer use retires. The
                        // packet is out: a pin the tracker refuses must
                        // outlive it all the same.
                        if refused.is_some() {
                            inner.unattached.push(pin);
                        } else if let Err(error) = inner.tracker.attach(&consumer, pin) {
                            inner.unattached.push(error.pin);
                            refused = Some(error.error);
                        }
                    }
                    if let Some(error) = refused {
                        return Err(error.into());
                    }
                    bump(&core.stats.wait_packets);
                    add(&core.stats.dependencies, count as u64);
                    core.push_command(inner, published.entry.clone(), true);
                    entries.push(published.entry);
                }
                Ok(Step::Done(()))
            })?;
        }
        Ok(CrossWait {
            commands: entries
                .into_iter()
                .map(|e| QueueCore::command(core, e))
                .collect(),
            dependencies,
            elided,
        })
    }
}
