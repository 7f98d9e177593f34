//! The `cuzk` binary: prove, bench against ark-groth16, and a clear refusal of the missing backend.

use std::process::Command;

use cuzk_testkit::TempDir;

fn cuzk(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cuzk")).args(args).output().expect("run cuzk")
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "cuzk failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

#[test]
fn prove_reports_stages_and_verified_proofs() {
    let v = json(&cuzk(&["prove", "-k", "7", "-p", "3", "--backend", "cpu", "--json", "--seed", "5"]));
    assert_eq!(v["command"], "prove");
    assert_eq!(v["backend"], "cpu");
    assert_eq!(v["partitions"], 3);
    assert_eq!(v["proofs_verified"], 3);
    assert_eq!(v["constraints"], 126);
    assert_eq!(v["synthesis_mode"], "full");
    for stage in ["synthesis", "witness_map", "msm_a", "msm_b_g2", "msm_h", "total"] {
        assert!(v["stages"][stage].as_f64().is_some_and(|s| s > 0.0), "stage {stage}: {}", v["stages"]);
    }
}

#[test]
fn witness_only_proofs_are_identical_to_ark_groth16_in_both_paths() {
    for extra in [&[][..], &["--pipeline"][..]] {
        let mut args = vec!["bench", "-k", "7", "-p", "2", "--repeat", "1", "--witness-only", "--json"];
        args.extend_from_slice(extra);
        let v = json(&cuzk(&args));
        assert_eq!(v["synthesis_mode"], "witness-only", "{extra:?}");
        assert_eq!(v["identical_to_arkworks"], true, "{extra:?}");
        assert_eq!(v["proofs_verified"], 2, "{extra:?}");
    }
}

#[test]
fn bench_runs_ark_groth16_side_by_side_and_proofs_are_identical() {
    let v = json(&cuzk(&["bench", "-k", "6", "-p", "2", "--repeat", "2", "--json"]));
    assert_eq!(v["command"], "bench");
    assert_eq!(v["identical_to_arkworks"], true);
    assert_eq!(v["key_on_device"], serde_json::json!([]), "a CPU key sits on no GPU");
    // Both sides repeated the same number of times, summarised by one rule: the median of two runs is
    // their mean, between the two.
    for side in [&v["wall"], &v["arkworks"]["wall"], &v["arkworks"]["prove"]] {
        assert_eq!(side["count"], 2, "{side}");
        let (min, median, max) =
            (side["min"].as_f64().unwrap(), side["median"].as_f64().unwrap(), side["max"].as_f64().unwrap());
        assert!(min <= median && median <= max && (median - (min + max) / 2.0).abs() < 1e-12, "{side}");
    }
    assert_eq!(v["seconds"], v["wall"]["median"]);
    let ratio = v["end_to_end_vs_arkworks"].as_f64().unwrap();
    let expected = v["arkworks"]["wall"]["median"].as_f64().unwrap() / v["seconds"].as_f64().unwrap();
    assert!((ratio - expected).abs() < 1e-9 * expected, "{ratio} vs {expected}");
    // The GPU-time ratio only where there is GPU time.
    assert_eq!(v["gpu_time_vs_arkworks"].is_null(), v["gpu_seconds"].is_null(), "{v}");
    if v["backend"] == "cpu" {
        assert!(
            v["backend_note"].as_str().is_some_and(|n| n.contains("CUDA")),
            "auto says why it chose the CPU"
        );
    }
}

#[test]
fn timing_key_proofs_equal_ark_groth16s_and_their_closed_form() {
    let v = json(&cuzk(&["bench", "-k", "7", "-p", "2", "--repeat", "1", "--timing-key", "--json"]));
    assert_eq!(v["key"], "timing");
    assert_eq!(v["identical_to_arkworks"], true);
    assert_eq!(v["equal_to_closed_form"], true);
    assert_eq!(v["proofs_verified"], 0, "a timing key's proofs do not verify, so none are claimed");
    // Without the baseline the closed form still checks every proof of every run.
    let mut args = vec!["bench", "--circuit", "porep-like", "-k", "10", "-p", "2", "--repeat", "2"];
    args.extend_from_slice(&["--timing-key", "--no-baseline", "--witness-only", "--json"]);
    let v = json(&cuzk(&args));
    assert_eq!(
        (&v["identical_to_arkworks"], &v["equal_to_closed_form"]),
        (&serde_json::Value::Null, &serde_json::json!(true))
    );
    assert_eq!(v["closed_form_checked"], 2, "every partition checked");
    // A sample: the report says how many were checked.
    let v = json(&cuzk(&[
        "bench",
        "-k",
        "7",
        "-p",
        "5",
        "--repeat",
        "1",
        "--timing-key",
        "--check-sample",
        "2",
        "--json",
    ]));
    assert_eq!(
        (&v["equal_to_closed_form"], &v["closed_form_checked"]),
        (&serde_json::json!(true), &serde_json::json!(2))
    );
    let v = json(&cuzk(&["bench", "-k", "7", "-p", "1", "--repeat", "1", "--json"]));
    assert_eq!(v["equal_to_closed_form"], serde_json::Value::Null, "a real key has no closed form");
}

#[test]
fn pipelined_porep_like_proofs_with_one_or_two_gpu_workers_and_merged_locks_equal_ark_groth16() {
    // Two GPU workers with two locks, then side by side one worker and merged locks (--compare).
    let mut args = vec!["bench", "--circuit", "porep-like", "-k", "10", "-p", "2", "--proofs", "2"];
    args.extend_from_slice(&["--pipeline", "--repeat", "1", "--backend", "cpu", "--json"]);
    args.extend_from_slice(&["--gpu-workers", "2", "--compare"]);
    let v = json(&cuzk(&args));
    assert_eq!(v["circuit"], "porep-like");
    assert_eq!((v["proofs"].as_u64(), v["partitions"].as_u64()), (Some(2), Some(4)));
    assert_eq!(v["identical_to_arkworks"], true);
    assert_eq!(v["proofs_verified"], 4);
    assert_eq!((v["gpu_workers"].as_u64(), &v["merge_locks"]), (Some(2), &serde_json::json!(false)));
    assert_eq!(v["proof_prove_seconds"].as_array().map(Vec::len), Some(2), "one time per proof");
    assert!(v["kernel_seconds_per_partition"].as_f64().is_some_and(|s| s > 0.0));
    let variants: Vec<(Option<u64>, bool, bool)> = v["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["gpu_workers"].as_u64(), x["merge_locks"] == true, x["same_proofs"] == true))
        .collect();
    assert_eq!(variants, [(Some(1), false, true), (Some(2), true, true)]);
    let out = cuzk(&["bench", "-k", "8", "--proofs", "2"]);
    assert!(!out.status.success(), "several proofs need --pipeline");
}

#[test]
fn human_output_is_a_table() {
    let out = cuzk(&["prove", "-k", "5", "-p", "1", "--backend", "cpu"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("proofs verified") && text.contains("MSM B (G2)"), "{text}");
}

#[test]
fn cuda_backend_proves_or_fails_with_a_clear_message() {
    let out = cuzk(&["prove", "--backend", "cuda", "-k", "5"]);
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        assert!(String::from_utf8_lossy(&out.stdout).contains("proofs verified"), "{err}");
    } else {
        assert!(err.contains("cuda backend unavailable") && err.contains("no usable CUDA GPU"), "{err}");
    }
}

#[test]
fn bad_arguments_are_refused() {
    assert!(!cuzk(&["prove", "--backend", "tpu"]).status.success());
    assert!(!cuzk(&["prove", "-k", "40"]).status.success());
    assert!(!cuzk(&["prove", "-p", "0"]).status.success());
}

#[test]
fn timeline_summarises_a_scheduler_timeline_and_refuses_bad_files() {
    use cuzk::sched::{Config, JobId, Priority, Scheduler, Stage};
    use cuzk_testkit::sim::SimStages;
    let ms = std::time::Duration::from_millis(1);
    let stages = SimStages {
        synthesis: ms,
        upload: 2 * ms,
        kernels: vec![(Stage::Msms, 10 * ms)],
        ..SimStages::default()
    };
    let s = Scheduler::new(stages, Config { partition_workers: 2, ..Config::default() });
    s.submit(JobId(1), Priority::Normal, None, vec![0; 4]).unwrap().wait().unwrap();
    let dir = TempDir::new("cli-timeline");
    let (file, chrome, svg) = (dir.join("t.jsonl"), dir.join("t.trace.json"), dir.join("t.svg"));
    std::fs::write(&file, s.timeline().to_json_lines()).unwrap();
    let (f, c, g) = (file.to_str().unwrap(), chrome.to_str().unwrap(), svg.to_str().unwrap());
    let out = cuzk(&["timeline", f, "--chrome", c, "--svg", g]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("kernel utilisation") && text.contains("lock-bracket utilisation"), "{text}");
    let trace: serde_json::Value = serde_json::from_slice(&std::fs::read(&chrome).unwrap()).unwrap();
    assert!(trace.as_array().is_some_and(|a| !a.is_empty()));
    let drawing = std::fs::read_to_string(&svg).unwrap();
    assert!(drawing.starts_with("<svg") && drawing.contains(">gpu0-kernels</text>"), "{drawing}");
    // Four partitions: synthesis, upload and the kernel each get a bar.
    assert_eq!(drawing.matches(": synthesis ").count(), 4);
    assert_eq!(drawing.matches(": kernel:msms ").count(), 4);
    std::fs::write(&file, "not json\n").unwrap();
    let out = cuzk(&["timeline", file.to_str().unwrap()]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("line 1"));
}

#[test]
fn pipelined_bench_writes_a_timeline_and_matches_ark_groth16() {
    let dir = TempDir::new("cli-pipeline");
    let file = dir.join("pipeline.jsonl");
    let f = file.to_str().unwrap();
    let v = json(&cuzk(&[
        "bench",
        "-k",
        "7",
        "-p",
        "3",
        "--repeat",
        "1",
        "--json",
        "--pipeline",
        "--partition-workers",
        "2",
        "--timeline",
        f,
    ]));
    assert_eq!(v["identical_to_arkworks"], true);
    assert!(v["kernel_utilization"].as_f64().is_some_and(|u| u > 0.0 && u <= 1.0));
    assert!(v["stages"]["msms"].as_f64().is_some_and(|s| s > 0.0));
    // The pipeline checks each proof in its finish step: the stage table has it, not 0.
    assert!(v["stages"]["self_check"].as_f64().is_some_and(|s| s > 0.0), "{}", v["stages"]);
    // On the CPU the kernel spans are the prover's host phases, and the report says so.
    if v["backend"] == "cpu" {
        assert_eq!(v["kernel_spans"], "host");
    }
    let report = cuzk(&["timeline", f]);
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(report.status.success() && text.contains("kernel utilisation"), "{text}");
    assert!(text.contains("host spans") || text.contains("placed by the device clock"), "{text}");
    for flag in [&["--timeline", f][..], &["--partition-workers", "2"][..]] {
        let refused = cuzk(&[&["bench"][..], flag].concat());
        let err = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success() && err.contains("--pipeline"), "{flag:?} needs --pipeline: {err}");
    }
}

#[test]
fn bench_synth_reports_the_rate_in_both_modes() {
    for circuit in ["porep-like", "synthetic"] {
        let mut rates = Vec::new();
        for mode in ["full", "witness-only"] {
            let v = json(&cuzk(&[
                "bench",
                "synth",
                "--circuit",
                circuit,
                "-k",
                "10",
                "-p",
                "2",
                "--mode",
                mode,
                "--threads",
                "1",
                "--json",
            ]));
            assert_eq!(v["mode"], mode);
            assert_eq!(v["partitions"], 2);
            assert_eq!(v["threads"], 1);
            let constraints = v["constraints"].as_u64().unwrap();
            assert!(constraints > 900 && constraints < 1024, "{circuit}: {v}");
            let seconds = v["seconds"].as_f64().unwrap();
            let rate = v["constraints_per_second"].as_f64().unwrap();
            assert!(seconds > 0.0 && (rate * seconds / (2.0 * constraints as f64) - 1.0).abs() < 1e-6, "{v}");
            assert_eq!(v["record_seconds"].is_f64(), mode == "witness-only", "{v}");
            rates.push(rate);
        }
        assert_eq!(rates.len(), 2);
    }
    let out = cuzk(&["bench", "synth", "--circuit", "porep-like", "-k", "9"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("supported are 10 to 27"));
    assert!(!cuzk(&["bench", "synth", "--mode", "fast"]).status.success());
    assert!(!cuzk(&["bench", "-k", "6", "synth"]).status.success(), "bench arguments and synth do not mix");
}

#[test]
fn keygen_saves_a_key_and_a_shape_that_load_back() {
    let dir = TempDir::new("cli-keygen");
    let d = dir.path().to_str().unwrap();
    let v = json(&cuzk(&["keygen", "--circuit", "synthetic", "-k", "8", "--key-dir", d, "--json"]));
    assert_eq!(v["circuit"], "synthetic");
    assert_eq!(v["constraints"], 254);
    assert!(v["keygen_seconds"].as_f64().is_some_and(|s| s > 0.0));
    let id = v["shape_id"].as_str().unwrap();
    let store = cuzk::keystore::KeyStore::open(dir.path()).unwrap();
    let (pk, _) = store.load(id).unwrap();
    assert_eq!(pk.a_query.len(), 2 + 255, "instance (1, one input) and witness (255) variables");
    assert_eq!(store.load_shape(id).unwrap().counts().constraints, 254);
    let args =
        ["bench", "load", "--circuit", "synthetic", "-k", "8", "--key-dir", d, "--repeat", "2", "--json"];
    let v = json(&cuzk(&args));
    assert_eq!(v["shape_id"], id);
    assert_eq!(v["synthesis_mode"], "witness-only", "the engine attaches the stored shape");
    assert_eq!(v["key_bytes"], std::fs::metadata(store.path_for(id).unwrap()).unwrap().len());
    assert!(v["engine_load"]["median"].as_f64().is_some_and(|s| s > 0.0));
    assert_eq!(v["engine_load"]["count"], 2);
    // On the backend asked for: `auto` finds no GPU here and says so; `cpu` is the CPU.
    let on_cpu = json(&cuzk(&[&args[..], &["--backend", "cpu"][..]].concat()));
    assert_eq!(on_cpu["backend"], "cpu");
    assert!(v["backend"] == "cpu" || v["backend"] == "cuda", "{}", v["backend"]);
    let missing = cuzk(&["bench", "load", "--circuit", "synthetic", "-k", "9", "--key-dir", d]);
    assert!(!missing.status.success() && String::from_utf8_lossy(&missing.stderr).contains("no such file"));
    let text = cuzk(&["keygen", "--circuit", "porep-like", "-k", "10", "--key-dir", d]);
    assert!(text.status.success() && String::from_utf8_lossy(&text.stdout).contains("key generation"));
    assert_eq!(store.shapes().unwrap().len(), 2);
}
