//! Host flags: a word in pinned, device-mapped host memory that spin
//! kernels poll, and the host sets to release them.

use sigretire_cuda::{CudaContext, CudaMemory, CudaSignal};
use sigretire_tracker::{
    Placement,
    backend::{AllocError, SignalMemory},
};
use std::sync::Arc;

/// What a [`HostFlag`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagState {
    /// Set by no one: spin kernels on it keep spinning.
    Held,
    /// Released by the host (or written by [`launch_flag_writer`](crate::launch_flag_writer)).
    Released,
    /// A spin kernel gave up waiting (its timeout passed) and said so.
    GaveUp,
}

/// A word in pinned host memory that spin kernels poll: the host releases
/// them by setting it.
///
/// The word is the value word of a signal block of the backend's own
/// [`CudaMemory`], which the flag holds: pinned, mapped for the device, and
/// freed only with the context's arena (when the context goes, after its
/// streams drained), so a kernel still polling it when the flag is dropped
/// reads memory that is still there. The host reaches it only through
/// [`SignalMemory`]'s atomic loads and stores, the GPU only through
/// volatile 64-bit loads and stores.
#[derive(Debug)]
pub struct HostFlag {
    memory: CudaMemory,
    signal: CudaSignal,
}

impl HostFlag {
    /// A new flag of `context`, held.
    pub fn new(context: &Arc<CudaContext>) -> Result<Self, AllocError> {
        let memory = CudaMemory::with_batch(context, 1);
        let mut signals = Vec::with_capacity(1);
        memory.allocate(1, Placement::Host, &mut signals)?;
        let flag = Self {
            memory,
            signal: signals[0].0,
        };
        flag.reset();
        Ok(flag)
    }

    fn store(&self, value: i64) {
        // SAFETY: `signal` was allocated from `memory`, which the flag holds.
        unsafe { self.memory.store(self.signal, value) }
    }

    /// Releases every spin kernel on this flag.
    pub fn release(&self) {
        self.store(1);
    }

    /// Holds later spin kernels again.
    pub fn reset(&self) {
        self.store(0);
    }

    /// What the flag says now.
    pub fn state(&self) -> FlagState {
        // SAFETY: `signal` was allocated from `memory`, which the flag holds.
        match unsafe { self.memory.load(self.signal) } {
            0 => FlagState::Held,
            2 => FlagState::GaveUp,
            _ => FlagState::Released,
        }
    }

    /// The flag's address as the GPU sees it (a 64-bit word).
    pub fn device_address(&self) -> u64 {
        self.signal.device_address()
    }

    /// The context whose memory the flag is.
    pub fn context(&self) -> &Arc<CudaContext> {
        self.memory.context()
    }
}
