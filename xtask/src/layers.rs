//! Architecture checks: crate layering, `unsafe` and cudarc confined to the CUDA crate, the command
//! line on the facade and the service only, library files of at most 800 lines, no circles between a
//! library's modules, and no test-only hooks in a release build of the daemon.
//!
//! The layer table below is the one in docs/ARCHITECTURE.md. A crate's normal dependencies must sit
//! on strictly lower layers; the dev-only test kit is never a normal dependency; a crate not in the
//! table is an error, so a new crate must be placed deliberately.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Workspace crates and their layers, lowest first.
const LAYERS: &[(&str, u32)] = &[
    ("cuzk-field", 0),
    ("cuzk-synth", 1),
    ("cuzk-circuits", 1),
    ("cuzk-groth16", 2),
    ("cuzk-keystore", 2),
    ("cuzk-cuda", 3),
    ("cuzk-sched", 4),
    ("cuzk", 5),
    ("cuzk-filecoin", 6),
    ("cuzk-service", 7),
    ("cuzk-cli", 8),
    // Dev-only helpers and tooling: never normal dependencies of the layers above.
    ("cuzk-testkit", 9),
    ("cuzk-benches", 10),
    ("xtask", 10),
];

/// The command line talks to the facade and the service library (and builds the workload circuits),
/// never to the layers under the facade directly.
const CLI_CRATE: &str = "cuzk-cli";
const CLI_MAY_USE: &[&str] = &["cuzk", "cuzk-service", "cuzk-circuits", "cuzk-filecoin"];

/// The most lines a source file of a library crate may hold.
const MAX_LIBRARY_FILE_LINES: usize = 800;

/// Features that exist for tests only and must not be on in a release build of the daemon.
const TEST_ONLY_FEATURES: &[(&str, &str)] =
    &[("cuzk-cuda", "fault-injection"), ("cuzk-cuda", "bench-kernels")];

/// The only crate allowed `unsafe` code and a dependency on cudarc.
const CUDA_CRATE: &str = "cuzk-cuda";
/// Crates that may only ever be dev-dependencies.
const DEV_ONLY: &[&str] = &["cuzk-testkit"];

fn layer(name: &str) -> Option<u32> {
    LAYERS.iter().find(|(n, _)| *n == name).map(|(_, l)| *l)
}

/// Runs every check and returns the problems found.
pub(crate) fn check(root: &Path) -> Result<Vec<String>, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--locked"])
        .current_dir(root)
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let meta: Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("bad cargo metadata: {e}"))?;
    let packages = meta["packages"].as_array().ok_or("cargo metadata has no packages")?;
    let names: Vec<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();

    let mut problems = Vec::new();
    for pkg in packages {
        let name = pkg["name"].as_str().unwrap_or("?");
        let Some(own) = layer(name) else {
            problems.push(format!("crate `{name}` is not in the layer table (xtask/src/layers.rs)"));
            continue;
        };
        for dep in pkg["dependencies"].as_array().into_iter().flatten() {
            let dep_name = dep["name"].as_str().unwrap_or("?");
            let dev = dep["kind"].as_str() == Some("dev");
            let in_workspace = names.contains(&dep_name);
            problems.extend(dependency_problem(name, own, dep_name, in_workspace, dev));
            if name == CLI_CRATE && in_workspace && !dev && !CLI_MAY_USE.contains(&dep_name) {
                problems.push(format!(
                    "`{name}` depends on `{dep_name}`; the command line uses {} only (the facade re-exports the rest)",
                    CLI_MAY_USE.join(", ")
                ));
            }
        }
        if is_library(pkg) && !matches!(name, "cuzk-testkit" | "cuzk-benches" | "xtask") {
            problems.extend(library_problems(root, name, pkg));
        }
        problems.extend(unsafe_problems(
            root.to_str().map(|r| format!("{r}/")).unwrap_or_default().as_str(),
            name,
            pkg,
        ));
    }
    Ok(problems)
}

fn is_library(pkg: &Value) -> bool {
    pkg["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["kind"].as_array().into_iter().flatten().any(|k| k.as_str() == Some("lib")))
}

/// The `src/` folder of a package.
fn src_dir(pkg: &Value) -> Option<std::path::PathBuf> {
    let manifest = pkg["manifest_path"].as_str()?;
    Some(Path::new(manifest).parent()?.join("src"))
}

/// Every `.rs` file under `dir`, sorted.
pub(crate) fn rust_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A library's files over [`MAX_LIBRARY_FILE_LINES`], and circles between its top-level modules.
fn library_problems(root: &Path, name: &str, pkg: &Value) -> Vec<String> {
    let Some(src) = src_dir(pkg) else { return vec![format!("`{name}`: no src folder")] };
    let mut problems = Vec::new();
    let files = rust_files(&src);
    for f in &files {
        let lines = std::fs::read_to_string(f).map(|t| t.lines().count()).unwrap_or(0);
        if lines > MAX_LIBRARY_FILE_LINES {
            let shown = f.strip_prefix(root).unwrap_or(f).display().to_string();
            problems.push(format!(
                "`{name}`: {shown} has {lines} lines, more than {MAX_LIBRARY_FILE_LINES}: split it by what it does"
            ));
        }
    }
    problems.extend(crate::modules::circles(name, &src));
    problems
}

/// The rule for one dependency edge `name -> dep`.
fn dependency_problem(name: &str, own: u32, dep: &str, in_workspace: bool, dev: bool) -> Option<String> {
    if dep == "cudarc" && name != CUDA_CRATE {
        return Some(format!("`{name}` depends on cudarc; only {CUDA_CRATE} may"));
    }
    if !in_workspace || dev {
        return None;
    }
    if DEV_ONLY.contains(&dep) {
        return Some(format!("`{name}` has a normal dependency on dev-only `{dep}`"));
    }
    match layer(dep) {
        Some(theirs) if theirs >= own => Some(format!(
            "`{name}` (layer {own}) depends on `{dep}` (layer {theirs}): dependencies must point down"
        )),
        _ => None,
    }
}

/// Every library and binary root except the CUDA crate's must say `#![forbid(unsafe_code)]` (the
/// workspace lint `unsafe_code = "deny"` covers tests and benches).
fn unsafe_problems(root: &str, name: &str, pkg: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    if name == CUDA_CRATE {
        return problems;
    }
    for target in pkg["targets"].as_array().into_iter().flatten() {
        let kinds: Vec<&str> =
            target["kind"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        if !kinds.iter().any(|k| matches!(*k, "lib" | "bin")) {
            continue;
        }
        let Some(path) = target["src_path"].as_str() else { continue };
        let src = path.strip_prefix(root).unwrap_or(path);
        match std::fs::read_to_string(path) {
            Ok(text) if text.contains("#![forbid(unsafe_code)]") => {}
            Ok(_) => problems.push(format!("`{name}`: {src} lacks #![forbid(unsafe_code)]")),
            Err(e) => problems.push(format!("`{name}`: cannot read {src}: {e}")),
        }
    }
    problems
}

/// Test-only features that a release build of the daemon (`cuzk-cli`, normal dependencies only)
/// would switch on.
pub(crate) fn release_feature_problems(root: &Path) -> Result<Vec<String>, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "-p", CLI_CRATE, "-e", "normal", "--prefix", "none", "--locked", "-f", "{p} [{f}]"])
        .current_dir(root)
        .output()
        .map_err(|e| format!("cannot run cargo tree: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo tree failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(test_only_features(&String::from_utf8_lossy(&out.stdout)))
}

/// The test-only features on in a `cargo tree -f "{p} [{f}]"` listing.
fn test_only_features(tree: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for line in tree.lines() {
        let Some((package, rest)) = line.split_once(' ') else { continue };
        let features = rest.rsplit_once('[').and_then(|(_, f)| f.split_once(']')).map_or("", |(f, _)| f);
        for (crate_name, feature) in TEST_ONLY_FEATURES {
            if package == *crate_name && features.split(',').any(|f| f.trim() == *feature) {
                let problem = format!(
                    "a release build of `{CLI_CRATE}` turns on `{crate_name}/{feature}`, a test-only hook"
                );
                if !problems.contains(&problem) {
                    problems.push(problem);
                }
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependencies_must_point_down() {
        assert!(dependency_problem("cuzk-groth16", 2, "cuzk-synth", true, false).is_none());
        assert!(dependency_problem("cuzk-synth", 1, "cuzk-groth16", true, false).is_some());
        assert!(dependency_problem("cuzk-synth", 1, "cuzk-circuits", true, false).is_some(), "same layer");
        assert!(
            dependency_problem("cuzk-synth", 1, "cuzk-groth16", true, true).is_none(),
            "dev edges are free"
        );
    }

    #[test]
    fn test_only_features_in_a_release_tree_are_found() {
        let clean = "cuzk-cli v0.1.0 (/x) []\ncuzk-cuda v0.1.0 (/x/crates/cuzk-cuda) []\n";
        assert!(test_only_features(clean).is_empty());
        let hooked = "cuzk-cuda v0.1.0 (/x/crates/cuzk-cuda) [bench-kernels,fault-injection]\n";
        assert_eq!(test_only_features(hooked).len(), 2);
        assert!(test_only_features("cuzk-field v0.1.0 (/x) [fault-injection]\n").is_empty());
    }

    #[test]
    fn testkit_and_cudarc_are_confined() {
        assert!(dependency_problem("cuzk", 5, "cuzk-testkit", true, false).is_some());
        assert!(dependency_problem("cuzk", 5, "cuzk-testkit", true, true).is_none());
        assert!(dependency_problem("cuzk-groth16", 2, "cudarc", false, false).is_some());
        assert!(dependency_problem("cuzk-cuda", 3, "cudarc", false, false).is_none());
        assert!(dependency_problem("cuzk-field", 0, "rayon", false, false).is_none());
    }
}
