//! `sigbench --waits` runs on a machine with no GPU (the simulator), prints
//! its table and writes JSON with every cell: three waiters at four kernel
//! lengths, then the two wrong guesses each.

use serde_json::Value;
use std::process::Command;

#[test]
fn sigbench_waits_prints_the_table_and_writes_every_cell() {
    let dir = std::env::temp_dir().join(format!("sigbench-waits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("waits.json");
    let output = Command::new(env!("CARGO_BIN_EXE_sigbench"))
        .args([
            "--waits",
            "--backend",
            "sim",
            "--wait-samples",
            "10",
            "--json",
        ])
        .arg(&path)
        .output()
        .expect("sigbench runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "sigbench failed:\n{stderr}");
    assert!(
        stdout.contains("ours hybrid") && stdout.contains("late p50 us"),
        "{stdout}"
    );
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(json["backend"], "sim");
    let rows = json["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 4 * 3 + 3 * 2, "{rows:#?}");
    for row in rows {
        let late = row["late_p50_us"].as_f64().unwrap();
        let cpu = row["cpu_us_per_wait"].as_f64().unwrap();
        let wall = row["wall_p50_us"].as_f64().unwrap();
        assert!(late >= 0.0 && cpu >= 0.0 && wall > 0.0, "{row}");
    }
    let hybrid = rows
        .iter()
        .filter(|r| r["waiter"] == "hybrid" && r["case"] == "steady")
        .count();
    assert_eq!(hybrid, 4);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn sigbench_wait_scaling_prints_both_tables_and_writes_every_cell() {
    let dir = std::env::temp_dir().join(format!("sigbench-scaling-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("scaling.json");
    let output = Command::new(env!("CARGO_BIN_EXE_sigbench"))
        .args([
            "--wait-scaling",
            "--backend",
            "sim",
            "--cell-ms",
            "10",
            "--json",
        ])
        .arg(&path)
        .output()
        .expect("sigbench runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "sigbench failed:\n{stderr}");
    assert!(
        stdout.contains("while K threads wait") && stdout.contains("one thread each"),
        "{stdout}"
    );
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let rows = json["rows"].as_array().expect("rows");
    // Two waiter policies x two submissions x four K, then two policies x
    // three queue counts.
    assert_eq!(rows.len(), 2 * 2 * 4 + 2 * 3, "{rows:#?}");
    for row in rows {
        assert!(row["ops_per_s"].as_f64().unwrap() > 0.0, "{row}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
