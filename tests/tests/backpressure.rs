//! Back-pressure's promise: the use it names is one whose completion frees
//! room. A caller that waits for it (outside its locks, with a `Waiter`)
//! and retries is never pushed back with the same answer, and a full ring
//! never turns into a hard error because a lock-free waiter learned
//! completions at the wrong moment.

use sigretire_sim::Queue;
use sigretire_sim::backend::{SimMemory, submit_kernel};
use sigretire_tracker::AcquireError;
use sigretire_tracker::{
    Config, Placement, Request, RetiringTracker, Status, Ticket, TimestampClock, Timestamps,
    Tracker, WaitPolicy,
    backend::{AllocError, SignalMemory},
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(5);

fn submit<T: Tracker<Queue = Queue>>(
    tracker: &mut T,
    queue: &Queue,
    barrier: bool,
) -> Result<Ticket, AcquireError> {
    let index = queue.write_index();
    let acquired = tracker.acquire(Request::packet(index).barrier(barrier))?;
    assert_eq!(queue.reserve().unwrap(), index);
    submit_kernel(queue, index, acquired.signal, barrier);
    Ok(acquired.ticket)
}

#[test]
fn waiting_for_the_named_fence_frees_room_while_the_read_index_lags() {
    let (sim, queue) = sigretire_sim::backend::stepped_queue();
    let memory = Arc::new(SimMemory::new(sim.clone(), queue.agent()));
    let config = Config {
        initial_size: 8,
        growth_limit: 1,
        backpressure_window: 2,
        ..Config::default()
    };
    let mut tracker = RetiringTracker::new(memory, queue.clone(), config).unwrap();
    let tickets: Vec<Ticket> = (0..8)
        .map(|_| submit(&mut tracker, &queue, true).unwrap())
        .collect();
    // The GPU runs the first three fences; its read index has not moved.
    for index in 0..3 {
        assert_eq!(queue.launch().unwrap(), index);
        queue.complete(index).unwrap();
    }
    assert_eq!(queue.read_index(), 0);

    let Err(AcquireError::Backpressure { wait_for, .. }) = submit(&mut tracker, &queue, true)
    else {
        panic!("a full ring at its limit pushes back");
    };
    assert!(
        tickets[..3].contains(&wait_for),
        "names a fence the GPU ran: {wait_for:?}"
    );
    let waiter = tracker.waiter();
    assert_eq!(
        waiter.wait(&wait_for, WAIT, WaitPolicy::spin()),
        Ok(Status::Complete)
    );
    match submit(&mut tracker, &queue, true) {
        Ok(_) => {}
        Err(error) => panic!("the named use completed, yet the retry answered {error}"),
    }
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

/// Signal memory that runs a hook (standing in for another thread) at the
/// moment the tracker asks it for signals, and then refuses them.
struct Interleaved {
    memory: SimMemory,
    hook: Mutex<Option<Box<dyn FnMut() + Send>>>,
}

impl SignalMemory for Interleaved {
    type Signal = sigretire_sim::Signal;

    fn allocate(
        &self,
        count: usize,
        placement: Placement,
        out: &mut Vec<(sigretire_sim::Signal, Placement)>,
    ) -> Result<(), AllocError> {
        match self.hook.lock().unwrap().take() {
            Some(mut hook) => {
                hook();
                Err(AllocError::OutOfMemory("refused by the test".into()))
            }
            None => self.memory.allocate(count, placement, out),
        }
    }

    unsafe fn load(&self, signal: sigretire_sim::Signal) -> i64 {
        // SAFETY: forwarded caller guarantee.
        unsafe { self.memory.load(signal) }
    }

    unsafe fn store(&self, signal: sigretire_sim::Signal, value: i64) {
        // SAFETY: forwarded caller guarantee.
        unsafe { self.memory.store(signal, value) }
    }

    fn store_fence(&self) {
        self.memory.store_fence()
    }

    fn hdp_flush(&self) {
        self.memory.hdp_flush()
    }

    unsafe fn timestamps(&self, signal: sigretire_sim::Signal) -> Option<Timestamps> {
        // SAFETY: forwarded caller guarantee.
        unsafe { self.memory.timestamps(signal) }
    }

    fn packet_handle(&self, signal: sigretire_sim::Signal) -> u64 {
        self.memory.packet_handle(signal)
    }

    fn timestamp_clock(&self) -> TimestampClock {
        self.memory.timestamp_clock()
    }

    fn shares_signals_with(&self, other: &Self) -> bool {
        self.memory.shares_signals_with(&other.memory)
    }
}

#[test]
fn a_waiter_learning_every_completion_mid_acquire_is_no_hard_error() {
    let (sim, queue) = sigretire_sim::backend::stepped_queue();
    let memory = Arc::new(Interleaved {
        memory: SimMemory::new(sim.clone(), queue.agent()),
        hook: Mutex::new(None),
    });
    let config = Config {
        initial_size: 2,
        growth_limit: 2,
        refill_batch: 2,
        ..Config::default()
    };
    let mut tracker = RetiringTracker::new(memory.clone(), queue.clone(), config).unwrap();
    // Two uses fill the ring (it may grow to four); without the barrier
    // bit no fence proves them, and the GPU runs them both.
    let tickets: Vec<Ticket> = (0..2)
        .map(|_| submit(&mut tracker, &queue, false).unwrap())
        .collect();
    queue.run_until_idle();
    // Another thread's waiter sees every use complete while the tracker
    // makes room: exactly when it asks for signals to grow the ring, which
    // it then cannot.
    let waiter = tracker.waiter();
    *memory.hook.lock().unwrap() = Some(Box::new(move || {
        for ticket in &tickets {
            assert_eq!(waiter.status(ticket), Ok(Status::Complete));
        }
    }));
    let ticket = match submit(&mut tracker, &queue, false) {
        Ok(ticket) => ticket,
        Err(error) => panic!("nothing is held and every use is done, yet: {error}"),
    };
    queue.run_until_idle();
    assert_eq!(tracker.query(&ticket).unwrap(), Status::Complete);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

/// The oldest use is done, its signal pinned only by a later use of the
/// same tracker (the consumer of the pin), no spare can be allocated, and a
/// waiter on another thread learns the later uses' completions while the
/// tracker makes room (during its attempt to grow). The pin's consumer is
/// done, so the pin goes, and with it the last hold on the oldest signal:
/// the acquire succeeds, where it answered `SignalsHeld { held: 0 }`, an
/// error an immediate retry did not repeat.
#[test]
fn a_pin_released_while_making_room_frees_its_signal_in_the_same_acquire() {
    let (sim, queue) = sigretire_sim::backend::stepped_queue();
    let memory = Arc::new(SimMemory::new(sim.clone(), queue.agent()));
    let config = Config {
        initial_size: 4,
        growth_limit: 2,
        refill_batch: 1,
        signals: Placement::Device,
        ..Config::default()
    };
    let mut tracker = RetiringTracker::new(memory, queue.clone(), config).unwrap();
    let oldest = submit(&mut tracker, &queue, true).unwrap();
    let later: Vec<Ticket> = (0..3)
        .map(|_| submit(&mut tracker, &queue, false).unwrap())
        .collect();
    let pin = tracker.pin(&oldest).unwrap().expect("pending");
    tracker.attach(&later[0], pin).unwrap();
    queue.run_until_idle();

    // The first allocation making room tries is for a spare to park the
    // oldest signal in; the second, for growth, is when the other thread
    // learns the later uses complete.
    sim.fail_allocations(u64::MAX);
    let waiter = tracker.waiter();
    let hooks = sim.clone();
    sim.on_next_allocation(move || {
        hooks.on_next_allocation(move || {
            for ticket in &later {
                assert_eq!(waiter.status(ticket), Ok(Status::Complete));
            }
        });
    });
    let acquired = submit(&mut tracker, &queue, true);
    assert!(acquired.is_ok(), "{acquired:?}");
    assert_eq!(tracker.census().pins, 0);
    assert_eq!(
        tracker.census().parked,
        0,
        "re-armed in place: no spare was needed"
    );
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}
