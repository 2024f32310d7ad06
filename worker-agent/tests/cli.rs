//! The `jobrelay-agent` binary's command line, as an operator meets it.

use std::process::Command;

#[test]
fn help_documents_every_flag_and_missing_ones_are_named() {
    let mut agent = Command::new(env!("CARGO_BIN_EXE_jobrelay-agent"));
    agent
        .env_remove("JOBRELAY_MANAGER_URL")
        .env_remove("JOBRELAY_CLUSTER")
        .env_remove("JOBRELAY_ORIGIN");
    let help = agent.arg("--help").output().expect("run jobrelay-agent");
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--manager-url",
        "--cluster",
        "--origin",
        "--orphan-pod-grace",
        "--insecure-plaintext",
        "JOBRELAY_CLUSTER",
    ] {
        assert!(help.contains(flag), "--help lists {flag}:\n{help}");
    }

    let mut agent = Command::new(env!("CARGO_BIN_EXE_jobrelay-agent"));
    agent
        .env_remove("JOBRELAY_MANAGER_URL")
        .env_remove("JOBRELAY_CLUSTER")
        .env_remove("JOBRELAY_ORIGIN");
    let out = agent.output().expect("run jobrelay-agent");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--manager-url") && stderr.contains("--cluster"),
        "{stderr}"
    );
}
