//! An idle threaded simulator parks its processor thread instead of burning
//! a core, and a doorbell still wakes it. One test in its own binary, so the
//! process CPU time it reads belongs to it alone.

use sigretire_sim::{
    AgentId, HostFlag, Kernel, Mode, Placement, Sim, SimConfig, SimQueueConfig, packets,
};
use std::time::{Duration, Instant};

/// CPU time this process used so far (Linux: `/proc/self/stat`, in clock
/// ticks of usually 10 ms).
fn cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the whole line.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

fn wait_for_zero(sim: &Sim, signal: sigretire_sim::Signal) {
    let start = Instant::now();
    while sim.load(signal) != 0 {
        assert!(start.elapsed() < Duration::from_secs(20), "no completion");
        std::thread::yield_now();
    }
}

#[test]
fn an_idle_or_blocked_processor_parks_and_wakes_on_demand() {
    let sim = Sim::new(SimConfig {
        mode: Mode::Threaded,
        ..SimConfig::default()
    });
    let queue = sim.create_queue(SimQueueConfig::default()).unwrap();
    let flag = HostFlag::new();
    let spin = sim.register_kernel(Kernel::SpinUntil(flag.clone()));
    let signals = sim.allocate(3, Placement::Host, AgentId(0)).unwrap();
    for &s in &signals {
        sim.store(s, 1);
    }
    queue.submit(packets::kernel(0, Some(signals[0]))).unwrap();
    wait_for_zero(&sim, signals[0]);
    // Blocked on a flag nobody sets yet: pending work, but nothing to do.
    queue
        .submit(packets::kernel(spin, Some(signals[1])))
        .unwrap();

    std::thread::sleep(Duration::from_millis(50)); // past the polling window
    let (Some(before), wall) = (cpu_ticks(), Instant::now()) else {
        return; // no /proc: nothing to measure
    };
    std::thread::sleep(Duration::from_millis(500));
    let used = cpu_ticks().unwrap() - before;
    // A spinning thread would use about 50 ticks (500 ms at 100 Hz).
    assert!(
        used <= 10,
        "{used} ticks of CPU in {:?} while idle",
        wall.elapsed()
    );

    flag.set(); // wakes the parked thread
    wait_for_zero(&sim, signals[1]);
    std::thread::sleep(Duration::from_millis(50));
    queue.submit(packets::kernel(0, Some(signals[2]))).unwrap(); // so does a doorbell
    wait_for_zero(&sim, signals[2]);
}
