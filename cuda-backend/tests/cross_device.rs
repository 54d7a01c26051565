//! Cross-device waits on two GPUs: a queue of GPU 1 waits, on the GPU, for
//! an event recorded on GPU 0 behind a spinning kernel, through the queue
//! layer (`wait_event`: a `cuStreamWaitValue64` on the event's signal, a
//! word of pinned host memory both GPUs reach), and never passes early.
//! The ground truth is the kernels' own writes: the spinning kernel runs
//! until the host releases it, and the consumer's kernel writes a pinned
//! word the host watches, so a consumer that started before the producer
//! finished is seen writing while the producer still spins. A watchdog on
//! every wait (and the spin kernel's own timeout) turns a hang into a
//! failure. The same rounds with CUDA's own event and `cuStreamWaitEvent`
//! give the latency to compare with, in the same process.
//!
//! Each test skips, saying so on stderr, with fewer than two GPUs (as on a
//! one-GPU machine and in CI). On a two-GPU machine run the release binary
//! with `--test-threads=1 --nocapture` (see the crate's README).

mod support;

use sigretire_cuda::{CudaContext, CudaMemory, CudaQueue, Error};
use sigretire_cuda_testkit::{FlagState, HostFlag, launch_flag_writer, spin_kernel};
use sigretire_queue::{Device, DeviceConfig, HostQueue, QueueConfig};
use sigretire_tracker::{
    Config, RetiringTracker, Tracker as _,
    backend::{HardwareQueue, Publication},
};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{RawEvent, WAIT};

type Tracker = RetiringTracker<CudaMemory, CudaQueue>;

/// How many rounds the seed's test runs.
const ROUNDS: usize = 1000;

/// How long the host keeps the producer spinning after the consumer's wait
/// is enqueued, watching for an early pass.
const HOLD: Duration = Duration::from_micros(200);

/// The spin kernel's own watchdog.
const SPIN_TIMEOUT: Duration = Duration::from_secs(3);

/// GPUs 0 and 1, or `None` (said on stderr) with fewer than two.
fn two_gpus() -> Option<(Arc<CudaContext>, Arc<CudaContext>)> {
    let first = support::gpu("cross-device")?;
    match CudaContext::new(1) {
        Ok(second) => Some((first, second)),
        Err(error @ Error::NoDevice { .. }) => {
            eprintln!("cuda-backend cross-device tests SKIPPED (they need two GPUs): {error}");
            None
        }
        Err(error) => panic!("GPU 1 is present but unusable: {error}"),
    }
}

fn device(context: &Arc<CudaContext>) -> Device<Tracker> {
    let (tracker, _) = context
        .retiring_tracker(Config::default())
        .expect("a tracker");
    let config = QueueConfig {
        wait_timeout: Some(WAIT),
        ..QueueConfig::default()
    };
    Device::new(DeviceConfig::default(), tracker, config).expect("a device")
}

/// The hardware stream under a host queue, to launch untracked work on it
/// in stream order.
fn stream(queue: &HostQueue<Tracker>) -> CudaQueue {
    queue.with_tracker(|t| t.queue().clone())
}

/// Waits (bounded) until the consumer's kernel wrote its word.
fn wait_written(word: &HostFlag, what: &str) -> Duration {
    let start = Instant::now();
    while word.state() == FlagState::Held {
        assert!(start.elapsed() < WAIT, "{what}: the consumer never ran");
        std::hint::spin_loop();
    }
    start.elapsed()
}

/// One round's outcome: whether the consumer ran early, and how long after
/// the producer's release the consumer's write arrived.
struct Round {
    early: bool,
    latency: Duration,
}

/// Holds the producer for [`HOLD`], watching the consumer's word, then
/// releases it and times the consumer's write.
fn watch(release: &HostFlag, written: &HostFlag, what: &str) -> Round {
    let held = Instant::now();
    let mut early = false;
    while held.elapsed() < HOLD {
        early |= written.state() != FlagState::Held;
    }
    assert_eq!(
        release.state(),
        FlagState::Held,
        "{what}: the spin kernel gave up (its watchdog)"
    );
    release.release();
    let latency = wait_written(written, what);
    Round { early, latency }
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort_unstable();
    values[values.len() / 2]
}

#[test]
fn a_queue_of_gpu1_never_passes_an_event_of_gpu0_early() {
    let Some((gpu0, gpu1)) = two_gpus() else {
        return;
    };
    let (producer_device, consumer_device) = (device(&gpu0), device(&gpu1));
    let (producer, consumer) = (
        producer_device.default_queue(),
        consumer_device.default_queue(),
    );
    let release = HostFlag::new(&gpu0).unwrap();
    let spin = spin_kernel(&gpu0, &release, SPIN_TIMEOUT).unwrap();
    let written = HostFlag::new(&gpu1).unwrap();
    let consumer_stream = stream(consumer);

    let mut early = 0;
    let mut ours = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        release.reset();
        written.reset();
        producer.launch(spin.raw()).unwrap();
        let event = producer.record_event().unwrap();
        let wait = consumer.wait_event(&event).unwrap();
        assert_eq!(
            wait.dependencies(),
            1,
            "round {round}: a real wait on GPU 1"
        );
        launch_flag_writer(&consumer_stream, &written).unwrap();
        let outcome = watch(&release, &written, &format!("ours, round {round}"));
        early += usize::from(outcome.early);
        ours.push(outcome.latency);
        event.synchronize().unwrap();
        consumer.synchronize().unwrap();
    }
    assert_eq!(
        early, 0,
        "{early} of {ROUNDS} rounds passed the event early"
    );
    // The pins let go once the consumer's waits retired.
    producer.synchronize().unwrap();
    producer.with_tracker(|t| t.reclaim());
    assert_eq!(producer.with_tracker(|t| t.census().parked), 0);

    // The same rounds with CUDA's own event and cuStreamWaitEvent, on
    // streams of their own.
    let producer_stream = gpu0.create_queue().unwrap();
    let consumer_stream = gpu1.create_queue().unwrap();
    let native_event = RawEvent::new(&gpu0);
    let mut native = Vec::with_capacity(ROUNDS);
    let mut native_early = 0;
    for round in 0..ROUNDS {
        release.reset();
        written.reset();
        let index = producer_stream.reserve().unwrap();
        producer_stream
            .publish(Publication::unsignalled(index, true), spin.work())
            .unwrap();
        native_event.record(producer_stream.as_raw());
        native_event.make_wait(&consumer_stream);
        launch_flag_writer(&consumer_stream, &written).unwrap();
        let outcome = watch(&release, &written, &format!("CUDA's, round {round}"));
        native_early += usize::from(outcome.early);
        native.push(outcome.latency);
        native_event.synchronize();
    }
    assert_eq!(
        native_early, 0,
        "CUDA's own wait passed early: the test is wrong"
    );
    let (ours, native) = (median(ours), median(native));
    println!(
        "cross-device wait, {ROUNDS} rounds: 0 early passes; release to the consumer's write \
         (p50) ours {:.1} us, cuStreamWaitEvent {:.1} us, ratio {:.2}",
        ours.as_secs_f64() * 1e6,
        native.as_secs_f64() * 1e6,
        ours.as_secs_f64() / native.as_secs_f64()
    );
}

#[test]
fn elapsed_time_between_events_of_two_gpus_is_refused() {
    let Some((gpu0, gpu1)) = two_gpus() else {
        return;
    };
    let (first, second) = (device(&gpu0), device(&gpu1));
    let start = first.default_queue().record_event().unwrap();
    let stop = second.default_queue().record_event().unwrap();
    start.synchronize().unwrap();
    stop.synchronize().unwrap();
    assert_eq!(
        start.elapsed_to(&stop),
        Err(sigretire_queue::ElapsedError::DifferentDevices)
    );
}

#[test]
fn the_signals_of_two_gpus_are_shared_where_both_address_host_memory_alike() {
    use sigretire_tracker::backend::SignalMemory;
    let Some((gpu0, gpu1)) = two_gpus() else {
        return;
    };
    let (first, second) = (CudaMemory::new(&gpu0), CudaMemory::new(&gpu1));
    let unified = gpu0.info().unified_addressing && gpu1.info().unified_addressing;
    assert_eq!(first.shares_signals_with(&second), unified);
    assert!(first.shares_signals_with(&first));
}
