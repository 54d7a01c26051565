//! Checks this crate's picture of ROCr's C ABI against a C compiler reading
//! Debian's ROCr headers.
//!
//! One C probe is generated from the Rust side and run: it prints, for every
//! fact, what C says, and the test compares that with what Rust says.
//! The facts are:
//!
//! - `sizeof`, `_Alignof` and `offsetof` of every struct and field recorded in
//!   `src/layout.rs` ([`hsa_sys::C_LAYOUTS`]);
//! - the size and signedness of every integer type alias;
//! - the value of every constant, and of every status code `status_name` knows;
//! - every function signature of the loader's table
//!   ([`hsa_sys::FUNCTION_SIGNATURES`]) and the callback typedef, translated to
//!   C and tested with `__builtin_types_compatible_p` against the headers'
//!   declarations.
//!
//! `c_layout/c_type.rs` turns Rust types into C type names for the signature
//! check; `c_layout/coverage.rs` fails if a public constant, type alias or
//! `repr(C)` struct appears in `src/` without being compared here (or listed as
//! Rust-only).
//!
//! Where the headers or a C compiler are missing the test prints `SKIPPED:` to
//! stderr and passes; CI installs both (`libhsa-runtime-dev`).

// A test crate's root looks for modules beside it, not in `c_layout/`.
#[path = "c_layout/c_type.rs"]
mod c_type;
#[path = "c_layout/coverage.rs"]
mod coverage;
mod support;

use c_type::{c_function_pointer, c_type, known_c_types};
use hsa_sys::*;
use std::ffi::{OsString, c_void};
use std::fmt::Write as _;
use std::mem::size_of;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::skip_debian_rocr;

const HEADER_DIR: &str = "/usr/include/hsa";

/// Headers the probe includes. `amd_hsa_signal.h` and `amd_hsa_queue.h` need
/// no special defines: they include `hsa.h` themselves, and their anonymous
/// unions only need C11.
const HEADERS: &[&str] = &[
    "hsa.h",
    "hsa_ext_amd.h",
    "amd_hsa_queue.h",
    "amd_hsa_signal.h",
];

/// Something C and Rust each state as a number.
struct Fact {
    /// What is compared, for the report (for most facts, the C expression).
    label: String,
    /// The C expression the probe prints.
    c_expr: String,
    /// The value the Rust side holds.
    rust: i128,
    /// Extra lines for the report when the fact differs.
    detail: Option<String>,
}

impl Fact {
    fn new(c_expr: impl Into<String>, rust: impl Into<i128>) -> Self {
        let c_expr = c_expr.into();
        Self {
            label: c_expr.clone(),
            c_expr,
            rust: rust.into(),
            detail: None,
        }
    }
}

// ---------------------------------------------------------------------------
// What Rust says.

/// Integer type aliases: (name, size, signed).
macro_rules! integer_aliases {
    ($($alias:ident),* $(,)?) => {
        &[$((stringify!($alias), size_of::<$alias>(), <$alias>::MIN != 0)),*]
    };
}

const INTEGER_ALIASES: &[(&str, usize, bool)] = integer_aliases![
    hsa_status_t,
    hsa_signal_value_t,
    hsa_signal_condition_t,
    hsa_signal_condition32_t,
    hsa_wait_state_t,
    hsa_queue_type_t,
    hsa_queue_type32_t,
    hsa_queue_feature_t,
    hsa_device_type_t,
    hsa_system_info_t,
    hsa_agent_info_t,
    hsa_agent_feature_t,
    hsa_amd_agent_info_t,
    hsa_amd_memory_pool_info_t,
    hsa_amd_agent_memory_pool_info_t,
    hsa_amd_memory_pool_access_t,
    hsa_amd_segment_t,
    hsa_amd_memory_pool_global_flag_t,
    hsa_amd_packet_type8_t,
    amd_signal_kind64_t,
];

/// Aliases whose Rust width differs from C's on purpose: they only ever live
/// in packet header bits, never in a call or a struct field (see their docs).
const NARROWED_ALIASES: &[&str] = &["hsa_packet_type_t", "hsa_fence_scope_t"];

/// Function pointer typedefs: the Rust alias must be exactly the written type
/// (checked by the compiler here), whose C translation must match the C typedef.
macro_rules! function_aliases {
    ($($alias:ident = $ty:ty),* $(,)?) => {{
        $(const _: fn($alias) -> $ty = |value| value;)*
        &[$((stringify!($alias), stringify!($ty))),*]
    }};
}

const FUNCTION_ALIASES: &[(&str, &str)] = function_aliases![
    hsa_amd_signal_handler = Option<unsafe extern "C" fn(value: hsa_signal_value_t, arg: *mut c_void) -> bool>,
];

/// Constants: (C name, Rust value). A `RUST_NAME as C_NAME` entry compares a
/// constant whose Rust name has no C twin.
macro_rules! constants {
    ($($name:ident $(as $c_name:ident)?),* $(,)?) => {
        &[$((constants!(@c $name $($c_name)?), stringify!($name), $name as i128)),*]
    };
    (@c $name:ident) => { stringify!($name) };
    (@c $name:ident $c_name:ident) => { stringify!($c_name) };
}

/// (C name, Rust name, value). Status codes are not listed: every code
/// `status_name` knows is compared.
const CONSTANTS: &[(&str, &str, i128)] = constants![
    // Packets and headers (hsa.h, hsa_ext_amd.h).
    HSA_PACKET_TYPE_VENDOR_SPECIFIC,
    HSA_PACKET_TYPE_INVALID,
    HSA_PACKET_TYPE_KERNEL_DISPATCH,
    HSA_PACKET_TYPE_BARRIER_AND,
    HSA_PACKET_TYPE_AGENT_DISPATCH,
    HSA_PACKET_TYPE_BARRIER_OR,
    HSA_AMD_PACKET_TYPE_BARRIER_VALUE,
    HSA_FENCE_SCOPE_NONE,
    HSA_FENCE_SCOPE_AGENT,
    HSA_FENCE_SCOPE_SYSTEM,
    HSA_PACKET_HEADER_TYPE,
    HSA_PACKET_HEADER_BARRIER,
    HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE,
    HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE,
    HSA_PACKET_HEADER_WIDTH_TYPE,
    HSA_PACKET_HEADER_WIDTH_BARRIER,
    HSA_PACKET_HEADER_WIDTH_SCACQUIRE_FENCE_SCOPE,
    HSA_PACKET_HEADER_WIDTH_SCRELEASE_FENCE_SCOPE,
    HSA_PACKET_HEADER_WIDTH_FENCE_SCOPE as HSA_PACKET_HEADER_WIDTH_SCACQUIRE_FENCE_SCOPE,
    HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS,
    HSA_KERNEL_DISPATCH_PACKET_SETUP_WIDTH_DIMENSIONS,
    // Signals (hsa.h, hsa_ext_amd.h, amd_hsa_signal.h).
    HSA_SIGNAL_CONDITION_EQ,
    HSA_SIGNAL_CONDITION_NE,
    HSA_SIGNAL_CONDITION_LT,
    HSA_SIGNAL_CONDITION_GTE,
    HSA_WAIT_STATE_BLOCKED,
    HSA_WAIT_STATE_ACTIVE,
    HSA_AMD_SIGNAL_AMD_GPU_ONLY,
    HSA_AMD_SIGNAL_IPC,
    AMD_SIGNAL_KIND_INVALID,
    AMD_SIGNAL_KIND_USER,
    AMD_SIGNAL_KIND_DOORBELL,
    AMD_SIGNAL_KIND_LEGACY_DOORBELL,
    // Queues (hsa.h).
    HSA_QUEUE_TYPE_MULTI,
    HSA_QUEUE_TYPE_SINGLE,
    HSA_QUEUE_TYPE_COOPERATIVE,
    HSA_QUEUE_FEATURE_KERNEL_DISPATCH,
    HSA_QUEUE_FEATURE_AGENT_DISPATCH,
    // System and agent attributes (hsa.h, hsa_ext_amd.h).
    HSA_SYSTEM_INFO_TIMESTAMP,
    HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY,
    HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT,
    HSA_DEVICE_TYPE_CPU,
    HSA_DEVICE_TYPE_GPU,
    HSA_AGENT_INFO_NAME,
    HSA_AGENT_INFO_FEATURE,
    HSA_AGENT_INFO_QUEUE_MIN_SIZE,
    HSA_AGENT_INFO_QUEUE_MAX_SIZE,
    HSA_AGENT_INFO_QUEUE_TYPE,
    HSA_AGENT_INFO_DEVICE,
    HSA_AGENT_FEATURE_KERNEL_DISPATCH,
    HSA_AGENT_FEATURE_AGENT_DISPATCH,
    HSA_AMD_AGENT_INFO_BDFID,
    HSA_AMD_AGENT_INFO_PRODUCT_NAME,
    HSA_AMD_AGENT_INFO_HDP_FLUSH,
    HSA_AMD_AGENT_INFO_DOMAIN,
    HSA_AMD_AGENT_INFO_UUID,
    // Memory pools (hsa_ext_amd.h).
    HSA_AMD_MEMORY_POOL_INFO_SEGMENT,
    HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS,
    HSA_AMD_MEMORY_POOL_INFO_SIZE,
    HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED,
    HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE,
    HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT,
    HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL,
    HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE,
    HSA_AMD_SEGMENT_GLOBAL,
    HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT,
    HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED,
    HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED,
    HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS,
    HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED,
    HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT,
    HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT,
];

/// Public constants with no C counterpart.
const RUST_ONLY_CONSTANTS: &[&str] = &[
    "AQL_PACKET_BYTES",
    "C_LAYOUTS",
    "DEFAULT_LIBRARY",
    "FUNCTION_SIGNATURES",
    "LIBRARY_ENV",
    // The length of `dep_signal` (an array in C, no constant); the
    // encoder's slots have this type, so it cannot differ.
    "MAX_DEPENDENCIES",
    "NULL",
    "SYMBOLS",
];

/// `repr(C)` structs with no C counterpart: Rust views of a packet slot.
const RUST_ONLY_STRUCTS: &[&str] = &["AqlSlot", "PacketWords"];

fn all_facts() -> Vec<Fact> {
    let mut facts = Vec::new();

    for layout in C_LAYOUTS {
        let ty = layout.name;
        facts.push(Fact::new(format!("sizeof({ty})"), layout.size as i128));
        facts.push(Fact::new(format!("_Alignof({ty})"), layout.align as i128));
        for &(field, offset) in layout.fields {
            // `type_` and friends: Rust keywords renamed with a trailing `_`.
            let c_field = field.strip_suffix('_').unwrap_or(field);
            facts.push(Fact::new(
                format!("offsetof({ty}, {c_field})"),
                offset as i128,
            ));
        }
    }

    for &(alias, size, signed) in INTEGER_ALIASES {
        facts.push(Fact::new(format!("sizeof({alias})"), size as i128));
        let mut fact = Fact::new(format!("(({alias})-1 < ({alias})0)"), i128::from(signed));
        fact.label = format!("{alias} is signed");
        facts.push(fact);
    }

    for (c_name, rust_name, value) in CONSTANTS {
        let mut fact = Fact::new(*c_name, *value);
        if c_name != rust_name {
            fact.label = format!("{c_name} (Rust: {rust_name})");
        }
        facts.push(fact);
    }
    for status in 0..=0x2000 {
        if let Some(name) = status_name(status) {
            facts.push(Fact::new(name, status));
        }
    }

    let known_types = known_c_types();
    for signature in FUNCTION_SIGNATURES {
        let symbol = signature.symbol;
        let rust = format!(
            "fn({}) -> {}",
            signature.parameters.join(", "),
            signature.returns
        );
        let c = c_function_pointer(signature.parameters, signature.returns, &known_types)
            .unwrap_or_else(|error| {
                panic!("cannot translate the signature of {symbol} ({rust}) to C: {error}")
            });
        facts.push(Fact {
            label: format!("signature of {symbol}"),
            c_expr: format!("__builtin_types_compatible_p(__typeof__(&{symbol}), {c})"),
            rust: 1,
            detail: Some(format!("Rust: {rust}\nas C: {c}")),
        });
    }
    for &(alias, rust) in FUNCTION_ALIASES {
        let c = c_type(rust, &known_types)
            .unwrap_or_else(|error| panic!("cannot translate {alias} ({rust}) to C: {error}"));
        facts.push(Fact {
            label: format!("typedef {alias}"),
            c_expr: format!("__builtin_types_compatible_p({alias}, {c})"),
            rust: 1,
            detail: Some(format!("Rust: {rust}\nas C: {c}")),
        });
    }

    // Canaries: the signature check must be able to say "no", or every
    // signature row above proves nothing.
    for (label, c_expr) in [
        (
            "canary: hsa_init returning int",
            "__builtin_types_compatible_p(__typeof__(&hsa_init), int (*)(void))",
        ),
        (
            "canary: hsa_signal_destroy taking uint64_t",
            "__builtin_types_compatible_p(__typeof__(&hsa_signal_destroy), hsa_status_t (*)(uint64_t))",
        ),
        (
            "canary: hsa_amd_agents_allow_access with a mutable flags pointer",
            "__builtin_types_compatible_p(__typeof__(&hsa_amd_agents_allow_access), \
             hsa_status_t (*)(uint32_t, const hsa_agent_t*, uint32_t*, const void*))",
        ),
    ] {
        facts.push(Fact {
            label: label.into(),
            c_expr: c_expr.into(),
            rust: 0,
            detail: None,
        });
    }

    facts
}

// ---------------------------------------------------------------------------
// What C says.

fn probe_source(facts: &[Fact]) -> String {
    let mut source = String::from(
        "/* Generated by hsa-sys/tests/c_layout.rs: one line per fact, `index<TAB>value`. */\n\
         #include <stddef.h>\n#include <stdint.h>\n#include <stdio.h>\n",
    );
    for header in HEADERS {
        writeln!(source, "#include \"{header}\"").unwrap();
    }
    source.push_str("\nint main(void) {\n");
    for (index, fact) in facts.iter().enumerate() {
        writeln!(
            source,
            "    printf(\"{index}\\t%lld\\n\", (long long)({}));",
            fact.c_expr
        )
        .unwrap();
    }
    source.push_str("    return 0;\n}\n");
    source
}

/// The C compiler to use (`$CC`, else `cc`), or why there is none.
fn c_compiler() -> Result<OsString, String> {
    let compiler = std::env::var_os("CC")
        .filter(|cc| !cc.is_empty())
        .unwrap_or_else(|| "cc".into());
    match Command::new(&compiler).arg("--version").output() {
        Ok(output) if output.status.success() => Ok(compiler),
        Ok(output) => Err(format!(
            "`{} --version` failed: {}",
            compiler.to_string_lossy(),
            output.status
        )),
        Err(error) => Err(format!(
            "no C compiler `{}`: {error}",
            compiler.to_string_lossy()
        )),
    }
}

/// Compiles and runs the probe in `dir`, returning its value for each fact.
fn run_probe(compiler: &OsString, dir: &Path, facts: &[Fact]) -> Vec<Option<i128>> {
    std::fs::create_dir_all(dir).unwrap();
    let source = dir.join("probe.c");
    let binary = dir.join("probe");
    std::fs::write(&source, probe_source(facts)).unwrap();

    let compiled = Command::new(compiler)
        .args(["-std=gnu11", "-I", HEADER_DIR, "-o"])
        .arg(&binary)
        .arg(&source)
        .output()
        .unwrap();
    assert!(
        compiled.status.success(),
        "the C probe {} does not compile against {HEADER_DIR} (a Rust name with no C twin?):\n{}",
        source.display(),
        String::from_utf8_lossy(&compiled.stderr),
    );

    let ran = Command::new(&binary).output().unwrap();
    assert!(
        ran.status.success(),
        "the C probe {} failed: {}",
        binary.display(),
        ran.status
    );

    let mut values = vec![None; facts.len()];
    for line in String::from_utf8(ran.stdout).unwrap().lines() {
        let (index, value) = line
            .split_once('\t')
            .expect("probe output is `index<TAB>value`");
        values[index.parse::<usize>().unwrap()] = Some(value.parse().unwrap());
    }
    values
}

fn show(value: i128) -> String {
    if (0..10).contains(&value) {
        value.to_string()
    } else {
        format!("{value} ({value:#x})")
    }
}

// ---------------------------------------------------------------------------
// The tests.

#[test]
fn rust_abi_matches_debian_rocr_headers() {
    if !Path::new(HEADER_DIR).join("hsa.h").exists() {
        return skip_debian_rocr(&format!(
            "{HEADER_DIR}/hsa.h not found (install libhsa-runtime-dev)"
        ));
    }
    let compiler = match c_compiler() {
        Ok(compiler) => compiler,
        Err(reason) => return skip_debian_rocr(&reason),
    };

    let facts = all_facts();
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("c_layout-{}", std::process::id()));
    let c_values = run_probe(&compiler, &dir, &facts);

    let mut report = String::new();
    let mut differences = 0;
    for (fact, c_value) in facts.iter().zip(&c_values) {
        if *c_value == Some(fact.rust) {
            continue;
        }
        differences += 1;
        let c_value = c_value.map_or("(no output)".to_string(), show);
        writeln!(
            report,
            "  {}: C says {c_value}, Rust says {}",
            fact.label,
            show(fact.rust)
        )
        .unwrap();
        for line in fact.detail.iter().flat_map(|detail| detail.lines()) {
            writeln!(report, "      {line}").unwrap();
        }
    }
    assert!(
        differences == 0,
        "C ({HEADER_DIR}) and Rust disagree on {differences} of {} facts \
         (probe kept in {}):\n{report}",
        facts.len(),
        dir.display(),
    );
    let _ = std::fs::remove_dir_all(&dir);
}
