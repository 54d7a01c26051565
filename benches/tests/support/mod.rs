//! Runs the `sigbench` binary as a user does, on the simulator, and hands
//! back what it printed and the JSON it wrote.

// Each test binary compiles this module and reads what it needs of a run.
#![allow(dead_code)]

use serde_json::Value;
use std::process::Command;

/// What one run printed and wrote.
pub struct Run {
    pub stdout: String,
    pub stderr: String,
    pub json: Value,
}

/// Runs `sigbench ARGS --json FILE` (`name` names its scratch folder),
/// requires success, and reads the JSON back; the scratch folder goes.
pub fn sigbench(name: &str, args: &[&str]) -> Run {
    let dir = std::env::temp_dir().join(format!("sigbench-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("out.json");
    let output = Command::new(env!("CARGO_BIN_EXE_sigbench"))
        .args(args)
        .arg("--json")
        .arg(&path)
        .output()
        .expect("sigbench runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "sigbench failed:\n{stderr}");
    let json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    Run {
        stdout,
        stderr,
        json,
    }
}
