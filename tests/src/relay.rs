//! jobrelay itself in a test: the manager and one agent per worker cluster,
//! run as their real binaries (built by cargo on first use) against a
//! [`ClusterSet`], talking over loopback.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use crate::binaries::{Profile, binaries_of};
use crate::certs::RelayCa;
use crate::cluster::ClusterSet;
use crate::ports::free_port;
use crate::processes;
use crate::proxy::Proxy;
use crate::registration::register;

mod reports;

pub(crate) use reports::http_get;
pub use reports::metric_in;

/// The manager identity the tests run with.
pub const ORIGIN: &str = "e2e";

/// A running manager and its agents; the processes die with the test
/// process. Either can be killed and started again.
pub struct Relay {
    pub origin: String,
    /// `https://127.0.0.1:<port>` of the manager's Relay service.
    pub manager_url: String,
    /// `127.0.0.1:<port>` of the manager's `/metrics`.
    pub metrics_addr: String,
    /// `127.0.0.1:<port>` of the manager's health service.
    pub health_addr: String,
    ca: RelayCa,
    ca_path: PathBuf,
    tls_dir: PathBuf,
    logs: PathBuf,
    agent_bin: PathBuf,
    /// Replica 0 is "the manager" of the methods without an index.
    replicas: Vec<Replica>,
    agent_setups: BTreeMap<String, AgentSetup>,
    agents: Mutex<BTreeMap<String, Child>>,
    log_filter: String,
}

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
    /// More flags for every manager replica.
    pub manager_args: Vec<String>,
}

/// One manager replica: how to start it, the running process, where it
/// serves metrics, and its log.
struct Replica {
    launch: Launch,
    child: Mutex<Option<Child>>,
    /// `https://127.0.0.1:<port>` of its Relay service.
    url: String,
    metrics_addr: String,
    health_addr: String,
    log: PathBuf,
}

impl Replica {
    /// Replica `index`, launched as `launch` says (its TLS files and
    /// configuration) on ports of its own, with the tests' flags and `more`.
    fn new(
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
            "--heartbeat-interval",
            "1s",
            "--cluster-status-interval",
            "2s",
            "--certificate-reload-interval",
            "1s",
            "--metrics-listen",
            &metrics_addr,
            "--health-listen",
            &health_addr,
        ]);
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
struct AgentSetup {
    kubeconfig: PathBuf,
    manager_url: String,
    proxy: Option<Proxy>,
    health_addr: String,
    config: Option<PathBuf>,
    cert: PathBuf,
    key: PathBuf,
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

        let mut replicas = Vec::new();
        for index in 0..options.manager_replicas.max(1) {
            let mut launch = Launch {
                bin: manager_bin.clone(),
                kubeconfig: set.manager().kubeconfig.clone(),
                args: Vec::new(),
            };
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
            agents: Mutex::new(BTreeMap::new()),
            log_filter: options
                .log_filter
                .clone()
                .unwrap_or_else(|| TEST_LOG_FILTER.into()),
        };
        for index in 0..relay.replicas.len() {
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

    /// Starts the manager (again), appending to its log.
    pub fn start_manager(&self) -> anyhow::Result<()> {
        self.start_replica(0)
    }

    /// Kills the manager with SIGKILL, as a crash or an OOM kill would.
    pub fn kill_manager(&self) {
        self.kill_replica(0);
    }

    /// Manager replicas started with [`Options::manager_replicas`].
    pub fn replicas(&self) -> usize {
        self.replicas.len()
    }

    /// Starts manager replica `index` (again), appending to its log.
    pub fn start_replica(&self, index: usize) -> anyhow::Result<()> {
        let replica = &self.replicas[index];
        let child = start_logged(replica.launch.command(), &replica.log, &self.log_filter)?;
        *lock(&replica.child) = Some(child);
        Ok(())
    }

    /// Kills manager replica `index` with SIGKILL.
    pub fn kill_replica(&self, index: usize) {
        if let Some(mut child) = lock(&self.replicas[index].child).take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `signal` (e.g. `libc::SIGSTOP`, `libc::SIGCONT`) to manager
    /// replica `index`.
    pub fn signal_replica(&self, index: usize, signal: i32) -> anyhow::Result<()> {
        let child = lock(&self.replicas[index].child);
        let child = child
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("manager replica {index} is not running"))?;
        processes::signal(child, signal);
        Ok(())
    }

    /// The process id of manager replica `index`, while it runs.
    pub fn replica_pid(&self, index: usize) -> Option<u32> {
        lock(&self.replicas[index].child).as_ref().map(Child::id)
    }

    /// The process id of the agent of `worker`, while it runs.
    pub fn agent_pid(&self, worker: &str) -> Option<u32> {
        lock(&self.agents).get(worker).map(Child::id)
    }

    /// Whether manager replica `index` has ended (and how), reaping it.
    pub fn replica_exited(&self, index: usize) -> Option<std::process::ExitStatus> {
        let mut child = lock(&self.replicas[index].child);
        let status = child.as_mut()?.try_wait().ok()??;
        *child = None;
        Some(status)
    }

    /// Starts the agent of `worker` (again), appending to its log.
    pub fn start_agent(&self, worker: &str) -> anyhow::Result<()> {
        let command = self.agent_command(worker)?;
        let child = start_logged(
            command,
            &self.logs.join(format!("jobrelay-agent-{worker}.log")),
            &self.log_filter,
        )?;
        lock(&self.agents).insert(worker.to_string(), child);
        Ok(())
    }

    /// Kills the agent of `worker` with SIGKILL.
    pub fn kill_agent(&self, worker: &str) {
        if let Some(mut child) = lock(&self.agents).remove(worker) {
            let _ = child.kill();
            let _ = child.wait();
        }
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
        Ok(agent)
    }

    /// The proxy between `worker`'s agent and the manager (with
    /// [`Options::proxied`]).
    pub fn link(&self, worker: &str) -> Option<&Proxy> {
        self.agent_setups.get(worker)?.proxy.as_ref()
    }

    /// `127.0.0.1:<port>` of the health service of the agent of `worker`.
    pub fn agent_health_addr(&self, worker: &str) -> Option<&str> {
        self.agent_setups
            .get(worker)
            .map(|s| s.health_addr.as_str())
    }

    /// Where the client certificate and key of `worker`'s agent are read from.
    pub fn agent_certificate_files(&self, worker: &str) -> Option<(&Path, &Path)> {
        self.agent_setups
            .get(worker)
            .map(|s| (s.cert.as_path(), s.key.as_path()))
    }

    /// The CA that signed the relay's certificates.
    pub fn ca(&self) -> &RelayCa {
        &self.ca
    }

    /// The manager's `--client-ca` file (the agents' `--manager-ca` too).
    pub fn ca_path(&self) -> &Path {
        &self.ca_path
    }

    /// A folder for a test's own certificate files.
    pub fn tls_dir(&self) -> &Path {
        &self.tls_dir
    }
}

impl Drop for Relay {
    /// Stops the manager and the agents (a Relay that failed to start must
    /// not leave them running beside the next one).
    fn drop(&mut self) {
        for index in 0..self.replicas.len() {
            let _ = self.signal_replica(index, libc::SIGCONT);
            self.kill_replica(index);
        }
        let workers: Vec<String> = lock(&self.agents).keys().cloned().collect();
        for worker in workers {
            self.kill_agent(&worker);
        }
    }
}

/// How the manager is started, kept to start it again.
struct Launch {
    bin: PathBuf,
    kubeconfig: PathBuf,
    args: Vec<std::ffi::OsString>,
}

impl Launch {
    fn args<const N: usize>(&mut self, args: [&str; N]) {
        self.args.extend(args.map(Into::into));
    }

    fn path(&mut self, flag: &str, path: &Path) {
        self.args.push(flag.into());
        self.args.push(path.into());
    }

    fn command(&self) -> Command {
        let mut command = Command::new(&self.bin);
        command.env("KUBECONFIG", &self.kubeconfig).args(&self.args);
        command
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn start_logged(
    mut command: Command,
    log: &Path,
    filter: &str,
) -> anyhow::Result<Child> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    command
        .env("RUST_LOG", filter)
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
    Ok(processes::spawn(command)?)
}
