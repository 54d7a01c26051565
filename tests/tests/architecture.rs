//! The module graph of every crate of the workspace has no cycle: a module
//! names another of its crate (`crate::a::b`, `super::x`, `self::c`, a
//! child it declares, or a name the crate root re-exports from a module, in
//! a `use` or a path) only if that one does not name it back, directly or
//! through others. Tests inside a file (its `#[cfg(test)]` modules and its
//! `mod tests`) may name anything and are not counted, and neither are
//! comments (doc tests included) and string literals.
//!
//! This is what keeps each component readable on its own: the coordinator
//! (the tracker's `retiring`, the queue layer's `queue`, a backend's queue)
//! imports its components, and none imports it back.
//!
//! Every crate: the members of the workspace's `Cargo.toml`, each from its
//! library root (`src/lib.rs`, else `src/main.rs`) through every `mod`
//! declaration, into subfolders too (`a/b.rs`, `a/b/mod.rs`). Binaries under
//! `src/bin` are crates of their own, read from their own roots.
//!
//! The cycles known today are listed, each with its reason, in [`ALLOWED`]:
//! the check fails on any other, and on an allowed one that is gone (delete
//! its entry then).
//!
//! The queue layer is held to more: its modules are layered
//! ([`QUEUE_LAYERS`]), each naming only lower layers, with its coordinator
//! on top of every component.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Cycles that exist today and are someone's work to remove: (the crate's
/// folder, the modules on the cycle, why it stays for now). The check fails
/// on any cycle not listed here, and on a listed one that is gone; nothing
/// may be added without a reason of the same kind.
const ALLOWED: &[(&str, &[&str], &str)] = &[];

/// The queue layer's modules by layer, lowest first. A module names only
/// modules of lower layers, so no cycle of imports can form there, and the
/// coordinator, `queue`, sits above every component: only what builds on
/// it (`device`, the futures, release and callback APIs, `sim`) names it. A new module of the queue layer takes its
/// place here (the check fails on one with none).
const QUEUE_LAYERS: &[&[&str]] = &[
    // The loom switch; the one outcome type; the errors.
    &["sync", "status", "error"],
    // The counters, the pools, the configuration.
    &["stats", "recycle", "config"],
    // The device error state.
    &["device_state"],
    // The lock-free command numbers, the wake signals, a synchronize's
    // marker, the device's completion thread (generic over its jobs), the
    // device's callback thread.
    &[
        "progress",
        "wake",
        "marker",
        "completion_thread",
        "callback",
    ],
    // What the queue knows of its hardware queue (every shortcut's rule);
    // batches and their hand-offs; a CPU wait on the tracker's engine; what
    // waits on a queue's positions without a thread (futures' slots,
    // callbacks, values to release).
    &["frontier", "batch", "cpu_wait", "watch"],
    // A command's handle; packet publication.
    &["command", "publish"],
    // The execution lock and what it protects.
    &["submission"],
    // A queue's batches on their way to completion.
    &["completion"],
    // The operations' protocols over submission and completion.
    &["synchronize", "query", "event", "move_queue"],
    &["cross_wait"],
    // The coordinator.
    &["queue"],
    // What builds on it: the device; the futures and deferred release
    // (methods on the coordinator's and the operations' handles, over
    // `completion` and `watch`); the callbacks' API.
    &["device", "future", "release"],
    &["notify"],
    &["sim"],
];

/// Where `graph` (a crate's modules) breaks `layers`: a module with no
/// layer, a layer's module that does not exist, or a module naming one of
/// its own layer or a higher one. Submodules belong to their top module's
/// layer.
fn layering_failures(
    graph: &BTreeMap<String, BTreeSet<String>>,
    layers: &[&[&str]],
) -> Vec<String> {
    let top = |module: &str| module.split("::").next().unwrap_or("").to_string();
    let layer_of = |module: &str| layers.iter().position(|layer| layer.contains(&module));
    let mut failures = Vec::new();
    for listed in layers.iter().flat_map(|layer| layer.iter()) {
        if !graph.contains_key(*listed) {
            failures.push(format!("{listed} is listed but is no module"));
        }
    }
    for (module, named) in graph {
        let here = top(module);
        let Some(level) = layer_of(&here) else {
            failures.push(format!("{module} has no layer"));
            continue;
        };
        for other in named.iter().map(|other| top(other)) {
            if other == here {
                continue;
            }
            match layer_of(&other) {
                Some(below) if below < level => {}
                Some(at) => failures.push(format!(
                    "{module} (layer {level}) names {other} (layer {at}): only lower layers may be named"
                )),
                None => failures.push(format!("{module} names {other}, which has no layer")),
            }
        }
    }
    failures
}

/// The workspace's folder.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// The folders of the workspace's members, from its `Cargo.toml`.
fn members() -> Vec<String> {
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).expect("Cargo.toml");
    let start = manifest.find("members").expect("a members list");
    let list = &manifest[start..];
    let list = &list[list.find('[').expect("[") + 1..list.find(']').expect("]")];
    list.split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect()
}

/// `text` with every comment and the contents of every string and char
/// literal blanked (newlines kept), so that neither is read as code.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == '"' || ((c == 'r' || c == 'b' || c == 'c') && raw_or_plain_string(&chars, i))
        {
            // Prefixes (r, b, br, c, cr), hashes, then the body up to the
            // matching quote and hashes.
            let mut j = i;
            while chars[j] != '"' && chars[j] != '#' {
                out.push(chars[j]);
                j += 1;
            }
            let raw = chars[i..j].contains(&'r');
            let mut hashes = 0;
            while chars[j] == '#' {
                hashes += 1;
                j += 1;
            }
            j += 1; // the opening quote
            out.push('"');
            while let Some(&d) = chars.get(j) {
                if !raw && d == '\\' {
                    out.push(' ');
                    out.push(blank(chars.get(j + 1).copied().unwrap_or(' ')));
                    j += 2;
                    continue;
                }
                if d == '"' && (0..hashes).all(|h| chars.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                out.push(blank(d));
                j += 1;
            }
            out.push('"');
            i = j;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\'') or a lifetime ('a).
            let literal_end = if next == Some('\\') {
                (i + 2..chars.len()).find(|&k| chars[k] == '\'' && k > i + 2)
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match literal_end {
                Some(end) => {
                    out.push_str("' '");
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Whether a string literal with a prefix (`r"`, `r#"`, `b"`, `br"`,
/// `c"`, `cr"`) starts at `i`, not an identifier that ends in one.
fn raw_or_plain_string(chars: &[char], i: usize) -> bool {
    if i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_') {
        return false;
    }
    let mut j = i;
    while j < chars.len() && j < i + 2 && matches!(chars[j], 'r' | 'b' | 'c') {
        j += 1;
    }
    let raw = chars[i..j].contains(&'r');
    if raw {
        while j < chars.len() && chars[j] == '#' {
            j += 1;
        }
    }
    chars.get(j) == Some(&'"')
}

/// `code` without its test modules: every `mod` item right after a
/// `#[cfg(test)]`, and every `mod tests`, inline (the braces removed) or
/// declared. Comments and strings are already gone, so braces balance.
fn without_tests(code: &str) -> String {
    let mut out = code.to_string();
    loop {
        let starts = [find_word(&out, "mod tests"), cfg_test_module(&out)];
        let Some(at) = starts.into_iter().flatten().min() else {
            return out;
        };
        let rest = &out[at..];
        let end = match (rest.find(';'), rest.find('{')) {
            (Some(semi), Some(brace)) if semi < brace => at + semi + 1,
            (Some(semi), None) => at + semi + 1,
            (_, Some(brace)) => {
                let mut depth = 0;
                let mut end = out.len();
                for (k, c) in rest[brace..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = at + brace + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (None, None) => out.len(),
        };
        out.replace_range(at..end, "");
    }
}

/// Where the first module item under `#[cfg(test)]` starts (its other
/// attributes and visibility between), if any.
fn cfg_test_module(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = code[from..].find("#[cfg(test)]") {
        let at = from + found;
        let mut rest = code[at + "#[cfg(test)]".len()..].trim_start();
        while rest.starts_with("#[") {
            rest = rest[rest.find(']').map_or(rest.len(), |e| e + 1)..].trim_start();
        }
        for visibility in ["pub(crate) ", "pub(super) ", "pub "] {
            rest = rest.strip_prefix(visibility).unwrap_or(rest);
        }
        if rest.starts_with("mod ") {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// The first `needle` in `text` that starts at a word boundary.
fn find_word(text: &str, needle: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = text[from..].find(needle) {
        let at = from + found;
        let before = text[..at].chars().next_back();
        if !before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            return Some(at);
        }
        from = at + needle.len();
    }
    None
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths of a use tree or a plain path that starts at `text` (right
/// after a prefix such as `crate::`): `a::b::c`, `a::{b, c::{d, e}}`,
/// `a::*`, `{a, b}`. Each path as its segments; `self` inside braces is
/// the group's own path.
fn use_tree(text: &str) -> Vec<Vec<String>> {
    fn parse(text: &[char], at: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let mut path = prefix.to_vec();
        loop {
            while *at < text.len() && text[*at].is_whitespace() {
                *at += 1;
            }
            if *at < text.len() && text[*at] == '{' {
                *at += 1;
                loop {
                    parse(text, at, &path, out);
                    while *at < text.len() && text[*at].is_whitespace() {
                        *at += 1;
                    }
                    match text.get(*at) {
                        Some(',') => {
                            *at += 1;
                            while *at < text.len() && text[*at].is_whitespace() {
                                *at += 1;
                            }
                            if text.get(*at) == Some(&'}') {
                                *at += 1;
                                return;
                            }
                        }
                        Some('}') => {
                            *at += 1;
                            return;
                        }
                        _ => return,
                    }
                }
            }
            let start = *at;
            while *at < text.len() && is_ident(text[*at]) {
                *at += 1;
            }
            let segment: String = text[start..*at].iter().collect();
            match segment.as_str() {
                "" => {}
                "self" => {}
                _ => path.push(segment),
            }
            if text.get(*at) == Some(&':') && text.get(*at + 1) == Some(&':') {
                *at += 2;
                continue;
            }
            out.push(path);
            return;
        }
    }
    let chars: Vec<char> = text.chars().take(4000).collect();
    let mut out = Vec::new();
    parse(&chars, &mut 0, &[], &mut out);
    out
}

/// One module of a crate: its path from the root (`a::b`; the root
/// itself is empty).
#[derive(Debug)]
struct Module {
    path: Vec<String>,
    /// The children it declares (`mod x;` and inline `mod x { .. }`).
    children: BTreeSet<String>,
    /// Its code, without comments, strings and tests.
    code: String,
}

/// Every module reachable from the crate root `root` through `mod`
/// declarations (test modules left out).
fn modules(root: &Path) -> Vec<Module> {
    let mut found = Vec::new();
    let mut stack = vec![(Vec::<String>::new(), root.to_path_buf())];
    while let Some((path, file)) = stack.pop() {
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let code = without_tests(&code_only(&text));
        let mut children = BTreeSet::new();
        // Where this module's child files live.
        let name = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let folder = if path.is_empty() || name == "mod" {
            file.parent().expect("a folder").to_path_buf()
        } else {
            file.with_extension("")
        };
        let mut from = 0;
        while let Some(at) = find_word(&code[from..], "mod ") {
            let at = from + at;
            from = at + 4;
            let rest = &code[at + 4..];
            let child: String = rest
                .trim_start()
                .chars()
                .take_while(|&c| is_ident(c))
                .collect();
            let after = rest.trim_start()[child.len()..].trim_start();
            if child.is_empty() {
                continue;
            }
            children.insert(child.clone());
            if after.starts_with(';') {
                let flat = folder.join(format!("{child}.rs"));
                let nested = folder.join(&child).join("mod.rs");
                let file = if flat.exists() { flat } else { nested };
                assert!(
                    file.exists(),
                    "{}: mod {child}; has no file",
                    folder.display()
                );
                let mut child_path = path.clone();
                child_path.push(child);
                stack.push((child_path, file));
            }
        }
        found.push(Module {
            path,
            children,
            code,
        });
    }
    found
}

/// For each module of the crate at `root` (its path joined with `::`; the
/// root itself left out: it declares every module and re-exports), the
/// other modules of the crate it names.
fn module_graph(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules(root);
    let known: BTreeSet<Vec<String>> = modules.iter().map(|m| m.path.clone()).collect();
    let crate_root = modules
        .iter()
        .find(|m| m.path.is_empty())
        .expect("the root");
    // Names the root re-exports (`pub use a::b::Name;`, `pub(crate) use
    // a::{X, Y};`):
    // `crate::Name` in a module names the module `Name` comes from.
    let mut reexports: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut from = 0;
    while let Some(at) = find_word(&crate_root.code[from..], "use ") {
        let at = from + at + "use ".len();
        from = at;
        let before = crate_root.code[..at - "use ".len()].trim_end();
        if !(before.ends_with("pub") || before.ends_with("pub(crate)")) {
            continue;
        }
        for path in use_tree(&crate_root.code[at..]) {
            if let Some((name, module)) = path.split_last()
                && let Some(owner) = longest_module(&known, module)
            {
                reexports.insert(name.clone(), owner);
            }
        }
    }
    let mut graph = BTreeMap::new();
    for module in modules.iter().filter(|m| !m.path.is_empty()) {
        let mut named = BTreeSet::new();
        for absolute in referenced_paths(&module.code, &module.path, &module.children) {
            let owner = match longest_module(&known, &absolute) {
                Some(owner) if !owner.is_empty() => Some(owner),
                _ => absolute
                    .first()
                    .and_then(|name| reexports.get(name))
                    .cloned(),
            };
            if let Some(owner) = owner
                && !owner.is_empty()
                && owner != module.path
            {
                named.insert(owner.join("::"));
            }
        }
        graph.insert(module.path.join("::"), named);
    }
    graph
}

/// The longest prefix of `path` that is a module of the crate.
fn longest_module(known: &BTreeSet<Vec<String>>, path: &[String]) -> Option<Vec<String>> {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|prefix| known.contains(prefix))
}

/// Every path `code` (of the module at `here`, declaring `children`)
/// names, made absolute: after `crate::`, `super::` (any number),
/// `self::`, or a child's name.
fn referenced_paths(code: &str, here: &[String], children: &BTreeSet<String>) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let chars: Vec<(usize, char)> = code.char_indices().collect();
    for (k, &(at, c)) in chars.iter().enumerate() {
        if !is_ident(c) {
            continue;
        }
        let before = k.checked_sub(1).map(|p| chars[p].1);
        if before.is_some_and(|b| is_ident(b) || b == ':') {
            continue; // inside an identifier, or not a path's first segment
        }
        let rest = &code[at..];
        let (base, after): (Vec<String>, &str) = if let Some(r) = rest.strip_prefix("crate::") {
            (Vec::new(), r)
        } else if rest.starts_with("super::") {
            let mut base = here.to_vec();
            let mut r = rest;
            while let Some(next) = r.strip_prefix("super::") {
                base.pop();
                r = next;
            }
            (base, r)
        } else if let Some(r) = rest.strip_prefix("self::") {
            (here.to_vec(), r)
        } else {
            let word: String = rest.chars().take_while(|&c| is_ident(c)).collect();
            match rest[word.len()..].strip_prefix("::") {
                Some(r) if children.contains(&word) => {
                    let mut base = here.to_vec();
                    base.push(word);
                    (base, r)
                }
                _ => continue,
            }
        };
        for tail in use_tree(after) {
            let mut absolute = base.clone();
            absolute.extend(tail);
            paths.push(absolute);
        }
    }
    paths
}

/// The modules on a cycle, each cycle once (strongly connected components
/// of more than one module, or a module naming itself).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Two modules are on one cycle exactly when each reaches the other.
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(module) = stack.pop() {
            for next in graph.get(&module).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    let mut found: Vec<Vec<String>> = Vec::new();
    for module in graph.keys() {
        let cycle: Vec<String> = graph
            .keys()
            .filter(|other| reaches[module].contains(*other) && reaches[other].contains(module))
            .cloned()
            .collect();
        if !cycle.is_empty() && !found.contains(&cycle) {
            found.push(cycle);
        }
    }
    found
}

/// The crate roots of the member in `folder`: its library (or its one
/// binary) and each binary under `src/bin`.
fn roots(folder: &str) -> Vec<PathBuf> {
    let src = workspace().join(folder).join("src");
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .filter(|p| p.exists())
        .collect();
    if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
        for entry in bins {
            let path = entry.expect("an entry").path();
            let root = if path.is_dir() {
                path.join("main.rs")
            } else {
                path
            };
            if root.extension().is_some_and(|e| e == "rs") {
                roots.push(root);
            }
        }
    }
    assert!(!roots.is_empty(), "{folder}: no crate root in src");
    roots
}

/// The cycles of every crate root of the member in `folder`.
fn cycles_of(folder: &str) -> (Vec<Vec<String>>, String) {
    let mut all = Vec::new();
    let mut listing = String::new();
    for root in roots(folder) {
        let graph = module_graph(&root);
        for (module, named) in &graph {
            let named: Vec<_> = named.iter().cloned().collect();
            listing += &format!("  {module}: {}\n", named.join(" "));
        }
        all.extend(cycles(&graph));
    }
    (all, listing)
}

#[test]
fn no_crate_of_the_workspace_imports_in_a_circle() {
    let members = members();
    assert!(members.len() >= 10, "read {members:?}");
    let mut failures = Vec::new();
    for folder in &members {
        let (found, listing) = cycles_of(folder);
        let allowed: Vec<Vec<String>> = ALLOWED
            .iter()
            .filter(|(crate_folder, ..)| crate_folder == folder)
            .map(|(_, cycle, _)| cycle.iter().map(|m| m.to_string()).collect())
            .collect();
        let new: Vec<_> = found.iter().filter(|c| !allowed.contains(c)).collect();
        let gone: Vec<_> = allowed.iter().filter(|c| !found.contains(c)).collect();
        if !new.is_empty() {
            failures.push(format!("{folder}: import cycles {new:?}\n{listing}"));
        }
        if !gone.is_empty() {
            failures.push(format!(
                "{folder}: the allowed cycles {gone:?} are gone: delete their entries in ALLOWED"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The queue layer is layered ([`QUEUE_LAYERS`]): each module names only
/// lower layers, so no cycle of imports can return there, and no component
/// names the coordinator (`queue`) back.
#[test]
fn the_queue_layer_names_only_lower_layers_and_no_component_names_its_coordinator() {
    let graph = module_graph(&workspace().join("fences/src/lib.rs"));
    let failures = layering_failures(&graph, QUEUE_LAYERS);
    let listing: Vec<String> = graph
        .iter()
        .map(|(module, named)| format!("  {module}: {named:?}"))
        .collect();
    assert!(
        failures.is_empty(),
        "{}\n{}",
        failures.join("\n"),
        listing.join("\n")
    );
    let naming_the_coordinator: Vec<&String> = graph
        .iter()
        .filter(|(_, named)| named.contains("queue"))
        .map(|(module, _)| module)
        .collect();
    assert_eq!(
        naming_the_coordinator,
        ["device", "future", "notify", "release", "sim"]
    );
}

/// The layering check fails a module that names its own layer or a higher
/// one, one with no layer, and a listed module that does not exist.
#[test]
fn the_layering_check_sees_an_upward_import() {
    let graph = |pairs: &[(&str, &[&str])]| {
        pairs
            .iter()
            .map(|(module, named)| {
                let named = named.iter().map(|n| n.to_string()).collect();
                (module.to_string(), named)
            })
            .collect::<BTreeMap<String, BTreeSet<String>>>()
    };
    let layers: &[&[&str]] = &[&["low"], &["mid", "side"], &["top"]];
    let fine = graph(&[
        ("low", &[]),
        ("mid", &["low"]),
        ("side", &["low"]),
        ("top", &["mid", "low"]),
        ("top::child", &["top", "side"]),
    ]);
    assert_eq!(layering_failures(&fine, layers), Vec::<String>::new());
    let upward = graph(&[
        ("low", &["top"]),
        ("mid", &["side"]),
        ("side", &[]),
        ("top", &[]),
        ("stray", &[]),
    ]);
    let failures = layering_failures(&upward, layers);
    assert_eq!(failures.len(), 3, "{failures:?}");
    assert!(
        failures
            .iter()
            .any(|f| f.starts_with("low (layer 0) names top"))
    );
    assert!(
        failures
            .iter()
            .any(|f| f.starts_with("mid (layer 1) names side"))
    );
    assert!(failures.iter().any(|f| f.starts_with("stray has no layer")));
    let missing = graph(&[("low", &[]), ("mid", &[]), ("top", &[])]);
    assert_eq!(
        layering_failures(&missing, layers),
        ["side is listed but is no module"]
    );
}

/// Every allowed cycle names a member and says why it stays.
#[test]
fn the_allow_list_names_members_and_reasons() {
    let members = members();
    for (folder, cycle, why) in ALLOWED {
        assert!(members.iter().any(|m| m == folder), "{folder} is no member");
        assert!(cycle.len() >= 2 && why.len() > 40, "{folder}: {cycle:?}");
    }
}

/// The modules the check reads include those in subfolders, and a
/// crate's binaries are read from their own roots.
#[test]
fn the_check_reads_subfolders_and_binaries() {
    let graph = module_graph(&workspace().join("benches/src/lib.rs"));
    assert!(graph.contains_key("platforms"), "{graph:?}");
    assert!(
        graph.keys().any(|m| m.starts_with("platforms::")),
        "{graph:?}"
    );
    assert!(roots("tests").iter().any(|r| r.ends_with("bin/teeth.rs")));
    assert!(module_graph(&workspace().join("tracker/src/lib.rs")).len() > 5);
    assert!(module_graph(&workspace().join("fences/src/lib.rs")).len() > 5);
}

/// The check itself finds a cycle where there is one, through a braced
/// import and a plain path, and ignores comments and unit tests.
#[test]
fn the_check_sees_a_cycle() {
    let graph = |pairs: &[(&str, &str)]| {
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, to) in pairs {
            graph
                .entry(from.to_string())
                .or_default()
                .insert(to.to_string());
            graph.entry(to.to_string()).or_default();
        }
        graph
    };
    assert!(cycles(&graph(&[("a", "b"), ("b", "c")])).is_empty());
    assert_eq!(
        cycles(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])),
        [["a", "b", "c"]]
    );
    let code = "use crate::{ring::Ring, share};\n// crate::hidden\nfn f() { crate::stats::bump(); }\nmod tests { use crate::retiring; }";
    let named: BTreeSet<String> = referenced_paths(
        &without_tests(&code_only(code)),
        &["here".to_string()],
        &BTreeSet::new(),
    )
    .into_iter()
    .filter_map(|path| path.first().cloned())
    .collect();
    assert_eq!(
        named,
        ["ring", "share", "stats"]
            .map(String::from)
            .into_iter()
            .collect()
    );
}

/// Paths relative to the module (`super::`, `self::`, a declared child),
/// nested groups, re-exports of the root, strings, and `#[cfg(test)]`
/// modules of any name.
#[test]
fn the_check_resolves_relative_paths_and_skips_strings() {
    let here = ["a".to_string(), "b".to_string()];
    let children: BTreeSet<String> = ["kid".to_string()].into();
    let code = code_only(
        "use super::{x::{y, z}, w};\nuse super::super::top::T;\nuse self::kid::K;\nfn f() { kid::go(); \
         let s = \"crate::in_a_string\"; let r = r#\"crate::raw\"#; let c = '\\''; }\n\
         #[cfg(test)]\nmod checks { use crate::tested; }\nstruct After(crate::after::A);",
    );
    let paths: BTreeSet<String> = referenced_paths(&without_tests(&code), &here, &children)
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    let expected: BTreeSet<String> = [
        "a::x::y",
        "a::x::z",
        "a::w",
        "top::T",
        "a::b::kid::K",
        "a::b::kid::go",
        "after::A",
    ]
    .map(String::from)
    .into();
    assert_eq!(paths, expected);
}
