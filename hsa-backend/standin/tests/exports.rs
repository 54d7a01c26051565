//! The stand-in exports every function of `hsa_sys::HsaApi`, with the same C
//! signature, and the real loading code accepts it.

use sigretire_rocr_standin::{Config, EXPORTS, Standin};

/// Token text without whitespace, so `*mut c_void` and `* mut c_void` agree.
fn squash(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

#[test]
fn every_function_of_the_table_is_exported_with_its_signature() {
    for expected in hsa_sys::FUNCTION_SIGNATURES {
        let export = EXPORTS
            .iter()
            .find(|e| e.symbol == expected.symbol)
            .unwrap_or_else(|| panic!("the stand-in does not export {}", expected.symbol));
        let params = |list: &[&str]| list.iter().map(|p| squash(p)).collect::<Vec<_>>();
        assert_eq!(
            params(export.parameters),
            params(expected.parameters),
            "parameters of {}",
            expected.symbol
        );
        assert_eq!(
            squash(export.returns),
            squash(expected.returns),
            "return type of {}",
            expected.symbol
        );
    }
    assert_eq!(
        EXPORTS.len(),
        hsa_sys::FUNCTION_SIGNATURES.len(),
        "no extra exports"
    );
}

#[test]
fn the_real_loader_resolves_every_symbol_from_the_library() {
    let standin = Standin::new(Config::default()).unwrap();
    let api = hsa_sys::HsaApi::load_from(standin.library_path()).unwrap();
    assert_eq!(api.library_path(), standin.library_path());
    let text = api
        .status_string(hsa_sys::HSA_STATUS_ERROR_OUT_OF_RESOURCES)
        .unwrap();
    assert!(
        text.starts_with("HSA_STATUS_ERROR_OUT_OF_RESOURCES: "),
        "{text}"
    );
    assert!(text.contains("failed to allocate"), "{text}");
    assert_eq!(standin.calls("hsa_status_string"), 1);
}

#[test]
fn each_standin_is_a_machine_of_its_own() {
    let a = Standin::new(Config::default()).unwrap();
    let b = Standin::new(Config::default()).unwrap();
    let api_a = hsa_sys::HsaApi::load_from(a.library_path()).unwrap();
    // SAFETY: no arguments.
    assert_eq!(unsafe { api_a.hsa_init() }, hsa_sys::HSA_STATUS_SUCCESS);
    assert_eq!(a.census().init_count, 1);
    assert_eq!(b.census().init_count, 0, "b's runtime is untouched");
    // SAFETY: balances the init.
    let first = unsafe { api_a.hsa_shut_down() };
    assert_eq!(first, hsa_sys::HSA_STATUS_SUCCESS);
    // SAFETY: no arguments; ROCr answers that nothing is initialised.
    let second = unsafe { api_a.hsa_shut_down() };
    assert_eq!(second, hsa_sys::HSA_STATUS_ERROR_NOT_INITIALIZED);
    a.assert_no_violations();
}

#[test]
fn a_configured_init_failure_is_returned_by_hsa_init() {
    let standin = Standin::new(Config {
        init_status: hsa_sys::HSA_STATUS_ERROR_OUT_OF_RESOURCES,
        ..Config::default()
    })
    .unwrap();
    let api = hsa_sys::HsaApi::load_from(standin.library_path()).unwrap();
    // SAFETY: no arguments.
    let status = unsafe { api.hsa_init() };
    assert_eq!(status, hsa_sys::HSA_STATUS_ERROR_OUT_OF_RESOURCES);
    assert_eq!(standin.census().init_count, 0);
}
