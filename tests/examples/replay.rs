//! Replays and shortens a failing scenario, for debugging:
//! `cargo run -p sigretire-scenarios --example replay -- retiring FUZZ_INPUT_FILE` (a
//! cargo-fuzz crash file), or `... -- retiring SETUP SEED` (a property case).
use sigretire_scenarios::{replay, search};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let replay = match replay::parse(&args) {
        Ok(replay) => replay,
        Err(refusal) => {
            eprintln!("{refusal}");
            return ExitCode::from(2);
        }
    };
    let (kind, setup, ops) = (replay.kind, replay.setup, replay.ops);
    let Err(failure) = search::run(kind, setup, &ops) else {
        println!("no invariant broken ({} operations)", ops.len());
        return ExitCode::SUCCESS;
    };
    if std::env::var("NO_SHRINK").is_ok() {
        println!("{failure}");
        return ExitCode::FAILURE;
    }
    let (ops, failure) = search::shrink(kind, setup, &ops, &failure);
    println!("setup \"{}\": {failure}", setup.name);
    for (i, op) in ops.iter().enumerate() {
        println!("  {i:3}: {op:?}");
    }
    ExitCode::FAILURE
}
