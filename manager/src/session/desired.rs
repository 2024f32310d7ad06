//! What a session's DesiredSet says: the mirrors the cluster should hold,
//! and which of the rest the manager knows it releases — so the agent's
//! brake on mass deletion counts only what the manager does not know.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use jobrelay_proto::v1::{DesiredMirror, InventoryEntry};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use crate::job::life::is_relayed;
use crate::job::placement::assigned_cluster;
use crate::job::retention::keeps_mirror;

/// The mirrors `cluster` should hold: its active Jobs, and finished ones
/// whose remote retention has not run out.
pub(super) fn desired_set(
    jobs: &[Arc<Job>],
    cluster: &str,
    remote_retention: Duration,
) -> Vec<(DesiredMirror, ObjectRef<Job>)> {
    let now = Timestamp::now();
    jobs.iter()
        .filter(|job| {
            is_relayed(&***job)
                && assigned_cluster(job) == Some(cluster)
                && keeps_mirror(job, now, remote_retention)
        })
        .filter_map(|job| {
            let mirror = DesiredMirror {
                origin_uid: job.uid()?,
            };
            Some((mirror, ObjectRef::from_obj(job.as_ref())))
        })
        .collect()
}

/// Of what the agent holds (`inventory`), the origin UIDs not `desired` whose
/// Jobs this manager has: being deleted, finished past retention, placed
/// elsewhere. Their deletion is ordinary; an origin UID this manager has
/// no Job of is not released, and the agent's brake weighs it.
pub(super) fn released(
    jobs: &[Arc<Job>],
    inventory: &[InventoryEntry],
    desired: &[(DesiredMirror, ObjectRef<Job>)],
) -> Vec<String> {
    let desired: HashSet<&str> = desired.iter().map(|(m, _)| m.origin_uid.as_str()).collect();
    let known: HashSet<&str> = jobs
        .iter()
        .filter_map(|job| job.metadata.uid.as_deref())
        .collect();
    let mut released: Vec<String> = inventory
        .iter()
        .map(|entry| entry.origin_uid.as_str())
        .filter(|uid| known.contains(uid) && !desired.contains(uid))
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
            },
            ObjectRef::from_obj(jobs[0].as_ref()),
        )];
        let inventory = [held("wanted"), held("elsewhere"), held("unknown")];
        assert_eq!(
            released(&jobs, &inventory, &desired),
            ["elsewhere"],
            "wanted stays, a UID without a Job here is unknown, not released"
        );
    }

    #[test]
    fn a_manager_without_jobs_releases_nothing() {
        assert!(released(&[], &[held("a"), held("b")], &[]).is_empty());
    }
}
