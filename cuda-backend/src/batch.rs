//! Batch bookkeeping: carving signal blocks out of pinned chunks.
//!
//! Signals are created in batches (docs/design.md section 2: creation is the
//! expensive part), so one `cuMemHostAlloc` serves many of them: a chunk of at
//! least `min_chunk` blocks, handed out a few at a time. The logic here is
//! pure (the allocation itself is a closure), so it is tested without a GPU.

use crate::error::{Error, Result};
use crate::signal::{CudaSignal, SignalBlock};
use core::ptr::NonNull;

/// A run of contiguous signal blocks in one pinned allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Chunk {
    /// The first block, as the host sees it.
    pub(crate) host: NonNull<SignalBlock>,
    /// The first block, as the GPU sees it.
    pub(crate) device: u64,
    /// How many blocks the chunk holds.
    pub(crate) blocks: usize,
}

// SAFETY: a chunk is two addresses and a length; the carver only computes
// addresses from it, and dereferencing them is governed by `CudaMemory`.
unsafe impl Send for Chunk {}

impl Chunk {
    /// The `index`-th block's signal.
    fn signal(&self, index: usize) -> CudaSignal {
        debug_assert!(index < self.blocks);
        // SAFETY: `index < blocks`, so the result stays inside the allocation
        // the chunk describes.
        let host = unsafe { self.host.add(index) };
        CudaSignal::new(host, self.device + (index * SignalBlock::SIZE) as u64)
    }
}

/// Hands out signals from the newest chunk, allocating another when it runs
/// out. Leftover blocks of a chunk are used before a new one is allocated.
#[derive(Debug)]
pub(crate) struct Carver {
    current: Option<Chunk>,
    used: usize,
    min_chunk: usize,
    chunks: usize,
}

impl Carver {
    /// A carver whose chunks hold at least `min_chunk` blocks.
    pub(crate) fn new(min_chunk: usize) -> Self {
        Self {
            current: None,
            used: 0,
            min_chunk: min_chunk.max(1),
            chunks: 0,
        }
    }

    /// Blocks left in the current chunk.
    pub(crate) fn remaining(&self) -> usize {
        self.current.map_or(0, |c| c.blocks - self.used)
    }

    /// Chunks allocated so far.
    pub(crate) fn chunks(&self) -> usize {
        self.chunks
    }

    /// Bytes a chunk of `blocks` takes, or an error if it cannot be
    /// allocated at all (more than `isize::MAX` bytes).
    pub(crate) fn bytes_for(blocks: usize) -> Result<usize> {
        blocks
            .checked_mul(SignalBlock::SIZE)
            .filter(|&bytes| bytes <= isize::MAX as usize)
            .ok_or(Error::TooManySignals { requested: blocks })
    }

    /// Passes `count` new signals to `out`: first what is left of the current
    /// chunk, then from a new chunk of `max(rest, min_chunk)` blocks that
    /// `allocate` provides. All or nothing: if the allocation fails, no
    /// signal is handed out and the current chunk keeps its blocks.
    pub(crate) fn carve(
        &mut self,
        count: usize,
        allocate: impl FnOnce(usize) -> Result<Chunk>,
        mut out: impl FnMut(CudaSignal),
    ) -> Result<()> {
        let from_current = count.min(self.remaining());
        let rest = count - from_current;
        let fresh = if rest > 0 {
            let blocks = rest.max(self.min_chunk);
            Self::bytes_for(blocks)?;
            let chunk = allocate(blocks)?;
            debug_assert!(chunk.blocks >= rest);
            Some(chunk)
        } else {
            None
        };
        if let Some(current) = self.current {
            for index in self.used..self.used + from_current {
                out(current.signal(index));
            }
            self.used += from_current;
        }
        if let Some(chunk) = fresh {
            for index in 0..rest {
                out(chunk.signal(index));
            }
            self.current = Some(chunk);
            self.used = rest;
            self.chunks += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Host memory standing in for pinned chunks, with made-up device addresses.
    struct FakeDriver {
        chunks: Vec<Box<[SignalBlock]>>,
        next_device: u64,
        fail: bool,
    }

    impl FakeDriver {
        fn new() -> Self {
            Self {
                chunks: Vec::new(),
                next_device: 0x7f00_0000_0000,
                fail: false,
            }
        }

        fn allocate(&mut self, blocks: usize) -> Result<Chunk> {
            if self.fail {
                return Err(Error::Driver {
                    call: "cuMemHostAlloc",
                    code: cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY,
                });
            }
            let mut memory: Box<[SignalBlock]> =
                (0..blocks).map(|_| SignalBlock::default()).collect();
            let chunk = Chunk {
                host: NonNull::new(memory.as_mut_ptr()).unwrap(),
                device: self.next_device,
                blocks,
            };
            self.next_device += 0x10_0000;
            self.chunks.push(memory);
            Ok(chunk)
        }
    }

    fn carve(
        carver: &mut Carver,
        driver: &mut FakeDriver,
        count: usize,
    ) -> Result<Vec<CudaSignal>> {
        let mut out = Vec::new();
        carver.carve(count, |blocks| driver.allocate(blocks), |s| out.push(s))?;
        Ok(out)
    }

    #[test]
    fn one_chunk_serves_many_small_requests() {
        let (mut carver, mut driver) = (Carver::new(8), FakeDriver::new());
        let first = carve(&mut carver, &mut driver, 3).unwrap();
        let second = carve(&mut carver, &mut driver, 5).unwrap();
        assert_eq!((carver.chunks(), carver.remaining()), (1, 0));
        let all: Vec<_> = first.iter().chain(&second).collect();
        for (i, signal) in all.iter().enumerate() {
            assert_eq!(signal.device_address(), 0x7f00_0000_0000 + 32 * i as u64);
            assert_eq!(
                signal.host_address() as usize,
                driver.chunks[0].as_ptr() as usize + 32 * i
            );
        }
    }

    #[test]
    fn leftovers_are_used_before_a_new_chunk() {
        let (mut carver, mut driver) = (Carver::new(4), FakeDriver::new());
        carve(&mut carver, &mut driver, 3).unwrap();
        let signals = carve(&mut carver, &mut driver, 6).unwrap();
        assert_eq!(carver.chunks(), 2);
        assert_eq!(
            signals[0].device_address(),
            0x7f00_0000_0000 + 3 * 32,
            "the last of chunk 0"
        );
        assert_eq!(
            signals[1].device_address(),
            0x7f00_0010_0000,
            "then chunk 1"
        );
        assert_eq!(
            driver.chunks[1].len(),
            5,
            "exactly the rest (above the minimum)"
        );
        assert_eq!(carver.remaining(), 0);
    }

    #[test]
    fn a_large_request_gets_a_chunk_of_its_own_size() {
        let (mut carver, mut driver) = (Carver::new(4), FakeDriver::new());
        let signals = carve(&mut carver, &mut driver, 100).unwrap();
        assert_eq!((signals.len(), driver.chunks[0].len()), (100, 100));
        let unique: std::collections::HashSet<_> =
            signals.iter().map(|s| s.device_address()).collect();
        assert_eq!(unique.len(), 100);
    }

    #[test]
    fn a_failed_allocation_hands_out_nothing_and_keeps_the_leftovers() {
        let (mut carver, mut driver) = (Carver::new(4), FakeDriver::new());
        carve(&mut carver, &mut driver, 1).unwrap();
        driver.fail = true;
        assert!(carve(&mut carver, &mut driver, 10).is_err());
        assert_eq!(carver.remaining(), 3, "all or nothing");
        driver.fail = false;
        let signals = carve(&mut carver, &mut driver, 3).unwrap();
        assert_eq!(signals[0].device_address(), 0x7f00_0000_0000 + 32);
    }

    #[test]
    fn an_impossible_size_is_a_typed_error_before_any_driver_call() {
        let (mut carver, mut driver) = (Carver::new(4), FakeDriver::new());
        let error = carve(&mut carver, &mut driver, usize::MAX / 2).unwrap_err();
        assert_eq!(
            error,
            Error::TooManySignals {
                requested: usize::MAX / 2
            }
        );
        assert!(driver.chunks.is_empty());
        assert_eq!(Carver::bytes_for(4), Ok(128));
    }
}
