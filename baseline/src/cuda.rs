//! The baseline on CUDA: a baseline tracker with its own signal memory on a
//! new queue of a context, for the benchmarks' CUDA platform and the CUDA
//! backend's comparisons.

use crate::BaselineTracker;
use sigretire_cuda::{CudaContext, CudaMemory, CudaQueue, Result};
use sigretire_tracker::Config;
use std::sync::Arc;

/// The baseline tracker with its own signal memory on a new queue of
/// `context`, and the queue.
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
/// let (mut baseline, queue) = sigretire_baseline::cuda::baseline_tracker(&context, Config::default())?;
/// let index = queue.reserve().unwrap();
/// let acquired = baseline.acquire(Request::packet(index).barrier(true)).unwrap();
/// queue.publish(acquired.publication, Work::Empty).unwrap();
/// queue.synchronize()?;
/// assert_eq!(baseline.query(&acquired.ticket).unwrap(), Status::Complete);
/// # Ok::<(), sigretire_cuda::Error>(())
/// ```
pub fn baseline_tracker(
    context: &Arc<CudaContext>,
    config: Config,
) -> Result<(BaselineTracker<CudaMemory, CudaQueue>, CudaQueue)> {
    let queue = context.create_queue()?;
    let memory = Arc::new(CudaMemory::new(context));
    Ok((BaselineTracker::new(memory, queue.clone(), config)?, queue))
}
