//! `sigbench --waits` runs on a machine with no GPU (the simulator), prints
//! its table and writes JSON with every cell: three waiters at four kernel
//! lengths, then the two wrong guesses each.

mod support;

use support::{Run, sigbench};

#[test]
fn sigbench_waits_prints_the_table_and_writes_every_cell() {
    let Run { stdout, json, .. } = sigbench(
        "waits",
        &["--waits", "--backend", "sim", "--wait-samples", "10"],
    );
    assert!(
        stdout.contains("ours hybrid") && stdout.contains("late p50 us"),
        "{stdout}"
    );

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
}

#[test]
fn sigbench_wait_scaling_prints_both_tables_and_writes_every_cell() {
    let Run { stdout, json, .. } = sigbench(
        "scaling",
        &["--wait-scaling", "--backend", "sim", "--cell-ms", "10"],
    );
    assert!(
        stdout.contains("while K threads wait") && stdout.contains("one thread each"),
        "{stdout}"
    );

    let rows = json["rows"].as_array().expect("rows");
    // Two waiter policies x two submissions x four K, then two policies
    // and the one-thread series x three queue counts.
    assert_eq!(rows.len(), 2 * 2 * 4 + 3 * 3, "{rows:#?}");
    for row in rows {
        assert!(row["ops_per_s"].as_f64().unwrap() > 0.0, "{row}");
    }
    // Every queues row of ours times its submissions; the first of each
    // series is its own reference.
    let queues: Vec<_> = rows.iter().filter(|r| r["table"] == "queues").collect();
    assert_eq!(queues.len(), 9, "{queues:#?}");
    for row in queues {
        assert!(row["submit_p50_us"].as_f64().unwrap() > 0.0, "{row}");
        if row["n"] == 1 {
            assert_eq!(row["submit_ratio_to_first"].as_f64(), Some(1.0), "{row}");
        }
    }
    let one_thread = rows
        .iter()
        .filter(|r| r["who"] == "ours spin, one thread")
        .count();
    assert_eq!(one_thread, 3);
}
