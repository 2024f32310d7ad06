use super::*;

#[test]
fn a_pool_node_carries_its_room_labels_taints_and_the_kwok_annotation() {
    let pool = NodePool::new("gpu", 1)
        .cpu("16")
        .gpus(8)
        .label("zone", "a")
        .taint(GPU, "present", "NoSchedule");
    let node = pool.node(3);
    assert_eq!(node.metadata.name.as_deref(), Some("gpu-3"));
    let labels = node.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get(POOL_LABEL).map(String::as_str), Some("gpu"));
    assert_eq!(labels.get("zone").map(String::as_str), Some("a"));
    assert_eq!(
        labels.get("kubernetes.io/hostname").map(String::as_str),
        Some("gpu-3")
    );
    let annotations = node.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations.get(KWOK_NODE_ANNOTATION).map(String::as_str),
        Some("fake")
    );
    let status = node.status.unwrap_or_default();
    let room = status.allocatable.unwrap_or_default();
    assert_eq!(room.get("cpu"), Some(&Quantity("16".into())));
    assert_eq!(room.get(GPU), Some(&Quantity("8".into())));
    assert_eq!(room.get("pods"), Some(&Quantity(DEFAULT_PODS.into())));
    assert_eq!(status.capacity, Some(room));
    let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
    assert_eq!(taints.len(), 1);
    assert_eq!(
        (taints[0].key.as_str(), taints[0].effect.as_str()),
        (GPU, "NoSchedule")
    );
}

#[test]
fn the_uneven_fleet_has_small_large_and_a_tainted_gpu_pool() {
    let fleet = uneven_fleet();
    let cpus: Vec<(&str, &str)> = fleet
        .iter()
        .map(|p| (p.name(), p.declared()["cpu"].as_str()))
        .collect();
    assert_eq!(cpus, [("small", "4"), ("large", "16"), ("gpu", "16")]);
    let gpu = &fleet[2];
    assert_eq!(gpu.declared().get(GPU).map(String::as_str), Some("8"));
    assert!(gpu.node(0).spec.and_then(|s| s.taints).is_some());
    assert!(fleet[0].node(0).spec.and_then(|s| s.taints).is_none());
}
