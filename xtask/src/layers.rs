//! Architecture checks: crate layering, and `unsafe` and cudarc confined to the CUDA crate.
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
    ("cuzk-service", 6),
    // Dev-only helpers and tooling: never normal dependencies of the layers above.
    ("cuzk-testkit", 7),
    ("cuzk-benches", 8),
    ("xtask", 8),
];

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
            problems.extend(dependency_problem(name, own, dep_name, names.contains(&dep_name), dev));
        }
        problems.extend(unsafe_problems(
            root.to_str().map(|r| format!("{r}/")).unwrap_or_default().as_str(),
            name,
            pkg,
        ));
    }
    Ok(problems)
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
    fn testkit_and_cudarc_are_confined() {
        assert!(dependency_problem("cuzk", 5, "cuzk-testkit", true, false).is_some());
        assert!(dependency_problem("cuzk", 5, "cuzk-testkit", true, true).is_none());
        assert!(dependency_problem("cuzk-groth16", 2, "cudarc", false, false).is_some());
        assert!(dependency_problem("cuzk-cuda", 3, "cudarc", false, false).is_none());
        assert!(dependency_problem("cuzk-field", 0, "rayon", false, false).is_none());
    }
}
