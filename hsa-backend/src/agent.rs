//! A GPU: its agent and names, its queue limits, the memory pools signals
//! come from, whether the host can reach its VRAM (a large BAR), and its HDP
//! flush registers.

use crate::error::Error;
use crate::runtime::{Runtime, agent_info, agent_name, check};
use crate::visibility::HdpFlush;
use hsa_sys::*;
use std::ffi::c_void;
use std::sync::Arc;

/// A memory pool signal batches come from, and the agents that must be
/// granted access to each block allocated from it
/// (`hsa_amd_agents_allow_access`), because ROCr does not grant them by
/// default.
///
/// ```
/// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
/// let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
/// let vram = device.vram_pool().expect("a large-BAR GPU");
/// assert!(vram.fine_grained);
/// assert_eq!(vram.granule, 4096, "a batch of 64 signals fills one page");
/// assert!(vram.max_allocation >= 64 * 64);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryPool {
    handle: hsa_amd_memory_pool_t,
    /// Allocation sizes are rounded up to a multiple of this
    /// (`HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE`).
    pub granule: usize,
    /// Every allocation's alignment (`..._RUNTIME_ALLOC_ALIGNMENT`).
    pub alignment: usize,
    /// The largest allocation (`HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE`).
    pub max_allocation: usize,
    /// Fine-grained (coherent) memory.
    pub fine_grained: bool,
    grants: Vec<hsa_agent_t>,
}

impl MemoryPool {
    /// ROCr's handle.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let runtime = sigretire_hsa::Runtime::load_from(standin.library_path())?;
    /// # let device = runtime.device(0)?;
    /// use hsa_sys::{HSA_AMD_MEMORY_POOL_INFO_SEGMENT, HSA_AMD_SEGMENT_GLOBAL};
    ///
    /// let pool = device.vram_pool().unwrap();
    /// let mut segment = 0u32;
    /// // SAFETY: the runtime is initialised; the attribute is a 4-byte enum.
    /// let status = unsafe {
    ///     runtime.api().hsa_amd_memory_pool_get_info(pool.handle(), HSA_AMD_MEMORY_POOL_INFO_SEGMENT, (&raw mut segment).cast())
    /// };
    /// assert_eq!((status, segment), (0, HSA_AMD_SEGMENT_GLOBAL));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn handle(&self) -> hsa_amd_memory_pool_t {
        self.handle
    }

    /// The agents granted access to every block allocated from the pool.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let runtime = sigretire_hsa::Runtime::load_from(standin.library_path())?;
    /// # let device = runtime.device(0)?;
    /// // The host may reach VRAM through the large BAR only once granted;
    /// // system memory, every GPU that runs or waits on the signals.
    /// assert_eq!(device.vram_pool().unwrap().grants(), [runtime.cpu_agent()]);
    /// assert_eq!(device.system_pool().unwrap().grants(), [device.agent()]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn grants(&self) -> &[hsa_agent_t] {
        &self.grants
    }
}

/// A GPU agent, described once: cheap to clone and shared by the queues and
/// signal pools made for it.
///
/// ```
/// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config { large_bar: false, ..Default::default() })?;
/// let runtime = sigretire_hsa::Runtime::load_from(standin.library_path())?;
/// let device = runtime.device(0)?;
/// // Without a large BAR the host cannot store to VRAM: signals go to system memory.
/// assert!(!device.has_large_bar());
/// assert!(device.vram_pool().is_none());
/// assert!(device.system_pool().is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Agent {
    inner: Arc<AgentInner>,
}

struct AgentInner {
    runtime: Arc<Runtime>,
    agent: hsa_agent_t,
    index: usize,
    name: String,
    product_name: String,
    queue_sizes: (u32, u32),
    large_bar: bool,
    vram: Option<MemoryPool>,
    system: Option<MemoryPool>,
    hdp: Option<HdpFlush>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = &self.inner;
        f.debug_struct("Agent")
            .field("index", &d.index)
            .field("name", &d.name)
            .field("product_name", &d.product_name)
            .field("large_bar", &d.large_bar)
            .field("hdp_flush", &d.hdp.is_some())
            .finish_non_exhaustive()
    }
}

/// The agents a [`Runtime`] builds: here, next to what it builds, so that
/// the runtime does not name its agents.
impl Runtime {
    /// GPU `index` with its memory pools and flush registers.
    ///
    /// # Errors
    /// [`Error::NoSuchGpu`]; [`Error::Call`] if ROCr cannot describe it.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// use sigretire_hsa::{Error, Runtime};
    ///
    /// let runtime = Runtime::load_from(standin.library_path())?;
    /// let device = runtime.device(0)?;
    /// assert_eq!(device.index(), 0);
    /// assert_eq!(runtime.device(1).unwrap_err(), Error::NoSuchGpu { index: 1, count: 1 });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn device(self: &Arc<Self>, index: usize) -> Result<Agent, Error> {
        let Some(&agent) = self.gpu_agents().get(index) else {
            return Err(Error::NoSuchGpu {
                index,
                count: self.gpu_agents().len(),
            });
        };
        Agent::discover(self.clone(), agent, index)
    }
}

impl Agent {
    pub(crate) fn discover(
        runtime: Arc<Runtime>,
        agent: hsa_agent_t,
        index: usize,
    ) -> Result<Self, Error> {
        let api = runtime.api();
        let name = agent_name(api, agent, HSA_AGENT_INFO_NAME)?;
        let product_name = agent_name(api, agent, HSA_AMD_AGENT_INFO_PRODUCT_NAME)?;
        let queue_sizes = (
            agent_info(api, agent, HSA_AGENT_INFO_QUEUE_MIN_SIZE)?,
            agent_info(api, agent, HSA_AGENT_INFO_QUEUE_MAX_SIZE)?,
        );
        let peers: Vec<hsa_agent_t> = runtime
            .gpu_agents()
            .iter()
            .copied()
            .filter(|gpu| *gpu != agent)
            .collect();
        let cpu = runtime.cpu_agent();

        // VRAM: usable for signals only if the host can store to it.
        let mut large_bar = false;
        let mut vram = None;
        if let Some(pool) = choose(&candidates(api, agent)?, PoolUse::Vram) {
            let host = access(api, cpu, pool.handle)?;
            large_bar = host != HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED;
            if large_bar {
                let mut grants = Vec::new();
                for other in std::iter::once(cpu).chain(peers.iter().copied()) {
                    if access(api, other, pool.handle)?
                        == HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT
                    {
                        grants.push(other);
                    }
                }
                vram = Some(pool.with_grants(grants));
            }
        }

        // System memory: every GPU that may run or wait on the signals.
        let mut system = None;
        if let Some(pool) = choose(&candidates(api, cpu)?, PoolUse::System) {
            let mut grants = Vec::new();
            for gpu in std::iter::once(agent).chain(peers.iter().copied()) {
                if access(api, gpu, pool.handle)?
                    == HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT
                {
                    grants.push(gpu);
                }
            }
            system = Some(pool.with_grants(grants));
        }

        let mut registers = hsa_amd_hdp_flush_t {
            HDP_MEM_FLUSH_CNTL: std::ptr::null_mut(),
            HDP_REG_FLUSH_CNTL: std::ptr::null_mut(),
        };
        // SAFETY: the runtime is initialised; the attribute's value is an
        // `hsa_amd_hdp_flush_t`. A GPU without HDP registers (an APU) answers
        // an error, which means "no flush needed".
        let status = unsafe {
            api.hsa_agent_get_info(
                agent,
                HSA_AMD_AGENT_INFO_HDP_FLUSH,
                (&raw mut registers).cast(),
            )
        };
        let hdp = if status == HSA_STATUS_SUCCESS {
            // SAFETY: ROCr returned the GPU's mapped registers, valid until
            // hsa_shut_down; the `HdpFlush` lives in this device, which holds
            // the runtime.
            unsafe { HdpFlush::new(registers) }
        } else {
            None
        };

        Ok(Agent {
            inner: Arc::new(AgentInner {
                runtime,
                agent,
                index,
                name,
                product_name,
                queue_sizes,
                large_bar,
                vram,
                system,
                hdp,
            }),
        })
    }

    /// The runtime the device belongs to.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let runtime = sigretire_hsa::Runtime::load_from(standin.library_path())?;
    /// # let device = runtime.device(0)?;
    /// assert!(std::sync::Arc::ptr_eq(device.runtime(), &runtime));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.inner.runtime
    }

    /// ROCr's agent handle.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let runtime = sigretire_hsa::Runtime::load_from(standin.library_path())?;
    /// # let device = runtime.device(0)?;
    /// assert_eq!(device.agent(), runtime.gpu_agents()[0]);
    /// assert_ne!(device.agent(), runtime.cpu_agent());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn agent(&self) -> hsa_agent_t {
        self.inner.agent
    }

    /// The device's index among the runtime's GPUs.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let runtime = sigretire_hsa::Runtime::load_from(standin.library_path())?;
    /// # let device = runtime.device(0)?;
    /// assert_eq!(device.index(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn index(&self) -> usize {
        self.inner.index
    }

    /// `HSA_AGENT_INFO_NAME` (the ISA, such as `gfx942`).
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let runtime = sigretire_hsa::Runtime::load_from(standin.library_path())?;
    /// # let device = runtime.device(0)?;
    /// assert_eq!(device.name(), "gfx942"); // the stand-in's MI300X
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// `HSA_AMD_AGENT_INFO_PRODUCT_NAME`.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let runtime = sigretire_hsa::Runtime::load_from(standin.library_path())?;
    /// # let device = runtime.device(0)?;
    /// assert!(device.product_name().contains("MI300X"), "{}", device.product_name());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn product_name(&self) -> &str {
        &self.inner.product_name
    }

    /// The smallest and largest queue sizes, in packets.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let runtime = sigretire_hsa::Runtime::load_from(standin.library_path())?;
    /// # let device = runtime.device(0)?;
    /// let (min, max) = device.queue_size_limits();
    /// assert!(min.is_power_of_two() && max.is_power_of_two() && min <= max);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn queue_size_limits(&self) -> (u32, u32) {
        self.inner.queue_sizes
    }

    /// Whether the host reaches the GPU's VRAM through a large BAR: ROCr
    /// lets the CPU agent access the VRAM pool (`HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS`
    /// is not `NEVER_ALLOWED`), as CLR decides.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let runtime = sigretire_hsa::Runtime::load_from(standin.library_path())?;
    /// # let device = runtime.device(0)?;
    /// assert!(device.has_large_bar()); // see `Agent` for one without
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn has_large_bar(&self) -> bool {
        self.inner.large_bar
    }

    /// The VRAM pool device-memory signals come from: fine-grained when the
    /// GPU has one (the packet processor's decrements are then coherent), else
    /// coarse-grained. `None` without a large BAR.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let runtime = sigretire_hsa::Runtime::load_from(standin.library_path())?;
    /// # let device = runtime.device(0)?;
    /// assert!(device.vram_pool().is_some_and(|pool| pool.fine_grained));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn vram_pool(&self) -> Option<&MemoryPool> {
        self.inner.vram.as_ref()
    }

    /// The fine-grained system-memory pool host-memory signals come from.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let runtime = sigretire_hsa::Runtime::load_from(standin.library_path())?;
    /// # let device = runtime.device(0)?;
    /// let system = device.system_pool().unwrap();
    /// assert!(system.fine_grained, "coherent with the GPU's signal writes");
    /// assert_ne!(Some(system), device.vram_pool());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn system_pool(&self) -> Option<&MemoryPool> {
        self.inner.system.as_ref()
    }

    /// The HDP flush registers, if the GPU has them.
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let runtime = sigretire_hsa::Runtime::load_from(standin.library_path())?;
    /// # let device = runtime.device(0)?;
    /// device.hdp_flush().expect("a discrete GPU").flush();
    /// assert_eq!(standin.take_hdp_flush(0), Some(1), "1 written to HDP_MEM_FLUSH_CNTL");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hdp_flush(&self) -> Option<&HdpFlush> {
        self.inner.hdp.as_ref()
    }

    pub(crate) fn check(&self, call: &'static str, status: hsa_status_t) -> Result<(), Error> {
        self.inner.runtime.check(call, status)
    }

    pub(crate) fn api(&self) -> &HsaApi {
        self.inner.runtime.api()
    }
}

/// What a pool is wanted for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PoolUse {
    Vram,
    System,
}

/// A global pool the runtime may allocate from.
struct Candidate {
    handle: hsa_amd_memory_pool_t,
    flags: u32,
    granule: usize,
    alignment: usize,
    max_allocation: usize,
}

impl Candidate {
    fn with_grants(&self, grants: Vec<hsa_agent_t>) -> MemoryPool {
        MemoryPool {
            handle: self.handle,
            granule: self.granule.max(1),
            alignment: self.alignment.max(1),
            max_allocation: self.max_allocation,
            fine_grained: self.flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED != 0,
            grants,
        }
    }
}

/// The preferred pool for `purpose`: VRAM prefers fine-grained over
/// coarse-grained; system memory must be fine-grained (coherent with the
/// GPU's signal writes) and prefers a pool that is not the kernel-argument
/// pool, which is kept for its own purpose.
fn choose(candidates: &[Candidate], purpose: PoolUse) -> Option<&Candidate> {
    let fine = |c: &&Candidate| c.flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED != 0;
    let kernarg = |c: &&Candidate| c.flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT != 0;
    match purpose {
        PoolUse::Vram => candidates.iter().find(fine).or_else(|| candidates.first()),
        PoolUse::System => candidates
            .iter()
            .filter(fine)
            .find(|c| !kernarg(c))
            .or_else(|| candidates.iter().find(fine)),
    }
}

/// Collects pools into the `Vec<hsa_amd_memory_pool_t>` at `data`.
unsafe extern "C" fn collect_pool(pool: hsa_amd_memory_pool_t, data: *mut c_void) -> hsa_status_t {
    // SAFETY: `candidates` passes a live, exclusive Vec, and ROCr calls back
    // on the calling thread during the iteration.
    let pools = unsafe { &mut *data.cast::<Vec<hsa_amd_memory_pool_t>>() };
    pools.push(pool);
    HSA_STATUS_SUCCESS
}

/// The agent's global pools the runtime may allocate from.
fn candidates(api: &HsaApi, agent: hsa_agent_t) -> Result<Vec<Candidate>, Error> {
    let mut pools: Vec<hsa_amd_memory_pool_t> = Vec::new();
    // SAFETY: the runtime is initialised; the callback matches the data.
    let status = unsafe {
        api.hsa_amd_agent_iterate_memory_pools(agent, Some(collect_pool), (&raw mut pools).cast())
    };
    check(api, "hsa_amd_agent_iterate_memory_pools", status)?;
    let mut candidates = Vec::new();
    for handle in pools {
        let segment: hsa_amd_segment_t = pool_info(api, handle, HSA_AMD_MEMORY_POOL_INFO_SEGMENT)?;
        let allowed: bool = pool_info(api, handle, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED)?;
        if segment != HSA_AMD_SEGMENT_GLOBAL || !allowed {
            continue;
        }
        candidates.push(Candidate {
            handle,
            flags: pool_info(api, handle, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS)?,
            granule: pool_info(api, handle, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE)?,
            alignment: pool_info(
                api,
                handle,
                HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT,
            )?,
            max_allocation: pool_info(api, handle, HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE)?,
        });
    }
    Ok(candidates)
}

/// One plain-old-data attribute of a pool.
fn pool_info<T: Copy + Default>(
    api: &HsaApi,
    pool: hsa_amd_memory_pool_t,
    attribute: hsa_amd_memory_pool_info_t,
) -> Result<T, Error> {
    let mut value = T::default();
    // SAFETY: each caller pairs the attribute with its C type `T` (u32 enum
    // and flags, bool, size_t), and `value` is a `T`.
    let status =
        unsafe { api.hsa_amd_memory_pool_get_info(pool, attribute, (&raw mut value).cast()) };
    check(api, "hsa_amd_memory_pool_get_info", status)?;
    Ok(value)
}

/// How `agent` may access `pool`.
fn access(
    api: &HsaApi,
    agent: hsa_agent_t,
    pool: hsa_amd_memory_pool_t,
) -> Result<hsa_amd_memory_pool_access_t, Error> {
    let mut value: hsa_amd_memory_pool_access_t = HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED;
    // SAFETY: the runtime is initialised; the attribute is a 4-byte enum.
    let status = unsafe {
        api.hsa_amd_agent_memory_pool_get_info(
            agent,
            pool,
            HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS,
            (&raw mut value).cast(),
        )
    };
    check(api, "hsa_amd_agent_memory_pool_get_info", status)?;
    Ok(value)
}
