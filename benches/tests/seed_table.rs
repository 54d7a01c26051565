//! The seed table's model columns do what they say: CLR's driving reads
//! device memory where CLR does (a query, an elapsed time) and ours does
//! not. (That device signals make a wait for a kernel and the marker behind
//! it faster on the MI300X profile is `sim/tests/completion_cost.rs`'s,
//! judged on the simulator's own timestamps: host timings of the threaded
//! simulator on a loaded 2-core machine cannot settle a direction.)

use sigretire_bench::seed_table::{self, Column, FITTED, Plan, Shape, UNSEEN};

fn plan(iterations: usize) -> Plan {
    Plan {
        iterations,
        warmup: 10,
        elapsed_iterations: 5,
    }
}

fn row(rows: &[seed_table::SeedRow], shape: Shape) -> seed_table::SeedRow {
    *rows
        .iter()
        .find(|r| r.shape == shape)
        .expect("a row of that shape")
}

#[test]
fn clr_queries_read_the_signal_and_ours_read_nothing() {
    let query = row(&FITTED, Shape::EventQuery);
    let loads = |column| {
        seed_table::cell(column, &query, plan(50))
            .unwrap()
            .device_loads_per_call
    };
    assert_eq!(loads(Column::ClrRetiring), 1.0, "one PCIe read per query");
    assert_eq!(loads(Column::Ours), 0.0, "known complete: no read");
    assert_eq!(loads(Column::Legacy), 0.0, "host signals: no PCIe at all");
}

#[test]
fn clr_elapsed_time_reads_both_events_and_ours_reads_nothing() {
    let elapsed = row(&UNSEEN, Shape::HarnessElapsedTime);
    let loads = |column| {
        seed_table::cell(column, &elapsed, plan(5))
            .unwrap()
            .device_loads_per_call
    };
    // Per event: its value, then its two timestamps one by one (as ROCr's
    // hsa_amd_profiling_get_dispatch_time reads them).
    assert_eq!(loads(Column::ClrRetiring), 6.0);
    assert_eq!(loads(Column::Ours), 0.0, "harvested into host memory");
}
