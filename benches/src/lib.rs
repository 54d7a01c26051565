//! sigbench: the project's main job, and the workloads its benchmarks share.
//!
//! - [`measure`]: the seed's event and synchronize table, generic over any
//!   tracker the queue layer runs on, and the steady-state counters.
//! - [`platform`] and [`platforms`]: the backends (ROCr, CUDA, the
//!   simulator), chosen best first.
//! - [`report`]: the table and the JSON.
//! - [`seed_table`]: the CLR change's MI300X tables beside the simulator's
//!   predictions (`sigbench --seed-table`).
//! - [`waits`]: how late a wait returns after its kernel's end, and the
//!   CPU it burns, for our spin, blocking and hybrid waits and CUDA's own
//!   (`sigbench --waits`).
//! - [`scaling`]: one thread's submissions while others wait, and the
//!   cost per operation from 1 to 64 queues (`sigbench --wait-scaling`).
//! - [`callbacks`]: how late a completion callback runs and what it costs
//!   the stream's later work, and what a deferred release costs per value,
//!   ours beside CUDA's host functions and the caching allocator's event
//!   queries (`sigbench --callbacks`).
//! - [`workload`]: the per-use workload of the criterion benches and of
//!   `benches/instructions.sh`.
//! - [`affinity`]: the simulated GPU's thread kept off the host thread's
//!   core.
//! - [`alloc`]: a counting allocator for the allocations-per-use bar.
//! - [`cpu`]: the calling thread's CPU time and voluntary context
//!   switches, read around every timed call.

pub mod affinity;
pub mod alloc;
pub mod callbacks;
pub mod cpu;
pub mod measure;
pub mod platform;
pub mod platforms;
pub mod report;
pub mod scaling;
pub mod seed_table;
pub mod waits;
pub mod workload;
