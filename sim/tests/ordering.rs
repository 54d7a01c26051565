//! Property test: random step sequences on a small queue, compared after
//! every step with an obviously correct model of the ordering rules, plus the
//! invariants a tracker relies on:
//! - a barrier-bit packet never launches before every earlier packet
//!   completed;
//! - a completion signal is 0 exactly when the ground truth says its packet
//!   completed (1 before);
//! - the read index never passes an unlaunched packet.

mod common;

use common::{queue, stepped};
use proptest::prelude::*;
use sigretire_sim::{
    AgentId, Blocked, Placement, Signal, SimError, SimQueueConfig, StepError, packets,
};

#[derive(Clone, Copy, Debug)]
enum Op {
    /// Submit a kernel (or a barrier-AND marker, which halts the queue until
    /// it completes), with or without the barrier bit.
    Submit {
        marker: bool,
        barrier_bit: bool,
    },
    Launch,
    /// Complete the `k`-th launched, incomplete packet (modulo their number),
    /// or an arbitrary index when there is none.
    Complete(usize),
    Advance,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (any::<bool>(), prop::bool::weighted(0.3))
            .prop_map(|(marker, barrier_bit)| Op::Submit { marker, barrier_bit }),
        3 => Just(Op::Launch),
        3 => (0usize..8).prop_map(Op::Complete),
        2 => Just(Op::Advance),
    ]
}

#[derive(Clone, Copy, Debug, Default)]
struct ModelPacket {
    barrier_bit: bool,
    halts: bool,
    launched: bool,
    completed: bool,
}

/// The rules, stated as plainly as possible.
#[derive(Debug, Default)]
struct Model {
    size: u64,
    out_of_order: bool,
    packets: Vec<ModelPacket>,
    read: u64,
}

impl Model {
    fn next_launch(&self) -> u64 {
        self.packets.iter().take_while(|p| p.launched).count() as u64
    }

    fn submit(&mut self, marker: bool, barrier_bit: bool) -> Result<u64, SimError> {
        if self.packets.len() as u64 - self.read >= self.size {
            return Err(SimError::QueueFull);
        }
        self.packets.push(ModelPacket {
            barrier_bit,
            halts: marker,
            ..ModelPacket::default()
        });
        Ok(self.packets.len() as u64 - 1)
    }

    fn launch(&mut self) -> Result<u64, StepError> {
        let index = self.next_launch();
        let blocked = |reason| Err(StepError::NotLaunchable { index, reason });
        let Some(packet) = self.packets.get(index as usize).copied() else {
            return blocked(Blocked::NotReserved);
        };
        let earlier = &self.packets[..index as usize];
        if let Some(halting) = earlier.iter().position(|p| p.halts && !p.completed) {
            return blocked(Blocked::BarrierPacket {
                index: halting as u64,
            });
        }
        if let (true, Some(waiting_for)) = (
            packet.barrier_bit,
            earlier.iter().position(|p| !p.completed),
        ) {
            return blocked(Blocked::BarrierBit {
                waiting_for: waiting_for as u64,
            });
        }
        self.packets[index as usize].launched = true;
        Ok(index)
    }

    fn complete(&mut self, index: u64) -> Result<(), StepError> {
        let oldest = self.packets.iter().position(|p| p.launched && !p.completed);
        match self.packets.get(index as usize) {
            Some(p) if p.completed => Err(StepError::AlreadyComplete { index }),
            Some(p) if p.launched => match oldest {
                Some(oldest) if !self.out_of_order && oldest as u64 != index => {
                    Err(StepError::OutOfOrder {
                        index,
                        oldest: oldest as u64,
                    })
                }
                _ => {
                    self.packets[index as usize].completed = true;
                    Ok(())
                }
            },
            _ => Err(StepError::NotLaunched { index }),
        }
    }

    fn advance(&mut self) -> Result<u64, StepError> {
        if self.read < self.next_launch() {
            self.read += 1;
            Ok(self.read)
        } else {
            Err(StepError::NotLaunched { index: self.read })
        }
    }

    /// The index `Op::Complete(k)` aims at.
    fn completion_target(&self, k: usize) -> u64 {
        let running: Vec<usize> = (0..self.packets.len())
            .filter(|&i| self.packets[i].launched && !self.packets[i].completed)
            .collect();
        if running.is_empty() {
            k as u64 // exercises NotLaunched / AlreadyComplete
        } else {
            running[k % running.len()] as u64
        }
    }
}

fn check(out_of_order: bool, size: u32, ops: &[Op]) -> Result<(), TestCaseError> {
    let sim = stepped(1);
    let q = queue(
        &sim,
        SimQueueConfig {
            size,
            out_of_order,
            profiling: true,
            ..SimQueueConfig::default()
        },
    );
    let mut model = Model {
        size: u64::from(size),
        out_of_order,
        ..Model::default()
    };
    let mut signals: Vec<Signal> = Vec::new();
    for &op in ops {
        match op {
            Op::Submit {
                marker,
                barrier_bit,
            } => {
                let s = sim.allocate(1, Placement::Device, AgentId(0)).unwrap()[0];
                sim.store(s, 1);
                sim.store_fence();
                let packet = if marker {
                    packets::barrier_and(&[], Some(s))
                } else {
                    packets::kernel(0, Some(s))
                };
                let packet = if barrier_bit {
                    packets::with_barrier_bit(packet)
                } else {
                    packet
                };
                let expected = model.submit(marker, barrier_bit);
                prop_assert_eq!(q.submit(packet), expected.clone());
                if expected.is_ok() {
                    signals.push(s);
                }
            }
            Op::Launch => {
                let launched = q.launch();
                prop_assert_eq!(launched, model.launch());
                if let Ok(index) = launched
                    && q.truth(index).unwrap().barrier
                {
                    for earlier in 0..index {
                        prop_assert!(
                            q.truth(earlier).unwrap().completed,
                            "fence {} launched before {} completed",
                            index,
                            earlier
                        );
                    }
                }
            }
            Op::Complete(k) => {
                let index = model.completion_target(k);
                prop_assert_eq!(
                    q.complete(index),
                    model.complete(index),
                    "complete({})",
                    index
                );
            }
            Op::Advance => prop_assert_eq!(q.advance_read_index(), model.advance()),
        }
        // Invariants after every step.
        prop_assert_eq!(q.read_index(), model.read);
        prop_assert!(q.read_index() <= model.next_launch());
        for (i, &s) in signals.iter().enumerate() {
            let truth = q.truth(i as u64).unwrap();
            let value = sim.load(s);
            prop_assert_eq!(value == 0, truth.completed, "packet {} value {}", i, value);
            prop_assert!(value == 0 || value == 1);
            prop_assert_eq!(truth.launched, model.packets[i].launched);
            if truth.completed {
                let (start, end) = sim.load_timestamps(s);
                prop_assert!(start < end);
                prop_assert_eq!((Some(start), Some(end)), (truth.start_ts, truth.end_ts));
            }
        }
        prop_assert_eq!(q.is_idle(), model.packets.iter().all(|p| p.completed));
    }
    prop_assert!(sim.violations().is_empty(), "{:?}", sim.violations());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn out_of_order_queues_follow_the_ordering_rules(ops in prop::collection::vec(op(), 1..80)) {
        check(true, 4, &ops)?;
    }

    #[test]
    fn in_order_queues_follow_the_ordering_rules(ops in prop::collection::vec(op(), 1..80)) {
        check(false, 4, &ops)?;
    }
}
