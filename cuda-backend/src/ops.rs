//! The stream memory operations a publication enqueues after its work, in
//! one `cuStreamBatchMemOp` call. (Empty work needs none: its kernel writes
//! the completion and the progress word itself, in the same order; see
//! `kernel.rs`.)
//!
//! In stream order, after the work (a kernel, or nothing for a wait):
//!
//! 1. for [`Work::Wait`](sigretire_tracker::Work::Wait), one 64-bit wait per dependency
//!    until it equals 0 (a GPU waiter: the stream stalls on the GPU, not the
//!    host);
//! 2. for a wait or a marker (any publication that runs no kernel) with a
//!    completion signal, zeros into the signal's stamps (no kernel writes
//!    them, and a timed use must never report an earlier use's stamps; the
//!    memory reads zeros as "no stamps");
//! 3. the completion: 0 into the signal's value;
//! 4. the progress: `index + 1` into the queue's progress word, which
//!    [`read_index`](sigretire_tracker::backend::QueueView::read_index) loads.
//!
//! Writes keep the driver's default memory barrier, so each is visible only
//! after everything before it in the stream (the kernel's stamp stores, the
//! completion) is: whoever sees the progress word at `index + 1` could also
//! see the completion, and whoever sees the completion sees the stamps.
//!
//! The plan is pure data, tested without a GPU; [`encode`] turns it into the
//! driver's parameter unions.

use crate::signal::SignalBlock;
use cudarc::driver::sys::{
    CUstreamBatchMemOpParams, CUstreamBatchMemOpType, CUstreamWaitValue_flags,
    CUstreamWriteValue_flags,
};

/// Operations per `cuStreamBatchMemOp` call: the driver's documented limit
/// ("count must be less than 256"). Longer plans are split.
pub(crate) const MAX_OPS_PER_CALL: usize = 255;

/// One stream memory operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MemOp {
    /// Wait until the 64-bit word at `address` equals 0.
    WaitZero { address: u64 },
    /// Write `value` to the 64-bit word at `address`.
    Write { address: u64, value: u64 },
}

/// The value the progress word holds once publication `index` is done.
pub(crate) const fn progress_after(index: u64) -> u64 {
    index.wrapping_add(1)
}

/// What one publication enqueues after its work.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Publication<'a> {
    /// Its queue index.
    pub(crate) index: u64,
    /// Signals (device addresses) to wait for until they are 0.
    pub(crate) dependencies: &'a [u64],
    /// The signal to complete (its device address), or 0 for none.
    pub(crate) completion: u64,
    /// No kernel writes the completion signal's stamps: clear them.
    pub(crate) clear_stamps: bool,
}

/// Appends the operations of `publication` to `out` (cleared first): waits
/// on its dependencies, cleared stamps, its completion, then `index + 1`
/// into the progress word at `progress`.
pub(crate) fn plan(publication: Publication<'_>, progress: u64, out: &mut Vec<MemOp>) {
    let Publication {
        index,
        dependencies,
        completion,
        clear_stamps,
    } = publication;
    out.clear();
    out.extend(
        dependencies
            .iter()
            .map(|&address| MemOp::WaitZero { address }),
    );
    if completion != 0 {
        if clear_stamps {
            for offset in [SignalBlock::START_OFFSET, SignalBlock::END_OFFSET] {
                out.push(MemOp::Write {
                    address: completion + offset as u64,
                    value: 0,
                });
            }
        }
        out.push(MemOp::Write {
            address: completion,
            value: 0,
        });
    }
    out.push(MemOp::Write {
        address: progress,
        value: progress_after(index),
    });
}

/// The driver's form of one operation.
pub(crate) fn encode(op: MemOp) -> CUstreamBatchMemOpParams {
    // SAFETY: the parameter union is plain old data (integers and
    // addresses); all zeros is a valid value of every member.
    let mut params: CUstreamBatchMemOpParams = unsafe { core::mem::zeroed() };
    match op {
        MemOp::WaitZero { address } => {
            // SAFETY: writing (not reading) union fields; the zeroed union
            // makes every unwritten field 0, as the driver expects.
            let wait = unsafe { &mut params.waitValue };
            wait.operation = CUstreamBatchMemOpType::CU_STREAM_MEM_OP_WAIT_VALUE_64;
            wait.address = address;
            wait.__bindgen_anon_1.value64 = 0;
            wait.flags = CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_EQ as u32;
        }
        MemOp::Write { address, value } => {
            // SAFETY: as above.
            let write = unsafe { &mut params.writeValue };
            write.operation = CUstreamBatchMemOpType::CU_STREAM_MEM_OP_WRITE_VALUE_64;
            write.address = address;
            write.__bindgen_anon_1.value64 = value;
            // The default keeps the memory barrier before the write.
            write.flags = CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32;
        }
    }
    params
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROGRESS: u64 = 0x9000;

    fn publication(
        index: u64,
        dependencies: &[u64],
        completion: u64,
        clear_stamps: bool,
    ) -> Publication<'_> {
        Publication {
            index,
            dependencies,
            completion,
            clear_stamps,
        }
    }

    #[test]
    fn a_wait_without_dependencies_still_clears_its_stamps() {
        let mut ops = Vec::new();
        plan(publication(3, &[], 0x1000, true), PROGRESS, &mut ops);
        assert_eq!(
            ops,
            [
                MemOp::Write {
                    address: 0x1008,
                    value: 0
                },
                MemOp::Write {
                    address: 0x1010,
                    value: 0
                },
                MemOp::Write {
                    address: 0x1000,
                    value: 0
                },
                MemOp::Write {
                    address: PROGRESS,
                    value: 4
                },
            ]
        );
    }

    #[test]
    fn a_completion_is_written_before_the_progress_word() {
        let mut ops = Vec::new();
        plan(publication(41, &[], 0x1000, false), PROGRESS, &mut ops);
        assert_eq!(
            ops,
            [
                MemOp::Write {
                    address: 0x1000,
                    value: 0
                },
                MemOp::Write {
                    address: PROGRESS,
                    value: 42
                },
            ]
        );
    }

    #[test]
    fn without_a_completion_only_progress_is_written() {
        let mut ops = vec![MemOp::WaitZero { address: 1 }];
        plan(publication(0, &[], 0, true), PROGRESS, &mut ops);
        assert_eq!(
            ops,
            [MemOp::Write {
                address: PROGRESS,
                value: 1
            }]
        );
    }

    #[test]
    fn a_wait_stalls_on_each_dependency_then_clears_its_stamps_and_completes() {
        let mut ops = Vec::new();
        plan(
            publication(7, &[0x2000, 0x3000], 0x1000, true),
            PROGRESS,
            &mut ops,
        );
        assert_eq!(
            ops,
            [
                MemOp::WaitZero { address: 0x2000 },
                MemOp::WaitZero { address: 0x3000 },
                MemOp::Write {
                    address: 0x1008,
                    value: 0
                },
                MemOp::Write {
                    address: 0x1010,
                    value: 0
                },
                MemOp::Write {
                    address: 0x1000,
                    value: 0
                },
                MemOp::Write {
                    address: PROGRESS,
                    value: 8
                },
            ]
        );
    }

    #[test]
    fn the_progress_word_wraps_with_the_index() {
        assert_eq!(progress_after(u64::MAX), 0);
    }

    #[test]
    fn encoding_fills_the_drivers_union() {
        let wait = encode(MemOp::WaitZero { address: 0xabc0 });
        // SAFETY: reading back the member `encode` wrote.
        let w = unsafe { wait.waitValue };
        assert_eq!(
            w.operation,
            CUstreamBatchMemOpType::CU_STREAM_MEM_OP_WAIT_VALUE_64
        );
        assert_eq!(w.address, 0xabc0);
        // SAFETY: as above.
        assert_eq!(unsafe { w.__bindgen_anon_1.value64 }, 0);
        assert_eq!(
            w.flags,
            CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_EQ as u32
        );
        let write = encode(MemOp::Write {
            address: 0x40,
            value: 9,
        });
        // SAFETY: as above.
        let w = unsafe { write.writeValue };
        assert_eq!(
            w.operation,
            CUstreamBatchMemOpType::CU_STREAM_MEM_OP_WRITE_VALUE_64
        );
        // SAFETY: as above.
        let value = unsafe { w.__bindgen_anon_1.value64 };
        assert_eq!((w.address, value, w.flags), (0x40, 9, 0));
        assert_eq!(core::mem::size_of::<CUstreamBatchMemOpParams>(), 48);
    }
}
