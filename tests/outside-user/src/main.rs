//! The queue layer's crate-level example, as a program of its own that
//! depends on `sigretire-queue` alone.
include!("../../../fences/examples/first_look/body.rs");
