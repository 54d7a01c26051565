//! A CUDA stream, owned: created non-blocking, drained (for a bounded time)
//! and destroyed on drop, with the three things the queue enqueues on it:
//! kernel launches, batches of memory operations, and nothing else.
//!
//! Every method expects the stream's context to be bound to the calling
//! thread (the queue binds it once per call); a wrong binding is a driver
//! error, never undefined behaviour.

use crate::context::CudaContext;
use crate::error::{Result, check};
use crate::ops::MAX_OPS_PER_CALL;
use core::ffi::c_void;
use cudarc::driver::sys::{self, CUfunction, CUstream, CUstreamBatchMemOpParams};
use std::time::{Duration, Instant};

/// How long dropping a stream waits for its work before giving up on it. A
/// stream still blocked after this (a `cuStreamWaitValue64` nobody satisfies)
/// is destroyed anyway, and the context then keeps its pinned memory rather
/// than free memory the stream may still write.
pub(crate) const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Most arguments a signal kernel takes.
const MAX_KERNEL_ARGS: usize = 4;

#[derive(Debug)]
pub(crate) struct Stream {
    raw: CUstream,
    context: CudaContext,
}

// SAFETY: a stream handle may be used from any thread on which its context
// is current; the driver serialises what is enqueued on it.
unsafe impl Send for Stream {}
// SAFETY: as for `Send`; the queue orders its own enqueues under a lock.
unsafe impl Sync for Stream {}

impl Stream {
    /// A new non-blocking stream (it does not synchronise with the legacy
    /// default stream).
    pub(crate) fn new(context: &CudaContext) -> Result<Self> {
        context.bind()?;
        let mut raw = core::ptr::null_mut();
        // SAFETY: the context is bound; `raw` is a live local.
        check("cuStreamCreate", unsafe {
            sys::cuStreamCreate(&mut raw, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
        })?;
        Ok(Self {
            raw,
            context: context.clone(),
        })
    }

    /// The raw stream, for native CUDA calls (events) on it.
    pub(crate) fn raw(&self) -> CUstream {
        self.raw
    }

    /// Enqueues `function` on one block of `threads` threads with `args`
    /// (each a 64-bit value: addresses and counts).
    pub(crate) fn launch(&self, function: CUfunction, threads: u32, args: &[u64]) -> Result<()> {
        assert!(
            args.len() <= MAX_KERNEL_ARGS,
            "signal kernels take at most 4 arguments"
        );
        let mut values = [0u64; MAX_KERNEL_ARGS];
        values[..args.len()].copy_from_slice(args);
        let mut pointers = [core::ptr::null_mut::<c_void>(); MAX_KERNEL_ARGS];
        for (pointer, value) in pointers.iter_mut().zip(values.iter_mut()) {
            *pointer = (value as *mut u64).cast();
        }
        // SAFETY: `function` belongs to the bound context's module; the
        // driver reads one pointer per kernel parameter (each kernel declares
        // exactly `args.len()` 64-bit parameters, and the PTX was checked at
        // load) during the call, while `values` lives.
        check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                function,
                1,
                1,
                1,
                threads,
                1,
                1,
                0,
                self.raw,
                pointers.as_mut_ptr(),
                core::ptr::null_mut(),
            )
        })
    }

    /// Enqueues memory operations, at most [`MAX_OPS_PER_CALL`] per call.
    pub(crate) fn memops(&self, ops: &mut [CUstreamBatchMemOpParams]) -> Result<()> {
        for chunk in ops.chunks_mut(MAX_OPS_PER_CALL) {
            // SAFETY: the array holds `chunk.len()` initialised operations
            // whose addresses are pinned, device-mapped words of this
            // context's arena (or of the same device's other contexts, which
            // `PORTABLE` allows); flags must be 0.
            check("cuStreamBatchMemOp_v2", unsafe {
                sys::cuStreamBatchMemOp_v2(self.raw, chunk.len() as u32, chunk.as_mut_ptr(), 0)
            })?;
        }
        Ok(())
    }

    /// Whether everything enqueued so far has finished (`cuStreamQuery`).
    pub(crate) fn is_idle(&self) -> Result<bool> {
        // SAFETY: the stream is alive and its context bound.
        match unsafe { sys::cuStreamQuery(self.raw) } {
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            code => check("cuStreamQuery", code).map(|()| true),
        }
    }

    /// Blocks until everything enqueued so far has finished.
    pub(crate) fn synchronize(&self) -> Result<()> {
        // SAFETY: the stream is alive and its context bound.
        check("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(self.raw)
        })
    }

    /// Polls until idle, an error, or `timeout`. True if idle (or failed:
    /// then nothing more will run on it either).
    fn drain(&self, timeout: Duration) -> bool {
        let start = Instant::now();
        loop {
            match self.is_idle() {
                Ok(true) | Err(_) => return true,
                Ok(false) if start.elapsed() >= timeout => return false,
                Ok(false) => std::thread::sleep(Duration::from_micros(100)),
            }
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.context.bind().is_err() {
            self.context.note_undrained();
            return;
        }
        if !self.drain(DRAIN_TIMEOUT) {
            self.context.note_undrained();
        }
        // SAFETY: the stream is ours and destroyed once; work still pending
        // on it completes before the driver releases it.
        unsafe { sys::cuStreamDestroy_v2(self.raw) };
    }
}
