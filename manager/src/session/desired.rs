//! What a session's DesiredSet says: the mirrors the cluster should hold,
//! and which of the rest the manager knows it releases — so the agent's
//! brake on mass deletion counts only what the manager does not know.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use jobrelay_proto::holding::Summary;
use jobrelay_proto::v1::{DesiredMirror, InventoryEntry};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::wanted::{summarise, wanted_on, wanted_where};
use crate::job::placement::awaits_placement;
use crate::kinds::Key;
use crate::kinds::RelayedKind;
use crate::kinds::stores::Stores;

/// What a session opens with: the DesiredSet of `cluster` over the objects
/// of every kind, and what of the agent's `inventory` it releases.
pub(super) fn for_cluster(
    stores: &Stores,
    cluster: &str,
    remote_retention: Duration,
    inventory: &[InventoryEntry],
) -> (Vec<(DesiredMirror, Key)>, Vec<String>) {
    let (desired, known) = resync_for_cluster(stores, cluster, remote_retention);
    let released = released(&known, inventory, &desired);
    (desired, released)
}

/// The objects of every kind waiting for a cluster to connect.
pub(super) fn awaiting_placement(stores: &Stores) -> Vec<Key> {
    let mut keys = awaiting(&stores.jobs.state());
    if let Some(jobsets) = &stores.jobsets {
        keys.extend(awaiting(&jobsets.state()));
    }
    keys
}

fn awaiting<K: RelayedKind>(objects: &[Arc<K>]) -> Vec<Key> {
    objects
        .iter()
        .filter(|object| awaits_placement(object.as_ref()))
        .map(|object| Key::from_obj(object.as_ref()))
        .collect()
}

fn uids<K: RelayedKind>(objects: &[Arc<K>]) -> impl Iterator<Item = &str> {
    objects.iter().filter_map(|o| o.meta().uid.as_deref())
}

/// What the manager wants on each cluster, summarised as the agents
/// summarise what they hold: the same mirrors a DesiredSet would name, in
/// one pass over the objects of every kind.
pub(super) fn wanted_by_cluster(
    stores: &Stores,
    remote_retention: Duration,
) -> HashMap<String, Summary> {
    let now = Timestamp::now();
    let jobs = stores.jobs.state();
    let jobsets = stores.jobset_state();
    summarise(
        wanted_where(&jobs, now, remote_retention).chain(wanted_where(
            &jobsets,
            now,
            remote_retention,
        )),
    )
}

/// What a DesiredSet sent again mid-session says: the mirrors `cluster`
/// should hold, and the origin UIDs of every object the stores know (of
/// those it tracks there, the manager releases the ones not wanted).
pub(super) fn resync_for_cluster(
    stores: &Stores,
    cluster: &str,
    remote_retention: Duration,
) -> (Vec<(DesiredMirror, Key)>, HashSet<String>) {
    let jobs = stores.jobs.state();
    let jobsets = stores.jobset_state();
    let mut desired = desired_set(&jobs, cluster, remote_retention);
    desired.extend(desired_set(&jobsets, cluster, remote_retention));
    let known = uids(&jobs)
        .chain(uids(&jobsets))
        .map(str::to_string)
        .collect();
    (desired, known)
}

/// The mirrors `cluster` should hold: its active objects, and finished ones
/// whose remote retention has not run out.
fn desired_set<K: RelayedKind>(
    objects: &[Arc<K>],
    cluster: &str,
    remote_retention: Duration,
) -> Vec<(DesiredMirror, Key)> {
    let now = Timestamp::now();
    objects
        .iter()
        .map(Arc::as_ref)
        .filter(|object| wanted_on(*object, now, remote_retention) == Some(cluster))
        .filter_map(|object| {
            let mirror = DesiredMirror {
                origin_uid: object.uid()?,
                namespace: object.namespace().unwrap_or_default(),
            };
            Some((mirror, Key::from_obj(object)))
        })
        .collect()
}

/// Of what the agent holds (`inventory`), the origin UIDs not `desired` whose
/// Jobs this manager has: being deleted, finished past retention, placed
/// elsewhere. Their deletion is ordinary; an origin UID this manager has
/// no Job of is not released, and the agent's brake weighs it.
fn released(
    known: &HashSet<String>,
    inventory: &[InventoryEntry],
    desired: &[(DesiredMirror, Key)],
) -> Vec<String> {
    let desired: HashSet<&str> = desired.iter().map(|(m, _)| m.origin_uid.as_str()).collect();
    let mut released: Vec<String> = inventory
        .iter()
        .map(|entry| entry.origin_uid.as_str())
        .filter(|uid| known.contains(*uid) && !desired.contains(uid))
        .map(str::to_string)
        .collect();
    released.sort_unstable();
    released.dedup();
    released
}

#[cfg(test)]
mod tests {
    use kube::Resource;

    use super::*;
    use k8s_openapi::api::batch::v1::Job;

    fn job(uid: &str) -> Arc<Job> {
        let mut job = Job::default();
        job.meta_mut().name = Some(format!("job-{uid}"));
        job.meta_mut().namespace = Some("ml".into());
        job.meta_mut().uid = Some(uid.into());
        Arc::new(job)
    }

    fn held(uid: &str) -> InventoryEntry {
        InventoryEntry {
            origin_uid: uid.into(),
            ..Default::default()
        }
    }

    #[test]
    fn what_the_agent_holds_and_the_manager_knows_but_does_not_want_is_released() {
        let jobs = [job("wanted"), job("elsewhere"), job("not-held")];
        let desired = [(
            DesiredMirror {
                origin_uid: "wanted".into(),
                namespace: "ml".into(),
            },
            Key::from_obj(jobs[0].as_ref()),
        )];
        let inventory = [held("wanted"), held("elsewhere"), held("unknown")];
        let known: HashSet<String> = uids(&jobs).map(str::to_string).collect();
        assert_eq!(
            released(&known, &inventory, &desired),
            ["elsewhere"],
            "wanted stays, a UID without a Job here is unknown, not released"
        );
    }

    #[test]
    fn a_manager_without_jobs_releases_nothing() {
        assert!(released(&HashSet::new(), &[held("a"), held("b")], &[]).is_empty());
    }

    /// A Job relayed by jobrelay, placed on `cluster` if any, finished or not.
    fn relayed(uid: &str, cluster: Option<&str>, finished: bool) -> Arc<Job> {
        let annotations = match cluster {
            Some(cluster) => serde_json::json!({jobrelay_proto::wire::CLUSTER_KEY: cluster}),
            None => serde_json::json!({}),
        };
        let conditions = match finished {
            true => serde_json::json!([{"type": "Complete", "status": "True",
                "lastTransitionTime": "2026-11-26T04:00:00Z"}]),
            false => serde_json::json!([]),
        };
        let job: Job = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("job-{uid}"), "namespace": "ml", "uid": uid,
                "annotations": annotations},
            "spec": {"managedBy": jobrelay_proto::wire::MANAGED_BY, "template": {}},
            "status": {"conditions": conditions},
        }))
        .unwrap();
        Arc::new(job)
    }

    #[test]
    fn what_is_wanted_on_each_cluster_is_what_its_desired_set_names() {
        let jobs = [
            relayed("a1", Some("a"), false),
            relayed("a2", Some("a"), false),
            relayed("b1", Some("b"), false),
            relayed("done", Some("a"), true),
            relayed("waiting", None, false),
            job("not-relayed"),
        ];
        let now = Timestamp::now();
        let wanted = summarise(wanted_where(&jobs, now, Duration::ZERO));
        let named = |cluster| {
            let desired = desired_set(&jobs, cluster, Duration::ZERO);
            Summary::of(desired.iter().map(|(m, _)| m.origin_uid.as_str()))
        };
        assert_eq!(
            wanted.len(),
            2,
            "clusters with nothing wanted are absent: {wanted:?}"
        );
        assert_eq!(wanted["a"], Summary::of(["a1", "a2"]));
        assert_eq!(wanted["a"], named("a"));
        assert_eq!(wanted["b"], named("b"));
    }
}
