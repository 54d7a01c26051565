//! The tracker handle and the functions every backend's tracker answers.

use crate::engine::{CQueue, Core, Engine, HoldObject, PinObject, Refused, WaitSide, bad_ticket};
use crate::handles::{sigretire_hold, sigretire_pin};
use crate::orphans::{self, Shadow, sweep_shadows};
use crate::registry::{self, Kind};
use crate::status::*;
use crate::types::*;
use ::sigretire_tracker::{
    AcquireError, Acquired, FailSubmissionError, PinError, PublishError, Request, Status, Ticket,
    TimestampsError, Tracker, WaitError, WaitPolicy, Work, backend::Publication,
};
use hsa_sys::PacketHeader;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// A completion-signal tracker for one hardware queue (opaque). Made by
/// `sigretire_sim_tracker_create`, `sigretire_rocr_tracker_adopt` or
/// `sigretire_hooks_tracker_create`; destroyed by
/// `sigretire_tracker_destroy`.
///
/// Internally synchronised: any function may be called on it from any
/// thread, concurrently with any other, except `sigretire_tracker_destroy`
/// (the last call on it). Functions marked "Locks" run under the tracker's
/// mutex for the length of the call; none of them waits for the GPU (a
/// full ring answers `SIGRETIRE_ERR_BACKPRESSURE` instead), so the lock is
/// short. `sigretire_tracker_wait` takes no tracker lock: a thread waiting
/// for the GPU never holds up a thread submitting to the same queue.
pub struct sigretire_tracker {
    pub(crate) backend: Backend,
    core: Mutex<Locked>,
    waits: Box<dyn WaitSide>,
    /// Set when a call panicked inside the tracker: its state may be
    /// inconsistent, so it answers nothing more.
    poisoned: AtomicBool,
}

/// What the tracker's lock guards: the tracker, and the library's own
/// references to the signals its consumer uses wait on (`orphans.rs`).
struct Locked {
    core: Box<dyn Core>,
    /// One per pin attached to a consumer use not known done yet.
    shadows: Vec<Shadow>,
}

/// Which backend a tracker runs on, for the backend-specific calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    /// The simulator of this id.
    Sim(u64),
    /// ROCr.
    Rocr,
    /// A runtime's own memory and queue, through hooks.
    Hooks,
}

/// Marks a tracker poisoned if dropped while the thread panics.
struct PoisonOnPanic<'a>(&'a AtomicBool);

impl Drop for PoisonOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Release);
        }
    }
}

impl sigretire_tracker {
    /// A handle over `tracker`, built as `settings` say.
    pub(crate) fn from_tracker<T>(tracker: T, backend: Backend) -> Box<Self>
    where
        T: Tracker + 'static,
        T::Queue: CQueue,
    {
        let waits: Box<dyn WaitSide> = Box::new(tracker.waiter());
        Box::new(Self {
            backend,
            core: Mutex::new(Locked {
                core: Box::new(Engine(tracker)),
                shadows: Vec::new(),
            }),
            waits,
            poisoned: AtomicBool::new(false),
        })
    }

    /// Runs `f` on the tracker under its lock.
    pub(crate) fn with_core<R>(&self, f: impl FnOnce(&mut dyn Core) -> R) -> R {
        self.with_shadows(|core, _| f(core))
    }

    /// Runs `f` on the tracker and its shadows under its lock, then lets go
    /// of the shadows whose consumer is known done now (as the tracker lets
    /// their pins go).
    fn with_shadows<R>(&self, f: impl FnOnce(&mut dyn Core, &mut Vec<Shadow>) -> R) -> R {
        let _poison = PoisonOnPanic(&self.poisoned);
        let mut locked = self.core.lock();
        let Locked { core, shadows } = &mut *locked;
        let result = f(&mut **core, shadows);
        if !shadows.is_empty() {
            sweep_shadows(&**core, shadows);
        }
        result
    }

    /// Runs `f` without the tracker's lock, poisoning the tracker if it panics.
    fn unlocked<R>(&self, f: impl FnOnce() -> R) -> R {
        let _poison = PoisonOnPanic(&self.poisoned);
        f()
    }

    fn c_acquired(&self, acquired: &Acquired) -> sigretire_acquired {
        let p = acquired.publication;
        let mut flags = 0;
        if p.barrier() {
            flags |= SIGRETIRE_ACQUIRED_BARRIER;
        }
        if p.is_copy() {
            flags |= SIGRETIRE_ACQUIRED_COPY_ENGINE;
        }
        sigretire_acquired {
            size: size_of::<sigretire_acquired>() as u32,
            ticket: acquired.ticket,
            completion_signal: acquired.signal,
            aql_index: p.index(),
            ops: p.ops(),
            flags,
            // Type 0 (vendor-specific) contributes no bits: the caller ORs
            // its own packet type in.
            header: PacketHeader::new(0).barrier(p.barrier()).bits(),
            placement: sigretire_placement::from_rust(acquired.placement) as u32,
            wait_for: Ticket::default(),
            count: 0,
        }
    }

    /// Acquires under the lock: records the use, or says why not.
    fn acquire_locked(
        &self,
        core: &mut dyn Core,
        request: Request,
    ) -> Result<sigretire_acquired, AcquireError> {
        let acquired = core.acquire(request)?;
        Ok(self.c_acquired(&acquired))
    }

    /// Why an acquire handed out nothing: the status and sentence, and what
    /// `*out` says about it (the use to wait for, the count).
    fn acquire_failure(&self, error: AcquireError) -> (Fail, sigretire_acquired) {
        let mut answer = sigretire_acquired::default();
        let status = match &error {
            AcquireError::Backpressure {
                wait_for,
                in_flight,
            } => {
                answer.wait_for = *wait_for;
                answer.count = *in_flight as u64;
                SIGRETIRE_ERR_BACKPRESSURE
            }
            AcquireError::AqlIndexOutOfOrder { .. } => SIGRETIRE_ERR_INDEX_ORDER,
            AcquireError::SignalsHeld { held } => {
                answer.count = *held as u64;
                SIGRETIRE_ERR_SIGNALS_HELD
            }
            AcquireError::OutOfSignals(_) => SIGRETIRE_ERR_OUT_OF_SIGNALS,
            AcquireError::Backend(_) => SIGRETIRE_ERR_BACKEND,
        };
        let failure = Fail {
            status,
            message: error.to_string(),
        };
        (failure, answer)
    }
}

/// Writes what a failed acquire says into `*out` where it says something,
/// and returns the failure.
fn report_acquire_failure(
    out: StructOut<sigretire_acquired>,
    (failure, answer): (Fail, sigretire_acquired),
) -> Outcome {
    if matches!(
        failure.status,
        SIGRETIRE_ERR_BACKPRESSURE | SIGRETIRE_ERR_SIGNALS_HELD
    ) {
        out.write(answer);
    }
    Err(failure)
}

/// The tracker behind `ptr`, checked.
///
/// # Safety
/// A live tracker handle in the table of live handles is a live tracker,
/// not destroyed while the call runs (the caller's contract).
pub(crate) unsafe fn tracker_ref<'a>(
    ptr: *const sigretire_tracker,
) -> Outcome<&'a sigretire_tracker> {
    registry::check(ptr, Kind::Tracker, "tracker")?;
    // SAFETY: a live tracker (the table says so; nothing of `ptr` was read
    // before it did), not destroyed while this call runs (contract).
    let tracker = unsafe { &*ptr };
    if tracker.poisoned.load(Ordering::Acquire) {
        return fail(
            SIGRETIRE_ERR_PANIC,
            "an earlier call on this tracker panicked; it answers nothing more: destroy it",
        );
    }
    Ok(tracker)
}

/// Hands a new tracker handle to C.
pub(crate) fn give(out: Out<*mut sigretire_tracker>, tracker: Box<sigretire_tracker>) {
    let ptr = Box::into_raw(tracker);
    registry::register(ptr, Kind::Tracker);
    out.write(ptr);
}

/// Destroys a tracker: its uses are forgotten (packets still in flight
/// complete on the GPU as usual; the tracker's signal memory is kept until
/// the last hold or pin of it is released). Sets `*tracker` to NULL. A NULL
/// `*tracker` is a no-op.
///
/// The pins this tracker keeps for its consumer uses
/// (`sigretire_tracker_attach`) outlive it while those uses' packets have
/// not run: destroying a consumer queue's tracker while its packets still
/// wait on other queues' signals is safe. The producer keeps each such
/// signal parked, not re-armed, until the consumer's packet completed
/// (or failed); the library sees that with at most one load of the
/// consumer's signal (kept allocated meanwhile) at each later
/// `sigretire_tracker_poll` or `sigretire_tracker_reclaim` of any tracker,
/// the producer's included, and at this call. It never reads this
/// tracker's queue after this call: the runtime may destroy the queue
/// next.
///
/// Thread safety: the last call on the tracker; no other call on it may run
/// concurrently or follow.
///
/// # Safety
/// `tracker` points to a variable holding NULL or a live tracker handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_destroy(
    tracker: *mut *mut sigretire_tracker,
) -> sigretire_status {
    guard("sigretire_tracker_destroy", || {
        check_pointer(tracker.cast_const(), "tracker")?;
        // SAFETY: checked non-null and aligned; the caller's variable.
        let handle = unsafe { *tracker };
        if handle.is_null() {
            return Ok(());
        }
        // Out of the table first: of two calls destroying the same handle,
        // only the one that took it out frees it.
        registry::unregister(handle.cast_const(), Kind::Tracker, "*tracker")?;
        // SAFETY: a live tracker from `give` (the table said so), now out of
        // the table, used by nothing else any more (contract): taken back
        // once, here, and freed below; the caller's variable cleared.
        let owned = unsafe {
            *tracker = std::ptr::null_mut();
            Box::from_raw(handle)
        };
        // The pins of consumer uses that have not run yet go with the
        // tracker: keep their signals from being re-armed until the
        // consumers' packets ran (orphans.rs). A tracker that panicked is
        // not asked which those are.
        let sigretire_tracker { core, poisoned, .. } = *owned;
        let Locked { mut core, shadows } = core.into_inner();
        let poisoned = poisoned.into_inner();
        if !shadows.is_empty() {
            orphans::adopt((!poisoned).then_some(&mut *core), shadows);
        }
        drop(core);
        orphans::sweep();
        Ok(())
    })
}

/// Hands out an armed signal for one use: the packet at
/// `request->aql_index` (or the last of `request->ops` packets) completes
/// it. Never blocks: at the ring's limit it answers
/// `SIGRETIRE_ERR_BACKPRESSURE` and fills `out->wait_for` (wait for that
/// use outside your locks, then retry). On `SIGRETIRE_ERR_SIGNALS_HELD`,
/// `out->count` says how many signals are held. On any other failure `*out`
/// is left as it was. A failed acquire changes nothing: retrying is safe.
///
/// Thread safety: Locks. Two threads acquiring on one tracker must agree on
/// the order of their AQL indices (reserve and acquire under one lock of
/// yours, as a queue layer does), or the later index may come first and be
/// refused with `SIGRETIRE_ERR_INDEX_ORDER`.
///
/// # Safety
/// `tracker` is a live tracker; `request` points to a readable
/// `sigretire_request`, `out` to a writable `sigretire_acquired`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_acquire(
    tracker: *mut sigretire_tracker,
    request: *const sigretire_request,
    out: *mut sigretire_acquired,
) -> sigretire_status {
    guard("sigretire_tracker_acquire", || {
        // SAFETY: forwarded caller guarantees.
        let out = unsafe { StructOut::new(out, "out") }?;
        // SAFETY: as above.
        let request = unsafe { read_struct(request, "request") }?.to_rust()?;
        // SAFETY: as above.
        let tracker = unsafe { tracker_ref(tracker) }?;
        match tracker.with_core(|core| tracker.acquire_locked(core, request)) {
            Ok(acquired) => {
                out.write(acquired);
                Ok(())
            }
            Err(error) => report_acquire_failure(out, tracker.acquire_failure(error)),
        }
    })
}

/// Reserves the next packet slot on the tracker's queue, acquires a signal
/// for it as `request` says (its `aql_index` is ignored; `ops` must be 0 or
/// 1, no copy engine), and publishes `work` there with the recorded header
/// and signal, ringing the doorbell: one call per packet. The simulator's
/// and ROCr's trackers only (a hooks tracker answers
/// `SIGRETIRE_ERR_UNSUPPORTED`).
///
/// If no signal could be handed out, the reserved slot is filled with an
/// empty packet that completes no use (so the queue does not stall) and the
/// acquire's status is returned, with `*out` as `sigretire_tracker_acquire`
/// fills it. If publishing fails after the signal was handed out (the queue
/// failed), the use is failed (as `sigretire_tracker_fail_submission` with
/// 0 issued), `*out` names it, and the publish's status is returned.
///
/// Thread safety: Locks (reserve, acquire and publish happen under one lock,
/// so concurrent submitters cannot reorder their indices).
///
/// # Safety
/// `tracker` is a live tracker; `request` and `work` point to readable
/// structs, `out` to a writable `sigretire_acquired`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_submit(
    tracker: *mut sigretire_tracker,
    request: *const sigretire_request,
    work: *const sigretire_work,
    out: *mut sigretire_acquired,
) -> sigretire_status {
    guard("sigretire_tracker_submit", || {
        // SAFETY: forwarded caller guarantees.
        let out = unsafe { StructOut::new(out, "out") }?;
        // SAFETY: as above.
        let request = unsafe { read_struct(request, "request") }?;
        // SAFETY: as above.
        let work = unsafe { read_struct(work, "work") }?;
        let body = work.as_work()?;
        request.to_rust()?;
        if request.ops > 1 || request.flags & SIGRETIRE_REQUEST_COPY_ENGINE != 0 {
            return fail(
                SIGRETIRE_ERR_INVALID_ARGUMENT,
                "sigretire_tracker_submit publishes one AQL packet: a use of several \
                 operations or a copy-engine use goes through sigretire_tracker_acquire",
            );
        }
        // SAFETY: as above.
        let tracker = unsafe { tracker_ref(tracker) }?;
        tracker.with_core(|core| {
            let index = core.reserve()?;
            let request = sigretire_request {
                aql_index: index,
                ..request
            }
            .to_rust()?;
            let acquired = match core.acquire(request) {
                Ok(acquired) => acquired,
                Err(error) => {
                    // Fill the reserved slot so the queue does not stall at
                    // it, then report why no signal came, as acquire does.
                    let _ = core.publish(Publication::unsignalled(index, false), Work::Marker);
                    return report_acquire_failure(out, tracker.acquire_failure(error));
                }
            };
            let answer = tracker.c_acquired(&acquired);
            if let Err(failure) = core.publish(acquired.publication, body) {
                let _ = core.fail_submission(&acquired.ticket, 0);
                let _ = core.publish(acquired.publication.without_completion(), Work::Marker);
                out.write(answer);
                return Err(failure);
            }
            out.write(answer);
            Ok(())
        })
    })
}

/// Reserves the next packet slot on the tracker's queue (every reserved
/// slot must be published, or the queue stalls at it). The simulator's and
/// ROCr's trackers only.
///
/// Thread safety: Locks.
///
/// # Safety
/// `tracker` is a live tracker; `index` points to a writable `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_reserve(
    tracker: *mut sigretire_tracker,
    index: *mut u64,
) -> sigretire_status {
    guard("sigretire_tracker_reserve", || {
        let out = Out::new(index, "index")?;
        // SAFETY: forwarded caller guarantee.
        let tracker = unsafe { tracker_ref(tracker) }?;
        out.write(tracker.with_core(|core| core.reserve())?);
        Ok(())
    })
}

/// Publishes `work` as operation `operation` (0 for a use of one packet;
/// 0 to ops-1, oldest first, for a use of several) of the use `ticket`
/// names: at its recorded index, with its recorded barrier bit and its
/// signal, then rings the doorbell. The header comes from the tracker's
/// record, so it cannot disagree with it. The simulator's and ROCr's
/// trackers only.
///
/// A use known complete or failed already answers
/// `SIGRETIRE_ERR_INVALID_STATE`, as does a use retired long ago.
///
/// A use acquired before a queue change (`sigretire_sim_note_queue_change`,
/// `sigretire_rocr_note_queue_change`) answers
/// `SIGRETIRE_ERR_INVALID_STATE` and nothing is written: its index was
/// reserved on the old queue, and the tracker now publishes on the new one,
/// which never reserved it. Publish every reserved slot before a queue
/// change; a use that missed it cannot complete through the tracker: fail
/// it (`sigretire_tracker_fail_submission` with 0 issued) and fill its slot
/// on the old queue yourself, or that queue stalls there.
///
/// Thread safety: Locks.
///
/// # Safety
/// `tracker` is a live tracker; `ticket` and `work` point to readable
/// structs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_publish(
    tracker: *mut sigretire_tracker,
    ticket: *const Ticket,
    operation: u32,
    work: *const sigretire_work,
) -> sigretire_status {
    guard("sigretire_tracker_publish", || {
        // SAFETY: forwarded caller guarantees.
        let ticket = unsafe { read_in(ticket, "ticket") }?;
        // SAFETY: as above.
        let work = unsafe { read_struct(work, "work") }?;
        let body = work.as_work()?;
        // SAFETY: as above.
        let tracker = unsafe { tracker_ref(tracker) }?;
        tracker.with_core(|core| {
            let publication = match core.publication(&ticket) {
                Ok(publication) => publication,
                Err(PublishError::Ticket(foreign)) => return bad_ticket(foreign),
                Err(PublishError::Settled { seq, status }) => {
                    return fail(
                        SIGRETIRE_ERR_INVALID_STATE,
                        format!(
                            "use {seq} is {} already (or retired): it cannot be published (again)",
                            if status == Status::Failed {
                                "failed"
                            } else {
                                "complete"
                            }
                        ),
                    );
                }
                Err(PublishError::Stale { index, .. }) => {
                    return fail(
                        SIGRETIRE_ERR_INVALID_STATE,
                        format!(
                            "use {} was acquired before a queue change: its index {index} was \
                             reserved on the old queue, not on the tracker's queue now. Fail it \
                             (sigretire_tracker_fail_submission, 0 issued) and fill that slot of \
                             the old queue yourself",
                            ticket.seq
                        ),
                    );
                }
                Err(other) => return fail(SIGRETIRE_ERR_INVALID_STATE, other.to_string()),
            };
            let ops = publication.ops();
            let Some(part) = publication.operations().nth(operation as usize) else {
                return fail(
                    SIGRETIRE_ERR_INVALID_ARGUMENT,
                    format!(
                        "operation {operation} of a use of {ops} operation(s) (0 to {})",
                        ops - 1
                    ),
                );
            };
            core.publish(part, body)
        })
    })
}

/// Publishes `work` at reserved index `aql_index` as a packet that
/// completes no use (a filler for a reserved slot, a wait nobody asks
/// about): `flags` is 0 or `SIGRETIRE_REQUEST_BARRIER`. The simulator's
/// and ROCr's trackers only.
///
/// Thread safety: Locks.
///
/// # Safety
/// `tracker` is a live tracker; `work` points to a readable
/// `sigretire_work`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_publish_unsignalled(
    tracker: *mut sigretire_tracker,
    aql_index: u64,
    flags: u32,
    work: *const sigretire_work,
) -> sigretire_status {
    guard("sigretire_tracker_publish_unsignalled", || {
        // SAFETY: forwarded caller guarantee.
        let work = unsafe { read_struct(work, "work") }?;
        let body = work.as_work()?;
        if flags & !SIGRETIRE_REQUEST_BARRIER != 0 {
            return fail(
                SIGRETIRE_ERR_INVALID_ARGUMENT,
                format!("flags {flags:#x}: only SIGRETIRE_REQUEST_BARRIER applies"),
            );
        }
        // SAFETY: as above.
        let tracker = unsafe { tracker_ref(tracker) }?;
        let publication = Publication::unsignalled(aql_index, flags != 0);
        tracker.with_core(|core| core.publish(publication, body))
    })
}

/// The use's status, proving retirement as cheaply as it can: no memory
/// read when already known, else one probe of the newest fence, else one
/// load of its own signal.
///
/// Thread safety: Locks.
///
/// # Safety
/// `tracker` is a live tracker; `ticket` points to a readable ticket,
/// `status` to a writable `sigretire_use_status`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_query(
    tracker: *mut sigretire_tracker,
    ticket: *const Ticket,
    status: *mut sigretire_use_status,
) -> sigretire_status {
    guard("sigretire_tracker_query", || {
        let out = Out::new(status, "status")?;
        // SAFETY: forwarded caller guarantees.
        let ticket = unsafe { read_in(ticket, "ticket") }?;
        // SAFETY: as above.
        let tracker = unsafe { tracker_ref(tracker) }?;
        let status = tracker
            .with_core(|core| core.query(&ticket))
            .or_else(bad_ticket)?;
        out.write(sigretire_use_status::from_rust(status));
        Ok(())
    })
}

/// What is known about the use without reading signal memory:
/// `SIGRETIRE_USE_UNKNOWN` when only a load could tell.
///
/// Thread safety: any thread, at any time. Answers from what every thread
/// sees without a lock when that suffices (a use retired, or seen complete
/// by a wait); otherwise takes the tracker's lock briefly to ask what only
/// the tracker knows yet (a probe's proof not yet walked). Never waits for
/// the GPU.
///
/// # Safety
/// `tracker` is a live tracker; `ticket` points to a readable ticket,
/// `status` to a writable `sigretire_use_status`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_known_status(
    tracker: *mut sigretire_tracker,
    ticket: *const Ticket,
    status: *mut sigretire_use_status,
) -> sigretire_status {
    guard("sigretire_tracker_known_status", || {
        let out = Out::new(status, "status")?;
        // SAFETY: forwarded caller guarantees.
        let ticket = unsafe { read_in(ticket, "ticket") }?;
        // SAFETY: as above.
        let tracker = unsafe { tracker_ref(tracker) }?;
        // What other threads can see first (no lock, the ticket checked
        // there too); what only the tracker's owner knows yet (a probe's
        // proof not yet walked) under the lock.
        let known = match tracker
            .unlocked(|| tracker.waits.known_status(&ticket))
            .or_else(bad_ticket)?
        {
            Some(status) => Some(status),
            None => tracker
                .with_core(|core| core.known_status(&ticket))
                .or_else(bad_ticket)?,
        };
        out.write(sigretire_use_status::from_known(known));
        Ok(())
    })
}

/// Waits until the use completes or fails, or `timeout_ns` nanoseconds pass.
/// The return value says how the wait ended, as every waiting function of
/// this library says it (`sigretire_stream_synchronize`,
/// `sigretire_event_synchronize`): `SIGRETIRE_OK` when the use completed;
/// `SIGRETIRE_ERR_USE_FAILED` when it failed; `SIGRETIRE_ERR_TIMED_OUT`
/// when the time ran out first. `*status` is written in all three cases
/// (`SIGRETIRE_USE_COMPLETE`, `_FAILED`, `_PENDING`), so a caller may read
/// either. `policy` may be NULL (spin, then yield, then sleep:
/// `sigretire_wait_policy_spin`); one of an earlier header (40 bytes, no
/// `hybrid` fields) is a policy that is not hybrid, and a `hybrid` other
/// than 0 or 1, or a hybrid one with `hybrid_recheck_ns` 0, is
/// `SIGRETIRE_ERR_INVALID_ARGUMENT`. Never reports a completion that did
/// not happen. Seeing the signal at 0 is recorded, so the tracker later
/// retires the use without a load of its own.
///
/// Thread safety: takes no tracker lock, so other threads keep submitting
/// while it waits; callable from any number of threads at once.
///
/// # Safety
/// `tracker` is a live tracker; `ticket` points to a readable ticket;
/// `policy` is NULL or readable; `status` points to a writable
/// `sigretire_use_status`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_wait(
    tracker: *mut sigretire_tracker,
    ticket: *const Ticket,
    timeout_ns: u64,
    policy: *const sigretire_wait_policy,
    status: *mut sigretire_use_status,
) -> sigretire_status {
    guard("sigretire_tracker_wait", || {
        let out = Out::new(status, "status")?;
        // SAFETY: forwarded caller guarantees.
        let ticket = unsafe { read_in(ticket, "ticket") }?;
        // SAFETY: as above.
        let policy = unsafe {
            read_optional_struct(policy, "policy", || {
                sigretire_wait_policy::from_rust(WaitPolicy::spin())
            })
        }?
        .to_rust()?;
        // SAFETY: as above.
        let tracker = unsafe { tracker_ref(tracker) }?;
        let waited = tracker.unlocked(|| tracker.waits.wait(&ticket, nanos(timeout_ns), policy));
        let status = match waited {
            Ok(status) => status,
            Err(WaitError::TimedOut(timed_out)) => {
                out.write(SIGRETIRE_USE_PENDING);
                return fail(SIGRETIRE_ERR_TIMED_OUT, timed_out.to_string());
            }
            Err(WaitError::Foreign(foreign)) => bad_ticket(foreign)?,
        };
        out.write(sigretire_use_status::from_rust(status));
        if status == Status::Failed {
            return fail(
                SIGRETIRE_ERR_USE_FAILED,
                "the use failed (its queue reported an error, or its submission failed): its \
                 work will not complete",
            );
        }
        Ok(())
    })
}

/// A counted reference that keeps the use's signal from being re-armed
/// (for an event, an async handler): `*hold` is the new handle, or NULL
/// when the use is already known done (nothing left to hold; ask
/// `sigretire_tracker_query` which). Release it with
/// `sigretire_hold_release`; it may outlive the tracker.
///
/// Thread safety: Locks.
///
/// # Safety
/// `tracker` is a live tracker; `ticket` points to a readable ticket,
/// `hold` to a writable handle variable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_hold(
    tracker: *mut sigretire_tracker,
    ticket: *const Ticket,
    hold: *mut *mut sigretire_hold,
) -> sigretire_status {
    guard("sigretire_tracker_hold", || {
        let out = Out::new(hold, "hold")?;
        // SAFETY: forwarded caller guarantees.
        let ticket = unsafe { read_in(ticket, "ticket") }?;
        // SAFETY: as above.
        let tracker = unsafe { tracker_ref(tracker) }?;
        let held: Option<Box<dyn HoldObject>> = tracker
            .with_core(|core| core.hold(&ticket))
            .or_else(bad_ticket)?;
        out.write(held.map_or(std::ptr::null_mut(), sigretire_hold::into_raw));
        Ok(())
    })
}

/// The signal another queue's packet may wait on (its `dep_signal`),
/// pinned until that consumer lets go: `*pin` is the new handle, or NULL
/// when the use is already known complete (emit no dependency at all). A
/// failed use answers `SIGRETIRE_ERR_USE_FAILED` (nothing may wait on it).
/// Give the pin to the consumer queue's tracker with
/// `sigretire_tracker_attach`, or release it with `sigretire_pin_release`.
///
/// Thread safety: Locks.
///
/// # Safety
/// `tracker` is a live tracker; `ticket` points to a readable ticket,
/// `pin` to a writable handle variable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_pin(
    tracker: *mut sigretire_tracker,
    ticket: *const Ticket,
    pin: *mut *mut sigretire_pin,
) -> sigretire_status {
    guard("sigretire_tracker_pin", || {
        let out = Out::new(pin, "pin")?;
        // SAFETY: forwarded caller guarantees.
        let ticket = unsafe { read_in(ticket, "ticket") }?;
        // SAFETY: as above.
        let tracker = unsafe { tracker_ref(tracker) }?;
        let failed = |seq: u64| {
            fail(
                SIGRETIRE_ERR_USE_FAILED,
                format!("use {seq} failed: nothing can wait on it"),
            )
        };
        type Pinned = (Box<dyn PinObject>, Option<Box<dyn HoldObject>>);
        // With the pin, a hold of the same use: the library's own
        // reference, which outlives the consumer's tracker if need be
        // (orphans.rs).
        let pinned: Option<Pinned> = match tracker.with_core(|core| {
            let Some(pin) = core.pin(&ticket)? else {
                return Ok(None);
            };
            Ok(Some((pin, core.hold(&ticket)?)))
        }) {
            Ok(pinned) => pinned,
            Err(PinError::Failed { seq }) => return failed(seq),
            Err(PinError::Foreign(foreign)) => bad_ticket(foreign)?,
        };
        out.write(pinned.map_or(std::ptr::null_mut(), |(pin, shadow)| {
            sigretire_pin::into_raw(pin, shadow)
        }));
        Ok(())
    })
}

/// Keeps the pin `*pin` until the use `consumer` of this tracker (the
/// packet that waits on it) has retired, or this queue drained, or, if this
/// tracker is destroyed first, until the consumer's packet completed (see
/// `sigretire_tracker_destroy`). On `SIGRETIRE_OK` the tracker owns the
/// pin: the handle is freed and `*pin` set to NULL (released at once if
/// the consumer already retired). On failure the pin stays the caller's,
/// still pinned.
///
/// Thread safety: Locks. No other call on the same pin handle may run
/// concurrently.
///
/// # Safety
/// `tracker` is a live tracker; `consumer` points to a readable ticket;
/// `pin` points to a variable holding a live pin handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_attach(
    tracker: *mut sigretire_tracker,
    consumer: *const Ticket,
    pin: *mut *mut sigretire_pin,
) -> sigretire_status {
    guard("sigretire_tracker_attach", || {
        check_pointer(pin.cast_const(), "pin")?;
        // SAFETY: forwarded caller guarantees.
        let consumer = unsafe { read_in(consumer, "consumer") }?;
        // SAFETY: `pin` was checked; the caller's variable.
        let handle = unsafe { *pin };
        // SAFETY: a live pin handle by contract (checked as far as it can be).
        let pinned = unsafe { sigretire_pin::get_mut(handle, "*pin") }?;
        // SAFETY: as above.
        let tracker = unsafe { tracker_ref(tracker) }?;
        let Some(object) = pinned.take() else {
            return fail(
                SIGRETIRE_ERR_BAD_HANDLE,
                "`*pin` holds no pin (a call on it panicked half-way)",
            );
        };
        if !tracker.with_core(|core| core.accepts(object.as_ref())) {
            pinned.put_back_pin(object);
            return fail(
                SIGRETIRE_ERR_WRONG_BACKEND,
                "the pin is of a tracker of another backend: attach it to a tracker of the same \
                 kind of signal memory",
            );
        }
        let mut shadow = pinned.take_shadow();
        let attached: Result<(), Refused> = tracker.with_shadows(|core, shadows| {
            // A consumer retired already: the tracker drops the pin at once.
            core.attach(&consumer, object)?;
            // The library's own reference to the signal goes with the pin
            // (dropped by the sweep if the consumer is known done already).
            if let Some(producer) = shadow.take() {
                shadows.push(Shadow { consumer, producer });
            }
            Ok(())
        });
        if let Err(refused) = attached {
            pinned.put_back(refused.pin, shadow);
            return Err(refused.failure);
        }
        // SAFETY: the handle is live (checked above) and now empty; no other
        // call uses it (contract): freed once, here, and the caller's
        // variable cleared.
        unsafe {
            sigretire_pin::free(handle, "*pin")?;
            *pin = std::ptr::null_mut();
        }
        Ok(())
    })
}

/// Proves what it can with at most one load (fence probing: the newest
/// fence the read index nominates), without re-arming anything.
/// `*proved` says whether it proved anything new.
///
/// Thread safety: Locks.
///
/// # Safety
/// `tracker` is a live tracker; `proved` points to a writable `bool`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_probe(
    tracker: *mut sigretire_tracker,
    proved: *mut bool,
) -> sigretire_status {
    guard("sigretire_tracker_probe", || {
        let out = Out::new(proved, "proved")?;
        // SAFETY: forwarded caller guarantee.
        let tracker = unsafe { tracker_ref(tracker) }?;
        out.write(tracker.with_core(|core| core.probe()));
        Ok(())
    })
}

/// Probes, then reclaims: `*rearmed` is the number of signals re-armed. A
/// runtime calls it now and then (after a batch of submissions, from a
/// completion thread). First lets go of the pins of destroyed trackers
/// whose consumer packets ran (see `sigretire_tracker_destroy`).
///
/// Thread safety: Locks.
///
/// # Safety
/// `tracker` is a live tracker; `rearmed` points to a writable `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_poll(
    tracker: *mut sigretire_tracker,
    rearmed: *mut usize,
) -> sigretire_status {
    guard("sigretire_tracker_poll", || {
        let out = Out::new(rearmed, "rearmed")?;
        // SAFETY: forwarded caller guarantee.
        let tracker = unsafe { tracker_ref(tracker) }?;
        // First the pins of destroyed trackers' consumers that ran: their
        // signals may be this tracker's.
        orphans::sweep();
        out.write(tracker.with_core(|core| core.poll()));
        Ok(())
    })
}

/// Re-arms retired signals, oldest use first, reading no signal memory of
/// this tracker: `*rearmed` is the number re-armed. First lets go of the
/// pins of destroyed trackers whose consumer packets ran (one load of each
/// such consumer's signal; see `sigretire_tracker_destroy`).
///
/// Thread safety: Locks.
///
/// # Safety
/// `tracker` is a live tracker; `rearmed` points to a writable `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_reclaim(
    tracker: *mut sigretire_tracker,
    rearmed: *mut usize,
) -> sigretire_status {
    guard("sigretire_tracker_reclaim", || {
        let out = Out::new(rearmed, "rearmed")?;
        // SAFETY: forwarded caller guarantee.
        let tracker = unsafe { tracker_ref(tracker) }?;
        // As in sigretire_tracker_poll.
        orphans::sweep();
        out.write(tracker.with_core(|core| core.reclaim()));
        Ok(())
    })
}

/// The use's timestamps, harvested once into host memory, in ticks of
/// `sigretire_tracker_timestamp_frequency`. `out->state` says what it got:
/// `SIGRETIRE_TIMESTAMPS_AVAILABLE` (`start` and `end` are the stamps);
/// `SIGRETIRE_TIMESTAMPS_NONE` while the use is pending, or if it was not
/// timed or failed; `SIGRETIRE_TIMESTAMPS_UNSTAMPED` for a timed use that
/// completed but was never stamped and never will be (a queue without
/// profiling, work the backend does not stamp). `SIGRETIRE_ERR_EXPIRED`
/// once they are no longer kept: the last `stamp_history` timed uses keep
/// them, and a use keeps them for as long as a `sigretire_hold` of it
/// lives (its ticket answers as long as that).
///
/// Thread safety: Locks.
///
/// # Safety
/// `tracker` is a live tracker; `ticket` points to a readable ticket,
/// `out` to a writable `sigretire_timestamps`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_timestamps(
    tracker: *mut sigretire_tracker,
    ticket: *const Ticket,
    out: *mut sigretire_timestamps,
) -> sigretire_status {
    guard("sigretire_tracker_timestamps", || {
        // SAFETY: forwarded caller guarantees.
        let out = unsafe { StructOut::new(out, "out") }?;
        // SAFETY: forwarded caller guarantees.
        let ticket = unsafe { read_in(ticket, "ticket") }?;
        // SAFETY: as above.
        let tracker = unsafe { tracker_ref(tracker) }?;
        let expired = |seq: u64| {
            fail(
                SIGRETIRE_ERR_EXPIRED,
                format!(
                    "the timestamps of use {seq} are no longer kept; hold a use to keep its stamps"
                ),
            )
        };
        let harvested = tracker.with_core(|core| {
            let stamps = core.timestamps(&ticket)?;
            // Asked after the harvest, which proves completion when it
            // can: a timed use known complete without stamps has none to
            // come.
            let complete = core.known_status(&ticket)? == Some(Status::Complete);
            Ok((stamps, complete && ticket.is_timed()))
        });
        let answer = match harvested {
            Ok((stamps, done)) => sigretire_timestamps::from_rust(stamps, done),
            Err(TimestampsError::Expired { seq }) => return expired(seq),
            Err(TimestampsError::Foreign(foreign)) => bad_ticket(foreign)?,
        };
        out.write(answer);
        Ok(())
    })
}

/// Ticks per second of the tracker's timestamps (the backend's clock).
///
/// Thread safety: takes no lock.
///
/// # Safety
/// `tracker` is a live tracker; `hz` points to a writable `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_timestamp_frequency(
    tracker: *mut sigretire_tracker,
    hz: *mut u64,
) -> sigretire_status {
    guard("sigretire_tracker_timestamp_frequency", || {
        let out = Out::new(hz, "hz")?;
        // SAFETY: forwarded caller guarantee.
        let tracker = unsafe { tracker_ref(tracker) }?;
        out.write(tracker.unlocked(|| tracker.waits.timestamp_frequency()));
        Ok(())
    })
}

/// The queue the tracker watches is known idle (every packet submitted to
/// it so far completed): retires the current generation's uses and
/// releases the pins they held as consumers.
///
/// Thread safety: Locks.
///
/// # Safety
/// `tracker` is a live tracker.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_note_drained(
    tracker: *mut sigretire_tracker,
) -> sigretire_status {
    guard("sigretire_tracker_note_drained", || {
        // SAFETY: forwarded caller guarantee.
        let tracker = unsafe { tracker_ref(tracker) }?;
        tracker.with_core(|core| core.note_drained());
        Ok(())
    })
}

/// The queue reported an error: every pending use on it fails (once).
/// `*failed` is how many failed now.
///
/// Thread safety: Locks.
///
/// # Safety
/// `tracker` is a live tracker; `failed` points to a writable `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_fail_queue(
    tracker: *mut sigretire_tracker,
    failed: *mut usize,
) -> sigretire_status {
    guard("sigretire_tracker_fail_queue", || {
        let out = Out::new(failed, "failed")?;
        // SAFETY: forwarded caller guarantee.
        let tracker = unsafe { tracker_ref(tracker) }?;
        out.write(tracker.with_core(|core| core.fail_queue()));
        Ok(())
    })
}

/// The submission of the use failed after issuing `issued` of its
/// operations: the use fails, and its signal is reset only once the issued
/// part finished. `SIGRETIRE_ERR_INVALID_STATE` for a use already known
/// complete, failed or retired, or whose operations were all issued.
///
/// Thread safety: Locks.
///
/// # Safety
/// `tracker` is a live tracker; `ticket` points to a readable ticket.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_fail_submission(
    tracker: *mut sigretire_tracker,
    ticket: *const Ticket,
    issued: u32,
) -> sigretire_status {
    guard("sigretire_tracker_fail_submission", || {
        // SAFETY: forwarded caller guarantees.
        let ticket = unsafe { read_in(ticket, "ticket") }?;
        // SAFETY: as above.
        let tracker = unsafe { tracker_ref(tracker) }?;
        match tracker.with_core(|core| core.fail_submission(&ticket, issued)) {
            Ok(()) => Ok(()),
            Err(error @ FailSubmissionError::InvalidState { .. }) => {
                fail(SIGRETIRE_ERR_INVALID_STATE, error.to_string())
            }
            Err(FailSubmissionError::Foreign(foreign)) => bad_ticket(foreign),
        }
    })
}

/// The current queue generation (a queue change starts a new one).
///
/// Thread safety: Locks.
///
/// # Safety
/// `tracker` is a live tracker; `generation` points to a writable `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_generation(
    tracker: *mut sigretire_tracker,
    generation: *mut u32,
) -> sigretire_status {
    guard("sigretire_tracker_generation", || {
        let out = Out::new(generation, "generation")?;
        // SAFETY: forwarded caller guarantee.
        let tracker = unsafe { tracker_ref(tracker) }?;
        out.write(tracker.with_core(|core| core.generation().value()));
        Ok(())
    })
}

/// A snapshot of every counter.
///
/// Thread safety: Locks.
///
/// # Safety
/// `tracker` is a live tracker; `stats` points to a writable
/// `sigretire_stats`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_stats(
    tracker: *mut sigretire_tracker,
    stats: *mut sigretire_stats,
) -> sigretire_status {
    guard("sigretire_tracker_stats", || {
        // SAFETY: forwarded caller guarantee.
        let out = unsafe { StructOut::new(stats, "stats") }?;
        // SAFETY: forwarded caller guarantee.
        let tracker = unsafe { tracker_ref(tracker) }?;
        out.write(sigretire_stats::from_rust(
            tracker.with_core(|core| core.stats()),
        ));
        Ok(())
    })
}

/// Where every signal is.
///
/// Thread safety: Locks.
///
/// # Safety
/// `tracker` is a live tracker; `census` points to a writable
/// `sigretire_census`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigretire_tracker_census(
    tracker: *mut sigretire_tracker,
    census: *mut sigretire_census,
) -> sigretire_status {
    guard("sigretire_tracker_census", || {
        // SAFETY: forwarded caller guarantee.
        let out = unsafe { StructOut::new(census, "census") }?;
        // SAFETY: forwarded caller guarantee.
        let tracker = unsafe { tracker_ref(tracker) }?;
        out.write(sigretire_census::from_rust(
            tracker.with_core(|core| core.census()),
        ));
        Ok(())
    })
}

/// Fails unless the tracker runs on `expected` (for the backend-specific
/// calls).
pub(crate) fn require_backend(
    tracker: &sigretire_tracker,
    expected: &str,
    matches: impl FnOnce(Backend) -> bool,
) -> Outcome {
    if matches(tracker.backend) {
        Ok(())
    } else {
        fail(
            SIGRETIRE_ERR_WRONG_BACKEND,
            format!(
                "this function is for a tracker on {expected}; this one runs on {:?}",
                tracker.backend
            ),
        )
    }
}

/// A retiring tracker as `settings` configure it, over `memory` and `queue`.
pub(crate) fn build<M, Q>(
    memory: std::sync::Arc<M>,
    queue: Q,
    settings: Settings,
    backend: Backend,
) -> Outcome<Box<sigretire_tracker>>
where
    M: ::sigretire_tracker::backend::SignalMemory,
    Q: CQueue + Send,
{
    ::sigretire_tracker::RetiringTracker::new(memory, queue, settings.config)
        .map(|t| sigretire_tracker::from_tracker(t, backend))
        .or_else(created_failure)
}

/// Why a tracker could not be made, as a status.
pub(crate) fn created_failure<T>(error: ::sigretire_tracker::CreateError) -> Outcome<T> {
    let status = match error {
        ::sigretire_tracker::CreateError::InvalidConfig(_) => SIGRETIRE_ERR_INVALID_CONFIG,
        ::sigretire_tracker::CreateError::OutOfSignals(_) => SIGRETIRE_ERR_OUT_OF_SIGNALS,
        ::sigretire_tracker::CreateError::Backend(_) => SIGRETIRE_ERR_BACKEND,
    };
    fail(status, error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{sigretire_sim_create, sigretire_sim_destroy, sigretire_sim_tracker_create};
    use std::ptr::{null, null_mut};

    #[test]
    fn a_panic_inside_a_tracker_poisons_it_and_only_destroy_is_left() {
        let mut sim = null_mut();
        let mut tracker = null_mut();
        // SAFETY: pointers to locals; NULL options and config (defaults).
        unsafe {
            assert_eq!(sigretire_sim_create(null(), &mut sim), SIGRETIRE_OK);
            assert_eq!(
                sigretire_sim_tracker_create(sim, 0, null(), &mut tracker),
                SIGRETIRE_OK
            );
        }
        // A body that panics with the tracker's lock held, as a bug would.
        let status = guard("sigretire_test", || {
            // SAFETY: the live tracker made above.
            let handle = unsafe { tracker_ref(tracker) }?;
            handle.with_core(|_| -> Outcome { panic!("a bug inside the tracker") })
        });
        assert_eq!(status, SIGRETIRE_ERR_PANIC);
        let mut stats = sigretire_stats::default();
        // SAFETY: the live (poisoned) tracker and a local.
        let after = unsafe { sigretire_tracker_stats(tracker, &mut stats) };
        assert_eq!(
            after, SIGRETIRE_ERR_PANIC,
            "a poisoned tracker answers nothing more"
        );
        assert!(last_error().contains("destroy it"), "{}", last_error());
        // SAFETY: the caller's variables of the handles made above.
        unsafe {
            assert_eq!(sigretire_tracker_destroy(&mut tracker), SIGRETIRE_OK);
            assert_eq!(sigretire_sim_destroy(&mut sim), SIGRETIRE_OK);
        }
    }
}
