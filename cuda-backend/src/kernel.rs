//! The signal kernels: PTX text loaded through the driver, and the launches
//! a queue can name with [`Work::Kernel`].
//!
//! Three kernels, hand-written in PTX (ISA 7.0, `sm_50`, so the driver JIT
//! compiles them for any GPU since Maxwell, and the build needs no CUDA
//! toolkit). Each takes the address of a signal block (or 0) and, when it is
//! not 0, writes `%globaltimer` (nanoseconds) into the block's start and end
//! stamps, so a timed use gets real GPU timestamps:
//!
//! - `sigpool_empty(block, progress, value)`: empty work ([`Work::Empty`]),
//!   a real launch, which also writes the completion (0 into the block) and
//!   the queue's progress word itself, so a publication of empty work is one
//!   launch and no memory operations;
//! - `sigpool_busy(block, ns)`: spins on `%globaltimer` for `ns` nanoseconds
//!   (work of a known duration, for timing tests and benchmarks);
//! - `sigpool_spin_until(block, flag, timeout_ns)`: spins until the host sets
//!   a [`HostFlag`](crate::HostFlag) (the queue layer's regression test: a kernel that runs
//!   until the host releases it). It gives up after `timeout_ns` and says so
//!   in the flag, so a test that forgets to release it cannot hang the GPU.
//!
//! A timed use on a busy kernel reports the GPU's own start and end:
//!
//! ```
//! # use sigretire_cuda::{CudaContext, Error};
//! # let context = match CudaContext::new(0) {
//! #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
//! #     context => context?,
//! # };
//! use std::time::Duration;
//! use sigretire_tracker::{Config, HardwareQueue, Request, Tracker};
//!
//! let (mut tracker, queue) = context.retiring_tracker(Config::default())?;
//! let busy = context.register_busy_kernel(Duration::from_micros(200), 1);
//! let index = queue.reserve().unwrap();
//! let acquired = tracker.acquire(Request::packet(index).barrier(true).timed(true)).unwrap();
//! queue.publish(acquired.publication, busy.work()).unwrap();
//! queue.synchronize()?;
//! let stamps = tracker.timestamps(&acquired.ticket).unwrap().unwrap();
//! assert!(stamps.ticks() >= 200_000); // %globaltimer nanoseconds
//! # Ok::<(), sigretire_cuda::Error>(())
//! ```

use crate::error::{Error, Result, check};
use crate::signal::SignalBlock;
use core::ffi::{CStr, c_void};
use cudarc::driver::sys::{self, CUfunction, CUjit_option, CUmodule};
use parking_lot::RwLock;
use sigretire_tracker::Work;
use std::time::Duration;

/// The kernels' PTX. The stamp offsets (`+8`, `+16`) are
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

// Work of a known duration: every thread spins for `ns` nanoseconds; thread 0
// stamps the block (when given).
.visible .entry sigpool_busy(
    .param .u64 sigpool_busy_block,
    .param .u64 sigpool_busy_ns
)
{
    .reg .pred  %p<4>;
    .reg .b32   %r<2>;
    .reg .b64   %rd<8>;

    ld.param.u64            %rd1, [sigpool_busy_block];
    ld.param.u64            %rd2, [sigpool_busy_ns];
    mov.u64                 %rd3, %globaltimer;
    add.u64                 %rd4, %rd3, %rd2;
BUSY_SPIN:
    mov.u64                 %rd5, %globaltimer;
    setp.lt.u64             %p1, %rd5, %rd4;
    @%p1 bra                BUSY_SPIN;
    mov.u32                 %r1, %tid.x;
    setp.ne.u32             %p2, %r1, 0;
    setp.eq.u64             %p3, %rd1, 0;
    or.pred                 %p2, %p2, %p3;
    @%p2 bra                BUSY_DONE;
    cvta.to.global.u64      %rd6, %rd1;
    st.volatile.global.u64  [%rd6+8], %rd3;
    st.volatile.global.u64  [%rd6+16], %rd5;
BUSY_DONE:
    ret;
}

// Spins until the host sets the flag word (non-zero), or gives up after
// `timeout_ns` and stores 2 into the flag to say so; then stamps the block.
.visible .entry sigpool_spin_until(
    .param .u64 sigpool_spin_block,
    .param .u64 sigpool_spin_flag,
    .param .u64 sigpool_spin_timeout_ns
)
{
    .reg .pred  %p<4>;
    .reg .b64   %rd<12>;

    ld.param.u64            %rd1, [sigpool_spin_block];
    ld.param.u64            %rd2, [sigpool_spin_flag];
    ld.param.u64            %rd3, [sigpool_spin_timeout_ns];
    cvta.to.global.u64      %rd4, %rd2;
    mov.u64                 %rd5, %globaltimer;
    add.u64                 %rd6, %rd5, %rd3;
SPIN_POLL:
    ld.volatile.global.u64  %rd7, [%rd4];
    setp.ne.u64             %p1, %rd7, 0;
    @%p1 bra                SPIN_RELEASED;
    mov.u64                 %rd8, %globaltimer;
    setp.lt.u64             %p2, %rd8, %rd6;
    @%p2 bra                SPIN_POLL;
    mov.u64                 %rd9, 2;
    st.volatile.global.u64  [%rd4], %rd9;
SPIN_RELEASED:
    mov.u64                 %rd10, %globaltimer;
    setp.eq.u64             %p3, %rd1, 0;
    @%p3 bra                SPIN_DONE;
    cvta.to.global.u64      %rd11, %rd1;
    st.volatile.global.u64  [%rd11+8], %rd5;
    st.volatile.global.u64  [%rd11+16], %rd10;
SPIN_DONE:
    ret;
}
";

const _: () = {
    // The PTX above hard-codes these offsets.
    assert!(SignalBlock::START_OFFSET == 8);
    assert!(SignalBlock::END_OFFSET == 16);
};

/// The loaded module and its three functions.
#[derive(Debug)]
pub(crate) struct Kernels {
    module: CUmodule,
    pub(crate) empty: CUfunction,
    pub(crate) busy: CUfunction,
    pub(crate) spin_until: CUfunction,
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
        let function = |name: &CStr| {
            let mut function = core::ptr::null_mut();
            // SAFETY: `module` was just loaded; `name` is NUL-terminated.
            check("cuModuleGetFunction", unsafe {
                sys::cuModuleGetFunction(&mut function, module, name.as_ptr())
            })
            .map(|()| function)
        };
        let functions = (|| {
            Ok::<_, Error>((
                function(c"sigpool_empty")?,
                function(c"sigpool_busy")?,
                function(c"sigpool_spin_until")?,
            ))
        })();
        match functions {
            Ok((empty, busy, spin_until)) => Ok(Self {
                module,
                empty,
                busy,
                spin_until,
            }),
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
/// or [`work`](Self::work). Handle 0 is the empty kernel.
///
/// ```no_run
/// # use sigretire_tracker::Publication;
/// use std::time::Duration;
/// use sigretire_cuda::CudaContext;
/// use sigretire_tracker::HardwareQueue;
///
/// let context = CudaContext::new(0)?;
/// let busy = context.register_busy_kernel(Duration::from_micros(100), 1);
/// let queue = context.create_queue()?;
/// let index = queue.reserve().unwrap();
/// queue.publish(Publication::unsignalled(index, true), busy.work()).unwrap(); // 100 us of GPU work
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

    /// The value for [`Work::Kernel`].
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use std::time::Duration;
    /// use sigretire_cuda::KernelHandle;
    ///
    /// let busy = context.register_busy_kernel(Duration::from_micros(10), 1);
    /// assert_ne!(busy.raw(), KernelHandle::EMPTY.raw()); // registered launches count from 1
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// The work that launches this kernel.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use std::time::Duration;
    /// use sigretire_tracker::Work;
    ///
    /// let busy = context.register_busy_kernel(Duration::from_micros(10), 1);
    /// assert_eq!(busy.work(), Work::Kernel(busy.raw()));
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub const fn work(self) -> Work<'static> {
        Work::Kernel(self.0)
    }
}

/// A registered launch: which kernel, with which arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Launch {
    /// `sigpool_busy` for `nanos`, with `threads` threads in one block.
    Busy { nanos: u64, threads: u32 },
    /// `sigpool_spin_until` on the flag at device address `flag`.
    SpinUntil { flag: u64, timeout_nanos: u64 },
}

/// The launches registered on a context, by handle (`index + 1`).
#[derive(Debug, Default)]
pub(crate) struct Registry {
    launches: RwLock<Vec<Launch>>,
}

impl Registry {
    pub(crate) fn register(&self, launch: Launch) -> KernelHandle {
        let mut launches = self.launches.write();
        launches.push(launch);
        KernelHandle(launches.len() as u64)
    }

    /// The launch behind a non-zero handle.
    pub(crate) fn get(&self, handle: u64) -> Option<Launch> {
        let index = usize::try_from(handle.checked_sub(1)?).ok()?;
        self.launches.read().get(index).copied()
    }
}

/// Nanoseconds in a duration, saturating (a kernel's timer is 64-bit).
pub(crate) fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ptx_names_every_entry_and_writes_the_stamps_where_the_block_has_them() {
        let text = PTX.to_str().unwrap();
        for entry in ["sigpool_empty(", "sigpool_busy(", "sigpool_spin_until("] {
            assert!(
                text.contains(&format!(".visible .entry {entry}")),
                "{entry}"
            );
        }
        assert!(text.contains(".version 7.0") && text.contains(".target sm_50"));
        assert_eq!(text.matches("+8], ").count(), 3);
        assert_eq!(text.matches("+16], ").count(), 3);
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
        let busy = registry.register(Launch::Busy {
            nanos: 5,
            threads: 1,
        });
        let spin = registry.register(Launch::SpinUntil {
            flag: 0x1000,
            timeout_nanos: 7,
        });
        assert_eq!((busy.raw(), spin.raw()), (1, 2));
        assert_eq!(
            registry.get(2),
            Some(Launch::SpinUntil {
                flag: 0x1000,
                timeout_nanos: 7
            })
        );
        assert_eq!(registry.get(3), None);
        assert_eq!(busy.work(), Work::Kernel(1));
        assert_eq!(KernelHandle::EMPTY.work(), Work::Kernel(0));
    }

    #[test]
    fn long_durations_saturate() {
        assert_eq!(nanos(Duration::from_micros(3)), 3000);
        assert_eq!(nanos(Duration::MAX), u64::MAX);
    }
}
