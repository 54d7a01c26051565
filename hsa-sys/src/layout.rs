//! Compile-time checks of every size, alignment and offset the project relies
//! on. The numbers are those of Debian's ROCr 5.2.3 headers (docs/design.md section
//! 2).
//!
//! The same list becomes [`C_LAYOUTS`], which `tests/c_layout.rs` hands to a C
//! compiler reading those headers: adding a line here both asserts it against
//! the Rust type and checks it against C, with nothing else to keep in step.

use crate::*;
use core::mem::{align_of, offset_of, size_of};

/// The recorded layout of one C struct this crate mirrors.
///
/// Not API: it exists so that `tests/c_layout.rs` can compare every entry
/// with what a C compiler says about the type of the same name.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct CLayout {
    /// The type's name, the same in Rust and C.
    pub name: &'static str,
    /// `sizeof`.
    pub size: usize,
    /// `_Alignof`.
    pub align: usize,
    /// `(field, offsetof)` for each checked field. A trailing `_` marks a
    /// field renamed because its C name is a Rust keyword (`type_`).
    pub fields: &'static [(&'static str, usize)],
}

macro_rules! c_layouts {
    ($(
        $ty:ident: size $size:literal, align $align:literal { $($field:ident @ $offset:literal),* $(,)? }
    )*) => {
        $(
            const _: () = assert!(size_of::<$ty>() == $size, concat!("size of ", stringify!($ty)));
            const _: () = assert!(align_of::<$ty>() == $align, concat!("alignment of ", stringify!($ty)));
            $(
                const _: () = assert!(
                    offset_of!($ty, $field) == $offset,
                    concat!("offset of ", stringify!($ty), ".", stringify!($field)),
                );
            )*
        )*

        /// Every C struct layout asserted in this module, for `tests/c_layout.rs`.
        #[doc(hidden)]
        pub const C_LAYOUTS: &[CLayout] = &[$(
            CLayout {
                name: stringify!($ty),
                size: $size,
                align: $align,
                fields: &[$((stringify!($field), $offset)),*],
            },
        )*];
    };
}

c_layouts! {
    hsa_signal_t: size 8, align 8 { handle @ 0 }
    hsa_agent_t: size 8, align 8 { handle @ 0 }
    hsa_region_t: size 8, align 8 { handle @ 0 }
    hsa_amd_memory_pool_t: size 8, align 8 { handle @ 0 }
    amd_signal_t: size 64, align 64 {
        kind @ 0, value @ 8, event_mailbox_ptr @ 16, event_id @ 24, reserved1 @ 28,
        start_ts @ 32, end_ts @ 40, queue_ptr @ 48, reserved3 @ 56,
    }
    hsa_queue_t: size 40, align 8 {
        type_ @ 0, features @ 4, base_address @ 8, doorbell_signal @ 16, size @ 24,
        reserved1 @ 28, id @ 32,
    }
    amd_queue_t: size 256, align 64 {
        hsa_queue @ 0, reserved1 @ 40, write_dispatch_id @ 56,
        group_segment_aperture_base_hi @ 64, private_segment_aperture_base_hi @ 68,
        max_cu_id @ 72, max_wave_id @ 76, max_legacy_doorbell_dispatch_id_plus_1 @ 80,
        legacy_doorbell_lock @ 88, reserved2 @ 92, read_dispatch_id @ 128,
        read_dispatch_id_field_base_byte_offset @ 136, compute_tmpring_size @ 140,
        scratch_resource_descriptor @ 144, scratch_backing_memory_location @ 160,
        scratch_backing_memory_byte_size @ 168, scratch_wave64_lane_byte_size @ 176,
        queue_properties @ 180, reserved3 @ 184, queue_inactive_signal @ 192, reserved4 @ 200,
    }
    hsa_kernel_dispatch_packet_t: size 64, align 8 {
        header @ 0, setup @ 2, workgroup_size_x @ 4, workgroup_size_y @ 6,
        workgroup_size_z @ 8, reserved0 @ 10, grid_size_x @ 12, grid_size_y @ 16,
        grid_size_z @ 20, private_segment_size @ 24, group_segment_size @ 28,
        kernel_object @ 32, kernarg_address @ 40, reserved2 @ 48, completion_signal @ 56,
    }
    hsa_barrier_and_packet_t: size 64, align 8 {
        header @ 0, reserved0 @ 2, reserved1 @ 4, dep_signal @ 8, reserved2 @ 48,
        completion_signal @ 56,
    }
    hsa_barrier_or_packet_t: size 64, align 8 {
        header @ 0, reserved0 @ 2, reserved1 @ 4, dep_signal @ 8, reserved2 @ 48,
        completion_signal @ 56,
    }
    hsa_amd_vendor_packet_header_t: size 4, align 2 { header @ 0, AmdFormat @ 2, reserved @ 3 }
    hsa_amd_barrier_value_packet_t: size 64, align 8 {
        header @ 0, reserved0 @ 4, signal @ 8, value @ 16, mask @ 24, cond @ 32,
        reserved1 @ 36, reserved2 @ 40, reserved3 @ 48, completion_signal @ 56,
    }
    hsa_amd_hdp_flush_t: size 16, align 8 { HDP_MEM_FLUSH_CNTL @ 0, HDP_REG_FLUSH_CNTL @ 8 }
    hsa_amd_profiling_dispatch_time_t: size 16, align 8 { start @ 0, end @ 8 }
}

// Rust-only views of a packet slot: no C type to compare them with, but the
// ring arithmetic relies on them tiling 64-byte slots exactly.
const _: () = assert!(size_of::<PacketWords>() == 64 && align_of::<PacketWords>() == 64);
const _: () = assert!(size_of::<AqlSlot>() == 64 && align_of::<AqlSlot>() == 64);
