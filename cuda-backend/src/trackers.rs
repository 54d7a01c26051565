//! A ready-made tracker: a retiring tracker with its own signal memory on a
//! new queue of a context, for programs that want one and nothing more.

use crate::context::CudaContext;
use crate::error::Result;
use crate::hardware_queue::CudaQueue;
use crate::memory::CudaMemory;
use sigretire_tracker::{Config, RetiringTracker};
use std::sync::Arc;

/// A tracker and its queue on a context, in one call.
impl CudaContext {
    /// A retiring tracker with its own signal memory on a new queue, and the
    /// queue. Use `Placement::Host` signals (the default): this backend has
    /// no other kind.
    ///
    /// ```
    /// # use sigretire_cuda::{CudaContext, Error};
    /// # let context = match CudaContext::new(0) {
    /// #     Err(Error::LibraryMissing | Error::NoDevice { .. }) => return Ok(()), // no GPU here
    /// #     context => context?,
    /// # };
    /// use sigretire_tracker::backend::HardwareQueue;
    /// use sigretire_tracker::{Config, Request, Status, Tracker, Work};
    ///
    /// let (mut tracker, queue) = context.retiring_tracker(Config::default())?;
    /// let index = queue.reserve().unwrap();
    /// let acquired = tracker.acquire(Request::packet(index).barrier(true)).unwrap();
    /// queue.publish(acquired.publication, Work::Empty).unwrap();
    /// queue.synchronize()?;
    /// assert_eq!(tracker.query(&acquired.ticket).unwrap(), Status::Complete);
    /// # Ok::<(), sigretire_cuda::Error>(())
    /// ```
    pub fn retiring_tracker(
        self: &Arc<Self>,
        config: Config,
    ) -> Result<(RetiringTracker<CudaMemory, CudaQueue>, CudaQueue)> {
        let queue = self.create_queue()?;
        let memory = Arc::new(CudaMemory::new(self));
        Ok((RetiringTracker::new(memory, queue.clone(), config)?, queue))
    }
}
