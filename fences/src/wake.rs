//! A queue's wake signals: the few signals a sleeping wait has the GPU
//! complete to wake it (see `sleep`).
//!
//! A queue makes them when it is created ([`QueueConfig::wake_signals`](crate::QueueConfig::wake_signals))
//! and never more, so no interrupt signal is created on the hot path (they
//! are a per-process budget: KFD's 4094 events). Each serves one wait at a
//! time: it is lent with the pin of the use its packet waits on, and is
//! free again only once that packet completed, as the packet reads the
//! use's signal until then.

use sigretire_tracker::{Pin, SignalMemory};

/// A wake signal lent to a sleeping thread, its packet published.
pub(crate) struct Armed<M: SignalMemory> {
    pub(crate) wake: M::Signal,
    /// Later work was published between the use and the wake packet.
    pub(crate) behind: bool,
}

// By hand: a derive would ask `M` itself to be `Copy`.
impl<M: SignalMemory> Clone for Armed<M> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<M: SignalMemory> Copy for Armed<M> {}

/// One wake signal and the use its packet waits on, while it may.
struct Slot<M: SignalMemory> {
    signal: M::Signal,
    waits_on: Option<Pin<M>>,
}

/// The wake signals of one queue (under the execution lock).
pub(crate) struct WakePool<M: SignalMemory> {
    slots: Vec<Slot<M>>,
}

impl<M: SignalMemory> WakePool<M> {
    /// Up to `count` wake signals of `memory`; fewer if it has no more (or
    /// none: then every sleeping wait polls). An allocation failure is no
    /// error: the queue works without them.
    pub(crate) fn create(memory: &M, count: usize) -> Self {
        let mut slots = Vec::with_capacity(count);
        while slots.len() < count {
            match memory.create_wake_signal() {
                Ok(Some(signal)) => slots.push(Slot {
                    signal,
                    waits_on: None,
                }),
                Ok(None) | Err(_) => break,
            }
        }
        Self { slots }
    }

    /// How many wake signals the queue has.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Lends a free wake signal, armed at 1, for a packet waiting on
    /// `pin`'s use; `Err(pin)` when every one is still waited on. A slot is
    /// free once its packet completed (its signal below 1): one host load
    /// of a busy slot's signal.
    pub(crate) fn lend(&mut self, memory: &M, pin: Pin<M>) -> Result<M::Signal, Pin<M>> {
        let free = self.slots.iter().position(|slot| {
            // SAFETY: the signal came from this memory's
            // `create_wake_signal`, and the memory outlives the pool.
            slot.waits_on.is_none() || unsafe { memory.load(slot.signal) } < 1
        });
        let Some(free) = free else {
            return Err(pin);
        };
        let slot = &mut self.slots[free];
        // Its packet completed (or never existed): nothing reads the signal
        // or the old use's any more. The store is to host memory, seen by
        // the packet processor before the packet that completes it is
        // published (a release store of its header).
        // SAFETY: as above.
        unsafe { memory.store(slot.signal, 1) };
        slot.waits_on = Some(pin);
        Ok(slot.signal)
    }

    /// Lets go of the pins of every lent signal whose packet completed (or
    /// failed): the uses they waited on may be re-armed again. One host load
    /// per lent signal. Returns whether any is still lent.
    pub(crate) fn release_done(&mut self, memory: &M) -> bool {
        let mut still_lent = false;
        for slot in &mut self.slots {
            // SAFETY: as in `lend`.
            if slot.waits_on.is_some() && unsafe { memory.load(slot.signal) } < 1 {
                slot.waits_on = None;
            }
            still_lent |= slot.waits_on.is_some();
        }
        still_lent
    }

    /// Takes back a lent signal whose packet was never published.
    pub(crate) fn give_back(&mut self, signal: M::Signal) -> Option<Pin<M>> {
        let slot = self.slots.iter_mut().find(|slot| slot.signal == signal)?;
        slot.waits_on.take()
    }
}
