//! The plain-old-data types of the C ABI and their conversions to and from
//! the tracker's Rust types.
//!
//! Everything C passes in is read as integers and checked: an enumeration
//! arrives as a `uint32_t` and is converted with a range check, flags are
//! checked against the known bits, and no C value is ever reinterpreted as
//! a Rust `enum` or `bool` (an out-of-range value would be undefined
//! behaviour). Values going out to C may be typed as the enumerations.

use crate::status::{Outcome, SIGRETIRE_ERR_INVALID_ARGUMENT, SIGRETIRE_ERR_INVALID_CONFIG, fail};
use ::sigretire_tracker::{
    Accesses, Census, Config, Placement, Purpose, Request, Stats, Status, Ticket, Timestamps,
    WaitPolicy, Work,
    backend::{Condition, Dispatch, WaitValue},
    wait::Hybrid,
};
use std::time::Duration;

/// The version of this ABI (the header's): a program checks at start-up
/// that `sigretire_abi_version()` (the library's) equals it, and refuses to
/// run with another. It is raised by any incompatible change: a function
/// removed or changed in meaning, a struct field removed, moved or
/// retyped, a constant changed. Additions keep it: new functions, new
/// constants and status values, fields appended at the end of a struct
/// (its `size` field tells the library which layout a caller has).
/// Version 2: every struct carries its size; `sigretire_timestamps.state`;
/// `sigretire_wait_policy.device_spin_ns`. Version 3: `sigretire_ticket`
/// is the tracker's own ticket (a slot instead of a check word, 64-bit
/// flags, `SIGRETIRE_TICKET_TIMED` 4); `sigretire_config.ticket_history`
/// is gone (no ledger of tickets is kept), and so are `kind` with
/// `sigretire_tracker_kind` (the library builds the retiring tracker: the
/// baseline is the benchmarks' comparison, no runtime's choice) and
/// `generation_bits` (generations count in 32 bits). Version 4:
/// `sigretire_tracker_wait` returns `SIGRETIRE_ERR_USE_FAILED` for a use
/// that failed (it returned `SIGRETIRE_OK`, the failure in `*status` only),
/// as the queue layer's waits report failures; the shared library's SONAME
/// carries this version (`libsigretire_capi.so.4`). Added within version
/// 4: `sigretire_wait_policy_hybrid` and the `hybrid` fields appended to
/// `sigretire_wait_policy` (the library still takes the earlier 40-byte
/// struct, as a policy that is not hybrid; a program using the additions
/// needs a library that has them: an earlier one refuses the larger struct
/// with `SIGRETIRE_ERR_STRUCT_SIZE`).
pub const SIGRETIRE_ABI_VERSION: u32 = 4;

/// The name of one use of a signal (one packet, or one submission of
/// several operations): the tracker's own [`Ticket`], named as C names it
/// (the header's `sigretire_ticket` is that struct). Plain data: copy it,
/// store it, compare it; keeping one keeps nothing alive. The tracker checks
/// every ticket against its own state: one it did not issue as it is
/// (another tracker's, a zeroed, altered or made-up one) gets
/// `SIGRETIRE_ERR_BAD_TICKET`, never undefined behaviour.
pub use ::sigretire_tracker::Ticket as sigretire_ticket;

/// `sigretire_ticket.flags`: the use's timestamps are harvested.
pub const SIGRETIRE_TICKET_TIMED: u64 = 4;

const _: () = assert!(SIGRETIRE_TICKET_TIMED == Ticket::TIMED);

/// Where a signal lives.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum sigretire_placement {
    /// System memory: cached host loads and stores.
    SIGRETIRE_PLACEMENT_HOST = 0,
    /// GPU memory through a large BAR: a host load is an uncached PCIe read,
    /// stores need a store fence (and an HDP flush for some readers).
    SIGRETIRE_PLACEMENT_DEVICE = 1,
}

pub use sigretire_placement::*;

impl sigretire_placement {
    pub(crate) fn from_rust(placement: Placement) -> Self {
        match placement {
            Placement::Host => SIGRETIRE_PLACEMENT_HOST,
            Placement::Device => SIGRETIRE_PLACEMENT_DEVICE,
        }
    }
}

/// The `sigretire_placement` of value `value`.
pub(crate) fn placement(value: u32, name: &str) -> Outcome<Placement> {
    match value {
        0 => Ok(Placement::Host),
        1 => Ok(Placement::Device),
        _ => fail(
            SIGRETIRE_ERR_INVALID_ARGUMENT,
            format!("`{name}` is {value}: a sigretire_placement is 0 (host) or 1 (device)"),
        ),
    }
}

/// What is known about a use.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum sigretire_use_status {
    /// Not shown to be complete yet.
    SIGRETIRE_USE_PENDING = 0,
    /// Its work completed.
    SIGRETIRE_USE_COMPLETE = 1,
    /// It failed (a queue error, a failed submission): its work never
    /// completes.
    SIGRETIRE_USE_FAILED = 2,
    /// Nothing is known without reading signal memory (only
    /// `sigretire_tracker_known_status` and `sigretire_hold_known_status`
    /// answer this).
    SIGRETIRE_USE_UNKNOWN = 3,
}

pub use sigretire_use_status::*;

impl sigretire_use_status {
    pub(crate) fn from_rust(status: Status) -> Self {
        match status {
            Status::Pending => SIGRETIRE_USE_PENDING,
            Status::Complete => SIGRETIRE_USE_COMPLETE,
            Status::Failed => SIGRETIRE_USE_FAILED,
        }
    }

    pub(crate) fn from_known(status: Option<Status>) -> Self {
        status.map_or(SIGRETIRE_USE_UNKNOWN, Self::from_rust)
    }
}

/// What a use is for (`sigretire_request.purpose`): it decides where its
/// signal lives.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum sigretire_purpose {
    /// Only the tracker observes the completion.
    SIGRETIRE_PURPOSE_COMPLETION = 0,
    /// A CPU thread will wait for it (a marker for synchronize).
    SIGRETIRE_PURPOSE_CPU_SYNC = 1,
    /// An event records it.
    SIGRETIRE_PURPOSE_EVENT = 2,
    /// A packet on another queue will wait for it on the GPU.
    SIGRETIRE_PURPOSE_GPU_WAITER = 3,
    /// The signal exists only so the profiler can time the packet (a
    /// host-memory signal, timestamps harvested).
    SIGRETIRE_PURPOSE_TIMING_ONLY = 4,
}

/// `sigretire_request.flags`: the packet carries the barrier bit (a fence:
/// its completion proves every earlier packet of the queue complete).
pub const SIGRETIRE_REQUEST_BARRIER: u32 = 1;
/// `sigretire_request.flags`: the packet runs on a profiled queue and its
/// timestamps are harvested.
pub const SIGRETIRE_REQUEST_TIMED: u32 = 2;
/// `sigretire_request.flags`: work on a copy engine (SDMA), outside the AQL
/// queue; `aql_index` and the barrier bit are ignored.
pub const SIGRETIRE_REQUEST_COPY_ENGINE: u32 = 4;
const REQUEST_FLAGS: u32 =
    SIGRETIRE_REQUEST_BARRIER | SIGRETIRE_REQUEST_TIMED | SIGRETIRE_REQUEST_COPY_ENGINE;

/// A request for a signal: the packet it completes and what for.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct sigretire_request {
    /// `sizeof` this struct, set by the caller before every call that
    /// takes it (`SIGRETIRE_ERR_STRUCT_SIZE` otherwise).
    pub size: u32,
    /// How many operations decrement the signal (0 is taken as 1).
    pub ops: u32,
    /// The packet's AQL index (for a use of several operations, the last
    /// one's). Ignored by `sigretire_tracker_submit`, which reserves it.
    pub aql_index: u64,
    /// `SIGRETIRE_REQUEST_*` bits.
    pub flags: u32,
    /// A `sigretire_purpose`.
    pub purpose: u32,
}

impl sigretire_request {
    /// The tracker's request, after checking every field.
    pub(crate) fn to_rust(self) -> Outcome<Request> {
        if self.flags & !REQUEST_FLAGS != 0 {
            return fail(
                SIGRETIRE_ERR_INVALID_ARGUMENT,
                format!(
                    "request flags {:#x} has bits no SIGRETIRE_REQUEST_* constant defines",
                    self.flags
                ),
            );
        }
        let purpose = match self.purpose {
            0 => Purpose::Completion,
            1 => Purpose::CpuSync,
            2 => Purpose::Event,
            3 => Purpose::GpuWaiter,
            4 => Purpose::TimingOnly,
            other => {
                return fail(
                    SIGRETIRE_ERR_INVALID_ARGUMENT,
                    format!("request purpose {other} is not a sigretire_purpose (0 to 4)"),
                );
            }
        };
        let base = if self.flags & SIGRETIRE_REQUEST_COPY_ENGINE != 0 {
            Request::copy_engine()
        } else {
            Request::packet(self.aql_index).barrier(self.flags & SIGRETIRE_REQUEST_BARRIER != 0)
        };
        Ok(base
            .ops(self.ops)
            .purpose(purpose)
            .timed(self.flags & SIGRETIRE_REQUEST_TIMED != 0))
    }
}

/// `sigretire_acquired.flags`: the packet must carry the barrier bit.
pub const SIGRETIRE_ACQUIRED_BARRIER: u32 = 1;
/// `sigretire_acquired.flags`: a copy-engine use (no AQL packet completes it).
pub const SIGRETIRE_ACQUIRED_COPY_ENGINE: u32 = 2;

/// A signal handed out for one use, and how to publish the packet that
/// completes it.
///
/// Either publish through the library (`sigretire_tracker_publish`, which
/// takes the ticket and builds the header itself), or write the packet
/// yourself: `completion_signal` in its `completion_signal` field, and
/// `header | packet_type` as its header, stored last with release order.
/// A packet published with another barrier bit than the one recorded here
/// breaks the tracker's proofs.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct sigretire_acquired {
    /// `sizeof` this struct, set by the caller before every call that
    /// takes it (`SIGRETIRE_ERR_STRUCT_SIZE` otherwise).
    pub size: u32,
    /// The use's name: ask about it, wait for it, hold or pin it.
    pub ticket: Ticket,
    /// The packet's `completion_signal` (an `hsa_signal_t` handle), armed,
    /// its arming already visible to the GPU.
    pub completion_signal: u64,
    /// The AQL index recorded for the use (its last packet's).
    pub aql_index: u64,
    /// The packets of the use: indices `aql_index - ops + 1` to
    /// `aql_index`, each with this header and signal.
    pub ops: u32,
    /// `SIGRETIRE_ACQUIRED_*` bits.
    pub flags: u32,
    /// The AQL header bits the record requires: the barrier bit (bit 8) as
    /// recorded and system-scope acquire and release fences (bits 9-12).
    /// OR in the packet type (bits 0-7).
    pub header: u16,
    /// A `sigretire_placement`: where the signal lives.
    pub placement: u32,
    /// On `SIGRETIRE_ERR_BACKPRESSURE` only: the use whose completion frees
    /// room. Wait for it outside your locks, then retry. Zero otherwise.
    pub wait_for: Ticket,
    /// On `SIGRETIRE_ERR_BACKPRESSURE`: the uses in flight; on
    /// `SIGRETIRE_ERR_SIGNALS_HELD`: the held signals. Zero otherwise.
    pub count: u64,
}

/// How a tracker sizes its ring and places its signals. Start from
/// `sigretire_config_default`; every field has the range of the Rust
/// `Config` field of the same name, checked at creation
/// (`SIGRETIRE_ERR_INVALID_CONFIG`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct sigretire_config {
    /// `sizeof` this struct, set by the caller before every call that
    /// takes it (`SIGRETIRE_ERR_STRUCT_SIZE` otherwise): `sigretire_config_default` needs it too.
    pub size: u32,
    /// Signals in the ring at start (default 64).
    pub initial_size: u64,
    /// The ring grows up to this many times `initial_size` (default 16).
    pub growth_limit: u64,
    /// Signals allocated at once when a pool runs dry (default 32).
    pub refill_batch: u64,
    /// Host signals allocated at once for timing-only uses (default 16).
    pub timing_batch: u64,
    /// How far from the oldest use back-pressure looks for a fence to wait
    /// for (default 32).
    pub backpressure_window: u64,
    /// A poll loads a fence only once the read index passed this many
    /// packets since the last probe (default 1: every poll).
    pub probe_interval: u64,
    /// How many timed uses keep their harvested stamps (default 16384). An
    /// older timed use's timestamps answer `SIGRETIRE_ERR_EXPIRED`, unless a
    /// `sigretire_hold` of it lives: a held use keeps its own.
    pub stamp_history: u64,
    /// A `sigretire_placement`: where the ring's signals live (default
    /// host; device for uses a GPU waiter or a CPU sync may read).
    pub signals: u32,
}

impl sigretire_config {
    /// The defaults, as `Config::default()`.
    pub(crate) fn default_values() -> Self {
        let config = Config::default();
        Self {
            size: size_of::<Self>() as u32,
            initial_size: config.initial_size as u64,
            growth_limit: config.growth_limit as u64,
            refill_batch: config.refill_batch as u64,
            timing_batch: config.timing_batch as u64,
            backpressure_window: config.backpressure_window as u64,
            probe_interval: config.probe_interval as u64,
            stamp_history: config.stamp_history as u64,
            signals: SIGRETIRE_PLACEMENT_HOST as u32,
        }
    }

    /// The tracker's configuration and this library's settings, checked.
    pub(crate) fn to_rust(self) -> Outcome<Settings> {
        let size = |value: u64, name: &str| {
            usize::try_from(value).or_else(|_| {
                fail(
                    SIGRETIRE_ERR_INVALID_CONFIG,
                    format!("config `{name}` ({value}) does not fit in a size_t"),
                )
            })
        };
        let signals = placement(self.signals, "config.signals").map_err(|mut f| {
            f.status = SIGRETIRE_ERR_INVALID_CONFIG;
            f
        })?;
        let config = Config {
            initial_size: size(self.initial_size, "initial_size")?,
            growth_limit: size(self.growth_limit, "growth_limit")?,
            signals,
            refill_batch: size(self.refill_batch, "refill_batch")?,
            timing_batch: size(self.timing_batch, "timing_batch")?,
            backpressure_window: size(self.backpressure_window, "backpressure_window")?,
            probe_interval: size(self.probe_interval, "probe_interval")?,
            stamp_history: size(self.stamp_history, "stamp_history")?,
        };
        if let Err(invalid) = config.validate() {
            return fail(SIGRETIRE_ERR_INVALID_CONFIG, invalid.to_string());
        }
        Ok(Settings { config })
    }
}

/// A checked `sigretire_config`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Settings {
    pub(crate) config: Config,
}

/// How a CPU wait spends its time (`WaitPolicy`): spin, then yield, then
/// sleep with a back-off doubling from 1 us. The spin depends on where the
/// use's signal lives: each poll of a device-memory signal is a read
/// across PCIe (about 1 us), so a policy may spin less there, or not at
/// all. A hybrid policy (`hybrid` 1) first dozes until shortly before the
/// work is likely done and spins the last stretch. Start from
/// `sigretire_wait_policy_spin`, `sigretire_wait_policy_blocking` or
/// `sigretire_wait_policy_hybrid`.
///
/// The `hybrid` fields were appended within ABI version 4: the library
/// also takes the struct of an earlier header of that version (`size` 40,
/// the offset of `hybrid`), reading and writing those fields only, which
/// is a policy that is not hybrid.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct sigretire_wait_policy {
    /// `sizeof` this struct, set by the caller before every call that
    /// takes it (`SIGRETIRE_ERR_STRUCT_SIZE` otherwise): the `sigretire_wait_policy_*` functions need it too.
    pub size: u32,
    /// Poll back to back for this long, nanoseconds, where the use's signal
    /// is in host memory.
    pub spin_ns: u64,
    /// Then poll with a yield between polls for this long, nanoseconds.
    pub yield_ns: u64,
    /// Then sleep between polls, doubling up to this, nanoseconds.
    pub max_sleep_ns: u64,
    /// In place of `spin_ns` where the use's signal is in device memory:
    /// poll back to back for this long, nanoseconds.
    pub device_spin_ns: u64,
    /// 1: a hybrid wait. With a guess of how long the wait lasts from its
    /// start, it dozes (sleeps with a fine timer slack) until
    /// `hybrid_early_ns` before the guess, looking every
    /// `hybrid_recheck_ns`; spins until `hybrid_late_ns` (plus 1/32 of the
    /// guess) past it; then, the guess wrong, waits as the fields above
    /// say. Without a guess, or one under `hybrid_min_guess_ns`, it waits
    /// as the fields above say from the start. 0: not hybrid, and the
    /// `hybrid_*` fields are not read. Any other value is
    /// `SIGRETIRE_ERR_INVALID_ARGUMENT`.
    pub hybrid: u32,
    /// The caller's guess of how long its waits last from their start,
    /// nanoseconds; 0: the tracker's guess, learned from its recent hybrid
    /// waits (one history per tracker, so per hardware queue).
    pub hybrid_expected_ns: u64,
    /// Stop dozing this long before the guess, nanoseconds (the median of
    /// what recent dozes overslept comes on top).
    pub hybrid_early_ns: u64,
    /// Spin at most this long past the guess (plus 1/32 of it) before
    /// falling back, nanoseconds: what a guess that was short costs in CPU.
    pub hybrid_late_ns: u64,
    /// Look at least this often while dozing, nanoseconds: how late a wait
    /// whose work ended far sooner than guessed can be. Not 0 in a hybrid
    /// policy (`SIGRETIRE_ERR_INVALID_ARGUMENT`: it would spin through its
    /// doze).
    pub hybrid_recheck_ns: u64,
    /// A shorter guess is not worth a doze, nanoseconds: such a wait runs
    /// as if it had none.
    pub hybrid_min_guess_ns: u64,
}

/// `sigretire_wait_policy`'s size before the `hybrid` fields were
/// appended: where they begin.
pub(crate) const WAIT_POLICY_BEFORE_HYBRID: u32 =
    std::mem::offset_of!(sigretire_wait_policy, hybrid) as u32;

const _: () = assert!(WAIT_POLICY_BEFORE_HYBRID == 40);

// SAFETY: `#[repr(C)]`, `size: u32` its first field; the earlier size is
// the offset of the first appended field, so that layout is a prefix.
unsafe impl crate::status::Sized32 for sigretire_wait_policy {
    const NAME: &'static str = "sigretire_wait_policy";
    const SIZE: u32 = size_of::<Self>() as u32;
    // Zeros past the prefix are `hybrid` 0: the policy the earlier layout
    // could say.
    const EARLIER: &'static [u32] = &[WAIT_POLICY_BEFORE_HYBRID];
    fn size_mut(&mut self) -> &mut u32 {
        &mut self.size
    }
}

impl Default for sigretire_wait_policy {
    /// The spinning policy, as `sigretire_wait_policy_spin` gives it.
    fn default() -> Self {
        Self::from_rust(WaitPolicy::spin())
    }
}

impl sigretire_wait_policy {
    /// The C policy of `policy`. A policy that is not hybrid still carries
    /// the hybrid defaults' tuning, so that a caller who sets `hybrid` to 1
    /// in a policy the library filled gets a sensible hybrid wait.
    pub(crate) fn from_rust(policy: WaitPolicy) -> Self {
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let hybrid = policy.hybrid.unwrap_or_default();
        Self {
            size: size_of::<Self>() as u32,
            spin_ns: ns(policy.spin),
            yield_ns: ns(policy.yield_for),
            max_sleep_ns: ns(policy.max_sleep),
            device_spin_ns: ns(policy.device_spin),
            hybrid: u32::from(policy.hybrid.is_some()),
            hybrid_expected_ns: hybrid.expected.map_or(0, ns),
            hybrid_early_ns: ns(hybrid.early),
            hybrid_late_ns: ns(hybrid.late),
            hybrid_recheck_ns: ns(hybrid.recheck),
            hybrid_min_guess_ns: ns(hybrid.min_guess),
        }
    }

    /// The Rust policy, after checking the hybrid fields.
    pub(crate) fn to_rust(self) -> Outcome<WaitPolicy> {
        // From the spin policy, so any field the C struct does not carry
        // keeps the spin policy's value (`interrupt`: a tracker's own waits
        // publish nothing, so they cannot arrange a GPU wake-up anyway).
        let mut policy = WaitPolicy::spin();
        policy.spin = Duration::from_nanos(self.spin_ns);
        policy.device_spin = Duration::from_nanos(self.device_spin_ns);
        policy.yield_for = Duration::from_nanos(self.yield_ns);
        policy.max_sleep = Duration::from_nanos(self.max_sleep_ns);
        policy.hybrid = match self.hybrid {
            0 => None,
            1 if self.hybrid_recheck_ns == 0 => {
                return fail(
                    SIGRETIRE_ERR_INVALID_ARGUMENT,
                    "wait policy hybrid_recheck_ns is 0: a hybrid wait looks at least that often \
                     while it dozes, so it would spin through its doze (start from \
                     sigretire_wait_policy_hybrid)",
                );
            }
            1 => Some(Hybrid {
                expected: (self.hybrid_expected_ns != 0)
                    .then(|| Duration::from_nanos(self.hybrid_expected_ns)),
                early: Duration::from_nanos(self.hybrid_early_ns),
                late: Duration::from_nanos(self.hybrid_late_ns),
                recheck: Duration::from_nanos(self.hybrid_recheck_ns),
                min_guess: Duration::from_nanos(self.hybrid_min_guess_ns),
            }),
            other => {
                return fail(
                    SIGRETIRE_ERR_INVALID_ARGUMENT,
                    format!("wait policy hybrid is {other}: 0 (not hybrid) or 1"),
                );
            }
        };
        Ok(policy)
    }
}

/// What a `sigretire_timestamps` holds (`state`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum sigretire_timestamps_state {
    /// No stamps, for now or for good: the use is pending, failed, or was
    /// not timed; asked of a hold, also a complete use the tracker has not
    /// harvested yet. `start` and `end` are 0.
    SIGRETIRE_TIMESTAMPS_NONE = 0,
    /// `start` and `end` are the use's stamps.
    SIGRETIRE_TIMESTAMPS_AVAILABLE = 1,
    /// The use completed and was timed, but nothing stamped it and nothing
    /// will: its packet ran on a queue without profiling (the packet
    /// processor wrote no timestamps: a simulator queue made with
    /// `SIGRETIRE_SIM_UNPROFILED`, a ROCr queue without profiling), or its
    /// work is of a kind the backend does not stamp. `start` and `end` are
    /// 0, which are not stamps.
    SIGRETIRE_TIMESTAMPS_UNSTAMPED = 2,
}

pub use sigretire_timestamps_state::*;

/// A use's start and end timestamps, in ticks of the tracker's clock
/// (`sigretire_tracker_timestamp_frequency`), and whether it has any.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct sigretire_timestamps {
    /// `sizeof` this struct, set by the caller before every call that
    /// takes it (`SIGRETIRE_ERR_STRUCT_SIZE` otherwise).
    pub size: u32,
    /// A `sigretire_timestamps_state`: whether `start` and `end` are the
    /// use's stamps (`SIGRETIRE_TIMESTAMPS_AVAILABLE`), or why there are
    /// none.
    pub state: sigretire_timestamps_state,
    /// When the packet processor launched the packet.
    pub start: u64,
    /// When the packet completed.
    pub end: u64,
}

impl Default for sigretire_timestamps {
    fn default() -> Self {
        Self {
            size: size_of::<Self>() as u32,
            start: 0,
            end: 0,
            state: SIGRETIRE_TIMESTAMPS_NONE,
        }
    }
}

impl sigretire_timestamps {
    /// The answer for `stamps`, as the tracker or a hold gave them;
    /// `done_unstamped` says the use is known complete and timed, so that
    /// no stamps means none will come.
    pub(crate) fn from_rust(stamps: Option<Timestamps>, done_unstamped: bool) -> Self {
        let none = |state| Self {
            state,
            ..Self::default()
        };
        match stamps {
            // A backend reads stamps the packet processor never wrote as
            // zeros (the simulator, ROCr's amd_signal_t on a queue without
            // profiling): no packet that ran has an end stamp of 0.
            Some(t) if t.start == 0 && t.end == 0 => none(SIGRETIRE_TIMESTAMPS_UNSTAMPED),
            Some(t) => Self {
                start: t.start,
                end: t.end,
                state: SIGRETIRE_TIMESTAMPS_AVAILABLE,
                ..Self::default()
            },
            None if done_unstamped => none(SIGRETIRE_TIMESTAMPS_UNSTAMPED),
            None => none(SIGRETIRE_TIMESTAMPS_NONE),
        }
    }
}

/// Host accesses to signals of one placement.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct sigretire_accesses {
    /// Loads by the tracker itself (fence probes, direct proofs).
    pub loads: u64,
    /// Loads by CPU waits and holders polling for completion.
    pub polls: u64,
    /// Stores (arming and re-arming).
    pub stores: u64,
    /// Timestamp pairs read (one 16-byte read each, not in `loads`).
    pub timestamp_reads: u64,
    /// Store fences issued.
    pub fences: u64,
    /// HDP flushes issued.
    pub flushes: u64,
}

impl sigretire_accesses {
    fn from_rust(a: Accesses) -> Self {
        Self {
            loads: a.loads,
            polls: a.polls,
            stores: a.stores,
            timestamp_reads: a.timestamp_reads,
            fences: a.fences,
            flushes: a.flushes,
        }
    }
}

/// Everything a tracker counts (the Rust `Stats`, field for field).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct sigretire_stats {
    /// `sizeof` this struct, set by the caller before every call that
    /// takes it (`SIGRETIRE_ERR_STRUCT_SIZE` otherwise).
    pub size: u32,
    /// Accesses to host-memory signals.
    pub host: sigretire_accesses,
    /// Accesses to device-memory signals.
    pub device: sigretire_accesses,
    /// Signals created, warm-up included.
    pub signals_created: u64,
    /// Uses handed out.
    pub uses: u64,
    /// Uses proven complete.
    pub retired: u64,
    /// Uses that failed.
    pub failed: u64,
    /// Signals re-armed for reuse.
    pub rearms: u64,
    /// Fence probes.
    pub probes: u64,
    /// Uses retired by a later fence, without a load of their own.
    pub retired_by_fence: u64,
    /// Uses retired because a CPU wait saw their signal at 0.
    pub retired_by_cpu_wait: u64,
    /// Uses retired by a load of their own signal.
    pub retired_by_load: u64,
    /// Uses retired because their queue drained.
    pub retired_by_drain: u64,
    /// Times the ring grew.
    pub ring_growths: u64,
    /// Held signals set aside (parked) while a spare took their slot.
    pub parks: u64,
    /// Slots whose signal was exchanged for a spare of another placement.
    pub spare_swaps: u64,
    /// Parked signals that came back once their holders let go.
    pub unparks: u64,
    /// Acquires answered with back-pressure.
    pub backpressure: u64,
    /// GPU-waiter requests answered with no dependency (already complete).
    pub dependencies_elided: u64,
    /// Pins handed out.
    pub pins: u64,
    /// Timestamp pairs harvested.
    pub harvests: u64,
}

impl sigretire_stats {
    pub(crate) fn from_rust(s: Stats) -> Self {
        Self {
            size: size_of::<Self>() as u32,
            host: sigretire_accesses::from_rust(s.host()),
            device: sigretire_accesses::from_rust(s.device()),
            signals_created: s.signals_created,
            uses: s.uses,
            retired: s.retired,
            failed: s.failed,
            rearms: s.rearms,
            probes: s.probes,
            retired_by_fence: s.retired_by_fence,
            retired_by_cpu_wait: s.retired_by_cpu_wait,
            retired_by_load: s.retired_by_load,
            retired_by_drain: s.retired_by_drain,
            ring_growths: s.ring_growths,
            parks: s.parks,
            spare_swaps: s.spare_swaps,
            unparks: s.unparks,
            backpressure: s.backpressure,
            dependencies_elided: s.dependencies_elided,
            pins: s.pins,
            harvests: s.harvests,
        }
    }
}

/// Where every signal a tracker created is: a tracker that loses none
/// always has `in_flight + armed + parked + retired == created`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct sigretire_census {
    /// `sizeof` this struct, set by the caller before every call that
    /// takes it (`SIGRETIRE_ERR_STRUCT_SIZE` otherwise).
    pub size: u32,
    /// Signals serving a use in flight.
    pub in_flight: u64,
    /// Armed signals ready for the next uses.
    pub armed: u64,
    /// Signals set aside until their holders let go.
    pub parked: u64,
    /// Signals given up for good (the baseline replaces held ones).
    pub retired: u64,
    /// Signals ever created.
    pub created: u64,
    /// Pins this tracker keeps for its consumer uses.
    pub pins: u64,
}

impl sigretire_census {
    pub(crate) fn from_rust(c: Census) -> Self {
        Self {
            size: size_of::<Self>() as u32,
            in_flight: c.in_flight as u64,
            armed: c.armed as u64,
            parked: c.parked as u64,
            retired: c.retired as u64,
            created: c.created as u64,
            pins: c.pins as u64,
        }
    }
}

/// What a published packet does (`sigretire_work.kind`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum sigretire_work_kind {
    /// Empty work that runs like any other (an empty kernel): stamped on a
    /// profiled queue. What a timed event records.
    SIGRETIRE_WORK_EMPTY = 0,
    /// Only the completion: the cheapest point in the queue to wait for.
    SIGRETIRE_WORK_MARKER = 1,
    /// A kernel the backend knows by `kernel_object` (the simulator: 0 is
    /// the empty kernel).
    SIGRETIRE_WORK_KERNEL = 2,
    /// A barrier-AND packet: waits until every signal of `dependencies`
    /// (`dependency_count`, at most 5) reaches 0.
    SIGRETIRE_WORK_WAIT_ALL = 3,
    /// A barrier-OR packet: waits until any of them (1 to 5) reaches 0.
    SIGRETIRE_WORK_WAIT_ANY = 4,
    /// A kernel dispatch built from `kernel_object`, `kernarg_address`,
    /// `grid`, `workgroup`, `dimensions` and the segment sizes.
    SIGRETIRE_WORK_DISPATCH = 5,
    /// AMD's barrier-value packet: waits until `wait_signal`'s value, masked
    /// with `wait_mask`, satisfies `wait_condition` against `wait_value`.
    SIGRETIRE_WORK_WAIT_VALUE = 6,
}

/// How a barrier-value packet compares (`sigretire_work.wait_condition`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum sigretire_condition {
    /// `value & mask == expected`.
    SIGRETIRE_CONDITION_EQUAL = 0,
    /// `value & mask != expected`.
    SIGRETIRE_CONDITION_NOT_EQUAL = 1,
    /// `value & mask < expected`.
    SIGRETIRE_CONDITION_LESS = 2,
    /// `value & mask >= expected`.
    SIGRETIRE_CONDITION_GREATER_EQUAL = 3,
}

/// The most dependencies one barrier packet holds.
pub const SIGRETIRE_MAX_DEPENDENCIES: u32 = 5;

/// The body of a packet the library publishes: everything but the header
/// and the completion signal, which come from the tracker's record. Zero it,
/// set `kind`, then the fields that kind reads.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct sigretire_work {
    /// `sizeof` this struct, set by the caller before every call that
    /// takes it (`SIGRETIRE_ERR_STRUCT_SIZE` otherwise).
    pub size: u32,
    /// A `sigretire_work_kind`.
    pub kind: u32,
    /// WAIT_ALL, WAIT_ANY: how many of `dependencies` are used.
    pub dependency_count: u32,
    /// WAIT_ALL, WAIT_ANY: signal packet handles to wait for.
    pub dependencies: [u64; 5],
    /// KERNEL, DISPATCH: the kernel's code object handle.
    pub kernel_object: u64,
    /// DISPATCH: where the kernel arguments are (0: none).
    pub kernarg_address: u64,
    /// DISPATCH: work-items in each dimension (zeros are taken as 1).
    pub grid: [u32; 3],
    /// DISPATCH: work-items per workgroup in each dimension (zeros: 1).
    pub workgroup: [u16; 3],
    /// DISPATCH: dimensions used, 1 to 3 (0: worked out from `grid`).
    pub dimensions: u16,
    /// DISPATCH: private memory per work-item, bytes.
    pub private_segment_size: u32,
    /// DISPATCH: group memory per workgroup, bytes.
    pub group_segment_size: u32,
    /// WAIT_VALUE: a `sigretire_condition`.
    pub wait_condition: u32,
    /// WAIT_VALUE: the signal (packet handle) compared.
    pub wait_signal: u64,
    /// WAIT_VALUE: the value compared with.
    pub wait_value: i64,
    /// WAIT_VALUE: which bits of the signal's value are compared.
    pub wait_mask: u64,
}

impl sigretire_work {
    /// The tracker's `Work`, borrowing the dependencies, after checking
    /// every field the kind reads.
    pub(crate) fn as_work(&self) -> Outcome<Work<'_>> {
        let dependencies = || -> Outcome<&[u64]> {
            let count = self.dependency_count as usize;
            if count > self.dependencies.len() {
                return fail(
                    SIGRETIRE_ERR_INVALID_ARGUMENT,
                    format!(
                        "work dependency_count is {count}: one barrier packet waits for at most 5 \
                         signals (chain packets for more)"
                    ),
                );
            }
            Ok(&self.dependencies[..count])
        };
        Ok(match self.kind {
            0 => Work::Empty,
            1 => Work::Marker,
            2 => Work::Kernel(self.kernel_object),
            3 => Work::Wait(dependencies()?),
            4 => {
                let deps = dependencies()?;
                if deps.is_empty() {
                    return fail(
                        SIGRETIRE_ERR_INVALID_ARGUMENT,
                        "a WAIT_ANY (barrier-OR) packet needs at least one dependency",
                    );
                }
                Work::WaitAny(deps)
            }
            5 => {
                let grid = self.grid.map(|n| n.max(1));
                let mut dispatch = Dispatch::new(self.kernel_object)
                    .kernarg_address(self.kernarg_address)
                    .grid(grid)
                    .workgroup(self.workgroup.map(|n| n.max(1)))
                    .segments(self.private_segment_size, self.group_segment_size);
                match self.dimensions {
                    0 => {}
                    1..=3 => dispatch.dimensions = self.dimensions,
                    other => {
                        return fail(
                            SIGRETIRE_ERR_INVALID_ARGUMENT,
                            format!("work dimensions is {other}: 0 (from the grid) or 1 to 3"),
                        );
                    }
                }
                Work::Dispatch(dispatch)
            }
            6 => {
                let condition = match self.wait_condition {
                    0 => Condition::Equal,
                    1 => Condition::NotEqual,
                    2 => Condition::Less,
                    3 => Condition::GreaterEqual,
                    other => {
                        return fail(
                            SIGRETIRE_ERR_INVALID_ARGUMENT,
                            format!(
                                "work wait_condition is {other}: a sigretire_condition is 0 to 3"
                            ),
                        );
                    }
                };
                Work::WaitValue(WaitValue {
                    signal: self.wait_signal,
                    condition,
                    value: self.wait_value,
                    mask: self.wait_mask,
                })
            }
            other => {
                return fail(
                    SIGRETIRE_ERR_INVALID_ARGUMENT,
                    format!("work kind is {other}: a sigretire_work_kind is 0 to 6"),
                );
            }
        })
    }
}

/// The ABI's structs, and the sizes their `size` fields must say.
macro_rules! sized_structs {
    ($($t:ident),* $(,)?) => {$(
        // SAFETY: `#[repr(C)]`, `size: u32` its first field.
        unsafe impl crate::status::Sized32 for $t {
            const NAME: &'static str = stringify!($t);
            const SIZE: u32 = size_of::<$t>() as u32;
            fn size_mut(&mut self) -> &mut u32 {
                &mut self.size
            }
        }
    )*};
}
pub(crate) use sized_structs;

/// The structs a caller fills, which the library reads.
macro_rules! caller_filled {
    ($($t:ident),* $(,)?) => {$(
        // SAFETY: integers (and nullable pointers) only: any bytes are a
        // valid value.
        unsafe impl crate::status::AnyBits for $t {}
    )*};
}
pub(crate) use caller_filled;

/// `Default`: zeroed, `size` set (what a caller gets with
/// `{.size = sizeof x}`).
macro_rules! zeroed_with_size {
    ($($t:ident),* $(,)?) => {$(
        impl Default for $t {
            fn default() -> Self {
                // SAFETY: a struct of integers (and nullable pointers or
                // enums whose value 0 exists): all-zero is a valid value.
                let mut value: Self = unsafe { std::mem::zeroed() };
                value.size = size_of::<Self>() as u32;
                value
            }
        }
    )*};
}

sized_structs!(
    sigretire_request,
    sigretire_acquired,
    sigretire_config,
    sigretire_timestamps,
    sigretire_stats,
    sigretire_census,
    sigretire_work,
);
caller_filled!(
    sigretire_request,
    sigretire_config,
    sigretire_wait_policy,
    sigretire_work,
);
zeroed_with_size!(
    sigretire_request,
    sigretire_acquired,
    sigretire_stats,
    sigretire_census,
    sigretire_work,
);

/// A duration of `ns` nanoseconds.
pub(crate) fn nanos(ns: u64) -> Duration {
    Duration::from_nanos(ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::sigretire_tracker::Placement;

    #[test]
    fn a_c_wait_policy_spins_as_the_rust_policy_it_came_from() {
        for policy in [WaitPolicy::spin(), WaitPolicy::blocking()] {
            let back = sigretire_wait_policy::from_rust(policy).to_rust().unwrap();
            for placement in [Placement::Host, Placement::Device] {
                assert_eq!(
                    back.spin_for(placement),
                    policy.spin_for(placement),
                    "{policy:?}: the spin on {placement:?}-memory signals"
                );
            }
            assert_eq!(back.yield_for, policy.yield_for);
            assert_eq!(back.max_sleep, policy.max_sleep);
            assert_eq!(back.hybrid, None);
        }
    }

    #[test]
    fn a_hybrid_c_wait_policy_is_the_rust_policy_it_came_from() {
        let guessing = WaitPolicy::hybrid().expecting(Duration::from_micros(1500));
        let tuned = WaitPolicy {
            hybrid: Some(Hybrid {
                expected: None,
                early: Duration::from_micros(7),
                late: Duration::from_micros(30),
                recheck: Duration::from_micros(250),
                min_guess: Duration::from_micros(80),
            }),
            ..WaitPolicy::hybrid()
        };
        for policy in [WaitPolicy::hybrid(), guessing, tuned] {
            let c = sigretire_wait_policy::from_rust(policy);
            assert_eq!(c.hybrid, 1);
            let back = c.to_rust().unwrap();
            // All but `interrupt`, which a C policy does not carry (see
            // `to_rust`).
            assert_eq!(
                back,
                WaitPolicy {
                    interrupt: back.interrupt,
                    ..policy
                }
            );
            assert_eq!(sigretire_wait_policy::from_rust(back), c);
        }
        let c = sigretire_wait_policy::from_rust(guessing);
        assert_eq!(c.hybrid_expected_ns, 1_500_000);
        assert_eq!(
            sigretire_wait_policy::from_rust(WaitPolicy::hybrid()).hybrid_expected_ns,
            0,
            "no guess: learned from the tracker's history"
        );
    }

    #[test]
    fn a_policy_not_hybrid_carries_the_hybrid_defaults_to_switch_on() {
        let mut c = sigretire_wait_policy::from_rust(WaitPolicy::blocking());
        assert_eq!(c.hybrid, 0);
        c.hybrid = 1;
        assert_eq!(
            c.to_rust().unwrap(),
            WaitPolicy {
                interrupt: false,
                ..WaitPolicy::hybrid()
            }
        );
    }

    #[test]
    fn a_hybrid_flag_other_than_0_or_1_or_no_recheck_is_refused() {
        let mut c = sigretire_wait_policy::from_rust(WaitPolicy::hybrid());
        c.hybrid = 2;
        assert_eq!(
            c.to_rust().unwrap_err().status,
            SIGRETIRE_ERR_INVALID_ARGUMENT
        );
        c.hybrid = 1;
        c.hybrid_recheck_ns = 0;
        assert_eq!(
            c.to_rust().unwrap_err().status,
            SIGRETIRE_ERR_INVALID_ARGUMENT
        );
        c.hybrid = 0; // not hybrid: the hybrid fields are not read
        assert_eq!(c.to_rust().unwrap().hybrid, None);
    }

    #[test]
    fn an_earlier_headers_wait_policy_is_read_as_a_policy_not_hybrid() {
        // The caller's 40 bytes, followed by bytes that would say hybrid
        // were they read.
        let mut c = sigretire_wait_policy::from_rust(WaitPolicy::hybrid());
        c.size = WAIT_POLICY_BEFORE_HYBRID;
        // SAFETY: a local, aligned, initialised struct whose size field
        // says 40, all of them readable.
        let read = unsafe { crate::status::read_struct(&c, "policy") }.unwrap();
        assert_eq!(read.size, WAIT_POLICY_BEFORE_HYBRID);
        assert_eq!((read.hybrid, read.hybrid_recheck_ns), (0, 0));
        let policy = read.to_rust().unwrap();
        assert_eq!(policy.hybrid, None);
        assert_eq!(policy.spin, WaitPolicy::hybrid().spin);
        assert_eq!(policy.max_sleep, WaitPolicy::hybrid().max_sleep);
    }
}
