//! An OCI registry on loopback (the pinned distribution registry, built by
//! [`registry_build`]), for tests that push images as users push them and
//! let the nodes' containerd pull them. Plain HTTP: containerd and crane
//! speak it to `localhost` without being told.

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use anyhow::Context as _;

use crate::go::registry_build;
use crate::host::{ports::free_port, processes};
use crate::wait::{self, Seen};

/// A registry serving until dropped.
pub struct Registry {
    /// `localhost:<port>`, as image references name it.
    pub address: String,
    child: Child,
}

impl Registry {
    /// Starts a registry storing under `dir` (its log `registry.log` there),
    /// ready once `/v2/` answers 200.
    pub async fn start(dir: &Path) -> anyhow::Result<Registry> {
        let bin = registry_build::ensure_registry_built(&mut |line| eprintln!("{line}"))?;
        let port = free_port()?;
        std::fs::create_dir_all(dir)?;
        let config = dir.join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog: {{level: warn}}\nstorage:\n  filesystem: {{rootdirectory: {}}}\nhttp: {{addr: 127.0.0.1:{port}}}\n",
                dir.join("data").display()
            ),
        )?;
        let mut command = Command::new(bin.join("registry"));
        command.arg("serve").arg(&config);
        processes::log_to(&mut command, &dir.join("registry.log"))?;
        let child = processes::spawn(command).context("starting the registry")?;
        let registry = Registry {
            address: format!("localhost:{port}"),
            child,
        };
        wait::try_until(
            format!("the registry on {}", registry.address),
            Duration::from_secs(30),
            || async {
                match crate::relay::http_get(&format!("127.0.0.1:{port}"), "/v2/").await {
                    Ok((200, _)) => Seen::Ready(()),
                    Ok((code, body)) => Seen::Waiting(format!("HTTP {code}: {body}")),
                    Err(e) => Seen::Waiting(e.to_string()),
                }
            },
        )
        .await?;
        Ok(registry)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
