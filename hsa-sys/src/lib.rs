//! ROCr's C ABI, written by hand.
//!
//! This crate describes the parts of the HSA runtime (ROCr) that a completion
//! signal tracker touches: the 64-byte `amd_signal_t` block behind every
//! `hsa_signal_t`, the queue descriptors, the four AQL packet formats the
//! project emits (kernel dispatch, barrier-AND, barrier-OR and AMD's
//! barrier-value), header bit fields, status codes, and the AMD extension types
//! for HDP flushes and profiling.
//!
//! Every size, alignment and offset is asserted at compile time (`layout.rs`),
//! and a test compares them with a C compiler reading Debian's ROCr headers.
//! The runtime library itself is loaded at run time by a function table (added with the loader),
//! so nothing here needs ROCm, libclang or bindgen to build.
//!
//! Names follow the C headers, so that code reads like the HSA specification.
//!
//! ```
//! use hsa_sys::*;
//!
//! // A barrier-AND packet with the barrier bit: empty work that completes only
//! // after everything before it on its queue did.
//! let packet = hsa_barrier_and_packet_t {
//!     header: PacketHeader::new(HSA_PACKET_TYPE_BARRIER_AND).barrier(true).bits(),
//!     completion_signal: hsa_signal_t { handle: 0x7f00_0000_0040 },
//!     ..Default::default()
//! };
//! let slot = AqlSlot::invalid();
//! slot.publish(packet.into());
//! assert!(slot.header().unwrap().barrier);
//! ```

#![allow(non_camel_case_types, non_snake_case)]

mod amd;
mod layout;
mod packet;
mod queue;
mod signal;
mod status;

pub use amd::*;
pub use packet::*;
pub use queue::*;
pub use signal::*;
pub use status::*;
