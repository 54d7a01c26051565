//! The operations a scenario is made of, drawn with `arbitrary` from bytes
//! (a seeded generator in the property tests, libFuzzer in `fuzz/`).
//!
//! Indices into the driver's lists (`pick`, `queue`) are raw bytes taken
//! modulo the list's length when the operation runs, so every byte string is
//! a valid scenario and a fuzzer's mutations stay meaningful.

use arbitrary::{Arbitrary, Unstructured};
use sigretire_tracker::Purpose;
use std::time::Duration;

/// One of the two streams of a scenario. Each has its own tracker and its
/// own hardware queues on one simulator, so GPU waiters cross queues.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamId {
    /// The first stream.
    A,
    /// The second stream.
    B,
}

impl StreamId {
    /// The stream's index in the driver.
    pub const fn index(self) -> usize {
        match self {
            StreamId::A => 0,
            StreamId::B => 1,
        }
    }

    /// The other stream: the consumer of a GPU wait this stream produces.
    pub const fn other(self) -> StreamId {
        match self {
            StreamId::A => StreamId::B,
            StreamId::B => StreamId::A,
        }
    }
}

/// What a submitted packet's use is for.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PurposeChoice {
    /// [`Purpose::Completion`].
    Completion,
    /// [`Purpose::CpuSync`].
    CpuSync,
    /// [`Purpose::Event`].
    Event,
    /// [`Purpose::GpuWaiter`].
    GpuWaiter,
    /// [`Purpose::TimingOnly`]: a host signal from the timing pool.
    TimingOnly,
}

impl From<PurposeChoice> for Purpose {
    fn from(choice: PurposeChoice) -> Purpose {
        match choice {
            PurposeChoice::Completion => Purpose::Completion,
            PurposeChoice::CpuSync => Purpose::CpuSync,
            PurposeChoice::Event => Purpose::Event,
            PurposeChoice::GpuWaiter => Purpose::GpuWaiter,
            PurposeChoice::TimingOnly => Purpose::TimingOnly,
        }
    }
}

/// How long a CPU wait may take. The stepped simulator does not move while
/// the driver's thread waits, so a wait either finds the use done at once or
/// runs into its deadline: short deadlines keep scenarios fast.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Deadline {
    /// Poll once, then time out.
    Zero,
    /// Poll for 20 microseconds.
    Short,
}

impl Deadline {
    /// The wait's timeout.
    pub const fn duration(self) -> Duration {
        match self {
            Deadline::Zero => Duration::ZERO,
            Deadline::Short => Duration::from_micros(20),
        }
    }
}

/// What a stream's copy engine does in an [`Op::CopyEngine`] step: what the
/// AQL queues do in their own operations.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EngineStep {
    /// [`Op::Launch`].
    Launch,
    /// [`Op::Complete`] (in order: its oldest launched packet).
    Complete,
    /// [`Op::AdvanceReadIndex`].
    AdvanceReadIndex,
    /// [`Op::RunQueue`].
    Run,
    /// [`Op::FailQueue`]: the tracker learns it from negative values only.
    Fail,
    /// [`Op::Stall`], stalled.
    Stall,
    /// [`Op::Stall`], running again.
    Release,
}

/// One step of a scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Acquire a signal for the stream's next packet and publish an empty
    /// kernel that completes it, with or without the barrier bit.
    Submit {
        /// The stream.
        stream: StreamId,
        /// The barrier bit: the use is a fence.
        barrier: bool,
        /// What the use is for.
        purpose: PurposeChoice,
        /// Whether its timestamps must be harvested.
        timed: bool,
    },
    /// Acquire one signal for several operations (`Request::ops`): reserve
    /// that many packets and publish an empty kernel in each, all
    /// decrementing the signal; the last has the barrier bit if asked.
    SubmitOps {
        /// The stream.
        stream: StreamId,
        /// How many operations (2 to 4).
        ops: u8,
        /// The last packet's barrier bit: the use is a fence.
        barrier: bool,
        /// What the use is for.
        purpose: PurposeChoice,
        /// Whether its timestamps must be harvested.
        timed: bool,
    },
    /// Acquire a signal for work on the stream's copy engine
    /// (`Request::copy_engine`), a queue of its own with its ring in system
    /// memory, and publish that many packets there.
    SubmitCopy {
        /// The stream.
        stream: StreamId,
        /// How many operations (1 to 3).
        ops: u8,
        /// What the use is for.
        purpose: PurposeChoice,
        /// Whether its timestamps must be harvested.
        timed: bool,
    },
    /// A submission that fails after issuing part of its work: acquire for
    /// `ops` operations, publish `issued` of them (empty packets that name
    /// no signal in the other reserved slots, as the queue layer does), and
    /// tell the tracker (`Tracker::fail_submission`).
    FailSubmission {
        /// The stream.
        stream: StreamId,
        /// On the copy engine rather than the AQL queue.
        copy: bool,
        /// How many operations were asked for (1 to 3).
        ops: u8,
        /// How many were issued (fewer than `ops`).
        issued: u8,
        /// The barrier bit the last packet would have had.
        barrier: bool,
        /// What the use is for.
        purpose: PurposeChoice,
        /// Whether its timestamps would have been harvested.
        timed: bool,
    },
    /// Take an event's reference on one of the stream's recent uses.
    HoldEvent {
        /// The stream.
        stream: StreamId,
        /// Which recent use.
        pick: u8,
    },
    /// The user destroys an event: drop its reference, whatever its state.
    DropEvent {
        /// Which held event reference.
        pick: u8,
    },
    /// An async handler registers on one of the stream's recent uses.
    HoldHandler {
        /// The stream.
        stream: StreamId,
        /// Which recent use.
        pick: u8,
    },
    /// An async handler runs: it reads its use's status (one load at most)
    /// and, once the use is done, drops its reference.
    RunHandler {
        /// Which handler reference.
        pick: u8,
    },
    /// A GPU waiter: pin one of the producer stream's recent uses and
    /// publish, on the other stream, a barrier-AND packet that waits on it,
    /// attaching the pin to that consumer use.
    PinAcross {
        /// The producing stream.
        producer: StreamId,
        /// Which recent use of it.
        pick: u8,
        /// The consumer packet's barrier bit.
        barrier: bool,
        /// First try to attach the pin to a ticket the consumer's tracker
        /// did not issue (the producer's): it must refuse and hand the pin
        /// back, still pinned.
        wrong_consumer: bool,
    },
    /// Let a consumer pass: run its queue, ask about the consumer use and
    /// reclaim on both trackers, so the pin drops and the producer's signal
    /// comes back.
    ConsumerPasses {
        /// Which pin.
        pick: u8,
    },
    /// The packet processor launches the next packet of one of the stream's queues.
    Launch {
        /// The stream.
        stream: StreamId,
        /// Which of its queues (0: the current one; older generations after).
        queue: u8,
    },
    /// The packet processor completes one launched packet.
    Complete {
        /// The stream.
        stream: StreamId,
        /// Which queue.
        queue: u8,
        /// Which launched, incomplete packet.
        pick: u8,
    },
    /// The packet processor consumes the packet at the read index (possibly
    /// before it completes).
    AdvanceReadIndex {
        /// The stream.
        stream: StreamId,
        /// Which queue.
        queue: u8,
    },
    /// The packet processor runs one queue until it can do nothing more.
    RunQueue {
        /// The stream.
        stream: StreamId,
        /// Which queue.
        queue: u8,
    },
    /// A queue error: every published, incomplete packet of the queue fails.
    FailQueue {
        /// The stream.
        stream: StreamId,
        /// Which queue.
        queue: u8,
        /// Whether the runtime tells the tracker (`fail_queue` for the
        /// current queue, `fail_queue_of` a use published on an older one);
        /// otherwise the tracker learns it from a negative value.
        notify: bool,
    },
    /// The stream's copy engine (once it has one) takes one step.
    CopyEngine {
        /// The stream.
        stream: StreamId,
        /// The step.
        step: EngineStep,
    },
    /// Stall or release one queue.
    Stall {
        /// The stream.
        stream: StreamId,
        /// Which queue.
        queue: u8,
        /// Stalled or running.
        stalled: bool,
    },
    /// The runtime moves the stream to a new hardware queue: a new generation.
    QueueChange {
        /// The stream.
        stream: StreamId,
        /// The new queue's ring lives in system memory (device-memory
        /// signals then need an HDP flush before publication), where the
        /// configuration allows it.
        host_ring: bool,
    },
    /// The stream's current hardware queue is known idle: when every
    /// packet published on it completed, the driver tells the tracker (the
    /// call's contract). Older generations' queues and the copy engine may
    /// still run: a drain says nothing about them.
    Drain {
        /// The stream.
        stream: StreamId,
        /// Run every queue of the simulator first (else only the current
        /// queue, so older generations' and copy-engine work may stay
        /// pending).
        run_all: bool,
    },
    /// The next `calls` signal allocations of the simulator fail
    /// (`Sim::fail_allocations`): growth, spares and the baseline's
    /// replacements of held signals. A tracker may answer an acquire that
    /// met one with `OutOfSignals`, and must leave everything as it was.
    FailAllocations {
        /// How many (1 to 4).
        calls: u8,
        /// If the next acquire allocates, then, before the allocation
        /// fails, the GPU runs every queue it can and another thread's
        /// waiter polls every recent use of both streams (recording what
        /// it sees complete): the moment a tracker making room meets a full
        /// ring whose uses all became known done under it.
        waiter_meanwhile: bool,
    },
    /// Fence probing and reclaim (`Tracker::poll`).
    Poll {
        /// The stream.
        stream: StreamId,
    },
    /// Ask about one recent use (`Tracker::query`): its own proof if needed.
    Query {
        /// The stream.
        stream: StreamId,
        /// Which recent use.
        pick: u8,
    },
    /// Re-arm what is known retired (`Tracker::reclaim`).
    Reclaim {
        /// The stream.
        stream: StreamId,
    },
    /// A CPU wait, through the lock-free `Waiter`, with a deadline.
    CpuWait {
        /// The stream.
        stream: StreamId,
        /// Which recent use.
        pick: u8,
        /// The wait's deadline.
        deadline: Deadline,
    },
    /// Read one recent use's timestamps.
    Timestamps {
        /// The stream.
        stream: StreamId,
        /// Which recent use.
        pick: u8,
    },
}

/// How often each operation is drawn, in percent: submissions, simulator
/// events and proofs dominate, so rings fill, wrap and retire; failures and
/// queue changes are rare, so a scenario is not over before it starts.
const WEIGHTS: [(OpKind, u8); 25] = [
    (OpKind::Submit, 15),
    (OpKind::SubmitOps, 3),
    (OpKind::SubmitCopy, 3),
    (OpKind::FailSubmission, 2),
    (OpKind::HoldEvent, 4),
    (OpKind::DropEvent, 3),
    (OpKind::HoldHandler, 3),
    (OpKind::RunHandler, 3),
    (OpKind::PinAcross, 4),
    (OpKind::ConsumerPasses, 2),
    (OpKind::Launch, 7),
    (OpKind::Complete, 7),
    (OpKind::AdvanceReadIndex, 6),
    (OpKind::RunQueue, 4),
    (OpKind::FailQueue, 1),
    (OpKind::CopyEngine, 4),
    (OpKind::Stall, 2),
    (OpKind::QueueChange, 2),
    (OpKind::Drain, 2),
    (OpKind::Poll, 7),
    (OpKind::Query, 5),
    (OpKind::Reclaim, 3),
    (OpKind::CpuWait, 3),
    (OpKind::Timestamps, 3),
    (OpKind::FailAllocations, 2),
];

#[derive(Clone, Copy)]
enum OpKind {
    Submit,
    SubmitOps,
    SubmitCopy,
    FailSubmission,
    HoldEvent,
    DropEvent,
    HoldHandler,
    RunHandler,
    PinAcross,
    ConsumerPasses,
    Launch,
    Complete,
    AdvanceReadIndex,
    RunQueue,
    FailQueue,
    CopyEngine,
    Stall,
    QueueChange,
    Drain,
    Poll,
    Query,
    Reclaim,
    CpuWait,
    Timestamps,
    FailAllocations,
}

const _: () = {
    let mut total = 0;
    let mut i = 0;
    while i < WEIGHTS.len() {
        total += WEIGHTS[i].1 as u32;
        i += 1;
    }
    assert!(total == 100, "the weights are percentages");
};

impl<'a> Arbitrary<'a> for Op {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let mut roll = u.int_in_range(0..=99u8)?;
        let mut kind = OpKind::Submit;
        for (candidate, weight) in WEIGHTS {
            if roll < weight {
                kind = candidate;
                break;
            }
            roll -= weight;
        }
        Ok(match kind {
            OpKind::Submit => Op::Submit {
                stream: u.arbitrary()?,
                barrier: u.arbitrary()?,
                purpose: u.arbitrary()?,
                timed: u.arbitrary()?,
            },
            OpKind::SubmitOps => Op::SubmitOps {
                stream: u.arbitrary()?,
                ops: u.int_in_range(2..=4)?,
                barrier: u.arbitrary()?,
                purpose: u.arbitrary()?,
                timed: u.arbitrary()?,
            },
            OpKind::SubmitCopy => Op::SubmitCopy {
                stream: u.arbitrary()?,
                ops: u.int_in_range(1..=3)?,
                purpose: u.arbitrary()?,
                timed: u.arbitrary()?,
            },
            OpKind::FailSubmission => {
                let stream = u.arbitrary()?;
                let copy = u.arbitrary()?;
                let ops = u.int_in_range(1..=3)?;
                Op::FailSubmission {
                    stream,
                    copy,
                    ops,
                    issued: u.int_in_range(0..=ops - 1)?,
                    barrier: u.arbitrary()?,
                    purpose: u.arbitrary()?,
                    timed: u.arbitrary()?,
                }
            }
            OpKind::HoldEvent => Op::HoldEvent {
                stream: u.arbitrary()?,
                pick: u.arbitrary()?,
            },
            OpKind::DropEvent => Op::DropEvent {
                pick: u.arbitrary()?,
            },
            OpKind::HoldHandler => Op::HoldHandler {
                stream: u.arbitrary()?,
                pick: u.arbitrary()?,
            },
            OpKind::RunHandler => Op::RunHandler {
                pick: u.arbitrary()?,
            },
            OpKind::PinAcross => Op::PinAcross {
                producer: u.arbitrary()?,
                pick: u.arbitrary()?,
                barrier: u.arbitrary()?,
                wrong_consumer: u.ratio(1, 8)?,
            },
            OpKind::ConsumerPasses => Op::ConsumerPasses {
                pick: u.arbitrary()?,
            },
            OpKind::Launch => Op::Launch {
                stream: u.arbitrary()?,
                queue: u.arbitrary()?,
            },
            OpKind::Complete => Op::Complete {
                stream: u.arbitrary()?,
                queue: u.arbitrary()?,
                pick: u.arbitrary()?,
            },
            OpKind::AdvanceReadIndex => Op::AdvanceReadIndex {
                stream: u.arbitrary()?,
                queue: u.arbitrary()?,
            },
            OpKind::RunQueue => Op::RunQueue {
                stream: u.arbitrary()?,
                queue: u.arbitrary()?,
            },
            OpKind::FailQueue => Op::FailQueue {
                stream: u.arbitrary()?,
                queue: u.arbitrary()?,
                notify: u.arbitrary()?,
            },
            OpKind::CopyEngine => Op::CopyEngine {
                stream: u.arbitrary()?,
                step: u.arbitrary()?,
            },
            OpKind::Stall => Op::Stall {
                stream: u.arbitrary()?,
                queue: u.arbitrary()?,
                stalled: u.arbitrary()?,
            },
            OpKind::QueueChange => Op::QueueChange {
                stream: u.arbitrary()?,
                host_ring: u.arbitrary()?,
            },
            OpKind::Drain => Op::Drain {
                stream: u.arbitrary()?,
                run_all: u.arbitrary()?,
            },
            OpKind::Poll => Op::Poll {
                stream: u.arbitrary()?,
            },
            OpKind::Query => Op::Query {
                stream: u.arbitrary()?,
                pick: u.arbitrary()?,
            },
            OpKind::Reclaim => Op::Reclaim {
                stream: u.arbitrary()?,
            },
            OpKind::CpuWait => Op::CpuWait {
                stream: u.arbitrary()?,
                pick: u.arbitrary()?,
                deadline: u.arbitrary()?,
            },
            OpKind::Timestamps => Op::Timestamps {
                stream: u.arbitrary()?,
                pick: u.arbitrary()?,
            },
            OpKind::FailAllocations => Op::FailAllocations {
                calls: u.int_in_range(1..=4)?,
                waiter_meanwhile: u.arbitrary()?,
            },
        })
    }
}

/// Decodes up to `max` operations from `u`, stopping when its bytes run out.
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
