//! Shared workloads for the benchmarks, so the criterion benches, the
//! instruction counts and the `sigbench` binary measure the same thing.

pub mod workload;
