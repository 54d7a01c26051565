//! The reference model: what was published on each hardware queue, in
//! order (the layer's packets, the runtime's own, the layer's wake
//! packets), what the machine says became of each, and, per stream, which
//! hardware queues it ran on and from where to where. From it, the work a
//! call must follow ([`Required`]): everything published on the stream's
//! queues before the call, and what the stream was made to wait for.

use super::gpu::{Gpu, Truth};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::ops::Range;
use std::sync::Arc;

/// A hardware queue's number in the ledger (in order of creation).
pub type HwId = usize;

/// One hardware queue: what the machine said of its packets so far.
struct Hw<Q> {
    queue: Q,
    /// Indices below this are recorded (reserved by someone).
    known: u64,
    /// Packets that may still change: not published yet, pending, running.
    open: BTreeSet<u64>,
    /// Of those, the ones that are work (or may be: not published yet).
    work_open: BTreeSet<u64>,
    /// Work that failed.
    failed: BTreeSet<u64>,
    /// Packets the driver published itself, as the runtime (work whatever
    /// their barrier bit).
    foreign: HashSet<u64>,
    /// The driver failed this queue.
    failed_on_purpose: bool,
}

/// Whether a published packet is work: every packet the layer publishes
/// for a command, a marker or a wait carries the barrier bit (an in-order
/// queue) and a completion signal; its wake packets carry no barrier bit
/// (they only wake a thread), and the empty packets that fill a slot it
/// reserved but could not use (a refused submission) carry no signal and
/// do nothing. The runtime's own packets are work whatever they carry.
fn is_work(truth: &Truth, foreign: bool) -> bool {
    foreign || (truth.barrier && truth.completion != 0)
}

/// Every hardware queue of a scenario, and what became of its packets.
pub struct Ledger<G: Gpu> {
    gpu: G,
    hws: Vec<Hw<G::Queue>>,
}

impl<G: Gpu> Ledger<G> {
    /// An empty ledger on `gpu`.
    pub fn new(gpu: G) -> Self {
        Self {
            gpu,
            hws: Vec::new(),
        }
    }

    /// Records a new hardware queue.
    pub fn add(&mut self, queue: G::Queue) -> HwId {
        self.hws.push(Hw {
            queue,
            known: 0,
            open: BTreeSet::new(),
            work_open: BTreeSet::new(),
            failed: BTreeSet::new(),
            foreign: HashSet::new(),
            failed_on_purpose: false,
        });
        self.hws.len() - 1
    }

    /// How many hardware queues there are.
    pub fn len(&self) -> usize {
        self.hws.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.hws.is_empty()
    }

    /// The hardware queue `hw`.
    pub fn queue(&self, hw: HwId) -> &G::Queue {
        &self.hws[hw].queue
    }

    /// `hw`'s write index now.
    pub fn write_index(&self, hw: HwId) -> u64 {
        self.gpu.write_index(&self.hws[hw].queue)
    }

    /// Records that the driver published packet `index` of `hw` itself.
    pub fn note_foreign(&mut self, hw: HwId, index: u64) {
        self.hws[hw].foreign.insert(index);
    }

    /// Records that the driver failed `hw`.
    pub fn note_failed_on_purpose(&mut self, hw: HwId) {
        self.hws[hw].failed_on_purpose = true;
    }

    /// Whether `hw` failed: the driver failed it, or work on it failed.
    pub fn has_failed(&self, hw: HwId) -> bool {
        self.hws[hw].failed_on_purpose || !self.hws[hw].failed.is_empty()
    }

    /// Brings every queue's record up to the machine's truth: new packets,
    /// and every packet that may have changed.
    pub fn refresh(&mut self) {
        for hw in &mut self.hws {
            let write = self.gpu.write_index(&hw.queue);
            for index in hw.known..write {
                hw.open.insert(index);
                hw.work_open.insert(index);
            }
            hw.known = hw.known.max(write);
            let open: Vec<u64> = hw.open.iter().copied().collect();
            for index in open {
                let Some(truth) = self.gpu.truth(&hw.queue, index) else {
                    continue;
                };
                if !truth.published {
                    continue;
                }
                let work = is_work(&truth, hw.foreign.contains(&index));
                if !work {
                    hw.work_open.remove(&index);
                }
                if truth.is_final() {
                    hw.open.remove(&index);
                    hw.work_open.remove(&index);
                    if truth.failed && work {
                        hw.failed.insert(index);
                    }
                }
            }
        }
    }

    /// Whether every packet reserved on `hw` so far is final (as of the
    /// last refresh).
    pub fn idle(&self, hw: HwId) -> bool {
        self.hws[hw].open.is_empty()
    }

    /// The packets of `hw` that may still change, oldest first, with what
    /// the machine says of them (for reports).
    pub fn open(&self, hw: HwId) -> Vec<(u64, Option<Truth>)> {
        let record = &self.hws[hw];
        record
            .open
            .iter()
            .map(|&index| (index, self.gpu.truth(&record.queue, index)))
            .collect()
    }

    /// Launched, unfinished packets of `hw`, oldest first.
    pub fn running(&self, hw: HwId) -> Vec<u64> {
        let hw = &self.hws[hw];
        hw.open
            .iter()
            .copied()
            .filter(|&index| {
                self.gpu
                    .truth(&hw.queue, index)
                    .is_some_and(|t| t.start_ts.is_some() && !t.is_final())
            })
            .collect()
    }

    /// The first packet of `required` that has not completed (pending or
    /// failed), as of the last refresh.
    pub fn first_incomplete(&self, required: &Required) -> Option<(HwId, u64)> {
        required.iter().find_map(|(hw, range)| {
            let record = &self.hws[hw];
            let open = record.work_open.range(range.clone()).next();
            let failed = record.failed.range(range.clone()).next();
            match (open, failed) {
                (Some(&a), Some(&b)) => Some((hw, a.min(b))),
                (Some(&a), None) | (None, Some(&a)) => Some((hw, a)),
                (None, None) => None,
            }
        })
    }

    /// The first packet of `required` that failed, as of the last refresh.
    pub fn first_failed(&self, required: &Required) -> Option<(HwId, u64)> {
        required.iter().find_map(|(hw, range)| {
            self.hws[hw]
                .failed
                .range(range.clone())
                .next()
                .map(|&index| (hw, index))
        })
    }

    /// The machine's truth of one packet.
    pub fn truth(&self, hw: HwId, index: u64) -> Option<Truth> {
        self.gpu.truth(&self.hws[hw].queue, index)
    }

    /// A judge of `required` for another thread: reads the machine's truth
    /// itself, so a waiter can be judged the moment it returns.
    pub fn judge(&self, required: &Required) -> Judge<G> {
        let parts = required
            .iter()
            .map(|(hw, range)| {
                let record = &self.hws[hw];
                let foreign: HashSet<u64> = record
                    .foreign
                    .iter()
                    .copied()
                    .filter(|i| range.contains(i))
                    .collect();
                (hw, record.queue.clone(), range, foreign)
            })
            .collect();
        Judge {
            gpu: self.gpu.clone(),
            parts: Arc::new(parts),
        }
    }
}

/// Work a call must follow, per hardware queue: ranges of packet indices.
/// Within them only work counts (see [`Ledger`]), and only the range a
/// stream ran on is its own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Required {
    ranges: BTreeMap<HwId, Vec<Range<u64>>>,
}

impl Required {
    /// Adds packets `range` of `hw`.
    pub fn add(&mut self, hw: HwId, range: Range<u64>) {
        if range.is_empty() {
            return;
        }
        let ranges = self.ranges.entry(hw).or_default();
        ranges.push(range);
        ranges.sort_by_key(|r| r.start);
        let mut merged: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
        for r in ranges.drain(..) {
            match merged.last_mut() {
                Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
                _ => merged.push(r),
            }
        }
        *ranges = merged;
    }

    /// Adds everything `other` requires.
    pub fn extend(&mut self, other: &Required) {
        for (hw, range) in other.iter() {
            self.add(hw, range);
        }
    }

    /// Every range, by queue.
    pub fn iter(&self) -> impl Iterator<Item = (HwId, Range<u64>)> + '_ {
        self.ranges
            .iter()
            .flat_map(|(&hw, ranges)| ranges.iter().map(move |r| (hw, r.clone())))
    }

    /// Whether it covers packet `index` of `hw`.
    pub fn covers(&self, hw: HwId, index: u64) -> bool {
        self.ranges
            .get(&hw)
            .is_some_and(|ranges| ranges.iter().any(|r| r.contains(&index)))
    }
}

/// Judges a [`Required`] from any thread, from the machine's truth.
pub struct Judge<G: Gpu> {
    gpu: G,
    #[allow(clippy::type_complexity)]
    parts: Arc<Vec<(HwId, G::Queue, Range<u64>, HashSet<u64>)>>,
}

impl<G: Gpu> Clone for Judge<G> {
    fn clone(&self) -> Self {
        Self {
            gpu: self.gpu.clone(),
            parts: self.parts.clone(),
        }
    }
}

impl<G: Gpu> Judge<G> {
    /// The first packet of the work that has not completed now (pending or
    /// failed), if any.
    pub fn first_incomplete(&self) -> Option<(HwId, u64)> {
        for (hw, queue, range, foreign) in self.parts.iter() {
            for index in range.clone() {
                let Some(truth) = self.gpu.truth(queue, index) else {
                    return Some((*hw, index));
                };
                if truth.published && !is_work(&truth, foreign.contains(&index)) {
                    continue;
                }
                if !truth.completed {
                    return Some((*hw, index));
                }
            }
        }
        None
    }
}

/// Where a stream ran: one hardware queue, from the write index it found
/// there to the one it left (`None`: it still runs there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// The hardware queue.
    pub hw: HwId,
    /// Its write index when the stream came.
    pub start: u64,
    /// Its write index when the stream left.
    pub end: Option<u64>,
}

/// The model of one stream: its device, where it ran, what it published
/// there, and what it was made to wait for on other queues.
///
/// A stream's work is its own: the packets its calls published and the
/// runtime's own packets for it (published between the layer's, on the
/// hardware queue it ran on then), not another stream's that happens to
/// share a hardware queue with it.
#[derive(Clone, Debug)]
pub struct StreamModel {
    /// The device's number in the driver.
    pub device: usize,
    /// Every hardware queue it ran on, the current one last.
    pub segments: Vec<Segment>,
    /// What it published, and the runtime published for it.
    pub own: Required,
    /// Work on other queues (or other streams') that cross-queue waits
    /// made it follow.
    pub carried: Required,
}

impl StreamModel {
    /// A stream on `hw` from its write index `start`.
    pub fn new(device: usize, hw: HwId, start: u64) -> Self {
        Self {
            device,
            segments: vec![Segment {
                hw,
                start,
                end: None,
            }],
            own: Required::default(),
            carried: Required::default(),
        }
    }

    /// The hardware queue it runs on now.
    pub fn current(&self) -> HwId {
        self.segments.last().expect("a stream has a queue").hw
    }

    /// Everything a call made now must follow: what the stream published
    /// so far, and what it was made to wait for.
    pub fn required_now(&self) -> Required {
        let mut required = self.carried.clone();
        required.extend(&self.own);
        required
    }

    /// The stream moves to `hw`, whose write index is `start`.
    pub fn move_to(&mut self, hw: HwId, start: u64, left_at: u64) {
        if let Some(last) = self.segments.last_mut() {
            last.end = Some(left_at);
        }
        self.segments.push(Segment {
            hw,
            start,
            end: None,
        });
    }

    /// The queues it ran on, each once.
    pub fn queues(&self) -> Vec<HwId> {
        let mut queues: Vec<HwId> = self.segments.iter().map(|s| s.hw).collect();
        queues.sort_unstable();
        queues.dedup();
        queues
    }
}
