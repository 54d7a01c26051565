//! The kit's PTX, loaded into a context once and kept loaded for as long
//! as the context's primary context lives.

use sigretire_cuda::cudarc::driver::sys::{self, CUfunction};
use sigretire_cuda::{CudaContext, Result, SignalBlock, check};
use std::ffi::CStr;
use std::sync::{Arc, Mutex, Weak};

/// The kit's kernels (ISA 7.0, `sm_50`, as the backend's own). The two
/// tracked ones take the use's signal block first and, when it is not 0,
/// write `%globaltimer` into its stamps at `+8` and `+16`
/// ([`SignalBlock::START_OFFSET`], [`SignalBlock::END_OFFSET`]).
pub(crate) const PTX: &CStr = cr"
.version 7.0
.target sm_50
.address_size 64

// Work of a known duration: every thread spins for `ns` nanoseconds; thread 0
// stamps the block (when given).
.visible .entry sigtest_busy(
    .param .u64 sigtest_busy_block,
    .param .u64 sigtest_busy_ns
)
{
    .reg .pred  %p<4>;
    .reg .b32   %r<2>;
    .reg .b64   %rd<8>;

    ld.param.u64            %rd1, [sigtest_busy_block];
    ld.param.u64            %rd2, [sigtest_busy_ns];
    mov.u64                 %rd3, %globaltimer;
    add.u64                 %rd4, %rd3, %rd2;
BUSY_SPIN:
    mov.u64                 %rd5, %globaltimer;
    setp.lt.u64             %p1, %rd5, %rd4;
    @%p1 bra                BUSY_SPIN;
    mov.u32                 %r1, %tid.x;
    setp.ne.u32             %p2, %r1, 0;
    setp.eq.u64             %p3, %rd1, 0;
    or.pred                 %p2, %p2, %p3;
    @%p2 bra                BUSY_DONE;
    cvta.to.global.u64      %rd6, %rd1;
    st.volatile.global.u64  [%rd6+8], %rd3;
    st.volatile.global.u64  [%rd6+16], %rd5;
BUSY_DONE:
    ret;
}

// Spins until the host sets the flag word (non-zero), or gives up after
// `timeout_ns` and stores 2 into the flag to say so; then stamps the block.
.visible .entry sigtest_spin_until(
    .param .u64 sigtest_spin_block,
    .param .u64 sigtest_spin_flag,
    .param .u64 sigtest_spin_timeout_ns
)
{
    .reg .pred  %p<4>;
    .reg .b64   %rd<12>;

    ld.param.u64            %rd1, [sigtest_spin_block];
    ld.param.u64            %rd2, [sigtest_spin_flag];
    ld.param.u64            %rd3, [sigtest_spin_timeout_ns];
    cvta.to.global.u64      %rd4, %rd2;
    mov.u64                 %rd5, %globaltimer;
    add.u64                 %rd6, %rd5, %rd3;
SPIN_POLL:
    ld.volatile.global.u64  %rd7, [%rd4];
    setp.ne.u64             %p1, %rd7, 0;
    @%p1 bra                SPIN_RELEASED;
    mov.u64                 %rd8, %globaltimer;
    setp.lt.u64             %p2, %rd8, %rd6;
    @%p2 bra                SPIN_POLL;
    mov.u64                 %rd9, 2;
    st.volatile.global.u64  [%rd4], %rd9;
SPIN_RELEASED:
    mov.u64                 %rd10, %globaltimer;
    setp.eq.u64             %p3, %rd1, 0;
    @%p3 bra                SPIN_DONE;
    cvta.to.global.u64      %rd11, %rd1;
    st.volatile.global.u64  [%rd11+8], %rd5;
    st.volatile.global.u64  [%rd11+16], %rd10;
SPIN_DONE:
    ret;
}

// Untracked: a system-scope fence, then `value` into the word at `word`
// (what the backend's empty kernel does with no signal and a progress word).
.visible .entry sigtest_write_flag(
    .param .u64 sigtest_write_word,
    .param .u64 sigtest_write_value
)
{
    .reg .b64   %rd<4>;

    ld.param.u64            %rd1, [sigtest_write_word];
    ld.param.u64            %rd2, [sigtest_write_value];
    membar.sys;
    cvta.to.global.u64      %rd3, %rd1;
    st.volatile.global.u64  [%rd3], %rd2;
    ret;
}
";

const _: () = {
    // The PTX above hard-codes these offsets.
    assert!(SignalBlock::START_OFFSET == 8);
    assert!(SignalBlock::END_OFFSET == 16);
};

/// The kit's functions in one context.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Kernels {
    /// `sigtest_busy(block, ns)`.
    pub(crate) busy: CUfunction,
    /// `sigtest_spin_until(block, flag, timeout_ns)`.
    pub(crate) spin_until: CUfunction,
    /// `sigtest_write_flag(word, value)`.
    pub(crate) write_flag: CUfunction,
}

// SAFETY: function handles are driver objects usable from any thread on
// which their context is current (every use here binds it first).
unsafe impl Send for Kernels {}

/// The module loaded for each `CudaContext` (each `Arc`) that asked: never
/// unloaded, so its functions stay valid for as long as the primary
/// context lives, which is at least as long as that `CudaContext`. An entry
/// whose `CudaContext` is gone is forgotten (its module may be gone with
/// the primary context, so it is not reused); the `Weak` keeps the `Arc`'s
/// allocation, so no other context can take its address meanwhile.
static LOADED: Mutex<Vec<(Weak<CudaContext>, Kernels)>> = Mutex::new(Vec::new());

/// The kit's kernels in `context`, loaded on first use (JIT-compiled by
/// the driver).
pub(crate) fn kernels(context: &Arc<CudaContext>) -> Result<Kernels> {
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    loaded.retain(|(owner, _)| owner.strong_count() > 0);
    let this = Arc::downgrade(context);
    if let Some((_, kernels)) = loaded.iter().find(|(owner, _)| owner.ptr_eq(&this)) {
        return Ok(*kernels);
    }
    context.bind()?;
    let mut module = core::ptr::null_mut();
    // SAFETY: the context is bound to this thread; the image is a
    // NUL-terminated PTX string; `module` is a live local.
    check("cuModuleLoadData", unsafe {
        sys::cuModuleLoadData(&mut module, PTX.as_ptr().cast())
    })?;
    let function = |name: &CStr| {
        let mut function = core::ptr::null_mut();
        // SAFETY: `module` was just loaded in the bound context; `name` is
        // NUL-terminated; `function` is a live local.
        check("cuModuleGetFunction", unsafe {
            sys::cuModuleGetFunction(&mut function, module, name.as_ptr())
        })
        .map(|()| function)
    };
    let kernels = Kernels {
        busy: function(c"sigtest_busy")?,
        spin_until: function(c"sigtest_spin_until")?,
        write_flag: function(c"sigtest_write_flag")?,
    };
    loaded.push((this, kernels));
    Ok(kernels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ptx_names_every_entry_and_stamps_where_the_block_has_them() {
        let text = PTX.to_str().unwrap();
        for entry in [
            "sigtest_busy(",
            "sigtest_spin_until(",
            "sigtest_write_flag(",
        ] {
            assert!(
                text.contains(&format!(".visible .entry {entry}")),
                "{entry}"
            );
        }
        assert!(text.contains(".version 7.0") && text.contains(".target sm_50"));
        assert_eq!(text.matches("+8], ").count(), 2);
        assert_eq!(text.matches("+16], ").count(), 2);
    }

    #[test]
    fn each_tracked_kernel_takes_the_block_first() {
        let text = PTX.to_str().unwrap();
        for (entry, params) in [("sigtest_busy(", 2), ("sigtest_spin_until(", 3)] {
            let start = text.find(entry).unwrap();
            let body = &text[start..start + text[start..].find(')').unwrap()];
            assert_eq!(body.matches(".param .u64").count(), params, "{entry}");
            assert!(body.contains("_block,"), "{entry}");
        }
    }
}
