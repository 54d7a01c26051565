//! ROCr's C functions, exported under ROCr's names with the signatures of
//! Debian's ROCr 5.2.3 headers (the same ones `hsa_sys::HsaApi` resolves;
//! a test compares the two lists token for token).
//!
//! Each function follows the header's contract as far as a caller can
//! observe it: argument checks and their status codes, `HSA_STATUS_ERROR_NOT_INITIALIZED`
//! outside `hsa_init`/`hsa_shut_down`, iteration that stops at a callback's
//! first non-success status and returns it. Where ROCr would silently corrupt
//! memory or crash (a raw signal block passed to a signal call, a double
//! free), the stand-in answers an error and records a violation instead.
//!
//! A panic inside the stand-in never crosses into the caller: it becomes a
//! violation and the function's error answer.

use crate::abi::Malformed;
use crate::machine::AgentKind;
use crate::state::{self, Instance, SYSTEM_TIMESTAMP_FREQUENCY, with_instance};
use core::ffi::{c_char, c_int, c_void};
use hsa_sys::*;
use std::collections::HashMap;
use std::ffi::CString;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// One exported function: its C signature as Rust source tokens, and how
/// often it was called.
#[derive(Debug)]
pub struct Export {
    /// The C symbol.
    pub symbol: &'static str,
    /// Each parameter's Rust type, as written.
    pub parameters: &'static [&'static str],
    /// The Rust return type, or `""` for `void`.
    pub returns: &'static str,
    pub(crate) calls: &'static AtomicU64,
}

impl Export {
    /// Calls so far, in this copy of the library.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
}

/// Runs `body`, turning a panic into a violation and `fallback`.
fn guard<T>(symbol: &str, fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        state::violation(
            crate::ViolationKind::StandinBug,
            format!("stand-in bug: {symbol} panicked: {message}"),
        );
        fallback
    })
}

macro_rules! rocr_exports {
    ($(
        $(#[doc = $doc:literal])*
        fn $symbol:ident($($arg:ident: $arg_ty:ty),* $(,)?) $(-> $ret:ty)? = $fallback:expr => $body:block
    )*) => {
        /// Call counters, one per export.
        #[allow(non_upper_case_globals)]
        mod calls {
            use std::sync::atomic::AtomicU64;
            $(pub(crate) static $symbol: AtomicU64 = AtomicU64::new(0);)*
        }

        $(
            $(#[doc = $doc])*
            ///
            /// # Safety
            /// The contract of the C function of the same name in ROCr's headers.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $symbol($($arg: $arg_ty),*) $(-> $ret)? {
                calls::$symbol.fetch_add(1, Ordering::Relaxed);
                $(
                    if let Some(answer) = crate::inject::injected(stringify!($symbol))
                        .and_then(<$ret as crate::inject::Answer>::from_status)
                    {
                        return answer;
                    }
                )?
                guard(stringify!($symbol), $fallback, move || $body)
            }
        )*

        /// Every exported ROCr function, in definition order.
        pub static EXPORTS: &[Export] = &[$(
            Export {
                symbol: stringify!($symbol),
                parameters: &[$(stringify!($arg_ty)),*],
                returns: concat!("" $(, stringify!($ret))?),
                calls: &calls::$symbol,
            },
        )*];
    };
}

/// ROCr's text for each status code (`hsa_status_string`), NUL-terminated
/// and alive as long as the library.
static STATUS_TEXT: LazyLock<HashMap<hsa_status_t, CString>> = LazyLock::new(|| {
    (0..=0x2000)
        .filter_map(|status| {
            let name = status_name(status)?;
            let meaning = match status {
                // ROCr 5.2.3's own wording, which callers quote.
                HSA_STATUS_ERROR_OUT_OF_RESOURCES => {
                    "The runtime failed to allocate the necessary resources. This error may also \
                     occur when the core runtime library needs to spawn threads or create internal \
                     OS-specific events."
                }
                _ => status_meaning(status)?,
            };
            let text = CString::new(format!("{name}: {meaning}")).ok()?;
            Some((status, text))
        })
        .collect()
});

/// Writes `value` to the attribute buffer `out`.
///
/// # Safety
/// `out` must be valid for a write of a `T` (the caller's contract).
unsafe fn write_out<T>(out: *mut c_void, value: T) {
    // SAFETY: forwarded; unaligned, as C buffers promise no Rust alignment.
    unsafe { out.cast::<T>().write_unaligned(value) }
}

fn gpu_of(instance: &Instance, agent: hsa_agent_t) -> Result<u32, hsa_status_t> {
    match instance.machine.agent(agent) {
        Some(AgentKind::Gpu(gpu)) => Ok(gpu),
        Some(AgentKind::Cpu) => Err(HSA_STATUS_ERROR_INVALID_AGENT),
        None => Err(HSA_STATUS_ERROR_INVALID_AGENT),
    }
}

/// A signal call on a handle ROCr did not create: ROCr would look for its own
/// bookkeeping around the block and crash or corrupt memory.
fn foreign_signal(instance: &Instance, call: &str, signal: hsa_signal_t) {
    instance.violation(
        crate::ViolationKind::BadSignal,
        format!(
            "{call}({:#x}): not a signal ROCr created; only ROCr-created signals may be passed \
         to ROCr's signal functions",
            signal.handle
        ),
    );
}

/// Waits as ROCr does: polls, then yields, then naps, until the condition
/// holds or the timeout (system ticks, here nanoseconds) passes.
fn wait(
    instance: &Instance,
    signal: sigretire_sim::Signal,
    condition: hsa_signal_condition_t,
    compare: hsa_signal_value_t,
    timeout: u64,
) -> hsa_signal_value_t {
    let start = Instant::now();
    let deadline = Duration::from_nanos(timeout);
    let mut polls = 0u32;
    loop {
        let value = instance.sim.load(signal);
        if condition_holds(condition, value, compare) || start.elapsed() >= deadline {
            return value;
        }
        polls += 1;
        match polls {
            0..64 => std::hint::spin_loop(),
            64..256 => std::thread::yield_now(),
            _ => std::thread::sleep(
                Duration::from_micros(20).min(deadline - start.elapsed().min(deadline)),
            ),
        }
    }
}

/// A blocked wait on an interrupt signal: sleeps on its event mailbox
/// between writes, until the condition holds or the timeout passes.
fn sleep(
    instance: &Instance,
    signal: sigretire_sim::Signal,
    condition: hsa_signal_condition_t,
    compare: hsa_signal_value_t,
    timeout: u64,
) -> hsa_signal_value_t {
    let deadline = Instant::now() + Duration::from_nanos(timeout);
    let mut value = instance.sim.load(signal);
    while !condition_holds(condition, value, compare) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        value = instance.sim.sleep_while(signal, value, left);
    }
    value
}

rocr_exports! {
    /// Initialises the runtime (reference counted).
    fn hsa_init() -> hsa_status_t = HSA_STATUS_ERROR => { state::init() }

    /// Balances one `hsa_init`; the last one tears the runtime down.
    fn hsa_shut_down() -> hsa_status_t = HSA_STATUS_ERROR => { state::shut_down() }

    /// ROCr's description of a status code (works before `hsa_init`).
    fn hsa_status_string(
        status: hsa_status_t,
        status_string: *mut *const c_char,
    ) -> hsa_status_t = HSA_STATUS_ERROR => {
        let Some(text) = STATUS_TEXT.get(&status) else {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        };
        if status_string.is_null() {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: the caller passes a place for one pointer.
        unsafe { status_string.write(text.as_ptr()) };
        HSA_STATUS_SUCCESS
    }

    /// System attributes: the timestamp, its frequency, the longest wait.
    fn hsa_system_get_info(
        attribute: hsa_system_info_t,
        value: *mut c_void,
    ) -> hsa_status_t = HSA_STATUS_ERROR => {
        with_instance(|instance| {
            if value.is_null() {
                return HSA_STATUS_ERROR_INVALID_ARGUMENT;
            }
            let answer = match attribute {
                HSA_SYSTEM_INFO_TIMESTAMP => instance.system_now(),
                HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY
                    if crate::inject::take_malformed(Malformed::ZeroTimestampFrequency) =>
                {
                    0
                }
                HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY => SYSTEM_TIMESTAMP_FREQUENCY,
                HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT => u64::MAX,
                _ => return HSA_STATUS_ERROR_INVALID_ARGUMENT,
            };
            // SAFETY: these attributes are `uint64_t`; the caller passes one.
            unsafe { write_out(value, answer) };
            HSA_STATUS_SUCCESS
        })
    }

    /// Calls `callback` for the CPU agent, then each GPU agent.
    fn hsa_iterate_agents(
        callback: Option<unsafe extern "C" fn(agent: hsa_agent_t, data: *mut c_void) -> hsa_status_t>,
        data: *mut c_void,
    ) -> hsa_status_t = HSA_STATUS_ERROR => {
        with_instance(|instance| {
            let Some(callback) = callback else {
                return HSA_STATUS_ERROR_INVALID_ARGUMENT;
            };
            let no_cpu = crate::inject::take_malformed(Malformed::NoCpuAgent);
            for agent in instance.machine.agent_handles() {
                if no_cpu && instance.machine.agent(agent) == Some(AgentKind::Cpu) {
                    continue;
                }
                // SAFETY: the caller's callback and data, as registered.
                let status = unsafe { callback(agent, data) };
                if status != HSA_STATUS_SUCCESS {
                    return status;
                }
            }
            HSA_STATUS_SUCCESS
        })
    }

    /// Agent attributes (those `machine.rs` models).
    fn hsa_agent_get_info(
        agent: hsa_agent_t,
        attribute: hsa_agent_info_t,
        value: *mut c_void,
    ) -> hsa_status_t = HSA_STATUS_ERROR => {
        with_instance(|instance| {
            let Some(kind) = instance.machine.agent(agent) else {
                return HSA_STATUS_ERROR_INVALID_AGENT;
            };
            if value.is_null() {
                return HSA_STATUS_ERROR_INVALID_ARGUMENT;
            }
            // SAFETY: the caller passes a buffer of the attribute's type.
            unsafe { instance.machine.agent_info(kind, attribute, value) }
        })
    }

    /// Calls `callback` for each pool of `agent`.
    fn hsa_amd_agent_iterate_memory_pools(
        agent: hsa_agent_t,
        callback: Option<unsafe extern "C" fn(memory_pool: hsa_amd_memory_pool_t, data: *mut c_void) -> hsa_status_t>,
        data: *mut c_void,
    ) -> hsa_status_t = HSA_STATUS_ERROR => {
        with_instance(|instance| {
            let Some(kind) = instance.machine.agent(agent) else {
                return HSA_STATUS_ERROR_INVALID_AGENT;
            };
            let Some(callback) = callback else {
                return HSA_STATUS_ERROR_INVALID_ARGUMENT;
            };
            for pool in instance.machine.pools_of(kind) {
                let handle = hsa_amd_memory_pool_t { handle: pool.handle };
                // SAFETY: the caller's callback and data, as registered.
                let status = unsafe { callback(handle, data) };
                if status != HSA_STATUS_SUCCESS {
                    return status;
                }
            }
            HSA_STATUS_SUCCESS
        })
    }

    /// Pool attributes.
    fn hsa_amd_memory_pool_get_info(
        memory_pool: hsa_amd_memory_pool_t,
        attribute: hsa_amd_memory_pool_info_t,
        value: *mut c_void,
    ) -> hsa_status_t = HSA_STATUS_ERROR => {
        with_instance(|instance| {
            let Some(pool) = instance.machine.pool(memory_pool) else {
                return HSA_STATUS_ERROR_INVALID_MEMORY_POOL;
            };
            if value.is_null() {
                return HSA_STATUS_ERROR_INVALID_ARGUMENT;
            }
            // SAFETY: the caller passes a buffer of the attribute's type.
            unsafe { instance.machine.pool_info(pool, attribute, value) }
        })
    }

    /// How `agent` may reach `memory_pool`.
    fn hsa_amd_agent_memory_pool_get_info(
        agent: hsa_agent_t,
        memory_pool: hsa_amd_memory_pool_t,
        attribute: hsa_amd_agent_memory_pool_info_t,
        value: *mut c_void,
    ) -> hsa_status_t = HSA_STATUS_ERROR => {
        with_instance(|instance| {
            let Some(kind) = instance.machine.agent(agent) else {
                return HSA_STATUS_ERROR_INVALID_AGENT;
            };
            let Some(pool) = instance.machine.pool(memory_pool) else {
                return HSA_STATUS_ERROR_INVALID_MEMORY_POOL;
            };
            if value.is_null() || attribute != HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS {
                return HSA_STATUS_ERROR_INVALID_ARGUMENT;
            }
            // SAFETY: the access attribute is a 4-byte enum; the caller passes one.
            unsafe { write_out(value, instance.machine.access(kind, pool)) };
            HSA_STATUS_SUCCESS
        })
    }

    /// Allocates `size` bytes (rounded up to the granule) from the pool.
    fn hsa_amd_memory_pool_allocate(
        memory_pool: hsa_amd_memory_pool_t,
        size: usize,
        flags: u32,
        ptr: *mut *mut c_void,
    ) -> hsa_status_t = HSA_STATUS_ERROR => {
        with_instance(|instance| {
            let Some(pool) = instance.machine.pool(memory_pool) else {
                return HSA_STATUS_ERROR_INVALID_MEMORY_POOL;
            };
            if ptr.is_null() || flags != 0 {
                return HSA_STATUS_ERROR_INVALID_ARGUMENT;
            }
            if crate::inject::take_malformed(Malformed::AllocationNull) {
                // SAFETY: the caller passes a place for one pointer.
                unsafe { ptr.write(std::ptr::null_mut()) };
                return HSA_STATUS_SUCCESS;
            }
            let misaligned = crate::inject::take_malformed(Malformed::AllocationMisaligned);
            match instance.memory.allocate(&instance.sim, pool, size, misaligned) {
                Ok(base) => {
                    // SAFETY: the caller passes a place for one pointer.
                    unsafe { ptr.write(base as *mut c_void) };
                    HSA_STATUS_SUCCESS
                }
                Err(status) => status,
            }
        })
    }

    /// Gives a block back to its pool.
    fn hsa_amd_memory_pool_free(ptr: *mut c_void) -> hsa_status_t = HSA_STATUS_ERROR => {
        with_instance(|instance| instance.free(ptr as u64))
    }

    /// Grants `agents` (and only them, besides the owner) access to a block.
    fn hsa_amd_agents_allow_access(
        num_agents: u32,
        agents: *const hsa_agent_t,
        flags: *const u32,
        ptr: *const c_void,
    ) -> hsa_status_t = HSA_STATUS_ERROR => {
        with_instance(|instance| {
            if num_agents == 0 || agents.is_null() || !flags.is_null() {
                return HSA_STATUS_ERROR_INVALID_ARGUMENT;
            }
            // SAFETY: the caller passes `num_agents` agents at `agents`.
            let agents = unsafe { std::slice::from_raw_parts(agents, num_agents as usize) };
            let mut kinds = Vec::with_capacity(agents.len());
            for agent in agents {
                match instance.machine.agent(*agent) {
                    Some(kind) => kinds.push(kind),
                    None => return HSA_STATUS_ERROR_INVALID_AGENT,
                }
            }
            instance.memory.allow_access(&instance.machine, &kinds, ptr as u64)
        })
    }

    /// Creates a signal in system memory.
    fn hsa_signal_create(
        initial_value: hsa_signal_value_t,
        num_consumers: u32,
        consumers: *const hsa_agent_t,
        signal: *mut hsa_signal_t,
    ) -> hsa_status_t = HSA_STATUS_ERROR => {
        // SAFETY: forwarded caller contract.
        unsafe { hsa_amd_signal_create(initial_value, num_consumers, consumers, 0, signal) }
    }

    /// Creates a signal in system memory: an interrupt signal (a KFD event
    /// from the budget; a polling signal past it) unless `attributes` has
    /// `HSA_AMD_SIGNAL_AMD_GPU_ONLY`.
    fn hsa_amd_signal_create(
        initial_value: hsa_signal_value_t,
        num_consumers: u32,
        consumers: *const hsa_agent_t,
        attributes: u64,
        signal: *mut hsa_signal_t,
    ) -> hsa_status_t = HSA_STATUS_ERROR => {
        with_instance(|instance| {
            let interrupt = attributes & HSA_AMD_SIGNAL_AMD_GPU_ONLY == 0;
            if signal.is_null() || (num_consumers > 0 && consumers.is_null()) {
                return HSA_STATUS_ERROR_INVALID_ARGUMENT;
            }
            if num_consumers > 0 {
                // SAFETY: the caller passes `num_consumers` agents.
                let consumers = unsafe { std::slice::from_raw_parts(consumers, num_consumers as usize) };
                if consumers.iter().any(|a| instance.machine.agent(*a).is_none()) {
                    return HSA_STATUS_ERROR_INVALID_AGENT;
                }
            }
            match instance.memory.create_signal(&instance.sim, initial_value, interrupt) {
                Ok(handle) => {
                    // SAFETY: the caller passes a place for one handle.
                    unsafe { signal.write(handle) };
                    HSA_STATUS_SUCCESS
                }
                Err(status) => status,
            }
        })
    }

    /// Destroys a signal ROCr created.
    fn hsa_signal_destroy(signal: hsa_signal_t) -> hsa_status_t = HSA_STATUS_ERROR => {
        with_instance(|instance| {
            if signal.is_null() {
                return HSA_STATUS_ERROR_INVALID_ARGUMENT;
            }
            instance.destroy_signal(signal)
        })
    }

    /// Loads a signal's value (acquire).
    fn hsa_signal_load_scacquire(signal: hsa_signal_t) -> hsa_signal_value_t = 0 => {
        load("hsa_signal_load_scacquire", signal)
    }

    /// Loads a signal's value.
    fn hsa_signal_load_relaxed(signal: hsa_signal_t) -> hsa_signal_value_t = 0 => {
        load("hsa_signal_load_relaxed", signal)
    }

    /// Stores a signal's value (release); on a doorbell, rings it.
    fn hsa_signal_store_screlease(signal: hsa_signal_t, value: hsa_signal_value_t) = () => {
        store("hsa_signal_store_screlease", signal, value)
    }

    /// Stores a signal's value; on a doorbell, rings it.
    fn hsa_signal_store_relaxed(signal: hsa_signal_t, value: hsa_signal_value_t) = () => {
        store("hsa_signal_store_relaxed", signal, value)
    }

    /// Stores a signal's value without waking waiters (the stand-in has none
    /// to wake: its waits poll).
    fn hsa_signal_silent_store_relaxed(signal: hsa_signal_t, value: hsa_signal_value_t) = () => {
        store("hsa_signal_silent_store_relaxed", signal, value)
    }

    /// Waits until the condition holds or the timeout (system ticks) passes;
    /// returns the value last observed.
    fn hsa_signal_wait_scacquire(
        signal: hsa_signal_t,
        condition: hsa_signal_condition_t,
        compare_value: hsa_signal_value_t,
        timeout_hint: u64,
        wait_state_hint: hsa_wait_state_t,
    ) -> hsa_signal_value_t = 0 => {
        let Some(instance) = state::current() else {
            state::violation(crate::ViolationKind::BeforeInit, "hsa_signal_wait_scacquire before hsa_init".to_owned());
            return 0;
        };
        match instance.memory.runtime_signal(signal.handle) {
            Some(s) if wait_state_hint == HSA_WAIT_STATE_BLOCKED && instance.sim.is_interrupt(s) => {
                sleep(&instance, s, condition, compare_value, timeout_hint)
            }
            Some(s) => wait(&instance, s, condition, compare_value, timeout_hint),
            None => {
                foreign_signal(&instance, "hsa_signal_wait_scacquire", signal);
                0
            }
        }
    }

    /// Not modelled: answers `HSA_STATUS_ERROR` (the backend does not use it).
    fn hsa_amd_signal_async_handler(
        signal: hsa_signal_t,
        cond: hsa_signal_condition_t,
        value: hsa_signal_value_t,
        handler: hsa_amd_signal_handler,
        arg: *mut c_void,
    ) -> hsa_status_t = HSA_STATUS_ERROR => {
        let _ = (signal, cond, value, handler, arg);
        HSA_STATUS_ERROR
    }

    /// Creates an AQL queue on a GPU agent.
    fn hsa_queue_create(
        agent: hsa_agent_t,
        size: u32,
        type_: hsa_queue_type32_t,
        callback: Option<unsafe extern "C" fn(status: hsa_status_t, source: *mut hsa_queue_t, data: *mut c_void)>,
        data: *mut c_void,
        private_segment_size: u32,
        group_segment_size: u32,
        queue: *mut *mut hsa_queue_t,
    ) -> hsa_status_t = HSA_STATUS_ERROR => {
        with_instance(|instance| {
            let _ = (private_segment_size, group_segment_size);
            if queue.is_null()
                || !size.is_power_of_two()
                || size > sigretire_sim::MAX_QUEUE_SIZE
                || !matches!(type_, HSA_QUEUE_TYPE_MULTI | HSA_QUEUE_TYPE_SINGLE)
            {
                return HSA_STATUS_ERROR_INVALID_ARGUMENT;
            }
            let gpu = match instance.machine.agent(agent) {
                Some(AgentKind::Gpu(gpu)) => gpu,
                Some(AgentKind::Cpu) => return HSA_STATUS_ERROR_INVALID_QUEUE_CREATION,
                None => return HSA_STATUS_ERROR_INVALID_AGENT,
            };
            if crate::inject::take_malformed(Malformed::QueueNull) {
                // SAFETY: the caller passes a place for one pointer.
                unsafe { queue.write(std::ptr::null_mut()) };
                return HSA_STATUS_SUCCESS;
            }
            let size = size.max(crate::machine::QUEUE_MIN_SIZE);
            let created = instance.create_queue(gpu, size, callback, data as usize);
            if crate::inject::take_malformed(Malformed::QueueWithoutRing) {
                // SAFETY: the descriptor was just made and nobody else has its
                // address yet; the adapter keeps its own pointer to the ring.
                unsafe { (*created).base_address = std::ptr::null_mut() };
            }
            // SAFETY: the caller passes a place for one pointer.
            unsafe { queue.write(created) };
            HSA_STATUS_SUCCESS
        })
    }

    /// Destroys a queue: its packet processor stops.
    fn hsa_queue_destroy(queue: *mut hsa_queue_t) -> hsa_status_t = HSA_STATUS_ERROR => {
        with_instance(|instance| {
            if queue.is_null() {
                return HSA_STATUS_ERROR_INVALID_ARGUMENT;
            }
            instance.queues.destroy(queue)
        })
    }

    /// The queue's read index (acquire).
    fn hsa_queue_load_read_index_scacquire(queue: *const hsa_queue_t) -> u64 = 0 => {
        with_queue("hsa_queue_load_read_index_scacquire", queue, |_, q| q.read_index())
    }

    /// The queue's write index.
    fn hsa_queue_load_write_index_relaxed(queue: *const hsa_queue_t) -> u64 = 0 => {
        with_queue("hsa_queue_load_write_index_relaxed", queue, |_, q| {
            q.write_index().load(Ordering::Relaxed)
        })
    }

    /// Adds to the write index; returns its previous value.
    fn hsa_queue_add_write_index_scacq_screl(queue: *const hsa_queue_t, value: u64) -> u64 = 0 => {
        with_queue("hsa_queue_add_write_index_scacq_screl", queue, |_, q| {
            q.write_index().fetch_add(value, Ordering::AcqRel)
        })
    }

    /// Switches timestamp writing on a queue.
    fn hsa_amd_profiling_set_profiler_enabled(
        queue: *mut hsa_queue_t,
        enable: c_int,
    ) -> hsa_status_t = HSA_STATUS_ERROR => {
        with_instance(|instance| {
            if queue.is_null() {
                return HSA_STATUS_ERROR_INVALID_ARGUMENT;
            }
            match instance.queues.get(queue) {
                Some(adapter) => {
                    instance.set_profiling(&adapter, enable != 0);
                    HSA_STATUS_SUCCESS
                }
                None => HSA_STATUS_ERROR_INVALID_QUEUE,
            }
        })
    }

    /// The timestamps of the packet a ROCr-created signal completed, in the
    /// system domain.
    fn hsa_amd_profiling_get_dispatch_time(
        agent: hsa_agent_t,
        signal: hsa_signal_t,
        time: *mut hsa_amd_profiling_dispatch_time_t,
    ) -> hsa_status_t = HSA_STATUS_ERROR => {
        with_instance(|instance| {
            if let Err(status) = gpu_of(instance, agent) {
                return status;
            }
            if time.is_null() {
                return HSA_STATUS_ERROR_INVALID_ARGUMENT;
            }
            let Some(s) = instance.memory.runtime_signal(signal.handle) else {
                foreign_signal(instance, "hsa_amd_profiling_get_dispatch_time", signal);
                return HSA_STATUS_ERROR_INVALID_SIGNAL;
            };
            let (start, end) = instance.sim.load_timestamps(s);
            let times = hsa_amd_profiling_dispatch_time_t {
                start: instance.gpu_to_system(start),
                end: instance.gpu_to_system(end),
            };
            // SAFETY: the caller passes a place for the pair.
            unsafe { time.write_unaligned(times) };
            HSA_STATUS_SUCCESS
        })
    }

    /// Converts a GPU tick to the system domain.
    fn hsa_amd_profiling_convert_tick_to_system_domain(
        agent: hsa_agent_t,
        agent_tick: u64,
        system_tick: *mut u64,
    ) -> hsa_status_t = HSA_STATUS_ERROR => {
        with_instance(|instance| {
            if let Err(status) = gpu_of(instance, agent) {
                return status;
            }
            if system_tick.is_null() {
                return HSA_STATUS_ERROR_INVALID_ARGUMENT;
            }
            // SAFETY: the caller passes a place for one tick.
            unsafe { system_tick.write_unaligned(instance.gpu_to_system(agent_tick)) };
            HSA_STATUS_SUCCESS
        })
    }
}

fn load(call: &str, signal: hsa_signal_t) -> hsa_signal_value_t {
    let Some(instance) = state::current() else {
        state::violation(
            crate::ViolationKind::BeforeInit,
            format!("{call} before hsa_init"),
        );
        return 0;
    };
    match instance.memory.runtime_signal(signal.handle) {
        Some(s) => instance.sim.load(s),
        None => {
            foreign_signal(&instance, call, signal);
            0
        }
    }
}

fn store(call: &str, signal: hsa_signal_t, value: hsa_signal_value_t) {
    let Some(instance) = state::current() else {
        return state::violation(
            crate::ViolationKind::BeforeInit,
            format!("{call} before hsa_init"),
        );
    };
    if let Some(queue) = instance.queues.by_doorbell(signal.handle) {
        return instance.ring_doorbell(&queue, value);
    }
    match instance.memory.runtime_signal(signal.handle) {
        Some(s) => instance.sim.store(s, value),
        None => foreign_signal(&instance, call, signal),
    }
}

fn with_queue(
    call: &str,
    queue: *const hsa_queue_t,
    f: impl FnOnce(&Instance, &crate::queue::QueueAdapter) -> u64,
) -> u64 {
    let Some(instance) = state::current() else {
        state::violation(
            crate::ViolationKind::BeforeInit,
            format!("{call} before hsa_init"),
        );
        return 0;
    };
    match instance.queues.get(queue) {
        Some(adapter) => f(&instance, &adapter),
        None => {
            instance.violation(
                crate::ViolationKind::BadQueueUse,
                format!("{call}({queue:p}): not a live queue (destroyed, or never created)"),
            );
            0
        }
    }
}
