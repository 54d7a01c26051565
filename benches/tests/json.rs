//! The README's main job: `sigbench` runs on a machine with no GPU (the
//! simulator), prints its table, and writes JSON of the shape `report.rs` documents.

mod support;

use std::process::Command;
use support::{Run, sigbench};

const APIS: [&str; 10] = [
    "event_synchronize",
    "event_synchronize_blocking",
    "event_query",
    "stream_synchronize",
    "stream_synchronize_completed",
    "device_synchronize",
    "event_record",
    "event_elapsed_time",
    "event_synchronize_long",
    "event_synchronize_blocking_long",
];

#[test]
fn sigbench_prints_the_table_and_writes_json_of_the_documented_shape() {
    let Run {
        stdout,
        stderr,
        json,
    } = sigbench(
        "json",
        &[
            "--backend",
            "sim",
            "--iterations",
            "20",
            "--long-iterations",
            "5",
            "--warmup",
            "2",
            "--steady-uses",
            "256",
        ],
    );
    assert!(
        stdout.contains("event_query") && stdout.contains("steady state"),
        "{stdout}"
    );
    assert!(stderr.contains("[40/40]"), "progress is shown: {stderr}");
    assert!(
        stdout.contains("cpu us/op") && stdout.contains("slept"),
        "the CPU and slept columns are shown: {stdout}"
    );

    assert_eq!(json["backend"], "sim");
    assert!(json["machine"].as_str().is_some_and(|m| !m.is_empty()));
    let rows = json["rows"].as_array().expect("rows");
    // Every API for both trackers and both placements.
    assert_eq!(rows.len(), APIS.len() * 4);
    for row in rows {
        assert!(APIS.contains(&row["api"].as_str().unwrap()), "{row}");
        assert!(
            ["retiring", "baseline", "native"].contains(&row["tracker"].as_str().unwrap()),
            "{row}"
        );
        assert!(
            ["host", "device", "native"].contains(&row["signals"].as_str().unwrap()),
            "{row}"
        );
        for key in [
            "p50_us",
            "p10_us",
            "p90_us",
            "device_loads_per_op",
            "flushes_per_op",
        ] {
            assert!(
                row[key].as_f64().is_some_and(|v| v >= 0.0),
                "{key} in {row}"
            );
        }
        assert!(row["signals_created"].as_u64().is_some(), "{row}");
        // The waiting thread's own cost; the simulator's trackers count the
        // polls of every row.
        assert!(
            row["cpu_us_per_op"].as_f64().is_some_and(|v| v >= 0.0),
            "{row}"
        );
        assert!(row["slept"].as_bool().is_some(), "{row}");
        assert!(
            row["voluntary_switches_per_op"]
                .as_f64()
                .is_some_and(|v| v >= 0.0),
            "{row}"
        );
        assert!(
            row["polls_per_op"].as_f64().is_some_and(|v| v >= 0.0),
            "{row}"
        );
        assert!(
            row["p10_us"].as_f64() <= row["p50_us"].as_f64()
                && row["p50_us"].as_f64() <= row["p90_us"].as_f64()
        );
    }
    for tracker in ["retiring", "baseline"] {
        let s = &json["steady_state"][tracker];
        for key in [
            "device_loads_per_retired_use",
            "flushes_per_rearm",
            "allocations_per_use",
        ] {
            assert!(s[key].as_f64().is_some(), "{key} of {tracker}");
        }
        assert!(s["signals_created_after_warmup"].as_u64().is_some());
    }
    // The seed's shape on device-memory signals: the baseline reads the
    // signal to answer a completed event's query, ours does not.
    let cell = |api: &str, tracker: &str| {
        rows.iter()
            .find(|r| r["api"] == api && r["tracker"] == tracker && r["signals"] == "device")
            .unwrap()
            .clone()
    };
    assert_eq!(cell("event_query", "retiring")["device_loads_per_op"], 0.0);
    assert!(
        cell("event_query", "baseline")["device_loads_per_op"]
            .as_f64()
            .unwrap()
            >= 1.0
    );
    assert_eq!(
        cell("event_elapsed_time", "retiring")["device_loads_per_op"],
        0.0
    );
    assert!(
        cell("event_elapsed_time", "baseline")["device_loads_per_op"]
            .as_f64()
            .unwrap()
            >= 2.0
    );
    // The steady-state bars hold.
    let ours = &json["steady_state"]["retiring"];
    assert!(ours["device_loads_per_retired_use"].as_f64().unwrap() <= 1.0 / 32.0);
    assert!(ours["flushes_per_rearm"].as_f64().unwrap() <= 1.0 / 32.0);
    assert_eq!(ours["signals_created_after_warmup"], 0);
    assert_eq!(ours["allocations_per_use"], 0.0);
    // The long rows wait for a 1 ms kernel: they take about that long, and
    // a wait that polls at all polls more than once in that time.
    assert_eq!(json["long_iterations"], 5);
    assert!(json["long_rows_skipped"].is_null());
    assert!(json["cpu_floor_us"].as_f64().is_some_and(|v| v >= 0.0));
    for api in ["event_synchronize_long", "event_synchronize_blocking_long"] {
        for tracker in ["retiring", "baseline"] {
            let row = cell(api, tracker);
            assert_eq!(row["samples"], 5, "{row}");
            assert!(row["p50_us"].as_f64().unwrap() >= 900.0, "{row}");
            assert!(row["polls_per_op"].as_f64().unwrap() >= 1.0, "{row}");
        }
    }
    // A blocking-sync wait of a millisecond gives its core away: it sleeps.
    for tracker in ["retiring", "baseline"] {
        let row = cell("event_synchronize_blocking_long", tracker);
        assert_eq!(row["slept"], true, "{row}");
    }
}

#[test]
fn bad_options_are_reported_not_panicked() {
    let output = Command::new(env!("CARGO_BIN_EXE_sigbench"))
        .args(["--iterations", "many"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("not a number"));
    let output = Command::new(env!("CARGO_BIN_EXE_sigbench"))
        .args(["--backend", "tpu"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("unknown backend"));
}
