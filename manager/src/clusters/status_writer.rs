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
mod tests {
    use super::*;

    fn cluster(status: Option<WorkerClusterStatus>) -> WorkerCluster {
        let mut cluster = WorkerCluster::new("worker-a", Default::default());
        cluster.status = status;
        cluster
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    const LOST_AFTER: Duration = Duration::from_secs(60);

    fn statuses(status: &WorkerClusterStatus) -> Vec<(String, String)> {
        status
            .conditions
            .iter()
            .map(|c| (c.type_.clone(), c.status.clone()))
            .collect()
    }

    #[test]
    fn a_connected_cluster_is_connected_and_not_lost() {
        let link = Link {
            connected: true,
            since: Some(at(0)),
            agent_version: "0.1.0".into(),
            last_heard: Some(at(5)),
            active_mirrors: 3,
            room: Some(jobrelay_kinds::room::Room {
                pools: vec![jobrelay_kinds::room::Pool {
                    labels: [("pool".to_string(), "small".to_string())].into(),
                    taints: Vec::new(),
                    nodes: 2,
                    free: [("cpu", 3500), ("pods", 219)].into(),
                    largest: [("cpu", 2000), ("pods", 110)].into(),
                }],
                queues: vec![jobrelay_kinds::room::Queue {
                    name: "team".into(),
                    local_queues: vec!["ns/lq".into()],
                    free: [("cpu", 1500)].into(),
                }],
            }),
            cut: None,
        };
        let status = desired_status(&cluster(None), &link, LOST_AFTER, at(500), at(0));
        let room = status.room.as_deref().expect("the reported room");
        assert_eq!(room[0].free["cpu"], "3500m");
        assert_eq!(room[0].largest["cpu"], "2");
        assert_eq!(room[0].free["pods"], "219");
        assert_eq!(status.queues[0].name, "team");
        assert_eq!(status.queues[0].local_queues, ["ns/lq"]);
        assert_eq!(status.queues[0].free["cpu"], "1500m");
        assert_eq!(
            statuses(&status),
            [
                ("Connected".into(), "True".into()),
                ("Lost".into(), "False".into())
            ]
        );
        assert_eq!(status.active_mirrors, 3);
        assert_eq!(status.agent_version.as_deref(), Some("0.1.0"));
        assert_eq!(status.last_heartbeat_time, Some(Time(at(5))));
    }

    #[test]
    fn a_session_the_manager_cut_says_why_on_the_connected_condition() {
        let link = Link {
            connected: false,
            since: Some(at(6)),
            cut: Some("it sent more than 10 bytes a second".into()),
            ..Default::default()
        };
        let status = desired_status(&cluster(None), &link, LOST_AFTER, at(7), at(0));
        let connected = status
            .conditions
            .iter()
            .find(|c| c.type_ == CONNECTED)
            .expect("Connected");
        assert_eq!(
            (connected.status.as_str(), connected.reason.as_str()),
            ("False", "SessionCut")
        );
        assert!(
            connected
                .message
                .contains("the manager cut the agent's session at")
                && connected
                    .message
                    .ends_with("it sent more than 10 bytes a second"),
            "{}",
            connected.message
        );
    }

    #[test]
    fn a_disconnected_cluster_once_written_needs_no_refresh() {
        use crate::clusters::write_budget::{Due, due};
        let heard = at(5).checked_add(SignedDuration::from_millis(250)).unwrap();
        let link = Link {
            connected: false,
            since: Some(at(6)),
            last_heard: Some(heard),
            ..Default::default()
        };
        let written = desired_status(&cluster(None), &link, LOST_AFTER, at(7), at(0));
        assert_eq!(
            written.last_heartbeat_time,
            Some(Time(at(5))),
            "whole seconds"
        );
        let again = desired_status(
            &cluster(Some(written.clone())),
            &link,
            LOST_AFTER,
            at(50),
            at(0),
        );
        let long = Some(Duration::from_secs(600));
        assert_eq!(
            due(Some(&written), &again, long, Duration::from_secs(30)),
            Due::No
        );
    }

    #[test]
    fn a_cluster_is_lost_once_disconnected_for_lost_after() {
        let link = Link {
            connected: false,
            since: Some(at(100)),
            ..Default::default()
        };
        let early = desired_status(&cluster(None), &link, LOST_AFTER, at(159), at(0));
        assert!(!condition_is(&early, LOST, "True"));
        let late = desired_status(&cluster(None), &link, LOST_AFTER, at(160), at(0));
        assert!(condition_is(&late, LOST, "True"));
        assert!(condition_is(&late, CONNECTED, "False"));
    }

    #[test]
    fn after_a_manager_restart_the_recorded_disconnection_counts() {
        let before = desired_status(
            &cluster(None),
            &Link {
                since: Some(at(0)),
                ..Default::default()
            },
            LOST_AFTER,
            at(10),
            at(-100),
        );
        // The manager restarts at 30; the agent never came back.
        let restarted = desired_status(
            &cluster(Some(before)),
            &Link::default(),
            LOST_AFTER,
            at(61),
            at(30),
        );
        assert!(
            condition_is(&restarted, LOST, "True"),
            "lost 60s after the recorded disconnection, not after the restart"
        );
        // A cluster never seen counts from the manager's start.
        let never = desired_status(&cluster(None), &Link::default(), LOST_AFTER, at(61), at(30));
        assert!(!condition_is(&never, LOST, "True"));
    }
}
