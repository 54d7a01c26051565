//! How host stores to VRAM become visible to the GPU.
//!
//! The host maps VRAM through the large BAR as write-combining memory: its
//! stores collect in write-combining buffers and leave as posted PCIe writes
//! in no promised order. A **store fence** (x86 `sfence`) drains them, so
//! they reach the GPU before anything the host writes after the fence (a
//! packet in a VRAM ring, through the same BAR, in order). A reader that the
//! GPU's host data path (HDP) does not order behind those writes (the packet
//! processor fetching a ring in system memory, a copy engine) also needs an
//! **HDP flush**: write 1 to the `HDP_MEM_FLUSH_CNTL` register that
//! `HSA_AMD_AGENT_INFO_HDP_FLUSH` returns, then read it back, which returns
//! only once the flush is done (docs/design.md section 2, and CLR's own flush).

use hsa_sys::hsa_amd_hdp_flush_t;
use std::ptr::NonNull;
use std::sync::{Mutex, PoisonError};

/// A store fence: every store the thread made before it reaches memory
/// before any store it makes after it, write-combined ones included (x86
/// `sfence`; see [`hsa_sys::store_fence`], which this is).
///
/// ```
/// sigretire_hsa::store_fence(); // costs ~100 ns on a large-BAR system
/// ```
#[inline]
pub fn store_fence() {
    hsa_sys::store_fence();
}

/// A GPU's HDP flush register, mapped into the process by ROCr.
///
/// Obtained from [`Agent::hdp_flush`](crate::Agent::hdp_flush); valid for
/// as long as that device's runtime.
///
/// ```
/// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
/// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
/// let hdp: &sigretire_hsa::HdpFlush = device.hdp_flush().expect("a discrete GPU has one");
/// hdp.flush();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct HdpFlush {
    mem_flush_cntl: NonNull<u32>,
}

// SAFETY: the register is MMIO that any thread may write and read: each
// access is one volatile 32-bit load or store, made under the register's
// lock (`register_lock`), so no two of this process's accesses race (a
// volatile access is not atomic: two threads flushing at once without the
// lock were a data race, which ThreadSanitizer reported on the stand-in,
// whose register is memory); the pointer itself never changes.
unsafe impl Send for HdpFlush {}
// SAFETY: as above; `flush` takes `&self` and touches only the register.
unsafe impl Sync for HdpFlush {}

impl HdpFlush {
    /// Wraps the registers ROCr returned; `None` if it returned none.
    ///
    /// # Safety
    /// `registers.HDP_MEM_FLUSH_CNTL`, if non-null, must point to the mapped
    /// register (or memory standing in for it) for as long as the result
    /// lives.
    pub(crate) unsafe fn new(registers: hsa_amd_hdp_flush_t) -> Option<Self> {
        NonNull::new(registers.HDP_MEM_FLUSH_CNTL).map(|mem_flush_cntl| Self { mem_flush_cntl })
    }

    /// Flushes the HDP: writes 1 to `HDP_MEM_FLUSH_CNTL` and reads it back.
    /// Earlier store-fenced writes to VRAM are then visible to every reader
    /// on the GPU. About one PCIe round trip (1.1 us on MI300X).
    ///
    /// ```
    /// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
    /// # let device = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
    /// sigretire_hsa::store_fence(); // write-combined stores first leave the CPU
    /// device.hdp_flush().unwrap().flush();
    /// // The stand-in's register is memory: it saw the 1 written to it.
    /// assert_eq!(standin.take_hdp_flush(0), Some(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn flush(&self) {
        let register = self.mem_flush_cntl.as_ptr();
        // Every `HdpFlush` of this register (each `Agent` of the GPU has
        // one) takes the same lock: the flushes are serialised, as the
        // device serialises them anyway, and the lock costs far less than
        // the read-back's round trip.
        let _serialised = register_lock(register)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // SAFETY: `new`'s contract: the register is mapped while `self`
        // lives. MMIO must be accessed with volatile operations of the
        // register's width, exactly once each, which these are; the lock
        // orders them after every other access of this process.
        unsafe {
            register.write_volatile(1);
            // The read-back: a non-posted read that returns after the write
            // (posted, in order) has been performed, hence after the flush.
            let _ = register.read_volatile();
        }
    }
}

/// The lock that serialises this process's accesses to the HDP register at
/// `register`: one of a few, chosen by address, shared by every `HdpFlush`
/// of that register.
fn register_lock(register: *mut u32) -> &'static Mutex<()> {
    static LOCKS: [Mutex<()>; 8] = [const { Mutex::new(()) }; 8];
    &LOCKS[(register as usize >> 2) % LOCKS.len()]
}
