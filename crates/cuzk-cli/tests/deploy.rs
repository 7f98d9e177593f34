//! The deployment files in `deploy/` agree with the binary: the Kubernetes example's configuration
//! passes `cuzk config --check`, and every flag the container and the systemd unit pass exists.

use std::process::Command;

fn cuzk() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cuzk"))
}

fn deploy(file: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy").join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_kubernetes_configuration_checks() {
    let yaml = deploy("kubernetes.yaml");
    let start = yaml.find("cuzk.toml: |\n").expect("a cuzk.toml in the ConfigMap") + "cuzk.toml: |\n".len();
    let toml: String = yaml[start..]
        .lines()
        .take_while(|l| l.starts_with("    "))
        .map(|l| format!("{}\n", &l[4..]))
        .collect();
    assert!(toml.contains("listen = "), "{toml}");
    let dir = cuzk_testkit::TempDir::new("deploy");
    let path = dir.join("cuzk.toml");
    std::fs::write(&path, &toml).unwrap();
    let out = cuzk().arg("config").arg("--check").arg(&path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_container_and_the_unit_pass_flags_that_exist() {
    let help = cuzk().args(["serve", "--help"]).output().unwrap();
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    // The lines that start the daemon: the unit's ExecStart, the container's CMD, the pod's args.
    let text = deploy("Dockerfile") + &deploy("cuzk.service") + &deploy("kubernetes.yaml");
    let starts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("ExecStart=") || l.starts_with("CMD ") || l.starts_with("args:"))
        .collect();
    assert_eq!(starts.len(), 3, "{starts:?}");
    let flags: Vec<&str> = starts
        .iter()
        .flat_map(|l| l.split(|c: char| c.is_whitespace() || c == '"' || c == '[' || c == ','))
        .filter(|w| w.starts_with("--"))
        .collect();
    for flag in ["--listen", "--metrics-listen", "--key-dir", "--log-format", "--config"] {
        assert!(flags.contains(&flag), "{flag} is not used in deploy/: {flags:?}");
    }
    for flag in &flags {
        assert!(help.contains(flag), "`cuzk serve` has no {flag}");
    }
}
