//! Handing a runtime's object back: the callback a runtime gives with a
//! queue or stream it owns (an `hsa_queue_t`, a `CUstream`), called once
//! the library no longer uses the object, so the runtime knows when it may
//! destroy it. The library may let go of such an object after every C
//! handle is gone (the queue layer's completion and teardown threads keep
//! what they still need), which only the library can tell.

use std::ffi::c_void;

/// Called once the library no longer uses an object the runtime handed it
/// (an adopted `hsa_queue_t` or `CUstream`), with that object and the
/// `user` pointer given with it: the runtime may destroy the object from
/// then on, not before. It runs on whichever thread lets go of the object
/// last (possibly a thread of the library's own, after every handle was
/// destroyed), and must not call back into the library.
pub type sigretire_release_callback =
    Option<unsafe extern "C" fn(object: *mut c_void, user: *mut c_void)>;

/// Calls the runtime's release callback when dropped.
pub(crate) struct Release {
    release: unsafe extern "C" fn(*mut c_void, *mut c_void),
    object: *mut c_void,
    user: *mut c_void,
}

impl Release {
    /// The release of `object` through `callback`, if there is one.
    pub(crate) fn new(
        callback: sigretire_release_callback,
        object: *mut c_void,
        user: *mut c_void,
    ) -> Option<Self> {
        callback.map(|release| Self {
            release,
            object,
            user,
        })
    }
}

// SAFETY: the pointers are the runtime's, passed back untouched and never
// dereferenced here; the runtime's contract (`sigretire_release_callback`)
// is that the callback may run on any thread.
unsafe impl Send for Release {}
// SAFETY: as for `Send`: nothing is read through the pointers through a
// shared reference, and the callback runs once, from `Drop`.
unsafe impl Sync for Release {}

impl Drop for Release {
    fn drop(&mut self) {
        // SAFETY: the runtime's callback with its own object and user
        // pointer, called once (this drop), as its contract says.
        unsafe { (self.release)(self.object, self.user) }
    }
}
