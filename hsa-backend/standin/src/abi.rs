//! The C types of the stand-in's control interface (`rocr_standin_*`), shared
//! by the exporting side (`control.rs`, inside the loaded library) and the
//! calling side ([`Standin`](crate::Standin), in the test process).
//!
//! Both sides are compiled from this one file, and every call that passes a
//! struct also passes its size, so a library built from other sources is
//! refused instead of misread.

/// How the stand-in builds the machine it pretends to be, fixed at `hsa_init`
/// ([`Standin::new`](crate::Standin::new) applies it before anything else).
///
/// ```
/// let config = sigretire_rocr_standin::Config { gpus: 2, large_bar: false, ..Default::default() };
/// assert!(config.threaded && config.device_pool);
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// GPU agents (0 to 63). With 0, ROCr still initialises but reports only
    /// the CPU agent, as it does on a machine whose GPU driver found no device.
    pub gpus: u32,
    /// `true`: the simulator's processor thread runs queues in real time.
    /// `false`: stepped, nothing happens until a test steps a queue
    /// ([`QueueControl`](crate::QueueControl)).
    pub threaded: bool,
    /// Charge the MI300X cost profile (1.1 us PCIe reads, launch latencies)
    /// instead of free operations.
    pub mi300x_costs: bool,
    /// Each GPU has a VRAM pool.
    pub device_pool: bool,
    /// The host can reach VRAM through a large BAR: the CPU agent's access to
    /// the VRAM pool is `DISALLOWED_BY_DEFAULT` (granted by
    /// `hsa_amd_agents_allow_access`) instead of `NEVER_ALLOWED`.
    pub large_bar: bool,
    /// The CPU agent has a fine-grained system-memory pool.
    pub system_pool: bool,
    /// `HSA_AMD_AGENT_INFO_HDP_FLUSH` answers with flush registers.
    pub hdp_registers: bool,
    /// Queues' rings live in VRAM (the simulator's visibility rules follow).
    pub ring_in_device_memory: bool,
    /// Non-barrier packets may complete out of order.
    pub out_of_order: bool,
    /// The status `hsa_init` returns (`HSA_STATUS_SUCCESS` to initialise).
    pub init_status: u32,
    /// How long `hsa_init` takes, in milliseconds (a wedged driver).
    pub init_delay_ms: u64,
    /// Seeds the threaded processor's choices.
    pub seed: u64,
    /// How many finished packets per queue keep their ground truth.
    pub truth_history: u64,
}

impl Default for Config {
    /// One large-BAR GPU with VRAM, system memory and HDP registers; threaded,
    /// free operations, rings in VRAM, in-order queues.
    fn default() -> Self {
        Self {
            gpus: 1,
            threaded: true,
            mi300x_costs: false,
            device_pool: true,
            large_bar: true,
            system_pool: true,
            hdp_registers: true,
            ring_in_device_memory: true,
            out_of_order: false,
            init_status: 0,
            init_delay_ms: 0,
            seed: 0,
            truth_history: 1 << 14,
        }
    }
}

impl Config {
    /// The default machine in stepped mode: the test drives every packet.
    pub fn stepped() -> Self {
        Self {
            threaded: false,
            ..Self::default()
        }
    }
}

/// A step of the packet processor on one queue (`rocr_standin_queue_step`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepOp {
    /// Launch the next packet in order; answers its index.
    Launch = 1,
    /// Complete launched packet `index`.
    Complete = 2,
    /// Consume the packet at the read index; answers the new read index.
    AdvanceReadIndex = 3,
    /// Run until nothing can progress (all queues of the simulator).
    RunUntilIdle = 4,
    /// Fail the queue: ROCr calls the queue's error callback.
    Fail = 5,
    /// Stall the queue (no progress until unstalled).
    Stall = 6,
    /// Let a stalled queue progress again.
    Unstall = 7,
}

/// Why a step did not happen (the simulator's `StepError`, flattened).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StepStatus {
    /// It happened.
    Done = 0,
    /// The next packet cannot launch yet.
    NotLaunchable = 1,
    /// The packet has not launched.
    NotLaunched = 2,
    /// Its completion condition does not hold yet.
    NotReady = 3,
    /// An in-order queue completes its oldest packet first.
    OutOfOrder = 4,
    /// Already complete.
    AlreadyComplete = 5,
    /// The queue failed.
    QueueFailed = 6,
    /// The packet was malformed; launching it failed the queue.
    Malformed = 7,
    /// The queue is stalled.
    Stalled = 8,
    /// A step on a threaded stand-in.
    WrongMode = 9,
    /// The queue pointer is not a live queue of this stand-in.
    UnknownQueue = 10,
    /// No runtime: `hsa_init` has not succeeded.
    NotInitialized = 11,
}

impl StepStatus {
    pub(crate) fn from_raw(raw: u32) -> Self {
        use StepStatus::*;
        [
            Done,
            NotLaunchable,
            NotLaunched,
            NotReady,
            OutOfOrder,
            AlreadyComplete,
            QueueFailed,
            Malformed,
            Stalled,
            WrongMode,
            UnknownQueue,
            NotInitialized,
        ]
        .into_iter()
        .find(|status| *status as u32 == raw)
        .unwrap_or(UnknownQueue)
    }
}

/// The ground truth of one packet (the simulator's `PacketTruth`), with the
/// timestamps in GPU ticks.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Truth {
    /// The packet's AQL index.
    pub index: u64,
    /// The completion signal it names.
    pub completion_signal: u64,
    /// Its launch, in GPU ticks (valid when `launched`).
    pub start_ts: u64,
    /// Its completion, in GPU ticks (valid when `completed`).
    pub end_ts: u64,
    /// Bits 0-7 of the header.
    pub packet_type: u8,
    /// The barrier bit.
    pub barrier: bool,
    /// Reached the packet processor.
    pub published: bool,
    /// Launched.
    pub launched: bool,
    /// Completed: its completion signal was decremented.
    pub completed: bool,
    /// Failed with its queue.
    pub failed: bool,
    /// The packet's 64 bytes as the packet processor fetched them
    /// (`hsa_sys::PacketWords`; all zeros while unpublished).
    pub packet: [u32; 16],
}

impl Truth {
    /// Completed or failed.
    pub fn is_done(&self) -> bool {
        self.completed || self.failed
    }
}

/// The simulator's counters of host accesses made through ROCr calls (the
/// backend's direct loads and stores of its own signals are not seen).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimCounters {
    /// Loads of host-memory signals.
    pub host_loads: u64,
    /// Stores to host-memory signals.
    pub host_stores: u64,
    /// Loads of device-memory signals.
    pub device_loads: u64,
    /// Stores to device-memory signals.
    pub device_stores: u64,
}

/// What the interrupt signals did: ROCr's signals are interrupt signals
/// (an event mailbox each, holding one of KFD's 4094 events until the
/// signal is destroyed) unless made with `HSA_AMD_SIGNAL_AMD_GPU_ONLY` or
/// while every event is held.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InterruptCounters {
    /// Signals made with an event.
    pub created: u64,
    /// Signals that asked for one past the budget and poll instead.
    pub degraded: u64,
    /// Interrupt signals alive, each holding one of the process's events
    /// until `hsa_signal_destroy` gives it back.
    pub live: u64,
    /// Writes to interrupt signals that woke their sleepers.
    pub wakes: u64,
    /// Times a thread went to sleep in `hsa_signal_wait_scacquire`.
    pub sleeps: u64,
}

/// The memory pools the stand-in offers.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoolKind {
    /// A GPU's VRAM.
    Device = 0,
    /// Fine-grained system memory (the CPU agent's pool).
    System = 1,
}

/// What the stand-in knows about one `hsa_amd_memory_pool_allocate` block.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocationInfo {
    /// Bytes handed out (the request rounded up to the pool's granule).
    pub bytes: u64,
    /// 0: VRAM of a GPU, 1: system memory.
    pub pool_kind: u32,
    /// The owning GPU (for VRAM).
    pub gpu: u32,
    /// `hsa_amd_agents_allow_access` granted the CPU agent.
    pub cpu_access: bool,
    /// ... and every GPU agent (for system memory).
    pub gpu_access: bool,
    /// `hsa_amd_memory_pool_free` was called.
    pub freed: bool,
}

/// Live objects of the runtime, for leak checks.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Census {
    /// `hsa_init` calls not yet balanced by `hsa_shut_down`.
    pub init_count: u64,
    /// Pool allocations not freed.
    pub allocations: u64,
    /// Signals from `hsa_signal_create`/`hsa_amd_signal_create` not destroyed.
    pub signals: u64,
    /// Queues not destroyed.
    pub queues: u64,
}

/// What a kernel registered with `rocr_standin_register_kernel` does.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelKind {
    /// Completes at once (stepped: when the test completes it).
    Empty = 0,
    /// Runs for the given nanoseconds in threaded mode.
    Duration = 1,
    /// Spins until a host flag (`rocr_standin_new_flag`) is set.
    SpinUntilFlag = 2,
}

/// An answer of success with a result a real ROCr would not give, injected
/// with [`Standin::malform`](crate::Standin::malform) to exercise a caller's
/// checks of what ROCr returns.
///
/// ```
/// use hsa_sys::{HsaApi, HSA_QUEUE_TYPE_MULTI, hsa_agent_t, hsa_queue_t};
/// use sigretire_rocr_standin::{Config, Malformed, Standin};
///
/// unsafe extern "C" fn last(agent: hsa_agent_t, data: *mut std::ffi::c_void) -> u32 {
///     // SAFETY: `data` is the agent below.
///     unsafe { *data.cast::<hsa_agent_t>() = agent };
///     0
/// }
/// let standin = Standin::new(Config::default())?;
/// standin.malform(Malformed::QueueWithoutRing, 1);
/// let api = HsaApi::load_from(standin.library_path())?;
/// let (mut gpu, mut queue) = (hsa_agent_t::default(), std::ptr::null_mut::<hsa_queue_t>());
/// // SAFETY: plain calls; the callback matches its data; `queue` is a place for the queue.
/// unsafe {
///     api.check_status(api.hsa_init())?;
///     api.hsa_iterate_agents(Some(last), (&raw mut gpu).cast()); // the GPU comes last
///     let status = api.hsa_queue_create(gpu, 64, HSA_QUEUE_TYPE_MULTI, None, std::ptr::null_mut(), 0, 0, &raw mut queue);
///     assert_eq!(status, 0, "success...");
///     assert!((*queue).base_address.is_null(), "...with a queue that has no ring");
///     api.hsa_queue_destroy(queue);
///     api.hsa_shut_down();
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Malformed {
    /// `hsa_queue_create` succeeds but writes a null queue.
    QueueNull = 0,
    /// `hsa_queue_create` makes a queue whose descriptor has no ring (a null
    /// `base_address`); the queue exists and must be destroyed.
    QueueWithoutRing = 1,
    /// `hsa_amd_memory_pool_allocate` succeeds but writes a null pointer.
    AllocationNull = 2,
    /// `hsa_amd_memory_pool_allocate` returns a block 32 bytes past a 64-byte
    /// boundary; the block exists and must be freed (at that address).
    AllocationMisaligned = 3,
    /// `hsa_iterate_agents` leaves out the CPU agent.
    NoCpuAgent = 4,
    /// `hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY)` answers 0.
    ZeroTimestampFrequency = 5,
}

impl Malformed {
    /// Every kind, in value order.
    pub const ALL: [Malformed; 6] = [
        Malformed::QueueNull,
        Malformed::QueueWithoutRing,
        Malformed::AllocationNull,
        Malformed::AllocationMisaligned,
        Malformed::NoCpuAgent,
        Malformed::ZeroTimestampFrequency,
    ];

    pub(crate) fn from_raw(raw: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| *kind as u32 == raw)
    }
}
