//! The checked-in header is what cbindgen makes from the sources now.

#[path = "../tools/header.rs"]
mod header;

#[test]
fn the_checked_in_header_matches_a_fresh_generation() {
    let fresh = header::generate();
    let path = header::header_path();
    let Ok(checked_in) = std::fs::read_to_string(&path) else {
        panic!(
            "{} is missing: generate it with `{}`",
            path.display(),
            header::REGENERATE
        );
    };
    if checked_in != fresh {
        let line = checked_in
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| checked_in.lines().count().min(fresh.lines().count()));
        panic!(
            "{} differs from a fresh cbindgen run (first at line {}): the C ABI changed. \
             Regenerate it with `{}` and commit the result",
            path.display(),
            line + 1,
            header::REGENERATE
        );
    }
}
