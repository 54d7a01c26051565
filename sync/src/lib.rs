//! Where sigretire's crates take their atomics, locks, condition variables
//! and threads from: one module, of the shape tokio's `src/loom/mod.rs`
//! has. A normal build gets std's and parking_lot's (`std.rs`); a build
//! with `--cfg sigretire_loom` gets loom's (`mocked.rs`), so that the loom
//! models of each crate explore every interleaving of its real code. The
//! two halves have one interface; no crate that takes its primitives from
//! here names `std::sync`, `parking_lot` or `loom` for them itself.
//!
//! Two `Arc`s: [`Arc`] is loom's own under loom (what the tracker shares
//! its state through, and what a model hands the tracker its memory in);
//! [`ModelledArc`] adds `into_inner` and a last drop that a model sees as
//! one step (what the queue layer tears a queue down with).
//!
//! Both are an implementation detail of sigretire's crates, not an API of
//! theirs: the crates re-export none of it.

#[cfg(not(sigretire_loom))]
mod std;
#[cfg(not(sigretire_loom))]
pub use self::std::*;

#[cfg(sigretire_loom)]
mod mocked;
#[cfg(sigretire_loom)]
pub use self::mocked::*;

/// Takes the value out of `arc` if this was its last strong reference, in
/// one atomic step (std's `Arc::into_inner`, and the modelled one's).
pub fn arc_into_inner<T>(arc: ModelledArc<T>) -> Option<T> {
    ModelledArc::into_inner(arc)
}
