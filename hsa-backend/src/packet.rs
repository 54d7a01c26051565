//! The AQL packets the backend publishes, built as [`PacketWords`] by
//! `hsa-sys`'s one encoder ([`hsa_sys::encode`]); the tracker's work is
//! mapped onto it by [`hsa_sys::aql_packet`], the mapping the simulator's
//! tracker adapter publishes through too. This module keeps the backend's
//! packet helpers.
//!
//! Every header has system-scope acquire and release fences: the host reads
//! completion signals and the results, so the packet processor must make
//! the work's writes visible system-wide before it decrements the signal.
//!
//! ```
//! use sigretire_hsa::packet;
//! use hsa_sys::{PacketHeader, HSA_FENCE_SCOPE_SYSTEM};
//!
//! for words in [packet::barrier_and(&[], true, 0x40).unwrap(), packet::kernel_dispatch(7, true, 0x40)] {
//!     let header = PacketHeader::from_bits(words.header());
//!     assert_eq!((header.acquire, header.release), (HSA_FENCE_SCOPE_SYSTEM, HSA_FENCE_SCOPE_SYSTEM));
//!     assert_eq!(words.completion_signal().handle, 0x40);
//! }
//! ```

use hsa_sys::{AqlWork, PacketWords, encode, with_header};
use sigretire_tracker::backend::Publication;

/// Dependencies one barrier-AND packet holds (HSA: `dep_signal[5]`).
///
/// ```
/// use sigretire_hsa::packet::{barrier_and, MAX_DEPENDENCIES};
/// assert!(barrier_and(&[0x40; MAX_DEPENDENCIES], false, 0).is_some());
/// assert!(barrier_and(&[0x40; MAX_DEPENDENCIES + 1], false, 0).is_none(), "split into several packets");
/// ```
pub use hsa_sys::MAX_DEPENDENCIES;

/// What a barrier-value packet waits for: `(value of signal & mask)
/// condition compare` (AMD's `hsa_amd_barrier_value_packet_t`).
///
/// ```
/// use sigretire_hsa::packet::BarrierValue;
/// use hsa_sys::{condition_holds, HSA_SIGNAL_CONDITION_LT};
///
/// // Until the low byte of the signal drops below 4.
/// let wait = BarrierValue { signal: 0x1000, condition: HSA_SIGNAL_CONDITION_LT, compare: 4, mask: 0xff };
/// assert!(!condition_holds(wait.condition, 0x1_05 & wait.mask, wait.compare));
/// assert!(condition_holds(wait.condition, 0x1_03 & wait.mask, wait.compare));
/// ```
pub use hsa_sys::BarrierValue;

/// A barrier-AND packet: completes once every dependency (a signal handle)
/// is 0; with none, it is empty work that completes as soon as it runs.
/// `None` with more than [`MAX_DEPENDENCIES`] dependencies.
///
/// ```
/// use hsa_sys::{PacketHeader, HSA_PACKET_TYPE_BARRIER_AND};
/// let words = sigretire_hsa::packet::barrier_and(&[0x1000, 0x2040], true, 0x3000).unwrap();
/// let header = PacketHeader::from_bits(words.header());
/// assert_eq!((header.packet_type, header.barrier), (HSA_PACKET_TYPE_BARRIER_AND, true));
/// assert_eq!(words.u64_at(8), 0x1000);
/// assert_eq!(words.completion_signal().handle, 0x3000);
/// assert!(sigretire_hsa::packet::barrier_and(&[1; 6], false, 0).is_none());
/// ```
pub fn barrier_and(dependencies: &[u64], barrier: bool, completion: u64) -> Option<PacketWords> {
    encode(AqlWork::BarrierAnd(dependencies), barrier, completion).ok()
}

/// AMD's barrier-value packet: completes once the condition holds.
///
/// ```
/// use sigretire_hsa::packet::{barrier_value, BarrierValue};
/// use hsa_sys::{HSA_AMD_PACKET_TYPE_BARRIER_VALUE, HSA_SIGNAL_CONDITION_EQ};
/// let wait = BarrierValue { signal: 0x1000, condition: HSA_SIGNAL_CONDITION_EQ, compare: 0, mask: -1 };
/// let words = barrier_value(wait, false, 0);
/// assert_eq!((words.0[0] >> 16) as u8, HSA_AMD_PACKET_TYPE_BARRIER_VALUE);
/// assert_eq!(words.u64_at(8), 0x1000);
/// ```
pub fn barrier_value(wait: BarrierValue, barrier: bool, completion: u64) -> PacketWords {
    encode(AqlWork::BarrierValue(wait), barrier, completion).expect("a barrier-value packet")
}

/// A kernel dispatch of one work-item (one-dimensional grid and work-group
/// of 1) of `kernel_object`, without kernel arguments or segments: enough
/// for markers and for the stand-in's simulated kernels. Real kernels need
/// their code object's segment sizes and arguments: publish them as
/// [`Work::Dispatch`](sigretire_tracker::Work::Dispatch).
///
/// ```
/// use sigretire_hsa::packet::kernel_dispatch;
/// use hsa_sys::{hsa_kernel_dispatch_packet_t, PacketHeader, HSA_PACKET_TYPE_KERNEL_DISPATCH};
///
/// let packet = hsa_kernel_dispatch_packet_t::from(kernel_dispatch(0xC0DE, true, 0x40));
/// let header = PacketHeader::from_bits(packet.header);
/// assert_eq!((header.packet_type, header.barrier), (HSA_PACKET_TYPE_KERNEL_DISPATCH, true));
/// assert_eq!((packet.kernel_object, packet.grid_size_x, packet.completion_signal.handle), (0xC0DE, 1, 0x40));
/// ```
pub fn kernel_dispatch(kernel_object: u64, barrier: bool, completion: u64) -> PacketWords {
    encode(AqlWork::Kernel(kernel_object), barrier, completion).expect("a kernel dispatch")
}

/// A barrier-OR packet: completes once any dependency (a signal handle) is
/// 0. `None` with more than [`MAX_DEPENDENCIES`] dependencies.
///
/// ```
/// use hsa_sys::{PacketHeader, HSA_PACKET_TYPE_BARRIER_OR};
/// let words = sigretire_hsa::packet::barrier_or(&[0x1000], false, 0x3000).unwrap();
/// assert_eq!(PacketHeader::from_bits(words.header()).packet_type, HSA_PACKET_TYPE_BARRIER_OR);
/// ```
pub fn barrier_or(dependencies: &[u64], barrier: bool, completion: u64) -> Option<PacketWords> {
    encode(AqlWork::BarrierOr(dependencies), barrier, completion).ok()
}

/// A caller's packet `body` with the header and completion signal set from
/// `publication`: the body's packet type (and, for a vendor packet, its
/// format) stays; its barrier bit becomes the publication's, its acquire
/// and release scopes system scope, its completion signal the
/// publication's. Every packet type of AQL keeps its completion signal at
/// byte 56.
///
/// ```
/// use sigretire_hsa::packet::{barrier_and, with_publication};
/// use sigretire_tracker::backend::Publication;
/// use hsa_sys::PacketHeader;
///
/// let lie = barrier_and(&[], false, 0xBAD0).unwrap();
/// let words = with_publication(lie, &Publication::unsignalled(0, true));
/// assert!(PacketHeader::from_bits(words.header()).barrier);
/// assert_eq!(words.completion_signal().handle, 0);
/// ```
pub fn with_publication(body: PacketWords, publication: &Publication) -> PacketWords {
    with_header(body, publication.barrier(), publication.completion())
}
