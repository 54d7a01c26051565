//! Every exported function, given NULL pointers, a misaligned pointer,
//! handles that are not live, forged, foreign and stale tickets and
//! out-of-range arguments, answers an error code: no crash, no unwinding
//! into the caller, and nothing changed by a call that failed.

use sigretire_capi::*;
use std::ffi::{c_char, c_void};
use std::ptr::{null, null_mut};

/// A simulator with `queues` queues and a tracker on queue 0.
struct Rig {
    sim: *mut sigretire_sim,
    tracker: *mut sigretire_tracker,
}

impl Rig {
    fn new(queues: u32) -> Self {
        Self::with_config(queues, None)
    }

    fn with_config(queues: u32, config: Option<sigretire_config>) -> Self {
        let mut sim = null_mut();
        let mut tracker = null_mut();
        let options = sigretire_sim_options {
            size: size_of::<sigretire_sim_options>() as u32,
            queues,
            queue_size: 0,
            flags: 0,
            costs: SIGRETIRE_SIM_COSTS_ZERO,
        };
        let config_ptr = config.as_ref().map_or(null(), |c| c as *const _);
        // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
        // or live handles of this test; the library checks each before use.
        unsafe {
            assert_eq!(sigretire_sim_create(&options, &mut sim), SIGRETIRE_OK);
            assert_eq!(
                sigretire_sim_tracker_create(sim, 0, config_ptr, &mut tracker),
                SIGRETIRE_OK
            );
        }
        Self { sim, tracker }
    }

    /// Submits one barrier kernel and returns what acquire answered.
    fn submit(&self, purpose: sigretire_purpose) -> sigretire_acquired {
        let request = sigretire_request {
            flags: SIGRETIRE_REQUEST_BARRIER,
            purpose: purpose as u32,
            ..Default::default()
        };
        let work = kernel();
        let mut acquired = sigretire_acquired::default();
        // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
        // or live handles of this test; the library checks each before use.
        unsafe {
            assert_eq!(
                sigretire_tracker_submit(self.tracker, &request, &work, &mut acquired),
                SIGRETIRE_OK,
                "{}",
                last_error()
            );
        }
        acquired
    }

    fn run(&self) {
        // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
        // or live handles of this test; the library checks each before use.
        unsafe { assert_eq!(sigretire_sim_run_until_idle(self.sim), SIGRETIRE_OK) };
    }

    fn poll(&self) -> usize {
        let mut n = 0;
        // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
        // or live handles of this test; the library checks each before use.
        unsafe { assert_eq!(sigretire_tracker_poll(self.tracker, &mut n), SIGRETIRE_OK) };
        n
    }

    fn query(&self, ticket: &sigretire_ticket) -> (sigretire_status, sigretire_use_status) {
        let mut status = SIGRETIRE_USE_UNKNOWN;
        // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
        // or live handles of this test; the library checks each before use.
        let result = unsafe { sigretire_tracker_query(self.tracker, ticket, &mut status) };
        (result, status)
    }

    fn stats(&self) -> sigretire_stats {
        let mut stats = sigretire_stats::default();
        // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
        // or live handles of this test; the library checks each before use.
        unsafe {
            assert_eq!(
                sigretire_tracker_stats(self.tracker, &mut stats),
                SIGRETIRE_OK
            )
        };
        stats
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
        // or live handles of this test; the library checks each before use.
        unsafe {
            assert_eq!(sigretire_tracker_destroy(&mut self.tracker), SIGRETIRE_OK);
            assert_eq!(sigretire_sim_destroy(&mut self.sim), SIGRETIRE_OK);
        }
    }
}

fn kernel() -> sigretire_work {
    sigretire_work {
        kind: sigretire_work_kind::SIGRETIRE_WORK_KERNEL as u32,
        ..Default::default()
    }
}

fn last_error() -> String {
    let mut buffer = [0 as c_char; 1024];
    let mut length = 0;
    // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
    // or live handles of this test; the library checks each before use.
    unsafe { sigretire_last_error(buffer.as_mut_ptr(), buffer.len(), &mut length) };
    // `length` counts the NUL.
    let bytes: Vec<u8> = buffer[..length.saturating_sub(1).min(1023)]
        .iter()
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Asserts `call` answered `expected`, and that the last error names the
/// function (so the message is the call's own).
/// [`expect`] for each call in turn (each is made, then checked, before
/// the next: the last error belongs to one call).
macro_rules! expect_each {
    ($expected:expr, $function:expr, $($call:expr),+ $(,)?) => {
        $(expect($call, $expected, $function);)+
    };
}

fn expect(call: sigretire_status, expected: sigretire_status, function: &str) {
    assert_eq!(call, expected, "{function}: {}", last_error());
    if expected != SIGRETIRE_OK {
        assert!(
            last_error().starts_with(function),
            "the last error should be {function}'s: {}",
            last_error()
        );
    }
}

/// The tickets no tracker accepts from `rig`: zeroed, another tracker's,
/// and `good` with each field changed.
fn bad_tickets(good: sigretire_ticket, foreign: sigretire_ticket) -> Vec<sigretire_ticket> {
    vec![
        sigretire_ticket::default(),
        foreign,
        sigretire_ticket {
            seq: good.seq + 1,
            ..good
        },
        sigretire_ticket { seq: 0, ..good },
        sigretire_ticket {
            seq: u64::MAX,
            ..good
        },
        sigretire_ticket {
            generation: good.generation + 1,
            ..good
        },
        sigretire_ticket {
            flags: good.flags ^ SIGRETIRE_TICKET_TIMED,
            ..good
        },
        sigretire_ticket {
            slot: good.slot ^ 1,
            ..good
        },
        sigretire_ticket {
            tracker: good.tracker + 1,
            ..good
        },
    ]
}

#[test]
fn library_functions_refuse_null_pointers() {
    let mut name: *const c_char = null();
    let mut length = 0usize;
    // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
    // or live handles of this test; the library checks each before use.
    unsafe {
        expect(
            sigretire_abi_version(null_mut()),
            SIGRETIRE_ERR_NULL,
            "sigretire_abi_version",
        );
        expect(
            sigretire_status_name(0, null_mut()),
            SIGRETIRE_ERR_NULL,
            "sigretire_status_name",
        );
        expect(
            sigretire_status_name(1000, &mut name),
            SIGRETIRE_ERR_INVALID_ARGUMENT,
            "sigretire_status_name",
        );
        expect_each!(
            SIGRETIRE_ERR_NULL,
            "sigretire_last_error",
            sigretire_last_error(null_mut(), 0, null_mut()),
            sigretire_last_error(null_mut(), 16, &mut length)
        );
        expect(
            sigretire_config_default(null_mut()),
            SIGRETIRE_ERR_NULL,
            "sigretire_config_default",
        );
        expect(
            sigretire_wait_policy_spin(null_mut()),
            SIGRETIRE_ERR_NULL,
            "sigretire_wait_policy_spin",
        );
        expect(
            sigretire_wait_policy_blocking(null_mut()),
            SIGRETIRE_ERR_NULL,
            "sigretire_wait_policy_blocking",
        );
        expect(
            sigretire_wait_policy_hybrid(null_mut(), 0),
            SIGRETIRE_ERR_NULL,
            "sigretire_wait_policy_hybrid",
        );
    }
}

#[test]
fn the_last_error_reports_a_small_buffer_and_keeps_the_message() {
    let mut version = 0;
    // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
    // or live handles of this test; the library checks each before use.
    unsafe {
        assert_eq!(sigretire_abi_version(&mut version), SIGRETIRE_OK);
        assert_eq!(sigretire_abi_version(null_mut()), SIGRETIRE_ERR_NULL);
    }
    let full = last_error();
    assert!(full.contains("`version` is NULL"), "{full}");
    let mut small = [0 as c_char; 8];
    let mut length = 0;
    // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
    // or live handles of this test; the library checks each before use.
    unsafe {
        assert_eq!(
            sigretire_last_error(small.as_mut_ptr(), small.len(), &mut length),
            SIGRETIRE_ERR_BUFFER_TOO_SMALL
        );
        assert_eq!(
            length,
            full.len() + 1,
            "the room it needs, its NUL included"
        );
        assert_eq!(small[7], 0, "NUL-terminated");
        assert_eq!(
            sigretire_last_error(null_mut(), 0, &mut length),
            SIGRETIRE_ERR_BUFFER_TOO_SMALL
        );
    }
    assert_eq!(last_error(), full, "a size query leaves the message");
    assert_eq!(version, SIGRETIRE_ABI_VERSION);
}

#[test]
fn a_buffer_of_the_reported_length_holds_the_whole_message() {
    // SAFETY: a call with a NULL pointer (under test): it fails.
    unsafe { assert_eq!(sigretire_abi_version(null_mut()), SIGRETIRE_ERR_NULL) };
    let mut length = 0;
    // SAFETY: a size query: NULL buffer of capacity 0, a local length.
    let query = unsafe { sigretire_last_error(null_mut(), 0, &mut length) };
    assert_eq!(query, SIGRETIRE_ERR_BUFFER_TOO_SMALL);
    let mut buffer = vec![1 as c_char; length];
    let mut written = 0;
    // SAFETY: `buffer` has `length` writable bytes, as passed.
    let status = unsafe { sigretire_last_error(buffer.as_mut_ptr(), length, &mut written) };
    assert_eq!(
        status, SIGRETIRE_OK,
        "a buffer of the length the size query reported takes the message and its NUL"
    );
    assert_eq!(written, length);
    assert_eq!(buffer[length - 1], 0, "NUL-terminated");
    let text: Vec<u8> = buffer[..length - 1].iter().map(|&c| c as u8).collect();
    let text = String::from_utf8(text).unwrap();
    assert!(text.starts_with("sigretire_abi_version: "), "{text}");
    assert!(!text.contains('\0'), "the whole message, no NUL inside");
}

#[test]
fn simulator_functions_refuse_bad_arguments() {
    let rig = Rig::new(1);
    let mut sim = null_mut();
    let mut tracker = null_mut();
    let mut index = 0u64;
    let mut flag = false;
    let mut count = 0u64;
    let words = [0u32; 16];
    let options = |f: fn(&mut sigretire_sim_options)| {
        let mut o = sigretire_sim_options {
            size: size_of::<sigretire_sim_options>() as u32,
            queues: 1,
            queue_size: 0,
            flags: 0,
            costs: 0,
        };
        f(&mut o);
        o
    };
    // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
    // or live handles of this test; the library checks each before use.
    unsafe {
        let f = "sigretire_sim_options_default";
        expect(
            sigretire_sim_options_default(null_mut()),
            SIGRETIRE_ERR_NULL,
            f,
        );
        let f = "sigretire_sim_create";
        expect(
            sigretire_sim_create(null(), null_mut()),
            SIGRETIRE_ERR_NULL,
            f,
        );
        for bad in [
            options(|o| o.flags = 1 << 20),
            options(|o| o.queues = SIGRETIRE_SIM_MAX_QUEUES + 1),
            options(|o| o.queue_size = 100),
            options(|o| o.queue_size = 1 << 30),
            options(|o| o.costs = 9),
        ] {
            expect(
                sigretire_sim_create(&bad, &mut sim),
                SIGRETIRE_ERR_INVALID_ARGUMENT,
                f,
            );
            assert!(sim.is_null(), "nothing made");
        }
        let f = "sigretire_sim_destroy";
        expect(sigretire_sim_destroy(null_mut()), SIGRETIRE_ERR_NULL, f);
        expect(sigretire_sim_destroy(&mut sim), SIGRETIRE_OK, f); // NULL: a no-op

        let f = "sigretire_sim_tracker_create";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_sim_tracker_create(null(), 0, null(), &mut tracker),
            sigretire_sim_tracker_create(rig.sim, 0, null(), null_mut())
        );
        expect(
            sigretire_sim_tracker_create(rig.sim, 1, null(), &mut tracker),
            SIGRETIRE_ERR_INVALID_ARGUMENT,
            f,
        );
        let f = "sigretire_sim_reserve";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_sim_reserve(null(), 0, &mut index),
            sigretire_sim_reserve(rig.sim, 0, null_mut())
        );
        expect(
            sigretire_sim_reserve(rig.sim, 3, &mut index),
            SIGRETIRE_ERR_INVALID_ARGUMENT,
            f,
        );
        let f = "sigretire_sim_write_packet";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_sim_write_packet(null(), 0, 0, words.as_ptr()),
            sigretire_sim_write_packet(rig.sim, 0, 0, null())
        );
        expect(
            sigretire_sim_write_packet(rig.sim, 2, 0, words.as_ptr()),
            SIGRETIRE_ERR_INVALID_ARGUMENT,
            f,
        );
        let f = "sigretire_sim_ring_doorbell";
        expect(
            sigretire_sim_ring_doorbell(null(), 0, 0),
            SIGRETIRE_ERR_NULL,
            f,
        );
        expect(
            sigretire_sim_ring_doorbell(rig.sim, 9, 0),
            SIGRETIRE_ERR_INVALID_ARGUMENT,
            f,
        );
        let f = "sigretire_sim_run_until_idle";
        expect(sigretire_sim_run_until_idle(null()), SIGRETIRE_ERR_NULL, f);
        let f = "sigretire_sim_fail_queue";
        expect(sigretire_sim_fail_queue(null(), 0), SIGRETIRE_ERR_NULL, f);
        expect(
            sigretire_sim_fail_queue(rig.sim, 1),
            SIGRETIRE_ERR_INVALID_ARGUMENT,
            f,
        );
        let f = "sigretire_sim_packet_completed";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_sim_packet_completed(null(), 0, 0, &mut flag),
            sigretire_sim_packet_completed(rig.sim, 0, 0, null_mut())
        );
        expect(
            sigretire_sim_packet_completed(rig.sim, 0, 1 << 40, &mut flag),
            SIGRETIRE_ERR_INVALID_ARGUMENT,
            f,
        );
        let f = "sigretire_sim_violations";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_sim_violations(null(), &mut count),
            sigretire_sim_violations(rig.sim, null_mut())
        );
        let f = "sigretire_sim_note_queue_change";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_sim_note_queue_change(null_mut(), rig.sim, 0),
            sigretire_sim_note_queue_change(rig.tracker, null(), 0)
        );
        expect(
            sigretire_sim_note_queue_change(rig.tracker, rig.sim, 4),
            SIGRETIRE_ERR_INVALID_ARGUMENT,
            f,
        );
        let other = Rig::new(1);
        expect(
            sigretire_sim_note_queue_change(rig.tracker, other.sim, 0),
            SIGRETIRE_ERR_WRONG_BACKEND,
            f,
        );
        // A handle that is not a live simulator (zeroed memory of its size).
        let fake = vec![0u64; size_of::<sigretire_sim>().div_ceil(8)];
        expect(
            sigretire_sim_run_until_idle(fake.as_ptr().cast()),
            SIGRETIRE_ERR_BAD_HANDLE,
            "sigretire_sim_run_until_idle",
        );
    }
    assert!(tracker.is_null(), "no tracker made by a failed call");
}

#[test]
fn invalid_configurations_are_refused() {
    let rig = Rig::new(1);
    let mut tracker = null_mut();
    let mut base = sigretire_config {
        size: size_of::<sigretire_config>() as u32,
        initial_size: 0,
        growth_limit: 0,
        refill_batch: 0,
        timing_batch: 0,
        backpressure_window: 0,
        probe_interval: 0,
        stamp_history: 0,
        signals: 0,
    };
    // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
    // or live handles of this test; the library checks each before use.
    unsafe { assert_eq!(sigretire_config_default(&mut base), SIGRETIRE_OK) };
    let bad: [fn(&mut sigretire_config); 6] = [
        |c| c.initial_size = 0,
        |c| c.growth_limit = 0,
        |c| c.initial_size = u64::MAX,
        |c| c.refill_batch = 1 << 40,
        |c| c.signals = 2,
        |c| c.probe_interval = 0,
    ];
    for change in bad {
        let mut config = base;
        change(&mut config);
        // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
        // or live handles of this test; the library checks each before use.
        unsafe {
            expect(
                sigretire_sim_tracker_create(rig.sim, 0, &config, &mut tracker),
                SIGRETIRE_ERR_INVALID_CONFIG,
                "sigretire_sim_tracker_create",
            );
        }
        assert!(tracker.is_null());
    }
}

#[test]
fn tracker_functions_refuse_null_pointers_and_bad_handles() {
    let rig = Rig::new(1);
    let good = rig
        .submit(sigretire_purpose::SIGRETIRE_PURPOSE_EVENT)
        .ticket;
    let t = rig.tracker;
    let request = sigretire_request::default();
    let work = kernel();
    let mut acquired = sigretire_acquired::default();
    let mut status = SIGRETIRE_USE_UNKNOWN;
    let mut index = 0u64;
    let mut n = 0usize;
    let mut flag = false;
    let mut hold = null_mut();
    let mut pin = null_mut();
    let mut stamps = sigretire_timestamps::default();
    let mut word = 0u64;
    let mut generation = 0u32;
    let mut stats = sigretire_stats::default();
    let mut census = sigretire_census::default();
    let before = rig.stats();
    let n_ = null_mut::<sigretire_tracker>();
    // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
    // or live handles of this test; the library checks each before use.
    unsafe {
        let f = "sigretire_tracker_acquire";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_acquire(n_, &request, &mut acquired),
            sigretire_tracker_acquire(t, null(), &mut acquired),
            sigretire_tracker_acquire(t, &request, null_mut())
        );
        let f = "sigretire_tracker_submit";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_submit(n_, &request, &work, &mut acquired),
            sigretire_tracker_submit(t, null(), &work, &mut acquired),
            sigretire_tracker_submit(t, &request, null(), &mut acquired),
            sigretire_tracker_submit(t, &request, &work, null_mut())
        );
        let f = "sigretire_tracker_reserve";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_reserve(n_, &mut index),
            sigretire_tracker_reserve(t, null_mut())
        );
        let f = "sigretire_tracker_publish";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_publish(n_, &good, 0, &work),
            sigretire_tracker_publish(t, null(), 0, &work),
            sigretire_tracker_publish(t, &good, 0, null())
        );
        let f = "sigretire_tracker_publish_unsignalled";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_publish_unsignalled(n_, 0, 0, &work),
            sigretire_tracker_publish_unsignalled(t, 0, 0, null())
        );
        let f = "sigretire_tracker_query";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_query(n_, &good, &mut status),
            sigretire_tracker_query(t, null(), &mut status),
            sigretire_tracker_query(t, &good, null_mut())
        );
        let f = "sigretire_tracker_known_status";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_known_status(n_, &good, &mut status),
            sigretire_tracker_known_status(t, null(), &mut status),
            sigretire_tracker_known_status(t, &good, null_mut())
        );
        let f = "sigretire_tracker_wait";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_wait(n_, &good, 0, null(), &mut status),
            sigretire_tracker_wait(t, null(), 0, null(), &mut status),
            sigretire_tracker_wait(t, &good, 0, null(), null_mut())
        );
        let f = "sigretire_tracker_hold";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_hold(n_, &good, &mut hold),
            sigretire_tracker_hold(t, null(), &mut hold),
            sigretire_tracker_hold(t, &good, null_mut())
        );
        let f = "sigretire_tracker_pin";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_pin(n_, &good, &mut pin),
            sigretire_tracker_pin(t, null(), &mut pin),
            sigretire_tracker_pin(t, &good, null_mut())
        );
        let f = "sigretire_tracker_attach";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_attach(t, &good, null_mut()),
            sigretire_tracker_attach(t, &good, &mut pin)
        ); // *pin NULL
        let f = "sigretire_tracker_probe";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_probe(n_, &mut flag),
            sigretire_tracker_probe(t, null_mut())
        );
        let f = "sigretire_tracker_poll";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_poll(n_, &mut n),
            sigretire_tracker_poll(t, null_mut())
        );
        let f = "sigretire_tracker_reclaim";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_reclaim(n_, &mut n),
            sigretire_tracker_reclaim(t, null_mut())
        );
        let f = "sigretire_tracker_timestamps";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_timestamps(n_, &good, &mut stamps),
            sigretire_tracker_timestamps(t, null(), &mut stamps),
            sigretire_tracker_timestamps(t, &good, null_mut())
        );
        let f = "sigretire_tracker_timestamp_frequency";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_timestamp_frequency(n_, &mut word),
            sigretire_tracker_timestamp_frequency(t, null_mut())
        );
        let f = "sigretire_tracker_note_drained";
        expect(sigretire_tracker_note_drained(n_), SIGRETIRE_ERR_NULL, f);
        let f = "sigretire_tracker_fail_queue";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_fail_queue(n_, &mut n),
            sigretire_tracker_fail_queue(t, null_mut())
        );
        let f = "sigretire_tracker_fail_submission";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_fail_submission(n_, &good, 0),
            sigretire_tracker_fail_submission(t, null(), 0)
        );
        let f = "sigretire_tracker_generation";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_generation(n_, &mut generation),
            sigretire_tracker_generation(t, null_mut())
        );
        let f = "sigretire_tracker_stats";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_stats(n_, &mut stats),
            sigretire_tracker_stats(t, null_mut())
        );
        let f = "sigretire_tracker_census";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_tracker_census(n_, &mut census),
            sigretire_tracker_census(t, null_mut())
        );
        let f = "sigretire_tracker_destroy";
        expect(sigretire_tracker_destroy(null_mut()), SIGRETIRE_ERR_NULL, f);
        let mut none = null_mut();
        expect(sigretire_tracker_destroy(&mut none), SIGRETIRE_OK, f);

        // A misaligned out-parameter.
        let mut words = [0u64; 32];
        let odd = words
            .as_mut_ptr()
            .cast::<u8>()
            .add(4)
            .cast::<sigretire_stats>();
        expect(
            sigretire_tracker_stats(t, odd),
            SIGRETIRE_ERR_INVALID_ARGUMENT,
            "sigretire_tracker_stats",
        );
        // A handle that is not a live tracker (zeroed memory of its size).
        let fake = vec![0u64; size_of::<sigretire_tracker>().div_ceil(8)];
        let fake = fake.as_ptr().cast_mut().cast::<sigretire_tracker>();
        expect(
            sigretire_tracker_poll(fake, &mut n),
            SIGRETIRE_ERR_BAD_HANDLE,
            "sigretire_tracker_poll",
        );
        let mut fake_slot = fake;
        expect(
            sigretire_tracker_destroy(&mut fake_slot),
            SIGRETIRE_ERR_BAD_HANDLE,
            "sigretire_tracker_destroy",
        );
        assert_eq!(fake_slot, fake, "a refused destroy leaves the variable");
    }
    assert!(hold.is_null() && pin.is_null());
    let after = rig.stats();
    assert_eq!(after.uses, before.uses, "no failed call acquired anything");
}

#[test]
fn every_function_taking_a_ticket_refuses_forged_and_foreign_ones() {
    let rig = Rig::new(1);
    let other = Rig::new(1);
    let good = rig
        .submit(sigretire_purpose::SIGRETIRE_PURPOSE_EVENT)
        .ticket;
    let foreign = other
        .submit(sigretire_purpose::SIGRETIRE_PURPOSE_EVENT)
        .ticket;
    // The consumer end of an attach: a pin to give.
    let producer = other
        .submit(sigretire_purpose::SIGRETIRE_PURPOSE_GPU_WAITER)
        .ticket;
    let mut pin = null_mut();
    // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
    // or live handles of this test; the library checks each before use.
    unsafe {
        assert_eq!(
            sigretire_tracker_pin(other.tracker, &producer, &mut pin),
            SIGRETIRE_OK
        )
    };
    assert!(!pin.is_null());
    let t = rig.tracker;
    let work = kernel();
    for bad in bad_tickets(good, foreign) {
        let mut status = SIGRETIRE_USE_UNKNOWN;
        let mut hold = null_mut();
        let mut new_pin = null_mut();
        let mut stamps = sigretire_timestamps::default();
        // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
        // or live handles of this test; the library checks each before use.
        unsafe {
            let b = SIGRETIRE_ERR_BAD_TICKET;
            expect(
                sigretire_tracker_query(t, &bad, &mut status),
                b,
                "sigretire_tracker_query",
            );
            expect(
                sigretire_tracker_known_status(t, &bad, &mut status),
                b,
                "sigretire_tracker_known_status",
            );
            expect(
                sigretire_tracker_wait(t, &bad, 0, null(), &mut status),
                b,
                "sigretire_tracker_wait",
            );
            expect(
                sigretire_tracker_hold(t, &bad, &mut hold),
                b,
                "sigretire_tracker_hold",
            );
            expect(
                sigretire_tracker_pin(t, &bad, &mut new_pin),
                b,
                "sigretire_tracker_pin",
            );
            expect(
                sigretire_tracker_timestamps(t, &bad, &mut stamps),
                b,
                "sigretire_tracker_timestamps",
            );
            expect(
                sigretire_tracker_fail_submission(t, &bad, 0),
                b,
                "sigretire_tracker_fail_submission",
            );
            expect(
                sigretire_tracker_publish(t, &bad, 0, &work),
                b,
                "sigretire_tracker_publish",
            );
            expect(
                sigretire_tracker_attach(t, &bad, &mut pin),
                b,
                "sigretire_tracker_attach",
            );
        }
        assert!(
            !pin.is_null(),
            "a refused attach leaves the pin with the caller"
        );
        assert!(hold.is_null() && new_pin.is_null());
        assert_eq!(status, SIGRETIRE_USE_UNKNOWN, "no answer written");
    }
    // The genuine ticket still works everywhere it did.
    rig.run();
    assert_eq!(rig.query(&good), (SIGRETIRE_OK, SIGRETIRE_USE_COMPLETE));
    // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
    // or live handles of this test; the library checks each before use.
    unsafe { assert_eq!(sigretire_pin_release(&mut pin), SIGRETIRE_OK) };
    assert!(pin.is_null());
}

#[test]
fn bad_requests_and_work_are_refused_before_anything_happens() {
    let rig = Rig::new(1);
    let good = rig
        .submit(sigretire_purpose::SIGRETIRE_PURPOSE_COMPLETION)
        .ticket;
    let before = rig.stats();
    let t = rig.tracker;
    let mut acquired = sigretire_acquired::default();
    let ok_request = sigretire_request {
        flags: SIGRETIRE_REQUEST_BARRIER,
        ..Default::default()
    };
    let requests = [
        sigretire_request {
            flags: 1 << 7,
            ..ok_request
        },
        sigretire_request {
            purpose: 5,
            ..ok_request
        },
        sigretire_request {
            ops: 2, // submit publishes one packet
            ..ok_request
        },
        sigretire_request {
            flags: SIGRETIRE_REQUEST_COPY_ENGINE,
            ..ok_request
        },
    ];
    let work = kernel();
    for request in requests {
        // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
        // or live handles of this test; the library checks each before use.
        unsafe {
            expect(
                sigretire_tracker_submit(t, &request, &work, &mut acquired),
                SIGRETIRE_ERR_INVALID_ARGUMENT,
                "sigretire_tracker_submit",
            );
        }
    }
    let works = [
        sigretire_work {
            kind: 7,
            ..Default::default()
        },
        sigretire_work {
            kind: sigretire_work_kind::SIGRETIRE_WORK_WAIT_ALL as u32,
            dependency_count: 6,
            ..Default::default()
        },
        sigretire_work {
            kind: sigretire_work_kind::SIGRETIRE_WORK_WAIT_ANY as u32,
            dependency_count: 0,
            ..Default::default()
        },
        sigretire_work {
            kind: sigretire_work_kind::SIGRETIRE_WORK_DISPATCH as u32,
            dimensions: 4,
            ..Default::default()
        },
        sigretire_work {
            kind: sigretire_work_kind::SIGRETIRE_WORK_WAIT_VALUE as u32,
            wait_condition: 4,
            ..Default::default()
        },
    ];
    for bad in works {
        // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
        // or live handles of this test; the library checks each before use.
        unsafe {
            expect(
                sigretire_tracker_submit(t, &ok_request, &bad, &mut acquired),
                SIGRETIRE_ERR_INVALID_ARGUMENT,
                "sigretire_tracker_submit",
            );
            expect(
                sigretire_tracker_publish(t, &good, 0, &bad),
                SIGRETIRE_ERR_INVALID_ARGUMENT,
                "sigretire_tracker_publish",
            );
            expect(
                sigretire_tracker_publish_unsignalled(t, 0, 0, &bad),
                SIGRETIRE_ERR_INVALID_ARGUMENT,
                "sigretire_tracker_publish_unsignalled",
            );
        }
    }
    // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
    // or live handles of this test; the library checks each before use.
    unsafe {
        expect(
            sigretire_tracker_acquire(t, &requests[0], &mut acquired),
            SIGRETIRE_ERR_INVALID_ARGUMENT,
            "sigretire_tracker_acquire",
        );
        expect(
            sigretire_tracker_publish(t, &good, 1, &work),
            SIGRETIRE_ERR_INVALID_ARGUMENT,
            "sigretire_tracker_publish",
        );
        expect(
            sigretire_tracker_publish_unsignalled(t, 0, 2, &work),
            SIGRETIRE_ERR_INVALID_ARGUMENT,
            "sigretire_tracker_publish_unsignalled",
        );
        // An index that does not follow the previous use's: refused, nothing changes.
        let behind = sigretire_request {
            aql_index: 0,
            ..ok_request
        };
        expect(
            sigretire_tracker_acquire(t, &behind, &mut acquired),
            SIGRETIRE_ERR_INDEX_ORDER,
            "sigretire_tracker_acquire",
        );
    }
    assert_eq!(rig.stats().uses, before.uses);
    assert_eq!(acquired, sigretire_acquired::default(), "no answer written");
    let mut violations = 1;
    // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
    // or live handles of this test; the library checks each before use.
    unsafe {
        assert_eq!(
            sigretire_sim_violations(rig.sim, &mut violations),
            SIGRETIRE_OK
        )
    };
    assert_eq!(violations, 0, "no packet published by a refused call");
}

#[test]
fn hold_and_pin_functions_refuse_null_pointers_and_wrong_backends() {
    let rig = Rig::new(1);
    let ticket = rig
        .submit(sigretire_purpose::SIGRETIRE_PURPOSE_EVENT)
        .ticket;
    let mut hold = null_mut();
    let mut pin = null_mut();
    let mut status = SIGRETIRE_USE_UNKNOWN;
    let mut stamps = sigretire_timestamps::default();
    let mut handle = 0u64;
    let mut copy = null_mut();
    // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
    // or live handles of this test; the library checks each before use.
    unsafe {
        assert_eq!(
            sigretire_tracker_hold(rig.tracker, &ticket, &mut hold),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_tracker_pin(rig.tracker, &ticket, &mut pin),
            SIGRETIRE_OK
        );
        let n = SIGRETIRE_ERR_NULL;
        expect(
            sigretire_hold_status(null(), &mut status),
            n,
            "sigretire_hold_status",
        );
        expect(
            sigretire_hold_status(hold, null_mut()),
            n,
            "sigretire_hold_status",
        );
        expect(
            sigretire_hold_known_status(null(), &mut status),
            n,
            "sigretire_hold_known_status",
        );
        expect(
            sigretire_hold_known_status(hold, null_mut()),
            n,
            "sigretire_hold_known_status",
        );
        expect(
            sigretire_hold_timestamps(null(), &mut stamps),
            n,
            "sigretire_hold_timestamps",
        );
        expect(
            sigretire_hold_timestamps(hold, null_mut()),
            n,
            "sigretire_hold_timestamps",
        );
        expect(
            sigretire_hold_signal(null(), &mut handle, null_mut()),
            n,
            "sigretire_hold_signal",
        );
        expect(
            sigretire_hold_signal(hold, null_mut(), null_mut()),
            n,
            "sigretire_hold_signal",
        );
        expect(
            sigretire_hold_clone(null(), &mut copy),
            n,
            "sigretire_hold_clone",
        );
        expect(
            sigretire_hold_clone(hold, null_mut()),
            n,
            "sigretire_hold_clone",
        );
        expect(
            sigretire_hold_release(null_mut()),
            n,
            "sigretire_hold_release",
        );
        expect(
            sigretire_pin_packet_handle(null(), &mut handle),
            n,
            "sigretire_pin_packet_handle",
        );
        expect(
            sigretire_pin_packet_handle(pin, null_mut()),
            n,
            "sigretire_pin_packet_handle",
        );
        expect(
            sigretire_pin_status(null(), &mut status),
            n,
            "sigretire_pin_status",
        );
        expect(
            sigretire_pin_status(pin, null_mut()),
            n,
            "sigretire_pin_status",
        );
        expect(
            sigretire_pin_release(null_mut()),
            n,
            "sigretire_pin_release",
        );
        let mut none_hold = null_mut();
        let mut none_pin = null_mut();
        assert_eq!(sigretire_hold_release(&mut none_hold), SIGRETIRE_OK);
        assert_eq!(sigretire_pin_release(&mut none_pin), SIGRETIRE_OK);

        // Handles that are not live (zeroed memory of their sizes).
        let fake_hold = vec![0u64; size_of::<sigretire_hold>().div_ceil(8)];
        let fake_pin = vec![0u64; size_of::<sigretire_pin>().div_ceil(8)];
        expect(
            sigretire_hold_status(fake_hold.as_ptr().cast(), &mut status),
            SIGRETIRE_ERR_BAD_HANDLE,
            "sigretire_hold_status",
        );
        expect(
            sigretire_pin_status(fake_pin.as_ptr().cast(), &mut status),
            SIGRETIRE_ERR_BAD_HANDLE,
            "sigretire_pin_status",
        );

        // A simulator pin cannot go to a tracker of the hooks backend.
        let hooks = host_hooks();
        let mut consumer = null_mut();
        assert_eq!(
            sigretire_hooks_tracker_create(&hooks.hooks, null(), &mut consumer),
            SIGRETIRE_OK
        );
        let request = sigretire_request::default();
        let mut consumed = sigretire_acquired::default();
        assert_eq!(
            sigretire_tracker_acquire(consumer, &request, &mut consumed),
            SIGRETIRE_OK
        );
        expect(
            sigretire_tracker_attach(consumer, &consumed.ticket, &mut pin),
            SIGRETIRE_ERR_WRONG_BACKEND,
            "sigretire_tracker_attach",
        );
        assert!(!pin.is_null(), "the refused pin stays the caller's");
        assert_eq!(sigretire_pin_status(pin, &mut status), SIGRETIRE_OK);
        assert_eq!(sigretire_tracker_destroy(&mut consumer), SIGRETIRE_OK);

        assert_eq!(sigretire_hold_clone(hold, &mut copy), SIGRETIRE_OK);
        assert_eq!(sigretire_hold_release(&mut hold), SIGRETIRE_OK);
        assert_eq!(sigretire_hold_release(&mut copy), SIGRETIRE_OK);
        assert_eq!(sigretire_pin_release(&mut pin), SIGRETIRE_OK);
    }
    assert!(hold.is_null() && copy.is_null() && pin.is_null());
}

/// Host-memory signals and a fixed read index, as hooks.
struct HostHooks {
    hooks: sigretire_hooks,
    /// From `Box::into_raw`: the hooks keep a pointer to it, which moving a
    /// `Box` would invalidate.
    memory: *mut HostSignals,
}

impl HostHooks {
    fn memory(&self) -> &HostSignals {
        // SAFETY: from `Box::into_raw`, freed only in `Drop`.
        unsafe { &*self.memory }
    }
}

impl Drop for HostHooks {
    fn drop(&mut self) {
        // SAFETY: from `Box::into_raw`, freed once; every tracker using it
        // was destroyed by then (each test destroys its trackers first).
        drop(unsafe { Box::from_raw(self.memory) });
    }
}

struct HostSignals {
    values: Vec<std::sync::atomic::AtomicI64>,
    next: std::sync::atomic::AtomicUsize,
    released: std::sync::atomic::AtomicUsize,
    read_index: std::sync::atomic::AtomicU64,
}

unsafe extern "C" fn allocate(
    user: *mut c_void,
    count: usize,
    _placement: u32,
    signals: *mut u64,
    placements: *mut u32,
) -> i32 {
    // SAFETY: `user` is the `HostSignals` these hooks were made with; the
    // arrays have `count` elements (the hooks' contract).
    // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
    // or live handles of this test; the library checks each before use.
    let memory = unsafe { &*user.cast::<HostSignals>() };
    let first = memory
        .next
        .fetch_add(count, std::sync::atomic::Ordering::Relaxed);
    if first + count > memory.values.len() {
        return 1;
    }
    for i in 0..count {
        // SAFETY: as above.
        unsafe {
            signals.add(i).write((first + i + 1) as u64);
            placements.add(i).write(0);
        }
    }
    0
}

unsafe extern "C" fn load(user: *mut c_void, signal: u64) -> i64 {
    // SAFETY: as in `allocate`.
    let memory = unsafe { &*user.cast::<HostSignals>() };
    memory.values[signal as usize - 1].load(std::sync::atomic::Ordering::Acquire)
}

unsafe extern "C" fn store(user: *mut c_void, signal: u64, value: i64) {
    // SAFETY: as in `allocate`.
    let memory = unsafe { &*user.cast::<HostSignals>() };
    memory.values[signal as usize - 1].store(value, std::sync::atomic::Ordering::Release)
}

unsafe extern "C" fn nothing(_: *mut c_void) {}

unsafe extern "C" fn release(user: *mut c_void) {
    // SAFETY: as in `allocate`.
    let memory = unsafe { &*user.cast::<HostSignals>() };
    memory
        .released
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

unsafe extern "C" fn read_index(queue: *mut c_void) -> u64 {
    // SAFETY: `queue` is the `HostSignals` too.
    let memory = unsafe { &*queue.cast::<HostSignals>() };
    memory.read_index.load(std::sync::atomic::Ordering::Acquire)
}

fn host_hooks() -> HostHooks {
    let memory = Box::new(HostSignals {
        values: (0..256)
            .map(|_| std::sync::atomic::AtomicI64::new(0))
            .collect(),
        next: std::sync::atomic::AtomicUsize::new(0),
        released: std::sync::atomic::AtomicUsize::new(0),
        read_index: std::sync::atomic::AtomicU64::new(0),
    });
    let memory = Box::into_raw(memory);
    let user = memory.cast::<c_void>();
    HostHooks {
        hooks: sigretire_hooks {
            size: size_of::<sigretire_hooks>() as u32,
            user,
            allocate: Some(allocate),
            load: Some(load),
            store: Some(store),
            store_many: None,
            store_fence: Some(nothing),
            hdp_flush: Some(nothing),
            timestamps: None,
            packet_handle: None,
            release: Some(release),
            timestamp_frequency: 0,
            queue_user: user,
            read_index: Some(read_index),
            ring_placement: None,
        },
        memory,
    }
}

#[test]
fn hooks_functions_refuse_missing_hooks_and_give_the_memory_back() {
    let mut tracker = null_mut();
    let rig = Rig::new(1);
    // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
    // or live handles of this test; the library checks each before use.
    unsafe {
        let f = "sigretire_hooks_tracker_create";
        let hooks = host_hooks();
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_hooks_tracker_create(null(), null(), &mut tracker),
            sigretire_hooks_tracker_create(&hooks.hooks, null(), null_mut())
        );
        let missing: [fn(&mut sigretire_hooks); 6] = [
            |h| h.allocate = None,
            |h| h.load = None,
            |h| h.store = None,
            |h| h.store_fence = None,
            |h| h.hdp_flush = None,
            |h| h.read_index = None,
        ];
        for (i, take) in missing.into_iter().enumerate() {
            let mut broken = hooks.hooks;
            take(&mut broken);
            expect(
                sigretire_hooks_tracker_create(&broken, null(), &mut tracker),
                SIGRETIRE_ERR_NULL,
                f,
            );
            assert_eq!(
                hooks
                    .memory()
                    .released
                    .load(std::sync::atomic::Ordering::Relaxed),
                i + 1,
                "a failed creation gives the memory back"
            );
        }
        let bad_config = sigretire_config {
            signals: 7,
            ..{
                let mut c = std::mem::zeroed::<sigretire_config>();
                c.size = size_of::<sigretire_config>() as u32;
                assert_eq!(sigretire_config_default(&mut c), SIGRETIRE_OK);
                c
            }
        };
        expect(
            sigretire_hooks_tracker_create(&hooks.hooks, &bad_config, &mut tracker),
            SIGRETIRE_ERR_INVALID_CONFIG,
            f,
        );
        assert!(tracker.is_null());

        // An allocate hook that runs dry: out of signals, memory given back.
        let small = host_hooks();
        small
            .memory()
            .next
            .store(250, std::sync::atomic::Ordering::Relaxed);
        expect(
            sigretire_hooks_tracker_create(&small.hooks, null(), &mut tracker),
            SIGRETIRE_ERR_OUT_OF_SIGNALS,
            f,
        );
        assert_eq!(
            small
                .memory()
                .released
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );

        let f = "sigretire_hooks_note_queue_change";
        expect(
            sigretire_hooks_note_queue_change(null_mut(), null_mut()),
            SIGRETIRE_ERR_NULL,
            f,
        );
        expect(
            sigretire_hooks_note_queue_change(rig.tracker, hooks.hooks.queue_user),
            SIGRETIRE_ERR_WRONG_BACKEND,
            f,
        );
        // A hooks tracker publishes nothing itself.
        let good = host_hooks();
        assert_eq!(
            sigretire_hooks_tracker_create(&good.hooks, null(), &mut tracker),
            SIGRETIRE_OK
        );
        let mut index = 0;
        expect(
            sigretire_tracker_reserve(tracker, &mut index),
            SIGRETIRE_ERR_UNSUPPORTED,
            "sigretire_tracker_reserve",
        );
        let request = sigretire_request::default();
        let work = kernel();
        let mut acquired = sigretire_acquired::default();
        expect(
            sigretire_tracker_submit(tracker, &request, &work, &mut acquired),
            SIGRETIRE_ERR_UNSUPPORTED,
            "sigretire_tracker_submit",
        );
        // Other backends' functions refuse it.
        expect(
            sigretire_sim_note_queue_change(tracker, rig.sim, 0),
            SIGRETIRE_ERR_WRONG_BACKEND,
            "sigretire_sim_note_queue_change",
        );
        expect(
            sigretire_rocr_report_queue_error(tracker, 1),
            SIGRETIRE_ERR_WRONG_BACKEND,
            "sigretire_rocr_report_queue_error",
        );
        assert_eq!(
            sigretire_hooks_note_queue_change(tracker, good.hooks.user),
            SIGRETIRE_OK
        );
        assert_eq!(sigretire_tracker_destroy(&mut tracker), SIGRETIRE_OK);
        assert_eq!(
            good.memory()
                .released
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
    }
}

#[test]
fn a_hooks_tracker_refuses_a_null_queue() {
    let hooks = host_hooks();
    let mut tracker = null_mut();
    // SAFETY: C ABI calls with locals and live handles of this test, or
    // NULL under test; the library checks each before use.
    unsafe {
        let mut no_queue = hooks.hooks;
        no_queue.queue_user = null_mut();
        expect(
            sigretire_hooks_tracker_create(&no_queue, null(), &mut tracker),
            SIGRETIRE_ERR_NULL,
            "sigretire_hooks_tracker_create",
        );
        assert!(tracker.is_null());
        assert_eq!(
            hooks
                .memory()
                .released
                .load(std::sync::atomic::Ordering::Relaxed),
            1,
            "a refused creation gives the memory back"
        );
        assert_eq!(
            sigretire_hooks_tracker_create(&hooks.hooks, null(), &mut tracker),
            SIGRETIRE_OK
        );
        let mut generation = 0;
        assert_eq!(
            sigretire_tracker_generation(tracker, &mut generation),
            SIGRETIRE_OK
        );
        expect(
            sigretire_hooks_note_queue_change(tracker, null_mut()),
            SIGRETIRE_ERR_NULL,
            "sigretire_hooks_note_queue_change",
        );
        let mut after = 0;
        assert_eq!(
            sigretire_tracker_generation(tracker, &mut after),
            SIGRETIRE_OK
        );
        assert_eq!(after, generation, "a refused queue change changes nothing");
        assert_eq!(sigretire_tracker_destroy(&mut tracker), SIGRETIRE_OK);
    }
}

#[test]
#[cfg_attr(miri, ignore = "loads a shared library, which Miri cannot")]
fn rocr_functions_refuse_bad_arguments_without_rocm() {
    let rig = Rig::new(1);
    let mut rocr = null_mut();
    let mut count = 0usize;
    let mut tracker = null_mut();
    // Never dereferenced: every call below fails before it would be.
    let not_a_queue = 0x1000usize as *mut c_void;
    // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
    // or live handles of this test; the library checks each before use.
    unsafe {
        expect(
            sigretire_rocr_adopt_options_default(null_mut()),
            SIGRETIRE_ERR_NULL,
            "sigretire_rocr_adopt_options_default",
        );
        let f = "sigretire_rocr_open";
        expect(
            sigretire_rocr_open(null(), null_mut()),
            SIGRETIRE_ERR_NULL,
            f,
        );
        expect(
            sigretire_rocr_open(c"/nonexistent/libhsa-runtime64.so.1".as_ptr(), &mut rocr),
            SIGRETIRE_ERR_LOAD,
            f,
        );
        assert!(rocr.is_null());
        let f = "sigretire_rocr_close";
        expect(sigretire_rocr_close(null_mut()), SIGRETIRE_ERR_NULL, f);
        expect(sigretire_rocr_close(&mut rocr), SIGRETIRE_OK, f);
        let f = "sigretire_rocr_gpu_count";
        expect(
            sigretire_rocr_gpu_count(null(), &mut count),
            SIGRETIRE_ERR_NULL,
            f,
        );
        let f = "sigretire_rocr_tracker_adopt";
        expect(
            sigretire_rocr_tracker_adopt(null(), 0, not_a_queue, null(), null(), &mut tracker),
            SIGRETIRE_ERR_NULL,
            f,
        );
        let fake = vec![0u64; size_of::<sigretire_rocr>().div_ceil(8)];
        expect(
            sigretire_rocr_tracker_adopt(
                fake.as_ptr().cast(),
                0,
                not_a_queue,
                null(),
                null(),
                &mut tracker,
            ),
            SIGRETIRE_ERR_BAD_HANDLE,
            f,
        );
        expect(
            sigretire_rocr_tracker_adopt(
                fake.as_ptr().cast(),
                0,
                null_mut(),
                null(),
                null(),
                &mut tracker,
            ),
            SIGRETIRE_ERR_NULL,
            f,
        );
        let bad_options = sigretire_rocr_adopt_options {
            size: size_of::<sigretire_rocr_adopt_options>() as u32,
            flags: 1 << 9,
            drain_timeout_ns: 0,
        };
        expect(
            sigretire_rocr_tracker_adopt(
                fake.as_ptr().cast(),
                0,
                not_a_queue,
                &bad_options,
                null(),
                &mut tracker,
            ),
            SIGRETIRE_ERR_INVALID_ARGUMENT,
            f,
        );
        let f = "sigretire_rocr_note_queue_change";
        expect_each!(
            SIGRETIRE_ERR_NULL,
            f,
            sigretire_rocr_note_queue_change(null_mut(), not_a_queue, null()),
            sigretire_rocr_note_queue_change(rig.tracker, null_mut(), null())
        );
        expect(
            sigretire_rocr_note_queue_change(rig.tracker, not_a_queue, null()),
            SIGRETIRE_ERR_WRONG_BACKEND,
            f,
        );
        let f = "sigretire_rocr_report_queue_error";
        expect(
            sigretire_rocr_report_queue_error(null_mut(), 1),
            SIGRETIRE_ERR_NULL,
            f,
        );
        expect(
            sigretire_rocr_report_queue_error(rig.tracker, 1),
            SIGRETIRE_ERR_WRONG_BACKEND,
            f,
        );
    }
    assert!(tracker.is_null());
}

#[test]
fn stale_tickets_keep_their_answers_after_their_records_are_dropped() {
    let config = {
        let mut c = sigretire_config {
            size: size_of::<sigretire_config>() as u32,
            initial_size: 0,
            growth_limit: 0,
            refill_batch: 0,
            timing_batch: 0,
            backpressure_window: 0,
            probe_interval: 0,
            stamp_history: 0,
            signals: 0,
        };
        // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
        // or live handles of this test; the library checks each before use.
        unsafe { sigretire_config_default(&mut c) };
        c.initial_size = 4;
        c.growth_limit = 1;
        c
    };
    let rig = Rig::with_config(1, Some(config));
    let t = rig.tracker;
    let first = rig
        .submit(sigretire_purpose::SIGRETIRE_PURPOSE_COMPLETION)
        .ticket;
    // A use whose submission failed before its packet was published.
    let mut index = 0u64;
    let mut acquired = sigretire_acquired::default();
    // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
    // or live handles of this test; the library checks each before use.
    let failed = unsafe {
        assert_eq!(sigretire_tracker_reserve(t, &mut index), SIGRETIRE_OK);
        let request = sigretire_request {
            aql_index: index,
            flags: SIGRETIRE_REQUEST_BARRIER | SIGRETIRE_REQUEST_TIMED,
            ..Default::default()
        };
        assert_eq!(
            sigretire_tracker_acquire(t, &request, &mut acquired),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_tracker_fail_submission(t, &acquired.ticket, 0),
            SIGRETIRE_OK
        );
        let filler = sigretire_work {
            kind: sigretire_work_kind::SIGRETIRE_WORK_MARKER as u32,
            ..Default::default()
        };
        assert_eq!(
            sigretire_tracker_publish_unsignalled(t, index, 0, &filler),
            SIGRETIRE_OK
        );
        acquired.ticket
    };
    assert_eq!(
        failed.flags & SIGRETIRE_TICKET_TIMED,
        SIGRETIRE_TICKET_TIMED
    );
    for _ in 0..50 {
        rig.submit(sigretire_purpose::SIGRETIRE_PURPOSE_COMPLETION);
        rig.run();
        rig.poll();
    }
    // Both records are long gone; their tickets still answer.
    assert_eq!(rig.query(&first), (SIGRETIRE_OK, SIGRETIRE_USE_COMPLETE));
    assert_eq!(rig.query(&failed), (SIGRETIRE_OK, SIGRETIRE_USE_FAILED));
    let mut status = SIGRETIRE_USE_UNKNOWN;
    let mut hold = null_mut();
    let mut pin = null_mut();
    let mut stamps = sigretire_timestamps {
        start: 9,
        end: 9,
        state: SIGRETIRE_TIMESTAMPS_AVAILABLE,
        ..Default::default()
    };
    let work = kernel();
    // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
    // or live handles of this test; the library checks each before use.
    unsafe {
        assert_eq!(
            sigretire_tracker_wait(t, &first, 0, null(), &mut status),
            SIGRETIRE_OK
        );
        assert_eq!(status, SIGRETIRE_USE_COMPLETE);
        assert_eq!(
            sigretire_tracker_known_status(t, &failed, &mut status),
            SIGRETIRE_OK
        );
        assert_eq!(status, SIGRETIRE_USE_FAILED);
        assert_eq!(sigretire_tracker_hold(t, &first, &mut hold), SIGRETIRE_OK);
        assert!(hold.is_null(), "nothing left to hold");
        assert_eq!(sigretire_tracker_pin(t, &first, &mut pin), SIGRETIRE_OK);
        assert!(pin.is_null(), "complete: no dependency");
        expect(
            sigretire_tracker_pin(t, &failed, &mut pin),
            SIGRETIRE_ERR_USE_FAILED,
            "sigretire_tracker_pin",
        );
        assert_eq!(
            sigretire_tracker_timestamps(t, &first, &mut stamps),
            SIGRETIRE_OK
        );
        assert_eq!(stamps, sigretire_timestamps::default(), "not timed");
        assert_eq!(
            sigretire_tracker_timestamps(t, &failed, &mut stamps),
            SIGRETIRE_OK
        );
        assert_eq!(
            stamps.state, SIGRETIRE_TIMESTAMPS_NONE,
            "failed: never stamped"
        );
        expect(
            sigretire_tracker_fail_submission(t, &first, 0),
            SIGRETIRE_ERR_INVALID_STATE,
            "sigretire_tracker_fail_submission",
        );
        expect(
            sigretire_tracker_publish(t, &first, 0, &work),
            SIGRETIRE_ERR_INVALID_STATE,
            "sigretire_tracker_publish",
        );
    }
    let mut violations = 1;
    // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
    // or live handles of this test; the library checks each before use.
    unsafe {
        assert_eq!(
            sigretire_sim_violations(rig.sim, &mut violations),
            SIGRETIRE_OK
        )
    };
    assert_eq!(violations, 0);
}

/// Eight readable, zeroed bytes whose next byte is in a page that is not
/// readable: a call that reads past them faults, so a test that passes
/// them survives only if the library reads nothing past what it was given.
struct GuardedWord {
    base: *mut c_void,
    length: usize,
}

impl GuardedWord {
    fn new() -> Self {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap();
        let length = 2 * page;
        // SAFETY: an anonymous private mapping of two pages; the second is
        // then made inaccessible. Both calls only touch that new mapping.
        let base = unsafe {
            let base = libc::mmap(
                null_mut(),
                length,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(base, libc::MAP_FAILED);
            assert_eq!(
                libc::mprotect(base.cast::<u8>().add(page).cast(), page, libc::PROT_NONE),
                0
            );
            base
        };
        Self { base, length }
    }

    /// The word: the last 8 bytes of the readable page (zeroed by mmap).
    fn word<T>(&self) -> *mut T {
        self.tail(8)
    }

    /// The last `bytes` bytes of the readable page (zeroed by mmap), a
    /// multiple of 8 so that they are aligned for any of the ABI's structs.
    fn tail<T>(&self, bytes: usize) -> *mut T {
        assert!(bytes.is_multiple_of(8) && bytes <= self.length / 2);
        self.base
            .cast::<u8>()
            .wrapping_add(self.length / 2 - bytes)
            .cast()
    }
}

impl Drop for GuardedWord {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.base, self.length) };
    }
}

#[test]
#[cfg_attr(miri, ignore = "maps memory with mmap, which Miri does not model")]
fn a_handle_is_checked_without_reading_the_memory_passed() {
    let rig = Rig::new(1);
    let ticket = rig
        .submit(sigretire_purpose::SIGRETIRE_PURPOSE_EVENT)
        .ticket;
    let guarded = GuardedWord::new();
    let mut hold = null_mut();
    let mut pin = null_mut();
    let mut status = SIGRETIRE_USE_UNKNOWN;
    let mut n = 0usize;
    let mut handle = 0u64;
    let mut proved = false;
    // SAFETY: C ABI calls with locals and live handles of this test, or
    // pointers that are not live handles (under test: the library must
    // refuse them without reading them); the guarded word is 8 readable
    // bytes.
    unsafe {
        assert_eq!(
            sigretire_tracker_hold(rig.tracker, &ticket, &mut hold),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_tracker_pin(rig.tracker, &ticket, &mut pin),
            SIGRETIRE_OK
        );
        let bad = SIGRETIRE_ERR_BAD_HANDLE;
        // Eight bytes at the end of readable memory, as every kind of handle:
        // reading past them would fault.
        let word = guarded.word::<u8>();
        expect(
            sigretire_tracker_poll(word.cast(), &mut n),
            bad,
            "sigretire_tracker_poll",
        );
        expect(
            sigretire_tracker_probe(word.cast(), &mut proved),
            bad,
            "sigretire_tracker_probe",
        );
        expect(
            sigretire_hold_status(word.cast(), &mut status),
            bad,
            "sigretire_hold_status",
        );
        expect(
            sigretire_pin_status(word.cast(), &mut status),
            bad,
            "sigretire_pin_status",
        );
        expect(
            sigretire_sim_run_until_idle(word.cast()),
            bad,
            "sigretire_sim_run_until_idle",
        );
        expect(
            sigretire_rocr_gpu_count(word.cast(), &mut n),
            bad,
            "sigretire_rocr_gpu_count",
        );
        let mut fake_tracker = word.cast::<sigretire_tracker>();
        expect(
            sigretire_tracker_destroy(&mut fake_tracker),
            bad,
            "sigretire_tracker_destroy",
        );
        let mut fake_hold = word.cast::<sigretire_hold>();
        expect(
            sigretire_hold_release(&mut fake_hold),
            bad,
            "sigretire_hold_release",
        );
        let mut fake_pin = word.cast::<sigretire_pin>();
        expect(
            sigretire_tracker_attach(rig.tracker, &ticket, &mut fake_pin),
            bad,
            "sigretire_tracker_attach",
        );
        expect(
            sigretire_pin_release(&mut fake_pin),
            bad,
            "sigretire_pin_release",
        );
        let mut fake_sim = word.cast::<sigretire_sim>();
        expect(
            sigretire_sim_destroy(&mut fake_sim),
            bad,
            "sigretire_sim_destroy",
        );
        let mut fake_rocr = word.cast::<sigretire_rocr>();
        expect(
            sigretire_rocr_close(&mut fake_rocr),
            bad,
            "sigretire_rocr_close",
        );

        // Live handles of one kind passed as another.
        expect(
            sigretire_tracker_poll(hold.cast(), &mut n),
            bad,
            "sigretire_tracker_poll",
        );
        expect(
            sigretire_tracker_poll(pin.cast(), &mut n),
            bad,
            "sigretire_tracker_poll",
        );
        expect(
            sigretire_hold_status(pin.cast(), &mut status),
            bad,
            "sigretire_hold_status",
        );
        expect(
            sigretire_pin_packet_handle(hold.cast(), &mut handle),
            bad,
            "sigretire_pin_packet_handle",
        );
        expect(
            sigretire_sim_run_until_idle(rig.tracker.cast()),
            bad,
            "sigretire_sim_run_until_idle",
        );
        expect(
            sigretire_hold_status(rig.sim.cast(), &mut status),
            bad,
            "sigretire_hold_status",
        );

        // A released handle is no longer live, and is not read either.
        let stale = hold;
        assert_eq!(sigretire_hold_release(&mut hold), SIGRETIRE_OK);
        expect(
            sigretire_hold_status(stale, &mut status),
            bad,
            "sigretire_hold_status",
        );
        let mut stale_slot = stale;
        expect(
            sigretire_hold_release(&mut stale_slot),
            bad,
            "sigretire_hold_release",
        );
        assert_eq!(sigretire_pin_release(&mut pin), SIGRETIRE_OK);
    }
}

/// The sizes a caller may wrongly declare for a struct of `size` bytes:
/// unset, smaller (an older or made-up layout), larger (a newer header).
fn wrong_sizes(size: usize) -> [u32; 4] {
    let size = size as u32;
    [0, 4, size - 8, size + 8]
}

#[test]
fn a_struct_of_another_size_is_refused_before_anything_happens() {
    let rig = Rig::new(2);
    let ticket = rig
        .submit(sigretire_purpose::SIGRETIRE_PURPOSE_EVENT)
        .ticket;
    let uses = rig.stats().uses;
    let e = SIGRETIRE_ERR_STRUCT_SIZE;
    let mut hold = null_mut();
    let mut sim = null_mut();
    let mut tracker = null_mut();
    let mut status = SIGRETIRE_USE_UNKNOWN;
    let fake = 0x1000usize as *mut c_void; // never read: refused first
    // SAFETY: C ABI calls with locals, live handles of this test, NULL, or
    // pointers the library refuses before it reads them (under test).
    unsafe {
        assert_eq!(
            sigretire_tracker_hold(rig.tracker, &ticket, &mut hold),
            SIGRETIRE_OK
        );
        for (i, wrong) in wrong_sizes(size_of::<sigretire_request>())
            .into_iter()
            .enumerate()
        {
            let request = sigretire_request {
                size: wrong,
                ..Default::default()
            };
            let work = sigretire_work {
                size: wrong_sizes(size_of::<sigretire_work>())[i],
                ..kernel()
            };
            let mut acquired = sigretire_acquired {
                size: wrong_sizes(size_of::<sigretire_acquired>())[i],
                ..Default::default()
            };
            let mut good_acquired = sigretire_acquired::default();
            let untouched = acquired;
            expect_each!(
                e,
                "sigretire_tracker_acquire",
                sigretire_tracker_acquire(rig.tracker, &request, &mut good_acquired),
                sigretire_tracker_acquire(
                    rig.tracker,
                    &sigretire_request::default(),
                    &mut acquired
                ),
            );
            expect_each!(
                e,
                "sigretire_tracker_submit",
                sigretire_tracker_submit(rig.tracker, &request, &kernel(), &mut good_acquired),
                sigretire_tracker_submit(
                    rig.tracker,
                    &sigretire_request::default(),
                    &work,
                    &mut good_acquired
                ),
                sigretire_tracker_submit(
                    rig.tracker,
                    &sigretire_request::default(),
                    &kernel(),
                    &mut acquired
                ),
            );
            assert_eq!(
                acquired, untouched,
                "an out struct of another size is not written"
            );
            expect(
                sigretire_tracker_publish(rig.tracker, &ticket, 0, &work),
                e,
                "sigretire_tracker_publish",
            );
            expect(
                sigretire_tracker_publish_unsignalled(rig.tracker, 0, 0, &work),
                e,
                "sigretire_tracker_publish_unsignalled",
            );
            let policy = sigretire_wait_policy {
                size: wrong_sizes(size_of::<sigretire_wait_policy>())[i],
                ..Default::default()
            };
            expect(
                sigretire_tracker_wait(rig.tracker, &ticket, 0, &policy, &mut status),
                e,
                "sigretire_tracker_wait",
            );
            let mut policy_out = policy;
            expect_each!(
                e,
                "sigretire_wait_policy_",
                sigretire_wait_policy_spin(&mut policy_out),
                sigretire_wait_policy_blocking(&mut policy_out),
                sigretire_wait_policy_hybrid(&mut policy_out, 0),
            );
            assert_eq!(policy_out, policy, "not written");
            let mut stamps = sigretire_timestamps {
                size: wrong_sizes(size_of::<sigretire_timestamps>())[i],
                ..Default::default()
            };
            expect(
                sigretire_tracker_timestamps(rig.tracker, &ticket, &mut stamps),
                e,
                "sigretire_tracker_timestamps",
            );
            expect(
                sigretire_hold_timestamps(hold, &mut stamps),
                e,
                "sigretire_hold_timestamps",
            );
            let mut stats = sigretire_stats {
                size: wrong_sizes(size_of::<sigretire_stats>())[i],
                ..Default::default()
            };
            expect(
                sigretire_tracker_stats(rig.tracker, &mut stats),
                e,
                "sigretire_tracker_stats",
            );
            let mut census = sigretire_census {
                size: wrong_sizes(size_of::<sigretire_census>())[i],
                ..Default::default()
            };
            expect(
                sigretire_tracker_census(rig.tracker, &mut census),
                e,
                "sigretire_tracker_census",
            );
            let mut config = std::mem::zeroed::<sigretire_config>();
            config.size = wrong_sizes(size_of::<sigretire_config>())[i];
            expect(
                sigretire_config_default(&mut config),
                e,
                "sigretire_config_default",
            );
            expect(
                sigretire_sim_tracker_create(rig.sim, 1, &config, &mut tracker),
                e,
                "sigretire_sim_tracker_create",
            );
            let mut options = sigretire_sim_options {
                size: wrong_sizes(size_of::<sigretire_sim_options>())[i],
                queues: 1,
                queue_size: 0,
                flags: 0,
                costs: 0,
            };
            expect(
                sigretire_sim_options_default(&mut options),
                e,
                "sigretire_sim_options_default",
            );
            expect(
                sigretire_sim_create(&options, &mut sim),
                e,
                "sigretire_sim_create",
            );
            let mut adopt = sigretire_rocr_adopt_options {
                size: wrong_sizes(size_of::<sigretire_rocr_adopt_options>())[i],
                flags: 0,
                drain_timeout_ns: 0,
            };
            expect(
                sigretire_rocr_adopt_options_default(&mut adopt),
                e,
                "sigretire_rocr_adopt_options_default",
            );
            expect(
                sigretire_rocr_tracker_adopt(fake.cast(), 0, fake, &adopt, null(), &mut tracker),
                e,
                "sigretire_rocr_tracker_adopt",
            );
            expect(
                sigretire_rocr_tracker_adopt(fake.cast(), 0, fake, null(), &config, &mut tracker),
                e,
                "sigretire_rocr_tracker_adopt",
            );
            expect(
                sigretire_rocr_note_queue_change(rig.tracker, fake, &adopt),
                e,
                "sigretire_rocr_note_queue_change",
            );
            let hooks = host_hooks();
            let mut wrong_hooks = hooks.hooks;
            wrong_hooks.size = wrong_sizes(size_of::<sigretire_hooks>())[i];
            expect(
                sigretire_hooks_tracker_create(&wrong_hooks, null(), &mut tracker),
                e,
                "sigretire_hooks_tracker_create",
            );
            expect(
                sigretire_hooks_tracker_create(&hooks.hooks, &config, &mut tracker),
                e,
                "sigretire_hooks_tracker_create",
            );
            assert!(tracker.is_null() && sim.is_null(), "nothing was made");
        }
        assert_eq!(sigretire_hold_release(&mut hold), SIGRETIRE_OK);
    }
    assert_eq!(rig.stats().uses, uses, "no call went ahead");
}

#[test]
#[cfg_attr(miri, ignore = "maps memory with mmap, which Miri does not model")]
fn a_struct_declared_smaller_is_not_read_past_its_size() {
    let rig = Rig::new(1);
    let guarded = GuardedWord::new();
    let word = guarded.word::<u32>();
    let mut acquired = sigretire_acquired::default();
    // SAFETY: the guarded word is 8 readable, writable bytes; the calls get
    // it as a struct whose size field (its first 4 bytes) says 8 bytes, so
    // the library may read those only; other pointers are locals and live
    // handles.
    unsafe {
        word.write(8);
        expect(
            sigretire_tracker_acquire(rig.tracker, word.cast(), &mut acquired),
            SIGRETIRE_ERR_STRUCT_SIZE,
            "sigretire_tracker_acquire",
        );
        expect(
            sigretire_tracker_stats(rig.tracker, word.cast()),
            SIGRETIRE_ERR_STRUCT_SIZE,
            "sigretire_tracker_stats",
        );
        expect(
            sigretire_sim_create(word.cast(), &mut null_mut()),
            SIGRETIRE_ERR_STRUCT_SIZE,
            "sigretire_sim_create",
        );
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "the queue layer's completion thread ends after the test's last handle goes, which \
              Miri reports as a thread left running; tests/streams.rs runs the same calls"
)]
fn queue_layer_functions_refuse_null_pointers_and_bad_handles() {
    let rig = Rig::new(1);
    let (mut device, mut stream, mut event) = (null_mut(), null_mut(), null_mut());
    let mut status = SIGRETIRE_USE_UNKNOWN;
    let (mut word, mut failed) = (0u64, false);
    let null_refused = SIGRETIRE_ERR_NULL;
    let bad = SIGRETIRE_ERR_BAD_HANDLE;
    let queue: *mut c_void = (&raw mut word).cast();
    // SAFETY: C ABI calls whose pointers are NULL (under test), locals,
    // or live handles of this test; the library checks each before use,
    // and refuses a pointer that is not a live handle without reading it.
    unsafe {
        expect_each!(
            null_refused,
            "sigretire_sim_device_create",
            sigretire_sim_device_create(rig.sim, null(), null(), null(), null_mut()),
            sigretire_sim_device_create(null(), null(), null(), null(), &mut device),
        );
        assert_eq!(
            sigretire_sim_device_create(rig.sim, null(), null(), null(), &mut device),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_device_default_stream(device, &mut stream),
            SIGRETIRE_OK
        );
        assert_eq!(sigretire_event_record(stream, 0, &mut event), SIGRETIRE_OK);
        // Handles of another kind, and a word that is no handle at all.
        let fake_device: *const sigretire_device = (&raw const word).cast();
        expect_each!(
            bad,
            "sigretire_sim_device_create",
            sigretire_sim_device_create(device.cast(), null(), null(), null(), &mut device),
        );
        let before = device;
        expect(
            sigretire_device_stream_create(fake_device, null(), &mut stream),
            bad,
            "sigretire_device_stream_create",
        );
        assert_eq!(device, before, "nothing written by a failed call");
        expect_each!(
            null_refused,
            "sigretire_device_default_stream",
            sigretire_device_default_stream(device, null_mut()),
            sigretire_device_default_stream(null(), &mut stream),
        );
        expect(
            sigretire_device_synchronize(stream.cast()),
            bad,
            "sigretire_device_synchronize",
        );
        expect(
            sigretire_device_synchronize_timeout(event.cast(), 0),
            bad,
            "sigretire_device_synchronize_timeout",
        );
        expect(
            sigretire_device_set_error(fake_device, null()),
            bad,
            "sigretire_device_set_error",
        );
        expect(
            sigretire_rocr_stream_adopt(
                device,
                null_mut(),
                None,
                null_mut(),
                null(),
                null(),
                &mut stream,
            ),
            null_refused,
            "sigretire_rocr_stream_adopt",
        );
        expect(
            sigretire_rocr_stream_adopt(
                device,
                queue,
                None,
                null_mut(),
                null(),
                null(),
                &mut stream,
            ),
            SIGRETIRE_ERR_WRONG_BACKEND,
            "sigretire_rocr_stream_adopt",
        );
        expect(
            sigretire_rocr_device_adopt(
                null(),
                0,
                queue,
                None,
                null_mut(),
                null(),
                null(),
                null(),
                null(),
                &mut device,
            ),
            null_refused,
            "sigretire_rocr_device_adopt",
        );
        expect_each!(
            bad,
            "sigretire_stream_launch",
            sigretire_stream_launch(device.cast(), 0),
            sigretire_stream_launch(event.cast(), 0),
        );
        expect(
            sigretire_stream_marker(null()),
            null_refused,
            "sigretire_stream_marker",
        );
        expect_each!(
            null_refused,
            "sigretire_stream_query",
            sigretire_stream_query(stream, null_mut()),
            sigretire_stream_query(null(), &mut status),
        );
        expect(
            sigretire_stream_synchronize(event.cast()),
            bad,
            "sigretire_stream_synchronize",
        );
        expect(
            sigretire_stream_synchronize_timeout(device.cast(), 0),
            bad,
            "sigretire_stream_synchronize_timeout",
        );
        expect_each!(
            bad,
            "sigretire_stream_wait_event",
            sigretire_stream_wait_event(stream, stream.cast()),
            sigretire_stream_wait_event(event.cast(), event),
        );
        expect(
            sigretire_stream_has_failed(stream, null_mut()),
            null_refused,
            "sigretire_stream_has_failed",
        );
        expect(
            sigretire_stream_id(device.cast(), &mut word),
            bad,
            "sigretire_stream_id",
        );
        expect_each!(
            null_refused,
            "sigretire_event_record",
            sigretire_event_record(stream, 0, null_mut()),
            sigretire_event_record(null(), 0, &mut event),
        );
        expect(
            sigretire_event_query(stream.cast(), &mut status),
            bad,
            "sigretire_event_query",
        );
        expect(
            sigretire_event_synchronize(device.cast()),
            bad,
            "sigretire_event_synchronize",
        );
        expect(
            sigretire_event_synchronize_timeout(null(), 0),
            null_refused,
            "sigretire_event_synchronize_timeout",
        );
        expect_each!(
            null_refused,
            "sigretire_event_elapsed_ns",
            sigretire_event_elapsed_ns(event, event, null_mut()),
            sigretire_event_elapsed_ns(event, null(), &mut word),
        );
        expect(
            sigretire_sim_fail_stream(event.cast()),
            bad,
            "sigretire_sim_fail_stream",
        );
        expect_each!(
            null_refused,
            "sigretire_sim_register_gated_kernel",
            sigretire_sim_register_gated_kernel(rig.sim, null_mut()),
            sigretire_sim_register_gated_kernel(null(), &mut word),
        );
        expect(
            sigretire_sim_open_gate(rig.sim, 12345),
            SIGRETIRE_ERR_INVALID_ARGUMENT,
            "sigretire_sim_open_gate",
        );
        expect_each!(
            null_refused,
            "sigretire_device_options_default",
            sigretire_device_options_default(null_mut()),
        );
        expect_each!(
            null_refused,
            "sigretire_stream_options_default",
            sigretire_stream_options_default(null_mut()),
        );
        // Destroying: NULL variables, a stale handle, handles of another kind.
        let mut wrong_kind: *mut sigretire_event = stream.cast();
        expect(
            sigretire_event_destroy(&mut wrong_kind),
            bad,
            "sigretire_event_destroy",
        );
        expect(
            sigretire_event_destroy(null_mut()),
            null_refused,
            "sigretire_event_destroy",
        );
        expect(
            sigretire_stream_destroy(null_mut()),
            null_refused,
            "sigretire_stream_destroy",
        );
        expect(
            sigretire_device_destroy(null_mut()),
            null_refused,
            "sigretire_device_destroy",
        );
        let mut stale = device;
        assert_eq!(sigretire_device_destroy(&mut device), SIGRETIRE_OK);
        expect(
            sigretire_device_destroy(&mut stale),
            bad,
            "sigretire_device_destroy",
        );
        // The stream and the event still work, their device gone.
        assert_eq!(sigretire_stream_query(stream, &mut status), SIGRETIRE_OK);
        assert_eq!(
            sigretire_stream_has_failed(stream, &mut failed),
            SIGRETIRE_OK
        );
        assert!(!failed, "no failed call failed the stream");
        assert_eq!(sigretire_event_destroy(&mut event), SIGRETIRE_OK);
        assert_eq!(sigretire_stream_destroy(&mut stream), SIGRETIRE_OK);
    }
}

// The hybrid wait policy, and the wait policy of an earlier header (40
// bytes, before the hybrid fields were appended).

/// The size of `sigretire_wait_policy` in an earlier header: where the
/// hybrid fields begin.
const EARLIER_WAIT_POLICY: u32 = std::mem::offset_of!(sigretire_wait_policy, hybrid) as u32;

/// Nanoseconds of `d`.
fn ns(d: std::time::Duration) -> u64 {
    d.as_nanos() as u64
}

/// Waits for `ticket` with `policy` on another thread while this one lets
/// 20 ms pass and then runs the simulator (the "GPU" finishes then): what
/// the wait answered, and how long it took.
fn wait_while_the_gpu_runs(
    rig: &Rig,
    ticket: sigretire_ticket,
    policy: sigretire_wait_policy,
) -> (sigretire_status, sigretire_use_status, std::time::Duration) {
    struct Tracker(*mut sigretire_tracker);
    // SAFETY: a tracker handle may be used from any thread (the C ABI's
    // contract; sigretire_tracker_wait takes no tracker lock), and it
    // outlives the thread (joined in the scope below).
    unsafe impl Send for Tracker {}
    let tracker = Tracker(rig.tracker);
    std::thread::scope(|scope| {
        let waiter = scope.spawn(move || {
            let tracker = tracker;
            let mut status = SIGRETIRE_USE_UNKNOWN;
            let start = std::time::Instant::now();
            // SAFETY: a live tracker handle (see `Tracker`) and locals.
            let result = unsafe {
                sigretire_tracker_wait(tracker.0, &ticket, 60_000_000_000, &policy, &mut status)
            };
            (result, status, start.elapsed())
        });
        std::thread::sleep(std::time::Duration::from_millis(20));
        rig.run();
        waiter.join().unwrap()
    })
}

#[test]
fn a_hybrid_wait_policy_reaches_the_wait_and_its_fields_round_trip() {
    use ::sigretire_tracker::wait::Hybrid;
    let defaults = Hybrid::new();
    let mut blocking = sigretire_wait_policy::default();
    let mut policy = sigretire_wait_policy::default();
    // SAFETY: locals with their sizes set.
    unsafe {
        assert_eq!(sigretire_wait_policy_blocking(&mut blocking), SIGRETIRE_OK);
        assert_eq!(sigretire_wait_policy_hybrid(&mut policy, 0), SIGRETIRE_OK);
    }
    assert_eq!(blocking.hybrid, 0);
    let hybrid = sigretire_wait_policy {
        size: size_of::<sigretire_wait_policy>() as u32,
        hybrid: 1,
        hybrid_expected_ns: 0, // learned from the tracker's recent waits
        hybrid_early_ns: ns(defaults.early),
        hybrid_late_ns: ns(defaults.late),
        hybrid_recheck_ns: ns(defaults.recheck),
        hybrid_min_guess_ns: ns(defaults.min_guess),
        ..blocking
    };
    assert_eq!(policy, hybrid, "the blocking policy, hybrid, no guess");
    // SAFETY: a local with its size set.
    unsafe {
        assert_eq!(
            sigretire_wait_policy_hybrid(&mut policy, 2_000_000),
            SIGRETIRE_OK
        )
    };
    assert_eq!(
        policy,
        sigretire_wait_policy {
            hybrid_expected_ns: 2_000_000,
            ..hybrid
        }
    );

    // A use already complete: the first look answers.
    let rig = Rig::new(1);
    let ticket = rig
        .submit(sigretire_purpose::SIGRETIRE_PURPOSE_CPU_SYNC)
        .ticket;
    rig.run();
    let mut status = SIGRETIRE_USE_UNKNOWN;
    // SAFETY: a live tracker handle and locals.
    let result = unsafe {
        sigretire_tracker_wait(rig.tracker, &ticket, 1_000_000_000, &policy, &mut status)
    };
    assert_eq!((result, status), (SIGRETIRE_OK, SIGRETIRE_USE_COMPLETE));

    // The hybrid fields reach the wait: guessing 10 s and looking every
    // 300 ms while it dozes, a wait whose work ends after 20 ms answers at
    // its first recheck, not before (a wait that is not hybrid looks
    // every 200 us at most by then). A lower bound only: never flaky.
    let recheck = std::time::Duration::from_millis(300);
    let dozing = sigretire_wait_policy {
        hybrid_expected_ns: 10_000_000_000,
        hybrid_recheck_ns: ns(recheck),
        ..policy
    };
    let ticket = rig
        .submit(sigretire_purpose::SIGRETIRE_PURPOSE_CPU_SYNC)
        .ticket;
    let (result, status, waited) = wait_while_the_gpu_runs(&rig, ticket, dozing);
    assert_eq!((result, status), (SIGRETIRE_OK, SIGRETIRE_USE_COMPLETE));
    assert!(
        waited >= recheck,
        "dozed {waited:?}, not the recheck's {recheck:?}"
    );
}

#[test]
fn a_wait_policy_of_an_earlier_header_is_taken_and_is_not_hybrid() {
    assert_eq!(EARLIER_WAIT_POLICY, 40);
    // The caller's 40 bytes, and past them bytes that would make a hybrid
    // wait dozing 10 s at a time, were the library to read them.
    let dozing = sigretire_wait_policy {
        size: EARLIER_WAIT_POLICY,
        hybrid: 1,
        hybrid_expected_ns: 100_000_000_000,
        hybrid_recheck_ns: 10_000_000_000,
        ..Default::default()
    };
    let mut policy = dozing;
    // SAFETY: a local whose size field says fewer bytes than it has.
    unsafe { assert_eq!(sigretire_wait_policy_blocking(&mut policy), SIGRETIRE_OK) };
    let mut blocking = sigretire_wait_policy::default();
    // SAFETY: a local with its size set.
    unsafe { assert_eq!(sigretire_wait_policy_blocking(&mut blocking), SIGRETIRE_OK) };
    assert_eq!(
        policy,
        sigretire_wait_policy {
            size: EARLIER_WAIT_POLICY,
            spin_ns: blocking.spin_ns,
            yield_ns: blocking.yield_ns,
            max_sleep_ns: blocking.max_sleep_ns,
            device_spin_ns: blocking.device_spin_ns,
            ..dozing
        },
        "the earlier fields written, the size kept, nothing past them"
    );

    let rig = Rig::new(1);
    let ticket = rig
        .submit(sigretire_purpose::SIGRETIRE_PURPOSE_CPU_SYNC)
        .ticket;
    let (result, status, waited) = wait_while_the_gpu_runs(&rig, ticket, policy);
    assert_eq!((result, status), (SIGRETIRE_OK, SIGRETIRE_USE_COMPLETE));
    assert!(
        waited < std::time::Duration::from_secs(5),
        "waited {waited:?}: the fields past the earlier size were read as a hybrid policy"
    );

    // A hybrid policy needs the hybrid fields: an earlier struct is refused,
    // and not written.
    let mut earlier = policy;
    // SAFETY: a local whose size field says fewer bytes than it has.
    let answer = unsafe { sigretire_wait_policy_hybrid(&mut earlier, 0) };
    expect(
        answer,
        SIGRETIRE_ERR_STRUCT_SIZE,
        "sigretire_wait_policy_hybrid",
    );
    assert_eq!(earlier, policy);
}

#[test]
#[cfg_attr(miri, ignore = "maps memory with mmap, which Miri does not model")]
fn a_wait_policy_of_an_earlier_header_is_not_read_or_written_past_its_size() {
    let rig = Rig::new(1);
    let guarded = GuardedWord::new();
    let policy = guarded.tail::<sigretire_wait_policy>(EARLIER_WAIT_POLICY as usize);
    let ticket = rig
        .submit(sigretire_purpose::SIGRETIRE_PURPOSE_CPU_SYNC)
        .ticket;
    rig.run();
    let mut status = SIGRETIRE_USE_UNKNOWN;
    // SAFETY: the 40 bytes before the guard page are readable, writable
    // and aligned; their size field says 40, so the library may touch
    // those only (past them it faults); the rest are locals and live
    // handles.
    unsafe {
        policy.cast::<u32>().write(EARLIER_WAIT_POLICY);
        expect_each!(
            SIGRETIRE_OK,
            "sigretire_wait_policy_",
            sigretire_wait_policy_spin(policy),
            sigretire_wait_policy_blocking(policy),
        );
        assert_eq!(policy.cast::<u32>().read(), EARLIER_WAIT_POLICY);
        assert_eq!(policy.cast::<u64>().add(1).read(), 10_000, "spin_ns");
        expect(
            sigretire_tracker_wait(rig.tracker, &ticket, 1_000_000_000, policy, &mut status),
            SIGRETIRE_OK,
            "sigretire_tracker_wait",
        );
        assert_eq!(status, SIGRETIRE_USE_COMPLETE);
        expect(
            sigretire_wait_policy_hybrid(policy, 0),
            SIGRETIRE_ERR_STRUCT_SIZE,
            "sigretire_wait_policy_hybrid",
        );
    }
}

#[test]
fn a_wait_policy_with_bad_hybrid_fields_or_size_is_refused() {
    let rig = Rig::new(1);
    let ticket = rig
        .submit(sigretire_purpose::SIGRETIRE_PURPOSE_CPU_SYNC)
        .ticket;
    rig.run();
    let mut hybrid = sigretire_wait_policy::default();
    // SAFETY: a local with its size set.
    unsafe { assert_eq!(sigretire_wait_policy_hybrid(&mut hybrid, 0), SIGRETIRE_OK) };
    let refused = [
        (
            sigretire_wait_policy {
                hybrid: 2,
                ..hybrid
            },
            SIGRETIRE_ERR_INVALID_ARGUMENT,
        ),
        (
            sigretire_wait_policy {
                hybrid_recheck_ns: 0,
                ..hybrid
            },
            SIGRETIRE_ERR_INVALID_ARGUMENT,
        ),
        // Too small for even the earlier layout, or between the two.
        (
            sigretire_wait_policy { size: 4, ..hybrid },
            SIGRETIRE_ERR_STRUCT_SIZE,
        ),
        (
            sigretire_wait_policy {
                size: EARLIER_WAIT_POLICY - 8,
                ..hybrid
            },
            SIGRETIRE_ERR_STRUCT_SIZE,
        ),
        (
            sigretire_wait_policy {
                size: EARLIER_WAIT_POLICY + 8,
                ..hybrid
            },
            SIGRETIRE_ERR_STRUCT_SIZE,
        ),
    ];
    for (policy, expected) in refused {
        let mut status = SIGRETIRE_USE_UNKNOWN;
        // SAFETY: a live tracker handle and locals.
        let answer =
            unsafe { sigretire_tracker_wait(rig.tracker, &ticket, 0, &policy, &mut status) };
        expect(answer, expected, "sigretire_tracker_wait");
        assert_eq!(status, SIGRETIRE_USE_UNKNOWN, "{policy:?}: nothing written");
    }
    for size in [0, 4, EARLIER_WAIT_POLICY - 8, EARLIER_WAIT_POLICY + 8] {
        let mut policy = sigretire_wait_policy { size, ..hybrid };
        let before = policy;
        // SAFETY: a local whose size field says no more bytes than it has.
        let answer = unsafe { sigretire_wait_policy_hybrid(&mut policy, 0) };
        expect(
            answer,
            SIGRETIRE_ERR_STRUCT_SIZE,
            "sigretire_wait_policy_hybrid",
        );
        assert_eq!(policy, before, "not written");
    }
    // SAFETY: NULL, refused.
    let answer = unsafe { sigretire_wait_policy_hybrid(null_mut(), 1000) };
    expect(answer, SIGRETIRE_ERR_NULL, "sigretire_wait_policy_hybrid");
}
