//! The scheduling constraints of a Workload's admission — its assigned
//! flavors' node labels and tolerations — as Kueue injects them into the
//! Job when it admits it; recorded on the Job when it is placed (annotation
//! `jobrelay.dev/kueue-flavors`), so the mirror can be built without them,
//! or, opted in, created with them before admission.

use std::collections::BTreeMap;

use jobrelay_proto::wire::FLAVORS_ANNOTATION;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PodSpec, Toleration};
use serde::{Deserialize, Serialize};

use super::types::{Admission, PodSet, ResourceFlavorSpec};

/// Node selector entries and tolerations a pod template gets from flavors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Scheduling {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
}

impl Scheduling {
    pub fn is_empty(&self) -> bool {
        self.node_selector.is_empty() && self.tolerations.is_empty()
    }
}

/// What the Workload's own pod sets (the Job's template as the user wrote
/// it, before any admission) already ask for.
pub fn own(pod_sets: &[PodSet]) -> Scheduling {
    let mut own = Scheduling::default();
    for spec in pod_sets.iter().map(|p| &p.template.spec) {
        own.node_selector.extend(spec.node_selector.clone());
        for toleration in &spec.tolerations {
            if !own.tolerations.contains(toleration) {
                own.tolerations.push(toleration.clone());
            }
        }
    }
    own
}

/// The constraints of the flavors assigned to the Job's pod set (a batch/v1
/// Job has one), looking flavors up with `flavor`, less what the Job's own
/// template (`own`) already has: those are the user's, whatever a flavor
/// says. `Err` names a flavor missing from `flavor`'s answers.
pub fn from_admission<'a>(
    admission: &Admission,
    own: &Scheduling,
    flavor: impl Fn(&str) -> Option<&'a ResourceFlavorSpec>,
) -> Result<Scheduling, String> {
    let mut scheduling = Scheduling::default();
    let names: std::collections::BTreeSet<&str> = admission
        .pod_set_assignments
        .iter()
        .flat_map(|a| a.flavors.values())
        .map(String::as_str)
        .collect();
    for name in names {
        let spec = flavor(name).ok_or_else(|| format!("ResourceFlavor {name} is not known"))?;
        for (key, value) in &spec.node_labels {
            if own.node_selector.get(key) != Some(value) {
                scheduling.node_selector.insert(key.clone(), value.clone());
            }
        }
        for toleration in &spec.tolerations {
            if !scheduling.tolerations.contains(toleration) && !own.tolerations.contains(toleration)
            {
                scheduling.tolerations.push(toleration.clone());
            }
        }
    }
    Ok(scheduling)
}

/// The flavors' constraints recorded on the Job when it was placed; none if
/// it carries no (readable) record.
pub fn recorded<K: kube::Resource>(job: &K) -> Scheduling {
    job.meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(FLAVORS_ANNOTATION))
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

/// A change to a Job's record of the flavors it was reserved under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlavorsChange {
    /// Record these (the annotation's JSON).
    Record(String),
    /// Remove the record: the reservation has no flavors to keep.
    Remove,
}

impl FlavorsChange {
    /// The annotation's new value; `None`: removed.
    pub fn value(&self) -> Option<&str> {
        match self {
            FlavorsChange::Record(json) => Some(json),
            FlavorsChange::Remove => None,
        }
    }
}

/// How the Job's record of its flavors must change for it to read
/// `scheduling`; `None` if it already does.
pub fn to_record<K: kube::Resource>(job: &K, scheduling: &Scheduling) -> Option<FlavorsChange> {
    let has_record = job
        .meta()
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(FLAVORS_ANNOTATION));
    if recorded(job) == *scheduling && has_record != scheduling.is_empty() {
        return None;
    }
    Some(match scheduling.is_empty() {
        true => FlavorsChange::Remove,
        false => FlavorsChange::Record(serde_json::to_string(scheduling).unwrap_or_default()),
    })
}

/// Adds `scheduling` to the Job's pod template (what the Job already says
/// wins for a node-selector key; a toleration is not repeated).
pub fn apply(job: &mut Job, scheduling: &Scheduling) {
    if let Some(pod) = job.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        apply_to(pod, scheduling);
    }
}

/// Adds `scheduling` to one pod template (see [`apply`]).
pub fn apply_to(pod: &mut PodSpec, scheduling: &Scheduling) {
    if !scheduling.node_selector.is_empty() {
        let selector = pod.node_selector.get_or_insert_with(BTreeMap::new);
        for (key, value) in &scheduling.node_selector {
            selector.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    if !scheduling.tolerations.is_empty() {
        let tolerations = pod.tolerations.get_or_insert_with(Vec::new);
        for toleration in &scheduling.tolerations {
            if !tolerations.contains(toleration) {
                tolerations.push(toleration.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kueue::types::PodSetAssignment;

    fn flavors() -> BTreeMap<&'static str, ResourceFlavorSpec> {
        let spot: ResourceFlavorSpec = serde_json::from_value(serde_json::json!({
            "nodeLabels": {"pool": "spot"},
            "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
        }))
        .unwrap();
        BTreeMap::from([("spot", spot), ("plain", ResourceFlavorSpec::default())])
    }

    fn nothing_own() -> Scheduling {
        Scheduling::default()
    }

    fn admission(assigned: &[(&str, &str)]) -> Admission {
        Admission {
            cluster_queue: "cq".into(),
            pod_set_assignments: vec![PodSetAssignment {
                name: "main".into(),
                flavors: assigned
                    .iter()
                    .map(|(r, f)| (r.to_string(), f.to_string()))
                    .collect(),
            }],
        }
    }

    #[test]
    fn the_assigned_flavors_node_labels_and_tolerations_are_collected_once() {
        let flavors = flavors();
        let scheduling = from_admission(
            &admission(&[("cpu", "spot"), ("memory", "spot")]),
            &nothing_own(),
            |n| flavors.get(n),
        )
        .unwrap();
        assert_eq!(scheduling.node_selector["pool"], "spot");
        assert_eq!(scheduling.tolerations.len(), 1);
        let plain = from_admission(&admission(&[("cpu", "plain")]), &nothing_own(), |n| {
            flavors.get(n)
        })
        .unwrap();
        assert_eq!(plain, Scheduling::default());
        let unknown = from_admission(&admission(&[("cpu", "gpu")]), &nothing_own(), |n| {
            flavors.get(n)
        });
        assert_eq!(unknown, Err("ResourceFlavor gpu is not known".into()));
    }

    #[test]
    fn applying_adds_to_the_template_without_overriding_it() {
        let mut job: Job = serde_json::from_value(serde_json::json!({
            "spec": {"template": {"spec": {
                "containers": [], "nodeSelector": {"pool": "mine"},
            }}},
        }))
        .unwrap();
        let flavors = flavors();
        let scheduling = from_admission(&admission(&[("cpu", "spot")]), &nothing_own(), |n| {
            flavors.get(n)
        })
        .unwrap();
        apply(&mut job, &scheduling);
        apply(&mut job, &scheduling);
        let pod = job.spec.unwrap().template.spec.unwrap();
        assert_eq!(pod.node_selector.unwrap()["pool"], "mine");
        assert_eq!(
            pod.tolerations.unwrap().len(),
            1,
            "applied twice, added once"
        );
    }

    #[test]
    fn what_the_jobs_own_template_has_is_not_the_flavors() {
        let flavors = flavors();
        let pod_sets: Vec<PodSet> = serde_json::from_value(serde_json::json!([{
            "name": "main", "count": 1,
            "template": {"spec": {
                "containers": [],
                "nodeSelector": {"pool": "spot"},
                "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
            }},
        }]))
        .unwrap();
        let scheduling = from_admission(&admission(&[("cpu", "spot")]), &own(&pod_sets), |n| {
            flavors.get(n)
        })
        .unwrap();
        assert_eq!(scheduling, Scheduling::default(), "the user asked for both");
    }

    #[test]
    fn the_record_reads_back_and_is_rewritten_only_when_it_differs() {
        let flavors = flavors();
        let spot = from_admission(&admission(&[("cpu", "spot")]), &nothing_own(), |n| {
            flavors.get(n)
        })
        .unwrap();
        let mut job = Job::default();
        assert_eq!(to_record(&job, &Scheduling::default()), None);
        let Some(FlavorsChange::Record(value)) = to_record(&job, &spot) else {
            panic!("a record");
        };
        job.metadata.annotations = Some([(FLAVORS_ANNOTATION.to_string(), value)].into());
        assert_eq!(recorded(&job), spot);
        assert_eq!(to_record(&job, &spot), None);
        assert_eq!(
            to_record(&job, &Scheduling::default()),
            Some(FlavorsChange::Remove),
            "readmitted without flavors: the record goes"
        );
        job.metadata.annotations = Some([(FLAVORS_ANNOTATION.to_string(), "{".into())].into());
        assert_eq!(recorded(&job), Scheduling::default());
        assert!(to_record(&job, &spot).is_some());
    }
}
