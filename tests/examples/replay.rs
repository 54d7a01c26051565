//! Replays and shortens a failing scenario, for debugging:
//! `cargo run -p scenarios --example replay -- retiring FUZZ_INPUT_FILE` (a
//! cargo-fuzz crash file), or `... -- retiring SETUP SEED` (a property case).
use scenarios::{TrackerKind, ops, search, setup};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let kind = match args[1].as_str() {
        "baseline" => TrackerKind::Baseline,
        _ => TrackerKind::Retiring,
    };
    let setups = setup::setups();
    let (setup, ops) = if args.len() == 3 {
        let data = std::fs::read(&args[2]).expect("a fuzz input file");
        let setup = setups[usize::from(data[0]) % setups.len()];
        let ops = ops::decode_ops(
            &mut arbitrary::Unstructured::new(&data[1..]),
            search::MAX_OPS,
        );
        (setup, ops)
    } else {
        let seed = u64::from_str_radix(args[3].trim_start_matches("0x"), 16).expect("a hex seed");
        (
            setups[args[2].parse::<usize>().expect("a setup index")],
            search::generate(seed),
        )
    };
    let Err(failure) = search::run(kind, setup, &ops) else {
        println!("no invariant broken");
        return;
    };
    if std::env::var("NO_SHRINK").is_ok() {
        println!("{failure}");
        return;
    }
    let (ops, failure) = search::shrink(kind, setup, &ops, &failure);
    println!("setup \"{}\": {failure}", setup.name);
    for (i, op) in ops.iter().enumerate() {
        println!("  {i:3}: {op:?}");
    }
}
