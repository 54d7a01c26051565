//! The queue layer's property test: seeded random sequences of queue-layer
//! operations (`sigretire_scenarios::queues`), every answer judged after
//! every step against the machine's ground truth, on the stepped simulator
//! and on the ROCr backend over its stand-in (through the backends'
//! support code), under every setup. The interesting states must be
//! reached (coverage counters); then every class of failure found is
//! reported, each with its seed and a scenario shortened to what still
//! fails the same way.
//!
//! `QUEUE_SCENARIO_CASES` (scenarios per setup) and `QUEUE_SCENARIO_SEED`
//! explore further than CI does: `QUEUE_SCENARIO_CASES=500
//! QUEUE_SCENARIO_SEED=7 cargo test --release -p sigretire-scenarios --test
//! queue_property`. `QUEUE_SCENARIO_WITHOUT=foreign,move` leaves kinds of
//! operations out (`Op::kind`), to look for other causes of a failure;
//! `QUEUE_SCENARIO_SETUPS=0,2` runs only those setups (`queue_setups()`);
//! `QUEUE_LIVENESS_MS` sets how long a waiter may take to return once it
//! must (3000 by default).

// Only the stand-in of the backends' support code is used here.
#[allow(unused_imports, unused_macros)]
mod support;

use sigretire_scenarios::queues::gpu::{MachineViolation, Refused, Release, Truth};
use sigretire_scenarios::queues::search::{QUEUE_PROPERTY_SEED, explore_all};
use sigretire_scenarios::queues::{Gpu, QueueCoverage, QueueSetup, SimGpu, queue_setups};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;
use support::{Backend, Machine, Standin};

/// Scenarios per setup on the simulator in CI: a few seconds in a debug
/// build.
const SIM_CASES: u64 = 20;

/// Scenarios per setup on the stand-in (each loads a private copy of the
/// library).
const STANDIN_CASES: u64 = 4;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Every class of failure among the scenarios, after the coverage they
/// reached (failing ones included) is checked by `reached`.
fn explore_on<G: Gpu>(cases: u64, reached: impl FnOnce(&QueueCoverage) -> Vec<&'static str>) {
    let cases = env_or("QUEUE_SCENARIO_CASES", cases);
    let seed = env_or("QUEUE_SCENARIO_SEED", QUEUE_PROPERTY_SEED);
    let setups: Vec<_> = match std::env::var("QUEUE_SCENARIO_SETUPS") {
        Ok(picked) => picked
            .split(',')
            .filter_map(|i| i.trim().parse::<usize>().ok())
            .map(|i| queue_setups()[i])
            .collect(),
        Err(_) => queue_setups(),
    };
    let (coverage, found) = explore_all::<G>(&setups, cases, seed);
    eprintln!("{}: {coverage:#?}", G::NAME);
    let missed = reached(&coverage);
    let reports: Vec<String> = found.iter().map(|case| case.report::<G>()).collect();
    assert!(
        missed.is_empty() && reports.is_empty(),
        "{}: {} states never reached: {missed:?}\n{} classes of failure:\n{}",
        G::NAME,
        missed.len(),
        reports.len(),
        reports.join("\n")
    );
}

/// The states where the queue layer's shortcuts live, and what breaks
/// their premise: each must be reached.
fn shortcuts_and_their_enemies(c: &QueueCoverage) -> Vec<&'static str> {
    let mut missed = Vec::new();
    let mut need = |reached: u64, what: &'static str| {
        if reached == 0 {
            missed.push(what);
        }
    };
    need(c.shared_completions, "shared completions");
    need(c.elided_dependencies, "elided dependencies");
    need(c.lock_free_syncs, "lock-free synchronizes");
    need(c.inline_syncs, "synchronizes on a done newest command");
    need(
        c.handler_syncs,
        "synchronizes through the completion thread",
    );
    need(c.marker_joins, "synchronizes joining a marker in flight");
    need(c.lock_free_event_syncs, "lock-free event synchronizes");
    need(c.cross_waits, "cross-queue waits");
    need(c.moves, "moves to another hardware queue");
    need(c.order_waits, "order waits after a move");
    need(c.foreign_packets, "the runtime's own packets");
    need(c.gated_foreign, "the runtime's own long-running packets");
    need(
        c.partial_refusals,
        "submissions refused after issuing a part",
    );
    need(c.queue_failures, "queue failures");
    need(c.device_errors, "devices in the error state");
    need(c.early_returns, "waits returning early on a device error");
    need(c.sleeping_waits, "sleeping waits");
    need(c.handler_sleeps, "completion-thread sleeps");
    need(c.relay_wakes, "wakes on a relay beside the queue");
    need(
        c.blocked_helpers,
        "waiters blocked while the driver went on",
    );
    need(c.liveness_claims, "waiters held to the bound");
    need(c.drops, "dropped handles");
    missed
}

#[test]
fn the_queue_layer_answers_only_the_truth_on_the_simulator() {
    explore_on::<SimGpu>(SIM_CASES, shortcuts_and_their_enemies);
}

#[test]
fn the_queue_layer_answers_only_the_truth_on_the_rocr_standin() {
    explore_on::<Rocr<false>>(STANDIN_CASES, rocr_reaches);
}

/// Every queue the runtime's own, adopted by the ROCr backend (which never
/// destroys it), with the runtime's packets between the layer's, and
/// cross-queue waits on them.
#[test]
fn the_queue_layer_answers_only_the_truth_on_adopted_rocr_queues() {
    explore_on::<Rocr<true>>(STANDIN_CASES, |c| {
        let mut missed = rocr_reaches(c);
        if c.cross_waits == 0 {
            missed.push("cross-queue waits");
        }
        missed
    });
}

/// The states every stand-in exploration must reach.
fn rocr_reaches(c: &QueueCoverage) -> Vec<&'static str> {
    {
        let mut missed = Vec::new();
        for (reached, what) in [
            (c.shared_completions, "shared completions"),
            (c.moves, "moves to another hardware queue"),
            (c.foreign_packets, "the runtime's own packets"),
            (
                c.partial_refusals,
                "submissions refused after issuing a part",
            ),
            (
                c.blocked_helpers,
                "waiters blocked while the driver went on",
            ),
        ] {
            if reached == 0 {
                missed.push(what);
            }
        }
        missed
    }
}

/// The ROCr backend over a private stand-in, as a machine for the queue
/// driver: the backends' support code (`support::Standin`) behind the
/// driver's [`Gpu`].
#[derive(Clone)]
struct Rocr<const ADOPTED: bool>(Standin<ADOPTED>);

impl<const ADOPTED: bool> Gpu for Rocr<ADOPTED> {
    type Memory = <Standin<ADOPTED> as Backend>::Memory;
    type Queue = <Standin<ADOPTED> as Backend>::Queue;

    const NAME: &'static str = if ADOPTED {
        "ROCr stand-in (adopted queues)"
    } else {
        "ROCr stand-in"
    };

    /// The stand-in is an AQL machine: no wake relay, whatever the setup.
    fn new(setup: &QueueSetup) -> Self {
        Self(Standin::new(Machine {
            out_of_order: setup.out_of_order,
            ..Machine::default()
        }))
    }

    fn queue(&self) -> Self::Queue {
        self.0.queue()
    }

    fn memory(&self, queue: &Self::Queue) -> Arc<Self::Memory> {
        self.0.memory(queue)
    }

    fn write_index(&self, queue: &Self::Queue) -> u64 {
        Standin::<ADOPTED>::write_index(queue)
    }

    fn empty_kernel(&self) -> u64 {
        self.0.empty_kernel()
    }

    fn gated_kernel(&self) -> (u64, Release) {
        self.0.spin_kernel()
    }

    fn timed_kernel(&self, duration: Duration) -> u64 {
        self.0.timed_kernel(duration)
    }

    fn timestamp_period(&self) -> Duration {
        self.0.timestamp_period()
    }

    fn reported_time(&self, tick: u64) -> u64 {
        self.0.reported_time(tick)
    }

    fn run(&self, queue: &Self::Queue) {
        self.0.run(queue);
    }

    fn run_all(&self) {
        self.0.run_all();
    }

    fn launch(&self, queue: &Self::Queue) -> Result<u64, Refused> {
        self.0.launch(queue).map_err(refused)
    }

    fn complete(&self, queue: &Self::Queue, index: u64) -> Result<(), Refused> {
        self.0.complete(queue, index).map_err(refused)
    }

    fn advance_read_index(&self, queue: &Self::Queue) -> Result<u64, Refused> {
        self.0.advance_read_index(queue).map_err(refused)
    }

    fn fail(&self, queue: &Self::Queue) {
        self.0.fail(queue);
    }

    fn truth(&self, queue: &Self::Queue, index: u64) -> Option<Truth> {
        self.0.truth(queue, index).map(|t| Truth {
            published: t.published,
            completed: t.completed,
            failed: t.failed,
            barrier: t.barrier,
            completion: t.completion,
            start_ts: t.start_ts,
            end_ts: t.end_ts,
        })
    }

    fn violations(&self) -> Vec<MachineViolation> {
        self.0
            .violations()
            .into_iter()
            .map(|v| MachineViolation {
                check: v.check,
                subject: "the stand-in",
                text: v.text,
            })
            .collect()
    }

    fn tear_down(self) -> Result<(), String> {
        // The support code asserts what the stand-in still holds.
        catch_unwind(AssertUnwindSafe(|| self.0.tear_down())).map_err(|panic| {
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "the stand-in's teardown panicked".into())
        })
    }
}

fn refused(refused: support::Refused) -> Refused {
    match refused {
        support::Refused::NotReady => Refused::NotReady,
        support::Refused::Other(why) => Refused::Other(why),
    }
}

/// The classes of failure the driver found on the queue layer as of its
/// first run, each as the shortest scenario it shrank to, under the setup
/// it fails in: each must keep every check once the layer is fixed.
mod found {
    use sigretire_scenarios::queues::ops::{
        GpuStep, KernelChoice as K, MoveTarget, Op, Op::*, WorkChoice,
    };
    use sigretire_scenarios::queues::{SimGpu, queue_setups, search};

    /// Runs `ops` under setup `setup` (an index into `queue_setups()`).
    #[track_caller]
    fn keeps_every_check(setup: usize, ops: &[Op]) {
        let setup = queue_setups()[setup];
        if let Err(failure) = search::run::<SimGpu>(setup, ops) {
            panic!("setup \"{}\": {failure}\n{ops:#?}", setup.name);
        }
    }

    const RUN: Op = Step(GpuStep::RunAll);
    /// A `submit_all` of three: a gated kernel issued, the second refused.
    const REFUSED_AFTER_A_PART: Op = SubmitAll {
        stream: 0,
        parts: 3,
        refused_at: Some(1),
        gated: true,
    };
    /// The runtime's own kernel, gated, with the barrier bit.
    const RUNTIME_PACKET: Op = Foreign {
        stream: 0,
        gated: true,
        barrier: true,
    };

    #[test]
    fn a_part_issued_before_a_refusal_is_synchronized() {
        keeps_every_check(
            0,
            &[
                REFUSED_AFTER_A_PART,
                Synchronize {
                    stream: 0,
                    threads: 1,
                },
            ],
        );
    }

    #[test]
    fn a_part_issued_before_a_refusal_is_queried() {
        keeps_every_check(0, &[REFUSED_AFTER_A_PART, Query { stream: 0 }]);
    }

    #[test]
    fn a_part_issued_before_a_refusal_is_waited_for_across_queues() {
        keeps_every_check(
            0,
            &[
                REFUSED_AFTER_A_PART,
                WaitQueue {
                    stream: 1,
                    producer: 0,
                },
            ],
        );
    }

    #[test]
    fn a_drain_leaves_a_part_issued_before_a_refusal_its_signal() {
        let refused_after_two = SubmitAll {
            stream: 0,
            parts: 3,
            refused_at: Some(2),
            gated: true,
        };
        keeps_every_check(
            1,
            &[
                Record { stream: 0 },
                refused_after_two,
                RUN,
                Synchronize {
                    stream: 0,
                    threads: 1,
                },
            ],
        );
    }

    #[test]
    fn the_runtimes_packet_after_the_newest_command_is_queried() {
        keeps_every_check(
            0,
            &[
                Launch {
                    stream: 0,
                    kernel: K::Empty,
                },
                RUN,
                RUNTIME_PACKET,
                Query { stream: 0 },
            ],
        );
    }

    #[test]
    fn the_runtimes_packet_after_the_newest_command_is_synchronized() {
        keeps_every_check(
            0,
            &[
                Launch {
                    stream: 0,
                    kernel: K::Empty,
                },
                RUN,
                RUNTIME_PACKET,
                Synchronize {
                    stream: 0,
                    threads: 1,
                },
            ],
        );
    }

    #[test]
    fn the_runtimes_packet_is_waited_for_across_queues() {
        keeps_every_check(
            0,
            &[
                RUNTIME_PACKET,
                WaitQueue {
                    stream: 1,
                    producer: 0,
                },
            ],
        );
    }

    #[test]
    fn a_moved_stream_stays_behind_the_runtimes_packet_on_the_old_queue() {
        keeps_every_check(
            0,
            &[
                Launch {
                    stream: 0,
                    kernel: K::Empty,
                },
                RUNTIME_PACKET,
                MoveTo {
                    stream: 0,
                    to: MoveTarget::Fresh,
                },
                Launch {
                    stream: 0,
                    kernel: K::Empty,
                },
                RUN,
                Status { command: 0 },
            ],
        );
    }

    #[test]
    fn an_untimed_event_after_a_failed_command_fails() {
        keeps_every_check(
            2,
            &[
                Launch {
                    stream: 0,
                    kernel: K::Empty,
                },
                FailQueue { hw: 0 },
                Status { command: 0 },
                Record { stream: 0 },
                QueryEvent { event: 0 },
            ],
        );
    }

    #[test]
    fn a_failure_on_the_new_queue_says_nothing_of_the_old_queues_work() {
        keeps_every_check(
            0,
            &[
                Launch {
                    stream: 0,
                    kernel: K::Gated,
                },
                MoveTo {
                    stream: 0,
                    to: MoveTarget::Fresh,
                },
                Synchronize {
                    stream: 0,
                    threads: 1,
                },
                FailQueue { hw: 2 },
                // The query finds the marker failed: the device enters the
                // error state, and the synchronize must return.
                Query { stream: 0 },
                Status { command: 0 },
            ],
        );
    }

    #[test]
    fn the_old_queues_uses_retire_after_a_move() {
        keeps_every_check(
            0,
            &[
                Record { stream: 1 },
                WaitEvents {
                    stream: 0,
                    first: 0,
                    count: 1,
                },
                Submit {
                    stream: 0,
                    work: WorkChoice::Marker,
                },
                Synchronize {
                    stream: 0,
                    threads: 1,
                },
                MoveTo {
                    stream: 0,
                    to: MoveTarget::Fresh,
                },
            ],
        );
    }

    #[test]
    fn a_dropped_consumer_keeps_its_pins_until_its_wait_passed() {
        keeps_every_check(
            0,
            &[
                Launch {
                    stream: 0,
                    kernel: K::Empty,
                },
                RUN,
                WaitQueue {
                    stream: 1,
                    producer: 0,
                },
                DropQueue { stream: 1 },
                Query { stream: 0 },
            ],
        );
    }

    #[test]
    fn a_command_wait_sleeps_under_a_sleeping_policy() {
        keeps_every_check(
            1,
            &[
                Launch {
                    stream: 0,
                    kernel: K::Gated,
                },
                WaitCommand { command: 0 },
            ],
        );
    }

    /// The completion thread, about to sleep on a closed batch's fence
    /// (behind a gated kernel), lends itself a wake signal whose packet
    /// just completed, before the event synchronize sleeping on it woke:
    /// the sleeper then sleeps until the thread's packet completes. Timing
    /// decides who is first: this scenario lost the race in 3 of 3 runs of
    /// the driver alone here, about 1 in 3 in the test binary; on a layer
    /// without the defect it passes every time.
    #[test]
    fn a_sleeping_wait_wakes_though_its_wake_signal_is_lent_again() {
        keeps_every_check(
            1,
            &[
                Record { stream: 239 },
                QueryEvent { event: 29 },
                Launch {
                    stream: 162,
                    kernel: K::Empty,
                },
                QueryEvent { event: 53 },
                Record { stream: 205 },
                SyncEvent { event: 34 },
                SyncEvent { event: 59 },
                Synchronize {
                    stream: 88,
                    threads: 3,
                },
                Status { command: 87 },
                Launch {
                    stream: 83,
                    kernel: K::Gated,
                },
                Record { stream: 158 },
                WaitEvents {
                    stream: 133,
                    first: 94,
                    count: 2,
                },
                SubmitAll {
                    stream: 56,
                    parts: 2,
                    refused_at: None,
                    gated: false,
                },
                Step(GpuStep::Run { hw: 163 }),
            ],
        );
    }

    #[test]
    fn a_sleeping_wait_behind_the_runtimes_packet_wakes_once_its_event_completed() {
        let runtime_packet_beside = Foreign {
            stream: 0,
            gated: true,
            barrier: false,
        };
        keeps_every_check(
            1,
            &[
                Record { stream: 0 },
                runtime_packet_beside,
                SyncEvent { event: 0 },
                RUN,
            ],
        );
    }
    /// The runtime's packet sits before the layer's first packet (a filler
    /// for a refused publication): nothing of the layer's covers it.
    #[test]
    fn the_runtimes_packet_before_a_filler_is_queried() {
        keeps_every_check(
            0,
            &[
                Foreign {
                    stream: 0,
                    gated: false,
                    barrier: true,
                },
                Submit {
                    stream: 0,
                    work: WorkChoice::EmptyWaitAny,
                },
                Query { stream: 0 },
            ],
        );
    }

    /// A move's order wait ahead of a refused publication is the stream's
    /// newest fence on the new queue: its failure is that queue's, not the
    /// old queue's commands'.
    #[test]
    fn a_failed_order_wait_fails_the_new_queue_not_the_old_commands() {
        keeps_every_check(
            3,
            &[
                Launch {
                    stream: 94,
                    kernel: K::Gated,
                },
                CreateQueue,
                MoveTo {
                    stream: 18,
                    to: MoveTarget::Back,
                },
                FailQueue { hw: 131 },
                Submit {
                    stream: 141,
                    work: WorkChoice::EmptyWaitAny,
                },
                Synchronize {
                    stream: 138,
                    threads: 1,
                },
            ],
        );
    }

    /// A move's order wait published ahead of a refused publication counts
    /// as submitted: no lock-free synchronize answers past it.
    #[test]
    fn a_synchronize_waits_for_an_order_wait_ahead_of_a_refusal() {
        keeps_every_check(
            4,
            &[
                Record { stream: 34 },
                Synchronize {
                    stream: 122,
                    threads: 3,
                },
                MoveTo {
                    stream: 118,
                    to: MoveTarget::Back,
                },
                Submit {
                    stream: 246,
                    work: WorkChoice::TooManyDependencies,
                },
                FailQueue { hw: 242 },
            ],
        );
    }

    /// A drain after a move retires the old queue's uses too, and lets go
    /// of the pins their waits held on another stream's signals.
    #[test]
    fn a_drain_after_a_move_lets_go_of_the_old_queues_pins() {
        keeps_every_check(
            0,
            &[
                Record { stream: 138 },
                WaitEvents {
                    stream: 251,
                    first: 131,
                    count: 7,
                },
                MoveTo {
                    stream: 41,
                    to: MoveTarget::Fresh,
                },
                Record { stream: 175 },
                SyncEvent { event: 235 },
            ],
        );
    }
}
