//! The backends sigbench knows, each behind [`Platform`](crate::platform::Platform).

pub mod cuda;
pub mod cuda_events;
pub mod rocr;
pub mod sim;
