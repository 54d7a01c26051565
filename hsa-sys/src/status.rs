//! `hsa_status_t`: what every ROCr call returns.

/// A ROCr status code (`hsa_status_t`).
pub type hsa_status_t = u32;

macro_rules! statuses {
    ($($name:ident = $value:literal, $text:literal;)*) => {
        $(
            #[doc = $text]
            pub const $name: hsa_status_t = $value;
        )*

        /// The C name of a status code (`"HSA_STATUS_ERROR_OUT_OF_RESOURCES"`),
        /// or `None` for a code this crate does not know.
        ///
        /// ```
        /// use hsa_sys::{status_name, HSA_STATUS_ERROR_OUT_OF_RESOURCES};
        /// assert_eq!(
        ///     status_name(HSA_STATUS_ERROR_OUT_OF_RESOURCES),
        ///     Some("HSA_STATUS_ERROR_OUT_OF_RESOURCES")
        /// );
        /// assert_eq!(status_name(0xdead), None);
        /// ```
        pub const fn status_name(status: hsa_status_t) -> Option<&'static str> {
            match status {
                $($value => Some(stringify!($name)),)*
                _ => None,
            }
        }

        /// The meaning of a status code as the HSA headers document it.
        ///
        /// ```
        /// use hsa_sys::{status_meaning, HSA_STATUS_ERROR_INVALID_SIGNAL};
        /// assert_eq!(status_meaning(HSA_STATUS_ERROR_INVALID_SIGNAL), Some("The signal is invalid."));
        /// assert_eq!(status_meaning(0xdead), None);
        /// ```
        pub const fn status_meaning(status: hsa_status_t) -> Option<&'static str> {
            match status {
                $($value => Some($text),)*
                _ => None,
            }
        }
    };
}

statuses! {
    HSA_STATUS_SUCCESS = 0x0, "The function has been executed successfully.";
    HSA_STATUS_INFO_BREAK = 0x1, "A traversal over a list of elements has been interrupted by the application.";
    HSA_STATUS_ERROR = 0x1000, "A generic error has occurred.";
    HSA_STATUS_ERROR_INVALID_ARGUMENT = 0x1001, "One of the actual arguments does not meet a precondition stated in the documentation.";
    HSA_STATUS_ERROR_INVALID_QUEUE_CREATION = 0x1002, "The requested queue creation is not valid.";
    HSA_STATUS_ERROR_INVALID_ALLOCATION = 0x1003, "The requested allocation is not valid.";
    HSA_STATUS_ERROR_INVALID_AGENT = 0x1004, "The agent is invalid.";
    HSA_STATUS_ERROR_INVALID_REGION = 0x1005, "The memory region is invalid.";
    HSA_STATUS_ERROR_INVALID_SIGNAL = 0x1006, "The signal is invalid.";
    HSA_STATUS_ERROR_INVALID_QUEUE = 0x1007, "The queue is invalid.";
    HSA_STATUS_ERROR_OUT_OF_RESOURCES = 0x1008, "The HSA runtime failed to allocate the necessary resources (with no GPU present, hsa_init reports this).";
    HSA_STATUS_ERROR_INVALID_PACKET_FORMAT = 0x1009, "The AQL packet is malformed.";
    HSA_STATUS_ERROR_RESOURCE_FREE = 0x100A, "An error has been detected while releasing a resource.";
    HSA_STATUS_ERROR_NOT_INITIALIZED = 0x100B, "An API other than hsa_init has been invoked while the reference count of the HSA runtime is 0.";
    HSA_STATUS_ERROR_REFCOUNT_OVERFLOW = 0x100C, "The maximum reference count for the object has been reached.";
    HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS = 0x100D, "The arguments passed to a function are not compatible.";
    HSA_STATUS_ERROR_INVALID_INDEX = 0x100E, "The index is invalid.";
    HSA_STATUS_ERROR_INVALID_ISA = 0x100F, "The instruction set architecture is invalid.";
    HSA_STATUS_ERROR_INVALID_ISA_NAME = 0x1017, "The instruction set architecture name is invalid.";
    HSA_STATUS_ERROR_INVALID_CODE_OBJECT = 0x1010, "The code object is invalid.";
    HSA_STATUS_ERROR_INVALID_EXECUTABLE = 0x1011, "The executable is invalid.";
    HSA_STATUS_ERROR_FROZEN_EXECUTABLE = 0x1012, "The executable is frozen.";
    HSA_STATUS_ERROR_INVALID_SYMBOL_NAME = 0x1013, "There is no symbol with the given name.";
    HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED = 0x1014, "The variable is already defined.";
    HSA_STATUS_ERROR_VARIABLE_UNDEFINED = 0x1015, "The variable is undefined.";
    HSA_STATUS_ERROR_EXCEPTION = 0x1016, "An HSAIL operation resulted in a hardware exception.";
    HSA_STATUS_ERROR_INVALID_CODE_SYMBOL = 0x1018, "The code object symbol is invalid.";
    HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL = 0x1019, "The executable symbol is invalid.";
    HSA_STATUS_ERROR_INVALID_FILE = 0x1020, "The file descriptor is invalid.";
    HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER = 0x1021, "The code object reader is invalid.";
    HSA_STATUS_ERROR_INVALID_CACHE = 0x1022, "The cache is invalid.";
    HSA_STATUS_ERROR_INVALID_WAVEFRONT = 0x1023, "The wavefront is invalid.";
    HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP = 0x1024, "The signal group is invalid.";
    HSA_STATUS_ERROR_INVALID_RUNTIME_STATE = 0x1025, "The HSA runtime is not in the configuration state.";
    HSA_STATUS_ERROR_FATAL = 0x1026, "The queue received an error that may require process termination.";
    // AMD's additions (hsa_ext_amd.h): small decimal values, below the 0x1000
    // where the core error codes start.
    HSA_STATUS_ERROR_INVALID_MEMORY_POOL = 40, "The memory pool is invalid.";
    HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION = 41, "Agent accessed memory beyond the maximum legal address.";
    HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION = 42, "Agent executed an invalid shader instruction.";
    HSA_STATUS_ERROR_MEMORY_FAULT = 43, "Agent attempted to access an inaccessible address.";
    HSA_STATUS_CU_MASK_REDUCED = 44, "The CU mask was set, but CUs disabled for the process remain disabled.";
}

/// A ROCr call that returned something other than [`HSA_STATUS_SUCCESS`].
///
/// It carries the code, its C name and, when it was made with an
/// [`HsaApi`](crate::HsaApi) at hand ([`HsaApi::check_status`](crate::HsaApi::check_status)),
/// ROCr's own description of it (`hsa_status_string`). Without one it falls
/// back to the meaning the headers document.
///
/// ```
/// use hsa_sys::{check_status, HSA_STATUS_ERROR_OUT_OF_RESOURCES, HSA_STATUS_SUCCESS};
///
/// assert!(check_status(HSA_STATUS_SUCCESS).is_ok());
/// let error = check_status(HSA_STATUS_ERROR_OUT_OF_RESOURCES).unwrap_err();
/// assert_eq!(error.status(), 0x1008);
/// assert_eq!(error.name(), Some("HSA_STATUS_ERROR_OUT_OF_RESOURCES"));
/// assert!(error.to_string().starts_with("HSA_STATUS_ERROR_OUT_OF_RESOURCES (0x1008): "));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct StatusError {
    status: hsa_status_t,
    runtime_text: Option<String>,
}

impl StatusError {
    /// An error for `status`, described by the headers' text alone.
    ///
    /// ```
    /// use hsa_sys::{StatusError, HSA_STATUS_ERROR_INVALID_QUEUE};
    ///
    /// let error = StatusError::new(HSA_STATUS_ERROR_INVALID_QUEUE);
    /// assert_eq!((error.status(), error.name()), (0x1007, Some("HSA_STATUS_ERROR_INVALID_QUEUE")));
    /// assert_eq!(error.runtime_text(), None);
    /// assert!(error.to_string().ends_with("The queue is invalid."), "{error}");
    /// let described = error.with_runtime_text("HSA_STATUS_ERROR_INVALID_QUEUE: ROCr's own words.");
    /// assert_eq!(described.to_string(), "HSA_STATUS_ERROR_INVALID_QUEUE (0x1007): ROCr's own words.");
    /// ```
    pub fn new(status: hsa_status_t) -> Self {
        Self {
            status,
            runtime_text: None,
        }
    }

    /// Attaches ROCr's own description of the status (`hsa_status_string`).
    pub fn with_runtime_text(mut self, text: impl Into<String>) -> Self {
        self.runtime_text = Some(text.into());
        self
    }

    /// The raw status code.
    pub fn status(&self) -> hsa_status_t {
        self.status
    }

    /// The code's C name, or `None` for a code this crate does not know.
    pub fn name(&self) -> Option<&'static str> {
        status_name(self.status)
    }

    /// ROCr's own description, if one was attached.
    pub fn runtime_text(&self) -> Option<&str> {
        self.runtime_text.as_deref()
    }

    fn describe(&self) -> String {
        let code = self.status;
        let Some(name) = self.name() else {
            return match self.runtime_text() {
                Some(text) => format!("unknown HSA status {code:#x}: {text}"),
                None => format!("unknown HSA status {code:#x}"),
            };
        };
        // ROCr's text repeats the name ("HSA_STATUS_ERROR_...: The runtime ..."):
        // drop that prefix rather than print the name twice.
        let meaning = match self.runtime_text() {
            Some(text) => text
                .strip_prefix(name)
                .map_or(text, |rest| rest.trim_start_matches([':', ' '])),
            None => status_meaning(code).unwrap_or_default(),
        };
        format!("{name} ({code:#x}): {meaning}")
    }
}

/// `Ok(())` for [`HSA_STATUS_SUCCESS`], otherwise a [`StatusError`] described by
/// the headers' text. Use [`HsaApi::check_status`](crate::HsaApi::check_status)
/// to get ROCr's own text as well.
///
/// [`HSA_STATUS_INFO_BREAK`] is an error here too: a traversal whose callback
/// breaks on purpose should compare for it before checking.
///
/// ```
/// use hsa_sys::{check_status, HSA_STATUS_INFO_BREAK};
/// assert_eq!(check_status(HSA_STATUS_INFO_BREAK).unwrap_err().status(), HSA_STATUS_INFO_BREAK);
/// ```
pub fn check_status(status: hsa_status_t) -> Result<(), StatusError> {
    match status {
        HSA_STATUS_SUCCESS => Ok(()),
        _ => Err(StatusError::new(status)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_a_name_and_a_meaning() {
        for status in 0..=0x2000 {
            assert_eq!(
                status_name(status).is_some(),
                status_meaning(status).is_some(),
                "{status:#x}"
            );
        }
        assert_eq!(
            status_name(HSA_STATUS_ERROR_INVALID_MEMORY_POOL),
            Some("HSA_STATUS_ERROR_INVALID_MEMORY_POOL")
        );
    }

    #[test]
    fn runtime_text_replaces_the_header_meaning_without_repeating_the_name() {
        let error = StatusError::new(HSA_STATUS_ERROR_OUT_OF_RESOURCES).with_runtime_text(
            "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate.",
        );
        assert_eq!(
            error.to_string(),
            "HSA_STATUS_ERROR_OUT_OF_RESOURCES (0x1008): The runtime failed to allocate."
        );

        let error = StatusError::new(HSA_STATUS_ERROR_INVALID_SIGNAL)
            .with_runtime_text("a signal went missing");
        assert_eq!(
            error.to_string(),
            "HSA_STATUS_ERROR_INVALID_SIGNAL (0x1006): a signal went missing"
        );
    }

    #[test]
    fn unknown_codes_still_describe_themselves() {
        assert_eq!(
            StatusError::new(0xdead).to_string(),
            "unknown HSA status 0xdead"
        );
        assert_eq!(StatusError::new(0xdead).name(), None);
        assert_eq!(
            StatusError::new(0xdead)
                .with_runtime_text("vendor code")
                .to_string(),
            "unknown HSA status 0xdead: vendor code"
        );
    }
}
