//! What a backend provides: memory that holds signals, and a view of the
//! hardware queue whose packets the signals complete.
//!
//! The tracker never touches signal memory except through [`SignalMemory`], so
//! the same code runs on the simulator, on ROCr and on CUDA, and it counts
//! every access itself (see [`Stats`](crate::Stats)) whatever the backend.
//!
//! A runtime that uses an existing backend (the simulator, ROCr, CUDA)
//! needs nothing from this module but what the crate root re-exports
//! ([`Placement`], [`Timestamps`], [`TimestampClock`], [`Work`]); the rest is
//! for whoever writes a backend: the traits, the packets the tracker asks a
//! queue to publish, and the ready-made pieces a backend may build on
//! ([`HostMemory`], [`WakeMailbox`]).

mod contract;
mod host_memory;

pub use crate::mailbox::WakeMailbox;
pub use crate::publication::Publication;
pub use contract::{
    AllocError, Condition, Dispatch, HardwareQueue, Placement, QueueError, QueueView, SignalMemory,
    TimestampClock, Timestamps, WaitValue, Work,
};
pub use host_memory::HostMemory;
