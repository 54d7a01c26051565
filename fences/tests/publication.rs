//! Packet publication: back-pressure waits outside the lock after filling
//! the reserved slot with empty work; a failed acquire never stalls the
//! ring; a full hardware ring is retried outside the lock; bad input fails
//! cleanly.

mod support;

use sigretire_queue::sim::SimPlatform;
use sigretire_queue::{
    BatchLimits, CommandStatus, DeviceConfig, Error, InvalidConfig, QueueConfig, SubmitError,
    SyncError,
};
use sigretire_tracker::{Config, Status, Tracker};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use support::*;

fn hardware(
    queue: &sigretire_queue::HostQueue<sigretire_queue::sim::SimTracker>,
) -> sigretire_sim::Queue {
    queue.with_tracker(|t| t.queue().clone())
}

#[test]
fn backpressure_fills_the_slot_with_empty_work_and_waits_outside_the_lock() {
    let platform = SimPlatform::stepped().with_tracker_config(Config {
        initial_size: 2,
        growth_limit: 1,
        ..Config::default()
    });
    let device = platform.device(DeviceConfig::default(), bounded()).unwrap();
    let queue = device.default_queue().clone();
    let flag = sigretire_sim::HostFlag::new();
    queue.launch(spin_kernel(&platform, &flag)).unwrap();
    queue.launch_empty().unwrap();

    let third = {
        let queue = queue.clone();
        spawn(move || queue.launch_empty())
    };
    wait_until("the launch waits under back-pressure", || {
        queue.stats().backpressure_waits == 1
    });
    // It waits without the lock.
    assert_eq!(queue.query().unwrap(), Status::Pending);
    assert_eq!(queue.stats().empty_packets, 1);
    let empty = hardware(&queue).truth(2).unwrap();
    assert!(empty.published);
    assert_eq!(empty.completion_signal.handle, 0, "no completion signal");

    flag.set();
    let third = drive(&platform, third).unwrap();
    assert_eq!(third.aql_index(), 3, "retried after the empty packet");
    platform.sim().run_until_idle();
    assert_eq!(third.status(), CommandStatus::Complete);
    assert!(platform.sim().violations().is_empty());
}

#[test]
fn a_failed_growth_allocation_waits_for_room_instead_of_failing() {
    let platform = SimPlatform::stepped().with_tracker_config(Config {
        initial_size: 1,
        growth_limit: 4,
        refill_batch: 1,
        ..Config::default()
    });
    let device = platform.device(DeviceConfig::default(), bounded()).unwrap();
    let queue = device.default_queue().clone();
    queue.launch_empty().unwrap();
    platform.sim().fail_allocations(1_000);
    let second = {
        let queue = queue.clone();
        spawn(move || queue.launch_empty())
    };
    wait_until("the launch waits for room", || {
        queue.stats().backpressure_waits >= 1
    });
    let second = drive(&platform, second).unwrap();
    platform.sim().run_until_idle();
    assert_eq!(second.status(), CommandStatus::Complete);
    assert!(hardware(&queue).is_idle());
    assert!(platform.sim().violations().is_empty());
}

/// A tracker that refuses the next acquire on demand (failure injection),
/// delegating everything else: the queue layer is generic over trackers.
struct Refusing {
    inner: sigretire_queue::sim::SimTracker,
    refuse: Arc<AtomicBool>,
}

impl Tracker for Refusing {
    type Memory = sigretire_sim::backend::SimMemory;
    type Queue = sigretire_sim::Queue;

    fn acquire(
        &mut self,
        request: sigretire_tracker::Request,
    ) -> Result<sigretire_tracker::Acquired, sigretire_tracker::AcquireError> {
        if self.refuse.swap(false, Ordering::SeqCst) {
            return Err(sigretire_tracker::AcquireError::OutOfSignals(
                sigretire_tracker::backend::AllocError::OutOfMemory("injected".into()),
            ));
        }
        self.inner.acquire(request)
    }
    fn query(
        &mut self,
        t: &sigretire_tracker::Ticket,
    ) -> Result<Status, sigretire_tracker::ForeignTicket> {
        self.inner.query(t)
    }
    fn known_status(
        &self,
        t: &sigretire_tracker::Ticket,
    ) -> Result<Option<Status>, sigretire_tracker::ForeignTicket> {
        self.inner.known_status(t)
    }
    fn waiter(&self) -> sigretire_tracker::Waiter<Self::Memory> {
        self.inner.waiter()
    }
    fn hold(
        &mut self,
        t: &sigretire_tracker::Ticket,
    ) -> Result<Option<sigretire_tracker::SignalRef<Self::Memory>>, sigretire_tracker::ForeignTicket>
    {
        self.inner.hold(t)
    }
    fn pin(
        &mut self,
        t: &sigretire_tracker::Ticket,
    ) -> Result<Option<sigretire_tracker::Pin<Self::Memory>>, sigretire_tracker::PinError> {
        self.inner.pin(t)
    }
    fn attach(
        &mut self,
        consumer: &sigretire_tracker::Ticket,
        pin: sigretire_tracker::Pin<Self::Memory>,
    ) -> Result<(), sigretire_tracker::AttachError<Self::Memory>> {
        self.inner.attach(consumer, pin)
    }
    fn probe(&mut self) -> bool {
        self.inner.probe()
    }
    fn poll(&mut self) -> usize {
        self.inner.poll()
    }
    fn reclaim(&mut self) -> usize {
        self.inner.reclaim()
    }
    fn time(
        &mut self,
        t: &sigretire_tracker::Ticket,
    ) -> Result<Option<sigretire_tracker::Ticket>, sigretire_tracker::ForeignTicket> {
        self.inner.time(t)
    }

    fn timestamps(
        &mut self,
        t: &sigretire_tracker::Ticket,
    ) -> Result<Option<sigretire_tracker::Timestamps>, sigretire_tracker::TimestampsError> {
        self.inner.timestamps(t)
    }
    fn note_queue_change(&mut self, queue: sigretire_sim::Queue) {
        self.inner.note_queue_change(queue)
    }
    fn note_drained(&mut self) {
        self.inner.note_drained()
    }
    fn fail_queue(&mut self) -> usize {
        self.inner.fail_queue()
    }
    fn fail_queue_of(&mut self, t: &sigretire_tracker::Ticket) -> usize {
        self.inner.fail_queue_of(t)
    }
    fn fail_submission(
        &mut self,
        t: &sigretire_tracker::Ticket,
        issued: u32,
    ) -> Result<(), sigretire_tracker::FailSubmissionError> {
        self.inner.fail_submission(t, issued)
    }
    fn check_publication(
        &self,
        p: &sigretire_tracker::backend::Publication,
    ) -> Result<(), sigretire_tracker::PublishError> {
        self.inner.check_publication(p)
    }
    fn queue(&self) -> &sigretire_sim::Queue {
        self.inner.queue()
    }
    fn generation(&self) -> sigretire_tracker::Generation {
        self.inner.generation()
    }
    fn stats(&self) -> sigretire_tracker::Stats {
        self.inner.stats()
    }
    fn census(&self) -> sigretire_tracker::Census {
        self.inner.census()
    }
    fn any_use_running(&mut self) -> bool {
        self.inner.any_use_running()
    }
}

#[test]
fn a_refused_acquire_publishes_empty_work_so_the_ring_never_stalls() {
    let platform = SimPlatform::stepped();
    let refuse = Arc::new(AtomicBool::new(false));
    let tracker = Refusing {
        inner: platform.tracker().unwrap(),
        refuse: refuse.clone(),
    };
    let hw = tracker.queue().clone();
    let device = sigretire_queue::Device::new(DeviceConfig::default(), tracker, bounded()).unwrap();
    let queue = device.default_queue();
    let first = queue.launch_empty().unwrap();
    refuse.store(true, Ordering::SeqCst);
    assert!(matches!(
        queue.launch_empty(),
        Err(SubmitError::Tracker(sigretire_tracker::Error::Acquire(
            sigretire_tracker::AcquireError::OutOfSignals(_)
        )))
    ));
    assert_eq!(queue.stats().empty_packets, 1);
    let empty = hw.truth(first.aql_index() + 1).unwrap();
    assert!(empty.published && empty.completion_signal.handle == 0);
    let later = queue.launch_empty().unwrap();
    assert_eq!(later.aql_index(), first.aql_index() + 2);
    platform.run_while(|| queue.synchronize()).unwrap();
    assert_eq!(later.status(), CommandStatus::Complete);
    assert!(hw.is_idle(), "the processor went past the empty packet");
    assert!(platform.sim().violations().is_empty());
}

#[test]
fn a_full_hardware_ring_is_retried_outside_the_lock_until_the_timeout() {
    let platform = SimPlatform::stepped().with_sim_queue_config(sigretire_sim::SimQueueConfig {
        size: 2,
        profiling: true,
        ..sigretire_sim::SimQueueConfig::default()
    });
    let device = platform
        .device(
            DeviceConfig::default(),
            QueueConfig {
                wait_timeout: Some(Duration::from_millis(30)),
                ..QueueConfig::default()
            },
        )
        .unwrap();
    let queue = device.default_queue();
    queue.launch_empty().unwrap();
    queue.launch_empty().unwrap();
    assert_eq!(
        queue.launch_empty().unwrap_err(),
        SubmitError::RingFull(Duration::from_millis(30))
    );
    assert!(queue.stats().ring_full_retries > 0);
    platform.sim().run_until_idle();
    let later = queue.launch_empty().unwrap();
    assert_eq!(later.aql_index(), 2);
}

/// A launch behind a gated kernel past the tracker's in-flight limit says
/// so: the limit (`Config::max_in_flight()`), its value, and the use it
/// waited for, typed and in its message (was: a bare `TimedOut`).
#[test]
fn a_full_ring_names_its_limit_and_the_use_it_waits_for() {
    let config = Config {
        initial_size: 4,
        growth_limit: 2,
        ..Config::default()
    };
    let platform = SimPlatform::stepped().with_tracker_config(config);
    let timeout = Duration::from_millis(20);
    let device = platform
        .device(
            DeviceConfig::default(),
            QueueConfig {
                wait_timeout: Some(timeout),
                ..QueueConfig::default()
            },
        )
        .unwrap();
    let queue = device.default_queue();
    let flag = sigretire_sim::HostFlag::new();
    let gated = queue.launch(spin_kernel(&platform, &flag)).unwrap();
    let limit = config.max_in_flight();
    let mut last = gated.ticket().seq();
    for _ in 1..limit {
        last = queue.launch_empty().unwrap().ticket().seq();
    }
    let error = queue.launch_empty().unwrap_err();
    let SubmitError::InFlightLimit {
        limit: named,
        wait_for,
        waited,
    } = error.clone()
    else {
        panic!("expected InFlightLimit, got {error:?}");
    };
    assert_eq!(named, limit);
    assert_eq!(named, 8);
    // A use in flight behind the gated kernel: the oldest, or (here) the
    // fence near it whose completion proves the most.
    assert!(
        (gated.ticket().seq()..=last).contains(&wait_for),
        "{wait_for} not in flight"
    );
    assert_eq!(waited, timeout);
    let text = error.to_string();
    for part in [
        "in-flight limit",
        "8 uses in flight",
        "max_in_flight()",
        "initial_size x growth_limit",
        &format!("use {wait_for}"),
        "wait_timeout",
        "nothing was submitted",
    ] {
        assert!(text.contains(part), "{part:?} missing from: {text}");
    }
    assert!(!error.is_device_error());
    assert!(matches!(
        Error::from(error),
        Error::InFlightLimit { limit: 8, .. }
    ));
    // Released, the ring drains and launches go on.
    flag.set();
    platform.sim().run_until_idle();
    let later = queue.launch_empty().unwrap();
    platform.sim().run_until_idle();
    assert_eq!(later.status(), CommandStatus::Complete);
}

#[test]
fn an_unknown_kernel_fails_the_queue_not_the_host() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let bad = queue.launch(12345).unwrap();
    platform.sim().run_until_idle();
    assert_eq!(queue.query().unwrap(), Status::Failed);
    // The queue failed, not the device.
    assert!(queue.has_failed());
    assert_eq!(device.error(), None);
    assert_eq!(bad.status(), CommandStatus::Failed);
    assert_eq!(
        queue.synchronize(),
        Err(SyncError::QueueFailed { queue: queue.id() })
    );
    // The failed queue takes no more work; the device does.
    assert_eq!(
        queue.launch_empty().unwrap_err(),
        SubmitError::QueueFailed { queue: queue.id() }
    );
    let fresh = platform
        .create_queue(&device, QueueConfig::default())
        .unwrap();
    let command = fresh.launch_empty().unwrap();
    platform.sim().run_until_idle();
    assert_eq!(command.status(), CommandStatus::Complete);
}

#[test]
fn invalid_configurations_are_refused() {
    let (platform, device) = stepped();
    let bad = QueueConfig {
        batch_limits: BatchLimits {
            host_signals: 0,
            device_signals: 1,
        },
        ..QueueConfig::default()
    };
    assert!(matches!(
        platform.create_queue(&device, bad),
        Err(Error::InvalidConfig(_))
    ));
    let bad = QueueConfig {
        error_check_interval: Duration::ZERO,
        ..QueueConfig::default()
    };
    assert!(matches!(
        device.create_queue(platform.tracker().unwrap(), bad),
        Err(InvalidConfig(_))
    ));
    let bad = QueueConfig {
        wait_timeout: Some(Duration::ZERO),
        ..QueueConfig::default()
    };
    assert!(matches!(
        platform.create_queue(&device, bad),
        Err(Error::InvalidConfig(_))
    ));
    // The default queue's configuration is checked too.
    assert!(matches!(
        platform.device(DeviceConfig::default(), bad),
        Err(Error::InvalidConfig(_))
    ));
    let tiny = SimPlatform::stepped().with_tracker_config(Config {
        initial_size: 0,
        ..Config::default()
    });
    assert!(matches!(
        tiny.tracker(),
        Err(Error::Tracker(sigretire_tracker::Error::Create(
            sigretire_tracker::CreateError::InvalidConfig(_)
        )))
    ));
}
