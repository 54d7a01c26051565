//! The queue layer in a few lines: a device, two queues, a cross-queue
//! wait, events and synchronize, on the simulator (`features = ["sim"]`).
//! Only this crate is named: it re-exports what its API mentions.
//!
//! `cargo run -p sigretire-queue --features sim --example first_look`
include!("body.rs");
