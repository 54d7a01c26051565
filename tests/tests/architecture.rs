//! The module graph of the tracker and of the queue layer has no cycle: a
//! file names another (`crate::name`, in a `use` or a path) only if that
//! one does not name it back, directly or through others. Tests inside a
//! file (its `mod tests`) may name anything and are not counted.
//!
//! This is what keeps each component readable on its own: the coordinator
//! (`retiring`, `queue`) imports its components, and none imports it back.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each top-level module of `src` and the modules of the same crate it names.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(src).expect("the crate's src") {
        let path = entry.expect("a directory entry").path();
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_some_and(|e| e == "rs") && name != "lib" {
            let text = std::fs::read_to_string(&path).expect("a source file");
            files.insert(name.to_string(), text);
        }
    }
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    files
        .iter()
        .map(|(name, text)| {
            let code = without_tests(&without_comments(text));
            let named = crate_paths(&code)
                .filter(|other| other != name && modules.contains(other))
                .collect();
            (name.clone(), named)
        })
        .collect()
}

fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The file up to its unit tests (`mod tests;` or an inline `mod tests`).
fn without_tests(code: &str) -> String {
    match code.find("mod tests") {
        Some(at) => code[..at].to_string(),
        None => code.to_string(),
    }
}

/// The first segment after every `crate::`, and each name a braced
/// `use crate::{a, b::c}` lists.
fn crate_paths(code: &str) -> impl Iterator<Item = String> + '_ {
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let head = item.trim().split("::").next().unwrap_or("");
                names.push(head.trim().to_string());
            }
        } else {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            names.push(rest[..end].to_string());
        }
    }
    names.into_iter()
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

fn assert_acyclic(krate: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(krate)
        .join("src");
    let graph = module_graph(&src);
    assert!(graph.len() > 5, "{krate}: read {} modules", graph.len());
    let found = cycles(&graph);
    let listing: String = graph
        .iter()
        .map(|(m, named)| {
            format!(
                "  {m}: {}\n",
                named.iter().cloned().collect::<Vec<_>>().join(" ")
            )
        })
        .collect();
    assert!(
        found.is_empty(),
        "{krate}: import cycles {found:?}\n{listing}"
    );
}

#[test]
fn the_trackers_modules_import_no_cycle() {
    assert_acyclic("tracker");
}

#[test]
fn the_queue_layers_modules_import_no_cycle() {
    assert_acyclic("fences");
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
    let named: BTreeSet<String> = crate_paths(&without_tests(&without_comments(code))).collect();
    assert_eq!(
        named,
        ["ring", "share", "stats"]
            .map(String::from)
            .into_iter()
            .collect()
    );
}
