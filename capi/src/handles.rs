//! Holds (counted references that keep a use's signal from being re-armed)
//! and pins (a use's signal lent to a GPU waiter on another queue).

use crate::engine::{HoldObject, PinObject};
use crate::status::*;
use crate::types::*;

/// A counted reference to one use's signal (opaque): while it lives the
/// signal is not re-armed (the tracker parks it and hands out a spare), so
/// its status and timestamps stay answerable from any thread. Made by
/// `sigretire_tracker_hold` or `sigretire_hold_clone`; released by
/// `sigretire_hold_release`. It may outlive its tracker.
///
/// Thread safety: the query functions may be called from any thread,
/// concurrently; `sigretire_hold_release` is the last call on a handle.
pub struct sigretire_hold {
    magic: u64,
    inner: Box<dyn HoldObject>,
}

const HOLD_MAGIC: u64 = u64::from_be_bytes(*b"sigrHOLD");

impl sigretire_hold {
    pub(crate) fn into_raw(inner: Box<dyn HoldObject>) -> *mut sigretire_hold {
        Box::into_raw(Box::new(sigretire_hold {
            magic: HOLD_MAGIC,
            inner,
        }))
    }
}

/// The hold behind `ptr`, checked.
///
/// # Safety
/// A non-null, aligned `ptr` is a live hold handle.
unsafe fn hold_ref<'a>(ptr: *const sigretire_hold) -> Outcome<&'a sigretire_hold> {
    check_pointer(ptr, "hold")?;
    // SAFETY: non-null and aligned (checked), and by the caller's contract a
    // live handle, so its magic word is readable. It is read through a raw
    // place: no reference to the handle exists before the word matches
    // (the word catches common mistakes, such as a handle already
    // destroyed or another kind of object, not every one).
    if unsafe { (&raw const (*ptr).magic).read() } != HOLD_MAGIC {
        return fail(
            SIGRETIRE_ERR_BAD_HANDLE,
            "`hold` is not a live sigretire_hold (released, or another kind of object)",
        );
    }
    // SAFETY: a live hold (the magic matched; the caller's contract).
    Ok(unsafe { &*ptr })
}

/// A signal lent to a GPU waiter on another queue (opaque): put
/// `sigretire_pin_packet_handle` in the consumer packet's `dep_signal`, then
/// give the pin to the consumer queue's tracker (`sigretire_tracker_attach`),
/// which keeps it until the consumer packet retired. Made by
/// `sigretire_tracker_pin`; released by `sigretire_pin_release` if never
/// attached.
///
/// Thread safety: the query functions may be called from any thread,
/// concurrently; `sigretire_tracker_attach` and `sigretire_pin_release`
/// consume it and must not run concurrently with any other call on it.
pub struct sigretire_pin {
    magic: u64,
    /// `None` only inside `sigretire_tracker_attach`.
    inner: Option<Box<dyn PinObject>>,
}

const PIN_MAGIC: u64 = u64::from_be_bytes(*b"sigrPIN_");

impl sigretire_pin {
    pub(crate) fn into_raw(inner: Box<dyn PinObject>) -> *mut sigretire_pin {
        Box::into_raw(Box::new(sigretire_pin {
            magic: PIN_MAGIC,
            inner: Some(inner),
        }))
    }

    /// The pin behind `ptr`, checked, for a consuming call.
    ///
    /// # Safety
    /// A non-null, aligned `ptr` is a live pin handle no other call uses.
    pub(crate) unsafe fn get_mut<'a>(
        ptr: *mut sigretire_pin,
        name: &str,
    ) -> Outcome<&'a mut sigretire_pin> {
        check_pointer(ptr.cast_const(), name)?;
        // SAFETY: non-null and aligned (checked), and by the caller's contract a
        // live handle, so its magic word is readable. It is read through a raw
        // place: no reference to the handle exists before the word matches
        // (the word catches common mistakes, such as a handle already
        // destroyed or another kind of object, not every one).
        if unsafe { (&raw const (*ptr).magic).read() } != PIN_MAGIC {
            return fail(
                SIGRETIRE_ERR_BAD_HANDLE,
                format!("`{name}` is not a live sigretire_pin (released or attached already?)"),
            );
        }
        // SAFETY: a live pin no other call uses (the caller's contract).
        Ok(unsafe { &mut *ptr })
    }

    pub(crate) fn take(&mut self) -> Option<Box<dyn PinObject>> {
        self.inner.take()
    }

    pub(crate) fn put_back(&mut self, inner: Box<dyn PinObject>) {
        self.inner = Some(inner);
    }

    /// Frees a handle.
    ///
    /// # Safety
    /// `ptr` came from [`sigretire_pin::into_raw`] and is not used after.
    pub(crate) unsafe fn free(ptr: *mut sigretire_pin) {
        // SAFETY: the caller's guarantee; the magic is cleared first so a
        // later use of the stale pointer is more likely caught.
        unsafe {
            (*ptr).magic = 0;
            drop(Box::from_raw(ptr));
        }
    }

    fn object(&self) -> Outcome<&dyn PinObject> {
        match &self.inner {
            Some(inner) => Ok(inner.as_ref()),
            None => fail(
                SIGRETIRE_ERR_BAD_HANDLE,
                "`pin` is being attached by another call",
            ),
        }
    }
}

/// The pin behind `ptr`, checked, for a query.
///
/// # Safety
/// A non-null, aligned `ptr` is a live pin handle.
unsafe fn pin_ref<'a>(ptr: *const sigretire_pin) -> Outcome<&'a sigretire_pin> {
    check_pointer(ptr, "pin")?;
    // SAFETY: non-null and aligned (checked), and by the caller's contract a
    // live handle, so its magic word is readable. It is read through a raw
    // place: no reference to the handle exists before the word matches
    // (the word catches common mistakes, such as a handle already
    // destroyed or another kind of object, not every one).
    if unsafe { (&raw const (*ptr).magic).read() } != PIN_MAGIC {
        return fail(
            SIGRETIRE_ERR_BAD_HANDLE,
            "`pin` is not a live sigretire_pin (released, attached, or another kind of object)",
        );
    }
    // SAFETY: a live pin (the magic matched; the caller's contract).
    Ok(unsafe { &*ptr })
}

/// The held use's status, loading its signal at most once.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `hold` is a live hold; `status` points to a writable `sigretire_use_status`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_hold_status(
    hold: *const sigretire_hold,
    status: *mut sigretire_use_status,
) -> sigretire_status {
    guard("sigretire_hold_status", || {
        let out = Out::new(status, "status")?;
        // SAFETY: forwarded caller guarantee.
        let hold = unsafe { hold_ref(hold) }?;
        out.write(sigretire_use_status::from_rust(hold.inner.status()));
        Ok(())
    })
}

/// What is known about the held use without reading signal memory
/// (`SIGRETIRE_USE_UNKNOWN` when only a load could tell).
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `hold` is a live hold; `status` points to a writable `sigretire_use_status`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_hold_known_status(
    hold: *const sigretire_hold,
    status: *mut sigretire_use_status,
) -> sigretire_status {
    guard("sigretire_hold_known_status", || {
        let out = Out::new(status, "status")?;
        // SAFETY: forwarded caller guarantee.
        let hold = unsafe { hold_ref(hold) }?;
        out.write(sigretire_use_status::from_known(hold.inner.known_status()));
        Ok(())
    })
}

/// The held use's timestamps once the tracker harvested them (no signal
/// read): `out->available` is 0 until then. A held use keeps its stamps
/// for as long as it is held.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `hold` is a live hold; `out` points to a writable `sigretire_timestamps`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_hold_timestamps(
    hold: *const sigretire_hold,
    out: *mut sigretire_timestamps,
) -> sigretire_status {
    guard("sigretire_hold_timestamps", || {
        let out = Out::new(out, "out")?;
        // SAFETY: forwarded caller guarantee.
        let hold = unsafe { hold_ref(hold) }?;
        out.write(sigretire_timestamps::from_rust(hold.inner.timestamps()));
        Ok(())
    })
}

/// The held signal's packet handle (the value a packet field naming it
/// takes) and where it lives (`placement` may be NULL).
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `hold` is a live hold; `handle` points to a writable `uint64_t`;
/// `placement` is NULL or points to a writable `sigretire_placement`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_hold_signal(
    hold: *const sigretire_hold,
    handle: *mut u64,
    placement: *mut sigretire_placement,
) -> sigretire_status {
    guard("sigretire_hold_signal", || {
        let out = Out::new(handle, "handle")?;
        let placement_out = if placement.is_null() {
            None
        } else {
            Some(Out::new(placement, "placement")?)
        };
        // SAFETY: forwarded caller guarantee.
        let hold = unsafe { hold_ref(hold) }?;
        out.write(hold.inner.packet_handle());
        if let Some(p) = placement_out {
            p.write(sigretire_placement::from_rust(hold.inner.placement()));
        }
        Ok(())
    })
}

/// Another reference to the same use's signal (`*copy`), released on its own.
///
/// Thread safety: any thread, concurrently.
///
/// # Safety
/// `hold` is a live hold; `copy` points to a writable handle variable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_hold_clone(
    hold: *const sigretire_hold,
    copy: *mut *mut sigretire_hold,
) -> sigretire_status {
    guard("sigretire_hold_clone", || {
        let out = Out::new(copy, "copy")?;
        // SAFETY: forwarded caller guarantee.
        let hold = unsafe { hold_ref(hold) }?;
        out.write(sigretire_hold::into_raw(hold.inner.clone_box()));
        Ok(())
    })
}

/// Lets go of the reference: once the last holder of a retired use's
/// signal lets go, the tracker re-arms it on its next reclaim. Sets
/// `*hold` to NULL; a NULL `*hold` is a no-op.
///
/// Thread safety: the last call on this hold handle; any thread (no
/// tracker lock is taken).
///
/// # Safety
/// `hold` points to a variable holding NULL or a live hold handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_hold_release(
    hold: *mut *mut sigretire_hold,
) -> sigretire_status {
    guard("sigretire_hold_release", || {
        check_pointer(hold.cast_const(), "hold")?;
        // SAFETY: checked; the caller's variable.
        let handle = unsafe { *hold };
        if handle.is_null() {
            return Ok(());
        }
        // SAFETY: a live handle by contract, checked as far as it can be.
        unsafe { hold_ref(handle) }?;
        // SAFETY: live, from `into_raw`, used by nothing else (contract);
        // freed once, the variable cleared, the magic cleared first.
        unsafe {
            (*handle).magic = 0;
            *hold = std::ptr::null_mut();
            drop(Box::from_raw(handle));
        }
        Ok(())
    })
}

/// The pinned signal's packet handle: the consumer packet's `dep_signal`.
///
/// Thread safety: any thread, concurrently (not with attach or release).
///
/// # Safety
/// `pin` is a live pin; `handle` points to a writable `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_pin_packet_handle(
    pin: *const sigretire_pin,
    handle: *mut u64,
) -> sigretire_status {
    guard("sigretire_pin_packet_handle", || {
        let out = Out::new(handle, "handle")?;
        // SAFETY: forwarded caller guarantee.
        let pin = unsafe { pin_ref(pin) }?;
        out.write(pin.object()?.packet_handle());
        Ok(())
    })
}

/// The producer use's status, as a holder sees it (at most one load).
///
/// Thread safety: any thread, concurrently (not with attach or release).
///
/// # Safety
/// `pin` is a live pin; `status` points to a writable `sigretire_use_status`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_pin_status(
    pin: *const sigretire_pin,
    status: *mut sigretire_use_status,
) -> sigretire_status {
    guard("sigretire_pin_status", || {
        let out = Out::new(status, "status")?;
        // SAFETY: forwarded caller guarantee.
        let pin = unsafe { pin_ref(pin) }?;
        out.write(sigretire_use_status::from_rust(pin.object()?.status()));
        Ok(())
    })
}

/// Releases a pin that was never attached (no consumer packet waits on its
/// signal any more). Sets `*pin` to NULL; a NULL `*pin` is a no-op.
///
/// Thread safety: the last call on this pin handle.
///
/// # Safety
/// `pin` points to a variable holding NULL or a live pin handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_pin_release(pin: *mut *mut sigretire_pin) -> sigretire_status {
    guard("sigretire_pin_release", || {
        check_pointer(pin.cast_const(), "pin")?;
        // SAFETY: checked; the caller's variable.
        let handle = unsafe { *pin };
        if handle.is_null() {
            return Ok(());
        }
        // SAFETY: a live handle by contract, checked as far as it can be.
        unsafe { sigretire_pin::get_mut(handle, "*pin") }?;
        // SAFETY: live, from `into_raw`, used by nothing else; freed once.
        unsafe {
            *pin = std::ptr::null_mut();
            sigretire_pin::free(handle);
        }
        Ok(())
    })
}
