//! Keeping the simulated GPU off the host thread's core.
//!
//! On the threaded simulator the "GPU" is a processor thread. A host thread
//! that spins on a signal (CLR's waits spin for up to 100 us) can hold the
//! only core the scheduler gave both of them, and the simulated GPU then
//! makes no progress until the spinner yields: a wait of a few microseconds
//! reads as a hundred. On hardware the GPU never shares the host's core, so
//! a measurement that models it should not either: [`Split`] runs the code
//! that spawns the processor thread on one CPU of its own, and the calling
//! thread (and the threads it starts later) on the others, hyper-thread
//! siblings of the first left out where there is a choice; it restores the
//! calling thread's CPUs when dropped.

use std::mem::{size_of, zeroed};

/// The calling thread's allowed CPUs, as a set.
fn allowed() -> Option<libc::cpu_set_t> {
    // SAFETY: `cpu_set_t` is plain data, valid all zero.
    let mut set: libc::cpu_set_t = unsafe { zeroed() };
    // SAFETY: `set` is a valid, writable `cpu_set_t` of the size passed;
    // pid 0 is the calling thread.
    let status = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
    (status == 0).then_some(set)
}

fn set_allowed(set: &libc::cpu_set_t) -> bool {
    // SAFETY: `set` is a valid `cpu_set_t` of the size passed; pid 0 is the
    // calling thread.
    unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), set) == 0 }
}

fn only(chosen: &[usize]) -> libc::cpu_set_t {
    // SAFETY: as in `allowed`.
    let mut set: libc::cpu_set_t = unsafe { zeroed() };
    for &cpu in chosen {
        // SAFETY: `cpu` is below `CPU_SETSIZE` (every caller's CPU came
        // from `cpus`), so the bit is inside `set`.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    set
}

fn cpus(set: &libc::cpu_set_t) -> Vec<usize> {
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below `CPU_SETSIZE`, so the bit is inside `set`.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, set) })
        .collect()
}

/// The hyper-thread siblings of `cpu` (itself included), from sysfs.
fn siblings(cpu: usize) -> Vec<usize> {
    let path = format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list");
    let Ok(list) = std::fs::read_to_string(path) else {
        return vec![cpu];
    };
    let mut out = Vec::new();
    for part in list.trim().split(',') {
        let mut ends = part.split('-').filter_map(|n| n.parse::<usize>().ok());
        match (ends.next(), ends.next()) {
            (Some(a), Some(b)) => out.extend(a..=b),
            (Some(a), None) => out.push(a),
            _ => {}
        }
    }
    out
}

/// A CPU of the calling thread's set for a simulated GPU, and the others
/// for the host: not the GPU's hyper-thread siblings, unless they are all
/// that is left.
fn pick(available: &[usize]) -> Option<(Vec<usize>, usize)> {
    if available.len() < 2 {
        return None;
    }
    let gpu = *available.last()?;
    let siblings = siblings(gpu);
    let apart: Vec<usize> = available
        .iter()
        .copied()
        .filter(|cpu| !siblings.contains(cpu))
        .collect();
    let host = if apart.is_empty() {
        available
            .iter()
            .copied()
            .filter(|&cpu| cpu != gpu)
            .collect()
    } else {
        apart
    };
    Some((host, gpu))
}

/// The calling thread kept off one CPU, after `spawn` ran pinned to it;
/// dropping it gives the thread its CPUs back.
pub struct Split {
    restore: Option<libc::cpu_set_t>,
}

impl Split {
    /// Runs `spawn` (which starts the processor thread, which inherits the
    /// CPU) on the "GPU" CPU, then keeps the calling thread to the "host"
    /// CPUs. With fewer than two CPUs allowed, or where the calls fail, it
    /// only runs `spawn`: the run is then as the scheduler makes it.
    ///
    /// ```
    /// let (split, value) = sigretire_bench::affinity::Split::run(|| 7);
    /// assert_eq!(value, 7);
    /// drop(split);
    /// ```
    pub fn run<R>(spawn: impl FnOnce() -> R) -> (Split, R) {
        let original = allowed();
        let chosen = original.as_ref().and_then(|set| pick(&cpus(set)));
        let (Some(original), Some((host, gpu))) = (original, chosen) else {
            return (Split { restore: None }, spawn());
        };
        if !set_allowed(&only(&[gpu])) {
            return (Split { restore: None }, spawn());
        }
        let value = spawn();
        let pinned = set_allowed(&only(&host));
        if !pinned {
            set_allowed(&original);
        }
        (
            Split {
                restore: pinned.then_some(original),
            },
            value,
        )
    }

    /// Whether the two threads run on CPUs of their own.
    pub fn is_split(&self) -> bool {
        self.restore.is_some()
    }
}

impl Drop for Split {
    fn drop(&mut self) {
        if let Some(set) = &self.restore {
            set_allowed(set);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_two_distinct_cpus_or_none() {
        assert_eq!(pick(&[]), None);
        assert_eq!(pick(&[3]), None);
        let (host, gpu) = pick(&[0, 1]).unwrap();
        assert!(!host.is_empty() && !host.contains(&gpu));
    }

    #[test]
    fn the_split_is_undone_on_drop() {
        let before = allowed().map(|set| cpus(&set));
        let (split, _) = Split::run(|| ());
        if split.is_split() {
            let now = allowed().map(|set| cpus(&set)).unwrap();
            assert!(now.len() < before.as_ref().unwrap().len());
        }
        drop(split);
        assert_eq!(allowed().map(|set| cpus(&set)), before);
    }
}
