//! `sigbench --callbacks` runs on a machine with no GPU (the simulator),
//! prints both tables and writes JSON with every row: our callbacks with
//! and without wake signals, then our deferred release at 1, 64 and 4096
//! blocks in flight, every released value seen freed.

use serde_json::Value;
use std::process::Command;

#[test]
fn sigbench_callbacks_prints_both_tables_and_writes_every_row() {
    let dir = std::env::temp_dir().join(format!("sigbench-callbacks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("callbacks.json");
    let output = Command::new(env!("CARGO_BIN_EXE_sigbench"))
        .args([
            "--callbacks",
            "--backend",
            "sim",
            "--callback-samples",
            "10",
            "--release-values",
            "512",
            "--json",
        ])
        .arg(&path)
        .output()
        .expect("sigbench runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "sigbench failed:\n{stderr}");
    assert!(
        stdout.contains("ours on_complete") && stdout.contains("ours release_after"),
        "{stdout}"
    );
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(json["backend"], "sim");
    assert_eq!(json["signals"], "device");
    let callbacks = json["callbacks"].as_array().expect("callbacks");
    assert_eq!(callbacks.len(), 2, "{callbacks:#?}");
    for row in callbacks {
        assert_eq!(row["samples"], 10, "{row}");
        let late = row["late_p50_us"].as_f64().unwrap();
        let gap = row["gap_p50_us"].as_f64().unwrap();
        // The next kernel (20 us) ends after the first one.
        assert!(late >= 0.0 && gap >= 20.0, "{row}");
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
    std::fs::remove_dir_all(&dir).ok();
}
