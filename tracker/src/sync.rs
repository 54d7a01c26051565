//! Where the crate takes its atomics, locks and thread hooks from: the
//! workspace's one shim, `sigretire-sync` (std and parking_lot, or loom
//! under `--cfg sigretire_loom`, so the models in `tests/loom_*.rs` explore
//! every interleaving of the real protocol code). Nothing outside this
//! module names `std::sync` for them.

pub(crate) use sigretire_sync::*;
