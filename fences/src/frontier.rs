//! What the queue knows about its hardware queue: the newest command it
//! published there, the newest packet of any kind, and so which shortcuts
//! are sound. Every shortcut of the queue layer asks this module, and
//! nothing else decides one.
//!
//! Every shortcut rests on one premise: *nothing that could still run
//! follows the newest command this layer published, on this hardware queue,
//! and that command succeeded*. Then its completion (every packet carries
//! the barrier bit) proves everything before it done, so
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
//! Under the execution lock, [`Outlook::verdict`] (of the
//! [`Frontier::outlook`] on the hardware queue) answers what the newest
//! command proves about the stream (the synchronize, the query, a
//! cross-queue wait on the queue, a move, a shared completion all read it;
//! where it knows nothing, a query asks the hardware,
//! [`Frontier::hardware_status`], before it publishes a marker);
//! [`Outlook::standing`] whether it stands for the hardware queue (a
//! second synchronize joining a marker in flight), [`Frontier::shares_stamps`]
//! whether a timed event may share its end, [`Frontier::published_work_done`]
//! whether anything the layer published may still run, and
//! [`Frontier::behind`] whether a wake packet follows later work. Without
//! the lock, [`Horizon::all_done`] answers for the lock-free synchronize and
//! query. Where nothing known answers, the caller publishes a marker (which
//! then is the newest command, and usually stands) or waits.

use crate::progress::Progress;
use crate::sync::{AtomicBool, AtomicU64, Ordering, RwLock};
use sigretire_tracker::{Placement, Status, Ticket, backend::HardwareQueue};

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

/// What the newest command proves about the stream, from its status.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Verdict {
    /// The layer never published a command and nothing else runs on the
    /// hardware queue: nothing to wait for.
    Idle,
    /// The newest command is done and stands for the hardware queue:
    /// everything on it is done.
    Done(Newest),
    /// The newest command is not known done. It answers "pending" for the
    /// stream whatever follows it; where it `stands` for the hardware
    /// queue, its completion will prove everything on it done, and a marker
    /// published now would complete with it.
    Running { newest: Newest, stands: bool },
    /// The newest command failed: the stream failed, whatever follows it.
    Failed(Newest),
    /// Nothing the layer knows answers (work it did not publish may follow
    /// a finished command, the stream moved since, the newest command was
    /// refused in part): only a marker after everything does.
    Unknown,
}

/// What the frontier sees on the hardware queue at one moment: the
/// newest command if it is the stream's word up to it, and whether anything
/// the layer did not publish may follow it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Outlook {
    trusted: Option<Newest>,
    /// Nothing the layer did not publish follows its newest packet.
    stands: bool,
    /// No command was ever published and nothing else runs.
    idle: bool,
}

impl Outlook {
    /// What the newest command proves about the stream, given its status:
    /// `status` is asked about it once at most (the tracker's word: `None`
    /// where it does not know without a load), and only if it is the
    /// stream's word up to it (on this hardware queue, not refused in part).
    pub(crate) fn verdict<E>(
        self,
        status: impl FnOnce(&Ticket) -> Result<Option<Status>, E>,
    ) -> Result<Verdict, E> {
        let Some(newest) = self.trusted else {
            return Ok(if self.idle {
                Verdict::Idle
            } else {
                Verdict::Unknown
            });
        };
        let stands = self.stands;
        Ok(match status(&newest.ticket)? {
            Some(Status::Failed) if stands && planted!(QueueFailedCommandCountsDone) => {
                Verdict::Done(newest)
            }
            Some(Status::Failed) => Verdict::Failed(newest),
            Some(Status::Complete) if stands => Verdict::Done(newest),
            // Done, but what follows it may not be.
            Some(Status::Complete) => Verdict::Unknown,
            Some(Status::Pending) | None => Verdict::Running { newest, stands },
        })
    }

    /// The newest command, if its completion will prove everything on the
    /// stream's hardware queue done and it is not known failed (`known`:
    /// the tracker's word without a load).
    pub(crate) fn standing<E>(
        self,
        known: impl FnOnce(&Ticket) -> Result<Option<Status>, E>,
    ) -> Result<Option<Newest>, E> {
        Ok(match self.verdict(known)? {
            Verdict::Done(newest)
            | Verdict::Running {
                newest,
                stands: true,
            } => Some(newest),
            _ => None,
        })
    }
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
    /// The newest command's number (0: none yet).
    pub(crate) fn newest_seq(&self) -> u64 {
        self.newest.map_or(0, |newest| newest.seq)
    }

    /// Which hardware queue is current (the stream's count of moves, for a
    /// command to record where it ran).
    pub(crate) fn hardware_queue(&self) -> u32 {
        self.hardware_queue
    }

    /// The newest command, if its outcome is the stream's up to it: it is on
    /// the current hardware queue and was not refused in part.
    fn trusted(&self) -> Option<Newest> {
        let here = self.newest_here || planted!(QueueTrustsMovedCommand);
        self.newest.filter(|newest| {
            let whole = !newest.refused || planted!(QueueTrustsRefusedCommand);
            here && whole
        })
    }

    /// Whether work the layer did not publish may follow its newest packet
    /// on `queue` (the current hardware queue).
    pub(crate) fn followed_by_foreign_work<Q: HardwareQueue>(&self, queue: &Q) -> bool {
        if planted!(QueueIgnoresForeignWork) {
            return false;
        }
        self.foreign_since_newest || queue.foreign_work_after(self.last_packet)
    }

    /// What the frontier sees on `queue` (the current hardware queue) now,
    /// to judge by the newest command's status ([`Outlook::verdict`]).
    pub(crate) fn outlook<Q: HardwareQueue>(&self, queue: &Q) -> Outlook {
        let foreign = self.followed_by_foreign_work(queue);
        Outlook {
            trusted: self.trusted(),
            stands: !foreign,
            idle: self.newest.is_none() && !foreign,
        }
    }

    /// Where nothing the layer knows answers ([`Verdict::Unknown`]: work
    /// it did not publish may follow its newest command, or that command
    /// was refused in part), the hardware's own word on everything on
    /// `queue` (the current hardware queue), where the backend can ask it
    /// ([`HardwareQueue::idle`]: a CUDA stream; an AQL queue cannot tell).
    /// Pending is the answer a marker published now would give. Complete
    /// covers the stream only where nothing of it runs elsewhere: not while
    /// a move's order wait is still `owed` (the queue left may still run
    /// the stream's work, which nothing on this queue waits for yet).
    /// `None`: only a marker after everything answers.
    pub(crate) fn hardware_status<Q: HardwareQueue>(queue: &Q, owed: bool) -> Option<Status> {
        match queue.idle()? {
            false => Some(Status::Pending),
            true if owed => None,
            true => Some(Status::Complete),
        }
    }

    /// Whether a timed marker may share `newest`'s completion (it stands):
    /// its end is when the GPU would have reached the marker only if it ran
    /// work a profiled queue stamps, its signal is in host memory (in device
    /// memory the stamps cost PCIe reads, and a marker of its own is
    /// cheaper), and it is still running (an event recorded long after a
    /// finished kernel must not report the kernel's end). `status` (its
    /// status now: a load) is asked last, only where the rest allows.
    pub(crate) fn shares_stamps<E>(
        newest: &Newest,
        status: impl FnOnce(&Ticket) -> Result<Status, E>,
    ) -> Result<bool, E> {
        if !newest.stamped || newest.placement != Placement::Host {
            return Ok(false);
        }
        Ok(status(&newest.ticket)? == Status::Pending)
    }

    /// Whether everything the layer published is done, as far as its
    /// newest command says (`status`: its status, asked only where it
    /// could answer): none published, or the newest done. The newest
    /// command, on whichever hardware queue, is a fence after every other
    /// packet of the layer's that names a tracker's signal (a move's order
    /// wait pins it or an earlier use): once it completed, only wake
    /// packets may still read a signal. One refused in part is not done
    /// (its issued packets may still run). Work the layer did not publish
    /// is not the layer's to wait for.
    pub(crate) fn published_work_done<E>(
        &self,
        status: impl FnOnce(&Ticket) -> Result<Status, E>,
    ) -> Result<bool, E> {
        match self.newest {
            None => Ok(true),
            Some(newest) if newest.refused => Ok(false),
            Some(newest) => Ok(status(&newest.ticket)? == Status::Complete),
        }
    }

    /// Whether later work runs between `ticket`'s use and a packet
    /// published now, which then completes only after that work too: the
    /// use is not the newest command, or work the layer did not publish
    /// follows.
    pub(crate) fn behind<Q: HardwareQueue>(&self, queue: &Q, ticket: &Ticket) -> bool {
        self.newest
            .is_none_or(|newest| newest.ticket.seq() != ticket.seq())
            || self.followed_by_foreign_work(queue)
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

    /// The stream moved to `queue`: nothing published there yet, and the
    /// old queue's commands prove nothing about it.
    pub(crate) fn note_move<Q: HardwareQueue>(&mut self, queue: Q, horizon: &Horizon<Q>) {
        self.newest_here = false;
        self.last_packet = NO_PACKET;
        self.foreign_since_newest = false;
        self.hardware_queue = self.hardware_queue.wrapping_add(1);
        horizon.note_move(queue);
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

    fn note_move(&self, queue: Q) {
        // Both replaced under the write side: a reader of the queue reads
        // the facts of that queue.
        let mut current = self.queue.write();
        *current = queue;
        self.foreign_seen.store(false, Ordering::Release);
        self.last_packet.store(NO_PACKET, Ordering::Release);
    }

    /// Whether everything is done, without the lock: every command
    /// submitted completed and left the open batch (`progress`), and no
    /// work the layer did not publish follows its newest packet. A packet
    /// the layer publishes meanwhile may make this answer `false` where it
    /// would not (its index is noted after it was reserved): the caller
    /// then takes the lock, which is always safe.
    pub(crate) fn all_done(&self, progress: &Progress) -> bool {
        progress.all_synced() && !self.foreign_work_possible()
    }

    fn foreign_work_possible(&self) -> bool {
        // The index is read under the read side, so it belongs to the queue
        // read (a move replaces both under the write side; packets are
        // noted under the execution lock, which a move holds too).
        if planted!(LockFreeIgnoresForeignWork) {
            return false;
        }
        let queue = self.queue.read();
        self.foreign_seen.load(Ordering::Acquire)
            || queue.foreign_work_after(self.last_packet.load(Ordering::Acquire))
    }
}

#[cfg(all(test, feature = "sim"))]
mod tests;
