//! The ROCr backend as a scenario backend: `hsa-backend` loaded from a
//! private copy of the ROCr stand-in (its own runtime, its own simulator),
//! driven and inspected through the stand-in's test hooks. `Standin<true>`
//! plays a runtime that makes its queues itself (`hsa_queue_create`, with
//! its own error callback) and hands them to the backend
//! ([`AqlQueue::adopt`]), destroying them only after the backend let go.

use super::{Backend, Executed, Machine, Refused, Release, Truth, Violation};

use sigretire_hsa::{AdoptOptions, Agent, AqlQueue, QueueOptions, Runtime, SignalPool};
use sigretire_rocr_standin::{Kernel, PoolKind, StepStatus, ViolationKind};
use sigretire_scenarios::check::Check;
use sigretire_tracker::{
    Placement,
    backend::{QueueError, SignalMemory},
};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A GPU behind a private stand-in, with the backend initialised on it;
/// with `ADOPTED`, every queue is the runtime's, adopted.
#[derive(Clone, Debug)]
pub struct Standin<const ADOPTED: bool = false>(Arc<Gpu>);

/// A queue the runtime made and owns: what its own error callback saw.
#[derive(Debug)]
struct RuntimeQueue {
    raw: usize,
    /// The status ROCr gave the runtime's callback (0: none).
    error: Box<AtomicU32>,
}

/// The runtime's queue callback: keeps the status for the runtime.
unsafe extern "C" fn runtime_saw_error(
    status: hsa_sys::hsa_status_t,
    _queue: *mut hsa_sys::hsa_queue_t,
    data: *mut c_void,
) {
    // SAFETY: `data` is the `AtomicU32` of a `RuntimeQueue`, boxed, which
    // lives until after the queue is destroyed (`tear_down`).
    unsafe { &*data.cast::<AtomicU32>() }.store(status, Ordering::Release);
}

#[derive(Debug)]
struct Gpu {
    /// Every GPU of the machine, by index ([`Machine::gpus`]).
    devices: Vec<Agent>,
    runtime: Arc<Runtime>,
    options: QueueOptions,
    empty_kernel: u64,
    /// The runtime's own queues (with `ADOPTED`), destroyed at teardown.
    runtime_queues: Mutex<Vec<RuntimeQueue>>,
    /// Last: the library copy outlives everything loaded from it.
    standin: sigretire_rocr_standin::Standin,
}

impl From<StepStatus> for Refused {
    fn from(status: StepStatus) -> Self {
        match status {
            StepStatus::NotReady => Refused::NotReady,
            other => Refused::Other(format!("{other:?}")),
        }
    }
}

/// The block of `memory` that holds signal `signal` (64-byte blocks).
fn batch_of(memory: &SignalPool, signal: u64) -> sigretire_hsa::Batch {
    memory
        .batches()
        .into_iter()
        .find(|b| (b.base..b.base + 64 * b.len as u64).contains(&signal))
        .expect("a signal of this pool")
}

impl<const ADOPTED: bool> Backend for Standin<ADOPTED> {
    type Memory = SignalPool;
    type Queue = AqlQueue;

    fn new(machine: Machine) -> Self {
        let config = sigretire_rocr_standin::Config {
            threaded: machine.threaded,
            ring_in_device_memory: machine.ring == Placement::Device,
            out_of_order: machine.out_of_order,
            truth_history: machine.truth_history,
            gpus: machine.gpus,
            ..sigretire_rocr_standin::Config::default()
        };
        let standin = sigretire_rocr_standin::Standin::new(config).expect("the stand-in loads");
        let runtime = Runtime::load_from(standin.library_path()).expect("ROCr initialises");
        let devices: Vec<Agent> = (0..machine.gpus as usize)
            .map(|gpu| runtime.device(gpu).expect("every GPU of the machine"))
            .collect();
        let options = QueueOptions {
            size: 1 << 14,
            profiling: true,
            ring_in_device_memory: config.ring_in_device_memory,
            // Stepped, nothing would run a drain at teardown.
            drain_timeout: if machine.threaded {
                Duration::from_secs(5)
            } else {
                Duration::ZERO
            },
        };
        let empty_kernel = standin.register_kernel(Kernel::Empty);
        Self(Arc::new(Gpu {
            devices,
            runtime,
            options,
            empty_kernel,
            runtime_queues: Mutex::new(Vec::new()),
            standin,
        }))
    }

    fn queue_on(&self, gpu: u32) -> AqlQueue {
        let options = self.0.options;
        let device = &self.0.devices[gpu as usize];
        if !ADOPTED {
            return AqlQueue::new(device, options).expect("a queue");
        }
        let error = Box::new(AtomicU32::new(0));
        let mut raw: *mut hsa_sys::hsa_queue_t = std::ptr::null_mut();
        // SAFETY: a GPU of an initialised runtime; the callback touches only
        // `error`, which outlives the queue.
        let status = unsafe {
            self.0.runtime.api().hsa_queue_create(
                device.agent(),
                options.size,
                hsa_sys::HSA_QUEUE_TYPE_MULTI,
                Some(runtime_saw_error),
                std::ptr::from_ref::<AtomicU32>(&error).cast_mut().cast(),
                u32::MAX,
                u32::MAX,
                &raw mut raw,
            )
        };
        assert_eq!(status, hsa_sys::HSA_STATUS_SUCCESS, "the runtime's queue");
        self.0.runtime_queues.lock().unwrap().push(RuntimeQueue {
            raw: raw as usize,
            error,
        });
        let adopt = AdoptOptions {
            profiling: options.profiling,
            ring_in_device_memory: options.ring_in_device_memory,
            drain_timeout: options.drain_timeout,
        };
        // SAFETY: a live queue of this device, destroyed in `tear_down`,
        // after every handle of the backend is gone.
        let queue = unsafe { AqlQueue::adopt(device, raw, adopt) }.expect("adopted");
        assert!(queue.is_adopted());
        queue
    }

    fn memory(&self, queue: &AqlQueue) -> Arc<SignalPool> {
        Arc::new(SignalPool::new(queue.device()))
    }

    fn write_index(queue: &AqlQueue) -> u64 {
        queue.write_index()
    }

    fn empty_kernel(&self) -> u64 {
        self.0.empty_kernel
    }

    fn spin_kernel(&self) -> (u64, Release) {
        let flag = self.0.standin.new_flag();
        let kernel = self.0.standin.register_kernel(Kernel::SpinUntil(flag));
        let gpu = self.0.clone();
        (kernel, Arc::new(move || gpu.standin.set_flag(flag, true)))
    }

    fn timed_kernel(&self, duration: Duration) -> u64 {
        self.0.standin.register_kernel(Kernel::Duration(duration))
    }

    fn timestamp_period(&self) -> Duration {
        self.0.runtime.timestamp_period()
    }

    fn run(&self, queue: &AqlQueue) {
        self.0.standin.queue(queue.raw()).run_until_idle();
    }

    fn run_all(&self) {
        self.0.standin.run_until_idle();
    }

    fn launch(&self, queue: &AqlQueue) -> Result<u64, Refused> {
        Ok(self.0.standin.queue(queue.raw()).launch()?)
    }

    fn complete(&self, queue: &AqlQueue, index: u64) -> Result<(), Refused> {
        Ok(self.0.standin.queue(queue.raw()).complete(index)?)
    }

    fn advance_read_index(&self, queue: &AqlQueue) -> Result<u64, Refused> {
        Ok(self.0.standin.queue(queue.raw()).advance_read_index()?)
    }

    fn fail(&self, queue: &AqlQueue) {
        self.0.standin.queue(queue.raw()).fail();
        if ADOPTED {
            // ROCr told the runtime; the runtime tells the backend.
            let queues = self.0.runtime_queues.lock().unwrap();
            let own = queues.iter().find(|q| q.raw == queue.raw() as usize);
            let status = own.expect("a runtime queue").error.load(Ordering::Acquire);
            assert_ne!(status, 0, "the runtime's callback ran");
            queue.report_error(status);
        }
        // ROCr told the backend (the queue's error callback).
        let error = queue.error().expect("the queue reported its error");
        assert_eq!(error.status(), hsa_sys::HSA_STATUS_ERROR_EXCEPTION);
        assert!(matches!(queue.try_reserve(), Err(QueueError::Failed(_))));
    }

    fn truth(&self, queue: &AqlQueue, index: u64) -> Option<Truth> {
        let truth = self.0.standin.queue(queue.raw()).truth(index)?;
        Some(Truth {
            published: truth.published,
            completed: truth.completed,
            failed: truth.failed,
            start_ts: truth.launched.then_some(truth.start_ts),
            end_ts: truth.completed.then_some(truth.end_ts),
            barrier: truth.barrier,
            completion: truth.completion_signal,
        })
    }

    fn violations(&self) -> Vec<Violation> {
        self.0
            .standin
            .violations()
            .into_iter()
            .map(|v| Violation {
                check: check_of(v.kind),
                text: v.text,
            })
            .collect()
    }

    fn tear_down(self) {
        let Gpu {
            devices,
            runtime,
            standin,
            runtime_queues,
            ..
        } = Arc::into_inner(self.0).expect("the machine's last handle");
        for queue in runtime_queues.into_inner().unwrap() {
            // SAFETY: the runtime's own queue; the scenario dropped every
            // handle of the backend before tearing the machine down.
            let status = unsafe {
                runtime
                    .api()
                    .hsa_queue_destroy(queue.raw as *mut hsa_sys::hsa_queue_t)
            };
            assert_eq!(
                status,
                hsa_sys::HSA_STATUS_SUCCESS,
                "destroyed once, by its owner"
            );
        }
        drop((devices, runtime));
        // A queue whose last handle went with work pending is held by the
        // library's completion thread until that work's marker completed
        // (the GPU ran it before this), then torn down on a thread of its
        // own: give that a moment, not a leak.
        let settled = std::time::Instant::now();
        while standin.census() != sigretire_rocr_standin::Census::default()
            && settled.elapsed() < std::time::Duration::from_secs(3)
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(
            standin.census(),
            sigretire_rocr_standin::Census::default(),
            "nothing leaked"
        );
        standin.assert_no_violations();
    }

    fn reported_time(&self, tick: u64) -> u64 {
        // The backend converts stamps to the system domain, as ROCr does.
        self.0.standin.gpu_to_system(tick)
    }

    fn placement(&self, memory: &SignalPool, signal: u64) -> Placement {
        batch_of(memory, signal).placement
    }

    fn executed(&self, memory: &SignalPool) -> Executed {
        let counters = memory.counters();
        Executed {
            store_fences: counters.store_fences,
            hdp_flushes: counters.hdp_flushes,
            fallbacks: Some(counters.fallbacks),
            runtime_signals: Some(counters.rocr_signals),
        }
    }

    fn device_loads_seen(&self) -> u64 {
        // Those made through ROCr's calls: the backend's own loads of its
        // signals are plain memory accesses the stand-in cannot see.
        self.0.standin.counters().device_loads
    }

    fn take_hdp_flush_register(&self) -> Option<u32> {
        self.0.standin.take_hdp_flush(0)
    }

    fn exhaust_device_memory(&self, memory: &SignalPool) {
        self.0.standin.set_pool_exhausted(PoolKind::Device, true);
        // The VRAM block the pool already has still serves requests: use it
        // up, until a request comes back in system memory.
        let mut taken = Vec::new();
        while taken.last().is_none_or(|(_, p)| *p == Placement::Device) {
            memory.allocate(1, Placement::Device, &mut taken).unwrap();
        }
    }

    fn fail_allocations(&self, memory: &SignalPool) {
        // Every pool is out of memory and ROCr makes no more signals...
        self.0.standin.set_pool_exhausted(PoolKind::Device, true);
        self.0.standin.set_pool_exhausted(PoolKind::System, true);
        self.0.standin.fail_signal_creations(u64::MAX);
        // ...and the blocks the pool already has are used up.
        let mut taken = Vec::new();
        while memory.allocate(1, Placement::Device, &mut taken).is_ok() {}
    }
}

/// The invariant a kind of stand-in violation breaks.
fn check_of(kind: ViolationKind) -> Check {
    match kind {
        ViolationKind::PublishOrder => Check::PublishOrder,
        ViolationKind::RearmWhileInFlight => Check::RearmWhileInFlight,
        ViolationKind::Leak => Check::Leak,
        ViolationKind::BadRelease
        | ViolationKind::BadSignal
        | ViolationKind::NoAccess
        | ViolationKind::BadQueueUse
        | ViolationKind::BeforeInit
        | ViolationKind::Simulator
        | ViolationKind::StandinBug => Check::Unexpected,
    }
}
