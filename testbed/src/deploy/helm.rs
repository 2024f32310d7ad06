//! helm as the tests run it: the pinned binary built by `cargo xtask k8s`,
//! with a home of its own (never the user's configuration), rendering the
//! chart with no cluster, or installing it into one cluster; and the pinned
//! kubectl beside it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use crate::cluster::ClusterInfo;
use crate::go::helm_build;

/// Longer than helm or kubectl ever take here, `--wait` included; a command
/// still running then is stuck.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(240);

/// The chart under test. `JOBRELAY_HELM_CHART` points the tests at another
/// copy (e.g. one with a freshly generated CRD).
pub fn chart() -> PathBuf {
    std::env::var_os("JOBRELAY_HELM_CHART")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/helm/jobrelay"))
}

/// The output of a finished command.
pub struct Ran {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `command` to its end, feeding it `stdin`; panics if it cannot be
/// started or does not finish within [`COMMAND_TIMEOUT`].
pub async fn run(mut command: tokio::process::Command, stdin: Option<&str>) -> Ran {
    let described = format!("{:?}", command.as_std());
    command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("starting {described}: {e}"));
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("writing to {described}: {e}"));
    }
    let out = tokio::time::timeout(COMMAND_TIMEOUT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{described} did not finish within {COMMAND_TIMEOUT:?}"))
        .unwrap_or_else(|e| panic!("waiting for {described}: {e}"));
    Ran {
        success: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Gives helm, run by `command` or by a script it runs, a home of its own
/// (an empty configuration, never the user's).
pub fn own_home(command: &mut tokio::process::Command) -> &mut tokio::process::Command {
    let home = std::env::temp_dir().join("jobrelay-helm-home");
    command
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
}

/// Runs the pinned helm with its own (empty) configuration, against the
/// cluster of `kubeconfig`, or none.
pub async fn helm(kubeconfig: Option<&Path>, args: &[&str]) -> Ran {
    let binary = helm_build::helm().unwrap_or_else(|e| panic!("{e}"));
    let mut command = tokio::process::Command::new(binary);
    own_home(&mut command).args(args).env(
        "KUBECONFIG",
        kubeconfig.unwrap_or_else(|| Path::new("/dev/null")),
    );
    run(command, None).await
}

/// Runs helm against `cluster`; fails with its output unless it succeeds.
pub async fn helm_in(cluster: &ClusterInfo, args: &[String]) -> anyhow::Result<String> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ran = helm(Some(&cluster.kubeconfig), &args).await;
    anyhow::ensure!(
        ran.success,
        "helm {} in {} failed:\n{}\n{}",
        args.join(" "),
        cluster.name,
        ran.stdout,
        ran.stderr
    );
    Ok(ran.stdout)
}

/// Runs the pinned kubectl against `cluster`; fails with its output unless
/// it succeeds.
pub async fn kubectl_in(cluster: &ClusterInfo, args: &[&str]) -> anyhow::Result<String> {
    let kubectl = crate::go::controlplane::cached()?.path("kubectl");
    let mut command = tokio::process::Command::new(kubectl);
    command
        .args(["--namespace", super::NAMESPACE])
        .args(args)
        .env("KUBECONFIG", &cluster.kubeconfig);
    let ran = run(command, None).await;
    anyhow::ensure!(
        ran.success,
        "kubectl {} in {} failed:\n{}\n{}",
        args.join(" "),
        cluster.name,
        ran.stdout,
        ran.stderr
    );
    Ok(ran.stdout)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_chart_is_found_from_the_test_bed() {
        let chart = super::chart().join("Chart.yaml");
        assert!(chart.is_file(), "{} is missing", chart.display());
    }
}
