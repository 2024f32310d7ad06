//! What a fault scenario works with: its namespace on every cluster, the
//! manager's Job API, and the checks such scenarios end with — each Job's
//! outcome, no mirror created twice or live on two clusters, a clean leak
//! check.

use std::collections::BTreeMap;
use std::time::Duration;

use jobrelay_proto::wire::{CLUSTER_KEY, REMOTE_CLEANUP_FINALIZER};
use jobrelay_proto::wire::{MANAGED_BY, ORIGIN_LABEL, ORIGIN_UID_LABEL};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use crate::cluster::ClusterInfo;
use crate::fixtures::TestJob;
use crate::kit::{self, Clusters};
use crate::leaks::assert_no_leaks;
use crate::relay::Relay;
use crate::wait::{self, Seen};

pub struct Scenario {
    pub clusters: &'static Clusters,
    pub relay: &'static Relay,
    pub ns: String,
    /// Manager Jobs of the scenario's namespace.
    pub jobs: Api<Job>,
}

pub use crate::wait::WAIT;

impl Scenario {
    /// A fresh namespace on every cluster of the test process's relay
    /// (started on first use).
    pub async fn relayed(prefix: &str) -> Self {
        let (clusters, relay) = kit::relay().await;
        Scenario::new(clusters, relay, prefix).await
    }

    /// A fresh namespace, on the manager and every worker.
    pub async fn new(clusters: &'static Clusters, relay: &'static Relay, prefix: &str) -> Self {
        let ns = kit::namespace_everywhere(clusters, prefix).await;
        let jobs = Api::namespaced(kit::client(clusters.manager()).await, &ns);
        Scenario {
            clusters,
            relay,
            ns,
            jobs,
        }
    }

    /// The worker cluster named `name`.
    pub fn worker(&self, name: &str) -> &'static ClusterInfo {
        self.clusters
            .workers()
            .iter()
            .find(|w| w.name == name)
            .unwrap_or_else(|| panic!("no worker {name}"))
    }

    /// The scenario's namespace of `K` on the worker named `name`.
    pub async fn worker_api<K>(&self, name: &str) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(kit::client(self.worker(name)).await, &self.ns)
    }

    /// A relayed Job in the scenario's namespace.
    pub fn job(&self, name: &str) -> TestJob {
        TestJob::new(&self.ns, name).managed_by(MANAGED_BY)
    }

    /// Creates the Job on the manager; returns its UID.
    pub async fn create(&self, job: TestJob) -> String {
        let created = self
            .jobs
            .create(&PostParams::default(), &job.build())
            .await
            .unwrap_or_else(|e| panic!("creating a manager Job: {e}"));
        created.uid().unwrap_or_default()
    }

    /// Waits until every named manager Job shows its expected final
    /// condition (`Complete` or `Failed`).
    pub async fn wait_outcomes(
        &self,
        expected: &BTreeMap<String, &'static str>,
        timeout: Duration,
    ) {
        wait::until(
            format!("{} manager Jobs to reach their outcome", expected.len()),
            timeout,
            || async {
                let list = match self.jobs.list(&ListParams::default()).await {
                    Ok(list) => list,
                    Err(e) => return Seen::Waiting(e.to_string()),
                };
                let seen: BTreeMap<String, &Job> =
                    list.items.iter().map(|j| (j.name_any(), j)).collect();
                let wrong: Vec<String> = expected
                    .iter()
                    .filter(|(name, want)| seen.get(*name).and_then(|j| outcome(j)) != Some(**want))
                    .map(|(name, want)| match seen.get(name) {
                        Some(job) => format!("{name}: want {want}, has {}", explain(job)),
                        None => format!("{name}: want {want}, the Job is gone"),
                    })
                    .collect();
                if wrong.is_empty() {
                    Seen::Ready(())
                } else {
                    Seen::Waiting(format!("{} not there: {}", wrong.len(), wrong.join("; ")))
                }
            },
        )
        .await
    }

    /// Live mirror Jobs of this namespace by origin UID: the workers holding one.
    pub async fn mirrors(&self) -> anyhow::Result<BTreeMap<String, Vec<String>>> {
        let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let selector =
            ListParams::default().labels(&format!("{ORIGIN_LABEL}={}", self.relay.origin));
        for worker in self.clusters.workers() {
            let jobs: Api<Job> = Api::namespaced(worker.client().await?, &self.ns);
            for job in jobs.list_metadata(&selector).await? {
                if job.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                if let Some(uid) = job.labels().get(ORIGIN_UID_LABEL) {
                    found
                        .entry(uid.clone())
                        .or_default()
                        .push(worker.name.clone());
                }
            }
        }
        Ok(found)
    }

    /// How often each origin UID's mirror was created in this namespace,
    /// over every agent's whole log (restarts included).
    pub fn creations(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for worker in self.clusters.workers() {
            for line in self.relay.agent_log(&worker.name).lines() {
                if !line.contains("mirror created") || field(line, "namespace") != Some(&self.ns) {
                    continue;
                }
                if let Some(uid) = field(line, "uid") {
                    *counts.entry(uid.to_string()).or_default() += 1;
                }
            }
        }
        counts
    }

    /// Creates `n` Jobs named `<prefix>-<i>` running `run_for`, one in five
    /// failing; returns the outcome each must reach.
    pub async fn create_jobs(
        &self,
        prefix: &str,
        n: usize,
        run_for: &str,
    ) -> BTreeMap<String, &'static str> {
        let mut expected = BTreeMap::new();
        for i in 0..n {
            let name = format!("{prefix}-{i}");
            let failing = i % 5 == 4;
            let mut job = self.job(&name).run_for(run_for);
            if failing {
                job = job.failing();
            }
            self.create(job).await;
            expected.insert(name, if failing { "Failed" } else { "Complete" });
        }
        expected
    }

    /// Waits until at least `n` mirrors of the scenario exist on the workers
    /// at once.
    pub async fn wait_mirrors(&self, n: usize, timeout: Duration) {
        wait::until(format!("{n} mirrors on the workers"), timeout, || async {
            match self.mirrors().await {
                Ok(mirrors) if mirrors.len() >= n => Seen::Ready(()),
                Ok(mirrors) => Seen::Waiting(format!("{} mirrors", mirrors.len())),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        })
        .await
    }

    /// Fails unless every mirror of this namespace was created at most `at_most` times.
    pub fn assert_created_at_most(&self, at_most: usize) {
        let twice: Vec<(String, usize)> = self
            .creations()
            .into_iter()
            .filter(|(_, n)| *n > at_most)
            .collect();
        assert!(
            twice.is_empty(),
            "mirrors created more than {at_most} time(s): {twice:?}"
        );
    }

    /// Deletes every manager Job, waits until all are gone, and runs the leak check.
    pub async fn finish(&self, timeout: Duration) {
        let names: Vec<String> = self
            .jobs
            .list(&ListParams::default())
            .await
            .map(|l| l.items.iter().map(ResourceExt::name_any).collect())
            .unwrap_or_default();
        for name in &names {
            let _ = self.jobs.delete(name, &DeleteParams::background()).await;
        }
        wait::until(
            "every manager Job of the scenario gone",
            timeout,
            || async {
                match self.jobs.list(&ListParams::default()).await {
                    Ok(list) if list.items.is_empty() => Seen::Ready(()),
                    Ok(list) => Seen::Waiting(format!(
                        "{} left, e.g. {:?}",
                        list.items.len(),
                        list.items
                            .first()
                            .map(|j| (j.name_any(), j.finalizers().to_vec()))
                    )),
                    Err(e) => Seen::Waiting(e.to_string()),
                }
            },
        )
        .await;
        assert_no_leaks(self.clusters.set(), &self.relay.origin, &self.ns).await;
    }

    /// Waits until the manager Job names its cluster, and returns that worker.
    pub async fn assigned_worker(&self, name: &str) -> &'static ClusterInfo {
        let cluster = wait::until(
            format!("Job {name} assigned to a cluster"),
            WAIT,
            || async {
                match self.jobs.get(name).await {
                    Ok(job) => match job.annotations().get(CLUSTER_KEY) {
                        Some(cluster) => Seen::Ready(cluster.clone()),
                        None => Seen::Waiting(format!("annotations {:?}", job.annotations())),
                    },
                    Err(e) => Seen::Waiting(e.to_string()),
                }
            },
        )
        .await;
        self.worker(&cluster)
    }

    /// Waits until the mirror's Pods on `worker` are all `phase` (`n` of them).
    pub async fn wait_worker_pods(
        &self,
        worker: &ClusterInfo,
        uid: &str,
        n: usize,
        phase: &str,
    ) -> Vec<Pod> {
        let pods: Api<Pod> = Api::namespaced(kit::client(worker).await, &self.ns);
        let selector = ListParams::default().labels(&format!("{ORIGIN_UID_LABEL}={uid}"));
        wait::until(
            format!("{n} Pod(s) of mirror {uid} on {} {phase}", worker.name),
            WAIT,
            || {
                let (pods, selector) = (pods.clone(), selector.clone());
                async move {
                    match pods.list(&selector).await {
                        Ok(list)
                            if list.items.len() == n
                                && list.items.iter().all(|p| pod_phase(p) == phase) =>
                        {
                            Seen::Ready(list.items)
                        }
                        Ok(list) => Seen::Waiting(format!(
                            "{:?}",
                            list.items.iter().map(pod_phase).collect::<Vec<_>>()
                        )),
                        Err(e) => Seen::Waiting(e.to_string()),
                    }
                }
            },
        )
        .await
    }

    /// Waits until the manager Job has condition `type_` = True.
    pub async fn wait_condition(&self, name: &str, type_: &str) -> Job {
        wait::until(format!("manager Job {name} {type_}"), WAIT, || async {
            match self.jobs.get(name).await {
                Ok(job) if has_condition(&job, type_) => Seen::Ready(job),
                Ok(job) => Seen::Waiting(format!("status {:?}", job.status)),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        })
        .await
    }

    /// Waits until the manager Job no longer holds the remote-cleanup finalizer
    /// (or is gone altogether).
    pub async fn wait_released(&self, name: &str) {
        wait::until(
            format!("manager Job {name} released by jobrelay"),
            WAIT,
            || async {
                match self.jobs.get_opt(name).await {
                    Ok(Some(job))
                        if job
                            .finalizers()
                            .iter()
                            .any(|f| f == REMOTE_CLEANUP_FINALIZER) =>
                    {
                        Seen::Waiting(format!("finalizers {:?}", job.finalizers()))
                    }
                    Ok(_) => Seen::Ready(()),
                    Err(e) => Seen::Waiting(e.to_string()),
                }
            },
        )
        .await
    }

    pub async fn wait_gone(&self, name: &str) {
        wait::until(format!("manager Job {name} gone"), WAIT, || async {
            match self.jobs.get_opt(name).await {
                Ok(None) => Seen::Ready(()),
                Ok(Some(job)) => Seen::Waiting(format!("finalizers {:?}", job.finalizers())),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        })
        .await
    }

    pub async fn events(&self, name: &str) -> Vec<(String, String)> {
        let events: Api<Event> = Api::namespaced(self.jobs.clone().into_client(), &self.ns);
        let list = events
            .list(&ListParams::default())
            .await
            .expect("list Events");
        list.items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect()
    }

    pub async fn wait_event(&self, name: &str, reason: &str) -> String {
        wait::until(format!("Event {reason} on Job {name}"), WAIT, || async {
            let events = self.events(name).await;
            match events.iter().find(|(r, _)| r == reason) {
                Some((_, note)) => Seen::Ready(note.clone()),
                None => Seen::Waiting(format!("events {events:?}")),
            }
        })
        .await
    }
}

/// A Pod's phase, `+Terminating` once it is being deleted.
fn pod_phase(pod: &Pod) -> String {
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default();
    if pod.metadata.deletion_timestamp.is_some() {
        format!("{phase}+Terminating")
    } else {
        phase
    }
}

/// The Job's condition `type_`, if it is True.
pub fn condition<'a>(
    job: &'a Job,
    type_: &str,
) -> Option<&'a k8s_openapi::api::batch::v1::JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
}

/// Whether the Job has condition `type_` = True.
pub fn has_condition(job: &Job, type_: &str) -> bool {
    condition(job, type_).is_some()
}

/// `Complete` or `Failed` if the Job has that condition.
pub fn outcome(job: &Job) -> Option<&'static str> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    ["Complete", "Failed"].into_iter().find(|kind| {
        conditions
            .iter()
            .any(|c| c.type_ == *kind && c.status == "True")
    })
}

/// A Job's outcome in words, with the reason and message of its condition
/// (what a failed wait shows).
fn explain(job: &Job) -> String {
    let Some(kind) = outcome(job) else {
        return "no outcome yet".into();
    };
    let condition = job
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == kind));
    match condition {
        Some(c) => format!(
            "{kind} ({}: {}; uid {})",
            c.reason.as_deref().unwrap_or(""),
            c.message.as_deref().unwrap_or(""),
            job.uid().unwrap_or_default()
        ),
        None => kind.into(),
    }
}

/// The value of `name=value` in a log line.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line.find(&format!(" {name}="))? + name.len() + 2;
    line[start..].split_whitespace().next()
}
