//! Loom models of the queue layer's concurrent protocols, run with
//! `RUSTFLAGS="--cfg sigretire_loom" cargo test -p sigretire-queue --release --test loom_queue`
//! (a separate target dir keeps `--cfg sigretire_loom` from invalidating the normal
//! build; `.ci/loom` runs them at `LOOM_MAX_PREEMPTIONS=2`):
//!
//! - CPU wait outside the lock versus concurrent submit;
//! - the completion thread versus the owner dropping the device;
//! - a second synchronize joining the marker in flight (and the owner's
//!   wait on the marker's condition variable);
//! - a command's status versus the completion thread settling its batch.
//!
//! They run the real queue code on the tracker's host-memory backend
//! (`sigretire_tracker::backend::HostMemory`, loom-aware); only the hardware queue is a small
//! stand-in, and the "GPU" completes published packets in order: on a model
//! thread, or in one model as the completion thread polls (see `Memory`).
#![cfg(sigretire_loom)]

use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use sigretire_queue::{BatchLimits, Command, CommandStatus, Device, DeviceConfig, QueueConfig};
use sigretire_tracker::{
    Config, Placement, RetiringTracker, Status, Ticket, TimestampClock, Timestamps, Tracker,
    WaitPolicy, Work,
    backend::{
        AllocError, HardwareQueue, HostMemory, Publication, QueueError, QueueView, SignalMemory,
    },
};
use std::time::Duration;

/// A hardware queue: published packets' completion handles, in order.
struct Ring {
    memory: Arc<HostMemory>,
    write: AtomicU64,
    read: AtomicU64,
    /// Packets before this index completed (recorded before the signal's
    /// decrement, which is what the host can observe).
    completed: AtomicU64,
    /// `Some(handle)` once published (handle 0: no completion signal).
    packets: Mutex<Vec<Option<u64>>>,
}

#[derive(Clone)]
struct LoomQueue(Arc<Ring>);

impl QueueView for LoomQueue {
    fn read_index(&self) -> u64 {
        self.0.read.load(Ordering::Acquire)
    }

    fn ring_in_device_memory(&self) -> bool {
        true
    }
}

impl HardwareQueue for LoomQueue {
    fn reserve(&self) -> Result<u64, QueueError> {
        let index = self.0.write.fetch_add(1, Ordering::AcqRel);
        let mut packets = self.0.packets.lock().unwrap();
        if packets.len() <= index as usize {
            packets.resize(index as usize + 1, None);
        }
        Ok(index)
    }

    fn publish(&self, publication: Publication, _: Work<'_>) -> Result<(), QueueError> {
        let index = publication.index() as usize;
        self.0.packets.lock().unwrap()[index] = Some(publication.completion());
        Ok(())
    }

    /// Nobody else reserves slots here: from the write index.
    fn foreign_work_after(&self, newest: u64) -> bool {
        self.0.write.load(Ordering::Acquire) != newest.wrapping_add(1)
    }
}

impl LoomQueue {
    /// The GPU completes the next packet if it is published; true if it did.
    fn complete_next(&self) -> bool {
        let next = self.0.read.load(Ordering::Acquire);
        let handle = match self.0.packets.lock().unwrap().get(next as usize) {
            Some(Some(handle)) => *handle,
            _ => return false,
        };
        self.0.completed.store(next + 1, Ordering::Release);
        if handle != 0 {
            self.0.memory.complete(handle);
        }
        self.0.read.store(next + 1, Ordering::Release);
        true
    }

    fn completed(&self, index: u64) -> bool {
        self.0.completed.load(Ordering::Acquire) > index
    }

    /// One GPU step, run by the completion thread as it polls a signal
    /// (see [`Memory`]): completes the next packet if it is published.
    fn step(&self) {
        self.complete_next();
    }

    /// The GPU: completes packets in order until `count` have completed.
    fn run_until(&self, count: u64) {
        while self.0.read.load(Ordering::Acquire) < count {
            if !self.complete_next() {
                loom::thread::yield_now();
            }
        }
    }
}

/// The thread name the crate gives its completion thread (`handler.rs`).
const COMPLETION_THREAD: &str = "fences-completion";

fn on_completion_thread() -> bool {
    loom::thread::current().name() == Some(COMPLETION_THREAD)
}

/// Fails the model if a teardown runs on the completion thread (not while
/// unwinding from an earlier failure: a second panic would abort).
fn check_not_on_completion_thread(what: &str) {
    if !std::thread::panicking() {
        assert!(
            !on_completion_thread(),
            "{what} was torn down on the completion thread"
        );
    }
}

/// How often the queue and its signal memory were torn down.
#[derive(Default)]
struct Teardowns {
    queues: AtomicUsize,
    memories: AtomicUsize,
    /// The queue was torn down on a teardown thread.
    elsewhere: AtomicBool,
}

/// The hardware queue as the queue layer owns it: its last clone (the
/// tracker's, the layer's own for its lock-free answers) goes exactly when
/// the queue (`QueueCore`) is torn down.
#[derive(Clone)]
struct OwnedQueue {
    hw: LoomQueue,
    /// Held for its drop only.
    _owner: Arc<QueueOwner>,
}

/// Counts the teardown of an [`OwnedQueue`] as its last clone goes.
struct QueueOwner {
    teardowns: Arc<Teardowns>,
}

impl QueueView for OwnedQueue {
    fn read_index(&self) -> u64 {
        self.hw.read_index()
    }

    fn ring_in_device_memory(&self) -> bool {
        self.hw.ring_in_device_memory()
    }
}

impl HardwareQueue for OwnedQueue {
    fn reserve(&self) -> Result<u64, QueueError> {
        self.hw.reserve()
    }

    fn publish(&self, publication: Publication, work: Work<'_>) -> Result<(), QueueError> {
        self.hw.publish(publication, work)
    }

    fn foreign_work_after(&self, newest: u64) -> bool {
        self.hw.foreign_work_after(newest)
    }
}

impl Drop for QueueOwner {
    fn drop(&mut self) {
        check_not_on_completion_thread("a queue");
        if loom::thread::current().name() == Some("fences-teardown") {
            self.teardowns.elsewhere.store(true, Ordering::Release);
        }
        self.teardowns.queues.fetch_add(1, Ordering::AcqRel);
    }
}

/// The signal memory as the tracker's shared state owns it: dropped when
/// the last holder of the signals (tracker, waiter, signal reference) is.
///
/// With `gpu` set, every load of a signal by the completion thread first
/// runs a GPU step: the GPU advances as that thread polls, with no thread
/// of its own. A model with two threads waiting on the GPU at once needs
/// this: two spinning threads waiting for a third give loom unbounded
/// schedules (it may switch between spinners at every yield for free),
/// while a spinner that waits for one that makes progress itself does not.
struct Memory {
    host: Arc<HostMemory>,
    teardowns: Arc<Teardowns>,
    gpu: Option<LoomQueue>,
}

impl SignalMemory for Memory {
    type Signal = usize;

    fn allocate(
        &self,
        count: usize,
        placement: Placement,
        out: &mut Vec<(usize, Placement)>,
    ) -> Result<(), AllocError> {
        self.host.allocate(count, placement, out)
    }

    unsafe fn load(&self, signal: usize) -> i64 {
        if let Some(gpu) = &self.gpu
            && on_completion_thread()
        {
            gpu.step();
        }
        // SAFETY: forwarded caller guarantee.
        unsafe { self.host.load(signal) }
    }

    unsafe fn store(&self, signal: usize, value: i64) {
        // SAFETY: forwarded caller guarantee.
        unsafe { self.host.store(signal, value) }
    }

    fn store_fence(&self) {}

    fn hdp_flush(&self) {}

    unsafe fn timestamps(&self, signal: usize) -> Option<Timestamps> {
        // SAFETY: forwarded caller guarantee.
        unsafe { self.host.timestamps(signal) }
    }

    fn timestamp_clock(&self) -> TimestampClock {
        self.host.timestamp_clock()
    }

    fn packet_handle(&self, signal: usize) -> u64 {
        self.host.packet_handle(signal)
    }

    fn shares_signals_with(&self, other: &Self) -> bool {
        core::ptr::eq(self, other)
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        check_not_on_completion_thread("signal memory");
        self.teardowns.memories.fetch_add(1, Ordering::AcqRel);
    }
}

type LoomTracker = RetiringTracker<Memory, OwnedQueue>;

/// A device whose default queue runs on a fresh [`LoomQueue`]; with
/// `gpu_on_poll`, signal loads drive the GPU (see [`Memory`]).
fn device(
    config: QueueConfig,
    gpu_on_poll: bool,
) -> (Device<LoomTracker>, LoomQueue, Arc<Teardowns>) {
    let host = Arc::new(HostMemory::new(6));
    let teardowns = Arc::new(Teardowns::default());
    let hw = LoomQueue(Arc::new(Ring {
        memory: host.clone(),
        write: AtomicU64::new(0),
        read: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        packets: Mutex::new(Vec::new()),
    }));
    let memory = Arc::new(Memory {
        host: host.clone(),
        teardowns: teardowns.clone(),
        gpu: gpu_on_poll.then(|| hw.clone()),
    });
    let owned = OwnedQueue {
        hw: hw.clone(),
        _owner: Arc::new(QueueOwner {
            teardowns: teardowns.clone(),
        }),
    };
    let tracker = RetiringTracker::new(
        memory,
        owned,
        Config {
            initial_size: 4,
            growth_limit: 1,
            refill_batch: 1,
            ..Config::default()
        },
    )
    .unwrap();
    let config = QueueConfig {
        // Every poll of a wait is a loom yield (the tracker's spin phase).
        wait_policy: WaitPolicy {
            spin: Duration::from_secs(3600),
            device_spin: Duration::from_secs(3600),
            yield_for: Duration::ZERO,
            max_sleep: Duration::ZERO,
            interrupt: false,
            hybrid: None,
        },
        error_check_interval: Duration::from_secs(3600),
        ..config
    };
    let device = Device::new(DeviceConfig::default(), tracker, config).unwrap();
    (device, hw, teardowns)
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = builder.preemption_bound.or(Some(2));
    builder.check(f);
}

/// Synchronize waits for its marker outside the lock while another thread
/// submits: synchronize returns only after the GPU completed everything
/// before its marker, the queue-state reset (a drain) never retires the
/// concurrent submission early, and the submission never waits for the GPU.
#[test]
fn cpu_wait_outside_the_lock_versus_concurrent_submit() {
    model(|| {
        let (device, hw, _) = device(QueueConfig::default(), false);
        let queue = device.default_queue().clone();
        let first = queue.launch_empty().unwrap();
        let submitted: Arc<Mutex<Option<(Ticket, u64)>>> = Arc::new(Mutex::new(None));
        let done = Arc::new(AtomicBool::new(false));

        let syncing = {
            let (queue, hw, submitted, done) =
                (queue.clone(), hw.clone(), submitted.clone(), done.clone());
            loom::thread::spawn(move || {
                queue.synchronize().unwrap();
                assert!(hw.completed(first.aql_index()), "returned before the GPU");
                // Whatever the reset did, it did not retire work the GPU has
                // not completed.
                let concurrent = *submitted.lock().unwrap();
                if let Some((ticket, index)) = concurrent {
                    let known = queue.with_tracker(|t| t.known_status(&ticket).unwrap());
                    if known == Some(Status::Complete) {
                        assert!(hw.completed(index), "a submission retired early");
                    }
                }
                done.store(true, Ordering::Release);
            })
        };
        let submitting = {
            let (queue, submitted) = (queue.clone(), submitted.clone());
            loom::thread::spawn(move || {
                let command = queue.launch_empty().unwrap();
                *submitted.lock().unwrap() = Some((command.ticket(), command.aql_index()));
            })
        };
        // The GPU: complete published packets in order until synchronize
        // returned, then the rest.
        while !done.load(Ordering::Acquire) {
            if !hw.complete_next() {
                loom::thread::yield_now();
            }
        }
        submitting.join().unwrap();
        syncing.join().unwrap();
        while hw.complete_next() {}
        assert_eq!(queue.query().unwrap(), Status::Complete);
    });
}

/// Executions of [`completion_thread_versus_dropping_the_device`] in which
/// the completion thread let go of the queue last (the model must reach it).
static TEARDOWN_THREAD_SEEN: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// The completion thread finishes a closed batch (drops the fence's signal
/// reference, then its queue reference) while the owner drops the device
/// and with it the last queue handle. Whoever lets go last, neither the
/// queue nor its signal memory is torn down on the completion thread (the
/// signal reference goes first, while the queue keeps the memory alive; the
/// queue goes to a teardown thread), each is torn down exactly once, and
/// nothing leaks (loom checks every `Arc` is freed).
#[test]
fn completion_thread_versus_dropping_the_device() {
    model(|| {
        let config = QueueConfig {
            // The first command closes its batch: a job for the completion thread.
            batch_limits: BatchLimits {
                host_signals: 1,
                device_signals: 1,
            },
            ..QueueConfig::default()
        };
        let (device, hw, teardowns) = device(config, false);
        drop(device.default_queue().launch_empty().unwrap());
        assert_eq!(device.default_queue().batches_in_completion(), 1);

        let gpu = {
            let hw = hw.clone();
            loom::thread::spawn(move || hw.run_until(1))
        };
        // The owner lets go of the device (and its default queue) while the
        // job may still be pending, finishing, or done.
        drop(device);
        gpu.join().unwrap();
        // A last handle dropped while the launch may run publishes a marker
        // the completion thread holds the queue for: the GPU runs it.
        while hw.complete_next() {}
        // The teardown may run on a detached teardown thread (the queue's
        // last clone and the signal memory go one after the other there).
        while teardowns.memories.load(Ordering::Acquire) == 0
            || teardowns.queues.load(Ordering::Acquire) == 0
        {
            loom::thread::yield_now();
        }
        assert_eq!(teardowns.queues.load(Ordering::Acquire), 1);
        assert_eq!(teardowns.memories.load(Ordering::Acquire), 1);
        if teardowns.elsewhere.load(Ordering::Acquire) {
            TEARDOWN_THREAD_SEEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });
    assert!(
        TEARDOWN_THREAD_SEEN.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "the completion thread never let go of the queue last"
    );
}

/// Executions of [`second_synchronize_joins_the_marker_in_flight`] in which
/// one synchronize joined the other's marker (the model must reach it).
static JOINS_SEEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Two threads synchronize the same queue; every synchronize marker goes to
/// the completion thread (`cpu_sync_batch: 0`), so the marker's owner waits
/// on the marker's `finished` flag and condition variable, and the other
/// thread, finding the marker in flight, joins it (waits on its signal).
/// Each returns only after the work before the marker completed, the
/// marker's batch is released, and no wakeup is lost: a lost notification
/// leaves the owner blocked, which loom reports as a deadlock.
#[test]
fn second_synchronize_joins_the_marker_in_flight() {
    model(|| {
        let config = QueueConfig {
            cpu_sync_batch: 0,
            ..QueueConfig::default()
        };
        // The GPU advances as the completion thread polls the marker.
        let (device, hw, _) = device(config, true);
        let queue = device.default_queue().clone();
        let command = Arc::new(queue.launch_empty().unwrap());

        let synchronize = || {
            let (queue, hw, command) = (queue.clone(), hw.clone(), command.clone());
            loom::thread::spawn(move || {
                queue.synchronize().unwrap();
                assert!(hw.completed(command.aql_index()), "returned before the GPU");
                assert_eq!(command.status(), CommandStatus::Complete);
            })
        };
        let (a, b) = (synchronize(), synchronize());
        // A synchronize that never wakes leaves every thread blocked, which
        // loom reports as a deadlock.
        a.join().unwrap();
        b.join().unwrap();
        assert!(command.is_released(), "the marker's batch was not released");
        let stats = queue.stats();
        if stats.marker_joins == 1 && stats.syncs_by_handler == 1 {
            JOINS_SEEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });
    assert!(
        JOINS_SEEN.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "no execution joined a marker in flight"
    );
}

/// Executions of [`command_status_versus_the_completion_thread`] in which
/// the reader saw the batch released (the model must reach it).
static RELEASES_SEEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// What a reader sees of two commands: released, and status.
fn look(commands: &[Command<Memory>; 2]) -> [(bool, CommandStatus); 2] {
    // The newer command first: the batch settles oldest first.
    let newer = (commands[1].is_released(), commands[1].status());
    let older = (commands[0].is_released(), commands[0].status());
    [older, newer]
}

/// A command's status, read from another thread while the completion
/// thread settles its batch: it only moves forward (pending, then one final
/// status that never changes; released never goes back), and a reader that
/// sees the batch's last command released sees every command of the batch
/// released and complete (no status lost) and the batch's progress
/// recorded, so synchronize returns without the lock, as it promises once a
/// completed batch covers everything submitted.
#[test]
fn command_status_versus_the_completion_thread() {
    model(|| {
        let config = QueueConfig {
            batch_limits: BatchLimits {
                host_signals: 2,
                device_signals: 2,
            },
            ..QueueConfig::default()
        };
        let (device, hw, _) = device(config, false);
        let queue = device.default_queue().clone();
        let commands = Arc::new([queue.launch_empty().unwrap(), queue.launch_empty().unwrap()]);
        // The second command closed the batch: the completion thread has it.
        assert_eq!(queue.batches_in_completion(), 1);

        let reader = {
            let (queue, commands) = (queue.clone(), commands.clone());
            loom::thread::spawn(move || {
                let first = look(&commands);
                let then = look(&commands);
                for (before, after) in first.iter().zip(&then) {
                    assert!(!before.0 || after.0, "a command was un-released");
                    assert!(
                        !before.1.is_done() || after.1 == before.1,
                        "a status went from {:?} to {:?}",
                        before.1,
                        after.1
                    );
                }
                if then[1].0 {
                    assert!(then[0].0, "a status was lost: the batch's first command");
                    assert_eq!(then[0].1, CommandStatus::Complete);
                    assert_eq!(then[1].1, CommandStatus::Complete);
                    let before = queue.stats().syncs_without_lock;
                    queue.synchronize().unwrap();
                    assert_eq!(
                        queue.stats().syncs_without_lock,
                        before + 1,
                        "a released batch's progress was not visible"
                    );
                    RELEASES_SEEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            })
        };
        // The GPU: both packets are published already.
        hw.run_until(2);
        reader.join().unwrap();
        while !commands[1].is_released() {
            loom::thread::yield_now();
        }
        for (released, status) in look(&commands) {
            assert!(released, "a status was lost");
            assert_eq!(status, CommandStatus::Complete);
        }
    });
    assert!(
        RELEASES_SEEN.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "the reader never saw the batch released"
    );
}

/// Status cells are reused (the queue keeps a pool, so a warm queue's launch
/// allocates nothing): a command handle dropped while the completion thread
/// completes its batch races that thread for the cell's last reference.
/// Whoever lets go last may pool it; a cell still referenced is never reused,
/// and a reused one starts pending, so a new command never reports an old
/// command's completion, and the command still held reports its own.
#[test]
fn a_status_cell_is_reused_only_once_unreferenced() {
    model(|| {
        let config = QueueConfig {
            batch_limits: BatchLimits {
                host_signals: 2,
                device_signals: 2,
            },
            ..QueueConfig::default()
        };
        let (device, hw, _) = device(config, false);
        let queue = device.default_queue().clone();
        let dropped = queue.launch_empty().unwrap();
        let kept = queue.launch_empty().unwrap();
        assert_eq!(queue.batches_in_completion(), 1);
        let dropper = loom::thread::spawn(move || drop(dropped));
        hw.run_until(2);
        dropper.join().unwrap();
        while queue.batches_in_completion() > 0 {
            loom::thread::yield_now();
        }
        // Not run by the GPU: whatever cell they got, they are pending.
        let fresh = queue.launch_empty().unwrap();
        assert!(!fresh.is_released(), "a reused cell kept an old status");
        assert_eq!(fresh.status(), CommandStatus::Pending);
        assert!(kept.is_released());
        assert_eq!(kept.status(), CommandStatus::Complete);
        // The queue's last handle goes with `fresh` pending: a marker after
        // it holds the queue on the completion thread until the GPU ran
        // both (packets 2 and 3), and the thread then ends.
        drop((fresh, kept, queue, device));
        hw.run_until(4);
    });
}
