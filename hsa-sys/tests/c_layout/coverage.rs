//! Every public ABI item in `src/` must be compared with C, or be listed as
//! Rust-only: found by scanning the sources, so a new constant cannot slip
//! past the C check unnoticed.

use super::{
    C_LAYOUTS, CONSTANTS, FUNCTION_ALIASES, INTEGER_ALIASES, NARROWED_ALIASES, RUST_ONLY_CONSTANTS,
    RUST_ONLY_STRUCTS,
};
use std::collections::BTreeSet;
use std::path::Path;

/// Names declared with `pub const`, `pub type` or (after `#[repr(C...)]`)
/// `pub struct` in the crate's sources.
fn declared_names() -> (BTreeSet<String>, BTreeSet<String>, BTreeSet<String>) {
    let (mut constants, mut aliases, mut structs) =
        (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    let sources = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in std::fs::read_dir(sources).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut repr_c = false;
        for line in text.lines().map(str::trim) {
            let name_after = |prefix: &str| {
                let rest = line.strip_prefix(prefix)?;
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                (!name.is_empty() && name != "fn").then_some(name)
            };
            if let Some(name) = name_after("pub const ") {
                constants.insert(name);
            } else if let Some(name) = name_after("pub type ") {
                aliases.insert(name);
            } else if let Some(name) = name_after("pub struct ")
                && repr_c
            {
                structs.insert(name);
            }
            if line.starts_with("#[repr(C") {
                repr_c = true;
            } else if !line.starts_with("#[") && !line.starts_with("///") {
                repr_c = false;
            }
        }
    }
    (constants, aliases, structs)
}

#[test]
fn every_public_abi_item_is_compared_with_c() {
    let (constants, aliases, structs) = declared_names();

    let compared: BTreeSet<&str> = CONSTANTS
        .iter()
        .map(|&(_, rust, _)| rust)
        .chain(RUST_ONLY_CONSTANTS.iter().copied())
        .collect();
    let unchecked: Vec<_> = constants
        .iter()
        .filter(|name| !compared.contains(name.as_str()))
        .collect();
    assert!(
        unchecked.is_empty(),
        "constants not compared with C (add them to CONSTANTS): {unchecked:?}"
    );

    let compared: BTreeSet<&str> = INTEGER_ALIASES
        .iter()
        .map(|&(name, ..)| name)
        .chain(FUNCTION_ALIASES.iter().map(|&(name, _)| name))
        .chain(NARROWED_ALIASES.iter().copied())
        .collect();
    let unchecked: Vec<_> = aliases
        .iter()
        .filter(|name| !compared.contains(name.as_str()))
        .collect();
    assert!(
        unchecked.is_empty(),
        "type aliases not compared with C (add them to INTEGER_ALIASES): {unchecked:?}"
    );

    let compared: BTreeSet<&str> = C_LAYOUTS
        .iter()
        .map(|layout| layout.name)
        .chain(RUST_ONLY_STRUCTS.iter().copied())
        .collect();
    let unchecked: Vec<_> = structs
        .iter()
        .filter(|name| !compared.contains(name.as_str()))
        .collect();
    assert!(
        unchecked.is_empty(),
        "repr(C) structs not compared with C (add them to layout.rs): {unchecked:?}"
    );

    // Guard the scan itself: it must have found the items it exists to find.
    assert!(constants.contains("HSA_PACKET_TYPE_BARRIER_AND") && aliases.contains("hsa_status_t"));
    assert!(structs.contains("amd_signal_t") && structs.contains("AqlSlot"));
}
