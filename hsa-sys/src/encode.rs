//! The one encoder of the work a completion tracker publishes into AQL
//! packet words: the simulator's tracker adapter, the ROCr backend (on ROCr
//! and on its stand-in) and the packet helpers all build their packets here,
//! so they put the same bits in the same places.
//!
//! The input is [`AqlWork`], this crate's own description of what a packet
//! does, so that the C ABI's crate needs nothing of the tracker's: a tracker
//! adapter maps each of its work kinds onto one variant, and every choice
//! of packet type, field and default is made here. Every header has
//! system-scope acquire and release fences (the host reads the completion
//! signals and the results, so the packet processor must make the work's
//! writes visible system-wide before it decrements the signal).
//!
//! ```
//! use hsa_sys::{encode, AqlWork, PacketHeader, HSA_FENCE_SCOPE_SYSTEM, HSA_PACKET_TYPE_BARRIER_AND};
//!
//! // Empty work: a barrier-AND with no dependency, which ROCr's packet
//! // processor completes as soon as it runs (stamped on a profiled queue).
//! let words = encode(AqlWork::Empty, true, 0x40).unwrap();
//! let header = PacketHeader::from_bits(words.header());
//! assert_eq!((header.packet_type, header.barrier), (HSA_PACKET_TYPE_BARRIER_AND, true));
//! assert_eq!((header.acquire, header.release), (HSA_FENCE_SCOPE_SYSTEM, HSA_FENCE_SCOPE_SYSTEM));
//! assert_eq!(words.completion_signal().handle, 0x40);
//! ```

use crate::{
    HSA_AMD_PACKET_TYPE_BARRIER_VALUE, HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS,
    HSA_PACKET_TYPE_BARRIER_AND, HSA_PACKET_TYPE_BARRIER_OR, HSA_PACKET_TYPE_KERNEL_DISPATCH,
    HSA_PACKET_TYPE_VENDOR_SPECIFIC, PacketHeader, PacketWords, hsa_amd_barrier_value_packet_t,
    hsa_amd_vendor_packet_header_t, hsa_barrier_and_packet_t, hsa_barrier_or_packet_t,
    hsa_kernel_dispatch_packet_t, hsa_signal_condition_t, hsa_signal_t, hsa_signal_value_t,
};

/// Dependencies one barrier-AND or barrier-OR packet holds (HSA:
/// `dep_signal[5]`); more must be split over several packets.
///
/// ```
/// use hsa_sys::{encode, AqlWork, EncodeError, MAX_DEPENDENCIES};
/// assert!(encode(AqlWork::BarrierAnd(&[0x40; MAX_DEPENDENCIES]), false, 0).is_ok());
/// assert_eq!(
///     encode(AqlWork::BarrierAnd(&[0x40; MAX_DEPENDENCIES + 1]), false, 0),
///     Err(EncodeError::TooManyDependencies(6))
/// );
/// ```
pub const MAX_DEPENDENCIES: usize = 5;

/// What one AQL packet does: the input of [`encode`]. The barrier bit and
/// the completion signal are [`encode`]'s other arguments.
///
/// ```
/// use hsa_sys::{encode, AqlWork, hsa_barrier_or_packet_t};
/// let words = encode(AqlWork::BarrierOr(&[0x1000, 0x2000]), false, 0).unwrap();
/// let packet = hsa_barrier_or_packet_t::from(words);
/// assert_eq!((packet.dep_signal[1].handle, packet.dep_signal[2].handle), (0x2000, 0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AqlWork<'a> {
    /// Nothing to run, only the completion: a barrier-AND packet with no
    /// dependency, which completes as soon as it runs (with timestamps on
    /// a profiled queue). Empty work and markers. Not an empty kernel: a
    /// kernel dispatch needs a code object, and 0 is none on a GPU.
    Empty,
    /// A one-work-item dispatch of this kernel object, without arguments or
    /// segments ([`hsa_kernel_dispatch_packet_t::single_item`]): markers of
    /// the caller's own kernels, and the simulator's registered kernels.
    Kernel(u64),
    /// A barrier-AND packet: completes once every dependency (a signal
    /// handle; at most [`MAX_DEPENDENCIES`]) is 0.
    BarrierAnd(&'a [u64]),
    /// A barrier-OR packet: completes once any dependency (at most
    /// [`MAX_DEPENDENCIES`]) is 0. The packet processor ignores null
    /// dependencies; one with none completes at once.
    BarrierOr(&'a [u64]),
    /// A kernel dispatch the caller built.
    Dispatch(DispatchBody),
    /// AMD's barrier-value packet.
    BarrierValue(BarrierValue),
}

/// A kernel dispatch packet's body: everything but the header and the
/// completion signal (what a caller with a real code object sets).
///
/// ```
/// use hsa_sys::{encode, AqlWork, DispatchBody, hsa_kernel_dispatch_packet_t};
/// let body = DispatchBody { grid: [1024, 1, 1], workgroup: [256, 1, 1], ..DispatchBody::single_item(0xC0DE) };
/// let packet = hsa_kernel_dispatch_packet_t::from(encode(AqlWork::Dispatch(body), false, 0).unwrap());
/// assert_eq!((packet.kernel_object, packet.grid_size_x, packet.workgroup_size_x, packet.setup), (0xC0DE, 1024, 256, 1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DispatchBody {
    /// The kernel's code object handle.
    pub kernel_object: u64,
    /// Where the kernel's arguments are (0: none).
    pub kernarg_address: u64,
    /// Work-items in each dimension.
    pub grid: [u32; 3],
    /// Work-items per workgroup in each dimension.
    pub workgroup: [u16; 3],
    /// How many of the three dimensions are used (1 to 3): `setup`'s
    /// dimension bits.
    pub dimensions: u16,
    /// Private memory per work-item, bytes.
    pub private_segment_size: u32,
    /// Group (LDS) memory per workgroup, bytes.
    pub group_segment_size: u32,
}

impl DispatchBody {
    /// One work-item of `kernel_object` in one dimension, no arguments or
    /// segments: the body [`AqlWork::Kernel`] encodes.
    ///
    /// ```
    /// use hsa_sys::{encode, AqlWork, DispatchBody};
    /// assert_eq!(
    ///     encode(AqlWork::Dispatch(DispatchBody::single_item(7)), true, 0x40),
    ///     encode(AqlWork::Kernel(7), true, 0x40),
    /// );
    /// ```
    pub const fn single_item(kernel_object: u64) -> Self {
        Self {
            kernel_object,
            kernarg_address: 0,
            grid: [1; 3],
            workgroup: [1; 3],
            dimensions: 1,
            private_segment_size: 0,
            group_segment_size: 0,
        }
    }
}

/// What a barrier-value packet waits for: `(value of signal & mask)
/// condition compare` (AMD's `hsa_amd_barrier_value_packet_t`).
///
/// ```
/// use hsa_sys::{condition_holds, BarrierValue, HSA_SIGNAL_CONDITION_LT};
///
/// // Until the low byte of the signal drops below 4.
/// let wait = BarrierValue { signal: 0x1000, condition: HSA_SIGNAL_CONDITION_LT, compare: 4, mask: 0xff };
/// assert!(!condition_holds(wait.condition, 0x1_05 & wait.mask, wait.compare));
/// assert!(condition_holds(wait.condition, 0x1_03 & wait.mask, wait.compare));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BarrierValue {
    /// The signal handle compared.
    pub signal: u64,
    /// An `HSA_SIGNAL_CONDITION_*`.
    pub condition: hsa_signal_condition_t,
    /// The value compared with.
    pub compare: hsa_signal_value_t,
    /// Applied to the signal's value first (`-1` for all bits).
    pub mask: hsa_signal_value_t,
}

/// Work that no single AQL packet can carry.
///
/// ```
/// use hsa_sys::EncodeError;
/// assert!(EncodeError::TooManyDependencies(6).to_string().contains("at most 5"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// More dependencies than one barrier packet holds.
    #[error("{0} dependencies in one barrier packet (at most 5: chain packets)")]
    TooManyDependencies(usize),
}

/// The packet for `work`, with the barrier bit `barrier`, system-scope
/// acquire and release fences, and `completion` (a signal handle, 0 for
/// none) as its completion signal.
///
/// # Errors
/// [`EncodeError::TooManyDependencies`] for a barrier packet of more than
/// [`MAX_DEPENDENCIES`].
///
/// ```
/// use hsa_sys::*;
///
/// let wait = BarrierValue { signal: 0x1000, condition: HSA_SIGNAL_CONDITION_EQ, compare: 0, mask: -1 };
/// let words = encode(AqlWork::BarrierValue(wait), false, 0x2000).unwrap();
/// let packet = hsa_amd_barrier_value_packet_t::from(words);
/// assert_eq!(PacketHeader::from_bits(packet.header.header).packet_type, HSA_PACKET_TYPE_VENDOR_SPECIFIC);
/// assert_eq!(packet.header.AmdFormat, HSA_AMD_PACKET_TYPE_BARRIER_VALUE);
/// assert_eq!((packet.signal.handle, packet.completion_signal.handle), (0x1000, 0x2000));
/// ```
pub fn encode(
    work: AqlWork<'_>,
    barrier: bool,
    completion: u64,
) -> Result<PacketWords, EncodeError> {
    let header = |packet_type| PacketHeader::new(packet_type).barrier(barrier);
    let completion_signal = hsa_signal_t { handle: completion };
    Ok(match work {
        AqlWork::Empty => hsa_barrier_and_packet_t {
            header: header(HSA_PACKET_TYPE_BARRIER_AND).bits(),
            completion_signal,
            ..Default::default()
        }
        .into(),
        AqlWork::Kernel(kernel_object) => hsa_kernel_dispatch_packet_t::single_item(
            header(HSA_PACKET_TYPE_KERNEL_DISPATCH),
            kernel_object,
            completion_signal,
        )
        .into(),
        AqlWork::BarrierAnd(dependencies) => hsa_barrier_and_packet_t {
            header: header(HSA_PACKET_TYPE_BARRIER_AND).bits(),
            dep_signal: dependency_slots(dependencies)?,
            completion_signal,
            ..Default::default()
        }
        .into(),
        AqlWork::BarrierOr(dependencies) => hsa_barrier_or_packet_t {
            header: header(HSA_PACKET_TYPE_BARRIER_OR).bits(),
            dep_signal: dependency_slots(dependencies)?,
            completion_signal,
            ..Default::default()
        }
        .into(),
        AqlWork::Dispatch(body) => hsa_kernel_dispatch_packet_t {
            header: header(HSA_PACKET_TYPE_KERNEL_DISPATCH).bits(),
            setup: body.dimensions << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS,
            workgroup_size_x: body.workgroup[0],
            workgroup_size_y: body.workgroup[1],
            workgroup_size_z: body.workgroup[2],
            reserved0: 0,
            grid_size_x: body.grid[0],
            grid_size_y: body.grid[1],
            grid_size_z: body.grid[2],
            private_segment_size: body.private_segment_size,
            group_segment_size: body.group_segment_size,
            kernel_object: body.kernel_object,
            kernarg_address: body.kernarg_address as *mut core::ffi::c_void,
            reserved2: 0,
            completion_signal,
        }
        .into(),
        AqlWork::BarrierValue(wait) => hsa_amd_barrier_value_packet_t {
            header: hsa_amd_vendor_packet_header_t {
                header: header(HSA_PACKET_TYPE_VENDOR_SPECIFIC).bits(),
                AmdFormat: HSA_AMD_PACKET_TYPE_BARRIER_VALUE,
                reserved: 0,
            },
            signal: hsa_signal_t {
                handle: wait.signal,
            },
            value: wait.compare,
            mask: wait.mask,
            cond: wait.condition,
            completion_signal,
            ..Default::default()
        }
        .into(),
    })
}

/// `body` (a packet of any type) with its header and completion signal set
/// as [`encode`] sets them: the body's packet type (and, for a vendor
/// packet, its format) stays; its barrier bit becomes `barrier`, its
/// fences system scope, its completion signal `completion`. Every AQL
/// packet type keeps its completion signal at byte 56.
///
/// ```
/// use hsa_sys::{encode, with_header, AqlWork, PacketHeader};
///
/// let lie = encode(AqlWork::Kernel(7), false, 0xBAD0).unwrap();
/// let words = with_header(lie, true, 0x40);
/// assert_eq!(words, encode(AqlWork::Kernel(7), true, 0x40).unwrap());
/// assert!(PacketHeader::from_bits(words.header()).barrier);
/// ```
pub fn with_header(body: PacketWords, barrier: bool, completion: u64) -> PacketWords {
    let mut words = body;
    let packet_type = PacketHeader::from_bits(words.header()).packet_type;
    let header = PacketHeader::new(packet_type).barrier(barrier);
    words.0[0] = (words.0[0] & 0xffff_0000) | u32::from(header.bits());
    words.0[14] = completion as u32;
    words.0[15] = (completion >> 32) as u32;
    words
}

/// Up to five dependency handles, the rest null (`dep_signal`'s type, so
/// [`MAX_DEPENDENCIES`] is its length).
fn dependency_slots(dependencies: &[u64]) -> Result<[hsa_signal_t; MAX_DEPENDENCIES], EncodeError> {
    if dependencies.len() > MAX_DEPENDENCIES {
        return Err(EncodeError::TooManyDependencies(dependencies.len()));
    }
    Ok(core::array::from_fn(|k| hsa_signal_t {
        handle: dependencies.get(k).copied().unwrap_or(0),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HSA_SIGNAL_CONDITION_GTE;

    /// Each field lands at the byte offset of the C struct, read back from
    /// the raw words (not through the struct the encoder wrote).
    #[test]
    fn every_kind_puts_its_fields_at_the_c_offsets() {
        let dispatch = DispatchBody {
            kernel_object: 0x1111_2222_3333_4444,
            kernarg_address: 0x7f00_0000_1000,
            grid: [1000, 3, 2],
            workgroup: [256, 4, 1],
            dimensions: 3,
            private_segment_size: 32,
            group_segment_size: 2048,
        };
        let words = encode(AqlWork::Dispatch(dispatch), true, 0x40).unwrap();
        assert_eq!(
            words.0[0],
            0x0003_0000 | 0x1502,
            "setup 3, system fences, barrier, type 2"
        );
        assert_eq!(words.0[1], 256 | 4 << 16);
        assert_eq!(words.0[2] & 0xffff, 1);
        assert_eq!(&words.0[3..8], &[1000, 3, 2, 32, 2048]);
        assert_eq!(words.u64_at(32), dispatch.kernel_object);
        assert_eq!(words.u64_at(40), dispatch.kernarg_address);
        assert_eq!(words.u64_at(56), 0x40);

        let wait = BarrierValue {
            signal: 0x1000,
            condition: HSA_SIGNAL_CONDITION_GTE,
            compare: -2,
            mask: 0xff,
        };
        let words = encode(AqlWork::BarrierValue(wait), false, 0x80).unwrap();
        assert_eq!(
            words.0[0],
            u32::from(HSA_AMD_PACKET_TYPE_BARRIER_VALUE) << 16 | 0x1400
        );
        assert_eq!(
            (words.u64_at(8), words.u64_at(16) as i64, words.u64_at(24)),
            (0x1000, -2, 0xff)
        );
        assert_eq!(words.0[8], HSA_SIGNAL_CONDITION_GTE);
        assert_eq!(words.u64_at(56), 0x80);

        let words = encode(AqlWork::BarrierAnd(&[1, 2, 3, 4, 5]), false, 0).unwrap();
        assert_eq!(words.0[0], 0x1403);
        assert_eq!(
            (1..=5).map(|k| words.u64_at(8 * k)).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );

        let empty = encode(AqlWork::Empty, false, 0x40).unwrap();
        assert_eq!(
            empty,
            encode(AqlWork::BarrierAnd(&[]), false, 0x40).unwrap()
        );
        assert!(empty.0[1..14].iter().all(|&w| w == 0));
    }

    #[test]
    fn barrier_packets_refuse_more_than_they_hold() {
        let six = [1; MAX_DEPENDENCIES + 1];
        for work in [AqlWork::BarrierAnd(&six), AqlWork::BarrierOr(&six)] {
            assert_eq!(
                encode(work, false, 0),
                Err(EncodeError::TooManyDependencies(6))
            );
        }
        // No dependency is a packet the processor completes at once.
        let none = encode(AqlWork::BarrierOr(&[]), true, 0).unwrap();
        assert_eq!(
            PacketHeader::from_bits(none.header()).packet_type,
            HSA_PACKET_TYPE_BARRIER_OR
        );
    }
}
