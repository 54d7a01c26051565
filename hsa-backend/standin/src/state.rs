//! The runtime the stand-in pretends to be: one reference-counted instance,
//! created by the first `hsa_init` and torn down by the last `hsa_shut_down`,
//! as ROCr's is. Every exported function reaches it through [`current`].
//!
//! Each copy of the library loaded from a distinct file has its own statics,
//! hence its own runtime: that is how [`Standin`](crate::Standin) gives every
//! test a machine of its own.

use crate::abi::{Config, StepOp, StepStatus};
use crate::checker::Checker;
use crate::machine::Machine;
use crate::memory::Memory;
use crate::queue::{QueueAdapter, QueueCallback, Queues};
use crate::violation::{Violation, ViolationKind, Violations};
use hsa_sys::{
    HSA_STATUS_ERROR_NOT_INITIALIZED, HSA_STATUS_SUCCESS, hsa_queue_t, hsa_signal_t, hsa_status_t,
};
use parking_lot::{Mutex, RwLock};
use sigretire_sim::{CostProfile, Mode, Sim, SimConfig};
use std::sync::Arc;
use std::time::Instant;

/// The runtime between `hsa_init` and `hsa_shut_down`.
pub(crate) struct Instance {
    pub(crate) config: Config,
    pub(crate) sim: Sim,
    pub(crate) machine: Machine,
    pub(crate) memory: Memory,
    pub(crate) queues: Queues,
    pub(crate) checker: Mutex<Checker>,
    /// Host flags that spinning kernels wait on (`rocr_standin_new_flag`),
    /// numbered from 1.
    pub(crate) flags: Mutex<Vec<sigretire_sim::HostFlag>>,
    /// Host actions the stand-in saw that would be bugs against ROCr or on
    /// the hardware (the simulator keeps its own list besides).
    violations: Violations,
    /// The origin of the system clock (`HSA_SYSTEM_INFO_TIMESTAMP`).
    epoch: Instant,
    /// The system time at which the simulator's GPU clock read 0.
    gpu_epoch_ns: u64,
}

/// The system clock counts nanoseconds from this value at `hsa_init`, so no
/// real timestamp is ever 0 (which means "not stamped" in a signal).
const SYSTEM_CLOCK_BASE_NS: u64 = 1_000_000_000;

/// `HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY` of the stand-in: 1 GHz.
pub(crate) const SYSTEM_TIMESTAMP_FREQUENCY: u64 = 1_000_000_000;

impl Instance {
    fn new(config: Config) -> Result<Self, String> {
        let epoch = Instant::now();
        let profile = if config.mi300x_costs {
            CostProfile::mi300x()
        } else {
            CostProfile::zero()
        };
        let gpu_epoch_ns = SYSTEM_CLOCK_BASE_NS + elapsed_ns(epoch);
        let sim = Sim::try_new(SimConfig {
            mode: if config.threaded {
                Mode::Threaded
            } else {
                Mode::Stepped
            },
            profile,
            // The simulator needs an agent even when no GPU is reported: system
            // memory is allocated on agent 0's books.
            agents: config.gpus.max(1),
            seed: config.seed,
        })
        .map_err(|error| error.to_string())?;
        // The stand-in keeps KFD's book of events itself (`Events`), giving
        // a destroyed signal's event back; the simulator's own budget, which
        // only counts down, must never be the one that runs out.
        sim.set_interrupt_budget(u32::MAX);
        let machine = Machine::new(&config);
        Ok(Self {
            memory: Memory::default(),
            queues: Queues::default(),
            checker: Mutex::new(Checker::default()),
            flags: Mutex::new(Vec::new()),
            violations: Violations::default(),
            config,
            sim,
            machine,
            epoch,
            gpu_epoch_ns,
        })
    }

    /// Records a host action that ROCr or the hardware would not forgive.
    pub(crate) fn violation(&self, kind: ViolationKind, text: String) {
        self.violations.record(kind, text);
    }

    /// The stand-in's violations followed by the simulator's.
    pub(crate) fn all_violations(&self) -> Vec<Violation> {
        let mut all = self.violations.all();
        all.extend(
            self.sim
                .violations()
                .iter()
                .map(|v| Violation::new(ViolationKind::of_simulator(v), format!("simulator: {v}"))),
        );
        all
    }

    /// `hsa_amd_memory_pool_free`, then the checker on the block released.
    pub(crate) fn free(&self, ptr: u64) -> hsa_status_t {
        match self.memory.free(&self.violations, ptr) {
            Ok(range) => {
                self.checker
                    .lock()
                    .on_release(&self.violations, "hsa_amd_memory_pool_free", range);
                HSA_STATUS_SUCCESS
            }
            Err(status) => status,
        }
    }

    /// `hsa_signal_destroy`, then the checker on the signal released.
    pub(crate) fn destroy_signal(&self, signal: hsa_signal_t) -> hsa_status_t {
        match self.memory.destroy_signal(&self.violations, signal) {
            Ok(range) => {
                self.checker
                    .lock()
                    .on_release(&self.violations, "hsa_signal_destroy", range);
                HSA_STATUS_SUCCESS
            }
            Err(status) => status,
        }
    }

    /// `hsa_queue_create` on GPU `gpu`.
    pub(crate) fn create_queue(
        &self,
        gpu: u32,
        size: u32,
        callback: QueueCallback,
        data: usize,
    ) -> *mut hsa_queue_t {
        self.queues.create(&self.config, gpu, size, callback, data)
    }

    /// `hsa_amd_profiling_set_profiler_enabled` on `queue`.
    pub(crate) fn set_profiling(&self, queue: &QueueAdapter, enabled: bool) {
        queue.set_profiling(&self.violations, enabled);
    }

    /// A doorbell write on `queue`, the checker seeing each packet fetched.
    pub(crate) fn ring_doorbell(&self, queue: &Arc<QueueAdapter>, value: i64) {
        queue.ring_doorbell(
            &self.sim,
            &self.violations,
            value,
            |queue, index, packet| {
                self.checker.lock().before_publish(
                    &self.memory,
                    &self.violations,
                    queue,
                    index,
                    packet,
                );
            },
        );
    }

    /// A step of the simulator's processor on `queue` (stepped mode).
    pub(crate) fn step(
        &self,
        queue: &QueueAdapter,
        op: StepOp,
        index: u64,
    ) -> Result<u64, StepStatus> {
        queue.step(&self.sim, &self.violations, op, index)
    }

    /// `HSA_SYSTEM_INFO_TIMESTAMP`: nanoseconds, from a nonzero base.
    pub(crate) fn system_now(&self) -> u64 {
        SYSTEM_CLOCK_BASE_NS + elapsed_ns(self.epoch)
    }

    /// A GPU tick in the system domain: the simulator's clock counts ticks of
    /// its profile's `gpu_tick` from its creation (real time when threaded,
    /// virtual when stepped), so the map is exact and linear. ROCr's own map
    /// is an interpolation between calibrated clock pairs; only its
    /// linearity matters to callers.
    pub(crate) fn gpu_to_system(&self, gpu_tick: u64) -> u64 {
        let tick_ns = u64::try_from(self.sim.profile().gpu_tick.as_nanos()).unwrap_or(1);
        self.gpu_epoch_ns
            .saturating_add(gpu_tick.saturating_mul(tick_ns))
    }

    /// Ends the instance (the last `hsa_shut_down`): destroys the queues it
    /// still has, as ROCr does, and notes what the application leaked.
    fn tear_down(&self) {
        let queues = self.queues.destroy_all();
        let allocations = self.memory.live_allocations();
        let signals = self.memory.live_signals();
        for (count, what) in [
            (queues, "queue(s) never destroyed"),
            (allocations, "pool allocation(s) never freed"),
            (signals, "signal(s) never destroyed"),
        ] {
            if count > 0 {
                self.violation(
                    ViolationKind::Leak,
                    format!("leak at hsa_shut_down: {count} {what}"),
                );
            }
        }
    }
}

fn elapsed_ns(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The process-wide state of this copy of the library.
struct Global {
    /// The machine the next `hsa_init` builds.
    config: Option<Config>,
    /// `hsa_init` calls not yet balanced.
    init_count: u64,
    instance: Option<Arc<Instance>>,
    /// The violations of instances already shut down.
    retired_violations: Vec<Violation>,
}

static GLOBAL: RwLock<Global> = RwLock::new(Global {
    config: None,
    init_count: 0,
    instance: None,
    retired_violations: Vec::new(),
});

/// The instance, if `hsa_init` succeeded and was not balanced yet.
pub(crate) fn current() -> Option<Arc<Instance>> {
    GLOBAL.read().instance.clone()
}

/// Runs `f` with the instance, or answers `HSA_STATUS_ERROR_NOT_INITIALIZED`.
pub(crate) fn with_instance(f: impl FnOnce(&Instance) -> hsa_status_t) -> hsa_status_t {
    match current() {
        Some(instance) => f(&instance),
        None => HSA_STATUS_ERROR_NOT_INITIALIZED,
    }
}

/// Sets the machine the next initialisation builds. Refused (false) while a
/// runtime exists: ROCr's topology is fixed at `hsa_init`.
pub(crate) fn configure(config: Config) -> bool {
    let mut global = GLOBAL.write();
    if global.instance.is_some() {
        return false;
    }
    global.config = Some(config);
    true
}

/// `hsa_init`: the first call builds the instance; later ones count.
pub(crate) fn init() -> hsa_status_t {
    let delay = GLOBAL.read().config.unwrap_or_default().init_delay_ms;
    std::thread::sleep(std::time::Duration::from_millis(delay));
    let mut global = GLOBAL.write();
    let config = global.config.unwrap_or_default();
    if config.init_status != HSA_STATUS_SUCCESS {
        return config.init_status;
    }
    if global.instance.is_none() {
        match Instance::new(config) {
            Ok(instance) => global.instance = Some(Arc::new(instance)),
            Err(_) => return hsa_sys::HSA_STATUS_ERROR_OUT_OF_RESOURCES,
        }
    }
    global.init_count += 1;
    HSA_STATUS_SUCCESS
}

/// `hsa_shut_down`: the last call tears the instance down.
pub(crate) fn shut_down() -> hsa_status_t {
    let instance = {
        let mut global = GLOBAL.write();
        if global.init_count == 0 {
            return HSA_STATUS_ERROR_NOT_INITIALIZED;
        }
        global.init_count -= 1;
        if global.init_count > 0 {
            return HSA_STATUS_SUCCESS;
        }
        global.instance.take()
    };
    if let Some(instance) = instance {
        // Outside the lock: destroying queues stops the simulator's work on
        // them, and the last `Arc` (here, unless a call is still running on
        // another thread) drops the simulator and joins its thread.
        instance.tear_down();
        let violations = instance.all_violations();
        GLOBAL.write().retired_violations.extend(violations);
        drop(instance);
    }
    HSA_STATUS_SUCCESS
}

/// Every violation so far: those of runtimes already shut down, then the
/// current one's.
pub(crate) fn violations() -> Vec<Violation> {
    let (mut all, instance) = {
        let global = GLOBAL.read();
        (global.retired_violations.clone(), global.instance.clone())
    };
    if let Some(instance) = instance {
        all.extend(instance.all_violations());
    }
    all
}

/// Records a violation with the current instance, or with the retired ones
/// when there is none (a call before `hsa_init` or after `hsa_shut_down`).
pub(crate) fn violation(kind: ViolationKind, text: String) {
    match current() {
        Some(instance) => instance.violation(kind, text),
        None => GLOBAL
            .write()
            .retired_violations
            .push(Violation::new(kind, text)),
    }
}

/// How many `hsa_init` calls are not balanced yet.
pub(crate) fn init_count() -> u64 {
    GLOBAL.read().init_count
}
