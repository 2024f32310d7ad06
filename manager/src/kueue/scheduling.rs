//! The scheduling constraints of a Workload's admission — its assigned
//! flavors' node labels and tolerations — as Kueue will inject them into the
//! Job when it admits it, so the mirror created before admission already
//! carries them.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Toleration;

use super::types::{Admission, ResourceFlavorSpec};

/// Node selector entries and tolerations to add to a pod template.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scheduling {
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
}

/// The constraints of the flavors assigned to the Job's pod set (a batch/v1
/// Job has one), looking flavors up with `flavor`; a flavor not found adds
/// nothing. `Err` names a flavor missing from `flavor`'s answers.
pub fn from_admission<'a>(
    admission: &Admission,
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
        scheduling.node_selector.extend(spec.node_labels.clone());
        for toleration in &spec.tolerations {
            if !scheduling.tolerations.contains(toleration) {
                scheduling.tolerations.push(toleration.clone());
            }
        }
    }
    Ok(scheduling)
}

/// Adds `scheduling` to the Job's pod template (what the Job already says
/// wins for a node-selector key; a toleration is not repeated).
pub fn apply(job: &mut Job, scheduling: &Scheduling) {
    let Some(pod) = job.spec.as_mut().and_then(|s| s.template.spec.as_mut()) else {
        return;
    };
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
        let scheduling = from_admission(&admission(&[("cpu", "spot"), ("memory", "spot")]), |n| {
            flavors.get(n)
        })
        .unwrap();
        assert_eq!(scheduling.node_selector["pool"], "spot");
        assert_eq!(scheduling.tolerations.len(), 1);
        let plain = from_admission(&admission(&[("cpu", "plain")]), |n| flavors.get(n)).unwrap();
        assert_eq!(plain, Scheduling::default());
        let unknown = from_admission(&admission(&[("cpu", "gpu")]), |n| flavors.get(n));
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
        let scheduling =
            from_admission(&admission(&[("cpu", "spot")]), |n| flavors.get(n)).unwrap();
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
}
