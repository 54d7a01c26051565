//! Failure injection through the control interface: injected statuses and
//! malformed answers reach the caller exactly as often as asked, only in the
//! library copy they were set in, and only for functions that can fail.

use hsa_sys::{HSA_STATUS_ERROR_INVALID_QUEUE_CREATION, HSA_STATUS_SUCCESS, HsaApi, hsa_status_t};
use sigretire_rocr_standin::{Config, Malformed, Standin};

fn init(standin: &Standin) -> HsaApi {
    let api = HsaApi::load_from(standin.library_path()).unwrap();
    // SAFETY: hsa_init takes no arguments.
    api.check_status(unsafe { api.hsa_init() }).unwrap();
    api
}

/// `hsa_status_string` of a known status, as a cheap call that can fail.
fn status_string(api: &HsaApi) -> hsa_status_t {
    let mut text = std::ptr::null();
    // SAFETY: a place for one pointer.
    unsafe { api.hsa_status_string(HSA_STATUS_SUCCESS, &raw mut text) }
}

#[test]
fn an_injected_status_skips_then_fails_then_clears() {
    let standin = Standin::new(Config::stepped()).unwrap();
    let api = init(&standin);
    let failed = HSA_STATUS_ERROR_INVALID_QUEUE_CREATION;
    standin.fail_calls("hsa_status_string", 2, 3, failed);
    let answers: Vec<_> = (0..7).map(|_| status_string(&api)).collect();
    let ok = HSA_STATUS_SUCCESS;
    assert_eq!(answers, [ok, ok, failed, failed, failed, ok, ok]);
    assert_eq!(
        standin.calls("hsa_status_string"),
        7,
        "failed calls count too"
    );

    standin.fail_calls("hsa_status_string", 0, 5, failed);
    assert_eq!(status_string(&api), failed);
    standin.fail_calls("hsa_status_string", 0, 0, failed);
    assert_eq!(status_string(&api), ok, "count 0 cleared the rest");
    // SAFETY: balances init.
    unsafe { api.hsa_shut_down() };
}

#[test]
fn injection_belongs_to_one_copy_of_the_library() {
    let injected = Standin::new(Config::stepped()).unwrap();
    let other = Standin::new(Config::stepped()).unwrap();
    injected.fail_calls("hsa_status_string", 0, 1, 0x1000);
    injected.malform(Malformed::NoCpuAgent, 1);
    let api = init(&other);
    assert_eq!(status_string(&api), HSA_STATUS_SUCCESS);
    // SAFETY: balances init.
    unsafe { api.hsa_shut_down() };
}

#[test]
#[should_panic(expected = "no ROCr function `hsa_signal_load_scacquire` that returns a status")]
fn only_functions_that_return_a_status_can_be_made_to_fail() {
    let standin = Standin::new(Config::stepped()).unwrap();
    standin.fail_calls("hsa_signal_load_scacquire", 0, 1, 0x1000);
}

#[test]
fn malformed_allocations_are_null_or_misaligned_and_misaligned_ones_free() {
    let standin = Standin::new(Config::stepped()).unwrap();
    let api = init(&standin);
    let mut pools: Vec<hsa_sys::hsa_amd_memory_pool_t> = Vec::new();
    unsafe extern "C" fn push(
        pool: hsa_sys::hsa_amd_memory_pool_t,
        data: *mut std::ffi::c_void,
    ) -> hsa_status_t {
        // SAFETY: `data` is the Vec below, alive during the iteration.
        unsafe { (*data.cast::<Vec<hsa_sys::hsa_amd_memory_pool_t>>()).push(pool) };
        HSA_STATUS_SUCCESS
    }
    let mut agents: Vec<hsa_sys::hsa_agent_t> = Vec::new();
    unsafe extern "C" fn agent(
        agent: hsa_sys::hsa_agent_t,
        data: *mut std::ffi::c_void,
    ) -> hsa_status_t {
        // SAFETY: `data` is the Vec below, alive during the iteration.
        unsafe { (*data.cast::<Vec<hsa_sys::hsa_agent_t>>()).push(agent) };
        HSA_STATUS_SUCCESS
    }
    // SAFETY: callbacks matching their data; the CPU agent (listed first)
    // owns the system pool.
    unsafe {
        api.hsa_iterate_agents(Some(agent), (&raw mut agents).cast());
        api.hsa_amd_agent_iterate_memory_pools(agents[0], Some(push), (&raw mut pools).cast());
    }
    let allocate = || {
        let mut ptr = std::ptr::null_mut();
        // SAFETY: a pool of this runtime; a place for the pointer.
        let status = unsafe { api.hsa_amd_memory_pool_allocate(pools[0], 4096, 0, &raw mut ptr) };
        (status, ptr as usize)
    };
    standin.malform(Malformed::AllocationNull, 1);
    assert_eq!(allocate(), (HSA_STATUS_SUCCESS, 0));
    assert_eq!(standin.census().allocations, 0);
    standin.malform(Malformed::AllocationMisaligned, 1);
    let (status, misaligned) = allocate();
    assert_eq!(status, HSA_STATUS_SUCCESS);
    assert_eq!(misaligned % 64, 32);
    assert_eq!(standin.census().allocations, 1);
    let (_, aligned) = allocate();
    assert_eq!(aligned % 64, 0, "one malformed answer only");
    for ptr in [misaligned, aligned] {
        // SAFETY: blocks this runtime handed out, freed once.
        let status = unsafe { api.hsa_amd_memory_pool_free(ptr as *mut std::ffi::c_void) };
        assert_eq!(status, HSA_STATUS_SUCCESS);
    }
    assert_eq!(standin.census().allocations, 0);
    // SAFETY: balances init.
    unsafe { api.hsa_shut_down() };
    standin.assert_no_violations();
}
