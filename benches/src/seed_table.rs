//! `sigbench --seed-table`: the CLR change's two MI300X tables beside what
//! the simulator's MI300X profile predicts for them.
//!
//! The CLR change that moved completion signals to device memory published
//! two tables measured on an MI300X (its pull request's description): host
//! time per call of six event and synchronize calls (median of 2000), and
//! hip-tests' `EventPerformance` (an average, each timed call followed, inside
//! the timing, by the harness's `hipStreamSynchronize` of the null stream).
//! Each row has two measured columns: `develop` (host-memory signals, CLR's
//! legacy tracker) and `DEBUG_CLR_DEV_SIGNALS=1` (device-memory signals,
//! CLR's retiring tracker).
//!
//! This module runs the same call sequences on the threaded simulator with
//! [`CostProfile::mi300x`](sigretire_sim::CostProfile::mi300x) in three
//! columns:
//!
//! - **legacy**: the baseline tracker with host-memory signals, driven as
//!   CLR drives its trackers ([`Driver::Clr`]): the seed's `develop`.
//! - **CLR retiring**: the retiring tracker with device-memory signals,
//!   driven as CLR drives it: the seed's `DEBUG_CLR_DEV_SIGNALS=1`.
//! - **ours**: the retiring tracker with device-memory signals behind this
//!   project's own queue layer ([`Driver::Ours`]), which differs from CLR on
//!   purpose (no read for a query the tracker can answer, timestamps
//!   harvested once into host memory).
//!
//! The first table is the one the profile was fitted to; the second is the
//! check the fit has not seen, reported as it comes. Every prediction has its
//! relative error against the seed (to the nearest end of a measured range,
//! 0 inside it), and each row the direction of its change from host to
//! device signals, the seed's and the prediction's.

use crate::affinity;
use crate::platform::Platform;
use crate::platforms::sim::SimBench;
use sigretire_queue::{Device, DeviceConfig, Event, HostQueue, QueueConfig, QueueTracker};
use sigretire_sim::backend::SimMemory;
use sigretire_sim::hsa_sys::hsa_signal_t;
use sigretire_sim::{Signal, Sim};
use sigretire_tracker::{
    BaselineTracker, Config, HardwareQueue, Placement, Publication, QueueError, QueueView,
    RetiringTracker, Status, WaitPolicy, Work,
};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A measured value of the seed: one figure, or a range over its runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    /// The lowest figure, microseconds.
    pub lo: f64,
    /// The highest (equal to `lo` for a single figure).
    pub hi: f64,
}

impl Measured {
    /// One figure.
    pub const fn one(us: f64) -> Self {
        Self { lo: us, hi: us }
    }

    /// A range.
    pub const fn range(lo: f64, hi: f64) -> Self {
        Self { lo, hi }
    }

    /// The relative error of `predicted` against the nearest end of the
    /// range: 0 inside it, else `|predicted - end| / end`.
    ///
    /// ```
    /// use sigretire_bench::seed_table::Measured;
    /// let seed = Measured::range(4.5, 4.7);
    /// assert_eq!(seed.relative_error(4.6), 0.0);
    /// assert!((seed.relative_error(5.17) - 0.1).abs() < 1e-9);
    /// assert!((seed.relative_error(4.05) - 0.1).abs() < 1e-9);
    /// ```
    pub fn relative_error(&self, predicted: f64) -> f64 {
        let nearest = if predicted < self.lo {
            self.lo
        } else if predicted > self.hi {
            self.hi
        } else {
            return 0.0;
        };
        (predicted - nearest).abs() / nearest
    }
}

impl std::fmt::Display for Measured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi)
        }
    }
}

/// Which way a call's time moved from host-memory to device-memory signals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Faster with device signals.
    Faster,
    /// Slower with device signals.
    Slower,
    /// No change beyond the noise.
    Unchanged,
}

impl Direction {
    /// A prediction's direction: a change smaller than 5 % of the host
    /// figure, or than 0.02 us (the jitter of the shortest calls on this
    /// machine), is no change.
    ///
    /// ```
    /// use sigretire_bench::seed_table::Direction;
    /// assert_eq!(Direction::of(5.3, 4.6), Direction::Faster);
    /// assert_eq!(Direction::of(0.08, 1.2), Direction::Slower);
    /// assert_eq!(Direction::of(0.06, 0.07), Direction::Unchanged);
    /// ```
    pub fn of(host: f64, device: f64) -> Self {
        let noise = (0.05 * host).max(0.02);
        if device < host - noise {
            Direction::Faster
        } else if device > host + noise {
            Direction::Slower
        } else {
            Direction::Unchanged
        }
    }

    /// The directions the seed's own change allows: a range of device
    /// figures that reaches the host figure allows no change as well as
    /// the way the range goes.
    ///
    /// ```
    /// use sigretire_bench::seed_table::{Direction, Measured};
    /// let allowed = Direction::allowed(Measured::one(6.5), Measured::range(6.3, 6.5));
    /// assert_eq!(allowed, vec![Direction::Faster, Direction::Unchanged]);
    /// assert_eq!(Direction::allowed(Measured::one(0.14), Measured::one(0.14)), vec![Direction::Unchanged]);
    /// ```
    pub fn allowed(host: Measured, device: Measured) -> Vec<Direction> {
        let mut allowed = Vec::new();
        if device.lo < host.lo {
            allowed.push(Direction::Faster);
        }
        if device.hi > host.hi {
            allowed.push(Direction::Slower);
        }
        if device.lo <= host.hi && device.hi >= host.lo {
            allowed.push(Direction::Unchanged);
        }
        allowed
    }

    fn word(self) -> &'static str {
        match self {
            Direction::Faster => "faster",
            Direction::Slower => "slower",
            Direction::Unchanged => "same",
        }
    }
}

/// The call sequences the seed timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Empty kernel, record an event; timed: synchronize the event.
    EventSynchronize {
        /// A blocking-sync event.
        blocking: bool,
    },
    /// Empty kernel, record, synchronize; timed: query the event.
    EventQuery,
    /// Empty kernel; timed: synchronize the stream.
    StreamSynchronize,
    /// Empty kernel, synchronize; timed: synchronize the stream again.
    StreamSynchronizeCompleted,
    /// Empty kernel on the null stream; timed: synchronize every stream of
    /// the device (the null stream and one created stream with nothing
    /// pending).
    DeviceSynchronize,
    /// hip-tests: timed: record an event, synchronize the stream.
    HarnessRecord,
    /// hip-tests: record; timed: synchronize the event, then the stream.
    HarnessEventSynchronize {
        /// A blocking-sync event.
        blocking: bool,
    },
    /// hip-tests: record, 5 ms idle, record, synchronize the second;
    /// timed: elapsed time between the two, then synchronize the stream.
    HarnessElapsedTime,
    /// hip-tests: record, synchronize it; timed: query it, then
    /// synchronize the stream.
    HarnessQuery,
}

impl Shape {
    /// Whether the call waits with a blocking-sync event.
    fn is_blocking(self) -> bool {
        matches!(
            self,
            Shape::EventSynchronize { blocking: true }
                | Shape::HarnessEventSynchronize { blocking: true }
        )
    }
}

/// How long hip-tests' elapsed-time benchmark leaves the GPU idle between
/// its two records.
const ELAPSED_IDLE: Duration = Duration::from_millis(5);

/// One row of a seed table.
#[derive(Clone, Copy, Debug)]
pub struct SeedRow {
    /// The seed's name for the row.
    pub name: &'static str,
    /// The call sequence.
    pub shape: Shape,
    /// `develop`: host signals, CLR's legacy tracker.
    pub develop: Measured,
    /// `DEBUG_CLR_DEV_SIGNALS=1`: device signals, CLR's retiring tracker.
    pub device_signals: Measured,
}

/// The seed's first table (MI300X, host time per call in us, median of
/// 2000): what the profile was fitted to.
pub const FITTED: [SeedRow; 6] = [
    SeedRow {
        name: "hipEventSynchronize (empty kernel, record, sync)",
        shape: Shape::EventSynchronize { blocking: false },
        develop: Measured::one(5.3),
        device_signals: Measured::range(4.5, 4.7),
    },
    SeedRow {
        name: "hipEventSynchronize, blocking-sync event",
        shape: Shape::EventSynchronize { blocking: true },
        develop: Measured::one(5.4),
        device_signals: Measured::range(4.6, 4.7),
    },
    SeedRow {
        name: "hipEventQuery (completed event)",
        shape: Shape::EventQuery,
        develop: Measured::one(0.08),
        device_signals: Measured::one(1.2),
    },
    SeedRow {
        name: "hipStreamSynchronize (empty kernel, sync)",
        shape: Shape::StreamSynchronize,
        develop: Measured::one(6.5),
        device_signals: Measured::range(6.3, 6.4),
    },
    SeedRow {
        name: "hipStreamSynchronize (completed work)",
        shape: Shape::StreamSynchronizeCompleted,
        develop: Measured::one(0.14),
        device_signals: Measured::one(0.14),
    },
    SeedRow {
        name: "hipDeviceSynchronize (empty kernel, sync)",
        shape: Shape::DeviceSynchronize,
        develop: Measured::one(6.5),
        device_signals: Measured::range(6.3, 6.5),
    },
];

/// The seed's second table (hip-tests EventPerformance, MI300X, average in
/// us, each timed call followed by the harness's hipStreamSynchronize):
/// the check the fit has not seen.
pub const UNSEEN: [SeedRow; 5] = [
    SeedRow {
        name: "Performance_hipEventRecord",
        shape: Shape::HarnessRecord,
        develop: Measured::one(6.6),
        device_signals: Measured::range(8.2, 8.5),
    },
    SeedRow {
        name: "Performance_hipEventSynchronize, default",
        shape: Shape::HarnessEventSynchronize { blocking: false },
        develop: Measured::range(6.1, 6.4),
        device_signals: Measured::range(8.5, 8.9),
    },
    SeedRow {
        name: "Performance_hipEventSynchronize, blocking",
        shape: Shape::HarnessEventSynchronize { blocking: true },
        develop: Measured::one(6.2),
        device_signals: Measured::range(8.5, 8.8),
    },
    SeedRow {
        name: "Performance_hipEventElapsedTime",
        shape: Shape::HarnessElapsedTime,
        develop: Measured::one(1.4),
        device_signals: Measured::range(16.6, 17.2),
    },
    SeedRow {
        name: "Performance_hipEventQuery",
        shape: Shape::HarnessQuery,
        develop: Measured::one(0.78),
        device_signals: Measured::range(5.0, 5.2),
    },
];

/// How the event and synchronize calls reach the tracker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    /// CLR's behaviour, where it differs from this project's queue layer on
    /// purpose (the change's own description of its limitations):
    /// - `hipEventQuery` loads the event's signal (`IsHwEventReady`: one
    ///   PCIe read with device signals), even when the tracker could know.
    /// - `hipEventElapsedTime` loads each event's signal and its two
    ///   timestamps (three PCIe reads per event with device signals): CLR
    ///   reads the stamps when asked, where ours harvested them into host
    ///   memory. The queue therefore runs with timing off in the queue
    ///   layer (no harvest at synchronize) on a profiled hardware queue (the
    ///   packet processor still writes the stamps these loads read).
    /// - Every wait spins (`WaitForSignal`: up to 100 us actively before
    ///   it blocks; a blocking-sync event spins too, as ROCr's busy-wait
    ///   signals ignore the wait hint), with no load of its own before the
    ///   wait: the wait's first poll is the first read.
    ///
    /// The loads go through the simulator's signal memory, so they are
    /// charged (the profile's load cost by placement) and counted like the
    /// tracker's own. Everything else (publication, batches, markers,
    /// synchronize) is this project's queue layer, which follows CLR's
    /// protocol (docs/design.md section 4).
    Clr,
    /// This project's queue layer as it is.
    Ours,
}

/// A model column: which tracker, which signals, which driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    /// The baseline tracker, host signals, CLR's driving: `develop`.
    Legacy,
    /// The retiring tracker, device signals, CLR's driving.
    ClrRetiring,
    /// The retiring tracker, device signals, our queue layer.
    Ours,
}

impl Column {
    /// The three, in the table's order.
    pub const ALL: [Column; 3] = [Column::Legacy, Column::ClrRetiring, Column::Ours];

    fn driver(self) -> Driver {
        match self {
            Column::Legacy | Column::ClrRetiring => Driver::Clr,
            Column::Ours => Driver::Ours,
        }
    }

    fn signals(self) -> Placement {
        match self {
            Column::Legacy => Placement::Host,
            Column::ClrRetiring | Column::Ours => Placement::Device,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Column::Legacy => "legacy/host",
            Column::ClrRetiring => "CLR retiring/device",
            Column::Ours => "ours/device",
        }
    }
}

/// A simulator queue as CLR uses its hardware queue: every event and every
/// synchronize publishes a marker of its own (CLR's `hipEventRecord` and
/// `HostQueue::finish` always do). It is the simulator's queue, saying
/// only that it may run work published by others (the trait's default):
/// the condition under which this project's queue layer, too, publishes a
/// marker instead of sharing the newest command's completion.
#[derive(Clone, Debug)]
pub struct ClrQueue(pub sigretire_sim::Queue);

impl QueueView for ClrQueue {
    fn read_index(&self) -> u64 {
        QueueView::read_index(&self.0)
    }

    fn ring_in_device_memory(&self) -> bool {
        self.0.ring_in_device_memory()
    }
}

impl HardwareQueue for ClrQueue {
    fn reserve(&self) -> Result<u64, QueueError> {
        HardwareQueue::reserve(&self.0)
    }

    fn publish(&self, publication: Publication, work: Work<'_>) -> Result<(), QueueError> {
        self.0.publish(publication, work)
    }
}

/// A hardware queue of `sim` as sigbench's simulator makes them, wrapped
/// for CLR's driving, and its signal memory.
fn clr_queue(sim: &Sim) -> Result<(Arc<SimMemory>, ClrQueue), String> {
    let queue = sim.create_queue(SimBench::queue_config()).map_err(fail)?;
    let memory = Arc::new(SimMemory::new(sim.clone(), queue.agent()));
    Ok((memory, ClrQueue(queue)))
}

/// Why a sample is taken again: CLR's driving looks up an event's signal
/// right after recording it, and the tracker holds nothing for a use it
/// already knows done (the completion thread may have proven the marker
/// complete while this thread waited for the queue's lock).
const SIGNAL_MISSED: &str = "the event completed before its signal was found";

/// How many times in a row a sample may miss its event's signal before
/// the run gives up.
const MAX_MISSES: usize = 100;

/// CLR's `WaitForSignal`: an active spin of up to 100 us before it blocks.
const CLR_WAIT: WaitPolicy = WaitPolicy {
    spin: Duration::from_micros(100),
    ..WaitPolicy::spin()
};

/// A device of two queues (the null stream and a created one) on the
/// simulator, and how it is driven.
struct Bench<T: QueueTracker> {
    sim: Sim,
    driver: Driver,
    device: Device<T>,
    other: HostQueue<T>,
}

/// An event, and for CLR's driving its signal in the simulator's memory.
struct Recorded<T: QueueTracker> {
    event: Event<T>,
    signal: Option<Signal>,
}

fn fail(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl<T: QueueTracker> Bench<T> {
    fn new(
        sim: &Sim,
        driver: Driver,
        blocking: bool,
        make: &dyn Fn() -> Result<T, String>,
    ) -> Result<Self, String> {
        let wait_policy = match (driver, blocking) {
            (Driver::Clr, _) => CLR_WAIT,
            (Driver::Ours, false) => WaitPolicy::spin(),
            (Driver::Ours, true) => WaitPolicy::blocking(),
        };
        let config = QueueConfig {
            wait_policy,
            profiling: driver == Driver::Ours,
            wait_timeout: Some(Duration::from_secs(30)),
            ..QueueConfig::default()
        };
        let device = Device::new(DeviceConfig::default(), make()?, config).map_err(fail)?;
        let other = device.create_queue(make()?, config).map_err(fail)?;
        Ok(Self {
            sim: sim.clone(),
            driver,
            device,
            other,
        })
    }

    fn queue(&self) -> &HostQueue<T> {
        self.device.default_queue()
    }

    /// Records an event on the null stream; for CLR's driving, with
    /// `signal`, finds its signal first (before it can complete: a tracker
    /// holds nothing for a use it knows done), untimed by the caller.
    fn record(&self, signal: bool) -> Result<Recorded<T>, String> {
        let event = self.queue().record_event().map_err(fail)?;
        let signal = if signal && self.driver == Driver::Clr {
            let held = self
                .queue()
                .with_tracker(|t| t.hold(&event.ticket()))
                .map_err(fail)?
                .ok_or(SIGNAL_MISSED)?;
            let handle = hsa_signal_t {
                handle: held.packet_handle(),
            };
            // The event's own reference keeps the signal to this use.
            Some(self.sim.resolve(handle).ok_or("not a simulator signal")?)
        } else {
            None
        };
        Ok(Recorded { event, signal })
    }

    fn query(&self, recorded: &Recorded<T>) -> Status {
        match (self.driver, recorded.signal) {
            (Driver::Clr, Some(signal)) => match self.sim.load(signal) {
                0 => Status::Complete,
                v if v < 0 => Status::Failed,
                _ => Status::Pending,
            },
            _ => recorded.event.query(),
        }
    }

    fn elapsed(&self, start: &Recorded<T>, stop: &Recorded<T>) -> Result<Duration, String> {
        match (self.driver, start.signal, stop.signal) {
            (Driver::Clr, Some(a), Some(b)) => {
                let mut ends = [0; 2];
                for (end, signal) in ends.iter_mut().zip([a, b]) {
                    if self.sim.load(signal) != 0 {
                        return Err("an event of the elapsed time is not complete".into());
                    }
                    *end = self.sim.load_timestamps_one_by_one(signal).1;
                }
                let ticks = ends[1].saturating_sub(ends[0]);
                Ok(self.sim.profile().gpu_tick * u32::try_from(ticks).unwrap_or(u32::MAX))
            }
            _ => start.event.elapsed_to(&stop.event).map_err(fail),
        }
    }

    /// `hipStreamSynchronize` of `q`, which has work pending or not (the
    /// call sequence says which). CLR's `HostQueue::finish` sends a marker
    /// for pending work and waits for it outside the lock, then completes
    /// the batch; with nothing pending it returns. CLR's driving does
    /// exactly that: a marker of its own (an event's: held while it is
    /// waited on, as CLR attaches the marker's signal as its HW event),
    /// waited on without the lock. It does not ask the tracker about the
    /// newest command first, as our queue layer's synchronize does (one
    /// load of it, across PCIe with device signals, to skip the marker when
    /// the work is already done).
    fn stream_sync(&self, q: &HostQueue<T>, pending: bool) -> Result<(), String> {
        if self.driver == Driver::Clr && pending {
            let marker = q.record_event().map_err(fail)?;
            marker.synchronize().map_err(fail)?;
        }
        q.synchronize().map_err(fail)
    }

    /// `hipEventSynchronize`.
    fn event_sync(&self, recorded: &Recorded<T>) -> Result<(), String> {
        recorded.event.synchronize().map_err(fail)
    }

    /// One timed sample of `shape`: set-up untimed, then the timed calls,
    /// with the device-memory loads the simulator counted during them.
    fn sample(&self, shape: Shape) -> Result<(Duration, u64), String> {
        let q = self.queue();
        let timed = |f: &dyn Fn() -> Result<(), String>| -> Result<(Duration, u64), String> {
            let before = self.sim.counters();
            let start = Instant::now();
            f()?;
            let took = start.elapsed();
            Ok((took, self.sim.counters().since(before).device.loads))
        };
        match shape {
            Shape::EventSynchronize { .. } => {
                q.launch(0).map_err(fail)?;
                let r = self.record(false)?;
                timed(&|| self.event_sync(&r))
            }
            Shape::EventQuery => {
                q.launch(0).map_err(fail)?;
                let r = self.record(true)?;
                r.event.synchronize().map_err(fail)?;
                timed(&|| expect_complete(self.query(&r)))
            }
            Shape::StreamSynchronize => {
                q.launch(0).map_err(fail)?;
                timed(&|| self.stream_sync(q, true))
            }
            Shape::StreamSynchronizeCompleted => {
                q.launch(0).map_err(fail)?;
                self.stream_sync(q, true)?;
                timed(&|| self.stream_sync(q, false))
            }
            Shape::DeviceSynchronize => {
                q.launch(0).map_err(fail)?;
                timed(&|| {
                    self.stream_sync(q, true)?;
                    self.stream_sync(&self.other, false)
                })
            }
            Shape::HarnessRecord => timed(&|| {
                let r = self.record(false)?;
                self.stream_sync(q, true)?;
                drop(r);
                Ok(())
            }),
            Shape::HarnessEventSynchronize { .. } => {
                let r = self.record(false)?;
                timed(&|| {
                    self.event_sync(&r)?;
                    self.stream_sync(q, false)
                })
            }
            Shape::HarnessElapsedTime => {
                let start = self.record(true)?;
                std::thread::sleep(ELAPSED_IDLE);
                let stop = self.record(true)?;
                stop.event.synchronize().map_err(fail)?;
                timed(&|| {
                    std::hint::black_box(self.elapsed(&start, &stop)?);
                    self.stream_sync(q, false)
                })
            }
            Shape::HarnessQuery => {
                let r = self.record(true)?;
                r.event.synchronize().map_err(fail)?;
                timed(&|| {
                    expect_complete(self.query(&r))?;
                    self.stream_sync(q, false)
                })
            }
        }
    }
}

fn expect_complete(status: Status) -> Result<(), String> {
    match status {
        Status::Complete => Ok(()),
        other => Err(format!("a synchronized event answered {other:?}")),
    }
}

/// How many samples a row takes, and which statistic summarises them.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Timed calls per cell of the first table.
    pub iterations: usize,
    /// Untimed calls before them.
    pub warmup: usize,
    /// Timed calls of the elapsed-time row, each after 5 ms of idle GPU.
    pub elapsed_iterations: usize,
}

impl Default for Plan {
    fn default() -> Self {
        Self {
            iterations: 2000,
            warmup: 100,
            elapsed_iterations: 100,
        }
    }
}

/// The median of `samples`, microseconds (the first table's statistic).
pub fn median_us(samples: &mut [Duration]) -> f64 {
    samples.sort_unstable();
    samples
        .get(samples.len() / 2)
        .map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

/// The mean of the fastest 99 % of `samples`, microseconds (the second
/// table's statistic: hip-tests averages; the slowest 1 % is left out
/// because on a shared 2-core machine one preemption of a millisecond would
/// move the mean of 1000 calls by a microsecond).
///
/// ```
/// use std::time::Duration;
/// let mut samples: Vec<Duration> = (1..=100).map(|_| Duration::from_micros(2)).collect();
/// samples[7] = Duration::from_millis(5);
/// assert!((sigretire_bench::seed_table::trimmed_mean_us(&mut samples) - 2.0).abs() < 1e-9);
/// ```
pub fn trimmed_mean_us(samples: &mut [Duration]) -> f64 {
    samples.sort_unstable();
    let kept = samples.len() - samples.len() / 100;
    if kept == 0 {
        return 0.0;
    }
    samples[..kept]
        .iter()
        .map(Duration::as_secs_f64)
        .sum::<f64>()
        / kept as f64
        * 1e6
}

/// Measures one row in one column and summarises it with the row's
/// table's statistic.
fn measure_cell(column: Column, row: &SeedRow, plan: Plan, fitted: bool) -> Result<f64, String> {
    let mut samples = cell(column, row, plan)?.samples;
    Ok(if fitted {
        median_us(&mut samples)
    } else {
        trimmed_mean_us(&mut samples)
    })
}

/// One row measured in one column.
#[derive(Clone, Debug)]
pub struct Cell {
    /// The timed calls, after the plan's warm-up.
    pub samples: Vec<Duration>,
    /// Loads of device-memory signals during the timed calls, per call
    /// (a timestamp pair counts two): the PCIe reads the call made.
    pub device_loads_per_call: f64,
}

/// Measures one row in one column, on a fresh threaded simulator with the
/// MI300X profile (whose processor thread then passes over this cell's two
/// queues only, on a CPU of its own where there are two:
/// [`affinity::Split`]).
pub fn cell(column: Column, row: &SeedRow, plan: Plan) -> Result<Cell, String> {
    let (_split, bench) = affinity::Split::run(SimBench::new);
    let config = Config {
        signals: column.signals(),
        ..Config::default()
    };
    let blocking = row.shape.is_blocking();
    let (iterations, warmup) = if row.shape == Shape::HarnessElapsedTime {
        (plan.elapsed_iterations, plan.warmup.min(5))
    } else {
        (plan.iterations, plan.warmup)
    };
    let sim = bench.sim();
    let (samples, device_loads) = match column {
        Column::Legacy => {
            let make = || {
                let (memory, queue) = clr_queue(sim)?;
                BaselineTracker::new(memory, queue, config).map_err(fail)
            };
            run(
                &Bench::new(sim, column.driver(), blocking, &make)?,
                row.shape,
                iterations,
                warmup,
            )?
        }
        Column::ClrRetiring => {
            let make = || {
                let (memory, queue) = clr_queue(sim)?;
                RetiringTracker::new(memory, queue, config).map_err(fail)
            };
            run(
                &Bench::new(sim, column.driver(), blocking, &make)?,
                row.shape,
                iterations,
                warmup,
            )?
        }
        Column::Ours => {
            let make = || bench.retiring(config);
            run(
                &Bench::new(sim, column.driver(), blocking, &make)?,
                row.shape,
                iterations,
                warmup,
            )?
        }
    };
    let device_loads_per_call = device_loads as f64 / samples.len().max(1) as f64;
    Ok(Cell {
        samples,
        device_loads_per_call,
    })
}

fn run<T: QueueTracker>(
    b: &Bench<T>,
    shape: Shape,
    iterations: usize,
    warmup: usize,
) -> Result<(Vec<Duration>, u64), String> {
    let mut samples = Vec::with_capacity(iterations);
    let mut device_loads = 0;
    for i in 0..warmup + iterations {
        let mut misses = 0;
        let took = loop {
            match b.sample(shape) {
                Err(e) if e == SIGNAL_MISSED && misses < MAX_MISSES => misses += 1,
                other => break other?,
            }
        };
        if i >= warmup {
            samples.push(took.0);
            device_loads += took.1;
        }
    }
    b.queue().synchronize().map_err(fail)?;
    b.other.synchronize().map_err(fail)?;
    Ok((samples, device_loads))
}

/// The three predictions of one row.
#[derive(Clone, Copy, Debug)]
pub struct Predicted {
    /// The seed's row.
    pub row: SeedRow,
    /// Legacy tracker, host signals.
    pub legacy: f64,
    /// CLR's retiring behaviour, device signals.
    pub clr: f64,
    /// Ours, device signals.
    pub ours: f64,
}

impl Predicted {
    /// The legacy column's error against `develop`.
    pub fn legacy_error(&self) -> f64 {
        self.row.develop.relative_error(self.legacy)
    }

    /// CLR's column's error against `DEBUG_CLR_DEV_SIGNALS=1`.
    pub fn clr_error(&self) -> f64 {
        self.row.device_signals.relative_error(self.clr)
    }

    /// Whether the predicted host-to-device change goes a way the seed's
    /// does.
    pub fn direction_right(&self) -> bool {
        Direction::allowed(self.row.develop, self.row.device_signals)
            .contains(&Direction::of(self.legacy, self.clr))
    }
}

/// Both tables, measured.
#[derive(Clone, Debug)]
pub struct SeedTable {
    /// The machine and profile, in words.
    pub machine: String,
    /// The first table's rows.
    pub fitted: Vec<Predicted>,
    /// The second table's rows.
    pub unseen: Vec<Predicted>,
}

/// Measures both tables on a fresh threaded simulator with the MI300X
/// profile, printing progress to stderr.
pub fn measure(plan: Plan) -> Result<SeedTable, String> {
    let mut tables = [Vec::new(), Vec::new()];
    let started = Instant::now();
    for (table, (rows, fitted)) in tables
        .iter_mut()
        .zip([(&FITTED[..], true), (&UNSEEN[..], false)])
    {
        for row in rows {
            let mut cells = [0.0; 3];
            for (cell, column) in cells.iter_mut().zip(Column::ALL) {
                eprintln!(
                    "seed table: {} {} ({:.1} s)",
                    row.name,
                    column.name(),
                    started.elapsed().as_secs_f64()
                );
                *cell = measure_cell(column, row, plan, fitted)?;
            }
            table.push(Predicted {
                row: *row,
                legacy: cells[0],
                clr: cells[1],
                ours: cells[2],
            });
        }
    }
    let [fitted, unseen] = tables;
    Ok(SeedTable {
        machine: SimBench::new().machine(),
        fitted,
        unseen,
    })
}

impl SeedTable {
    /// The worst error of the legacy and CLR columns in `rows`, with the
    /// row's name.
    fn worst(rows: &[Predicted]) -> (f64, &'static str) {
        rows.iter()
            .flat_map(|p| [(p.legacy_error(), p.row.name), (p.clr_error(), p.row.name)])
            .fold((0.0, ""), |a, b| if b.0 > a.0 { b } else { a })
    }

    /// The tables as Markdown, with the bars' verdicts.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# The simulator's MI300X profile against the CLR change's measurements\n"
        );
        let _ = writeln!(
            out,
            "Generated by `cargo run --release -p sigbench -- --seed-table`."
        );
        let _ = writeln!(out, "Machine: {}.\n", self.machine);
        let _ = writeln!(
            out,
            "Columns: the seed's two measured columns (MI300X: `develop`, host-memory signals and CLR's legacy \
             tracker; `DEBUG_CLR_DEV_SIGNALS=1`, device-memory signals and CLR's retiring tracker) beside the \
             simulator's predictions: **legacy** (the baseline tracker, host signals, driven as CLR drives it), \
             **CLR** (the retiring tracker, device signals, driven as CLR drives it: a load for every query, \
             timestamps read at elapsed time, spinning waits) and **ours** (the retiring tracker, device \
             signals, this project's queue layer). err: relative error against the seed, to the nearest end \
             of a range. dir: the change from host to device signals, the seed's and the prediction's \
             (legacy to CLR). ours/CLR: our time over CLR's on the same model.\n"
        );
        let section = |out: &mut String, title: &str, stat: &str, rows: &[Predicted]| {
            let _ = writeln!(out, "## {title}\n\n{stat}\n");
            let _ = writeln!(
                out,
                "| call | seed develop | legacy | err | seed dev signals | CLR | err | dir seed / model | ours | ours/CLR |"
            );
            let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
            for p in rows {
                let seed_dir = Direction::allowed(p.row.develop, p.row.device_signals)
                    .iter()
                    .map(|d| d.word())
                    .collect::<Vec<_>>()
                    .join(" or ");
                let model_dir = Direction::of(p.legacy, p.clr);
                let _ = writeln!(
                    out,
                    "| {} | {} | {:.2} | {:.0} % | {} | {:.2} | {:.0} % | {} / {}{} | {:.2} | {:.2} |",
                    p.row.name,
                    p.row.develop,
                    p.legacy,
                    100.0 * p.legacy_error(),
                    p.row.device_signals,
                    p.clr,
                    100.0 * p.clr_error(),
                    seed_dir,
                    model_dir.word(),
                    if p.direction_right() { "" } else { " (wrong)" },
                    p.ours,
                    p.ours / p.clr,
                );
            }
            let _ = writeln!(out);
        };
        section(
            &mut out,
            "Fitted: host time per call (us)",
            "The seed's first table (median of 2000). Predictions: the median of the calls named, timed \
             alone after their set-up.",
            &self.fitted,
        );
        section(
            &mut out,
            "Unseen: hip-tests EventPerformance (us)",
            "The seed's second table (an average; each timed call includes the harness's \
             hipStreamSynchronize). Not used in the fit. Predictions: the mean of the fastest 99 %.",
            &self.unseen,
        );
        let verdict = |out: &mut String, what: &str, bar: f64, rows: &[Predicted]| {
            let (worst, at) = Self::worst(rows);
            let wrong: Vec<_> = rows
                .iter()
                .filter(|p| !p.direction_right())
                .map(|p| p.row.name)
                .collect();
            let _ = writeln!(
                out,
                "- {what}: every row within {:.0} %: {} (worst {:.1} %, {at}); every direction right: {}",
                100.0 * bar,
                if worst <= bar { "holds" } else { "misses" },
                100.0 * worst,
                if wrong.is_empty() {
                    "holds".to_string()
                } else {
                    format!("misses ({})", wrong.join(", "))
                },
            );
        };
        let _ = writeln!(
            out,
            "## What the model leaves out\n\n\
             - CLR's own host bookkeeping per call: this project's queue layer runs in its place, so the \
             calls that do no GPU work (a query with host signals, a synchronize on completed work: \
             tenths of a microsecond) come out faster than CLR's.\n\
             - The legacy column's host work is this project's baseline tracker's, not CLR's legacy \
             tracker's.\n\
             - The simulated GPU is deterministic, so its completions can fall into step with the \
             1.1 us polls of device signals: the CLR column's waits move by up to one poll from run \
             to run.\n"
        );
        let _ = writeln!(out, "## Bars\n");
        verdict(&mut out, "fitted table", 0.15, &self.fitted);
        verdict(&mut out, "unseen table", 0.25, &self.unseen);
        out
    }
}
