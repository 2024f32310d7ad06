//! Keeps every WorkerCluster's status in step with its link: `Connected` and
//! `Lost` conditions are written as soon as they change; `lastHeartbeatTime`,
//! `activeMirrors` and `agentVersion` at most once per status interval per
//! cluster and within a fleet-wide budget of writes per second
//! ([`write_budget`](crate::clusters::write_budget)), so a thousand clusters
//! heartbeating every few seconds cost the API server a few writes a second,
//! not hundreds.
//!
//! A cluster disconnected for its `spec.lostAfter` becomes Lost here; every
//! Job placed there is then reconciled, so Jobs being deleted are released.
//! The agent certificate's conditions come from [`agent_certificates`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use kube::api::{Api, Patch};
use kube::runtime::reflector::Store;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::clusters::agent_certificates::{self, AgentCertificates};
use crate::clusters::worker_cluster::{
    CONNECTED, LOST, PoolStatus, QueueStatus, WorkerCluster, WorkerClusterStatus, condition,
};
use crate::clusters::write_budget::{Due, due, refresh_interval, refreshes_per_tick};
use crate::fleet::Fleet;
use crate::fleet::Link;
use crate::job::placement::assigned_cluster;
use crate::kinds::Key;
use crate::kinds::RelayedKind;
use crate::kinds::stores::Stores;

/// How often links are looked at; the resolution of `lostAfter`.
const TICK: Duration = Duration::from_secs(1);

pub struct StatusWriter {
    pub api: Api<WorkerCluster>,
    pub clusters: Store<WorkerCluster>,
    pub fleet: Arc<Fleet>,
    pub stores: Stores,
    pub triggers: mpsc::UnboundedSender<Key>,
    /// Least time between writes that only refresh heartbeat and counts.
    pub interval: Duration,
    /// Writes per second that only refresh heartbeat and counts, across
    /// the fleet (0: no limit but `interval`).
    pub refreshes_per_second: f64,
    /// What each agent's certificate was judged, shown as conditions.
    pub certificates: Arc<AgentCertificates>,
}

impl StatusWriter {
    /// Writes until `shutdown`.
    pub async fn run(self, shutdown: jobrelay_process::Shutdown) {
        let started = Timestamp::now();
        let mut last_write: HashMap<String, Instant> = HashMap::new();
        let mut ticks = tokio::time::interval(TICK);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                () = shutdown.clone().requested() => return,
            }
            let clusters = self.clusters.state();
            let interval =
                refresh_interval(self.interval, clusters.len(), self.refreshes_per_second);
            let mut refreshes = refreshes_per_tick(self.refreshes_per_second, TICK);
            let registered: HashSet<String> = clusters.iter().map(|c| c.name_any()).collect();
            self.certificates.retain(|name| registered.contains(name));
            for cluster in clusters {
                let name = cluster.name_any();
                let lost_after = cluster.lost_after().unwrap_or_else(|error| {
                    debug!(%error, "using the default lostAfter");
                    crate::clusters::worker_cluster::DEFAULT_LOST_AFTER
                });
                let link = self.fleet.link(&name);
                let now = Timestamp::now();
                let mut desired = desired_status(&cluster, &link, lost_after, now, started);
                let seen = self.certificates.seen(&name);
                desired.conditions.extend(agent_certificates::conditions(
                    &cluster,
                    seen.as_ref(),
                    now,
                ));
                let lost = condition_is(&desired, LOST, "True");
                if self.fleet.set_lost(&name, lost) && lost {
                    warn!(cluster = %name, ?lost_after, "cluster Lost: disconnected for longer than lostAfter");
                    self.reconcile_jobs_on(&name);
                }
                let previous = last_write.get(&name).map(Instant::elapsed);
                match due(cluster.status.as_ref(), &desired, previous, interval) {
                    Due::Now => {}
                    Due::Refresh if refreshes > 0 => refreshes -= 1,
                    Due::Refresh | Due::No => continue,
                }
                match self.write(&name, &desired).await {
                    Ok(()) => {
                        last_write.insert(name, Instant::now());
                    }
                    Err(error) => {
                        warn!(cluster = %name, %error, "could not write WorkerCluster status")
                    }
                }
            }
        }
    }

    fn reconcile_jobs_on(&self, cluster: &str) {
        self.trigger_on(cluster, &self.stores.jobs);
        if let Some(jobsets) = &self.stores.jobsets {
            self.trigger_on(cluster, jobsets);
        }
    }

    fn trigger_on<K: RelayedKind>(&self, cluster: &str, objects: &Store<K>) {
        for object in objects.state() {
            if assigned_cluster(object.as_ref()) == Some(cluster) {
                let _ = self.triggers.send(Key::from_obj(object.as_ref()));
            }
        }
    }

    async fn write(&self, name: &str, status: &WorkerClusterStatus) -> Result<(), kube::Error> {
        let body = serde_json::json!({
            "apiVersion": "jobrelay.dev/v1alpha1",
            "kind": "WorkerCluster",
            "status": status,
        });
        let params = crate::field_manager::apply();
        self.api
            .patch_status(name, &params, &Patch::Apply(&body))
            .await?;
        info!(cluster = %name, connected = condition_is(status, CONNECTED, "True"), lost = condition_is(status, LOST, "True"), "WorkerCluster status written");
        Ok(())
    }
}

/// The status a cluster should show now. A cluster that has not connected
/// since the manager started counts as disconnected since whichever is
/// later known: the `Connected=False` transition recorded before, or the
/// manager's start.
pub fn desired_status(
    cluster: &WorkerCluster,
    link: &Link,
    lost_after: Duration,
    now: Timestamp,
    started: Timestamp,
) -> WorkerClusterStatus {
    let current = cluster.status.clone().unwrap_or_default();
    let since = link.since.unwrap_or_else(|| {
        cluster
            .condition(CONNECTED)
            .filter(|c| c.status == "False")
            .map_or(started, |c| c.last_transition_time.0)
    });
    let disconnected_for = now.duration_since(since);
    let lost = !link.connected
        && disconnected_for >= SignedDuration::try_from(lost_after).unwrap_or(SignedDuration::MAX);
    let generation = cluster.metadata.generation;
    let connected = if link.connected {
        condition(
            &current,
            CONNECTED,
            true,
            "SessionOpen",
            "the agent holds a session".into(),
            since,
            generation,
        )
    } else {
        let (reason, message) = match (&link.cut, link.since) {
            (Some(why), _) => (
                "SessionCut",
                format!("the manager cut the agent's session at {since}: {why}"),
            ),
            (None, Some(_)) => (
                "Disconnected",
                format!("the agent's session closed at {since}"),
            ),
            (None, None) => (
                "Disconnected",
                "no session since the manager started".into(),
            ),
        };
        condition(
            &current, CONNECTED, false, reason, message, since, generation,
        )
    };
    let lost = if lost {
        let message = format!(
            "disconnected since {since}, longer than lostAfter ({lost_after:?}); no Job is sent here, and Jobs being deleted are released"
        );
        condition(
            &current,
            LOST,
            true,
            "DisconnectedTooLong",
            message,
            now,
            generation,
        )
    } else {
        condition(
            &current,
            LOST,
            false,
            "WithinLostAfter",
            format!("lostAfter is {lost_after:?}"),
            now,
            generation,
        )
    };
    WorkerClusterStatus {
        conditions: vec![connected, lost],
        agent_version: Some(link.agent_version.clone())
            .filter(|v| !v.is_empty())
            .or(current.agent_version),
        // Whole seconds, as the API server keeps it: a finer time would
        // never match what was read back, and a cluster heard from for the
        // last time would be rewritten every interval for ever.
        last_heartbeat_time: link
            .last_heard
            .map(|heard| Time(Timestamp::from_second(heard.as_second()).unwrap_or(heard)))
            .or(current.last_heartbeat_time),
        active_mirrors: link.active_mirrors,
        room: link
            .room
            .as_ref()
            .map(|room| room.pools.iter().map(PoolStatus::from).collect()),
        queues: link
            .room
            .as_ref()
            .map(|room| room.queues.iter().map(QueueStatus::from).collect())
            .unwrap_or_default(),
    }
}

fn condition_is(status: &WorkerClusterStatus, kind: &str, value: &str) -> bool {
    status
        .conditions
        .iter()
        .any(|c| c.type_ == kind && c.status == value)
}

#[cfg(test)]
#[path = "status_writer_tests.rs"]
mod tests;
