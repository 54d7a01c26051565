//! The completion-signal tracker's C ABI, for runtimes written in C and
//! C++ (a HIP runtime, an IREE-style HAL, an inference engine driving ROCr):
//! HIP-like devices, streams and events over a runtime's own `hsa_queue_t`
//! or `CUstream` (`sigretire_rocr_device_adopt`,
//! `sigretire_cuda_device_adopt`), completion callbacks and deferred
//! release, and the tracker itself; every backend also on a simulated GPU.
//!
//! The crate builds `libsigretire_capi.so` (cdylib) and
//! `libsigretire_capi.a` (staticlib); `include/sigretire.h` is generated
//! from these sources by cbindgen (`cargo run -p sigretire-capi --example
//! generate_header`; a test fails when the checked-in header is stale).
//! The header's comments are the reference; `README.md` has a walk-through.
//!
//! The surface, in C names:
//!
//! - backends: a simulated GPU (`sigretire_sim_*`: queues, the packet
//!   processor's steps, its ground truth), ROCr over an `hsa_queue_t` the
//!   runtime owns (`sigretire_rocr_*`, through `AqlQueue::adopt`), and
//!   hooks (`sigretire_hooks`), C function pointers standing in for the
//!   tracker's `SignalMemory` and `QueueView` traits;
//! - the tracker (`sigretire_tracker_*`): acquire (the completion signal and
//!   the header bits to publish), submit and publish (the library builds
//!   the packet from the tracker's record), query, known status, wait with
//!   a timeout and a policy, hold, pin and attach, probe, poll, reclaim,
//!   timestamps, queue changes, drains, queue and submission failures,
//!   stats and census;
//! - holds (`sigretire_hold_*`) and pins (`sigretire_pin_*`);
//! - the queue layer (HIP-like streams over the tracker): devices
//!   (`sigretire_device_*`, made on the simulator, on ROCr over a runtime's
//!   `hsa_queue_t`, or on CUDA over a runtime's `CUstream`), streams
//!   (`sigretire_stream_*`: launch, marker, query, synchronize, waits for
//!   events of other streams) and events (`sigretire_event_*`: record with
//!   flags, query, synchronize, elapsed time);
//! - completion callbacks and deferred release (`sigretire_stream_on_complete`,
//!   `sigretire_event_on_complete`, `sigretire_stream_release_after`,
//!   `sigretire_device_callback_stats`): C functions run on the device's
//!   callback thread once work completed or failed, or once it retired.
//!
//! Conventions every function keeps: it returns a `sigretire_status`;
//! results go to out-parameters; every pointer is checked for NULL (and
//! alignment) before anything happens; its body runs under
//! `std::panic::catch_unwind`, so a panic becomes `SIGRETIRE_ERR_PANIC`
//! and never unwinds into C; a ticket is the tracker's own plain-data
//! ticket, which only its own tracker accepts, checking every field against
//! its own state (no byte of it is trusted, no record of it kept here).

#![allow(non_camel_case_types)]

mod callbacks;
mod cuda;
mod device;
mod engine;
mod event;
mod handles;
mod hooks;
mod layer;
mod objects;
mod orphans;
mod registry;
mod release;
mod rocr;
mod rocr_queue;
mod sim;
mod status;
mod stream;
mod tracker;
mod types;

pub use callbacks::*;
pub use cuda::*;
pub use device::*;
pub use event::*;
pub use handles::{
    sigretire_hold, sigretire_hold_clone, sigretire_hold_known_status, sigretire_hold_release,
    sigretire_hold_signal, sigretire_hold_status, sigretire_hold_timestamps, sigretire_pin,
    sigretire_pin_packet_handle, sigretire_pin_release, sigretire_pin_status,
};
pub use hooks::{
    sigretire_hooks, sigretire_hooks_note_queue_change, sigretire_hooks_tracker_create,
};
pub use objects::*;
pub use release::sigretire_release_callback;
pub use rocr::*;
pub use sim::*;
pub use status::sigretire_status::{self, *};
pub use stream::*;
pub use tracker::{
    sigretire_tracker, sigretire_tracker_acquire, sigretire_tracker_attach,
    sigretire_tracker_census, sigretire_tracker_destroy, sigretire_tracker_fail_queue,
    sigretire_tracker_fail_submission, sigretire_tracker_generation, sigretire_tracker_hold,
    sigretire_tracker_known_status, sigretire_tracker_note_drained, sigretire_tracker_pin,
    sigretire_tracker_poll, sigretire_tracker_probe, sigretire_tracker_publish,
    sigretire_tracker_publish_unsignalled, sigretire_tracker_query, sigretire_tracker_reclaim,
    sigretire_tracker_reserve, sigretire_tracker_stats, sigretire_tracker_submit,
    sigretire_tracker_timestamp_frequency, sigretire_tracker_timestamps, sigretire_tracker_wait,
};
pub use types::*;

use status::{Out, StructOut, fail, guard};
use std::ffi::c_char;

/// The ABI version of the library actually loaded: check at start-up that
/// it equals `SIGRETIRE_ABI_VERSION`, the header's. (On ELF systems the
/// shared library's SONAME carries it too, `libsigretire_capi.so.4`, so the
/// dynamic loader already refuses a library of another version; a static
/// link or a `dlopen` by another name has only this check.)
///
/// Thread safety: any thread.
///
/// # Safety
/// `version` points to a writable `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_abi_version(version: *mut u32) -> sigretire_status {
    guard("sigretire_abi_version", || {
        Out::new(version, "version")?.write(SIGRETIRE_ABI_VERSION);
        Ok(())
    })
}

/// The name of status value `status` (`"SIGRETIRE_ERR_NULL"`), a static
/// NUL-terminated string; `SIGRETIRE_ERR_INVALID_ARGUMENT` for a value no
/// status has.
///
/// Thread safety: any thread.
///
/// # Safety
/// `name` points to a writable `const char *`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_status_name(
    status: i32,
    name: *mut *const c_char,
) -> sigretire_status {
    guard("sigretire_status_name", || {
        let out = Out::new(name, "name")?;
        match sigretire_status::from_value(status) {
            Some(status) => {
                out.write(status.name().as_ptr());
                Ok(())
            }
            None => fail(
                SIGRETIRE_ERR_INVALID_ARGUMENT,
                format!("{status} is not a sigretire_status"),
            ),
        }
    })
}

/// Copies this thread's last error message (what the last failed call on
/// this thread said went wrong, and what to do) into `buffer`,
/// NUL-terminated, and writes to `*length` the size of the buffer the
/// whole message needs, its NUL included (1 for an empty message): a
/// buffer of `*length` bytes always takes it. With a smaller buffer
/// (`capacity` may be 0, and `buffer` then NULL: a size query) as much as
/// fits is written, NUL-terminated when `capacity` is at least 1, and
/// `SIGRETIRE_ERR_BUFFER_TOO_SMALL` returned; the message is kept for the
/// retry. The message is empty if no call failed on this thread yet.
/// Successful calls leave it as it was.
///
/// ```c
/// size_t length = 0;
/// sigretire_last_error(NULL, 0, &length);   // SIGRETIRE_ERR_BUFFER_TOO_SMALL
/// char *message = malloc(length);
/// sigretire_last_error(message, length, &length);   // SIGRETIRE_OK
/// ```
///
/// Thread safety: any thread; each thread has its own message.
///
/// # Safety
/// `buffer` points to `capacity` writable bytes (or is NULL with
/// `capacity` 0); `length` points to a writable `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_last_error(
    buffer: *mut c_char,
    capacity: usize,
    length: *mut usize,
) -> sigretire_status {
    // Read first: a call that only reports "too small" must leave the
    // message in place for the retry, so that answer bypasses `guard`'s
    // recording of failures.
    let message = status::last_error();
    let mut truncated = false;
    let status = guard("sigretire_last_error", || {
        let out = Out::new(length, "length")?;
        if capacity > 0 {
            status::check_pointer(buffer.cast_const(), "buffer")?;
        }
        let bytes = message.as_bytes();
        // The room the message takes: its bytes and the NUL.
        let needed = bytes.len() + 1;
        out.write(needed);
        truncated = capacity < needed;
        if capacity == 0 {
            return Ok(());
        }
        let fits = bytes.len().min(capacity - 1);
        // SAFETY: `buffer` has `capacity` writable bytes (the caller's
        // contract) and `fits + 1 <= capacity`; the message is a separate
        // Rust string, so the ranges do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), buffer, fits);
            buffer.add(fits).write(0);
        }
        Ok(())
    });
    if status == SIGRETIRE_OK && truncated {
        SIGRETIRE_ERR_BUFFER_TOO_SMALL
    } else {
        status
    }
}

/// The default tracker configuration (the Rust `Config::default()`: 64
/// signals growing to 1024, host-memory signals, the retiring tracker).
///
/// Thread safety: any thread.
///
/// # Safety
/// `config` points to a writable `sigretire_config`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_config_default(
    config: *mut sigretire_config,
) -> sigretire_status {
    guard("sigretire_config_default", || {
        // SAFETY: forwarded caller guarantee.
        unsafe { StructOut::new(config, "config") }?.write(sigretire_config::default_values());
        Ok(())
    })
}

/// The spinning wait policy (a default HIP event's): spin 50 us, wherever
/// the signal lives (`spin_ns` and `device_spin_ns` 50000), then yield up
/// to 1 ms, then sleep up to 500 us at a time.
///
/// Thread safety: any thread.
///
/// # Safety
/// `policy` points to a writable `sigretire_wait_policy`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_wait_policy_spin(
    policy: *mut sigretire_wait_policy,
) -> sigretire_status {
    guard("sigretire_wait_policy_spin", || {
        // SAFETY: forwarded caller guarantee.
        unsafe { StructOut::new(policy, "policy") }?.write(sigretire_wait_policy::from_rust(
            ::sigretire_tracker::WaitPolicy::spin(),
        ));
        Ok(())
    })
}

/// The blocking wait policy (a blocking-sync event's): spin 10 us on a
/// host-memory signal (`spin_ns` 10000: work that was nearly done costs
/// less to spin for than to sleep through) and not at all on a
/// device-memory one (`device_spin_ns` 0: each poll there is a PCIe read,
/// and not issuing them is the point), then yield 20 us, then sleep up to
/// 200 us at a time.
///
/// Thread safety: any thread.
///
/// # Safety
/// `policy` points to a writable `sigretire_wait_policy`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_wait_policy_blocking(
    policy: *mut sigretire_wait_policy,
) -> sigretire_status {
    guard("sigretire_wait_policy_blocking", || {
        // SAFETY: forwarded caller guarantee.
        unsafe { StructOut::new(policy, "policy") }?.write(sigretire_wait_policy::from_rust(
            ::sigretire_tracker::WaitPolicy::blocking(),
        ));
        Ok(())
    })
}

/// The hybrid wait policy: a blocking wait that returns like a spin. A
/// wait expected to be long dozes (sleeps with a fine timer slack) until
/// shortly before the work is likely done (on a wake the GPU completes
/// while more than two rechecks are left, where the wait can arm one, then
/// looking every 100 us, `hybrid_recheck_ns`), then spins from 2 us before
/// the guess (`hybrid_early_ns`, plus the median of what recent dozes
/// overslept) to 20 us past it (`hybrid_late_ns`, plus 1/32 of the
/// guess); a guess under 50 us
/// (`hybrid_min_guess_ns`), or none yet, is no doze. Where the guess was
/// wrong, or there is none, it waits as `sigretire_wait_policy_blocking`'s
/// policy does (the other fields are that policy's). The guess is
/// `expected_ns`, how long the waits last from their start in nanoseconds,
/// or, where that is 0, the tracker's, learned from its recent hybrid
/// waits. It never burns a core for the whole wait and never answers
/// before the work is done: a guess far too long costs up to a recheck of
/// lateness, one far too short a spin of `hybrid_late_ns` plus 1/32 of
/// the guess.
///
/// Thread safety: any thread.
///
/// Errors: `SIGRETIRE_ERR_NULL` for a NULL `policy`;
/// `SIGRETIRE_ERR_STRUCT_SIZE` unless `policy->size` is this header's
/// `sizeof(struct sigretire_wait_policy)` (an earlier header's struct has
/// no room for the hybrid fields). Nothing is written on an error.
///
/// # Safety
/// `policy` points to a writable `sigretire_wait_policy`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_wait_policy_hybrid(
    policy: *mut sigretire_wait_policy,
    expected_ns: u64,
) -> sigretire_status {
    guard("sigretire_wait_policy_hybrid", || {
        // SAFETY: forwarded caller guarantee.
        let out = unsafe { StructOut::new(policy, "policy") }?;
        // An earlier layout would get the blocking policy's fields only: a
        // policy that is not hybrid, which the caller did not ask for.
        if out.size() != size_of::<sigretire_wait_policy>() as u32 {
            return fail(
                SIGRETIRE_ERR_STRUCT_SIZE,
                format!(
                    "`policy->size` is {}: a hybrid policy needs the whole struct \
                     sigretire_wait_policy of this library ({} bytes), with its hybrid fields",
                    out.size(),
                    size_of::<sigretire_wait_policy>()
                ),
            );
        }
        let hybrid = ::sigretire_tracker::WaitPolicy::hybrid();
        out.write(sigretire_wait_policy::from_rust(if expected_ns == 0 {
            hybrid
        } else {
            hybrid.expecting(std::time::Duration::from_nanos(expected_ns))
        }));
        Ok(())
    })
}

/// The crate README's examples, run as doctests so they cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(test)]
mod tests {
    #[test]
    fn the_sonames_version_is_the_abi_version() {
        assert_eq!(
            env!("SIGRETIRE_SONAME_ABI"),
            crate::SIGRETIRE_ABI_VERSION.to_string(),
            "build.rs's ABI (the SONAME) and SIGRETIRE_ABI_VERSION must be raised together"
        );
    }
}
