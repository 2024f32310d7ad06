//! WorkerCluster status writes as the manager cluster's watch sees them,
//! told apart: a change of condition (written at once) or a refresh of
//! heartbeat and counts (within the fleet-wide budget).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use jobrelay_manager::clusters::worker_cluster::{WorkerCluster, WorkerClusterStatus};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::watcher::Event;
use serde::Serialize;

use crate::bench::shared::measure::{self, Recording};

/// What each cluster's conditions were last seen as, and the writes counted.
#[derive(Default)]
struct Seen {
    conditions: HashMap<String, Conditions>,
    condition_writes: usize,
    refreshes: usize,
}

/// Counts status writes from the moment it has listed every cluster.
pub struct StatusWrites {
    seen: Arc<Mutex<Seen>>,
    watch: Recording,
    started: Instant,
}

/// The writes over a step, per second.
#[derive(Debug, Clone, Serialize)]
pub struct Written {
    pub condition_writes: usize,
    pub refreshes: usize,
    pub refreshes_per_second: f64,
    pub seconds: f64,
}

type Conditions = Vec<(String, String, String)>;

/// What kind of write one watch event shows.
#[derive(Debug, PartialEq, Eq)]
enum Write {
    Conditions,
    Refresh,
}

/// An event of the initial list is no write; otherwise a write that leaves
/// the conditions as they were is a refresh.
fn kind(initial: bool, before: Option<&Conditions>, now: &Conditions) -> Option<Write> {
    match (initial, before) {
        (true, _) => None,
        (false, Some(before)) if before == now => Some(Write::Refresh),
        (false, _) => Some(Write::Conditions),
    }
}

fn conditions(status: Option<&WorkerClusterStatus>) -> Conditions {
    status
        .map(|s| {
            s.conditions
                .iter()
                .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
                .collect()
        })
        .unwrap_or_default()
}

impl StatusWrites {
    pub async fn start(manager: &kube::Client) -> anyhow::Result<StatusWrites> {
        let seen: Arc<Mutex<Seen>> = Arc::default();
        let noted = Arc::clone(&seen);
        let clusters: Api<WorkerCluster> = Api::all(manager.clone());
        let watch = measure::recording(clusters, move |event, _| {
            let mut seen = noted.lock().unwrap_or_else(|p| p.into_inner());
            let (cluster, initial) = match event {
                Event::Apply(cluster) => (cluster, false),
                Event::InitApply(cluster) => (cluster, true),
                _ => return,
            };
            let now = conditions(cluster.status.as_ref());
            let before = seen.conditions.insert(cluster.name_any(), now.clone());
            match kind(initial, before.as_ref(), &now) {
                Some(Write::Refresh) => seen.refreshes += 1,
                Some(Write::Conditions) => seen.condition_writes += 1,
                None => {}
            }
        })
        .listed()
        .await?;
        Ok(StatusWrites {
            seen,
            watch,
            started: Instant::now(),
        })
    }

    /// The writes seen so far; the watch stops.
    pub fn stop(self) -> Written {
        self.watch.stop();
        let seconds = self.started.elapsed().as_secs_f64();
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        Written {
            condition_writes: seen.condition_writes,
            refreshes: seen.refreshes,
            refreshes_per_second: seen.refreshes as f64 / seconds.max(f64::MIN_POSITIVE),
            seconds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connected(status: &str) -> Conditions {
        vec![("Connected".into(), status.into(), "r".into())]
    }

    #[test]
    fn the_initial_list_is_no_write() {
        assert_eq!(kind(true, None, &connected("True")), None);
    }

    #[test]
    fn a_write_that_keeps_the_conditions_is_a_refresh() {
        let before = connected("True");
        assert_eq!(
            kind(false, Some(&before), &connected("True")),
            Some(Write::Refresh)
        );
    }

    #[test]
    fn a_changed_or_first_seen_condition_is_a_condition_write() {
        let before = connected("True");
        assert_eq!(
            kind(false, Some(&before), &connected("False")),
            Some(Write::Conditions)
        );
        assert_eq!(
            kind(false, None, &connected("True")),
            Some(Write::Conditions)
        );
    }
}
