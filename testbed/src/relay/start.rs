//! How a relay is set up for a test: its options, the manager replicas'
//! and agents' flags, certificates and configuration files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Mutex;

use crate::certs::RelayCa;
use crate::cluster::ClusterSet;
use crate::host::ports::free_port;
use crate::relay::binaries::{Profile, binaries_of};
use crate::relay::proxy::Proxy;
use crate::relay::registration::register;

use super::{ORIGIN, Relay};

/// How a test wants jobrelay configured.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The manager's configuration file, as YAML text.
    pub manager_config: Option<String>,
    /// The agents' configuration file, as YAML text, by worker name.
    pub agent_configs: std::collections::BTreeMap<String, String>,
    /// Each agent dials the manager through a [`Proxy`] the test can cut.
    pub proxied: bool,
    /// How manager and agents are compiled.
    pub profile: Profile,
    /// Their `RUST_LOG`; by default jobrelay logs at debug level.
    pub log_filter: Option<String>,
    /// Manager replicas electing a leader (0 counts as 1); agents are given
    /// every replica's endpoint.
    pub manager_replicas: usize,
    /// Manager replicas beyond those, made but not started: the agents are
    /// given their endpoints too (refused while nothing listens, as a
    /// follower's are), so a replica started there — a rolling update's
    /// surge — is found like any other.
    pub manager_surge: usize,
    /// More flags for every manager replica (`--heartbeat-interval` and
    /// `--cluster-status-interval` given here replace the tests' 1s and 2s).
    pub manager_args: Vec<String>,
    /// More flags for every agent.
    pub agent_args: Vec<String>,
}

/// One manager replica: how to start it, the running process, where it
/// serves metrics, and its log.
pub(super) struct Replica {
    pub(super) launch: Launch,
    pub(super) child: Mutex<Option<Child>>,
    /// `https://127.0.0.1:<port>` of its Relay service.
    pub(super) url: String,
    pub(super) metrics_addr: String,
    pub(super) health_addr: String,
    pub(super) log: PathBuf,
}

impl Replica {
    /// Replica `index`, launched as `launch` says (its TLS files and
    /// configuration) on ports of its own, with the tests' flags and `more`.
    pub(super) fn new(
        index: usize,
        mut launch: Launch,
        more: &[String],
        log: PathBuf,
    ) -> anyhow::Result<Self> {
        let url = format!("https://127.0.0.1:{}", free_port()?);
        let metrics_addr = format!("127.0.0.1:{}", free_port()?);
        let health_addr = format!("127.0.0.1:{}", free_port()?);
        launch.args([
            "--listen",
            url.trim_start_matches("https://"),
            "--origin",
            ORIGIN,
            "--identity",
            &format!("manager-{index}"),
            // The leader labels this Pod in the Lease's namespace, if a
            // test made one.
            "--pod-name",
            &format!("manager-{index}"),
            "--certificate-reload-interval",
            "1s",
            "--metrics-listen",
            &metrics_addr,
            "--health-listen",
            &health_addr,
        ]);
        // The tests' quick intervals, unless `more` names its own.
        for (flag, value) in [
            ("--heartbeat-interval", "1s"),
            ("--cluster-status-interval", "2s"),
        ] {
            if !more.iter().any(|m| m.split('=').next() == Some(flag)) {
                launch.args([flag, value]);
            }
        }
        launch.args.extend(more.iter().map(Into::into));
        Ok(Replica {
            launch,
            child: Mutex::new(None),
            url,
            metrics_addr,
            health_addr,
            log,
        })
    }
}

/// Writes a configuration file `name` into the set's state directory, if
/// there is one to write; its path.
fn config_file(
    set: &ClusterSet,
    name: &str,
    text: Option<&str>,
) -> anyhow::Result<Option<PathBuf>> {
    let Some(text) = text else {
        return Ok(None);
    };
    let path = set.state_dir.join(name);
    std::fs::write(&path, text)?;
    Ok(Some(path))
}

/// The tests' log filter: jobrelay's own decisions at debug level.
const TEST_LOG_FILTER: &str = "info,jobrelay_manager=debug,jobrelay_agent=debug,kube=warn";

/// Where a worker's agent listens and finds its files.
pub(super) struct AgentSetup {
    pub(super) kubeconfig: PathBuf,
    pub(super) manager_url: String,
    pub(super) proxy: Option<Proxy>,
    pub(super) health_addr: String,
    /// `127.0.0.1:<port>` of its `/metrics`, the same across restarts.
    pub(super) metrics_addr: String,
    pub(super) config: Option<PathBuf>,
    pub(super) cert: PathBuf,
    pub(super) key: PathBuf,
}

impl Relay {
    /// Starts the manager on the set's manager cluster and one agent per
    /// worker, with the default configuration, and waits until every agent
    /// has a session.
    pub async fn start(set: &ClusterSet) -> anyhow::Result<Relay> {
        Relay::start_with(set, Options::default()).await
    }

    /// Like [`Relay::start`], configured by `options`. Installs the
    /// WorkerCluster CRD and registers every worker first; manager and agents
    /// speak mutual TLS with certificates of a CA made for this relay.
    pub async fn start_with(set: &ClusterSet, options: Options) -> anyhow::Result<Relay> {
        let (manager_bin, agent_bin) = binaries_of(options.profile)?;
        let logs = set.state_dir.join("logs");
        std::fs::create_dir_all(&logs)?;
        register(set).await?;

        let tls_dir = set.state_dir.join("relay-tls");
        let ca = RelayCa::new("jobrelay relay CA")?;
        std::fs::create_dir_all(&tls_dir)?;
        let ca_path = tls_dir.join("ca.crt");
        crate::certs::write_atomically(&ca_path, &ca.ca_pem)?;
        let (server_cert, server_key) = ca.server()?.write(&tls_dir, "manager")?;
        let manager_config = config_file(
            set,
            "jobrelay-manager.yaml",
            options.manager_config.as_deref(),
        )?;

        let running = options.manager_replicas.max(1);
        let mut replicas = Vec::new();
        for index in 0..running + options.manager_surge {
            let mut launch = Launch::new(manager_bin.clone(), &set.manager().kubeconfig);
            launch.path("--tls-cert", &server_cert);
            launch.path("--tls-key", &server_key);
            launch.path("--client-ca", &ca_path);
            if let Some(path) = &manager_config {
                launch.path("--config", path);
            }
            let log = match index {
                0 => logs.join("jobrelay-manager.log"),
                _ => logs.join(format!("jobrelay-manager-{index}.log")),
            };
            replicas.push(Replica::new(index, launch, &options.manager_args, log)?);
        }
        let urls: Vec<&str> = replicas.iter().map(|r| r.url.as_str()).collect();

        let mut agents = BTreeMap::new();
        for worker in set.workers() {
            let name = &worker.name;
            let config = config_file(
                set,
                &format!("jobrelay-agent-{name}.yaml"),
                options.agent_configs.get(name).map(String::as_str),
            )?;
            let (cert, key) = ca.client(name)?.write(&tls_dir, name)?;
            let proxy = match options.proxied {
                true => Some(Proxy::start(
                    &urls
                        .iter()
                        .map(|url| url.trim_start_matches("https://").parse())
                        .collect::<Result<Vec<std::net::SocketAddr>, _>>()?,
                )?),
                false => None,
            };
            let manager_url = match &proxy {
                Some(proxy) => proxy
                    .addrs
                    .iter()
                    .map(|addr| format!("https://{addr}"))
                    .collect::<Vec<_>>()
                    .join(","),
                None => urls.join(","),
            };
            let setup = AgentSetup {
                kubeconfig: worker.kubeconfig.clone(),
                manager_url,
                proxy,
                health_addr: format!("127.0.0.1:{}", free_port()?),
                metrics_addr: format!("127.0.0.1:{}", free_port()?),
                config,
                cert,
                key,
            };
            agents.insert(name.clone(), setup);
        }
        let relay = Relay {
            origin: ORIGIN.into(),
            manager_url: replicas[0].url.clone(),
            metrics_addr: replicas[0].metrics_addr.clone(),
            health_addr: replicas[0].health_addr.clone(),
            ca,
            ca_path,
            tls_dir,
            logs,
            agent_bin,
            replicas,
            agent_setups: agents,
            agent_args: options.agent_args.clone(),
            agents: Mutex::new(BTreeMap::new()),
            log_filter: options
                .log_filter
                .clone()
                .unwrap_or_else(|| TEST_LOG_FILTER.into()),
        };
        for index in 0..running {
            relay.start_replica(index)?;
        }
        for worker in set.workers() {
            relay.start_agent(&worker.name)?;
        }
        for worker in set.workers() {
            relay.wait_sessions(&worker.name, 1).await?;
        }
        Ok(relay)
    }

    /// The agent of `worker` as a command, ready to start.
    pub fn agent_command(&self, worker: &str) -> anyhow::Result<Command> {
        let setup = self
            .agent_setups
            .get(worker)
            .ok_or_else(|| anyhow::anyhow!("no agent for worker {worker}"))?;
        let mut agent = Command::new(&self.agent_bin);
        agent.env("KUBECONFIG", &setup.kubeconfig).args([
            "--manager-url",
            &setup.manager_url,
            "--cluster",
            worker,
            "--origin",
            ORIGIN,
            "--orphan-pod-grace",
            "3s",
            "--orphan-sweep-interval",
            "5s",
            "--apply-retry-max-delay",
            "10s",
            "--certificate-reload-interval",
            "1s",
            "--health-listen",
            &setup.health_addr,
            // Each agent's metrics on a port of its own.
            "--metrics-bind-address",
            &setup.metrics_addr,
        ]);
        agent
            .arg("--tls-cert")
            .arg(&setup.cert)
            .arg("--tls-key")
            .arg(&setup.key)
            .arg("--manager-ca")
            .arg(&self.ca_path);
        if let Some(config) = &setup.config {
            agent.arg("--config").arg(config);
        }
        agent.args(&self.agent_args);
        Ok(agent)
    }
}

/// How the manager is started, kept to start it again.
pub(super) struct Launch {
    bin: PathBuf,
    kubeconfig: PathBuf,
    args: Vec<std::ffi::OsString>,
}

impl Launch {
    pub(super) fn new(bin: PathBuf, kubeconfig: &Path) -> Self {
        Launch {
            bin,
            kubeconfig: kubeconfig.to_path_buf(),
            args: Vec::new(),
        }
    }

    /// The manager binary it starts.
    pub(super) fn bin(&self) -> &Path {
        &self.bin
    }

    fn args<const N: usize>(&mut self, args: [&str; N]) {
        self.args.extend(args.map(Into::into));
    }

    pub(super) fn path(&mut self, flag: &str, path: &Path) {
        self.args.push(flag.into());
        self.args.push(path.into());
    }

    pub(super) fn command(&self) -> Command {
        let mut command = Command::new(&self.bin);
        command.env("KUBECONFIG", &self.kubeconfig).args(&self.args);
        command
    }
}
