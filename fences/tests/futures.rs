//! Futures of commands, events and queue synchronization: awaited on two
//! executors (tokio's and pollster's), thousands at once over several
//! queues of a free-running simulator, each checked against the
//! simulator's ground truth (never ready before its packet completed);
//! dropped while pending (nothing left registered); and ending with the
//! blocking calls' typed errors on a failed queue and in the device error
//! state.

mod support;

use sigretire_queue::sim::{SimPlatform, SimTracker};
use sigretire_queue::{Command, DeviceConfig, Event, HostQueue, SyncError, WaitError, WaitFuture};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use support::*;

type SimCommand = Command<<SimTracker as sigretire_tracker::Tracker>::Memory>;

const QUEUES: usize = 4;
const PER_QUEUE: usize = 1000;

/// Whether the packet at `index` of `queue` completed, by the simulator's
/// ground truth.
fn truly_done(queue: &HostQueue<SimTracker>, index: u64) -> bool {
    queue.with_tracker(|t| {
        sigretire_tracker::Tracker::queue(t)
            .truth(index)
            .is_none_or(|truth| truth.completed)
    })
}

/// Several queues of a free-running device, with thousands of commands and
/// a few events on them.
fn workload() -> (SimPlatform, sigretire_queue::Device<SimTracker>) {
    let platform = SimPlatform::threaded(sigretire_sim::CostProfile::zero());
    let device = platform.device(DeviceConfig::default(), bounded()).unwrap();
    (platform, device)
}

fn queues(
    platform: &SimPlatform,
    device: &sigretire_queue::Device<SimTracker>,
) -> Vec<HostQueue<SimTracker>> {
    let mut queues = vec![device.default_queue().clone()];
    while queues.len() < QUEUES {
        queues.push(platform.create_queue(device, bounded()).unwrap());
    }
    queues
}

/// What one awaited future checks once it resolved: the ground truth says
/// its packet completed.
async fn await_command(queue: HostQueue<SimTracker>, command: SimCommand, done: Arc<AtomicUsize>) {
    command.wait_async().await.unwrap();
    assert!(
        truly_done(&queue, command.aql_index()),
        "a future was ready before its packet completed"
    );
    done.fetch_add(1, Ordering::Relaxed);
}

async fn await_event(
    queue: HostQueue<SimTracker>,
    event: Event<SimTracker>,
    done: Arc<AtomicUsize>,
) {
    (&event).await.unwrap();
    assert!(truly_done(&queue, event.aql_index().expect("recorded")));
    done.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn thousands_of_futures_over_several_queues_on_tokio() {
    let (platform, device) = workload();
    let queues = queues(&platform, &device);
    let done = Arc::new(AtomicUsize::new(0));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut tasks = Vec::new();
        for queue in &queues {
            for i in 0..PER_QUEUE {
                let command = queue.launch_empty().unwrap();
                tasks.push(tokio::spawn(await_command(
                    queue.clone(),
                    command,
                    done.clone(),
                )));
                if i % 100 == 99 {
                    let event = queue.record_event().unwrap();
                    tasks.push(tokio::spawn(await_event(
                        queue.clone(),
                        event,
                        done.clone(),
                    )));
                }
            }
            let sync = queue.synchronize_async();
            tasks.push(tokio::spawn(async move { sync.await.unwrap() }));
        }
        let all = async {
            for task in tasks {
                task.await.unwrap();
            }
        };
        tokio::time::timeout(HANDSHAKE, all)
            .await
            .expect("every future resolves");
    });
    assert_eq!(
        done.load(Ordering::Relaxed),
        QUEUES * (PER_QUEUE + PER_QUEUE / 100)
    );
    for queue in &queues {
        assert_eq!(queue.watches_pending(), 0);
    }
}

/// Polls every future of a set until all resolved (a minimal `join_all`
/// for pollster, which has none).
struct JoinAll<F: Future> {
    futures: Vec<Option<Pin<Box<F>>>>,
}

impl<F: Future> Future for JoinAll<F> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut pending = false;
        for slot in &mut self.futures {
            if let Some(future) = slot {
                if future.as_mut().poll(cx).is_ready() {
                    *slot = None;
                } else {
                    pending = true;
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }
}

#[test]
fn thousands_of_futures_over_several_queues_on_pollster() {
    let (platform, device) = workload();
    let queues = queues(&platform, &device);
    let done = Arc::new(AtomicUsize::new(0));
    let mut futures = Vec::new();
    for queue in &queues {
        for _ in 0..PER_QUEUE {
            let command = queue.launch_empty().unwrap();
            futures.push(Some(Box::pin(await_command(
                queue.clone(),
                command,
                done.clone(),
            ))));
        }
    }
    let watcher = std::thread::spawn({
        let done = done.clone();
        move || {
            let start = std::time::Instant::now();
            while done.load(Ordering::Relaxed) < QUEUES * PER_QUEUE {
                assert!(start.elapsed() < HANDSHAKE, "the futures never resolved");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    pollster::block_on(JoinAll { futures });
    watcher.join().unwrap();
    for queue in &queues {
        pollster::block_on(queue.synchronize_async()).unwrap();
        assert_eq!(queue.watches_pending(), 0);
    }
}

/// A future polled once with a waker that does nothing.
fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    Pin::new(future).poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn a_future_is_not_ready_before_its_packet_completed() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let command = queue.launch_empty().unwrap();
    let mut future = command.wait_async();
    assert!(poll_once(&mut future).is_pending(), "nothing ran");
    assert!(poll_once(&mut future).is_pending());
    assert!(!truly_done(queue, command.aql_index()));
    assert_eq!(queue.watches_pending(), 1);
    let ran = drive(&platform, spawn(move || pollster::block_on(future)));
    ran.unwrap();
    assert!(truly_done(queue, command.aql_index()));
    assert!(command.is_released(), "its batch was completed");
    assert_eq!(queue.watches_pending(), 0);
    assert!(platform.sim().violations().is_empty());
}

#[test]
fn dropping_a_pending_future_leaves_nothing_registered() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let commands: Vec<_> = (0..100).map(|_| queue.launch_empty().unwrap()).collect();
    let mut futures: Vec<WaitFuture> = commands.iter().map(|c| c.wait_async()).collect();
    for future in &mut futures {
        assert!(poll_once(future).is_pending());
    }
    assert_eq!(queue.watches_pending(), 100);
    futures.truncate(50);
    assert_eq!(queue.watches_pending(), 50, "the dropped ones let go");
    drop(futures);
    assert_eq!(queue.watches_pending(), 0);
    // The work runs on; nothing woken, nothing leaked.
    drive(&platform, spawn_synchronize(queue)).unwrap();
    // Their batches (handed over by the first polls) complete on the
    // completion thread.
    wait_until("every batch completed", || {
        commands.iter().all(|c| c.is_released())
    });
    assert_eq!(queue.watches_pending(), 0);
}

#[test]
fn a_timeout_composed_with_tokio_cancels_the_future() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let flag = sigretire_sim::HostFlag::new();
    let command = queue.launch(spin_kernel(&platform, &flag)).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let timed_out = runtime.block_on(async {
        tokio::time::timeout(Duration::from_millis(20), command.wait_async()).await
    });
    assert!(timed_out.is_err(), "the kernel spins: the deadline passes");
    assert_eq!(queue.watches_pending(), 0, "the timed-out future let go");
    flag.set();
    let waited = drive(&platform, {
        let command_future = command.wait_async();
        spawn(move || pollster::block_on(command_future))
    });
    waited.unwrap();
}

#[test]
fn a_failed_queue_fails_its_futures_as_the_blocking_wait_does() {
    let (platform, device) = stepped();
    let queue = platform.create_queue(&device, bounded()).unwrap();
    let flag = sigretire_sim::HostFlag::new();
    let command = queue.launch(spin_kernel(&platform, &flag)).unwrap();
    let later = queue.launch_empty().unwrap();
    let event = queue.record_event().unwrap();
    let mut future = command.wait_async();
    let mut on_event = event.wait_async();
    let mut sync = queue.synchronize_async();
    assert!(poll_once(&mut future).is_pending());
    assert!(poll_once(&mut on_event).is_pending());
    assert!(poll_once(&mut sync).is_pending());
    queue.with_tracker(|t| sigretire_tracker::Tracker::queue(t).fail());
    let failed = WaitError::QueueFailed { queue: queue.id() };
    let results = drive(
        &platform,
        spawn(move || {
            (
                pollster::block_on(future),
                pollster::block_on(on_event),
                pollster::block_on(sync),
                pollster::block_on(later.wait_async()),
            )
        }),
    );
    assert_eq!(results.0, Err(failed.clone()));
    assert_eq!(results.1, Err(failed.clone()));
    assert_eq!(results.2, Err(SyncError::QueueFailed { queue: queue.id() }));
    assert_eq!(results.3, Err(failed.clone()));
    // The blocking call says the same.
    assert_eq!(command.wait(), Err(failed));
    // A new future on the failed queue answers at once.
    assert_eq!(
        pollster::block_on(queue.synchronize_async()),
        Err(SyncError::QueueFailed { queue: queue.id() })
    );
    // The device's other queues keep working.
    let other = device.default_queue().launch_empty().unwrap();
    drive(
        &platform,
        spawn(move || pollster::block_on(other.wait_async())),
    )
    .unwrap();
    flag.set();
}

#[test]
fn the_device_error_state_ends_pending_futures_with_its_error() {
    for skip_abort_on_error in [true, false] {
        let (platform, device) = stepped_with(
            DeviceConfig {
                skip_abort_on_error,
            },
            bounded(),
        );
        let queue = device.default_queue();
        let flag = sigretire_sim::HostFlag::new();
        let command = queue.launch(spin_kernel(&platform, &flag)).unwrap();
        let mut future = command.wait_async();
        assert!(poll_once(&mut future).is_pending());
        let waiting = spawn(move || pollster::block_on(future));
        device.set_error("injected");
        let reason = "injected".to_owned();
        let expected = if skip_abort_on_error {
            WaitError::DeviceError { reason }
        } else {
            WaitError::Aborted { reason }
        };
        let ended = returns_promptly(
            "a future in the device error state",
            move || waiting.join().unwrap(),
            || flag.set(),
        );
        assert_eq!(ended, Err(expected.clone()));
        assert!(
            !truly_done(queue, command.aql_index()),
            "never reported complete"
        );
        let _ = platform;
    }
}

#[test]
fn a_synchronize_future_covers_what_was_submitted_before_it_only() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let first = queue.launch_empty().unwrap();
    let sync = queue.synchronize_async();
    let flag = sigretire_sim::HostFlag::new();
    let spinning = queue.launch(spin_kernel(&platform, &flag)).unwrap();
    drive(&platform, spawn(move || pollster::block_on(sync))).unwrap();
    assert!(truly_done(queue, first.aql_index()));
    assert!(
        !truly_done(queue, spinning.aql_index()),
        "later work still runs"
    );
    flag.set();
    drive(&platform, spawn_synchronize(queue)).unwrap();
    // Nothing submitted: ready at once.
    let mut idle = queue.synchronize_async();
    assert!(matches!(poll_once(&mut idle), Poll::Ready(Ok(()))));
}

/// Awaiting reads no signal: a future looks at host knowledge only, and
/// the batch's one proof settles every future on it (device-memory
/// signals, where each host load is a PCIe read).
#[test]
fn futures_read_no_signal_memory_of_their_own() {
    use sigretire_queue::tracker::{Config, Placement};
    let platform = SimPlatform::stepped().with_tracker_config(Config {
        signals: Placement::Device,
        ..Config::default()
    });
    let device = platform.device(DeviceConfig::default(), bounded()).unwrap();
    let queue = device.default_queue();
    let commands: Vec<_> = (0..1000).map(|_| queue.launch_empty().unwrap()).collect();
    platform.sim().run_until_idle(); // done, but nobody knows yet
    let before = platform.sim().counters();
    let mut futures: Vec<_> = commands.iter().map(|c| c.wait_async()).collect();
    let mut ready_at_once = 0;
    futures.retain_mut(|f| match poll_once(f) {
        Poll::Ready(result) => {
            result.unwrap();
            ready_at_once += 1;
            false
        }
        Poll::Pending => true,
    });
    let results = drive(
        &platform,
        spawn(move || {
            futures
                .into_iter()
                .map(pollster::block_on)
                .collect::<Vec<_>>()
        }),
    );
    assert!(results.iter().all(Result::is_ok));
    let loads = platform.sim().counters().since(before).device.loads;
    println!("1000 futures ({ready_at_once} ready at the first poll): {loads} device-memory loads");
    assert!(loads <= 16, "{loads} device loads for 1000 futures");
}

/// An event created and never recorded is complete (as its synchronize
/// returns at once): its future is ready at the first poll, and a callback
/// on it runs with `Complete` on the device's callback thread, never on the
/// registering one. The stepped simulator runs nothing, so neither could
/// come from GPU work.
#[test]
fn a_never_recorded_event_is_ready_at_once_and_calls_back_complete() {
    let platform = SimPlatform::stepped();
    let device = platform
        .device(DeviceConfig::default(), Default::default())
        .unwrap();
    let event = Event::new(&device, sigretire_queue::EventFlags::default());
    let mut future = std::pin::pin!(event.wait_async());
    let mut context = Context::from_waker(Waker::noop());
    assert!(matches!(
        future.as_mut().poll(&mut context),
        Poll::Ready(Ok(()))
    ));

    let (sender, receiver) = std::sync::mpsc::channel();
    event.on_complete(move |status| {
        let name = std::thread::current().name().map(str::to_owned);
        sender.send((status, name)).unwrap();
    });
    let (status, thread) = receiver.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(status, sigretire_queue::CommandStatus::Complete);
    assert_eq!(thread.as_deref(), Some("fences-callbacks"));
    // The counter moves once the callback returned, after its report.
    wait_until("the callback's run is counted", || {
        device.callback_stats().run >= 1
    });
    assert_eq!(device.callback_stats().run, 1);
}
