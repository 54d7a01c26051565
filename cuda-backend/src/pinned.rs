//! Pinned, device-mapped host memory: where signals, progress words and host
//! flags live.
//!
//! Every allocation is page-locked host memory mapped into the device's
//! address space (`cuMemHostAlloc` with `DEVICEMAP | PORTABLE`), so the host
//! reads it with ordinary cached loads (about 30 ns) and the GPU writes it
//! over PCIe with stream memory operations and kernel stores.
//!
//! **Lifetime.** The GPU may write a word long after the host object that
//! named it is gone: a tracker dropped with work in flight still has
//! `cuStreamWriteValue64`s enqueued against its signals. Freeing that memory
//! early would turn a late GPU write into a fault that kills the context. So
//! allocations belong to the context's [`Arena`] and are freed only when the
//! context itself goes, after every stream of it was drained (each queue
//! drains its own stream when dropped, and leaves a fence with the context
//! for a runtime's stream it adopted, which the context waits for; if a
//! stream could not be drained, the arena leaks rather than frees memory a
//! stream may still write).

use crate::error::{Result, check};
use core::ptr::NonNull;
use cudarc::driver::sys;
use parking_lot::Mutex;

/// One pinned, device-mapped allocation: its host and device addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pinned {
    /// Where the host reads and writes it (page-aligned).
    pub(crate) host: NonNull<u8>,
    /// Where the GPU reads and writes it (`cuMemHostGetDevicePointer`).
    pub(crate) device: u64,
    /// Its size.
    pub(crate) bytes: usize,
}

// SAFETY: a `Pinned` is a pair of addresses; it grants no access by itself.
// Everything that dereferences `host` does so through atomics, under the
// contracts of the types built on it (`CudaMemory`, `CudaQueue`).
unsafe impl Send for Pinned {}
// SAFETY: as for `Send`: shared copies of two addresses.
unsafe impl Sync for Pinned {}

/// The flags of every pinned allocation: mapped into the device's address
/// space, and usable from every context (so a signal of one context can be
/// waited on by a stream of another on the same device).
const ALLOC_FLAGS: u32 = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;

/// The context's pinned allocations, freed together when the context goes.
#[derive(Debug, Default)]
pub(crate) struct Arena {
    allocations: Mutex<Vec<Pinned>>,
}

impl Arena {
    /// Allocates `bytes` of zeroed, pinned, device-mapped memory.
    ///
    /// The caller has bound the owning context to this thread.
    pub(crate) fn allocate(&self, bytes: usize) -> Result<Pinned> {
        let bytes = bytes.max(1);
        let mut host = core::ptr::null_mut();
        // SAFETY: the driver is initialised and the context bound (caller);
        // `host` is a live local the driver writes the address into.
        check("cuMemHostAlloc", unsafe {
            sys::cuMemHostAlloc(&mut host, bytes, ALLOC_FLAGS)
        })?;
        let Some(host) = NonNull::new(host.cast::<u8>()) else {
            return Err(crate::Error::Driver {
                call: "cuMemHostAlloc",
                code: sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY,
            });
        };
        let mut device = 0;
        // SAFETY: `host` was just returned by `cuMemHostAlloc` with the
        // device-map flag; flags must be 0.
        let mapped = check("cuMemHostGetDevicePointer_v2", unsafe {
            sys::cuMemHostGetDevicePointer_v2(&mut device, host.as_ptr().cast(), 0)
        });
        if let Err(error) = mapped {
            // SAFETY: `host` came from `cuMemHostAlloc` and nothing else has
            // seen it yet.
            unsafe { sys::cuMemFreeHost(host.as_ptr().cast()) };
            return Err(error);
        }
        // SAFETY: the allocation is `bytes` long and no one else (not even
        // the GPU: nothing names it yet) accesses it.
        unsafe { host.as_ptr().write_bytes(0, bytes) };
        let pinned = Pinned {
            host,
            device,
            bytes,
        };
        self.allocations.lock().push(pinned);
        Ok(pinned)
    }

    /// Bytes allocated so far.
    pub(crate) fn bytes(&self) -> usize {
        self.allocations.lock().iter().map(|p| p.bytes).sum()
    }

    /// Frees every allocation.
    ///
    /// # Safety
    /// The owning context is bound to this thread, no stream may still write
    /// any allocation, and nothing will access one again.
    pub(crate) unsafe fn free_all(&self) {
        for pinned in self.allocations.lock().drain(..) {
            // SAFETY: each came from `cuMemHostAlloc` and is freed once
            // (drained from the list); the caller guarantees no access follows.
            unsafe { sys::cuMemFreeHost(pinned.host.as_ptr().cast()) };
        }
    }
}
