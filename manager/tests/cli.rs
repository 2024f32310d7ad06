//! The `jobrelay-manager` binary's command line, as an operator meets it.

use std::process::Command;

fn manager() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_jobrelay-manager"));
    cmd.env_remove("JOBRELAY_ORIGIN")
        .env_remove("JOBRELAY_LISTEN");
    cmd
}

#[test]
fn help_documents_every_flag_with_its_environment_variable() {
    let out = manager()
        .arg("--help")
        .output()
        .expect("run jobrelay-manager");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--listen",
        "--origin",
        "--heartbeat-interval",
        "--insecure-plaintext",
    ] {
        assert!(help.contains(flag), "--help lists {flag}:\n{help}");
    }
    assert!(
        help.contains("JOBRELAY_ORIGIN"),
        "--help names the environment variables:\n{help}"
    );
}

#[test]
fn a_missing_origin_is_named_in_the_error() {
    let out = manager().output().expect("run jobrelay-manager");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--origin"), "{stderr}");
}

#[test]
fn an_invalid_listen_address_is_named_in_the_error() {
    let out = manager()
        .args(["--origin=test", "--listen=nowhere"])
        .output()
        .expect("run jobrelay-manager");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--listen") && stderr.contains("nowhere"),
        "{stderr}"
    );
}

#[test]
fn an_invalid_heartbeat_interval_is_named_with_its_value() {
    let out = manager()
        .args(["--origin=test", "--heartbeat-interval=-5s"])
        .output()
        .expect("run jobrelay-manager");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--heartbeat-interval")
            && stderr.contains("-5s")
            && stderr.contains("negative"),
        "{stderr}"
    );
}
