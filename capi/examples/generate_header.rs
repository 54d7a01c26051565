//! Rewrites `include/sigretire.h` from the sources with cbindgen:
//!
//! ```sh
//! cargo run -p sigretire-capi --example generate_header
//! ```

#[path = "../tools/header.rs"]
mod header;

fn main() {
    let text = header::generate();
    let path = header::header_path();
    if header::is_current(&path, &text) {
        println!("{} is up to date", path.display());
        return;
    }
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    println!("wrote {}", path.display());
}
