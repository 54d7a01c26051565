//! Unit tests of the store ordering and the re-arm batch, on `Signals`
//! alone (over the test GPU's memory), then as a tracker uses them.

use super::*;
use crate::backend::Placement::{Device, Host};
use crate::test_gpu::TestMemory;

fn signals(flush_before_publish: bool) -> Signals<TestMemory> {
    let memory = Arc::new(TestMemory::new(64));
    Signals::new(Arc::new(Shared::new(memory, true)), flush_before_publish)
}

/// A store order where stores up to `fenced` are fenced and up to `flushed`
/// flushed.
fn order(fenced: u64, flushed: u64, flush_before_publish: bool) -> Signals<TestMemory> {
    let mut order = signals(flush_before_publish);
    order.stores_issued = fenced.max(flushed) + 10;
    order.fenced_through = fenced;
    order.flushed_through = flushed;
    order.update_visible();
    order
}

fn batch(number: u64) -> RearmBatch<usize> {
    RearmBatch {
        signals: ArrayVec::new(),
        placement: None,
        number,
    }
}

#[test]
fn host_signals_are_always_visible() {
    for flush in [false, true] {
        let order = order(0, 0, flush);
        for store in [0, 1, 5, u64::MAX] {
            assert!(
                order.is_visible(Host, store),
                "store {store}, flush {flush}"
            );
        }
    }
}

#[test]
fn device_signals_need_a_fence() {
    let order = order(5, 0, false);
    let visible: Vec<bool> = (3..=7)
        .map(|store| order.is_visible(Device, store))
        .collect();
    assert_eq!(
        visible,
        [true, true, true, false, false],
        "stores 3..=7, fenced through 5"
    );
}

#[test]
fn device_signals_need_a_flush_too_when_packets_bypass_the_bar() {
    let mut order = order(5, 3, true);
    let visible: Vec<bool> = (2..=6)
        .map(|store| order.is_visible(Device, store))
        .collect();
    assert_eq!(
        visible,
        [true, true, false, false, false],
        "stores 2..=6, fenced through 5, flushed through 3"
    );
    // A ring in device memory again: the fence alone suffices.
    order.set_flush_before_publish(false);
    assert!(order.is_visible(Device, 5));
    assert!(!order.is_visible(Device, 6));
    order.set_flush_before_publish(true);
    assert!(!order.is_visible(Device, 5));
}

#[test]
fn a_new_store_order_has_made_nothing_visible() {
    for flush in [false, true] {
        let order = signals(flush);
        assert_eq!(order.stores_issued(), 0);
        assert_eq!(
            order.rearm_batch().number(),
            1,
            "the next store is the first"
        );
        // Store 0 is "armed before anything was counted": nothing to wait for.
        assert!(order.is_visible(Device, 0));
        assert!(!order.is_visible(Device, 1));
    }
}

#[test]
fn a_batch_holds_signals_of_the_placement_it_began_with() {
    let mut batch = batch(7);
    assert_eq!(batch.number, 7);
    assert_eq!(batch.room(), REARM_BATCH);
    assert!(!batch.is_full());
    assert_eq!(batch.placement, None);

    batch.begin(Device);
    // SAFETY: an empty batch has room.
    unsafe { batch.filler().push(3) };
    assert_eq!(batch.placement, Some(Device));
    assert_eq!(batch.room(), REARM_BATCH - 1);
    assert_eq!(batch.signals.as_slice(), [3]);
}

#[test]
fn a_batch_fills_at_its_size_in_order() {
    assert_eq!(
        REARM_BATCH, 32,
        "the bar: one flush per 32 re-armed signals"
    );
    let mut batch = batch(1);
    batch.begin(Host);
    for signal in 0..REARM_BATCH {
        assert!(!batch.is_full(), "after {signal}");
        assert_eq!(batch.room(), REARM_BATCH - signal);
        // SAFETY: room asked for and checked just above.
        unsafe { batch.filler().push(signal) };
    }
    assert!(batch.is_full());
    assert_eq!(batch.room(), 0);
    assert!(batch.signals.iter().copied().eq(0..REARM_BATCH));
}

/// A filler counts its pushes in itself and hands them to the batch when
/// dropped, after the signals the batch already held, in order; a filler
/// that pushed nothing leaves the batch as it was.
#[test]
fn a_filler_appends_its_pushes_when_dropped() {
    let mut batch = batch(1);
    batch.begin(Host);
    // SAFETY: an empty batch has room for 32.
    unsafe { batch.filler().push(100) };
    drop(batch.filler());
    assert_eq!(batch.signals.as_slice(), [100]);
    let room = batch.room();
    let mut filler = batch.filler();
    for signal in 0..room {
        // SAFETY: at most `room` pushes, asked for before the filler began.
        unsafe { filler.push(signal) };
    }
    drop(filler);
    assert!(batch.is_full());
    assert_eq!(batch.signals[0], 100);
    assert!(batch.signals[1..].iter().copied().eq(0..room));
}

/// Signals that own memory are neither leaked nor dropped twice by a
/// filler (Miri checks it).
#[test]
fn a_filler_hands_over_owned_signals_whole() {
    let mut batch = RearmBatch {
        signals: arrayvec::ArrayVec::<Box<u32>, REARM_BATCH>::new(),
        placement: None,
        number: 1,
    };
    batch.begin(Host);
    let mut filler = batch.filler();
    for n in 0..3 {
        // SAFETY: an empty batch has room for 32.
        unsafe { filler.push(Box::new(n)) };
    }
    drop(filler);
    assert_eq!(
        batch.signals.iter().map(|b| **b).collect::<Vec<_>>(),
        [0, 1, 2]
    );
}

/// `make_visible` on a real tracker (device signals on the test GPU, whose
/// memory counts what reached it): one fence covers every store before it,
/// and a flush is issued only where a packet bypasses the BAR.
#[test]
fn one_fence_covers_every_earlier_store_and_flushes_go_only_where_needed() {
    use crate::test_gpu::on_a_test_gpu;
    use std::sync::atomic::Ordering::Relaxed;
    let config = crate::Config {
        signals: Device,
        ..crate::Config::default()
    };
    let (mut tracker, _queue) = on_a_test_gpu(config, crate::RetiringTracker::new);
    assert!(
        !tracker.signals().flush_before_publish,
        "the test queue's ring is in device memory"
    );
    let memory = tracker.signals().shared().memory.clone();
    let cell = tracker.ring_mut().next_mut().cell.clone();
    assert_eq!(cell.placement, Device);
    let store = |tracker: &mut crate::RetiringTracker<_, _>| tracker.signals_mut().store(&cell, 1);
    let reached = || (memory.fences.load(Relaxed), memory.flushes.load(Relaxed));
    let mut last = (reached(), tracker.own_stats().device());
    // (fences, flushes) since the previous call, as the tracker and the
    // memory each counted them; they must agree.
    let mut issued = |tracker: &crate::RetiringTracker<_, _>| {
        let now = (reached(), tracker.own_stats().device());
        let memory_delta = (now.0.0 - last.0.0, now.0.1 - last.0.1);
        let ours = (now.1.fences - last.1.fences, now.1.flushes - last.1.flushes);
        assert_eq!(ours, memory_delta);
        last = now;
        ours
    };

    let first = store(&mut tracker);
    let second = store(&mut tracker);
    tracker.signals_mut().make_visible(Device, first, false);
    assert_eq!(issued(&tracker), (1, 0), "one fence");
    tracker.signals_mut().make_visible(Device, second, false);
    assert_eq!(issued(&tracker), (0, 0), "covered by the same fence");

    let third = store(&mut tracker);
    tracker.signals_mut().make_visible(Host, third, false);
    assert_eq!(issued(&tracker), (0, 0), "host signals need neither");

    // A copy engine reads the signal without going through the BAR.
    tracker.signals_mut().make_visible(Device, second, true);
    assert_eq!(issued(&tracker), (0, 1), "already fenced: a flush only");
    tracker.signals_mut().make_visible(Device, first, true);
    assert_eq!(issued(&tracker), (0, 0), "covered by the same flush");

    // A ring in system memory: every device signal needs both.
    tracker.signals_mut().set_flush_before_publish(true);
    tracker.signals_mut().make_visible(Device, third, false);
    assert_eq!(issued(&tracker), (1, 1));
    assert!(tracker.signals().is_visible(Device, third));
}
