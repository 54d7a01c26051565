//! A test rig for the ROCr backend: a private ROCr stand-in, the backend's
//! runtime and device loaded from it, a tracker on a backend queue, every use
//! it handed out, and a check of DESIGN.md section 6's invariants against the
//! stand-in's ground truth and violations, to run after every step.
//!
//! It mirrors `tracker/tests/support`: the same scenarios, but every signal
//! is a block the backend allocated from a ROCr pool, every packet goes
//! through the backend's publication and doorbell, and the simulator sees
//! them through the stand-in's queue adapter.
#![allow(dead_code)]

use hsa_backend::{AqlQueue, Device, QueueOptions, Runtime, SignalPool};
use rocr_standin::{Config as Machine, Kernel, QueueControl, Standin, Truth};
use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;
use tracker::{
    BaselineTracker, Config, Error, HardwareQueue, Purpose, Request, RetiringTracker, Status,
    Ticket, Tracker, Work,
};

/// Debian's ROCr.
pub const DEBIAN_ROCR: &str = "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1";

/// Skips the calling test, visibly (libtest captures `eprintln!`).
pub fn skip(reason: &str) {
    let _ = writeln!(std::io::stderr(), "SKIPPED: {reason}");
}

/// A machine behind a private stand-in, with the backend initialised on it.
pub struct Gpu {
    pub device: Device,
    pub runtime: Arc<Runtime>,
    /// Last: the library copy outlives everything loaded from it.
    pub standin: Standin,
}

impl Gpu {
    pub fn new(machine: Machine) -> Self {
        let standin = Standin::new(machine).expect("the stand-in loads");
        let runtime = Runtime::load_from(standin.library_path()).expect("ROCr initialises");
        let device = runtime.device(0).expect("GPU 0");
        Self {
            device,
            runtime,
            standin,
        }
    }

    pub fn stepped() -> Self {
        Self::new(Machine::stepped())
    }

    pub fn threaded() -> Self {
        Self::new(Machine::default())
    }

    /// Queue options matching the machine: the ring where the stand-in puts
    /// it, and no drain at teardown when stepped (nothing would run it).
    pub fn queue_options(&self, machine: &Machine) -> QueueOptions {
        QueueOptions {
            size: 1 << 14,
            profiling: true,
            ring_in_device_memory: machine.ring_in_device_memory,
            drain_timeout: if machine.threaded {
                Duration::from_secs(5)
            } else {
                Duration::ZERO
            },
        }
    }

    pub fn queue(&self, options: QueueOptions) -> AqlQueue {
        AqlQueue::new(&self.device, options).expect("a queue")
    }

    pub fn control<'a>(&'a self, queue: &AqlQueue) -> QueueControl<'a> {
        self.standin.queue(queue.raw())
    }
}

/// One use the rig handed out.
#[derive(Clone, Debug)]
pub struct Issued {
    pub queue: AqlQueue,
    pub ticket: Ticket,
    pub index: u64,
    pub signal: u64,
    pub timed: bool,
    pub abandoned: bool,
}

pub type Retiring = RetiringTracker<SignalPool, AqlQueue>;
pub type Baseline = BaselineTracker<SignalPool, AqlQueue>;

pub struct Rig<T> {
    pub tracker: T,
    pub issued: Vec<Issued>,
    pub queue: AqlQueue,
    pub memory: Arc<SignalPool>,
    pub config: Config,
    pub machine: Machine,
    /// The `kernel_object` of the stand-in's empty kernel.
    pub empty_kernel: u64,
    /// Last: dropped after every queue and pool (shared with neighbours).
    pub gpu: Arc<Gpu>,
}

impl Rig<Retiring> {
    pub fn retiring(config: Config) -> Self {
        Self::retiring_on(config, Machine::stepped())
    }

    pub fn retiring_on(config: Config, machine: Machine) -> Self {
        Self::build(config, machine, |memory, queue, config| {
            RetiringTracker::new(memory, queue, config).unwrap()
        })
    }
}

impl Rig<Baseline> {
    pub fn baseline(config: Config) -> Self {
        Self::baseline_on(config, Machine::stepped())
    }

    pub fn baseline_on(config: Config, machine: Machine) -> Self {
        Self::build(config, machine, |memory, queue, config| {
            BaselineTracker::new(memory, queue, config).unwrap()
        })
    }
}

impl<T> Rig<T> {
    fn build(
        config: Config,
        machine: Machine,
        make: impl FnOnce(Arc<SignalPool>, AqlQueue, Config) -> T,
    ) -> Self {
        let gpu = Arc::new(Gpu::new(machine));
        let queue = gpu.queue(gpu.queue_options(&machine));
        let memory = Arc::new(SignalPool::new(&gpu.device));
        let tracker = make(memory.clone(), queue.clone(), config);
        let empty_kernel = gpu.standin.register_kernel(Kernel::Empty);
        Rig {
            tracker,
            issued: Vec::new(),
            queue,
            memory,
            config,
            machine,
            empty_kernel,
            gpu,
        }
    }

    pub fn standin(&self) -> &Standin {
        &self.gpu.standin
    }

    pub fn control(&self) -> QueueControl<'_> {
        self.gpu.control(&self.queue)
    }

    /// Another queue on the same GPU.
    pub fn new_queue(&self) -> AqlQueue {
        self.gpu.queue(self.gpu.queue_options(&self.machine))
    }

    /// Another retiring tracker, on a new queue of the same GPU, with a pool
    /// of its own: for cross-queue waits.
    pub fn neighbour(&self, config: Config) -> Rig<Retiring> {
        let queue = self.new_queue();
        let memory = Arc::new(SignalPool::new(&self.gpu.device));
        Rig {
            tracker: RetiringTracker::new(memory.clone(), queue.clone(), config).unwrap(),
            issued: Vec::new(),
            queue,
            memory,
            config,
            machine: self.machine,
            empty_kernel: self.empty_kernel,
            gpu: self.gpu.clone(),
        }
    }
}

impl<T: Tracker<Memory = SignalPool, Queue = AqlQueue>> Rig<T> {
    /// Acquires a signal for the next packet and publishes an empty kernel
    /// dispatch completing it, through the backend.
    pub fn submit(&mut self, barrier: bool, purpose: Purpose) -> Result<Issued, Error> {
        self.submit_request(
            Request::packet(self.queue.write_index())
                .barrier(barrier)
                .purpose(purpose),
            &[],
        )
    }

    /// As `submit`, with dependencies (packet handles): then the packet is a
    /// barrier-AND.
    pub fn submit_request(
        &mut self,
        request: Request,
        dependencies: &[u64],
    ) -> Result<Issued, Error> {
        let index = self.queue.write_index();
        let acquired = self.tracker.acquire(request)?;
        assert_eq!(self.queue.reserve().unwrap(), index);
        let work = if dependencies.is_empty() {
            Work::Kernel(self.empty_kernel)
        } else {
            Work::Wait(dependencies)
        };
        self.queue
            .publish(index, work, request.is_fence(), acquired.signal)
            .unwrap();
        let issued = Issued {
            queue: self.queue.clone(),
            ticket: acquired.ticket,
            index,
            signal: acquired.signal,
            timed: request.is_timed(),
            abandoned: false,
        };
        self.issued.push(issued.clone());
        Ok(issued)
    }

    pub fn truth(&self, issued: &Issued) -> Option<Truth> {
        self.gpu
            .standin
            .queue(issued.queue.raw())
            .truth(issued.index)
    }

    /// Every invariant of DESIGN.md section 6 the rig can see.
    pub fn check(&mut self) {
        self.gpu.standin.assert_no_violations();
        for issued in self.issued.clone() {
            let known = self.tracker.known_status(&issued.ticket).unwrap();
            let Some(truth) = self.truth(&issued) else {
                continue;
            };
            match known {
                Some(Status::Complete) => assert!(
                    truth.completed,
                    "use {} reported complete, but packet {} is {truth:?}",
                    issued.ticket.seq(),
                    issued.index
                ),
                Some(Status::Failed) => assert!(
                    truth.failed || issued.abandoned || !truth.completed,
                    "use {} reported failed, but its packet completed",
                    issued.ticket.seq()
                ),
                _ => {}
            }
        }
        let census = self.tracker.census();
        assert!(census.is_balanced(), "a signal went missing: {census:?}");
        assert!(
            census.in_flight <= self.config.max_in_flight(),
            "ring past its bound: {census:?}"
        );
    }

    /// Runs the GPU until it can do nothing more, then checks.
    pub fn run(&mut self) {
        self.gpu.standin.run_until_idle();
        self.check();
    }

    pub fn status(&mut self, issued: &Issued) -> Status {
        self.tracker.query(&issued.ticket).unwrap()
    }
}

/// A watchdog: unless disarmed within `limit`, it records that it fired and
/// runs `rescue`, which must break whatever it guards so the test ends.
pub struct Watchdog {
    disarm: Option<mpsc::Sender<()>>,
    fired: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    pub fn start(limit: Duration, rescue: impl FnOnce() + Send + 'static) -> Self {
        let (disarm, disarmed) = mpsc::channel::<()>();
        let fired = Arc::new(AtomicBool::new(false));
        let thread = {
            let fired = fired.clone();
            std::thread::spawn(move || {
                if disarmed.recv_timeout(limit).is_err() {
                    fired.store(true, Ordering::Release);
                    rescue();
                }
            })
        };
        Self {
            disarm: Some(disarm),
            fired,
            thread: Some(thread),
        }
    }

    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::Acquire)
    }

    /// Stops the watchdog; returns whether it had fired.
    pub fn disarm(mut self) -> bool {
        if let Some(disarm) = self.disarm.take() {
            let _ = disarm.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.fired()
    }
}

/// Runs `f` on a thread and fails the test if it does not return within
/// `limit` (the thread is left behind: the process exit ends it).
pub fn within<R: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> R + Send + 'static,
) -> R {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(f());
    });
    receiver
        .recv_timeout(limit)
        .unwrap_or_else(|_| panic!("{what} did not return within {limit:?}"))
}
