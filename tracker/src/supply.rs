//! Where new signals come from: batches allocated from the backend, armed
//! and added to the ring's spares.
//!
//! A device-memory batch that comes back (partly) in host memory means the
//! device has none to give: from then on the tracker stops asking for it.

use crate::backend::{AllocError, Placement, SignalMemory};
use crate::ring::{Ring, Spare};
use crate::signals::Signals;
use crate::stats::Stats;

/// Allocation of signal batches.
pub(crate) struct Supply<M: SignalMemory> {
    /// Reused buffer for batch allocations.
    scratch: Vec<(M::Signal, Placement)>,
    /// A device-memory allocation came back in host memory.
    fell_back: bool,
    refill_batch: usize,
}

impl<M: SignalMemory> Supply<M> {
    /// A supply of batches of `refill_batch` signals (and `scratch` room for
    /// the largest batch it will be asked for).
    pub(crate) fn new(refill_batch: usize, scratch: usize) -> Self {
        Self {
            scratch: Vec::with_capacity(scratch),
            fell_back: false,
            refill_batch,
        }
    }

    /// The device has run out of memory for signals: new ones are host
    /// signals, and a slot with a host signal keeps it (the device signals
    /// the tracker still has stay in use where they are).
    #[inline]
    pub(crate) fn fell_back(&self) -> bool {
        self.fell_back
    }

    /// The usual batch size.
    pub(crate) fn refill_batch(&self) -> usize {
        self.refill_batch
    }

    /// Creates `count` signals (placed as the backend could), arms them and
    /// adds them to `ring`'s spares of their actual placement.
    pub(crate) fn allocate(
        &mut self,
        count: usize,
        placement: Placement,
        signals: &mut Signals<M>,
        ring: &mut Ring<M::Signal>,
        stats: &mut Stats,
    ) -> Result<(), AllocError> {
        self.scratch.clear();
        let result = signals
            .shared()
            .memory
            .allocate(count, placement, &mut self.scratch);
        if placement == Placement::Device
            && self.scratch.iter().any(|&(_, actual)| actual != placement)
        {
            self.fell_back = true;
        }
        for (signal, actual) in self.scratch.drain(..) {
            // Out of keys (2^32 adopted): the rest of the batch stays unused.
            let cell = signals.adopt(signal, actual)?;
            stats.signals_created += 1;
            let store = signals.store(&cell, 1);
            ring.put_spare(Spare {
                cell,
                placement: actual,
                store,
            });
        }
        result
    }
}
