//! The seed table's model columns do what they say: CLR's driving reads
//! device memory where CLR does (a query, an elapsed time) and ours does
//! not; the harness's synchronize sends a marker where CLR's `finish`
//! would; CLR's per-call host cost is charged to CLR's columns only, by
//! the calls each timed section makes. Counters and charges only, never
//! timings: host timings of the threaded simulator on a loaded 2-core
//! machine cannot settle a figure. (That device signals make a wait for a
//! kernel and the marker behind it faster on the MI300X profile is
//! `sim/tests/completion_cost.rs`'s, judged on the simulator's own
//! timestamps.)

use sigretire_bench::seed_table::{
    self, CLR_HOST_COST, Cell, Column, FITTED, Plan, SeedRow, Shape, UNSEEN,
};
use std::time::Duration;

fn plan(iterations: usize) -> Plan {
    Plan {
        iterations,
        warmup: 10,
        elapsed_iterations: 5,
        rounds: 1,
    }
}

fn row(shape: Shape) -> SeedRow {
    *FITTED
        .iter()
        .chain(UNSEEN.iter())
        .find(|r| r.shape == shape)
        .expect("a row of that shape")
}

fn cell(column: Column, shape: Shape, iterations: usize) -> Cell {
    seed_table::cell(column, &row(shape), plan(iterations)).unwrap()
}

#[test]
fn clr_queries_read_the_signal_and_ours_read_nothing() {
    let loads = |column| cell(column, Shape::EventQuery, 50).device_loads_per_call;
    assert_eq!(loads(Column::ClrRetiring), 1.0, "one PCIe read per query");
    assert_eq!(loads(Column::Ours), 0.0, "known complete: no read");
    assert_eq!(loads(Column::Legacy), 0.0, "host signals: no PCIe at all");
}

#[test]
fn clr_elapsed_time_reads_both_events_and_ours_reads_nothing() {
    let elapsed = |column| cell(column, Shape::HarnessElapsedTime, 5);
    // Per event: its value, then its two timestamps one by one (as ROCr's
    // hsa_amd_profiling_get_dispatch_time reads them)...
    let clr = elapsed(Column::ClrRetiring);
    assert_eq!(clr.call_device_loads_per_call, 6.0);
    // ...then the harness's synchronize polls its marker at least once.
    assert!(clr.device_loads_per_call >= 7.0);
    assert_eq!(elapsed(Column::Legacy).device_loads_per_call, 0.0);
    let ours = elapsed(Column::Ours);
    assert_eq!(
        ours.device_loads_per_call, 0.0,
        "harvested into host memory, and no marker to poll"
    );
}

#[test]
fn a_synchronize_with_nothing_pending_sends_no_marker_and_reads_nothing() {
    for column in Column::ALL {
        let c = cell(column, Shape::StreamSynchronizeCompleted, 50);
        assert_eq!(c.markers_per_call, 0.0, "{column:?}");
        assert_eq!(c.device_loads_per_call, 0.0, "{column:?}");
    }
}

#[test]
fn a_synchronize_after_a_kernel_sends_one_marker_and_a_device_synchronize_no_more() {
    for shape in [Shape::StreamSynchronize, Shape::DeviceSynchronize] {
        for column in [Column::Legacy, Column::ClrRetiring] {
            assert_eq!(
                cell(column, shape, 50).markers_per_call,
                1.0,
                "{shape:?} {column:?}: the null stream's marker; the other stream has no last command"
            );
        }
    }
}

#[test]
fn the_harness_synchronize_after_a_done_event_sends_a_marker_with_device_signals_only() {
    // The event's marker was waited on before the timed query: with host
    // signals CLR's finish waits on it (already done) and sends nothing;
    // with device signals its batch is still open and finish forces a
    // marker.
    assert_eq!(
        cell(Column::Legacy, Shape::HarnessQuery, 50).markers_per_call,
        0.0
    );
    let clr = cell(Column::ClrRetiring, Shape::HarnessQuery, 50);
    assert_eq!(clr.markers_per_call, 1.0);
    // The query's read, then at least one poll of the marker.
    assert_eq!(clr.call_device_loads_per_call, 1.0);
    assert!(clr.device_loads_per_call >= 2.0);
    // Ours knows the event complete: no marker, no read.
    let ours = cell(Column::Ours, Shape::HarnessQuery, 50);
    assert_eq!(ours.markers_per_call, 0.0);
    assert_eq!(ours.device_loads_per_call, 0.0);
}

#[test]
fn the_harness_record_sends_one_marker_with_host_signals_and_two_with_device_signals() {
    let markers = |column| cell(column, Shape::HarnessRecord, 50).markers_per_call;
    assert_eq!(
        markers(Column::Legacy),
        1.0,
        "the record's; finish waits on it"
    );
    assert_eq!(
        markers(Column::ClrRetiring),
        2.0,
        "the record's and finish's own"
    );
}

#[test]
fn clr_host_cost_is_charged_per_call_to_clr_columns_only() {
    let charge = |column, shape| cell(column, shape, 20).charge;
    for column in [Column::Legacy, Column::ClrRetiring] {
        assert_eq!(charge(column, Shape::EventQuery), CLR_HOST_COST.query);
        assert_eq!(
            charge(column, Shape::StreamSynchronizeCompleted),
            CLR_HOST_COST.synchronize
        );
        // The event's synchronize, then the harness's.
        assert_eq!(
            charge(column, Shape::HarnessEventSynchronize { blocking: false }),
            CLR_HOST_COST.synchronize * 2
        );
        assert_eq!(
            charge(column, Shape::HarnessQuery),
            CLR_HOST_COST.query + CLR_HOST_COST.synchronize
        );
    }
    for shape in [
        Shape::EventQuery,
        Shape::HarnessQuery,
        Shape::DeviceSynchronize,
    ] {
        assert_eq!(charge(Column::Ours, shape), Duration::ZERO, "{shape:?}");
    }
}

#[test]
fn every_row_charges_at_least_one_call_and_only_queries_charge_the_query_cost() {
    for r in FITTED.iter().chain(UNSEEN.iter()) {
        let calls = r.shape.charged_calls();
        assert!(calls.queries + calls.synchronizes >= 1, "{}", r.name);
        let queries = matches!(r.shape, Shape::EventQuery | Shape::HarnessQuery);
        assert_eq!(calls.queries > 0, queries, "{}", r.name);
    }
}

#[test]
fn the_tables_are_measured_in_rounds_with_one_prediction_per_cell() {
    let plan = Plan {
        rounds: 2,
        ..plan(20)
    };
    let table = seed_table::measure(plan).unwrap();
    assert_eq!(table.rounds, 2);
    assert_eq!(
        (table.fitted.len(), table.unseen.len()),
        (FITTED.len(), UNSEEN.len())
    );
    for (predicted, row) in table.fitted.iter().zip(FITTED.iter()) {
        assert_eq!(predicted.row.name, row.name);
        assert!(predicted.legacy > 0.0 && predicted.clr > 0.0 && predicted.ours > 0.0);
    }
    assert!(table.markdown().contains("measured in 2 rounds"));
}
