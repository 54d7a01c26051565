//! Criterion benches of the tracker's host work, retiring and baseline side
//! by side: per use at 64, 1024 and 16384 uses in flight; one probe; one
//! reclaim batch. `cargo bench -p sigbench -- --quick` runs them fast.
//! Wall-clock numbers on a shared 2-core machine are noisy: the instruction
//! counts of `benches/instructions.sh` are the figures of record.

// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sigretire_bench::workload::{BURST, Kind, Steady};
use sigretire_sim::backend::{stepped_tracker, submit_kernel};
use sigretire_tracker::{Config, Placement, Request, Tracker};
use std::time::{Duration, Instant};

fn per_use(c: &mut Criterion) {
    let mut group = c.benchmark_group("per_use");
    group.throughput(Throughput::Elements(BURST as u64));
    for in_flight in [64, 1024, 16384] {
        for kind in Kind::ALL {
            let mut steady = Steady::new(kind, in_flight);
            for _ in 0..4 * in_flight / BURST {
                steady.burst();
            }
            group.bench_function(BenchmarkId::new(kind.name(), in_flight), |b| {
                // Only the tracker's work is timed: the simulated GPU and the
                // packet writes happen outside the measured span.
                b.iter_custom(|bursts| {
                    let mut measured = Duration::ZERO;
                    let mut signals = [0u64; BURST];
                    for _ in 0..bursts {
                        steady.gpu_completes_burst();
                        let start = Instant::now();
                        for signal in &mut signals {
                            *signal = steady.acquire_one();
                        }
                        measured += start.elapsed();
                        for &signal in &signals {
                            steady.publish(signal);
                        }
                    }
                    measured
                })
            });
        }
    }
    group.finish();
}

/// A batch of `n` completed fences: the cost of proving it (one probe) and of
/// re-arming it (one reclaim walk).
fn probe_and_reclaim(c: &mut Criterion) {
    let config = Config {
        initial_size: 1024,
        signals: Placement::Device,
        ..Config::default()
    };
    let mut group = c.benchmark_group("batch");
    for n in [32usize, 256] {
        let setup = || {
            let (mut tracker, queue) = stepped_tracker(config).unwrap();
            for _ in 0..n {
                let index = queue.reserve().unwrap();
                let acquired = tracker
                    .acquire(Request::packet(index).barrier(true))
                    .unwrap();
                submit_kernel(&queue, index, acquired.signal, true);
            }
            queue.run_until_idle();
            (tracker, queue)
        };
        group.bench_function(BenchmarkId::new("probe", n), |b| {
            b.iter_batched(
                setup,
                |(mut t, q)| {
                    assert!(t.probe());
                    (t, q)
                },
                BatchSize::LargeInput,
            )
        });
        group.bench_function(BenchmarkId::new("reclaim", n), |b| {
            b.iter_batched(
                || {
                    let (mut t, q) = setup();
                    assert!(t.probe()); // proven, not yet re-armed
                    (t, q)
                },
                |(mut t, q)| {
                    assert_eq!(t.reclaim(), n);
                    (t, q)
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, per_use, probe_and_reclaim);
criterion_main!(benches);
