//! A sleep that ends when it was asked to: the hybrid wait's doze.
//!
//! Linux lets a timer fire up to the thread's *timer slack* late (50 us by
//! default, `prctl(PR_SET_TIMERSLACK)`), to batch wake-ups; measured on a
//! shared 2-core VM, `std::thread::sleep` then overshoots by 60-70 us at
//! the median, against 15-30 us with a 1 us slack. A doze that means to
//! end just before the work does cannot afford the slack (nor can a
//! recheck, whose period bounds how late a wrong guess is), so a wait's
//! first doze lowers the calling thread's slack, and the wait gives it
//! back as it ends ([`restore`]): two `prctl` calls per hybrid wait, and
//! the thread is left as it was found. What is left of the overshoot (the scheduler's wake-up
//! latency) the wait measures and the history keeps
//! ([`WaitHistory`](super::WaitHistory)), and a hybrid wait wakes that
//! much earlier. Elsewhere (no timer slack to lower, a loom model, or Miri,
//! which cannot call `prctl`) a
//! doze is a plain sleep.

use std::time::Duration;

/// The timer slack a doze sleeps with, in nanoseconds: 1 us, well under
/// the wake-up latency it is paid next to.
#[cfg(all(target_os = "linux", not(sigretire_loom), not(miri)))]
const FINE_SLACK_NS: libc::c_ulong = 1_000;

#[cfg(all(target_os = "linux", not(sigretire_loom), not(miri)))]
thread_local! {
    /// The slack this thread had before a doze lowered it, until restored.
    static SAVED: core::cell::Cell<Option<libc::c_ulong>> = const { core::cell::Cell::new(None) };
}

/// Sleeps for `duration` with the calling thread's timer slack lowered to
/// 1 us; the slack stays lowered for the thread's next dozes until
/// [`restore`].
#[cfg(all(target_os = "linux", not(sigretire_loom), not(miri)))]
pub(crate) fn doze(duration: Duration) {
    fine_slack();
    std::thread::sleep(duration);
}

/// Lowers the calling thread's timer slack to 1 us (once, until
/// [`restore`]): for a doze on a wake, whose timed sleep is the wake's.
#[cfg(all(target_os = "linux", not(sigretire_loom), not(miri)))]
pub(crate) fn fine_slack() {
    if SAVED.get().is_none() {
        // SAFETY: PR_GET_TIMERSLACK takes no pointer; it answers the
        // calling thread's slack in nanoseconds (or -1 on an error).
        let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        if let Ok(slack) = libc::c_ulong::try_from(slack)
            && slack > FINE_SLACK_NS
        {
            // SAFETY: PR_SET_TIMERSLACK takes a value, no pointer, and
            // changes the calling thread alone.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, FINE_SLACK_NS, 0, 0, 0) };
            SAVED.set(Some(slack));
        }
    }
}

/// Gives the calling thread back the timer slack it had before its dozes.
#[cfg(all(target_os = "linux", not(sigretire_loom), not(miri)))]
pub(crate) fn restore() {
    if let Some(slack) = SAVED.take() {
        // SAFETY: as in `doze`; the value is the one the thread had.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, slack, 0, 0, 0) };
    }
}

/// Sleeps for `duration` (no timer slack to lower here).
#[cfg(not(all(target_os = "linux", not(sigretire_loom), not(miri))))]
pub(crate) fn doze(duration: Duration) {
    crate::sync::sleep(duration);
}

/// Nothing to give back here.
#[cfg(not(all(target_os = "linux", not(sigretire_loom), not(miri))))]
pub(crate) fn restore() {}

/// No timer slack to lower here.
#[cfg(not(all(target_os = "linux", not(sigretire_loom), not(miri))))]
pub(crate) fn fine_slack() {}

#[cfg(all(test, target_os = "linux", not(sigretire_loom), not(miri)))]
mod tests {
    use super::*;

    fn slack() -> libc::c_int {
        // SAFETY: as in `doze`.
        unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) }
    }

    #[test]
    fn dozes_sleep_with_a_fine_slack_and_restore_gives_the_threads_back() {
        let before = slack();
        doze(Duration::from_micros(50));
        assert_eq!(slack(), FINE_SLACK_NS as libc::c_int);
        doze(Duration::from_micros(50));
        restore();
        assert_eq!(slack(), before);
        restore();
        assert_eq!(slack(), before, "a second restore changes nothing");
    }
}
