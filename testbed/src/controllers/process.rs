//! A released controller run as a process against one test cluster: its
//! log in the state folder's `logs`, ready once an endpoint it serves on
//! loopback (its health check's `/readyz`, or its metrics) answers 200, killed by [`ControllerProcess::kill`] or with the
//! test process.

use std::path::Path;
use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context as _;

use crate::cluster::ClusterInfo;
use crate::relay::{http_get, start_logged};
use crate::wait::{self, Seen};

pub struct ControllerProcess {
    child: Mutex<Option<Child>>,
}

impl ControllerProcess {
    /// Starts `command` (its log `logs/<name>-<cluster>.log`) against
    /// `cluster` and waits up to `timeout` until `path` on loopback `port`
    /// answers 200.
    pub async fn start(
        (what, name): (&str, &str),
        cluster: &ClusterInfo,
        state_dir: &Path,
        mut command: Command,
        (port, path): (u16, &str),
        timeout: Duration,
    ) -> anyhow::Result<ControllerProcess> {
        command.env("KUBECONFIG", &cluster.kubeconfig);
        let log = state_dir
            .join("logs")
            .join(format!("{name}-{}.log", cluster.name));
        std::fs::create_dir_all(log.parent().context("logs folder")?)?;
        let process = ControllerProcess {
            child: Mutex::new(Some(start_logged(command, &log, "")?)),
        };
        wait::try_until(
            format!(
                "{what} ready on {} (http://127.0.0.1:{port}{path}; log {})",
                cluster.name,
                log.display()
            ),
            timeout,
            || async {
                match http_get(&format!("127.0.0.1:{port}"), path).await {
                    Ok((200, _)) => Seen::Ready(()),
                    Ok((code, body)) => Seen::Waiting(format!("HTTP {code}: {body}")),
                    Err(e) => Seen::Waiting(e.to_string()),
                }
            },
        )
        .await?;
        Ok(process)
    }

    /// Kills the process.
    pub fn kill(&self) {
        if let Some(mut child) = self.child.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
