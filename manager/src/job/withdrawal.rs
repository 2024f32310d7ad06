//! A mirror withdrawn so that its Job is placed afresh: why, and what it
//! leaves on the Job for placement (the clusters whose Kueue did not admit
//! it in time).

use std::collections::BTreeSet;
use std::time::Duration;

use jobrelay_proto::wire::NOT_ADMITTED_BY_ANNOTATION;

/// Why a Job's mirror must go, the Job to be placed afresh.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Withdrawal {
    /// What asked for it, for the Job's Event.
    pub why: String,
    /// The worker's Kueue did not admit it in time: placement tries other
    /// clusters first from then on.
    pub not_admitted: bool,
    /// The Job's Pods did not become ready there: placement avoids the
    /// cluster for this long.
    pub avoid_for: Option<Duration>,
    /// The mirror's Pods found no node there for the cluster's
    /// `unschedulableTimeout`: its start is shown as a warning.
    pub unschedulable: bool,
    /// The worker refused the mirror, for a reason that can clear, for the
    /// cluster's `refusedRetryTimeout`.
    pub refused: bool,
}

/// The clusters whose Kueue did not admit the Job's mirror in time.
pub fn not_admitted_by<K: kube::Resource>(job: &K) -> BTreeSet<String> {
    job.meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(NOT_ADMITTED_BY_ANNOTATION))
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The annotation's value once `cluster` is added to it.
pub fn with_not_admitted_by<K: kube::Resource>(job: &K, cluster: &str) -> String {
    let mut clusters = not_admitted_by(job);
    clusters.insert(cluster.to_string());
    clusters.into_iter().collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::Job;
    use std::collections::BTreeMap;

    #[test]
    fn clusters_that_did_not_admit_in_time_accumulate_in_one_annotation() {
        let mut job = Job::default();
        assert!(not_admitted_by(&job).is_empty());
        let value = with_not_admitted_by(&job, "w3");
        assert_eq!(value, "w3");
        job.metadata.annotations = Some(BTreeMap::from([(
            NOT_ADMITTED_BY_ANNOTATION.to_string(),
            value,
        )]));
        assert_eq!(with_not_admitted_by(&job, "w1"), "w1,w3");
        assert_eq!(with_not_admitted_by(&job, "w3"), "w3");
    }
}
