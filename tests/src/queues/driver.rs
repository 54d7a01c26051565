//! The queue driver: streams (host queues) of the queue layer on a stepped
//! machine, driven one [`Op`] at a time through the layer's public API,
//! with every answer judged against the machine's ground truth and the
//! [`Ledger`] after each step, blocking calls on helper threads that must
//! return within a bound once their work completed and never before.

use super::check::{QueueCheck, QueueFailure, broke};
use super::gpu::{Gpu, Release};
use super::ledger::{HwId, Ledger, Required, StreamModel};
use super::ops::{GpuStep, KernelChoice, MoveTarget, Op, Policy, QueueSetup, WorkChoice};
use super::waiters::{Call, Ended, WaitKind, Waiter};
use sigretire_queue::{
    BatchLimits, Command, CommandStatus, CrossWait, Device, DeviceConfig, Error, Event, HostQueue,
    QueueConfig, QueueStats, WaitEventError,
};
use sigretire_tracker::{
    Config, Placement, RetiringTracker, Status, Tracker, Work,
    backend::{Dispatch, HardwareQueue, Publication, QueueError},
};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The retiring tracker on `G`'s queues.
pub type Tr<G> = RetiringTracker<<G as Gpu>::Memory, <G as Gpu>::Queue>;
type Host<G> = HostQueue<Tr<G>>;
type Ev<G> = Event<Tr<G>>;
type Mem<G> = <G as Gpu>::Memory;

/// How long a waiter may take to return once it must (its work completed,
/// or its device entered the error state), and how long the machine may
/// take to go idle at the end. `QUEUE_LIVENESS_MS` overrides it.
pub fn liveness_bound() -> Duration {
    let ms = std::env::var("QUEUE_LIVENESS_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    Duration::from_millis(ms)
}

/// How long a helper's wait may take before it gives up (a hang the
/// driver reported long before, so the thread ends eventually).
const WAIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Streams a scenario has at most.
const MAX_STREAMS: usize = 5;

/// Handles a scenario keeps at most of each kind (older ones are dropped).
const MAX_HANDLES: usize = 24;

/// How often a scenario reached the states that matter, summed over
/// scenarios, so the test shows the driver gets where the bugs live.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueCoverage {
    /// Scenarios run.
    pub scenarios: u64,
    /// Operations applied.
    pub ops: u64,
    /// Commands published (launch, submit, submit_all, wait packets).
    pub commands: u64,
    /// Of the launches, kernels gated on a flag.
    pub gated_launches: u64,
    /// Events recorded.
    pub events: u64,
    /// Events, synchronizes and cross-queue waits that shared the newest
    /// command's completion instead of a marker (the layer's count).
    pub shared_completions: u64,
    /// Cross-queue dependencies the layer elided (known complete).
    pub elided_dependencies: u64,
    /// Cross-queue waits made.
    pub cross_waits: u64,
    /// Synchronizes answered without the lock (a completed marker covered
    /// everything submitted).
    pub lock_free_syncs: u64,
    /// Synchronizes answered by the newest command being done (no marker).
    pub inline_syncs: u64,
    /// Synchronizes through the completion thread.
    pub handler_syncs: u64,
    /// Second synchronizers that joined a marker in flight.
    pub marker_joins: u64,
    /// Event synchronizes answered without the lock.
    pub lock_free_event_syncs: u64,
    /// Moves to another hardware queue.
    pub moves: u64,
    /// Moves that left an order wait to publish (the old queue's work
    /// pending).
    pub order_waits: u64,
    /// Waits that slept on a wake signal.
    pub sleeping_waits: u64,
    /// Times the completion thread slept on a wake signal.
    pub handler_sleeps: u64,
    /// The runtime's own packets published between the layer's.
    pub foreign_packets: u64,
    /// Of those, gated kernels (they run long).
    pub gated_foreign: u64,
    /// Submissions the backend refused.
    pub refusals: u64,
    /// `submit_all`s refused after issuing part of their operations.
    pub partial_refusals: u64,
    /// Queue failures injected.
    pub queue_failures: u64,
    /// Scenarios whose device entered the error state.
    pub device_errors: u64,
    /// Waits that returned early in the device error state (the layer's
    /// count: synchronizes and event synchronizes).
    pub device_error_returns: u64,
    /// Waits of any kind (a command's too) the driver saw return early
    /// with the device's error.
    pub early_returns: u64,
    /// Helper threads started (blocking calls).
    pub helpers: u64,
    /// Of those, still blocked when the driver went on.
    pub blocked_helpers: u64,
    /// Times a waiter had to return (its work completed, or the device
    /// failed) and the driver held it to the bound.
    pub liveness_claims: u64,
    /// Answers of `Ok` and `Complete` judged against the truth.
    pub completions_judged: u64,
    /// Packets completed out of order.
    pub out_of_order_completions: u64,
    /// Wake packets run on a relay beside their queue.
    pub relay_wakes: u64,
    /// Handles dropped (events, commands, queues, devices).
    pub drops: u64,
}

impl QueueCoverage {
    /// Adds another scenario's counts.
    pub fn add(&mut self, other: &QueueCoverage) {
        macro_rules! sum {
            ($($field:ident),*) => { $(self.$field += other.$field;)* };
        }
        sum!(
            scenarios,
            ops,
            commands,
            gated_launches,
            events,
            shared_completions,
            elided_dependencies,
            cross_waits,
            lock_free_syncs,
            inline_syncs,
            handler_syncs,
            marker_joins,
            lock_free_event_syncs,
            moves,
            order_waits,
            sleeping_waits,
            handler_sleeps,
            foreign_packets,
            gated_foreign,
            refusals,
            partial_refusals,
            queue_failures,
            device_errors,
            device_error_returns,
            early_returns,
            helpers,
            blocked_helpers,
            liveness_claims,
            completions_judged,
            out_of_order_completions,
            relay_wakes,
            drops
        );
    }

    fn add_stats(&mut self, stats: &QueueStats) {
        self.shared_completions += stats.shared_completions;
        self.elided_dependencies += stats.dependencies_elided;
        self.lock_free_syncs += stats.syncs_without_lock;
        self.inline_syncs += stats.syncs_inline;
        self.handler_syncs += stats.syncs_by_handler;
        self.marker_joins += stats.marker_joins;
        self.lock_free_event_syncs += stats.event_syncs_without_lock;
        self.order_waits += stats.order_waits;
        self.sleeping_waits += stats.sleeping_waits;
        self.handler_sleeps += stats.handler_sleeps;
        self.device_error_returns += stats.device_error_returns;
    }
}

struct DeviceSlot<G: Gpu> {
    handle: Option<Device<Tr<G>>>,
    /// Queues made on it.
    queues: u64,
    /// A device-wide fault was injected (`Op::DeviceFault`): the only
    /// reason for the device's error state (a queue failure fails its
    /// queue alone).
    faulted: bool,
}

struct StreamSlot<G: Gpu> {
    handle: Option<Host<G>>,
    /// The queue's id (`HostQueue::id`), which a `QueueFailed` names.
    id: u64,
    model: StreamModel,
    /// The device's default queue: the device holds it as long as it lives.
    default: bool,
    /// The queue told the caller it failed (see `note_told_failed`): from
    /// then on it must refuse new work.
    told_failed: bool,
}

struct EventSlot<G: Gpu> {
    handle: Option<Arc<Ev<G>>>,
    stream: usize,
    device: usize,
    /// Its own packet: its marker, or the command whose completion it
    /// shares.
    own: (HwId, u64),
    /// Its work, its own packet included.
    required: Required,
    timed: bool,
    /// Its last final answer.
    answered: Option<Status>,
}

enum CommandHandle<M: sigretire_tracker::backend::SignalMemory> {
    Own(Arc<Command<M>>),
    InWait(Arc<CrossWait<M>>, usize),
}

impl<M: sigretire_tracker::backend::SignalMemory> Clone for CommandHandle<M> {
    fn clone(&self) -> Self {
        match self {
            CommandHandle::Own(command) => CommandHandle::Own(command.clone()),
            CommandHandle::InWait(wait, k) => CommandHandle::InWait(wait.clone(), *k),
        }
    }
}

impl<M: sigretire_tracker::backend::SignalMemory> CommandHandle<M> {
    fn get(&self) -> &Command<M> {
        match self {
            CommandHandle::Own(command) => command,
            CommandHandle::InWait(wait, k) => &wait.commands()[*k],
        }
    }
}

struct CommandSlot<G: Gpu> {
    handle: Option<CommandHandle<Mem<G>>>,
    stream: usize,
    device: usize,
    /// Its packets.
    own: Vec<(HwId, u64)>,
    /// Its work, its own packets included: what must have completed for it
    /// to answer complete.
    required: Required,
    /// What may explain its failure: its work, and for an earlier packet
    /// of a cross-queue wait split over several, the whole wait's
    /// dependencies (which of them its own packet names is the layer's
    /// choice).
    evidence: Required,
    answered: Option<CommandStatus>,
}

/// One of `live` (oldest first): half the picks among the newest three, so
/// the same handles are asked, waited for and waited on again; the others
/// among all.
fn recent(live: &[usize], pick: u8) -> Option<usize> {
    if live.is_empty() {
        return None;
    }
    let pick = usize::from(pick);
    Some(if pick < 128 {
        live[live.len() - 1 - (pick % live.len().min(3))]
    } else {
        live[pick % live.len()]
    })
}

/// How a new helper was left when the driver went on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Settled {
    /// Its call returned.
    Ended,
    /// It started, and nothing it could change changed for a while.
    Blocked,
    /// Neither, within the time given (a busy machine).
    Unknown,
}

/// A cross-queue wait that emitted packets: once its last packet passed,
/// the producers' work must have completed.
struct WaitRecord {
    last_packet: (HwId, u64),
    dependencies: Required,
    what: String,
}

/// The driver of one scenario.
pub struct QueueDriver<G: Gpu> {
    setup: QueueSetup,
    gpu: G,
    ledger: Ledger<G>,
    devices: Vec<DeviceSlot<G>>,
    streams: Vec<StreamSlot<G>>,
    events: Vec<EventSlot<G>>,
    commands: Vec<CommandSlot<G>>,
    waits: Vec<WaitRecord>,
    waiters: Vec<Waiter>,
    gates: Vec<(Release, bool)>,
    timed_kernel: u64,
    coverage: QueueCoverage,
    /// Stats of streams whose handle was dropped, as they were then.
    dropped_stats: Vec<QueueStats>,
    /// What the scenario reached, taken before the end lets go of handles.
    reached: Option<QueueCoverage>,
    step: usize,
    bound: Duration,
}

impl<G: Gpu> QueueDriver<G> {
    /// A machine for `setup` with one device and two streams on it.
    pub fn new(setup: QueueSetup) -> Result<Self, QueueFailure> {
        let gpu = G::new(&setup);
        let timed_kernel = gpu.timed_kernel(Duration::from_micros(20));
        let mut driver = Self {
            setup,
            ledger: Ledger::new(gpu.clone()),
            gpu,
            devices: Vec::new(),
            streams: Vec::new(),
            events: Vec::new(),
            commands: Vec::new(),
            waits: Vec::new(),
            waiters: Vec::new(),
            gates: Vec::new(),
            timed_kernel,
            coverage: QueueCoverage {
                scenarios: 1,
                ..QueueCoverage::default()
            },
            dropped_stats: Vec::new(),
            reached: None,
            step: 0,
            bound: liveness_bound(),
        };
        driver.create_stream()?;
        driver.create_stream()?;
        Ok(driver)
    }

    fn queue_config(&self) -> QueueConfig {
        QueueConfig {
            batch_limits: BatchLimits {
                host_signals: self.setup.batch_limit,
                device_signals: self.setup.batch_limit,
            },
            cpu_sync_batch: self.setup.cpu_sync_batch,
            profiling: self.setup.profiling,
            wait_policy: self.setup.policy.wait_policy(),
            wait_timeout: Some(WAIT_TIMEOUT),
            wake_signals: self.setup.wake_signals,
            ..QueueConfig::default()
        }
    }

    fn tracker(&mut self) -> Result<(Tr<G>, HwId), QueueFailure> {
        let queue = self.gpu.queue();
        let memory = self.gpu.memory(&queue);
        let config = Config {
            signals: if self.setup.device_signals {
                Placement::Device
            } else {
                Placement::Host
            },
            ..Config::default()
        };
        let hw = self.ledger.add(queue.clone());
        match RetiringTracker::new(memory, queue, config) {
            Ok(tracker) => Ok((tracker, hw)),
            Err(error) => broke(
                QueueCheck::Unexpected,
                "setup",
                format!("no tracker: {error}"),
            ),
        }
    }

    /// A new stream: on the newest live device, or a new device.
    fn create_stream(&mut self) -> Result<(), QueueFailure> {
        let (tracker, hw) = self.tracker()?;
        let config = self.queue_config();
        let live = self.devices.iter().rposition(|d| d.handle.is_some());
        let (device, handle, default) = match live {
            Some(d) => {
                let device = self.devices[d].handle.as_ref().expect("live");
                match device.create_queue(tracker, config) {
                    Ok(queue) => (d, queue, false),
                    Err(error) => {
                        return broke(QueueCheck::Unexpected, "create queue", format!("{error}"));
                    }
                }
            }
            None => {
                let config_device = DeviceConfig {
                    skip_abort_on_error: self.setup.skip_abort,
                };
                let device = match Device::new(config_device, tracker, config) {
                    Ok(device) => device,
                    Err(error) => {
                        return broke(QueueCheck::Unexpected, "new device", format!("{error}"));
                    }
                };
                let queue = device.default_queue().clone();
                self.devices.push(DeviceSlot {
                    handle: Some(device),
                    queues: 0,
                    faulted: false,
                });
                (self.devices.len() - 1, queue, true)
            }
        };
        self.devices[device].queues += 1;
        self.streams.push(StreamSlot {
            id: handle.id(),
            handle: Some(handle),
            model: StreamModel::new(device, hw, 0),
            default,
            told_failed: false,
        });
        Ok(())
    }

    /// What the scenario reached so far (the layer's counters included).
    pub fn coverage(&self) -> QueueCoverage {
        let mut coverage = self.coverage;
        for slot in &self.streams {
            if let Some(handle) = &slot.handle {
                coverage.add_stats(&handle.stats());
            }
        }
        for stats in &self.dropped_stats {
            coverage.add_stats(stats);
        }
        let in_error = (0..self.devices.len()).any(|d| self.device_error(d) == Some(true));
        coverage.device_errors = coverage.device_errors.max(u64::from(in_error));
        coverage
    }

    // --- Picking ----------------------------------------------------------

    fn live_stream(&self, pick: u8) -> Option<usize> {
        let live: Vec<usize> = (0..self.streams.len())
            .filter(|&s| self.streams[s].handle.is_some())
            .collect();
        (!live.is_empty()).then(|| live[usize::from(pick) % live.len()])
    }

    fn live_event(&self, pick: u8) -> Option<usize> {
        let live: Vec<usize> = (0..self.events.len())
            .filter(|&e| self.events[e].handle.is_some())
            .collect();
        recent(&live, pick)
    }

    fn live_command(&self, pick: u8) -> Option<usize> {
        let live: Vec<usize> = (0..self.commands.len())
            .filter(|&c| self.commands[c].handle.is_some())
            .collect();
        recent(&live, pick)
    }

    fn hw(&self, pick: u8) -> HwId {
        usize::from(pick) % self.ledger.len()
    }

    fn handle(&self, stream: usize) -> Host<G> {
        self.streams[stream]
            .handle
            .clone()
            .expect("a live stream's handle")
    }

    /// Where the stream's time on its current hardware queue began: a
    /// failure there since (its own markers' too) fails what it asks for
    /// all of (a synchronize, a query).
    fn segment_start(&self, stream: usize) -> u64 {
        self.streams[stream]
            .model
            .segments
            .last()
            .expect("a stream has a queue")
            .start
    }

    /// Whether a hardware queue the stream ran on failed.
    fn stream_failed(&self, stream: usize) -> bool {
        self.streams[stream]
            .model
            .queues()
            .iter()
            .any(|&hw| self.ledger.has_failed(hw))
    }

    /// Whether `queue` is the id of `stream` (or of `producer`, the
    /// stream a cross-queue wait names) and that stream failed: a hardware
    /// queue it ran on failed. A failed queue is failed for good and
    /// refuses, naming itself, whatever it is asked (CUDA's split: the
    /// device and its other queues are not failed with it).
    fn names_a_failed_stream(&self, queue: u64, stream: usize, producer: Option<usize>) -> bool {
        [Some(stream), producer]
            .into_iter()
            .flatten()
            .any(|s| self.streams[s].id == queue && self.stream_failed(s))
    }

    /// The caller was told that `stream` failed: from now on it refuses
    /// new work (checked by `check_refuses_after_failure`).
    fn note_told_failed(&mut self, stream: usize) {
        self.streams[stream].told_failed = true;
    }

    /// A `QueueFailed` naming `queue` reached the caller: the stream of
    /// that id (if the scenario made it) was told failed.
    fn note_named_failed(&mut self, queue: u64) {
        if let Some(s) = self.streams.iter().position(|slot| slot.id == queue) {
            self.note_told_failed(s);
        }
    }

    /// `stream` just took new work (`what`): wrong once it told the
    /// caller it failed.
    fn check_refuses_after_failure(&self, stream: usize, what: &str) -> Result<(), QueueFailure> {
        if self.streams[stream].told_failed {
            return broke(
                QueueCheck::WorkAfterFailure,
                "a submission",
                format!("stream {stream} took {what} after it told the caller it failed"),
            );
        }
        Ok(())
    }

    /// The device's error state, as the scenario made it (a device-wide
    /// fault only, never a queue failure): `None` once its handle is gone.
    fn device_error(&self, device: usize) -> Option<bool> {
        let slot = &self.devices[device];
        slot.handle.as_ref().map(|_| slot.faulted)
    }

    /// The device's error state is the scenario's: set by a device-wide
    /// fault, never by a queue failure.
    fn check_device_states(&self) -> Result<(), QueueFailure> {
        for (d, slot) in self.devices.iter().enumerate() {
            let Some(device) = &slot.handle else {
                continue;
            };
            if device.error().is_some() != slot.faulted {
                return broke(
                    QueueCheck::FalseDeviceError,
                    "device error state",
                    format!(
                        "device {d} says error {:?}, but the scenario {} it",
                        device.error(),
                        if slot.faulted {
                            "faulted"
                        } else {
                            "never faulted"
                        }
                    ),
                );
            }
        }
        Ok(())
    }

    // --- Judging ------------------------------------------------------------

    fn judge_complete(
        &mut self,
        subject: &'static str,
        required: &Required,
        what: &str,
    ) -> Result<(), QueueFailure> {
        self.coverage.completions_judged += 1;
        // Helpers publish at any time; only the driver moves the GPU, so
        // what the machine says now is what it said when the answer was
        // made, plus publications (which complete nothing).
        self.ledger.refresh();
        match self.ledger.first_incomplete(required) {
            None => Ok(()),
            Some((hw, index)) => broke(
                QueueCheck::EarlyCompletion,
                subject,
                format!(
                    "{what} reported complete, but packet {index} of hardware queue {hw} has not \
                     completed: {:?}",
                    self.ledger.truth(hw, index)
                ),
            ),
        }
    }

    fn judge_failed(
        &mut self,
        subject: &'static str,
        evidence: &Required,
        what: &str,
    ) -> Result<(), QueueFailure> {
        // As in `judge_complete`: a failure a helper's late publication
        // shows counts.
        self.ledger.refresh();
        match self.ledger.first_failed(evidence) {
            Some(_) => Ok(()),
            None => broke(
                QueueCheck::FalseFailure,
                subject,
                format!("{what} reported failed, but no packet of its work failed ({evidence:?})"),
            ),
        }
    }

    /// A device error (`DeviceError`, `Aborted`) is the truth only in the
    /// device's error state, and with the variant its configuration says.
    fn judge_device_error(
        &self,
        subject: &'static str,
        device: usize,
        error: &Error,
        what: &str,
    ) -> Result<(), QueueFailure> {
        if self.device_error(device) == Some(false) {
            return broke(
                QueueCheck::FalseDeviceError,
                subject,
                format!("{what} answered {error:?}, but the device is not in the error state"),
            );
        }
        let skip = self.setup.skip_abort;
        match error {
            Error::DeviceError { .. } if skip => Ok(()),
            Error::Aborted { .. } if !skip => Ok(()),
            _ => broke(
                QueueCheck::FalseDeviceError,
                subject,
                format!("{what} answered {error:?} on a device with skip_abort_on_error={skip}"),
            ),
        }
    }

    /// An error from a call on the driver's thread: the truth allows it,
    /// or it breaks a check.
    #[allow(clippy::too_many_arguments)]
    fn judge_call_error(
        &mut self,
        subject: &'static str,
        stream: usize,
        producer: Option<usize>,
        error: &Error,
        refused_work: bool,
        failure_evidence: Option<&Required>,
    ) -> Result<(), QueueFailure> {
        self.ledger.refresh();
        if let Error::QueueFailed { queue } = error {
            self.note_named_failed(*queue);
        }
        let model = &self.streams[stream].model;
        match error {
            // A cross-queue wait publishes a marker on its producer, whose
            // device may be the one refusing work.
            Error::Aborted { .. }
                if producer.is_some_and(|p| {
                    let device = self.streams[p].model.device;
                    self.device_error(device) != Some(false) && !self.setup.skip_abort
                }) =>
            {
                Ok(())
            }
            Error::Aborted { .. } => {
                self.judge_device_error(subject, model.device, error, "a submission")
            }
            Error::Queue(QueueError::Unsupported(_)) if refused_work => Ok(()),
            Error::Queue(QueueError::Failed(_)) if self.stream_failed(stream) => Ok(()),
            // A cross-queue wait publishes a marker on its producer.
            Error::Queue(QueueError::Failed(_))
                if producer.is_some_and(|p| self.stream_failed(p)) =>
            {
                Ok(())
            }
            // A queue failure fails its queue alone: the stream (or the
            // producer it waits for) refuses once it failed.
            Error::QueueFailed { queue }
                if self.names_a_failed_stream(*queue, stream, producer) =>
            {
                Ok(())
            }
            Error::QueueFailed { .. } if failure_evidence.is_some() => {
                self.judge_failed(subject, failure_evidence.expect("checked"), "the call")
            }
            _ => broke(
                QueueCheck::Unexpected,
                subject,
                format!("returned {error:?} with no reason for it"),
            ),
        }
    }

    fn judge_command_status(
        &mut self,
        command: usize,
        status: CommandStatus,
    ) -> Result<(), QueueFailure> {
        let slot = &self.commands[command];
        let (required, evidence, device) =
            (slot.required.clone(), slot.evidence.clone(), slot.device);
        match status {
            CommandStatus::Pending => {}
            CommandStatus::Complete => {
                self.judge_complete("command status", &required, &format!("command {command}"))?
            }
            // Failed is the truth once anything of its work failed: what
            // follows a failure on the GPU fails with it.
            CommandStatus::Failed => {
                self.judge_failed("command status", &evidence, &format!("command {command}"))?;
                self.note_told_failed(self.commands[command].stream);
            }
            CommandStatus::DeviceError => {
                if self.device_error(device) == Some(false) {
                    return broke(
                        QueueCheck::FalseDeviceError,
                        "command status",
                        format!(
                            "command {command} released by a device error the device is not in"
                        ),
                    );
                }
            }
        }
        let slot = &mut self.commands[command];
        match (slot.answered, status.is_done()) {
            (Some(before), _) if before != status => broke(
                QueueCheck::StatusChanged,
                "command status",
                format!("command {command} said {before:?}, now {status:?}"),
            ),
            (None, true) => {
                slot.answered = Some(status);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn judge_event_status(&mut self, event: usize, status: Status) -> Result<(), QueueFailure> {
        let required = self.events[event].required.clone();
        match status {
            Status::Pending => {}
            Status::Complete => {
                self.judge_complete("event query", &required, &format!("event {event}"))?
            }
            Status::Failed => {
                self.judge_failed("event query", &required, &format!("event {event}"))?;
                self.note_told_failed(self.events[event].stream);
            }
        }
        let slot = &mut self.events[event];
        match (slot.answered, status.is_done()) {
            (Some(before), _) if before != status => broke(
                QueueCheck::StatusChanged,
                "event query",
                format!("event {event} said {before:?}, now {status:?}"),
            ),
            (None, true) => {
                slot.answered = Some(status);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    // --- Operations -----------------------------------------------------------

    /// Applies one operation, then every check.
    pub fn apply(&mut self, op: Op) -> Result<(), QueueFailure> {
        self.ledger.refresh();
        let result = self.apply_op(op).and_then(|()| self.check_step());
        self.coverage.ops += 1;
        self.step += 1;
        result.map_err(|mut failure| {
            failure.step = self.step - 1;
            failure
        })
    }

    fn apply_op(&mut self, op: Op) -> Result<(), QueueFailure> {
        match op {
            Op::Launch { stream, kernel } => self.launch(stream, kernel),
            Op::Submit { stream, work } => self.submit(stream, work),
            Op::SubmitAll {
                stream,
                parts,
                refused_at,
                gated,
            } => self.submit_all(stream, parts, refused_at, gated),
            Op::Record { stream } => self.record(stream),
            Op::QueryEvent { event } => self.query_event(event),
            Op::SyncEvent { event } => self.sync_event(event),
            Op::Stamps { event, stop } => self.stamps(event, stop),
            Op::DropEvent { event } => {
                if let Some(e) = self.live_event(event) {
                    self.events[e].handle = None;
                    self.coverage.drops += 1;
                }
                Ok(())
            }
            Op::Status { command } => self.command_status(command),
            Op::WaitCommand { command } => self.wait_command(command),
            Op::DropCommand { command } => {
                if let Some(c) = self.live_command(command) {
                    self.commands[c].handle = None;
                    self.coverage.drops += 1;
                }
                Ok(())
            }
            Op::Synchronize { stream, threads } => self.synchronize(stream, threads),
            Op::Query { stream } => self.query(stream),
            Op::WaitEvents {
                stream,
                first,
                count,
            } => self.wait_events(stream, first, count),
            Op::WaitQueue { stream, producer } => self.wait_queue(stream, producer),
            Op::MoveTo { stream, to } => self.move_to(stream, to),
            Op::Foreign {
                stream,
                gated,
                barrier,
            } => self.foreign(stream, gated, barrier),
            Op::Step(step) => self.gpu_step(step),
            Op::Release { gate } => {
                let unset: Vec<usize> = (0..self.gates.len())
                    .filter(|&g| !self.gates[g].1)
                    .collect();
                if !unset.is_empty() {
                    let g = unset[usize::from(gate) % unset.len()];
                    (self.gates[g].0)();
                    self.gates[g].1 = true;
                }
                Ok(())
            }
            Op::FailQueue { hw } => {
                let hw = self.hw(hw);
                self.gpu.fail(self.ledger.queue(hw));
                self.ledger.note_failed_on_purpose(hw);
                self.coverage.queue_failures += 1;
                Ok(())
            }
            Op::DropQueue { stream } => {
                // A device's default queue lives as long as the device.
                if let Some(s) = self.live_stream(stream)
                    && !self.streams[s].default
                {
                    let handle = self.streams[s].handle.take().expect("live");
                    self.dropped_stats.push(handle.stats());
                    self.coverage.drops += 1;
                }
                Ok(())
            }
            Op::CreateQueue => {
                if self.streams.len() < MAX_STREAMS {
                    self.create_stream()?;
                }
                Ok(())
            }
            Op::DropDevice => {
                if let Some(slot) = self.devices.iter_mut().rev().find(|d| d.handle.is_some()) {
                    slot.handle = None;
                    self.coverage.drops += 1;
                }
                Ok(())
            }
            Op::DeviceFault { device } => {
                let live: Vec<usize> = (0..self.devices.len())
                    .filter(|&d| self.devices[d].handle.is_some())
                    .collect();
                if !live.is_empty() {
                    let d = live[usize::from(device) % live.len()];
                    let handle = self.devices[d].handle.as_ref().expect("live");
                    handle.set_error("a device-wide fault");
                    self.devices[d].faulted = true;
                }
                Ok(())
            }
        }
    }

    /// Records what a call of stream `s` published on `hw` since its write
    /// index was `from` (whether the call succeeded or not: a refused
    /// submission's issued operations still run).
    fn note_published(&mut self, s: usize, hw: HwId, from: u64) {
        let to = self.ledger.write_index(hw);
        self.streams[s].model.own.add(hw, from..to);
    }

    fn gate(&mut self) -> u64 {
        let (kernel, release) = self.gpu.gated_kernel();
        self.gates.push((release, false));
        kernel
    }

    fn push_command(
        &mut self,
        handle: CommandHandle<Mem<G>>,
        stream: usize,
        own: Vec<(HwId, u64)>,
        required: Required,
    ) {
        let evidence = required.clone();
        self.push_command_explained(handle, stream, own, required, evidence);
    }

    /// [`push_command`](Self::push_command), with what may explain its
    /// failure beyond its work.
    fn push_command_explained(
        &mut self,
        handle: CommandHandle<Mem<G>>,
        stream: usize,
        own: Vec<(HwId, u64)>,
        mut required: Required,
        mut evidence: Required,
    ) {
        for &(hw, index) in &own {
            required.add(hw, index..index + 1);
            evidence.add(hw, index..index + 1);
        }
        self.commands.push(CommandSlot {
            handle: Some(handle),
            stream,
            device: self.streams[stream].model.device,
            own,
            required,
            evidence,
            answered: None,
        });
        self.coverage.commands += 1;
        if self.commands.iter().filter(|c| c.handle.is_some()).count() > MAX_HANDLES
            && let Some(old) = self.commands.iter_mut().find(|c| c.handle.is_some())
        {
            old.handle = None;
        }
    }

    fn launch(&mut self, stream: u8, kernel: KernelChoice) -> Result<(), QueueFailure> {
        let Some(s) = self.live_stream(stream) else {
            return Ok(());
        };
        let queue = self.handle(s);
        let before = self.streams[s].model.required_now();
        let hw = self.streams[s].model.current();
        let from = self.ledger.write_index(hw);
        let result = match kernel {
            KernelChoice::Empty => queue.launch_empty(),
            KernelChoice::Gated => {
                self.coverage.gated_launches += 1;
                let gate = self.gate();
                queue.launch(gate)
            }
            KernelChoice::Timed => queue.launch(self.timed_kernel),
            KernelChoice::Dispatch => queue.submit(Work::Dispatch(
                Dispatch::new(self.gpu.empty_kernel()).grid([64, 1, 1]),
            )),
        };
        self.note_published(s, hw, from);
        match result {
            Ok(command) => {
                let own = vec![(hw, command.aql_index())];
                self.push_command(CommandHandle::Own(Arc::new(command)), s, own, before);
                self.check_refuses_after_failure(s, "a launch")
            }
            Err(error) => self.judge_call_error("launch", s, None, &error.into(), false, None),
        }
    }

    fn submit(&mut self, stream: u8, work: WorkChoice) -> Result<(), QueueFailure> {
        let Some(s) = self.live_stream(stream) else {
            return Ok(());
        };
        let queue = self.handle(s);
        let before = self.streams[s].model.required_now();
        let hw = self.streams[s].model.current();
        let from = self.ledger.write_index(hw);
        const SIX: [u64; 6] = [0; 6];
        let result = queue.submit(match work {
            WorkChoice::Empty => Work::Empty,
            WorkChoice::Marker => Work::Marker,
            WorkChoice::NoDependencies => Work::Wait(&[]),
            WorkChoice::TooManyDependencies => Work::Wait(&SIX),
            WorkChoice::EmptyWaitAny => Work::WaitAny(&[]),
        });
        self.note_published(s, hw, from);
        match result {
            Ok(command) => {
                let own = vec![(hw, command.aql_index())];
                self.push_command(CommandHandle::Own(Arc::new(command)), s, own, before);
                self.check_refuses_after_failure(s, "a submission")
            }
            Err(error) => {
                if work.refused() {
                    self.coverage.refusals += 1;
                }
                self.judge_call_error("submit", s, None, &error.into(), work.refused(), None)
            }
        }
    }

    fn submit_all(
        &mut self,
        stream: u8,
        parts: u8,
        refused_at: Option<u8>,
        gated: bool,
    ) -> Result<(), QueueFailure> {
        let Some(s) = self.live_stream(stream) else {
            return Ok(());
        };
        let queue = self.handle(s);
        let before = self.streams[s].model.required_now();
        let hw = self.streams[s].model.current();
        let parts = usize::from(parts.clamp(1, 4));
        const SIX: [u64; 6] = [0; 6];
        let empty = self.gpu.empty_kernel();
        let first = if gated {
            Work::Kernel(self.gate())
        } else {
            Work::Kernel(empty)
        };
        let mut works = vec![Work::Empty; parts];
        works[0] = first;
        let refused = refused_at.map(|k| usize::from(k) % parts);
        if let Some(k) = refused {
            works[k] = Work::Wait(&SIX);
        }
        let from = self.ledger.write_index(hw);
        let result = queue.submit_all(&works);
        self.note_published(s, hw, from);
        match result {
            Ok(command) => {
                let last = command.aql_index();
                let own = (0..parts as u64).map(|k| (hw, last - k)).collect();
                self.push_command(CommandHandle::Own(Arc::new(command)), s, own, before);
                self.check_refuses_after_failure(s, "a submission of several")
            }
            Err(error) => {
                if refused.is_some() {
                    self.coverage.refusals += 1;
                    if refused > Some(0) {
                        self.coverage.partial_refusals += 1;
                    }
                }
                self.judge_call_error(
                    "submit_all",
                    s,
                    None,
                    &error.into(),
                    refused.is_some(),
                    None,
                )
            }
        }
    }

    fn record(&mut self, stream: u8) -> Result<(), QueueFailure> {
        let Some(s) = self.live_stream(stream) else {
            return Ok(());
        };
        let queue = self.handle(s);
        let mut required = self.streams[s].model.required_now();
        let hw = self.streams[s].model.current();
        let from = self.ledger.write_index(hw);
        let result = queue.record_event();
        self.note_published(s, hw, from);
        match result {
            Ok(event) => {
                let own = (hw, event.aql_index().expect("a recorded event"));
                required.add(hw, own.1..own.1 + 1);
                self.events.push(EventSlot {
                    timed: event.is_timed(),
                    handle: Some(Arc::new(event)),
                    stream: s,
                    device: self.streams[s].model.device,
                    own,
                    required,
                    answered: None,
                });
                self.coverage.events += 1;
                if self.events.iter().filter(|e| e.handle.is_some()).count() > MAX_HANDLES
                    && let Some(old) = self.events.iter_mut().find(|e| e.handle.is_some())
                {
                    old.handle = None;
                }
                self.check_refuses_after_failure(s, "an event's record")
            }
            Err(error) => {
                self.judge_call_error("record event", s, None, &error.into(), false, None)
            }
        }
    }

    fn query_event(&mut self, event: u8) -> Result<(), QueueFailure> {
        let Some(e) = self.live_event(event) else {
            return Ok(());
        };
        let status = self.events[e].handle.as_ref().expect("live").query();
        self.judge_event_status(e, status)
    }

    fn sync_event(&mut self, event: u8) -> Result<(), QueueFailure> {
        let Some(e) = self.live_event(event) else {
            return Ok(());
        };
        let slot = &self.events[e];
        let handle = slot.handle.clone().expect("live");
        let call = Call {
            kind: WaitKind::EventSync,
            stream: slot.stream,
            device: slot.device,
            required: slot.required.clone(),
            evidence: slot.required.clone(),
            awaited: Some(vec![slot.own]),
            started_at: self.step,
        };
        self.start(call, move || Ok(handle.synchronize()?))
    }

    fn stamps(&mut self, event: u8, stop: u8) -> Result<(), QueueFailure> {
        let (Some(e), Some(f)) = (self.live_event(event), self.live_event(stop)) else {
            return Ok(());
        };
        let start = self.events[e].handle.clone().expect("live");
        let end = self.events[f].handle.clone().expect("live");
        let stamps = start.timestamps().map_err(Error::from);
        self.judge_stamps(e, &stamps)?;
        let elapsed = start.elapsed_to(&end).map_err(Error::from);
        match elapsed {
            Ok(duration) => {
                let subject = "elapsed time";
                let (re, rf) = (
                    self.events[e].required.clone(),
                    self.events[f].required.clone(),
                );
                self.judge_complete(subject, &re, &format!("event {e}"))?;
                self.judge_complete(subject, &rf, &format!("event {f}"))?;
                let (Some(a), Some(b)) = (self.end_of(e), self.end_of(f)) else {
                    return broke(
                        QueueCheck::Timestamps,
                        subject,
                        "an elapsed time of events whose packets have no end stamp".to_string(),
                    );
                };
                let expected = b.checked_sub(a).map(|units| {
                    self.gpu.timestamp_period() * u32::try_from(units).unwrap_or(u32::MAX)
                });
                if expected != Some(duration) {
                    return broke(
                        QueueCheck::Timestamps,
                        subject,
                        format!(
                            "event {e} to event {f}: {duration:?}, the truth says {expected:?} \
                             (ends {a} and {b})"
                        ),
                    );
                }
            }
            Err(Error::StopBeforeStart { ticks }) => {
                let (Some(a), Some(b)) = (self.end_of(e), self.end_of(f)) else {
                    return broke(
                        QueueCheck::Timestamps,
                        "elapsed time",
                        "stop before start for events that have not ended".to_string(),
                    );
                };
                if a.checked_sub(b) != Some(ticks) || ticks == 0 {
                    return broke(
                        QueueCheck::Timestamps,
                        "elapsed time",
                        format!("stop before start by {ticks}, the truth says ends {a} and {b}"),
                    );
                }
            }
            Err(Error::DifferentDevices) => {
                if self.events[e].device == self.events[f].device {
                    return broke(
                        QueueCheck::Unexpected,
                        "elapsed time",
                        "DifferentDevices for events of one device".to_string(),
                    );
                }
            }
            Err(error) => {
                let stop_stamps = end.timestamps().map_err(Error::from);
                self.judge_stamps(f, &stop_stamps)?;
                // The error is one of the two events' own.
                let explained = [&stamps, &stop_stamps]
                    .iter()
                    .any(|s| s.as_ref().err() == Some(&error));
                if !explained {
                    return broke(
                        QueueCheck::Unexpected,
                        "elapsed time",
                        format!(
                            "{error:?} where the events' timestamps say {stamps:?} and {stop_stamps:?}"
                        ),
                    );
                }
            }
        }
        Ok(())
    }

    /// The end stamp of event `e`'s packet, in the reported domain.
    fn end_of(&self, e: usize) -> Option<u64> {
        let (hw, index) = self.events[e].own;
        let truth = self.ledger.truth(hw, index)?;
        truth.end_ts.map(|tick| self.gpu.reported_time(tick))
    }

    fn judge_stamps(
        &mut self,
        e: usize,
        stamps: &Result<sigretire_tracker::Timestamps, Error>,
    ) -> Result<(), QueueFailure> {
        let subject = "event timestamps";
        let slot = &self.events[e];
        let (timed, required, own) = (slot.timed, slot.required.clone(), slot.own);
        match stamps {
            Ok(stamps) => {
                if !timed {
                    return broke(
                        QueueCheck::Unexpected,
                        subject,
                        "stamps of an untimed event",
                    );
                }
                self.judge_complete(subject, &required, &format!("event {e}"))?;
                let truth = self.ledger.truth(own.0, own.1);
                let expected = truth.and_then(|t| {
                    Some((
                        self.gpu.reported_time(t.start_ts?),
                        self.gpu.reported_time(t.end_ts?),
                    ))
                });
                if expected != Some((stamps.start, stamps.end)) {
                    return broke(
                        QueueCheck::Timestamps,
                        subject,
                        format!("event {e}: {stamps:?}, the truth of its packet: {truth:?}"),
                    );
                }
                Ok(())
            }
            Err(Error::NotTimed) if !timed => Ok(()),
            Err(Error::NotReady) if timed => Ok(()),
            Err(Error::EventFailed) if timed => {
                self.judge_failed(subject, &required, &format!("event {e}"))
            }
            Err(error) => broke(
                QueueCheck::Unexpected,
                subject,
                format!("event {e} (timed: {timed}): {error:?}"),
            ),
        }
    }

    fn command_status(&mut self, command: u8) -> Result<(), QueueFailure> {
        let Some(c) = self.live_command(command) else {
            return Ok(());
        };
        let status = self.commands[c]
            .handle
            .as_ref()
            .expect("live")
            .get()
            .status();
        self.judge_command_status(c, status)
    }

    fn wait_command(&mut self, command: u8) -> Result<(), QueueFailure> {
        let Some(c) = self.live_command(command) else {
            return Ok(());
        };
        let slot = &self.commands[c];
        let handle = slot.handle.clone().expect("live");
        let call = Call {
            kind: WaitKind::CommandWait,
            stream: slot.stream,
            device: slot.device,
            required: slot.required.clone(),
            evidence: slot.evidence.clone(),
            awaited: Some(slot.own.clone()),
            started_at: self.step,
        };
        self.start(call, move || Ok(handle.get().wait()?))
    }

    fn synchronize(&mut self, stream: u8, threads: u8) -> Result<(), QueueFailure> {
        let Some(s) = self.live_stream(stream) else {
            return Ok(());
        };
        let model = &self.streams[s].model;
        let required = model.required_now();
        let mut evidence = required.clone();
        let hw = model.current();
        evidence.add(hw, self.segment_start(s)..u64::MAX);
        for _ in 0..threads.clamp(1, 3) {
            let queue = self.handle(s);
            let call = Call {
                kind: WaitKind::Synchronize,
                stream: s,
                device: self.streams[s].model.device,
                required: required.clone(),
                evidence: evidence.clone(),
                awaited: None,
                started_at: self.step,
            };
            self.start(call, move || Ok(queue.synchronize()?))?;
        }
        Ok(())
    }

    fn query(&mut self, stream: u8) -> Result<(), QueueFailure> {
        let Some(s) = self.live_stream(stream) else {
            return Ok(());
        };
        let model = &self.streams[s].model;
        let required = model.required_now();
        let hw = model.current();
        let mut evidence = required.clone();
        evidence.add(hw, self.segment_start(s)..u64::MAX);
        match self.handle(s).query() {
            Ok(Status::Complete) => {
                self.judge_complete("queue query", &required, &format!("stream {s}"))
            }
            Ok(Status::Failed) => {
                self.judge_failed("queue query", &evidence, &format!("stream {s}"))?;
                self.note_told_failed(s);
                Ok(())
            }
            Ok(Status::Pending) => Ok(()),
            // Where nothing the layer published stands for the queue, a
            // query publishes a marker: it answers as a submission would.
            Err(error) => self.judge_call_error(
                "queue query",
                s,
                None,
                &error.into(),
                false,
                Some(&evidence),
            ),
        }
    }

    fn wait_events(&mut self, stream: u8, first: u8, count: u8) -> Result<(), QueueFailure> {
        let Some(s) = self.live_stream(stream) else {
            return Ok(());
        };
        let live: Vec<usize> = (0..self.events.len())
            .filter(|&e| self.events[e].handle.is_some())
            .collect();
        if live.is_empty() {
            return Ok(());
        }
        let picked: Vec<usize> = (0..usize::from(count.clamp(1, 7)))
            .map(|k| live[(usize::from(first) + k) % live.len()])
            .collect();
        let handles: Vec<Arc<Ev<G>>> = picked
            .iter()
            .map(|&e| self.events[e].handle.clone().expect("live"))
            .collect();
        let refs: Vec<&Ev<G>> = handles.iter().map(|h| &**h).collect();
        let mut dependencies = Required::default();
        let mut truly_complete = 0;
        for &e in &picked {
            let required = &self.events[e].required;
            dependencies.extend(required);
            truly_complete += usize::from(self.ledger.first_incomplete(required).is_none());
        }
        let before = self.streams[s].model.required_now();
        let hw = self.streams[s].model.current();
        let from = self.ledger.write_index(hw);
        let result = self.handle(s).wait_events(&refs);
        self.note_published(s, hw, from);
        drop(refs);
        let what = format!("a wait of stream {s} on events {picked:?}");
        self.cross_wait(
            s,
            None,
            hw,
            before,
            dependencies,
            truly_complete,
            result,
            what,
        )
    }

    fn wait_queue(&mut self, stream: u8, producer: u8) -> Result<(), QueueFailure> {
        let (Some(s), Some(p)) = (self.live_stream(stream), self.live_stream(producer)) else {
            return Ok(());
        };
        let dependencies = self.streams[p].model.required_now();
        let truly_complete = usize::from(self.ledger.first_incomplete(&dependencies).is_none());
        let before = self.streams[s].model.required_now();
        let hw = self.streams[s].model.current();
        let from = self.ledger.write_index(hw);
        let producer_hw = self.streams[p].model.current();
        let producer_from = self.ledger.write_index(producer_hw);
        let producer = self.handle(p);
        let result = self.handle(s).wait_queue(&producer);
        // The producer's marker, if it needed one, is its own work.
        self.note_published(p, producer_hw, producer_from);
        if p != s {
            self.note_published(s, hw, from);
        }
        let what = format!("a wait of stream {s} on stream {p}");
        self.cross_wait(
            s,
            Some(p),
            hw,
            before,
            dependencies,
            truly_complete,
            result,
            what,
        )
    }

    /// Judges a cross-queue wait's answer and records what the consumer
    /// now follows.
    #[allow(clippy::too_many_arguments)]
    fn cross_wait(
        &mut self,
        s: usize,
        producer: Option<usize>,
        hw: HwId,
        before: Required,
        dependencies: Required,
        truly_complete: usize,
        result: Result<CrossWait<Mem<G>>, WaitEventError>,
        what: String,
    ) -> Result<(), QueueFailure> {
        let subject = "cross-queue wait";
        self.coverage.cross_waits += 1;
        let wait = match result {
            Ok(wait) => wait,
            Err(error) => {
                return self.judge_call_error(
                    subject,
                    s,
                    producer,
                    &error.into(),
                    false,
                    Some(&dependencies),
                );
            }
        };
        if wait.elided() > truly_complete {
            return broke(
                QueueCheck::ElidedDependency,
                subject,
                format!(
                    "{what} elided {} dependencies, but only {truly_complete} had completed: {:?}",
                    wait.elided(),
                    self.ledger.first_incomplete(&dependencies)
                ),
            );
        }
        let wait = Arc::new(wait);
        let packets: Vec<(HwId, u64)> = wait
            .commands()
            .iter()
            .map(|c| (hw, c.aql_index()))
            .collect();
        if let Some(&last) = packets.last() {
            self.waits.push(WaitRecord {
                last_packet: last,
                dependencies: dependencies.clone(),
                what: what.clone(),
            });
        }
        // Each packet carries the barrier bit, so it follows the stream's
        // work; which dependencies an earlier packet names is the layer's
        // choice, but the last follows them all (through the packets
        // before it).
        let mut all = before.clone();
        all.extend(&dependencies);
        for (k, &packet) in packets.iter().enumerate() {
            let required = if k + 1 == packets.len() {
                all.clone()
            } else {
                before.clone()
            };
            self.push_command_explained(
                CommandHandle::InWait(wait.clone(), k),
                s,
                vec![packet],
                required,
                all.clone(),
            );
        }
        // Everything the stream publishes from now on follows the producers.
        self.streams[s].model.carried.extend(&dependencies);
        Ok(())
    }

    fn move_to(&mut self, stream: u8, to: MoveTarget) -> Result<(), QueueFailure> {
        let Some(s) = self.live_stream(stream) else {
            return Ok(());
        };
        let current = self.streams[s].model.current();
        let target = match to {
            MoveTarget::Fresh => None,
            MoveTarget::Back => self.streams[s]
                .model
                .segments
                .iter()
                .rev()
                .map(|seg| seg.hw)
                .find(|&hw| hw != current),
            MoveTarget::Join(other) => {
                let other = usize::from(other) % self.streams.len();
                Some(self.streams[other].model.current()).filter(|&hw| hw != current)
            }
        };
        let target = match target {
            Some(hw) => hw,
            None => {
                let queue = self.gpu.queue();
                self.ledger.add(queue)
            }
        };
        let left_at = self.ledger.write_index(current);
        let start = self.ledger.write_index(target);
        let before = self.streams[s].model.required_now();
        // A move pins the stream's newest packet on its queue (a marker
        // perhaps, not work of its own): a failure there fails the move.
        let mut evidence = before.clone();
        evidence.add(current, self.segment_start(s)..u64::MAX);
        let queue = self.ledger.queue(target).clone();
        match self.handle(s).move_to(queue) {
            Ok(()) => {
                self.streams[s].model.move_to(target, start, left_at);
                self.coverage.moves += 1;
                Ok(())
            }
            Err(error) => {
                self.judge_call_error("move", s, None, &error.into(), false, Some(&evidence))
            }
        }
    }

    fn foreign(&mut self, stream: u8, gated: bool, barrier: bool) -> Result<(), QueueFailure> {
        if self.streams.is_empty() {
            return Ok(());
        }
        let s = usize::from(stream) % self.streams.len();
        let hw = self.streams[s].model.current();
        let first = if gated {
            self.coverage.gated_foreign += 1;
            self.gate()
        } else {
            self.gpu.empty_kernel()
        };
        // Without the barrier bit, a second kernel that may run beside the
        // first (and, out of order, finish before it).
        let kernels = if barrier {
            vec![first]
        } else {
            vec![first, self.gpu.empty_kernel()]
        };
        let queue = self.ledger.queue(hw).clone();
        for kernel in kernels {
            let Ok(index) = queue.reserve() else {
                // A failed queue takes nothing.
                return Ok(());
            };
            self.ledger.note_foreign(hw, index);
            self.streams[s].model.own.add(hw, index..index + 1);
            let work = if kernel == 0 {
                Work::Empty
            } else {
                Work::Kernel(kernel)
            };
            if let Err(error) = queue.publish(Publication::unsignalled(index, barrier), work)
                && !self.ledger.has_failed(hw)
            {
                return broke(
                    QueueCheck::Unexpected,
                    "the runtime's own packet",
                    format!("the hardware queue refused it: {error}"),
                );
            }
            self.coverage.foreign_packets += 1;
        }
        Ok(())
    }

    fn gpu_step(&mut self, step: GpuStep) -> Result<(), QueueFailure> {
        match step {
            GpuStep::Launch { hw } => {
                let hw = self.hw(hw);
                let _ = self.gpu.launch(self.ledger.queue(hw));
            }
            GpuStep::Complete { hw, pick } => {
                let hw = self.hw(hw);
                if self.setup.out_of_order {
                    // Everything that can run at once runs, so any of it may
                    // finish first.
                    while self.gpu.launch(self.ledger.queue(hw)).is_ok() {}
                }
                let running = self.ledger.running(hw);
                if running.is_empty() {
                    return Ok(());
                }
                let index = if self.setup.out_of_order {
                    running[usize::from(pick) % running.len()]
                } else {
                    running[0]
                };
                if self.gpu.complete(self.ledger.queue(hw), index).is_ok() && index != running[0] {
                    self.coverage.out_of_order_completions += 1;
                }
            }
            GpuStep::Advance { hw } => {
                let hw = self.hw(hw);
                let _ = self.gpu.advance_read_index(self.ledger.queue(hw));
            }
            GpuStep::Run { hw } => {
                let hw = self.hw(hw);
                self.gpu.run(self.ledger.queue(hw));
            }
            GpuStep::RunAll => self.gpu.run_all(),
        }
        Ok(())
    }

    // --- Helpers ----------------------------------------------------------

    fn start(
        &mut self,
        call: Call,
        f: impl FnOnce() -> Result<(), Error> + Send + 'static,
    ) -> Result<(), QueueFailure> {
        let judge = self.ledger.judge(&call.required);
        let (kind, stream, started_at) = (call.kind, call.stream, call.started_at);
        // Whether the wait slept (or said it could not): the counters of
        // the queue whose wait it is.
        let slept = |driver: &Self| {
            driver.streams[stream]
                .handle
                .as_ref()
                .map(|h| h.stats().sleeping_waits + h.stats().wake_fallbacks)
        };
        let before = slept(self);
        self.waiters.push(Waiter::spawn(call, judge, f));
        self.coverage.helpers += 1;
        let settled = self.settle();
        // A wait that asks to sleep and blocks past its spin sleeps on a
        // wake signal, or counts that it polled instead. (A synchronize
        // through the completion thread waits on the thread's verdict.)
        let sleeps = matches!(self.setup.policy, Policy::Sleep | Policy::Hybrid)
            && matches!(kind, WaitKind::CommandWait | WaitKind::EventSync);
        if sleeps && settled == Settled::Blocked && before.is_some() {
            let begun = Instant::now();
            loop {
                let newest = self.waiters.last().expect("just started");
                if newest.has_ended() || slept(self) > before {
                    break;
                }
                if begun.elapsed() >= Duration::from_millis(500) {
                    return broke(
                        QueueCheck::PolicyIgnored,
                        kind.subject(),
                        format!(
                            "{} of stream {stream} started at step {started_at} under a \
                             sleeping policy blocked for 500 ms without sleeping or counting a \
                             fallback",
                            kind.subject()
                        ),
                    );
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        Ok(())
    }

    /// What changes while helpers publish or begin to wait: every queue's
    /// write index and the counters of every stream's calls.
    fn fingerprint(&self) -> Vec<u64> {
        let mut print: Vec<u64> = (0..self.ledger.len())
            .map(|hw| self.ledger.write_index(hw))
            .collect();
        for stream in &self.streams {
            if let Some(handle) = &stream.handle {
                let s = handle.stats();
                print.extend([
                    s.commands,
                    s.markers,
                    s.shared_completions,
                    s.cpu_waits,
                    s.cpu_waits_in_progress,
                    s.marker_joins,
                    s.syncs_without_lock,
                    s.syncs_inline,
                    s.syncs_by_handler,
                    s.event_syncs_without_lock,
                    s.sleeping_waits,
                    s.wake_fallbacks,
                    s.batches_completed,
                    s.state_resets,
                    s.state_resets_skipped,
                    s.device_error_returns,
                ]);
            }
        }
        print
    }

    /// Lets a new helper reach its wait (or return) before the driver goes
    /// on, so its publications land where its call was made: until it
    /// returned, or it started and nothing it could change changed for a
    /// while.
    fn settle(&mut self) -> Settled {
        let begun = Instant::now();
        let mut last = self.fingerprint();
        let mut stable_since = Instant::now();
        loop {
            let newest = self.waiters.last().expect("just started");
            if newest.has_ended() {
                return Settled::Ended;
            }
            std::thread::sleep(Duration::from_micros(50));
            let print = self.fingerprint();
            let stable = stable_since.elapsed() >= Duration::from_micros(400);
            if print != last {
                last = print;
                stable_since = Instant::now();
            } else if newest.has_started() && stable {
                self.coverage.blocked_helpers += 1;
                return Settled::Blocked;
            }
            if begun.elapsed() >= Duration::from_millis(50) {
                return Settled::Unknown;
            }
        }
    }

    /// Judges every helper whose call returned.
    fn judge_ended(&mut self) -> Result<(), QueueFailure> {
        let mut k = 0;
        while k < self.waiters.len() {
            if !self.waiters[k].has_ended() {
                k += 1;
                continue;
            }
            let mut waiter = self.waiters.remove(k);
            let ended = waiter.take_end().expect("ended");
            self.ledger.refresh();
            self.judge_wait(&waiter, ended)?;
        }
        Ok(())
    }

    fn judge_wait(&mut self, waiter: &Waiter, ended: Ended) -> Result<(), QueueFailure> {
        let subject = waiter.kind.subject();
        let what = format!(
            "{subject} of stream {} started at step {}",
            waiter.stream, waiter.started_at
        );
        if let Err(Error::QueueFailed { queue }) = &ended.result {
            self.note_named_failed(*queue);
        }
        match &ended.result {
            Ok(()) => {
                if let Some((hw, index)) = ended.incomplete_at_return {
                    return broke(
                        QueueCheck::EarlyCompletion,
                        subject,
                        format!(
                            "{what} returned Ok while packet {index} of hardware queue {hw} had \
                             not completed: {:?}",
                            self.ledger.truth(hw, index)
                        ),
                    );
                }
                self.judge_complete(subject, &waiter.required, &what)
            }
            // A failed queue refuses a synchronize's marker, naming itself,
            // whatever failed since the stream's current segment began.
            Err(Error::QueueFailed { queue })
                if waiter.kind == WaitKind::Synchronize
                    && self.names_a_failed_stream(*queue, waiter.stream, None) =>
            {
                Ok(())
            }
            Err(Error::QueueFailed { .. }) => self.judge_failed(subject, &waiter.evidence, &what),
            // A backend whose failed queue refuses new packets (ROCr)
            // refuses the marker.
            Err(Error::Queue(QueueError::Failed(_))) if self.stream_failed(waiter.stream) => Ok(()),
            Err(error @ (Error::DeviceError { .. } | Error::Aborted { .. })) => {
                self.coverage.early_returns += 1;
                self.judge_device_error(subject, waiter.device, error, &what)
            }
            Err(Error::TimedOut(after)) => broke(
                QueueCheck::Hang,
                subject,
                format!("{what} timed out after {after:?}"),
            ),
            Err(error) => broke(
                QueueCheck::Unexpected,
                subject,
                format!("{what} returned {error:?}"),
            ),
        }
    }

    /// Whether `waiter` must return now, and which queues the driver runs
    /// meanwhile (its wake packets run there).
    fn must_return(&self, waiter: &Waiter) -> Option<Vec<HwId>> {
        let model = &self.streams[waiter.stream].model;
        if self.device_error(waiter.device) == Some(true) {
            // Waits return early in the error state, with no help from the
            // GPU.
            return Some(Vec::new());
        }
        let queues = model.queues();
        if queues.iter().all(|&hw| self.ledger.idle(hw)) {
            return Some(queues);
        }
        if let Some(awaited) = &waiter.awaited
            && awaited.iter().all(|&(hw, index)| {
                self.ledger
                    .truth(hw, index)
                    .is_some_and(|t| t.published && t.is_final())
            })
        {
            return Some(queues);
        }
        None
    }

    /// Holds every waiter that must return to the bound.
    fn check_liveness(&mut self) -> Result<(), QueueFailure> {
        for k in 0..self.waiters.len() {
            let Some(queues) = self.must_return(&self.waiters[k]) else {
                continue;
            };
            if self.waiters[k].has_ended() {
                continue;
            }
            self.coverage.liveness_claims += 1;
            let begun = Instant::now();
            while !self.waiters[k].has_ended() {
                if begun.elapsed() >= self.bound {
                    self.ledger.refresh();
                    let waiter = &self.waiters[k];
                    let open: Vec<_> = self.streams[waiter.stream]
                        .model
                        .queues()
                        .into_iter()
                        .map(|hw| (hw, self.ledger.open(hw)))
                        .collect();
                    return broke(
                        QueueCheck::Hang,
                        waiter.kind.subject(),
                        format!(
                            "{} of stream {} started at step {} did not return within {:?} \
                             although it had to (its device is in the error state: {:?}; its \
                             queues {queues:?} idle or its own packets {:?} final; still open on \
                             its queues: {open:?})",
                            waiter.kind.subject(),
                            waiter.stream,
                            waiter.started_at,
                            self.bound,
                            self.device_error(waiter.device),
                            waiter.awaited
                        ),
                    );
                }
                for &hw in &queues {
                    self.gpu.run(self.ledger.queue(hw));
                }
                std::thread::sleep(Duration::from_micros(100));
            }
            self.ledger.refresh();
        }
        self.judge_ended()
    }

    // --- Checks after every step ----------------------------------------------

    fn check_step(&mut self) -> Result<(), QueueFailure> {
        self.ledger.refresh();
        self.check_machine()?;
        self.check_device_states()?;
        self.judge_ended()?;
        self.check_waits_in_order()?;
        self.check_released()?;
        self.check_liveness()?;
        self.check_machine()
    }

    fn check_machine(&self) -> Result<(), QueueFailure> {
        match self.gpu.violations().first() {
            None => Ok(()),
            Some(violation) => broke(
                QueueCheck::Machine(violation.check),
                violation.subject,
                violation.text.clone(),
            ),
        }
    }

    /// A cross-queue wait's last packet passed: the producers' work must
    /// have completed (the packets wait on it on the GPU).
    fn check_waits_in_order(&self) -> Result<(), QueueFailure> {
        for wait in &self.waits {
            let (hw, index) = wait.last_packet;
            let passed = self.ledger.truth(hw, index).is_some_and(|t| t.completed);
            if passed && let Some((p, i)) = self.ledger.first_incomplete(&wait.dependencies) {
                return broke(
                    QueueCheck::ElidedDependency,
                    "cross-queue wait",
                    format!(
                        "the last packet of {} passed while packet {i} of hardware queue {p} \
                         had not completed: {:?}",
                        wait.what,
                        self.ledger.truth(p, i)
                    ),
                );
            }
        }
        Ok(())
    }

    /// Commands whose batch was completed answer their settled status
    /// without a load: judge every one.
    fn check_released(&mut self) -> Result<(), QueueFailure> {
        for c in 0..self.commands.len() {
            let Some(handle) = &self.commands[c].handle else {
                continue;
            };
            let command = handle.get();
            if command.is_released() {
                let status = command.status();
                self.judge_command_status(c, status)?;
            }
        }
        Ok(())
    }

    // --- The end ------------------------------------------------------------

    /// Releases every gate, runs the machine to the end, holds every waiter
    /// to the bound, judges every handle's final answer, synchronizes every
    /// stream, lets go of everything and checks that nothing was left
    /// behind, the machine's own teardown last.
    pub fn finish(mut self) -> Result<QueueCoverage, QueueFailure> {
        let step = self.step;
        let at_step = |mut failure: QueueFailure| {
            failure.step = step;
            failure
        };
        if let Err(failure) = self.finish_checks() {
            self.abandon();
            return Err(at_step(failure));
        }
        let mut coverage = self.reached.unwrap_or(self.coverage);
        coverage.relay_wakes += self.gpu.relay_wakes();
        let Self {
            gpu,
            ledger,
            devices,
            streams,
            events,
            commands,
            waits,
            waiters,
            gates,
            ..
        } = self;
        drop((
            waits, events, commands, streams, waiters, devices, gates, ledger,
        ));
        gpu.tear_down().map_err(|detail| {
            at_step(QueueFailure {
                check: QueueCheck::Leak,
                subject: "the machine",
                step,
                detail,
            })
        })?;
        Ok(coverage)
    }

    /// Ends a scenario that failed: releases every gate and runs the
    /// machine for a while so blocked helpers return; the rest are left to
    /// their wait's timeout.
    pub fn abandon(mut self) {
        for (release, set) in &mut self.gates {
            if !*set {
                release();
                *set = true;
            }
        }
        let begun = Instant::now();
        while self.waiters.iter().any(|w| !w.has_ended())
            && begun.elapsed() < Duration::from_millis(500)
        {
            self.gpu.run_all();
            std::thread::sleep(Duration::from_micros(200));
        }
        for mut waiter in self.waiters.drain(..) {
            if waiter.take_end().is_none() {
                waiter.abandon();
            }
        }
    }

    fn run_to_the_end(&mut self) -> Result<(), QueueFailure> {
        for (release, set) in &mut self.gates {
            if !*set {
                release();
                *set = true;
            }
        }
        let begun = Instant::now();
        loop {
            self.gpu.run_all();
            self.ledger.refresh();
            // A violation explains what hangs after it.
            self.check_machine()?;
            self.judge_ended()?;
            let busy = (0..self.ledger.len()).find(|&hw| !self.ledger.idle(hw));
            if busy.is_none() && self.waiters.is_empty() {
                return Ok(());
            }
            if begun.elapsed() >= self.bound {
                let waiters: Vec<String> = self
                    .waiters
                    .iter()
                    .map(|w| {
                        format!(
                            "{} of stream {} started at step {}",
                            w.kind.subject(),
                            w.stream,
                            w.started_at
                        )
                    })
                    .collect();
                let stuck = busy.map(|hw| self.ledger.open(hw));
                return broke(
                    QueueCheck::Hang,
                    "the end",
                    format!(
                        "with every gate released, after {:?}: hardware queue {busy:?} is not \
                         idle ({stuck:?}), waiters still blocked: {waiters:?}",
                        self.bound
                    ),
                );
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    fn finish_checks(&mut self) -> Result<(), QueueFailure> {
        self.ledger.refresh();
        self.check_machine()?;
        self.run_to_the_end()?;
        self.check_waits_in_order()?;
        // Every handle's final answer: the truth, and no longer behind it.
        for e in 0..self.events.len() {
            let Some(event) = self.events[e].handle.clone() else {
                continue;
            };
            let status = event.query();
            self.judge_event_status(e, status)?;
            let required = self.events[e].required.clone();
            if status == Status::Pending && self.ledger.first_incomplete(&required).is_none() {
                return broke(
                    QueueCheck::Hang,
                    "event query",
                    format!("event {e} stays pending after its work completed"),
                );
            }
            let stamps = event.timestamps().map_err(Error::from);
            self.judge_stamps(e, &stamps)?;
        }
        for c in 0..self.commands.len() {
            let Some(handle) = self.commands[c].handle.clone() else {
                continue;
            };
            let status = handle.get().status();
            self.judge_command_status(c, status)?;
            let required = self.commands[c].required.clone();
            if status == CommandStatus::Pending && self.ledger.first_incomplete(&required).is_none()
            {
                return broke(
                    QueueCheck::Hang,
                    "command status",
                    format!("command {c} stays pending after its work completed"),
                );
            }
        }
        // Every stream synchronizes (on helpers, the machine idle).
        self.synchronize_all()?;
        // Let go of every handle but the streams', then drain once more.
        self.reached = Some(self.coverage());
        for slot in &mut self.events {
            slot.handle = None;
        }
        for slot in &mut self.commands {
            slot.handle = None;
        }
        self.synchronize_all()?;
        // One more round trip on every healthy stream: a synchronize that
        // finds nothing new returns without the lock, and what the layer
        // lets go of only at its next publication or drain (a wake
        // packet's pin, a move's order wait) goes then.
        self.round_trip()?;
        self.check_census()?;
        self.tear_down()
    }

    /// A launch on every healthy stream, then a synchronize of all.
    fn round_trip(&mut self) -> Result<(), QueueFailure> {
        for s in 0..self.streams.len() {
            let Some(handle) = self.streams[s].handle.clone() else {
                continue;
            };
            if self.device_error(self.streams[s].model.device) != Some(false)
                || self.stream_failed(s)
            {
                continue;
            }
            let hw = self.streams[s].model.current();
            let from = self.ledger.write_index(hw);
            let result = handle.launch_empty();
            self.note_published(s, hw, from);
            if let Err(error) = result {
                return broke(
                    QueueCheck::Unexpected,
                    "the end",
                    format!("stream {s}: a launch on a healthy stream failed: {error:?}"),
                );
            }
        }
        self.synchronize_all()
    }

    fn synchronize_all(&mut self) -> Result<(), QueueFailure> {
        for s in 0..self.streams.len() {
            if self.streams[s].handle.is_none() {
                continue;
            }
            let model = &self.streams[s].model;
            let required = model.required_now();
            let mut evidence = required.clone();
            let hw = model.current();
            evidence.add(hw, self.segment_start(s)..u64::MAX);
            let queue = self.handle(s);
            let call = Call {
                kind: WaitKind::Synchronize,
                stream: s,
                device: model.device,
                required,
                evidence,
                awaited: None,
                started_at: self.step,
            };
            let judge = self.ledger.judge(&call.required);
            self.waiters
                .push(Waiter::spawn(call, judge, move || Ok(queue.synchronize()?)));
        }
        self.run_to_the_end()
    }

    /// Every live stream's tracker accounts for every signal; one whose
    /// device never failed holds nothing once drained.
    fn check_census(&mut self) -> Result<(), QueueFailure> {
        let begun = Instant::now();
        while self.streams.iter().any(|s| {
            s.handle
                .as_ref()
                .is_some_and(|h| h.batches_in_completion() > 0)
        }) {
            if begun.elapsed() >= self.bound {
                return broke(
                    QueueCheck::Leak,
                    "the end",
                    "the completion thread still holds batches after every stream synchronized",
                );
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        // Streams whose handle was dropped go once their events, commands
        // and batches did; their pins on other streams' signals with them.
        for d in 0..self.devices.len() {
            let Some(device) = &self.devices[d].handle else {
                continue;
            };
            let dropped = self
                .streams
                .iter()
                .filter(|s| s.model.device == d && s.handle.is_none())
                .count() as u64;
            while device.stats().queue_teardowns < dropped {
                if begun.elapsed() >= self.bound {
                    return broke(
                        QueueCheck::Leak,
                        "teardown",
                        format!(
                            "device {d}: {} of the {dropped} queues whose handles were dropped \
                             torn down once their events and commands were",
                            device.stats().queue_teardowns
                        ),
                    );
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        // Every stream retires what it can first: a failed stream's uses
        // (a cross-queue wait among them) let go of the pins they hold on
        // a healthy stream's signals only as they retire, and a failed
        // queue no longer submits (it is not failed with its device any
        // more, which hid those pins).
        for slot in &self.streams {
            if let Some(handle) = &slot.handle {
                handle.with_tracker(|t| {
                    t.poll();
                    t.reclaim();
                });
            }
        }
        for s in 0..self.streams.len() {
            let Some(handle) = self.streams[s].handle.clone() else {
                continue;
            };
            let device = self.streams[s].model.device;
            // One probe (a proof the layer could have made itself) and a
            // reclaim: what a later submission would retire.
            let census = handle.with_tracker(|t| {
                t.poll();
                t.reclaim();
                t.census()
            });
            let created = handle.with_tracker(|t| t.stats().signals_created) as usize;
            if !census.is_balanced() || created != census.created {
                return broke(
                    QueueCheck::Leak,
                    "census: unbalanced",
                    format!(
                        "stream {s}: a signal is unaccounted for: {census:?}, {created} created"
                    ),
                );
            }
            let failed = self.streams[s]
                .model
                .queues()
                .iter()
                .any(|&hw| self.ledger.has_failed(hw));
            if self.device_error(device) == Some(false) && !failed {
                // The most telling first: uses never retired, then pins
                // kept, then signals kept parked.
                let held = if census.in_flight > 0 {
                    Some("census: uses in flight")
                } else if census.pins > 0 {
                    Some("census: pins kept")
                } else if census.parked > 0 {
                    Some("census: signals parked")
                } else {
                    None
                };
                if let Some(subject) = held {
                    return broke(
                        QueueCheck::Leak,
                        subject,
                        format!(
                            "stream {s} synchronized with nothing held, yet its tracker holds \
                             {census:?} (moves: {})",
                            self.streams[s].model.segments.len() - 1
                        ),
                    );
                }
            }
        }
        Ok(())
    }

    fn tear_down(&mut self) -> Result<(), QueueFailure> {
        self.waits.clear();
        self.events.clear();
        self.commands.clear();
        for slot in &mut self.streams {
            slot.handle = None;
        }
        // Queues go when their last reference does (the completion thread
        // hands its own to a teardown thread): wait for every one.
        let begun = Instant::now();
        for d in 0..self.devices.len() {
            let Some(device) = &self.devices[d].handle else {
                continue;
            };
            // The default queue lives as long as the device.
            let expected = self.devices[d].queues - 1;
            while device.stats().queue_teardowns < expected {
                // A queue let go of with work pending goes once that work
                // ran: the machine runs meanwhile.
                self.gpu.run_all();
                if begun.elapsed() >= self.bound {
                    return broke(
                        QueueCheck::Leak,
                        "teardown",
                        format!(
                            "device {d}: {} of {expected} queues torn down once every handle \
                             was dropped",
                            device.stats().queue_teardowns
                        ),
                    );
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            let stats = device.stats();
            if stats.teardowns_on_completion_thread > 0 || stats.teardowns_leaked > 0 {
                return broke(
                    QueueCheck::Leak,
                    "teardown",
                    format!("device {d}: {stats:?}"),
                );
            }
        }
        for slot in &mut self.devices {
            slot.handle = None;
        }
        self.check_machine()
    }
}
