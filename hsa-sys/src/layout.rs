//! Compile-time checks of every size, alignment and offset the project relies
//! on. The numbers are those of Debian's ROCr 5.2.3 headers (DESIGN.md section
//! 2); `tests/c_layout.rs` compares them with a C compiler where the headers
//! are installed.

use crate::*;
use core::mem::{align_of, offset_of, size_of};

macro_rules! assert_layout {
    ($ty:ty, size $size:literal, align $align:literal $(, $field:ident @ $offset:literal)* $(,)?) => {
        const _: () = assert!(size_of::<$ty>() == $size);
        const _: () = assert!(align_of::<$ty>() == $align);
        $(const _: () = assert!(offset_of!($ty, $field) == $offset);)*
    };
}

assert_layout!(hsa_signal_t, size 8, align 8, handle @ 0);
assert_layout!(hsa_agent_t, size 8, align 8, handle @ 0);
assert_layout!(hsa_region_t, size 8, align 8, handle @ 0);
assert_layout!(hsa_amd_memory_pool_t, size 8, align 8, handle @ 0);
assert_layout!(
    amd_signal_t, size 64, align 64,
    kind @ 0, value @ 8, event_mailbox_ptr @ 16, event_id @ 24, reserved1 @ 28,
    start_ts @ 32, end_ts @ 40, queue_ptr @ 48, reserved3 @ 56,
);
assert_layout!(
    hsa_queue_t, size 40, align 8,
    type_ @ 0, features @ 4, base_address @ 8, doorbell_signal @ 16, size @ 24,
    reserved1 @ 28, id @ 32,
);
assert_layout!(
    amd_queue_t, size 256, align 64,
    hsa_queue @ 0, write_dispatch_id @ 56, read_dispatch_id @ 128,
    queue_properties @ 180, queue_inactive_signal @ 192,
);
assert_layout!(
    hsa_kernel_dispatch_packet_t, size 64, align 8,
    header @ 0, setup @ 2, workgroup_size_x @ 4, workgroup_size_y @ 6,
    workgroup_size_z @ 8, reserved0 @ 10, grid_size_x @ 12, grid_size_y @ 16,
    grid_size_z @ 20, private_segment_size @ 24, group_segment_size @ 28,
    kernel_object @ 32, kernarg_address @ 40, reserved2 @ 48, completion_signal @ 56,
);
assert_layout!(
    hsa_barrier_and_packet_t, size 64, align 8,
    header @ 0, reserved0 @ 2, reserved1 @ 4, dep_signal @ 8, reserved2 @ 48,
    completion_signal @ 56,
);
assert_layout!(
    hsa_barrier_or_packet_t, size 64, align 8,
    header @ 0, reserved0 @ 2, reserved1 @ 4, dep_signal @ 8, reserved2 @ 48,
    completion_signal @ 56,
);
assert_layout!(hsa_amd_vendor_packet_header_t, size 4, align 2, header @ 0, AmdFormat @ 2, reserved @ 3);
assert_layout!(
    hsa_amd_barrier_value_packet_t, size 64, align 8,
    header @ 0, reserved0 @ 4, signal @ 8, value @ 16, mask @ 24, cond @ 32,
    reserved1 @ 36, reserved2 @ 40, reserved3 @ 48, completion_signal @ 56,
);
assert_layout!(hsa_amd_hdp_flush_t, size 16, align 8, HDP_MEM_FLUSH_CNTL @ 0, HDP_REG_FLUSH_CNTL @ 8);
assert_layout!(hsa_amd_profiling_dispatch_time_t, size 16, align 8, start @ 0, end @ 8);
assert_layout!(PacketWords, size 64, align 64);
assert_layout!(AqlSlot, size 64, align 64);
