//! Which worker cluster a Job goes to.

use std::collections::BTreeSet;

use jobrelay_kinds::room::demand::total_of;
use jobrelay_kinds::room::fit::{self, Shortfall};
use jobrelay_kinds::room::{PODS, PodGroup, Pool, Queue, Resources, quota};
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

/// A connected cluster as placement weighs it.
#[derive(Debug, Clone, Copy)]
pub struct Offer<'a> {
    pub name: &'a str,
    pub active_mirrors: usize,
    /// The room left there, once its agent reported room.
    pub left: Option<&'a [Pool]>,
    /// Where the Job would be queued in the worker's own Kueue: the
    /// ClusterQueue, with the quota it has left, once its agent reported it.
    pub queue: Option<&'a Queue>,
}

/// What a Job asks of placement beyond room for its Pods.
#[derive(Clone, Copy, Default)]
pub struct Wants<'a> {
    /// The cluster it is pinned to.
    pub pinned: Option<&'a str>,
    /// Clusters to fill first, in order (a `WorkerClusterSet` placed
    /// `InOrder`).
    pub fill: Option<&'a [String]>,
    /// On each cluster, the LocalQueue of the worker's own Kueue its mirror
    /// would be queued in (`namespace/name`), if it would be.
    pub queued_in: Option<&'a QueuedIn<'a>>,
}

/// On a cluster, the LocalQueue (`namespace/name`) of its own Kueue a
/// mirror would be queued in, if it would be.
pub type QueuedIn<'a> = dyn Fn(&str) -> Option<String> + 'a;

impl<'a> Wants<'a> {
    /// A Job pinned to `cluster`, if to one.
    pub fn pinned(cluster: Option<&'a str>) -> Wants<'a> {
        Wants {
            pinned: cluster,
            ..Wants::default()
        }
    }

    /// The LocalQueue the mirror would be queued in on `cluster`.
    pub fn queued_in(&self, cluster: &str) -> Option<String> {
        self.queued_in.and_then(|queued_in| queued_in(cluster))
    }
}

/// Where a Job goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    On(String),
    /// Clusters that take the Job have no room for it now: each, and what
    /// is short there.
    NoRoom(Vec<(String, Shortfall)>),
    /// No cluster takes the Job.
    NoCluster,
}

impl Choice {
    /// The cluster chosen, if one was.
    pub fn cluster(&self) -> Option<&str> {
        match self {
            Choice::On(cluster) => Some(cluster),
            Choice::NoRoom(_) | Choice::NoCluster => None,
        }
    }
}

/// The pinned cluster if there is one; else, of the clusters that `takes`
/// the Job, one where its Pods (`groups`) fit now — the first of them in
/// `fill` (clusters to fill first, in order; those not listed after), then
/// the one with the most room left of the Job's dominant resource (the one
/// it asks most of for what the fleet has free), then the fewest active
/// mirrors, then the first by name, so the choice is stable. A cluster whose room is unknown (its
/// agent reports none) comes after every cluster known to fit. `takes` is
/// asked in that order until one does, so a large fleet costs a sort, not a
/// namespace check per cluster.
pub fn choose_cluster<'a>(
    pinned: Option<&str>,
    fill: Option<&[String]>,
    offers: impl IntoIterator<Item = Offer<'a>>,
    takes: impl Fn(&str) -> bool,
    groups: &[PodGroup],
) -> Choice {
    if let Some(pinned) = pinned {
        return Choice::On(pinned.to_string());
    }
    let offers: Vec<Offer> = offers.into_iter().collect();
    let dominant = dominant(groups, offers.iter().filter_map(|o| o.left));
    let filled = |name: &str| {
        fill.map_or(0, |fill| {
            fill.iter().position(|c| c == name).unwrap_or(fill.len())
        })
    };
    let mut ranked = Vec::with_capacity(offers.len());
    let mut short = Vec::new();
    for offer in &offers {
        if let Err(shortfall) = fits(offer, groups) {
            short.push((offer.name, shortfall));
            continue;
        }
        let rank = match offer.left {
            None => (1, filled(offer.name), 0),
            Some(left) => (0, filled(offer.name), -free_of(left, dominant.as_deref())),
        };
        ranked.push((rank, offer.active_mirrors, offer.name));
    }
    ranked.sort_unstable();
    if let Some((_, _, name)) = ranked.into_iter().find(|(_, _, name)| takes(name)) {
        return Choice::On(name.to_string());
    }
    let short: Vec<(String, Shortfall)> = short
        .into_iter()
        .filter(|(name, _)| takes(name))
        .map(|(name, shortfall)| (name.to_string(), shortfall))
        .collect();
    match short.is_empty() {
        true => Choice::NoCluster,
        false => Choice::NoRoom(short),
    }
}

/// Whether the Job's Pods (`groups`) fit in what `offer` has left: its
/// pools, and its Kueue's quota where the Job would be queued there. Room
/// or quota not reported is no limit.
fn fits(offer: &Offer, groups: &[PodGroup]) -> Result<(), Shortfall> {
    if let Some(left) = offer.left {
        fit::fits(left, groups)?;
    }
    if let Some(queue) = offer.queue {
        let short_of = quota::short_of(&queue.free, groups);
        if !short_of.is_empty() {
            return Err(Shortfall::Quota {
                queue: queue.name.clone(),
                short_of,
            });
        }
    }
    Ok(())
}

/// The resource the Job asks most of for what the clusters have free
/// (`pods` only if it asks for nothing else); `None` if it asks for none.
fn dominant<'a>(groups: &[PodGroup], lefts: impl Iterator<Item = &'a [Pool]>) -> Option<String> {
    let asked = total_of(groups);
    let mut free = Resources::default();
    for pool in lefts.flatten() {
        free.add(&pool.free, 1);
    }
    let share = |resource: &str| -> (i128, i128) {
        (
            i128::from(asked.get(resource)),
            i128::from(free.get(resource).max(1)),
        )
    };
    asked
        .0
        .iter()
        .filter(|(resource, amount)| **amount > 0 && (*resource != PODS || asked.0.len() == 1))
        .map(|(resource, _)| resource.as_str())
        .max_by(|a, b| {
            let ((an, ad), (bn, bd)) = (share(a), share(b));
            (an * bd).cmp(&(bn * ad))
        })
        .map(String::from)
}

fn free_of(pools: &[Pool], resource: Option<&str>) -> i64 {
    resource.map_or(0, |resource| {
        pools
            .iter()
            .map(|pool| pool.free.get(resource))
            .fold(0, i64::saturating_add)
    })
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
#[path = "placement_tests.rs"]
mod choice_tests;

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
}
