//! AMD extension types: agents, memory pools, HDP flush registers, profiling.

/// An agent handle (`hsa_agent_t`): a CPU or GPU ROCr knows about.
///
/// ROCr hands them out (`hsa_iterate_agents`); only identity may be assumed.
///
/// ```
/// use hsa_sys::{hsa_agent_t, hsa_status_t, HSA_STATUS_SUCCESS};
/// use std::ffi::c_void;
///
/// /// An `hsa_iterate_agents` callback collecting every agent.
/// unsafe extern "C" fn collect(agent: hsa_agent_t, data: *mut c_void) -> hsa_status_t {
///     // SAFETY: the caller passes a `Vec<hsa_agent_t>` as `data`.
///     unsafe { (*data.cast::<Vec<hsa_agent_t>>()).push(agent) };
///     HSA_STATUS_SUCCESS
/// }
/// let mut agents: Vec<hsa_agent_t> = Vec::new();
/// // SAFETY: as ROCr would call it, with the data it was given.
/// unsafe { collect(hsa_agent_t { handle: 0x10 }, (&raw mut agents).cast()) };
/// assert_eq!(agents, [hsa_agent_t { handle: 0x10 }]);
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct hsa_agent_t {
    /// Opaque handle.
    pub handle: u64,
}

/// A memory pool handle (`hsa_amd_memory_pool_t`): what
/// `hsa_amd_agent_iterate_memory_pools` lists and
/// `hsa_amd_memory_pool_allocate` allocates from.
///
/// ```
/// use hsa_sys::hsa_amd_memory_pool_t;
/// assert_eq!(std::mem::size_of::<hsa_amd_memory_pool_t>(), 8, "passed by value, as in C");
/// assert_eq!(hsa_amd_memory_pool_t::default().handle, 0);
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct hsa_amd_memory_pool_t {
    /// Opaque handle.
    pub handle: u64,
}

/// A memory region handle (`hsa_region_t`): the older interface to what
/// memory pools describe; ROCr's signatures still name it.
///
/// ```
/// assert_eq!(std::mem::size_of::<hsa_sys::hsa_region_t>(), 8);
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct hsa_region_t {
    /// Opaque handle.
    pub handle: u64,
}

/// The HDP flush registers of a GPU (`hsa_amd_hdp_flush_t`), as
/// `hsa_agent_get_info(HSA_AMD_AGENT_INFO_HDP_FLUSH)` returns them. Writing 1
/// to `HDP_MEM_FLUSH_CNTL` and reading it back makes host writes to the GPU's
/// memory visible to every GPU-side reader.
///
/// ```
/// use hsa_sys::hsa_amd_hdp_flush_t;
///
/// // What ROCr writes into the caller's buffer; here, memory standing in for
/// // the mapped registers.
/// let (mut mem, mut reg) = (0u32, 0u32);
/// let registers = hsa_amd_hdp_flush_t { HDP_MEM_FLUSH_CNTL: &raw mut mem, HDP_REG_FLUSH_CNTL: &raw mut reg };
/// // SAFETY: the pointer is valid; MMIO is written and read back volatilely.
/// unsafe {
///     registers.HDP_MEM_FLUSH_CNTL.write_volatile(1);
///     let _ = registers.HDP_MEM_FLUSH_CNTL.read_volatile();
/// }
/// assert_eq!(mem, 1);
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct hsa_amd_hdp_flush_t {
    /// Offset 0: the memory flush control register.
    pub HDP_MEM_FLUSH_CNTL: *mut u32,
    /// Offset 8: the register flush control register.
    pub HDP_REG_FLUSH_CNTL: *mut u32,
}

/// Start and end of a dispatch in the GPU's clock domain
/// (`hsa_amd_profiling_dispatch_time_t`).
///
/// ```
/// use hsa_sys::hsa_amd_profiling_dispatch_time_t;
/// let time = hsa_amd_profiling_dispatch_time_t { start: 1_000, end: 1_250 };
/// assert_eq!(time.end - time.start, 250, "ticks of the clock it was converted to");
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct hsa_amd_profiling_dispatch_time_t {
    /// Offset 0: start, in GPU ticks.
    pub start: u64,
    /// Offset 8: end, in GPU ticks.
    pub end: u64,
}

/// `hsa_system_info_t`: an attribute of `hsa_system_get_info`.
pub type hsa_system_info_t = u32;
/// `hsa_system_info_t` attribute: the current system timestamp (u64).
pub const HSA_SYSTEM_INFO_TIMESTAMP: hsa_system_info_t = 2;
/// `hsa_system_info_t` attribute: the system timestamp frequency in Hz (u64).
pub const HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY: hsa_system_info_t = 3;
/// `hsa_system_info_t` attribute: the longest signal wait, in timestamp ticks (u64).
pub const HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT: hsa_system_info_t = 4;

/// `hsa_device_type_t` values of `HSA_AGENT_INFO_DEVICE`.
pub type hsa_device_type_t = u32;
/// A CPU agent.
pub const HSA_DEVICE_TYPE_CPU: hsa_device_type_t = 0;
/// A GPU agent.
pub const HSA_DEVICE_TYPE_GPU: hsa_device_type_t = 1;

/// `hsa_agent_info_t`: an attribute of `hsa_agent_get_info`.
pub type hsa_agent_info_t = u32;
/// `hsa_agent_info_t` attribute: the agent name (NUL-terminated `char[64]`).
pub const HSA_AGENT_INFO_NAME: hsa_agent_info_t = 0;
/// `hsa_agent_info_t` attribute: the packet types the agent runs (`hsa_agent_feature_t` bits).
pub const HSA_AGENT_INFO_FEATURE: hsa_agent_info_t = 2;
/// `hsa_agent_info_t` attribute: the smallest queue size in packets (u32).
pub const HSA_AGENT_INFO_QUEUE_MIN_SIZE: hsa_agent_info_t = 13;
/// `hsa_agent_info_t` attribute: the largest queue size in packets (u32).
pub const HSA_AGENT_INFO_QUEUE_MAX_SIZE: hsa_agent_info_t = 14;
/// `hsa_agent_info_t` attribute: the queue type the agent supports (`hsa_queue_type32_t`).
pub const HSA_AGENT_INFO_QUEUE_TYPE: hsa_agent_info_t = 15;
/// `hsa_agent_info_t` attribute: the device type (`hsa_device_type_t`).
pub const HSA_AGENT_INFO_DEVICE: hsa_agent_info_t = 17;

/// `hsa_agent_feature_t`: bits of `HSA_AGENT_INFO_FEATURE`.
pub type hsa_agent_feature_t = u32;
/// The agent runs kernel dispatch packets (a kernel agent: it has AQL queues).
pub const HSA_AGENT_FEATURE_KERNEL_DISPATCH: hsa_agent_feature_t = 1;
/// The agent runs agent dispatch packets.
pub const HSA_AGENT_FEATURE_AGENT_DISPATCH: hsa_agent_feature_t = 2;

/// `hsa_amd_agent_info_t`: AMD attributes, passed to `hsa_agent_get_info` in
/// place of an `hsa_agent_info_t` (the two share one number space).
pub type hsa_amd_agent_info_t = u32;
/// `hsa_amd_agent_info_t` attribute: PCI bus/device/function id (u32; pairs
/// with `HSA_AMD_AGENT_INFO_DOMAIN`).
pub const HSA_AMD_AGENT_INFO_BDFID: hsa_amd_agent_info_t = 0xA006;
/// `hsa_amd_agent_info_t` attribute: the marketing name (NUL-terminated `char[64]`).
pub const HSA_AMD_AGENT_INFO_PRODUCT_NAME: hsa_amd_agent_info_t = 0xA009;
/// `hsa_amd_agent_info_t` attribute: the HDP flush registers ([`hsa_amd_hdp_flush_t`]).
pub const HSA_AMD_AGENT_INFO_HDP_FLUSH: hsa_amd_agent_info_t = 0xA00E;
/// `hsa_amd_agent_info_t` attribute: PCI domain (u32).
pub const HSA_AMD_AGENT_INFO_DOMAIN: hsa_amd_agent_info_t = 0xA00F;
/// `hsa_amd_agent_info_t` attribute: the device UUID, an ASCII string of at most
/// 21 bytes with its NUL (`"GPU-"` and 16 hex digits, or `"GPU-XX"` without one).
pub const HSA_AMD_AGENT_INFO_UUID: hsa_amd_agent_info_t = 0xA011;

/// `hsa_amd_memory_pool_info_t`: an attribute of `hsa_amd_memory_pool_get_info`.
pub type hsa_amd_memory_pool_info_t = u32;
/// `hsa_amd_memory_pool_info_t` attribute: the pool's segment (`hsa_amd_segment_t`).
pub const HSA_AMD_MEMORY_POOL_INFO_SEGMENT: hsa_amd_memory_pool_info_t = 0;
/// `hsa_amd_memory_pool_info_t` attribute: global flags (`HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_*`, u32).
pub const HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS: hsa_amd_memory_pool_info_t = 1;
/// `hsa_amd_memory_pool_info_t` attribute: pool size in bytes (`size_t`).
pub const HSA_AMD_MEMORY_POOL_INFO_SIZE: hsa_amd_memory_pool_info_t = 2;
/// `hsa_amd_memory_pool_info_t` attribute: whether `hsa_amd_memory_pool_allocate` may use the pool (bool).
pub const HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED: hsa_amd_memory_pool_info_t = 5;
/// `hsa_amd_memory_pool_info_t` attribute: allocation sizes are rounded up to a multiple of this (`size_t`).
pub const HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE: hsa_amd_memory_pool_info_t = 6;
/// `hsa_amd_memory_pool_info_t` attribute: the alignment of every allocation (`size_t`, a power of two).
pub const HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT: hsa_amd_memory_pool_info_t = 7;
/// `hsa_amd_memory_pool_info_t` attribute: whether every agent may access the pool (bool).
pub const HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL: hsa_amd_memory_pool_info_t = 15;
/// `hsa_amd_memory_pool_info_t` attribute: the largest total allocation in bytes (`size_t`).
pub const HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE: hsa_amd_memory_pool_info_t = 16;

/// `hsa_amd_segment_t`: the segment a memory pool belongs to.
pub type hsa_amd_segment_t = u32;
/// `hsa_amd_segment_t`: the global segment.
pub const HSA_AMD_SEGMENT_GLOBAL: hsa_amd_segment_t = 0;

/// `hsa_amd_memory_pool_global_flag_t`: bits of `HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS`.
pub type hsa_amd_memory_pool_global_flag_t = u32;
/// Global flag: kernel arguments may live here.
pub const HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT: hsa_amd_memory_pool_global_flag_t = 1;
/// Global flag: fine-grained (coherent) memory.
pub const HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED: hsa_amd_memory_pool_global_flag_t = 2;
/// Global flag: coarse-grained memory.
pub const HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED: hsa_amd_memory_pool_global_flag_t = 4;

/// `hsa_amd_agent_memory_pool_info_t`: an attribute of `hsa_amd_agent_memory_pool_get_info`.
pub type hsa_amd_agent_memory_pool_info_t = u32;
/// `hsa_amd_agent_memory_pool_info_t` attribute: how an agent may access a pool
/// (`hsa_amd_memory_pool_access_t`).
pub const HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS: hsa_amd_agent_memory_pool_info_t = 0;

/// `hsa_amd_memory_pool_access_t`: the value of `HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS`.
pub type hsa_amd_memory_pool_access_t = u32;
/// `hsa_amd_memory_pool_access_t`: the agent cannot access the pool.
pub const HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED: hsa_amd_memory_pool_access_t = 0;
/// `hsa_amd_memory_pool_access_t`: the agent can access the pool by default.
pub const HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT: hsa_amd_memory_pool_access_t = 1;
/// `hsa_amd_memory_pool_access_t`: the agent can access it once granted
/// (`hsa_amd_agents_allow_access`).
pub const HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT: hsa_amd_memory_pool_access_t = 2;
