//! AMD GPUs through ROCr (`hsa-backend`), when `libhsa-runtime64.so.1`
//! loads and finds a GPU, or the ROCr stand-in when `SIGRETIRE_HSA_LIBRARY`
//! names it (`target/release/libsigretire_rocr_standin.so`, built by
//! `cargo build --release -p sigretire-rocr-standin`).

use crate::platform::{Platform, Skipped};
use sigretire_baseline::BaselineTracker;
use sigretire_hsa::{Agent, AqlQueue, QueueOptions, Runtime, SignalPool};
use sigretire_tracker::{Config, Placement, RetiringTracker};
use std::sync::Arc;
use std::time::Duration;

/// The first AMD GPU ROCr reports.
pub struct RocrBench {
    runtime: Arc<Runtime>,
    device: Agent,
}

impl RocrBench {
    /// ROCr's first GPU, or why there is none.
    pub fn open() -> Result<Self, Skipped> {
        let skip = |reason: String| Skipped {
            backend: "rocr",
            reason,
        };
        let runtime = Runtime::load().map_err(|e| skip(e.to_string()))?;
        let device = runtime.device(0).map_err(|e| skip(e.to_string()))?;
        Ok(Self { runtime, device })
    }

    fn queue(&self) -> Result<AqlQueue, String> {
        AqlQueue::new(&self.device, QueueOptions::default()).map_err(|e| e.to_string())
    }
}

impl Platform for RocrBench {
    type Retiring = RetiringTracker<SignalPool, AqlQueue>;
    type Baseline = BaselineTracker<SignalPool, AqlQueue>;

    fn backend(&self) -> &'static str {
        "rocr"
    }

    fn machine(&self) -> String {
        format!(
            "{:?} through ROCr on {}",
            self.device,
            crate::platforms::sim::host_cpu()
        )
    }

    fn placements(&self) -> Vec<Placement> {
        if self.device.has_large_bar() {
            vec![Placement::Host, Placement::Device]
        } else {
            vec![Placement::Host]
        }
    }

    fn retiring(&self, config: Config) -> Result<Self::Retiring, String> {
        let memory = Arc::new(SignalPool::new(&self.device));
        RetiringTracker::new(memory, self.queue()?, config).map_err(|e| e.to_string())
    }

    fn baseline(&self, config: Config) -> Result<Self::Baseline, String> {
        let memory = Arc::new(SignalPool::new(&self.device));
        BaselineTracker::new(memory, self.queue()?, config).map_err(|e| e.to_string())
    }

    fn long_kernel(&self, duration: Duration) -> Result<u64, String> {
        standin_kernel(self.runtime.api().library_path(), duration)
    }
}

/// Registers a kernel of `duration` with the ROCr stand-in loaded from
/// `library` (its `rocr_standin_register_kernel`, kind 1: runs for the
/// given nanoseconds). Real ROCr has no such call, and sigbench carries no
/// code object of a kernel that runs for a given time: there the answer is
/// why not.
#[cfg(target_os = "linux")]
fn standin_kernel(library: &std::path::Path, duration: Duration) -> Result<u64, String> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    /// The stand-in's `rocr_standin_register_kernel(kind, nanos, flag)`.
    type RegisterKernel = unsafe extern "C" fn(u32, u64, u64) -> u64;
    let not_here = || {
        format!(
            "{} is not the ROCr stand-in: sigbench has no code object for a kernel of {duration:?} \
             on real ROCr",
            library.display()
        )
    };
    let path = CString::new(library.as_os_str().as_bytes()).map_err(|_| not_here())?;
    // SAFETY: `path` is a NUL-terminated string that outlives the call;
    // RTLD_NOLOAD loads nothing (no initialiser runs): it answers the handle
    // of the copy the runtime already loaded, or null.
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        return Err(not_here());
    }
    // SAFETY: `handle` is a live handle from dlopen above, the name is
    // NUL-terminated.
    let symbol = unsafe { libc::dlsym(handle, c"rocr_standin_register_kernel".as_ptr()) };
    let object = if symbol.is_null() {
        Err(not_here())
    } else {
        // SAFETY: the stand-in exports the symbol with this signature
        // (hsa-backend/standin/src/control.rs); kind 1 is
        // `KernelKind::Duration`, which takes no flag. The library stays
        // loaded while the call runs: the runtime holds it (RTLD_NODELETE),
        // and so does `handle`.
        let object = unsafe {
            let register: RegisterKernel = std::mem::transmute(symbol);
            register(1, u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX), 0)
        };
        match object {
            0 => Err("the ROCr stand-in refused to register a kernel".to_string()),
            object => Ok(object),
        }
    };
    // SAFETY: balances the dlopen above; the runtime's own handle keeps the
    // library loaded.
    unsafe { libc::dlclose(handle) };
    object
}

/// Registers a kernel of `duration` with the ROCr stand-in (Linux only).
#[cfg(not(target_os = "linux"))]
fn standin_kernel(library: &std::path::Path, duration: Duration) -> Result<u64, String> {
    Err(format!(
        "{}: sigbench has no code object for a kernel of {duration:?} on ROCr",
        library.display()
    ))
}
