//! Builders for the packets a completion tracker submits, ready for
//! [`Queue::write`](crate::Queue::write) or [`Queue::submit`](crate::Queue::submit).
//!
//! Every header has system-scope acquire and release fences and no barrier
//! bit; [`with_barrier_bit`] sets it.
//!
//! ```
//! use sigretire_sim::packets;
//! use hsa_sys::{HSA_PACKET_TYPE_BARRIER_AND, PacketHeader};
//!
//! let fence = packets::with_barrier_bit(packets::barrier_and(&[], None));
//! let header = PacketHeader::from_bits(fence.header());
//! assert_eq!(header.packet_type, HSA_PACKET_TYPE_BARRIER_AND);
//! assert!(header.barrier);
//! ```

use crate::memory::Signal;
use hsa_sys::{
    AqlWork, BarrierValue, MAX_DEPENDENCIES, PacketHeader, PacketWords, encode,
    hsa_signal_condition_t,
};

/// The packet for `work` without the barrier bit, completing `completion`:
/// `hsa-sys`'s encoder, the one every backend's packets come from.
fn packet(work: AqlWork<'_>, completion: Option<Signal>) -> PacketWords {
    encode(work, false, completion.map_or(0, |s| s.handle().handle))
        .expect("at most five dependencies (`handles`)")
}

/// The packet handles of `dependencies`, in the first slots.
///
/// # Panics
/// With more than five dependencies: an AQL barrier packet has five slots.
fn handles(dependencies: &[Signal]) -> [u64; MAX_DEPENDENCIES] {
    assert!(
        dependencies.len() <= MAX_DEPENDENCIES,
        "a barrier packet holds at most 5 dependencies, got {}",
        dependencies.len()
    );
    std::array::from_fn(|k| dependencies.get(k).map_or(0, |s| s.handle().handle))
}

/// A one-work-item kernel dispatch of `kernel_object` (0: the empty kernel,
/// otherwise a value from [`Sim::register_kernel`](crate::Sim::register_kernel)).
///
/// ```
/// use sigretire_sim::{packets, AgentId, Placement, Sim, SimConfig, SimQueueConfig};
///
/// let sim = Sim::new(SimConfig::default());
/// let queue = sim.create_queue(SimQueueConfig::default())?;
/// let signal = sim.allocate(1, Placement::Host, AgentId(0))?[0];
/// sim.store(signal, 1);
/// let packet = packets::kernel(0, Some(signal));
/// assert_eq!(packet.completion_signal(), signal.handle());
/// queue.submit(packet)?;
/// queue.run_until_idle();
/// assert_eq!(sim.load(signal), 0); // completion decrements it
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
pub fn kernel(kernel_object: u64, completion: Option<Signal>) -> PacketWords {
    packet(AqlWork::Kernel(kernel_object), completion)
}

/// A barrier-AND packet: completes when every dependency is 0. With no
/// dependencies it is empty work (a marker).
///
/// # Panics
/// With more than five dependencies.
///
/// ```
/// use sigretire_sim::{packets, AgentId, Placement, Sim, SimConfig, SimQueueConfig, StepError};
///
/// let sim = Sim::new(SimConfig::default());
/// let waiter = sim.create_queue(SimQueueConfig::default())?;
/// let producer = sim.create_queue(SimQueueConfig::default())?;
/// let deps = sim.allocate(2, Placement::Host, AgentId(0))?;
/// sim.store_many(&deps, 1);
/// let barrier = waiter.submit(packets::barrier_and(&deps, None))?;
/// waiter.launch().unwrap();
/// producer.submit(packets::kernel(0, Some(deps[0])))?;
/// producer.run_until_idle();
/// assert_eq!(waiter.complete(barrier), Err(StepError::NotReady { index: barrier }));
/// producer.submit(packets::kernel(0, Some(deps[1])))?;
/// producer.run_until_idle();
/// assert_eq!(waiter.complete(barrier), Ok(())); // both are 0 now
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
pub fn barrier_and(dependencies: &[Signal], completion: Option<Signal>) -> PacketWords {
    let slots = handles(dependencies);
    packet(
        AqlWork::BarrierAnd(&slots[..dependencies.len()]),
        completion,
    )
}

/// A barrier-OR packet: completes when any dependency is 0.
///
/// # Panics
/// With more than five dependencies.
///
/// ```
/// use sigretire_sim::{packets, AgentId, Placement, Sim, SimConfig, SimQueueConfig, StepError};
///
/// let sim = Sim::new(SimConfig::default());
/// let waiter = sim.create_queue(SimQueueConfig::default())?;
/// let producer = sim.create_queue(SimQueueConfig::default())?;
/// let deps = sim.allocate(3, Placement::Host, AgentId(0))?;
/// sim.store_many(&deps, 1);
/// let barrier = waiter.submit(packets::barrier_or(&deps, None))?;
/// waiter.launch().unwrap();
/// assert_eq!(waiter.complete(barrier), Err(StepError::NotReady { index: barrier }));
/// producer.submit(packets::kernel(0, Some(deps[2])))?; // any one will do
/// producer.run_until_idle();
/// assert_eq!(waiter.complete(barrier), Ok(()));
/// assert_eq!(sim.load(deps[0]), 1);
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
pub fn barrier_or(dependencies: &[Signal], completion: Option<Signal>) -> PacketWords {
    let slots = handles(dependencies);
    packet(AqlWork::BarrierOr(&slots[..dependencies.len()]), completion)
}

/// AMD's barrier-value packet: completes when
/// `(value(signal) & mask) condition compare` holds (`HSA_SIGNAL_CONDITION_*`).
///
/// ```
/// use sigretire_sim::hsa_sys::HSA_SIGNAL_CONDITION_LT;
/// use sigretire_sim::{packets, AgentId, Placement, Sim, SimConfig, SimQueueConfig, StepError};
///
/// let sim = Sim::new(SimConfig::default());
/// let waiter = sim.create_queue(SimQueueConfig::default())?;
/// let producer = sim.create_queue(SimQueueConfig::default())?;
/// let counter = sim.allocate(1, Placement::Host, AgentId(0))?[0];
/// sim.store(counter, 3);
/// // Waits until fewer than 2 of the 3 producer kernels are left.
/// let below_two = packets::barrier_value(counter, HSA_SIGNAL_CONDITION_LT, 2, -1, None);
/// let barrier = waiter.submit(below_two)?;
/// waiter.launch().unwrap();
/// producer.submit(packets::kernel(0, Some(counter)))?;
/// producer.run_until_idle(); // 3 -> 2
/// assert_eq!(waiter.complete(barrier), Err(StepError::NotReady { index: barrier }));
/// producer.submit(packets::kernel(0, Some(counter)))?;
/// producer.run_until_idle(); // 2 -> 1
/// assert_eq!(waiter.complete(barrier), Ok(()));
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
pub fn barrier_value(
    signal: Signal,
    condition: hsa_signal_condition_t,
    compare: i64,
    mask: i64,
    completion: Option<Signal>,
) -> PacketWords {
    let wait = BarrierValue {
        signal: signal.handle().handle,
        condition,
        compare,
        mask,
    };
    packet(AqlWork::BarrierValue(wait), completion)
}

/// `packet` with its barrier bit set: it will not launch until every earlier
/// packet of its queue completed (a fence).
///
/// ```
/// use sigretire_sim::{packets, Blocked, Sim, SimConfig, SimQueueConfig, StepError};
///
/// let sim = Sim::new(SimConfig::default());
/// let queue = sim.create_queue(SimQueueConfig::default())?;
/// let kernel = queue.submit(packets::kernel(0, None))?;
/// let fence = queue.submit(packets::with_barrier_bit(packets::kernel(0, None)))?;
/// queue.launch().unwrap();
/// assert_eq!(
///     queue.launch(),
///     Err(StepError::NotLaunchable {
///         index: fence,
///         reason: Blocked::BarrierBit { waiting_for: kernel },
///     })
/// );
/// queue.complete(kernel).unwrap();
/// assert_eq!(queue.launch(), Ok(fence));
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
pub fn with_barrier_bit(packet: PacketWords) -> PacketWords {
    let mut packet = packet;
    let header = PacketHeader::from_bits(packet.header()).barrier(true);
    packet.0[0] = (packet.0[0] & 0xffff_0000) | u32::from(header.bits());
    packet
}
