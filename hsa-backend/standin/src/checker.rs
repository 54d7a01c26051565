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
use crate::memory::{Memory, peek_value};
use crate::queue::QueueAdapter;
use crate::violation::Violations;
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

/// A barrier packet waiting on a signal.
#[derive(Clone)]
struct Wait {
    barrier: Use,
    /// The newest packet completing the signal when the barrier was fetched:
    /// the use it waits for (`None`: it waits for a use not yet published).
    watched: Option<Use>,
}

/// Pending packets by the signals they name.
#[derive(Default)]
pub(crate) struct Checker {
    /// Packets completing each signal (pruned of finished ones when looked at).
    completions: BTreeMap<u64, Vec<Use>>,
    /// The newest packet completing each signal, finished or not.
    newest_completion: BTreeMap<u64, Use>,
    /// Barrier packets waiting on each signal (pruned likewise).
    waits: BTreeMap<u64, Vec<Wait>>,
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

/// The entries of `map[handle]` still pending, after dropping the others.
fn pending_in<T: Clone>(
    map: &mut BTreeMap<u64, Vec<T>>,
    handle: u64,
    pending: impl Fn(&T) -> bool,
) -> Vec<T> {
    let Some(entries) = map.get_mut(&handle) else {
        return Vec::new();
    };
    entries.retain(pending);
    let left = entries.clone();
    if entries.is_empty() {
        map.remove(&handle);
    }
    left
}

fn pending_uses(map: &mut BTreeMap<u64, Vec<Use>>, handle: u64) -> Vec<Use> {
    pending_in(map, handle, Use::pending)
}

fn pending_waits(map: &mut BTreeMap<u64, Vec<Wait>>, handle: u64) -> Vec<Wait> {
    pending_in(map, handle, |w: &Wait| w.barrier.pending())
}

impl Checker {
    /// Checks packet `index` of `queue` as the adapter fetches it, then
    /// records which signals it names.
    pub(crate) fn before_publish(
        &mut self,
        memory: &Memory,
        violations: &Violations,
        queue: &Arc<QueueAdapter>,
        index: u64,
        packet: &PacketWords,
    ) {
        let here = || format!("queue {} packet {index}", queue.id);
        let completion = packet.completion_signal().handle;
        let dependencies = dependencies(packet);
        for handle in dependencies.iter().copied().chain([completion]) {
            if handle != 0 {
                check_named(memory, violations, queue.gpu, handle, &here);
            }
        }
        if completion != 0 && is_known(memory, completion) {
            let earlier = pending_uses(&mut self.completions, completion);
            // SAFETY: `is_known`: a block the simulator owns.
            let value = unsafe { peek_value(completion) };
            // On a failed queue every packet fails as it is published, and
            // the failure is in its signal: a later part of the same use
            // then finds it negative, which no re-arm writes.
            let failed_here = value < 0 && queue.is_failed();
            if value <= earlier.len() as i64 && !failed_here {
                let others: Vec<_> = earlier.iter().map(Use::describe).collect();
                violations.record(
                    crate::ViolationKind::RearmWhileInFlight,
                    format!(
                        "{}: completion signal {completion:#x} holds {value} while {} earlier \
                     unfinished packet(s) {others:?} also complete it: it was re-armed while \
                     in flight, or never armed",
                        here(),
                        earlier.len(),
                    ),
                );
            }
            let overtaken: Vec<_> = pending_waits(&mut self.waits, completion)
                .into_iter()
                .filter(|w| w.watched.as_ref().is_some_and(|u| !u.pending()))
                .map(|w| w.barrier.describe())
                .collect();
            if !overtaken.is_empty() {
                violations.record(crate::ViolationKind::RearmWhileInFlight, format!(
                    "{}: completion signal {completion:#x} is used again while barrier packet(s) \
                     {overtaken:?} still wait on its previous, finished use: it was re-armed \
                     before the GPU waiter saw that use complete",
                    here(),
                ));
            }
            let this = Use {
                queue: queue.clone(),
                index,
            };
            self.completions
                .entry(completion)
                .or_default()
                .push(this.clone());
            self.newest_completion.insert(completion, this);
        }
        for handle in dependencies {
            let watched = self.newest_completion.get(&handle).cloned();
            self.waits.entry(handle).or_default().push(Wait {
                barrier: Use {
                    queue: queue.clone(),
                    index,
                },
                watched,
            });
        }
    }

    /// Checks that no pending packet still names a signal in `range`, which
    /// `call` is releasing.
    pub(crate) fn on_release(&mut self, violations: &Violations, call: &str, range: Range<u64>) {
        let released: Vec<u64> = self
            .newest_completion
            .range(range.clone())
            .map(|(h, _)| *h)
            .collect();
        for handle in released {
            self.newest_completion.remove(&handle);
        }
        let handles: Vec<u64> = self
            .completions
            .range(range.clone())
            .map(|(handle, _)| *handle)
            .chain(self.waits.range(range.clone()).map(|(handle, _)| *handle))
            .collect();
        for handle in handles {
            let users: Vec<_> = pending_uses(&mut self.completions, handle)
                .into_iter()
                .chain(
                    pending_waits(&mut self.waits, handle)
                        .into_iter()
                        .map(|w| w.barrier),
                )
                .map(|u| u.describe())
                .collect();
            if !users.is_empty() {
                violations.record(
                    crate::ViolationKind::BadRelease,
                    format!(
                        "{call}: signal {handle:#x} released while {users:?} still use it \
                     (the GPU would write or read freed memory)"
                    ),
                );
            }
        }
    }
}

/// Whether `handle` is a block the simulator owns (so its value may be read).
fn is_known(memory: &Memory, handle: u64) -> bool {
    memory.runtime_signal(handle).is_some()
        || memory.allocation_containing(handle).is_some()
        || memory.was_destroyed(handle)
}

/// Checks that a signal a packet on `gpu` names is live memory the GPU and
/// the host may both reach.
fn check_named(
    memory: &Memory,
    violations: &Violations,
    gpu: u32,
    handle: u64,
    here: &dyn Fn() -> String,
) {
    if memory.runtime_signal(handle).is_some() {
        return;
    }
    if memory.was_destroyed(handle) {
        return violations.record(
            crate::ViolationKind::BadSignal,
            format!(
                "{}: names signal {handle:#x}, destroyed by hsa_signal_destroy",
                here()
            ),
        );
    }
    let Some(allocation) = memory.allocation_containing(handle) else {
        // Not ROCr's memory at all; the simulator reports it as unknown.
        return;
    };
    if allocation.freed {
        return violations.record(
            crate::ViolationKind::BadSignal,
            format!(
                "{}: names signal {handle:#x} in a block already given back with \
             hsa_amd_memory_pool_free",
                here()
            ),
        );
    }
    if !handle.is_multiple_of(64) {
        return violations.record(
            crate::ViolationKind::BadSignal,
            format!(
                "{}: names {handle:#x}, which is not the start of a 64-byte signal block",
                here()
            ),
        );
    }
    if allocation.kind == PoolKind::Device && !allocation.reachable_by(AgentKind::Cpu) {
        violations.record(
            crate::ViolationKind::NoAccess,
            format!(
                "{}: names VRAM signal {handle:#x}, but the CPU agent was never granted access \
             to its block (hsa_amd_agents_allow_access): the host's stores to it would fault",
                here()
            ),
        );
    }
    if !allocation.reachable_by(AgentKind::Gpu(gpu)) {
        violations.record(
            crate::ViolationKind::NoAccess,
            format!(
                "{}: names signal {handle:#x}, but GPU {gpu} was never granted access to its \
             block (hsa_amd_agents_allow_access)",
                here()
            ),
        );
    }
}
