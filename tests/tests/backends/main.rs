//! The trackers' scenarios, and the queue layer's regression test, written
//! once against a backend-neutral rig (`support`) and run on every backend
//! that can run them: the simulator (`<module>::sim::*`) and the ROCr
//! backend over its stand-in (`<module>::rocr::*`). Each step is checked
//! against that backend's ground truth and violations.
//!
//! A scenario that only one backend can run says why where it stands.

#[path = "../support/mod.rs"]
mod support;

mod caller_work;
mod cross_agent;
mod failure;
mod growth;
mod hybrid_wait;
mod queue_layer;
mod regression;
mod retirement;
mod sharing;
mod steady_state;
mod store_order;
mod teeth;
mod timing;
