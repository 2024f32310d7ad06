use jobrelay_proto::wire::FLAVORS_ANNOTATION;
use k8s_openapi::api::core::v1::Toleration;
use serde_json::{Value, json};

use super::*;

/// What the Job's flavor adds: a node label and a toleration.
fn flavor() -> Value {
    json!({
        "nodeSelector": {"pool": "spot"},
        "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
    })
}

/// A reservation of [`flavor`] for a Job's pod set.
fn flavor_scheduling() -> Scheduling {
    Scheduling {
        pod_sets: [(
            "main".to_string(),
            serde_json::from_value(flavor()).unwrap(),
        )]
        .into(),
    }
}

/// A manager Job placed under a reservation of [`flavor`], its template as
/// `pod` says (merged over a container), its flavors recorded.
fn job(pod: Value) -> Job {
    let mut spec = json!({"containers": [{"name": "c", "image": "i"}]});
    if let (Some(spec), Some(pod)) = (spec.as_object_mut(), pod.as_object()) {
        spec.extend(pod.clone());
    }
    serde_json::from_value(json!({
        "metadata": {"annotations": {FLAVORS_ANNOTATION: json!({"podSets": {"main": flavor()}}).to_string()}},
        "spec": {"template": {"spec": spec}},
    }))
    .unwrap()
}

/// The mirror of `job` as it goes to its worker.
fn mirrored(job: &Job, flavors: Flavors, reserved: Option<&Scheduling>) -> PodSpec {
    let mut mirror = job.clone();
    for_worker(&mut mirror, job, flavors, reserved);
    mirror.spec.unwrap().template.spec.unwrap()
}

fn toleration(value: Value) -> Toleration {
    serde_json::from_value(value).unwrap()
}

#[test]
fn by_default_the_mirror_lacks_the_flavors_before_and_after_admission() {
    let suspended = job(json!({}));
    let pod = mirrored(&suspended, Flavors::Quota, Some(&flavor_scheduling()));
    assert_eq!((pod.node_selector, pod.tolerations), (None, None));
    // Kueue injected them into the manager Job on admission.
    let admitted = job(flavor());
    let pod = mirrored(&admitted, Flavors::Quota, None);
    assert_eq!((pod.node_selector, pod.tolerations), (None, None));
    let manager = admitted.spec.unwrap().template.spec.unwrap();
    assert!(
        manager.node_selector.is_some(),
        "the manager Job keeps them"
    );
}

#[test]
fn opted_in_the_suspended_mirror_gets_the_flavors_and_nothing_is_taken_out() {
    let suspended = job(json!({}));
    let pod = mirrored(&suspended, Flavors::OnMirrors, Some(&flavor_scheduling()));
    assert_eq!(pod.node_selector.unwrap()["pool"], "spot");
    assert_eq!(pod.tolerations.unwrap().len(), 1);
    let admitted = job(flavor());
    let pod = mirrored(&admitted, Flavors::OnMirrors, None);
    assert_eq!(pod.node_selector.unwrap()["pool"], "spot");
    assert_eq!(pod.tolerations.unwrap().len(), 1);
}

#[test]
fn the_users_own_node_selector_stays() {
    let admitted = job(json!({"nodeSelector": {"pool": "spot", "team": "vision"}}));
    let pod = mirrored(&admitted, Flavors::Quota, None);
    assert_eq!(
        pod.node_selector,
        Some([("team".to_string(), "vision".to_string())].into())
    );
}

#[test]
fn a_flavor_label_the_user_set_to_another_value_stays() {
    let own = job(json!({"nodeSelector": {"pool": "mine"}}));
    let pod = mirrored(&own, Flavors::Quota, None);
    assert_eq!(pod.node_selector.unwrap()["pool"], "mine");
}

#[test]
fn a_toleration_goes_only_if_equal_to_the_flavors() {
    let own = json!({"key": "spot", "operator": "Exists", "effect": "NoExecute"});
    let admitted = job(json!({"tolerations": [
        {"key": "spot", "operator": "Exists", "effect": "NoSchedule"},
        own,
    ]}));
    let pod = mirrored(&admitted, Flavors::Quota, None);
    assert_eq!(pod.tolerations, Some(vec![toleration(own)]));
}

#[test]
fn the_topology_gate_never_reaches_a_worker_and_other_gates_do() {
    let gates = json!({"schedulingGates": [
        {"name": "kueue.x-k8s.io/topology"}, {"name": "example.com/quota"},
    ]});
    for flavors in [Flavors::Quota, Flavors::OnMirrors] {
        let pod = mirrored(&job(gates.clone()), flavors, None);
        let names: Vec<String> = pod
            .scheduling_gates
            .unwrap_or_default()
            .into_iter()
            .map(|g| g.name)
            .collect();
        assert_eq!(names, ["example.com/quota"], "{flavors:?}");
    }
    let only = job(json!({"schedulingGates": [{"name": "kueue.x-k8s.io/topology"}]}));
    assert_eq!(mirrored(&only, Flavors::Quota, None).scheduling_gates, None);
}

#[test]
fn a_job_placed_without_a_reservation_loses_nothing() {
    let mut direct = job(flavor());
    direct.metadata.annotations = None;
    let pod = mirrored(&direct, Flavors::Quota, None);
    assert_eq!(pod.node_selector.unwrap()["pool"], "spot");
    assert_eq!(pod.tolerations.unwrap().len(), 1);
}

#[test]
fn every_pod_template_of_a_mirror_is_fitted_with_its_own_pod_sets_flavors() {
    // A JobSet's two replicated Jobs, admitted in two flavors with the same
    // node label key: `leader` in `spot` (and asking for a GPU itself),
    // `workers` in `reserved`.
    let recorded = json!({"podSets": {
        "leader": flavor(),
        "workers": {"nodeSelector": {"pool": "reserved"}},
    }});
    let manager: Job = serde_json::from_value(json!({
        "metadata": {"annotations": {FLAVORS_ANNOTATION: recorded.to_string()}},
    }))
    .unwrap();
    let admitted = |pod: Value| -> PodSpec { serde_json::from_value(pod).unwrap() };
    let mut leader = admitted(json!({
        "containers": [],
        "nodeSelector": {"pool": "spot", "gpu": "a100"},
        "tolerations": flavor()["tolerations"],
    }));
    let mut workers = admitted(json!({"containers": [], "nodeSelector": {"pool": "reserved"}}));
    let pods = [("leader", &mut leader), ("workers", &mut workers)];
    for_worker_pods(pods, &manager, Flavors::Quota, None);
    assert_eq!(
        (leader.node_selector, leader.tolerations),
        (Some([("gpu".to_string(), "a100".to_string())].into()), None),
        "what the template asked for itself stays"
    );
    assert_eq!((workers.node_selector, workers.tolerations), (None, None));

    let (mut leader, mut workers) = (PodSpec::default(), PodSpec::default());
    let reserved = scheduling::recorded(&manager);
    let pods = [("leader", &mut leader), ("workers", &mut workers)];
    for_worker_pods(pods, &manager, Flavors::OnMirrors, Some(&reserved));
    assert_eq!(leader.node_selector.unwrap()["pool"], "spot");
    assert_eq!(leader.tolerations.map(|t| t.len()), Some(1));
    assert_eq!(workers.node_selector.unwrap()["pool"], "reserved");
    assert_eq!(workers.tolerations, None);
}
