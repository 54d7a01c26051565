//! The loader against real files: a missing one, libraries that are not ROCr,
//! the environment override, and Debian's ROCr where it is installed.

mod support;

use hsa_sys::*;
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;
use support::{skip, skip_debian_rocr};

/// Where Debian's `libhsa-runtime64-1` puts ROCr.
const DEBIAN_ROCR: &str = "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1";

/// The functions the backend calls: the table must keep offering all of them.
const BACKEND_NEEDS: &[&str] = &[
    "hsa_init",
    "hsa_shut_down",
    "hsa_status_string",
    "hsa_system_get_info",
    "hsa_iterate_agents",
    "hsa_agent_get_info",
    "hsa_amd_agent_iterate_memory_pools",
    "hsa_amd_memory_pool_get_info",
    "hsa_amd_agent_memory_pool_get_info",
    "hsa_amd_memory_pool_allocate",
    "hsa_amd_memory_pool_free",
    "hsa_amd_agents_allow_access",
    "hsa_signal_create",
    "hsa_amd_signal_create",
    "hsa_signal_destroy",
    "hsa_signal_load_scacquire",
    "hsa_signal_load_relaxed",
    "hsa_signal_store_screlease",
    "hsa_signal_store_relaxed",
    "hsa_signal_silent_store_relaxed",
    "hsa_signal_wait_scacquire",
    "hsa_amd_signal_async_handler",
    "hsa_queue_create",
    "hsa_queue_destroy",
    "hsa_queue_load_read_index_scacquire",
    "hsa_queue_load_write_index_relaxed",
    "hsa_queue_add_write_index_scacq_screl",
    "hsa_amd_profiling_set_profiler_enabled",
    "hsa_amd_profiling_get_dispatch_time",
    "hsa_amd_profiling_convert_tick_to_system_domain",
];

#[test]
fn the_table_offers_every_function_the_backend_needs() {
    let missing: Vec<_> = BACKEND_NEEDS
        .iter()
        .filter(|name| !HsaApi::SYMBOLS.contains(name))
        .collect();
    assert!(missing.is_empty(), "missing from the table: {missing:?}");
    let unique: std::collections::BTreeSet<_> = HsaApi::SYMBOLS.iter().collect();
    assert_eq!(
        unique.len(),
        HsaApi::SYMBOLS.len(),
        "a symbol is listed twice"
    );
}

#[test]
fn a_missing_file_is_library_missing_naming_it() {
    let path = Path::new("/nonexistent/sigretire/libhsa-runtime64.so.1");
    let error = HsaApi::load_from(path).unwrap_err();
    let LoadError::LibraryMissing { library, reason } = &error else {
        panic!("expected LibraryMissing, got {error:?}");
    };
    assert_eq!(library, path);
    assert!(!reason.is_empty());

    let message = error.to_string();
    assert!(message.contains(&*path.to_string_lossy()), "{message}");
    assert!(
        message.contains(LIBRARY_ENV),
        "the message should say how to fix it: {message}"
    );
}

#[test]
fn a_library_without_rocr_is_symbol_missing_naming_the_symbol() {
    for library in ["libc.so.6", "libm.so.6"] {
        let error = match HsaApi::load_from(library) {
            Err(error) => error,
            Ok(_) => panic!("{library} loaded as ROCr"),
        };
        let LoadError::SymbolMissing {
            symbol,
            library: path,
        } = &error
        else {
            // Not every system has glibc; only a wrong kind of error is a failure.
            assert!(
                matches!(error, LoadError::LibraryMissing { .. }),
                "{error:?}"
            );
            skip(&format!("{library} is not here"));
            continue;
        };
        assert_eq!(path, Path::new(library));
        // Symbols resolve in table order, so the first one is what is missing.
        assert_eq!(*symbol, HsaApi::SYMBOLS[0]);
        let message = error.to_string();
        assert!(
            message.contains(symbol) && message.contains(library),
            "{message}"
        );
    }
}

#[test]
fn the_env_value_chooses_the_library() {
    assert_eq!(library_to_load(None), Path::new(DEFAULT_LIBRARY));
    assert_eq!(
        library_to_load(Some(OsStr::new(""))),
        Path::new(DEFAULT_LIBRARY)
    );
    assert_eq!(
        library_to_load(Some(OsStr::new("/opt/rocm/lib/libhsa-runtime64.so.1"))),
        Path::new("/opt/rocm/lib/libhsa-runtime64.so.1")
    );
}

/// `HsaApi::load` reads the real environment. Setting a variable in this
/// process would race the other tests, so the test runs itself again, alone,
/// in a child process whose environment names a library that does not exist.
#[test]
fn load_honours_the_env_override() {
    const OVERRIDE: &str = "/nonexistent/sigretire-env-override/libhsa-runtime64.so.1";

    if std::env::var_os(LIBRARY_ENV).is_some_and(|value| value == OVERRIDE) {
        // The child: `load` must have tried the override.
        match HsaApi::load() {
            Err(LoadError::LibraryMissing { library, .. }) => {
                assert_eq!(library, Path::new(OVERRIDE))
            }
            other => panic!("expected LibraryMissing for {OVERRIDE}, got {other:?}"),
        }
        return;
    }

    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "load_honours_the_env_override",
            "--test-threads=1",
        ])
        .env(LIBRARY_ENV, OVERRIDE)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success() && stdout.contains("1 passed"),
        "the child run failed ({}):\n{stdout}\n{}",
        child.status,
        String::from_utf8_lossy(&child.stderr),
    );
}

#[test]
fn debian_rocr_loads_and_hsa_init_answers_promptly() {
    if !Path::new(DEBIAN_ROCR).exists() {
        return skip_debian_rocr(&format!(
            "{DEBIAN_ROCR} not found (install libhsa-runtime64-1)"
        ));
    }
    let api = HsaApi::load_from(DEBIAN_ROCR).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(api.library_path(), Path::new(DEBIAN_ROCR));

    // ROCr describes its codes without hsa_init.
    let text = api
        .status_string(HSA_STATUS_ERROR_OUT_OF_RESOURCES)
        .unwrap();
    assert!(text.contains("HSA_STATUS_ERROR_OUT_OF_RESOURCES"), "{text}");
    assert_eq!(api.status_string(0xdead), None);

    // On a thread, so that a hang fails this test instead of stalling the suite
    // (the thread is left behind; the process exit ends it).
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        // SAFETY: hsa_init takes no arguments.
        let status = unsafe { api.hsa_init() };
        let _ = sender.send((status, api));
    });
    let (status, api) = receiver
        .recv_timeout(Duration::from_secs(30))
        .expect("hsa_init did not return within 30 s");

    if Path::new("/dev/kfd").exists() {
        // A machine with an AMD GPU driver: whatever ROCr answered, it answered.
        if status == HSA_STATUS_SUCCESS {
            // SAFETY: balances the successful hsa_init above.
            let shut_down = unsafe { api.hsa_shut_down() };
            assert_eq!(shut_down, HSA_STATUS_SUCCESS);
        }
        return skip_debian_rocr(&format!(
            "/dev/kfd exists and hsa_init returned {status:#x}; the no-GPU answer went unchecked"
        ));
    }
    let error = api.check_status(status).unwrap_err();
    assert_eq!(error.status(), HSA_STATUS_ERROR_OUT_OF_RESOURCES, "{error}");
    assert_eq!(error.name(), Some("HSA_STATUS_ERROR_OUT_OF_RESOURCES"));
    assert!(
        error
            .runtime_text()
            .is_some_and(|text| text.contains("failed to allocate")),
        "{error}"
    );

    // The failed hsa_init took no reference, so there is nothing to shut down.
    // SAFETY: hsa_shut_down takes no arguments.
    let shut_down = unsafe { api.hsa_shut_down() };
    assert_eq!(shut_down, HSA_STATUS_ERROR_NOT_INITIALIZED);
}

#[test]
fn the_default_library_loads_where_debian_rocr_is_installed() {
    if !Path::new(DEBIAN_ROCR).exists() {
        return skip_debian_rocr(&format!(
            "{DEBIAN_ROCR} not found (install libhsa-runtime64-1)"
        ));
    }
    // By soname, through the dynamic loader's search path.
    let api = HsaApi::load_from(DEFAULT_LIBRARY).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(api.library_path(), Path::new(DEFAULT_LIBRARY));
    assert!(format!("{api:?}").contains(DEFAULT_LIBRARY));
}
