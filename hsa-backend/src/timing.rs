//! Profiling timestamps: from GPU ticks to the system clock domain.
//!
//! On a profiled queue the packet processor writes `start_ts` and `end_ts`
//! into a packet's completion signal in the GPU's own clock (MI300X: a 100
//! MHz counter). The host's clock (`HSA_SYSTEM_INFO_TIMESTAMP`, ticking at
//! `HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY`) is another counter, at another
//! rate, with another origin, and the two drift apart. Only ROCr knows how
//! they relate: it samples both (the KFD's clock-counter pairs) and
//! interpolates, resampling when a tick falls outside its calibration.
//!
//! So the backend converts each stamp with
//! `hsa_amd_profiling_convert_tick_to_system_domain`, at retirement, once
//! per stamp, rather than dividing by the system timestamp frequency, which
//! would be right only if the GPU counter ran at the system's rate from the
//! system's origin (it does neither). The frequency is still what turns a
//! system-domain difference into seconds ([`system_duration`]).
//!
//! For signals ROCr created, `hsa_amd_profiling_get_dispatch_time` reads and
//! converts in one call; the backend's own signals are raw blocks that call
//! would not accept, so their stamps are read directly (two loads, before the
//! signal is re-armed: the tracker harvests at retirement) and converted.

use hsa_sys::{HSA_STATUS_SUCCESS, HsaApi, hsa_agent_t};
use std::time::Duration;

/// `tick` of `agent`'s clock in the system domain; `None` for a zero tick
/// (never stamped: the queue was not profiled) or if ROCr cannot convert it.
pub(crate) fn to_system_domain(api: &HsaApi, agent: hsa_agent_t, tick: u64) -> Option<u64> {
    if tick == 0 {
        return None;
    }
    let mut system = 0u64;
    // SAFETY: the runtime is initialised and `agent` is the GPU whose queue
    // stamped the tick; `system` is a place for one u64.
    let status = unsafe {
        api.hsa_amd_profiling_convert_tick_to_system_domain(agent, tick, &raw mut system)
    };
    (status == HSA_STATUS_SUCCESS).then_some(system)
}

/// A difference of system-domain ticks as a duration, given
/// [`Runtime::timestamp_frequency`](crate::Runtime::timestamp_frequency).
///
/// ```
/// use std::time::Duration;
/// assert_eq!(sigretire_hsa::system_duration(1_500, 1_000_000_000), Duration::from_nanos(1_500));
/// assert_eq!(sigretire_hsa::system_duration(3, 100_000_000), Duration::from_nanos(30));
/// assert_eq!(sigretire_hsa::system_duration(5, 0), Duration::ZERO);
/// ```
pub fn system_duration(ticks: u64, frequency: u64) -> Duration {
    if frequency == 0 {
        return Duration::ZERO;
    }
    let nanos = u128::from(ticks) * 1_000_000_000 / u128::from(frequency);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}
