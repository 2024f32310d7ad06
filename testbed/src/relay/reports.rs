//! What a running relay says of itself: the manager's metrics (the leading
//! replica's), the replicas' readiness, the logs of its replicas and agents,
//! and the sessions those logs show.

use std::time::Duration;

use jobrelay_process::health::RELAY;
use tonic::transport::Endpoint;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use super::Relay;
use crate::wait::{self, Seen};

impl Relay {
    /// The `/metrics` text of manager replica `index`.
    pub async fn replica_metrics(&self, index: usize) -> anyhow::Result<String> {
        let (_, body) = http_get(&self.replicas[index].metrics_addr, "/metrics").await?;
        Ok(body)
    }

    /// Waits until manager replica `index` is Ready as its readiness probe
    /// tells it (its caches synced, leading or not).
    pub async fn wait_replica_ready(&self, index: usize) -> anyhow::Result<()> {
        let addr = &self.replicas[index].health_addr;
        wait::try_until(
            format!("manager-{index} ready"),
            Duration::from_secs(60),
            || async {
                match serving_status(addr, RELAY).await {
                    Ok(ServingStatus::Serving) => Seen::Ready(()),
                    other => Seen::Waiting(format!("{other:?}")),
                }
            },
        )
        .await?;
        Ok(())
    }

    /// The log of manager replica `index` so far.
    pub fn replica_log(&self, index: usize) -> String {
        std::fs::read_to_string(&self.replicas[index].log).unwrap_or_default()
    }

    /// The `/metrics` text of the leading manager replica (of replica 0
    /// when none says it leads).
    pub async fn metrics(&self) -> anyhow::Result<String> {
        for index in 1..self.replicas.len() {
            if let Ok(text) = self.replica_metrics(index).await
                && text.lines().any(|l| l == "jobrelay_leader 1")
            {
                return Ok(text);
            }
        }
        self.replica_metrics(0).await
    }

    /// The value of one metric (with its labels, e.g.
    /// `name{reason="x"}`), if present.
    pub async fn metric(&self, name: &str) -> anyhow::Result<Option<f64>> {
        Ok(metric_in(&self.metrics().await?, name))
    }

    /// The manager's log so far (every replica's, one after the other).
    pub fn manager_log(&self) -> String {
        (0..self.replicas.len())
            .map(|index| self.replica_log(index))
            .collect()
    }

    /// The `/metrics` text of the agent of `worker`.
    pub async fn agent_metrics(&self, worker: &str) -> anyhow::Result<String> {
        let setup = self
            .agent_setups
            .get(worker)
            .ok_or_else(|| anyhow::anyhow!("no agent for worker {worker}"))?;
        let (_, body) = http_get(&setup.metrics_addr, "/metrics").await?;
        Ok(body)
    }

    /// The log of the agent of `worker` so far.
    pub fn agent_log(&self, worker: &str) -> String {
        std::fs::read_to_string(self.logs.join(format!("jobrelay-agent-{worker}.log")))
            .unwrap_or_default()
    }

    /// Sessions of `cluster` the manager has logged as connected so far.
    pub fn sessions_opened(&self, cluster: &str) -> usize {
        self.manager_log()
            .lines()
            .filter(|l| agent_connected(l, cluster))
            .count()
    }

    /// Waits until the manager logged `count` sessions of `cluster` in all.
    pub async fn wait_sessions(&self, cluster: &str, count: usize) -> anyhow::Result<()> {
        wait::try_until(
            format!("session {count} of agent {cluster} with the manager"),
            Duration::from_secs(60),
            || {
                let opened = self.sessions_opened(cluster);
                let log = self.manager_log();
                let last = log.lines().last().unwrap_or("(empty log)").to_string();
                async move {
                    if opened >= count {
                        Seen::Ready(())
                    } else {
                        Seen::Waiting(format!("{opened} sessions; manager log ends with: {last}"))
                    }
                }
            },
        )
        .await?;
        Ok(())
    }
}

/// Whether a line of the manager's log says the agent of `cluster` opened a
/// session with it.
pub fn agent_connected(line: &str, cluster: &str) -> bool {
    line.contains("agent connected") && line.contains(&format!("cluster={cluster}"))
}

/// The serving status of `service` (`""` for the process, [`RELAY`] for
/// readiness) of the gRPC health service at `addr`, or what went wrong.
pub async fn serving_status(addr: &str, service: &str) -> Result<ServingStatus, String> {
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|e| e.to_string())?
        .connect_timeout(Duration::from_secs(2))
        .connect()
        .await
        .map_err(|e| format!("unreachable: {e}"))?;
    let response = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await
        .map_err(|status| format!("{:?}: {}", status.code(), status.message()))?;
    ServingStatus::try_from(response.into_inner().status).map_err(|e| e.to_string())
}

/// A plain HTTP/1.0 GET of `path` at `addr` (`127.0.0.1:<port>`): the
/// status code and the body.
pub(crate) async fn http_get(addr: &str, path: &str) -> anyhow::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: jobrelay\r\n\r\n").as_bytes())
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("no HTTP body from {addr}{path}: {response:?}"))?;
    let code = head
        .get(9..12)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("not an HTTP answer from {addr}{path}: {head:?}"))?;
    Ok((code, body.to_string()))
}

/// The value of one metric (with its labels, e.g. `name{reason="x"}`) in
/// the text of a scrape, if present.
pub fn metric_in(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// What an agent logs when its session opens; the line ends with how many
/// mirrors its Hello listed (`inventory=N`).
pub const SESSION_OPEN: &str = "session open";

/// The mirrors an agent's log line [`SESSION_OPEN`] says its Hello listed.
pub fn inventory_in(line: &str) -> Option<usize> {
    let (_, after) = line.split_once(SESSION_OPEN)?;
    after
        .split("inventory=")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
