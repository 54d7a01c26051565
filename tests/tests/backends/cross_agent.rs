//! Cross-device waits between two GPU agents of one machine: a
//! queue of GPU 1 waits, on the GPU, for an event or the work of a queue of
//! GPU 0 whose completion signals live in GPU 0's VRAM.
//!
//! What each scenario holds the queue layer and the trackers to:
//!
//! - **never early**: GPU 1's work launches only after GPU 0's event
//!   completed, by the machine's own ground truth (its launch and completion
//!   stamps, one clock for every agent of the machine), round after round,
//!   while GPU 0 spins behind the event and GPU 1's barrier is seen waiting;
//! - **the peer reads a re-arm only once it is fenced**: every time GPU 1's
//!   barrier-AND names a signal of GPU 0 that GPU 0's tracker re-armed, the
//!   arming store was fenced before the barrier was published (the
//!   simulator checks it at publication, for the reading agent's packet as
//!   for the owner's; the ROCr stand-in cannot see fences, and checks
//!   instead that GPU 1 was granted access to GPU 0's block);
//! - **pins**: GPU 0's signal stays pinned while GPU 1's barrier waits,
//!   even when GPU 0's use completed and retired long before GPU 1 reached
//!   the barrier and GPU 0 went round its whole ring meanwhile (parked, not
//!   re-armed under the waiting barrier), and nothing stays pinned or parked
//!   once both queues drained;
//! - **no hang**: every wait is bounded and a watchdog watches the whole run;
//! - elapsed time between events of the two GPUs is refused
//!   ([`ElapsedError::DifferentDevices`]): their clocks are unrelated.
//!
//! Violations are looked at after each publication, so a failure says which
//! agent's packet read what (GPU 1's barrier reading an unfenced re-arm of
//! GPU 0's signal is "agent 1 published its wait"). Built with
//! `--cfg sigretire_planted`, `planted` below runs the recycling scenario with
//! `SkipStoreFence` and the lagging one with `DropPinEarly`, and each must
//! fail naming the invariant its bug breaks.

use crate::support::{
    Backend, Machine, Platform, Retiring, Watchdog, bounded, on_every_backend, wait_until,
};
use sigretire_queue::{CommandStatus, Device, ElapsedError, HostQueue};
use sigretire_scenarios::check::Failure;
use sigretire_tracker::{Config, Placement, Status, Tracker};
use std::collections::BTreeSet;
use std::time::Duration;

on_every_backend! {
    agent_one_never_runs_before_agent_zeros_event_on_a_threaded_machine,
    agent_one_never_runs_before_agent_zeros_event_stepped,
    agent_one_waits_on_recycled_device_signals_of_agent_zero_only_once_fenced,
    agent_zeros_signal_stays_pinned_while_agent_one_lags_behind,
    elapsed_time_between_events_of_two_agents_is_refused,
}

/// Rounds of the threaded scenario (the seed's hardware test ran 300 on two
/// GPUs; the issue asks 1000 of the CUDA run).
const THREADED_ROUNDS: usize = 200;
/// Rounds of the stepped scenario: each one steps every packet.
const STEPPED_ROUNDS: usize = 100;
/// Rounds of the recycling scenario: enough for every signal of GPU 0's
/// small ring to be re-armed dozens of times.
const RECYCLING_ROUNDS: usize = 512;
/// How long the whole of a scenario may go on (the watchdog's limit; the
/// bounded waits fail sooner).
const NO_PROGRESS: Duration = Duration::from_secs(120);

/// Two GPUs of one machine, a device on each, and what the machine has
/// reported so far.
struct TwoGpus<B: Backend> {
    platform: Platform<B>,
    /// GPU 0: the producer, whose signals live in its VRAM.
    gpu0: Device<Retiring<B>>,
    /// GPU 1: the consumer, waiting on GPU 0's signals.
    gpu1: Device<Retiring<B>>,
    /// The machine's violations already attributed to a step.
    violations_seen: usize,
    /// New violations, each with the step whose publication it came after.
    found: Vec<String>,
}

impl<B: Backend> TwoGpus<B> {
    fn new(threaded: bool, config: Config) -> Self {
        let machine = Machine {
            threaded,
            gpus: 2,
            ..Machine::default()
        };
        let mut platform = Platform::<B>::new(machine);
        platform.tracker_config = config;
        let gpu0 = platform.device_on(0, bounded());
        let gpu1 = platform.device_on(1, bounded());
        Self {
            platform,
            gpu0,
            gpu1,
            violations_seen: 0,
            found: Vec::new(),
        }
    }

    fn producer(&self) -> &HostQueue<Retiring<B>> {
        self.gpu0.default_queue()
    }

    fn consumer(&self) -> &HostQueue<Retiring<B>> {
        self.gpu1.default_queue()
    }

    fn gpu(&self) -> &B {
        &self.platform.gpu
    }

    /// Attributes the machine's new violations to `step` (the publication
    /// just made).
    fn look(&mut self, step: &str) {
        let violations = self.gpu().violations();
        for v in &violations[self.violations_seen..] {
            self.found
                .push(format!("after {step}: [{}] {}", v.check, v.text));
        }
        self.violations_seen = violations.len();
    }

    /// Fails the scenario, naming the invariant the first violation breaks
    /// (as the property driver names it) and every violation of the round,
    /// if the machine saw any.
    #[track_caller]
    fn assert_clean(&mut self, round: usize) {
        self.look("the round");
        if self.found.is_empty() {
            return;
        }
        let check = self.gpu().violations()[0].check;
        let failure = Failure {
            check,
            step: round,
            detail: format!(
                "round {round} of the cross-agent wait: the machine saw\n{}",
                self.found.join("\n")
            ),
        };
        panic!("{failure}");
    }

    /// Where GPU 0's signal `handle` (a packet handle) really lives.
    fn producer_placement(&self, handle: u64) -> Placement {
        let waiter = self.producer().with_tracker(|t| t.waiter());
        self.gpu().placement(waiter.memory(), handle)
    }

    /// Runs `f` while a stepped machine is driven (threaded: just runs it).
    fn run_while<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.platform.run_while(f)
    }

    /// Both queues drained, every event gone: nothing of GPU 0 stays
    /// pinned or parked, GPU 1 keeps no pin, every signal is accounted for.
    #[track_caller]
    fn assert_nothing_held(&self) {
        self.run_while(|| self.consumer().synchronize()).unwrap();
        self.run_while(|| self.producer().synchronize()).unwrap();
        // The completion thread may still be finishing a batch whose fence
        // the drain proved: it holds the fence's signal until it does.
        for queue in [self.consumer(), self.producer()] {
            wait_until("the completion thread finished its batches", || {
                queue.batches_in_completion() == 0
            });
        }
        let producer = self.producer().with_tracker(|t| {
            t.poll();
            t.reclaim();
            t.census()
        });
        assert_eq!(
            (producer.parked, producer.pins),
            (0, 0),
            "GPU 0 after the drains: {producer:?}"
        );
        assert!(producer.is_balanced(), "{producer:?}");
        let consumer = self.consumer().with_tracker(|t| {
            t.poll();
            t.census()
        });
        assert_eq!(
            (consumer.parked, consumer.pins),
            (0, 0),
            "GPU 1 after the drains: {consumer:?}"
        );
        assert!(consumer.is_balanced(), "{consumer:?}");
    }

    /// Drops both devices and checks that the machine kept nothing and saw
    /// nothing wrong.
    fn tear_down(self) {
        let Self {
            platform,
            gpu0,
            gpu1,
            ..
        } = self;
        drop((gpu0, gpu1));
        platform.gpu.tear_down();
    }
}

/// How GPU 1 waits for GPU 0.
#[derive(Clone, Copy, Debug)]
enum WaitFor {
    /// `wait_event` on the event recorded behind the spinning kernel.
    Event,
    /// `wait_queue`: everything submitted to GPU 0's queue so far.
    Queue,
}

/// One round of the seed's test: a spinning kernel on GPU 0, an event after
/// it; GPU 1 waits (for the event or for GPU 0's queue), then runs a kernel.
/// While GPU 0 spins, GPU 1's barrier is seen waiting, its kernel not
/// launched and GPU 0's signal pinned; once released, GPU 1's kernel
/// launched no earlier than GPU 0's event completed.
#[track_caller]
fn spin_round<B: Backend>(gpus: &mut TwoGpus<B>, round: usize, threaded: bool, wait_for: WaitFor) {
    let (spin, release) = gpus.gpu().spin_kernel();
    let spinning = gpus.producer().launch(spin).unwrap();
    let event = gpus.producer().record_event().unwrap();
    gpus.look("agent 0 published its spinning kernel and event");
    let wait = match wait_for {
        WaitFor::Event => gpus.consumer().wait_event(&event).unwrap(),
        WaitFor::Queue => gpus.consumer().wait_queue(gpus.producer()).unwrap(),
    };
    assert_eq!(
        (wait.packets(), wait.dependencies()),
        (1, 1),
        "round {round}: GPU 0 is pending, so GPU 1 gets one barrier on one signal"
    );
    gpus.look("agent 1 published its wait");
    let work = gpus.consumer().launch_empty().unwrap();
    gpus.look("agent 1 published its kernel");

    let hw0 = Platform::<B>::hardware(gpus.producer());
    let hw1 = Platform::<B>::hardware(gpus.consumer());
    let barrier = wait.commands()[0].aql_index();
    let launched = |hw: &B::Queue, index| {
        gpus.gpu()
            .truth(hw, index)
            .is_some_and(|t| t.start_ts.is_some())
    };
    if threaded {
        wait_until("GPU 0 spins and GPU 1 waits at its barrier", || {
            launched(&hw0, spinning.aql_index()) && launched(&hw1, barrier)
        });
    } else {
        gpus.gpu().run_all();
    }
    let at_barrier = gpus.gpu().truth(&hw1, barrier).unwrap();
    assert!(
        at_barrier.start_ts.is_some() && !at_barrier.completed,
        "round {round}: GPU 1's barrier waits: {at_barrier:?}"
    );
    assert!(
        !launched(&hw1, work.aql_index()),
        "round {round}: GPU 1's kernel launched while GPU 0 still spins"
    );
    assert_eq!(work.status(), CommandStatus::Pending);
    assert_eq!(event.query(), Status::Pending);
    assert!(
        gpus.consumer().with_tracker(|t| t.census().pins) >= 1,
        "round {round}: GPU 1 keeps GPU 0's signal pinned while its barrier waits"
    );

    release();
    gpus.run_while(|| work.wait()).unwrap();
    assert_eq!(event.query(), Status::Complete);
    let produced = gpus.gpu().truth(&hw0, event.aql_index().unwrap()).unwrap();
    let passed = gpus.gpu().truth(&hw1, barrier).unwrap();
    let ran = gpus.gpu().truth(&hw1, work.aql_index()).unwrap();
    assert!(produced.completed && passed.completed && ran.completed);
    assert_eq!(
        gpus.producer_placement(produced.completion),
        Placement::Device,
        "round {round}: GPU 1 waited on a signal in GPU 0's VRAM"
    );
    let produced_at = produced.end_ts.unwrap();
    assert!(
        passed.end_ts.unwrap() >= produced_at && ran.start_ts.unwrap() >= produced_at,
        "round {round}: GPU 1 passed early: GPU 0's event completed at {produced_at}, GPU 1's \
         barrier at {:?}, its kernel launched at {:?}",
        passed.end_ts,
        ran.start_ts
    );
    gpus.assert_clean(round);
}

/// The seed's test on a machine that runs in real time: 200 rounds,
/// alternating `wait_event` and `wait_queue`, under a watchdog.
fn agent_one_never_runs_before_agent_zeros_event_on_a_threaded_machine<B: Backend>() {
    spin_rounds::<B>(true, THREADED_ROUNDS, |round| {
        if round % 2 == 0 {
            WaitFor::Event
        } else {
            WaitFor::Queue
        }
    });
}

/// The same rounds, stepped: the scenario itself runs every packet, so the
/// barrier is seen waiting at a known point of every round.
fn agent_one_never_runs_before_agent_zeros_event_stepped<B: Backend>() {
    spin_rounds::<B>(false, STEPPED_ROUNDS, |round| {
        if round % 3 == 2 {
            WaitFor::Queue
        } else {
            WaitFor::Event
        }
    });
}

/// `rounds` of [`spin_round`] on device-memory signals under a watchdog,
/// waiting as `wait_for` says each round; then the signals were GPU 0's
/// own VRAM, and nothing stays held.
fn spin_rounds<B: Backend>(threaded: bool, rounds: usize, wait_for: impl Fn(usize) -> WaitFor) {
    let config = Config {
        signals: Placement::Device,
        ..Config::default()
    };
    let mut gpus = TwoGpus::<B>::new(threaded, config);
    let watchdog = Watchdog::start(NO_PROGRESS, || {});
    for round in 0..rounds {
        spin_round(&mut gpus, round, threaded, wait_for(round));
    }
    assert!(!watchdog.disarm(), "no progress for {NO_PROGRESS:?}");
    assert_device_signals_of_their_gpu(&gpus);
    gpus.assert_nothing_held();
    gpus.tear_down();
}

/// The signals the scenario relies on really are device memory: GPU 0's
/// tracker handed out no host-memory fallback.
#[track_caller]
fn assert_device_signals_of_their_gpu<B: Backend>(gpus: &TwoGpus<B>) {
    let device_uses = gpus.producer().with_tracker(|t| t.stats().device().stores);
    assert!(device_uses > 0, "GPU 0 armed device-memory signals");
    let host_stores = gpus.producer().with_tracker(|t| t.stats().host().stores);
    assert_eq!(host_stores, 0, "no host-memory fallback on GPU 0");
}

/// GPU 0's signals are recycled (re-armed) again and again while GPU 1
/// keeps waiting on fresh events of GPU 0: a ring of at most 8 signals,
/// 512 rounds, each a kernel and an event on GPU 0 and a wait and a kernel
/// on GPU 1, with GPU 1 sometimes waiting on several of GPU 0's events at
/// once. Every barrier GPU 1 publishes reads a signal re-armed by GPU 0;
/// the machine must never see one read before the re-arm was fenced, and
/// GPU 1 must never pass early.
///
/// With `SkipStoreFence` planted (see `planted` below) the re-arms are not
/// fenced and this fails, naming [`Check::PublishOrder`](sigretire_scenarios::Check), with GPU 1's
/// barrier among the readers.
fn agent_one_waits_on_recycled_device_signals_of_agent_zero_only_once_fenced<B: Backend>() {
    let config = Config {
        signals: Placement::Device,
        initial_size: 4,
        growth_limit: 2,
        ..Config::default()
    };
    let mut gpus = TwoGpus::<B>::new(false, config);
    let watchdog = Watchdog::start(NO_PROGRESS, || {});
    let hw0 = Platform::<B>::hardware(gpus.producer());
    let hw1 = Platform::<B>::hardware(gpus.consumer());
    let mut signals_waited_on = BTreeSet::new();
    let mut waits = 0;
    for round in 0..RECYCLING_ROUNDS {
        // Every fourth round GPU 1 waits on three events of GPU 0 at once.
        let events: Vec<_> = (0..if round % 4 == 3 { 3 } else { 1 })
            .map(|_| {
                gpus.producer().launch_empty().unwrap();
                gpus.producer().record_event().unwrap()
            })
            .collect();
        gpus.look("agent 0 published its kernels and events");
        let refs: Vec<_> = events.iter().collect();
        let wait = gpus.consumer().wait_events(&refs).unwrap();
        assert_eq!(
            wait.dependencies(),
            events.len(),
            "round {round}: nothing ran yet: every event is a dependency"
        );
        waits += wait.dependencies();
        gpus.look("agent 1 published its wait");
        let work = gpus.consumer().launch_empty().unwrap();
        gpus.look("agent 1 published its kernel");
        gpus.run_while(|| work.wait()).unwrap();

        let ran = gpus.gpu().truth(&hw1, work.aql_index()).unwrap();
        for event in &events {
            let produced = gpus.gpu().truth(&hw0, event.aql_index().unwrap()).unwrap();
            signals_waited_on.insert(produced.completion);
            assert_eq!(
                gpus.producer_placement(produced.completion),
                Placement::Device,
                "round {round}: GPU 1 waited on a signal in GPU 0's VRAM"
            );
            assert!(
                produced.completed && ran.start_ts.unwrap() >= produced.end_ts.unwrap(),
                "round {round}: GPU 1's kernel ({ran:?}) ran before GPU 0's event ({produced:?})"
            );
        }
        gpus.assert_clean(round);
        drop((events, wait, work));
        // Now and then both queues drain, so retired uses re-arm and GPU 1
        // lets go of its pins.
        if round % 8 == 7 {
            gpus.run_while(|| gpus.consumer().synchronize()).unwrap();
            gpus.run_while(|| gpus.producer().synchronize()).unwrap();
        }
    }
    assert!(!watchdog.disarm(), "no progress for {NO_PROGRESS:?}");
    let stats = gpus.producer().with_tracker(|t| t.stats());
    eprintln!(
        "recycling: {waits} waits of GPU 1 on {} signals of GPU 0; GPU 0 made {} signals for \
         {} uses and re-armed {} times",
        signals_waited_on.len(),
        stats.signals_created,
        stats.uses,
        stats.rearms
    );
    // The ring's first signals and one batch of spares (for the signals
    // events and pins hold): nothing grows with the rounds.
    assert!(
        stats.signals_created <= 64,
        "GPU 0's signals were recycled, not made anew: {} created",
        stats.signals_created
    );
    assert!(
        stats.rearms >= RECYCLING_ROUNDS as u64,
        "GPU 0 re-armed its signals {} times",
        stats.rearms
    );
    // Each signal GPU 1 waited on, it waited on again and again, re-armed
    // in between.
    assert!(
        waits >= 10 * signals_waited_on.len(),
        "GPU 1 waited {waits} times on {} signals of GPU 0",
        signals_waited_on.len()
    );
    assert_device_signals_of_their_gpu(&gpus);
    gpus.assert_nothing_held();
    drop((hw0, hw1));
    gpus.tear_down();
}

/// GPU 1 lags: GPU 0's event completes and retires while GPU 1 has not
/// reached the barrier that waits for it (GPU 1's own work ahead of the
/// barrier has finished, and GPU 1's tracker has retired it), and GPU 0
/// goes on through its whole ring. GPU 0's signal must stay pinned (parked,
/// not re-armed) until GPU 1's barrier has read it; a re-arm under the
/// waiting barrier is a store the machine sees while a published barrier
/// names the signal.
///
/// With `DropPinEarly` planted (the pin let go when the use before the
/// consumer retires) this fails, naming
/// [`Check::RearmWhileInFlight`](sigretire_scenarios::Check), on the
/// simulator and on the ROCr stand-in.
fn agent_zeros_signal_stays_pinned_while_agent_one_lags_behind<B: Backend>() {
    const ROUNDS: usize = 32;
    /// GPU 0's uses while GPU 1 lags: more than its ring holds, so every
    /// retired signal that is not pinned is re-armed and used again.
    const CHURN: usize = 16;
    let config = Config {
        signals: Placement::Device,
        initial_size: 4,
        growth_limit: 2,
        ..Config::default()
    };
    let mut gpus = TwoGpus::<B>::new(false, config);
    let hw0 = Platform::<B>::hardware(gpus.producer());
    let hw1 = Platform::<B>::hardware(gpus.consumer());
    for round in 0..ROUNDS {
        let ahead = gpus.consumer().launch_empty().unwrap();
        gpus.producer().launch_empty().unwrap();
        let event = gpus.producer().record_event().unwrap();
        let wait = gpus.consumer().wait_event(&event).unwrap();
        assert_eq!(wait.dependencies(), 1, "round {round}: GPU 0 has not run");
        let barrier = wait.commands()[0].aql_index();
        gpus.look("agent 1 published its wait");
        // GPU 0 finishes; GPU 1 runs only its work ahead of the barrier.
        gpus.gpu().run(&hw0);
        assert!(
            gpus.gpu()
                .truth(&hw0, event.aql_index().unwrap())
                .unwrap()
                .completed
        );
        drop(event);
        assert_eq!(gpus.gpu().launch(&hw1), Ok(ahead.aql_index()));
        gpus.gpu().complete(&hw1, ahead.aql_index()).unwrap();
        // The processor consumes it: the read index passes the fence, so
        // GPU 1's tracker proves and retires it.
        assert_eq!(
            gpus.gpu().advance_read_index(&hw1),
            Ok(ahead.aql_index() + 1)
        );
        gpus.consumer().with_tracker(|t| t.poll());
        assert_eq!(
            gpus.consumer()
                .with_tracker(|t| t.known_status(&ahead.ticket()).unwrap()),
            Some(Status::Complete),
            "round {round}: GPU 1 retired its work ahead of the barrier"
        );
        for _ in 0..CHURN {
            gpus.producer().launch_empty().unwrap();
            gpus.gpu().run(&hw0);
            gpus.producer().with_tracker(|t| t.poll());
        }
        gpus.look("agent 0 went on through its ring while agent 1 lagged");
        // The machine first: a re-arm under the waiting barrier is the harm.
        gpus.assert_clean(round);
        assert!(
            gpus.consumer().with_tracker(|t| t.census().pins) >= 1,
            "round {round}: the pin outlives the use before the barrier"
        );
        assert!(
            gpus.producer().with_tracker(|t| t.census().parked) >= 1,
            "round {round}: GPU 0 parked the pinned signal instead of re-arming it"
        );
        assert!(!gpus.gpu().truth(&hw1, barrier).unwrap().completed);
        gpus.gpu().run_all();
        assert!(
            gpus.gpu().truth(&hw1, barrier).unwrap().completed,
            "round {round}: GPU 1's barrier passed on GPU 0's completed use"
        );
        gpus.run_while(|| gpus.consumer().synchronize()).unwrap();
        gpus.assert_clean(round);
        drop((wait, ahead));
    }
    gpus.assert_nothing_held();
    drop((hw0, hw1));
    gpus.tear_down();
}

/// Events of two GPUs' devices, even when one waited for the other on the
/// GPU, have no elapsed time between them: [`ElapsedError::DifferentDevices`], as
/// HIP and CUDA refuse it. Each device's own events still time.
fn elapsed_time_between_events_of_two_agents_is_refused<B: Backend>() {
    let mut gpus = TwoGpus::<B>::new(false, Config::default());
    let here = gpus.producer().record_event().unwrap();
    gpus.consumer().wait_event(&here).unwrap();
    let there = gpus.consumer().record_event().unwrap();
    gpus.run_while(|| there.synchronize()).unwrap();
    here.synchronize().unwrap();
    assert_eq!(here.elapsed_to(&there), Err(ElapsedError::DifferentDevices));
    assert_eq!(there.elapsed_to(&here), Err(ElapsedError::DifferentDevices));
    let later = gpus.consumer().record_event().unwrap();
    gpus.run_while(|| later.synchronize()).unwrap();
    assert!(there.elapsed_to(&later).is_ok(), "GPU 1's own events time");
    assert_eq!(here.elapsed_to(&here), Ok(Duration::ZERO));
    gpus.assert_clean(0);
    drop((here, there, later));
    gpus.tear_down();
}

/// The simulator's oracle sees a peer's read: GPU 1's barrier-AND naming a
/// device-memory signal of GPU 0 whose re-arm is not fenced is a violation
/// of GPU 1's packet, and the same read after the fence is none. (This is
/// the check the recycling scenario relies on; the ROCr stand-in cannot see
/// fences at all.)
#[test]
fn the_simulator_sees_a_peer_read_an_unfenced_rearm() {
    use sigretire_sim::{AgentId, Sim, SimConfig, SimQueueConfig, Violation, packets};
    let sim = Sim::new(SimConfig {
        agents: 2,
        ..SimConfig::default()
    });
    let on = |agent| {
        sim.create_queue(SimQueueConfig {
            agent: AgentId(agent),
            ..SimQueueConfig::default()
        })
        .unwrap()
    };
    let (gpu0, gpu1) = (on(0), on(1));
    let signal = sim
        .allocate(1, sigretire_sim::Placement::Device, AgentId(0))
        .unwrap()[0];
    sim.store(signal, 1); // the re-arm, not fenced yet
    let read = gpu1.submit(packets::barrier_and(&[signal], None)).unwrap();
    match &sim.take_violations()[..] {
        [
            Violation::Unfenced {
                queue,
                index,
                signal: named,
            },
        ] => {
            assert_eq!((*queue, *index, *named), (gpu1.id(), read, signal));
        }
        other => panic!("expected GPU 1's barrier to read an unfenced re-arm: {other:?}"),
    }
    // GPU 0 completes the use (the re-arm fenced first, so that its own
    // packet reads it); the next re-arm is fenced before GPU 1 reads.
    sim.store_fence();
    gpu0.submit(packets::kernel(0, Some(signal))).unwrap();
    sim.run_until_idle();
    assert!(gpu1.truth(read).unwrap().completed);
    sim.store(signal, 1);
    sim.store_fence();
    let read = gpu1.submit(packets::barrier_and(&[signal], None)).unwrap();
    gpu0.submit(packets::kernel(0, Some(signal))).unwrap();
    sim.run_until_idle();
    assert!(gpu1.truth(read).unwrap().completed);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

#[cfg(sigretire_planted)]
/// The scenarios' teeth: each planted bug that breaks a cross-agent wait
/// fails its scenario. (Named `teeth_...` so that `.ci/teeth`'s
/// `--test backends teeth` runs them.) A planted bug is switched on for the
/// whole process, so each scenario runs in a child process of this binary.
mod planted {
    use sigretire_scenarios::Check;
    use sigretire_tracker::planted::Bug;

    fn caught(bug: Bug, backend: &str, scenario: &str, check: Check) -> String {
        crate::support::caught_in_child(bug, "cross_agent", backend, scenario, check)
    }

    /// The lagging-consumer scenario with `DropPinEarly` planted, on both
    /// backends: GPU 0 re-arms its signal under GPU 1's waiting barrier.
    #[test]
    fn teeth_drop_pin_early_is_caught_when_agent_one_lags() {
        for backend in ["sim", "rocr"] {
            caught(
                Bug::DropPinEarly,
                backend,
                "agent_zeros_signal_stays_pinned_while_agent_one_lags_behind",
                Check::RearmWhileInFlight,
            );
        }
    }

    /// The recycling scenario on the simulator, in a child process of this
    /// test binary with `SkipStoreFence` planted (the switch is
    /// process-wide): it must fail naming `PublishOrder`, with GPU 1's
    /// barrier among the packets that read an unfenced re-arm of GPU 0's
    /// signal. (The ROCr stand-in cannot see
    /// fences.)
    #[test]
    fn teeth_skip_store_fence_is_caught_when_agent_one_reads_agent_zeros_rearm() {
        let said = caught(
            Bug::SkipStoreFence,
            "sim",
            "agent_one_waits_on_recycled_device_signals_of_agent_zero_only_once_fenced",
            Check::PublishOrder,
        );
        let peer_read = format!(
            "after agent 1 published its wait: [{}]",
            Check::PublishOrder
        );
        assert!(
            said.contains(&peer_read),
            "GPU 1's barrier should be among the readers of an unfenced re-arm; it said:\n{said}"
        );
    }
}
