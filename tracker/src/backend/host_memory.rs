//! Signals in plain host memory: a complete backend without a GPU, for CPU
//! tests and for the loom models (its atomics come from the crate's `sync`
//! shim, so loom sees every access).

use super::contract::{AllocError, Placement, SignalMemory, TimestampClock, Timestamps};
use crate::sync::{AtomicI64, AtomicUsize, Ordering};

/// A fixed number of host-memory signals. Whoever plays the GPU completes a
/// packet with [`complete`](Self::complete), given the packet's completion
/// handle.
///
/// ```
/// use std::sync::Arc;
/// use sigretire_tracker::backend::{HostMemory, SignalMemory};
/// use sigretire_tracker::Placement;
///
/// let memory = Arc::new(HostMemory::new(2));
/// let mut out = Vec::new();
/// memory.allocate(2, Placement::Device, &mut out).unwrap();
/// assert_eq!(out, [(0, Placement::Host), (1, Placement::Host)]);
/// assert!(memory.allocate(1, Placement::Host, &mut out).is_err());
///
/// // SAFETY: signal 1 came from this memory's `allocate`.
/// unsafe { memory.store(1, 1) };
/// let handle = memory.packet_handle(1);
/// memory.complete(handle);
/// assert_eq!(memory.value(handle), 0);
/// ```
#[derive(Debug)]
pub struct HostMemory {
    values: Box<[AtomicI64]>,
    next: AtomicUsize,
}

impl HostMemory {
    /// `capacity` signals, each 0, none handed out yet.
    pub fn new(capacity: usize) -> Self {
        Self {
            values: (0..capacity).map(|_| AtomicI64::new(0)).collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// What the packet processor does when the packet whose completion
    /// handle is `handle` completes: decrements the signal (a release, as the
    /// GPU's completion is).
    ///
    /// # Panics
    /// If `handle` names no signal of this memory.
    pub fn complete(&self, handle: u64) {
        self.signal(handle).fetch_sub(1, Ordering::Release);
    }

    /// The value of the signal `handle` names, as the GPU reads it.
    ///
    /// # Panics
    /// If `handle` names no signal of this memory.
    pub fn value(&self, handle: u64) -> i64 {
        self.signal(handle).load(Ordering::Acquire)
    }

    fn signal(&self, handle: u64) -> &AtomicI64 {
        // Handle 0 is "no completion signal" in a packet: see `packet_handle`.
        handle
            .checked_sub(1)
            .and_then(|i| self.values.get(i as usize))
            .unwrap_or_else(|| panic!("HostMemory: {handle} is not a signal handle"))
    }
}

impl SignalMemory for HostMemory {
    type Signal = usize;

    /// Every signal lives in host memory, whatever placement is asked for.
    fn allocate(
        &self,
        count: usize,
        _: Placement,
        out: &mut Vec<(usize, Placement)>,
    ) -> Result<(), AllocError> {
        for _ in 0..count {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.values.len() {
                return Err(AllocError::OutOfMemory(format!(
                    "all {} host signals handed out",
                    self.values.len()
                )));
            }
            out.push((i, Placement::Host));
        }
        Ok(())
    }

    unsafe fn load(&self, signal: usize) -> i64 {
        self.values[signal].load(Ordering::Acquire)
    }

    unsafe fn store(&self, signal: usize, value: i64) {
        self.values[signal].store(value, Ordering::Release)
    }

    // Host memory needs neither: stores reach the GPU's view in order.
    fn store_fence(&self) {}

    fn hdp_flush(&self) {}

    /// No packet processor writes stamps into host atomics.
    unsafe fn timestamps(&self, _: usize) -> Option<Timestamps> {
        None
    }

    fn timestamp_clock(&self) -> TimestampClock {
        TimestampClock::NANOSECONDS
    }

    fn packet_handle(&self, signal: usize) -> u64 {
        signal as u64 + 1
    }

    /// A handle means something only to the memory that made it.
    fn shares_signals_with(&self, other: &Self) -> bool {
        core::ptr::eq(self, other)
    }
}
