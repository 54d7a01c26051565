//! Status codes, the text of the last error, and the guard every exported
//! function runs its body in: pointer checks first, then the body inside
//! `catch_unwind`, so that no panic ever unwinds into C.

use std::any::Any;
use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// What a call did. Every function of the library returns one; results
/// travel through out-parameters. On anything but `SIGRETIRE_OK`,
/// `sigretire_last_error` has a sentence saying what went wrong and what
/// to do about it, and out-parameters are left as they were unless the
/// function says otherwise.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum sigretire_status {
    /// Done.
    SIGRETIRE_OK = 0,
    /// A pointer the function needs was NULL.
    SIGRETIRE_ERR_NULL = 1,
    /// An argument is out of range: an unknown flag or enumeration value, a
    /// misaligned pointer, a count too large.
    SIGRETIRE_ERR_INVALID_ARGUMENT = 2,
    /// The handle is not a live handle of the kind the function takes: one
    /// destroyed or released already, a handle of another kind, or any
    /// other pointer. The library looks every handle up in its table of
    /// live handles before it reads anything of it, so such a pointer is
    /// never read. The one mistake it cannot see: a destroyed handle whose
    /// address a new handle of the same kind was given is that new handle.
    SIGRETIRE_ERR_BAD_HANDLE = 3,
    /// The ticket was not issued by this tracker: another tracker's, one
    /// whose fields were altered, or one never issued (a zeroed ticket).
    SIGRETIRE_ERR_BAD_TICKET = 4,
    /// A `sigretire_config` field is out of its documented range.
    SIGRETIRE_ERR_INVALID_CONFIG = 5,
    /// The signal ring is at its growth limit: wait for the use
    /// `sigretire_acquired.wait_for` (outside your locks), then retry.
    SIGRETIRE_ERR_BACKPRESSURE = 6,
    /// The wait's timeout passed first; the use may still complete.
    SIGRETIRE_ERR_TIMED_OUT = 7,
    /// Within one queue generation AQL indices must increase: the request's
    /// index does not follow the previous use's (a new hardware queue needs
    /// a note_queue_change first). Nothing changed.
    SIGRETIRE_ERR_INDEX_ORDER = 8,
    /// Every use in flight is done, but their signals are held (holds,
    /// pins) and no spare could be allocated: release some, then retry.
    SIGRETIRE_ERR_SIGNALS_HELD = 9,
    /// The backend could not allocate signals.
    SIGRETIRE_ERR_OUT_OF_SIGNALS = 10,
    /// The use failed (its queue reported an error, or its submission
    /// failed): nothing can wait on it (`sigretire_tracker_wait` answers
    /// this for a use that failed).
    SIGRETIRE_ERR_USE_FAILED = 11,
    /// The use is not in a state the operation applies to (failing the
    /// submission of a use already done, publishing a use retired long ago
    /// or one acquired before a queue change).
    SIGRETIRE_ERR_INVALID_STATE = 12,
    /// The use's timestamps are no longer kept: hold the use to keep them.
    SIGRETIRE_ERR_EXPIRED = 13,
    /// This tracker's backend cannot do that (a hooks tracker publishes no
    /// packets: its queue is the runtime's own).
    SIGRETIRE_ERR_UNSUPPORTED = 14,
    /// The object belongs to another backend: a simulator function on a
    /// ROCr tracker, a pin of a ROCr tracker attached to a simulator one.
    SIGRETIRE_ERR_WRONG_BACKEND = 15,
    /// Every packet slot of the hardware queue is taken: let the GPU
    /// consume some, then retry.
    SIGRETIRE_ERR_QUEUE_FULL = 16,
    /// The hardware queue failed and accepts no more work.
    SIGRETIRE_ERR_QUEUE_FAILED = 17,
    /// The ROCr library is missing or lacks a function the backend needs.
    SIGRETIRE_ERR_LOAD = 18,
    /// ROCr loaded but there is no GPU it can use (`hsa_init` failed, as it
    /// does without /dev/kfd, or no GPU agent, or no GPU of that index).
    SIGRETIRE_ERR_NO_GPU = 19,
    /// The backend failed otherwise (a ROCr call failed, a hook broke its
    /// contract); the last error says which.
    SIGRETIRE_ERR_BACKEND = 20,
    /// The buffer was too small: what fits was written, NUL-terminated.
    SIGRETIRE_ERR_BUFFER_TOO_SMALL = 21,
    /// The library panicked (a bug: please report it with the last error's
    /// text). The panic did not cross into C; the tracker it happened on
    /// answers `SIGRETIRE_ERR_PANIC` from then on and may only be destroyed.
    SIGRETIRE_ERR_PANIC = 22,
    /// A struct's `size` field is not a size this library knows for that
    /// struct: it was not set (set it to `sizeof` the struct before every
    /// call), or the program was built with a header of another version
    /// (compare `sigretire_abi_version()` with `SIGRETIRE_ABI_VERSION`).
    /// Nothing was read or written past the field.
    SIGRETIRE_ERR_STRUCT_SIZE = 23,
    /// The stream failed: its work failed on the GPU (a queue error), now
    /// or before. It is failed for good: its unfinished work will not
    /// complete, its events answer the failure, and it takes no more work.
    /// Destroy it and create another; the device and its other streams keep
    /// working. (A cross-stream wait answers it for a failed producer too:
    /// the last error names the failed stream's id.)
    SIGRETIRE_ERR_STREAM_FAILED = 24,
    /// The device is in its error state (a device-wide fault) and was
    /// created with `SIGRETIRE_DEVICE_SKIP_ABORT_ON_ERROR`: the wait
    /// returned early without completion (the GPU may still run the work).
    /// The state is for good: recreate the device to run more work.
    SIGRETIRE_ERR_DEVICE_ERROR = 25,
    /// The device is in its error state (a device-wide fault) and aborts on
    /// GPU errors: it takes no more work and its waits return at once.
    /// Recreate the device.
    SIGRETIRE_ERR_DEVICE_ABORTED = 26,
    /// The stream's tracker has as many uses in flight as it may
    /// (`initial_size` x `growth_limit` of its `sigretire_config`), and the
    /// use whose completion frees room did not complete within the
    /// stream's `wait_timeout_ns`: nothing was submitted. Release work
    /// that waits (a gated kernel), synchronize, or raise `growth_limit`
    /// or `wait_timeout_ns`.
    SIGRETIRE_ERR_IN_FLIGHT_LIMIT = 27,
    /// The event carries no timestamps: it was recorded with
    /// `SIGRETIRE_EVENT_DISABLE_TIMING`, or on a stream created with
    /// `SIGRETIRE_STREAM_UNPROFILED`.
    SIGRETIRE_ERR_NOT_TIMED = 28,
    /// The event has not completed yet: synchronize it first.
    SIGRETIRE_ERR_NOT_READY = 29,
    /// The events were recorded on two devices, whose clocks are
    /// unrelated: there is no elapsed time between them.
    SIGRETIRE_ERR_DIFFERENT_DEVICES = 30,
    /// The stop event completed before the start event: the elapsed time
    /// would be negative. Swap the events.
    SIGRETIRE_ERR_STOP_BEFORE_START = 31,
    /// The producer's signals live in memory the waiting stream cannot
    /// read (another simulator, ROCr runtime or CUDA context): nothing was
    /// published.
    SIGRETIRE_ERR_FOREIGN_SIGNAL_MEMORY = 32,
}

pub use sigretire_status::*;

impl sigretire_status {
    /// Every status, in value order.
    pub const ALL: [sigretire_status; 33] = [
        SIGRETIRE_OK,
        SIGRETIRE_ERR_NULL,
        SIGRETIRE_ERR_INVALID_ARGUMENT,
        SIGRETIRE_ERR_BAD_HANDLE,
        SIGRETIRE_ERR_BAD_TICKET,
        SIGRETIRE_ERR_INVALID_CONFIG,
        SIGRETIRE_ERR_BACKPRESSURE,
        SIGRETIRE_ERR_TIMED_OUT,
        SIGRETIRE_ERR_INDEX_ORDER,
        SIGRETIRE_ERR_SIGNALS_HELD,
        SIGRETIRE_ERR_OUT_OF_SIGNALS,
        SIGRETIRE_ERR_USE_FAILED,
        SIGRETIRE_ERR_INVALID_STATE,
        SIGRETIRE_ERR_EXPIRED,
        SIGRETIRE_ERR_UNSUPPORTED,
        SIGRETIRE_ERR_WRONG_BACKEND,
        SIGRETIRE_ERR_QUEUE_FULL,
        SIGRETIRE_ERR_QUEUE_FAILED,
        SIGRETIRE_ERR_LOAD,
        SIGRETIRE_ERR_NO_GPU,
        SIGRETIRE_ERR_BACKEND,
        SIGRETIRE_ERR_BUFFER_TOO_SMALL,
        SIGRETIRE_ERR_PANIC,
        SIGRETIRE_ERR_STRUCT_SIZE,
        SIGRETIRE_ERR_STREAM_FAILED,
        SIGRETIRE_ERR_DEVICE_ERROR,
        SIGRETIRE_ERR_DEVICE_ABORTED,
        SIGRETIRE_ERR_IN_FLIGHT_LIMIT,
        SIGRETIRE_ERR_NOT_TIMED,
        SIGRETIRE_ERR_NOT_READY,
        SIGRETIRE_ERR_DIFFERENT_DEVICES,
        SIGRETIRE_ERR_STOP_BEFORE_START,
        SIGRETIRE_ERR_FOREIGN_SIGNAL_MEMORY,
    ];

    /// The status of value `value`, if there is one.
    pub fn from_value(value: i32) -> Option<sigretire_status> {
        usize::try_from(value)
            .ok()
            .and_then(|i| Self::ALL.get(i).copied())
    }

    /// The constant's name, NUL-terminated for C.
    pub const fn name(self) -> &'static std::ffi::CStr {
        match self {
            SIGRETIRE_OK => c"SIGRETIRE_OK",
            SIGRETIRE_ERR_NULL => c"SIGRETIRE_ERR_NULL",
            SIGRETIRE_ERR_INVALID_ARGUMENT => c"SIGRETIRE_ERR_INVALID_ARGUMENT",
            SIGRETIRE_ERR_BAD_HANDLE => c"SIGRETIRE_ERR_BAD_HANDLE",
            SIGRETIRE_ERR_BAD_TICKET => c"SIGRETIRE_ERR_BAD_TICKET",
            SIGRETIRE_ERR_INVALID_CONFIG => c"SIGRETIRE_ERR_INVALID_CONFIG",
            SIGRETIRE_ERR_BACKPRESSURE => c"SIGRETIRE_ERR_BACKPRESSURE",
            SIGRETIRE_ERR_TIMED_OUT => c"SIGRETIRE_ERR_TIMED_OUT",
            SIGRETIRE_ERR_INDEX_ORDER => c"SIGRETIRE_ERR_INDEX_ORDER",
            SIGRETIRE_ERR_SIGNALS_HELD => c"SIGRETIRE_ERR_SIGNALS_HELD",
            SIGRETIRE_ERR_OUT_OF_SIGNALS => c"SIGRETIRE_ERR_OUT_OF_SIGNALS",
            SIGRETIRE_ERR_USE_FAILED => c"SIGRETIRE_ERR_USE_FAILED",
            SIGRETIRE_ERR_INVALID_STATE => c"SIGRETIRE_ERR_INVALID_STATE",
            SIGRETIRE_ERR_EXPIRED => c"SIGRETIRE_ERR_EXPIRED",
            SIGRETIRE_ERR_UNSUPPORTED => c"SIGRETIRE_ERR_UNSUPPORTED",
            SIGRETIRE_ERR_WRONG_BACKEND => c"SIGRETIRE_ERR_WRONG_BACKEND",
            SIGRETIRE_ERR_QUEUE_FULL => c"SIGRETIRE_ERR_QUEUE_FULL",
            SIGRETIRE_ERR_QUEUE_FAILED => c"SIGRETIRE_ERR_QUEUE_FAILED",
            SIGRETIRE_ERR_LOAD => c"SIGRETIRE_ERR_LOAD",
            SIGRETIRE_ERR_NO_GPU => c"SIGRETIRE_ERR_NO_GPU",
            SIGRETIRE_ERR_BACKEND => c"SIGRETIRE_ERR_BACKEND",
            SIGRETIRE_ERR_BUFFER_TOO_SMALL => c"SIGRETIRE_ERR_BUFFER_TOO_SMALL",
            SIGRETIRE_ERR_PANIC => c"SIGRETIRE_ERR_PANIC",
            SIGRETIRE_ERR_STRUCT_SIZE => c"SIGRETIRE_ERR_STRUCT_SIZE",
            SIGRETIRE_ERR_STREAM_FAILED => c"SIGRETIRE_ERR_STREAM_FAILED",
            SIGRETIRE_ERR_DEVICE_ERROR => c"SIGRETIRE_ERR_DEVICE_ERROR",
            SIGRETIRE_ERR_DEVICE_ABORTED => c"SIGRETIRE_ERR_DEVICE_ABORTED",
            SIGRETIRE_ERR_IN_FLIGHT_LIMIT => c"SIGRETIRE_ERR_IN_FLIGHT_LIMIT",
            SIGRETIRE_ERR_NOT_TIMED => c"SIGRETIRE_ERR_NOT_TIMED",
            SIGRETIRE_ERR_NOT_READY => c"SIGRETIRE_ERR_NOT_READY",
            SIGRETIRE_ERR_DIFFERENT_DEVICES => c"SIGRETIRE_ERR_DIFFERENT_DEVICES",
            SIGRETIRE_ERR_STOP_BEFORE_START => c"SIGRETIRE_ERR_STOP_BEFORE_START",
            SIGRETIRE_ERR_FOREIGN_SIGNAL_MEMORY => c"SIGRETIRE_ERR_FOREIGN_SIGNAL_MEMORY",
        }
    }
}

/// A failed call: the status it returns and the sentence
/// `sigretire_last_error` gives.
#[derive(Debug)]
pub(crate) struct Fail {
    pub(crate) status: sigretire_status,
    pub(crate) message: String,
}

/// A call's result inside the library.
pub(crate) type Outcome<T = ()> = Result<T, Fail>;

/// A failure with `status` and `message`.
pub(crate) fn fail<T>(status: sigretire_status, message: impl Into<String>) -> Outcome<T> {
    Err(Fail {
        status,
        message: message.into(),
    })
}

thread_local! {
    /// The last failed call's sentence on this thread, as `errno` is kept.
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Keeps `message` as this thread's last error. Never panics: with the
/// thread's storage gone or borrowed (neither happens in this library),
/// the message is dropped.
pub(crate) fn set_last_error(function: &str, message: &str) {
    let _ = LAST_ERROR.try_with(|cell| {
        if let Ok(mut last) = cell.try_borrow_mut() {
            last.clear();
            last.push_str(function);
            last.push_str(": ");
            last.push_str(message);
        }
    });
}

/// This thread's last error (empty if no call failed on it yet).
pub(crate) fn last_error() -> String {
    LAST_ERROR
        .try_with(|cell| cell.try_borrow().map(|s| s.clone()).unwrap_or_default())
        .unwrap_or_default()
}

/// The text of a panic's payload.
pub(crate) fn panic_text(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// Runs an exported function's body: its failure becomes a status and the
/// thread's last error; a panic is caught here and becomes
/// `SIGRETIRE_ERR_PANIC`, so it never unwinds into the C caller (which
/// would be undefined behaviour, or an abort).
pub(crate) fn guard(function: &'static str, body: impl FnOnce() -> Outcome) -> sigretire_status {
    // AssertUnwindSafe: a body that panicked half-way may leave a tracker
    // inconsistent; `TrackerGuard` (tracker.rs) marks such a tracker
    // poisoned, and nothing else a body touches outlives the call.
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => SIGRETIRE_OK,
        Ok(Err(failure)) => {
            set_last_error(function, &failure.message);
            failure.status
        }
        Err(payload) => {
            let text = panic_text(payload.as_ref());
            // Dropping a payload can itself panic (a payload whose Drop
            // panics); keep even that from unwinding into C.
            let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
            set_last_error(
                function,
                &format!("the library panicked (a bug; please report it): {text}"),
            );
            SIGRETIRE_ERR_PANIC
        }
    }
}

/// A place a result is written to: an out-parameter checked for null and
/// alignment before the call does anything, so a bad pointer fails the
/// call before any side effect.
pub(crate) struct Out<T>(*mut T);

impl<T> Out<T> {
    /// Checks `ptr` (the out-parameter `name`).
    pub(crate) fn new(ptr: *mut T, name: &str) -> Outcome<Self> {
        check_pointer(ptr.cast_const(), name)?;
        Ok(Self(ptr))
    }

    /// Writes the result, never reading what was there (the caller's
    /// memory may be uninitialised).
    pub(crate) fn write(self, value: T) {
        // SAFETY: `new` checked the pointer is non-null and aligned; the
        // caller's contract (every function's `# Safety`) is that it points
        // to writable memory for a `T`. `write` does not read or drop the
        // old contents.
        unsafe { self.0.write(value) }
    }
}

/// Fails unless `ptr` is non-null and aligned for `T`.
pub(crate) fn check_pointer<T>(ptr: *const T, name: &str) -> Outcome {
    if ptr.is_null() {
        return fail(SIGRETIRE_ERR_NULL, format!("`{name}` is NULL"));
    }
    if !ptr.is_aligned() {
        return fail(
            SIGRETIRE_ERR_INVALID_ARGUMENT,
            format!(
                "`{name}` ({ptr:p}) is not aligned to {} bytes",
                align_of::<T>()
            ),
        );
    }
    Ok(())
}

/// The value an input pointer points to, copied, after the null and
/// alignment checks.
///
/// # Safety
/// A non-null, aligned `ptr` points to a readable, initialised `T`.
pub(crate) unsafe fn read_in<T: Copy>(ptr: *const T, name: &str) -> Outcome<T> {
    check_pointer(ptr, name)?;
    // SAFETY: checked non-null and aligned; readable and initialised by the
    // caller's contract. `T` is a plain-old-data struct of integers (and
    // nullable function pointers), valid for any value the caller wrote.
    Ok(unsafe { ptr.read() })
}

/// A struct of the ABI that begins with its size: a `uint32_t size` the
/// caller sets to the size its header declares, before passing the struct
/// in or out. The library checks it before it reads or writes anything
/// else of the struct (`SIGRETIRE_ERR_STRUCT_SIZE`).
///
/// # Safety
/// Implemented only for `#[repr(C)]` structs whose first field is
/// `size: u32`.
pub(crate) unsafe trait Sized32: Copy {
    /// The C type's name, for messages.
    const NAME: &'static str;
    /// The struct's size in this library's header.
    const SIZE: u32;
    /// The sizes of the struct in earlier headers of this ABI version,
    /// which the library accepts too. A struct's fields are only ever
    /// appended, so an earlier layout is a prefix of this one: the library
    /// reads and writes that prefix only, and a field past it reads as
    /// zero, which an appended field must take to mean what the earlier
    /// layout meant (`read_struct`). Each is at least 4 (the size field)
    /// and less than `SIZE`; most structs have only their first layout.
    const EARLIER: &'static [u32] = &[];
    /// The struct's `size` field.
    fn size_mut(&mut self) -> &mut u32;
}

/// The size the size field at `ptr`, a non-null, aligned pointer to a `T`
/// (the argument `name`), says, if it is `T`'s or an earlier layout's.
///
/// # Safety
/// `ptr` points to at least a readable `uint32_t`, initialised.
unsafe fn check_size<T: Sized32>(ptr: *const T, name: &str) -> Outcome<u32> {
    // SAFETY: non-null and aligned (checked by the callers), and the
    // caller's contract: the first 4 bytes of a `T` are its size field.
    let size = unsafe { ptr.cast::<u32>().read() };
    // An earlier size past `T`'s would let a read or write run past the
    // caller's struct or the library's: checked here, not trusted.
    let is_earlier = T::EARLIER.contains(&size) && (4..T::SIZE).contains(&size);
    if size != T::SIZE && !is_earlier {
        let earlier = if T::EARLIER.is_empty() {
            String::new()
        } else {
            format!(" (earlier headers': {:?})", T::EARLIER)
        };
        return fail(
            SIGRETIRE_ERR_STRUCT_SIZE,
            format!(
                "`{name}->size` is {size}: a struct {} of this library is {} bytes{earlier}. Set \
                 `size` to sizeof(struct {}) before the call; a header of another version than \
                 the library's (sigretire_abi_version), or a later header of this version, has \
                 other sizes",
                T::NAME,
                T::SIZE,
                T::NAME
            ),
        );
    }
    Ok(size)
}

/// A struct a caller fills and the library reads.
///
/// # Safety
/// Made only of integers (and nullable pointers), so that any bytes a
/// caller wrote are a valid value.
pub(crate) unsafe trait AnyBits: Sized32 {}

/// The struct an input pointer points to, copied, after the null,
/// alignment and size checks.
///
/// # Safety
/// A non-null, aligned `ptr` points to a readable, initialised `uint32_t`,
/// and to a readable, initialised `T` when that says `T`'s size.
pub(crate) unsafe fn read_struct<T: AnyBits>(ptr: *const T, name: &str) -> Outcome<T> {
    check_pointer(ptr, name)?;
    // SAFETY: forwarded caller guarantee.
    let size = unsafe { check_size(ptr, name) }?;
    if size == T::SIZE {
        // SAFETY: checked non-null, aligned and of `T`'s size; readable and
        // initialised by the caller's contract; any bytes are a valid `T`
        // (`AnyBits`' contract).
        return Ok(unsafe { ptr.read() });
    }
    // An earlier layout: the caller's memory holds only its prefix, so the
    // fields appended since read as zero (what they must take to mean the
    // earlier layout's behaviour, `Sized32::EARLIER`).
    // SAFETY: any bytes, zeros included, are a valid `T` (`AnyBits`).
    let mut value: T = unsafe { std::mem::zeroed() };
    // SAFETY: `size` is an accepted earlier size, so less than `T`'s
    // (`check_size` checks it): the source is the `size` bytes the
    // caller's contract makes readable and initialised, the destination a
    // local `T`, and the two do not overlap. A byte copy is untyped, so
    // padding is no matter.
    unsafe {
        std::ptr::copy_nonoverlapping(
            ptr.cast::<u8>(),
            (&raw mut value).cast::<u8>(),
            size as usize,
        );
    }
    Ok(value)
}

/// As [`read_struct`], but NULL means `default`.
///
/// # Safety
/// As for [`read_struct`].
pub(crate) unsafe fn read_optional_struct<T: AnyBits>(
    ptr: *const T,
    name: &str,
    default: impl FnOnce() -> T,
) -> Outcome<T> {
    if ptr.is_null() {
        return Ok(default());
    }
    // SAFETY: forwarded caller guarantee.
    unsafe { read_struct(ptr, name) }
}

/// A struct out-parameter: checked for null, alignment and its size field
/// (which the caller set) before the call does anything.
pub(crate) struct StructOut<T: Sized32> {
    out: Out<T>,
    /// The size the caller's struct has: `T::SIZE`, or an earlier
    /// layout's, of which only the prefix is written.
    size: u32,
}

impl<T: Sized32> StructOut<T> {
    /// Checks `ptr` (the out-parameter `name`).
    ///
    /// # Safety
    /// A non-null, aligned `ptr` points to a `T` whose size field the
    /// caller initialised, writable for as many bytes as that says.
    pub(crate) unsafe fn new(ptr: *mut T, name: &str) -> Outcome<Self> {
        let out = Out::new(ptr, name)?;
        // SAFETY: forwarded caller guarantee.
        let size = unsafe { check_size(ptr.cast_const(), name) }?;
        Ok(Self { out, size })
    }

    /// The size the caller's struct says it has.
    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// Writes the result, its size field set to the caller's size; into an
    /// earlier layout, only the fields it has.
    pub(crate) fn write(self, mut value: T) {
        *value.size_mut() = self.size;
        if self.size == T::SIZE {
            self.out.write(value);
            return;
        }
        // SAFETY: `new` checked the pointer is non-null and aligned, and
        // that `size` is an accepted earlier size, less than `T`'s; the
        // caller's contract is that `size` bytes there are writable. The
        // source is a local, so the two do not overlap; a byte copy is
        // untyped, so `value`'s padding is no matter.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&raw const value).cast::<u8>(),
                self.out.0.cast::<u8>(),
                self.size as usize,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_status_and_a_message() {
        let status = guard("sigretire_test", || panic!("boom {}", 7));
        assert_eq!(status, SIGRETIRE_ERR_PANIC);
        let text = last_error();
        assert!(text.starts_with("sigretire_test: "), "{text}");
        assert!(text.contains("boom 7"), "{text}");
    }

    #[test]
    fn a_failure_keeps_its_status_and_sentence() {
        let status = guard("sigretire_test", || fail(SIGRETIRE_ERR_EXPIRED, "gone"));
        assert_eq!(status, SIGRETIRE_ERR_EXPIRED);
        assert_eq!(last_error(), "sigretire_test: gone");
        assert_eq!(guard("sigretire_test", || Ok(())), SIGRETIRE_OK);
        assert_eq!(
            last_error(),
            "sigretire_test: gone",
            "kept until the next failure"
        );
    }

    #[test]
    fn every_status_has_its_own_name_and_value() {
        for (i, status) in sigretire_status::ALL.into_iter().enumerate() {
            assert_eq!(status as i32, i as i32);
            assert_eq!(sigretire_status::from_value(i as i32), Some(status));
            assert!(status.name().to_str().unwrap().starts_with("SIGRETIRE_"));
        }
        assert_eq!(sigretire_status::from_value(-1), None);
        assert_eq!(sigretire_status::from_value(33), None);
    }

    #[test]
    fn null_and_misaligned_pointers_are_refused() {
        assert_eq!(
            check_pointer(std::ptr::null::<u64>(), "x")
                .unwrap_err()
                .status,
            SIGRETIRE_ERR_NULL
        );
        let word = [0u64; 2];
        let odd = word.as_ptr().cast::<u8>().wrapping_add(1).cast::<u64>();
        assert_eq!(
            check_pointer(odd, "x").unwrap_err().status,
            SIGRETIRE_ERR_INVALID_ARGUMENT
        );
    }
}
