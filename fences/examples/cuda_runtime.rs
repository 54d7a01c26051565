//! A CUDA runtime on cudarc that keeps its kernels and its stream, and uses
//! the queue layer only for completion, events and synchronize.
//!
//! The "runtime" here is cudarc's context and stream, and a few raw driver
//! calls: it JIT-loads a PTX kernel of its own (each thread spins on the
//! GPU's clock, then writes `out[i] = i * 7 + round`) and launches it on
//! its stream with `cuLaunchKernel`. It hands the stream over in one call
//! (`sigretire_cuda::queue::adopt`), and a queue-layer device runs on it:
//! events recorded around the runtime's launches, a marker submitted after
//! them, queries, synchronize, and the GPU time between two events. The
//! output the runtime reads back is checked against what its kernel writes.
//!
//! ```sh
//! cargo run --example cuda_runtime -p sigretire-queue
//! ```
//!
//! Without an NVIDIA driver or GPU it prints the library's typed refusal and
//! exits 0.

mod cuda_support;

use core::ffi::{CStr, c_void};
use cuda_support::Failure;
use sigretire_cuda::cudarc::driver::sys::{self, CUdeviceptr, CUfunction, CUmodule, CUstream};
use sigretire_cuda::cudarc::driver::{CudaContext as CudarcContext, CudaStream};
use sigretire_cuda::queue::{self, DeviceConfig, QueueConfig, Status, Work};
use sigretire_cuda::{CudaContext, check};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// The runtime's kernel (the example's own PTX; nothing of the library's).
const PTX: &CStr = c"
.version 7.0
.target sm_50
.address_size 64

.visible .entry scale_after_spin(
    .param .u64 scale_out,
    .param .u32 scale_n,
    .param .u32 scale_round,
    .param .u64 scale_spin_ns
)
{
    .reg .pred  %p<3>;
    .reg .b32   %r<9>;
    .reg .b64   %rd<8>;

    ld.param.u64            %rd1, [scale_out];
    ld.param.u32            %r1, [scale_n];
    ld.param.u32            %r7, [scale_round];
    ld.param.u64            %rd2, [scale_spin_ns];
    mov.u32                 %r2, %ctaid.x;
    mov.u32                 %r3, %ntid.x;
    mov.u32                 %r4, %tid.x;
    mad.lo.u32              %r5, %r2, %r3, %r4;
    setp.ge.u32             %p1, %r5, %r1;
    @%p1 bra                SCALE_DONE;
    mov.u64                 %rd3, %globaltimer;
SCALE_SPIN:
    mov.u64                 %rd4, %globaltimer;
    sub.u64                 %rd5, %rd4, %rd3;
    setp.lt.u64             %p2, %rd5, %rd2;
    @%p2 bra                SCALE_SPIN;
    mul.lo.u32              %r6, %r5, 7;
    add.u32                 %r6, %r6, %r7;
    cvta.to.global.u64      %rd6, %rd1;
    mul.wide.u32            %rd7, %r5, 4;
    add.u64                 %rd6, %rd6, %rd7;
    st.global.u32           [%rd6], %r6;
SCALE_DONE:
    ret;
}
";

/// Output words, and threads per block.
const WORDS: u32 = 1 << 16;
const BLOCK: u32 = 256;
/// How long each thread spins, one entry per round.
const SPINS: [Duration; 3] = [
    Duration::from_micros(500),
    Duration::from_millis(1),
    Duration::from_millis(2),
];

fn main() -> ExitCode {
    cuda_support::on_gpu("cuda_runtime", run)
}

fn run(context: &Arc<CudarcContext>) -> Result<(), Failure> {
    println!("{}", CudaContext::from_cudarc(context)?.report());
    let runtime = Runtime::new(context)?;
    let stream = context.new_stream()?;
    println!(
        "the runtime made its own stream {:?} (cudarc) and loaded its own kernel",
        stream.cu_stream()
    );

    // One call: a device whose default queue is the runtime's stream. The
    // queue holds the stream's `Arc`, so it outlives the library's use.
    let (device, host_queue) = queue::adopt(
        stream.clone(),
        DeviceConfig::default(),
        QueueConfig::default(),
    )?;
    println!(
        "adopted: the library publishes on that stream (adopted: {}), never destroys it",
        queue::is_adopted(&host_queue)
    );

    println!();
    println!(
        "{:>5}  {:>8}  {:>22}  {:>16}  {:>14}",
        "round", "spin", "stop event at launch", "GPU time, events", "output words"
    );
    for (round, &spin) in (1u32..).zip(SPINS.iter()) {
        let start: queue::Event = host_queue.record_event()?;
        runtime.launch(&stream, round, spin)?;
        let stop = host_queue.record_event()?;
        // The runtime's kernel is spinning: the event behind it is pending.
        let at_launch = stop.query();
        // A marker after the runtime's work: a command to wait for.
        let command: queue::Command = host_queue.submit(Work::Marker)?;
        stop.synchronize()?;
        command.wait()?;
        let elapsed = start.elapsed_to(&stop)?;
        let correct = runtime.check(round)?;
        println!(
            "{round:>5}  {:>5.2} ms  {:>22}  {:>13.3} ms  {:>6} / {:<6}",
            spin.as_secs_f64() * 1e3,
            format!("{at_launch:?}"),
            elapsed.as_secs_f64() * 1e3,
            correct,
            WORDS,
        );
        if at_launch != Status::Pending || elapsed < spin || correct != WORDS as usize {
            return Err(format!(
                "round {round}: the event was {at_launch:?} at launch, the events spanned \
                 {elapsed:?} around a {spin:?} kernel, {correct} of {WORDS} words were right"
            )
            .into());
        }
    }
    host_queue.synchronize()?;
    println!();
    let stats = host_queue.stats();
    println!(
        "after synchronize the queue is {:?}: {} commands on the runtime's stream, {} of them events",
        host_queue.query()?,
        stats.commands,
        stats.markers,
    );
    // The queue lets go of the stream; cudarc destroys it with its last `Arc`.
    drop((device, host_queue));
    println!("every round's output was the runtime's kernel's, complete when the library said so");
    Ok(())
}

/// The runtime: its module, its kernel, its output buffer in device memory.
struct Runtime {
    context: Arc<CudarcContext>,
    module: CUmodule,
    kernel: CUfunction,
    out: CUdeviceptr,
}

impl Runtime {
    fn new(context: &Arc<CudarcContext>) -> Result<Self, Failure> {
        context.bind_to_thread()?;
        let mut module = core::ptr::null_mut();
        // SAFETY: the context is bound; the image is NUL-terminated PTX text
        // the driver reads during the call; `module` is a live local.
        check("cuModuleLoadData", unsafe {
            sys::cuModuleLoadData(&mut module, PTX.as_ptr().cast())
        })?;
        let mut runtime = Self {
            context: context.clone(),
            module,
            kernel: core::ptr::null_mut(),
            out: 0,
        };
        // SAFETY: `module` was just loaded; the name is NUL-terminated;
        // `kernel` is a live field.
        check("cuModuleGetFunction", unsafe {
            sys::cuModuleGetFunction(&mut runtime.kernel, module, c"scale_after_spin".as_ptr())
        })?;
        // SAFETY: the context is bound; `out` is a live field.
        check("cuMemAlloc", unsafe {
            sys::cuMemAlloc_v2(&mut runtime.out, WORDS as usize * 4)
        })?;
        Ok(runtime)
    }

    /// Clears the output, then launches the kernel, both on `stream`.
    fn launch(&self, stream: &CudaStream, round: u32, spin: Duration) -> Result<(), Failure> {
        self.context.bind_to_thread()?;
        let stream: CUstream = stream.cu_stream();
        // SAFETY: `out` holds `WORDS` 32-bit words; the stream is live.
        check("cuMemsetD32Async", unsafe {
            sys::cuMemsetD32Async(self.out, 0, WORDS as usize, stream)
        })?;
        let (mut out, mut n, mut round) = (self.out, WORDS, round);
        let mut spin_ns = spin.as_nanos() as u64;
        let mut params = [
            (&raw mut out).cast::<c_void>(),
            (&raw mut n).cast::<c_void>(),
            (&raw mut round).cast::<c_void>(),
            (&raw mut spin_ns).cast::<c_void>(),
        ];
        // SAFETY: the kernel is of the bound context's module and declares
        // exactly these four parameters (u64, u32, u32, u64), whose values
        // the driver copies during the call while the locals live; each
        // thread writes only its own word of `out`.
        let launched = check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                self.kernel,
                WORDS / BLOCK,
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
        });
        Ok(launched?)
    }

    /// Reads the output back and counts the words the kernel wrote right.
    fn check(&self, round: u32) -> Result<usize, Failure> {
        self.context.bind_to_thread()?;
        let mut host = vec![0u32; WORDS as usize];
        // SAFETY: `host` and `out` both hold `WORDS` words; the kernel that
        // writes `out` is done (the caller synchronized).
        check("cuMemcpyDtoH", unsafe {
            sys::cuMemcpyDtoH_v2(host.as_mut_ptr().cast(), self.out, WORDS as usize * 4)
        })?;
        Ok((0..WORDS)
            .filter(|&i| host[i as usize] == i * 7 + round)
            .count())
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // Nothing of the runtime's may still run when its memory goes.
        let _ = self.context.synchronize();
        // SAFETY: both were made in `new` and are released once; no work
        // that uses them is pending (synchronized above).
        unsafe {
            if self.out != 0 {
                sys::cuMemFree_v2(self.out);
            }
            sys::cuModuleUnload(self.module);
        }
    }
}
