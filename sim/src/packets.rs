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
    HSA_AMD_PACKET_TYPE_BARRIER_VALUE, HSA_PACKET_TYPE_BARRIER_AND, HSA_PACKET_TYPE_BARRIER_OR,
    HSA_PACKET_TYPE_KERNEL_DISPATCH, HSA_PACKET_TYPE_VENDOR_SPECIFIC, PacketHeader, PacketWords,
    hsa_amd_barrier_value_packet_t, hsa_amd_vendor_packet_header_t, hsa_barrier_and_packet_t,
    hsa_barrier_or_packet_t, hsa_kernel_dispatch_packet_t, hsa_signal_condition_t, hsa_signal_t,
};

fn handle(signal: Option<Signal>) -> hsa_signal_t {
    signal.map_or(hsa_signal_t::NULL, |s| s.handle())
}

/// Up to five dependency handles, the rest null.
///
/// # Panics
/// With more than five dependencies: an AQL barrier packet has five slots.
fn dependency_slots(dependencies: &[Signal]) -> [hsa_signal_t; 5] {
    assert!(
        dependencies.len() <= 5,
        "a barrier packet holds at most 5 dependencies, got {}",
        dependencies.len()
    );
    std::array::from_fn(|k| handle(dependencies.get(k).copied()))
}

/// A one-work-item kernel dispatch of `kernel_object` (0: the empty kernel,
/// otherwise a value from [`Sim::register_kernel`](crate::Sim::register_kernel)).
///
/// ```
/// use sigretire_sim::{packets, AgentId, Placement, QueueConfig, Sim, SimConfig};
///
/// let sim = Sim::new(SimConfig::default());
/// let queue = sim.create_queue(QueueConfig::default())?;
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
    let header = PacketHeader::new(HSA_PACKET_TYPE_KERNEL_DISPATCH);
    hsa_kernel_dispatch_packet_t::single_item(header, kernel_object, handle(completion)).into()
}

/// A barrier-AND packet: completes when every dependency is 0. With no
/// dependencies it is empty work (a marker).
///
/// # Panics
/// With more than five dependencies.
///
/// ```
/// use sigretire_sim::{packets, AgentId, Placement, QueueConfig, Sim, SimConfig, StepError};
///
/// let sim = Sim::new(SimConfig::default());
/// let waiter = sim.create_queue(QueueConfig::default())?;
/// let producer = sim.create_queue(QueueConfig::default())?;
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
    hsa_barrier_and_packet_t {
        header: PacketHeader::new(HSA_PACKET_TYPE_BARRIER_AND).bits(),
        dep_signal: dependency_slots(dependencies),
        completion_signal: handle(completion),
        ..Default::default()
    }
    .into()
}

/// A barrier-OR packet: completes when any dependency is 0.
///
/// # Panics
/// With more than five dependencies.
///
/// ```
/// use sigretire_sim::{packets, AgentId, Placement, QueueConfig, Sim, SimConfig, StepError};
///
/// let sim = Sim::new(SimConfig::default());
/// let waiter = sim.create_queue(QueueConfig::default())?;
/// let producer = sim.create_queue(QueueConfig::default())?;
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
    hsa_barrier_or_packet_t {
        header: PacketHeader::new(HSA_PACKET_TYPE_BARRIER_OR).bits(),
        dep_signal: dependency_slots(dependencies),
        completion_signal: handle(completion),
        ..Default::default()
    }
    .into()
}

/// AMD's barrier-value packet: completes when
/// `(value(signal) & mask) condition compare` holds (`HSA_SIGNAL_CONDITION_*`).
///
/// ```
/// use sigretire_sim::hsa_sys::HSA_SIGNAL_CONDITION_LT;
/// use sigretire_sim::{packets, AgentId, Placement, QueueConfig, Sim, SimConfig, StepError};
///
/// let sim = Sim::new(SimConfig::default());
/// let waiter = sim.create_queue(QueueConfig::default())?;
/// let producer = sim.create_queue(QueueConfig::default())?;
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
    hsa_amd_barrier_value_packet_t {
        header: hsa_amd_vendor_packet_header_t {
            header: PacketHeader::new(HSA_PACKET_TYPE_VENDOR_SPECIFIC).bits(),
            AmdFormat: HSA_AMD_PACKET_TYPE_BARRIER_VALUE,
            reserved: 0,
        },
        signal: signal.handle(),
        value: compare,
        mask,
        cond: condition,
        completion_signal: handle(completion),
        ..Default::default()
    }
    .into()
}

/// `packet` with its barrier bit set: it will not launch until every earlier
/// packet of its queue completed (a fence).
///
/// ```
/// use sigretire_sim::{packets, Blocked, QueueConfig, Sim, SimConfig, StepError};
///
/// let sim = Sim::new(SimConfig::default());
/// let queue = sim.create_queue(QueueConfig::default())?;
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
