//! A kernel-argument ring on deferred release: a block of kernel arguments
//! is reused only once the queue layer has *proven* that the packets that
//! read it retired, with no signal read per block.
//!
//! Each launch takes a free block, writes its arguments, launches a kernel
//! that reads them, and hands the block back to the queue with
//! [`Command::release_after`](sigretire_queue::Command::release_after): the
//! block returns to the free list when the batch holding the command is
//! proven retired (one load of the batch's fence, or none, for the whole
//! batch). When no block is free, the ring awaits its oldest launch, which
//! completes that launch's batch and so frees its blocks.
//!
//! Checked against the simulator's ground truth twice: the kernel itself
//! checks, as it runs, that its block still holds the arguments it was
//! launched with (a block rewritten under a running kernel is caught by the
//! "GPU"), and the host checks, each time it reuses a block, that the
//! packet that last read it has truly completed. A naive ring that reuses
//! blocks round-robin without a proof is run last, for contrast.
//!
//! ```text
//! cargo run -p sigretire-queue --features sim --example kernarg_ring
//! ```

use sigretire_queue::sim::{Compute, CostProfile, Kernel, SimPlatform};
use sigretire_queue::tracker::backend::Dispatch;
use sigretire_queue::tracker::{Config, Placement, Work};
use sigretire_queue::{Command, DeviceConfig, QueueConfig};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Blocks in the ring.
const BLOCKS: usize = 256;
/// Bytes per block (a kernarg segment is 16-byte aligned; 256 is roomy).
const BLOCK_BYTES: u64 = 256;
/// Where the ring lives (a key the kernel looks blocks up by).
const RING_BASE: u64 = 0x10_0000;
/// Launches per run.
const LAUNCHES: u32 = 20_000;

/// The ring's memory: what each block holds now (its "arguments": the
/// launch number that wrote it).
struct Ring {
    blocks: Vec<AtomicU64>,
    /// Kernels that found their block rewritten while they ran.
    rewritten_under_a_kernel: AtomicU64,
}

impl Ring {
    fn block_of(address: u64) -> usize {
        ((address - RING_BASE) / BLOCK_BYTES) as usize
    }
}

/// A block lent to one launch; back on the free list when dropped.
struct Lease {
    block: usize,
    free: Arc<Mutex<Vec<usize>>>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.free.lock().unwrap().push(self.block);
    }
}

type SimCommand = Command<<sigretire_queue::sim::SimTracker as sigretire_queue::Tracker>::Memory>;

struct Outcome {
    launches: u32,
    rewritten_under_a_kernel: u64,
    reused_before_done: u64,
    device_loads: u64,
    elapsed: Duration,
}

fn run(proven: bool) -> Result<Outcome, sigretire_queue::Error> {
    let platform = SimPlatform::threaded(CostProfile::zero()).with_tracker_config(Config {
        signals: Placement::Device,
        ..Config::default()
    });
    let ring = Arc::new(Ring {
        blocks: (0..BLOCKS).map(|_| AtomicU64::new(u64::MAX)).collect(),
        rewritten_under_a_kernel: AtomicU64::new(0),
    });
    // The kernel reads its arguments as it completes, after running a while.
    let seen = ring.clone();
    let kernel = platform.sim().register_kernel(Kernel::Compute(
        Compute::new(move |dispatch| {
            let block = Ring::block_of(dispatch.kernarg_address);
            let launched_with = u64::from(dispatch.grid[0]);
            if seen.blocks[block].load(Ordering::Acquire) != launched_with {
                seen.rewritten_under_a_kernel
                    .fetch_add(1, Ordering::Relaxed);
            }
        })
        .runs_for(Duration::from_micros(5)),
    ));
    let device = platform.device(DeviceConfig::default(), QueueConfig::default())?;
    let queue = device.default_queue();
    let hardware = queue.with_tracker(|t| sigretire_queue::Tracker::queue(t).clone());
    let free = Arc::new(Mutex::new((0..BLOCKS).rev().collect::<Vec<_>>()));
    // The launches in flight, oldest first, with their blocks.
    let mut in_flight: VecDeque<SimCommand> = VecDeque::new();
    // The AQL index of the packet that last read each block.
    let mut last_reader: Vec<Option<u64>> = vec![None; BLOCKS];
    let mut reused_before_done = 0;
    let loads_before = platform.sim().counters().device.loads;
    let start = Instant::now();
    for launch in 1..=LAUNCHES {
        let block = if proven {
            loop {
                if let Some(block) = free.lock().unwrap().pop() {
                    break block;
                }
                match in_flight.pop_front() {
                    // Awaiting it completes its batch: the proof frees its
                    // block and every older one.
                    Some(oldest) => pollster::block_on(oldest.wait_async())?,
                    None => std::thread::yield_now(),
                }
            }
        } else {
            launch as usize % BLOCKS
        };
        if let Some(index) = last_reader[block]
            && !hardware.truth(index).is_none_or(|t| t.is_done())
        {
            reused_before_done += 1;
        }
        ring.blocks[block].store(u64::from(launch), Ordering::Release);
        let dispatch = Dispatch::new(kernel)
            .kernarg_address(RING_BASE + block as u64 * BLOCK_BYTES)
            .grid([launch, 1, 1])
            .workgroup([1, 1, 1]);
        let command = queue.submit(Work::Dispatch(dispatch))?;
        last_reader[block] = Some(command.aql_index());
        if proven {
            command.release_after(Lease {
                block,
                free: free.clone(),
            });
            in_flight.push_back(command);
        }
    }
    queue.synchronize()?;
    let elapsed = start.elapsed();
    assert!(platform.sim().violations().is_empty());
    Ok(Outcome {
        launches: LAUNCHES,
        rewritten_under_a_kernel: ring.rewritten_under_a_kernel.load(Ordering::Relaxed),
        reused_before_done,
        device_loads: platform.sim().counters().device.loads - loads_before,
        elapsed,
    })
}

fn main() -> Result<(), sigretire_queue::Error> {
    let proven = run(true)?;
    println!(
        "proven ring: {} launches over {BLOCKS} blocks in {:?}: {} blocks rewritten under a running kernel, \
         {} reused before their reader completed; {} device-memory loads ({:.4} per released block)",
        proven.launches,
        proven.elapsed,
        proven.rewritten_under_a_kernel,
        proven.reused_before_done,
        proven.device_loads,
        proven.device_loads as f64 / f64::from(proven.launches),
    );
    assert_eq!(proven.rewritten_under_a_kernel, 0);
    assert_eq!(proven.reused_before_done, 0);
    let naive = run(false)?;
    println!(
        "naive ring (round-robin, no proof): {} blocks rewritten under a running kernel, {} reused before their reader completed",
        naive.rewritten_under_a_kernel, naive.reused_before_done,
    );
    Ok(())
}
