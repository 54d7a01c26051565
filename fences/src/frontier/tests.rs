//! One test per case of each shortcut rule: what the newest command proves
//! (the verdict), whether it stands, whether a timed event may share its
//! stamps, whether the layer's own work is done, whether a wake packet is
//! behind later work, and the lock-free answer.

use super::*;
use sigretire_tracker::{
    Request, Tracker, Work,
    backend::{Publication, QueueError, QueueView},
};
use std::cell::Cell;
use std::sync::atomic::AtomicU64 as StdAtomicU64;

/// A hardware queue that counts reservations: work the layer did not
/// publish is a reservation the frontier was not told about.
#[derive(Clone, Default)]
struct Ring {
    write: std::sync::Arc<StdAtomicU64>,
    /// What the hardware says when asked ([`HardwareQueue::idle`]).
    idle: Option<bool>,
}

impl QueueView for Ring {
    fn read_index(&self) -> u64 {
        0
    }

    fn ring_in_device_memory(&self) -> bool {
        false
    }
}

impl HardwareQueue for Ring {
    fn reserve(&self) -> Result<u64, QueueError> {
        Ok(self
            .write
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }

    fn publish(&self, _: Publication, _: Work<'_>) -> Result<(), QueueError> {
        Ok(())
    }

    fn foreign_work_after(&self, newest: u64) -> bool {
        self.write.load(std::sync::atomic::Ordering::Relaxed) != newest.wrapping_add(1)
    }

    fn idle(&self) -> Option<bool> {
        self.idle
    }
}

/// Tickets of distinct uses (only their identity matters here).
fn tickets(count: usize) -> Vec<Ticket> {
    let (mut tracker, queue) = sigretire_sim::backend::stepped_tracker(Default::default()).unwrap();
    (0..count)
        .map(|_| {
            let index = queue.reserve().unwrap();
            tracker.acquire(Request::packet(index)).unwrap().ticket
        })
        .collect()
}

/// A frontier and its horizon on a fresh ring.
struct Stream {
    ring: Ring,
    frontier: Frontier,
    horizon: Horizon<Ring>,
}

impl Stream {
    fn new() -> Self {
        let ring = Ring::default();
        Self {
            horizon: Horizon::new(ring.clone()),
            ring,
            frontier: Frontier::default(),
        }
    }

    /// The layer publishes a command of one packet.
    fn command(&mut self, seq: u64, ticket: Ticket) -> Newest {
        let index = self.ring.reserve().unwrap();
        self.frontier.note_packet(index, &self.horizon);
        let newest = Newest {
            seq,
            index,
            ticket,
            stamped: true,
            placement: Placement::Host,
            refused: false,
        };
        self.frontier.note_command(newest, &self.horizon);
        newest
    }

    /// The layer publishes a packet that is no command (a wake packet).
    fn own_packet(&mut self) {
        let index = self.ring.reserve().unwrap();
        self.frontier.note_packet(index, &self.horizon);
    }

    /// Someone else puts work on the hardware queue.
    fn foreign_packet(&self) {
        self.ring.reserve().unwrap();
    }

    /// The verdict, with the newest command's status `status`; and whether
    /// the status was asked.
    fn verdict(&self, status: Option<Status>) -> (Verdict, bool) {
        let asked = Cell::new(false);
        let verdict = self
            .frontier
            .outlook(&self.ring)
            .verdict(|_| {
                assert!(!asked.replace(true), "asked twice");
                Ok::<_, ()>(status)
            })
            .unwrap();
        (verdict, asked.get())
    }
}

#[test]
fn nothing_published_and_nothing_else_run_is_idle() {
    let stream = Stream::new();
    let (verdict, asked) = stream.verdict(Some(Status::Pending));
    assert!(matches!(verdict, Verdict::Idle), "{verdict:?}");
    assert!(!asked, "no command to ask about");
}

#[test]
fn nothing_published_but_work_of_another_is_unknown() {
    let stream = Stream::new();
    stream.foreign_packet();
    assert!(matches!(stream.verdict(None).0, Verdict::Unknown));
}

#[test]
fn a_standing_newest_command_answers_by_its_status() {
    let t = tickets(1);
    let mut stream = Stream::new();
    stream.command(1, t[0]);
    assert!(matches!(
        stream.verdict(Some(Status::Complete)).0,
        Verdict::Done(n) if n.seq == 1
    ));
    assert!(matches!(
        stream.verdict(Some(Status::Pending)).0,
        Verdict::Running { stands: true, .. }
    ));
    // Not known without a load: running, as far as anyone can say.
    assert!(matches!(
        stream.verdict(None).0,
        Verdict::Running { stands: true, .. }
    ));
    assert!(matches!(
        stream.verdict(Some(Status::Failed)).0,
        Verdict::Failed(n) if n.seq == 1
    ));
}

#[test]
fn foreign_work_after_the_newest_command_leaves_only_pending_and_failed_known() {
    let t = tickets(1);
    let mut stream = Stream::new();
    stream.command(1, t[0]);
    stream.foreign_packet();
    // Done, but what follows it may not be.
    assert!(matches!(
        stream.verdict(Some(Status::Complete)).0,
        Verdict::Unknown
    ));
    assert!(matches!(
        stream.verdict(Some(Status::Pending)).0,
        Verdict::Running { stands: false, .. }
    ));
    assert!(matches!(
        stream.verdict(Some(Status::Failed)).0,
        Verdict::Failed(_)
    ));
}

#[test]
fn a_packet_of_the_layers_own_after_the_newest_command_is_no_foreign_work() {
    let t = tickets(1);
    let mut stream = Stream::new();
    stream.command(1, t[0]);
    stream.own_packet();
    assert!(matches!(
        stream.verdict(Some(Status::Complete)).0,
        Verdict::Done(_)
    ));
}

#[test]
fn work_of_another_between_the_layers_packets_is_seen_after_them_too() {
    let t = tickets(2);
    let progress = Progress::default();
    let mut stream = Stream::new();
    stream.command(1, t[0]);
    progress.note_submitted(1);
    progress.note_synced(1);
    // The runtime's packet, then one of the layer's that is no command (a
    // wake packet, a filler): the write index follows the layer's packet,
    // but the slot between is someone else's.
    stream.foreign_packet();
    stream.own_packet();
    assert!(matches!(
        stream.verdict(Some(Status::Complete)).0,
        Verdict::Unknown
    ));
    assert!(!stream.horizon.all_done(&progress), "without the lock too");
    // A command is a fence after it: known again.
    stream.command(2, t[1]);
    assert!(matches!(
        stream.verdict(Some(Status::Complete)).0,
        Verdict::Done(n) if n.seq == 2
    ));
    progress.note_submitted(2);
    progress.note_synced(2);
    assert!(stream.horizon.all_done(&progress));
    // A move starts afresh, too.
    stream.foreign_packet();
    stream.own_packet();
    assert!(!stream.horizon.all_done(&progress));
    stream.frontier.note_move(Ring::default(), &stream.horizon);
    assert!(stream.horizon.all_done(&progress));
}

#[test]
fn where_nothing_known_answers_the_hardware_may_unless_a_move_is_owed() {
    let ring = |idle| Ring {
        idle,
        ..Ring::default()
    };
    let status = |idle, owed| Frontier::hardware_status(&ring(idle), owed);
    // An AQL queue cannot tell: a marker answers.
    assert_eq!(status(None, false), None);
    assert_eq!(status(None, true), None);
    // Busy: a marker published now would be pending too.
    assert_eq!(status(Some(false), false), Some(Status::Pending));
    assert_eq!(status(Some(false), true), Some(Status::Pending));
    // Idle: everything on it is done, which covers the stream unless the
    // queue it left may still run its work.
    assert_eq!(status(Some(true), false), Some(Status::Complete));
    assert_eq!(status(Some(true), true), None);
}

#[test]
fn a_command_refused_in_part_answers_nothing_and_is_not_asked_about() {
    let t = tickets(1);
    let mut stream = Stream::new();
    stream.command(1, t[0]);
    stream.frontier.note_refused();
    let (verdict, asked) = stream.verdict(Some(Status::Complete));
    assert!(matches!(verdict, Verdict::Unknown), "{verdict:?}");
    assert!(
        !asked,
        "its signal may be done before its issued packets are"
    );
}

#[test]
fn after_a_move_the_old_queues_commands_answer_nothing_until_one_is_published_here() {
    let t = tickets(2);
    let mut stream = Stream::new();
    stream.command(1, t[0]);
    let new_ring = Ring::default();
    stream.frontier.note_move(new_ring.clone(), &stream.horizon);
    stream.ring = new_ring;
    assert_eq!(stream.frontier.hardware_queue(), 1);
    let (verdict, asked) = stream.verdict(Some(Status::Complete));
    assert!(matches!(verdict, Verdict::Unknown), "{verdict:?}");
    assert!(!asked);
    stream.command(2, t[1]);
    assert!(matches!(
        stream.verdict(Some(Status::Complete)).0,
        Verdict::Done(n) if n.seq == 2
    ));
}

#[test]
fn the_newest_command_stands_where_it_proves_the_queue_and_is_not_known_failed() {
    let t = tickets(1);
    let mut stream = Stream::new();
    let newest = stream.command(1, t[0]);
    let standing = |stream: &Stream, known: Option<Status>| {
        stream
            .frontier
            .outlook(&stream.ring)
            .standing(|_| Ok::<_, ()>(known))
            .unwrap()
            .map(|n| n.seq)
    };
    assert_eq!(standing(&stream, None), Some(newest.seq));
    assert_eq!(standing(&stream, Some(Status::Complete)), Some(newest.seq));
    assert_eq!(standing(&stream, Some(Status::Failed)), None);
    stream.foreign_packet();
    assert_eq!(standing(&stream, None), None);
}

#[test]
fn a_timed_marker_shares_only_a_running_stamped_command_in_host_memory() {
    let t = tickets(1);
    let newest = Newest {
        seq: 1,
        index: 0,
        ticket: t[0],
        stamped: true,
        placement: Placement::Host,
        refused: false,
    };
    let asked = Cell::new(0);
    let shares = |newest: &Newest, status: Status| {
        Frontier::shares_stamps(newest, |_| {
            asked.set(asked.get() + 1);
            Ok::<_, ()>(status)
        })
        .unwrap()
    };
    assert!(shares(&newest, Status::Pending));
    // Finished long ago: its end is not the marker's.
    assert!(!shares(&newest, Status::Complete));
    assert_eq!(asked.get(), 2);
    // A marker or a wait writes no stamps.
    let marker = Newest {
        stamped: false,
        ..newest
    };
    assert!(!shares(&marker, Status::Pending));
    // In device memory its stamps cost PCIe reads: a marker is cheaper.
    let device = Newest {
        placement: Placement::Device,
        ..newest
    };
    assert!(!shares(&device, Status::Pending));
    // Neither was loaded to find that out.
    assert_eq!(asked.get(), 2, "a load where none could help");
}

#[test]
fn the_layers_work_is_done_when_its_newest_command_is_on_this_queue_and_done() {
    let t = tickets(2);
    let mut stream = Stream::new();
    let done = |stream: &Stream, status: Status| {
        stream
            .frontier
            .published_work_done(|_| Ok::<_, ()>(status))
            .unwrap()
    };
    assert!(done(&stream, Status::Pending), "nothing published");
    stream.command(1, t[0]);
    assert!(done(&stream, Status::Complete));
    assert!(!done(&stream, Status::Pending));
    // Work of another is not the layer's to wait for.
    stream.foreign_packet();
    assert!(done(&stream, Status::Complete));
    // Refused in part: its issued packets may still run.
    stream.frontier.note_refused();
    assert!(!done(&stream, Status::Complete));
    // Moved: the newest command, on the queue left, is a fence after all
    // the stream's work there; while it runs, the old queue may still run
    // the stream's work.
    let mut moved = Stream::new();
    moved.command(1, t[1]);
    moved.frontier.note_move(Ring::default(), &moved.horizon);
    assert!(!done(&moved, Status::Pending));
    // Once it completed, nothing of the layer's runs there any more.
    assert!(done(&moved, Status::Complete));
}

#[test]
fn a_wake_packet_is_behind_later_work_unless_its_use_is_the_newest_command() {
    let t = tickets(2);
    let mut stream = Stream::new();
    assert!(stream.frontier.behind(&stream.ring, &t[0]), "no command");
    stream.command(1, t[0]);
    assert!(!stream.frontier.behind(&stream.ring, &t[0]));
    stream.command(2, t[1]);
    assert!(
        stream.frontier.behind(&stream.ring, &t[0]),
        "a newer command"
    );
    assert!(!stream.frontier.behind(&stream.ring, &t[1]));
    stream.foreign_packet();
    assert!(stream.frontier.behind(&stream.ring, &t[1]), "foreign work");
}

#[test]
fn without_the_lock_everything_is_done_once_synced_with_nothing_foreign_after() {
    let t = tickets(1);
    let mut stream = Stream::new();
    let progress = Progress::default();
    assert!(stream.horizon.all_done(&progress), "nothing submitted");
    stream.command(1, t[0]);
    progress.note_submitted(1);
    assert!(!stream.horizon.all_done(&progress));
    progress.note_synced(1);
    assert!(stream.horizon.all_done(&progress));
    stream.foreign_packet();
    assert!(!stream.horizon.all_done(&progress), "foreign work follows");
    // A move starts from a queue with nothing of the layer's on it.
    stream.frontier.note_move(Ring::default(), &stream.horizon);
    assert!(stream.horizon.all_done(&progress));
}
