//! The queue driver (`sigretire_scenarios::queues`) on the simulator: every
//! input is a setup and a sequence of queue-layer operations; a broken
//! check (an early completion, a false failure, a waiter that never
//! returns, a re-arm under a packet, a leak...) is a crash.
#![no_main]

mod tally;

use libfuzzer_sys::fuzz_target;
use sigretire_scenarios::queues::fuzz_queue;

fuzz_target!(|data: &[u8]| {
    tally::record(fuzz_queue(data));
});
