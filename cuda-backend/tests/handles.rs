//! The queue layer's handles on CUDA (`sigretire_cuda::queue`, the `queue`
//! feature): a device from a cudarc stream or from an ordinal in one call,
//! more queues on it, and this library's context from cudarc's.
//!
//! The refusals that need no GPU run everywhere; the rest skip, saying so
//! on stderr, where there is no driver or no device.

#![cfg(feature = "queue")]

mod support;

use cudarc::driver::CudaContext as CudarcContext;
use sigretire_cuda::queue::{self, BatchLimits, DeviceConfig, OpenError, QueueConfig};
use sigretire_cuda::{CudaContext, Error, cudarc};
use std::sync::Arc;
use support::WAIT;

/// cudarc's context of GPU 0, or `None` where there is none (cudarc panics
/// without the driver: the library is asked first).
fn cudarc_gpu() -> Option<Arc<CudarcContext>> {
    support::gpu("queue-handle")?;
    Some(CudarcContext::new(0).expect("cudarc opens the device the library opened"))
}

fn config() -> QueueConfig {
    QueueConfig {
        wait_timeout: Some(WAIT),
        ..QueueConfig::default()
    }
}

fn bad_config() -> QueueConfig {
    QueueConfig {
        batch_limits: BatchLimits {
            host_signals: 0,
            device_signals: 64,
        },
        ..QueueConfig::default()
    }
}

#[test]
fn open_without_a_gpu_of_that_ordinal_is_a_typed_refusal() {
    let refused = queue::open(u32::MAX, DeviceConfig::default(), config());
    match refused {
        Err(error) => assert!(error.is_no_gpu(), "{error}"),
        Ok(_) => panic!("there is no CUDA device u32::MAX"),
    }
}

#[test]
fn a_bad_queue_configuration_is_refused_before_any_driver_call() {
    // Refused the same with or without a GPU.
    let refused = queue::open(0, DeviceConfig::default(), bad_config());
    assert!(
        matches!(refused, Err(OpenError::Config(_))),
        "{:?}",
        refused.err()
    );
}

#[test]
fn from_cudarc_is_the_same_primary_context() {
    let Some(runtime) = cudarc_gpu() else { return };
    let context = CudaContext::from_cudarc(&runtime).unwrap();
    assert_eq!(context.as_raw(), runtime.cu_ctx());
    assert!(context.same_context(&CudaContext::new(0).unwrap()));
    // A context of cudarc's own making is not the primary one.
    let private = CudarcContext::new_non_primary(0, 0).unwrap();
    let refused = CudaContext::from_cudarc(&private);
    assert!(
        matches!(refused, Err(Error::ForeignContext { ordinal: 0, .. })),
        "{refused:?}"
    );
}

#[test]
fn adopt_runs_the_queue_layer_on_cudarcs_stream_and_leaves_it_to_cudarc() {
    let Some(runtime) = cudarc_gpu() else { return };
    let stream = runtime.new_stream().unwrap();
    let mut buffer = stream.alloc_zeros::<u32>(1 << 20).unwrap();
    let (device, host_queue) =
        queue::adopt(stream.clone(), DeviceConfig::default(), config()).unwrap();
    assert!(queue::is_adopted(&host_queue));
    assert_eq!(host_queue.id(), device.default_queue().id());
    host_queue.with_tracker(|tracker| {
        use sigretire_tracker::Tracker;
        assert_eq!(tracker.queue().as_raw(), stream.cu_stream());
    });

    let start: queue::Event = host_queue.record_event().unwrap();
    let launches: Vec<queue::Command> =
        (0..8).map(|_| host_queue.launch_empty().unwrap()).collect();
    stream.memset_zeros(&mut buffer).unwrap(); // the runtime's own, between
    let stop = host_queue.record_event().unwrap();
    stop.synchronize().unwrap();
    assert_eq!(stop.query(), queue::Status::Complete);
    assert!(
        launches
            .iter()
            .all(|launch| launch.status() == queue::CommandStatus::Complete)
    );
    assert!(start.elapsed_to(&stop).unwrap() > std::time::Duration::ZERO);
    device.synchronize().unwrap();

    drop((device, host_queue, start, stop, launches));
    // The stream is still cudarc's, and works.
    stream.memset_zeros(&mut buffer).unwrap();
    stream.synchronize().unwrap();
}

#[test]
fn adopt_refuses_cudarcs_default_streams() {
    let Some(runtime) = cudarc_gpu() else { return };
    for (stream, handle) in [
        (runtime.default_stream(), 0),
        (runtime.per_thread_stream(), 2),
    ] {
        let refused = queue::adopt(stream, DeviceConfig::default(), config());
        assert!(
            matches!(refused, Err(OpenError::Cuda(Error::DefaultStream { handle: h })) if h == handle),
            "{:?}",
            refused.err()
        );
    }
}

#[test]
fn more_adopted_streams_join_the_device_and_wait_for_each_other_on_the_gpu() {
    let Some(runtime) = cudarc_gpu() else { return };
    let (device, producer) = queue::adopt(
        runtime.new_stream().unwrap(),
        DeviceConfig::default(),
        config(),
    )
    .unwrap();
    let consumer: queue::HostQueue =
        queue::adopt_queue(&device, runtime.new_stream().unwrap(), config()).unwrap();
    assert!(queue::is_adopted(&consumer));
    assert_eq!(device.queues().len(), 2);
    producer.launch_empty().unwrap();
    let produced = producer.record_event().unwrap();
    consumer.wait_event(&produced).unwrap();
    let after = consumer.launch_empty().unwrap();
    consumer.synchronize().unwrap();
    assert_eq!(produced.query(), queue::Status::Complete);
    assert_eq!(after.status(), queue::CommandStatus::Complete);
    assert!(matches!(
        queue::adopt_queue(&device, runtime.new_stream().unwrap(), bad_config()),
        Err(OpenError::Config(_))
    ));
}

#[test]
fn open_and_create_queue_run_on_streams_of_their_own() {
    if support::gpu("queue-handle").is_none() {
        return;
    }
    let (device, first) = queue::open(0, DeviceConfig::default(), config()).unwrap();
    let second = queue::create_queue(&device, config()).unwrap();
    assert!(!queue::is_adopted(&first) && !queue::is_adopted(&second));
    assert_eq!(device.queues().len(), 2);
    let start = first.record_event().unwrap();
    first.launch_empty().unwrap();
    let stop = first.record_event().unwrap();
    second.wait_event(&stop).unwrap();
    second.launch_empty().unwrap();
    device.synchronize().unwrap();
    assert_eq!(stop.query(), queue::Status::Complete);
    assert!(start.elapsed_to(&stop).is_ok());
}
