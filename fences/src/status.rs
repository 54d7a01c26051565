//! How a command, a batch or a wait ended: one outcome type for all three.
//!
//! A command's status is what its batch's completion settled, else what its
//! signal says; a batch ends as its fence ended (or released by the device
//! error state); a wait for a use ends as the use did, or released by the
//! device error state (a wait that runs out of time ends without an
//! outcome). [`CommandStatus`] says each of them.

use sigretire_tracker::Status;

/// What is known about a command, a batch, or how a wait for one ended.
///
/// ```
/// use sigretire_queue::CommandStatus;
/// assert!(CommandStatus::Complete.is_done());
/// assert!(!CommandStatus::Pending.is_done());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CommandStatus {
    /// Not shown to be complete yet.
    Pending,
    /// The command's work completed.
    Complete,
    /// The command's work failed (a queue error).
    Failed,
    /// The device entered the error state before the command was seen
    /// complete; its batch was released without completion (the GPU may
    /// still run it).
    DeviceError,
}

impl CommandStatus {
    /// Whether the command reached a final state: complete, failed, or
    /// released by a device error (only `Pending` may still change).
    ///
    /// ```
    /// use sigretire_queue::CommandStatus;
    /// assert!(!CommandStatus::Pending.is_done());
    /// assert!(CommandStatus::Complete.is_done());
    /// assert!(CommandStatus::Failed.is_done());
    /// assert!(CommandStatus::DeviceError.is_done());
    /// ```
    pub const fn is_done(self) -> bool {
        !matches!(self, CommandStatus::Pending)
    }

    /// The status as a small number, for an atomic cell.
    pub(crate) const fn code(self) -> u8 {
        match self {
            CommandStatus::Pending => 0,
            CommandStatus::Complete => 1,
            CommandStatus::Failed => 2,
            CommandStatus::DeviceError => 3,
        }
    }

    pub(crate) const fn from_code(code: u8) -> Self {
        match code {
            1 => CommandStatus::Complete,
            2 => CommandStatus::Failed,
            3 => CommandStatus::DeviceError,
            _ => CommandStatus::Pending,
        }
    }
}

impl From<Status> for CommandStatus {
    fn from(status: Status) -> Self {
        match status {
            Status::Pending => CommandStatus::Pending,
            Status::Complete => CommandStatus::Complete,
            Status::Failed => CommandStatus::Failed,
        }
    }
}
