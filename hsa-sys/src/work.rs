//! The tracker's work as AQL packets (feature `tracker`): the one mapping
//! from `sigretire-tracker`'s [`Work`] onto [`AqlWork`], which the ROCr
//! backend and the simulator's tracker adapter both publish through, so the
//! two put the same 64 bytes in a ring for the same work.

use crate::{
    AqlWork, BarrierValue, DispatchBody, EncodeError, HSA_SIGNAL_CONDITION_EQ,
    HSA_SIGNAL_CONDITION_GTE, HSA_SIGNAL_CONDITION_LT, HSA_SIGNAL_CONDITION_NE, PacketWords,
    encode, hsa_signal_condition_t, hsa_signal_value_t,
};
use sigretire_tracker::{
    Work,
    backend::{Condition, Dispatch, Publication, QueueError},
};

/// The packet for `work`, published as `publication` says (its barrier bit
/// and completion signal): empty work and markers are barrier-AND packets
/// with no dependency, waits barrier-AND or barrier-OR packets, kernels and
/// the caller's dispatches kernel dispatch packets, a value wait AMD's
/// barrier-value packet.
///
/// # Errors
/// [`QueueError::Unsupported`] for work no packet carries: a wait for any
/// of no signal, or more dependencies than a barrier packet holds
/// ([`MAX_DEPENDENCIES`](crate::MAX_DEPENDENCIES)).
///
/// ```
/// use hsa_sys::{aql_packet, hsa_kernel_dispatch_packet_t, PacketHeader};
/// use sigretire_tracker::backend::{Dispatch, Publication};
/// use sigretire_tracker::Work;
///
/// let work = Work::Dispatch(Dispatch::new(0xC0DE).kernarg_address(0x7000).grid([64, 1, 1]).workgroup([64, 1, 1]));
/// let words = aql_packet(work, &Publication::unsignalled(3, true)).unwrap();
/// let packet = hsa_kernel_dispatch_packet_t::from(words);
/// assert!(PacketHeader::from_bits(packet.header).barrier);
/// assert_eq!((packet.kernel_object, packet.grid_size_x, packet.workgroup_size_x), (0xC0DE, 64, 64));
/// assert_eq!(packet.kernarg_address as u64, 0x7000);
/// assert!(aql_packet(Work::WaitAny(&[]), &Publication::unsignalled(4, false)).is_err());
/// ```
pub fn aql_packet(work: Work<'_>, publication: &Publication) -> Result<PacketWords, QueueError> {
    encode(
        aql_work(work)?,
        publication.barrier(),
        publication.completion(),
    )
    .map_err(|EncodeError::TooManyDependencies(count)| QueueError::too_many_dependencies(count))
}

/// What `work` is in AQL's terms, field for field (empty work and markers
/// alike are [`AqlWork::Empty`]).
///
/// # Errors
/// [`QueueError::Unsupported`] for a wait for any of no signal.
///
/// ```
/// use hsa_sys::{aql_work, AqlWork};
/// use sigretire_tracker::Work;
/// assert_eq!(aql_work(Work::Marker).unwrap(), AqlWork::Empty);
/// assert_eq!(aql_work(Work::Wait(&[0x40])).unwrap(), AqlWork::BarrierAnd(&[0x40]));
/// assert!(aql_work(Work::WaitAny(&[])).is_err());
/// ```
pub fn aql_work(work: Work<'_>) -> Result<AqlWork<'_>, QueueError> {
    Ok(match work {
        Work::Empty | Work::Marker => AqlWork::Empty,
        Work::Kernel(object) => AqlWork::Kernel(object),
        Work::Wait(dependencies) => AqlWork::BarrierAnd(dependencies),
        Work::WaitAny([]) => {
            return Err(QueueError::Unsupported(
                "a barrier-OR packet needs at least one dependency".into(),
            ));
        }
        Work::WaitAny(dependencies) => AqlWork::BarrierOr(dependencies),
        Work::Dispatch(dispatch) => AqlWork::Dispatch(dispatch.into()),
        Work::WaitValue(wait) => AqlWork::BarrierValue(BarrierValue {
            signal: wait.signal,
            condition: condition(wait.condition),
            compare: wait.value,
            mask: wait.mask as hsa_signal_value_t,
        }),
    })
}

/// HSA's code for a value wait's condition.
fn condition(condition: Condition) -> hsa_signal_condition_t {
    match condition {
        Condition::Equal => HSA_SIGNAL_CONDITION_EQ,
        Condition::NotEqual => HSA_SIGNAL_CONDITION_NE,
        Condition::Less => HSA_SIGNAL_CONDITION_LT,
        Condition::GreaterEqual => HSA_SIGNAL_CONDITION_GTE,
    }
}

impl From<Dispatch> for DispatchBody {
    fn from(dispatch: Dispatch) -> Self {
        Self {
            kernel_object: dispatch.kernel_object,
            kernarg_address: dispatch.kernarg_address,
            grid: dispatch.grid,
            workgroup: dispatch.workgroup,
            dimensions: dispatch.dimensions,
            private_segment_size: dispatch.private_segment_size,
            group_segment_size: dispatch.group_segment_size,
        }
    }
}
