//! The C test programs (`tests/c/sigretire_test.c`, the tracker's, and
//! `tests/c/streams_test.c`, the streams' and events'), compiled with the
//! system's C compiler against `include/sigretire.h` and the libraries
//! cargo built for this test (the cdylib and the staticlib, beside the test
//! executable), then run: they must pass linked either way, and the
//! tracker's must fail with a planted wrong answer. The streams example
//! (`examples/streams.c`) must run to success. The header must also compile
//! as C++.
//!
//! Without a C (or C++) compiler the tests say so and skip, unless `CI` or
//! `SIGRETIRE_REQUIRE_CC` is set: then a missing compiler is a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where cargo put `libsigretire_capi.{so,a}` for this build: the test
/// executable's directory (`<target>/<profile>/deps`), or the profile
/// directory above it. Follows CARGO_TARGET_DIR by construction.
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows its executable");
    let deps = exe.parent().expect("the executable is in a directory");
    for dir in [deps, deps.parent().unwrap_or(deps)] {
        if dir.join(shared_library_name()).is_file() {
            return dir.to_path_buf();
        }
    }
    panic!(
        "{} is not beside the test executable ({}) nor in the directory above: cargo builds the \
         cdylib for integration tests, so this is unexpected",
        shared_library_name(),
        deps.display()
    );
}

/// The shared library's SONAME (`libsigretire_capi.so.<ABI>`), which a
/// program linked against it asks the loader for: cargo writes the library
/// under its link name only, so the SONAME is made a link to it, beside it,
/// as an installation does (`examples/install.rs`).
fn link_soname(libs: &Path) {
    if !cfg!(target_os = "linux") {
        return;
    }
    let soname = libs.join(format!(
        "libsigretire_capi.so.{}",
        sigretire_capi::SIGRETIRE_ABI_VERSION
    ));
    if soname.exists() {
        return;
    }
    #[cfg(unix)]
    match std::os::unix::fs::symlink(shared_library_name(), &soname) {
        // Another test of this run made it meanwhile.
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        outcome => outcome.unwrap_or_else(|e| panic!("cannot link {}: {e}", soname.display())),
    }
}

fn shared_library_name() -> &'static str {
    if cfg!(target_os = "macos") {
        "libsigretire_capi.dylib"
    } else {
        "libsigretire_capi.so"
    }
}

fn required() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
        || std::env::var_os("SIGRETIRE_REQUIRE_CC").is_some_and(|v| !v.is_empty())
}

/// The compiler `$var` names, else `default`, if it runs; `None` (after
/// saying why) if it does not and no CI asks for it.
fn compiler(var: &str, default: &str) -> Option<String> {
    let cc = std::env::var(var)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_owned());
    match Command::new(&cc).arg("--version").output() {
        Ok(output) if output.status.success() => Some(cc),
        outcome => {
            let why = match outcome {
                Ok(output) => format!("`{cc} --version` exited with {}", output.status),
                Err(error) => format!("`{cc}` cannot be run: {error}"),
            };
            if required() {
                panic!("{why}; CI needs it (install gcc and g++)");
            }
            eprintln!("skipped: {why} (set {var} to a compiler; CI installs one)");
            None
        }
    }
}

/// A command running the C program `exe`, which finds the shared library
/// through the run path it was linked with: cargo's `LD_LIBRARY_PATH` (the
/// profile folder first, where another build of the library may lie, of
/// other features or older) is taken out of its environment.
fn c_program(exe: &Path) -> Command {
    let mut command = Command::new(exe);
    command.env_remove("LD_LIBRARY_PATH");
    command
}

fn run(command: &mut Command) -> Output {
    command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"))
}

fn text(output: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The tracker's C test.
const TRACKER_TEST: &str = "tests/c/sigretire_test.c";
/// The streams' and events' C test.
const STREAMS_TEST: &str = "tests/c/streams_test.c";

/// Compiles `source` (relative to the crate) linked against the shared
/// (`static_link` false) or static library, with `defines`, into `name`;
/// returns the executable.
fn build(cc: &str, source: &str, name: &str, static_link: bool, defines: &[&str]) -> PathBuf {
    let dir = crate_dir();
    let libs = library_dir();
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let mut command = Command::new(cc);
    command
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-pthread",
        ])
        .args(defines)
        .arg("-I")
        .arg(dir.join("include"))
        .arg(dir.join(source))
        .arg("-o")
        .arg(&exe);
    if static_link {
        // The static library needs the system libraries Rust's std uses.
        command
            .arg(libs.join("libsigretire_capi.a"))
            .args(["-lpthread", "-ldl", "-lm"]);
    } else {
        link_soname(&libs);
        command
            .arg(libs.join(shared_library_name()))
            .arg(format!("-Wl,-rpath,{}", libs.display()));
    }
    let output = run(&mut command);
    assert!(
        output.status.success(),
        "compiling {source} failed: {command:?}\n{}",
        text(&output)
    );
    exe
}

fn passes(source: &str, static_link: bool) {
    let Some(cc) = compiler("CC", "cc") else {
        return;
    };
    let stem = Path::new(source).file_stem().unwrap().to_string_lossy();
    let name = if static_link {
        format!("{stem}_static")
    } else {
        format!("{stem}_shared")
    };
    let exe = build(&cc, source, &name, static_link, &[]);
    let output = run(&mut c_program(&exe));
    assert!(
        output.status.success(),
        "the C test found wrong answers:\n{}",
        text(&output)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("checks right"), "{}", text(&output));
    println!("{}", stdout.trim_end());
}

#[test]
fn the_c_program_passes_against_the_shared_library() {
    passes(TRACKER_TEST, false);
}

#[test]
fn the_c_program_passes_against_the_static_library() {
    passes(TRACKER_TEST, true);
}

#[test]
fn the_c_streams_test_passes_against_the_shared_library() {
    passes(STREAMS_TEST, false);
}

#[test]
fn the_c_streams_test_passes_against_the_static_library() {
    passes(STREAMS_TEST, true);
}

#[test]
fn the_c_streams_example_runs() {
    let Some(cc) = compiler("CC", "cc") else {
        return;
    };
    let exe = build(&cc, "examples/streams.c", "streams_example", false, &[]);
    let output = run(&mut c_program(&exe));
    assert!(
        output.status.success(),
        "the streams example failed:\n{}",
        text(&output)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("streams example: ok"), "{}", text(&output));
}

#[test]
fn the_c_program_fails_on_a_planted_wrong_answer() {
    let Some(cc) = compiler("CC", "cc") else {
        return;
    };
    let exe = build(
        &cc,
        TRACKER_TEST,
        "sigretire_test_planted",
        false,
        &["-DPLANT_WRONG_ANSWER"],
    );
    let output = run(&mut c_program(&exe));
    assert_eq!(
        output.status.code(),
        Some(1),
        "the planted wrong answer (two loads expected for the 64 fences) must fail the C test:\n{}",
        text(&output)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("WRONG: stats.device.loads == EXPECTED_FENCE_LOADS"),
        "it must fail at the planted check, not elsewhere:\n{}",
        text(&output)
    );
    assert!(
        stderr.matches("WRONG: ").count() == 2,
        "only the two planted checks (both the 64 fences' load count) may be wrong:\n{}",
        text(&output)
    );
    println!(
        "planted wrong answer caught, exit 1:\n{}",
        stderr.trim_end()
    );
}

#[test]
fn the_header_compiles_as_cpp() {
    let Some(cxx) = compiler("CXX", "c++") else {
        return;
    };
    let dir = crate_dir();
    let mut command = Command::new(&cxx);
    command
        .args([
            "-std=c++11",
            "-fsyntax-only",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
        ])
        .arg("-I")
        .arg(dir.join("include"))
        .arg(dir.join("tests/c/header_check.cpp"));
    let output = run(&mut command);
    assert!(
        output.status.success(),
        "the header does not compile as C++: {command:?}\n{}",
        text(&output)
    );
}

/// The C programs of `capi/README.md` (its fenced `c` blocks that have a
/// `main`) compile against the header and run to success, so the
/// documented example cannot rot.
#[test]
fn the_readme_c_example_compiles_and_runs() {
    let Some(cc) = compiler("CC", "cc") else {
        return;
    };
    let readme = std::fs::read_to_string(crate_dir().join("README.md")).unwrap();
    let mut programs = Vec::new();
    let mut block: Option<String> = None;
    for line in readme.lines() {
        match (&mut block, line.trim_start()) {
            (None, "```c") => block = Some(String::new()),
            (Some(code), "```") => {
                if code.contains("int main") {
                    programs.push(std::mem::take(code));
                }
                block = None;
            }
            (Some(code), _) => {
                code.push_str(line);
                code.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(!programs.is_empty(), "capi/README.md has a C program");
    let libs = library_dir();
    link_soname(&libs);
    for (i, program) in programs.iter().enumerate() {
        let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let source = tmp.join(format!("readme_example_{i}.c"));
        let exe = tmp.join(format!("readme_example_{i}"));
        std::fs::write(&source, program).unwrap();
        let mut command = Command::new(&cc);
        command
            .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
            .arg("-I")
            .arg(crate_dir().join("include"))
            .arg(&source)
            .arg(libs.join(shared_library_name()))
            .arg(format!("-Wl,-rpath,{}", libs.display()))
            .arg("-o")
            .arg(&exe);
        let output = run(&mut command);
        assert!(
            output.status.success(),
            "README example {i} does not compile:\n{program}\n{}",
            text(&output)
        );
        let output = run(&mut c_program(&exe));
        assert!(
            output.status.success(),
            "README example {i} failed:\n{}",
            text(&output)
        );
    }
}
