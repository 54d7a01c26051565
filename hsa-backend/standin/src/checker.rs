//! The stand-in's oracle: at each packet's fetch and at each release of
//! signal memory, it checks what the simulator cannot see.
//!
//! A backend arms its own signals with direct stores, which the simulator
//! does not observe, so its `StoreWhileInFlight` check never fires for them.
//! The checker catches the same bugs where they become harmful, from what
//! the packet processor sees:
//!
//! - a packet whose completion signal does not hold more than the number of
//!   earlier, unfinished packets that also complete it (it was re-armed while
//!   in flight, or never armed);
//! - a packet completing a signal that a pending barrier still waits on (a
//!   GPU waiter's signal was re-armed under it);
//! - a packet naming memory that was freed or destroyed, that ROCr never
//!   handed out, or that an agent involved was never granted access to;
//! - memory freed, or a signal destroyed, while a pending packet completes
//!   it or waits on it.

use crate::abi::PoolKind;
use crate::machine::AgentKind;
use crate::memory::peek_value;
use crate::queue::QueueAdapter;
use crate::state::Instance;
use hsa_sys::*;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

/// A packet that names a signal.
#[derive(Clone)]
struct Use {
    queue: Arc<QueueAdapter>,
    index: u64,
}

impl Use {
    fn pending(&self) -> bool {
        self.queue.is_pending(self.index)
    }

    fn describe(&self) -> String {
        format!("queue {} packet {}", self.queue.id, self.index)
    }
}

/// Pending packets by the signals they name.
#[derive(Default)]
pub(crate) struct Checker {
    /// Packets completing each signal (pruned of finished ones when looked at).
    completions: BTreeMap<u64, Vec<Use>>,
    /// Barrier packets waiting on each signal.
    waits: BTreeMap<u64, Vec<Use>>,
}

/// The signals a packet waits on: barrier-AND/OR dependencies, or a
/// barrier-value packet's signal.
fn dependencies(packet: &PacketWords) -> Vec<u64> {
    let header = PacketHeader::from_bits(packet.header());
    let amd_format = (packet.0[0] >> 16) as u8;
    let handles: Vec<u64> = match header.packet_type {
        HSA_PACKET_TYPE_BARRIER_AND | HSA_PACKET_TYPE_BARRIER_OR => {
            (0..5).map(|k| packet.u64_at(8 + 8 * k)).collect()
        }
        HSA_PACKET_TYPE_VENDOR_SPECIFIC if amd_format == HSA_AMD_PACKET_TYPE_BARRIER_VALUE => {
            vec![packet.u64_at(8)]
        }
        _ => Vec::new(),
    };
    handles.into_iter().filter(|h| *h != 0).collect()
}

fn pending_in(map: &mut BTreeMap<u64, Vec<Use>>, handle: u64) -> Vec<Use> {
    let Some(uses) = map.get_mut(&handle) else {
        return Vec::new();
    };
    uses.retain(Use::pending);
    let pending = uses.clone();
    if uses.is_empty() {
        map.remove(&handle);
    }
    pending
}

impl Checker {
    /// Checks packet `index` of `queue` as the adapter fetches it, then
    /// records which signals it names.
    pub(crate) fn before_publish(
        &mut self,
        instance: &Instance,
        queue: &Arc<QueueAdapter>,
        index: u64,
        packet: &PacketWords,
    ) {
        let here = || format!("queue {} packet {index}", queue.id);
        let completion = packet.completion_signal().handle;
        let dependencies = dependencies(packet);
        for handle in dependencies.iter().copied().chain([completion]) {
            if handle != 0 {
                check_named(instance, queue.gpu, handle, &here);
            }
        }
        if completion != 0 && is_known(instance, completion) {
            let earlier = pending_in(&mut self.completions, completion);
            // SAFETY: `is_known`: a block the simulator owns.
            let value = unsafe { peek_value(completion) };
            if value <= earlier.len() as i64 {
                let others: Vec<_> = earlier.iter().map(Use::describe).collect();
                instance.violation(format!(
                    "{}: completion signal {completion:#x} holds {value} while {} earlier \
                     unfinished packet(s) {others:?} also complete it: it was re-armed while \
                     in flight, or never armed",
                    here(),
                    earlier.len(),
                ));
            }
            let waiters = pending_in(&mut self.waits, completion);
            if !waiters.is_empty() {
                let waiters: Vec<_> = waiters.iter().map(Use::describe).collect();
                instance.violation(format!(
                    "{}: completion signal {completion:#x} is reused while barrier packet(s) \
                     {waiters:?} still wait on its previous use (a GPU waiter's signal was re-armed)",
                    here(),
                ));
            }
            self.completions.entry(completion).or_default().push(Use {
                queue: queue.clone(),
                index,
            });
        }
        for handle in dependencies {
            self.waits.entry(handle).or_default().push(Use {
                queue: queue.clone(),
                index,
            });
        }
    }

    /// Checks that no pending packet still names a signal in `range`, which
    /// `call` is releasing.
    pub(crate) fn on_release(&mut self, instance: &Instance, call: &str, range: Range<u64>) {
        let handles: Vec<u64> = self
            .completions
            .range(range.clone())
            .chain(self.waits.range(range.clone()))
            .map(|(handle, _)| *handle)
            .collect();
        for handle in handles {
            let users: Vec<_> = pending_in(&mut self.completions, handle)
                .into_iter()
                .chain(pending_in(&mut self.waits, handle))
                .map(|u| u.describe())
                .collect();
            if !users.is_empty() {
                instance.violation(format!(
                    "{call}: signal {handle:#x} released while {users:?} still use it \
                     (the GPU would write or read freed memory)"
                ));
            }
        }
    }
}

/// Whether `handle` is a block the simulator owns (so its value may be read).
fn is_known(instance: &Instance, handle: u64) -> bool {
    instance.memory.runtime_signal(handle).is_some()
        || instance.memory.allocation_containing(handle).is_some()
        || instance.memory.was_destroyed(handle)
}

/// Checks that a signal a packet on `gpu` names is live memory the GPU and
/// the host may both reach.
fn check_named(instance: &Instance, gpu: u32, handle: u64, here: &dyn Fn() -> String) {
    if instance.memory.runtime_signal(handle).is_some() {
        return;
    }
    if instance.memory.was_destroyed(handle) {
        return instance.violation(format!(
            "{}: names signal {handle:#x}, destroyed by hsa_signal_destroy",
            here()
        ));
    }
    let Some(allocation) = instance.memory.allocation_containing(handle) else {
        // Not ROCr's memory at all; the simulator reports it as unknown.
        return;
    };
    if allocation.freed {
        return instance.violation(format!(
            "{}: names signal {handle:#x} in a block already given back with \
             hsa_amd_memory_pool_free",
            here()
        ));
    }
    if handle % 64 != 0 {
        return instance.violation(format!(
            "{}: names {handle:#x}, which is not the start of a 64-byte signal block",
            here()
        ));
    }
    if allocation.kind == PoolKind::Device && !allocation.reachable_by(AgentKind::Cpu) {
        instance.violation(format!(
            "{}: names VRAM signal {handle:#x}, but the CPU agent was never granted access \
             to its block (hsa_amd_agents_allow_access): the host's stores to it would fault",
            here()
        ));
    }
    if !allocation.reachable_by(AgentKind::Gpu(gpu)) {
        instance.violation(format!(
            "{}: names signal {handle:#x}, but GPU {gpu} was never granted access to its \
             block (hsa_amd_agents_allow_access)",
            here()
        ));
    }
}
