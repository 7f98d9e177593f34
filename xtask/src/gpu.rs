//! `cargo xtask gpu-test` and `cargo xtask bundle`: the GPU suite, here or on a GPU host.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Runs the GPU suite on this machine; it fails (never passes) when there is no GPU.
pub(crate) fn gpu_test(root: &Path, extra: &[String]) -> Result<(), String> {
    let mut args = GPU_TESTS.to_vec();
    args.extend(["-q", "--"]);
    args.extend(extra.iter().map(String::as_str));
    crate::cargo_in(root, &args)
}

/// The GPU suite: the CUDA backend's tests and the engine's on the GPUs.
const GPU_TESTS: [&str; 13] = [
    "test",
    "-p",
    "cuzk-cuda",
    "-p",
    "cuzk",
    "--features",
    "cuzk-cuda/gpu-tests,cuzk/gpu-tests",
    "--release",
    "--locked",
    "--test",
    "gpu",
    "--test",
    "gpu_engine",
];

/// The GPU test binaries by test target name, and their names in the bundle.
const GPU_TEST_BINARIES: [(&str, &str); 2] = [("gpu", "gpu-tests"), ("gpu_engine", "gpu-engine-tests")];

/// Builds the GPU test and bench binaries (kernels embedded, gzipped) into `.gpu-bundle/` with `run.sh`,
/// for a GPU host without a Rust toolchain: `.gpu-bundle/run.sh OUTDIR [PART...]` unpacks and runs
/// them (all, or the parts named) and writes a summary; `.gpu-bundle/run.sh --unpack` only unpacks them.
pub(crate) fn bundle(root: &Path) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(&cargo)
        .args(GPU_TESTS)
        .args(["--no-run", "--message-format=json-render-diagnostics"])
        .current_dir(root)
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!("building the GPU tests failed:\n{}", String::from_utf8_lossy(&out.stderr)));
    }
    let mut tests = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<Value>(line) else { continue };
        let name = msg["target"]["name"].as_str().unwrap_or_default();
        if let Some((_, bundled)) = GPU_TEST_BINARIES.iter().find(|(target, _)| *target == name) {
            if let (true, Some(exe)) = (msg["reason"] == "compiler-artifact", msg["executable"].as_str()) {
                tests.push((exe.to_owned(), *bundled));
            }
        }
    }
    if tests.len() != GPU_TEST_BINARIES.len() {
        return Err(format!(
            "expected {} GPU test executables, cargo built {tests:?}",
            GPU_TEST_BINARIES.len()
        ));
    }
    crate::cargo_in(
        root,
        &[
            "build",
            "-p",
            "cuzk-cuda",
            "--features",
            "gpu-tests",
            "--release",
            "--locked",
            "--example",
            "gpu_bench",
            "--example",
            "ntt_profile",
            "--example",
            "msm_bench",
        ],
    )?;
    crate::cargo_in(root, &["build", "-p", "cuzk-cli", "--release", "--locked", "--bin", "cuzk"])?;
    let dir = root.join(".gpu-bundle");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    for (exe, bundled) in &tests {
        std::fs::copy(exe, dir.join(bundled)).map_err(|e| format!("{exe}: {e}"))?;
    }
    for example in ["gpu_bench", "ntt_profile", "msm_bench"] {
        let bin = root.join("target/release/examples").join(example);
        std::fs::copy(&bin, dir.join(example)).map_err(|e| format!("{}: {e}", bin.display()))?;
    }
    let cli = root.join("target/release/cuzk");
    std::fs::copy(&cli, dir.join("cuzk")).map_err(|e| format!("{}: {e}", cli.display()))?;
    // Each binary embeds the kernels' PTX, which gzip shrinks about sixfold: the bundle then fits
    // through a small upload. run.sh unpacks the binaries first.
    let status = Command::new("gzip")
        .args(["-9", "-f", "gpu-tests", "gpu-engine-tests", "gpu_bench", "ntt_profile", "msm_bench", "cuzk"])
        .current_dir(&dir)
        .status()
        .map_err(|e| format!("cannot run gzip: {e}"))?;
    if !status.success() {
        return Err("gzip failed on the bundle".into());
    }
    std::fs::write(dir.join("run.sh"), RUN_SH).map_err(|e| e.to_string())?;
    Command::new("chmod").args(["+x"]).arg(dir.join("run.sh")).status().map_err(|e| e.to_string())?;
    eprintln!("xtask: GPU bundle in .gpu-bundle/ (run: .gpu-bundle/run.sh OUTDIR)");
    Ok(())
}

const RUN_SH: &str = r##"#!/usr/bin/env bash
# The cuzk GPU suite and benchmarks. Usage: run.sh OUTDIR [PART...], PART one of tests, engine, bench,
# ntt, msm, prove (all of them when none is given, in that order; the whole run takes longer than one
# 10-minute call, so a lease runs it in parts), or units / units-porep (not in the default run: the
# multiplication units side by side, integer, fp64 and mixed, with their tests first; the porep-like
# 2^27 partition under each), or witness, witness-bench, porep and endo (not in the default run, a
# call each: the tests of the sparse products' row split and of the ones' two ways; gpu_bench and
# msm_bench on witness-like scalars; the porep-like 2^27 partition; the G1 endomorphism's shape, G1
# 2^26 random against 2^27 scalars below 2^128). tests-msm and tests-rest are the two halves of
# tests (the CUDA backend's tests named msm_, and the others): on an H200 the whole of tests takes
# longer than one 500-second call. The tests report each test's time (libtest's --report-time, which
# a harness built on stable Rust takes with RUSTC_BOOTSTRAP set where it runs). Writes
# gpu-tests.log, bench.md, bench.json, ntt-profile.txt, msm.md, msm.json, prove.json, units.log,
# units-porep.log, witness.log, witness-bench.log, porep.log, endo.log (those of the parts run) and
# summary.md into OUTDIR; exits non-zero if any test or bench failed. `run.sh --unpack` only
# unpacks the binaries. With DEADLINE_S set, every binary runs under `timeout` with what is left of
# DEADLINE_S seconds from the start, and one that would start with 5 seconds or less left is skipped
# (both count as failures), so that a call with a time limit still writes its summary; give each
# part its own limit by calling run.sh once a part.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for packed in "$here"/*.gz; do
  [ -e "$packed" ] && gzip -d -f "$packed" && chmod +x "${packed%.gz}"
done
[ "${1:-}" = "--unpack" ] && exit 0
out=${1:-$PWD/gpu-out}
shift || true
parts=" ${*:-tests engine bench ntt msm prove} "
for p in $parts; do
  case $p in
    tests|tests-msm|tests-rest|engine|bench|ntt|msm|prove) ;;
    units|units-porep|witness|witness-bench|porep|endo) ;;
    *) echo "run.sh: unknown part '$p'" >&2; exit 2 ;;
  esac
done
want() { [[ $parts == *" $1 "* ]]; }
start=$(date +%s)
bounded() {
  [ -z "${DEADLINE_S:-}" ] && { "$@"; return; }
  local left=$((start + DEADLINE_S - $(date +%s)))
  if [ "$left" -le 5 ]; then echo "run.sh: DEADLINE_S reached, skipped: ${1##*/} ${*:2}" >&2; return 124; fi
  timeout "$left" "$@"
}
mkdir -p "$out"
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/device.txt" 2>&1 || true
export RUSTC_BOOTSTRAP=1
timed=(--test-threads=1 -Z unstable-options --report-time)
if want tests; then bounded "$here/gpu-tests" "${timed[@]}" 2>&1 | tee -a "$out/gpu-tests.log" || status=1; fi
if want tests-msm; then
  bounded "$here/gpu-tests" "${timed[@]}" msm_ 2>&1 | tee -a "$out/gpu-tests.log" || status=1
fi
if want tests-rest; then
  bounded "$here/gpu-tests" "${timed[@]}" --skip msm_ 2>&1 | tee -a "$out/gpu-tests.log" || status=1
fi
if want engine; then
  bounded "$here/gpu-engine-tests" "${timed[@]}" 2>&1 | tee -a "$out/gpu-tests.log" || status=1
fi
if want bench; then bounded "$here/gpu_bench" --json "$out/bench.json" 2>&1 | tee "$out/bench.md" || status=1; fi
if want ntt; then bounded "$here/ntt_profile" 20 24 2>&1 | tee "$out/ntt-profile.txt" || status=1; fi
if want msm; then bounded "$here/msm_bench" --json "$out/msm.json" 2>&1 | tee "$out/msm.md" || status=1; fi
if want prove; then
  bounded "$here/cuzk" bench --backend cuda -k 20 -p 2 --repeat 3 --json > "$out/prove.json" || status=1
fi
if want units; then
  {
    bounded "$here/gpu-tests" --test-threads=1 fr_operations fq_operations fp64_units || status=1
    bounded "$here/gpu-engine-tests" --test-threads=1 fp64_units || status=1
    bounded "$here/gpu_bench" || status=1
    bounded "$here/ntt_profile" 24 27 || status=1
    bounded "$here/msm_bench" --sizes 24,27 --curves g1 --units integer,fp64,mixed --ark-max 0 || status=1
  } > "$out/units.log" 2>&1
  cat "$out/units.log"
fi
if want units-porep; then
  for u in integer fp64 mixed; do
    bounded "$here/cuzk" bench --backend cuda --circuit porep-like --witness-only -k 27 -p 1 --repeat 1 \
      --timing-key --no-baseline --check-sample 0 --mul-units "$u" --json || status=1
  done > "$out/units-porep.log" 2>&1
  cat "$out/units-porep.log"
fi
if want witness; then
  {
    bounded "$here/gpu-tests" --test-threads=1 device_evaluation device_check evaluated_on_the_device msm_ones \
      batched_affine_sums widened_batches || status=1
    bounded "$here/gpu-engine-tests" --test-threads=1 || status=1
  } > "$out/witness.log" 2>&1
  cat "$out/witness.log"
fi
if want witness-bench; then
  {
    bounded "$here/gpu_bench" || status=1
    bounded "$here/msm_bench" --sizes 24 --curves g1,g2 --scalars bits,porep --ark-max 0 --ones apart,round \
      || status=1
    bounded "$here/msm_bench" --sizes 27 --curves g1 --scalars bits --ark-max 0 --batches 27 --windows 16,20 \
      --ones apart,round --sorts binned,direct || status=1
    bounded "$here/msm_bench" --sizes 16,19 --curves g2 --scalars bits --ark-max 0 --ones apart,round || status=1
  } > "$out/witness-bench.log" 2>&1
  cat "$out/witness-bench.log"
fi
if want porep; then
  bounded "$here/cuzk" bench --backend cuda --circuit porep-like --witness-only -k 27 -p 1 --repeat 1 \
    --timing-key --no-baseline --check-sample 0 --json > "$out/porep.log" 2>&1 || status=1
  cat "$out/porep.log"
fi
if want endo; then
  {
    bounded "$here/msm_bench" --sizes 26 --curves g1 --scalars random --ark-max 0 --batches 27 --windows 20 \
      --json "$out/endo-random.json" || status=1
    bounded "$here/msm_bench" --sizes 27 --curves g1 --scalars half --ark-max 0 --batches 27 \
      --windows 16,20,22 --json "$out/endo-half.json" || status=1
  } > "$out/endo.log" 2>&1
  cat "$out/endo.log"
fi
{
  echo "# cuzk GPU run, $(date -u +%Y-%m-%dT%H:%MZ), parts:$parts"
  cat "$out/device.txt"
  [ -e "$out/gpu-tests.log" ] && grep -E "^test result|FAILED|panicked" "$out/gpu-tests.log"
  for f in units.log units-porep.log witness.log witness-bench.log porep.log endo.log; do
    [ -e "$out/$f" ] && grep -E "^test result|FAILED|panicked|[Ee]rror" "$out/$f"
  done
  for f in bench.md msm.md prove.json; do [ -e "$out/$f" ] && cat "$out/$f"; done
} > "$out/summary.md"
exit $status
"##;

#[cfg(test)]
mod tests {
    use super::RUN_SH;
    use std::process::Command;
    use std::time::{Duration, Instant};

    #[test]
    fn run_sh_stops_a_part_at_its_deadline_and_still_writes_the_summary() {
        // A fake test binary that would run for a minute: DEADLINE_S=6 stops it after 6 s, skips
        // the next part (nothing left), fails the run and writes summary.md all the same.
        let dir = std::env::temp_dir().join(format!("cuzk-run-sh-{}", std::process::id()));
        let out = dir.join("out");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("run.sh"), RUN_SH).unwrap();
        let slow = dir.join("gpu-tests");
        std::fs::write(&slow, "#!/bin/sh\necho 'test slow ... started'\nsleep 60\n").unwrap();
        let chmod = Command::new("chmod").arg("+x").arg(&slow).status().unwrap();
        assert!(chmod.success());
        let started = Instant::now();
        let run = Command::new("bash")
            .arg(dir.join("run.sh"))
            .arg(&out)
            .args(["tests", "engine"])
            .env("DEADLINE_S", "6")
            .output()
            .unwrap();
        let took = started.elapsed();
        let stderr = String::from_utf8_lossy(&run.stderr);
        let log = std::fs::read_to_string(out.join("gpu-tests.log")).unwrap_or_default();
        let summary = out.join("summary.md").exists();
        std::fs::remove_dir_all(&dir).ok();
        assert!(took >= Duration::from_secs(5) && took < Duration::from_secs(30), "took {took:?}");
        assert!(!run.status.success(), "a stopped part fails the run");
        assert!(log.contains("started"), "the part ran until its deadline: {log:?}");
        // The parts' own output (the skip notice included) goes to their logs.
        assert!(log.contains("skipped: gpu-engine-tests"), "{log} {stderr}");
        assert!(summary, "summary.md written");
    }

    #[test]
    fn run_sh_splits_the_tests_by_name_with_their_times_and_runs_the_endomorphism_shape() {
        // Fake binaries that echo their arguments and whether the harness may take --report-time.
        let dir = std::env::temp_dir().join(format!("cuzk-run-sh-parts-{}", std::process::id()));
        let out = dir.join("out");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("run.sh"), RUN_SH).unwrap();
        for name in ["gpu-tests", "msm_bench"] {
            let fake = dir.join(name);
            std::fs::write(&fake, format!("#!/bin/sh\necho \"{name} [$RUSTC_BOOTSTRAP] $*\"\n")).unwrap();
            assert!(Command::new("chmod").arg("+x").arg(&fake).status().unwrap().success());
        }
        let run = Command::new("bash")
            .arg(dir.join("run.sh"))
            .arg(&out)
            .args(["tests-msm", "tests-rest", "endo"])
            .env_remove("RUSTC_BOOTSTRAP")
            .output()
            .unwrap();
        let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap_or_default();
        let (tests, endo, summary) =
            (read("gpu-tests.log"), read("endo.log"), out.join("summary.md").exists());
        std::fs::remove_dir_all(&dir).ok();
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let timed = "gpu-tests [1] --test-threads=1 -Z unstable-options --report-time";
        let lines: Vec<&str> = tests.lines().collect();
        assert_eq!(lines, [format!("{timed} msm_"), format!("{timed} --skip msm_")], "{tests}");
        let runs: Vec<&str> = endo.lines().collect();
        assert_eq!(runs.len(), 2, "{endo}");
        assert!(runs[0].contains("--sizes 26 --curves g1 --scalars random"), "{endo}");
        assert!(runs[1].contains("--sizes 27 --curves g1 --scalars half"), "{endo}");
        assert!(runs.iter().all(|r| r.contains("--batches 27")), "{endo}");
        assert!(summary, "summary.md written");
    }
}
