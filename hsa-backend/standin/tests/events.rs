//! KFD's events, as the stand-in models them: every interrupt signal ROCr
//! makes holds one of the process's events, and destroying it gives the
//! event back (ROCr's `hsa_signal_destroy` destroys the signal's KFD event),
//! so a process that makes and destroys signals never runs out; past the
//! budget of live events a new signal polls.

use hsa_sys::{HSA_AMD_SIGNAL_AMD_GPU_ONLY, HsaApi, amd_signal_t, hsa_signal_t};
use sigretire_rocr_standin::{Config, Standin};

fn init(standin: &Standin) -> HsaApi {
    let api = HsaApi::load_from(standin.library_path()).unwrap();
    // SAFETY: hsa_init takes no arguments.
    api.check_status(unsafe { api.hsa_init() }).unwrap();
    api
}

/// A new signal of ROCr's (an interrupt signal unless `attributes` says
/// otherwise), and whether it got an event (its mailbox is set).
fn create(api: &HsaApi, attributes: u64) -> (hsa_signal_t, bool) {
    let mut signal = hsa_signal_t::NULL;
    // SAFETY: no consumers; a place for one handle.
    let status =
        unsafe { api.hsa_amd_signal_create(1, 0, std::ptr::null(), attributes, &raw mut signal) };
    api.check_status(status).unwrap();
    let block = signal.handle as *const amd_signal_t;
    // SAFETY: a live signal ROCr made: its handle is its block's address,
    // whose mailbox field ROCr wrote once, before handing it out.
    let mailbox = unsafe { std::ptr::read_volatile(&raw const (*block).event_mailbox_ptr) };
    (signal, mailbox != 0)
}

fn destroy(api: &HsaApi, signal: hsa_signal_t) {
    // SAFETY: a live signal of this runtime, named by no packet.
    api.check_status(unsafe { api.hsa_signal_destroy(signal) })
        .unwrap();
}

#[test]
fn a_destroyed_interrupt_signal_gives_its_event_back() {
    let standin = Standin::new(Config::stepped()).unwrap();
    let api = init(&standin);
    assert!(standin.set_event_budget(2));
    let (first, interrupt) = create(&api, 0);
    assert!(interrupt);
    let (second, interrupt) = create(&api, 0);
    assert!(interrupt);
    let (polling, interrupt) = create(&api, 0);
    assert!(
        !interrupt,
        "both events are taken: ROCr makes a polling signal"
    );
    let (gpu_only, interrupt) = create(&api, HSA_AMD_SIGNAL_AMD_GPU_ONLY);
    assert!(!interrupt, "asked for none");
    let counters = standin.interrupts();
    assert_eq!(
        (counters.created, counters.degraded, counters.live),
        (2, 1, 2)
    );

    // Neither a polling signal nor a GPU-only one held an event.
    destroy(&api, polling);
    destroy(&api, gpu_only);
    assert_eq!(standin.interrupts().live, 2);
    let (none_left, interrupt) = create(&api, 0);
    assert!(!interrupt);
    destroy(&api, none_left);

    destroy(&api, first);
    assert_eq!(standin.interrupts().live, 1);
    let (again, interrupt) = create(&api, 0);
    assert!(
        interrupt,
        "the destroyed signal's event serves the next one"
    );
    destroy(&api, again);
    destroy(&api, second);
    let counters = standin.interrupts();
    assert_eq!(
        (counters.created, counters.degraded, counters.live),
        (3, 2, 0)
    );

    // Made and destroyed far more often than there are events, one at a
    // time: every one an interrupt signal.
    assert!(standin.set_event_budget(1));
    for _ in 0..10_000 {
        let (signal, interrupt) = create(&api, 0);
        assert!(interrupt);
        destroy(&api, signal);
    }
    assert_eq!(standin.interrupts().live, 0);
    // SAFETY: balances init; nothing of this runtime is left.
    unsafe { api.hsa_shut_down() };
    standin.assert_no_violations();
}
