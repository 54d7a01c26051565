//! The machine's topology: a CPU agent and the configured GPU agents, their
//! memory pools, which agent may reach which pool, and each GPU's HDP flush
//! registers. Everything here is fixed at `hsa_init`.
//!
//! Handles are opaque tagged indices (ROCr's are pointers to its own objects;
//! nothing may be assumed of them but identity).

use crate::abi::{Config, PoolKind};
use hsa_sys::*;
use std::sync::atomic::AtomicU32;

/// The tag in agent handles' top bits.
const AGENT_TAG: u64 = 0x0A6E_0000_0000_0000;
/// The tag in memory pool handles' top bits.
const POOL_TAG: u64 = 0x0900_0000_0000_0000;

/// `HSA_AGENT_INFO_QUEUE_MIN_SIZE`: 64 packets (4 KiB, a page of ring).
pub(crate) const QUEUE_MIN_SIZE: u32 = 64;
/// `HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE`: a 4 KiB page, as ROCr
/// reports for VRAM and system pools.
pub(crate) const POOL_GRANULE: usize = 4096;
/// `HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT` of the stand-in's pools:
/// blocks come from the simulator's signal batches, which are 64-byte aligned
/// (ROCr reports 4096; nothing the backend does depends on more than 64).
pub(crate) const POOL_ALIGNMENT: usize = 64;
/// `HSA_AMD_MEMORY_POOL_INFO_SIZE` of every pool: 64 GiB.
const POOL_SIZE: usize = 64 << 30;
/// `HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE`: what one allocation may hold,
/// bounded by the simulator's largest batch (2^20 signals of 64 bytes).
pub(crate) const POOL_ALLOC_MAX: usize = (1 << 20) * 64;

/// What an agent is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AgentKind {
    Cpu,
    /// The GPU with this index (the simulator's `AgentId`).
    Gpu(u32),
}

/// A memory pool.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pool {
    pub(crate) handle: u64,
    pub(crate) kind: PoolKind,
    /// The agent whose pools iteration lists it.
    pub(crate) owner: AgentKind,
}

/// A GPU's HDP flush registers: what `HSA_AMD_AGENT_INFO_HDP_FLUSH` points
/// at. On hardware they are MMIO registers whose write flushes the HDP; here
/// they are plain memory that remembers the last write, so a test can see that
/// the backend wrote through the pointers ROCr gave it.
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct HdpRegisters {
    pub(crate) mem_flush_cntl: AtomicU32,
    pub(crate) reg_flush_cntl: AtomicU32,
}

/// The agents and pools of one runtime instance.
pub(crate) struct Machine {
    config: Config,
    agents: Vec<AgentKind>,
    pools: Vec<Pool>,
    /// One pair per GPU, boxed so the addresses ROCr hands out stay put.
    hdp: Box<[HdpRegisters]>,
}

impl Machine {
    pub(crate) fn new(config: &Config) -> Self {
        let gpus = config.gpus.min(sigretire_sim::MAX_AGENTS);
        let mut agents = vec![AgentKind::Cpu];
        agents.extend((0..gpus).map(AgentKind::Gpu));
        let mut pools = Vec::new();
        let mut add_pool = |kind, owner| {
            let handle = POOL_TAG | pools.len() as u64;
            pools.push(Pool {
                handle,
                kind,
                owner,
            });
        };
        if config.system_pool {
            add_pool(PoolKind::System, AgentKind::Cpu);
        }
        if config.device_pool {
            for gpu in 0..gpus {
                add_pool(PoolKind::Device, AgentKind::Gpu(gpu));
            }
        }
        Self {
            config: *config,
            agents,
            pools,
            hdp: (0..gpus).map(|_| HdpRegisters::default()).collect(),
        }
    }

    pub(crate) fn agent_handles(&self) -> impl Iterator<Item = hsa_agent_t> + '_ {
        (0..self.agents.len()).map(|i| hsa_agent_t {
            handle: AGENT_TAG | i as u64,
        })
    }

    pub(crate) fn agent(&self, agent: hsa_agent_t) -> Option<AgentKind> {
        if agent.handle & !0xFFFF != AGENT_TAG {
            return None;
        }
        self.agents.get((agent.handle & 0xFFFF) as usize).copied()
    }

    pub(crate) fn pool(&self, pool: hsa_amd_memory_pool_t) -> Option<Pool> {
        if pool.handle & !0xFFFF != POOL_TAG {
            return None;
        }
        self.pools.get((pool.handle & 0xFFFF) as usize).copied()
    }

    pub(crate) fn pools_of(&self, agent: AgentKind) -> impl Iterator<Item = Pool> + '_ {
        self.pools.iter().copied().filter(move |p| p.owner == agent)
    }

    pub(crate) fn hdp(&self, gpu: u32) -> Option<&HdpRegisters> {
        self.hdp.get(gpu as usize)
    }

    /// `HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS`, following ROCr: an agent
    /// reaches its own memory by default; the CPU reaches system memory by
    /// default and VRAM only through a large BAR, once granted; a GPU reaches
    /// system memory and its peers' VRAM once granted.
    pub(crate) fn access(&self, agent: AgentKind, pool: Pool) -> hsa_amd_memory_pool_access_t {
        match (agent, pool.kind) {
            (AgentKind::Cpu, PoolKind::System) => HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT,
            (AgentKind::Cpu, PoolKind::Device) if self.config.large_bar => {
                HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT
            }
            (AgentKind::Cpu, PoolKind::Device) => HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED,
            (gpu, PoolKind::Device) if gpu == pool.owner => {
                HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT
            }
            (AgentKind::Gpu(_), _) => HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT,
        }
    }

    /// `hsa_agent_get_info`: writes the attribute's value to `value`.
    ///
    /// # Safety
    /// `value` must be valid for a write of the attribute's type (the
    /// caller's contract in `hsa.h`).
    pub(crate) unsafe fn agent_info(
        &self,
        agent: AgentKind,
        attribute: hsa_agent_info_t,
        value: *mut core::ffi::c_void,
    ) -> hsa_status_t {
        let gpu = match agent {
            AgentKind::Gpu(gpu) => Some(gpu),
            AgentKind::Cpu => None,
        };
        // SAFETY: for every write below, the caller guarantees `value` holds the
        // attribute's type; unaligned writes make no alignment assumption.
        unsafe {
            match attribute {
                HSA_AGENT_INFO_NAME => write_name(
                    value,
                    if gpu.is_some() {
                        "gfx942"
                    } else {
                        "standin-cpu"
                    },
                ),
                HSA_AMD_AGENT_INFO_PRODUCT_NAME => write_name(
                    value,
                    if gpu.is_some() {
                        "ROCr stand-in GPU (simulated MI300X)"
                    } else {
                        "ROCr stand-in CPU"
                    },
                ),
                HSA_AGENT_INFO_DEVICE => {
                    value
                        .cast::<hsa_device_type_t>()
                        .write_unaligned(match gpu {
                            Some(_) => HSA_DEVICE_TYPE_GPU,
                            None => HSA_DEVICE_TYPE_CPU,
                        })
                }
                HSA_AGENT_INFO_FEATURE => {
                    value
                        .cast::<hsa_agent_feature_t>()
                        .write_unaligned(match gpu {
                            Some(_) => HSA_AGENT_FEATURE_KERNEL_DISPATCH,
                            None => 0,
                        })
                }
                HSA_AGENT_INFO_QUEUE_MIN_SIZE => value.cast::<u32>().write_unaligned(match gpu {
                    Some(_) => QUEUE_MIN_SIZE,
                    None => 0,
                }),
                HSA_AGENT_INFO_QUEUE_MAX_SIZE => value.cast::<u32>().write_unaligned(match gpu {
                    Some(_) => sigretire_sim::MAX_QUEUE_SIZE,
                    None => 0,
                }),
                HSA_AGENT_INFO_QUEUE_TYPE => {
                    value.cast::<u32>().write_unaligned(HSA_QUEUE_TYPE_MULTI)
                }
                HSA_AMD_AGENT_INFO_BDFID => value
                    .cast::<u32>()
                    .write_unaligned(gpu.map_or(0, |g| (g + 1) << 8)),
                HSA_AMD_AGENT_INFO_DOMAIN => value.cast::<u32>().write_unaligned(0),
                HSA_AMD_AGENT_INFO_UUID => write_name(
                    value,
                    &match gpu {
                        Some(g) => format!("GPU-{:016x}", 0x5354_414E_4449_4E00_u64 | u64::from(g)),
                        None => "CPU-XX".to_owned(),
                    },
                ),
                HSA_AMD_AGENT_INFO_HDP_FLUSH => {
                    let registers = match gpu {
                        Some(g) if self.config.hdp_registers => self.hdp(g),
                        _ => None,
                    };
                    let Some(registers) = registers else {
                        return HSA_STATUS_ERROR_INVALID_ARGUMENT;
                    };
                    value
                        .cast::<hsa_amd_hdp_flush_t>()
                        .write_unaligned(hsa_amd_hdp_flush_t {
                            HDP_MEM_FLUSH_CNTL: registers.mem_flush_cntl.as_ptr(),
                            HDP_REG_FLUSH_CNTL: registers.reg_flush_cntl.as_ptr(),
                        });
                }
                _ => return HSA_STATUS_ERROR_INVALID_ARGUMENT,
            }
        }
        HSA_STATUS_SUCCESS
    }

    /// `hsa_amd_memory_pool_get_info`.
    ///
    /// # Safety
    /// As for [`Machine::agent_info`].
    pub(crate) unsafe fn pool_info(
        &self,
        pool: Pool,
        attribute: hsa_amd_memory_pool_info_t,
        value: *mut core::ffi::c_void,
    ) -> hsa_status_t {
        let flags = match pool.kind {
            PoolKind::Device => HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED,
            PoolKind::System => {
                HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED
                    | HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT
            }
        };
        // SAFETY: for every write below, as in `agent_info`.
        unsafe {
            match attribute {
                HSA_AMD_MEMORY_POOL_INFO_SEGMENT => value
                    .cast::<hsa_amd_segment_t>()
                    .write_unaligned(HSA_AMD_SEGMENT_GLOBAL),
                HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS => value.cast::<u32>().write_unaligned(flags),
                HSA_AMD_MEMORY_POOL_INFO_SIZE => value.cast::<usize>().write_unaligned(POOL_SIZE),
                HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED => {
                    value.cast::<bool>().write_unaligned(true)
                }
                HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE => {
                    value.cast::<usize>().write_unaligned(POOL_GRANULE)
                }
                HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT => {
                    value.cast::<usize>().write_unaligned(POOL_ALIGNMENT)
                }
                HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL => value
                    .cast::<bool>()
                    .write_unaligned(pool.kind == PoolKind::System || self.config.large_bar),
                HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE => {
                    value.cast::<usize>().write_unaligned(POOL_ALLOC_MAX)
                }
                _ => return HSA_STATUS_ERROR_INVALID_ARGUMENT,
            }
        }
        HSA_STATUS_SUCCESS
    }
}

/// Writes `name` as a NUL-terminated `char[64]`, truncated to fit.
///
/// # Safety
/// `value` must be valid for 64 bytes of writes.
unsafe fn write_name(value: *mut core::ffi::c_void, name: &str) {
    let mut buffer = [0u8; 64];
    let len = name.len().min(63);
    buffer[..len].copy_from_slice(&name.as_bytes()[..len]);
    // SAFETY: the caller guarantees 64 writable bytes.
    unsafe { value.cast::<[u8; 64]>().write_unaligned(buffer) }
}
