//! ROCr's functions, loaded at run time into one table.
//!
//! [`HsaApi`] opens `libhsa-runtime64.so.1` with `dlopen` and resolves every
//! symbol listed in the single `hsa_api!` invocation below, so the crate
//! builds and its simulator-backed users run on machines without ROCm, and a
//! machine with ROCm needs nothing at link time. Each entry of that invocation
//! names one C function, once, with its exact signature from Debian's ROCr
//! 5.2.3 headers (`tests/c_layout.rs` has a C compiler check every one); adding
//! a function is adding an entry, and the field, the loading code and the
//! method follow from it.

use crate::*;
use core::ffi::{CStr, c_char, c_int, c_void};
use libloading::Library;
use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

/// The library [`HsaApi::load`] opens unless [`LIBRARY_ENV`] names another:
/// ROCr's soname, found through the dynamic loader's usual search path.
pub const DEFAULT_LIBRARY: &str = "libhsa-runtime64.so.1";

/// The environment variable that names the ROCr library [`HsaApi::load`]
/// opens instead of [`DEFAULT_LIBRARY`] (a path, or a name for the dynamic
/// loader to search).
pub const LIBRARY_ENV: &str = "SIGRETIRE_HSA_LIBRARY";

/// Why [`HsaApi`] could not be loaded.
///
/// ```
/// use hsa_sys::{HsaApi, LoadError};
///
/// let error = HsaApi::load_from("/nonexistent/libhsa-runtime64.so.1").unwrap_err();
/// assert!(matches!(error, LoadError::LibraryMissing { .. }));
/// assert!(error.to_string().contains("apt install libhsa-runtime64-1"), "{error}");
///
/// // A library that is not ROCr lacks its first symbol.
/// if let Err(LoadError::SymbolMissing { symbol, .. }) = HsaApi::load_from("libc.so.6") {
///     assert_eq!(symbol, "hsa_init");
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The dynamic loader could not open the library: it is not installed, the
    /// path is wrong, or one of its own dependencies is missing.
    #[error(
        "cannot load the ROCm runtime `{}`: {reason}. Install ROCm's HSA runtime \
         (Debian: `apt install libhsa-runtime64-1`), or set SIGRETIRE_HSA_LIBRARY \
         to the path of its libhsa-runtime64.so.1",
        library.display()
    )]
    LibraryMissing {
        /// The file or name that was opened.
        library: PathBuf,
        /// The dynamic loader's explanation (`dlerror`).
        reason: String,
    },
    /// The library opened but does not export a function the table needs.
    #[error(
        "`{}` has no symbol `{symbol}`: it is not ROCm's HSA runtime, or one older \
         than 5.2. Set SIGRETIRE_HSA_LIBRARY to the libhsa-runtime64.so.1 of ROCm 5.2 or newer",
        library.display()
    )]
    SymbolMissing {
        /// The C function that was not found.
        symbol: &'static str,
        /// The library that lacks it.
        library: PathBuf,
    },
}

/// The library [`HsaApi::load`] opens, given the value of [`LIBRARY_ENV`]
/// (`None` when it is unset). An empty value counts as unset.
///
/// ```
/// use hsa_sys::{library_to_load, DEFAULT_LIBRARY};
/// use std::ffi::OsStr;
/// use std::path::Path;
///
/// assert_eq!(library_to_load(None), Path::new(DEFAULT_LIBRARY));
/// assert_eq!(library_to_load(Some(OsStr::new(""))), Path::new(DEFAULT_LIBRARY));
/// assert_eq!(
///     library_to_load(Some(OsStr::new("/opt/rocm/lib/libhsa-runtime64.so.1"))),
///     Path::new("/opt/rocm/lib/libhsa-runtime64.so.1"),
/// );
/// ```
pub fn library_to_load(env_value: Option<&OsStr>) -> PathBuf {
    match env_value {
        Some(value) if !value.is_empty() => PathBuf::from(value),
        _ => PathBuf::from(DEFAULT_LIBRARY),
    }
}

/// The signature of one function of the table, as Rust source text.
///
/// Not API: it exists so that `tests/c_layout.rs` can have a C compiler check
/// each signature against the headers' declaration.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct FunctionSignature {
    /// The C symbol.
    pub symbol: &'static str,
    /// Each parameter's Rust type.
    pub parameters: &'static [&'static str],
    /// The Rust return type, or `""` for a C `void` function.
    pub returns: &'static str,
}

/// Generates [`HsaApi`] from a list of C functions: its private fields (one
/// function pointer each), the loading code, one `unsafe` method per function
/// that calls through `&self` (so the library is loaded for as long as a call
/// can happen), [`HsaApi::SYMBOLS`], and [`FUNCTION_SIGNATURES`].
macro_rules! hsa_api {
    ($(
        $symbol:ident: unsafe extern "C" fn($($arg:ident: $arg_ty:ty),* $(,)?) $(-> $ret:ty)?;
    )*) => {
        /// ROCr's C functions, resolved from one loaded library.
        ///
        /// Each `hsa_*` method calls the C function of the same name
        /// ([`HsaApi::SYMBOLS`] lists them). They are `unsafe` because ROCr
        /// trusts its arguments: see the
        /// [safety contract](HsaApi#safety-of-every-call). The table keeps the
        /// library open for as long as it lives, and every call borrows the
        /// table, so no function pointer outlives the code it points to.
        /// [`HsaApi::check_status`] turns a returned status into a
        /// [`StatusError`] with ROCr's own description.
        ///
        /// # Safety of every call
        ///
        /// - The loaded library must be ROCr (any library exporting these
        ///   names with the signatures of the HSA headers).
        /// - The arguments must meet the C function's contract in those
        ///   headers: handles live and of the right kind, pointers valid for
        ///   the reads and writes it documents, sizes and attribute buffers
        ///   matching, and the runtime initialised (`hsa_init`) where the
        ///   function needs it.
        /// - Callbacks must be sound to call from the threads ROCr calls them
        ///   on (often its own event thread) and must not unwind.
        ///
        /// ```
        /// use hsa_sys::{HsaApi, LoadError, HSA_STATUS_SUCCESS};
        ///
        /// match HsaApi::load() {
        ///     Ok(api) => {
        ///         // SAFETY: hsa_init takes no arguments.
        ///         let status = unsafe { api.hsa_init() };
        ///         match api.check_status(status) {
        ///             Ok(()) => {
        ///                 // SAFETY: balances the successful hsa_init above.
        ///                 let status = unsafe { api.hsa_shut_down() };
        ///                 assert_eq!(status, HSA_STATUS_SUCCESS);
        ///             }
        ///             // No GPU: ROCr says so (HSA_STATUS_ERROR_OUT_OF_RESOURCES).
        ///             Err(error) => eprintln!("no HSA runtime here: {error}"),
        ///         }
        ///     }
        ///     Err(error @ LoadError::LibraryMissing { .. }) => eprintln!("no ROCm here: {error}"),
        ///     Err(error) => eprintln!("not a usable ROCr: {error}"),
        /// }
        /// ```
        pub struct HsaApi {
            $($symbol: unsafe extern "C" fn($($arg_ty),*) $(-> $ret)?,)*
            library_path: PathBuf,
            // Keeps the code behind every pointer above mapped. The pointers
            // are private and only called through `&self`, so none can be
            // called after this is dropped.
            _library: Library,
        }

        impl HsaApi {
            /// Every C symbol the table resolves, in table order.
            pub const SYMBOLS: &'static [&'static str] = &[$(stringify!($symbol)),*];

            fn resolve_all(library: Library, library_path: PathBuf) -> Result<Self, LoadError> {
                Ok(Self {
                    $(
                        // SAFETY: the type is the C signature of `$symbol` in
                        // Debian's ROCr 5.2.3 headers (checked by a C compiler
                        // in tests/c_layout.rs). Should the library not be ROCr,
                        // the pointer is still only data until a method calls
                        // it, and every method's contract requires ROCr.
                        $symbol: unsafe { resolve(&library, &library_path, stringify!($symbol))? },
                    )*
                    library_path,
                    _library: library,
                })
            }

            $(
                #[doc = concat!("Calls ROCr's `", stringify!($symbol), "`.")]
                ///
                /// # Safety
                ///
                /// The [contract of every call](HsaApi#safety-of-every-call):
                /// ROCr loaded, arguments as the C headers require.
                #[inline]
                #[allow(clippy::too_many_arguments)] // mirrors the C signature
                pub unsafe fn $symbol(&self, $($arg: $arg_ty),*) $(-> $ret)? {
                    // SAFETY: the caller meets the C function's contract, and
                    // `&self` keeps the library that holds the code loaded.
                    unsafe { (self.$symbol)($($arg),*) }
                }
            )*
        }

        /// Every function of [`HsaApi`] as Rust source text, for `tests/c_layout.rs`.
        #[doc(hidden)]
        pub const FUNCTION_SIGNATURES: &[FunctionSignature] = &[$(
            FunctionSignature {
                symbol: stringify!($symbol),
                parameters: &[$(stringify!($arg_ty)),*],
                returns: concat!("" $(, stringify!($ret))?),
            },
        )*];
    };
}

hsa_api! {
    // Runtime (hsa.h).
    hsa_init: unsafe extern "C" fn() -> hsa_status_t;
    hsa_shut_down: unsafe extern "C" fn() -> hsa_status_t;
    hsa_status_string: unsafe extern "C" fn(
        status: hsa_status_t,
        status_string: *mut *const c_char,
    ) -> hsa_status_t;
    hsa_system_get_info: unsafe extern "C" fn(
        attribute: hsa_system_info_t,
        value: *mut c_void,
    ) -> hsa_status_t;

    // Agents (hsa.h).
    hsa_iterate_agents: unsafe extern "C" fn(
        callback: Option<unsafe extern "C" fn(agent: hsa_agent_t, data: *mut c_void) -> hsa_status_t>,
        data: *mut c_void,
    ) -> hsa_status_t;
    hsa_agent_get_info: unsafe extern "C" fn(
        agent: hsa_agent_t,
        attribute: hsa_agent_info_t,
        value: *mut c_void,
    ) -> hsa_status_t;

    // Memory pools (hsa_ext_amd.h).
    hsa_amd_agent_iterate_memory_pools: unsafe extern "C" fn(
        agent: hsa_agent_t,
        callback: Option<unsafe extern "C" fn(memory_pool: hsa_amd_memory_pool_t, data: *mut c_void) -> hsa_status_t>,
        data: *mut c_void,
    ) -> hsa_status_t;
    hsa_amd_memory_pool_get_info: unsafe extern "C" fn(
        memory_pool: hsa_amd_memory_pool_t,
        attribute: hsa_amd_memory_pool_info_t,
        value: *mut c_void,
    ) -> hsa_status_t;
    hsa_amd_agent_memory_pool_get_info: unsafe extern "C" fn(
        agent: hsa_agent_t,
        memory_pool: hsa_amd_memory_pool_t,
        attribute: hsa_amd_agent_memory_pool_info_t,
        value: *mut c_void,
    ) -> hsa_status_t;
    hsa_amd_memory_pool_allocate: unsafe extern "C" fn(
        memory_pool: hsa_amd_memory_pool_t,
        size: usize,
        flags: u32,
        ptr: *mut *mut c_void,
    ) -> hsa_status_t;
    hsa_amd_memory_pool_free: unsafe extern "C" fn(ptr: *mut c_void) -> hsa_status_t;
    hsa_amd_agents_allow_access: unsafe extern "C" fn(
        num_agents: u32,
        agents: *const hsa_agent_t,
        flags: *const u32,
        ptr: *const c_void,
    ) -> hsa_status_t;

    // Signals (hsa.h, hsa_ext_amd.h).
    hsa_signal_create: unsafe extern "C" fn(
        initial_value: hsa_signal_value_t,
        num_consumers: u32,
        consumers: *const hsa_agent_t,
        signal: *mut hsa_signal_t,
    ) -> hsa_status_t;
    hsa_amd_signal_create: unsafe extern "C" fn(
        initial_value: hsa_signal_value_t,
        num_consumers: u32,
        consumers: *const hsa_agent_t,
        attributes: u64,
        signal: *mut hsa_signal_t,
    ) -> hsa_status_t;
    hsa_signal_destroy: unsafe extern "C" fn(signal: hsa_signal_t) -> hsa_status_t;
    hsa_signal_load_scacquire: unsafe extern "C" fn(signal: hsa_signal_t) -> hsa_signal_value_t;
    hsa_signal_load_relaxed: unsafe extern "C" fn(signal: hsa_signal_t) -> hsa_signal_value_t;
    hsa_signal_store_screlease: unsafe extern "C" fn(
        signal: hsa_signal_t,
        value: hsa_signal_value_t,
    );
    hsa_signal_store_relaxed: unsafe extern "C" fn(signal: hsa_signal_t, value: hsa_signal_value_t);
    hsa_signal_silent_store_relaxed: unsafe extern "C" fn(
        signal: hsa_signal_t,
        value: hsa_signal_value_t,
    );
    hsa_signal_wait_scacquire: unsafe extern "C" fn(
        signal: hsa_signal_t,
        condition: hsa_signal_condition_t,
        compare_value: hsa_signal_value_t,
        timeout_hint: u64,
        wait_state_hint: hsa_wait_state_t,
    ) -> hsa_signal_value_t;
    hsa_amd_signal_async_handler: unsafe extern "C" fn(
        signal: hsa_signal_t,
        cond: hsa_signal_condition_t,
        value: hsa_signal_value_t,
        handler: hsa_amd_signal_handler,
        arg: *mut c_void,
    ) -> hsa_status_t;

    // Queues (hsa.h).
    hsa_queue_create: unsafe extern "C" fn(
        agent: hsa_agent_t,
        size: u32,
        type_: hsa_queue_type32_t,
        callback: Option<unsafe extern "C" fn(status: hsa_status_t, source: *mut hsa_queue_t, data: *mut c_void)>,
        data: *mut c_void,
        private_segment_size: u32,
        group_segment_size: u32,
        queue: *mut *mut hsa_queue_t,
    ) -> hsa_status_t;
    hsa_queue_destroy: unsafe extern "C" fn(queue: *mut hsa_queue_t) -> hsa_status_t;
    hsa_queue_load_read_index_scacquire: unsafe extern "C" fn(queue: *const hsa_queue_t) -> u64;
    hsa_queue_load_write_index_relaxed: unsafe extern "C" fn(queue: *const hsa_queue_t) -> u64;
    hsa_queue_add_write_index_scacq_screl: unsafe extern "C" fn(
        queue: *const hsa_queue_t,
        value: u64,
    ) -> u64;

    // Profiling (hsa_ext_amd.h).
    hsa_amd_profiling_set_profiler_enabled: unsafe extern "C" fn(
        queue: *mut hsa_queue_t,
        enable: c_int,
    ) -> hsa_status_t;
    hsa_amd_profiling_get_dispatch_time: unsafe extern "C" fn(
        agent: hsa_agent_t,
        signal: hsa_signal_t,
        time: *mut hsa_amd_profiling_dispatch_time_t,
    ) -> hsa_status_t;
    hsa_amd_profiling_convert_tick_to_system_domain: unsafe extern "C" fn(
        agent: hsa_agent_t,
        agent_tick: u64,
        system_tick: *mut u64,
    ) -> hsa_status_t;
}

impl HsaApi {
    /// Loads [`DEFAULT_LIBRARY`], or the library [`LIBRARY_ENV`] names.
    ///
    /// Loading runs the library's initialisers, so it trusts the file found
    /// there to be a well-behaved shared library, as linking against it would.
    ///
    /// ```
    /// match hsa_sys::HsaApi::load() {
    ///     Ok(api) => println!("ROCr loaded from {}", api.library_path().display()),
    ///     Err(error) => println!("{error}"),
    /// }
    /// ```
    pub fn load() -> Result<Self, LoadError> {
        Self::load_from(library_to_load(std::env::var_os(LIBRARY_ENV).as_deref()))
    }

    /// Loads the library at `library`, a path or a name for the dynamic
    /// loader to search, and resolves every symbol of the table.
    ///
    /// ```
    /// use hsa_sys::{HsaApi, LoadError};
    /// use std::path::Path;
    ///
    /// let error = HsaApi::load_from("/nonexistent/libhsa-runtime64.so.1").unwrap_err();
    /// assert!(matches!(
    ///     &error,
    ///     LoadError::LibraryMissing { library, .. } if library == Path::new("/nonexistent/libhsa-runtime64.so.1")
    /// ));
    /// ```
    pub fn load_from(library: impl AsRef<Path>) -> Result<Self, LoadError> {
        let library_path = library.as_ref().to_path_buf();
        match open(&library_path) {
            Ok(library) => Self::resolve_all(library, library_path),
            Err(error) => Err(LoadError::LibraryMissing {
                library: library_path,
                reason: error.to_string(),
            }),
        }
    }

    /// The path or name the table was loaded from.
    ///
    /// ```
    /// if let Ok(api) = hsa_sys::HsaApi::load_from(hsa_sys::DEFAULT_LIBRARY) {
    ///     assert_eq!(api.library_path(), std::path::Path::new(hsa_sys::DEFAULT_LIBRARY));
    /// }
    /// ```
    pub fn library_path(&self) -> &Path {
        &self.library_path
    }

    /// ROCr's own description of `status` (`hsa_status_string`), or `None`
    /// for a code ROCr does not know. Works before `hsa_init`.
    ///
    /// ```
    /// use hsa_sys::HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    ///
    /// if let Ok(api) = hsa_sys::HsaApi::load() {
    ///     let text = api.status_string(HSA_STATUS_ERROR_OUT_OF_RESOURCES).unwrap();
    ///     assert!(text.starts_with("HSA_STATUS_ERROR_OUT_OF_RESOURCES"), "{text}");
    ///     assert_eq!(api.status_string(0xdead), None);
    /// }
    /// ```
    pub fn status_string(&self, status: hsa_status_t) -> Option<String> {
        let mut text: *const c_char = core::ptr::null();
        // SAFETY: `text` is a valid place for the one pointer ROCr writes, and
        // hsa_status_string needs no other precondition (not even hsa_init).
        let result = unsafe { self.hsa_status_string(status, &mut text) };
        if result != HSA_STATUS_SUCCESS || text.is_null() {
            return None;
        }
        // SAFETY: on success ROCr stores the address of one of its static,
        // NUL-terminated strings, which live as long as the library.
        let text = unsafe { CStr::from_ptr(text) };
        Some(text.to_string_lossy().into_owned())
    }

    /// `Ok(())` for [`HSA_STATUS_SUCCESS`], otherwise a [`StatusError`] that
    /// carries ROCr's own description of the code as well as its name.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let api = hsa_sys::HsaApi::load()?;
    /// // SAFETY: hsa_init takes no arguments.
    /// api.check_status(unsafe { api.hsa_init() })?;
    /// # Ok(()) }
    /// ```
    pub fn check_status(&self, status: hsa_status_t) -> Result<(), StatusError> {
        check_status(status).map_err(|error| match self.status_string(status) {
            Some(text) => error.with_runtime_text(text),
            None => error,
        })
    }
}

impl fmt::Debug for HsaApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HsaApi")
            .field("library_path", &self.library_path)
            .field("symbols", &Self::SYMBOLS.len())
            .finish_non_exhaustive()
    }
}

// The backend shares one table between threads; ROCr's functions are
// thread-safe, and the table itself is immutable.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<HsaApi>()
};

/// Opens the library, resolving its own dependencies now (`RTLD_NOW`) so that
/// a mismatched ROCm install fails here with the loader's message rather than
/// later inside a call, and never unmapping it (`RTLD_NODELETE`): ROCr keeps
/// threads of its own running from `hsa_init` until `hsa_shut_down`, so
/// dropping the table without shutting down would otherwise unmap code under
/// them and crash the process.
#[cfg(target_os = "linux")]
fn open(path: &Path) -> Result<Library, libloading::Error> {
    use libloading::os::unix::{Library as UnixLibrary, RTLD_LOCAL, RTLD_NOW};
    // glibc and musl <dlfcn.h>; libloading does not export it.
    const RTLD_NODELETE: c_int = 0x1000;
    // SAFETY: dlopen runs the library's initialisers; the file is ROCr or one
    // the caller chose, trusted as a link-time dependency would be.
    unsafe { UnixLibrary::open(Some(path), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) }
        .map(Library::from)
}

/// Opens the library with the platform's defaults (ROCr itself is Linux-only;
/// this keeps the crate building elsewhere).
#[cfg(not(target_os = "linux"))]
fn open(path: &Path) -> Result<Library, libloading::Error> {
    // SAFETY: as for the Linux `open`: loading runs trusted initialisers.
    unsafe { Library::new(path) }
}

/// Looks `symbol` up in `library` as a function pointer of type `F`.
///
/// # Safety
/// `F` must be a function pointer type matching the symbol's C signature.
unsafe fn resolve<F: Copy>(
    library: &Library,
    library_path: &Path,
    symbol: &'static str,
) -> Result<F, LoadError> {
    let missing = || LoadError::SymbolMissing {
        symbol,
        library: library_path.to_path_buf(),
    };
    // Asking for `Option<F>` turns a symbol that resolves to address 0 (a weak,
    // undefined one) into `None` instead of a null function pointer.
    // SAFETY: the caller guarantees `F` is the symbol's function pointer type,
    // and `Option` of a function pointer has the same size, with null as `None`.
    match unsafe { library.get::<Option<F>>(symbol.as_bytes()) } {
        Ok(function) => (*function).ok_or_else(missing),
        Err(_) => Err(missing()),
    }
}
