//! Loom models of the tracker's concurrent protocols, run with
//! `RUSTFLAGS="--cfg sigretire_loom" cargo test -p sigretire-tracker --test loom_protocols --release`
//! (see `.ci/loom`). Each model runs the real tracker code on the crate's
//! host-memory backend ([`HostMemory`], loom-aware through the crate's
//! `sync` shim), or on [`GpuMemory`], which adds timestamps, failures and a
//! witness of its own lifetime; the "GPU" is the model completing a packet's
//! signal.
#![cfg(sigretire_loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use sigretire_tracker::{
    Config, Placement, Purpose, Request, RetiringTracker, Status, TimestampClock, Timestamps,
    Tracker,
    backend::{AllocError, HostMemory, QueueView, SignalMemory},
};
use std::sync as ghost;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

/// A queue whose read index the model sets.
struct ModelQueue(Arc<AtomicUsize>);

impl QueueView for ModelQueue {
    fn read_index(&self) -> u64 {
        self.0.load(Ordering::Acquire) as u64
    }

    fn ring_in_device_memory(&self) -> bool {
        true
    }
}

fn small_tracker<M: SignalMemory>(
    memory: &Arc<M>,
    signals: usize,
) -> (RetiringTracker<M, ModelQueue>, Arc<AtomicUsize>) {
    let read = Arc::new(AtomicUsize::new(0));
    let config = Config {
        initial_size: signals,
        growth_limit: 1,
        refill_batch: 1,
        ..Config::default()
    };
    let tracker = RetiringTracker::new(memory.clone(), ModelQueue(read.clone()), config).unwrap();
    (tracker, read)
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    // LOOM_MAX_PREEMPTIONS overrides; 3 explores every bug planted so far
    // and keeps CI's run to seconds.
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = builder.preemption_bound.or(Some(3));
    builder.check(f);
}

/// [`HostMemory`] plus what some models need of a signal that it leaves out:
/// the timestamps the packet processor writes, a failing queue's negative
/// value, and a witness of the memory's own lifetime.
struct GpuMemory {
    host: HostMemory,
    /// Per signal, the start and end stamps of its last completed packet.
    stamps: Box<[[AtomicU64; 2]]>,
    witness: ghost::Arc<Witness>,
}

/// Bookkeeping about a model run, not part of the protocol (`ghost` is
/// `std::sync`): loom runs one model thread at a time, so std atomics record
/// the real order of the execution without adding interleavings of their own.
#[derive(Debug, Default)]
struct Witness {
    /// How many parties (the tracker's owner, a handler) may touch the
    /// memory; 0: nobody counts them.
    parties: usize,
    /// How many of them have begun to let go.
    letting_go: ghost::atomic::AtomicUsize,
    /// How many times the memory was dropped.
    frees: ghost::atomic::AtomicUsize,
    /// The thread that dropped it.
    freed_on: ghost::Mutex<Option<loom::thread::ThreadId>>,
}

impl Witness {
    fn of(parties: usize) -> ghost::Arc<Self> {
        ghost::Arc::new(Self {
            parties,
            ..Self::default()
        })
    }

    /// A party is about to drop its last handle on the memory.
    fn letting_go(&self) {
        self.letting_go.fetch_add(1, SeqCst);
    }

    fn frees(&self) -> usize {
        self.frees.load(SeqCst)
    }
}

impl GpuMemory {
    fn new(capacity: usize) -> Self {
        Self::watched(capacity, Default::default())
    }

    fn watched(capacity: usize, witness: ghost::Arc<Witness>) -> Self {
        Self {
            host: HostMemory::new(capacity),
            stamps: (0..capacity)
                .map(|_| [AtomicU64::new(0), AtomicU64::new(0)])
                .collect(),
            witness,
        }
    }

    /// Every access checks the memory was not freed (a free that comes too
    /// early already fails in `drop`).
    fn touch(&self) {
        assert_eq!(
            self.witness.frees(),
            0,
            "signal memory touched after it was freed"
        );
    }

    /// The packet processor completes the packet whose completion handle is
    /// `handle`, writing its timestamps first.
    fn finish(&self, handle: u64, stamps: Timestamps) {
        self.touch();
        let [start, end] = &self.stamps[handle as usize - 1];
        start.store(stamps.start, Ordering::Relaxed);
        end.store(stamps.end, Ordering::Relaxed);
        self.host.complete(handle);
    }

    /// The queue fails: the packet's signal goes negative.
    fn fail(&self, handle: u64) {
        self.touch();
        // SAFETY: `handle` came from `packet_handle`, so `handle - 1` is one
        // of this memory's signals.
        unsafe { self.host.store(handle as usize - 1, -1) };
    }

    /// The signal's value, as the GPU reads it.
    fn value(&self, handle: u64) -> i64 {
        self.touch();
        self.host.value(handle)
    }
}

impl SignalMemory for GpuMemory {
    type Signal = usize;

    fn allocate(
        &self,
        count: usize,
        placement: Placement,
        out: &mut Vec<(usize, Placement)>,
    ) -> Result<(), AllocError> {
        self.touch();
        self.host.allocate(count, placement, out)
    }

    unsafe fn load(&self, signal: usize) -> i64 {
        self.touch();
        // SAFETY: forwarded caller guarantee.
        unsafe { self.host.load(signal) }
    }

    unsafe fn store(&self, signal: usize, value: i64) {
        self.touch();
        // SAFETY: forwarded caller guarantee.
        unsafe { self.host.store(signal, value) }
    }

    fn store_fence(&self) {
        self.touch();
    }

    fn hdp_flush(&self) {
        self.touch();
    }

    unsafe fn timestamps(&self, signal: usize) -> Option<Timestamps> {
        self.touch();
        let [start, end] = &self.stamps[signal];
        Some(Timestamps {
            start: start.load(Ordering::Relaxed),
            end: end.load(Ordering::Relaxed),
        })
    }

    fn timestamp_clock(&self) -> TimestampClock {
        TimestampClock::NANOSECONDS
    }

    fn packet_handle(&self, signal: usize) -> u64 {
        self.touch();
        self.host.packet_handle(signal)
    }

    fn shares_signals_with(&self, other: &Self) -> bool {
        core::ptr::eq(self, other)
    }
}

impl Drop for GpuMemory {
    fn drop(&mut self) {
        let witness = &self.witness;
        // Checked here, at the free, before anything can touch freed memory.
        if witness.parties > 0 {
            assert_eq!(
                witness.letting_go.load(SeqCst),
                witness.parties,
                "signal memory freed while a party could still touch it"
            );
        }
        *witness.freed_on.lock().unwrap() = Some(loom::thread::current().id());
        witness.frees.fetch_add(1, SeqCst);
    }
}

/// The stamps the model's packet processor writes for use `seq`.
const fn stamps_of(seq: u64) -> Timestamps {
    Timestamps {
        start: 10 * seq + 1,
        end: 10 * seq + 2,
    }
}

/// The last reference dropped on another thread while the tracker retires
/// the use and parks (or directly re-arms) its signal: the holder never sees
/// its signal re-armed, and the signal always comes back exactly once.
#[test]
fn last_reference_drop_versus_parking() {
    model(|| {
        let memory = Arc::new(HostMemory::new(4));
        let (mut tracker, read) = small_tracker(&memory, 2);
        let acquired = tracker.acquire(Request::packet(0).barrier(true)).unwrap();
        let event = tracker.hold(&acquired.ticket).unwrap().expect("pending");
        memory.complete(acquired.signal);
        read.store(1, Ordering::Release);

        let holder = {
            let memory = memory.clone();
            loom::thread::spawn(move || {
                // The holder still reads its use's outcome, never a re-arm.
                assert_eq!(event.status(), Status::Complete);
                assert_eq!(memory.value(event.packet_handle()), 0);
                drop(event);
            })
        };
        tracker.poll();
        holder.join().unwrap();
        tracker.reclaim();
        let census = tracker.census();
        assert_eq!(
            census.parked,
            0,
            "the parked signal came back: {census:?} {:?}",
            tracker.stats()
        );
        // Every signal is armed again: the ring's two slots, plus the spare
        // that took the parked signal's place if parking happened.
        assert_eq!(census.armed, census.created);
        assert!(census.is_balanced());
        assert_eq!(
            memory.value(acquired.signal),
            1,
            "re-armed exactly once, after the holder"
        );
    });
}

/// A GPU waiter's pin released (its consumer retired on another tracker's
/// thread) while the producer reclaims: the waiter's reads see the producer's
/// completion, never the re-arm, and the signal returns.
#[test]
fn pin_release_versus_rearm() {
    model(|| {
        let memory = Arc::new(HostMemory::new(6));
        let (mut producer, producer_read) = small_tracker(&memory, 2);
        let (mut consumer, consumer_read) = small_tracker(&memory, 2);
        let produced = producer.acquire(Request::packet(0).barrier(true)).unwrap();
        let pin = producer.pin(&produced.ticket).unwrap().expect("pending");
        let dependency = pin.packet_handle();
        let consuming = consumer.acquire(Request::packet(0).barrier(true)).unwrap();
        consumer.attach(&consuming.ticket, pin).unwrap();

        // The GPU: the producer completes, the consumer's barrier reads the
        // dependency at 0 and completes.
        memory.complete(produced.signal);
        producer_read.store(1, Ordering::Release);

        let consumer_thread = {
            let memory = memory.clone();
            loom::thread::spawn(move || {
                assert_eq!(
                    memory.value(dependency),
                    0,
                    "the waiter sees the completion it waits for"
                );
                memory.complete(consuming.signal);
                consumer_read.store(1, Ordering::Release);
                consumer.poll(); // retires the consumer: drops the pin
                consumer
            })
        };
        producer.poll();
        let consumer = consumer_thread.join().unwrap();
        producer.reclaim();
        assert_eq!(producer.census().parked, 0);
        assert_eq!(memory.value(produced.signal), 1);
        assert!(consumer.census().is_balanced());
    });
}

/// A CPU wait outside the tracker's lock while the owner keeps submitting
/// and re-arming the same signals: the waiter never reports completion before
/// the GPU completed, and always learns it.
#[test]
fn cpu_wait_versus_concurrent_submit() {
    model(|| {
        let memory = Arc::new(HostMemory::new(4));
        let (mut tracker, read) = small_tracker(&memory, 1);
        let first = tracker.acquire(Request::packet(0).barrier(true)).unwrap();
        let gpu_done = Arc::new(AtomicUsize::new(0));
        let waiter = tracker.waiter();

        let waiting = {
            let gpu_done = gpu_done.clone();
            loom::thread::spawn(move || {
                loop {
                    match waiter.status(&first.ticket).unwrap() {
                        Status::Pending => loom::thread::yield_now(),
                        status => {
                            assert_eq!(
                                gpu_done.load(Ordering::Acquire),
                                1,
                                "completion reported early"
                            );
                            return status;
                        }
                    }
                }
            })
        };
        // The GPU completes the first use, then the owner proves it, re-arms
        // the only signal and hands it to the next use.
        gpu_done.store(1, Ordering::Release);
        memory.complete(first.signal);
        read.store(1, Ordering::Release);
        let second = loop {
            match tracker.acquire(Request::packet(1).barrier(true)) {
                Ok(acquired) => break acquired,
                Err(_) => loom::thread::yield_now(),
            }
        };
        assert_eq!(second.signal, first.signal, "one signal, re-armed");
        assert_eq!(waiting.join().unwrap(), Status::Complete);
        assert_eq!(tracker.query(&first.ticket).unwrap(), Status::Complete);
        assert_eq!(tracker.query(&second.ticket).unwrap(), Status::Pending);
        let _ = Duration::ZERO;
    });
}

/// A waiter on another thread checks a ticket (its slot, its generation and
/// timed flag against what its signal's cell says) without the lock, while
/// the owner retires the use and hands the one signal to a use labelled
/// otherwise (timed): the genuine ticket is never refused, whichever label
/// the check reads, and never answers for the later use.
#[test]
fn a_ticket_is_checked_without_a_lock_while_its_signal_moves_on() {
    model(|| {
        let memory = Arc::new(HostMemory::new(4));
        let (mut tracker, read) = small_tracker(&memory, 1);
        let first = tracker.acquire(Request::packet(0).barrier(true)).unwrap();
        let waiter = tracker.waiter();
        let checking = loom::thread::spawn(move || {
            for _ in 0..2 {
                match waiter.known_status(&first.ticket) {
                    Ok(None | Some(Status::Complete)) => loom::thread::yield_now(),
                    other => panic!("the genuine ticket answered {other:?}"),
                }
            }
        });
        memory.complete(first.signal);
        read.store(1, Ordering::Release);
        let second = loop {
            match tracker.acquire(Request::packet(1).barrier(true).timed(true)) {
                Ok(acquired) => break acquired,
                Err(_) => loom::thread::yield_now(),
            }
        };
        assert_eq!(second.signal, first.signal, "one signal, re-armed");
        assert_eq!(second.ticket.slot, first.ticket.slot);
        checking.join().unwrap();
        assert_eq!(
            tracker.known_status(&first.ticket),
            Ok(Some(Status::Complete))
        );
        assert_eq!(tracker.known_status(&second.ticket), Ok(None));
    });
}

/// A waiter on another thread records completions while the owner meets a
/// full ring at its limit: whatever it learned, and whenever, the owner's
/// acquire either gets a signal or names a use to wait for; it never turns
/// a full ring whose uses are all done into a hard error (nothing is held).
#[test]
fn cpu_wait_versus_acquire_at_the_ring_limit() {
    model(|| {
        let memory = Arc::new(HostMemory::new(4));
        let (mut tracker, _read) = small_tracker(&memory, 2);
        // No barrier bit: no fence proves them, only their own signals do.
        let uses = [0, 1].map(|index| tracker.acquire(Request::packet(index)).unwrap());
        let waiter = tracker.waiter();
        let tickets = uses.map(|acquired| acquired.ticket);
        let waiting = loom::thread::spawn(move || {
            for ticket in &tickets {
                while waiter.status(ticket).unwrap() != Status::Complete {
                    loom::thread::yield_now();
                }
            }
        });
        // The GPU completes both while the waiter polls and the owner acquires.
        for acquired in &uses {
            memory.complete(acquired.signal);
        }
        let first = tracker.acquire(Request::packet(2));
        waiting.join().unwrap();
        match first {
            Ok(_) => {}
            Err(sigretire_tracker::AcquireError::Backpressure { wait_for, .. }) => {
                assert!(tickets.contains(&wait_for), "names a use in flight");
                // The caller waited: the named use is done, the retry fits.
                assert!(tracker.acquire(Request::packet(2)).is_ok());
            }
            Err(error) => panic!("nothing is held, every use is done: {error}"),
        }
    });
}

/// An async handler's reference dropped on the handler thread while its
/// owner retires the use and then tears the tracker down, nobody else keeping
/// the signal memory: the handler reads its use's outcome and never a re-arm;
/// the memory is freed exactly once (loom also reports a leaked `Arc`), only
/// once both sides have begun to let go, by whichever lets go last (the
/// owner's teardown whenever the handler had finished before it), and
/// nothing touches it afterwards. Both orders of teardown must occur.
#[test]
fn async_handler_reference_versus_teardown() {
    use ghost::atomic::AtomicBool;
    static FREED_ON_OWNER: AtomicBool = AtomicBool::new(false);
    static FREED_ON_HANDLER: AtomicBool = AtomicBool::new(false);
    model(|| {
        // Two parties: the tracker's owner and the handler.
        let witness = Witness::of(2);
        let memory = Arc::new(GpuMemory::watched(4, witness.clone()));
        let (mut tracker, read) = small_tracker(&memory, 2);
        let acquired = tracker.acquire(Request::packet(0).barrier(true)).unwrap();
        let handler_reference = tracker.hold(&acquired.ticket).unwrap().expect("pending");
        memory.host.complete(acquired.signal);
        read.store(1, Ordering::Release);
        let handler_done = ghost::Arc::new(AtomicBool::new(false));

        let handler = {
            // The handler reads the signal as the GPU sees it, then lets go of
            // the memory: from there only its reference keeps the memory alive.
            let (memory, witness, handler_done) =
                (memory.clone(), witness.clone(), handler_done.clone());
            loom::thread::spawn(move || {
                let value = memory.value(handler_reference.packet_handle());
                drop(memory);
                assert_eq!(value, 0, "the handler's signal is never re-armed under it");
                assert_eq!(handler_reference.status(), Status::Complete);
                witness.letting_go();
                drop(handler_reference);
                handler_done.store(true, SeqCst);
                loom::thread::current().id()
            })
        };
        drop(memory);
        // The owner retires the use (parking the held signal, or re-arming
        // it if the handler already let go) and tears the queue down.
        tracker.poll();
        let handler_finished_first = handler_done.load(SeqCst);
        witness.letting_go();
        drop(tracker);
        let owner = loom::thread::current().id();
        if handler_finished_first {
            assert_eq!(witness.frees(), 1, "the last one out, the owner, frees");
        }
        let handler = handler.join().unwrap();
        assert_eq!(
            witness.frees(),
            1,
            "the signal memory is freed exactly once"
        );
        let freed_on = witness.freed_on.lock().unwrap().expect("freed");
        if handler_finished_first {
            assert_eq!(freed_on, owner);
        }
        assert!(freed_on == owner || freed_on == handler);
        let order = if freed_on == owner {
            &FREED_ON_OWNER
        } else {
            &FREED_ON_HANDLER
        };
        order.store(true, SeqCst);
    });
    assert!(
        FREED_ON_OWNER.load(SeqCst) && FREED_ON_HANDLER.load(SeqCst),
        "the model must explore both teardown orders"
    );
}

/// The timestamp seqlock: the owner harvests a use's stamps into its cell
/// (`store_stamps`) while a holder reads them on another thread
/// (`SignalRef::timestamps`). The cell still holds the stamps of the use
/// before, and, if the holder lets go in time, is rewritten with the next
/// use's: the reader sees its own use's pair or nothing, never another use's
/// pair or a mix of two.
///
/// A held signal is never rewritten, so only the publishing half of the
/// seqlock is exercised here. To check that the rest (the clear, the fences,
/// the reader's second look) protects a holder on its own, run this model
/// with `--cfg sigretire_planted` too and `TRACKER_PLANTED_BUG=rearm-held-signal`:
/// the held signal then serves use 3 and is harvested under the reader.
#[test]
fn timestamp_harvest_versus_reader() {
    model(|| {
        let memory = Arc::new(GpuMemory::new(3));
        let (mut tracker, read) = small_tracker(&memory, 1);
        let timed = |index| {
            Request::packet(index)
                .barrier(true)
                .purpose(Purpose::Event)
                .timed(true)
        };
        // Use 1 runs and is harvested; use 2 gets the same signal and cell.
        let first = tracker.acquire(timed(0)).unwrap();
        memory.finish(first.signal, stamps_of(1));
        read.store(1, Ordering::Release);
        tracker.poll();
        let second = tracker.acquire(timed(1)).unwrap();
        assert_eq!(second.signal, first.signal, "one signal, re-armed");
        let reference = tracker.hold(&second.ticket).unwrap().expect("pending");
        memory.finish(second.signal, stamps_of(2));
        read.store(2, Ordering::Release);

        let reader = loom::thread::spawn(move || {
            let seen = reference.timestamps();
            assert!(
                seen.is_none() || seen == Some(stamps_of(2)),
                "use 2's holder read {seen:?}"
            );
        });
        // Retire use 2, harvesting its stamps (its signal parked while held,
        // re-armed in place once let go), then run and harvest use 3.
        tracker.poll();
        let third = tracker.acquire(timed(2)).unwrap();
        memory.finish(third.signal, stamps_of(3));
        read.store(3, Ordering::Release);
        tracker.poll();
        reader.join().unwrap();
        assert_eq!(
            tracker.timestamps(&third.ticket).unwrap(),
            Some(stamps_of(3))
        );
    });
}

/// Failure publication: the owner learns of a failed use, records it
/// (`record_failures`), re-arms its signal and publishes the retirement,
/// while a `Waiter` on another thread asks about it and about a use that
/// completed, without the lock. Both signals then serve later uses with the
/// opposite outcome, so the waiter's own loads may see a later use's value:
/// still the failed use reads Failed every time it is asked (never Complete,
/// never forgotten) and the completed one Complete (never Failed).
#[test]
fn failure_publication_versus_lock_free_status() {
    model(|| {
        let memory = Arc::new(GpuMemory::new(2));
        let (mut tracker, _read) = small_tracker(&memory, 2);
        // Two packets without the barrier bit: the second completes, then
        // the queue fails the first.
        let failed = tracker.acquire(Request::packet(0)).unwrap();
        let done = tracker.acquire(Request::packet(1)).unwrap();
        memory.finish(done.signal, stamps_of(2));
        memory.fail(failed.signal);

        let waiter = tracker.waiter();
        let (failed_use, done_use) = (failed.ticket, done.ticket);
        let asking = loom::thread::spawn(move || {
            let status = |ticket| waiter.status(ticket).unwrap();
            assert_eq!(status(&failed_use), Status::Failed, "a failed use");
            assert_eq!(status(&done_use), Status::Complete, "a completed use");
            assert_eq!(
                status(&failed_use),
                Status::Failed,
                "a failure, asked again"
            );
        });
        // The owner settles both by their loads, retires them (recording the
        // failure) and re-arms both signals for the next two uses: on the
        // failed use's signal one that completes, on the other one that fails.
        tracker.fail_queue();
        tracker.reclaim();
        let later_done = tracker.acquire(Request::packet(2)).unwrap();
        let later_failed = tracker.acquire(Request::packet(3)).unwrap();
        assert_eq!(
            (later_done.signal, later_failed.signal),
            (failed.signal, done.signal)
        );
        memory.finish(later_done.signal, stamps_of(3));
        memory.fail(later_failed.signal);
        asking.join().unwrap();
        for (acquired, outcome) in [
            (failed, Status::Failed),
            (done, Status::Complete),
            (later_done, Status::Complete),
            (later_failed, Status::Failed),
        ] {
            assert_eq!(tracker.query(&acquired.ticket).unwrap(), outcome);
        }
    });
}

/// The record of failures moves its window of exact outcomes (a handful of
/// uses under loom) when a failure lands past its end, sending the older
/// failures to its ranges, while a `Waiter` on another thread asks about a
/// failed use the move sends there and about a completed one beside it:
/// the failed use reads Failed every time (never Complete, never lost in
/// the move), the completed one Complete.
#[test]
fn failure_record_moving_versus_lock_free_status() {
    model(|| {
        let memory = Arc::new(GpuMemory::new(2));
        let (mut tracker, read) = small_tracker(&memory, 2);
        let failed = tracker.acquire(Request::packet(0)).unwrap();
        let done = tracker.acquire(Request::packet(1).barrier(true)).unwrap();
        memory.fail(failed.signal);
        memory.finish(done.signal, stamps_of(2));
        tracker.fail_queue();
        tracker.reclaim();

        let waiter = tracker.waiter();
        let (failed_use, done_use) = (failed.ticket, done.ticket);
        let asking = loom::thread::spawn(move || {
            let status = |ticket| waiter.status(ticket).unwrap();
            assert_eq!(status(&failed_use), Status::Failed, "a failed use");
            assert_eq!(status(&done_use), Status::Complete, "a completed use");
            assert_eq!(status(&failed_use), Status::Failed, "asked again");
        });
        // Three uses complete; the fourth fails, past the window's end.
        for index in 2..5 {
            let acquired = tracker
                .acquire(Request::packet(index).barrier(true))
                .unwrap();
            memory.finish(acquired.signal, stamps_of(index + 1));
            read.store(index as usize + 1, Ordering::Release);
            tracker.poll();
        }
        let last = tracker.acquire(Request::packet(5).barrier(true)).unwrap();
        memory.fail(last.signal);
        tracker.fail_queue();
        tracker.reclaim();
        asking.join().unwrap();
        assert_eq!(tracker.query(&failed.ticket).unwrap(), Status::Failed);
        assert_eq!(tracker.query(&done.ticket).unwrap(), Status::Complete);
        assert_eq!(tracker.query(&last.ticket).unwrap(), Status::Failed);
        assert_eq!(tracker.stats().failed, 2);
    });
}

/// A thread sleeping on a wake signal is never left asleep after the write
/// that changes it: in every interleaving of the sleeper's read-then-sleep
/// with the writer's store-then-wake, the sleeper returns the new value
/// (loom's condition variable has no timeout, so a lost wake-up would be a
/// deadlock the model reports).
#[test]
fn a_sleeper_on_a_wake_signal_never_misses_its_write() {
    loom::model(|| {
        let mailbox = Arc::new(sigretire_tracker::backend::WakeMailbox::new());
        let signal = Arc::new(loom::sync::atomic::AtomicI64::new(1));
        let gpu = {
            let (mailbox, signal) = (mailbox.clone(), signal.clone());
            loom::thread::spawn(move || {
                signal.store(0, Ordering::Release);
                mailbox.wrote();
            })
        };
        let seen = mailbox.sleep_while(
            || signal.load(Ordering::Acquire),
            1,
            Duration::from_secs(3600),
        );
        assert_eq!(seen, 0);
        gpu.join().unwrap();
    });
}
