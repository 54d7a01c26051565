//! Teardown order: signal memory is released only when no queue can touch it.
//!
//! A signal pool may be dropped while packets that name its signals are still
//! in a queue: a tracker dropped without draining, a GPU waiter on another
//! queue that never ran. Freeing the memory then would let the packet
//! processor decrement (or a barrier read) freed memory. So the release of a
//! pool's memory waits until every queue of the runtime is destroyed: after
//! `hsa_queue_destroy` returns, that queue's processor writes nothing more.
//! Releasing never waits for the GPU, so teardown never hangs; a queue's own
//! teardown waits for it only within a bounded drain (see `queue.rs`). A
//! queue adopted from the runtime is never destroyed here: it counts as
//! gone once its drain proved the backend's packets finished, or else when
//! the runtime shuts down.

use hsa_sys::{HsaApi, hsa_signal_t};
use parking_lot::Mutex;
use std::ffi::c_void;

/// Memory to give back to ROCr.
#[derive(Debug)]
pub(crate) enum Release {
    /// A block from `hsa_amd_memory_pool_allocate`, by address.
    PoolBlock(usize),
    /// A signal from `hsa_amd_signal_create`.
    Signal(hsa_signal_t),
}

impl Release {
    fn perform(self, api: &HsaApi) {
        // Failures are ignored: there is nobody to report them to during a
        // drop, and ROCr reclaims everything at hsa_shut_down anyway.
        match self {
            Release::PoolBlock(address) => {
                // SAFETY: the address came from hsa_amd_memory_pool_allocate
                // and is freed once (each `Release` is performed once), when
                // no queue is left to touch it.
                let _ = unsafe { api.hsa_amd_memory_pool_free(address as *mut c_void) };
            }
            Release::Signal(signal) => {
                // SAFETY: the signal came from hsa_amd_signal_create and is
                // destroyed once, when no queue is left to touch it.
                let _ = unsafe { api.hsa_signal_destroy(signal) };
            }
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// Queues created and not yet destroyed.
    live_queues: usize,
    /// Releases waiting for the last queue to go.
    deferred: Vec<Release>,
}

/// The runtime's record of live queues and deferred releases.
#[derive(Debug, Default)]
pub(crate) struct Teardown {
    state: Mutex<State>,
}

impl Teardown {
    /// A queue is about to be created.
    pub(crate) fn queue_created(&self) {
        self.state.lock().live_queues += 1;
    }

    /// A queue was destroyed (or its creation failed), or an adopted queue
    /// was let go with none of the backend's packets left to run; the last
    /// one lets the deferred releases go.
    pub(crate) fn queue_gone(&self, api: &HsaApi) {
        let ready = {
            let mut state = self.state.lock();
            state.live_queues -= 1;
            if state.live_queues > 0 {
                return;
            }
            std::mem::take(&mut state.deferred)
        };
        ready.into_iter().for_each(|r| r.perform(api));
    }

    /// Releases `memory` now if no queue exists, else when the last one is
    /// destroyed.
    pub(crate) fn release(&self, api: &HsaApi, memory: Vec<Release>) {
        {
            let mut state = self.state.lock();
            if state.live_queues > 0 {
                state.deferred.extend(memory);
                return;
            }
        }
        memory.into_iter().for_each(|r| r.perform(api));
    }

    /// Performs every deferred release (the runtime is going away, so every
    /// queue is gone).
    pub(crate) fn release_all(&self, api: &HsaApi) {
        let ready = std::mem::take(&mut self.state.lock().deferred);
        ready.into_iter().for_each(|r| r.perform(api));
    }

    /// How many releases wait for queues to go.
    pub(crate) fn deferred(&self) -> usize {
        self.state.lock().deferred.len()
    }
}
