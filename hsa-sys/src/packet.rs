//! AQL packets: the 64-byte records a producer writes into a queue's ring, the
//! 16-bit header that publishes them, and the publication order itself.

use crate::{hsa_signal_condition32_t, hsa_signal_t, hsa_signal_value_t};
use core::ffi::c_void;
use core::sync::atomic::{AtomicU32, Ordering};

/// `hsa_packet_type_t`: bits 0-7 of a packet header.
///
/// One byte, where C's enum is four: the value only ever lives in header bits
/// and never crosses a function call.
pub type hsa_packet_type_t = u8;
/// Vendor-specific packet; AMD's formats are selected by the `AmdFormat` byte.
pub const HSA_PACKET_TYPE_VENDOR_SPECIFIC: hsa_packet_type_t = 0;
/// A slot the packet processor must not consume yet (also what it writes back).
pub const HSA_PACKET_TYPE_INVALID: hsa_packet_type_t = 1;
/// Kernel dispatch.
pub const HSA_PACKET_TYPE_KERNEL_DISPATCH: hsa_packet_type_t = 2;
/// Barrier-AND: completes when every dependency signal is 0.
pub const HSA_PACKET_TYPE_BARRIER_AND: hsa_packet_type_t = 3;
/// Agent dispatch.
pub const HSA_PACKET_TYPE_AGENT_DISPATCH: hsa_packet_type_t = 4;
/// Barrier-OR: completes when any dependency signal is 0.
pub const HSA_PACKET_TYPE_BARRIER_OR: hsa_packet_type_t = 5;

/// `hsa_amd_packet_type8_t`: the `AmdFormat` byte of a vendor packet.
pub type hsa_amd_packet_type8_t = u8;
/// AMD's barrier-value packet format.
pub const HSA_AMD_PACKET_TYPE_BARRIER_VALUE: hsa_amd_packet_type8_t = 2;

/// `hsa_fence_scope_t`: the memory scope of an acquire or release fence.
///
/// One byte, where C's enum is four, for the same reason as [`hsa_packet_type_t`].
pub type hsa_fence_scope_t = u8;
/// No fence.
pub const HSA_FENCE_SCOPE_NONE: hsa_fence_scope_t = 0;
/// The agent's own memory.
pub const HSA_FENCE_SCOPE_AGENT: hsa_fence_scope_t = 1;
/// All system memory.
pub const HSA_FENCE_SCOPE_SYSTEM: hsa_fence_scope_t = 2;

/// Bit offset of the packet type in the header.
pub const HSA_PACKET_HEADER_TYPE: u32 = 0;
/// Bit offset of the barrier bit.
pub const HSA_PACKET_HEADER_BARRIER: u32 = 8;
/// Bit offset of the acquire fence scope.
pub const HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE: u32 = 9;
/// Bit offset of the release fence scope.
pub const HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE: u32 = 11;
/// Width of the type field.
pub const HSA_PACKET_HEADER_WIDTH_TYPE: u32 = 8;
/// Width of the barrier field.
pub const HSA_PACKET_HEADER_WIDTH_BARRIER: u32 = 1;
/// Width of either fence-scope field.
pub const HSA_PACKET_HEADER_WIDTH_FENCE_SCOPE: u32 = 2;
/// Width of the acquire fence-scope field (the C name).
pub const HSA_PACKET_HEADER_WIDTH_SCACQUIRE_FENCE_SCOPE: u32 = HSA_PACKET_HEADER_WIDTH_FENCE_SCOPE;
/// Width of the release fence-scope field (the C name).
pub const HSA_PACKET_HEADER_WIDTH_SCRELEASE_FENCE_SCOPE: u32 = HSA_PACKET_HEADER_WIDTH_FENCE_SCOPE;
/// Width of the dimension count in a kernel dispatch's `setup` field.
pub const HSA_KERNEL_DISPATCH_PACKET_SETUP_WIDTH_DIMENSIONS: u32 = 2;
/// Bit offset of the dimension count in a kernel dispatch's `setup` field.
pub const HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS: u32 = 0;

/// A decoded packet header: the 16 bits that publish a packet.
///
/// ```
/// use hsa_sys::{PacketHeader, HSA_PACKET_TYPE_BARRIER_AND, HSA_FENCE_SCOPE_SYSTEM};
///
/// let header = PacketHeader::new(HSA_PACKET_TYPE_BARRIER_AND)
///     .barrier(true)
///     .release(HSA_FENCE_SCOPE_SYSTEM);
/// let bits = header.bits();
/// assert_eq!(bits & 0xff, 3);
/// assert_eq!(bits >> 8 & 1, 1);
/// assert_eq!(PacketHeader::from_bits(bits), header);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PacketHeader {
    /// Bits 0-7: the packet type.
    pub packet_type: hsa_packet_type_t,
    /// Bit 8: the packet does not launch until every earlier packet completed.
    pub barrier: bool,
    /// Bits 9-10: the acquire fence scope.
    pub acquire: hsa_fence_scope_t,
    /// Bits 11-12: the release fence scope.
    pub release: hsa_fence_scope_t,
}

impl PacketHeader {
    /// A header of `packet_type` with no barrier bit and system-scope fences,
    /// the usual choice for packets whose completion the host observes.
    pub const fn new(packet_type: hsa_packet_type_t) -> Self {
        Self {
            packet_type,
            barrier: false,
            acquire: HSA_FENCE_SCOPE_SYSTEM,
            release: HSA_FENCE_SCOPE_SYSTEM,
        }
    }

    /// Sets the barrier bit.
    pub const fn barrier(mut self, barrier: bool) -> Self {
        self.barrier = barrier;
        self
    }

    /// Sets the acquire fence scope.
    pub const fn acquire(mut self, scope: hsa_fence_scope_t) -> Self {
        self.acquire = scope;
        self
    }

    /// Sets the release fence scope.
    pub const fn release(mut self, scope: hsa_fence_scope_t) -> Self {
        self.release = scope;
        self
    }

    /// The 16-bit header word.
    pub const fn bits(self) -> u16 {
        (self.packet_type as u16) << HSA_PACKET_HEADER_TYPE
            | (self.barrier as u16) << HSA_PACKET_HEADER_BARRIER
            | ((self.acquire & 3) as u16) << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE
            | ((self.release & 3) as u16) << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE
    }

    /// Decodes a header word (bits 13-15 are ignored, as the packet processor does).
    pub const fn from_bits(bits: u16) -> Self {
        Self {
            packet_type: (bits >> HSA_PACKET_HEADER_TYPE) as u8,
            barrier: (bits >> HSA_PACKET_HEADER_BARRIER) & 1 == 1,
            acquire: ((bits >> HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE) & 3) as u8,
            release: ((bits >> HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE) & 3) as u8,
        }
    }
}

/// A kernel dispatch packet (`hsa_kernel_dispatch_packet_t`).
///
/// ```
/// use hsa_sys::{hsa_kernel_dispatch_packet_t, hsa_signal_t, PacketHeader, HSA_PACKET_TYPE_KERNEL_DISPATCH};
///
/// let mut packet = hsa_kernel_dispatch_packet_t::single_item(
///     PacketHeader::new(HSA_PACKET_TYPE_KERNEL_DISPATCH),
///     0xC0DE_0000, // the kernel's code object
///     hsa_signal_t { handle: 0x40 },
/// );
/// packet.grid_size_x = 1024; // a real kernel sets its own shape
/// packet.workgroup_size_x = 256;
/// assert_eq!(std::mem::offset_of!(hsa_kernel_dispatch_packet_t, completion_signal), 56);
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct hsa_kernel_dispatch_packet_t {
    /// Offset 0.
    pub header: u16,
    /// Offset 2: dimensions in bits 0-1.
    pub setup: u16,
    /// Offset 4.
    pub workgroup_size_x: u16,
    /// Offset 6.
    pub workgroup_size_y: u16,
    /// Offset 8.
    pub workgroup_size_z: u16,
    /// Offset 10.
    pub reserved0: u16,
    /// Offset 12.
    pub grid_size_x: u32,
    /// Offset 16.
    pub grid_size_y: u32,
    /// Offset 20.
    pub grid_size_z: u32,
    /// Offset 24.
    pub private_segment_size: u32,
    /// Offset 28.
    pub group_segment_size: u32,
    /// Offset 32: the kernel code object.
    pub kernel_object: u64,
    /// Offset 40.
    pub kernarg_address: *mut c_void,
    /// Offset 48.
    pub reserved2: u64,
    /// Offset 56.
    pub completion_signal: hsa_signal_t,
}

impl hsa_kernel_dispatch_packet_t {
    /// A dispatch of a single work-item of `kernel_object` (a grid and a
    /// work-group of one, in one dimension), with no kernel arguments and no
    /// segments: what empty work and the project's simulated kernels need.
    /// Real kernels set their code object's sizes and arguments on top.
    ///
    /// ```
    /// use hsa_sys::{hsa_kernel_dispatch_packet_t, hsa_signal_t, PacketHeader, HSA_PACKET_TYPE_KERNEL_DISPATCH};
    /// let header = PacketHeader::new(HSA_PACKET_TYPE_KERNEL_DISPATCH).barrier(true);
    /// let packet = hsa_kernel_dispatch_packet_t::single_item(header, 0, hsa_signal_t { handle: 0x40 });
    /// assert_eq!(packet.grid_size_x, 1);
    /// assert_eq!(packet.setup, 1);
    /// ```
    pub const fn single_item(
        header: PacketHeader,
        kernel_object: u64,
        completion_signal: hsa_signal_t,
    ) -> Self {
        Self {
            header: header.bits(),
            setup: 1 << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS,
            workgroup_size_x: 1,
            workgroup_size_y: 1,
            workgroup_size_z: 1,
            reserved0: 0,
            grid_size_x: 1,
            grid_size_y: 1,
            grid_size_z: 1,
            private_segment_size: 0,
            group_segment_size: 0,
            kernel_object,
            kernarg_address: core::ptr::null_mut(),
            reserved2: 0,
            completion_signal,
        }
    }
}

/// A barrier-AND packet (`hsa_barrier_and_packet_t`): waits until every
/// non-null dependency is 0. Also used with no dependencies as empty work.
///
/// ```
/// use hsa_sys::{hsa_barrier_and_packet_t, hsa_signal_t, PacketHeader, HSA_PACKET_TYPE_BARRIER_AND};
///
/// let mut packet = hsa_barrier_and_packet_t {
///     header: PacketHeader::new(HSA_PACKET_TYPE_BARRIER_AND).barrier(true).bits(),
///     ..Default::default()
/// };
/// packet.dep_signal[0] = hsa_signal_t { handle: 0x1000 }; // another queue's signal
/// assert!(packet.dep_signal[1..].iter().all(|s| s.is_null()), "null entries are ignored");
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct hsa_barrier_and_packet_t {
    /// Offset 0.
    pub header: u16,
    /// Offset 2.
    pub reserved0: u16,
    /// Offset 4.
    pub reserved1: u32,
    /// Offset 8: up to five dependencies; null entries are ignored.
    pub dep_signal: [hsa_signal_t; 5],
    /// Offset 48.
    pub reserved2: u64,
    /// Offset 56.
    pub completion_signal: hsa_signal_t,
}

/// A barrier-OR packet (`hsa_barrier_or_packet_t`): waits until any non-null
/// dependency is 0.
///
/// ```
/// use hsa_sys::{hsa_barrier_or_packet_t, hsa_signal_t, PacketHeader, PacketWords, HSA_PACKET_TYPE_BARRIER_OR};
///
/// let packet = hsa_barrier_or_packet_t {
///     header: PacketHeader::new(HSA_PACKET_TYPE_BARRIER_OR).bits(),
///     dep_signal: [hsa_signal_t { handle: 0x1000 }, hsa_signal_t { handle: 0x2000 }, hsa_signal_t::NULL, hsa_signal_t::NULL, hsa_signal_t::NULL],
///     ..Default::default()
/// };
/// assert_eq!(PacketWords::from(packet).u64_at(16), 0x2000);
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct hsa_barrier_or_packet_t {
    /// Offset 0.
    pub header: u16,
    /// Offset 2.
    pub reserved0: u16,
    /// Offset 4.
    pub reserved1: u32,
    /// Offset 8: up to five dependencies; null entries are ignored.
    pub dep_signal: [hsa_signal_t; 5],
    /// Offset 48.
    pub reserved2: u64,
    /// Offset 56.
    pub completion_signal: hsa_signal_t,
}

/// The header of an AMD vendor packet (`hsa_amd_vendor_packet_header_t`).
///
/// ```
/// use hsa_sys::{hsa_amd_vendor_packet_header_t, PacketHeader, HSA_AMD_PACKET_TYPE_BARRIER_VALUE, HSA_PACKET_TYPE_VENDOR_SPECIFIC};
///
/// let header = hsa_amd_vendor_packet_header_t {
///     header: PacketHeader::new(HSA_PACKET_TYPE_VENDOR_SPECIFIC).bits(),
///     AmdFormat: HSA_AMD_PACKET_TYPE_BARRIER_VALUE,
///     reserved: 0,
/// };
/// assert_eq!(std::mem::size_of_val(&header), 4, "header and setup of an ordinary packet");
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct hsa_amd_vendor_packet_header_t {
    /// Offset 0: an ordinary header with type [`HSA_PACKET_TYPE_VENDOR_SPECIFIC`].
    pub header: u16,
    /// Offset 2: the AMD format, e.g. [`HSA_AMD_PACKET_TYPE_BARRIER_VALUE`].
    pub AmdFormat: hsa_amd_packet_type8_t,
    /// Offset 3.
    pub reserved: u8,
}

/// AMD's barrier-value packet (`hsa_amd_barrier_value_packet_t`): waits until
/// `(signal & mask) cond value` holds.
///
/// ```
/// use hsa_sys::*;
///
/// let packet = hsa_amd_barrier_value_packet_t {
///     header: hsa_amd_vendor_packet_header_t {
///         header: PacketHeader::new(HSA_PACKET_TYPE_VENDOR_SPECIFIC).barrier(true).bits(),
///         AmdFormat: HSA_AMD_PACKET_TYPE_BARRIER_VALUE,
///         reserved: 0,
///     },
///     signal: hsa_signal_t { handle: 0x1000 },
///     value: 0,
///     mask: -1,
///     cond: HSA_SIGNAL_CONDITION_EQ, // until the signal is 0
///     completion_signal: hsa_signal_t { handle: 0x2000 },
///     ..Default::default()
/// };
/// assert_eq!(PacketWords::from(packet).completion_signal().handle, 0x2000);
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct hsa_amd_barrier_value_packet_t {
    /// Offset 0.
    pub header: hsa_amd_vendor_packet_header_t,
    /// Offset 4.
    pub reserved0: u32,
    /// Offset 8: the signal compared.
    pub signal: hsa_signal_t,
    /// Offset 16: the compare value.
    pub value: hsa_signal_value_t,
    /// Offset 24: the mask applied to the signal value before comparing.
    pub mask: hsa_signal_value_t,
    /// Offset 32: an `HSA_SIGNAL_CONDITION_*` value.
    pub cond: hsa_signal_condition32_t,
    /// Offset 36.
    pub reserved1: u32,
    /// Offset 40.
    pub reserved2: u64,
    /// Offset 48.
    pub reserved3: u64,
    /// Offset 56.
    pub completion_signal: hsa_signal_t,
}

/// Size of every AQL packet in bytes.
pub const AQL_PACKET_BYTES: usize = 64;

/// A packet as sixteen 32-bit words: word 0 holds `header | setup << 16`.
///
/// Every packet type converts into this form, and [`AqlSlot::publish`] writes
/// it in HSA order.
///
/// ```
/// use hsa_sys::{hsa_barrier_and_packet_t, hsa_signal_t, PacketWords};
/// let packet = hsa_barrier_and_packet_t {
///     completion_signal: hsa_signal_t { handle: 0x1234_0000_5678 },
///     ..Default::default()
/// };
/// let words = PacketWords::from(packet);
/// assert_eq!(words.completion_signal(), packet.completion_signal);
/// assert_eq!(hsa_barrier_and_packet_t::from(words), packet);
/// ```
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketWords(pub [u32; 16]);

impl PacketWords {
    /// The 16-bit header.
    pub const fn header(&self) -> u16 {
        self.0[0] as u16
    }

    /// The 16 bits after the header (`setup` of a kernel dispatch).
    pub const fn setup(&self) -> u16 {
        (self.0[0] >> 16) as u16
    }

    /// The 64-bit word at byte `offset` (a multiple of 8).
    pub const fn u64_at(&self, offset: usize) -> u64 {
        let i = offset / 4;
        self.0[i] as u64 | (self.0[i + 1] as u64) << 32
    }

    /// The completion signal, at offset 56 in every packet type.
    pub const fn completion_signal(&self) -> hsa_signal_t {
        hsa_signal_t {
            handle: self.u64_at(56),
        }
    }
}

macro_rules! packet_words_conversions {
    ($($packet:ty),* $(,)?) => {$(
        const _: () = assert!(core::mem::size_of::<$packet>() == AQL_PACKET_BYTES);

        impl From<$packet> for PacketWords {
            fn from(packet: $packet) -> Self {
                // SAFETY: the packet is a 64-byte `repr(C)` struct whose fields
                // tile it with no padding (checked in `layout.rs`), so every byte
                // is initialised and any bit pattern is a valid `[u32; 16]`.
                PacketWords(unsafe { core::mem::transmute::<$packet, [u32; 16]>(packet) })
            }
        }

        impl From<PacketWords> for $packet {
            fn from(words: PacketWords) -> Self {
                // SAFETY: same size and no padding, as above; every field of the
                // packet is an integer or a raw pointer, for which any bit
                // pattern is valid.
                unsafe { core::mem::transmute::<[u32; 16], $packet>(words.0) }
            }
        }
    )*};
}

packet_words_conversions!(
    hsa_kernel_dispatch_packet_t,
    hsa_barrier_and_packet_t,
    hsa_barrier_or_packet_t,
    hsa_amd_barrier_value_packet_t,
);

/// A store fence: every store this thread made before it, write-combined
/// stores to VRAM included, reaches memory before any store it makes after it.
///
/// x86_64's `sfence`, which Intel and AMD both document as ordering
/// write-combined stores. (Not `fence(SeqCst)`: rustc lowers that to a locked
/// read-modify-write of the stack, whose effect on write-combining buffers the
/// manuals describe less plainly.) Elsewhere, the strongest portable fence.
/// It is also a compiler barrier: no memory access moves across it.
///
/// ```
/// hsa_sys::store_fence(); // cheap unless write-combined stores are pending
/// ```
#[inline]
pub fn store_fence() {
    // Miri cannot run `sfence`; in its model a full fence orders as much.
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        core::sync::atomic::compiler_fence(Ordering::SeqCst);
        // SAFETY: `sfence` has no operands and no preconditions; SSE is part
        // of the x86_64 baseline.
        unsafe { core::arch::x86_64::_mm_sfence() };
        core::sync::atomic::compiler_fence(Ordering::SeqCst);
    }
    #[cfg(any(not(target_arch = "x86_64"), miri))]
    core::sync::atomic::fence(Ordering::SeqCst);
}

/// One 64-byte slot of an AQL ring, seen as atomics so that a producer and
/// the packet processor may touch it concurrently without a data race.
///
/// ```
/// use hsa_sys::{AqlSlot, PacketHeader, PacketWords, HSA_PACKET_TYPE_BARRIER_AND};
///
/// let slot = AqlSlot::invalid();
/// assert!(slot.header().is_none());
/// let mut words = PacketWords::default();
/// words.0[0] = u32::from(PacketHeader::new(HSA_PACKET_TYPE_BARRIER_AND).bits());
/// slot.publish(words);
/// assert_eq!(slot.read(), words);
/// ```
#[repr(C, align(64))]
#[derive(Debug)]
pub struct AqlSlot(pub [AtomicU32; 16]);

impl AqlSlot {
    /// A slot holding an INVALID header, as a fresh ring does.
    pub const fn invalid() -> Self {
        let mut words = [const { AtomicU32::new(0) }; 16];
        words[0] = AtomicU32::new(HSA_PACKET_TYPE_INVALID as u32);
        AqlSlot(words)
    }

    /// Writes a packet in HSA order (docs/design.md section 2): words 1-15 (the
    /// body), a [`store_fence`], then word 0 (header and setup) with a release
    /// store, so a consumer that sees the new header with an acquire load also
    /// sees the whole body.
    ///
    /// The release store alone is not enough when the ring is write-combined
    /// VRAM (a ring ROCr placed in device memory, reached through the BAR):
    /// write-combined stores may leave the CPU in any order, so without the
    /// fence the packet processor could fetch the new header before the body.
    /// The caller still fences before it rings the doorbell.
    ///
    /// ```
    /// use hsa_sys::{AqlSlot, PacketHeader, PacketWords, HSA_PACKET_TYPE_BARRIER_AND};
    ///
    /// let slot = AqlSlot::invalid();
    /// let mut words = PacketWords::default();
    /// words.0[0] = u32::from(PacketHeader::new(HSA_PACKET_TYPE_BARRIER_AND).bits());
    /// words.0[14] = 0x40; // the completion signal's low half
    /// slot.publish(words);
    /// assert_eq!(slot.read(), words);
    /// ```
    pub fn publish(&self, words: PacketWords) {
        self.publish_with(words, store_fence);
    }

    /// [`AqlSlot::publish`] with the caller's store fence, run once between
    /// the body and the header: the backend passes one that it counts.
    /// `store_fence` must order every store before it (write-combined ones
    /// included) before every store after it, as [`store_fence`] does.
    ///
    /// ```
    /// use hsa_sys::{AqlSlot, PacketWords};
    ///
    /// let slot = AqlSlot::invalid();
    /// let words = PacketWords([7; 16]);
    /// let mut fences = 0;
    /// slot.publish_with(words, || {
    ///     // At the fence the body is written and the header is not yet.
    ///     assert!(slot.header().is_none());
    ///     fences += 1;
    ///     hsa_sys::store_fence();
    /// });
    /// assert_eq!((fences, slot.read()), (1, words));
    /// ```
    pub fn publish_with(&self, words: PacketWords, store_fence: impl FnOnce()) {
        for (slot_word, word) in self.0.iter().zip(words.0).skip(1) {
            slot_word.store(word, Ordering::Relaxed);
        }
        store_fence();
        self.0[0].store(words.0[0], Ordering::Release);
    }

    /// The header with acquire ordering, or `None` while the slot is INVALID.
    ///
    /// ```
    /// use hsa_sys::{AqlSlot, PacketHeader, PacketWords, HSA_PACKET_TYPE_BARRIER_AND};
    ///
    /// let slot = AqlSlot::invalid();
    /// assert_eq!(slot.header(), None, "nothing to consume");
    /// let header = PacketHeader::new(HSA_PACKET_TYPE_BARRIER_AND).barrier(true);
    /// slot.publish(PacketWords([u32::from(header.bits()), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]));
    /// assert_eq!(slot.header(), Some(header));
    /// slot.invalidate(); // what the packet processor does once it consumed it
    /// assert_eq!(slot.header(), None);
    /// ```
    pub fn header(&self) -> Option<PacketHeader> {
        let word = self.0[0].load(Ordering::Acquire);
        let header = PacketHeader::from_bits(word as u16);
        (header.packet_type != HSA_PACKET_TYPE_INVALID).then_some(header)
    }

    /// Reads the whole packet: the header word with acquire ordering first, so
    /// the body read after it belongs to the same publication.
    pub fn read(&self) -> PacketWords {
        let mut words = [0u32; 16];
        words[0] = self.0[0].load(Ordering::Acquire);
        for (word, slot_word) in words.iter_mut().zip(&self.0).skip(1) {
            *word = slot_word.load(Ordering::Relaxed);
        }
        PacketWords(words)
    }

    /// Marks the slot INVALID again (what the packet processor does once it
    /// has consumed a packet), with a release store.
    pub fn invalidate(&self) {
        self.0[0].store(HSA_PACKET_TYPE_INVALID as u32, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The publication order of docs/design.md section 2, observed at the fence:
    /// every body word is already written, the header not yet; the fence runs
    /// once; the header follows it.
    #[test]
    fn publish_with_fences_between_the_body_and_the_header() {
        let slot = AqlSlot::invalid();
        let mut words = PacketWords(core::array::from_fn(|i| 0x100 + i as u32));
        words.0[0] = u32::from(PacketHeader::new(HSA_PACKET_TYPE_BARRIER_AND).bits());
        let mut seen = None;
        slot.publish_with(words, || {
            let now: [u32; 16] = core::array::from_fn(|i| slot.0[i].load(Ordering::Relaxed));
            assert!(seen.replace(now).is_none(), "the fence ran twice");
        });
        let at_fence = seen.expect("the fence never ran");
        assert_eq!(
            at_fence[0], HSA_PACKET_TYPE_INVALID as u32,
            "the header was published before the fence"
        );
        assert_eq!(
            at_fence[1..],
            words.0[1..],
            "the body was incomplete at the fence"
        );
        assert_eq!(slot.read(), words);
    }
}
