use std::collections::BTreeMap;

use super::*;
use crate::room::PODS;

fn pool(name: &str, nodes: u32, cpu_each: i64, taint: Option<&str>) -> Pool {
    let each = Resources::from([("cpu", cpu_each), (PODS, 110)]);
    let mut free = Resources::default();
    free.add(&each, i64::from(nodes));
    Pool {
        labels: BTreeMap::from([("pool".to_string(), name.to_string())]),
        taints: taint
            .map(|key| Taint {
                key: key.into(),
                value: "present".into(),
                effect: "NoSchedule".into(),
            })
            .into_iter()
            .collect(),
        nodes,
        free,
        largest: each,
    }
}

fn group(pods: i64, cpu: i64) -> PodGroup {
    PodGroup {
        pods,
        each: Resources::from([("cpu", cpu), (PODS, 1)]),
        ..PodGroup::default()
    }
}

fn json<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).expect("valid")
}

#[test]
fn a_node_selector_picks_pools_by_label_but_not_by_hostname() {
    let small = pool("small", 2, 4000, None);
    let mut g = group(1, 1000);
    assert!(admits(&small, &g));
    g.node_selector.insert("pool".into(), "big".into());
    assert!(!admits(&small, &g));
    g.node_selector = BTreeMap::from([(HOSTNAME_LABEL.to_string(), "node-7".to_string())]);
    assert!(admits(&small, &g), "the scheduler picks the node");
}

#[test]
fn required_node_affinity_needs_one_term_whose_expressions_all_hold() {
    let small = pool("small", 2, 4000, None);
    let affine = |terms: serde_json::Value| PodGroup {
        affinity: Some(json(serde_json::json!({"nodeSelectorTerms": terms}))),
        ..group(1, 1000)
    };
    let term = |op: &str, values: &[&str]| serde_json::json!({"matchExpressions": [{"key": "pool", "operator": op, "values": values}]});
    assert!(admits(
        &small,
        &affine(serde_json::json!([term("In", &["small", "x"])]))
    ));
    assert!(!admits(
        &small,
        &affine(serde_json::json!([term("NotIn", &["small"])]))
    ));
    assert!(admits(
        &small,
        &affine(serde_json::json!([
            term("In", &["big"]),
            term("Exists", &[])
        ]))
    ));
    assert!(!admits(
        &small,
        &affine(serde_json::json!([term("DoesNotExist", &[])]))
    ));
    let mut numbered = small.clone();
    numbered.labels.insert("pool".into(), "8".into());
    assert!(admits(
        &numbered,
        &affine(serde_json::json!([term("Gt", &["4"])]))
    ));
    assert!(!admits(
        &numbered,
        &affine(serde_json::json!([term("Lt", &["4"])]))
    ));
}

#[test]
fn a_tainted_pool_takes_only_pods_that_tolerate_its_taint() {
    let gpu = pool("gpu", 1, 8000, Some("nvidia.com/gpu"));
    let tolerating = |toleration: serde_json::Value| PodGroup {
        tolerations: vec![json(toleration)],
        ..group(1, 1000)
    };
    assert!(!admits(&gpu, &group(1, 1000)));
    assert!(admits(
        &gpu,
        &tolerating(serde_json::json!({"key": "nvidia.com/gpu", "operator": "Exists"}))
    ));
    assert!(admits(
        &gpu,
        &tolerating(serde_json::json!({"operator": "Exists"}))
    ));
    assert!(admits(
        &gpu,
        &tolerating(
            serde_json::json!({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
        )
    ));
    assert!(!admits(
        &gpu,
        &tolerating(serde_json::json!({"key": "nvidia.com/gpu", "value": "absent"}))
    ));
    assert!(!admits(
        &gpu,
        &tolerating(
            serde_json::json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"})
        )
    ));
}

#[test]
fn a_pod_larger_than_any_one_node_fits_nowhere_however_much_the_pool_has() {
    let small = pool("small", 4, 4000, None);
    assert_eq!(fitting(&small, &group(1, 3000).each), 4);
    assert_eq!(fitting(&small, &group(1, 5000).each), 0);
}

#[test]
fn taking_fills_the_roomiest_admitting_pools_and_gives_back_exactly() {
    let mut pools = vec![pool("small", 2, 4000, None), pool("big", 1, 16000, None)];
    let before = pools.clone();
    let taken = take(&mut pools, &[group(5, 4000)]).expect("fits");
    assert_eq!(pools[1].free.get("cpu"), 0, "big first: 4 Pods");
    assert_eq!(pools[0].free.get("cpu"), 4000, "then one on small");
    give_back(&mut pools, &taken);
    assert_eq!(pools, before);
}

#[test]
fn what_does_not_fit_says_why_and_takes_nothing() {
    let mut pools = vec![
        pool("small", 2, 4000, None),
        pool("gpu", 1, 8000, Some("gpu")),
    ];
    let before = pools.clone();
    assert_eq!(
        take(&mut pools, &[group(3, 4000)]),
        Err(Shortfall::Room {
            fit: 2,
            wanted: 3,
            short_of: vec!["cpu".into()]
        })
    );
    assert_eq!(pools, before);
    let mut gpu = group(1, 1000);
    gpu.each.0.insert("nvidia.com/gpu".into(), 1);
    assert_eq!(
        take(&mut pools, &[group(1, 1000), gpu.clone()]),
        Err(Shortfall::Room {
            fit: 0,
            wanted: 1,
            short_of: vec!["nvidia.com/gpu".into()]
        }),
        "the small pool admits it but has no GPU"
    );
    assert_eq!(pools, before, "the first group's room is given back");
    gpu.node_selector.insert("pool".into(), "gpu".into());
    assert_eq!(
        take(&mut pools, &[gpu.clone()]),
        Err(Shortfall::NoPoolAdmits)
    );
    assert_eq!(fits(&pools, &[gpu]), Err(Shortfall::NoPoolAdmits));
    assert_eq!(fits(&pools, &[group(2, 4000)]), Ok(()));
    assert!(
        fits(&pools, &[group(2, 4000), group(1, 1000)]).is_err(),
        "together they do not"
    );
    assert_eq!(
        Shortfall::Room {
            fit: 2,
            wanted: 3,
            short_of: vec!["cpu".into()]
        }
        .to_string(),
        "room for 2 of 3 Pods; short of cpu"
    );
}

#[test]
fn no_pods_fit_anywhere() {
    let mut pools: Vec<Pool> = Vec::new();
    assert_eq!(take(&mut pools, &[group(0, 1000)]), Ok(Taken::new()));
}
