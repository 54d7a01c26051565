//! `sigbench --callbacks` runs on a machine with no GPU (the simulator),
//! prints both tables and writes JSON with every row: our callbacks with
//! and without wake signals and with a wake relay, a task awaiting the same completion and a
//! thread blocked on it (with their CPU per wait), then our deferred
//! release at 1, 64 and 4096 blocks in flight, every released value seen
//! freed.

mod support;

use support::{Run, sigbench};

#[test]
fn sigbench_callbacks_prints_both_tables_and_writes_every_row() {
    let Run { stdout, json, .. } = sigbench(
        "callbacks",
        &[
            "--callbacks",
            "--backend",
            "sim",
            "--callback-samples",
            "10",
            "--release-values",
            "512",
        ],
    );
    assert!(
        stdout.contains("ours on_complete") && stdout.contains("ours release_after"),
        "{stdout}"
    );

    assert_eq!(json["backend"], "sim");
    assert_eq!(json["signals"], "device");
    let callbacks = json["callbacks"].as_array().expect("callbacks");
    let who: Vec<&str> = callbacks
        .iter()
        .map(|r| r["who"].as_str().unwrap())
        .collect();
    assert_eq!(
        who,
        [
            "ours",
            "ours_no_wake",
            "ours_relay",
            "ours_await",
            "ours_wait"
        ]
    );
    for row in callbacks {
        assert_eq!(row["samples"], 10, "{row}");
        let late = row["late_p50_us"].as_f64().unwrap();
        let gap = row["gap_p50_us"].as_f64().unwrap();
        // The next kernel (20 us) ends after the first one.
        assert!(late >= 0.0 && gap >= 20.0, "{row}");
        // A waiting thread's CPU is measured; a callback's is not.
        let waits = row["who"] == "ours_await" || row["who"] == "ours_wait";
        assert_eq!(row["waiter_cpu_p50_us"].is_f64(), waits, "{row}");
    }
    let releases = json["releases"].as_array().expect("releases");
    let blocks: Vec<u64> = releases
        .iter()
        .map(|r| r["blocks"].as_u64().unwrap())
        .collect();
    assert_eq!(blocks, [1, 64, 4096]);
    for row in releases {
        assert_eq!(row["who"], "ours", "{row}");
        // At least two rounds of blocks, each value freed.
        let values = row["values"].as_u64().unwrap();
        let blocks = row["blocks"].as_u64().unwrap();
        assert!(values >= 2 * blocks && values >= 512, "{row}");
        assert!(row["loads_per_value"].as_f64().unwrap() >= 0.0, "{row}");
        assert!(row["driver_calls_per_value"].is_null(), "{row}");
    }
}
