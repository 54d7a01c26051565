//! The operations of a queue-layer scenario and the setups it runs under,
//! drawn from bytes (a seeded generator in the property test, libFuzzer in
//! `fuzz/`).
//!
//! Picks (`stream`, `event`, `command`, `hw`, ...) are raw bytes taken
//! modulo the length of the driver's list when the operation runs, so every
//! byte string is a valid scenario, and an operation whose list is empty
//! does nothing.

use arbitrary::{Arbitrary, Unstructured};
use sigretire_tracker::WaitPolicy;

/// What a launch runs.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelChoice {
    /// The empty kernel.
    Empty,
    /// A kernel that runs until its gate is released ([`Op::Release`]).
    Gated,
    /// A kernel with a run time (the stepped machine completes it when the
    /// driver steps it).
    Timed,
    /// The caller's own dispatch packet body, of the empty kernel.
    Dispatch,
}

/// What a single `submit` publishes.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WorkChoice {
    /// Empty work.
    Empty,
    /// A marker (no work, only the completion).
    Marker,
    /// A barrier-AND with no dependencies.
    NoDependencies,
    /// A barrier-AND of six dependencies: the backend refuses it (five at
    /// most), after the slot was reserved.
    TooManyDependencies,
    /// A barrier-OR of no dependency: the backend refuses it.
    EmptyWaitAny,
}

impl WorkChoice {
    /// Whether the backend refuses it.
    pub const fn refused(self) -> bool {
        matches!(
            self,
            WorkChoice::TooManyDependencies | WorkChoice::EmptyWaitAny
        )
    }
}

/// Where [`Op::MoveTo`] moves a stream.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MoveTarget {
    /// A new hardware queue.
    Fresh,
    /// The hardware queue the stream ran on before its current one (a new
    /// one if it has none).
    Back,
    /// Another stream's current hardware queue, whose packets are then the
    /// runtime's own work on it, as this stream sees them.
    Join(u8),
}

/// One step of the stepped packet processor.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GpuStep {
    /// Launch the next packet of hardware queue `hw`.
    Launch {
        /// The hardware queue (any the scenario made).
        hw: u8,
    },
    /// Complete a launched packet of `hw`: the oldest, or on an
    /// out-of-order machine the one `pick` names.
    Complete {
        /// The hardware queue.
        hw: u8,
        /// Which launched packet.
        pick: u8,
    },
    /// Consume the packet at `hw`'s read index.
    Advance {
        /// The hardware queue.
        hw: u8,
    },
    /// Run `hw` until it can do nothing more.
    Run {
        /// The hardware queue.
        hw: u8,
    },
    /// Run every queue until none can do anything more.
    RunAll,
}

/// One operation of a scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `launch` on a stream.
    Launch {
        /// The stream.
        stream: u8,
        /// The kernel.
        kernel: KernelChoice,
    },
    /// `submit` of one piece of work.
    Submit {
        /// The stream.
        stream: u8,
        /// The work.
        work: WorkChoice,
    },
    /// `submit_all` of 2 to 4 operations; with `refused_at`, the backend
    /// refuses that one (after the ones before it were issued: they still
    /// run and name the command's signal).
    SubmitAll {
        /// The stream.
        stream: u8,
        /// How many operations (2 to 4).
        parts: u8,
        /// The operation the backend refuses, if any (modulo `parts`).
        refused_at: Option<u8>,
        /// The first operation is a gated kernel, so the issued part runs
        /// long.
        gated: bool,
    },
    /// `record_event`.
    Record {
        /// The stream.
        stream: u8,
    },
    /// `Event::query`.
    QueryEvent {
        /// The event.
        event: u8,
    },
    /// `Event::synchronize`, on a helper thread.
    SyncEvent {
        /// The event.
        event: u8,
    },
    /// `Event::timestamps` of an event and `elapsed_to` another.
    Stamps {
        /// The start event.
        event: u8,
        /// The stop event.
        stop: u8,
    },
    /// Drop an event handle.
    DropEvent {
        /// The event.
        event: u8,
    },
    /// `Command::status`.
    Status {
        /// The command.
        command: u8,
    },
    /// `Command::wait`, on a helper thread.
    WaitCommand {
        /// The command.
        command: u8,
    },
    /// Drop a command handle.
    DropCommand {
        /// The command.
        command: u8,
    },
    /// `HostQueue::synchronize` from 1 to 3 helper threads at once.
    Synchronize {
        /// The stream.
        stream: u8,
        /// How many threads (1 to 3).
        threads: u8,
    },
    /// `HostQueue::query`.
    Query {
        /// The stream.
        stream: u8,
    },
    /// `wait_events` on 1 to 7 events (any streams'; may repeat).
    WaitEvents {
        /// The waiting stream.
        stream: u8,
        /// The first event.
        first: u8,
        /// How many (1 to 7).
        count: u8,
    },
    /// `wait_queue` on another (or the same) stream.
    WaitQueue {
        /// The waiting stream.
        stream: u8,
        /// The producer.
        producer: u8,
    },
    /// `move_to`: the stream moves to another hardware queue.
    MoveTo {
        /// The stream.
        stream: u8,
        /// Where to.
        to: MoveTarget,
    },
    /// The runtime's own packet on the stream's current hardware queue (as
    /// on an adopted queue), published between the layer's: a kernel with
    /// no completion signal, gated on a flag or empty, with or without the
    /// barrier bit.
    Foreign {
        /// Whose hardware queue.
        stream: u8,
        /// A gated kernel.
        gated: bool,
        /// The barrier bit.
        barrier: bool,
    },
    /// A step of the GPU.
    Step(GpuStep),
    /// Release a gate (every kernel waiting on it may complete).
    Release {
        /// The gate.
        gate: u8,
    },
    /// A queue error on a hardware queue (any the scenario made).
    FailQueue {
        /// The hardware queue.
        hw: u8,
    },
    /// Drop a stream's handle (its events, commands and waiters keep it).
    DropQueue {
        /// The stream.
        stream: u8,
    },
    /// A new stream on a new hardware queue (of a new device if the
    /// scenario dropped its device).
    CreateQueue,
    /// Drop the device handle (its queues live on).
    DropDevice,
    /// A device-wide fault (`Device::set_error`: a lost device) on a live
    /// device: the one fault that fails every queue of the device. (A queue
    /// failure, `FailQueue`, fails its queue alone.)
    DeviceFault {
        /// The device (any live one).
        device: u8,
    },
}

/// How often each operation is drawn, in [`Op`]'s order of kinds.
const WEIGHTS: [(u32, u8); 24] = [
    (10, 0),  // Launch
    (3, 1),   // Submit
    (4, 2),   // SubmitAll
    (8, 3),   // Record
    (5, 4),   // QueryEvent
    (4, 5),   // SyncEvent
    (2, 6),   // Stamps
    (2, 7),   // DropEvent
    (5, 8),   // Status
    (3, 9),   // WaitCommand
    (2, 10),  // DropCommand
    (6, 11),  // Synchronize
    (5, 12),  // Query
    (4, 13),  // WaitEvents
    (3, 14),  // WaitQueue
    (3, 15),  // MoveTo
    (5, 16),  // Foreign
    (14, 17), // Step
    (5, 18),  // Release
    (1, 19),  // FailQueue
    (1, 20),  // DropQueue
    (1, 21),  // CreateQueue
    (1, 22),  // DropDevice
    (1, 23),  // DeviceFault
];

impl<'a> Arbitrary<'a> for Op {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let total: u32 = WEIGHTS.iter().map(|(w, _)| w).sum();
        let mut draw = u.int_in_range(0..=total - 1)?;
        let mut kind = 0;
        for (weight, k) in WEIGHTS {
            if draw < weight {
                kind = k;
                break;
            }
            draw -= weight;
        }
        Ok(match kind {
            0 => Op::Launch {
                stream: u.arbitrary()?,
                kernel: u.arbitrary()?,
            },
            1 => Op::Submit {
                stream: u.arbitrary()?,
                work: u.arbitrary()?,
            },
            2 => Op::SubmitAll {
                stream: u.arbitrary()?,
                parts: 2 + u.int_in_range(0..=2)?,
                refused_at: u.arbitrary()?,
                gated: u.arbitrary()?,
            },
            3 => Op::Record {
                stream: u.arbitrary()?,
            },
            4 => Op::QueryEvent {
                event: u.arbitrary()?,
            },
            5 => Op::SyncEvent {
                event: u.arbitrary()?,
            },
            6 => Op::Stamps {
                event: u.arbitrary()?,
                stop: u.arbitrary()?,
            },
            7 => Op::DropEvent {
                event: u.arbitrary()?,
            },
            8 => Op::Status {
                command: u.arbitrary()?,
            },
            9 => Op::WaitCommand {
                command: u.arbitrary()?,
            },
            10 => Op::DropCommand {
                command: u.arbitrary()?,
            },
            11 => Op::Synchronize {
                stream: u.arbitrary()?,
                threads: 1 + u.int_in_range(0..=2)?,
            },
            12 => Op::Query {
                stream: u.arbitrary()?,
            },
            13 => Op::WaitEvents {
                stream: u.arbitrary()?,
                first: u.arbitrary()?,
                count: 1 + u.int_in_range(0..=6)?,
            },
            14 => Op::WaitQueue {
                stream: u.arbitrary()?,
                producer: u.arbitrary()?,
            },
            15 => Op::MoveTo {
                stream: u.arbitrary()?,
                to: u.arbitrary()?,
            },
            16 => Op::Foreign {
                stream: u.arbitrary()?,
                gated: u.arbitrary()?,
                barrier: u.arbitrary()?,
            },
            17 => Op::Step(u.arbitrary()?),
            18 => Op::Release {
                gate: u.arbitrary()?,
            },
            19 => Op::FailQueue { hw: u.arbitrary()? },
            20 => Op::DropQueue {
                stream: u.arbitrary()?,
            },
            21 => Op::CreateQueue,
            22 => Op::DropDevice,
            _ => Op::DeviceFault {
                device: u.arbitrary()?,
            },
        })
    }
}

impl Op {
    /// The kind of operation, by the name [`without`] takes.
    pub const fn kind(&self) -> &'static str {
        match self {
            Op::Launch { .. } => "launch",
            Op::Submit { work, .. } if work.refused() => "refusal",
            Op::Submit { .. } => "submit",
            Op::SubmitAll {
                refused_at: Some(_),
                ..
            } => "refusal",
            Op::SubmitAll { .. } => "submit_all",
            Op::Record { .. } => "record",
            Op::QueryEvent { .. } => "event-query",
            Op::SyncEvent { .. } => "event-sync",
            Op::Stamps { .. } => "stamps",
            Op::DropEvent { .. } | Op::DropCommand { .. } => "drop",
            Op::Status { .. } => "status",
            Op::WaitCommand { .. } => "command-wait",
            Op::Synchronize { .. } => "synchronize",
            Op::Query { .. } => "query",
            Op::WaitEvents { .. } | Op::WaitQueue { .. } => "cross-wait",
            Op::MoveTo { .. } => "move",
            Op::Foreign { .. } => "foreign",
            Op::Step(_) => "step",
            Op::Release { .. } => "release",
            Op::FailQueue { .. } | Op::DeviceFault { .. } => "failure",
            Op::DropQueue { .. } | Op::CreateQueue | Op::DropDevice => "streams",
        }
    }
}

/// `ops` without the kinds named in `kinds` (comma-separated [`Op::kind`]
/// names): to look for other causes of a failure once one is known.
pub fn without(ops: Vec<Op>, kinds: &str) -> Vec<Op> {
    let kinds: Vec<&str> = kinds.split(',').map(str::trim).collect();
    ops.into_iter()
        .filter(|op| !kinds.contains(&op.kind()))
        .collect()
}

/// Up to `max` operations from `u`, fewer if it runs out of bytes (the
/// rest would all be the same default operation).
pub fn decode_ops(u: &mut Unstructured<'_>, max: usize) -> Vec<Op> {
    let mut ops = Vec::new();
    while ops.len() < max && !u.is_empty() {
        match Op::arbitrary(u) {
            Ok(op) => ops.push(op),
            Err(_) => break,
        }
    }
    ops
}

/// How waits wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// [`WaitPolicy::spin`].
    Spin,
    /// [`WaitPolicy::blocking`]: waits sleep on the queue's wake signals.
    Sleep,
    /// [`WaitPolicy::hybrid`]: waits doze to the queue's usual completion
    /// time (a long doze on a wake armed as it starts), then spin.
    Hybrid,
}

impl Policy {
    /// The wait policy.
    pub const fn wait_policy(self) -> WaitPolicy {
        match self {
            Policy::Spin => WaitPolicy::spin(),
            Policy::Sleep => WaitPolicy::blocking(),
            Policy::Hybrid => WaitPolicy::hybrid(),
        }
    }
}

/// The configuration a scenario runs under: every stream's, the device's
/// and the machine's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueSetup {
    /// A name for reports.
    pub name: &'static str,
    /// `DeviceConfig::skip_abort_on_error`.
    pub skip_abort: bool,
    /// Every queue's wait policy.
    pub policy: Policy,
    /// `QueueConfig::cpu_sync_batch` (0: every synchronize goes through the
    /// completion thread).
    pub cpu_sync_batch: usize,
    /// Both batch limits: small ones close batches, which go to the
    /// completion thread.
    pub batch_limit: usize,
    /// `QueueConfig::profiling`: events are timed.
    pub profiling: bool,
    /// `QueueConfig::wake_signals` (0: sleeping waits poll).
    pub wake_signals: usize,
    /// Packets without the barrier bit complete in any order once launched.
    pub out_of_order: bool,
    /// The trackers' signals live in device memory.
    pub device_signals: bool,
    /// Every hardware queue runs wake packets on a relay beside it (as a
    /// CUDA queue does), where the machine has one: the simulator.
    pub wake_relay: bool,
}

/// Every setup, in the order the property test cycles through them.
pub fn queue_setups() -> Vec<QueueSetup> {
    vec![
        QueueSetup {
            name: "defaults",
            skip_abort: false,
            policy: Policy::Spin,
            cpu_sync_batch: 8,
            batch_limit: 1000,
            profiling: true,
            wake_signals: 5,
            out_of_order: false,
            device_signals: false,
            wake_relay: false,
        },
        QueueSetup {
            name: "sleeping waits, small batches, skip abort",
            skip_abort: true,
            policy: Policy::Sleep,
            cpu_sync_batch: 2,
            batch_limit: 4,
            profiling: true,
            wake_signals: 2,
            out_of_order: false,
            device_signals: true,
            wake_relay: false,
        },
        QueueSetup {
            name: "completion thread, out of order, untimed, skip abort",
            skip_abort: true,
            policy: Policy::Spin,
            cpu_sync_batch: 0,
            batch_limit: 3,
            profiling: false,
            wake_signals: 5,
            out_of_order: true,
            device_signals: false,
            wake_relay: false,
        },
        QueueSetup {
            name: "sleeping waits without wake signals, out of order",
            skip_abort: true,
            policy: Policy::Sleep,
            cpu_sync_batch: 8,
            batch_limit: 8,
            profiling: true,
            wake_signals: 0,
            out_of_order: true,
            device_signals: true,
            wake_relay: false,
        },
        QueueSetup {
            name: "sleeping waits, one wake signal, abort on error",
            skip_abort: false,
            policy: Policy::Sleep,
            cpu_sync_batch: 4,
            batch_limit: 16,
            profiling: true,
            wake_signals: 1,
            out_of_order: false,
            device_signals: false,
            wake_relay: false,
        },
        QueueSetup {
            name: "sleeping waits, wake relay, small batches, skip abort",
            skip_abort: true,
            policy: Policy::Sleep,
            cpu_sync_batch: 2,
            batch_limit: 4,
            profiling: true,
            wake_signals: 3,
            out_of_order: false,
            device_signals: true,
            wake_relay: true,
        },
        QueueSetup {
            name: "hybrid waits, wake relay, small batches, skip abort",
            skip_abort: true,
            policy: Policy::Hybrid,
            cpu_sync_batch: 2,
            batch_limit: 4,
            profiling: true,
            wake_signals: 2,
            out_of_order: false,
            device_signals: false,
            wake_relay: true,
        },
        QueueSetup {
            name: "completion thread, wake relay, out of order, abort on error",
            skip_abort: false,
            policy: Policy::Spin,
            cpu_sync_batch: 0,
            batch_limit: 3,
            profiling: false,
            wake_signals: 2,
            out_of_order: true,
            device_signals: false,
            wake_relay: true,
        },
    ]
}
