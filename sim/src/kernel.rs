//! Simulated kernels and the host flags that spinning kernels wait on.
//!
//! A kernel dispatch packet's `kernel_object` picks a kernel registered with
//! [`Sim::register_kernel`](crate::Sim::register_kernel); 0 is the empty
//! kernel. Only what a completion tracker can observe is simulated: how long
//! the kernel runs, or which host flag it spins on.

use crate::threaded::Wake;
use parking_lot::{Mutex, RwLock};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// What a kernel dispatch does between launch and completion.
///
/// A spinning kernel holds its completion (and, through a fence behind it,
/// its queue) until the host sets its flag:
///
/// ```
/// use sigretire_sim::{packets, HostFlag, Kernel, QueueConfig, Sim, SimConfig, StepError};
///
/// let sim = Sim::new(SimConfig::default());
/// let queue = sim.create_queue(QueueConfig::default())?;
/// let flag = HostFlag::new();
/// let spin = sim.register_kernel(Kernel::SpinUntil(flag.clone()));
/// let index = queue.submit(packets::kernel(spin, None))?;
/// queue.run_until_idle();
/// assert!(queue.truth(index).unwrap().launched);
/// assert_eq!(queue.complete(index), Err(StepError::NotReady { index }));
/// flag.set();
/// queue.run_until_idle();
/// assert!(queue.truth(index).unwrap().completed);
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
#[derive(Clone, Debug)]
pub enum Kernel {
    /// Nothing: completes after the profile's
    /// [`kernel_execution`](crate::CostProfile::kernel_execution) (threaded
    /// mode) or whenever the caller completes it (stepped mode).
    Empty,
    /// Runs this long in threaded mode; in stepped mode the caller chooses
    /// when it completes.
    Duration(Duration),
    /// Spins until the flag is set, as the seed's regression test's kernel
    /// does: it cannot complete before [`HostFlag::set`], in either mode.
    SpinUntil(HostFlag),
}

/// A flag in host memory that a [`Kernel::SpinUntil`] polls.
///
/// Clones share the flag. Setting it wakes the processor thread of every
/// threaded simulator that registered a kernel spinning on it.
///
/// ```
/// use sigretire_sim::HostFlag;
///
/// let flag = HostFlag::new();
/// let seen_by_kernel = flag.clone();
/// assert!(!seen_by_kernel.is_set());
/// flag.set();
/// assert!(seen_by_kernel.is_set());
/// ```
#[derive(Clone, Default)]
pub struct HostFlag {
    inner: Arc<FlagInner>,
}

#[derive(Default)]
struct FlagInner {
    set: AtomicBool,
    /// Processor threads to wake when the flag is set.
    watchers: Mutex<Vec<Weak<Wake>>>,
}

impl HostFlag {
    /// A new, unset flag.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the flag (a release store) and wakes the processors that watch it.
    pub fn set(&self) {
        self.inner.set.store(true, Ordering::Release);
        for watcher in self.inner.watchers.lock().iter() {
            if let Some(wake) = watcher.upgrade() {
                wake.notify();
            }
        }
    }

    /// Clears the flag, so kernels launched from now on spin again.
    pub fn clear(&self) {
        self.inner.set.store(false, Ordering::Release);
    }

    /// Whether the flag is set (an acquire load).
    pub fn is_set(&self) -> bool {
        self.inner.set.load(Ordering::Acquire)
    }

    fn watch(&self, wake: &Arc<Wake>) {
        let mut watchers = self.inner.watchers.lock();
        watchers.retain(|w| w.strong_count() > 0);
        if !watchers
            .iter()
            .any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(wake)))
        {
            watchers.push(Arc::downgrade(wake));
        }
    }
}

impl fmt::Debug for HostFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostFlag")
            .field("set", &self.is_set())
            .finish()
    }
}

/// The kernels registered with one simulator; `kernel_object` N > 0 names
/// the N-th.
#[derive(Debug, Default)]
pub(crate) struct KernelTable {
    kernels: RwLock<Vec<Kernel>>,
}

impl KernelTable {
    /// Registers `kernel` and returns its `kernel_object`. A spinning kernel's
    /// flag learns to wake `wake` (the processor thread, if any).
    pub(crate) fn register(&self, kernel: Kernel, wake: Option<&Arc<Wake>>) -> u64 {
        if let (Kernel::SpinUntil(flag), Some(wake)) = (&kernel, wake) {
            flag.watch(wake);
        }
        let mut kernels = self.kernels.write();
        kernels.push(kernel);
        kernels.len() as u64
    }

    /// The kernel a dispatch's `kernel_object` names: 0 is [`Kernel::Empty`].
    pub(crate) fn get(&self, kernel_object: u64) -> Option<Kernel> {
        match kernel_object {
            0 => Some(Kernel::Empty),
            n => {
                let index = usize::try_from(n - 1).ok()?;
                self.kernels.read().get(index).cloned()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_objects_count_from_one() {
        let table = KernelTable::default();
        let a = table.register(Kernel::Duration(Duration::from_millis(1)), None);
        let b = table.register(Kernel::Empty, None);
        assert_eq!((a, b), (1, 2));
        assert!(matches!(table.get(0), Some(Kernel::Empty)));
        assert!(matches!(table.get(a), Some(Kernel::Duration(_))));
        assert!(table.get(3).is_none());
        assert!(table.get(u64::MAX).is_none());
    }
}
