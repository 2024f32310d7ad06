use jobrelay_proto::wire::FLAVORS_ANNOTATION;
use k8s_openapi::api::batch::v1::Job;
use serde_json::json;

use super::*;
use crate::kueue::types::PodSetAssignment;

/// `spot`: a node label and a toleration; `reserved`: the same label key,
/// another value; `plain`: nothing.
fn flavors() -> BTreeMap<&'static str, ResourceFlavorSpec> {
    let spot: ResourceFlavorSpec = serde_json::from_value(json!({
        "nodeLabels": {"pool": "spot"},
        "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
    }))
    .unwrap();
    let reserved: ResourceFlavorSpec =
        serde_json::from_value(json!({"nodeLabels": {"pool": "reserved"}})).unwrap();
    BTreeMap::from([
        ("spot", spot),
        ("reserved", reserved),
        ("plain", ResourceFlavorSpec::default()),
    ])
}

fn nothing_own() -> Scheduling {
    Scheduling::default()
}

/// An admission of pod sets, each with its resources' flavors.
fn admission_of(pod_sets: &[(&str, &[(&str, &str)])]) -> Admission {
    let assignments = pod_sets.iter().map(|(name, assigned)| PodSetAssignment {
        name: name.to_string(),
        flavors: assigned
            .iter()
            .map(|(r, f)| (r.to_string(), f.to_string()))
            .collect(),
    });
    Admission {
        cluster_queue: "cq".into(),
        pod_set_assignments: assignments.collect(),
    }
}

/// A Job's admission: its one pod set, `main`.
fn admission(assigned: &[(&str, &str)]) -> Admission {
    admission_of(&[("main", assigned)])
}

fn admitted(admission: &Admission, own: &Scheduling) -> Result<Scheduling, String> {
    let flavors = flavors();
    from_admission(admission, own, |n| flavors.get(n))
}

#[test]
fn the_assigned_flavors_node_labels_and_tolerations_are_collected_once() {
    let scheduling = admitted(
        &admission(&[("cpu", "spot"), ("memory", "spot")]),
        &nothing_own(),
    )
    .unwrap();
    assert_eq!(scheduling.of("main").node_selector["pool"], "spot");
    assert_eq!(scheduling.of("main").tolerations.len(), 1);
    let plain = admitted(&admission(&[("cpu", "plain")]), &nothing_own()).unwrap();
    assert_eq!(plain, Scheduling::default(), "no pod set has any");
    let unknown = admitted(&admission(&[("cpu", "gpu")]), &nothing_own());
    assert_eq!(unknown, Err("ResourceFlavor gpu is not known".into()));
}

#[test]
fn two_pod_sets_in_different_flavors_keep_their_own() {
    let both = admission_of(&[
        ("leader", &[("cpu", "spot")]),
        ("workers", &[("cpu", "reserved")]),
    ]);
    let scheduling = admitted(&both, &nothing_own()).unwrap();
    assert_eq!(scheduling.of("leader").node_selector["pool"], "spot");
    assert_eq!(scheduling.of("leader").tolerations.len(), 1);
    assert_eq!(scheduling.of("workers").node_selector["pool"], "reserved");
    assert_eq!(scheduling.of("workers").tolerations, []);
    assert_eq!(scheduling.of("other"), Constraints::default());
}

#[test]
fn applying_adds_to_the_template_without_overriding_it() {
    let mut pod: PodSpec = serde_json::from_value(json!({
        "containers": [], "nodeSelector": {"pool": "mine"},
    }))
    .unwrap();
    let scheduling = admitted(&admission(&[("cpu", "spot")]), &nothing_own()).unwrap();
    apply_to(&mut pod, &scheduling.whole());
    apply_to(&mut pod, &scheduling.whole());
    assert_eq!(pod.node_selector.unwrap()["pool"], "mine");
    assert_eq!(
        pod.tolerations.unwrap().len(),
        1,
        "applied twice, added once"
    );
}

#[test]
fn what_a_pod_sets_own_template_has_is_not_its_flavors_but_may_be_anothers() {
    let pod_sets: Vec<PodSet> = serde_json::from_value(json!([
        {"name": "leader", "count": 1, "template": {"spec": {
            "containers": [],
            "nodeSelector": {"pool": "spot"},
            "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
        }}},
        {"name": "workers", "count": 2, "template": {"spec": {"containers": []}}},
    ]))
    .unwrap();
    let both = admission_of(&[
        ("leader", &[("cpu", "spot")]),
        ("workers", &[("cpu", "spot")]),
    ]);
    let scheduling = admitted(&both, &own(&pod_sets)).unwrap();
    assert_eq!(
        scheduling.of("leader"),
        Constraints::default(),
        "the user asked for both"
    );
    assert_eq!(
        scheduling.of("workers").node_selector["pool"],
        "spot",
        "the flavor's, on the pod set that did not ask"
    );
}

#[test]
fn the_record_reads_back_and_is_rewritten_only_when_it_differs() {
    let spot = admitted(&admission(&[("cpu", "spot")]), &nothing_own()).unwrap();
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

#[test]
fn a_record_of_one_set_of_constraints_is_every_pod_sets() {
    let mut job = Job::default();
    let every = json!({"nodeSelector": {"pool": "spot"}}).to_string();
    job.metadata.annotations = Some([(FLAVORS_ANNOTATION.to_string(), every)].into());
    let recorded = recorded(&job);
    assert_eq!(recorded.of("leader").node_selector["pool"], "spot");
    assert_eq!(recorded.of("workers").node_selector["pool"], "spot");
    assert_eq!(recorded.whole().node_selector["pool"], "spot");
    let spot = admitted(&admission(&[("cpu", "spot")]), &nothing_own()).unwrap();
    assert!(
        to_record(&job, &spot).is_some(),
        "rewritten per pod set when next recorded"
    );
}
