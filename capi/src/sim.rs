//! The simulator backend: a software AQL packet processor with simulated
//! signal memory, so a C program can run the tracker with no GPU, and
//! drive the "GPU" itself (stepped mode: nothing runs until it says so).

use crate::engine::{CQueue, queue_failure};
use crate::registry::{self, Kind};
use crate::status::*;
use crate::tracker::{
    Backend, build, created_failure, give, require_backend, sigretire_tracker, tracker_ref,
};
use crate::types::*;
use ::sigretire_sim::backend::{STEPPED_QUEUE_SIZE, SimMemory};
use ::sigretire_sim::{
    CostProfile, HostFlag, Kernel, MAX_QUEUE_SIZE, Mode, Placement as SimPlacement, Queue, Sim,
    SimConfig, SimQueueConfig,
};
use ::sigretire_tracker::{
    CreateError, Tracker, Work,
    backend::{HardwareQueue, Publication},
};
use hsa_sys::PacketWords;
use parking_lot::Mutex;
use std::sync::Arc;

impl CQueue for Queue {
    fn reserve_slot(&self) -> Outcome<u64> {
        HardwareQueue::reserve(self).or_else(queue_failure)
    }

    fn publish_work(&self, publication: Publication, work: Work<'_>) -> Outcome {
        HardwareQueue::publish(self, publication, work).or_else(queue_failure)
    }

    fn may_move_to(&self, other: &Self) -> bool {
        self.sim().id() == other.sim().id()
    }
}

/// `sigretire_sim_options.flags`: a processor thread drives every queue in
/// real time (otherwise stepped: nothing runs until
/// `sigretire_sim_run_until_idle`).
pub const SIGRETIRE_SIM_THREADED: u32 = 1;
/// `sigretire_sim_options.flags`: rings in system memory (device-memory
/// signal stores then need an HDP flush before publication).
pub const SIGRETIRE_SIM_RING_IN_HOST_MEMORY: u32 = 2;
/// `sigretire_sim_options.flags`: the processor writes no timestamps.
pub const SIGRETIRE_SIM_UNPROFILED: u32 = 4;
/// `sigretire_sim_options.flags`: packets without the barrier bit may
/// complete in any order once launched.
pub const SIGRETIRE_SIM_OUT_OF_ORDER: u32 = 8;
const SIM_FLAGS: u32 = SIGRETIRE_SIM_THREADED
    | SIGRETIRE_SIM_RING_IN_HOST_MEMORY
    | SIGRETIRE_SIM_UNPROFILED
    | SIGRETIRE_SIM_OUT_OF_ORDER;

/// `sigretire_sim_options.costs`: every operation is free (the default).
pub const SIGRETIRE_SIM_COSTS_ZERO: u32 = 0;
/// `sigretire_sim_options.costs`: MI300X-like costs (a device-memory load
/// 1.1 us, busy-waited on the calling thread).
pub const SIGRETIRE_SIM_COSTS_MI300X: u32 = 1;

/// The most queues one simulator handle makes.
pub const SIGRETIRE_SIM_MAX_QUEUES: u32 = 16;

/// How `sigretire_sim_create` builds a simulated GPU: one agent with
/// `queues` AQL queues, numbered from 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct sigretire_sim_options {
    /// `sizeof` this struct, set by the caller before every call that
    /// takes it (`SIGRETIRE_ERR_STRUCT_SIZE` otherwise): `sigretire_sim_options_default` needs it too.
    pub size: u32,
    /// How many queues, 1 to `SIGRETIRE_SIM_MAX_QUEUES` (0 is taken as 1).
    pub queues: u32,
    /// Packets per ring: a power of two from 2 to 131072 (0: 16384).
    pub queue_size: u32,
    /// `SIGRETIRE_SIM_*` flag bits.
    pub flags: u32,
    /// `SIGRETIRE_SIM_COSTS_ZERO` or `SIGRETIRE_SIM_COSTS_MI300X`.
    pub costs: u32,
}

impl Default for sigretire_sim_options {
    fn default() -> Self {
        Self {
            size: size_of::<Self>() as u32,
            queues: 1,
            queue_size: STEPPED_QUEUE_SIZE,
            flags: 0,
            costs: SIGRETIRE_SIM_COSTS_ZERO,
        }
    }
}

sized_structs!(sigretire_sim_options);
caller_filled!(sigretire_sim_options);

/// A simulated GPU system (opaque): signal memory, AQL queues and a packet
/// processor, stepped or threaded. Made by `sigretire_sim_create`,
/// destroyed by `sigretire_sim_destroy`; trackers made on it keep what
/// they need of it alive after that.
///
/// Thread safety: every function on it may be called from any thread,
/// concurrently, except `sigretire_sim_destroy` (the last call).
pub struct sigretire_sim {
    sim: Sim,
    queues: Vec<Queue>,
    /// The gated kernels' objects and gates
    /// (`sigretire_sim_register_gated_kernel`).
    gates: Mutex<Vec<(u64, HostFlag)>>,
}

/// The simulator behind `ptr`, checked.
///
/// # Safety
/// A `sigretire_sim` handle in the table of live handles is a live
/// simulator, not destroyed while the call runs (the caller's contract).
pub(crate) unsafe fn sim_ref<'a>(ptr: *const sigretire_sim) -> Outcome<&'a sigretire_sim> {
    registry::check(ptr, Kind::Sim, "sim")?;
    // SAFETY: a live handle (the table says so; nothing of `ptr` was read
    // before it did), not destroyed while this call runs (contract).
    Ok(unsafe { &*ptr })
}

impl sigretire_sim {
    /// The simulator.
    pub(crate) fn simulator(&self) -> &Sim {
        &self.sim
    }

    fn queue(&self, queue: u32) -> Outcome<&Queue> {
        match self.queues.get(queue as usize) {
            Some(q) => Ok(q),
            None => fail(
                SIGRETIRE_ERR_INVALID_ARGUMENT,
                format!(
                    "queue {queue}: this simulator has {} queue(s), numbered from 0",
                    self.queues.len()
                ),
            ),
        }
    }
}

/// The default options: one stepped, profiled queue of 16384 packets, its
/// ring in device memory, in-order completion, zero costs.
///
/// Thread safety: any thread.
///
/// # Safety
/// `options` points to a writable `sigretire_sim_options`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_sim_options_default(
    options: *mut sigretire_sim_options,
) -> sigretire_status {
    guard("sigretire_sim_options_default", || {
        // SAFETY: forwarded caller guarantee.
        unsafe { StructOut::new(options, "options") }?.write(sigretire_sim_options::default());
        Ok(())
    })
}

/// Creates a simulated GPU with the queues `options` asks for (`options`
/// may be NULL: the defaults).
///
/// Thread safety: any thread.
///
/// # Safety
/// `options` is NULL or readable; `sim` points to a writable handle variable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_sim_create(
    options: *const sigretire_sim_options,
    sim: *mut *mut sigretire_sim,
) -> sigretire_status {
    guard("sigretire_sim_create", || {
        let out = Out::new(sim, "sim")?;
        // SAFETY: forwarded caller guarantee.
        let options =
            unsafe { read_optional_struct(options, "options", sigretire_sim_options::default) }?;
        if options.flags & !SIM_FLAGS != 0 {
            return fail(
                SIGRETIRE_ERR_INVALID_ARGUMENT,
                format!("sim flags {:#x} has unknown bits", options.flags),
            );
        }
        let profile = match options.costs {
            SIGRETIRE_SIM_COSTS_ZERO => CostProfile::zero(),
            SIGRETIRE_SIM_COSTS_MI300X => CostProfile::mi300x(),
            other => {
                return fail(
                    SIGRETIRE_ERR_INVALID_ARGUMENT,
                    format!("sim costs {other}: SIGRETIRE_SIM_COSTS_ZERO (0) or _MI300X (1)"),
                );
            }
        };
        let count = options.queues.max(1);
        if count > SIGRETIRE_SIM_MAX_QUEUES {
            return fail(
                SIGRETIRE_ERR_INVALID_ARGUMENT,
                format!("{count} queues: at most {SIGRETIRE_SIM_MAX_QUEUES}"),
            );
        }
        let size = match options.queue_size {
            0 => STEPPED_QUEUE_SIZE,
            n if n.is_power_of_two() && (2..=MAX_QUEUE_SIZE).contains(&n) => n,
            n => {
                return fail(
                    SIGRETIRE_ERR_INVALID_ARGUMENT,
                    format!("queue_size {n}: a power of two from 2 to {MAX_QUEUE_SIZE}"),
                );
            }
        };
        let mode = if options.flags & SIGRETIRE_SIM_THREADED != 0 {
            Mode::Threaded
        } else {
            Mode::Stepped
        };
        let made = Sim::try_new(SimConfig {
            mode,
            profile,
            ..SimConfig::default()
        });
        let simulator = match made {
            Ok(sim) => sim,
            Err(error) => return fail(SIGRETIRE_ERR_BACKEND, error.to_string()),
        };
        let config = SimQueueConfig {
            size,
            ring: if options.flags & SIGRETIRE_SIM_RING_IN_HOST_MEMORY != 0 {
                SimPlacement::Host
            } else {
                SimPlacement::Device
            },
            profiling: options.flags & SIGRETIRE_SIM_UNPROFILED == 0,
            out_of_order: options.flags & SIGRETIRE_SIM_OUT_OF_ORDER != 0,
            ..SimQueueConfig::default()
        };
        let mut queues = Vec::new();
        for _ in 0..count {
            match simulator.create_queue(config) {
                Ok(queue) => queues.push(queue),
                Err(error) => return fail(SIGRETIRE_ERR_BACKEND, error.to_string()),
            }
        }
        let handle = Box::into_raw(Box::new(sigretire_sim {
            sim: simulator,
            queues,
            gates: Mutex::new(Vec::new()),
        }));
        registry::register(handle, Kind::Sim);
        out.write(handle);
        Ok(())
    })
}

/// Destroys the simulator handle and sets `*sim` to NULL (a NULL `*sim` is
/// a no-op). Trackers made on it keep working: they hold their queue and
/// memory.
///
/// Thread safety: the last call on this handle.
///
/// # Safety
/// `sim` points to a variable holding NULL or a live simulator handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_sim_destroy(sim: *mut *mut sigretire_sim) -> sigretire_status {
    guard("sigretire_sim_destroy", || {
        check_pointer(sim.cast_const(), "sim")?;
        // SAFETY: checked; the caller's variable.
        let handle = unsafe { *sim };
        if handle.is_null() {
            return Ok(());
        }
        // Out of the table first: of two calls destroying the same handle,
        // only the one that took it out frees it.
        registry::unregister(handle.cast_const(), Kind::Sim, "*sim")?;
        // SAFETY: a live handle from `Box::into_raw` (the table said so),
        // now out of the table, used by nothing else (contract): freed
        // once, here; the caller's variable cleared.
        unsafe {
            *sim = std::ptr::null_mut();
            drop(Box::from_raw(handle));
        }
        Ok(())
    })
}

/// Creates a tracker for simulated queue `queue` whose signals live in the
/// simulator's memory (`config` may be NULL: the defaults).
///
/// Thread safety: any thread.
///
/// # Safety
/// `sim` is a live simulator; `config` is NULL or readable; `tracker`
/// points to a writable handle variable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_sim_tracker_create(
    sim: *const sigretire_sim,
    queue: u32,
    config: *const sigretire_config,
    tracker: *mut *mut sigretire_tracker,
) -> sigretire_status {
    guard("sigretire_sim_tracker_create", || {
        let out = Out::new(tracker, "tracker")?;
        // SAFETY: forwarded caller guarantees.
        let config =
            unsafe { read_optional_struct(config, "config", sigretire_config::default_values) }?;
        let settings = config.to_rust()?;
        // SAFETY: as above.
        let sim = unsafe { sim_ref(sim) }?;
        let queue = sim.queue(queue)?.clone();
        let memory = Arc::new(SimMemory::new(sim.sim.clone(), queue.agent()));
        give(
            out,
            build(memory, queue, settings, Backend::Sim(sim.sim.id()))?,
        );
        Ok(())
    })
}

/// [`sigretire_sim_tracker_create`] for a tracker the caller makes itself
/// (`make`), on the simulator's memory and its queue `queue`: a C handle
/// over any tracker of the simulator, for Rust code that hands C a tracker
/// it built (this library's tests hand it the baseline tracker they compare
/// with, and retiring trackers whose generation counter they narrow). A
/// generic Rust function, no part of the C ABI.
///
/// # Safety
/// As [`sigretire_sim_tracker_create`]'s: `sim` is a live simulator,
/// `tracker` points to a writable handle variable.
#[doc(hidden)]
pub unsafe fn sigretire_sim_tracker_create_with<T>(
    sim: *const sigretire_sim,
    queue: u32,
    make: impl FnOnce(Arc<SimMemory>, ::sigretire_sim::Queue) -> Result<T, CreateError>,
    tracker: *mut *mut sigretire_tracker,
) -> sigretire_status
where
    T: Tracker<Memory = SimMemory, Queue = ::sigretire_sim::Queue> + 'static,
{
    guard("sigretire_sim_tracker_create_with", || {
        let out = Out::new(tracker, "tracker")?;
        // SAFETY: forwarded caller guarantees.
        let sim = unsafe { sim_ref(sim) }?;
        let queue = sim.queue(queue)?.clone();
        let memory = Arc::new(SimMemory::new(sim.sim.clone(), queue.agent()));
        let made = make(memory, queue).or_else(created_failure)?;
        give(
            out,
            sigretire_tracker::from_tracker(made, Backend::Sim(sim.sim.id())),
        );
        Ok(())
    })
}

/// Moves a simulator tracker to another queue of the same simulator (the
/// runtime moved its stream): a new generation begins. Publish every slot
/// reserved on the old queue first: from now on the tracker publishes on
/// the new queue, and `sigretire_tracker_publish` refuses a use acquired
/// before the change (`SIGRETIRE_ERR_INVALID_STATE`).
///
/// Thread safety: takes the tracker's lock.
///
/// # Safety
/// `tracker` is a live tracker, `sim` a live simulator.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_sim_note_queue_change(
    tracker: *mut sigretire_tracker,
    sim: *const sigretire_sim,
    queue: u32,
) -> sigretire_status {
    guard("sigretire_sim_note_queue_change", || {
        // SAFETY: forwarded caller guarantees.
        let tracker = unsafe { tracker_ref(tracker) }?;
        // SAFETY: as above.
        let sim = unsafe { sim_ref(sim) }?;
        require_backend(tracker, "this simulator", |b| {
            b == Backend::Sim(sim.sim.id())
        })?;
        let queue = sim.queue(queue)?.clone();
        tracker.with_core(|core| core.note_queue_change(Box::new(queue)))
    })
}

/// Reserves the next packet index on simulated queue `queue`.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `sim` is a live simulator; `index` points to a writable `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_sim_reserve(
    sim: *const sigretire_sim,
    queue: u32,
    index: *mut u64,
) -> sigretire_status {
    guard("sigretire_sim_reserve", || {
        let out = Out::new(index, "index")?;
        // SAFETY: forwarded caller guarantee.
        let sim = unsafe { sim_ref(sim) }?;
        out.write(sim.queue(queue)?.reserve_slot()?);
        Ok(())
    })
}

/// Writes a 64-byte AQL packet the caller built (sixteen 32-bit words, word
/// 0 holding `header | setup << 16`) at reserved `index` of queue `queue`:
/// the body, then the header with release order, as a runtime writes an
/// `hsa_queue_t` ring. Then ring the doorbell. What a real packet processor
/// would trip over (an unfenced signal, a slot not reserved) is recorded as
/// a violation (`sigretire_sim_violations`).
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `sim` is a live simulator; `words` points to 16 readable `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_sim_write_packet(
    sim: *const sigretire_sim,
    queue: u32,
    index: u64,
    words: *const u32,
) -> sigretire_status {
    guard("sigretire_sim_write_packet", || {
        // SAFETY: forwarded caller guarantee: 16 readable words.
        let words = unsafe { read_in(words.cast::<[u32; 16]>(), "words") }?;
        // SAFETY: as above.
        let sim = unsafe { sim_ref(sim) }?;
        sim.queue(queue)?.write(index, PacketWords(words));
        Ok(())
    })
}

/// Rings queue `queue`'s doorbell: the processor may consume packets up to
/// and including `index`.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `sim` is a live simulator.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_sim_ring_doorbell(
    sim: *const sigretire_sim,
    queue: u32,
    index: u64,
) -> sigretire_status {
    guard("sigretire_sim_ring_doorbell", || {
        // SAFETY: forwarded caller guarantee.
        let sim = unsafe { sim_ref(sim) }?;
        sim.queue(queue)?.ring_doorbell(index);
        Ok(())
    })
}

/// Runs the simulated GPU: stepped mode launches, completes and consumes
/// on every queue until nothing can progress (cross-queue waits resolve);
/// threaded mode waits until no queue can progress without a host action.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `sim` is a live simulator.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_sim_run_until_idle(
    sim: *const sigretire_sim,
) -> sigretire_status {
    guard("sigretire_sim_run_until_idle", || {
        // SAFETY: forwarded caller guarantee.
        let sim = unsafe { sim_ref(sim) }?;
        sim.sim.run_until_idle();
        Ok(())
    })
}

/// Fails queue `queue` (a queue error): every published, incomplete packet
/// fails and its completion signal goes negative; nothing more runs there.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `sim` is a live simulator.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_sim_fail_queue(
    sim: *const sigretire_sim,
    queue: u32,
) -> sigretire_status {
    guard("sigretire_sim_fail_queue", || {
        // SAFETY: forwarded caller guarantee.
        let sim = unsafe { sim_ref(sim) }?;
        sim.queue(queue)?.fail();
        Ok(())
    })
}

/// The ground truth of packet `index` on queue `queue`: whether it really
/// completed (the simulator's oracle, not the tracker's view).
/// `SIGRETIRE_ERR_INVALID_ARGUMENT` for an index never reserved or long
/// forgotten.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `sim` is a live simulator; `completed` points to a writable `bool`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_sim_packet_completed(
    sim: *const sigretire_sim,
    queue: u32,
    index: u64,
    completed: *mut bool,
) -> sigretire_status {
    guard("sigretire_sim_packet_completed", || {
        let out = Out::new(completed, "completed")?;
        // SAFETY: forwarded caller guarantee.
        let sim = unsafe { sim_ref(sim) }?;
        match sim.queue(queue)?.truth(index) {
            Some(truth) => {
                out.write(truth.completed);
                Ok(())
            }
            None => fail(
                SIGRETIRE_ERR_INVALID_ARGUMENT,
                format!("packet {index} was never reserved on queue {queue}, or is forgotten"),
            ),
        }
    })
}

/// How many host actions so far would have been bugs on hardware (an
/// unfenced re-arm, a re-arm while a packet or GPU waiter still used the
/// signal, a packet naming an unknown signal, an invalid write): 0 in a
/// correct program.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `sim` is a live simulator; `count` points to a writable `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_sim_violations(
    sim: *const sigretire_sim,
    count: *mut u64,
) -> sigretire_status {
    guard("sigretire_sim_violations", || {
        let out = Out::new(count, "count")?;
        // SAFETY: forwarded caller guarantee.
        let sim = unsafe { sim_ref(sim) }?;
        out.write(sim.sim.violations().len() as u64);
        Ok(())
    })
}

/// Registers a gated kernel on the simulator: a kernel that cannot complete
/// before its gate is opened (`sigretire_sim_open_gate`), in stepped and
/// threaded mode alike (it spins on the simulated GPU). `*kernel_object`
/// is its handle for `sigretire_stream_launch` (or a dispatch's kernel
/// object); every launch of it waits for the same gate, which stays open
/// once opened.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `sim` is a live simulator; `kernel_object` points to a writable
/// `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_sim_register_gated_kernel(
    sim: *const sigretire_sim,
    kernel_object: *mut u64,
) -> sigretire_status {
    guard("sigretire_sim_register_gated_kernel", || {
        let out = Out::new(kernel_object, "kernel_object")?;
        // SAFETY: forwarded caller guarantee.
        let sim = unsafe { sim_ref(sim) }?;
        let gate = HostFlag::new();
        let object = sim.sim.register_kernel(Kernel::SpinUntil(gate.clone()));
        sim.gates.lock().push((object, gate));
        out.write(object);
        Ok(())
    })
}

/// Opens the gate of gated kernel `kernel_object`: its launches may
/// complete from now on (in stepped mode, at the next
/// `sigretire_sim_run_until_idle`). `SIGRETIRE_ERR_INVALID_ARGUMENT` for a
/// kernel `sigretire_sim_register_gated_kernel` did not register on this
/// simulator.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `sim` is a live simulator.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_sim_open_gate(
    sim: *const sigretire_sim,
    kernel_object: u64,
) -> sigretire_status {
    guard("sigretire_sim_open_gate", || {
        // SAFETY: forwarded caller guarantee.
        let sim = unsafe { sim_ref(sim) }?;
        let gates = sim.gates.lock();
        match gates.iter().find(|(object, _)| *object == kernel_object) {
            Some((_, gate)) => {
                gate.set();
                Ok(())
            }
            None => fail(
                SIGRETIRE_ERR_INVALID_ARGUMENT,
                format!(
                    "kernel {kernel_object} is no gated kernel of this simulator \
                     (sigretire_sim_register_gated_kernel makes them)"
                ),
            ),
        }
    })
}

/// Fails the simulated hardware queue under `stream`, as a queue error
/// would: its published, incomplete work fails, and the stream fails as
/// soon as a wait, a query or an event sees it
/// (`SIGRETIRE_ERR_STREAM_FAILED`). The device and its other streams keep
/// working. `SIGRETIRE_ERR_WRONG_BACKEND` for a stream not on the
/// simulator.
///
/// Thread safety: any thread, concurrently (takes the stream's lock
/// briefly).
///
/// # Safety
/// `stream` is a live stream.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_sim_fail_stream(
    stream: *const crate::objects::sigretire_stream,
) -> sigretire_status {
    guard("sigretire_sim_fail_stream", || {
        // SAFETY: forwarded caller guarantee.
        let stream = unsafe { crate::objects::stream_ref(stream) }?;
        match &stream.queue {
            crate::layer::AnyStream::Sim(queue) => {
                queue.with_tracker(|tracker| tracker.queue().fail());
                Ok(())
            }
            other => fail(
                SIGRETIRE_ERR_WRONG_BACKEND,
                format!(
                    "sigretire_sim_fail_stream fails simulated queues; this stream runs on {}",
                    crate::layer::stream_backend(other)
                ),
            ),
        }
    })
}
