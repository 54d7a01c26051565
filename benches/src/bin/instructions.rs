//! Runs the per-use workload for one tracker and ring size, for
//! `benches/instructions.sh` to count instructions with callgrind. Only
//! `Steady::acquire_one` is counted (`--toggle-collect`), so publication and
//! the simulated GPU are left out for both trackers alike.
//!
//! Usage: `instructions <retiring|baseline> <in-flight> <uses>`

use sigretire_bench::workload::{Kind, Steady};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: instructions <retiring|baseline> <in-flight (power of two >= 64)> <uses>";
    let (Some(kind), Some(in_flight), Some(uses)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let kind = match kind.as_str() {
        "retiring" => Kind::Retiring,
        "baseline" => Kind::Baseline,
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let (Ok(in_flight), Ok(uses)) = (in_flight.parse::<usize>(), uses.parse::<usize>()) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    if in_flight < 64 || !in_flight.is_power_of_two() {
        eprintln!("{usage}");
        std::process::exit(2);
    }
    let mut steady = Steady::new(kind, in_flight);
    // Warm up past every growth, so only steady-state work is counted.
    let mut done = 0;
    while done < 4 * in_flight {
        done += steady.burst();
    }
    let mut done = 0;
    while done < uses {
        done += steady.burst();
    }
    println!("{} {} {}", kind.name(), in_flight, done);
}
