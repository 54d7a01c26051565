//! A sleep that ends when it was asked to: the hybrid wait's doze.
//!
//! Linux lets a timer fire up to the thread's *timer slack* late (50 us by
//! default, `prctl(PR_SET_TIMERSLACK)`), to batch wake-ups; measured on a
//! shared 2-core VM, `std::thread::sleep` then overshoots by 60-70 us at
//! the median, against 15-30 us with a 1 us slack. A doze that means to
//! end just before the work does cannot afford the slack, so it lowers the
//! calling thread's slack for the sleep and puts it back after: two
//! `prctl` calls around the sleep, per doze, and the thread is left as it
//! was found. What is left of the overshoot (the scheduler's wake-up
//! latency) the wait measures and the history keeps
//! ([`WaitHistory`](super::WaitHistory)), and a hybrid wait wakes that
//! much earlier. Elsewhere (no timer slack to lower, or a loom model) a
//! doze is a plain sleep.

use std::time::Duration;

/// The timer slack a doze sleeps with, in nanoseconds: 1 us, well under
/// the wake-up latency it is paid next to.
#[cfg(all(target_os = "linux", not(sigretire_loom)))]
const FINE_SLACK_NS: libc::c_ulong = 1_000;

/// Sleeps for `duration` with the calling thread's timer slack lowered to
/// 1 us, and restores the slack afterwards.
#[cfg(all(target_os = "linux", not(sigretire_loom)))]
pub(crate) fn doze(duration: Duration) {
    // SAFETY: PR_GET_TIMERSLACK takes no pointer; it answers the calling
    // thread's slack in nanoseconds (or -1 on an error).
    let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    let lower = slack > 0 && (slack as libc::c_ulong) > FINE_SLACK_NS;
    if lower {
        // SAFETY: PR_SET_TIMERSLACK takes a value, no pointer, and changes
        // the calling thread alone.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, FINE_SLACK_NS, 0, 0, 0) };
    }
    std::thread::sleep(duration);
    if lower {
        // SAFETY: as above; the value is the one the thread had.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, slack as libc::c_ulong, 0, 0, 0) };
    }
}

/// Sleeps for `duration` (no timer slack to lower here).
#[cfg(not(all(target_os = "linux", not(sigretire_loom))))]
pub(crate) fn doze(duration: Duration) {
    crate::sync::sleep(duration);
}

#[cfg(all(test, target_os = "linux", not(sigretire_loom)))]
mod tests {
    use super::*;

    fn slack() -> libc::c_int {
        // SAFETY: as in `doze`.
        unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) }
    }

    #[test]
    fn a_doze_leaves_the_threads_timer_slack_as_it_found_it() {
        let before = slack();
        doze(Duration::from_micros(50));
        assert_eq!(slack(), before);
    }
}
