//! The empty-work kernel, PTX text loaded through the driver, and the
//! kernels a queue can name with [`Work::Kernel`]: the empty one (handle 0)
//! and a runtime's own, registered as tracked work
//! ([`CudaContext::register_kernel`](crate::CudaContext::register_kernel)).
//!
//! `sigpool_empty(block, progress, value)` is hand-written in PTX (ISA 7.0,
//! `sm_50`, so the driver JIT compiles it for any GPU since Maxwell, and the
//! build needs no CUDA toolkit). It is empty work ([`Work::Empty`]), a real
//! launch: when given a signal block (not 0) it writes `%globaltimer`
//! (nanoseconds) into the block's start and end stamps, so a timed use gets
//! real GPU timestamps, then the completion (0 into the block) and the
//! queue's progress word itself, so a publication of empty work is one
//! launch and no memory operations.
//!
//! A registered kernel ([`KernelLaunch`]) is a function of the caller's own
//! module. Its first parameter is the address of the use's signal block (or
//! 0), so it may write GPU stamps too, at byte offsets
//! [`SignalBlock::START_OFFSET`] and [`SignalBlock::END_OFFSET`] of the
//! block; its other parameters are the ones registered with it. The queue
//! writes the completion and the progress after it, with stream memory
//! operations.

use crate::error::{Error, Result, check};
use crate::signal::SignalBlock;
use core::ffi::{CStr, c_void};
use cudarc::driver::sys::{self, CUfunction, CUjit_option, CUmodule};
use parking_lot::RwLock;
use sigretire_tracker::Work;

/// The empty kernel's PTX. The stamp offsets (`+8`, `+16`) are
/// [`SignalBlock::START_OFFSET`] and [`SignalBlock::END_OFFSET`].
pub(crate) const PTX: &CStr = cr"
.version 7.0
.target sm_50
.address_size 64

// Empty work: stamps the block (when given), then writes what the stream's
// memory operations would write after it: 0 into the block's value (the
// completion), then `progress_value` into the word at `progress` (when
// given). A system-scope fence before each makes the stamps visible before
// the completion, and the completion before the progress, to the host.
.visible .entry sigpool_empty(
    .param .u64 sigpool_empty_block,
    .param .u64 sigpool_empty_progress,
    .param .u64 sigpool_empty_progress_value
)
{
    .reg .pred  %p<3>;
    .reg .b64   %rd<9>;

    ld.param.u64            %rd1, [sigpool_empty_block];
    ld.param.u64            %rd5, [sigpool_empty_progress];
    ld.param.u64            %rd6, [sigpool_empty_progress_value];
    setp.eq.u64             %p1, %rd1, 0;
    @%p1 bra                EMPTY_PROGRESS;
    mov.u64                 %rd2, %globaltimer;
    cvta.to.global.u64      %rd3, %rd1;
    st.volatile.global.u64  [%rd3+8], %rd2;
    mov.u64                 %rd4, %globaltimer;
    st.volatile.global.u64  [%rd3+16], %rd4;
    membar.sys;
    mov.u64                 %rd7, 0;
    st.volatile.global.u64  [%rd3], %rd7;
EMPTY_PROGRESS:
    setp.eq.u64             %p2, %rd5, 0;
    @%p2 bra                EMPTY_DONE;
    membar.sys;
    cvta.to.global.u64      %rd8, %rd5;
    st.volatile.global.u64  [%rd8], %rd6;
EMPTY_DONE:
    ret;
}
";

const _: () = {
    // The PTX above hard-codes these offsets.
    assert!(SignalBlock::START_OFFSET == 8);
    assert!(SignalBlock::END_OFFSET == 16);
};

/// The loaded module and its function.
#[derive(Debug)]
pub(crate) struct Kernels {
    module: CUmodule,
    pub(crate) empty: CUfunction,
}

// SAFETY: module and function handles are driver objects usable from any
// thread on which their context is current (every launch binds it first).
unsafe impl Send for Kernels {}
// SAFETY: as for `Send`; launching the same function from several threads
// at once is allowed by the driver.
unsafe impl Sync for Kernels {}

impl Kernels {
    /// JIT-compiles [`PTX`] (the context is bound to this thread).
    pub(crate) fn load() -> Result<Self> {
        let mut log = vec![0u8; 8192];
        let mut options = [
            CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        // The driver takes option values as pointer-sized words: the buffer's
        // address, then its size.
        let mut values = [log.as_mut_ptr().cast::<c_void>(), log.len() as *mut c_void];
        let mut module = core::ptr::null_mut();
        // SAFETY: the image is a NUL-terminated PTX string; the option arrays
        // have the same length as `numOptions` and outlive the call; the log
        // buffer is as large as we say.
        let code = unsafe {
            sys::cuModuleLoadDataEx(
                &mut module,
                PTX.as_ptr().cast(),
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        if code != sys::CUresult::CUDA_SUCCESS {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            return Err(Error::KernelLoad {
                code,
                log: String::from_utf8_lossy(&log[..end]).trim().to_string(),
            });
        }
        let mut empty = core::ptr::null_mut();
        // SAFETY: `module` was just loaded; the name is NUL-terminated.
        let found = check("cuModuleGetFunction", unsafe {
            sys::cuModuleGetFunction(&mut empty, module, c"sigpool_empty".as_ptr())
        });
        match found {
            Ok(()) => Ok(Self { module, empty }),
            Err(error) => {
                // SAFETY: loaded above, and no function of it escaped.
                unsafe { sys::cuModuleUnload(module) };
                Err(error)
            }
        }
    }

    /// Unloads the module.
    ///
    /// # Safety
    /// The context is bound to this thread and no launch of these kernels
    /// is still pending or will be made.
    pub(crate) unsafe fn unload(&self) {
        // SAFETY: the caller's contract.
        unsafe { sys::cuModuleUnload(self.module) };
    }
}

/// The name of a launch a queue can publish: `Work::Kernel(handle.raw())`,
/// or [`work`](Self::work). Handle 0 is the empty kernel; the others come
/// from [`CudaContext::register_kernel`](crate::CudaContext::register_kernel)
/// and name a launch on the queues of the context that registered it.
///
/// ```no_run
/// use sigretire_cuda::{CudaContext, KernelHandle};
/// use sigretire_tracker::backend::{HardwareQueue, Publication};
///
/// let context = CudaContext::new(0)?;
/// let queue = context.create_queue()?;
/// let index = queue.reserve().unwrap();
/// queue.publish(Publication::unsignalled(index, true), KernelHandle::EMPTY.work()).unwrap();
/// queue.synchronize()?;
/// # Ok::<(), sigretire_cuda::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelHandle(u64);

impl KernelHandle {
    /// The empty kernel (the same as [`Work::Empty`]).
    ///
    /// ```
    /// use sigretire_cuda::KernelHandle;
    /// use sigretire_tracker::Work;
    /// assert_eq!(KernelHandle::EMPTY.raw(), 0);
    /// assert_eq!(KernelHandle::EMPTY.work(), Work::Kernel(0)); // which a queue runs as `Work::Empty`
    /// ```
    pub const EMPTY: KernelHandle = KernelHandle(0);

    /// The value for [`Work::Kernel`]; registered launches count from 1.
    ///
    /// ```
    /// use sigretire_cuda::KernelHandle;
    /// assert_eq!(KernelHandle::EMPTY.raw(), 0);
    /// ```
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// The work that launches this kernel.
    ///
    /// ```
    /// use sigretire_cuda::KernelHandle;
    /// use sigretire_tracker::Work;
    /// assert_eq!(KernelHandle::EMPTY.work(), Work::Kernel(KernelHandle::EMPTY.raw()));
    /// ```
    pub const fn work(self) -> Work<'static> {
        Work::Kernel(self.0)
    }
}

/// A caller's own kernel as tracked work: which function, its launch shape,
/// and the parameters it takes after the signal block's address. Register
/// it with [`CudaContext::register_kernel`](crate::CudaContext::register_kernel)
/// (whose safety contract says what the function must be); each
/// publication of the handle is then one `cuLaunchKernel` of it, followed
/// by the use's completion.
///
/// **The kernel's parameters** are 64-bit words: first the device address
/// of the use's 32-byte [`SignalBlock`] (0 when the use has no signal),
/// then the [`args`](Self::args), up to [`MAX_ARGS`](Self::MAX_ARGS) of
/// them. In PTX: `.param .u64 block, .param .u64 a0, ...`; in CUDA C:
/// `(unsigned long long block, unsigned long long a0, ...)` or pointers.
///
/// **Stamps.** A kernel that writes the GPU's `%globaltimer` (ns) into the
/// block's start and end stamps (byte offsets [`SignalBlock::START_OFFSET`]
/// and [`SignalBlock::END_OFFSET`], both 64-bit) whenever the block is not
/// 0 says so with [`writes_stamps`](Self::writes_stamps): a timed use then
/// reports them. Otherwise (the default) the queue clears them with the
/// completion, and a timed use reports no timestamps rather than an older
/// use's.
///
/// ```
/// use sigretire_cuda::KernelLaunch;
///
/// let function = core::ptr::null_mut(); // a CUfunction of the caller's module
/// let launch = KernelLaunch::new(function, &[7, 0x1000])
///     .grid(4, 1, 1)
///     .block(256, 1, 1)
///     .writes_stamps(true);
/// assert_eq!(launch.args(), &[7, 0x1000]);
/// assert_eq!((launch.grid_dim(), launch.block_dim()), ([4, 1, 1], [256, 1, 1]));
/// assert!(launch.stamps());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelLaunch {
    function: CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    shared_memory_bytes: u32,
    args: [u64; KernelLaunch::MAX_ARGS],
    arg_count: usize,
    writes_stamps: bool,
}

// SAFETY: a function handle is a driver object usable from any thread on
// which its context is current (every launch binds it first); the rest is
// plain data.
unsafe impl Send for KernelLaunch {}
// SAFETY: as for `Send`; launching one function from several threads at
// once is allowed by the driver.
unsafe impl Sync for KernelLaunch {}

impl KernelLaunch {
    /// Most parameters a registered kernel takes after the block's address.
    ///
    /// ```
    /// assert_eq!(sigretire_cuda::KernelLaunch::MAX_ARGS, 7);
    /// ```
    pub const MAX_ARGS: usize = 7;

    /// `function` with `args` after the block's address, on one block of
    /// one thread, no dynamic shared memory, no stamps.
    ///
    /// # Panics
    /// With more than [`MAX_ARGS`](Self::MAX_ARGS) arguments.
    ///
    /// ```should_panic
    /// sigretire_cuda::KernelLaunch::new(core::ptr::null_mut(), &[0; 8]);
    /// ```
    pub fn new(function: CUfunction, args: &[u64]) -> Self {
        assert!(
            args.len() <= Self::MAX_ARGS,
            "a registered kernel takes at most {} arguments after the block, not {}",
            Self::MAX_ARGS,
            args.len()
        );
        let mut values = [0; Self::MAX_ARGS];
        values[..args.len()].copy_from_slice(args);
        Self {
            function,
            grid: [1, 1, 1],
            block: [1, 1, 1],
            shared_memory_bytes: 0,
            args: values,
            arg_count: args.len(),
            writes_stamps: false,
        }
    }

    /// Launched on a grid of `x * y * z` blocks.
    ///
    /// ```
    /// let launch = sigretire_cuda::KernelLaunch::new(core::ptr::null_mut(), &[]).grid(2, 3, 1);
    /// assert_eq!(launch.grid_dim(), [2, 3, 1]);
    /// ```
    pub const fn grid(mut self, x: u32, y: u32, z: u32) -> Self {
        self.grid = [x, y, z];
        self
    }

    /// With `x * y * z` threads per block. More than the device allows
    /// (1024 on current GPUs) makes each launch fail: the publication
    /// fails with the driver's error (`CUDA_ERROR_INVALID_VALUE`).
    ///
    /// ```
    /// let launch = sigretire_cuda::KernelLaunch::new(core::ptr::null_mut(), &[]).block(32, 2, 1);
    /// assert_eq!(launch.block_dim(), [32, 2, 1]);
    /// ```
    pub const fn block(mut self, x: u32, y: u32, z: u32) -> Self {
        self.block = [x, y, z];
        self
    }

    /// With `bytes` of dynamic shared memory per block.
    ///
    /// ```
    /// let launch = sigretire_cuda::KernelLaunch::new(core::ptr::null_mut(), &[])
    ///     .shared_memory_bytes(1024);
    /// assert_eq!(launch.shared_memory(), 1024);
    /// ```
    pub const fn shared_memory_bytes(mut self, bytes: u32) -> Self {
        self.shared_memory_bytes = bytes;
        self
    }

    /// Whether the kernel writes both stamps of every non-zero block it is
    /// given (then a timed use reports them); `false` (the default) has
    /// the queue clear them after the kernel instead.
    ///
    /// ```
    /// let launch = sigretire_cuda::KernelLaunch::new(core::ptr::null_mut(), &[]);
    /// assert!(!launch.stamps());
    /// assert!(launch.writes_stamps(true).stamps());
    /// ```
    pub const fn writes_stamps(mut self, writes: bool) -> Self {
        self.writes_stamps = writes;
        self
    }

    /// The function.
    ///
    /// ```
    /// let launch = sigretire_cuda::KernelLaunch::new(core::ptr::null_mut(), &[]);
    /// assert!(launch.function().is_null());
    /// ```
    pub const fn function(&self) -> CUfunction {
        self.function
    }

    /// The parameters after the block's address.
    ///
    /// ```
    /// let launch = sigretire_cuda::KernelLaunch::new(core::ptr::null_mut(), &[1, 2]);
    /// assert_eq!(launch.args(), &[1, 2]);
    /// ```
    pub fn args(&self) -> &[u64] {
        &self.args[..self.arg_count]
    }

    /// Blocks per grid.
    ///
    /// ```
    /// let launch = sigretire_cuda::KernelLaunch::new(core::ptr::null_mut(), &[]);
    /// assert_eq!(launch.grid_dim(), [1, 1, 1]);
    /// ```
    pub const fn grid_dim(&self) -> [u32; 3] {
        self.grid
    }

    /// Threads per block.
    ///
    /// ```
    /// let launch = sigretire_cuda::KernelLaunch::new(core::ptr::null_mut(), &[]);
    /// assert_eq!(launch.block_dim(), [1, 1, 1]);
    /// ```
    pub const fn block_dim(&self) -> [u32; 3] {
        self.block
    }

    /// Bytes of dynamic shared memory per block.
    ///
    /// ```
    /// let launch = sigretire_cuda::KernelLaunch::new(core::ptr::null_mut(), &[]);
    /// assert_eq!(launch.shared_memory(), 0);
    /// ```
    pub const fn shared_memory(&self) -> u32 {
        self.shared_memory_bytes
    }

    /// Whether the kernel writes the block's stamps.
    ///
    /// ```
    /// let launch = sigretire_cuda::KernelLaunch::new(core::ptr::null_mut(), &[]);
    /// assert!(launch.writes_stamps(true).stamps());
    /// ```
    pub const fn stamps(&self) -> bool {
        self.writes_stamps
    }
}

/// The launches registered on a context, by handle (`index + 1`).
#[derive(Debug, Default)]
pub(crate) struct Registry {
    launches: RwLock<Vec<KernelLaunch>>,
}

impl Registry {
    pub(crate) fn register(&self, launch: KernelLaunch) -> KernelHandle {
        let mut launches = self.launches.write();
        launches.push(launch);
        KernelHandle(launches.len() as u64)
    }

    /// The launch behind a non-zero handle.
    pub(crate) fn get(&self, handle: u64) -> Option<KernelLaunch> {
        let index = usize::try_from(handle.checked_sub(1)?).ok()?;
        self.launches.read().get(index).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ptx_names_its_entry_and_writes_the_stamps_where_the_block_has_them() {
        let text = PTX.to_str().unwrap();
        assert_eq!(text.matches(".visible .entry ").count(), 1);
        assert!(text.contains(".visible .entry sigpool_empty("));
        assert!(text.contains(".version 7.0") && text.contains(".target sm_50"));
        assert_eq!(text.matches("+8], ").count(), 1);
        assert_eq!(text.matches("+16], ").count(), 1);
        assert!(text.contains("%globaltimer"));
    }

    #[test]
    fn the_empty_kernel_fences_its_stamps_before_its_completion_and_that_before_progress() {
        let text = PTX.to_str().unwrap();
        let start = text.find(".visible .entry sigpool_empty(").unwrap();
        let end = start + text[start..].find("ret;").unwrap();
        let body = &text[start..end];
        assert_eq!(
            body.matches(".param .u64").count(),
            3,
            "block, progress, value"
        );
        let at = |needle: &str| body.find(needle).unwrap_or_else(|| panic!("{needle}"));
        let stamps = at("[%rd3+16], %rd4;");
        let completion = at("[%rd3], %rd7;");
        let progress = at("[%rd8], %rd6;");
        assert!(stamps < completion && completion < progress);
        let fence_between = |a: usize, b: usize| body[a..b].contains("membar.sys;");
        assert!(
            fence_between(stamps, completion),
            "stamps, fence, completion"
        );
        assert!(
            fence_between(completion, progress),
            "completion, fence, progress"
        );
    }

    #[test]
    fn handles_count_from_one_and_zero_is_the_empty_kernel() {
        let registry = Registry::default();
        assert_eq!(registry.get(0), None);
        let function = core::ptr::null_mut();
        let first = registry.register(KernelLaunch::new(function, &[5]));
        let second = registry.register(KernelLaunch::new(function, &[0x1000, 7]).block(32, 1, 1));
        assert_eq!((first.raw(), second.raw()), (1, 2));
        let got = registry.get(2).unwrap();
        assert_eq!(
            (got.args(), got.block_dim()),
            (&[0x1000, 7][..], [32, 1, 1])
        );
        assert_eq!(registry.get(3), None);
        assert_eq!(first.work(), Work::Kernel(1));
        assert_eq!(KernelHandle::EMPTY.work(), Work::Kernel(0));
    }

    #[test]
    fn a_launch_holds_at_most_its_maximum_of_arguments() {
        let all = [1, 2, 3, 4, 5, 6, 7];
        assert_eq!(KernelLaunch::new(core::ptr::null_mut(), &all).args(), &all);
        let too_many = std::panic::catch_unwind(|| {
            KernelLaunch::new(core::ptr::null_mut(), &[0; KernelLaunch::MAX_ARGS + 1])
        });
        assert!(too_many.is_err());
    }
}
