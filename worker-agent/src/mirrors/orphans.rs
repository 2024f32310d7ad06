//! The orphan sweep: everything of this origin on the worker whose origin UID
//! the manager does not want is deleted, the same way as a requested delete.
//! This is what cleans up after restarts, Lost clusters and deletions that
//! happened while the agent was away.

use std::collections::HashSet;

use kube::{Resource, ResourceExt};
use tracing::{debug, info};

use super::{Mirrors, origin_uid};

/// Orphans found in one sweep above which each is logged at debug only.
const LOG_EACH_UP_TO: usize = 20;

impl Mirrors {
    /// Starts deleting every Job and Pod of this origin whose origin UID the
    /// manager does not want (nothing before the first DesiredSet of a session).
    pub fn sweep_orphans(&mut self) {
        let Some(desired) = &self.desired else { return };
        let jobs = self.jobs.state().into_iter().filter_map(|job| {
            Some(HeldMirror {
                origin_uid: origin_uid(job.meta())?,
                namespace: job.namespace().unwrap_or_default(),
                name: job.name_any(),
            })
        });
        let pods = self.pods.state().into_iter().filter_map(|pod| {
            Some(HeldMirror {
                origin_uid: origin_uid(pod.meta())?,
                namespace: pod.namespace().unwrap_or_default(),
                name: String::new(),
            })
        });
        let orphans = orphans(jobs.chain(pods), desired, |uid| {
            self.deleting.contains_key(uid)
        });
        if orphans.len() > LOG_EACH_UP_TO {
            info!(
                orphans = orphans.len(),
                "orphan sweep: deleting what the manager does not want"
            );
        }
        for HeldMirror {
            origin_uid: uid,
            namespace,
            name,
        } in orphans
        {
            if self.deleting.len() < LOG_EACH_UP_TO {
                info!(%uid, %namespace, %name, "not desired by the manager; deleting");
            } else {
                debug!(%uid, %namespace, %name, "not desired by the manager; deleting");
            }
            self.begin_delete(uid, namespace, name);
        }
    }
}

/// A Job or Pod of this origin found on the worker.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct HeldMirror {
    pub origin_uid: String,
    pub namespace: String,
    /// The Job's name; empty for a Pod.
    pub name: String,
}

/// The orphan decision: of what is `held`, the mirrors whose origin UID the
/// manager does not want and that are not `deleting` already, one per origin
/// UID, ordered by it. Of several entries of one UID the Job's is kept, so
/// the deletion is logged with its name.
pub fn orphans(
    held: impl IntoIterator<Item = HeldMirror>,
    desired: &HashSet<String>,
    deleting: impl Fn(&str) -> bool,
) -> Vec<HeldMirror> {
    let mut orphans: Vec<HeldMirror> = held
        .into_iter()
        .filter(|m| !desired.contains(&m.origin_uid) && !deleting(&m.origin_uid))
        .collect();
    orphans.sort_by(|a, b| {
        (&a.origin_uid, a.name.is_empty())
            .cmp(&(&b.origin_uid, b.name.is_empty()))
            .then_with(|| a.cmp(b))
    });
    orphans.dedup_by(|a, b| a.origin_uid == b.origin_uid);
    orphans
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(uid: &str, namespace: &str, name: &str) -> HeldMirror {
        HeldMirror {
            origin_uid: uid.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    fn uids(orphans: &[HeldMirror]) -> Vec<&str> {
        orphans.iter().map(|m| m.origin_uid.as_str()).collect()
    }

    #[test]
    fn nothing_is_an_orphan_when_the_manager_wants_everything_held() {
        let desired: HashSet<String> = ["u1", "u2"].map(String::from).into();
        let found = orphans(
            [
                held("u1", "ml", "a"),
                held("u2", "ml", "b"),
                held("u2", "ml", ""),
            ],
            &desired,
            |_| false,
        );
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn what_is_not_desired_and_not_yet_deleting_is_an_orphan_once_in_uid_order() {
        let desired: HashSet<String> = ["u1"].map(String::from).into();
        let found = orphans(
            [
                held("u4", "ml", "d"),
                held("u1", "ml", "a"),
                held("u3", "ml", "c"),
                held("u3", "ml", "c"),
                held("u2", "ml", "b"),
                held("u5", "batch", ""),
            ],
            &desired,
            |uid| uid == "u2",
        );
        assert_eq!(uids(&found), ["u3", "u4", "u5"]);
        assert_eq!(found[0], held("u3", "ml", "c"));
        assert_eq!(
            found[2],
            held("u5", "batch", ""),
            "a Pod alone is an orphan"
        );
    }

    #[test]
    fn of_a_job_and_its_pods_one_entry_is_kept() {
        let found = orphans(
            [
                held("u1", "ml", ""),
                held("u1", "ml", "train"),
                held("u1", "ml", ""),
            ],
            &HashSet::new(),
            |_| false,
        );
        assert_eq!(
            found,
            [held("u1", "ml", "train")],
            "the Job's entry names it"
        );
    }
}
