//! Signals: the handle the API passes around and the memory block behind it.

use core::ffi::c_void;
use core::sync::atomic::{AtomicI64, AtomicU64};

/// The value type of an HSA signal (`hsa_signal_value_t`, 64-bit on every
/// supported platform).
pub type hsa_signal_value_t = i64;

/// An opaque signal handle (`hsa_signal_t`).
///
/// For ROCr, and for every signal this project builds itself, the handle is the
/// address of an [`amd_signal_t`] block. A zero handle means "no signal" in a
/// packet's `completion_signal` or `dep_signal` fields.
///
/// ```
/// use hsa_sys::hsa_signal_t;
/// assert!(hsa_signal_t::NULL.is_null());
/// assert!(!hsa_signal_t { handle: 0x1000 }.is_null());
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct hsa_signal_t {
    /// The address of the signal's `amd_signal_t` block (or 0 for none).
    pub handle: u64,
}

impl hsa_signal_t {
    /// The "no signal" handle.
    pub const NULL: Self = Self { handle: 0 };

    /// Whether this is the "no signal" handle.
    ///
    /// ```
    /// use hsa_sys::hsa_signal_t;
    /// assert!(hsa_signal_t::NULL.is_null());
    /// assert!(!hsa_signal_t { handle: 0x40 }.is_null());
    /// ```
    pub const fn is_null(self) -> bool {
        self.handle == 0
    }
}

/// `amd_signal_kind64_t`: what an [`amd_signal_t`] block holds.
pub type amd_signal_kind64_t = i64;
/// `AMD_SIGNAL_KIND_INVALID`.
pub const AMD_SIGNAL_KIND_INVALID: amd_signal_kind64_t = 0;
/// `AMD_SIGNAL_KIND_USER`: an ordinary signal whose `value` the host and the
/// packet processor read and write.
pub const AMD_SIGNAL_KIND_USER: amd_signal_kind64_t = 1;
/// `AMD_SIGNAL_KIND_DOORBELL`.
pub const AMD_SIGNAL_KIND_DOORBELL: amd_signal_kind64_t = -1;
/// `AMD_SIGNAL_KIND_LEGACY_DOORBELL`.
pub const AMD_SIGNAL_KIND_LEGACY_DOORBELL: amd_signal_kind64_t = -2;

/// The 64-byte signal block (`amd_signal_t`, `amd_hsa_signal.h`).
///
/// The fields the packet processor writes (`value`, `start_ts`, `end_ts`) are
/// atomics: the GPU writes them while the host reads them, so the host must
/// never hold a plain reference-derived view of them. Only offsets 0-63 are
/// ABI; newer ROCr appends debug fields after byte 64, which this type does not
/// describe (ROCr allocates them, we never do).
///
/// ```
/// use hsa_sys::{amd_signal_t, AMD_SIGNAL_KIND_USER};
/// use std::sync::atomic::Ordering;
///
/// let block = amd_signal_t::new_user(1);
/// assert_eq!(block.kind, AMD_SIGNAL_KIND_USER);
/// assert_eq!(block.value.load(Ordering::Acquire), 1);
/// assert_eq!(std::mem::size_of::<amd_signal_t>(), 64);
/// ```
#[repr(C, align(64))]
#[derive(Debug)]
pub struct amd_signal_t {
    /// Offset 0: the signal kind ([`AMD_SIGNAL_KIND_USER`] for completion signals).
    pub kind: amd_signal_kind64_t,
    /// Offset 8: the signal value (a union with doorbell pointers for doorbell kinds).
    pub value: AtomicI64,
    /// Offset 16: the KFD event mailbox of an interrupt signal (0 for polling signals).
    pub event_mailbox_ptr: u64,
    /// Offset 24: the KFD event id of an interrupt signal.
    pub event_id: u32,
    /// Offset 28.
    pub reserved1: u32,
    /// Offset 32: dispatch start time in GPU ticks, written on profiled queues.
    pub start_ts: AtomicU64,
    /// Offset 40: dispatch end time in GPU ticks, written on profiled queues.
    pub end_ts: AtomicU64,
    /// Offset 48: the owning `amd_queue_t` (a union with `reserved2`).
    pub queue_ptr: u64,
    /// Offset 56.
    pub reserved3: [u32; 2],
}

impl amd_signal_t {
    /// A polling USER signal holding `value`, with no event and zeroed stamps,
    /// as ROCr initialises a signal it creates.
    pub const fn new_user(value: hsa_signal_value_t) -> Self {
        Self {
            kind: AMD_SIGNAL_KIND_USER,
            value: AtomicI64::new(value),
            event_mailbox_ptr: 0,
            event_id: 0,
            reserved1: 0,
            start_ts: AtomicU64::new(0),
            end_ts: AtomicU64::new(0),
            queue_ptr: 0,
            reserved3: [0; 2],
        }
    }
}

/// `hsa_signal_condition_t`: the comparison a wait or a barrier-value packet uses.
pub type hsa_signal_condition_t = u32;
/// `hsa_signal_condition32_t`, the 32-bit field form in packets.
pub type hsa_signal_condition32_t = u32;
/// The signal value equals the compare value.
pub const HSA_SIGNAL_CONDITION_EQ: hsa_signal_condition_t = 0;
/// The signal value differs from the compare value.
pub const HSA_SIGNAL_CONDITION_NE: hsa_signal_condition_t = 1;
/// The signal value is less than the compare value.
pub const HSA_SIGNAL_CONDITION_LT: hsa_signal_condition_t = 2;
/// The signal value is greater than or equal to the compare value.
pub const HSA_SIGNAL_CONDITION_GTE: hsa_signal_condition_t = 3;

/// Whether `value` satisfies `condition` against `compare`, as the packet
/// processor and `hsa_signal_wait_*` evaluate it. Unknown conditions never hold.
///
/// ```
/// use hsa_sys::{condition_holds, HSA_SIGNAL_CONDITION_LT};
/// assert!(condition_holds(HSA_SIGNAL_CONDITION_LT, 0, 1));
/// assert!(!condition_holds(HSA_SIGNAL_CONDITION_LT, 1, 1));
/// ```
pub const fn condition_holds(
    condition: hsa_signal_condition_t,
    value: hsa_signal_value_t,
    compare: hsa_signal_value_t,
) -> bool {
    match condition {
        HSA_SIGNAL_CONDITION_EQ => value == compare,
        HSA_SIGNAL_CONDITION_NE => value != compare,
        HSA_SIGNAL_CONDITION_LT => value < compare,
        HSA_SIGNAL_CONDITION_GTE => value >= compare,
        _ => false,
    }
}

/// `hsa_wait_state_t`: how a waiting thread may spend its time.
pub type hsa_wait_state_t = u32;
/// The thread may sleep (interrupt signals only).
pub const HSA_WAIT_STATE_BLOCKED: hsa_wait_state_t = 0;
/// The thread spins.
pub const HSA_WAIT_STATE_ACTIVE: hsa_wait_state_t = 1;

// `hsa_amd_signal_attribute_t` values. C declares them in a 4-byte enum but
// the only place they go, `hsa_amd_signal_create`'s `attributes`, is a
// `uint64_t`, so they are typed as that argument.

/// `hsa_amd_signal_create` attribute: only AMD GPUs consume the signal
/// (ignored unless `num_consumers` is 0).
pub const HSA_AMD_SIGNAL_AMD_GPU_ONLY: u64 = 1;
/// `hsa_amd_signal_create` attribute: the signal may be shared with other processes.
pub const HSA_AMD_SIGNAL_IPC: u64 = 2;

/// `hsa_amd_signal_handler`: the callback of `hsa_amd_signal_async_handler`.
///
/// ROCr calls it on its own event thread with the signal value that satisfied
/// the condition and the registered `arg`; returning `true` keeps the handler
/// registered, `false` removes it. A panic inside it aborts the process (a
/// Rust `extern "C"` function does not unwind into C).
pub type hsa_amd_signal_handler =
    Option<unsafe extern "C" fn(value: hsa_signal_value_t, arg: *mut c_void) -> bool>;
