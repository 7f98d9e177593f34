//! Circles between the top-level modules of a library: module `a` naming `crate::b` (or an item the
//! crate root re-exports from `b`) while `b` names `a`, directly or through others. A module's files
//! are `src/a.rs` and everything under `src/a/`; the crate root's own items belong to no module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The circles among `src`'s top-level modules, as problems naming them.
pub(crate) fn circles(name: &str, src: &Path) -> Vec<String> {
    let Ok(root) = std::fs::read_to_string(src.join("lib.rs")) else { return Vec::new() };
    let modules = top_level_modules(&root);
    let reexports = reexports(&root, &modules);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for m in &modules {
        let mut text = std::fs::read_to_string(src.join(format!("{m}.rs"))).unwrap_or_default();
        for f in crate::layers::rust_files(&src.join(m)) {
            text.push_str(&std::fs::read_to_string(f).unwrap_or_default());
        }
        let used = uses(&strip_comments(&text), &modules, &reexports);
        edges.insert(m.clone(), used.into_iter().filter(|u| u != m).collect());
    }
    find_circles(&edges)
        .into_iter()
        .map(|c| format!("`{name}`: modules import each other in a circle: {}", c.join(" -> ")))
        .collect()
}

/// `mod x;` and `pub mod x;` (with any visibility) declared in the crate root.
fn top_level_modules(root: &str) -> Vec<String> {
    root.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l
                .strip_prefix("pub(crate) mod ")
                .or_else(|| l.strip_prefix("pub mod "))
                .or_else(|| l.strip_prefix("mod "))?;
            rest.strip_suffix(';').map(|m| m.trim().to_owned())
        })
        .collect()
}

/// Item names the root re-exports from each module (`pub use m::{A, B};`, `pub use m::A;`).
fn reexports(root: &str, modules: &[String]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let text = strip_comments(root);
    for stmt in text.split(';') {
        let s = stmt.trim();
        let Some(path) = s.strip_prefix("pub use ").or_else(|| s.strip_prefix("pub(crate) use ")) else {
            continue;
        };
        let path = path.trim();
        let Some((module, items)) = path.split_once("::") else { continue };
        if !modules.iter().any(|m| m == module) {
            continue;
        }
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let item = item.trim();
            // `a as b` re-exports `b`; `x::Y` re-exports `Y`.
            let name = item.rsplit(" as ").next().unwrap_or(item).rsplit("::").next().unwrap_or(item).trim();
            if !name.is_empty() {
                out.insert(name.to_owned(), module.to_owned());
            }
        }
    }
    out
}

/// The modules a text names through `crate::...` paths (including `use crate::{a, b::C}`).
fn uses(text: &str, modules: &[String], reexports: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        let names: Vec<String> = if let Some(group) = rest.strip_prefix('{') {
            // A group: its top-level names.
            let end = matching_brace(group).unwrap_or(group.len());
            top_level_names(&group[..end])
        } else {
            vec![rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()]
        };
        for n in names {
            if modules.contains(&n) {
                out.insert(n);
            } else if let Some(m) = reexports.get(&n) {
                out.insert(m.clone());
            }
        }
    }
    out
}

/// The index of the `}` closing a group that starts just before `s`.
fn matching_brace(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return Some(i),
            '}' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// The first segment of each comma-separated path in a `use` group (`a, b::C, d::{e, f}`).
fn top_level_names(group: &str) -> Vec<String> {
    let mut names = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    let mut push = |part: &str| {
        let first: String = part.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if !first.is_empty() {
            names.push(first);
        }
    };
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    push(&group[start..]);
    names
}

/// The text without `//` comments (doc comments name paths that are not imports).
fn strip_comments(text: &str) -> String {
    text.lines().map(|l| l.split_once("//").map_or(l, |(code, _)| code)).collect::<Vec<_>>().join("\n")
}

/// Each circle once, as the modules around it (starting from the smallest name).
fn find_circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let mut found: BTreeSet<Vec<String>> = BTreeSet::new();
    for start in edges.keys() {
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        while let Some((at, path)) = stack.pop() {
            for next in edges.get(&at).into_iter().flatten() {
                if next == start {
                    let mut circle = path.clone();
                    // Rotate so the smallest module leads; each circle is reported once.
                    let min = circle.iter().enumerate().min_by_key(|(_, m)| *m).map_or(0, |(i, _)| i);
                    circle.rotate_left(min);
                    circle.push(circle[0].clone());
                    found.insert(circle);
                } else if !path.contains(next) && next > start {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push((next.clone(), longer));
                }
            }
        }
    }
    found.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edges(list: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<String>> {
        list.iter().map(|(m, to)| (m.to_string(), to.iter().map(|t| t.to_string()).collect())).collect()
    }

    #[test]
    fn circles_are_found_once_and_chains_are_not_circles() {
        let chain = edges(&[("a", &["b"]), ("b", &["c"]), ("c", &[])]);
        assert!(find_circles(&chain).is_empty());
        let circle = edges(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &["a"])]);
        assert_eq!(find_circles(&circle), vec![vec!["a", "b", "c", "a"]]);
        let pair = edges(&[("engine", &["pipeline"]), ("pipeline", &["engine"])]);
        assert_eq!(find_circles(&pair).len(), 1);
    }

    #[test]
    fn uses_see_paths_groups_and_reexported_items() {
        let modules: Vec<String> = ["gpu", "msm", "types"].iter().map(|s| s.to_string()).collect();
        let root = "mod gpu;\npub mod msm;\nmod types;\npub use gpu::{Gpu, Timer};\npub use types::GpuFr;\n";
        assert_eq!(top_level_modules(root), modules);
        let re = reexports(root, &modules);
        assert_eq!(re.get("Gpu").map(String::as_str), Some("gpu"));
        assert_eq!(re.get("GpuFr").map(String::as_str), Some("types"));
        let text = "use crate::{CudaError, Gpu, msm::{Plan, Points}};\nfn f(_: crate::types::X) {}\n// crate::msm in a comment\n";
        let used: Vec<String> = uses(&strip_comments(text), &modules, &re).into_iter().collect();
        assert_eq!(used, ["gpu", "msm", "types"]);
    }
}
