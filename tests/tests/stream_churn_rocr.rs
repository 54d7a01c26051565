//! Streams made and dropped while the default stream lives, on ROCr (the
//! stand-in), driven as a runtime drives the queue layer: each stream a
//! queue layer queue on a tracker of its own, on a hardware queue of its
//! own (made by the backend, or the runtime's own, adopted). Its wake
//! signals (interrupt signals, each holding one of KFD's 4094 events) and
//! its signal batches go back when it is dropped, not when the runtime's
//! last queue goes: the live counts return to the same figures after every
//! drop, and after a thousand streams a blocking wait still sleeps.

use hsa_sys::{HSA_QUEUE_TYPE_MULTI, HSA_STATUS_SUCCESS, hsa_queue_t};
use sigretire_hsa::{AdoptOptions, Agent as Gpu, AqlQueue, QueueOptions, Runtime, SignalPool};
use sigretire_queue::{Device, DeviceConfig, QueueConfig};
use sigretire_rocr_standin::{Census, Kernel, Standin};
use sigretire_tracker::{Config, Placement, RetiringTracker, WaitPolicy};
use std::sync::Arc;
use std::time::{Duration, Instant};

type Tracker = RetiringTracker<SignalPool, AqlQueue>;

/// Streams made and dropped, one after another.
const STREAMS: usize = 1000;

fn blocking() -> QueueConfig {
    QueueConfig {
        wait_policy: WaitPolicy::blocking(),
        wait_timeout: Some(Duration::from_secs(10)),
        ..QueueConfig::default()
    }
}

/// A tracker with VRAM signals from a pool of its own, on `queue`.
fn tracker_on(queue: AqlQueue) -> (Tracker, Arc<SignalPool>) {
    let pool = Arc::new(SignalPool::new(queue.device()));
    let config = Config {
        signals: Placement::Device,
        ..Config::default()
    };
    let tracker = RetiringTracker::new(pool.clone(), queue, config).unwrap();
    (tracker, pool)
}

/// What ROCr has alive: queues, pool blocks, signals, and the KFD events
/// its interrupt signals hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Alive {
    census: Census,
    events: u64,
}

fn alive(standin: &Standin) -> Alive {
    Alive {
        census: standin.census(),
        events: standin.interrupts().live,
    }
}

/// What is alive once `expected` is, or after 10 s: a dropped stream may be
/// torn down on a teardown thread of the queue layer's, just after the drop.
fn settled(standin: &Standin, expected: Alive) -> Alive {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = alive(standin);
        if now == expected || Instant::now() >= deadline {
            return now;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// Where a stream's hardware queue comes from.
#[derive(Clone, Copy, Debug)]
enum Hardware {
    /// Made by the backend (`AqlQueue::new`), destroyed with the stream.
    Backend,
    /// The runtime's own (`hsa_queue_create`), adopted; the runtime destroys
    /// it after the stream is gone.
    Runtime,
}

/// `STREAMS` streams, one at a time, each with a kernel, an event the
/// default stream waits on (every other one), and a blocking synchronize;
/// after each drop, exactly what was alive before it.
fn churn(hardware: Hardware) {
    let standin = Standin::new(sigretire_rocr_standin::Config::default()).unwrap();
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    let gpu = runtime.device(0).unwrap();
    let (tracker, default_pool) = tracker_on(AqlQueue::new(&gpu, QueueOptions::default()).unwrap());
    let device = Device::new(DeviceConfig::default(), tracker, blocking()).unwrap();
    let default = device.default_queue();
    let short = standin.register_kernel(Kernel::Duration(Duration::from_micros(200)));
    let long = standin.register_kernel(Kernel::Duration(Duration::from_millis(3)));
    // The default stream warmed up: its batch is made.
    default.launch(short).unwrap();
    default.synchronize().unwrap();
    let before = alive(&standin);
    assert_eq!(before.events, 5, "the default stream's wake signals");

    for stream in 0..STREAMS {
        let queue = match hardware {
            Hardware::Backend => AqlQueue::new(&gpu, QueueOptions::default()).unwrap(),
            Hardware::Runtime => adopt(&runtime, &gpu),
        };
        let raw = queue.raw();
        let (tracker, pool) = tracker_on(queue);
        let created = device.create_queue(tracker, blocking()).unwrap();
        assert_eq!(created.stats().wake_signals, 5, "stream {stream}");
        created.launch(short).unwrap();
        let event = created.record_event().unwrap();
        if stream % 2 == 0 {
            // The default stream's packet names the stream's signal.
            default.wait_event(&event).unwrap();
        }
        event.synchronize().unwrap();
        default.synchronize().unwrap();
        assert_eq!(pool.counters().polling_wake_signals, 0, "stream {stream}");
        drop((event, created, pool));
        if let Hardware::Runtime = hardware {
            settled_then_destroy(&standin, &runtime, raw, before);
        }
        let after = settled(&standin, before);
        assert_eq!(after, before, "after dropping stream {stream}");
    }

    let waits = default.stats();
    assert!(
        waits.dependencies >= (STREAMS / 4) as u64,
        "the default stream waited on the GPU for most of the events it was given: {waits:?}"
    );

    // A blocking wait still sleeps, on the default stream and on a new one.
    let sleeps = standin.interrupts().sleeps;
    let (tracker, pool) = tracker_on(AqlQueue::new(&gpu, QueueOptions::default()).unwrap());
    let last = device.create_queue(tracker, blocking()).unwrap();
    assert_eq!(last.stats().wake_signals, 5);
    assert_eq!(pool.counters().wake_signals, 5);
    for queue in [default, &last] {
        let slept = queue.stats().sleeping_waits;
        queue.launch(long).unwrap();
        queue.record_event().unwrap().synchronize().unwrap();
        assert_eq!(queue.stats().sleeping_waits, slept + 1);
        assert_eq!(queue.stats().wake_fallbacks, 0);
    }
    assert!(standin.interrupts().sleeps >= sleeps + 2);
    assert_eq!(standin.interrupts().degraded, 0, "no polling signal made");
    assert_eq!(default_pool.counters().polling_wake_signals, 0);
    drop((last, pool, device, default_pool, gpu, runtime));
    assert_eq!(standin.census(), Census::default());
    standin.assert_no_violations();
}

/// A queue the runtime makes (`hsa_queue_create`), adopted.
fn adopt(runtime: &Runtime, gpu: &Gpu) -> AqlQueue {
    let mut raw: *mut hsa_queue_t = std::ptr::null_mut();
    // SAFETY: a GPU agent of an initialised runtime; no error callback.
    let status = unsafe {
        runtime.api().hsa_queue_create(
            gpu.agent(),
            4096,
            HSA_QUEUE_TYPE_MULTI,
            None,
            std::ptr::null_mut(),
            u32::MAX,
            u32::MAX,
            &raw mut raw,
        )
    };
    assert_eq!(status, HSA_STATUS_SUCCESS);
    // SAFETY: a live queue of this GPU, destroyed by `settled_then_destroy`
    // once the backend let go of it.
    unsafe { AqlQueue::adopt(gpu, raw, AdoptOptions::default()) }.unwrap()
}

/// Waits until the backend let go of the runtime's queue `raw` (everything
/// but that queue is as `before`), then destroys it, as its owner.
fn settled_then_destroy(
    standin: &Standin,
    runtime: &Runtime,
    raw: *mut hsa_queue_t,
    before: Alive,
) {
    let with_queue = Alive {
        census: Census {
            queues: before.census.queues + 1,
            ..before.census
        },
        ..before
    };
    let now = settled(standin, with_queue);
    assert_eq!(
        now, with_queue,
        "the runtime's queue still alive, nothing else"
    );
    // SAFETY: the runtime's own queue; the backend's handles are gone.
    let status = unsafe { runtime.api().hsa_queue_destroy(raw) };
    assert_eq!(status, HSA_STATUS_SUCCESS);
}

#[test]
fn a_dropped_stream_gives_its_signals_back_while_the_default_stream_lives() {
    churn(Hardware::Backend);
}

#[test]
fn a_dropped_stream_on_an_adopted_queue_gives_its_signals_back_too() {
    churn(Hardware::Runtime);
}
