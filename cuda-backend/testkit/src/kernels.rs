//! Registering the kit's kernels as tracked work, and its untracked flag
//! writer.

use crate::flag::HostFlag;
use crate::module::kernels;
use core::ffi::c_void;
use sigretire_cuda::cudarc::driver::sys;
use sigretire_cuda::{CudaContext, CudaQueue, KernelHandle, KernelLaunch, Result, check};
use std::sync::Arc;
use std::time::Duration;

/// Nanoseconds in a duration, saturating (a kernel's timer is 64-bit).
fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// Registers `sigtest_busy` for `duration` on `context`: every thread
/// spins on `%globaltimer` for `duration`, then thread 0 stamps the use's
/// block, so a timed use reports the GPU's own start and end. Launched on
/// one block of `threads` threads (1 is plenty; more than the device's
/// limit, 1024 on current GPUs, makes every launch fail with
/// `CUDA_ERROR_INVALID_VALUE`).
pub fn busy_kernel(
    context: &Arc<CudaContext>,
    duration: Duration,
    threads: u32,
) -> Result<KernelHandle> {
    let kernels = kernels(context)?;
    let launch = KernelLaunch::new(kernels.busy, &[nanos(duration)])
        .block(threads, 1, 1)
        .writes_stamps(true);
    // SAFETY: `busy` is of the kit's module, loaded in this context and
    // never unloaded (module.rs); it declares (block, ns), both `.u64`, and
    // writes nothing of the block but its two stamps.
    Ok(unsafe { context.register_kernel(launch) })
}

/// Registers `sigtest_spin_until` on `flag` on `context`: it runs until
/// the host releases the flag, or until `timeout` passes (then the flag
/// says [`GaveUp`](crate::FlagState::GaveUp)), then stamps the use's block.
/// `flag` may be of any context of the device (its memory is portable).
pub fn spin_kernel(
    context: &Arc<CudaContext>,
    flag: &HostFlag,
    timeout: Duration,
) -> Result<KernelHandle> {
    let kernels = kernels(context)?;
    let launch = KernelLaunch::new(kernels.spin_until, &[flag.device_address(), nanos(timeout)])
        .writes_stamps(true);
    // SAFETY: `spin_until` is of the kit's module, loaded in this context
    // and never unloaded (module.rs); it declares (block, flag, timeout),
    // all `.u64`, and writes nothing of the block but its two stamps. The
    // flag's word is pinned memory of its context's arena, freed only when
    // that context goes, after its streams drained, and the kernel reaches
    // it only with volatile 64-bit accesses.
    Ok(unsafe { context.register_kernel(launch) })
}

/// Launches `sigtest_write_flag` on `queue`'s stream with no signal and no
/// index, its only effect a write of 1 into `flag` (after a system-scope
/// fence): the cheapest GPU work whose completion the host can see,
/// nothing tracked. The floor every completion mechanism pays (launch, run,
/// a write across PCIe), for benchmarks to read the rest against.
///
/// The launch goes through the raw stream ([`CudaQueue::as_raw`]) and is
/// announced to the queue ([`CudaQueue::note_foreign_work`]) before it is
/// enqueued; it is in order with the queue's publications made before it
/// on this thread (a publication of another thread may land on either side).
pub fn launch_flag_writer(queue: &CudaQueue, flag: &HostFlag) -> Result<()> {
    let context = queue.context();
    let kernels = kernels(context)?;
    context.bind()?;
    queue.note_foreign_work();
    let mut args = [flag.device_address(), 1u64];
    let mut pointers = args
        .each_mut()
        .map(|value| core::ptr::from_mut(value).cast::<c_void>());
    // SAFETY: the queue's context is bound; `write_flag` is of the kit's
    // module, loaded in it and never unloaded, and declares (word, value),
    // both `.u64`: the driver reads the two parameter pointers during the
    // call, while `args` lives. The word is the flag's pinned, device-mapped
    // memory, which lives until its context goes (after its streams
    // drained), and the kernel writes it with one volatile 64-bit store.
    check("cuLaunchKernel", unsafe {
        sys::cuLaunchKernel(
            kernels.write_flag,
            1,
            1,
            1,
            1,
            1,
            1,
            0,
            queue.as_raw(),
            pointers.as_mut_ptr(),
            core::ptr::null_mut(),
        )
    })
}
