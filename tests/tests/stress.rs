//! Stress on the threaded simulator (hip-tests' event-overflow scenario, at
//! the tracker level): 4 threads over 12 queues record events, query them,
//! synchronize and wait across queues for a bounded time. Each tracker sits
//! behind its queue's lock, as the queue layer holds it; every CPU wait
//! happens outside the locks, and no thread ever holds two. A watchdog fails
//! the test if any thread makes no progress for more than a second; at the
//! end every signal must be accounted for.

use sigretire_sim::backend::{SimMemory, submit_kernel, submit_wait};
use sigretire_sim::{CostProfile, Mode, Queue, Sim, SimConfig, SimQueueConfig};
use sigretire_tracker::AcquireError;
use sigretire_tracker::{
    Config, Placement, Purpose, Request, RetiringTracker, SignalRef, Status, Ticket, Tracker,
    WaitPolicy,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const THREADS: usize = 4;
const QUEUES: usize = 12;
const RUN_FOR: Duration = Duration::from_secs(2);
/// No thread may go this long without finishing an operation.
const STUCK_AFTER: Duration = Duration::from_secs(1);
/// A wait that takes longer than this is a lost completion.
const WAIT_LIMIT: Duration = Duration::from_secs(1);

type Retiring = RetiringTracker<SimMemory, Queue>;

struct Lane {
    queue: Queue,
    tracker: Mutex<Retiring>,
}

/// An event a thread recorded: its queue, ticket, packet and reference.
struct Event {
    lane: usize,
    ticket: Ticket,
    index: u64,
    reference: SignalRef<SimMemory>,
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Acquires a signal and publishes a packet on `lane` (a kernel, or a
/// barrier-AND on `dependency`), under the lane's lock. Under back-pressure
/// it waits for the named use outside the lock and retries.
fn submit(
    lanes: &[Lane],
    lane: usize,
    purpose: Purpose,
    barrier: bool,
    dependency: Option<sigretire_tracker::Pin<SimMemory>>,
) -> Result<(Ticket, u64, Option<SignalRef<SimMemory>>), String> {
    let Lane { queue, tracker } = &lanes[lane];
    let started = Instant::now();
    loop {
        let mut tracker = tracker.lock().unwrap();
        let index = queue.write_index();
        let request = Request::packet(index).barrier(barrier).purpose(purpose);
        match tracker.acquire(request) {
            Ok(acquired) => {
                let reserved = queue.reserve().map_err(|e| format!("reserve: {e}"))?;
                assert_eq!(reserved, index, "one producer at a time, under the lock");
                match &dependency {
                    None => submit_kernel(queue, index, acquired.signal, barrier),
                    Some(pin) => submit_wait(
                        queue,
                        index,
                        acquired.signal,
                        &[pin.packet_handle()],
                        barrier,
                    ),
                }
                if let Some(pin) = dependency {
                    tracker
                        .attach(&acquired.ticket, pin)
                        .map_err(|e| format!("attach: {e}"))?;
                }
                let reference = match purpose {
                    Purpose::Event => tracker
                        .hold(&acquired.ticket)
                        .map_err(|e| format!("hold: {e}"))?,
                    _ => None,
                };
                return Ok((acquired.ticket, index, reference));
            }
            Err(AcquireError::Backpressure { wait_for, .. }) => {
                let waiter = tracker.waiter();
                drop(tracker);
                // Outside the lock: other threads keep submitting meanwhile.
                waiter
                    .wait(&wait_for, WAIT_LIMIT, WaitPolicy::blocking())
                    .map_err(|e| format!("back-pressure wait: {e}"))?;
            }
            Err(e) => return Err(format!("acquire: {e}")),
        }
        if started.elapsed() > WAIT_LIMIT {
            return Err("acquire never got room".into());
        }
    }
}

fn worker(
    lanes: &[Lane],
    seed: u64,
    stop: &AtomicBool,
    heartbeat: &AtomicU64,
    epoch: Instant,
) -> Result<u64, String> {
    let mut rng = seed;
    let mut events: Vec<Event> = Vec::new();
    let mut ops = 0;
    while !stop.load(Ordering::Relaxed) {
        let lane = (splitmix(&mut rng) % QUEUES as u64) as usize;
        match splitmix(&mut rng) % 10 {
            // Record an event (hipEventRecord), keeping at most 16.
            0..=3 => {
                let barrier = splitmix(&mut rng).is_multiple_of(2);
                let (ticket, index, reference) =
                    submit(lanes, lane, Purpose::Event, barrier, None)?;
                if let Some(reference) = reference {
                    events.push(Event {
                        lane,
                        ticket,
                        index,
                        reference,
                    });
                }
                if events.len() > 16 {
                    events.remove(0); // the user destroys an old event
                }
            }
            // Query an event without any lock (hipEventQuery).
            4..=5 => {
                if let Some(e) = events.get((splitmix(&mut rng) as usize) % events.len().max(1)) {
                    let status = e.reference.status();
                    let truth = lanes[e.lane].queue.truth(e.index).expect("kept");
                    if status == Status::Complete && !truth.completed {
                        return Err(format!("event {} complete early", e.ticket.seq()));
                    }
                }
            }
            // Synchronize a queue: a marker, waited for outside the lock.
            6..=7 => {
                let (ticket, index, _) = submit(lanes, lane, Purpose::CpuSync, true, None)?;
                let waiter = lanes[lane].tracker.lock().unwrap().waiter();
                let status = waiter
                    .wait(&ticket, WAIT_LIMIT, WaitPolicy::spin())
                    .map_err(|e| format!("synchronize lane {lane}: {e}"))?;
                let truth = lanes[lane].queue.truth(index).expect("kept");
                if status != Status::Complete || !truth.completed {
                    return Err(format!("synchronize saw {status:?}; truth {truth:?}"));
                }
            }
            // Wait on the GPU for another queue's event (hipStreamWaitEvent).
            8 => {
                if let Some(e) = events.get((splitmix(&mut rng) as usize) % events.len().max(1))
                    && e.lane != lane
                {
                    let pin = lanes[e.lane]
                        .tracker
                        .lock()
                        .unwrap()
                        .pin(&e.ticket)
                        .map_err(|err| format!("pin: {err}"))?;
                    // No pin: the event is complete, no dependency at all.
                    if let Some(pin) = pin {
                        submit(lanes, lane, Purpose::Completion, false, Some(pin))?;
                    }
                }
            }
            // Fence probing and reclaim.
            _ => {
                lanes[lane].tracker.lock().unwrap().poll();
            }
        }
        ops += 1;
        heartbeat.store(epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
    Ok(ops)
}

#[test]
fn four_threads_over_twelve_queues_keep_moving_and_lose_no_signal() {
    let sim = Sim::new(SimConfig {
        mode: Mode::Threaded,
        profile: CostProfile::zero(),
        agents: 1,
        seed: 7,
    });
    let lanes: Arc<Vec<Lane>> = Arc::new(
        (0..QUEUES)
            .map(|_| {
                let queue = sim
                    .create_queue(SimQueueConfig {
                        size: 1 << 12,
                        truth_history: 1 << 20,
                        ..SimQueueConfig::default()
                    })
                    .unwrap();
                let memory = Arc::new(SimMemory::new(sim.clone(), queue.agent()));
                let config = Config {
                    initial_size: 16,
                    growth_limit: 4,
                    signals: Placement::Device,
                    ..Config::default()
                };
                let tracker = RetiringTracker::new(memory, queue.clone(), config).unwrap();
                Lane {
                    queue,
                    tracker: Mutex::new(tracker),
                }
            })
            .collect(),
    );
    let epoch = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let heartbeats: Arc<Vec<AtomicU64>> =
        Arc::new((0..THREADS).map(|_| AtomicU64::new(0)).collect());
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (lanes, stop, heartbeats) = (lanes.clone(), stop.clone(), heartbeats.clone());
            std::thread::spawn(move || {
                let result = worker(&lanes, 1000 + t as u64, &stop, &heartbeats[t], epoch);
                // Done (or failed): the watchdog stops watching this thread.
                heartbeats[t].store(u64::MAX, Ordering::Relaxed);
                result
            })
        })
        .collect();

    // The watchdog: no thread may be stuck for more than STUCK_AFTER.
    let mut stuck = None;
    while epoch.elapsed() < RUN_FOR {
        std::thread::sleep(Duration::from_millis(20));
        let now = epoch.elapsed().as_nanos() as u64;
        for (t, beat) in heartbeats.iter().enumerate() {
            let last = beat.load(Ordering::Relaxed);
            if last != u64::MAX && now.saturating_sub(last) > STUCK_AFTER.as_nanos() as u64 {
                stuck = Some((t, now - last));
            }
        }
        if stuck.is_some() {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    assert!(
        stuck.is_none(),
        "thread {} made no progress for {:?}",
        stuck.unwrap().0,
        Duration::from_nanos(stuck.unwrap().1)
    );
    let mut total = 0;
    for (t, w) in workers.into_iter().enumerate() {
        let ops = w
            .join()
            .unwrap()
            .unwrap_or_else(|e| panic!("thread {t}: {e}"));
        assert!(ops > 0, "thread {t} did nothing");
        total += ops;
    }

    // The leak check: every queue idle, every use retired, every signal armed.
    for lane in lanes.iter() {
        lane.queue.run_until_idle();
        let mut tracker = lane.tracker.lock().unwrap();
        tracker.note_drained();
        tracker.reclaim();
    }
    for (i, lane) in lanes.iter().enumerate() {
        let mut tracker = lane.tracker.lock().unwrap();
        tracker.reclaim(); // pins released by other lanes' drains come back
        let census = tracker.census();
        assert!(
            census.is_balanced() && census.in_flight == 0 && census.parked == 0,
            "lane {i}: {census:?}"
        );
        assert_eq!(
            census.armed, census.created,
            "lane {i}: every signal armed again"
        );
    }
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
    eprintln!(
        "stress: {total} operations by {THREADS} threads over {QUEUES} queues in {RUN_FOR:?}"
    );
}
