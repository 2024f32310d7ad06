//! Each test cluster's audit log: its API server records every request at
//! metadata level (who, what, when, the answer's code), once it is
//! answered — so a test can tell which manager replica wrote what, and the
//! bench can count the requests each client made.

use std::path::{Path, PathBuf};

use k8s_openapi::jiff::Timestamp;

use crate::cluster::{ClusterInfo, Error};

/// Every request at metadata level, one event when it is answered (a watch
/// when it ends).
const POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
";

/// The verbs that change something.
const WRITES: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// The kube-apiserver flags that write the audit log into `dir` (the
/// cluster's folder), with the policy file they name.
pub(crate) fn flags(dir: &Path) -> Result<Vec<String>, Error> {
    let policy = dir.join("audit-policy.yaml");
    std::fs::write(&policy, POLICY).map_err(|e| Error::Io(policy.display().to_string(), e))?;
    Ok(vec![
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", dir.join("audit.log").display()),
        "--audit-log-format=json".into(),
    ])
}

/// Where a cluster's API server writes its audit log (one JSON event per
/// line), given the cluster's kubeconfig.
pub fn audit_log(cluster: &ClusterInfo) -> PathBuf {
    cluster.kubeconfig.with_file_name("audit.log")
}

/// The writes `manager`'s API server accepted from a client whose
/// user agent contains `agent`, received at `since` or later: verb, URI and
/// time of each.
pub fn writes_after(manager: &ClusterInfo, agent: &str, since: Timestamp) -> Vec<String> {
    let log = std::fs::read_to_string(audit_log(manager)).expect("the audit log");
    log.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| {
            let user_agent = event["userAgent"].as_str().unwrap_or_default();
            let write = WRITES.contains(&event["verb"].as_str().unwrap_or_default());
            let received: Option<Timestamp> = event["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| t.parse().ok());
            let accepted = event["responseStatus"]["code"]
                .as_u64()
                .is_some_and(|code| code < 300);
            user_agent.contains(agent) && write && accepted && received.is_some_and(|t| t >= since)
        })
        .map(|event| {
            format!(
                "{} {} at {}",
                event["verb"].as_str().unwrap_or_default(),
                event["requestURI"].as_str().unwrap_or_default(),
                event["requestReceivedTimestamp"]
                    .as_str()
                    .unwrap_or_default()
            )
        })
        .collect()
}
