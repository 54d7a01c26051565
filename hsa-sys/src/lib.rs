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
//!
//! The runtime library itself is loaded at run time: [`HsaApi::load`] opens
//! `libhsa-runtime64.so.1` (or the library [`LIBRARY_ENV`],
//! `SIGRETIRE_HSA_LIBRARY`, names) and resolves ROCr's functions into one table,
//! listed once in `loader.rs` with their exact C signatures (which the same C
//! test checks). Nothing here needs ROCm, libclang or bindgen to build, and a
//! machine without ROCm gets a [`LoadError`] that says what to install, not a
//! link error. Status codes become a [`StatusError`] carrying the code, its C
//! name and, through [`HsaApi::check_status`], ROCr's own description.
//!
//! ```
//! use hsa_sys::{HsaApi, LoadError};
//!
//! match HsaApi::load() {
//!     Ok(api) => {
//!         // ROCr describes its status codes even before hsa_init.
//!         let text = api.status_string(hsa_sys::HSA_STATUS_ERROR_OUT_OF_RESOURCES);
//!         println!("ROCr from {} says: {text:?}", api.library_path().display());
//!     }
//!     Err(LoadError::LibraryMissing { library, .. }) => println!("no {} here", library.display()),
//!     Err(error) => println!("{error}"),
//! }
//! ```
//!
//! [`encode`] is the project's one encoder of packets: what a packet does
//! ([`AqlWork`]), its barrier bit and its completion signal in, the 64
//! bytes out, for the simulator's tracker adapter and the ROCr backend alike;
//! with the feature `tracker`, `aql_packet` is the one mapping of the
//! tracker's work onto it that both publish through.
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
mod encode;
mod layout;
mod loader;
mod packet;
mod queue;
mod signal;
mod status;
#[cfg(feature = "tracker")]
mod work;

pub use amd::*;
pub use encode::{
    AqlWork, BarrierValue, DispatchBody, EncodeError, MAX_DEPENDENCIES, encode, with_header,
};
#[doc(hidden)]
pub use layout::{C_LAYOUTS, CLayout};
pub use loader::{DEFAULT_LIBRARY, HsaApi, LIBRARY_ENV, LoadError, library_to_load};
#[doc(hidden)]
pub use loader::{FUNCTION_SIGNATURES, FunctionSignature};
pub use packet::*;
pub use queue::*;
pub use signal::*;
pub use status::*;
#[cfg(feature = "tracker")]
pub use work::{aql_packet, aql_work};

/// The crate README's examples, run as doctests so they cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
