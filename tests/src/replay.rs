//! The `replay` example's arguments: which tracker, and the scenario (a
//! cargo-fuzz input file, or a property case's setup and seed).

use crate::kind::TrackerKind;
use crate::ops::{Op, decode_ops};
use crate::search::{MAX_OPS, generate};
use crate::setup::{Setup, setups};

/// How to call the example.
pub const USAGE: &str = "usage: replay (retiring|baseline) FUZZ_INPUT_FILE\n       \
                         replay (retiring|baseline) SETUP_INDEX SEED_HEX";

/// A scenario to replay.
#[derive(Debug)]
pub struct Replay {
    /// The tracker it runs on.
    pub kind: TrackerKind,
    /// The setup.
    pub setup: Setup,
    /// The operations.
    pub ops: Vec<Op>,
}

/// Reads the example's arguments (without the program name). The error is
/// the reason and [`USAGE`].
///
/// ```
/// let args = ["retiring".to_string()];
/// assert!(sigretire_scenarios::replay::parse(&args).unwrap_err().contains("usage"));
/// ```
pub fn parse(args: &[String]) -> Result<Replay, String> {
    fn refuse<T>(why: String) -> Result<T, String> {
        Err(format!("{why}\n{USAGE}"))
    }
    let kind = match args.first().map(String::as_str) {
        Some("retiring") => TrackerKind::Retiring,
        Some("baseline") => TrackerKind::Baseline,
        Some(other) => return refuse(format!("unknown tracker {other:?}")),
        None => return refuse("no tracker named".into()),
    };
    let setups = setups();
    match &args[1..] {
        [file] => {
            let data =
                std::fs::read(file).or_else(|e| refuse(format!("cannot read {file}: {e}")))?;
            let Some((&first, rest)) = data.split_first() else {
                return refuse(format!("{file} is empty"));
            };
            let setup = setups[usize::from(first) % setups.len()];
            let ops = decode_ops(&mut arbitrary::Unstructured::new(rest), MAX_OPS);
            Ok(Replay { kind, setup, ops })
        }
        [index, seed] => {
            let Some(&setup) = index.parse::<usize>().ok().and_then(|i| setups.get(i)) else {
                return refuse(format!(
                    "no setup {index:?}: there are {} (0 to {})",
                    setups.len(),
                    setups.len() - 1
                ));
            };
            let Ok(seed) = u64::from_str_radix(seed.trim_start_matches("0x"), 16) else {
                return refuse(format!("{seed:?} is not a hex seed"));
            };
            Ok(Replay {
                kind,
                setup,
                ops: generate(seed),
            })
        }
        _ => refuse(format!("{} arguments after the tracker", args.len() - 1)),
    }
}
