//! A CUDA stream: owned (created non-blocking, drained for a bounded time
//! and destroyed on drop) or adopted from a runtime (never destroyed here:
//! its drop leaves a drain fence with the context instead, `drain.rs`), with
//! the three things the queue enqueues on it: kernel launches, batches of
//! memory operations, and nothing else.
//!
//! Every method expects the stream's context to be bound to the calling
//! thread (the queue binds it once per call); a wrong binding is a driver
//! error, never undefined behaviour.

use crate::context::CudaContext;
use crate::drain::DRAIN_TIMEOUT;
use crate::error::{Error, Result, check};
use crate::kernel::KernelLaunch;
use crate::ops::MAX_OPS_PER_CALL;
use core::ffi::c_void;
use core::fmt;
use cudarc::driver::sys::{
    self, CUfunction, CUstream, CUstreamBatchMemOpParams, CUstreamCaptureStatus,
};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most arguments a kernel launched here takes: a registered kernel's block
/// address and its own arguments.
const MAX_KERNEL_ARGS: usize = 1 + KernelLaunch::MAX_ARGS;

pub(crate) struct Stream {
    raw: CUstream,
    context: Arc<CudaContext>,
    ownership: Ownership,
}

/// Whose the stream is.
enum Ownership {
    /// Made by [`Stream::new`]: drained and destroyed on drop.
    Owned,
    /// The runtime's ([`Stream::adopt`]): never destroyed here. `keeper` is
    /// whatever the runtime gave to keep the stream alive; it is dropped
    /// once the drain fence is recorded. Behind a lock only so that the
    /// stream stays `Sync` for a keeper that is merely `Send`: nothing reads
    /// it, and only `drop` takes it.
    Adopted {
        keeper: Mutex<Option<Box<dyn Send>>>,
    },
}

/// The handles that name one of CUDA's default streams: the null stream,
/// `CU_STREAM_LEGACY` and `CU_STREAM_PER_THREAD` (`cuda.h` defines the last
/// two as `((CUstream)0x1)` and `((CUstream)0x2)`; cudarc's bindings do not
/// carry them).
const DEFAULT_STREAM_HANDLES: [usize; 3] = [0, 1, 2];

// SAFETY: a stream handle may be used from any thread on which its context
// is current; the driver serialises what is enqueued on it.
unsafe impl Send for Stream {}
// SAFETY: as for `Send`; the queue orders its own enqueues under a lock.
unsafe impl Sync for Stream {}

impl Stream {
    /// A new non-blocking stream (it does not synchronise with the legacy
    /// default stream).
    pub(crate) fn new(context: &Arc<CudaContext>) -> Result<Self> {
        context.bind()?;
        let mut raw = core::ptr::null_mut();
        // SAFETY: the context is bound; `raw` is a live local.
        check("cuStreamCreate", unsafe {
            sys::cuStreamCreate(&mut raw, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
        })?;
        Ok(Self {
            raw,
            context: context.clone(),
            ownership: Ownership::Owned,
        })
    }

    /// Takes over the runtime's `raw` stream, after checking that it is no
    /// default stream, belongs to `context` and is not being captured.
    /// `keeper` is dropped once the stream is done with (see [`Ownership`]).
    ///
    /// # Safety
    /// `raw` is null, a default-stream handle, or a live stream, and stays
    /// live until this `Stream` is dropped.
    pub(crate) unsafe fn adopt(
        context: &Arc<CudaContext>,
        raw: CUstream,
        keeper: Option<Box<dyn Send>>,
    ) -> Result<Self> {
        let handle = raw as usize;
        if DEFAULT_STREAM_HANDLES.contains(&handle) {
            return Err(Error::DefaultStream { handle });
        }
        context.bind()?;
        let mut owner = core::ptr::null_mut();
        // SAFETY: `raw` is a live stream (caller) and no default handle
        // (checked above); `owner` is a live local.
        check("cuStreamGetCtx", unsafe {
            sys::cuStreamGetCtx(raw, &mut owner)
        })?;
        if owner != context.as_raw() {
            return Err(Error::ForeignStream {
                stream_context: owner as usize,
                context: context.as_raw() as usize,
            });
        }
        // Asked before the `Stream` exists: its drop would record a drain
        // fence, which a capture would take into the runtime's graph.
        // SAFETY: as above; the context is bound.
        unsafe { refuse_capture(raw) }?;
        Ok(Self {
            raw,
            context: context.clone(),
            ownership: Ownership::Adopted {
                keeper: Mutex::new(keeper),
            },
        })
    }

    /// Whether the stream is the runtime's rather than the queue's own.
    pub(crate) fn is_adopted(&self) -> bool {
        matches!(self.ownership, Ownership::Adopted { .. })
    }

    /// [`Error::StreamCapturing`] while an adopted stream is being captured
    /// into a graph: what the queue would enqueue would be captured rather
    /// than run. Owned streams are not asked (one driver call saved per
    /// publication): they are the queue's, and nothing in this crate
    /// captures them.
    pub(crate) fn refuse_capture(&self) -> Result<()> {
        if !self.is_adopted() {
            return Ok(());
        }
        // SAFETY: the stream is alive (adopted: the caller of `adopt`
        // promised so) and its context bound (this type's rule).
        unsafe { refuse_capture(self.raw) }
    }

    /// The raw stream, for native CUDA calls (events) on it.
    pub(crate) fn raw(&self) -> CUstream {
        self.raw
    }

    /// Enqueues the empty kernel (`function`, the context's own) on one
    /// thread with its three arguments.
    pub(crate) fn launch_empty(&self, function: CUfunction, args: &[u64; 3]) -> Result<()> {
        // SAFETY: `function` is `sigpool_empty` of the bound context's
        // module, which declares exactly three 64-bit parameters (kernel.rs).
        unsafe { self.launch(function, [1; 3], [1; 3], 0, args) }
    }

    /// Enqueues `kernel`, a registered launch, with `block` (a signal
    /// block's device address, or 0) as its first argument.
    ///
    /// # Safety
    /// `kernel` was registered on this stream's context, whose
    /// registration contract (`CudaContext::register_kernel`) promises a
    /// function of a module still loaded in it that takes the block's
    /// address and then exactly `kernel.args()` 64-bit parameters.
    pub(crate) unsafe fn launch_registered(&self, kernel: &KernelLaunch, block: u64) -> Result<()> {
        let mut args = [0u64; MAX_KERNEL_ARGS];
        args[0] = block;
        args[1..=kernel.args().len()].copy_from_slice(kernel.args());
        // SAFETY: the caller's contract, passed on.
        unsafe {
            self.launch(
                kernel.function(),
                kernel.grid_dim(),
                kernel.block_dim(),
                kernel.shared_memory(),
                &args[..=kernel.args().len()],
            )
        }
    }

    /// Enqueues `function` on `grid` blocks of `block` threads with `args`
    /// (each a 64-bit value: addresses and counts).
    ///
    /// # Safety
    /// `function` is a kernel of a module loaded in the bound context that
    /// declares exactly `args.len()` parameters, each 64 bits.
    unsafe fn launch(
        &self,
        function: CUfunction,
        grid: [u32; 3],
        block: [u32; 3],
        shared_memory_bytes: u32,
        args: &[u64],
    ) -> Result<()> {
        assert!(
            args.len() <= MAX_KERNEL_ARGS,
            "kernels take at most {MAX_KERNEL_ARGS} arguments here"
        );
        let mut values = [0u64; MAX_KERNEL_ARGS];
        values[..args.len()].copy_from_slice(args);
        let mut pointers = [core::ptr::null_mut::<c_void>(); MAX_KERNEL_ARGS];
        for (pointer, value) in pointers.iter_mut().zip(values.iter_mut()) {
            *pointer = (value as *mut u64).cast();
        }
        // SAFETY: `function` belongs to a module loaded in the bound context
        // and declares exactly `args.len()` 64-bit parameters (the caller's
        // contract); the driver reads one pointer per parameter during the
        // call, while `values` lives, and no more than `args.len()` of them.
        check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                function,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                shared_memory_bytes,
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

/// [`Error::StreamCapturing`] while `raw` is being captured into a graph.
///
/// # Safety
/// `raw` is a live stream, or a default-stream handle, of the bound context.
unsafe fn refuse_capture(raw: CUstream) -> Result<()> {
    let mut status = CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: the caller's contract; `status` is a live local.
    check("cuStreamIsCapturing", unsafe {
        sys::cuStreamIsCapturing(raw, &mut status)
    })?;
    match status {
        CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE => Ok(()),
        _ => Err(Error::StreamCapturing),
    }
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("raw", &self.raw)
            .field("adopted", &self.is_adopted())
            .finish_non_exhaustive()
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let bound = self.context.bind().is_ok();
        match &self.ownership {
            Ownership::Owned => {
                if !bound {
                    self.context.note_undrained();
                    return;
                }
                if !self.drain(DRAIN_TIMEOUT) {
                    self.context.note_undrained();
                }
                // SAFETY: the stream is ours and destroyed once; work still
                // pending on it completes before the driver releases it.
                unsafe { sys::cuStreamDestroy_v2(self.raw) };
            }
            Ownership::Adopted { keeper } => {
                // Never destroyed, and no wait here for the runtime's work:
                // a fence behind the library's last operation goes to the
                // context, which waits for it before freeing what that
                // operation writes (`drain.rs`). A stream being captured
                // would take the fence into the graph, where it proves
                // nothing: then the memory is kept instead.
                let fenced = bound
                    && self.refuse_capture().is_ok()
                    // SAFETY: the context is bound, and the stream is still
                    // live: its keeper (or the runtime, under
                    // `adopt_stream`'s contract) keeps it so until this
                    // drop is done.
                    && unsafe { self.context.fence_drain(self.raw) }.is_ok();
                if !fenced {
                    self.context.note_undrained();
                }
                // The keeper may destroy the stream: only once the fence is
                // recorded, and while this context is still held and bound.
                drop(keeper.lock().take());
            }
        }
    }
}
