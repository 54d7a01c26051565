//! One work, one packet: the tracker's [`Work`] reaches an AQL ring by three
//! paths, and all three put the same 64 bytes in the ring for every kind of
//! work, barrier bit and completion signal, and refuse the same work:
//!
//! - the simulator's tracker adapter (`sigretire_sim::backend`), read back
//!   from the packet processor's ground truth;
//! - the one mapping both backends publish through (`hsa_sys::aql_packet`),
//!   as the ROCr backend would write it into ROCr's ring;
//! - the ROCr backend publishing on its stand-in, read back from the
//!   packet the stand-in's packet processor fetched at the doorbell.
//!
//! The machines are stepped and never run, so the handles need not name
//! real signals: only the bytes are compared.

use hsa_sys::{HSA_PACKET_TYPE_BARRIER_AND, PacketHeader, PacketWords};
use sigretire_hsa::{AqlQueue, QueueOptions, Runtime};
use sigretire_rocr_standin::{Config as Machine, Standin};
use sigretire_tracker::{
    Work,
    backend::{Condition, Dispatch, HardwareQueue, Publication, WaitValue},
};
use std::sync::Arc;

/// Signal handles the packets name (never dereferenced: nothing runs).
const HANDLES: [u64; 6] = [
    0x7f00_0000_1000,
    0x7f00_0000_1040,
    0x7f00_0000_1080,
    0x7f00_0000_10c0,
    0x7f00_0000_1100,
    0x7f00_0000_1140,
];

/// Every kind of work, each in the shapes its packet can take, and the
/// shapes no packet can carry.
fn every_work() -> Vec<Work<'static>> {
    let mut works = vec![
        Work::Empty,
        Work::Marker,
        Work::Kernel(0),
        Work::Kernel(0xC0DE_0000),
    ];
    for count in 0..=HANDLES.len() {
        works.push(Work::Wait(&HANDLES[..count]));
        works.push(Work::WaitAny(&HANDLES[..count]));
    }
    works.push(Work::Dispatch(Dispatch::new(0xC0DE_0000)));
    works.push(Work::Dispatch(
        Dispatch::new(0xC0DE_1000)
            .kernarg_address(0x7f12_3456_7000)
            .grid([1000, 3, 7])
            .workgroup([256, 2, 1])
            .segments(32, 2048),
    ));
    for condition in [
        Condition::Equal,
        Condition::NotEqual,
        Condition::Less,
        Condition::GreaterEqual,
    ] {
        for (value, mask) in [(0, u64::MAX), (-3, 0xff), (i64::MAX, 1 << 63)] {
            works.push(Work::WaitValue(WaitValue {
                signal: HANDLES[2],
                condition,
                value,
                mask,
            }));
        }
    }
    works
}

/// The ways a packet is published: with and without the barrier bit, with
/// and without a completion signal.
fn publications(index: u64) -> [Publication; 4] {
    [
        Publication::unsignalled(index, false),
        Publication::unsignalled(index, true),
        Publication::untracked(index, false, HANDLES[5]),
        Publication::untracked(index, true, 0x7f00_dead_beef_0040),
    ]
}

/// A path from work to the packet it becomes (or the reason it cannot).
trait Path {
    fn publish(&mut self, publication: Publication, work: Work<'_>) -> Result<PacketWords, String>;
}

/// The simulator's adapter: `HardwareQueue::publish` on a simulated queue.
struct Simulator {
    queue: sigretire_sim::Queue,
}

impl Path for Simulator {
    fn publish(&mut self, publication: Publication, work: Work<'_>) -> Result<PacketWords, String> {
        let index = self.queue.reserve().map_err(|e| e.to_string())?;
        let publication = at(publication, index);
        match self.queue.publish(publication, work) {
            Ok(()) => Ok(self.queue.truth(index).expect("published").packet),
            Err(error) => {
                // The slot is reserved: publish something in it.
                self.queue.publish(publication, Work::Empty).unwrap();
                Err(error.to_string())
            }
        }
    }
}

/// The ROCr backend's encoder alone.
struct Encoder;

impl Path for Encoder {
    fn publish(&mut self, publication: Publication, work: Work<'_>) -> Result<PacketWords, String> {
        hsa_sys::aql_packet(work, &publication).map_err(|e| e.to_string())
    }
}

/// The ROCr backend on its stand-in: `AqlQueue::publish`, then the packet
/// the stand-in fetched from the ring at the doorbell.
struct OnStandin {
    standin: Standin,
    _runtime: Arc<Runtime>,
    queue: AqlQueue,
}

impl OnStandin {
    fn new() -> Self {
        let standin = Standin::new(Machine::stepped()).expect("the stand-in loads");
        let runtime = Runtime::load_from(standin.library_path()).expect("ROCr initialises");
        let device = runtime.device(0).expect("GPU 0");
        let options = QueueOptions {
            size: 1 << 12,
            drain_timeout: std::time::Duration::ZERO,
            ..QueueOptions::default()
        };
        let queue = AqlQueue::new(&device, options).expect("a queue");
        Self {
            standin,
            _runtime: runtime,
            queue,
        }
    }
}

impl Path for OnStandin {
    fn publish(&mut self, publication: Publication, work: Work<'_>) -> Result<PacketWords, String> {
        let index = self.queue.reserve().map_err(|e| e.to_string())?;
        let publication = at(publication, index);
        match self.queue.publish(publication, work) {
            Ok(()) => {
                let truth = self.standin.queue(self.queue.raw()).truth(index);
                Ok(PacketWords(truth.expect("fetched at the doorbell").packet))
            }
            Err(error) => {
                // The slot is reserved, and the stand-in fetches in order.
                self.queue.publish(publication, Work::Empty).unwrap();
                Err(error.to_string())
            }
        }
    }
}

/// `publication` at `index` instead of its own.
fn at(publication: Publication, index: u64) -> Publication {
    if publication.completion() == 0 {
        Publication::unsignalled(index, publication.barrier())
    } else {
        Publication::untracked(index, publication.barrier(), publication.completion())
    }
}

#[test]
fn the_simulator_the_rocr_backend_and_its_stand_in_write_identical_packets() {
    let mut simulator = Simulator {
        queue: sigretire_sim::backend::stepped_queue().1,
    };
    let mut standin = OnStandin::new();
    let (mut packets, mut refusals) = (0, 0);
    for work in every_work() {
        for publication in publications(0) {
            let encoded = Encoder.publish(publication, work);
            let simulated = simulator.publish(publication, work);
            let fetched = standin.publish(publication, work);
            let case = format!("{work:?} published as {publication:?}");
            assert_eq!(simulated, encoded, "simulator vs ROCr encoder: {case}");
            assert_eq!(fetched, encoded, "stand-in vs ROCr encoder: {case}");
            match encoded {
                Ok(words) => {
                    packets += 1;
                    let header = PacketHeader::from_bits(words.header());
                    assert_eq!(header.barrier, publication.barrier(), "{case}");
                    assert_eq!(words.completion_signal().handle, publication.completion());
                }
                Err(_) => refusals += 1,
            }
        }
    }
    // 4 + 14 + 2 + 12 kinds, 4 publications each; refused: more than five
    // dependencies (a wait of either kind) and a wait for any of none.
    assert_eq!((packets, refusals), (4 * (4 + 11 + 2 + 12), 4 * 3));
}

/// The choice the three used to disagree on: empty work and markers are a
/// barrier-AND packet with no dependency on every path (a kernel dispatch
/// of code object 0 would fault a real GPU).
#[test]
fn empty_work_and_markers_are_barrier_and_packets_without_dependencies() {
    for work in [Work::Empty, Work::Marker] {
        let words = Encoder
            .publish(Publication::unsignalled(0, true), work)
            .unwrap();
        assert_eq!(
            PacketHeader::from_bits(words.header()).packet_type,
            HSA_PACKET_TYPE_BARRIER_AND
        );
        assert!((1..14).all(|k| words.0[k] == 0), "no dependency: {words:?}");
    }
}
