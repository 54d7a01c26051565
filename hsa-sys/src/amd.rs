//! AMD extension types: agents, memory pools, HDP flush registers, profiling.

/// An agent handle (`hsa_agent_t`): a CPU or GPU ROCr knows about.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct hsa_agent_t {
    /// Opaque handle.
    pub handle: u64,
}

/// A memory pool handle (`hsa_amd_memory_pool_t`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct hsa_amd_memory_pool_t {
    /// Opaque handle.
    pub handle: u64,
}

/// A memory region handle (`hsa_region_t`).
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
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct hsa_amd_profiling_dispatch_time_t {
    /// Offset 0: start, in GPU ticks.
    pub start: u64,
    /// Offset 8: end, in GPU ticks.
    pub end: u64,
}

/// `hsa_device_type_t` values of `HSA_AGENT_INFO_DEVICE`.
pub type hsa_device_type_t = u32;
/// A CPU agent.
pub const HSA_DEVICE_TYPE_CPU: hsa_device_type_t = 0;
/// A GPU agent.
pub const HSA_DEVICE_TYPE_GPU: hsa_device_type_t = 1;

/// `hsa_agent_info_t` attribute: the device type (`hsa_device_type_t`).
pub const HSA_AGENT_INFO_DEVICE: u32 = 17;
/// `hsa_agent_info_t` attribute: the agent name (64 bytes).
pub const HSA_AGENT_INFO_NAME: u32 = 0;
/// `hsa_agent_info_t` attribute: the largest queue size in packets (u32).
pub const HSA_AGENT_INFO_QUEUE_MAX_SIZE: u32 = 14;
/// `hsa_amd_agent_info_t` attribute: the HDP flush registers ([`hsa_amd_hdp_flush_t`]).
pub const HSA_AMD_AGENT_INFO_HDP_FLUSH: u32 = 0xA00E;
/// `hsa_system_info_t` attribute: the system timestamp frequency in Hz (u64).
pub const HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY: u32 = 3;

/// `hsa_amd_memory_pool_info_t` attribute: the pool's segment.
pub const HSA_AMD_MEMORY_POOL_INFO_SEGMENT: u32 = 0;
/// `hsa_amd_memory_pool_info_t` attribute: global flags (`HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_*`).
pub const HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS: u32 = 1;
/// `hsa_amd_memory_pool_info_t` attribute: pool size in bytes.
pub const HSA_AMD_MEMORY_POOL_INFO_SIZE: u32 = 2;
/// `hsa_amd_memory_pool_info_t` attribute: whether allocation is allowed.
pub const HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED: u32 = 5;
/// `hsa_amd_memory_pool_info_t` attribute: whether every agent may access the pool.
pub const HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL: u32 = 15;
/// `hsa_amd_agent_memory_pool_info_t` attribute: how an agent may access a pool.
pub const HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS: u32 = 0;
/// `hsa_amd_memory_pool_access_t`: the agent cannot access the pool.
pub const HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED: u32 = 0;
/// `hsa_amd_memory_pool_access_t`: the agent can access the pool by default.
pub const HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT: u32 = 1;
/// `hsa_amd_memory_pool_access_t`: the agent can access it once granted.
pub const HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT: u32 = 2;
/// `hsa_amd_segment_t`: the global segment.
pub const HSA_AMD_SEGMENT_GLOBAL: u32 = 0;
/// Global flag: kernel arguments may live here.
pub const HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT: u32 = 1;
/// Global flag: fine-grained (coherent) memory.
pub const HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED: u32 = 2;
/// Global flag: coarse-grained memory.
pub const HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED: u32 = 4;

/// `hsa_queue_create` feature: the queue records dispatch timestamps
/// (`hsa_amd_profiling_set_profiler_enabled`).
pub const HSA_QUEUE_FEATURE_KERNEL_DISPATCH: u32 = 1;
