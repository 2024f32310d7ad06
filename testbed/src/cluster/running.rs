//! Real Kubernetes control planes on loopback, started and stopped: one
//! etcd shared by every cluster (each under its own key prefix) and, per
//! cluster, kube-apiserver with TLS, kube-controller-manager with the
//! controllers jobrelay relies on, kube-scheduler, and kwok playing kubelet
//! for one fake Node. Clusters asked for it get a real node beside it as
//! well (`node.rs`: kubelet, containerd, runc).
//!
//! Every process is started with a parent-death signal, so none survives the
//! process that started it. Ports are picked free at start.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use crate::certs;
use crate::cluster::config::{apiserver_args, write_kubeconfig};
use crate::cluster::node::RealNode;
use crate::cluster::ready::{wait_api_ready, wait_workable};
use crate::cluster::{ClusterInfo, ClusterSet, Error, KWOK_NODE_ANNOTATION, cluster_names};
use crate::go::controlplane::Binaries;
use crate::host::processes::{die_with_parent, signal};

/// What to start: how many workers beside the manager, and which clusters
/// get a real node (none by default: kwok's fake Node is enough for most
/// tests, and a real node costs a kubelet and a containerd).
#[derive(Debug, Clone, Default)]
pub struct Topology {
    pub workers: usize,
    /// Names of clusters (`worker-1`, …) that get a real node, once per
    /// node (a name given twice gets two).
    pub real_nodes: Vec<String>,
}

struct Process {
    name: String,
    child: Child,
    /// How it was started, to start it again.
    binary: PathBuf,
    args: Vec<String>,
    env: Vec<(String, PathBuf)>,
}

/// The processes of a running [`ClusterSet`]; dropping it kills them.
pub struct Running {
    set: ClusterSet,
    processes: Vec<Process>,
    nodes: Vec<RealNode>,
}

impl Running {
    /// Starts a manager and `workers` worker clusters with their state under
    /// `state_dir`, and returns once every cluster serves, has a Ready Node and
    /// a `default` ServiceAccount. Must run on the thread that stays alive as
    /// long as the clusters should (the parent-death signal is per thread).
    pub async fn start(
        binaries: &Binaries,
        state_dir: &Path,
        workers: usize,
    ) -> Result<Self, Error> {
        let topology = Topology {
            workers,
            real_nodes: Vec::new(),
        };
        Self::start_with(binaries, state_dir, &topology).await
    }

    /// Like [`start`](Self::start), with real nodes where `topology` asks;
    /// returns once those are Ready too.
    pub async fn start_with(
        binaries: &Binaries,
        state_dir: &Path,
        topology: &Topology,
    ) -> Result<Self, Error> {
        let workers = topology.workers;
        let names = cluster_names(workers);
        if let Some(unknown) = topology.real_nodes.iter().find(|n| !names.contains(n)) {
            return Err(Error::UnknownCluster(unknown.clone()));
        }
        let io = |what: &Path| {
            let what = what.display().to_string();
            move |e| Error::Io(what, e)
        };
        std::fs::create_dir_all(state_dir.join("logs")).map_err(io(state_dir))?;
        let state_dir = state_dir.canonicalize().map_err(io(state_dir))?;
        let pki = certs::write(&state_dir.join("pki"))?;
        let stages = crate::go::controlplane::source_dir().join("kwok-stages.yaml");

        let mut running = Running {
            set: ClusterSet {
                state_dir: state_dir.clone(),
                clusters: Vec::new(),
            },
            processes: Vec::new(),
            nodes: Vec::new(),
        };

        let etcd_port = free_port()?;
        let etcd_peer = free_port()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer}");
        running.spawn(
            "etcd",
            &binaries.path("etcd"),
            &[
                "--name=jobrelay".into(),
                format!("--data-dir={}", state_dir.join("etcd").display()),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=jobrelay={peer_url}"),
                "--unsafe-no-fsync=true".into(),
                "--log-level=warn".into(),
            ],
            &[],
        )?;

        for name in names {
            let dir = state_dir.join(&name);
            std::fs::create_dir_all(&dir).map_err(io(&dir))?;
            let port = free_port()?;
            let server = format!("https://127.0.0.1:{port}");
            let kubeconfig = dir.join("kubeconfig");
            write_kubeconfig(&kubeconfig, &name, &server, &pki)?;
            running.spawn(
                &format!("{name}-kube-apiserver"),
                &binaries.path("kube-apiserver"),
                &apiserver_args(&name, port, &etcd_url, &dir, &pki)?,
                &[],
            )?;
            running.set.clusters.push(ClusterInfo {
                name,
                server,
                kubeconfig,
                real_nodes: Vec::new(),
            });
        }

        let clusters = running.set.clusters.clone();
        running
            .unless_one_exits(futures::future::try_join_all(
                clusters.iter().map(wait_api_ready),
            ))
            .await?;

        for cluster in &clusters {
            let kubeconfig = format!("--kubeconfig={}", cluster.kubeconfig.display());
            let name = &cluster.name;
            running.spawn(&format!("{name}-kube-controller-manager"), &binaries.path("kube-controller-manager"), &[
                kubeconfig.clone(),
                "--leader-elect=false".into(),
                "--secure-port=0".into(),
                "--controllers=job,cronjob,garbagecollector,ttl-after-finished,podgc,namespace,resourcequota,serviceaccount,serviceaccount-token,root-ca-certificate-publisher-controller,deployment,replicaset,disruption,endpointslice,validatingadmissionpolicy-status-controller,clusterrole-aggregation".into(),
                format!("--service-account-private-key-file={}", pki.service_account_key.display()),
                format!("--root-ca-file={}", pki.ca_cert.display()),
                "--kube-api-qps=200".into(),
                "--kube-api-burst=400".into(),
            ], &[])?;
            running.spawn(
                &format!("{name}-kube-scheduler"),
                &binaries.path("kube-scheduler"),
                &[
                    kubeconfig.clone(),
                    "--leader-elect=false".into(),
                    "--secure-port=0".into(),
                ],
                &[],
            )?;
            let home = state_dir.join(name).join("kwok-home");
            std::fs::create_dir_all(&home).map_err(io(&home))?;
            running.spawn(
                &format!("{name}-kwok"),
                &binaries.path("kwok"),
                &[
                    kubeconfig,
                    format!("--config={}", stages.display()),
                    // Only its own Nodes: on a real node's Pods it would
                    // fake the status the kubelet reports.
                    format!("--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake"),
                    "--node-lease-duration-seconds=40".into(),
                    "--cidr=10.0.0.1/24".into(),
                    "--server-address=".into(),
                ],
                &[("HOME", home.as_path())],
            )?;
        }

        running
            .unless_one_exits(futures::future::try_join_all(
                clusters.iter().map(wait_workable),
            ))
            .await?;
        // Every real node at once: most of a node's start is waiting for
        // its kubelet to register.
        let wanted: Vec<(usize, usize)> = clusters
            .iter()
            .enumerate()
            .flat_map(|(index, cluster)| {
                let count = topology
                    .real_nodes
                    .iter()
                    .filter(|n| **n == cluster.name)
                    .count();
                (0..count).map(move |node| (index, node))
            })
            .collect();
        let logs = state_dir.join("logs");
        let started = running
            .unless_one_exits(futures::future::try_join_all(wanted.iter().map(
                |&(index, node)| {
                    let cluster = &clusters[index];
                    let dir = state_dir.join(&cluster.name);
                    let (pki, logs) = (&pki, &logs);
                    async move {
                        Ok((
                            index,
                            RealNode::start(cluster, node, pki, &dir, logs).await?,
                        ))
                    }
                },
            )))
            .await?;
        for (index, node) in started {
            running.set.clusters[index]
                .real_nodes
                .push(node.info().clone());
            running.nodes.push(node);
        }
        running.set.save()?;
        Ok(running)
    }

    pub fn set(&self) -> &ClusterSet {
        &self.set
    }

    /// Components that exited, with their exit status.
    pub fn exited(&mut self) -> Vec<(String, String)> {
        let mut exited: Vec<(String, String)> = self
            .processes
            .iter_mut()
            .filter_map(|p| match p.child.try_wait() {
                Ok(Some(status)) => Some((p.name.clone(), status.to_string())),
                _ => None,
            })
            .collect();
        exited.extend(self.nodes.iter_mut().flat_map(RealNode::exited));
        exited
    }

    /// Runs `step`, failing fast with the component's log when a process
    /// exits meanwhile.
    async fn unless_one_exits<T>(
        &mut self,
        step: impl std::future::Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        tokio::pin!(step);
        let mut checks = tokio::time::interval(Duration::from_millis(500));
        loop {
            tokio::select! {
                result = &mut step => return result,
                _ = checks.tick() => {
                    if let Some((component, status)) = self.exited().into_iter().next() {
                        let log = self.set.state_dir.join("logs").join(format!("{component}.log"));
                        let text = std::fs::read_to_string(&log).unwrap_or_default();
                        let tail: Vec<&str> = text.lines().rev().take(10).collect();
                        let tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
                        return Err(Error::Exited { component, status, log: log.display().to_string(), tail });
                    }
                }
            }
        }
    }

    /// Stops every process (SIGTERM, then SIGKILL after a grace period).
    pub fn stop(mut self) {
        self.terminate();
    }

    fn terminate(&mut self) {
        // Real nodes first, while their API servers still answer; all at
        // once, each waits on its own processes.
        std::thread::scope(|scope| {
            for node in self.nodes.drain(..) {
                scope.spawn(move || node.stop());
            }
        });
        // Controllers first, etcd last, so nothing logs a storm of connection errors.
        for p in self.processes.iter().rev() {
            signal(&p.child, libc::SIGTERM);
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        for p in self.processes.iter_mut().rev() {
            while matches!(p.child.try_wait(), Ok(None)) && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
        self.processes.clear();
    }

    /// Kills one component (e.g. `worker-1-kube-apiserver`) with SIGKILL
    /// and starts it again with the same arguments, appending to its log.
    pub fn restart(&mut self, name: &str) -> Result<(), Error> {
        let index = self
            .processes
            .iter()
            .position(|p| p.name == name)
            .ok_or_else(|| {
                Error::Io(
                    format!("restarting {name}"),
                    std::io::ErrorKind::NotFound.into(),
                )
            })?;
        let mut old = self.processes.remove(index);
        let _ = old.child.kill();
        let _ = old.child.wait();
        let env: Vec<(&str, &Path)> = old
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_path()))
            .collect();
        self.spawn(name, &old.binary, &old.args, &env)
    }

    fn spawn(
        &mut self,
        name: &str,
        binary: &Path,
        args: &[String],
        env: &[(&str, &Path)],
    ) -> Result<(), Error> {
        let log_path = self.set.state_dir.join("logs").join(format!("{name}.log"));
        let mut cmd = Command::new(binary);
        cmd.args(args);
        crate::host::processes::log_to(&mut cmd, &log_path)
            .map_err(|e| Error::Io(log_path.display().to_string(), e))?;
        for (key, value) in env {
            cmd.env(key, value);
        }
        die_with_parent(&mut cmd);
        let child = cmd
            .spawn()
            .map_err(|e| Error::Io(format!("starting {}", binary.display()), e))?;
        self.processes.push(Process {
            name: name.into(),
            child,
            binary: binary.to_path_buf(),
            args: args.to_vec(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_path_buf()))
                .collect(),
        });
        Ok(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.terminate();
    }
}

fn free_port() -> Result<u16, Error> {
    crate::host::ports::free_port().map_err(|e| Error::Io("picking a free port".into(), e))
}
