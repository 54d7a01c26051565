//! A runtime author's walk-through on the threaded simulator (MI300X
//! costs): a real kernel with kernel arguments, queues the runtime builds
//! itself, events, query, synchronize, elapsed time and a cross-queue wait,
//! with every claim checked by an `assert!`.
//!
//! 1. Two kernels that do observable work, `saxpy` (`out = a * x + y`) and
//!    `scale` (`out = factor * input`), registered as
//!    [`Kernel::Compute`]: the simulated GPU calls them with the fields of
//!    the dispatch packet the library published, and they find their
//!    arguments by its kernarg address.
//! 2. Two queues on hardware queues the example creates (what
//!    `SimPlatform::create_queue` does, spelled out).
//! 3. `saxpy` on the producer between two timed events; the consumer waits
//!    for the second event on the GPU, then runs `scale` on `saxpy`'s
//!    output. Queries, synchronize, reading the buffers only once the
//!    library says complete, elapsed times.
//!
//! `cargo run --example sim_runtime -p sigretire-queue`

use sigretire_queue::sim::engine::backend::SimMemory;
use sigretire_queue::sim::engine::{self, Mode};
use sigretire_queue::sim::{
    Compute, CostProfile, HostFlag, Kernel, KernelDispatch, Sim, SimConfig, SimTracker,
};
use sigretire_queue::tracker::{Config, RetiringTracker, Status, Work, backend::Dispatch};
use sigretire_queue::{CommandStatus, Device, DeviceConfig, QueueConfig, sim};
use std::collections::HashMap;
use std::error::Error;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Elements per vector.
const N: usize = 1000;
/// Work-items per workgroup; the grid is `N` rounded up to whole workgroups.
const WORKGROUP: u16 = 256;
/// How long each kernel runs on the simulated GPU before its work is done.
const SAXPY_TIME: Duration = Duration::from_millis(5);
const SCALE_TIME: Duration = Duration::from_millis(2);
/// Where the runtime's kernarg blocks start: any address will do, the
/// kernels use it as a key, never as a pointer.
const KERNARG_BASE: u64 = 0x7f00_0000_0000;
/// Kernarg blocks are 64-byte aligned, as HSA requires of a kernarg segment.
const KERNARG_BLOCK: u64 = 64;

/// A buffer in the example's device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Buffer(usize);

/// Kernel arguments, as a runtime writes them into a kernarg block.
#[derive(Clone, Copy, Debug)]
enum Args {
    /// `out[i] = a * x[i] + y[i]` for `i < n`.
    Saxpy {
        a: f32,
        x: Buffer,
        y: Buffer,
        out: Buffer,
        n: usize,
    },
    /// `out[i] = factor * input[i]` for `i < n`.
    Scale {
        factor: f32,
        input: Buffer,
        out: Buffer,
        n: usize,
    },
}

/// What the simulated GPU reaches: buffers, kernarg blocks by address, and
/// the dispatches the kernels were handed. Keyed by address rather than
/// pointed to, so the example needs no `unsafe`.
#[derive(Default)]
struct DeviceMemory {
    buffers: Vec<Vec<f32>>,
    kernargs: HashMap<u64, Args>,
    dispatches: Vec<KernelDispatch>,
}

impl DeviceMemory {
    fn alloc(&mut self, data: Vec<f32>) -> Buffer {
        self.buffers.push(data);
        Buffer(self.buffers.len() - 1)
    }

    /// Writes `args` into the next kernarg block and returns its address:
    /// what the dispatch packet carries.
    fn kernarg(&mut self, args: Args) -> u64 {
        let address = KERNARG_BASE + KERNARG_BLOCK * self.kernargs.len() as u64;
        self.kernargs.insert(address, args);
        address
    }

    /// The arguments `dispatch` names. A packet naming no block of ours
    /// panics, which faults its queue, as a bad address would on a GPU.
    fn args(&self, dispatch: &KernelDispatch) -> Args {
        match self.kernargs.get(&dispatch.kernarg_address) {
            Some(args) => *args,
            None => panic!("no kernarg block at {:#x}", dispatch.kernarg_address),
        }
    }

    /// Runs `f` for every work-item of a one-dimensional grid and stores its
    /// results in `out`. Work-items past `n` do nothing: the grid is rounded
    /// up to whole workgroups, and a real kernel checks its bounds too.
    fn for_each_item(
        &mut self,
        dispatch: &KernelDispatch,
        n: usize,
        out: Buffer,
        f: impl Fn(&[Vec<f32>], usize) -> f32,
    ) {
        let items = (dispatch.grid[0] as usize).min(n);
        let results: Vec<f32> = (0..items).map(|i| f(&self.buffers, i)).collect();
        self.buffers[out.0][..items].copy_from_slice(&results);
    }
}

type Shared = Arc<Mutex<DeviceMemory>>;

/// Locks the device memory. Poisoned only if a kernel panicked, which
/// faulted its queue (the library reports that); the data stays readable.
fn lock(memory: &Shared) -> MutexGuard<'_, DeviceMemory> {
    memory.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `saxpy`'s work, run by the simulated GPU for each of its dispatches.
fn saxpy(memory: &Shared, dispatch: &KernelDispatch) {
    let mut memory = lock(memory);
    memory.dispatches.push(*dispatch);
    let Args::Saxpy { a, x, y, out, n } = memory.args(dispatch) else {
        panic!("saxpy launched with another kernel's arguments");
    };
    memory.for_each_item(dispatch, n, out, |buffers, i| {
        a * buffers[x.0][i] + buffers[y.0][i]
    });
}

/// `scale`'s work.
fn scale(memory: &Shared, dispatch: &KernelDispatch) {
    let mut memory = lock(memory);
    memory.dispatches.push(*dispatch);
    let Args::Scale {
        factor,
        input,
        out,
        n,
    } = memory.args(dispatch)
    else {
        panic!("scale launched with another kernel's arguments");
    };
    memory.for_each_item(dispatch, n, out, |buffers, i| factor * buffers[input.0][i]);
}

/// What `SimPlatform::create_queue` does, spelled out: a hardware queue of
/// the simulator, the signal memory of its agent, and a retiring tracker
/// over the two. Returns the hardware queue too, for its id.
fn hardware_queue(sim: &Sim) -> Result<(SimTracker, engine::Queue), Box<dyn Error>> {
    let queue = sim.create_queue(engine::SimQueueConfig {
        size: 256,
        // The processor writes start and end timestamps into completion
        // signals: what timed events read.
        profiling: true,
        ..engine::SimQueueConfig::default()
    })?;
    let memory = Arc::new(SimMemory::new(sim.clone(), queue.agent()));
    let tracker = RetiringTracker::new(memory, queue.clone(), Config::default())?;
    Ok((tracker, queue))
}

fn main() -> Result<(), Box<dyn Error>> {
    let sim = Sim::try_new(SimConfig {
        mode: Mode::Threaded,
        profile: CostProfile::mi300x(),
        ..SimConfig::default()
    })?;
    println!("a runtime on the threaded simulator (MI300X costs)");

    // 1. Kernels that do work. They capture the device memory, not the
    // simulator: the simulator holds its kernels, so a kernel holding the
    // simulator would keep it alive for good.
    let memory: Shared = Arc::default();
    let saxpy_kernel = sim.register_kernel(Kernel::Compute(
        Compute::new({
            let memory = memory.clone();
            move |dispatch| saxpy(&memory, dispatch)
        })
        .runs_for(SAXPY_TIME),
    ));
    let scale_kernel = sim.register_kernel(Kernel::Compute(
        Compute::new({
            let memory = memory.clone();
            move |dispatch| scale(&memory, dispatch)
        })
        .runs_for(SCALE_TIME),
    ));
    let (x, y, sum, scaled, saxpy_args, scale_args) = {
        let mut memory = lock(&memory);
        let x = memory.alloc((0..N).map(|i| i as f32).collect());
        let y = memory.alloc(vec![1.0; N]);
        let sum = memory.alloc(vec![0.0; N]);
        let scaled = memory.alloc(vec![0.0; N]);
        let saxpy_args = memory.kernarg(Args::Saxpy {
            a: 2.0,
            x,
            y,
            out: sum,
            n: N,
        });
        let scale_args = memory.kernarg(Args::Scale {
            factor: 0.5,
            input: sum,
            out: scaled,
            n: N,
        });
        (x, y, sum, scaled, saxpy_args, scale_args)
    };
    let grid = (N as u32).div_ceil(u32::from(WORKGROUP)) * u32::from(WORKGROUP);
    let saxpy_dispatch = Dispatch::new(saxpy_kernel)
        .kernarg_address(saxpy_args)
        .grid([grid, 1, 1])
        .workgroup([WORKGROUP, 1, 1]);
    let scale_dispatch = Dispatch::new(scale_kernel)
        .kernarg_address(scale_args)
        .grid([grid, 1, 1])
        .workgroup([WORKGROUP, 1, 1]);
    println!(
        "1. kernels: saxpy = kernel object {saxpy_kernel}, scale = kernel object {scale_kernel}"
    );
    println!(
        "   saxpy's kernarg block at {saxpy_args:#x}: buffer {} = 2 * buffer {} + buffer {}",
        sum.0, x.0, y.0
    );
    println!(
        "   scale's kernarg block at {scale_args:#x}: buffer {} = 0.5 * buffer {}",
        scaled.0, sum.0
    );
    println!("   {N} elements each: a grid of {grid} work-items in workgroups of {WORKGROUP}");

    // 2. Queues on hardware queues of our own. A device needs a default
    // queue (HIP's null stream); this example does not use it.
    let (default_tracker, _) = hardware_queue(&sim)?;
    // The simulator's handles are `sim::Device`, `sim::HostQueue`,
    // `sim::Event` and `sim::Command`: no generic parameter to write.
    let device: sim::Device = Device::new(
        DeviceConfig::default(),
        default_tracker,
        QueueConfig::default(),
    )?;
    let (tracker, producer_hw) = hardware_queue(&sim)?;
    let producer: sim::HostQueue = device.create_queue(tracker, QueueConfig::default())?;
    let (tracker, consumer_hw) = hardware_queue(&sim)?;
    let consumer = device.create_queue(tracker, QueueConfig::default())?;
    assert_ne!(producer_hw.id(), consumer_hw.id());
    println!(
        "2. queues: producer = host queue {} on hardware queue {}, consumer = host queue {} \
         on hardware queue {}",
        producer.id(),
        producer_hw.id(),
        consumer.id(),
        consumer_hw.id()
    );

    // 3. Submit everything. The producer's GPU is held by a kernel that
    // spins on a host flag until all is enqueued, so the states below are
    // seen for sure; a runtime needs no such gate, its GPU just runs.
    let go = HostFlag::new();
    let gate = producer.launch(sim.register_kernel(Kernel::SpinUntil(go.clone())))?;
    let start: sim::Event = producer.record_event()?;
    let saxpy_command = producer.submit(Work::Dispatch(saxpy_dispatch))?;
    let stop = producer.record_event()?;
    assert!(
        start.is_timed() && stop.is_timed(),
        "profiled queues time events"
    );
    // The consumer waits for `stop` on the GPU (a barrier-AND packet on its
    // hardware queue): no host thread blocks for it.
    let wait = consumer.wait_event(&stop)?;
    assert_eq!(wait.dependencies(), 1, "one GPU-side dependency: stop");
    let scale_command = consumer.submit(Work::Dispatch(scale_dispatch))?;
    let scaled_event = consumer.record_event()?;
    println!(
        "3. submitted: producer [gate, event start, saxpy, event stop], consumer [wait for \
         stop, scale, event scaled]"
    );

    // Nothing ran yet: queries answer at once, and the outputs are untouched.
    let held = (stop.query(), producer.query()?, consumer.query()?);
    assert_eq!(held, (Status::Pending, Status::Pending, Status::Pending));
    assert_eq!(saxpy_command.status(), CommandStatus::Pending);
    assert_eq!(scale_command.status(), CommandStatus::Pending);
    {
        let memory = lock(&memory);
        assert!(memory.dispatches.is_empty(), "no kernel ran");
        assert!(memory.buffers[sum.0].iter().all(|&v| v == 0.0));
        assert!(memory.buffers[scaled.0].iter().all(|&v| v == 0.0));
    }
    println!(
        "   query while the GPU is held: stop {:?}, producer {:?}, consumer {:?}; outputs \
         untouched",
        held.0, held.1, held.2
    );
    go.set();

    // 4. Synchronize, then read: the library said complete, so the
    // kernel's writes are there.
    stop.synchronize()?;
    assert_eq!(stop.query(), Status::Complete);
    assert_eq!(gate.status(), CommandStatus::Complete);
    assert_eq!(saxpy_command.status(), CommandStatus::Complete);
    let sums = lock(&memory).buffers[sum.0].clone();
    assert!(
        sums.iter()
            .enumerate()
            .all(|(i, &v)| v == 2.0 * i as f32 + 1.0),
        "saxpy's output"
    );
    println!(
        "4. stop.synchronize(): saxpy {:?}, buffer {} = [{}, {}, {}, .., {}]",
        saxpy_command.status(),
        sum.0,
        sums[0],
        sums[1],
        sums[2],
        sums[N - 1]
    );
    consumer.synchronize()?;
    assert_eq!(consumer.query()?, Status::Complete);
    assert_eq!(scaled_event.query(), Status::Complete);
    assert_eq!(scale_command.status(), CommandStatus::Complete);
    let scaled_values = lock(&memory).buffers[scaled.0].clone();
    assert!(
        scaled_values
            .iter()
            .enumerate()
            .all(|(i, &v)| v == i as f32 + 0.5),
        "scale read saxpy's finished output"
    );
    println!(
        "   consumer.synchronize(): scale {:?}, buffer {} = [{}, {}, {}, .., {}]",
        scale_command.status(),
        scaled.0,
        scaled_values[0],
        scaled_values[1],
        scaled_values[2],
        scaled_values[N - 1]
    );

    // 5. GPU time from the events' timestamps. The consumer's kernel could
    // only start once `stop` completed, so `stop -> scaled` covers its run.
    let saxpy_time = start.elapsed_to(&stop)?;
    let scale_time = stop.elapsed_to(&scaled_event)?;
    assert!(saxpy_time >= SAXPY_TIME, "{saxpy_time:?}");
    assert!(scale_time >= SCALE_TIME, "{scale_time:?}");
    println!(
        "5. elapsed: start -> stop {saxpy_time:?} (saxpy runs {SAXPY_TIME:?}), stop -> scaled \
         {scale_time:?} across queues (scale runs {SCALE_TIME:?})"
    );

    // What the kernels were handed: the packets' own fields, in order.
    let dispatches = lock(&memory).dispatches.clone();
    let seen = |d: &KernelDispatch| {
        (
            d.queue,
            d.kernel_object,
            d.kernarg_address,
            d.grid,
            d.workgroup,
        )
    };
    assert_eq!(
        dispatches.iter().map(seen).collect::<Vec<_>>(),
        [
            (
                producer_hw.id(),
                saxpy_kernel,
                saxpy_args,
                [grid, 1, 1],
                [WORKGROUP, 1, 1]
            ),
            (
                consumer_hw.id(),
                scale_kernel,
                scale_args,
                [grid, 1, 1],
                [WORKGROUP, 1, 1]
            ),
        ]
    );
    assert_eq!(dispatches[0].index, saxpy_command.aql_index());
    assert_eq!(dispatches[1].index, scale_command.aql_index());
    for d in &dispatches {
        println!(
            "   the GPU ran kernel object {} from hardware queue {} packet {}: kernarg {:#x}, \
             grid {:?}, workgroup {:?}",
            d.kernel_object, d.queue, d.index, d.kernarg_address, d.grid, d.workgroup
        );
    }
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
    println!("no protocol violations");
    Ok(())
}
