//! A test rig: a tracker on a stepped simulator, every use it handed out,
//! and a check of DESIGN.md section 6's invariants against the simulator's
//! ground truth, to run after every step.
#![allow(dead_code)]

use sim::{Queue, QueueConfig, Sim, SimConfig};
use std::sync::Arc;
use tracker::sim_backend::{SimMemory, submit_kernel, submit_wait};
use tracker::{
    BaselineTracker, Config, Error, Purpose, Request, RetiringTracker, Status, Ticket, Tracker,
};

/// One use the rig handed out.
#[derive(Clone, Debug)]
pub struct Issued {
    /// The queue its packet went to.
    pub queue: Queue,
    pub ticket: Ticket,
    /// The AQL index of its packet (`None` for copy-engine uses).
    pub index: Option<u64>,
    pub signal: u64,
    pub timed: bool,
    /// Its submission was failed on purpose (`fail_submission`).
    pub abandoned: bool,
}

pub struct Rig<T> {
    pub tracker: T,
    pub queue: Queue,
    pub sim: Sim,
    pub config: Config,
    pub issued: Vec<Issued>,
}

pub type Retiring = RetiringTracker<SimMemory, Queue>;
pub type Baseline = BaselineTracker<SimMemory, Queue>;

pub fn queue_config() -> QueueConfig {
    QueueConfig {
        size: 1 << 14,
        profiling: true,
        ..QueueConfig::default()
    }
}

fn parts(queue_config: QueueConfig) -> (Sim, Queue, Arc<SimMemory>) {
    let sim = Sim::new(SimConfig {
        agents: 2,
        ..SimConfig::default()
    });
    let queue = sim.create_queue(queue_config).unwrap();
    let memory = Arc::new(SimMemory::new(sim.clone(), queue.agent()));
    (sim, queue, memory)
}

impl Rig<Retiring> {
    pub fn retiring(config: Config) -> Self {
        Self::retiring_on(config, queue_config())
    }

    pub fn retiring_on(config: Config, queue_config: QueueConfig) -> Self {
        let (sim, queue, memory) = parts(queue_config);
        let tracker = RetiringTracker::new(memory, queue.clone(), config).unwrap();
        Rig {
            tracker,
            queue,
            sim,
            config,
            issued: Vec::new(),
        }
    }
}

impl<T> Rig<T> {
    /// Another retiring tracker on a new queue of the same simulator, for
    /// cross-queue waits.
    pub fn neighbour(&self, config: Config) -> Rig<Retiring> {
        let queue = self.sim.create_queue(queue_config()).unwrap();
        let memory = Arc::new(SimMemory::new(self.sim.clone(), queue.agent()));
        let tracker = RetiringTracker::new(memory, queue.clone(), config).unwrap();
        Rig {
            tracker,
            queue,
            sim: self.sim.clone(),
            config,
            issued: Vec::new(),
        }
    }
}

impl Rig<Baseline> {
    pub fn baseline(config: Config) -> Self {
        Self::baseline_on(config, queue_config())
    }

    pub fn baseline_on(config: Config, queue_config: QueueConfig) -> Self {
        let (sim, queue, memory) = parts(queue_config);
        let tracker = BaselineTracker::new(memory, queue.clone(), config).unwrap();
        Rig {
            tracker,
            queue,
            sim,
            config,
            issued: Vec::new(),
        }
    }
}

impl<T: Tracker<Memory = SimMemory, Queue = Queue>> Rig<T> {
    /// Acquires a signal for the next packet and publishes empty work (an
    /// empty kernel) completing it.
    pub fn submit(&mut self, barrier: bool, purpose: Purpose) -> Result<Issued, Error> {
        self.submit_request(
            Request::packet(self.queue.write_index())
                .barrier(barrier)
                .purpose(purpose),
            &[],
        )
    }

    /// As `submit`, with dependencies (packet handles) to wait on: then the
    /// packet is a barrier-AND.
    pub fn submit_request(
        &mut self,
        request: Request,
        dependencies: &[u64],
    ) -> Result<Issued, Error> {
        let index = self.queue.write_index();
        let acquired = self.tracker.acquire(request)?;
        assert_eq!(self.queue.reserve().unwrap(), index);
        if dependencies.is_empty() {
            submit_kernel(&self.queue, index, acquired.signal, request.is_fence());
        } else {
            submit_wait(
                &self.queue,
                index,
                acquired.signal,
                dependencies,
                request.is_fence(),
            );
        }
        let issued = Issued {
            queue: self.queue.clone(),
            ticket: acquired.ticket,
            index: Some(index),
            signal: acquired.signal,
            timed: request.is_timed(),
            abandoned: false,
        };
        self.issued.push(issued.clone());
        Ok(issued)
    }

    pub fn truth(&self, issued: &Issued) -> Option<sim::PacketTruth> {
        issued.index.and_then(|i| issued.queue.truth(i))
    }

    /// Every invariant of DESIGN.md section 6 that the rig can see.
    pub fn check(&mut self) {
        let violations = self.sim.violations();
        assert!(violations.is_empty(), "simulator saw: {violations:#?}");
        for issued in self.issued.clone() {
            let known = self.tracker.known_status(&issued.ticket).unwrap();
            let Some(truth) = self.truth(&issued) else {
                continue;
            };
            match known {
                Some(Status::Complete) => assert!(
                    truth.completed,
                    "use {} reported complete, but packet {:?} is {truth:?}",
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

    /// Runs the simulated GPU until it can do nothing more, then checks.
    pub fn run(&mut self) {
        self.queue.run_until_idle();
        self.check();
    }

    pub fn status(&mut self, issued: &Issued) -> Status {
        self.tracker.query(&issued.ticket).unwrap()
    }
}
