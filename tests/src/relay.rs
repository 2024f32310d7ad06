//! jobrelay itself in a test: the manager and one agent per worker cluster,
//! run as their real binaries (built by cargo on first use) against a
//! [`ClusterSet`], talking over loopback.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::cluster::ClusterSet;
use crate::processes;
use crate::wait::{self, Seen};

/// The manager identity the tests run with.
pub const ORIGIN: &str = "e2e";

/// A running manager and its agents; the processes die with the test process.
pub struct Relay {
    pub origin: String,
    pub manager_url: String,
    /// `127.0.0.1:<port>` of the manager's `/metrics`.
    pub metrics_addr: String,
    logs: PathBuf,
    manager: Child,
    agents: Vec<Child>,
}

/// Builds `jobrelay-manager` and `jobrelay-agent` and returns their paths.
pub fn binaries() -> anyhow::Result<(PathBuf, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(&root)
        // The same package set as `cargo test -p jobrelay-e2e`, so both share every artifact.
        .args([
            "build",
            "--quiet",
            "-p",
            "jobrelay-e2e",
            "-p",
            "jobrelay-manager",
            "-p",
            "jobrelay-agent",
            "--bins",
        ])
        .status()?;
    anyhow::ensure!(
        status.success(),
        "building jobrelay-manager and jobrelay-agent failed ({status})"
    );
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let bin = target.join("debug");
    Ok((bin.join("jobrelay-manager"), bin.join("jobrelay-agent")))
}

/// How a test wants jobrelay configured.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The manager's configuration file, as YAML text.
    pub manager_config: Option<String>,
    /// The agents' configuration file, as YAML text, by worker name.
    pub agent_configs: std::collections::BTreeMap<String, String>,
}

impl Relay {
    /// Starts the manager on the set's manager cluster and one agent per
    /// worker, with the default configuration, and waits until every agent
    /// has a session.
    pub async fn start(set: &ClusterSet) -> anyhow::Result<Relay> {
        Relay::start_with(set, Options::default()).await
    }

    /// Like [`Relay::start`], configured by `options`.
    pub async fn start_with(set: &ClusterSet, options: Options) -> anyhow::Result<Relay> {
        let (manager_bin, agent_bin) = binaries()?;
        let logs = set.state_dir.join("logs");
        std::fs::create_dir_all(&logs)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let manager_url = format!("http://127.0.0.1:{port}");
        let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let metrics_addr = format!("127.0.0.1:{metrics_port}");

        let mut manager = Command::new(&manager_bin);
        manager.env("KUBECONFIG", &set.manager().kubeconfig).args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--origin",
            ORIGIN,
            "--heartbeat-interval",
            "1s",
            "--insecure-plaintext",
        ]);
        manager.args(["--metrics-listen", &metrics_addr]);
        if let Some(config) = &options.manager_config {
            let path = set.state_dir.join("jobrelay-manager.yaml");
            std::fs::write(&path, config)?;
            manager.arg("--config").arg(path);
        }
        let manager = start_logged(manager, &logs.join("jobrelay-manager.log"))?;

        let mut agents = Vec::new();
        for worker in set.workers() {
            let mut agent = Command::new(&agent_bin);
            agent.env("KUBECONFIG", &worker.kubeconfig).args([
                "--manager-url",
                &manager_url,
                "--cluster",
                &worker.name,
                "--origin",
                ORIGIN,
                "--orphan-pod-grace",
                "3s",
                "--insecure-plaintext",
            ]);
            if let Some(config) = options.agent_configs.get(&worker.name) {
                let path = set
                    .state_dir
                    .join(format!("jobrelay-agent-{}.yaml", worker.name));
                std::fs::write(&path, config)?;
                agent.arg("--config").arg(path);
            }
            agents.push(start_logged(
                agent,
                &logs.join(format!("jobrelay-agent-{}.log", worker.name)),
            )?);
        }
        let relay = Relay {
            origin: ORIGIN.into(),
            manager_url,
            metrics_addr,
            logs,
            manager,
            agents,
        };
        for worker in set.workers() {
            relay.wait_connected(&worker.name).await?;
        }
        Ok(relay)
    }

    /// Process ids: the manager first, then the agents in worker order.
    pub fn pids(&self) -> Vec<u32> {
        std::iter::once(&self.manager)
            .chain(&self.agents)
            .map(Child::id)
            .collect()
    }

    /// The manager's `/metrics` text.
    pub async fn metrics(&self) -> anyhow::Result<String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(&self.metrics_addr).await?;
        stream
            .write_all(b"GET /metrics HTTP/1.0\r\nHost: jobrelay\r\n\r\n")
            .await?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await?;
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, body)| body.to_string());
        body.ok_or_else(|| anyhow::anyhow!("no HTTP body from {}: {response:?}", self.metrics_addr))
    }

    /// The value of one metric without labels, if present.
    pub async fn metric(&self, name: &str) -> anyhow::Result<Option<f64>> {
        let text = self.metrics().await?;
        Ok(text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok()))
    }

    /// The manager's log so far.
    pub fn manager_log(&self) -> String {
        std::fs::read_to_string(self.logs.join("jobrelay-manager.log")).unwrap_or_default()
    }

    /// The log of the agent of `worker` so far.
    pub fn agent_log(&self, worker: &str) -> String {
        std::fs::read_to_string(self.logs.join(format!("jobrelay-agent-{worker}.log")))
            .unwrap_or_default()
    }

    /// Waits until the manager logged a session for `cluster`.
    async fn wait_connected(&self, cluster: &str) -> anyhow::Result<()> {
        let log = self.logs.join("jobrelay-manager.log");
        let marker = format!("cluster={cluster}");
        wait::try_until(
            format!("agent {cluster} connected to the manager"),
            Duration::from_secs(60),
            || {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let connected = text
                    .lines()
                    .any(|l| l.contains(&marker) && l.contains("agent connected"));
                let last = text.lines().last().unwrap_or("(empty log)").to_string();
                async move {
                    if connected {
                        Seen::Ready(())
                    } else {
                        Seen::Waiting(format!("manager log ends with: {last}"))
                    }
                }
            },
        )
        .await?;
        Ok(())
    }
}

impl Drop for Relay {
    /// Stops the manager and the agents (a Relay that failed to start must
    /// not leave them running beside the next one).
    fn drop(&mut self) {
        for child in std::iter::once(&mut self.manager).chain(self.agents.iter_mut()) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn start_logged(mut command: Command, log: &Path) -> anyhow::Result<Child> {
    let file = std::fs::File::create(log)?;
    command
        .env(
            "RUST_LOG",
            "info,jobrelay_manager=debug,jobrelay_agent=debug,kube=warn",
        )
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
    Ok(processes::spawn(command)?)
}
