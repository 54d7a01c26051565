//! The test side: find the stand-in's shared library, load a private copy of
//! it, and drive the machine inside through the control functions.
//!
//! Every [`Standin`] loads its own copy of the library file, so it has its own
//! statics and thus its own ROCr runtime and simulator: tests that run in
//! parallel threads of one process never see each other's queues, signals,
//! counters or injected failures, just as separate processes would not.

use crate::abi::*;
use crate::control::Control;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The file name of the stand-in's shared library on this platform.
pub const LIBRARY_FILE: &str = concat!(
    std::env!("ROCR_STANDIN_DLL_PREFIX"),
    env!("CARGO_CRATE_NAME"),
    std::env!("ROCR_STANDIN_DLL_SUFFIX")
);

/// An environment variable naming the stand-in library to use, instead of
/// the one cargo built next to the tests.
pub const LIBRARY_ENV: &str = "ROCR_STANDIN_LIBRARY";

/// Why a [`Standin`] could not be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StandinError {
    /// The library is not where cargo puts it, and building it failed.
    #[error(
        "the ROCr stand-in library `{LIBRARY_FILE}` was not found (looked in {searched}) and \
         building it with `cargo build -p sigretire-rocr-standin` failed: {reason}. Build it by hand, or set \
         {LIBRARY_ENV} to its path"
    )]
    NotBuilt {
        /// The directories searched.
        searched: String,
        /// What the build said.
        reason: String,
    },
    /// The private copy could not be made or loaded.
    #[error("cannot load a copy of the ROCr stand-in at {}: {reason}", path.display())]
    Load {
        /// The copy.
        path: PathBuf,
        /// The loader's or the file system's explanation.
        reason: String,
    },
    /// The library did not accept the configuration: it was built from other
    /// sources than this crate.
    #[error(
        "the ROCr stand-in at {} refused its configuration: it was built from other sources \
         than the test (rebuild it, or unset {LIBRARY_ENV})",
        path.display()
    )]
    Mismatch {
        /// The copy.
        path: PathBuf,
    },
}

/// The directory of the build profile (`target/debug`) that built this crate,
/// from the build script's `OUT_DIR` (`<profile>/build/rocr-standin-*/out`).
fn profile_dir() -> Option<PathBuf> {
    Path::new(env!("ROCR_STANDIN_OUT_DIR"))
        .ancestors()
        .nth(3)
        .map(Path::to_path_buf)
}

/// Where cargo leaves the library: next to the running test binary (a
/// dependency's `cdylib` goes to `deps/`, as the test does), the profile
/// directory above it, and the profile directory this crate was built in
/// (for doctests, which run from a temporary directory).
fn candidate_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(exe) = std::env::current_exe()
        && let Some(dir) = exe.parent()
    {
        dirs.push(dir.to_path_buf());
        if let Some(parent) = dir.parent() {
            dirs.push(parent.to_path_buf());
        }
    }
    if let Some(profile) = profile_dir() {
        dirs.push(profile.join("deps"));
        dirs.push(profile);
    }
    dirs
}

/// Builds the library with the cargo that built this crate, into a target
/// directory of its own. (Cargo 1.95 releases the build directory's lock
/// before it runs tests, so a build into the same directory would not wait;
/// a directory of its own still cannot wait for a lock under any cargo, and
/// cannot disturb the artifacts of the run in progress.)
fn build() -> Result<PathBuf, String> {
    let cargo: OsString = std::env::var_os("CARGO")
        .or_else(|| option_env!("CARGO").map(OsString::from))
        .unwrap_or_else(|| "cargo".into());
    let target_dir = profile_dir()
        .and_then(|p| p.parent().map(|t| t.join("rocr-standin-fallback")))
        .unwrap_or_else(|| std::env::temp_dir().join("rocr-standin-fallback"));
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let output = Command::new(&cargo)
        .arg("build")
        .arg("--lib")
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target_dir)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", cargo.to_string_lossy()))?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    let built = target_dir.join("debug").join(LIBRARY_FILE);
    if built.is_file() {
        Ok(built)
    } else {
        Err(format!(
            "cargo succeeded but {} is missing",
            built.display()
        ))
    }
}

/// The stand-in library to load: [`LIBRARY_ENV`] if set, else the one cargo
/// built beside the tests, else one built now (once per process).
///
/// ```
/// let path = sigretire_rocr_standin::library().unwrap();
/// assert!(path.ends_with(sigretire_rocr_standin::LIBRARY_FILE));
/// ```
pub fn library() -> Result<PathBuf, StandinError> {
    if let Some(path) = std::env::var_os(LIBRARY_ENV).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let dirs = candidate_dirs();
    if let Some(found) = dirs
        .iter()
        .map(|d| d.join(LIBRARY_FILE))
        .find(|p| p.is_file())
    {
        return Ok(found);
    }
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(build)
        .clone()
        .map_err(|reason| StandinError::NotBuilt {
            searched: dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            reason,
        })
}

/// A private copy of the stand-in library, loaded, with its machine
/// configured: pass [`Standin::library_path`] to `HsaApi::load_from` (or the
/// backend's `Runtime::load_from`) and ROCr calls reach this machine.
///
/// ```
/// use sigretire_rocr_standin::{Config, Standin};
///
/// let standin = Standin::new(Config::default())?;
/// let api = hsa_sys::HsaApi::load_from(standin.library_path())?;
/// // SAFETY: hsa_init takes no arguments.
/// api.check_status(unsafe { api.hsa_init() })?;
/// assert_eq!(standin.census().init_count, 1);
/// // SAFETY: balances the hsa_init above.
/// api.check_status(unsafe { api.hsa_shut_down() })?;
/// standin.assert_no_violations();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Standin {
    path: PathBuf,
    control: Control,
    // Keeps the copy mapped (it is opened NODELETE as well, since the
    // simulator's thread may run its code until `hsa_shut_down`).
    _library: libloading::Library,
}

impl fmt::Debug for Standin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Standin").field("path", &self.path).finish()
    }
}

impl Standin {
    /// Loads a fresh copy of the stand-in and configures its machine.
    pub fn new(config: Config) -> Result<Self, StandinError> {
        let original = library()?;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        // A uniquely named copy: the dynamic loader shares one instance per
        // file (by name and by inode), so only a new file is a new machine.
        let path = std::env::temp_dir().join(format!(
            "rocr-standin-{}-{}-{LIBRARY_FILE}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        // A copy that did not load is removed at once: a failed (or partly
        // written) copy of a sanitizer build is tens of megabytes.
        let load_error = |reason: String| {
            let _ = std::fs::remove_file(&path);
            StandinError::Load {
                path: path.clone(),
                reason,
            }
        };
        std::fs::copy(&original, &path)
            .map_err(|e| load_error(format!("copying {}: {e}", original.display())))?;
        let library = open(&path).map_err(|e| load_error(e.to_string()))?;
        let control = Control::resolve(&library).map_err(load_error)?;
        let standin = Self {
            path,
            control,
            _library: library,
        };
        // SAFETY: a `Config` of the size passed.
        let accepted =
            unsafe { (standin.control.rocr_standin_configure)(&config, size_of::<Config>()) };
        if !accepted {
            return Err(StandinError::Mismatch {
                path: standin.path.clone(),
            });
        }
        Ok(standin)
    }

    /// The private copy of the library: load ROCr from here.
    pub fn library_path(&self) -> &Path {
        &self.path
    }

    /// Every violation so far, of this and of earlier runtimes of this copy:
    /// host actions that ROCr or a GPU would not forgive, found by the
    /// stand-in's checks and by the simulator's.
    pub fn violations(&self) -> Vec<crate::Violation> {
        // SAFETY: a null buffer asks for the length only.
        let len = unsafe { (self.control.rocr_standin_violations)(std::ptr::null_mut(), 0) };
        let mut buffer = vec![0u8; len];
        // SAFETY: `buffer` has `len` writable bytes.
        let written = unsafe { (self.control.rocr_standin_violations)(buffer.as_mut_ptr(), len) };
        buffer.truncate(written.min(len));
        String::from_utf8_lossy(&buffer)
            .lines()
            .filter(|l| !l.is_empty())
            .map(crate::Violation::from_line)
            .collect()
    }

    /// Panics, listing them, if there are violations.
    #[track_caller]
    pub fn assert_no_violations(&self) {
        let violations = self.violations();
        assert!(
            violations.is_empty(),
            "the ROCr stand-in saw {} violation(s):\n{}",
            violations.len(),
            violations
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    /// How often the ROCr function `symbol` was called.
    ///
    /// # Panics
    /// If the library exports no such ROCr function.
    pub fn calls(&self, symbol: &str) -> u64 {
        // SAFETY: `symbol` is `len` readable bytes.
        let calls = unsafe { (self.control.rocr_standin_calls)(symbol.as_ptr(), symbol.len()) };
        assert_ne!(
            calls,
            u64::MAX,
            "the stand-in exports no ROCr function `{symbol}`"
        );
        calls
    }

    /// Live runtime objects (all zero without a runtime).
    pub fn census(&self) -> Census {
        let mut census = Census::default();
        // SAFETY: a `Census` of the size passed.
        unsafe { (self.control.rocr_standin_census)(&mut census, size_of::<Census>()) };
        census
    }

    /// What the interrupt signals did (all zero before `hsa_init`).
    ///
    /// ```
    /// let standin = sigretire_rocr_standin::Standin::new(Default::default())?;
    /// assert_eq!(standin.interrupts(), Default::default());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn interrupts(&self) -> InterruptCounters {
        let mut counters = InterruptCounters::default();
        // SAFETY: an `InterruptCounters` of the size passed.
        unsafe {
            (self.control.rocr_standin_interrupts)(&mut counters, size_of::<InterruptCounters>())
        };
        counters
    }

    /// Leaves `left` of the process's KFD events for new interrupt signals
    /// (a test spending the budget); the events live signals hold stay
    /// theirs, and each comes back when its signal is destroyed. False
    /// before `hsa_init`.
    pub fn set_event_budget(&self, left: u32) -> bool {
        // SAFETY: a plain value.
        unsafe { (self.control.rocr_standin_set_event_budget)(left) }
    }

    /// The simulator's counters of accesses made through ROCr calls.
    pub fn counters(&self) -> SimCounters {
        let mut counters = SimCounters::default();
        // SAFETY: a `SimCounters` of the size passed.
        unsafe { (self.control.rocr_standin_counters)(&mut counters, size_of::<SimCounters>()) };
        counters
    }

    /// What the stand-in knows of the pool block starting at `ptr`.
    pub fn allocation(&self, ptr: u64) -> Option<AllocationInfo> {
        let mut info = AllocationInfo::default();
        // SAFETY: an `AllocationInfo` of the size passed.
        unsafe {
            (self.control.rocr_standin_allocation)(ptr, &mut info, size_of::<AllocationInfo>())
        }
        .then_some(info)
    }

    /// Failure injection: pools of `kind` are out of memory while `exhausted`.
    pub fn set_pool_exhausted(&self, kind: PoolKind, exhausted: bool) {
        // SAFETY: plain values.
        let done =
            unsafe { (self.control.rocr_standin_set_pool_exhausted)(kind as u32, exhausted) };
        assert!(done, "set_pool_exhausted needs an initialised runtime");
    }

    /// Failure injection: the next `count` signal creations fail.
    pub fn fail_signal_creations(&self, count: u64) {
        // SAFETY: a plain value.
        let done = unsafe { (self.control.rocr_standin_fail_signal_creations)(count) };
        assert!(done, "fail_signal_creations needs an initialised runtime");
    }

    /// Failure injection: after `skip` more calls of the ROCr function
    /// `symbol`, the next `count` answer `status` without doing anything
    /// (`count` 0 clears an earlier injection). Works before `hsa_init` too,
    /// so initialisation and discovery can fail; holds across runtimes until
    /// used up.
    ///
    /// ```
    /// use hsa_sys::{HsaApi, HSA_STATUS_ERROR_OUT_OF_RESOURCES, HSA_SYSTEM_INFO_TIMESTAMP};
    /// use sigretire_rocr_standin::{Config, Standin};
    ///
    /// let standin = Standin::new(Config::default())?;
    /// standin.fail_calls("hsa_system_get_info", 1, 1, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
    /// let api = HsaApi::load_from(standin.library_path())?;
    /// let mut now = 0u64;
    /// // SAFETY: plain calls; `now` is the attribute's uint64_t.
    /// let answers = unsafe {
    ///     api.check_status(api.hsa_init())?;
    ///     let answers: Vec<u32> = (0..3)
    ///         .map(|_| api.hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP, (&raw mut now).cast()))
    ///         .collect();
    ///     api.hsa_shut_down();
    ///     answers
    /// };
    /// assert_eq!(answers, [0, HSA_STATUS_ERROR_OUT_OF_RESOURCES, 0], "the second call failed");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Panics
    /// If the library exports no such function, or it returns no status.
    pub fn fail_calls(&self, symbol: &str, skip: u64, count: u64, status: u32) {
        // SAFETY: `symbol` is `len` readable bytes; the rest are plain values.
        let done = unsafe {
            (self.control.rocr_standin_fail_calls)(
                symbol.as_ptr(),
                symbol.len(),
                skip,
                count,
                status,
            )
        };
        assert!(
            done,
            "the stand-in has no ROCr function `{symbol}` that returns a status"
        );
    }

    /// Failure injection: the next `count` calls that can give the malformed
    /// answer `kind` give it (0 clears). Works before `hsa_init` too.
    ///
    /// ```
    /// use hsa_sys::{HsaApi, hsa_agent_t};
    /// use sigretire_rocr_standin::{Config, Malformed, Standin};
    ///
    /// unsafe extern "C" fn count(_: hsa_agent_t, data: *mut std::ffi::c_void) -> u32 {
    ///     // SAFETY: `data` is the `usize` below.
    ///     unsafe { *data.cast::<usize>() += 1 };
    ///     0
    /// }
    /// let standin = Standin::new(Config::default())?;
    /// standin.malform(Malformed::NoCpuAgent, 1);
    /// let api = HsaApi::load_from(standin.library_path())?;
    /// let (mut first, mut second) = (0usize, 0usize);
    /// // SAFETY: plain calls; the callback matches its data.
    /// unsafe {
    ///     api.check_status(api.hsa_init())?;
    ///     api.hsa_iterate_agents(Some(count), (&raw mut first).cast());
    ///     api.hsa_iterate_agents(Some(count), (&raw mut second).cast());
    ///     api.hsa_shut_down();
    /// }
    /// assert_eq!((first, second), (1, 2), "the GPU alone, then the CPU and the GPU");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn malform(&self, kind: Malformed, count: u64) {
        // SAFETY: plain values.
        let done = unsafe { (self.control.rocr_standin_malform)(kind as u32, count) };
        assert!(done, "the stand-in does not know {kind:?}");
    }

    /// A new, unset host flag that a [`Kernel::SpinUntil`] can wait on.
    pub fn new_flag(&self) -> Flag {
        // SAFETY: no arguments.
        let id = unsafe { (self.control.rocr_standin_new_flag)() };
        assert_ne!(id, 0, "new_flag needs an initialised runtime");
        Flag(id)
    }

    /// Sets (`true`) or clears a host flag.
    pub fn set_flag(&self, flag: Flag, set: bool) {
        // SAFETY: plain values.
        let done = unsafe { (self.control.rocr_standin_set_flag)(flag.0, set) };
        assert!(done, "unknown flag {flag:?}");
    }

    /// Registers a simulated kernel; returns the `kernel_object` of a
    /// dispatch packet that runs it.
    pub fn register_kernel(&self, kernel: Kernel) -> u64 {
        let (kind, nanos, flag) = match kernel {
            Kernel::Empty => (KernelKind::Empty, 0, 0),
            Kernel::Duration(d) => (
                KernelKind::Duration,
                u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
                0,
            ),
            Kernel::SpinUntil(flag) => (KernelKind::SpinUntilFlag, 0, flag.0),
        };
        // SAFETY: plain values.
        let object =
            unsafe { (self.control.rocr_standin_register_kernel)(kind as u32, nanos, flag) };
        assert_ne!(
            object, 0,
            "register_kernel needs an initialised runtime and a known flag"
        );
        object
    }

    /// Drives the packet processor of one queue (an `hsa_queue_t*`).
    pub fn queue(&self, queue: *const hsa_sys::hsa_queue_t) -> QueueControl<'_> {
        QueueControl {
            standin: self,
            queue: queue as u64,
        }
    }

    /// Stepped: runs every queue until none can progress (cross-queue waits
    /// resolve). Threaded: waits until no queue can progress without the host.
    pub fn run_until_idle(&self) {
        // SAFETY: no arguments.
        unsafe { (self.control.rocr_standin_run_until_idle)() };
    }

    /// The GPU clock, in ticks.
    pub fn now_ticks(&self) -> u64 {
        // SAFETY: no arguments.
        unsafe { (self.control.rocr_standin_now_ticks)() }
    }

    /// A GPU tick in the system domain, as ROCr's
    /// `hsa_amd_profiling_convert_tick_to_system_domain` answers.
    pub fn gpu_to_system(&self, tick: u64) -> u64 {
        // SAFETY: a plain value.
        unsafe { (self.control.rocr_standin_gpu_to_system)(tick) }
    }

    /// The value last written to GPU `gpu`'s `HDP_MEM_FLUSH_CNTL` register
    /// (then reset to 0); `None` if it has no registers.
    pub fn take_hdp_flush(&self, gpu: u32) -> Option<u32> {
        // SAFETY: a plain value.
        let value = unsafe { (self.control.rocr_standin_take_hdp_flush)(gpu) };
        (value != u32::MAX).then_some(value)
    }
}

impl Drop for Standin {
    fn drop(&mut self) {
        // The mapping outlives the file; a later load needs a new copy anyway.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A host flag inside the stand-in's simulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flag(u64);

/// A simulated kernel (see [`Standin::register_kernel`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Completes at once when threaded; when the test completes it when stepped.
    Empty,
    /// Runs this long when threaded.
    Duration(Duration),
    /// Spins until the flag is set.
    SpinUntil(Flag),
}

/// Step-mode control and ground truth of one queue.
#[derive(Clone, Copy, Debug)]
pub struct QueueControl<'a> {
    standin: &'a Standin,
    queue: u64,
}

impl QueueControl<'_> {
    fn step(&self, op: StepOp, index: u64) -> Result<u64, StepStatus> {
        let mut answer = 0;
        // SAFETY: plain values and a place for one index.
        let status = unsafe {
            (self.standin.control.rocr_standin_queue_step)(
                self.queue,
                op as u32,
                index,
                &mut answer,
            )
        };
        match StepStatus::from_raw(status) {
            StepStatus::Done => Ok(answer),
            error => Err(error),
        }
    }

    /// Launches the next packet; answers its index.
    pub fn launch(&self) -> Result<u64, StepStatus> {
        self.step(StepOp::Launch, 0)
    }

    /// Completes launched packet `index`.
    pub fn complete(&self, index: u64) -> Result<(), StepStatus> {
        self.step(StepOp::Complete, index).map(|_| ())
    }

    /// Consumes the packet at the read index; answers the new read index.
    pub fn advance_read_index(&self) -> Result<u64, StepStatus> {
        self.step(StepOp::AdvanceReadIndex, 0)
    }

    /// Runs this queue until it cannot progress.
    pub fn run_until_idle(&self) {
        self.step(StepOp::RunUntilIdle, 0)
            .expect("run_until_idle on a live queue");
    }

    /// Fails the queue: its pending packets fail, and ROCr calls the queue's
    /// error callback with `HSA_STATUS_ERROR_EXCEPTION`.
    pub fn fail(&self) {
        self.step(StepOp::Fail, 0).expect("fail a live queue");
    }

    /// Stalls (or un-stalls) the queue's packet processor.
    pub fn stall(&self, stalled: bool) {
        let op = if stalled {
            StepOp::Stall
        } else {
            StepOp::Unstall
        };
        self.step(op, 0).expect("stall a live queue");
    }

    /// The ground truth of packet `index`, once the processor has seen it.
    pub fn truth(&self, index: u64) -> Option<Truth> {
        let mut truth = Truth::default();
        // SAFETY: a `Truth` of the size passed.
        unsafe {
            (self.standin.control.rocr_standin_queue_truth)(
                self.queue,
                index,
                &mut truth,
                size_of::<Truth>(),
            )
        }
        .then_some(truth)
    }
}

/// Opens a copy with `RTLD_NODELETE`, so it is never unmapped while the
/// simulator's thread might run its code.
#[cfg(unix)]
fn open(path: &Path) -> Result<libloading::Library, libloading::Error> {
    use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
    const RTLD_NODELETE: std::ffi::c_int = 0x1000;
    // SAFETY: the file is this crate's own library, whose initialisers are
    // Rust's standard ones.
    unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) }.map(Into::into)
}

#[cfg(not(unix))]
fn open(path: &Path) -> Result<libloading::Library, libloading::Error> {
    // SAFETY: as above.
    unsafe { libloading::Library::new(path) }
}
