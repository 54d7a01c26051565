//! The real-time driver: one processor thread per threaded simulator that
//! drives every queue with the profile's latencies.
//!
//! While work is pending the thread polls (yielding between passes), so a
//! launch or a completion happens within microseconds of becoming possible.
//! When nothing has progressed for [`HOT_WINDOW`] it parks on a condition
//! variable: indefinitely when every queue waits for the host (idle, or
//! blocked on an unset flag, a dependency, a stall), or until the next timer
//! (a launch latency or a running kernel). Every host action that can unblock
//! a queue wakes it: a doorbell, a signal store, a flag set, an unstall.
//!
//! It stops when the simulator's last handle is dropped: the drop joins it,
//! so no thread outlives its simulator.

use crate::error::StepError;
use crate::kernel::Kernel;
use crate::processor::{self, Readiness};
use crate::record::{Phase, QueueState, Work};
use crate::state::{Core, QueueCore};
use crate::wake::Wake;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How long the thread keeps polling after its last progress before it
/// parks: long enough that back-to-back submissions never pay an OS wake-up
/// (tens of microseconds), short enough not to burn a core when idle.
pub(crate) const HOT_WINDOW: Duration = Duration::from_millis(2);

/// A timer closer than this is waited for by polling, not by parking (the
/// OS's wake-up latency is of this order).
const SPIN_BEFORE_DEADLINE_NS: u64 = 200_000;

/// The processor thread of one simulator; dropping it stops and joins it.
#[derive(Debug)]
pub(crate) struct Driver {
    wake: Arc<Wake>,
    thread: Option<JoinHandle<()>>,
}

impl Driver {
    pub(crate) fn spawn(core: Arc<Core>, wake: Arc<Wake>) -> std::io::Result<Driver> {
        let thread_wake = wake.clone();
        let thread = thread::Builder::new()
            .name(format!("sim-{}-processor", core.id))
            .spawn(move || run(&core, &thread_wake))?;
        Ok(Driver {
            wake,
            thread: Some(thread),
        })
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.wake.shut_down();
        if let Some(thread) = self.thread.take() {
            let panicked = thread.join().is_err();
            assert!(
                !panicked || thread::panicking(),
                "the simulator's processor thread panicked"
            );
        }
    }
}

/// The thread's loop: passes over every queue, then polls, parks or stops.
fn run(core: &Core, wake: &Wake) {
    let mut processor = RealTimeProcessor::new(core.seed);
    let mut last_progress = Instant::now();
    while !wake.is_shut_down() {
        let pass = processor.pass(core);
        if pass.progressed {
            last_progress = Instant::now();
            continue;
        }
        let now = core.clock.now_ns();
        let timer_close = pass
            .deadline
            .is_some_and(|deadline| deadline.saturating_sub(now) <= SPIN_BEFORE_DEADLINE_NS);
        if timer_close || last_progress.elapsed() < HOT_WINDOW {
            thread::yield_now();
            continue;
        }
        wake.prepare_to_sleep();
        let recheck = processor.pass(core);
        if recheck.progressed {
            wake.cancel_sleep();
            last_progress = Instant::now();
            continue;
        }
        let until = recheck.deadline.map(|deadline| {
            core.clock
                .instant_at(deadline.saturating_sub(SPIN_BEFORE_DEADLINE_NS / 2))
        });
        wake.sleep(until);
    }
}

/// What one pass found.
#[derive(Clone, Copy, Debug, Default)]
struct Pass {
    progressed: bool,
    /// The earliest timer still running, in ns since the simulator started.
    deadline: Option<u64>,
}

impl Pass {
    fn wait_for(&mut self, at_ns: u64) {
        self.deadline = Some(self.deadline.map_or(at_ns, |d| d.min(at_ns)));
    }
}

/// The thread's own state: a seeded random source for out-of-order queues,
/// and a reusable list so a pass allocates nothing.
struct RealTimeProcessor {
    rng: SplitMix64,
    ready: Vec<u64>,
}

impl RealTimeProcessor {
    fn new(seed: u64) -> Self {
        Self {
            rng: SplitMix64(seed),
            ready: Vec::new(),
        }
    }

    fn pass(&mut self, core: &Core) -> Pass {
        let mut pass = Pass::default();
        for q in core.queues.read().iter() {
            let mut st = q.state.lock();
            if st.is_failed() || st.is_stalled() {
                continue;
            }
            let now = core.clock.now_ns();
            self.stamp_arrivals(core, q, &mut st);
            self.launch(core, q, &mut st, now, &mut pass);
            if q.config.out_of_order {
                self.complete_any_order(core, q, &mut st, now, &mut pass);
            } else {
                self.complete_in_order(core, q, &mut st, now, &mut pass);
            }
        }
        pass
    }

    /// Gives every newly published, doorbell-covered packet its launch time:
    /// the doorbell that first covered it plus the launch latency (not the
    /// latest doorbell: a pass that comes late must not delay a packet by
    /// the doorbells rung since).
    fn stamp_arrivals(&self, core: &Core, q: &QueueCore, st: &mut QueueState) {
        let covered = q.doorbell().min(st.recorded_end());
        let latency = duration_ns(core.profile.launch_latency);
        while st.arrivals_stamped < covered {
            let index = st.arrivals_stamped;
            match st.packet_mut(index) {
                Some(packet) if packet.phase == Phase::Reserved => break,
                Some(packet) => {
                    let Some(rung) = q.rung_at_ns(index) else {
                        break; // cannot happen: `covered` says one did
                    };
                    packet.launch_at_ns = Some(rung + latency);
                }
                None => {} // forgotten already: long done
            }
            st.arrivals_stamped += 1;
        }
    }

    fn launch(
        &mut self,
        core: &Core,
        q: &QueueCore,
        st: &mut QueueState,
        now: u64,
        pass: &mut Pass,
    ) {
        while let Ok(index) = processor::check_launch(q, st) {
            let launch_at = st.packet(index).and_then(|p| p.launch_at_ns);
            let Some(launch_at) = launch_at else {
                return; // not stamped yet: the next pass will
            };
            if now < launch_at {
                return pass.wait_for(launch_at);
            }
            pass.progressed = true;
            if processor::launch(core, q, st).is_err() {
                return; // a malformed packet failed the queue
            }
            q.consume(index);
            let packet = st.packet(index).expect("just launched");
            // The work, then the write of its completion signal, whose cost
            // depends on where the signal lives.
            let run_ns = self.run_time_ns(core, q, &packet.work)
                + duration_ns(packet.completion_cost(&core.profile, &core.memory));
            // Timed from after the launch stamp, so `end_ts - start_ts` is never
            // shorter than the run time.
            let started = core.clock.now_ns();
            st.packet_mut(index).expect("just launched").due_at_ns = Some(started + run_ns);
        }
    }

    /// How long a packet runs before it may complete. Out-of-order queues
    /// scale kernel times by a seeded random factor in [0.5, 1.5), so
    /// overlapping kernels finish in varied orders.
    fn run_time_ns(&mut self, core: &Core, q: &QueueCore, work: &Work) -> u64 {
        let base = match work {
            Work::Kernel(Kernel::Duration(duration)) => duration_ns(*duration),
            Work::Kernel(Kernel::Compute(kernel)) => {
                duration_ns(kernel.run_time().unwrap_or(core.profile.kernel_execution))
            }
            Work::Kernel(Kernel::Empty | Kernel::SpinUntil(_)) => {
                duration_ns(core.profile.kernel_execution)
            }
            _ => 0,
        };
        if q.config.out_of_order {
            let factor = 512 + self.rng.next() % 1024;
            (u128::from(base) * u128::from(factor) / 1024) as u64
        } else {
            base
        }
    }

    fn complete_in_order(
        &mut self,
        core: &Core,
        q: &QueueCore,
        st: &mut QueueState,
        now: u64,
        pass: &mut Pass,
    ) {
        while st.oldest_incomplete() < st.next_launch() {
            let index = st.oldest_incomplete();
            let due = st.packet(index).and_then(|p| p.due_at_ns).unwrap_or(0);
            if now < due {
                return pass.wait_for(due);
            }
            match processor::complete(core, q, st, index) {
                Ok(()) => pass.progressed = true,
                Err(StepError::QueueFailed) => {
                    pass.progressed = true;
                    return;
                }
                Err(_) => return,
            }
        }
    }

    fn complete_any_order(
        &mut self,
        core: &Core,
        q: &QueueCore,
        st: &mut QueueState,
        now: u64,
        pass: &mut Pass,
    ) {
        self.ready.clear();
        for index in st.oldest_incomplete()..st.next_launch() {
            let Some(packet) = st.packet(index) else {
                continue;
            };
            if packet.phase != Phase::Launched {
                continue;
            }
            let due = packet.due_at_ns.unwrap_or(0);
            if now < due {
                pass.wait_for(due);
            } else if processor::readiness(&core.memory, &packet.work) != Readiness::Waiting {
                self.ready.push(index);
            }
        }
        self.rng.shuffle(&mut self.ready);
        for &index in &self.ready {
            match processor::complete(core, q, st, index) {
                Ok(()) => pass.progressed = true,
                Err(StepError::QueueFailed) => {
                    pass.progressed = true;
                    return;
                }
                Err(_) => {} // e.g. a flag cleared since: try again next pass
            }
        }
    }
}

/// Threaded [`Queue::run_until_idle`](crate::Queue::run_until_idle): waits
/// until nothing on the queue can progress without a host action.
pub(crate) fn wait_until_quiescent(core: &Core, q: &QueueCore) {
    while processor::can_progress(core, q, &q.state.lock()) {
        thread::yield_now();
    }
}

fn duration_ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// SplitMix64 (Steele, Lea and Flood, 2014): a tiny seeded generator whose
/// sequence never changes with a dependency's version.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Fisher-Yates.
    fn shuffle(&mut self, items: &mut [u64]) {
        for i in (1..items.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Sim, SimConfig, SimQueueConfig};

    #[test]
    fn out_of_order_kernels_run_for_seeded_varied_times() {
        // Timed here rather than end to end: a busy machine can only delay a
        // completion, which would hide a run shorter than its nominal time.
        let sim = Sim::new(SimConfig::default());
        for out_of_order in [false, true] {
            sim.create_queue(SimQueueConfig {
                out_of_order,
                ..SimQueueConfig::default()
            })
            .unwrap();
        }
        let queues = sim.core().queues.read().clone();
        let nominal = Duration::from_millis(1);
        let work = Work::Kernel(Kernel::Duration(nominal));
        let runs = |seed, q: &QueueCore| {
            let mut processor = RealTimeProcessor::new(seed);
            (0..64)
                .map(|_| processor.run_time_ns(sim.core(), q, &work))
                .collect::<Vec<_>>()
        };
        let nominal_ns = duration_ns(nominal);
        assert!(runs(42, &queues[0]).iter().all(|&ns| ns == nominal_ns));
        let varied = runs(42, &queues[1]);
        assert_eq!(varied, runs(42, &queues[1]), "seeded");
        assert_ne!(varied, runs(43, &queues[1]));
        assert!(
            varied
                .iter()
                .all(|&ns| (nominal_ns / 2..nominal_ns * 3 / 2).contains(&ns)),
            "{varied:?}"
        );
        // Spread over the range, not merely off by one: with 64 draws from
        // [0.5, 1.5) both tails are all but certain, and the seed fixes them.
        assert!(
            varied.iter().any(|&ns| ns < nominal_ns * 9 / 10),
            "{varied:?}"
        );
        assert!(
            varied.iter().any(|&ns| ns > nominal_ns * 11 / 10),
            "{varied:?}"
        );
    }

    #[test]
    fn shuffles_are_seeded_permutations() {
        let shuffled = |seed| {
            let mut items: Vec<u64> = (0..16).collect();
            SplitMix64(seed).shuffle(&mut items);
            items
        };
        assert_eq!(shuffled(7), shuffled(7));
        assert_ne!(shuffled(7), shuffled(8));
        let mut sorted = shuffled(7);
        sorted.sort_unstable();
        assert_eq!(sorted, (0..16).collect::<Vec<_>>());
    }
}
