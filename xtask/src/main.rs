//! Project automation: `cargo xtask test | lint | bench`.
//!
//! - `test`: the whole CPU suite (unit, integration, property and doc tests) of every crate.
//! - `lint`: rustfmt, clippy with `-D warnings`, and the architecture checks (crate layering,
//!   `unsafe` confined to the CUDA crate, cudarc confined to it).
//! - `bench [ARGS]`: the criterion benches of every layer; ARGS go to criterion (e.g. a filter).

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

mod layers;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("test") => test(&args[1..]),
        Some("lint") => lint(),
        Some("bench") => bench(&args[1..]),
        _ => {
            eprintln!("usage: cargo xtask <test|lint|bench> [args]");
            eprintln!("  test [ARGS]   run the CPU test suite (ARGS go to `cargo test`)");
            eprintln!("  lint          rustfmt, clippy -D warnings, layering and unsafe checks");
            eprintln!("  bench [ARGS]  criterion benches of every layer (ARGS go to criterion)");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root (the parent of this crate's folder).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

fn cargo(args: &[&str]) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    eprintln!("xtask: cargo {}", args.join(" "));
    let status = Command::new(cargo)
        .args(args)
        .current_dir(root())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`cargo {}` failed ({status})", args.join(" ")))
    }
}

fn test(extra: &[String]) -> Result<(), String> {
    let mut args = vec!["test", "--workspace", "--locked"];
    args.extend(extra.iter().map(String::as_str));
    cargo(&args)
}

fn lint() -> Result<(), String> {
    cargo(&["fmt", "--all", "--check"])?;
    cargo(&["clippy", "--workspace", "--all-targets", "--locked", "--", "-D", "warnings"])?;
    let problems = layers::check(&root())?;
    if problems.is_empty() {
        eprintln!("xtask: architecture checks passed");
        Ok(())
    } else {
        for p in &problems {
            eprintln!("architecture: {p}");
        }
        Err(format!("{} architecture problem(s)", problems.len()))
    }
}

fn bench(extra: &[String]) -> Result<(), String> {
    let mut args = vec!["bench", "-p", "cuzk-benches", "--locked", "--"];
    args.extend(extra.iter().map(String::as_str));
    cargo(&args)
}
