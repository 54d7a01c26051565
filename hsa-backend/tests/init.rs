//! Initialisation: every way it can fail is a typed error with an actionable
//! message, never a panic or a hang; against Debian's real ROCr on a machine
//! without a GPU, `hsa_init`'s own answer comes back promptly.

mod support;

use hsa_sys::{HSA_STATUS_ERROR_OUT_OF_RESOURCES, HsaApi, LoadError};
use sigretire_hsa::{Error, InitOptions, Runtime};
use sigretire_rocr_standin::{Config as Machine, Standin};
use std::path::Path;
use std::time::{Duration, Instant};
use support::{DEBIAN_ROCR, skip, skip_debian_rocr, within};

#[test]
fn a_missing_library_is_a_load_error_naming_it() {
    let path = "/nonexistent/sigretire/libhsa-runtime64.so.1";
    let error = Runtime::load_from(path).unwrap_err();
    let Error::Load(LoadError::LibraryMissing { library, .. }) = &error else {
        panic!("expected LibraryMissing, got {error:?}");
    };
    assert_eq!(library, Path::new(path));
    let message = error.to_string();
    assert!(
        message.contains(path) && message.contains("SIGRETIRE_HSA_LIBRARY"),
        "{message}"
    );
}

#[test]
fn a_library_that_is_not_rocr_is_a_missing_symbol() {
    let error = match Runtime::load_from("libc.so.6") {
        Err(error) => error,
        Ok(_) => panic!("libc initialised as ROCr"),
    };
    match &error {
        Error::Load(LoadError::SymbolMissing { symbol, .. }) => {
            assert_eq!(*symbol, "hsa_init");
            assert!(error.to_string().contains("hsa_init"), "{error}");
        }
        Error::Load(LoadError::LibraryMissing { .. }) => skip("no libc.so.6 here"),
        other => panic!("expected a load error, got {other:?}"),
    }
}

#[test]
fn a_failed_hsa_init_carries_rocrs_status_and_text() {
    let standin = Standin::new(Machine {
        init_status: HSA_STATUS_ERROR_OUT_OF_RESOURCES,
        ..Machine::default()
    })
    .unwrap();
    let error = Runtime::load_from(standin.library_path()).unwrap_err();
    let Error::InitFailed(status) = &error else {
        panic!("expected InitFailed, got {error:?}");
    };
    assert_eq!(status.status(), HSA_STATUS_ERROR_OUT_OF_RESOURCES);
    assert!(
        status
            .runtime_text()
            .is_some_and(|t| t.contains("failed to allocate"))
    );
    let message = error.to_string();
    assert!(
        message.contains("HSA_STATUS_ERROR_OUT_OF_RESOURCES") && message.contains("/dev/kfd"),
        "{message}"
    );
    // ROCr's text ends with a period; the message goes on after it once.
    assert!(
        message.contains("OS-specific events. Check that"),
        "{message}"
    );
    assert_eq!(standin.census().init_count, 0);
}

#[test]
fn a_machine_without_a_gpu_is_no_gpu_and_rocr_is_shut_down_again() {
    let standin = Standin::new(Machine {
        gpus: 0,
        ..Machine::default()
    })
    .unwrap();
    let error = Runtime::load_from(standin.library_path()).unwrap_err();
    assert_eq!(error, Error::NoGpu);
    assert!(
        error.to_string().contains("ROCR_VISIBLE_DEVICES"),
        "{error}"
    );
    assert_eq!(
        standin.census().init_count,
        0,
        "the successful hsa_init was balanced"
    );
    standin.assert_no_violations();
}

#[test]
fn a_hung_hsa_init_times_out_and_is_balanced_when_it_returns() {
    let standin = Standin::new(Machine {
        init_delay_ms: 500,
        ..Machine::default()
    })
    .unwrap();
    let api = HsaApi::load_from(standin.library_path()).unwrap();
    let started = Instant::now();
    let error = Runtime::init_with(
        api,
        InitOptions {
            timeout: Duration::from_millis(50),
        },
    )
    .unwrap_err();
    assert_eq!(error, Error::InitTimedOut(Duration::from_millis(50)));
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
    assert!(error.to_string().contains("dmesg"), "{error}");
    // When the call finally returns, the abandoned success is shut down again.
    let deadline = Instant::now() + Duration::from_secs(10);
    while standin.calls("hsa_shut_down") == 0 {
        assert!(
            Instant::now() < deadline,
            "the late hsa_init was never balanced"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(standin.census().init_count, 0);
}

#[test]
fn a_gpu_index_out_of_range_is_no_such_gpu() {
    let standin = Standin::new(Machine {
        gpus: 2,
        ..Machine::default()
    })
    .unwrap();
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    assert_eq!(runtime.gpu_agents().len(), 2);
    assert!(runtime.device(1).is_ok());
    assert_eq!(
        runtime.device(2).unwrap_err(),
        Error::NoSuchGpu { index: 2, count: 2 }
    );
}

#[test]
fn dropping_the_runtime_shuts_rocr_down() {
    let standin = Standin::new(Machine::default()).unwrap();
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    let device = runtime.device(0).unwrap();
    assert_eq!(standin.census().init_count, 1);
    drop(runtime);
    assert_eq!(
        standin.census().init_count,
        1,
        "the device still holds the runtime"
    );
    drop(device);
    assert_eq!(standin.census().init_count, 0);
    assert_eq!(standin.calls("hsa_shut_down"), 1);
    standin.assert_no_violations();
}

/// The acceptance test: Debian's ROCr 5.2.3 loads, and the backend's
/// initialisation fails, on a machine without an AMD GPU, with a typed error
/// naming `HSA_STATUS_ERROR_OUT_OF_RESOURCES`, promptly. A watchdog thread
/// turns a hang into a failure. Without the library (or with a GPU driver)
/// it skips, unless `REQUIRE_DEBIAN_ROCR` is set.
#[test]
fn debian_rocr_loads_and_init_fails_with_out_of_resources_without_a_gpu() {
    if !Path::new(DEBIAN_ROCR).exists() {
        return skip_debian_rocr(&format!(
            "{DEBIAN_ROCR} not found (install libhsa-runtime64-1)"
        ));
    }
    let started = Instant::now();
    let outcome = within(
        Duration::from_secs(60),
        "Runtime::load_from(Debian's ROCr)",
        || Runtime::load_from(DEBIAN_ROCR).map(|runtime| runtime.gpu_agents().len()),
    );
    let elapsed = started.elapsed();
    if Path::new("/dev/kfd").exists() {
        return skip_debian_rocr(&format!(
            "/dev/kfd exists: ROCr answered {outcome:?}; the no-GPU answer went unchecked"
        ));
    }
    let error = outcome.expect_err("no GPU here, yet ROCr initialised");
    let Error::InitFailed(status) = &error else {
        panic!("expected InitFailed, got {error:?}");
    };
    assert_eq!(
        status.status(),
        HSA_STATUS_ERROR_OUT_OF_RESOURCES,
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains("HSA_STATUS_ERROR_OUT_OF_RESOURCES"),
        "{error}"
    );
    assert!(elapsed < Duration::from_secs(30), "took {elapsed:?}");
}

/// `Runtime::load` goes through `SIGRETIRE_HSA_LIBRARY`; the test runs itself
/// again in a child process whose environment names a stand-in copy.
#[test]
fn load_uses_the_library_the_environment_names() {
    const MARK: &str = "HSA_BACKEND_TEST_CHILD";
    if std::env::var_os(MARK).is_some() {
        let runtime = Runtime::load().expect("the stand-in named by SIGRETIRE_HSA_LIBRARY");
        assert_eq!(
            runtime.api().library_path(),
            Path::new(&std::env::var_os(hsa_sys::LIBRARY_ENV).unwrap())
        );
        return;
    }
    let standin = Standin::new(Machine::default()).unwrap();
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "load_uses_the_library_the_environment_names",
            "--test-threads=1",
        ])
        .env(MARK, "1")
        .env(hsa_sys::LIBRARY_ENV, standin.library_path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success() && stdout.contains("1 passed"),
        "the child failed ({}):\n{stdout}\n{}",
        child.status,
        String::from_utf8_lossy(&child.stderr)
    );
}
