//! Dropping a threaded simulator stops its processor thread, even with work
//! still blocked. One test in its own binary, so the thread count it reads
//! is not disturbed by other tests.

use sigretire_sim::{
    AgentId, HostFlag, Kernel, Mode, Placement, Sim, SimConfig, SimQueueConfig, packets,
};
use std::time::{Duration, Instant};

/// The threads of this process (Linux: `/proc/self/status`).
fn threads() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("Threads:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn dropping_the_last_handle_stops_the_processor_thread() {
    let before = threads();
    let flag = HostFlag::new(); // never set: the work stays blocked
    let sims: Vec<Sim> = (0..3)
        .map(|_| {
            let sim = Sim::new(SimConfig {
                mode: Mode::Threaded,
                ..SimConfig::default()
            });
            let spin = sim.register_kernel(Kernel::SpinUntil(flag.clone()));
            let queue = sim.create_queue(SimQueueConfig::default()).unwrap();
            let s = sim.allocate(1, Placement::Host, AgentId(0)).unwrap()[0];
            sim.store(s, 1);
            queue.submit(packets::kernel(spin, Some(s))).unwrap();
            sim
        })
        .collect();
    if let (Some(before), Some(now)) = (before, threads()) {
        assert_eq!(now, before + 3, "one processor thread per simulator");
    }
    let queue = sims[0].create_queue(SimQueueConfig::default()).unwrap();
    let start = Instant::now();
    drop(sims);
    if let (Some(before), Some(now)) = (before, threads()) {
        assert_eq!(
            now,
            before + 1,
            "a queue keeps its simulator (and its thread) alive"
        );
    }
    drop(queue); // the last handle

    assert!(
        start.elapsed() < Duration::from_secs(5),
        "drop must not hang"
    );
    if let Some(before) = before {
        let settled = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            threads() == Some(before)
        });
        assert!(
            settled,
            "processor threads leaked: {:?} > {before}",
            threads()
        );
    }
}
