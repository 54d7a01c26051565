//! Pending futures cost no thread: thousands of them wait on a stalled
//! device while the process's thread count stays where it was (its own
//! test binary, so no other test's threads come and go meanwhile).

mod support;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};
use support::*;

/// The process's OS threads (Linux: `/proc/self/status`).
fn threads() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
}

#[test]
fn thousands_of_pending_futures_take_no_thread() {
    let (platform, device) = stepped();
    let queues: Vec<_> = (0..4)
        .map(|_| platform.create_queue(&device, bounded()).unwrap())
        .collect();
    // Warm up: the completion and callback threads exist before counting.
    for queue in &queues {
        let command = queue.launch_empty().unwrap();
        let mut future = command.wait_async();
        let _ = Pin::new(&mut future).poll(&mut Context::from_waker(Waker::noop()));
        drive(&platform, spawn(move || pollster::block_on(future))).unwrap();
    }
    let Some(before) = threads() else {
        return; // not Linux: nothing to count with
    };
    let commands: Vec<_> = queues
        .iter()
        .flat_map(|queue| {
            (0..1000)
                .map(|_| queue.launch_empty().unwrap())
                .collect::<Vec<_>>()
        })
        .collect();
    let mut futures: Vec<_> = commands.iter().map(|c| c.wait_async()).collect();
    for future in &mut futures {
        assert!(
            Pin::new(future)
                .poll(&mut Context::from_waker(Waker::noop()))
                .is_pending()
        );
    }
    let pending: usize = queues.iter().map(|q| q.watches_pending()).sum();
    assert_eq!(pending, 4000);
    assert_eq!(threads(), Some(before), "a pending future took a thread");
    let done = drive(
        &platform,
        spawn(move || futures.into_iter().map(pollster::block_on).count()),
    );
    assert_eq!(done, 4000);
}
