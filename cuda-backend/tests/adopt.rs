//! A stream the runtime made itself, adopted: the runtime's own PTX kernel
//! (loaded and launched with raw driver calls, as a CUDA runtime does) runs
//! on the runtime's stream, and the library only completes, times and
//! synchronizes behind it, through the tracker and through the queue layer.
//! A CUDA event the test records on the same stream, and the kernel's
//! output, are the second witnesses that a completion the library reports
//! really happened.
//!
//! Each test skips, saying so on stderr, where there is no driver or no
//! device (as in CI). On the device machine run the release binary with
//! `--test-threads=1 --nocapture` (see the crate's README).

mod support;

use core::ffi::{CStr, c_void};
use cudarc::driver::sys::{
    self, CUdeviceptr, CUfunction, CUmodule, CUresult, CUstream, CUstreamCaptureMode,
};
use sigretire_cuda::{CudaContext, CudaMemory, CudaQueue, Error, check};
use sigretire_cuda_testkit::busy_kernel;
use sigretire_queue::{Device, DeviceConfig, QueueConfig};
use sigretire_tracker::{
    Config, Request, RetiringTracker, Status, Tracker, WaitPolicy, Work,
    backend::{HardwareQueue, QueueError},
};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{RawEvent, WAIT};

type Retiring = RetiringTracker<CudaMemory, CudaQueue>;

/// The runtime's kernel, the test's own (nothing of the library's): each
/// thread spins on `%globaltimer` for `spin_ns`, then writes `i * 3 + 1`
/// into `out[i]`. The spin keeps it running long enough for the host to see
/// the library's marker behind it still pending.
const RUNTIME_PTX: &CStr = c"
.version 7.0
.target sm_50
.address_size 64

.visible .entry runtime_spin_then_write(
    .param .u64 runtime_out,
    .param .u32 runtime_n,
    .param .u64 runtime_spin_ns
)
{
    .reg .pred  %p<3>;
    .reg .b32   %r<8>;
    .reg .b64   %rd<8>;

    ld.param.u64            %rd1, [runtime_out];
    ld.param.u32            %r1, [runtime_n];
    ld.param.u64            %rd2, [runtime_spin_ns];
    mov.u32                 %r2, %ctaid.x;
    mov.u32                 %r3, %ntid.x;
    mov.u32                 %r4, %tid.x;
    mad.lo.u32              %r5, %r2, %r3, %r4;
    setp.ge.u32             %p1, %r5, %r1;
    @%p1 bra                RUNTIME_DONE;
    mov.u64                 %rd3, %globaltimer;
RUNTIME_SPIN:
    mov.u64                 %rd4, %globaltimer;
    sub.u64                 %rd5, %rd4, %rd3;
    setp.lt.u64             %p2, %rd5, %rd2;
    @%p2 bra                RUNTIME_SPIN;
    mul.lo.u32              %r6, %r5, 3;
    add.u32                 %r6, %r6, 1;
    cvta.to.global.u64      %rd6, %rd1;
    mul.wide.u32            %rd7, %r5, 4;
    add.u64                 %rd6, %rd6, %rd7;
    st.global.u32           [%rd6], %r6;
RUNTIME_DONE:
    ret;
}
";

/// Threads of the runtime's kernel, and words of its output.
const THREADS: u32 = 4096;
const BLOCK: u32 = 256;
/// How long each thread of the runtime's kernel spins.
const SPIN: Duration = Duration::from_millis(2);
const ROUNDS: usize = 5;

fn gpu() -> Option<Arc<CudaContext>> {
    support::gpu("adopted-stream")
}

/// What a CUDA runtime of its own has: a module, a kernel, an output buffer
/// in device memory. Everything is made with raw driver calls on the
/// calling thread, with the library's (the device's primary) context bound.
struct Runtime {
    context: Arc<CudaContext>,
    module: CUmodule,
    kernel: CUfunction,
    out: CUdeviceptr,
}

impl Runtime {
    fn new(context: &Arc<CudaContext>) -> Self {
        context.bind().unwrap();
        let mut module = core::ptr::null_mut();
        // SAFETY: the context is bound; the image is NUL-terminated PTX text
        // the driver reads during the call; `module` is a live local.
        check("cuModuleLoadData", unsafe {
            sys::cuModuleLoadData(&mut module, RUNTIME_PTX.as_ptr().cast())
        })
        .unwrap();
        let mut kernel = core::ptr::null_mut();
        // SAFETY: `module` was just loaded; the name is NUL-terminated.
        check("cuModuleGetFunction", unsafe {
            sys::cuModuleGetFunction(&mut kernel, module, c"runtime_spin_then_write".as_ptr())
        })
        .unwrap();
        let mut out = 0;
        // SAFETY: the context is bound; `out` is a live local.
        check("cuMemAlloc_v2", unsafe {
            sys::cuMemAlloc_v2(&mut out, THREADS as usize * 4)
        })
        .unwrap();
        Self {
            context: context.clone(),
            module,
            kernel,
            out,
        }
    }

    /// A new stream of the runtime's (non-blocking, as runtimes make them).
    fn stream(&self) -> CUstream {
        self.context.bind().unwrap();
        let mut stream = core::ptr::null_mut();
        // SAFETY: the context is bound; `stream` is a live local.
        check("cuStreamCreate", unsafe {
            sys::cuStreamCreate(
                &mut stream,
                sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
            )
        })
        .unwrap();
        stream
    }

    /// On `stream`: clears the output (so every round must write it anew),
    /// then launches the kernel, each thread spinning for [`SPIN`].
    fn launch(&self, stream: CUstream) {
        self.launch_for(stream, SPIN);
    }

    /// [`Runtime::launch`], each thread spinning for `spin`.
    fn launch_for(&self, stream: CUstream, spin: Duration) {
        self.context.bind().unwrap();
        // SAFETY: `out` holds `THREADS` 32-bit words; the stream is live.
        check("cuMemsetD32Async", unsafe {
            sys::cuMemsetD32Async(self.out, 0, THREADS as usize, stream)
        })
        .unwrap();
        let mut out = self.out;
        let mut n = THREADS;
        let mut spin_ns = spin.as_nanos() as u64;
        let mut params = [
            (&raw mut out).cast::<c_void>(),
            (&raw mut n).cast::<c_void>(),
            (&raw mut spin_ns).cast::<c_void>(),
        ];
        // SAFETY: `kernel` is of the bound context's module and declares
        // exactly these three parameters (u64, u32, u64), whose values the
        // driver copies during the call while the locals live; the grid
        // covers `THREADS` threads, each writing only its own word of `out`.
        check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                self.kernel,
                THREADS / BLOCK,
                1,
                1,
                BLOCK,
                1,
                1,
                0,
                stream,
                params.as_mut_ptr(),
                core::ptr::null_mut(),
            )
        })
        .unwrap();
    }

    /// The output, copied to the host (`cuMemcpyDtoH`, which waits for
    /// work on the legacy stream only: the caller knows the kernel is done).
    fn read(&self) -> Vec<u32> {
        self.context.bind().unwrap();
        let mut host = vec![0u32; THREADS as usize];
        // SAFETY: `host` holds `THREADS` words, as does `out`.
        check("cuMemcpyDtoH_v2", unsafe {
            sys::cuMemcpyDtoH_v2(host.as_mut_ptr().cast(), self.out, THREADS as usize * 4)
        })
        .unwrap();
        host
    }

    /// Asserts that every word holds what the kernel writes.
    fn assert_output(&self, when: &str) {
        let host = self.read();
        let wrong: Vec<_> = (0..THREADS)
            .filter(|&i| host[i as usize] != i * 3 + 1)
            .take(4)
            .map(|i| (i, host[i as usize]))
            .collect();
        assert!(
            wrong.is_empty(),
            "{when}: output words (index, value) not written: {wrong:?}"
        );
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // Whatever a failed test left running finishes before its memory
        // and module go.
        let _ = self.context.synchronize();
        // SAFETY: both were made in `new`, are released once, and no work
        // that uses them is pending (synchronized above).
        unsafe {
            sys::cuMemFree_v2(self.out);
            sys::cuModuleUnload(self.module);
        }
    }
}

/// The runtime's stream, destroyed when the library lets go of it: the
/// keeper handed to `adopt_stream_with`.
struct OwnedStream(CUstream);

// SAFETY: a stream handle may be used from any thread; the only use is
// `cuStreamDestroy` in `drop`.
unsafe impl Send for OwnedStream {}

impl Drop for OwnedStream {
    fn drop(&mut self) {
        // SAFETY: made by `Runtime::stream` and destroyed once, here; the
        // queue drops its keeper with the stream's context current, after
        // its last use of the stream.
        unsafe { sys::cuStreamDestroy_v2(self.0) };
    }
}

fn destroy(context: &Arc<CudaContext>, stream: CUstream) {
    context.bind().unwrap();
    // SAFETY: made by `Runtime::stream`, destroyed once; no clone of a queue
    // adopting it is left (the caller's).
    check("cuStreamDestroy_v2", unsafe {
        sys::cuStreamDestroy_v2(stream)
    })
    .unwrap();
}

fn tracker_on(context: &Arc<CudaContext>, queue: &CudaQueue) -> Retiring {
    let memory = Arc::new(CudaMemory::new(context));
    RetiringTracker::new(memory, queue.clone(), Config::default()).unwrap()
}

/// Publishes the library's marker: a use of its own, behind whatever the
/// runtime enqueued before.
fn marker(tracker: &mut Retiring, queue: &CudaQueue) -> sigretire_tracker::Acquired {
    let index = queue.reserve().unwrap();
    let acquired = tracker
        .acquire(Request::packet(index).barrier(true))
        .unwrap();
    queue.publish(acquired.publication, Work::Marker).unwrap();
    acquired
}

#[test]
fn the_librarys_marker_completes_only_after_the_runtimes_own_kernel_on_its_stream() {
    let Some(context) = gpu() else { return };
    let runtime = Runtime::new(&context);
    let stream = runtime.stream();
    // SAFETY: a live stream of this context, destroyed at the end, once the
    // queue and the tracker (its only clone) are gone.
    let queue = unsafe { context.adopt_stream(stream) }.unwrap();
    assert!(queue.is_adopted());
    assert_eq!(
        queue.as_raw(),
        stream,
        "the runtime's stream, not a new one"
    );
    let mut tracker = tracker_on(&context, &queue);
    let event = RawEvent::new(&context);
    for round in 0..ROUNDS {
        let launched = Instant::now();
        runtime.launch(stream);
        let done = marker(&mut tracker, &queue);
        event.record(stream);
        // Right after the launch the kernel spins for 2 ms: nothing behind
        // it can have run.
        assert_eq!(
            tracker.query(&done.ticket).unwrap(),
            Status::Pending,
            "round {round}: the marker behind a running kernel"
        );
        assert_eq!(
            event.query(),
            CUresult::CUDA_ERROR_NOT_READY,
            "round {round}: CUDA's event behind the marker"
        );
        let waited = tracker
            .waiter()
            .wait(&done.ticket, WAIT, WaitPolicy::spin());
        // The second witnesses, asked at once: CUDA's own event, recorded
        // after the marker, and the kernel's output, written before it.
        let cuda = event.query();
        let elapsed = launched.elapsed();
        assert_eq!(waited, Ok(Status::Complete), "round {round}");
        assert_eq!(
            cuda,
            CUresult::CUDA_SUCCESS,
            "round {round}: the library said complete, so the event behind its marker must be"
        );
        assert!(
            elapsed >= SPIN,
            "round {round}: complete after {elapsed:?}, before the kernel's {SPIN:?} spin"
        );
        runtime.assert_output(&format!("round {round}"));
        println!(
            "round {round}: the runtime's kernel and the library's marker done in {elapsed:?}"
        );
    }
    // Every publication was a marker: no kernel of the library ran.
    assert_eq!(queue.failure(), None);
    drop(tracker);
    drop(queue);
    destroy(&context, stream);
}

#[test]
fn the_queue_layer_times_and_synchronizes_a_runtimes_own_work_on_its_adopted_stream() {
    let Some(context) = gpu() else { return };
    let runtime = Runtime::new(&context);
    let stream = runtime.stream();
    // The queue layer may let go of its last clone on a thread of its own,
    // later: the stream's destruction goes with the queue.
    // SAFETY: a live stream of this context, destroyed only by the keeper.
    let queue = unsafe { context.adopt_stream_with(stream, OwnedStream(stream)) }.unwrap();
    let config = QueueConfig {
        wait_timeout: Some(WAIT),
        ..QueueConfig::default()
    };
    let device = Device::new(
        DeviceConfig::default(),
        tracker_on(&context, &queue),
        config,
    )
    .unwrap();
    drop(queue); // the device's tracker holds the queue now
    let host_queue = device.default_queue();
    let cuda_start = RawEvent::new(&context);
    let cuda_stop = RawEvent::new(&context);
    for round in 0..ROUNDS {
        let start = host_queue.record_event().unwrap();
        cuda_start.record(stream);
        runtime.launch(stream);
        cuda_stop.record(stream);
        let stop = host_queue.record_event().unwrap();
        let command = host_queue.submit(Work::Marker).unwrap();
        assert_eq!(
            stop.query(),
            Status::Pending,
            "round {round}: an event behind a running kernel"
        );
        assert_eq!(
            host_queue.query().unwrap(),
            Status::Pending,
            "round {round}"
        );
        host_queue.synchronize().unwrap();
        assert_eq!(
            cuda_stop.query(),
            CUresult::CUDA_SUCCESS,
            "round {round}: synchronize returned, so CUDA's event before it must be complete"
        );
        assert!(command.status().is_done() && stop.query() == Status::Complete);
        runtime.assert_output(&format!("round {round}"));
        let ours = start.elapsed_to(&stop).unwrap();
        let cudas = cuda_stop.since(&cuda_start);
        println!(
            "round {round}: the runtime's kernel timed by the library's events {:.3} ms, by CUDA's {:.3} ms",
            ours.as_secs_f64() * 1e3,
            cudas.as_secs_f64() * 1e3
        );
        // The library's events (the GPU's `%globaltimer`, stamped by kernels
        // of its own) enclose CUDA's, which enclose the 2 ms spin.
        assert!(
            ours >= SPIN && ours < SPIN * 10,
            "round {round}: the library's events span {ours:?} around a {SPIN:?} kernel"
        );
        assert!(
            cudas >= SPIN.mul_f64(0.99),
            "round {round}: CUDA says {cudas:?}"
        );
    }
    assert_eq!(host_queue.query().unwrap(), Status::Complete);
}

#[test]
fn dropping_an_adopted_queue_leaves_the_stream_to_the_runtime() {
    let Some(context) = gpu() else { return };
    let runtime = Runtime::new(&context);
    let stream = runtime.stream();
    // SAFETY: a live stream of this context, destroyed at the end, after the
    // queue and the tracker are gone.
    let queue = unsafe { context.adopt_stream(stream) }.unwrap();
    let mut tracker = tracker_on(&context, &queue);
    runtime.launch(stream);
    let done = marker(&mut tracker, &queue);
    assert_eq!(tracker.query(&done.ticket).unwrap(), Status::Pending);
    // Dropped with the kernel and the marker still pending: no wait, no
    // destruction (the context keeps a fence behind the marker instead).
    let dropped = Instant::now();
    drop(tracker);
    drop(queue);
    assert!(
        dropped.elapsed() < SPIN,
        "dropping an adopted queue waited {:?} for the runtime's work",
        dropped.elapsed()
    );
    // The stream is still the runtime's: it launches and synchronizes.
    runtime.launch(stream);
    context.bind().unwrap();
    // SAFETY: the stream is live (never destroyed by the queue); context bound.
    check("cuStreamSynchronize", unsafe {
        sys::cuStreamSynchronize(stream)
    })
    .unwrap();
    runtime.assert_output("after the queue was dropped");
    // And it can be adopted again, by a new queue, with a new tracker.
    // SAFETY: as above.
    let again = unsafe { context.adopt_stream(stream) }.unwrap();
    let mut tracker = tracker_on(&context, &again);
    runtime.launch(stream);
    let done = marker(&mut tracker, &again);
    let waited = tracker
        .waiter()
        .wait(&done.ticket, WAIT, WaitPolicy::spin());
    assert_eq!(waited, Ok(Status::Complete));
    runtime.assert_output("adopted again");
    drop(tracker);
    drop(again);
    destroy(&context, stream);
}

#[test]
fn the_context_waits_for_an_adopted_streams_last_marker_before_freeing_its_memory() {
    let Some(context) = gpu() else { return };
    let runtime = Runtime::new(&context);
    let stream = runtime.stream();
    // The library's side on a context handle of its own (the same primary
    // context, a separate arena), so that dropping it frees the signals and
    // the progress word while the runtime still holds its own handle.
    let library = CudaContext::new(0).unwrap();
    // SAFETY: a live stream of this (the primary) context, destroyed at the
    // end, after every handle of the library's is gone.
    let queue = unsafe { library.adopt_stream(stream) }.unwrap();
    let mut tracker = tracker_on(&library, &queue);
    // A long kernel: the marker behind it is far from written when every
    // handle of the library's is dropped.
    let long = SPIN * 25;
    runtime.launch_for(stream, long);
    let launched = Instant::now();
    let done = marker(&mut tracker, &queue);
    assert_eq!(tracker.query(&done.ticket).unwrap(), Status::Pending);
    drop((tracker, queue));
    let dropped = Instant::now();
    drop(library);
    let freed = launched.elapsed();
    println!(
        "the library's context went {:?} after the drop, {freed:?} after a {long:?} launch",
        dropped.elapsed()
    );
    // The marker's writes landed in memory that still existed: freed only
    // once the fence behind them completed, so after the kernel.
    assert!(
        freed >= long.mul_f64(0.95),
        "the library's pinned memory was freed {freed:?} after a {long:?} kernel was launched"
    );
    // Nothing faulted: the stream and the context carry on.
    runtime.launch(stream);
    context.bind().unwrap();
    // SAFETY: the stream is live; the context bound.
    check("cuStreamSynchronize", unsafe {
        sys::cuStreamSynchronize(stream)
    })
    .unwrap();
    runtime.assert_output("after the library's context went");
    destroy(&context, stream);
}

#[test]
fn publishing_on_an_adopted_stream_costs_one_capture_question_more() {
    let Some(context) = gpu() else { return };
    let runtime = Runtime::new(&context);
    let stream = runtime.stream();
    // SAFETY: a live stream of this context, destroyed at the end, after the
    // queue and the tracker are gone.
    let adopted = unsafe { context.adopt_stream(stream) }.unwrap();
    let owned = context.create_queue().unwrap();
    let mut p50 = Vec::new();
    for queue in [&owned, &adopted] {
        let mut tracker = tracker_on(&context, queue);
        let mut samples = Vec::with_capacity(2000);
        for i in 0..2000 {
            let started = Instant::now();
            let done = marker(&mut tracker, queue);
            samples.push(started.elapsed());
            // Retire in batches, far below the tracker's back-pressure.
            if i % 100 == 99 {
                let waited = tracker
                    .waiter()
                    .wait(&done.ticket, WAIT, WaitPolicy::spin());
                assert_eq!(waited, Ok(Status::Complete));
                tracker.poll();
            }
        }
        queue.synchronize().unwrap();
        samples.sort();
        p50.push(samples[samples.len() / 2]);
    }
    println!(
        "reserve + acquire + publish of a marker, p50 of 2000: owned stream {:.2} us, \
         adopted stream {:.2} us (one cuStreamIsCapturing more)",
        p50[0].as_secs_f64() * 1e6,
        p50[1].as_secs_f64() * 1e6
    );
    drop(adopted);
    destroy(&context, stream);
}

#[test]
fn default_streams_and_streams_of_other_contexts_are_typed_errors() {
    let Some(context) = gpu() else { return };
    for handle in [0usize, 1, 2] {
        // SAFETY: default-stream handles are refused before any driver call.
        let refused = unsafe { context.adopt_stream(handle as CUstream) };
        assert!(
            matches!(refused, Err(Error::DefaultStream { handle: h }) if h == handle),
            "handle {handle}: {refused:?}"
        );
    }
    println!("the null stream: {}", Error::DefaultStream { handle: 0 });
    // A stream of a context of the test's own (not the primary one).
    let mut device = 0;
    // SAFETY: the driver is initialised; `device` is a live local.
    check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut device, 0) }).unwrap();
    let mut other = core::ptr::null_mut();
    // SAFETY: `device` is valid; `other` is a live local. The new context
    // becomes current on this thread, and is popped below.
    check("cuCtxCreate", unsafe { create_context(&mut other, device) }).unwrap();
    let mut stream = core::ptr::null_mut();
    // SAFETY: `other` is current; `stream` is a live local.
    check("cuStreamCreate", unsafe {
        sys::cuStreamCreate(
            &mut stream,
            sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
        )
    })
    .unwrap();
    let mut popped = core::ptr::null_mut();
    // SAFETY: pops the context pushed by `cuCtxCreate`.
    check("cuCtxPopCurrent_v2", unsafe {
        sys::cuCtxPopCurrent_v2(&mut popped)
    })
    .unwrap();
    // SAFETY: a live stream (of another context), destroyed below.
    let refused = unsafe { context.adopt_stream(stream) };
    match refused {
        Err(Error::ForeignStream {
            stream_context,
            context: ours,
        }) => {
            assert_eq!(stream_context, other as usize);
            assert_eq!(ours, context.as_raw() as usize);
            println!("another context's stream: {}", refused.unwrap_err());
        }
        other => panic!("another context's stream: {other:?}"),
    }
    // SAFETY: `other` and its stream are the test's, destroyed once; the
    // stream is destroyed while its context is current.
    unsafe {
        check("cuCtxPushCurrent_v2", sys::cuCtxPushCurrent_v2(other)).unwrap();
        check("cuStreamDestroy_v2", sys::cuStreamDestroy_v2(stream)).unwrap();
        check("cuCtxPopCurrent_v2", sys::cuCtxPopCurrent_v2(&mut popped)).unwrap();
        check("cuCtxDestroy_v2", sys::cuCtxDestroy_v2(other)).unwrap();
    }
    // Still usable afterwards: the library binds its own context again.
    context.create_queue().unwrap().synchronize().unwrap();
}

#[test]
fn a_stream_being_captured_is_refused_and_a_capture_fails_the_queue() {
    let Some(context) = gpu() else { return };
    let runtime = Runtime::new(&context);
    let stream = runtime.stream();
    let begin = || {
        context.bind().unwrap();
        // SAFETY: a live stream of the bound context, not being captured.
        check("cuStreamBeginCapture_v2", unsafe {
            sys::cuStreamBeginCapture_v2(
                stream,
                CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
            )
        })
        .unwrap();
    };
    let end = || {
        context.bind().unwrap();
        let mut graph = core::ptr::null_mut();
        // SAFETY: the stream is being captured (begun above); `graph` is a
        // live local, destroyed at once, never launched.
        unsafe {
            check(
                "cuStreamEndCapture",
                sys::cuStreamEndCapture(stream, &mut graph),
            )
            .unwrap();
            if !graph.is_null() {
                sys::cuGraphDestroy(graph);
            }
        }
    };
    begin();
    // SAFETY: a live stream of this context, destroyed at the end.
    let refused = unsafe { context.adopt_stream(stream) };
    assert!(
        matches!(refused, Err(Error::StreamCapturing)),
        "{refused:?}"
    );
    end();
    // SAFETY: as above.
    let queue = unsafe { context.adopt_stream(stream) }.unwrap();
    let mut tracker = tracker_on(&context, &queue);
    let first = marker(&mut tracker, &queue);
    assert_eq!(
        tracker
            .waiter()
            .wait(&first.ticket, WAIT, WaitPolicy::spin()),
        Ok(Status::Complete)
    );
    begin();
    let index = queue.reserve().unwrap();
    let captured = tracker
        .acquire(Request::packet(index).barrier(true))
        .unwrap();
    let published = queue.publish(captured.publication, Work::Marker);
    end();
    match &published {
        Err(QueueError::Failed(text)) => assert!(text.contains("captured"), "{text}"),
        other => panic!("a publication into a capture: {other:?}"),
    }
    assert_eq!(
        queue.failure().map(|f| f.error),
        Some(Error::StreamCapturing)
    );
    assert_eq!(queue.failure().map(|f| f.index), Some(index));
    // Nothing was captured of the library's, and nothing ran: the use is
    // failed by the caller, as for any queue failure.
    tracker.fail_submission(&captured.ticket, 0).unwrap();
    drop(tracker);
    drop(queue);
    destroy(&context, stream);
}

#[test]
fn a_cudarc_stream_is_adopted_safely_and_kept_alive_by_the_queue() {
    let Some(context) = gpu() else { return };
    let runtime = Runtime::new(&context);
    // The driver is there (`gpu` said so), so cudarc's safe API can open it.
    let cudarc = cudarc::driver::CudaContext::new(0).expect("cudarc's context");
    let stream = cudarc.new_stream().expect("a cudarc stream");
    let raw = stream.cu_stream();
    let queue = context.adopt_cudarc_stream(stream).unwrap();
    // The queue holds the only `Arc` of the stream now.
    assert_eq!(queue.as_raw(), raw);
    let mut tracker = tracker_on(&context, &queue);
    for round in 0..ROUNDS {
        runtime.launch(queue.as_raw());
        let done = marker(&mut tracker, &queue);
        assert_eq!(tracker.query(&done.ticket).unwrap(), Status::Pending);
        assert_eq!(
            tracker
                .waiter()
                .wait(&done.ticket, WAIT, WaitPolicy::spin()),
            Ok(Status::Complete)
        );
        runtime.assert_output(&format!("round {round}"));
    }
    let refused = context.adopt_cudarc_stream(cudarc.default_stream());
    assert!(matches!(refused, Err(Error::DefaultStream { handle: 0 })));
    let refused = context.adopt_cudarc_stream(cudarc.per_thread_stream());
    assert!(matches!(refused, Err(Error::DefaultStream { handle: 2 })));
    // The last clone goes: the stream with it (cudarc destroys it).
    drop(tracker);
    drop(queue);
}

/// A queue layer device on `queue` (adopted or owned), waits bounded.
fn layer_device(context: &Arc<CudaContext>, queue: &CudaQueue) -> Device<Retiring> {
    let config = QueueConfig {
        wait_timeout: Some(WAIT),
        ..QueueConfig::default()
    };
    Device::new(DeviceConfig::default(), tracker_on(context, queue), config).unwrap()
}

/// The library's newest command on an adopted stream is done; then the
/// runtime launches a kernel of its own there. Synchronize, query and a
/// cross-queue wait must all see that kernel (nothing the library knows
/// of its own commands proves the stream idle), through the adopted
/// queue of `adopt_stream` and of `adopt_cudarc_stream` alike.
#[test]
fn the_runtimes_work_after_the_newest_command_is_not_skipped_on_an_adopted_stream() {
    let Some(context) = gpu() else { return };
    let runtime = Runtime::new(&context);
    let raw = runtime.stream();
    let cudarc_context = cudarc::driver::CudaContext::new(0).unwrap();
    let cudarc_stream = cudarc_context.new_stream().unwrap();
    let cudarc_raw = cudarc_stream.cu_stream();
    // SAFETY: a live stream of this context, destroyed by the test after
    // every queue adopting it is gone.
    let adopted_raw = unsafe { context.adopt_stream(raw) }.unwrap();
    let adoptions = [
        ("adopt_stream", adopted_raw, raw),
        (
            "adopt_cudarc_stream",
            context.adopt_cudarc_stream(cudarc_stream.clone()).unwrap(),
            cudarc_raw,
        ),
    ];
    let long = Duration::from_millis(1);
    let mut early = 0;
    let rounds = 100;
    for (how, queue, stream) in adoptions {
        let device = layer_device(&context, &queue);
        let adopted = device.default_queue().clone();
        let consumer = device
            .create_queue(
                tracker_on(&context, &context.create_queue().unwrap()),
                QueueConfig {
                    wait_timeout: Some(WAIT),
                    ..QueueConfig::default()
                },
            )
            .unwrap();
        let after_runtime = RawEvent::new(&context);
        for round in 0..rounds {
            let command = adopted.launch_empty().unwrap();
            command.wait().unwrap();
            runtime.launch_for(stream, long);
            after_runtime.record(stream);
            let (query, elided) = match round % 3 {
                0 => (Some(adopted.query().unwrap()), None),
                1 => (
                    None,
                    Some(consumer.wait_queue(&adopted).unwrap().packets() == 0),
                ),
                _ => (None, None),
            };
            if elided == Some(true) {
                early += 1;
                eprintln!("{how} round {round}: a cross-queue wait elided the runtime's kernel");
            }
            if query == Some(Status::Complete) && after_runtime.query() != CUresult::CUDA_SUCCESS {
                early += 1;
                eprintln!("{how} round {round}: query answered Complete while the kernel ran");
            }
            adopted.synchronize().unwrap();
            if after_runtime.query() != CUresult::CUDA_SUCCESS {
                early += 1;
                eprintln!("{how} round {round}: synchronize returned while the kernel ran");
            }
            consumer.synchronize().unwrap();
            runtime.assert_output(&format!("{how} round {round}"));
        }
        drop((adopted, consumer));
        drop(device);
    }
    println!("adopted streams: {rounds} rounds each, early answers: {early}");
    assert_eq!(early, 0, "answers before the runtime's work finished");
    destroy(&context, raw);
}

/// On an owned stream, work the library enqueues without publishing it
/// (a native event wait, an untracked empty kernel) and work a
/// runtime enqueues through the raw handle and announces, is waited for by
/// the events, synchronizes and cross-queue waits recorded after it.
#[test]
fn work_enqueued_beside_the_layer_on_an_owned_stream_is_not_skipped() {
    let Some(context) = gpu() else { return };
    let runtime = Runtime::new(&context);
    let queue = context.create_queue().unwrap();
    let device = layer_device(&context, &queue);
    let owned = device.default_queue();
    let consumer = device
        .create_queue(
            tracker_on(&context, &context.create_queue().unwrap()),
            QueueConfig {
                wait_timeout: Some(WAIT),
                ..QueueConfig::default()
            },
        )
        .unwrap();
    let gate_queue = context.create_queue().unwrap();
    let busy = busy_kernel(&context, Duration::from_millis(2), 1).unwrap();
    let short = busy_kernel(&context, Duration::from_micros(200), 1).unwrap();
    let rounds = 20;
    let mut early = 0;
    for round in 0..rounds {
        // A native event behind a 2 ms kernel on another stream; the owned
        // stream waits for it, then an event is recorded.
        owned.launch_empty().unwrap().wait().unwrap();
        let index = gate_queue.reserve().unwrap();
        gate_queue
            .publish(
                sigretire_tracker::backend::Publication::unsignalled(index, true),
                busy.work(),
            )
            .unwrap();
        let native = RawEvent::new(&context);
        native.record(gate_queue.as_raw());
        native.make_wait(&queue);
        let event = owned.record_event().unwrap();
        event.synchronize().unwrap();
        if native.query() != CUresult::CUDA_SUCCESS {
            early += 1;
            eprintln!("round {round}: the event completed before the stream's native wait");
        }
        // The library's own untracked launch (the empty kernel, which
        // announces itself) behind a 200 us kernel, a native event after it
        // as the witness.
        owned.launch(short.raw()).unwrap();
        queue.launch_empty().unwrap();
        let witness = RawEvent::new(&context);
        witness.record(queue.as_raw());
        let event = owned.record_event().unwrap();
        event.synchronize().unwrap();
        if witness.query() != CUresult::CUDA_SUCCESS {
            early += 1;
            eprintln!("round {round}: the event completed before the untracked launch ran");
        }
        // The runtime's own kernel on the raw handle, announced.
        owned.synchronize().unwrap();
        runtime.launch_for(queue.as_raw(), Duration::from_millis(1));
        queue.note_foreign_work();
        let witness = RawEvent::new(&context);
        witness.record(queue.as_raw());
        let elided = consumer.wait_queue(owned).unwrap().packets() == 0;
        owned.synchronize().unwrap();
        if elided || witness.query() != CUresult::CUDA_SUCCESS {
            early += 1;
            eprintln!("round {round}: the raw handle's announced kernel was skipped");
        }
        consumer.synchronize().unwrap();
        runtime.assert_output(&format!("round {round}"));
    }
    println!("owned streams: {rounds} rounds, early answers: {early}");
    assert_eq!(early, 0);
}

/// `cuCtxCreate` of the build's CUDA headers: `_v2` up to 12.x, `_v4` (with
/// no creation parameters) from 13.0 on, which dropped the others.
///
/// # Safety
/// `device` is a device handle; `context` is writable.
#[cfg(not(any(
    feature = "cuda-13000",
    feature = "cuda-13010",
    feature = "cuda-13020",
    feature = "cuda-13030",
    feature = "cuda-13040"
)))]
unsafe fn create_context(context: &mut sys::CUcontext, device: sys::CUdevice) -> sys::CUresult {
    // SAFETY: the caller's contract.
    unsafe { sys::cuCtxCreate_v2(context, 0, device) }
}

/// As above, for CUDA 13's headers.
///
/// # Safety
/// As above.
#[cfg(any(
    feature = "cuda-13000",
    feature = "cuda-13010",
    feature = "cuda-13020",
    feature = "cuda-13030",
    feature = "cuda-13040"
))]
unsafe fn create_context(context: &mut sys::CUcontext, device: sys::CUdevice) -> sys::CUresult {
    // SAFETY: the caller's contract; no creation parameters is allowed.
    unsafe { sys::cuCtxCreate_v4(context, core::ptr::null_mut(), 0, device) }
}
