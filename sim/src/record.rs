//! The processor's records: what a published packet is and does ([`Packet`],
//! [`Work`], its [`Phase`]) and the packets of one queue ([`QueueState`],
//! guarded by the queue's lock). Plain state: the rules that move it live
//! in the [processor](crate::processor).

use crate::error::StepError;
use crate::kernel::{Kernel, KernelTable};
use crate::memory::{Memory, Signal};
use crate::profile::CostProfile;
use crate::truth::PacketTruth;
use hsa_sys::{
    HSA_AMD_PACKET_TYPE_BARRIER_VALUE, HSA_PACKET_TYPE_BARRIER_AND, HSA_PACKET_TYPE_BARRIER_OR,
    HSA_PACKET_TYPE_INVALID, HSA_PACKET_TYPE_KERNEL_DISPATCH, HSA_PACKET_TYPE_VENDOR_SPECIFIC,
    PacketHeader, PacketWords, hsa_signal_t,
};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;

/// The value a failed queue leaves in the completion signal of every packet
/// it did not complete.
///
/// ```
/// use sigretire_sim::{packets, AgentId, Placement, Sim, SimConfig, SimQueueConfig, FAILED_SIGNAL_VALUE};
///
/// let sim = Sim::new(SimConfig::default());
/// let queue = sim.create_queue(SimQueueConfig::default())?;
/// let signal = sim.allocate(1, Placement::Host, AgentId(0))?[0];
/// sim.store(signal, 1);
/// queue.submit(packets::kernel(0, Some(signal)))?;
/// queue.fail();
/// assert_eq!(sim.load(signal), FAILED_SIGNAL_VALUE);
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
pub const FAILED_SIGNAL_VALUE: i64 = -1;

/// What a packet does once launched.
#[derive(Clone, Debug)]
pub(crate) enum Work {
    Kernel(Kernel),
    BarrierAnd([Option<Signal>; 5]),
    BarrierOr([Option<Signal>; 5]),
    BarrierValue {
        signal: Signal,
        compare: i64,
        mask: i64,
        condition: u32,
    },
    /// Launching it fails the queue.
    Malformed(&'static str),
}

impl Work {
    /// Barrier packets halt the queue until they complete.
    pub(crate) fn halts_queue(&self) -> bool {
        matches!(
            self,
            Work::BarrierAnd(_) | Work::BarrierOr(_) | Work::BarrierValue { .. }
        )
    }

    /// The signals a barrier packet waits on.
    pub(crate) fn dependencies(&self) -> [Option<Signal>; 5] {
        match self {
            Work::BarrierAnd(deps) | Work::BarrierOr(deps) => *deps,
            Work::BarrierValue { signal, .. } => [Some(*signal), None, None, None, None],
            Work::Kernel(_) | Work::Malformed(_) => [None; 5],
        }
    }
}

/// Where a packet is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Reserved,
    Published,
    Launched,
    Completed,
    Failed,
}

/// A handle in a packet that is not a signal of this simulator.
pub(crate) struct UnknownHandle;

/// The processor's record of one packet.
#[derive(Clone, Debug)]
pub(crate) struct Packet {
    pub(crate) words: PacketWords,
    pub(crate) header: PacketHeader,
    pub(crate) phase: Phase,
    pub(crate) work: Work,
    pub(crate) completion: Option<Signal>,
    pub(crate) start_ts: Option<u64>,
    pub(crate) end_ts: Option<u64>,
    /// Threaded mode: when the packet may launch (doorbell plus launch latency).
    pub(crate) launch_at_ns: Option<u64>,
    /// Threaded mode: when a launched kernel has run long enough to complete.
    pub(crate) due_at_ns: Option<u64>,
}

impl Packet {
    pub(crate) fn reserved() -> Self {
        Self {
            words: PacketWords::default(),
            header: PacketHeader::from_bits(u16::from(HSA_PACKET_TYPE_INVALID)),
            phase: Phase::Reserved,
            work: Work::Malformed("not published"),
            completion: None,
            start_ts: None,
            end_ts: None,
            launch_at_ns: None,
            due_at_ns: None,
        }
    }

    /// Decodes a packet being published. `resolve` maps each non-null handle
    /// the packet names to a signal (recording a violation when it cannot).
    pub(crate) fn decode(
        words: PacketWords,
        kernels: &KernelTable,
        mut resolve: impl FnMut(hsa_signal_t) -> Result<Signal, UnknownHandle>,
    ) -> Self {
        let header = PacketHeader::from_bits(words.header());
        let mut unknown = false;
        let mut signal_at = |offset: usize| {
            let handle = hsa_signal_t {
                handle: words.u64_at(offset),
            };
            if handle.is_null() {
                return None;
            }
            resolve(handle).map_err(|UnknownHandle| unknown = true).ok()
        };
        let completion = signal_at(56);
        let mut dependencies = || std::array::from_fn(|k| signal_at(8 + 8 * k));
        let amd_format = (words.0[0] >> 16) as u8;
        let work = match header.packet_type {
            HSA_PACKET_TYPE_KERNEL_DISPATCH => match kernels.get(words.u64_at(32)) {
                Some(kernel) => Work::Kernel(kernel),
                None => Work::Malformed("its kernel_object is not a registered kernel"),
            },
            HSA_PACKET_TYPE_BARRIER_AND => Work::BarrierAnd(dependencies()),
            HSA_PACKET_TYPE_BARRIER_OR => Work::BarrierOr(dependencies()),
            HSA_PACKET_TYPE_VENDOR_SPECIFIC if amd_format == HSA_AMD_PACKET_TYPE_BARRIER_VALUE => {
                match signal_at(8) {
                    Some(signal) => Work::BarrierValue {
                        signal,
                        compare: words.u64_at(16) as i64,
                        mask: words.u64_at(24) as i64,
                        condition: words.0[8],
                    },
                    None => Work::Malformed("a barrier-value packet must name a signal"),
                }
            }
            HSA_PACKET_TYPE_VENDOR_SPECIFIC => {
                Work::Malformed("unsupported AMD vendor packet format")
            }
            _ => Work::Malformed("unsupported packet type"),
        };
        let work = if unknown {
            Work::Malformed("it names a handle that is not a signal of this simulator")
        } else {
            work
        };
        Self {
            words,
            header,
            phase: Phase::Published,
            work,
            completion,
            ..Self::reserved()
        }
    }

    /// What completing this packet costs the packet processor: writing its
    /// completion signal, by where the signal lives (nothing without one).
    pub(crate) fn completion_cost(
        &self,
        profile: &CostProfile,
        memory: &Memory,
    ) -> std::time::Duration {
        self.completion.map_or(std::time::Duration::ZERO, |signal| {
            profile.completion(memory.meta(signal).placement)
        })
    }

    pub(crate) fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Completed | Phase::Failed)
    }

    pub(crate) fn truth(&self, index: u64) -> PacketTruth {
        PacketTruth {
            index,
            packet_type: self.header.packet_type,
            barrier: self.header.barrier,
            packet: self.words,
            completion_signal: self.words.completion_signal(),
            published: self.phase != Phase::Reserved,
            launched: self.start_ts.is_some(),
            completed: self.phase == Phase::Completed,
            failed: self.phase == Phase::Failed,
            start_ts: self.start_ts,
            end_ts: self.end_ts,
        }
    }

    /// Counts this packet's references to its signals (while it is pending,
    /// host stores to them are violations).
    pub(crate) fn retain_signals(&self, memory: &Memory) {
        if let Some(signal) = self.completion {
            memory.meta(signal).references.retain_completion();
        }
        for signal in self.work.dependencies().into_iter().flatten() {
            memory.meta(signal).references.retain_barrier();
        }
    }

    /// Drops the references of `retain_signals`. Always before the value
    /// write that ends the packet, so a host that saw that value may store.
    pub(crate) fn release_signals(&self, memory: &Memory) {
        if let Some(signal) = self.completion {
            memory.meta(signal).references.release_completion();
        }
        for signal in self.work.dependencies().into_iter().flatten() {
            memory.meta(signal).references.release_barrier();
        }
    }

    /// Ends the packet as failed: its completion signal goes negative.
    pub(crate) fn fail(&mut self, memory: &Memory, was_pending: bool) {
        self.phase = Phase::Failed;
        if was_pending {
            self.release_signals(memory);
        }
        if let Some(signal) = self.completion {
            memory
                .block(signal)
                .value
                .store(FAILED_SIGNAL_VALUE, Ordering::Release);
            memory.wrote(signal);
        }
    }
}

/// The processor's state of one queue, guarded by the queue's lock.
#[derive(Debug)]
pub(crate) struct QueueState {
    /// Records of packets `base..base + packets.len()`.
    pub(crate) packets: VecDeque<Packet>,
    pub(crate) base: u64,
    /// The next packet to launch: every earlier one launched.
    pub(crate) next_launch: u64,
    /// The oldest launched packet that is not complete (`next_launch` when
    /// every launched packet completed).
    pub(crate) oldest_incomplete: u64,
    /// The launched, incomplete barrier packet that halts the queue.
    pub(crate) halted_by: Option<u64>,
    /// Published packets neither completed nor failed.
    pub(crate) pending: usize,
    pub(crate) failed: bool,
    pub(crate) stalled: bool,
    /// Threaded mode: packets before this one have their `launch_at_ns`.
    pub(crate) arrivals_stamped: u64,
}

impl QueueState {
    /// Room for `capacity` packet records up front, so that publishing
    /// allocates nothing until more packets than that are recorded at once.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            packets: VecDeque::with_capacity(capacity),
            base: 0,
            next_launch: 0,
            oldest_incomplete: 0,
            halted_by: None,
            pending: 0,
            failed: false,
            stalled: false,
            arrivals_stamped: 0,
        }
    }

    pub(crate) fn packet(&self, index: u64) -> Option<&Packet> {
        let offset = usize::try_from(index.checked_sub(self.base)?).ok()?;
        self.packets.get(offset)
    }

    pub(crate) fn packet_mut(&mut self, index: u64) -> Option<&mut Packet> {
        let offset = usize::try_from(index.checked_sub(self.base)?).ok()?;
        self.packets.get_mut(offset)
    }

    pub(crate) fn next_launch(&self) -> u64 {
        self.next_launch
    }

    pub(crate) fn oldest_incomplete(&self) -> u64 {
        self.oldest_incomplete
    }

    /// One past the newest packet with a record.
    pub(crate) fn recorded_end(&self) -> u64 {
        self.base + self.packets.len() as u64
    }

    pub(crate) fn is_failed(&self) -> bool {
        self.failed
    }

    pub(crate) fn is_stalled(&self) -> bool {
        self.stalled
    }

    pub(crate) fn set_stalled(&mut self, stalled: bool) {
        self.stalled = stalled;
    }

    /// Every published packet completed or failed.
    pub(crate) fn is_idle(&self) -> bool {
        self.pending == 0
    }

    pub(crate) fn check_running(&self) -> Result<(), StepError> {
        if self.failed {
            Err(StepError::QueueFailed)
        } else if self.stalled {
            Err(StepError::Stalled)
        } else {
            Ok(())
        }
    }

    /// Why the producer may not publish at `index`, if it may not.
    pub(crate) fn check_writable(&self, index: u64, write_index: u64) -> Result<(), &'static str> {
        if index >= write_index {
            return Err("the index was not reserved");
        }
        if index < self.base
            || self
                .packet(index)
                .is_some_and(|p| p.phase != Phase::Reserved)
        {
            return Err("the packet was already published");
        }
        Ok(())
    }

    /// The ground truth of packet `index`, `None` if it was never reserved or
    /// has left the history window.
    pub(crate) fn truth(&self, index: u64, write_index: u64) -> Option<PacketTruth> {
        if index < self.base {
            return None;
        }
        match self.packet(index) {
            Some(packet) => Some(packet.truth(index)),
            None if index < write_index => Some(Packet::reserved().truth(index)),
            None => None,
        }
    }
}
