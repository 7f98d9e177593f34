//! `cuzk filecoin` as a user runs it: seal a 2 KiB test sector, prove its C2 and verify it with
//! Filecoin's verify_seal, prove its WinningPoSt side by side with bellperson; bad input is an exit
//! status of failure with the reason on standard error.

use std::process::{Command, Output};

fn cuzk(args: &[&str]) -> Output {
    // Sets FIL_PROOFS_PARAMETER_CACHE (and the parent cache) for this process and so for cuzk.
    cuzk_testkit::filecoin_parameter_dir();
    let out = Command::new(env!("CARGO_BIN_EXE_cuzk")).args(args).output().expect("run cuzk");
    println!(
        "$ cuzk {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn a_test_sector_proves_and_verifies_from_the_command_line() {
    let dir = cuzk_testkit::TempDir::new("filecoin-cli");
    let sector = dir.join("sector");
    let s = sector.to_str().unwrap();

    let out = cuzk(&["filecoin", "test-sector", "--dir", s, "--json"]);
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["registered_proof"], "StackedDrg2KiBV1_1");

    let out = cuzk(&["filecoin", "c2", "--sector", s, "--backend", "cpu"]);
    assert!(out.status.success());
    assert_eq!(std::fs::read(sector.join("proof.bin")).expect("proof.bin").len(), 192);
    assert!(cuzk(&["filecoin", "verify", "--sector", s]).status.success());

    // The sector's PoRep shape, with its first partition's witness by the size of its values.
    let out = cuzk(&["filecoin", "shape", "--sector", s, "--json"]);
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["proof"], "StackedDrg2KiBV1_1");
    let w = &report["witness"];
    let n = |k: &str| w[k].as_u64().unwrap_or_else(|| panic!("{k} in {w}"));
    assert_eq!(n("variables"), report["aux"].as_u64().unwrap(), "{report}");
    let classes = ["zeros", "ones", "below_2_16", "below_2_64", "below_2_128", "wider"];
    assert_eq!(classes.iter().map(|k| n(k)).sum::<u64>(), n("variables"), "{w}");
    // A PoRep witness is mostly bits.
    assert!((n("zeros") + n("ones")) * 2 > n("variables"), "{w}");

    let out = cuzk(&[
        "filecoin",
        "post",
        "--sector",
        s,
        "--kind",
        "winning",
        "--backend",
        "cpu",
        "--compare",
        "--json",
    ]);
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["verified"], true);
    assert_eq!(report["compared"]["identical"], true);

    // A damaged proof fails verification; a C1 file that is not JSON fails with its reason.
    let mut proof = std::fs::read(sector.join("proof.bin")).unwrap();
    proof[10] ^= 1;
    let bad = dir.join("bad.bin");
    std::fs::write(&bad, &proof).unwrap();
    let out = cuzk(&["filecoin", "verify", "--sector", s, "--proof", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    let garbage = dir.join("garbage.json");
    std::fs::write(&garbage, b"{not json").unwrap();
    let id = "00".repeat(32);
    let out = cuzk(&[
        "filecoin",
        "c2",
        "--c1",
        garbage.to_str().unwrap(),
        "--prover-id",
        &id,
        "--sector-id",
        "1",
        "--backend",
        "cpu",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("C1 output"), "the reason is named");
}

#[test]
fn a_circuits_shape_is_recorded_and_its_rows_profiled_without_parameters() {
    let out = cuzk(&["filecoin", "shape", "--circuit", "window", "--size", "2KiB", "--json"]);
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["proof"], "StackedDrgWindow2KiBV1_2");
    let constraints = report["constraints"].as_u64().unwrap();
    assert!(constraints > 10_000, "{report}");
    let matrices = report["matrices"].as_array().unwrap();
    assert_eq!(matrices.iter().map(|m| m["matrix"].as_str().unwrap()).collect::<Vec<_>>(), ["A", "B", "C"]);
    for m in matrices {
        // A row per constraint (the input rows are the prover's, not the shape's).
        assert_eq!(m["rows"].as_u64(), Some(constraints), "{m}");
        let entries = m["entries"].as_u64().unwrap();
        let bounds = m["bounds"].as_array().unwrap();
        let at =
            |long_above: serde_json::Value| bounds.iter().find(|b| b["long_above"] == long_above).unwrap();
        // Every row a thread's: no long rows; sending the long rows to warps never takes more steps
        // on these rows (a warp's steps are its longest row's entries).
        let all = at(serde_json::Value::Null);
        assert_eq!((all["long_rows"].as_u64(), all["warp_steps"].as_u64()), (Some(0), Some(0)), "{m}");
        let split = at(16.into());
        assert!(split["steps"].as_u64() <= all["steps"].as_u64(), "{m}");
        assert!(split["long_entries"].as_u64().unwrap() <= entries, "{m}");
        let longest = m["longest"].as_u64().unwrap();
        assert_eq!(split["long_rows"].as_u64().unwrap() > 0, longest > 16, "{m}");
    }
    // Poseidon's rows of A are long: most of its entries lie in rows of more than 16.
    let a = &matrices[0];
    let split = a["bounds"].as_array().unwrap().iter().find(|b| b["long_above"] == 16).unwrap();
    assert!(split["long_entries"].as_u64().unwrap() * 2 > a["entries"].as_u64().unwrap(), "{a}");
    // A size Filecoin does not have is refused, naming the sizes it has.
    let out = cuzk(&["filecoin", "shape", "--size", "3KiB"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("32GiB"), "the sizes are named");
}
