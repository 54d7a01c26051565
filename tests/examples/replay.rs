//! Replays a scenario from its seed or the property test's report, for debugging:
//! `cargo run -p scenarios --example replay -- retiring 0 SEED`.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let kind = if args[1] == "baseline" {
        scenarios::TrackerKind::Baseline
    } else {
        scenarios::TrackerKind::Retiring
    };
    let setup = scenarios::setup::setups()[args[2].parse::<usize>().unwrap()];
    let seed = u64::from_str_radix(args[3].trim_start_matches("0x"), 16).unwrap();
    let ops = scenarios::search::generate(seed);
    let failure = scenarios::search::run(kind, setup, &ops).unwrap_err();
    let (ops, failure) = scenarios::search::shrink(kind, setup, &ops, &failure);
    println!("{failure}");
    for op in &ops {
        println!("{op:?}");
    }
}
