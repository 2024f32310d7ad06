//! The scheduling constraints of a Workload's admission — each pod set's
//! assigned flavors' node labels and tolerations — as Kueue injects them
//! into the Job (a JobSet: each replicated Job) when it admits it; recorded
//! on the Job when it is placed (annotation `jobrelay.dev/kueue-flavors`),
//! so the mirror can be built without them, or, opted in, created with them
//! before admission.

use std::collections::{BTreeMap, BTreeSet};

use jobrelay_proto::wire::FLAVORS_ANNOTATION;
use k8s_openapi::api::core::v1::{PodSpec, Toleration};
use serde::{Deserialize, Serialize};

use super::types::{Admission, PodSet, ResourceFlavorSpec};

/// Node selector entries and tolerations one pod template gets from flavors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Constraints {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
}

impl Constraints {
    pub fn is_empty(&self) -> bool {
        self.node_selector.is_empty() && self.tolerations.is_empty()
    }

    /// Adds `other`'s entries: a node-selector key already here keeps its
    /// value; a toleration is not repeated.
    fn add(&mut self, other: &Constraints) {
        for (key, value) in &other.node_selector {
            self.node_selector
                .entry(key.clone())
                .or_insert_with(|| value.clone());
        }
        for toleration in &other.tolerations {
            if !self.tolerations.contains(toleration) {
                self.tolerations.push(toleration.clone());
            }
        }
    }
}

/// The flavors' constraints of each pod set, by the pod set's name — a
/// Job has one pod set, a JobSet one per replicated Job, named as it — so
/// two pod sets admitted in different flavors keep their own. Pod sets
/// without any are left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Scheduling {
    pub pod_sets: BTreeMap<String, Constraints>,
}

/// The key under which a record written before constraints were kept per
/// pod set holds them: they are every pod set's. A pod set's name is a DNS
/// label, so it is never this.
const EVERY_POD_SET: &str = "*";

impl Scheduling {
    pub fn is_empty(&self) -> bool {
        self.pod_sets.values().all(Constraints::is_empty)
    }

    /// The constraints of the pod set `name`.
    pub fn of(&self, name: &str) -> Constraints {
        let mut constraints = Constraints::default();
        for key in [name, EVERY_POD_SET] {
            if let Some(of_key) = self.pod_sets.get(key) {
                constraints.add(of_key);
            }
        }
        constraints
    }

    /// Every pod set's constraints together: those of an object with one
    /// pod set (a batch/v1 Job), whatever Kueue named it.
    pub fn whole(&self) -> Constraints {
        let mut constraints = Constraints::default();
        for of_pod_set in self.pod_sets.values() {
            constraints.add(of_pod_set);
        }
        constraints
    }
}

/// What the Workload's own pod sets (the Job's templates as the user wrote
/// them, before any admission) already ask for, pod set by pod set.
pub fn own(pod_sets: &[PodSet]) -> Scheduling {
    let pod_sets = pod_sets.iter().map(|pod_set| {
        let spec = &pod_set.template.spec;
        let own = Constraints {
            node_selector: spec.node_selector.clone(),
            tolerations: spec.tolerations.clone(),
        };
        (pod_set.name.clone(), own)
    });
    Scheduling {
        pod_sets: pod_sets.collect(),
    }
}

/// The constraints of the flavors assigned to each pod set, looking flavors
/// up with `flavor`, less what that pod set's own template (`own`) already
/// has: those are the user's, whatever a flavor says. `Err` names a flavor
/// missing from `flavor`'s answers.
pub fn from_admission<'a>(
    admission: &Admission,
    own: &Scheduling,
    flavor: impl Fn(&str) -> Option<&'a ResourceFlavorSpec>,
) -> Result<Scheduling, String> {
    let mut scheduling = Scheduling::default();
    for assignment in &admission.pod_set_assignments {
        let own = own.of(&assignment.name);
        let mut constraints = Constraints::default();
        let names: BTreeSet<&str> = assignment.flavors.values().map(String::as_str).collect();
        for name in names {
            let spec = flavor(name).ok_or_else(|| format!("ResourceFlavor {name} is not known"))?;
            for (key, value) in &spec.node_labels {
                if own.node_selector.get(key) != Some(value) {
                    constraints.node_selector.insert(key.clone(), value.clone());
                }
            }
            for toleration in &spec.tolerations {
                if !constraints.tolerations.contains(toleration)
                    && !own.tolerations.contains(toleration)
                {
                    constraints.tolerations.push(toleration.clone());
                }
            }
        }
        if !constraints.is_empty() {
            scheduling
                .pod_sets
                .insert(assignment.name.clone(), constraints);
        }
    }
    Ok(scheduling)
}

/// A record as written: per pod set, or — written before constraints were
/// kept per pod set — one set of constraints for all of them.
#[derive(Deserialize)]
#[serde(untagged)]
enum Record {
    PerPodSet(Scheduling),
    Every(Constraints),
}

/// The flavors' constraints recorded on the Job when it was placed; none if
/// it carries no (readable) record.
pub fn recorded<K: kube::Resource>(job: &K) -> Scheduling {
    let record = job
        .meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(FLAVORS_ANNOTATION))
        .and_then(|json| serde_json::from_str(json).ok());
    match record {
        Some(Record::PerPodSet(scheduling)) => scheduling,
        Some(Record::Every(constraints)) => Scheduling {
            pod_sets: [(EVERY_POD_SET.to_string(), constraints)].into(),
        },
        None => Scheduling::default(),
    }
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

/// Adds `constraints` to one pod template (what the template already says
/// wins for a node-selector key; a toleration is not repeated).
pub fn apply_to(pod: &mut PodSpec, constraints: &Constraints) {
    if !constraints.node_selector.is_empty() {
        let selector = pod.node_selector.get_or_insert_with(BTreeMap::new);
        for (key, value) in &constraints.node_selector {
            selector.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    if !constraints.tolerations.is_empty() {
        let tolerations = pod.tolerations.get_or_insert_with(Vec::new);
        for toleration in &constraints.tolerations {
            if !tolerations.contains(toleration) {
                tolerations.push(toleration.clone());
            }
        }
    }
}

#[cfg(test)]
#[path = "scheduling_tests.rs"]
mod tests;
