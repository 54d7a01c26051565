//! Uses and tickets: what a caller asks for, and the name of what it got.

/// What a use of a signal is for. It decides where the signal should live:
/// a use only the profiler reads gets a host-memory signal, everything a CPU
/// sync or a GPU waiter may read gets the configured placement
/// ([`Config::signals`](crate::Config::signals)).
///
/// ```
/// use sigretire_tracker::Purpose;
/// assert!(Purpose::TimingOnly.is_timed());
/// assert!(!Purpose::Completion.is_timed());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// A packet whose completion only the tracker itself observes.
    #[default]
    Completion,
    /// A packet a CPU thread will wait for (a marker for synchronize).
    CpuSync,
    /// A packet an event records.
    Event,
    /// A packet another queue will wait for on the GPU.
    GpuWaiter,
    /// A packet that needs a signal only so the profiler can time it.
    TimingOnly,
}

impl Purpose {
    /// Whether the use always carries timestamps the tracker must harvest.
    pub const fn is_timed(self) -> bool {
        matches!(self, Purpose::TimingOnly)
    }
}

/// Where the packet a use completes runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Engine {
    /// An AQL packet on the tracker's queue, at this index.
    Aql { index: u64, barrier: bool },
    /// Work on a copy engine (SDMA, blit): its ring is in system memory, so its
    /// signal is flushed when the use begins, and the AQL queue's fences prove
    /// nothing about it.
    Copy,
}

/// Bits of [`Request::flags`]. The low three are the ring slot's own flags
/// (`ring::Slot`), so the fast path records a plain use's flags as they come.
/// The bits of a request's flags and of its slot's: a request carries its
/// slot's flags ready-made, so the acquire fast path copies them with one
/// mask. Every bit is defined here, once.
///
/// | bit | name          | on a request | on a slot |
/// |----:|---------------|:------------:|:---------:|
/// |   1 | `FENCE`       | yes          | yes (cleared when its submission fails) |
/// |   2 | `COPY`        | yes          | yes       |
/// |   4 | `TIMED`       | yes          | yes       |
/// |   8 | `HARVESTED`   | no           | yes (its stamps were read early, by a query) |
/// |  16 | `ASKED_TIMED` | yes          | no        |
/// |  32 | `MULTI`       | yes          | no        |
/// |  64 | `TIMING_ONLY` | yes          | no        |
pub(crate) mod flag {
    /// An AQL packet with the barrier bit: a fence.
    pub(crate) const FENCE: u8 = 1;
    /// Work on a copy engine.
    pub(crate) const COPY: u8 = 2;
    /// Timestamps to harvest: asked for, or the use exists to be timed.
    pub(crate) const TIMED: u8 = 4;
    /// A slot's: its use's stamps were harvested before it retired.
    pub(crate) const HARVESTED: u8 = 8;
    /// The caller asked for timestamps ([`Request::timed`](super::Request::timed)).
    pub(crate) const ASKED_TIMED: u8 = 16;
    /// Several operations decrement the signal.
    pub(crate) const MULTI: u8 = 32;
    /// The use exists only to be timed: it wants a host-memory signal.
    pub(crate) const TIMING_ONLY: u8 = 64;
    /// The request flags a slot keeps.
    pub(crate) const FROM_REQUEST: u8 = FENCE | COPY | TIMED;
}

/// A request for a signal: the packet it will complete and what for.
///
/// The builders keep it ready for the tracker's hot path: what a use needs
/// (its slot flags, whether it can take the fast path at all) is worked out
/// here, once, by constant functions, not at every acquire.
///
/// ```
/// use sigretire_tracker::{Purpose, Request};
///
/// // A kernel dispatch at AQL index 42 with the barrier bit, whose
/// // completion an event records and whose time the event reports.
/// let request = Request::packet(42).barrier(true).purpose(Purpose::Event).timed(true);
/// assert!(request.is_fence());
/// assert!(request.is_timed());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    /// The AQL index (0 for copy-engine work).
    pub(crate) index: u64,
    pub(crate) ops: u32,
    /// [`flag`] bits.
    pub(crate) flags: u8,
    pub(crate) purpose: Purpose,
}

impl Request {
    /// An AQL packet at `aql_index` on the tracker's queue. When one use covers
    /// several packets (see [`ops`](Self::ops)), give the index of the last.
    pub const fn packet(aql_index: u64) -> Self {
        Self {
            index: aql_index,
            ops: 1,
            flags: 0,
            purpose: Purpose::Completion,
        }
    }

    /// Work on a copy engine, outside the AQL queue.
    pub const fn copy_engine() -> Self {
        Self {
            index: 0,
            ops: 1,
            flags: flag::COPY,
            purpose: Purpose::Completion,
        }
    }

    /// Whether the packet has the barrier bit (ignored for copy-engine work).
    pub const fn barrier(mut self, barrier: bool) -> Self {
        if self.flags & flag::COPY == 0 {
            self.flags = set(self.flags, flag::FENCE, barrier);
        }
        self
    }

    /// What the use is for.
    pub const fn purpose(mut self, purpose: Purpose) -> Self {
        self.purpose = purpose;
        self.flags = set(self.flags, flag::TIMING_ONLY, purpose.is_timed());
        self.with_timed_flag()
    }

    /// Whether the packet runs on a profiled queue and its timestamps must be
    /// harvested before the signal is re-armed.
    pub const fn timed(mut self, timed: bool) -> Self {
        self.flags = set(self.flags, flag::ASKED_TIMED, timed);
        self.with_timed_flag()
    }

    /// How many operations decrement the signal (several sub-operations of one
    /// submission may share it). At least 1.
    pub const fn ops(mut self, ops: u32) -> Self {
        self.ops = if ops == 0 { 1 } else { ops };
        self.flags = set(self.flags, flag::MULTI, self.ops > 1);
        self
    }

    /// Whether the use is a fence: an AQL packet with the barrier bit, whose
    /// completion proves every earlier packet of its queue completed.
    pub const fn is_fence(&self) -> bool {
        self.flags & flag::FENCE != 0
    }

    /// Whether the use's timestamps will be harvested (it runs on a profiled
    /// queue, or exists only to be timed).
    pub const fn is_timed(&self) -> bool {
        self.flags & flag::TIMED != 0
    }

    /// Where the packet runs.
    pub(crate) const fn engine(&self) -> Engine {
        if self.flags & flag::COPY != 0 {
            Engine::Copy
        } else {
            Engine::Aql {
                index: self.index,
                barrier: self.is_fence(),
            }
        }
    }

    const fn with_timed_flag(mut self) -> Self {
        let timed = self.flags & (flag::ASKED_TIMED | flag::TIMING_ONLY) != 0;
        self.flags = set(self.flags, flag::TIMED, timed);
        self
    }
}

const fn set(flags: u8, bit: u8, on: bool) -> u8 {
    if on { flags | bit } else { flags & !bit }
}

/// A queue generation. A queue change (the runtime moved the stream to another
/// hardware queue) starts a new one: AQL indices and fences of different
/// generations prove nothing about each other.
///
/// A runtime's tracker counts them in 32 bits (tests narrow the counter to
/// see it wrap); [`precedes`](Self::precedes) compares with serial-number arithmetic, so it
/// stays right across a wrap as long as fewer than half the counter's values
/// are apart. The tracker's own retirement logic never compares generation
/// numbers at all: it compares a use's sequence number with the first sequence
/// number of the current generation, which cannot wrap.
///
/// ```
/// use sigretire_tracker::Generation;
/// let bits = 3; // values 0..8
/// let a = Generation::new(7, bits);
/// let b = a.next(bits); // wraps to 0
/// assert_eq!(b.value(), 0);
/// assert!(a.precedes(b, bits));
/// assert!(!b.precedes(a, bits));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Generation(u32);

impl Generation {
    /// The first generation.
    pub const ZERO: Generation = Generation(0);

    /// A generation with the given value, masked to `bits` bits (1..=32).
    pub const fn new(value: u32, bits: u32) -> Self {
        Self(value & Self::mask(bits))
    }

    /// The counter value.
    pub const fn value(self) -> u32 {
        self.0
    }

    /// The generation after this one, wrapping at `bits` bits.
    pub const fn next(self, bits: u32) -> Self {
        Self(self.0.wrapping_add(1) & Self::mask(bits))
    }

    /// Whether `self` is older than `other` (serial-number arithmetic, RFC 1982).
    pub const fn precedes(self, other: Self, bits: u32) -> bool {
        let distance = other.0.wrapping_sub(self.0) & Self::mask(bits);
        distance != 0 && distance <= Self::mask(bits) / 2
    }

    const fn mask(bits: u32) -> u32 {
        let bits = if bits == 0 {
            1
        } else if bits > 32 {
            32
        } else {
            bits
        };
        if bits == 32 {
            u32::MAX
        } else {
            (1 << bits) - 1
        }
    }
}

/// Whether AQL index `a` comes before `b`, wrap-safely.
pub(crate) const fn aql_before(a: u64, b: u64) -> bool {
    (b.wrapping_sub(a) as i64) > 0
}

/// The name of one use of a signal: which use, not just which signal, so a
/// later use of the same signal can never answer for it. Plain data, cheap
/// to copy; holds no reference, so keeping a ticket never keeps a signal
/// from being re-armed.
///
/// Its fields are numbers anyone can write, so the tracker checks every
/// ticket it is given against its own state and refuses one it did not
/// issue as it is: another tracker's, a zeroed or made-up one, one with a
/// field changed. A ticket of a use that retired long ago still answers,
/// from what the tracker keeps of its sequence number. This struct is also
/// the C ABI's `sigretire_ticket`, which is why these docs name no Rust
/// item (the `seq` method's Rust example shows one refused).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ticket {
    /// The issuing tracker's id (unique in the process, never reused).
    pub tracker: u64,
    /// The use's sequence number: a tracker's uses are numbered 1, 2, 3...
    /// in the order they were acquired.
    pub seq: u64,
    /// The slot of the use's signal in its tracker's table of signals.
    pub slot: u32,
    /// The value of the queue generation the use belongs to.
    pub generation: u32,
    /// 4 when the use's timestamps are harvested (`TIMED`), else 0; no
    /// other bit.
    pub flags: u64,
}

impl Ticket {
    /// [`flags`](Self::flags): the use's timestamps are harvested. (Bit 2:
    /// a request's and a slot's timed bit, so a ticket takes it as is.)
    pub const TIMED: u64 = flag::TIMED as u64;

    /// The ticket of use `seq` of tracker `tracker`, whose signal is in
    /// `slot` (the trackers' own constructor).
    #[inline(always)]
    pub(crate) const fn issue(
        tracker: u64,
        seq: u64,
        slot: u32,
        generation: Generation,
        timed: bool,
    ) -> Self {
        Self::of_flags(
            tracker,
            seq,
            slot,
            generation,
            if timed { flag::TIMED } else { 0 },
        )
    }

    /// [`issue`](Self::issue), the use's timedness given as its slot flags
    /// (the hot path's: no conversion).
    #[inline(always)]
    pub(crate) const fn of_flags(
        tracker: u64,
        seq: u64,
        slot: u32,
        generation: Generation,
        slot_flags: u8,
    ) -> Self {
        Self {
            tracker,
            seq,
            slot,
            generation: generation.value(),
            flags: (slot_flags & flag::TIMED) as u64,
        }
    }

    /// The use's sequence number: uses of one tracker are numbered 1, 2, 3...
    /// in the order they were acquired.
    ///
    /// Obtained from [`Tracker::acquire`](crate::Tracker::acquire); a ticket
    /// the tracker did not issue as it is answers
    /// [`ForeignTicket`](crate::ForeignTicket):
    ///
    /// ```
    /// use sigretire_tracker::{ForeignTicket, Request, Ticket, Tracker};
    /// use sigretire_sim::backend as sim_backend;
    /// let (mut tracker, queue) = sim_backend::stepped_tracker(Default::default()).unwrap();
    /// let first = tracker.acquire(Request::packet(queue.reserve().unwrap())).unwrap().ticket;
    /// let second = tracker.acquire(Request::packet(queue.reserve().unwrap())).unwrap().ticket;
    /// assert_eq!((first.seq(), second.seq()), (1, 2));
    /// assert_ne!(first, second); // the same signal may serve both; the tickets differ
    /// let altered = Ticket { seq: 3, ..second };
    /// assert_eq!(tracker.query(&altered), Err(ForeignTicket));
    /// ```
    pub const fn seq(&self) -> u64 {
        self.seq
    }

    /// The queue generation the use belongs to.
    pub const fn generation(&self) -> Generation {
        Generation(self.generation)
    }

    /// Whether the use's timestamps are harvested (see [`Request::is_timed`]).
    pub const fn is_timed(&self) -> bool {
        self.flags & Self::TIMED != 0
    }

    /// The same ticket, marked timed ([`Tracker::time`](crate::Tracker::time)).
    pub(crate) const fn timed(self) -> Self {
        Self {
            flags: self.flags | Self::TIMED,
            ..self
        }
    }

    /// Whether its fields can be a ticket at all: a use numbered from 1,
    /// only the flags there are.
    pub(crate) const fn is_well_formed(&self) -> bool {
        self.seq != 0 && self.flags & !Self::TIMED == 0
    }
}

/// What is known about a use.
///
/// ```
/// use sigretire_tracker::Status;
/// assert!(Status::Complete.is_done() && Status::Failed.is_done());
/// assert!(!Status::Pending.is_done());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// The use's work has not been shown to be complete.
    Pending,
    /// The use's work completed.
    Complete,
    /// The use failed: its queue reported an error, or its submission failed.
    /// Its work never completes.
    Failed,
}

impl Status {
    /// Whether the use is done, one way or the other.
    pub const fn is_done(self) -> bool {
        !matches!(self, Status::Pending)
    }
}

#[cfg(all(test, not(sigretire_loom)))]
mod tests;
