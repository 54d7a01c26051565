//! The backends sigbench knows, each behind [`Platform`](crate::platform::Platform).

pub mod cuda;
pub mod rocr;
pub mod sim;
