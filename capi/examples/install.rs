//! Installs the C ABI under a prefix, as a C runtime's build wants it:
//!
//! ```text
//! cargo run -p sigretire-capi --example install -- --prefix /opt/sigretire
//! ```
//!
//! writes `PREFIX/lib/libsigretire_capi.so.<ABI>` (the SONAME) with the
//! link `libsigretire_capi.so` beside it, `PREFIX/lib/libsigretire_capi.a`,
//! `PREFIX/include/sigretire.h` and `PREFIX/lib/pkgconfig/sigretire_capi.pc`
//! (from `sigretire_capi.pc.in`), so that `PKG_CONFIG_PATH=PREFIX/lib/pkgconfig
//! pkg-config --cflags --libs sigretire_capi` gives a program its flags.
//! The libraries come from the profile folder cargo built this example in
//! (`--release` installs the release build), or `--from DIR`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The files installed, relative to the prefix.
fn install(prefix: &Path, from: &Path) -> Result<Vec<PathBuf>, String> {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let abi = sigretire_capi::SIGRETIRE_ABI_VERSION;
    let lib = prefix.join("lib");
    let include = prefix.join("include");
    let pkgconfig = lib.join("pkgconfig");
    for dir in [&lib, &include, &pkgconfig] {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let copy = |source: PathBuf, target: PathBuf| -> Result<PathBuf, String> {
        // Removed first: a running program may have the old one mapped.
        let _ = std::fs::remove_file(&target);
        std::fs::copy(&source, &target).map_err(|e| {
            format!(
                "cannot copy {} to {}: {e}",
                source.display(),
                target.display()
            )
        })?;
        Ok(target)
    };
    let soname = format!("libsigretire_capi.so.{abi}");
    let mut installed = vec![
        copy(from.join("libsigretire_capi.so"), lib.join(&soname))?,
        copy(
            from.join("libsigretire_capi.a"),
            lib.join("libsigretire_capi.a"),
        )?,
        copy(
            crate_dir.join("include").join("sigretire.h"),
            include.join("sigretire.h"),
        )?,
    ];
    // The link-time name, pointing at the SONAME (a relative link, so the
    // prefix may move).
    let link = lib.join("libsigretire_capi.so");
    let _ = std::fs::remove_file(&link);
    #[cfg(unix)]
    std::os::unix::fs::symlink(&soname, &link)
        .map_err(|e| format!("cannot link {}: {e}", link.display()))?;
    installed.push(link);
    let template = std::fs::read_to_string(crate_dir.join("sigretire_capi.pc.in"))
        .map_err(|e| format!("cannot read sigretire_capi.pc.in: {e}"))?;
    let absolute = std::path::absolute(prefix)
        .map_err(|e| format!("cannot make {} absolute: {e}", prefix.display()))?;
    let pc = template
        .replace("@PREFIX@", &absolute.display().to_string())
        .replace("@VERSION@", env!("CARGO_PKG_VERSION"))
        .replace("@ABI@", &abi.to_string());
    let pc_path = pkgconfig.join("sigretire_capi.pc");
    std::fs::write(&pc_path, pc).map_err(|e| format!("cannot write {}: {e}", pc_path.display()))?;
    installed.push(pc_path);
    Ok(installed)
}

/// The profile folder this example was built in (`target/debug`): the
/// libraries are there.
fn profile_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.to_path_buf())
}

fn main() -> ExitCode {
    let mut prefix = None;
    let mut from = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--prefix" => prefix = args.next().map(PathBuf::from),
            "--from" => from = args.next().map(PathBuf::from),
            other => {
                eprintln!("install: unknown argument {other:?} (--prefix DIR [--from DIR])");
                return ExitCode::FAILURE;
            }
        }
    }
    let Some(prefix) = prefix else {
        eprintln!("install: --prefix DIR is required");
        return ExitCode::FAILURE;
    };
    let Some(from) = from.or_else(profile_dir) else {
        eprintln!("install: cannot tell where the libraries are: pass --from DIR");
        return ExitCode::FAILURE;
    };
    match install(&prefix, &from) {
        Ok(files) => {
            for file in files {
                println!("installed {}", file.display());
            }
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("install: {why}");
            ExitCode::FAILURE
        }
    }
}
