//! The control interface a test uses to drive and inspect the machine behind
//! the ROCr functions: configure it before `hsa_init`, step its packet
//! processor, read the ground truth and the violations, inject failures.
//!
//! These are `extern "C"` functions with a `rocr_standin_` prefix, exported
//! by the same library copy the backend loaded, because only that copy holds
//! the machine (a test process that links this crate has a copy of its own,
//! with its own statics). One macro defines each function once: the export,
//! and the field of the [`Control`] table that [`Standin`](crate::Standin)
//! resolves from the loaded library.

use crate::abi::*;
use crate::state::{self, Instance};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

macro_rules! control {
    ($(
        $(#[doc = $doc:literal])*
        fn $name:ident($($arg:ident: $arg_ty:ty),* $(,)?) -> $ret:ty = $fallback:expr => $body:block
    )*) => {
        $(
            $(#[doc = $doc])*
            ///
            /// # Safety
            /// Pointer arguments must be valid for the access their
            /// documentation names, with the size passed beside them.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $name($($arg: $arg_ty),*) -> $ret {
                catch_unwind(AssertUnwindSafe(move || $body)).unwrap_or_else(|_| {
                    state::violation(crate::ViolationKind::StandinBug, format!("stand-in bug: {} panicked", stringify!($name)));
                    $fallback
                })
            }
        )*

        /// The control functions, resolved from a loaded copy of the library.
        #[allow(clippy::type_complexity)]
        pub(crate) struct Control {
            $(pub(crate) $name: unsafe extern "C" fn($($arg_ty),*) -> $ret,)*
        }

        impl Control {
            /// Resolves every control function from `library`.
            pub(crate) fn resolve(library: &libloading::Library) -> Result<Self, String> {
                Ok(Self {
                    $($name: {
                        // SAFETY: the type is the signature this same macro
                        // gave the export of that name.
                        let symbol = unsafe {
                            library.get::<unsafe extern "C" fn($($arg_ty),*) -> $ret>(
                                concat!(stringify!($name), "\0").as_bytes(),
                            )
                        };
                        *symbol.map_err(|e| format!("{}: {e}", stringify!($name)))?
                    },)*
                })
            }
        }
    };
}

fn instance() -> Option<Arc<Instance>> {
    state::current()
}

/// Writes `value` to `out` if the caller's size matches the type's.
///
/// # Safety
/// `out` must be valid for `size` bytes of writes.
unsafe fn write_sized<T>(out: *mut T, size: usize, value: T) -> bool {
    if out.is_null() || size != size_of::<T>() {
        return false;
    }
    // SAFETY: non-null, and the caller vouches for `size` bytes, which equal T's.
    unsafe { out.write_unaligned(value) };
    true
}

control! {
    /// Sets the machine the next `hsa_init` builds; false while a runtime
    /// exists or if `size` is not this library's `Config` size.
    fn rocr_standin_configure(config: *const Config, size: usize) -> bool = false => {
        if config.is_null() || size != size_of::<Config>() {
            return false;
        }
        // SAFETY: the caller passes a `Config` of the size checked above.
        state::configure(unsafe { config.read_unaligned() })
    }

    /// Writes every violation, one per line (`Kind<TAB>text`), into
    /// `buffer` (up to `capacity` bytes); returns the length of the whole
    /// text.
    fn rocr_standin_violations(buffer: *mut u8, capacity: usize) -> usize = 0 => {
        let text = state::violations()
            .iter()
            .map(crate::Violation::to_line)
            .collect::<Vec<_>>()
            .join("\n");
        if !buffer.is_null() {
            let len = text.len().min(capacity);
            // SAFETY: the caller passes `capacity` writable bytes.
            unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), buffer, len) };
        }
        text.len()
    }

    /// How often the ROCr function `symbol` (UTF-8, `len` bytes) was called;
    /// `u64::MAX` if the library exports no such function.
    fn rocr_standin_calls(symbol: *const u8, len: usize) -> u64 = u64::MAX => {
        // SAFETY: the caller passes `len` readable bytes.
        let symbol = unsafe { std::slice::from_raw_parts(symbol, len) };
        crate::exports::EXPORTS
            .iter()
            .find(|e| e.symbol.as_bytes() == symbol)
            .map_or(u64::MAX, |e| e.calls())
    }

    /// Live objects, for leak checks (works without a runtime too).
    fn rocr_standin_census(out: *mut Census, size: usize) -> bool = false => {
        let census = match instance() {
            Some(i) => Census {
                init_count: state::init_count(),
                allocations: i.memory.live_allocations(),
                signals: i.memory.live_signals(),
                queues: i.queues.live(),
            },
            None => Census::default(),
        };
        // SAFETY: forwarded caller contract.
        unsafe { write_sized(out, size, census) }
    }

    /// The simulator's counters of accesses made through ROCr calls.
    fn rocr_standin_counters(out: *mut SimCounters, size: usize) -> bool = false => {
        let Some(i) = instance() else { return false };
        let c = i.sim.counters();
        let counters = SimCounters {
            host_loads: c.host.loads,
            host_stores: c.host.stores,
            device_loads: c.device.loads,
            device_stores: c.device.stores,
        };
        // SAFETY: forwarded caller contract.
        unsafe { write_sized(out, size, counters) }
    }

    /// What the stand-in knows of the pool block at `ptr`.
    fn rocr_standin_allocation(ptr: u64, out: *mut AllocationInfo, size: usize) -> bool = false => {
        let Some(info) = instance().and_then(|i| i.memory.info(ptr)) else { return false };
        // SAFETY: forwarded caller contract.
        unsafe { write_sized(out, size, info) }
    }

    /// Failure injection: allocations from pools of `kind` (a `PoolKind`)
    /// fail with `HSA_STATUS_ERROR_OUT_OF_RESOURCES` while `exhausted`.
    fn rocr_standin_set_pool_exhausted(kind: u32, exhausted: bool) -> bool = false => {
        let Some(i) = instance() else { return false };
        let kind = match kind {
            0 => PoolKind::Device,
            1 => PoolKind::System,
            _ => return false,
        };
        i.memory.set_exhausted(kind, exhausted);
        true
    }

    /// Failure injection: the next `count` signal creations fail.
    fn rocr_standin_fail_signal_creations(count: u64) -> bool = false => {
        let Some(i) = instance() else { return false };
        i.memory.fail_signal_creations(count);
        true
    }

    /// Failure injection: after `skip` more calls of the ROCr function
    /// `symbol` (UTF-8, `len` bytes), the next `count` answer `status`
    /// without doing anything (0 clears). Works without a runtime. False if
    /// the library exports no such function or it returns no status.
    fn rocr_standin_fail_calls(symbol: *const u8, len: usize, skip: u64, count: u64, status: u32) -> bool = false => {
        // SAFETY: the caller passes `len` readable bytes.
        let symbol = unsafe { std::slice::from_raw_parts(symbol, len) };
        let Some(export) = crate::exports::EXPORTS
            .iter()
            .find(|e| e.symbol.as_bytes() == symbol && e.returns == "hsa_status_t")
        else {
            return false;
        };
        crate::inject::fail_calls(export.symbol, skip, count, status);
        true
    }

    /// Failure injection: the next `count` calls that can give the malformed
    /// answer `kind` (a `Malformed`) give it. Works without a runtime.
    fn rocr_standin_malform(kind: u32, count: u64) -> bool = false => {
        let Some(kind) = Malformed::from_raw(kind) else { return false };
        crate::inject::malform(kind, count);
        true
    }

    /// What the interrupt signals did (`InterruptCounters`).
    fn rocr_standin_interrupts(out: *mut InterruptCounters, size: usize) -> bool = false => {
        let Some(i) = instance() else { return false };
        let stats = i.sim.interrupt_stats();
        let events = i.memory.events.lock();
        let counters = InterruptCounters {
            created: stats.created,
            degraded: events.degraded,
            live: events.live(),
            wakes: stats.wakes,
            sleeps: stats.sleeps,
        };
        drop(events);
        // SAFETY: forwarded caller contract.
        unsafe { write_sized(out, size, counters) }
    }

    /// Sets how many KFD events are left for new interrupt signals.
    fn rocr_standin_set_event_budget(left: u32) -> bool = false => {
        let Some(i) = instance() else { return false };
        i.memory.set_event_budget(left);
        true
    }

    /// A new, unset host flag for spinning kernels; 0 without a runtime.
    fn rocr_standin_new_flag() -> u64 = 0 => {
        let Some(i) = instance() else { return 0 };
        let mut flags = i.flags.lock();
        flags.push(sigretire_sim::HostFlag::new());
        flags.len() as u64
    }

    /// Sets or clears a host flag.
    fn rocr_standin_set_flag(flag: u64, set: bool) -> bool = false => {
        let Some(i) = instance() else { return false };
        let flags = i.flags.lock();
        let Some(flag) = usize::try_from(flag).ok().and_then(|f| flags.get(f.checked_sub(1)?)) else {
            return false;
        };
        if set { flag.set() } else { flag.clear() }
        true
    }

    /// Registers a simulated kernel (a `KernelKind`); answers the
    /// `kernel_object` that names it in a dispatch packet, or 0.
    fn rocr_standin_register_kernel(kind: u32, nanos: u64, flag: u64) -> u64 = 0 => {
        let Some(i) = instance() else { return 0 };
        let kernel = match kind {
            0 => sigretire_sim::Kernel::Empty,
            1 => sigretire_sim::Kernel::Duration(std::time::Duration::from_nanos(nanos)),
            2 => {
                let flags = i.flags.lock();
                let Some(flag) = usize::try_from(flag).ok().and_then(|f| flags.get(f.checked_sub(1)?)) else {
                    return 0;
                };
                sigretire_sim::Kernel::SpinUntil(flag.clone())
            }
            _ => return 0,
        };
        i.sim.register_kernel(kernel)
    }

    /// A step of the packet processor on `queue` (an `hsa_queue_t*`); writes
    /// the step's answer (an index) to `out`; returns a `StepStatus`.
    fn rocr_standin_queue_step(queue: u64, op: u32, index: u64, out: *mut u64) -> u32 = StepStatus::UnknownQueue as u32 => {
        let Some(i) = instance() else { return StepStatus::NotInitialized as u32 };
        let Some(adapter) = i.queues.get(queue as *const hsa_sys::hsa_queue_t) else {
            return StepStatus::UnknownQueue as u32;
        };
        let op = match op {
            1 => StepOp::Launch,
            2 => StepOp::Complete,
            3 => StepOp::AdvanceReadIndex,
            4 => StepOp::RunUntilIdle,
            5 => StepOp::Fail,
            6 => StepOp::Stall,
            7 => StepOp::Unstall,
            _ => return StepStatus::UnknownQueue as u32,
        };
        match i.step(&adapter, op, index) {
            Ok(answer) => {
                if !out.is_null() {
                    // SAFETY: the caller passes a place for one index.
                    unsafe { out.write_unaligned(answer) };
                }
                StepStatus::Done as u32
            }
            Err(status) => status as u32,
        }
    }

    /// The ground truth of packet `index` of `queue`.
    fn rocr_standin_queue_truth(queue: u64, index: u64, out: *mut Truth, size: usize) -> bool = false => {
        let Some(i) = instance() else { return false };
        let Some(truth) = i.queues.get(queue as *const hsa_sys::hsa_queue_t).and_then(|q| q.truth(index)) else {
            return false;
        };
        let truth = Truth {
            index: truth.index,
            completion_signal: truth.completion_signal.handle,
            start_ts: truth.start_ts.unwrap_or(0),
            end_ts: truth.end_ts.unwrap_or(0),
            packet_type: truth.packet_type,
            barrier: truth.barrier,
            published: truth.published,
            launched: truth.launched,
            completed: truth.completed,
            failed: truth.failed,
            packet: truth.packet.0,
        };
        // SAFETY: forwarded caller contract.
        unsafe { write_sized(out, size, truth) }
    }

    /// Stepped: runs every queue until none progresses. Threaded: waits
    /// until no queue can progress without the host.
    fn rocr_standin_run_until_idle() -> bool = false => {
        let Some(i) = instance() else { return false };
        i.sim.run_until_idle();
        true
    }

    /// The GPU clock in ticks.
    fn rocr_standin_now_ticks() -> u64 = 0 => {
        instance().map_or(0, |i| i.sim.now_ticks())
    }

    /// A GPU tick in the system domain, as
    /// `hsa_amd_profiling_convert_tick_to_system_domain` converts it.
    fn rocr_standin_gpu_to_system(tick: u64) -> u64 = 0 => {
        instance().map_or(0, |i| i.gpu_to_system(tick))
    }

    /// The last value written to GPU `gpu`'s `HDP_MEM_FLUSH_CNTL`, which is
    /// then reset to 0; `u32::MAX` if the GPU has no registers.
    fn rocr_standin_take_hdp_flush(gpu: u32) -> u32 = u32::MAX => {
        let Some(i) = instance() else { return u32::MAX };
        i.machine
            .hdp(gpu)
            .map_or(u32::MAX, |r| r.mem_flush_cntl.swap(0, std::sync::atomic::Ordering::AcqRel))
    }
}
