//! The WorkerCluster's spec read and checked, and its CRD.

use super::*;
use std::collections::BTreeMap;

fn cluster(spec: serde_json::Value) -> WorkerCluster {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "jobrelay.dev/v1alpha1",
        "kind": "WorkerCluster",
        "metadata": {"name": "worker-a"},
        "spec": spec,
    }))
    .unwrap()
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn the_crd_is_cluster_scoped_with_a_short_name_status_and_columns() {
    use kube::CustomResourceExt;
    let crd = WorkerCluster::crd();
    assert_eq!(crd.spec.scope, "Cluster");
    assert_eq!(crd.spec.names.short_names, Some(vec!["wc".to_string()]));
    let version = &crd.spec.versions[0];
    assert!(version.subresources.as_ref().unwrap().status.is_some());
    let columns: Vec<String> = version
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.name.to_uppercase())
        .collect();
    assert_eq!(
        columns,
        [
            "CONNECTED",
            "MIRRORS",
            "LAST-HEARTBEAT",
            "AGENT-VERSION",
            "AGE"
        ]
    );
    // The agent's version only with `-o wide`.
    let wide: Vec<&str> = version
        .additional_printer_columns
        .iter()
        .flatten()
        .filter(|c| c.priority.is_some_and(|p| p > 0))
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(wide, ["Agent-Version"]);
}

#[test]
fn fencing_defaults_from_lost_after_and_a_refused_pair_names_its_field() {
    let default = cluster(serde_json::json!({"lostAfter": "60s"}))
        .fencing()
        .unwrap();
    assert_eq!(default.fence_after, Duration::from_secs(50));
    for (spec, field) in [
        (
            serde_json::json!({"lostAfter": "60s", "fenceAfter": "55s"}),
            "spec.fenceAfter",
        ),
        (serde_json::json!({"lostAfter": "5s"}), "spec.lostAfter"),
        (
            serde_json::json!({"fenceAfter": "later"}),
            "spec.fenceAfter",
        ),
    ] {
        let error = cluster(spec).fencing().unwrap_err().to_string();
        assert!(
            error.contains(&format!("WorkerCluster worker-a: {field}")),
            "{error}"
        );
    }
}

#[test]
fn lost_after_defaults_to_fifteen_minutes_and_a_bad_value_names_the_field() {
    assert_eq!(
        cluster(serde_json::json!({})).lost_after().unwrap(),
        DEFAULT_LOST_AFTER
    );
    assert_eq!(
        cluster(serde_json::json!({"lostAfter": "90s"}))
            .lost_after()
            .unwrap(),
        Duration::from_secs(90)
    );
    let error = cluster(serde_json::json!({"lostAfter": "soon"}))
        .lost_after()
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("WorkerCluster worker-a: spec.lostAfter"),
        "{error}"
    );
}

#[test]
fn move_timeouts_default_to_two_minutes_and_a_bad_value_names_the_field() {
    for which in [MoveTimeout::Unschedulable, MoveTimeout::Refused] {
        let field = which.field();
        let timeout = |spec| cluster(spec).move_timeout(which);
        assert_eq!(
            timeout(serde_json::json!({})).unwrap(),
            MoveTimeout::DEFAULT
        );
        assert_eq!(
            timeout(serde_json::json!({field: "10s"})).unwrap(),
            Duration::from_secs(10)
        );
        let error = timeout(serde_json::json!({field: "a while"}))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(&format!("WorkerCluster worker-a: spec.{field}")),
            "{error}"
        );
    }
}

#[test]
fn a_worker_kueue_is_opt_in_with_a_default_admission_time_and_a_bad_one_names_the_field() {
    assert_eq!(cluster(serde_json::json!({})).worker_queue().unwrap(), None);
    let queue = cluster(serde_json::json!({"kueue": {}}))
        .worker_queue()
        .unwrap()
        .unwrap();
    assert_eq!(queue.admit_within, DEFAULT_ADMIT_WITHIN);
    assert!(queue.local_queues.is_empty());
    let mapped = cluster(serde_json::json!({"kueue": {
        "localQueues": {"team-a": "batch"}, "admitWithin": "30s",
    }}))
    .worker_queue()
    .unwrap()
    .unwrap();
    assert_eq!(mapped.admit_within, Duration::from_secs(30));
    assert_eq!(mapped.local_queues["team-a"], "batch");
    let error = cluster(serde_json::json!({"kueue": {"admitWithin": "later"}}))
        .worker_queue()
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("WorkerCluster worker-a: spec.kueue.admitWithin"),
        "{error}"
    );
}

#[test]
fn the_namespace_selector_admits_matching_namespaces_only() {
    let any = cluster(serde_json::json!({}));
    assert!(any.admits(&labels(&[])).unwrap());
    let team_a = cluster(serde_json::json!({"namespaceSelector": {
        "matchLabels": {"team": "a"},
        "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["frozen"]}],
    }}));
    assert!(team_a.admits(&labels(&[("team", "a")])).unwrap());
    assert!(!team_a.admits(&labels(&[("team", "b")])).unwrap());
    assert!(
        !team_a
            .admits(&labels(&[("team", "a"), ("tier", "frozen")]))
            .unwrap()
    );
}
