//! A queue's wake signals: the few signals a sleeping wait has the GPU
//! complete to wake it (see `sleep`).
//!
//! A queue makes them when it is created ([`QueueConfig::wake_signals`](crate::QueueConfig::wake_signals))
//! and never more, so no interrupt signal is created on the hot path (they
//! are a per-process budget: KFD's 4094 events). Each serves one wait at a
//! time: it is lent with the pin of the use its packet waits on, and is
//! free again only once that packet completed (the packet reads the use's
//! signal until then) *and* its sleeper let go of it (a sleeper woken by
//! the packet reads the signal after it completed: re-armed before that,
//! it would sleep on).

use crate::sync::{Arc, AtomicBool, Ordering};
use sigretire_tracker::{Pin, SignalMemory};

/// A wake signal lent to a sleeping thread, its packet published. The
/// signal is the thread's until this is dropped: the pool lends it again
/// only then (and once its packet completed), so that a wait starting in
/// between can never re-arm it under a sleeper that has not yet read it.
pub(crate) struct Armed<M: SignalMemory> {
    pub(crate) wake: M::Signal,
    /// Later work was published between the use and the wake packet.
    pub(crate) behind: bool,
    _lease: Lease,
}

/// A slot's "a sleeper holds it" flag, set while lent; cleared when the
/// [`Armed`] holding it is dropped, with no lock.
struct Lease(Arc<AtomicBool>);

impl Drop for Lease {
    fn drop(&mut self) {
        // Release: the sleeper's reads of the signal happen before the
        // pool (under the lock, acquire) re-arms it.
        self.0.store(false, Ordering::Release);
    }
}

/// One wake signal and the use its packet waits on, while it may.
struct Slot<M: SignalMemory> {
    signal: M::Signal,
    waits_on: Option<Pin<M>>,
    /// A sleeper holds the signal (see [`Armed`]).
    lent: Arc<AtomicBool>,
}

impl<M: SignalMemory> Slot<M> {
    /// Whether the slot may be lent: no sleeper holds it, and its packet
    /// (if any) completed, so nothing reads the signal or the old use's.
    fn is_free(&self, memory: &M) -> bool {
        !self.lent.load(Ordering::Acquire)
            && (self.waits_on.is_none()
                // SAFETY: the signal came from this memory's
                // `create_wake_signal`, and the memory outlives the pool.
                || unsafe { memory.load(self.signal) } < 1)
    }
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
                    lent: Arc::new(AtomicBool::new(false)),
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
    /// `pin`'s use; `Err(pin)` when none is free (a sleeper holds it, or its
    /// packet has not completed: one host load of such a slot's signal).
    /// The caller publishes the packet, then hands the signal to the
    /// sleeper with [`WakePool::armed`], or takes it back with
    /// [`WakePool::give_back`].
    pub(crate) fn lend(&mut self, memory: &M, pin: Pin<M>) -> Result<M::Signal, Pin<M>> {
        let Some(slot) = self.slots.iter_mut().find(|slot| slot.is_free(memory)) else {
            return Err(pin);
        };
        // Its packet completed (or never existed) and no sleeper holds it:
        // nothing reads the signal or the old use's any more. The store is
        // to host memory, seen by the packet processor before the packet
        // that completes it is published (a release store of its header).
        // SAFETY: as in `Slot::is_free`.
        unsafe { memory.store(slot.signal, 1) };
        slot.waits_on = Some(pin);
        slot.lent.store(true, Ordering::Relaxed);
        Ok(slot.signal)
    }

    /// The lent `signal`, its packet published, for the sleeper to hold.
    pub(crate) fn armed(&self, signal: M::Signal, behind: bool) -> Armed<M> {
        let slot = self
            .slots
            .iter()
            .find(|slot| slot.signal == signal)
            .expect("a signal this pool lent");
        Armed {
            wake: signal,
            behind,
            _lease: Lease(slot.lent.clone()),
        }
    }

    /// Lets go of the pins of every slot whose packet completed (or
    /// failed): the uses they waited on may be re-armed again. One host
    /// load per slot waiting. Returns whether a packet is still waiting.
    pub(crate) fn release_done(&mut self, memory: &M) -> bool {
        let mut still_waiting = false;
        for slot in &mut self.slots {
            // SAFETY: as in `Slot::is_free`.
            if slot.waits_on.is_some() && unsafe { memory.load(slot.signal) } < 1 {
                slot.waits_on = None;
            }
            still_waiting |= slot.waits_on.is_some();
        }
        still_waiting
    }

    /// Takes back a lent signal whose packet was never published.
    pub(crate) fn give_back(&mut self, signal: M::Signal) -> Option<Pin<M>> {
        let slot = self.slots.iter_mut().find(|slot| slot.signal == signal)?;
        slot.lent.store(false, Ordering::Release);
        slot.waits_on.take()
    }
}
