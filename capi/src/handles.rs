//! Holds (counted references that keep a use's signal from being re-armed)
//! and pins (a use's signal lent to a GPU waiter on another queue).

use crate::engine::{HoldObject, PinObject};
use crate::registry::{self, Kind};
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
    inner: Box<dyn HoldObject>,
}

impl sigretire_hold {
    pub(crate) fn into_raw(inner: Box<dyn HoldObject>) -> *mut sigretire_hold {
        let ptr = Box::into_raw(Box::new(sigretire_hold { inner }));
        registry::register(ptr, Kind::Hold);
        ptr
    }
}

/// The hold behind `ptr`, checked.
///
/// # Safety
/// A live hold handle in the table of live handles is a live hold; no
/// other call releases it meanwhile (the caller's contract).
unsafe fn hold_ref<'a>(ptr: *const sigretire_hold) -> Outcome<&'a sigretire_hold> {
    registry::check(ptr, Kind::Hold, "hold")?;
    // SAFETY: a live hold (the table says so; nothing of `ptr` was read
    // before it did), not released while this call runs (contract).
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
    /// `None` only inside `sigretire_tracker_attach`.
    inner: Option<Box<dyn PinObject>>,
    /// A hold of the same use, the library's own reference to the signal:
    /// it goes to the consumer's tracker handle with the pin, and outlives
    /// that tracker while the consumer's packet has not run (orphans.rs).
    shadow: Option<Box<dyn HoldObject>>,
}

impl sigretire_pin {
    pub(crate) fn into_raw(
        inner: Box<dyn PinObject>,
        shadow: Option<Box<dyn HoldObject>>,
    ) -> *mut sigretire_pin {
        let ptr = Box::into_raw(Box::new(sigretire_pin {
            inner: Some(inner),
            shadow,
        }));
        registry::register(ptr, Kind::Pin);
        ptr
    }

    /// The pin behind `ptr`, checked, for a consuming call.
    ///
    /// # Safety
    /// A live pin handle in the table of live handles is a live pin that
    /// no other call uses meanwhile (the caller's contract).
    pub(crate) unsafe fn get_mut<'a>(
        ptr: *mut sigretire_pin,
        name: &str,
    ) -> Outcome<&'a mut sigretire_pin> {
        registry::check(ptr.cast_const(), Kind::Pin, name)?;
        // SAFETY: a live pin (the table says so; nothing of `ptr` was read
        // before it did) that no other call uses (contract).
        Ok(unsafe { &mut *ptr })
    }

    pub(crate) fn take(&mut self) -> Option<Box<dyn PinObject>> {
        self.inner.take()
    }

    /// Gives back the pin [`take`](Self::take) took.
    pub(crate) fn put_back_pin(&mut self, inner: Box<dyn PinObject>) {
        self.inner = Some(inner);
    }

    /// Gives back the pin and the shadow [`take`](Self::take) and
    /// [`take_shadow`](Self::take_shadow) took.
    pub(crate) fn put_back(
        &mut self,
        inner: Box<dyn PinObject>,
        shadow: Option<Box<dyn HoldObject>>,
    ) {
        self.inner = Some(inner);
        self.shadow = shadow;
    }

    pub(crate) fn take_shadow(&mut self) -> Option<Box<dyn HoldObject>> {
        self.shadow.take()
    }

    /// Takes a handle out of the table of live handles and frees it;
    /// fails, freeing nothing, if it is not a live pin (`name`).
    ///
    /// # Safety
    /// A live pin handle in the table came from
    /// [`sigretire_pin::into_raw`]; no other call uses it (contract), and
    /// nothing uses it after.
    pub(crate) unsafe fn free(ptr: *mut sigretire_pin, name: &str) -> Outcome {
        // Out of the table first: of two calls freeing the same handle,
        // only the one that took it out frees it.
        registry::unregister(ptr.cast_const(), Kind::Pin, name)?;
        // SAFETY: it was a live pin from `into_raw` (the table said so),
        // now out of the table: freed once, here.
        drop(unsafe { Box::from_raw(ptr) });
        Ok(())
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
/// A live pin handle in the table of live handles is a live pin; no other
/// call releases or attaches it meanwhile (the caller's contract).
unsafe fn pin_ref<'a>(ptr: *const sigretire_pin) -> Outcome<&'a sigretire_pin> {
    registry::check(ptr, Kind::Pin, "pin")?;
    // SAFETY: a live pin (the table says so; nothing of `ptr` was read
    // before it did), not released while this call runs (contract).
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
/// read): `out->state` is `SIGRETIRE_TIMESTAMPS_NONE` until then, then
/// `SIGRETIRE_TIMESTAMPS_AVAILABLE`, or `SIGRETIRE_TIMESTAMPS_UNSTAMPED` if
/// its packet was never stamped (a queue without profiling). A held use
/// keeps its stamps for as long as it is held.
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
        // SAFETY: forwarded caller guarantee.
        let out = unsafe { StructOut::new(out, "out") }?;
        // SAFETY: forwarded caller guarantee.
        let hold = unsafe { hold_ref(hold) }?;
        // No stamps before the harvest says nothing yet; a harvest that
        // found none says the use was never stamped.
        let harvest = hold.inner.harvest();
        out.write(sigretire_timestamps::from_rust(
            harvest.flatten(),
            matches!(harvest, Some(None)),
        ));
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
        // Out of the table first: of two calls releasing the same handle,
        // only the one that took it out frees it.
        registry::unregister(handle.cast_const(), Kind::Hold, "*hold")?;
        // SAFETY: a live hold from `into_raw` (the table said so), now out
        // of the table: freed once, here; the caller's variable cleared.
        unsafe {
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
        // SAFETY: a pin handle of the table is a live pin nothing else uses
        // (contract); the caller's variable is cleared once it is freed.
        unsafe {
            sigretire_pin::free(handle, "*pin")?;
            *pin = std::ptr::null_mut();
        }
        Ok(())
    })
}
