//! Project automation: `cargo xtask test | lint | bench`.
//!
//! - `test`: the whole CPU suite (unit, integration, property and doc tests) of every crate.
//! - `lint`: rustfmt, clippy with `-D warnings`, and the architecture checks (crate layering,
//!   `unsafe` and cudarc confined to the CUDA crate, the CLI on the facade and the service only,
//!   library files of at most 800 lines, no module circles, no test-only hooks in a release build).
//! - `bench [ARGS]`: the criterion benches of every layer; ARGS go to criterion (e.g. a filter).
//! - `ptx [--check]`: generate the kernel constants header and compile `kernels/` to PTX.
//! - `sass [--module NAME] [KERNEL...]`: the kernels' SASS counted by the unit that runs each
//!   instruction, with a throughput model of each innermost loop (needs no GPU).
//! - `gpu-test`: the GPU suite on this machine (fails without a GPU); `bundle`: GPU binaries and a run
//!   script in `.gpu-bundle/` for a GPU host without a Rust toolchain.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

mod gpu;
mod layers;
mod modules;
mod ptx;
mod sass;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("test") => test(&args[1..]),
        Some("lint") => lint(),
        Some("bench") => bench(&args[1..]),
        Some("gpu-test") => gpu::gpu_test(&root(), &args[1..]),
        Some("bundle") => gpu::bundle(&root()),
        Some("ptx") => ptx::ptx(&root(), args.iter().any(|a| a == "--check")),
        Some("sass") => sass::sass(&root(), &args[1..]),
        _ => {
            eprintln!("usage: cargo xtask <test|lint|bench> [args]");
            eprintln!("  test [ARGS]   run the CPU test suite (ARGS go to `cargo test`)");
            eprintln!("  lint          rustfmt, clippy, rustdoc warnings, layering and unsafe checks");
            eprintln!("  bench [ARGS]  criterion benches of every layer (ARGS go to criterion)");
            eprintln!("  gpu-test      run the GPU suite here (fails without a GPU)");
            eprintln!("  bundle        build GPU test and bench binaries into .gpu-bundle/ with run.sh");
            eprintln!("  ptx [--check] generate the constants header and compile kernels/ to PTX (check: fail if stale)");
            eprintln!(
                "  sass [--module NAME] [KERNEL...]  SASS by unit and a pipe model of each innermost loop"
            );
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
    cargo_in(&root(), args)
}

/// Runs cargo with `args` in `dir`, failing when it fails.
pub(crate) fn cargo_in(dir: &Path, args: &[&str]) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    eprintln!("xtask: cargo {}", args.join(" "));
    let status = Command::new(cargo)
        .args(args)
        .current_dir(dir)
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
    // The GPU suite is behind a feature; lint it too, though it only runs on a GPU.
    cargo(&[
        "clippy",
        "-p",
        "cuzk-cuda",
        "-p",
        "cuzk",
        "--all-targets",
        "--features",
        "cuzk-cuda/gpu-tests,cuzk/gpu-tests",
        "--locked",
        "--",
        "-D",
        "warnings",
    ])?;
    // The API documentation: a broken link or any other rustdoc warning fails the lint.
    cargo(&[
        "doc",
        "--workspace",
        "--no-deps",
        "--exclude",
        "xtask",
        "--locked",
        "--config",
        "build.rustdocflags=[\"-D\", \"warnings\"]",
    ])?;
    let mut problems = layers::check(&root())?;
    problems.extend(layers::release_feature_problems(&root())?);
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
