//! Whether a Workload in a jobrelay check is one jobrelay can relay: owned by
//! a `batch/v1` Job or a JobSet whose `spec.managedBy` is jobrelay's. Anything else can
//! never pass the check; it is rejected saying what to change, rather than
//! holding its quota while nothing happens.

use jobrelay_proto::wire::MANAGED_BY;

/// What owns a Workload, as jobrelay's check sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// A kind jobrelay relays (a `batch/v1` Job, a JobSet); `cached` is
    /// false while the manager's cache has not seen it, and `managed_by` is
    /// its `spec.managedBy`.
    Relayed {
        kind: &'static str,
        name: String,
        cached: bool,
        managed_by: Option<String>,
    },
    /// A kind jobrelay relays but this manager does not watch: its cluster
    /// did not serve it when the manager started.
    Unwatched { kind: &'static str, name: String },
    /// Another kind: what owns it.
    Other {
        api_version: String,
        kind: String,
        name: String,
    },
    /// No owner reference.
    None,
}

/// Why the Workload can never pass a jobrelay check, or `None` when it can
/// (or the cache has not seen its Job yet).
pub fn not_ours(owner: &Owner) -> Option<String> {
    match owner {
        Owner::Relayed { cached: false, .. } => None,
        Owner::Relayed { managed_by, .. } if managed_by.as_deref() == Some(MANAGED_BY) => None,
        Owner::Relayed {
            kind,
            name,
            managed_by,
            ..
        } => {
            let has = match managed_by {
                Some(other) => format!("spec.managedBy {other:?}"),
                None => "no spec.managedBy".to_string(),
            };
            Some(format!(
                "{kind} {name} has {has}: jobrelay relays only {kind}s with spec.managedBy: {MANAGED_BY}. \
                 The field cannot be changed on an existing {kind}; create the {kind} again with it, or queue it \
                 in a LocalQueue whose ClusterQueue has no jobrelay admission check"
            ))
        }
        Owner::Unwatched { kind, name } => Some(format!(
            "the Workload belongs to {kind} {name}, and this manager does not watch {kind}s: \
             their CRD was not installed when it started. Restart the manager"
        )),
        Owner::Other {
            api_version,
            kind,
            name,
        } => Some(format!(
            "the Workload belongs to {kind} {name} ({api_version}); jobrelay relays batch/v1 Jobs \
             and jobset.x-k8s.io/v1alpha2 JobSets only. Queue it in a LocalQueue whose ClusterQueue \
             has no jobrelay admission check"
        )),
        Owner::None => Some(
            "the Workload has no owner; jobrelay relays the Workloads of batch/v1 Jobs and JobSets only".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(cached: bool, managed_by: Option<&str>) -> Owner {
        Owner::Relayed {
            kind: "Job",
            name: "train".into(),
            cached,
            managed_by: managed_by.map(str::to_string),
        }
    }

    #[test]
    fn a_job_managed_by_jobrelay_or_not_cached_yet_is_ours() {
        assert_eq!(not_ours(&job(true, Some(MANAGED_BY))), None);
        assert_eq!(not_ours(&job(false, None)), None, "the cache may lag");
    }

    #[test]
    fn a_job_without_jobrelays_managed_by_is_told_the_field_and_the_fix() {
        let unset = not_ours(&job(true, None)).unwrap();
        assert!(unset.contains("Job train has no spec.managedBy"), "{unset}");
        assert!(unset.contains("create the Job again"), "{unset}");
        let other = not_ours(&job(true, Some("kueue.x-k8s.io/multikueue"))).unwrap();
        assert!(
            other.contains("spec.managedBy \"kueue.x-k8s.io/multikueue\""),
            "{other}"
        );
    }

    #[test]
    fn a_jobset_is_told_the_same_and_another_kind_or_no_owner_is_not_ours() {
        let jobset = Owner::Relayed {
            kind: "JobSet",
            name: "llm".into(),
            cached: true,
            managed_by: None,
        };
        let told = not_ours(&jobset).unwrap();
        assert!(told.contains("JobSet llm has no spec.managedBy"), "{told}");
        assert!(told.contains("create the JobSet again"), "{told}");
        let ray = not_ours(&Owner::Other {
            api_version: "ray.io/v1".into(),
            kind: "RayJob".into(),
            name: "tune".into(),
        })
        .unwrap();
        assert!(
            ray.contains("RayJob tune (ray.io/v1)") && ray.contains("JobSets only"),
            "{ray}"
        );
        assert!(not_ours(&Owner::None).unwrap().contains("no owner"));
        let unwatched = not_ours(&Owner::Unwatched {
            kind: "JobSet",
            name: "llm".into(),
        })
        .unwrap();
        assert!(unwatched.contains("Restart the manager"), "{unwatched}");
    }
}
