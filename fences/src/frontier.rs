//! What the queue knows about its hardware queue: the newest command it
//! published there, the newest packet of any kind, and so whether that
//! command's completion proves the hardware queue idle.
//!
//! Every shortcut of the queue layer rests on one premise: *nothing that
//! could still run follows the newest command this layer published, on
//! this hardware queue, and that command succeeded*. Then its completion
//! (every packet carries the barrier bit) proves everything before it done,
//! so
//!
//! - a synchronize may return, or a query answer, from that command alone;
//! - an event, a synchronize or a cross-queue wait may share its completion
//!   instead of publishing a marker (a marker would complete with it);
//! - a cross-queue wait on a queue whose newest command is done needs no
//!   dependency at all;
//! - a completed marker with nothing published since answers a synchronize
//!   without the lock.
//!
//! The premise is false when
//!
//! - work the layer did not publish may follow: a runtime's own packets on
//!   an adopted queue, work enqueued through a raw handle. The backend
//!   tells ([`HardwareQueue::foreign_work_after`]): an AQL queue from its
//!   write index, a CUDA stream from what was announced to it;
//! - the newest command was refused after issuing part of its work (its
//!   issued packets still run and still name its signal), or it failed;
//! - the stream moved to another hardware queue and published nothing there
//!   yet: the old queue's commands prove nothing about the new one.
//!
//! [`Frontier::standing`] answers the premise for the shortcuts under the
//! execution lock; [`Horizon`] answers it without the lock for the
//! lock-free synchronize and query. Where it cannot be shown, the caller
//! publishes a marker (which then is the newest command, and usually
//! stands) or waits.

use crate::sync::{AtomicBool, AtomicU64, Ordering, RwLock};
use sigretire_tracker::{HardwareQueue, Placement, Ticket};

/// "No packet published on this hardware queue yet": the index before 0,
/// as [`HardwareQueue::foreign_work_after`] takes it.
const NO_PACKET: u64 = u64::MAX;

/// The newest command the layer published on its current hardware queue.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Newest {
    pub(crate) seq: u64,
    /// Its AQL index (its last packet's).
    pub(crate) index: u64,
    pub(crate) ticket: Ticket,
    /// It ran work that a profiled queue stamps: a kernel, empty work, a
    /// caller's dispatch (not a marker or a wait).
    pub(crate) stamped: bool,
    /// Where its signal lives.
    pub(crate) placement: Placement,
    /// The backend refused part of it after issuing the rest: it failed,
    /// and its issued packets may still run.
    pub(crate) refused: bool,
}

/// What the queue knows of its hardware queue (under the execution lock).
#[derive(Debug)]
pub(crate) struct Frontier {
    /// The stream's newest command, on whichever hardware queue.
    newest: Option<Newest>,
    /// It was published on the current hardware queue (not before a move).
    newest_here: bool,
    /// The index of the newest packet of any kind (commands, markers,
    /// wake packets, fillers) the layer published on the current hardware
    /// queue; [`NO_PACKET`] before any.
    last_packet: u64,
    /// A packet of the layer's since its newest command was not the one
    /// right after its previous packet: someone else reserved the slots in
    /// between (the write index after the layer's newest packet says
    /// nothing of those).
    foreign_since_newest: bool,
    /// Which hardware queue is current: the stream's count of moves.
    hardware_queue: u32,
}

impl Default for Frontier {
    fn default() -> Self {
        Self {
            newest: None,
            newest_here: false,
            last_packet: NO_PACKET,
            foreign_since_newest: false,
            hardware_queue: 0,
        }
    }
}

impl Frontier {
    /// The stream's newest command, wherever it runs: what a synchronize
    /// must cover at least.
    pub(crate) fn newest(&self) -> Option<&Newest> {
        self.newest.as_ref()
    }

    /// The newest command's number (0: none yet).
    pub(crate) fn newest_seq(&self) -> u64 {
        self.newest.map_or(0, |newest| newest.seq)
    }

    /// The newest command, if its outcome is the stream's up to it: it is on
    /// the current hardware queue and was not refused in part. A failure of
    /// it is then the stream's; its completion proves the hardware queue
    /// idle only where nothing follows it ([`standing`](Self::standing)).
    pub(crate) fn trusted(&self) -> Option<&Newest> {
        self.newest
            .as_ref()
            .filter(|newest| self.newest_here && !newest.refused)
    }

    /// Whether work the layer did not publish may follow its newest packet
    /// on `queue` (the current hardware queue).
    pub(crate) fn followed_by_foreign_work<Q: HardwareQueue>(&self, queue: &Q) -> bool {
        self.foreign_since_newest || queue.foreign_work_after(self.last_packet)
    }

    /// The newest command, if its completion proves everything on the
    /// stream's hardware queue done (see the module docs): it is
    /// [`trusted`](Self::trusted) and nothing the layer did not publish
    /// follows it. Whether it failed is the tracker's to say: a caller that
    /// shares or trusts it asks.
    pub(crate) fn standing<Q: HardwareQueue>(&self, queue: &Q) -> Option<&Newest> {
        self.trusted()
            .filter(|_| !self.followed_by_foreign_work(queue))
    }

    /// Whether nothing at all runs on the stream's hardware queue that a
    /// synchronize must wait for: the layer published no command since the
    /// stream was made, and nobody else put work on the queue.
    pub(crate) fn idle_since_creation<Q: HardwareQueue>(&self, queue: &Q) -> bool {
        self.newest.is_none() && !self.followed_by_foreign_work(queue)
    }

    /// A packet of any kind was published at `index` on the current
    /// hardware queue.
    pub(crate) fn note_packet(&mut self, index: u64, horizon: &Horizon<impl HardwareQueue>) {
        if index != self.last_packet.wrapping_add(1) {
            // Slots between the layer's packets are someone else's.
            self.foreign_since_newest = true;
        }
        self.last_packet = index;
        horizon.note_packet(index, self.foreign_since_newest);
    }

    /// A command was published (its packets already noted): a fence, it
    /// covers whatever ran before it on the queue.
    pub(crate) fn note_command(&mut self, newest: Newest, horizon: &Horizon<impl HardwareQueue>) {
        self.newest = Some(newest);
        self.newest_here = true;
        self.foreign_since_newest = false;
        horizon.note_packet(self.last_packet, false);
    }

    /// The newest command was refused in part after issuing the rest.
    pub(crate) fn note_refused(&mut self) {
        if let Some(newest) = self.newest.as_mut() {
            newest.refused = true;
        }
    }

    /// The newest command's ticket changed (it is now timed).
    pub(crate) fn retime(&mut self, seq: u64, ticket: Ticket) {
        if let Some(newest) = self.newest.as_mut().filter(|n| n.seq == seq) {
            newest.ticket = ticket;
        }
    }

    /// The stream moved to another hardware queue: nothing published there
    /// yet, and the old queue's commands prove nothing about it.
    pub(crate) fn note_move(&mut self) {
        self.newest_here = false;
        self.last_packet = NO_PACKET;
        self.foreign_since_newest = false;
        self.hardware_queue = self.hardware_queue.wrapping_add(1);
    }

    /// Which hardware queue is current (the stream's count of moves, for a
    /// command to record where it ran).
    pub(crate) fn hardware_queue(&self) -> u32 {
        self.hardware_queue
    }
}

/// What a thread without the execution lock needs to tell whether work the
/// layer did not publish follows its newest packet: the current hardware
/// queue and that packet's index. Written under the execution lock (a move
/// takes the write side for a moment); read by the lock-free synchronize
/// and query.
pub(crate) struct Horizon<Q> {
    queue: RwLock<Q>,
    /// [`Frontier::last_packet`], for readers without the lock.
    last_packet: AtomicU64,
    /// [`Frontier::foreign_since_newest`], likewise.
    foreign_seen: AtomicBool,
}

impl<Q: HardwareQueue> Horizon<Q> {
    pub(crate) fn new(queue: Q) -> Self {
        Self {
            queue: RwLock::new(queue),
            last_packet: AtomicU64::new(NO_PACKET),
            foreign_seen: AtomicBool::new(false),
        }
    }

    fn note_packet(&self, index: u64, foreign_seen: bool) {
        self.foreign_seen.store(foreign_seen, Ordering::Release);
        self.last_packet.store(index, Ordering::Release);
    }

    /// The stream moved to `queue` (under the execution lock).
    pub(crate) fn note_move(&self, queue: Q) {
        let mut current = self.queue.write();
        *current = queue;
        self.foreign_seen.store(false, Ordering::Release);
        self.last_packet.store(NO_PACKET, Ordering::Release);
    }

    /// Whether work the layer did not publish may follow its newest packet.
    /// A packet the layer publishes meanwhile may make this answer `true`
    /// where it would not (its index is noted after it was reserved): the
    /// caller then takes the lock, which is always safe.
    pub(crate) fn foreign_work_possible(&self) -> bool {
        // The index is read under the read side, so it belongs to the queue
        // read (a move replaces both under the write side; packets are
        // noted under the execution lock, which a move holds too).
        let queue = self.queue.read();
        self.foreign_seen.load(Ordering::Acquire)
            || queue.foreign_work_after(self.last_packet.load(Ordering::Acquire))
    }
}
