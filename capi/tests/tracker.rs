//! The tracker's operations through the C ABI on the simulator, as a C
//! runtime calls them: timestamps, uses of several operations, drains,
//! queue failures, failed submissions, queue changes, probes, the
//! baseline, a threaded simulator waited on from several threads.

use ::sigretire_sim::backend::SimMemory;
use sigretire_capi::*;
use std::ptr::{null, null_mut};

// SAFETY (for every `unsafe` block of this file, each marked "as above"):
// the calls take live handles made by this file, pointers to locals, or
// NULL where the function allows it.

struct Rig {
    sim: *mut sigretire_sim,
    tracker: *mut sigretire_tracker,
}

impl Rig {
    fn new(options: sigretire_sim_options, config: sigretire_config) -> Self {
        let mut sim = null_mut();
        let mut tracker = null_mut();
        // SAFETY: see the top of the file.
        unsafe {
            assert_eq!(sigretire_sim_create(&options, &mut sim), SIGRETIRE_OK);
            assert_eq!(
                sigretire_sim_tracker_create(sim, 0, &config, &mut tracker),
                SIGRETIRE_OK
            );
        }
        Self { sim, tracker }
    }

    /// A rig whose tracker handle holds the tracker `make` builds on the
    /// simulator's queue 0 (the baseline to compare with, a retiring
    /// tracker with a narrowed generation counter).
    fn with<T>(
        options: sigretire_sim_options,
        make: impl FnOnce(
            std::sync::Arc<SimMemory>,
            ::sigretire_sim::Queue,
        ) -> Result<T, ::sigretire_tracker::CreateError>,
    ) -> Self
    where
        T: ::sigretire_tracker::Tracker<Memory = SimMemory, Queue = ::sigretire_sim::Queue>
            + 'static,
    {
        let mut sim = null_mut();
        let mut tracker = null_mut();
        // SAFETY: see the top of the file.
        unsafe {
            assert_eq!(sigretire_sim_create(&options, &mut sim), SIGRETIRE_OK);
            assert_eq!(
                sigretire_sim_tracker_create_with(sim, 0, make, &mut tracker),
                SIGRETIRE_OK
            );
        }
        Self { sim, tracker }
    }

    fn submit(&self, flags: u32, kind: sigretire_work_kind) -> sigretire_acquired {
        let request = sigretire_request {
            flags,
            ..Default::default()
        };
        let work = sigretire_work {
            kind: kind as u32,
            ..Default::default()
        };
        let mut acquired = sigretire_acquired::default();
        // SAFETY: as above.
        let status =
            unsafe { sigretire_tracker_submit(self.tracker, &request, &work, &mut acquired) };
        assert_eq!(status, SIGRETIRE_OK);
        acquired
    }

    fn run(&self) {
        // SAFETY: as above.
        unsafe { assert_eq!(sigretire_sim_run_until_idle(self.sim), SIGRETIRE_OK) };
    }

    fn query(&self, ticket: &sigretire_ticket) -> sigretire_use_status {
        let mut status = SIGRETIRE_USE_UNKNOWN;
        // SAFETY: as above.
        unsafe {
            assert_eq!(
                sigretire_tracker_query(self.tracker, ticket, &mut status),
                SIGRETIRE_OK
            )
        };
        status
    }

    fn stats(&self) -> sigretire_stats {
        let mut stats = sigretire_stats::default();
        // SAFETY: as above.
        unsafe {
            assert_eq!(
                sigretire_tracker_stats(self.tracker, &mut stats),
                SIGRETIRE_OK
            )
        };
        stats
    }

    fn census(&self) -> sigretire_census {
        let mut census = sigretire_census::default();
        // SAFETY: as above.
        unsafe {
            assert_eq!(
                sigretire_tracker_census(self.tracker, &mut census),
                SIGRETIRE_OK
            )
        };
        census
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let mut violations = 1;
        // SAFETY: as above.
        unsafe {
            assert_eq!(
                sigretire_sim_violations(self.sim, &mut violations),
                SIGRETIRE_OK
            );
            assert_eq!(sigretire_tracker_destroy(&mut self.tracker), SIGRETIRE_OK);
            assert_eq!(sigretire_sim_destroy(&mut self.sim), SIGRETIRE_OK);
        }
        if !std::thread::panicking() {
            assert_eq!(
                violations, 0,
                "the simulator saw a host action that is a bug on hardware"
            );
        }
    }
}

fn options() -> sigretire_sim_options {
    let mut options = sigretire_sim_options {
        size: size_of::<sigretire_sim_options>() as u32,
        queues: 0,
        queue_size: 0,
        flags: 0,
        costs: 0,
    };
    // SAFETY: as above.
    unsafe { assert_eq!(sigretire_sim_options_default(&mut options), SIGRETIRE_OK) };
    options
}

fn config() -> sigretire_config {
    // SAFETY: all-zero is a valid `sigretire_config` (plain integers),
    // overwritten at once by the defaults.
    let mut config = unsafe { std::mem::zeroed::<sigretire_config>() };
    config.size = size_of::<sigretire_config>() as u32;
    // SAFETY: as above.
    unsafe { assert_eq!(sigretire_config_default(&mut config), SIGRETIRE_OK) };
    config
}

#[test]
fn a_timed_use_has_its_stamps_for_its_ticket_and_its_holders() {
    let rig = Rig::new(options(), config());
    let timed = rig.submit(
        SIGRETIRE_REQUEST_BARRIER | SIGRETIRE_REQUEST_TIMED,
        sigretire_work_kind::SIGRETIRE_WORK_EMPTY,
    );
    assert_eq!(
        timed.ticket.flags & SIGRETIRE_TICKET_TIMED,
        SIGRETIRE_TICKET_TIMED
    );
    let mut hold = null_mut();
    let mut stamps = sigretire_timestamps::default();
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            sigretire_tracker_hold(rig.tracker, &timed.ticket, &mut hold),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_tracker_timestamps(rig.tracker, &timed.ticket, &mut stamps),
            SIGRETIRE_OK
        );
    }
    assert_eq!(
        stamps.state, SIGRETIRE_TIMESTAMPS_NONE,
        "pending: no stamps yet"
    );
    rig.run();
    assert_eq!(rig.query(&timed.ticket), SIGRETIRE_USE_COMPLETE);
    let mut hz = 0;
    let mut held = sigretire_timestamps::default();
    let mut handle = 0;
    let mut placement = SIGRETIRE_PLACEMENT_DEVICE;
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            sigretire_tracker_timestamps(rig.tracker, &timed.ticket, &mut stamps),
            SIGRETIRE_OK
        );
        assert_eq!(sigretire_hold_timestamps(hold, &mut held), SIGRETIRE_OK);
        assert_eq!(
            sigretire_hold_signal(hold, &mut handle, &mut placement),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_tracker_timestamp_frequency(rig.tracker, &mut hz),
            SIGRETIRE_OK
        );
        assert_eq!(sigretire_hold_release(&mut hold), SIGRETIRE_OK);
    }
    assert_eq!(stamps.state, SIGRETIRE_TIMESTAMPS_AVAILABLE);
    assert!(stamps.end > stamps.start, "{stamps:?}");
    assert_eq!(held, stamps, "the holder sees the same harvest");
    assert_eq!(handle, timed.completion_signal);
    assert_eq!(placement, SIGRETIRE_PLACEMENT_HOST);
    assert_eq!(hz, 100_000_000, "the simulator's MI300X-like 100 MHz clock");
    assert_eq!(rig.stats().harvests, 1);
}

#[test]
fn a_held_use_keeps_answering_its_stamps_for_its_ticket() {
    // Whether or not the history of stamps still has room for it (it
    // keeps the last timed use only with `stamp_history` 1), a held use's
    // ticket answers its stamps: its cell keeps them while it is held.
    for stamp_history in [16384, 1] {
        let mut small = config();
        small.initial_size = 4;
        small.growth_limit = 1;
        small.stamp_history = stamp_history;
        let rig = Rig::new(options(), small);
        let timed = rig.submit(
            SIGRETIRE_REQUEST_BARRIER | SIGRETIRE_REQUEST_TIMED,
            sigretire_work_kind::SIGRETIRE_WORK_EMPTY,
        );
        let mut hold = null_mut();
        // SAFETY: as above.
        unsafe {
            assert_eq!(
                sigretire_tracker_hold(rig.tracker, &timed.ticket, &mut hold),
                SIGRETIRE_OK
            );
        }
        rig.run();
        for _ in 0..12 {
            rig.submit(
                SIGRETIRE_REQUEST_BARRIER | SIGRETIRE_REQUEST_TIMED,
                sigretire_work_kind::SIGRETIRE_WORK_EMPTY,
            );
            rig.run();
            let mut rearmed = 0;
            // SAFETY: as above.
            unsafe {
                assert_eq!(
                    sigretire_tracker_poll(rig.tracker, &mut rearmed),
                    SIGRETIRE_OK
                )
            };
        }
        let mut stamps = sigretire_timestamps::default();
        let mut held = sigretire_timestamps::default();
        // SAFETY: as above.
        unsafe {
            assert_eq!(sigretire_hold_timestamps(hold, &mut held), SIGRETIRE_OK);
            assert_eq!(
                sigretire_tracker_timestamps(rig.tracker, &timed.ticket, &mut stamps),
                SIGRETIRE_OK,
                "stamp_history {stamp_history}: the use is held, 12 uses later"
            );
        }
        assert_eq!(held.state, SIGRETIRE_TIMESTAMPS_AVAILABLE);
        assert_eq!(stamps, held, "the ticket answers what the holder sees");
        assert_eq!(rig.query(&timed.ticket), SIGRETIRE_USE_COMPLETE);
        // Its record is kept for its stamps, not so it can run again.
        let work = sigretire_work {
            kind: sigretire_work_kind::SIGRETIRE_WORK_EMPTY as u32,
            ..Default::default()
        };
        // SAFETY: as above.
        unsafe {
            assert_eq!(
                sigretire_tracker_publish(rig.tracker, &timed.ticket, 0, &work),
                SIGRETIRE_ERR_INVALID_STATE,
                "a complete use is not published again"
            );
        }
        // Let go: 12 timed uses later its stamps are kept exactly as the
        // tracker keeps them for a Rust caller (no record of the C
        // library's own drops them sooner): in its history, which has room
        // for 16384 uses' or for the newest one's; in its signal's cell
        // until a later timed use of that signal is harvested. Each later
        // use is held, so that its signal is parked when it retires and an
        // armed spare takes its slot: the released signal, next in line,
        // serves a later timed use.
        // SAFETY: as above.
        unsafe { assert_eq!(sigretire_hold_release(&mut hold), SIGRETIRE_OK) };
        let mut later = Vec::new();
        for _ in 0..12 {
            let acquired = rig.submit(
                SIGRETIRE_REQUEST_BARRIER | SIGRETIRE_REQUEST_TIMED,
                sigretire_work_kind::SIGRETIRE_WORK_EMPTY,
            );
            let mut kept = null_mut();
            let mut rearmed = 0;
            // SAFETY: as above.
            unsafe {
                assert_eq!(
                    sigretire_tracker_hold(rig.tracker, &acquired.ticket, &mut kept),
                    SIGRETIRE_OK
                );
                later.push(kept);
                rig.run();
                assert_eq!(
                    sigretire_tracker_poll(rig.tracker, &mut rearmed),
                    SIGRETIRE_OK
                );
            }
        }
        let mut after = sigretire_timestamps::default();
        // SAFETY: as above.
        let answer =
            unsafe { sigretire_tracker_timestamps(rig.tracker, &timed.ticket, &mut after) };
        if stamp_history > 12 {
            assert_eq!(answer, SIGRETIRE_OK, "stamp_history {stamp_history}");
            assert_eq!(after, held, "the history's copy of the same stamps");
        } else {
            assert_eq!(
                answer, SIGRETIRE_ERR_EXPIRED,
                "stamp_history {stamp_history}"
            );
        }
        for mut kept in later {
            // SAFETY: as above.
            unsafe { assert_eq!(sigretire_hold_release(&mut kept), SIGRETIRE_OK) };
        }
        assert_eq!(rig.query(&timed.ticket), SIGRETIRE_USE_COMPLETE);
    }
}

#[test]
fn a_timed_use_on_an_unprofiled_queue_says_it_has_no_stamps() {
    let mut unprofiled = options();
    unprofiled.flags |= SIGRETIRE_SIM_UNPROFILED;
    let rig = Rig::new(unprofiled, config());
    let timed = rig.submit(
        SIGRETIRE_REQUEST_BARRIER | SIGRETIRE_REQUEST_TIMED,
        sigretire_work_kind::SIGRETIRE_WORK_EMPTY,
    );
    let mut hold = null_mut();
    let mut stamps = sigretire_timestamps::default();
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            sigretire_tracker_hold(rig.tracker, &timed.ticket, &mut hold),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_tracker_timestamps(rig.tracker, &timed.ticket, &mut stamps),
            SIGRETIRE_OK
        );
    }
    assert_eq!(stamps.state, SIGRETIRE_TIMESTAMPS_NONE, "pending: none yet");
    rig.run();
    let mut held = sigretire_timestamps::default();
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            sigretire_tracker_timestamps(rig.tracker, &timed.ticket, &mut stamps),
            SIGRETIRE_OK
        );
        assert_eq!(sigretire_hold_timestamps(hold, &mut held), SIGRETIRE_OK);
        assert_eq!(sigretire_hold_release(&mut hold), SIGRETIRE_OK);
    }
    assert_eq!(rig.query(&timed.ticket), SIGRETIRE_USE_COMPLETE);
    assert_eq!(
        stamps.state, SIGRETIRE_TIMESTAMPS_UNSTAMPED,
        "complete, timed, and never stamped: not stamps of 0 and 0: {stamps:?}"
    );
    assert_eq!((stamps.start, stamps.end), (0, 0));
    assert_eq!(held, stamps, "the holder hears the same");
}

#[test]
fn a_use_of_two_operations_is_published_part_by_part() {
    let rig = Rig::new(options(), config());
    let (mut first, mut last) = (0, 0);
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            sigretire_tracker_reserve(rig.tracker, &mut first),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_tracker_reserve(rig.tracker, &mut last),
            SIGRETIRE_OK
        );
    }
    let request = sigretire_request {
        aql_index: last,
        ops: 2,
        flags: SIGRETIRE_REQUEST_BARRIER,
        purpose: sigretire_purpose::SIGRETIRE_PURPOSE_CPU_SYNC as u32,
        ..Default::default()
    };
    let mut acquired = sigretire_acquired::default();
    let work = sigretire_work {
        kind: sigretire_work_kind::SIGRETIRE_WORK_KERNEL as u32,
        ..Default::default()
    };
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            sigretire_tracker_acquire(rig.tracker, &request, &mut acquired),
            SIGRETIRE_OK
        );
        assert_eq!((acquired.aql_index, acquired.ops), (last, 2));
        assert_eq!(
            sigretire_tracker_publish(rig.tracker, &acquired.ticket, 0, &work),
            SIGRETIRE_OK
        );
    }
    rig.run();
    assert_eq!(
        rig.query(&acquired.ticket),
        SIGRETIRE_USE_PENDING,
        "one part ran"
    );
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            sigretire_tracker_publish(rig.tracker, &acquired.ticket, 1, &work),
            SIGRETIRE_OK
        );
    }
    rig.run();
    assert_eq!(rig.query(&acquired.ticket), SIGRETIRE_USE_COMPLETE);
    let mut completed = false;
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            sigretire_sim_packet_completed(rig.sim, 0, first, &mut completed),
            SIGRETIRE_OK
        );
    }
    assert!(completed);
}

#[test]
fn a_drain_retires_without_a_load() {
    let rig = Rig::new(options(), config());
    let tickets: Vec<_> = (0..8)
        .map(|_| {
            rig.submit(0, sigretire_work_kind::SIGRETIRE_WORK_KERNEL)
                .ticket
        })
        .collect();
    rig.run();
    // SAFETY: as above.
    unsafe { assert_eq!(sigretire_tracker_note_drained(rig.tracker), SIGRETIRE_OK) };
    let stats = rig.stats();
    assert_eq!(stats.retired_by_drain, 8);
    assert_eq!(stats.host.loads + stats.device.loads, 0);
    for ticket in &tickets {
        let mut status = SIGRETIRE_USE_UNKNOWN;
        // SAFETY: as above.
        unsafe {
            assert_eq!(
                sigretire_tracker_known_status(rig.tracker, ticket, &mut status),
                SIGRETIRE_OK
            );
        }
        assert_eq!(status, SIGRETIRE_USE_COMPLETE);
    }
    // The drain re-armed them too.
    assert_eq!(rig.census().in_flight, 0);
    assert_eq!(rig.stats().rearms, 8);
}

#[test]
fn a_failed_queue_fails_its_pending_uses_once() {
    let rig = Rig::new(options(), config());
    let done = rig.submit(
        SIGRETIRE_REQUEST_BARRIER,
        sigretire_work_kind::SIGRETIRE_WORK_KERNEL,
    );
    rig.run();
    let pending = rig.submit(
        SIGRETIRE_REQUEST_BARRIER,
        sigretire_work_kind::SIGRETIRE_WORK_KERNEL,
    );
    let mut failed = 0;
    let mut pin = null_mut();
    // SAFETY: as above.
    unsafe {
        assert_eq!(sigretire_sim_fail_queue(rig.sim, 0), SIGRETIRE_OK);
        assert_eq!(
            sigretire_tracker_fail_queue(rig.tracker, &mut failed),
            SIGRETIRE_OK
        );
        assert_eq!(failed, 1);
        assert_eq!(
            sigretire_tracker_fail_queue(rig.tracker, &mut failed),
            SIGRETIRE_OK
        );
        assert_eq!(failed, 0, "once");
        assert_eq!(
            sigretire_tracker_pin(rig.tracker, &pending.ticket, &mut pin),
            SIGRETIRE_ERR_USE_FAILED
        );
    }
    assert!(pin.is_null());
    assert_eq!(rig.query(&done.ticket), SIGRETIRE_USE_COMPLETE);
    assert_eq!(rig.query(&pending.ticket), SIGRETIRE_USE_FAILED);
    // A packet published on the failed queue fails at once: its use with it.
    let late = rig.submit(
        SIGRETIRE_REQUEST_BARRIER,
        sigretire_work_kind::SIGRETIRE_WORK_KERNEL,
    );
    assert_eq!(rig.query(&late.ticket), SIGRETIRE_USE_FAILED);
    assert_eq!(rig.stats().failed, 2);
}

#[test]
fn a_submission_that_failed_half_way_retires_once_its_issued_part_ran() {
    let rig = Rig::new(options(), config());
    let (mut first, mut last) = (0, 0);
    let work = sigretire_work {
        kind: sigretire_work_kind::SIGRETIRE_WORK_KERNEL as u32,
        ..Default::default()
    };
    let mut acquired = sigretire_acquired::default();
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            sigretire_tracker_reserve(rig.tracker, &mut first),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_tracker_reserve(rig.tracker, &mut last),
            SIGRETIRE_OK
        );
        let request = sigretire_request {
            aql_index: last,
            ops: 2,
            flags: SIGRETIRE_REQUEST_BARRIER,
            purpose: 0,
            ..Default::default()
        };
        assert_eq!(
            sigretire_tracker_acquire(rig.tracker, &request, &mut acquired),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_tracker_publish(rig.tracker, &acquired.ticket, 0, &work),
            SIGRETIRE_OK
        );
        // The second part could not be issued: the use fails; its slot is
        // filled with a packet that completes nothing.
        assert_eq!(
            sigretire_tracker_fail_submission(rig.tracker, &acquired.ticket, 1),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_tracker_publish_unsignalled(
                rig.tracker,
                last,
                SIGRETIRE_REQUEST_BARRIER,
                &work
            ),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_tracker_fail_submission(rig.tracker, &acquired.ticket, 1),
            SIGRETIRE_ERR_INVALID_STATE,
            "already failed"
        );
    }
    assert_eq!(rig.query(&acquired.ticket), SIGRETIRE_USE_FAILED);
    rig.run();
    let mut rearmed = 0;
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            sigretire_tracker_poll(rig.tracker, &mut rearmed),
            SIGRETIRE_OK
        )
    };
    let census = rig.census();
    assert_eq!(census.in_flight, 0, "{census:?}");
    assert_eq!(rig.stats().failed, 1);
}

#[test]
fn a_queue_change_starts_a_generation_and_keeps_old_answers() {
    let mut two = options();
    two.queues = 2;
    let rig = Rig::new(two, config());
    let old = rig.submit(
        SIGRETIRE_REQUEST_BARRIER,
        sigretire_work_kind::SIGRETIRE_WORK_KERNEL,
    );
    rig.run();
    let mut generation = 9;
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            sigretire_sim_note_queue_change(rig.tracker, rig.sim, 1),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_tracker_generation(rig.tracker, &mut generation),
            SIGRETIRE_OK
        );
    }
    assert_eq!(generation, 1);
    // Index 0 again, on the new queue: a new generation accepts it.
    let new = rig.submit(
        SIGRETIRE_REQUEST_BARRIER,
        sigretire_work_kind::SIGRETIRE_WORK_KERNEL,
    );
    assert_eq!(new.aql_index, 0);
    assert_eq!(new.ticket.generation, 1);
    rig.run();
    assert_eq!(rig.query(&old.ticket), SIGRETIRE_USE_COMPLETE);
    assert_eq!(rig.query(&new.ticket), SIGRETIRE_USE_COMPLETE);
    let mut completed = false;
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            sigretire_sim_packet_completed(rig.sim, 1, 0, &mut completed),
            SIGRETIRE_OK
        );
    }
    assert!(completed, "the new use ran on queue 1");
}

#[test]
fn a_use_acquired_before_a_queue_change_cannot_be_published_after_it() {
    let mut three = options();
    three.queues = 3;
    // A 1-bit generation counter (a test's: runtimes count in 32 bits), so
    // that two changes bring generation 0 back.
    let rig = Rig::with(three, |memory, queue| {
        let mut tracker =
            ::sigretire_tracker::RetiringTracker::new(memory, queue, Default::default())?;
        ::sigretire_tracker::kit::narrow_generations(&mut tracker, 1);
        Ok(tracker)
    });
    let mut index = 0;
    let mut acquired = sigretire_acquired::default();
    let request = sigretire_request {
        flags: SIGRETIRE_REQUEST_BARRIER,
        ..Default::default()
    };
    let work = sigretire_work {
        kind: sigretire_work_kind::SIGRETIRE_WORK_KERNEL as u32,
        ..Default::default()
    };
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            sigretire_tracker_reserve(rig.tracker, &mut index),
            SIGRETIRE_OK
        );
        let request = sigretire_request {
            aql_index: index,
            ..request
        };
        assert_eq!(
            sigretire_tracker_acquire(rig.tracker, &request, &mut acquired),
            SIGRETIRE_OK
        );
        assert_eq!(acquired.ticket.generation, 0);
        for (queue, generation) in [(1, 1), (2, 0)] {
            assert_eq!(
                sigretire_sim_note_queue_change(rig.tracker, rig.sim, queue),
                SIGRETIRE_OK
            );
            let mut now = 9;
            assert_eq!(
                sigretire_tracker_generation(rig.tracker, &mut now),
                SIGRETIRE_OK
            );
            assert_eq!(now, generation);
            // Its index was reserved on queue 0: the tracker's queue now is
            // another, which never reserved it.
            assert_eq!(
                sigretire_tracker_publish(rig.tracker, &acquired.ticket, 0, &work),
                SIGRETIRE_ERR_INVALID_STATE,
                "queue {queue}, generation {generation}"
            );
            let mut completed = false;
            assert_eq!(
                sigretire_sim_packet_completed(rig.sim, queue, index, &mut completed),
                SIGRETIRE_ERR_INVALID_ARGUMENT,
                "nothing was written on queue {queue}"
            );
        }
        // The caller fails the use it could not publish.
        assert_eq!(
            sigretire_tracker_fail_submission(rig.tracker, &acquired.ticket, 0),
            SIGRETIRE_OK
        );
    }
    assert_eq!(rig.query(&acquired.ticket), SIGRETIRE_USE_FAILED);
    // The tracker's own queue takes new work as usual.
    let after = rig.submit(
        SIGRETIRE_REQUEST_BARRIER,
        sigretire_work_kind::SIGRETIRE_WORK_KERNEL,
    );
    rig.run();
    assert_eq!(rig.query(&after.ticket), SIGRETIRE_USE_COMPLETE);
}

#[test]
fn a_probe_proves_without_re_arming() {
    let rig = Rig::new(options(), config());
    let fence = rig.submit(
        SIGRETIRE_REQUEST_BARRIER,
        sigretire_work_kind::SIGRETIRE_WORK_KERNEL,
    );
    rig.run();
    let mut proved = false;
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            sigretire_tracker_probe(rig.tracker, &mut proved),
            SIGRETIRE_OK
        )
    };
    assert!(proved);
    assert_eq!(rig.stats().rearms, 0);
    let mut status = SIGRETIRE_USE_UNKNOWN;
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            sigretire_tracker_known_status(rig.tracker, &fence.ticket, &mut status),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_tracker_probe(rig.tracker, &mut proved),
            SIGRETIRE_OK
        );
    }
    assert_eq!(status, SIGRETIRE_USE_COMPLETE);
    assert!(!proved, "nothing new");
}

#[test]
fn the_baseline_loads_each_use_that_the_retiring_tracker_proves_by_one_fence() {
    let mut device = config();
    device.signals = SIGRETIRE_PLACEMENT_DEVICE as u32;
    let mut loads = Vec::new();
    // The baseline is no configuration of this library's (no runtime picks
    // it): the test hands a C handle the one it compares with.
    let baseline = || {
        Rig::with(options(), |memory, queue| {
            ::sigretire_baseline::BaselineTracker::new(
                memory,
                queue,
                ::sigretire_tracker::Config {
                    signals: ::sigretire_tracker::Placement::Device,
                    ..::sigretire_tracker::Config::default()
                },
            )
        })
    };
    for rig in [Rig::new(options(), device), baseline()] {
        let tickets: Vec<_> = (0..64)
            .map(|_| {
                rig.submit(
                    SIGRETIRE_REQUEST_BARRIER,
                    sigretire_work_kind::SIGRETIRE_WORK_KERNEL,
                )
                .ticket
            })
            .collect();
        rig.run();
        for ticket in &tickets {
            assert_eq!(rig.query(ticket), SIGRETIRE_USE_COMPLETE);
        }
        loads.push(rig.stats().device.loads);
    }
    // The retiring tracker: one probe of the newest fence. The baseline: a
    // load of each use's own signal (and then some).
    assert_eq!(loads[0], 1);
    assert!(loads[1] >= 64, "{loads:?}");
}

#[test]
fn threads_wait_on_a_threaded_simulator_while_another_submits() {
    let mut threaded = options();
    threaded.flags = SIGRETIRE_SIM_THREADED;
    let rig = Rig::new(threaded, config());
    struct Shared(*mut sigretire_tracker);
    // SAFETY: the tracker handle is internally synchronised (the C ABI's
    // contract), and it outlives the threads (joined below).
    unsafe impl Send for Shared {}
    // SAFETY: as for Send: the handle may be used from any thread at once.
    unsafe impl Sync for Shared {}
    let shared = Shared(rig.tracker);
    // Ten seconds of real time is ample for the simulator's thread to run
    // 64 packets; under Miri, which interprets every thread, it is not (the
    // waits would end early, never wrongly: `SIGRETIRE_ERR_TIMED_OUT`).
    let timeout_ns: u64 = if cfg!(miri) {
        3_600_000_000_000
    } else {
        10_000_000_000
    };
    let tickets: Vec<_> = (0..32)
        .map(|_| {
            rig.submit(
                SIGRETIRE_REQUEST_BARRIER,
                sigretire_work_kind::SIGRETIRE_WORK_KERNEL,
            )
            .ticket
        })
        .collect();
    std::thread::scope(|scope| {
        let shared = &shared;
        let waiters: Vec<_> = tickets
            .chunks(8)
            .map(|chunk| {
                scope.spawn(move || {
                    let mut policy = sigretire_wait_policy {
                        size: size_of::<sigretire_wait_policy>() as u32,
                        ..Default::default()
                    };
                    // SAFETY: as above.
                    unsafe { sigretire_wait_policy_blocking(&mut policy) };
                    chunk
                        .iter()
                        .map(|ticket| {
                            let mut status = SIGRETIRE_USE_UNKNOWN;
                            // SAFETY: as above; the tracker is shared (see `Shared`).
                            let result = unsafe {
                                sigretire_tracker_wait(
                                    shared.0,
                                    ticket,
                                    timeout_ns,
                                    &policy,
                                    &mut status,
                                )
                            };
                            (result, status)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for _ in 0..32 {
            rig.submit(0, sigretire_work_kind::SIGRETIRE_WORK_MARKER);
        }
        for waiter in waiters {
            for answer in waiter.join().unwrap() {
                assert_eq!(answer, (SIGRETIRE_OK, SIGRETIRE_USE_COMPLETE));
            }
        }
    });
    rig.run();
    let mut status = SIGRETIRE_USE_UNKNOWN;
    let ticket = tickets[0];
    // SAFETY: as above.
    let waited = unsafe { sigretire_tracker_wait(rig.tracker, &ticket, 0, null(), &mut status) };
    assert_eq!((waited, status), (SIGRETIRE_OK, SIGRETIRE_USE_COMPLETE));
}

#[test]
fn a_wait_that_runs_out_of_time_says_so() {
    let rig = Rig::new(options(), config());
    let pending = rig.submit(
        SIGRETIRE_REQUEST_BARRIER,
        sigretire_work_kind::SIGRETIRE_WORK_KERNEL,
    );
    let mut status = SIGRETIRE_USE_UNKNOWN;
    // SAFETY: as above.
    let waited = unsafe {
        sigretire_tracker_wait(rig.tracker, &pending.ticket, 1_000_000, null(), &mut status)
    };
    assert_eq!(waited, SIGRETIRE_ERR_TIMED_OUT);
    assert_eq!(status, SIGRETIRE_USE_PENDING);
}

#[test]
fn a_copy_engine_use_is_acquired_but_not_published_on_the_aql_queue() {
    let rig = Rig::new(options(), config());
    let request = sigretire_request {
        flags: SIGRETIRE_REQUEST_COPY_ENGINE,
        ..Default::default()
    };
    let mut acquired = sigretire_acquired::default();
    let work = sigretire_work::default();
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            sigretire_tracker_acquire(rig.tracker, &request, &mut acquired),
            SIGRETIRE_OK
        );
        assert_eq!(
            acquired.flags & SIGRETIRE_ACQUIRED_COPY_ENGINE,
            SIGRETIRE_ACQUIRED_COPY_ENGINE
        );
        assert_eq!(
            sigretire_tracker_publish(rig.tracker, &acquired.ticket, 0, &work),
            SIGRETIRE_ERR_UNSUPPORTED
        );
        assert_eq!(
            sigretire_tracker_fail_submission(rig.tracker, &acquired.ticket, 0),
            SIGRETIRE_OK
        );
    }
    assert_eq!(rig.query(&acquired.ticket), SIGRETIRE_USE_FAILED);
}

/// Two trackers on two queues of one stepped simulator.
struct Pair {
    sim: *mut sigretire_sim,
    producer: *mut sigretire_tracker,
    consumer: *mut sigretire_tracker,
}

impl Pair {
    fn new() -> Self {
        let mut two = options();
        two.queues = 2;
        let (mut sim, mut producer, mut consumer) = (null_mut(), null_mut(), null_mut());
        // SAFETY: as above.
        unsafe {
            assert_eq!(sigretire_sim_create(&two, &mut sim), SIGRETIRE_OK);
            assert_eq!(
                sigretire_sim_tracker_create(sim, 0, null(), &mut producer),
                SIGRETIRE_OK
            );
            assert_eq!(
                sigretire_sim_tracker_create(sim, 1, null(), &mut consumer),
                SIGRETIRE_OK
            );
        }
        Self {
            sim,
            producer,
            consumer,
        }
    }

    fn violations(&self) -> u64 {
        let mut count = u64::MAX;
        // SAFETY: as above.
        unsafe { assert_eq!(sigretire_sim_violations(self.sim, &mut count), SIGRETIRE_OK) };
        count
    }

    fn producer_census(&self) -> sigretire_census {
        let mut census = sigretire_census::default();
        // SAFETY: as above.
        unsafe {
            assert_eq!(
                sigretire_tracker_census(self.producer, &mut census),
                SIGRETIRE_OK
            )
        };
        census
    }

    fn poll_producer(&self) {
        let mut rearmed = 0;
        // SAFETY: as above.
        unsafe {
            assert_eq!(
                sigretire_tracker_poll(self.producer, &mut rearmed),
                SIGRETIRE_OK
            );
            assert_eq!(
                sigretire_tracker_reclaim(self.producer, &mut rearmed),
                SIGRETIRE_OK
            );
        }
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        // SAFETY: as above (a NULL consumer is a no-op).
        unsafe {
            assert_eq!(sigretire_tracker_destroy(&mut self.consumer), SIGRETIRE_OK);
            assert_eq!(sigretire_tracker_destroy(&mut self.producer), SIGRETIRE_OK);
            assert_eq!(sigretire_sim_destroy(&mut self.sim), SIGRETIRE_OK);
        }
    }
}

#[test]
fn a_destroyed_consumer_tracker_keeps_its_pins_until_its_packets_ran() {
    let mut pair = Pair::new();
    let kernel = sigretire_work {
        kind: sigretire_work_kind::SIGRETIRE_WORK_KERNEL as u32,
        ..Default::default()
    };
    let fence = sigretire_request {
        flags: SIGRETIRE_REQUEST_BARRIER,
        purpose: sigretire_purpose::SIGRETIRE_PURPOSE_GPU_WAITER as u32,
        ..Default::default()
    };
    let mut produced = sigretire_acquired::default();
    let mut blocker = sigretire_acquired::default();
    let mut consumed = sigretire_acquired::default();
    let mut pin = null_mut();
    let mut handle = 0;
    // SAFETY: as above.
    unsafe {
        // The producer's packet, and a use after it whose packet is not
        // published yet: the consumer waits on both, so it outlasts the
        // first.
        assert_eq!(
            sigretire_tracker_submit(pair.producer, &fence, &kernel, &mut produced),
            SIGRETIRE_OK
        );
        let mut index = 0;
        assert_eq!(
            sigretire_tracker_reserve(pair.producer, &mut index),
            SIGRETIRE_OK
        );
        let later = sigretire_request {
            aql_index: index,
            ..fence
        };
        assert_eq!(
            sigretire_tracker_acquire(pair.producer, &later, &mut blocker),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_tracker_pin(pair.producer, &produced.ticket, &mut pin),
            SIGRETIRE_OK
        );
        assert_eq!(sigretire_pin_packet_handle(pin, &mut handle), SIGRETIRE_OK);

        // The consumer's barrier-AND waits on the pinned signal (and the
        // blocker's); its tracker takes the pin, then is destroyed while
        // the packet waits.
        let mut wait = sigretire_work {
            kind: sigretire_work_kind::SIGRETIRE_WORK_WAIT_ALL as u32,
            dependency_count: 2,
            ..Default::default()
        };
        wait.dependencies[0] = handle;
        wait.dependencies[1] = blocker.completion_signal;
        let consume = sigretire_request {
            flags: SIGRETIRE_REQUEST_BARRIER,
            ..Default::default()
        };
        assert_eq!(
            sigretire_tracker_submit(pair.consumer, &consume, &wait, &mut consumed),
            SIGRETIRE_OK
        );
        assert_eq!(
            sigretire_tracker_attach(pair.consumer, &consumed.ticket, &mut pin),
            SIGRETIRE_OK
        );
        assert!(pin.is_null());
        assert_eq!(sigretire_tracker_destroy(&mut pair.consumer), SIGRETIRE_OK);
        assert!(pair.consumer.is_null());
    }

    // The producer's packet runs; the consumer's still waits (on the
    // blocker). The producer retires its use but must not re-arm the
    // signal the consumer's packet waits on.
    // SAFETY: as above.
    unsafe { assert_eq!(sigretire_sim_run_until_idle(pair.sim), SIGRETIRE_OK) };
    let mut completed = true;
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            sigretire_sim_packet_completed(pair.sim, 1, consumed.aql_index, &mut completed),
            SIGRETIRE_OK
        );
    }
    assert!(!completed, "the consumer's packet still waits");
    pair.poll_producer();
    assert_eq!(
        pair.violations(),
        0,
        "the producer re-armed a signal a waiting packet names"
    );
    assert_eq!(pair.producer_census().parked, 1, "parked, not re-armed");

    // The blocker is published: the consumer's packet runs. The next poll
    // sees it done and lets go: the signal comes back.
    let marker = sigretire_work {
        kind: sigretire_work_kind::SIGRETIRE_WORK_MARKER as u32,
        ..Default::default()
    };
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            sigretire_tracker_publish(pair.producer, &blocker.ticket, 0, &marker),
            SIGRETIRE_OK
        );
        assert_eq!(sigretire_sim_run_until_idle(pair.sim), SIGRETIRE_OK);
        assert_eq!(
            sigretire_sim_packet_completed(pair.sim, 1, consumed.aql_index, &mut completed),
            SIGRETIRE_OK
        );
    }
    assert!(completed);
    pair.poll_producer();
    let census = pair.producer_census();
    assert_eq!(census.parked, 0, "unparked once the consumer's packet ran");
    assert_eq!(
        census.in_flight + census.armed + census.parked + census.retired,
        census.created
    );
    assert_eq!(pair.violations(), 0);
}

#[test]
fn a_wait_for_a_failed_use_returns_use_failed() {
    let rig = Rig::new(options(), config());
    let doomed = rig.submit(
        SIGRETIRE_REQUEST_BARRIER,
        sigretire_work_kind::SIGRETIRE_WORK_KERNEL,
    );
    let mut status = SIGRETIRE_USE_UNKNOWN;
    // SAFETY: as above.
    let waited = unsafe {
        assert_eq!(sigretire_sim_fail_queue(rig.sim, 0), SIGRETIRE_OK);
        sigretire_tracker_wait(
            rig.tracker,
            &doomed.ticket,
            1_000_000_000,
            null(),
            &mut status,
        )
    };
    // The return value says how the wait ended, as the streams' waits do;
    // the out-parameter says it too.
    assert_eq!(waited, SIGRETIRE_ERR_USE_FAILED);
    assert_eq!(status, SIGRETIRE_USE_FAILED);
}
