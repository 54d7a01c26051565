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
use sigretire_tracker::{Pin, backend::SignalMemory};
use std::time::Duration;

/// A wake signal lent to a sleeping thread, its packet published. The
/// signal is the thread's until this is dropped: the pool lends it again
/// only then (and once its packet completed), so that a wait starting in
/// between can never re-arm it under a sleeper that has not yet read it.
pub(crate) struct Armed<M: SignalMemory> {
    wake: M::Signal,
    /// Later work was published between the use and the wake packet.
    behind: bool,
    _lease: Lease,
}

impl<M: SignalMemory> Armed<M> {
    /// Sleeps, spending no CPU, until the wake packet completes the signal
    /// (it leaves 1) or `timeout` passes; whether it did.
    ///
    /// # Safety
    /// `memory` is the memory of the pool that lent the signal.
    pub(crate) unsafe fn sleep(&self, memory: &M, timeout: Duration) -> bool {
        // SAFETY: a wake signal of `memory` (the caller's guarantee), lent
        // to this sleeper until it drops `self`.
        unsafe { memory.sleep_while(self.wake, 1, timeout) != 1 }
    }

    /// Whether later work runs between the awaited use and the wake packet,
    /// so a wake may come late: the sleeper looks after every sleep.
    pub(crate) fn behind(&self) -> bool {
        self.behind
    }
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

/// One wake signal and what keeps the use its packet waits on (a pin),
/// while the packet may read that use's signal.
struct Slot<M: SignalMemory, P> {
    signal: M::Signal,
    waits_on: Option<P>,
    /// A sleeper holds the signal (see [`Armed`]).
    lent: Arc<AtomicBool>,
}

impl<M: SignalMemory, P> Slot<M, P> {
    /// Whether the slot may be lent: no sleeper holds it, and its packet
    /// (if any) completed, so nothing reads the signal or the old use's.
    fn is_free(&self, memory: &M) -> bool {
        (!self.lent.load(Ordering::Acquire) || planted!(WakeSignalLentUnderItsSleeper))
            && (self.waits_on.is_none()
                // SAFETY: the signal came from this memory's
                // `create_wake_signal`, and the memory outlives the pool.
                || unsafe { memory.load(self.signal) } < 1)
    }
}

/// The wake signals of one queue (under the execution lock); each slot
/// keeps a `P` (the pin of the use its packet waits on) while the packet
/// may run.
pub(crate) struct WakePool<M: SignalMemory, P = Pin<M>> {
    slots: Vec<Slot<M, P>>,
}

impl<M: SignalMemory, P> WakePool<M, P> {
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
    pub(crate) fn lend(&mut self, memory: &M, pin: P) -> Result<M::Signal, P> {
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
    pub(crate) fn give_back(&mut self, signal: M::Signal) -> Option<P> {
        let slot = self.slots.iter_mut().find(|slot| slot.signal == signal)?;
        slot.lent.store(false, Ordering::Release);
        slot.waits_on.take()
    }
}

/// The lease of a wake signal, modelled: a sleeper letting go of its wake
/// signal with no lock, against another wait lending signals under the
/// lock (`RUSTFLAGS="--cfg sigretire_loom" cargo test -p sigretire-queue
/// --release --lib loom`).
#[cfg(all(test, sigretire_loom))]
mod loom_model {
    use super::*;
    use crate::sync::Mutex;
    use sigretire_tracker::{
        Placement, TimestampClock, Timestamps,
        backend::{AllocError, HostMemory},
    };

    /// Host memory whose signals serve as wake signals too.
    struct Memory(HostMemory);

    impl SignalMemory for Memory {
        type Signal = usize;

        fn allocate(
            &self,
            count: usize,
            placement: Placement,
            out: &mut Vec<(usize, Placement)>,
        ) -> Result<(), AllocError> {
            self.0.allocate(count, placement, out)
        }

        unsafe fn load(&self, signal: usize) -> i64 {
            // SAFETY: forwarded caller guarantee.
            unsafe { self.0.load(signal) }
        }

        unsafe fn store(&self, signal: usize, value: i64) {
            // SAFETY: forwarded caller guarantee.
            unsafe { self.0.store(signal, value) }
        }

        fn store_fence(&self) {}

        fn hdp_flush(&self) {}

        unsafe fn timestamps(&self, _: usize) -> Option<Timestamps> {
            None
        }

        fn timestamp_clock(&self) -> TimestampClock {
            TimestampClock::NANOSECONDS
        }

        fn packet_handle(&self, signal: usize) -> u64 {
            self.0.packet_handle(signal)
        }

        fn shares_signals_with(&self, other: &Self) -> bool {
            core::ptr::eq(self, other)
        }

        fn create_wake_signal(&self) -> Result<Option<usize>, AllocError> {
            let mut out = Vec::new();
            self.0.allocate(1, Placement::Host, &mut out)?;
            Ok(out.first().map(|&(signal, _)| signal))
        }
    }

    /// A queue's one wake signal is lent to a sleeper, whose packet the GPU
    /// completes; the sleeper reads the signal, then lets go of it with no
    /// lock, while another wait, under the lock, lets go of finished
    /// packets' pins and lends what is free. The signal is never lent again
    /// (re-armed at 1) before its sleeper let go: the sleeper always reads
    /// its own packet's completion, never a later arming.
    #[test]
    fn a_wake_signal_is_never_lent_again_before_its_sleeper_let_go() {
        loom::model(|| {
            let memory = Arc::new(Memory(HostMemory::new(1)));
            let pool: Arc<Mutex<WakePool<Memory, ()>>> =
                Arc::new(Mutex::new(WakePool::create(&*memory, 1)));
            let armed = {
                let mut pool = pool.lock();
                let signal = pool.lend(&memory, ()).expect("a free wake signal");
                pool.armed(signal, false)
            };
            let signal = armed.wake;
            let read = Arc::new(AtomicBool::new(false));
            let gpu = {
                let memory = memory.clone();
                loom::thread::spawn(move || memory.0.complete(memory.packet_handle(signal)))
            };
            let sleeper = {
                let (memory, read) = (memory.clone(), read.clone());
                loom::thread::spawn(move || {
                    // SAFETY: the pool's signal, of this memory.
                    while unsafe { memory.load(armed.wake) } == 1 {
                        loom::thread::yield_now();
                    }
                    // SAFETY: as above.
                    let seen = unsafe { memory.load(armed.wake) };
                    assert_eq!(seen, 0, "the sleeper read a later arming");
                    read.store(true, Ordering::Release);
                    drop(armed);
                })
            };
            let other = {
                let (memory, pool, read) = (memory.clone(), pool.clone(), read.clone());
                loom::thread::spawn(move || {
                    let mut pool = pool.lock();
                    pool.release_done(&memory);
                    if let Ok(lent) = pool.lend(&memory, ()) {
                        assert!(
                            read.load(Ordering::Acquire),
                            "lent again before its sleeper let go"
                        );
                        let _ = pool.give_back(lent);
                    }
                })
            };
            gpu.join().unwrap();
            sleeper.join().unwrap();
            other.join().unwrap();
        });
    }
}
