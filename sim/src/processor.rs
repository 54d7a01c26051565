//! Packet semantics: what a published packet means, when it may launch, when
//! it may complete, what completing and failing write into signal memory, and
//! how the read index moves. Both drivers, the caller in stepped mode and the
//! processor thread in threaded mode, act only through these functions, under
//! the queue's state lock.
//!
//! The rules (HSA System Architecture 2.8-2.9 and AMD's barrier-value
//! packet, as docs/design.md section 2 states them):
//! - Packets launch in index order, once published and covered by the
//!   doorbell.
//! - A packet with the barrier bit launches only when every earlier packet of
//!   its queue completed.
//! - A barrier packet (barrier-AND, barrier-OR, barrier-value) halts the
//!   queue: nothing after it launches until it completes.
//! - On an in-order queue packets complete in index order; on an
//!   `out_of_order` queue any launched packet may complete once ready.
//! - Completion runs a compute kernel's callback, writes `end_ts` (profiled
//!   queues; `start_ts` was written at launch), then decrements the
//!   completion signal by 1 with a release RMW. That write costs the
//!   processor its placement's [`CostProfile::completion`](crate::CostProfile::completion)
//!   (a PCIe atomic into host memory, or an atomic in local memory): in
//!   threaded mode the packet completes that much later, in stepped mode
//!   the virtual clock moves by it.
//! - A negative dependency of a barrier-AND or barrier-OR fails the queue;
//!   failing sets every published, incomplete packet's completion signal to
//!   -1 and stops the queue.
//! - The read index moves when the processor consumes a packet, which may be
//!   before it completes; it never passes an unlaunched packet.

use crate::error::{Blocked, StepError};
use crate::kernel::{Kernel, KernelDispatch};
use crate::memory::{Memory, Signal};
use crate::record::{Packet, Phase, QueueState, Work};
use crate::state::{Core, Mode, QueueCore};
use hsa_sys::condition_holds;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::Ordering;

/// Whether a launched packet may complete now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Readiness {
    Ready,
    Waiting,
    /// A negative dependency: completing it fails the queue.
    Fails,
}

/// Evaluates a launched packet's completion condition, reading signal memory
/// as the GPU does (uncounted acquire loads).
pub(crate) fn readiness(memory: &Memory, work: &Work) -> Readiness {
    let value = |signal: &Signal| memory.block(*signal).value.load(Ordering::Acquire);
    match work {
        Work::Kernel(Kernel::SpinUntil(flag)) if !flag.is_set() => Readiness::Waiting,
        Work::Kernel(_) => Readiness::Ready,
        Work::BarrierAnd(deps) => {
            let mut all_zero = true;
            for v in deps.iter().flatten().map(value) {
                if v < 0 {
                    return Readiness::Fails;
                }
                all_zero &= v == 0;
            }
            if all_zero {
                Readiness::Ready
            } else {
                Readiness::Waiting
            }
        }
        Work::BarrierOr(deps) => {
            // With no dependency at all there is nothing to wait for.
            let (mut any_zero, mut none) = (false, true);
            for v in deps.iter().flatten().map(value) {
                if v < 0 {
                    return Readiness::Fails;
                }
                none = false;
                any_zero |= v == 0;
            }
            if any_zero || none {
                Readiness::Ready
            } else {
                Readiness::Waiting
            }
        }
        Work::BarrierValue {
            signal,
            compare,
            mask,
            condition,
        } => {
            if condition_holds(*condition, value(signal) & mask, *compare) {
                Readiness::Ready
            } else {
                Readiness::Waiting
            }
        }
        Work::Malformed(_) => Readiness::Fails,
    }
}
/// Records the publication of `packet` at `index` (already checked writable
/// and written to the ring). On a failed queue the packet fails at once, so
/// nobody waits for it forever.
pub(crate) fn publish(core: &Core, q: &QueueCore, st: &mut QueueState, index: u64, packet: Packet) {
    while st.recorded_end() <= index {
        st.packets.push_back(Packet::reserved());
    }
    let failed = st.failed;
    let record = st.packet_mut(index).expect("recorded above");
    *record = packet;
    if failed {
        record.fail(&core.memory, false);
    } else {
        record.retain_signals(&core.memory);
        st.pending += 1;
    }
    // Forget the oldest finished packets beyond the history window.
    let write_index = q.write_index();
    // A finished packet at the front is older than `oldest_incomplete`, so the
    // order bookkeeping never needs it again.
    while st.packets.front().is_some_and(Packet::is_done)
        && write_index - st.base > q.config.truth_history as u64
    {
        st.packets.pop_front();
        st.base += 1;
    }
}

/// The next packet in order, if it may launch now (ignoring real-time
/// latencies, which only the threaded driver knows about).
pub(crate) fn check_launch(q: &QueueCore, st: &QueueState) -> Result<u64, StepError> {
    st.check_running()?;
    let index = st.next_launch;
    let blocked = |reason| Err(StepError::NotLaunchable { index, reason });
    if index >= q.write_index() {
        return blocked(Blocked::NotReserved);
    }
    let published = st
        .packet(index)
        .is_some_and(|p| p.phase == Phase::Published);
    if !published || q.slot(index).header().is_none() {
        return blocked(Blocked::NotPublished);
    }
    if q.doorbell() <= index {
        return blocked(Blocked::DoorbellNotRung);
    }
    if let Some(barrier) = st.halted_by {
        return blocked(Blocked::BarrierPacket { index: barrier });
    }
    let barrier_bit = st.packet(index).is_some_and(|p| p.header.barrier);
    if barrier_bit && st.oldest_incomplete < index {
        return blocked(Blocked::BarrierBit {
            waiting_for: st.oldest_incomplete,
        });
    }
    Ok(index)
}

/// Launches the next packet in order. Stamps `start_ts` (into the completion
/// signal's block too, on a profiled queue). Does not move the read index.
pub(crate) fn launch(core: &Core, q: &QueueCore, st: &mut QueueState) -> Result<u64, StepError> {
    let index = check_launch(q, st)?;
    let packet = st.packet_mut(index).expect("checked by check_launch");
    if let Work::Malformed(reason) = packet.work {
        fail_queue(core, st);
        return Err(StepError::MalformedPacket { index, reason });
    }
    let now = core.clock.event();
    packet.phase = Phase::Launched;
    packet.start_ts = Some(now);
    if let (true, Some(signal)) = (q.config.profiling, packet.completion) {
        core.memory
            .block(signal)
            .start_ts
            .store(now, Ordering::Relaxed);
    }
    if packet.work.halts_queue() {
        st.halted_by = Some(index);
    }
    st.next_launch = index + 1;
    Ok(index)
}

/// Completes launched packet `index` if its condition holds and the queue's
/// order allows it.
pub(crate) fn complete(
    core: &Core,
    q: &QueueCore,
    st: &mut QueueState,
    index: u64,
) -> Result<(), StepError> {
    st.check_running()?;
    if index < st.base {
        // Forgotten packets of a running queue all completed.
        return Err(StepError::AlreadyComplete { index });
    }
    let packet = match st.packet(index) {
        Some(packet) if packet.phase == Phase::Launched => packet,
        Some(packet) if packet.phase == Phase::Completed => {
            return Err(StepError::AlreadyComplete { index });
        }
        _ => return Err(StepError::NotLaunched { index }),
    };
    if !q.config.out_of_order && index != st.oldest_incomplete {
        return Err(StepError::OutOfOrder {
            index,
            oldest: st.oldest_incomplete,
        });
    }
    match readiness(&core.memory, &packet.work) {
        Readiness::Ready => {}
        Readiness::Waiting => return Err(StepError::NotReady { index }),
        Readiness::Fails => {
            fail_queue(core, st);
            return Err(StepError::QueueFailed);
        }
    }
    if let Work::Kernel(Kernel::Compute(kernel)) = &packet.work {
        // The work lands before the end stamp and the release decrement
        // below, so whoever sees the completion sees the work.
        let dispatch = KernelDispatch::decode(q.id, index, packet.words);
        let kernel = kernel.clone();
        if let Err(panic) = panic::catch_unwind(AssertUnwindSafe(|| kernel.run(&dispatch))) {
            // A faulting kernel fails its queue, so nobody waits for it
            // forever (in threaded mode the processor thread must live on).
            fail_queue(core, st);
            if core.mode == Mode::Stepped {
                panic::resume_unwind(panic);
            }
            return Err(StepError::QueueFailed);
        }
    }
    let cost = st
        .packet(index)
        .expect("looked up above")
        .completion_cost(&core.profile, &core.memory);
    let now = core.clock.completion_event(cost, core.profile.gpu_tick);
    let packet = st.packet_mut(index).expect("looked up above");
    packet.phase = Phase::Completed;
    packet.end_ts = Some(now);
    packet.release_signals(&core.memory);
    if let Some(signal) = packet.completion {
        let block = core.memory.block(signal);
        if q.config.profiling {
            block.end_ts.store(now, Ordering::Relaxed);
        }
        block.value.fetch_sub(1, Ordering::Release);
        core.memory.wrote(signal);
    }
    st.pending -= 1;
    if st.halted_by == Some(index) {
        st.halted_by = None;
    }
    while st.oldest_incomplete < st.next_launch
        && st
            .packet(st.oldest_incomplete)
            .is_some_and(|p| p.phase == Phase::Completed)
    {
        st.oldest_incomplete += 1;
    }
    Ok(())
}

/// Consumes the packet at the read index: it must have launched.
pub(crate) fn advance_read_index(q: &QueueCore, st: &QueueState) -> Result<u64, StepError> {
    st.check_running()?;
    let read = q.read_index();
    if read >= st.next_launch {
        return Err(StepError::NotLaunched { index: read });
    }
    Ok(q.consume(read))
}

/// Fails the queue: every published, incomplete packet fails and its
/// completion signal becomes [`FAILED_SIGNAL_VALUE`](crate::FAILED_SIGNAL_VALUE);
/// nothing progresses any more.
pub(crate) fn fail_queue(core: &Core, st: &mut QueueState) {
    if st.failed {
        return;
    }
    st.failed = true;
    st.halted_by = None;
    for packet in &mut st.packets {
        if matches!(packet.phase, Phase::Published | Phase::Launched) {
            packet.fail(&core.memory, true);
        }
    }
    st.pending = 0;
}

/// Whether anything on the queue can still happen without a host action:
/// a launch, a completion or a read-index move.
pub(crate) fn can_progress(core: &Core, q: &QueueCore, st: &QueueState) -> bool {
    if st.failed || st.stalled {
        return false;
    }
    if check_launch(q, st).is_ok() || q.read_index() < st.next_launch {
        return true;
    }
    for index in st.oldest_incomplete..st.next_launch {
        let ready = st.packet(index).is_some_and(|p| {
            p.phase == Phase::Launched && readiness(&core.memory, &p.work) != Readiness::Waiting
        });
        if ready {
            return true;
        }
        if !q.config.out_of_order {
            break;
        }
    }
    false
}

/// Stepped mode: launches, completes (in index order) and consumes until
/// nothing can progress. Returns whether anything happened.
pub(crate) fn run_until_idle(core: &Core, q: &QueueCore, st: &mut QueueState) -> bool {
    let mut any = false;
    loop {
        // A queue that fails here (a barrier on a negative dependency) sets
        // its pending signals negative: that is progress for other queues
        // waiting on them, so it counts.
        let mut progressed = false;
        let was_failed = st.failed;
        while launch(core, q, st).is_ok() {
            progressed = true;
        }
        let mut index = st.oldest_incomplete;
        while index < st.next_launch && !st.failed {
            if complete(core, q, st, index).is_ok() {
                progressed = true;
            } else if !q.config.out_of_order {
                break;
            }
            index += 1;
        }
        while advance_read_index(q, st).is_ok() {
            progressed = true;
        }
        progressed |= st.failed && !was_failed;
        if !progressed {
            return any;
        }
        any = true;
    }
}
