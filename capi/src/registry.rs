//! The table of live handles. Every handle the library hands out (tracker,
//! hold, pin, simulator, ROCr, device, stream, event) is entered here under its kind when it is
//! made and removed when it is destroyed or released, and every call looks
//! a handle up here before it touches a byte of it. So a pointer that is
//! not a live handle of the kind a function takes (a destroyed or released
//! one, a handle of another kind, a pointer to anything else) is refused
//! with `SIGRETIRE_ERR_BAD_HANDLE` without being read: no read past a
//! smaller object, none of freed memory.
//!
//! The one mistake it cannot catch: a destroyed handle whose address the
//! allocator gave to a new handle of the same kind is that new handle.
//!
//! The table is split into shards by address, each behind its own
//! read-write lock, so that calls on different handles rarely touch the
//! same lock; a lookup takes a shard's read lock for one map search.

use crate::status::{Outcome, SIGRETIRE_ERR_BAD_HANDLE, check_pointer, fail};
use parking_lot::RwLock;
use std::collections::BTreeMap;

/// What kind of object a live handle is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Tracker,
    Hold,
    Pin,
    Sim,
    Rocr,
    Device,
    Stream,
    Event,
}

impl Kind {
    /// The C type's name.
    fn type_name(self) -> &'static str {
        match self {
            Kind::Tracker => "sigretire_tracker",
            Kind::Hold => "sigretire_hold",
            Kind::Pin => "sigretire_pin",
            Kind::Sim => "sigretire_sim",
            Kind::Rocr => "sigretire_rocr",
            Kind::Device => "sigretire_device",
            Kind::Stream => "sigretire_stream",
            Kind::Event => "sigretire_event",
        }
    }
}

const SHARDS: usize = 64;

/// Live handles by address, in shards.
static LIVE: [RwLock<BTreeMap<usize, Kind>>; SHARDS] =
    [const { RwLock::new(BTreeMap::new()) }; SHARDS];

fn shard(address: usize) -> &'static RwLock<BTreeMap<usize, Kind>> {
    // Handles are heap blocks, 8- or 16-byte aligned: drop the low bits
    // and fold in higher ones, so neighbouring blocks spread over shards.
    &LIVE[((address >> 4) ^ (address >> 10)) % SHARDS]
}

/// Enters a new handle (a pointer fresh from `Box::into_raw`).
pub(crate) fn register<T>(ptr: *const T, kind: Kind) {
    let address = ptr as usize;
    shard(address).write().insert(address, kind);
}

/// Why `ptr` (`name`) is not a live handle of kind `kind`, if it is not.
fn refusal<T>(found: Option<Kind>, ptr: *const T, kind: Kind, name: &str) -> Outcome {
    match found {
        Some(k) if k == kind => Ok(()),
        Some(other) => fail(
            SIGRETIRE_ERR_BAD_HANDLE,
            format!(
                "`{name}` ({ptr:p}) is a {}, not a {}",
                other.type_name(),
                kind.type_name()
            ),
        ),
        None => fail(
            SIGRETIRE_ERR_BAD_HANDLE,
            format!(
                "`{name}` ({ptr:p}) is not a live {} (destroyed or released already, or not a \
                 handle of this library)",
                kind.type_name()
            ),
        ),
    }
}

/// Fails unless `ptr` (the argument `name`) is non-null, aligned, and a
/// live handle of kind `kind`. Reads nothing at `ptr`.
pub(crate) fn check<T>(ptr: *const T, kind: Kind, name: &str) -> Outcome {
    check_pointer(ptr, name)?;
    let address = ptr as usize;
    let found = shard(address).read().get(&address).copied();
    refusal(found, ptr, kind, name)
}

/// Removes `ptr` (the argument `name`) from the table if it is a live
/// handle of kind `kind`, and fails otherwise. Of two calls racing to
/// destroy the same handle, only one succeeds. Reads nothing at `ptr`.
pub(crate) fn unregister<T>(ptr: *const T, kind: Kind, name: &str) -> Outcome {
    check_pointer(ptr, name)?;
    let address = ptr as usize;
    let mut live = shard(address).write();
    let found = live.get(&address).copied();
    refusal(found, ptr, kind, name)?;
    live.remove(&address);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_is_live_between_its_registration_and_its_removal() {
        let object = Box::into_raw(Box::new(7u64));
        assert_eq!(
            check(object, Kind::Hold, "hold").unwrap_err().status,
            SIGRETIRE_ERR_BAD_HANDLE
        );
        register(object, Kind::Hold);
        assert!(check(object, Kind::Hold, "hold").is_ok());
        let wrong = check(object, Kind::Tracker, "tracker").unwrap_err();
        assert_eq!(wrong.status, SIGRETIRE_ERR_BAD_HANDLE);
        assert!(
            wrong.message.contains("is a sigretire_hold"),
            "{}",
            wrong.message
        );
        assert!(
            unregister(object, Kind::Pin, "pin").is_err(),
            "another kind"
        );
        assert!(unregister(object, Kind::Hold, "hold").is_ok());
        assert!(unregister(object, Kind::Hold, "hold").is_err(), "once only");
        assert!(check(object, Kind::Hold, "hold").is_err());
        // SAFETY: from `Box::into_raw` above, freed once.
        drop(unsafe { Box::from_raw(object) });
    }
}
