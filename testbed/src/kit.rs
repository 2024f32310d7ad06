//! What an end-to-end test starts from: the clusters of this test process
//! (started once, shared by its tests, stopped when the process exits — or the
//! ones named by `JOBRELAY_CLUSTERS`, started by `cargo xtask cluster up`),
//! admin clients for them, and a fresh namespace per test.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ObjectMeta, PostParams};

use crate::cluster::ready::default_service_account;
use crate::cluster::supervisor::Supervisor;
use crate::cluster::{ClusterInfo, ClusterSet};
use crate::relay::{Options, Relay};

/// The clusters shared by the tests of this process.
pub struct Clusters {
    set: ClusterSet,
    // Held for the life of the process; when the process exits, the
    // supervisor gets SIGTERM (and its standard input closes), and stops
    // the clusters.
    supervisor: Option<Supervisor>,
}

static CLUSTERS: OnceLock<Clusters> = OnceLock::new();

/// The clusters of this test process, with at least `workers` workers,
/// started on first use.
pub fn clusters(workers: usize) -> &'static Clusters {
    clusters_with(ClusterOptions {
        workers,
        ..ClusterOptions::default()
    })
}

/// How the clusters of a test process are started (the first call in a
/// process decides).
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    pub workers: usize,
    /// Clusters (e.g. `worker-1`) that get a real node beside kwok's fake
    /// one; see [`crate::cluster::node`].
    pub real_nodes: Vec<String>,
}

/// Like [`clusters`], with real nodes where `options` asks. Call it before
/// [`relay_with`] to run jobrelay on clusters with real nodes.
pub fn clusters_with(options: ClusterOptions) -> &'static Clusters {
    let clusters = CLUSTERS.get_or_init(|| start(&options).unwrap_or_else(|e| panic!("{e:#}")));
    let workers = options.workers;
    assert!(
        clusters.set.workers().len() >= workers,
        "a test needs {workers} workers, the clusters have {}",
        clusters.set.workers().len()
    );
    for name in &options.real_nodes {
        let wanted = options.real_nodes.iter().filter(|n| *n == name).count();
        let has = clusters
            .set
            .clusters
            .iter()
            .find(|c| &c.name == name)
            .map_or(0, |c| c.real_nodes.len());
        assert!(
            has >= wanted,
            "a test needs {wanted} real node(s) on {name}; the clusters were started with {has}"
        );
    }
    clusters
}

fn start(options: &ClusterOptions) -> anyhow::Result<Clusters> {
    let workers = options.workers;
    if let Some(dir) = std::env::var_os("JOBRELAY_CLUSTERS") {
        let set = ClusterSet::load(&PathBuf::from(dir))?;
        return Ok(Clusters {
            set,
            supervisor: None,
        });
    }
    let states = target_dir().join("jobrelay");
    remove_states_of_ended_processes(&states);
    let state_dir = states.join(format!("test-{}", std::process::id()));
    let mut command = Command::new(supervisor_binary());
    // The logs stay for whoever looks into a failure; the next test
    // process removes them.
    command.arg("--keep-state");
    for name in &options.real_nodes {
        command.arg(format!("--real-node={name}"));
    }
    let supervisor = Supervisor::start(command, &state_dir, workers, false)?;
    Ok(Clusters {
        set: supervisor.set().clone(),
        supervisor: Some(supervisor),
    })
}

/// Removes the `test-<pid>` state folders (logs, etcd data) of test
/// processes that have ended, so they do not pile up run after run.
fn remove_states_of_ended_processes(states: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(states) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("test-"))
            .and_then(|pid| pid.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        if !crate::host::processes::signal_pid(pid, 0) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The `jobrelay-cluster` binary cargo built beside this test.
pub fn supervisor_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("JOBRELAY_CLUSTER_BIN") {
        return path.into();
    }
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> -> target/<profile>/jobrelay-cluster
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("target folder")
        .join("jobrelay-cluster")
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("target")
        })
}

impl Clusters {
    pub fn set(&self) -> &ClusterSet {
        &self.set
    }

    pub fn manager(&self) -> &ClusterInfo {
        self.set.manager()
    }

    pub fn workers(&self) -> &[ClusterInfo] {
        self.set.workers()
    }

    /// Kills one control-plane component (e.g. `worker-1-kube-apiserver`)
    /// and starts it again; only for clusters this process started.
    pub fn restart(&self, component: &str) -> anyhow::Result<()> {
        match &self.supervisor {
            Some(supervisor) => supervisor.restart(component),
            None => anyhow::bail!("the clusters of JOBRELAY_CLUSTERS belong to another process"),
        }
    }
}

static RELAY: tokio::sync::OnceCell<Relay> = tokio::sync::OnceCell::const_new();

/// The clusters (with two workers) and jobrelay running on them: the manager
/// and one agent per worker, started on first use and shared by the tests of
/// this process.
pub async fn relay() -> (&'static Clusters, &'static Relay) {
    relay_with(2, Options::default()).await
}

/// Like [`relay`], with `workers` workers and jobrelay configured by
/// `options` (the first call in a process decides).
pub async fn relay_with(workers: usize, options: Options) -> (&'static Clusters, &'static Relay) {
    let clusters = clusters(workers);
    let relay = RELAY
        .get_or_init(|| async {
            Relay::start_with(clusters.set(), options)
                .await
                .unwrap_or_else(|e| panic!("starting jobrelay: {e:#}"))
        })
        .await;
    (clusters, relay)
}

/// Creates a namespace of the same unique name in every cluster (jobrelay
/// mirrors into existing namespaces only) and returns its name.
pub async fn namespace_everywhere(clusters: &Clusters, prefix: &str) -> String {
    let manager = client(clusters.manager()).await;
    let name = namespace(&manager, prefix).await;
    for worker in clusters.workers() {
        create_namespace(&client(worker).await, &name).await;
    }
    name
}

/// An admin client for a cluster; panics with the reason if there is none.
pub async fn client(cluster: &ClusterInfo) -> kube::Client {
    cluster.client().await.unwrap_or_else(|e| panic!("{e}"))
}

/// Creates a namespace named `<prefix>-<n>` unique in this process and waits
/// for its `default` ServiceAccount, without which no Pod can be created.
pub async fn namespace(client: &kube::Client, prefix: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let name = format!(
        "{prefix}-{}-{}",
        std::process::id() % 100_000,
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    create_namespace(client, &name).await;
    name
}

/// Creates the namespace `name` (if missing) and waits for its `default`
/// ServiceAccount.
pub async fn create_namespace(client: &kube::Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    match namespaces.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("creating namespace {name}: {e}"),
    }
    default_service_account(client, name, Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}
