//! Queues: the public `hsa_queue_t` and the AMD block it is embedded in.

use crate::hsa_signal_t;
use core::ffi::c_void;

/// `hsa_queue_type_t`: who may write packets into a queue.
pub type hsa_queue_type_t = u32;
/// `hsa_queue_type32_t`: the fixed-size form of [`hsa_queue_type_t`] that
/// `hsa_queue_create` and [`hsa_queue_t`] use.
pub type hsa_queue_type32_t = u32;
/// `HSA_QUEUE_TYPE_MULTI`: several producers may write packets.
pub const HSA_QUEUE_TYPE_MULTI: hsa_queue_type32_t = 0;
/// `HSA_QUEUE_TYPE_SINGLE`: one producer writes packets.
pub const HSA_QUEUE_TYPE_SINGLE: hsa_queue_type32_t = 1;
/// `HSA_QUEUE_TYPE_COOPERATIVE`: multi-producer, for cooperative dispatches; ROCr
/// may hand the same queue to several `hsa_queue_create` calls.
pub const HSA_QUEUE_TYPE_COOPERATIVE: hsa_queue_type32_t = 2;

/// `hsa_queue_feature_t`: bits of [`hsa_queue_t::features`].
pub type hsa_queue_feature_t = u32;
/// The queue accepts kernel dispatch packets.
pub const HSA_QUEUE_FEATURE_KERNEL_DISPATCH: hsa_queue_feature_t = 1;
/// The queue accepts agent dispatch packets.
pub const HSA_QUEUE_FEATURE_AGENT_DISPATCH: hsa_queue_feature_t = 2;

/// The user-mode queue descriptor (`hsa_queue_t`, 40 bytes on 64-bit hosts).
///
/// ```
/// assert_eq!(std::mem::size_of::<hsa_sys::hsa_queue_t>(), 40);
/// ```
#[repr(C)]
#[derive(Debug)]
pub struct hsa_queue_t {
    /// Offset 0: [`HSA_QUEUE_TYPE_MULTI`] or [`HSA_QUEUE_TYPE_SINGLE`].
    pub type_: hsa_queue_type32_t,
    /// Offset 4: `HSA_QUEUE_FEATURE_*` bits.
    pub features: u32,
    /// Offset 8: the packet ring (64-byte aligned, `size` packets).
    pub base_address: *mut c_void,
    /// Offset 16: the doorbell the producer rings with a packet id.
    pub doorbell_signal: hsa_signal_t,
    /// Offset 24: ring size in packets (a power of two).
    pub size: u32,
    /// Offset 28.
    pub reserved1: u32,
    /// Offset 32: queue id, unique in the process.
    pub id: u64,
}

/// The AMD queue block that embeds [`hsa_queue_t`] (`amd_queue_t`,
/// `amd_hsa_queue.h`, 256 bytes, 64-byte aligned).
///
/// The project reads `write_dispatch_id` and `read_dispatch_id`; they are
/// written concurrently by other producers and by the packet processor, so read
/// them through [`amd_queue_t::load_read_dispatch_id`] and
/// [`amd_queue_t::load_write_dispatch_id`], never as plain fields.
///
/// ```
/// use hsa_sys::amd_queue_t;
/// assert_eq!(std::mem::offset_of!(amd_queue_t, read_dispatch_id), 128);
/// ```
#[repr(C, align(64))]
#[derive(Debug)]
pub struct amd_queue_t {
    /// Offset 0.
    pub hsa_queue: hsa_queue_t,
    /// Offset 40.
    pub reserved1: [u32; 4],
    /// Offset 56: the next packet id a producer will reserve.
    pub write_dispatch_id: u64,
    /// Offset 64.
    pub group_segment_aperture_base_hi: u32,
    /// Offset 68.
    pub private_segment_aperture_base_hi: u32,
    /// Offset 72.
    pub max_cu_id: u32,
    /// Offset 76.
    pub max_wave_id: u32,
    /// Offset 80.
    pub max_legacy_doorbell_dispatch_id_plus_1: u64,
    /// Offset 88.
    pub legacy_doorbell_lock: u32,
    /// Offset 92.
    pub reserved2: [u32; 9],
    /// Offset 128: the id of the next packet the packet processor will consume.
    pub read_dispatch_id: u64,
    /// Offset 136.
    pub read_dispatch_id_field_base_byte_offset: u32,
    /// Offset 140.
    pub compute_tmpring_size: u32,
    /// Offset 144.
    pub scratch_resource_descriptor: [u32; 4],
    /// Offset 160.
    pub scratch_backing_memory_location: u64,
    /// Offset 168.
    pub scratch_backing_memory_byte_size: u64,
    /// Offset 176.
    pub scratch_wave64_lane_byte_size: u32,
    /// Offset 180.
    pub queue_properties: u32,
    /// Offset 184.
    pub reserved3: [u32; 2],
    /// Offset 192.
    pub queue_inactive_signal: hsa_signal_t,
    /// Offset 200.
    pub reserved4: [u32; 14],
}

impl amd_queue_t {
    /// Loads `read_dispatch_id` with acquire ordering.
    ///
    /// # Safety
    /// `queue` must point to a live `amd_queue_t` (as ROCr's `hsa_queue_t*`
    /// does: the public descriptor is the first field of the AMD block).
    ///
    /// ```
    /// use hsa_sys::amd_queue_t;
    ///
    /// // SAFETY: every field is an integer or a pointer; all-zero is valid.
    /// let mut block: Box<amd_queue_t> = Box::new(unsafe { std::mem::zeroed() });
    /// block.read_dispatch_id = 3;
    /// block.write_dispatch_id = 5;
    /// let queue: *const amd_queue_t = &*block; // what ROCr's hsa_queue_t* points at
    /// // SAFETY: a live block.
    /// let (read, write) = unsafe { (amd_queue_t::load_read_dispatch_id(queue), amd_queue_t::load_write_dispatch_id(queue)) };
    /// assert_eq!(write - read, 2, "packets reserved and not yet consumed");
    /// ```
    pub unsafe fn load_read_dispatch_id(queue: *const Self) -> u64 {
        // SAFETY: the caller guarantees `queue` is live; the field is 8-byte
        // aligned (offset 128 of a 64-byte aligned block), and concurrent
        // writers (the packet processor) use 64-bit atomic stores, so an atomic
        // load of the same size is the matching access.
        unsafe {
            let field = core::ptr::addr_of!((*queue).read_dispatch_id);
            core::sync::atomic::AtomicU64::from_ptr(field.cast_mut())
                .load(core::sync::atomic::Ordering::Acquire)
        }
    }

    /// Loads `write_dispatch_id` with acquire ordering.
    ///
    /// # Safety
    /// As for [`amd_queue_t::load_read_dispatch_id`].
    pub unsafe fn load_write_dispatch_id(queue: *const Self) -> u64 {
        // SAFETY: as in `load_read_dispatch_id`; producers reserve ids with
        // 64-bit atomic read-modify-writes on this field.
        unsafe {
            let field = core::ptr::addr_of!((*queue).write_dispatch_id);
            core::sync::atomic::AtomicU64::from_ptr(field.cast_mut())
                .load(core::sync::atomic::Ordering::Acquire)
        }
    }
}
