//! The `cuzk` command line: prove and benchmark the built-in circuits, generate and store their keys,
//! read pipeline timelines, run the proving daemon, and prove Filecoin's own circuits. `main` only dispatches: the flags are in
//! `flags`, each command in a module of its own.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;

mod ark;
mod bench_daemon;
mod bench_load;
mod bench_synth;
mod filecoin;
mod filecoin_shape;
mod flags;
mod keygen;
mod output;
mod porep_shape;
mod progress;
mod prove;
mod report;
mod serve;
mod timeline;
mod timing_key;
mod workload;

use flags::{BenchWhat, Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Prove(w) => prove::prove(w),
        Command::Bench(b) => match &b.what {
            None => prove::bench(b),
            Some(BenchWhat::Synth(a)) => bench_synth::run(a),
            Some(BenchWhat::Load(a)) => bench_load::run(a),
            Some(BenchWhat::Daemon(a)) => bench_daemon::run(a),
        },
        Command::Keygen(a) => keygen::run(a),
        Command::Serve(a) => serve::serve(a),
        Command::Config(a) => serve::config(a),
        Command::Timeline(a) => timeline::run(a),
        Command::Filecoin(a) => filecoin::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            output::report_error(e.as_ref());
            ExitCode::FAILURE
        }
    }
}
