//! `cuzk filecoin` as a user runs it: seal a 2 KiB test sector, prove its C2 and verify it with
//! Filecoin's verify_seal, prove its WinningPoSt side by side with bellperson; bad input is an exit
//! status of failure with the reason on standard error.

use std::path::PathBuf;
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
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("cuzk-filecoin-cli-{nanos}"));
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
    let _ = std::fs::remove_dir_all(&dir);
}
