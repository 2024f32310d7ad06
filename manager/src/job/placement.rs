//! Which worker cluster a Job goes to.

use std::collections::BTreeSet;

use jobrelay_proto::wire::{AVOID_UNTIL_ANNOTATION, CLUSTER_KEY, WITHDRAWN_FROM_ANNOTATION};
use k8s_openapi::jiff::Timestamp;

use crate::job::lifecycle::is_relayed;
use crate::job::withdrawal::not_admitted_by;
use crate::kinds::RelayedKind;

/// A connected cluster and how many mirrors it holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub name: String,
    pub active_mirrors: usize,
}

/// Whether `job` is relayed, still to be placed, and not being deleted: it
/// may be waiting for a cluster to connect.
pub fn awaits_placement<K: RelayedKind>(job: &K) -> bool {
    is_relayed(job) && assigned_cluster(job).is_none() && job.meta().deletion_timestamp.is_none()
}

/// The cluster a Job was already sent to (annotation), if any.
pub fn assigned_cluster<K: kube::Resource>(job: &K) -> Option<&str> {
    job.meta()
        .annotations
        .as_ref()?
        .get(CLUSTER_KEY)
        .map(String::as_str)
}

/// The cluster a user pinned the Job to (label), if any.
pub fn pinned_cluster<K: kube::Resource>(job: &K) -> Option<&str> {
    job.meta()
        .labels
        .as_ref()?
        .get(CLUSTER_KEY)
        .map(String::as_str)
}

/// The pinned cluster if there is one, else the candidate (name, active
/// mirrors; in ascending order of name) with the fewest active mirrors that
/// `takes`, the first of equals, so the choice is stable. `takes` is asked
/// only of a candidate that would beat the best so far, so a large fleet
/// costs a pass over counts, not a namespace check per cluster. `None` when
/// nothing is pinned and no candidate takes the Job.
pub fn choose_cluster<'a>(
    pinned: Option<&str>,
    candidates: impl IntoIterator<Item = (&'a str, usize)>,
    takes: impl Fn(&str) -> bool,
) -> Option<String> {
    if let Some(pinned) = pinned {
        return Some(pinned.to_string());
    }
    let mut best: Option<(&str, usize)> = None;
    for (name, active) in candidates {
        let beats = best.is_none_or(|(_, fewest)| active < fewest);
        if beats && takes(name) {
            best = Some((name, active));
        }
    }
    best.map(|(name, _)| name.to_string())
}

/// What a Job's earlier placements say about its next one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preferences {
    /// Clusters tried only when no other can take the Job: the one its
    /// mirror was last withdrawn from, those whose Kueue did not admit it.
    pub last: BTreeSet<String>,
    /// The cluster not tried at all, and until when: the Job's Pods did not
    /// become ready there.
    pub avoiding: Option<(String, Timestamp)>,
}

impl Preferences {
    pub fn avoids(&self, cluster: &str) -> bool {
        self.avoiding.as_ref().is_some_and(|(c, _)| c == cluster)
    }

    pub fn tries_last(&self, cluster: &str) -> bool {
        self.last.contains(cluster)
    }
}

/// Reads the Job's [`Preferences`] from its annotations at `now`; an
/// avoidance that ran out, or whose moment cannot be read, is none.
pub fn preferences<K: kube::Resource>(job: &K, now: Timestamp) -> Preferences {
    let annotations = job.meta().annotations.as_ref();
    let withdrawn_from = annotations.and_then(|a| a.get(WITHDRAWN_FROM_ANNOTATION));
    let until = annotations
        .and_then(|a| a.get(AVOID_UNTIL_ANNOTATION))
        .and_then(|t| t.parse::<Timestamp>().ok());
    let mut last = not_admitted_by(job);
    last.extend(withdrawn_from.cloned());
    Preferences {
        last,
        avoiding: withdrawn_from
            .cloned()
            .zip(until)
            .filter(|(_, until)| *until > now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::Job;

    #[test]
    fn a_withdrawn_job_tries_its_old_cluster_last_and_avoids_it_while_told() {
        let job = |annotations: &[(&str, &str)]| -> Job {
            let mut job = Job::default();
            job.metadata.annotations = Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            );
            job
        };
        let now: Timestamp = "2026-11-27T12:00:00Z".parse().unwrap();
        assert_eq!(preferences(&job(&[]), now), Preferences::default());
        let withdrawn = preferences(&job(&[(WITHDRAWN_FROM_ANNOTATION, "w1")]), now);
        assert!(withdrawn.tries_last("w1") && !withdrawn.avoids("w1"));
        let avoiding = job(&[
            (WITHDRAWN_FROM_ANNOTATION, "w1"),
            (AVOID_UNTIL_ANNOTATION, "2026-11-27T12:10:00Z"),
            (jobrelay_proto::wire::NOT_ADMITTED_BY_ANNOTATION, "w3"),
        ]);
        let p = preferences(&avoiding, now);
        assert!(p.avoids("w1") && !p.avoids("w3") && p.tries_last("w3"));
        let later: Timestamp = "2026-11-27T12:10:00Z".parse().unwrap();
        assert!(!preferences(&avoiding, later).avoids("w1"), "ran out");
        let unreadable = job(&[
            (WITHDRAWN_FROM_ANNOTATION, "w1"),
            (AVOID_UNTIL_ANNOTATION, "soon"),
        ]);
        assert!(!preferences(&unreadable, now).avoids("w1"));
    }

    #[test]
    fn only_relayed_unplaced_live_jobs_await_placement() {
        let job = |managed_by: &str, cluster: Option<&str>, deleting: bool| -> Job {
            let mut job: Job = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "j", "namespace": "ns"},
                "spec": {"managedBy": managed_by, "template": {}},
            }))
            .expect("a Job");
            if let Some(cluster) = cluster {
                job.metadata.annotations =
                    Some([(CLUSTER_KEY.to_string(), cluster.to_string())].into());
            }
            if deleting {
                job.metadata.deletion_timestamp =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        k8s_openapi::jiff::Timestamp::now(),
                    ));
            }
            job
        };
        let relayed = jobrelay_proto::wire::MANAGED_BY;
        assert!(awaits_placement(&job(relayed, None, false)));
        assert!(
            !awaits_placement(&job(relayed, Some("worker-a"), false)),
            "placed"
        );
        assert!(
            !awaits_placement(&job(relayed, None, true)),
            "being deleted"
        );
        assert!(
            !awaits_placement(&job("kueue.x-k8s.io/multikueue", None, false)),
            "not relayed"
        );
    }

    fn all(_: &str) -> bool {
        true
    }

    #[test]
    fn a_pinned_job_goes_where_it_is_pinned_even_if_that_cluster_is_away() {
        assert_eq!(
            choose_cluster(Some("worker-b"), [("worker-a", 0)], all),
            Some("worker-b".into())
        );
    }

    #[test]
    fn an_unpinned_job_goes_to_the_least_loaded_cluster() {
        let fleet = [("worker-a", 5), ("worker-b", 2), ("worker-c", 9)];
        assert_eq!(choose_cluster(None, fleet, all), Some("worker-b".into()));
    }

    #[test]
    fn ties_go_to_the_first_by_name_and_no_cluster_means_no_choice() {
        assert_eq!(
            choose_cluster(None, [("worker-a", 1), ("worker-b", 1)], all),
            Some("worker-a".into())
        );
        assert_eq!(choose_cluster(None, [], all), None);
    }

    #[test]
    fn a_cluster_that_does_not_take_the_job_is_passed_over() {
        let fleet = [("worker-a", 5), ("worker-b", 2), ("worker-c", 9)];
        let not_b = |name: &str| name != "worker-b";
        assert_eq!(choose_cluster(None, fleet, not_b), Some("worker-a".into()));
        assert_eq!(choose_cluster(None, fleet, |_| false), None);
    }

    #[test]
    fn only_a_candidate_that_would_beat_the_best_is_asked() {
        let asked = std::cell::RefCell::new(Vec::new());
        let takes = |name: &str| {
            asked.borrow_mut().push(name.to_string());
            true
        };
        let fleet = [
            ("worker-a", 1),
            ("worker-b", 3),
            ("worker-c", 0),
            ("worker-d", 2),
        ];
        assert_eq!(choose_cluster(None, fleet, takes), Some("worker-c".into()));
        assert_eq!(*asked.borrow(), ["worker-a", "worker-c"]);
    }
}
