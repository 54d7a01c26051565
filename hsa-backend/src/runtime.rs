//! The ROCr runtime: loading the library, `hsa_init` under a deadline, agent
//! discovery, the system clock, and `hsa_shut_down` once nothing needs ROCr.

use crate::error::Error;
use crate::teardown::Teardown;
use hsa_sys::*;
use parking_lot::{Condvar, Mutex};
use std::ffi::c_void;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How [`Runtime::init_with`] starts ROCr.
///
/// ```
/// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config { init_delay_ms: 300, ..Default::default() })?;
/// use sigretire_hsa::{Error, InitOptions, Runtime};
/// use std::time::Duration;
///
/// // A driver that takes 300 ms to answer, and a caller that waits 50.
/// let api = hsa_sys::HsaApi::load_from(standin.library_path())?;
/// let options = InitOptions { timeout: Duration::from_millis(50) };
/// assert_eq!(Runtime::init_with(api, options).unwrap_err(), Error::InitTimedOut(options.timeout));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitOptions {
    /// How long `hsa_init` may take before [`Error::InitTimedOut`]. It opens
    /// every GPU and can take seconds on a large machine; a wedged driver
    /// would otherwise block the caller forever.
    pub timeout: Duration,
}

impl Default for InitOptions {
    /// 60 seconds.
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(60),
        }
    }
}

/// ROCr, initialised: the loaded function table, the agents, the system
/// clock. Shared (`Arc`) by every [`Agent`](crate::Agent), queue and signal pool made from
/// it; the last one to go shuts ROCr down (`hsa_shut_down`), after freeing
/// any memory whose release still waited for packets (see `teardown.rs`).
///
/// ```
/// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
/// # let library = standin.library_path();
/// use sigretire_hsa::Runtime;
///
/// // On a machine with ROCm: `Runtime::load()`.
/// let runtime = Runtime::load_from(library)?;
/// assert_eq!(runtime.gpu_agents().len(), 1);
/// assert!(runtime.timestamp_frequency() > 0);
/// let device = runtime.device(0)?;
/// assert!(device.has_large_bar());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Runtime {
    api: Arc<HsaApi>,
    cpu: hsa_agent_t,
    gpus: Vec<hsa_agent_t>,
    timestamp_frequency: u64,
    pub(crate) teardown: Teardown,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("library", &self.api.library_path())
            .field("gpus", &self.gpus.len())
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Loads ROCr (`libhsa-runtime64.so.1`, or the library
    /// `SIGRETIRE_HSA_LIBRARY` names) and initialises it.
    ///
    /// ```
    /// use sigretire_hsa::{Error, Runtime};
    ///
    /// match Runtime::load() {
    ///     Ok(runtime) => println!("ROCr sees {} GPU(s)", runtime.gpu_agents().len()),
    ///     // No ROCm here: the message says what to install, or what to set.
    ///     Err(error @ Error::Load(_)) => println!("{error}"),
    ///     // ROCm, but no GPU ROCr can use (Debian's ROCr without /dev/kfd answers
    ///     // HSA_STATUS_ERROR_OUT_OF_RESOURCES).
    ///     Err(error @ (Error::InitFailed(_) | Error::NoGpu)) => println!("{error}"),
    ///     Err(error) => return Err(error.into()),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn load() -> Result<Arc<Runtime>, Error> {
        Self::init(HsaApi::load()?)
    }

    /// Loads the ROCr library at `library` (a path, or a name for the
    /// dynamic loader) and initialises it.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// use sigretire_hsa::{Error, Runtime};
    ///
    /// let runtime = Runtime::load_from(standin.library_path())?;
    /// assert_eq!(runtime.api().library_path(), standin.library_path());
    /// let missing = Runtime::load_from("/nonexistent/libhsa-runtime64.so.1");
    /// assert!(matches!(missing, Err(Error::Load(_))));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn load_from(library: impl AsRef<Path>) -> Result<Arc<Runtime>, Error> {
        Self::init(HsaApi::load_from(library)?)
    }

    /// Initialises ROCr from a loaded table, with the default options.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// // Load first (to check the library, say), initialise later.
    /// let api = hsa_sys::HsaApi::load_from(standin.library_path())?;
    /// let runtime = sigretire_hsa::Runtime::init(api)?;
    /// assert_eq!(standin.census().init_count, 1);
    /// drop(runtime);
    /// assert_eq!(standin.census().init_count, 0, "hsa_shut_down when the last user goes");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn init(api: HsaApi) -> Result<Arc<Runtime>, Error> {
        Self::init_with(api, InitOptions::default())
    }

    /// Initialises ROCr: `hsa_init` (under `options.timeout`), then finds the
    /// CPU agent and every GPU agent that runs kernel dispatches.
    ///
    /// # Errors
    /// [`Error::InitFailed`] with ROCr's status and text, [`Error::InitTimedOut`],
    /// [`Error::NoGpu`], or [`Error::Call`] if discovery fails.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// use sigretire_hsa::{Error, InitOptions, Runtime};
    /// use std::time::Duration;
    ///
    /// let api = hsa_sys::HsaApi::load_from(standin.library_path())?;
    /// let runtime = Runtime::init_with(api, InitOptions { timeout: Duration::from_secs(5) })?;
    /// assert_eq!(runtime.gpu_agents().len(), 1);
    ///
    /// // A machine with ROCr but without a GPU.
    /// let empty = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config { gpus: 0, ..Default::default() })?;
    /// let api = hsa_sys::HsaApi::load_from(empty.library_path())?;
    /// assert_eq!(Runtime::init_with(api, InitOptions::default()).unwrap_err(), Error::NoGpu);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn init_with(api: HsaApi, options: InitOptions) -> Result<Arc<Runtime>, Error> {
        let api = Arc::new(api);
        let status = init_within(&api, options.timeout)?;
        api.check_status(status).map_err(Error::InitFailed)?;
        // From here on, a failure must balance the successful hsa_init.
        match discover(&api) {
            Ok((cpu, gpus)) => {
                let mut runtime = Runtime {
                    api,
                    cpu,
                    gpus,
                    timestamp_frequency: 0,
                    teardown: Teardown::default(),
                };
                runtime.timestamp_frequency = runtime
                    .system_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, "hsa_system_get_info")?;
                if runtime.timestamp_frequency == 0 {
                    return Err(Error::NoTimestampClock);
                }
                Ok(Arc::new(runtime))
            }
            Err(error) => {
                // SAFETY: balances the successful hsa_init above; nothing was
                // created in between.
                unsafe { api.hsa_shut_down() };
                Err(error)
            }
        }
    }

    /// ROCr's functions.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// let runtime = sigretire_hsa::Runtime::load_from(standin.library_path())?;
    /// // The raw table, for calls the backend does not wrap.
    /// let text = runtime.api().status_string(hsa_sys::HSA_STATUS_ERROR_INVALID_QUEUE);
    /// assert!(text.is_some_and(|t| t.starts_with("HSA_STATUS_ERROR_INVALID_QUEUE")));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn api(&self) -> &HsaApi {
        &self.api
    }

    /// The CPU agent (the host, for access grants).
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// use hsa_sys::{HSA_AGENT_INFO_DEVICE, HSA_DEVICE_TYPE_CPU};
    ///
    /// let runtime = sigretire_hsa::Runtime::load_from(standin.library_path())?;
    /// let mut kind = u32::MAX;
    /// // SAFETY: the runtime is initialised; the attribute is a 4-byte enum.
    /// let status = unsafe {
    ///     runtime.api().hsa_agent_get_info(runtime.cpu_agent(), HSA_AGENT_INFO_DEVICE, (&raw mut kind).cast())
    /// };
    /// assert_eq!((status, kind), (0, HSA_DEVICE_TYPE_CPU));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cpu_agent(&self) -> hsa_agent_t {
        self.cpu
    }

    /// Every GPU agent that runs kernel dispatches, in ROCr's order.
    ///
    /// ```
    /// let two = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config { gpus: 2, ..Default::default() })?;
    /// let runtime = sigretire_hsa::Runtime::load_from(two.library_path())?;
    /// assert_eq!(runtime.gpu_agents().len(), 2);
    /// assert_eq!(runtime.device(1)?.agent(), runtime.gpu_agents()[1]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn gpu_agents(&self) -> &[hsa_agent_t] {
        &self.gpus
    }

    /// `HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY`: system timestamp ticks per
    /// second, the unit of [`Runtime::system_timestamp`] and of converted GPU
    /// timestamps.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// let runtime = sigretire_hsa::Runtime::load_from(standin.library_path())?;
    /// let (before, frequency) = (runtime.system_timestamp()?, runtime.timestamp_frequency());
    /// std::thread::sleep(std::time::Duration::from_millis(10));
    /// let ticks = runtime.system_timestamp()? - before;
    /// assert!(sigretire_hsa::system_duration(ticks, frequency) >= std::time::Duration::from_millis(10));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn timestamp_frequency(&self) -> u64 {
        self.timestamp_frequency
    }

    /// The clock of converted GPU timestamps: the system domain, at
    /// [`Runtime::timestamp_frequency`]. The tracker's timestamps on this
    /// backend count in it.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// let runtime = sigretire_hsa::Runtime::load_from(standin.library_path())?;
    /// assert_eq!(runtime.timestamp_clock().frequency(), runtime.timestamp_frequency());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn timestamp_clock(&self) -> sigretire_tracker::TimestampClock {
        sigretire_tracker::TimestampClock::from_frequency(self.timestamp_frequency)
            .expect("checked nonzero when the runtime was initialised")
    }

    /// One system timestamp tick, to the nanosecond: the unit of converted
    /// GPU timestamps (and so of a queue layer's `timestamp_period` on this
    /// backend). ROCr's system clock ticks at 1 GHz.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// let runtime = sigretire_hsa::Runtime::load_from(standin.library_path())?;
    /// assert_eq!(runtime.timestamp_period(), std::time::Duration::from_nanos(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn timestamp_period(&self) -> Duration {
        crate::timing::system_duration(1, self.timestamp_frequency)
    }

    /// `HSA_SYSTEM_INFO_TIMESTAMP`: the system clock, in ticks of
    /// [`Runtime::timestamp_frequency`].
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// let runtime = sigretire_hsa::Runtime::load_from(standin.library_path())?;
    /// let first = runtime.system_timestamp()?;
    /// assert!(runtime.system_timestamp()? >= first, "monotonic");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn system_timestamp(&self) -> Result<u64, Error> {
        self.system_info(HSA_SYSTEM_INFO_TIMESTAMP, "hsa_system_get_info")
    }

    /// How many blocks and signals of dropped pools wait before they are
    /// given back, because a packet that names them may still run: until
    /// its queue is destroyed, or a fence after it is seen complete (see
    /// `teardown.rs`).
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::stepped())?;
    /// use sigretire_hsa::{AqlQueue, QueueOptions, Runtime, SignalPool};
    /// use sigretire_tracker::backend::{HardwareQueue, Publication, SignalMemory};
    /// use sigretire_tracker::{Placement, Work};
    /// use std::time::Duration;
    ///
    /// let runtime = Runtime::load_from(standin.library_path())?;
    /// let device = runtime.device(0)?;
    /// let options = QueueOptions { drain_timeout: Duration::ZERO, ..QueueOptions::default() };
    /// let queue = AqlQueue::new(&device, options)?; // stepped: runs when told
    /// let (named, unnamed) = (SignalPool::new(&device), SignalPool::new(&device));
    /// let mut signals = Vec::new();
    /// named.allocate(8, Placement::Device, &mut signals)?;
    /// unnamed.allocate(8, Placement::Device, &mut signals)?;
    /// // A packet waits on one of `named`'s signals.
    /// let index = queue.reserve()?;
    /// let handle = named.packet_handle(signals[0].0);
    /// queue.publish(Publication::unsignalled(index, true), Work::Wait(&[handle]))?;
    /// drop(unnamed); // no packet names its signals: freed now
    /// assert_eq!(runtime.deferred_releases(), 0);
    /// drop(named); // the queue may still read it: freed later
    /// assert_eq!(runtime.deferred_releases(), 1);
    /// drop(queue); // its queue is gone: freed now
    /// assert_eq!(runtime.deferred_releases(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn deferred_releases(&self) -> usize {
        self.teardown.deferred()
    }

    fn system_info(&self, attribute: hsa_system_info_t, call: &'static str) -> Result<u64, Error> {
        let mut value = 0u64;
        // SAFETY: the runtime is initialised; both attributes are uint64_t.
        let status = unsafe {
            self.api
                .hsa_system_get_info(attribute, (&raw mut value).cast())
        };
        self.check(call, status)?;
        Ok(value)
    }

    /// `Ok` for success, else [`Error::Call`] naming `call`.
    pub(crate) fn check(&self, call: &'static str, status: hsa_status_t) -> Result<(), Error> {
        check(&self.api, call, status)
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // Every queue and pool holds an `Arc` of the runtime, so all queues
        // are destroyed (or, adopted, left to the runtime, which is shutting
        // down): memory whose release waited for their packets can go.
        self.teardown.release_all(&self.api);
        // SAFETY: balances the hsa_init of `init_with`; nothing made from
        // this runtime is alive any more.
        unsafe { self.api.hsa_shut_down() };
    }
}

pub(crate) fn check(api: &HsaApi, call: &'static str, status: hsa_status_t) -> Result<(), Error> {
    api.check_status(status)
        .map_err(|status| Error::Call { call, status })
}

/// Where the initialising thread and the caller meet.
#[derive(Default)]
struct InitRendezvous {
    state: Mutex<InitState>,
    done: Condvar,
}

#[derive(Default)]
enum InitState {
    #[default]
    Running,
    Finished(hsa_status_t),
    /// The caller gave up; the thread must undo a late success.
    Abandoned,
}

/// Runs `hsa_init` on a thread of its own and waits at most `timeout`.
fn init_within(api: &Arc<HsaApi>, timeout: Duration) -> Result<hsa_status_t, Error> {
    let rendezvous = Arc::new(InitRendezvous::default());
    let thread_api = api.clone();
    let thread_rendezvous = rendezvous.clone();
    let spawned = std::thread::Builder::new()
        .name("hsa-init".into())
        .spawn(move || {
            // SAFETY: hsa_init takes no arguments.
            let status = unsafe { thread_api.hsa_init() };
            let mut state = thread_rendezvous.state.lock();
            if matches!(*state, InitState::Abandoned) {
                if status == HSA_STATUS_SUCCESS {
                    // SAFETY: balances the hsa_init just made, which nobody
                    // will use.
                    unsafe { thread_api.hsa_shut_down() };
                }
                return;
            }
            *state = InitState::Finished(status);
            thread_rendezvous.done.notify_all();
        });
    if spawned.is_err() {
        // No thread to spare: initialise here, without the deadline.
        // SAFETY: hsa_init takes no arguments.
        return Ok(unsafe { api.hsa_init() });
    }
    let mut state = rendezvous.state.lock();
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let InitState::Finished(status) = *state {
            return Ok(status);
        }
        if rendezvous.done.wait_until(&mut state, deadline).timed_out() {
            if let InitState::Finished(status) = *state {
                return Ok(status);
            }
            *state = InitState::Abandoned;
            return Err(Error::InitTimedOut(timeout));
        }
    }
}

/// Collects every agent ROCr iterates into the `Vec<hsa_agent_t>` at `data`.
unsafe extern "C" fn collect_agent(agent: hsa_agent_t, data: *mut c_void) -> hsa_status_t {
    // SAFETY: `discover` passes a live, exclusive `Vec<hsa_agent_t>` and ROCr
    // calls back on the calling thread, during the iteration.
    let agents = unsafe { &mut *data.cast::<Vec<hsa_agent_t>>() };
    agents.push(agent);
    HSA_STATUS_SUCCESS
}

/// The CPU agent and the GPU agents that run kernel dispatches.
fn discover(api: &HsaApi) -> Result<(hsa_agent_t, Vec<hsa_agent_t>), Error> {
    let mut agents: Vec<hsa_agent_t> = Vec::new();
    // SAFETY: the runtime is initialised; the callback matches the data.
    let status = unsafe { api.hsa_iterate_agents(Some(collect_agent), (&raw mut agents).cast()) };
    check(api, "hsa_iterate_agents", status)?;
    let mut cpu = None;
    let mut gpus = Vec::new();
    for agent in agents {
        let device: hsa_device_type_t = agent_info(api, agent, HSA_AGENT_INFO_DEVICE)?;
        match device {
            HSA_DEVICE_TYPE_CPU if cpu.is_none() => cpu = Some(agent),
            HSA_DEVICE_TYPE_GPU => {
                let features: hsa_agent_feature_t = agent_info(api, agent, HSA_AGENT_INFO_FEATURE)?;
                if features & HSA_AGENT_FEATURE_KERNEL_DISPATCH != 0 {
                    gpus.push(agent);
                }
            }
            _ => {}
        }
    }
    if gpus.is_empty() {
        return Err(Error::NoGpu);
    }
    let cpu = cpu.ok_or(Error::Call {
        call: "hsa_iterate_agents",
        status: StatusError::new(HSA_STATUS_ERROR_INVALID_AGENT)
            .with_runtime_text("ROCr listed no CPU agent"),
    })?;
    Ok((cpu, gpus))
}

/// One plain-old-data attribute of an agent.
pub(crate) fn agent_info<T: Copy + Default>(
    api: &HsaApi,
    agent: hsa_agent_t,
    attribute: hsa_agent_info_t,
) -> Result<T, Error> {
    let mut value = T::default();
    // SAFETY: the callers pair each attribute with its C type `T` (a u32
    // enum, a u32, a flag pair of pointers...), and `value` is a `T`.
    let status = unsafe { api.hsa_agent_get_info(agent, attribute, (&raw mut value).cast()) };
    check(api, "hsa_agent_get_info", status)?;
    Ok(value)
}

/// A NUL-terminated `char[64]` attribute of an agent (its names).
pub(crate) fn agent_name(
    api: &HsaApi,
    agent: hsa_agent_t,
    attribute: hsa_agent_info_t,
) -> Result<String, Error> {
    let mut bytes = [0u8; 64];
    // SAFETY: the runtime is initialised; name attributes are `char[64]`.
    let status = unsafe { api.hsa_agent_get_info(agent, attribute, bytes.as_mut_ptr().cast()) };
    check(api, "hsa_agent_get_info", status)?;
    let len = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    Ok(String::from_utf8_lossy(&bytes[..len]).into_owned())
}
