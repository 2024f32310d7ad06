use super::*;

fn node(name: &str, cpu: &str, heartbeat: &str) -> Node {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {"pool": "small"},
                     "annotations": {"big": "x".repeat(1000)},
                     "managedFields": [{"manager": "kubelet"}]},
        "spec": {"podCIDR": "10.0.0.0/24"},
        "status": {
            "allocatable": {"cpu": cpu, "pods": "110"},
            "capacity": {"cpu": cpu},
            "images": [{"names": ["registry/image:tag"], "sizeBytes": 1000}],
            "conditions": [
                {"type": "Ready", "status": "True", "lastHeartbeatTime": format!("2026-11-29T05:00:{heartbeat}Z")},
                {"type": "MemoryPressure", "status": "False"},
            ],
        },
    }))
    .expect("a Node")
}

fn pod(uid: &str, node: Option<&str>, cpu: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": uid, "namespace": "ml", "uid": uid},
        "spec": {"nodeName": node, "containers": [
            {"name": "c", "resources": {"requests": {"cpu": cpu}}},
        ]},
        "status": {"phase": "Running"},
    }))
    .expect("a Pod")
}

fn listed(seen: &mut Seen, nodes: Vec<Node>, pods: Vec<Pod>) {
    seen.node(Event::Init);
    for node in nodes {
        seen.node(Event::InitApply(node));
    }
    assert!(seen.node(Event::InitDone));
    seen.pod(Event::Init);
    for pod in pods {
        seen.pod(Event::InitApply(pod));
    }
    assert!(seen.pod(Event::InitDone));
}

fn free_cpu(seen: &Seen) -> i64 {
    let pools = seen.pools().expect("both listed");
    pools.iter().map(|p| p.free.get("cpu")).sum()
}

#[test]
fn no_room_is_known_until_both_watches_have_listed() {
    let mut seen = Seen::default();
    assert_eq!(seen.pools(), None);
    seen.node(Event::Init);
    seen.node(Event::InitApply(node("a", "4", "01")));
    seen.node(Event::InitDone);
    assert_eq!(seen.pools(), None, "the Pods are not listed yet");
    seen.pod(Event::Init);
    seen.pod(Event::InitDone);
    assert_eq!(free_cpu(&seen), 4000);
}

#[test]
fn pods_take_from_their_node_as_they_come_and_go() {
    let mut seen = Seen::default();
    listed(
        &mut seen,
        vec![node("a", "4", "01"), node("b", "4", "01")],
        vec![pod("p1", Some("a"), "1")],
    );
    assert_eq!(free_cpu(&seen), 7000);
    assert!(seen.pod(Event::Apply(pod("p2", Some("b"), "500m"))));
    assert_eq!(free_cpu(&seen), 6500);
    assert!(seen.pod(Event::Delete(pod("p1", Some("a"), "1"))));
    assert_eq!(free_cpu(&seen), 7500);
    assert!(
        !seen.used.contains_key("a"),
        "a node without Pods uses nothing"
    );
    assert!(
        !seen.pod(Event::Delete(pod("p1", Some("a"), "1"))),
        "a Pod gone twice changes nothing"
    );
    assert_eq!(seen.counts(), (2, 1));
}

/// A Pod of the mirror of `origin`.
fn mirror_pod(uid: &str, node: &str, origin: &str) -> Pod {
    let mut pod = pod(uid, Some(node), "1");
    pod.metadata.labels = Some(
        [(
            jobrelay_proto::wire::ORIGIN_UID_LABEL.to_string(),
            origin.to_string(),
        )]
        .into(),
    );
    pod
}

#[test]
fn the_pods_of_each_mirror_are_counted_as_they_come_and_go() {
    let mut seen = Seen::default();
    listed(
        &mut seen,
        vec![node("a", "4", "01")],
        vec![mirror_pod("p1", "a", "o1"), pod("other", Some("a"), "1")],
    );
    let counted = |seen: &Seen| {
        let mut counted: Vec<(String, u32)> = seen
            .counted()
            .iter()
            .map(|(o, n)| (o.clone(), *n))
            .collect();
        counted.sort();
        counted
    };
    assert_eq!(
        counted(&seen),
        [("o1".to_string(), 1)],
        "a Pod of no mirror is not named"
    );
    seen.pod(Event::Apply(mirror_pod("p2", "a", "o1")));
    seen.pod(Event::Apply(mirror_pod("p3", "a", "o2")));
    assert_eq!(
        counted(&seen),
        [("o1".to_string(), 2), ("o2".to_string(), 1)]
    );
    seen.pod(Event::Delete(mirror_pod("p3", "a", "o2")));
    seen.pod(Event::Delete(mirror_pod("p1", "a", "o1")));
    assert_eq!(
        counted(&seen),
        [("o1".to_string(), 1)],
        "a mirror with no Pod left is not kept"
    );
    listed(
        &mut seen,
        vec![node("a", "4", "01")],
        vec![mirror_pod("p9", "a", "o9")],
    );
    assert_eq!(
        counted(&seen),
        [("o9".to_string(), 1)],
        "a relist counts afresh"
    );
}

#[test]
fn a_pods_status_update_or_a_nodes_heartbeat_changes_nothing_kept() {
    let mut seen = Seen::default();
    listed(
        &mut seen,
        vec![node("a", "4", "01")],
        vec![pod("p1", Some("a"), "1")],
    );
    let mut running = pod("p1", Some("a"), "1");
    running.status = None;
    assert!(!seen.pod(Event::Apply(running)));
    assert!(!seen.node(Event::Apply(node("a", "4", "02"))));
    assert!(seen.node(Event::Apply(node("a", "8", "03"))), "allocatable");
    assert_eq!(free_cpu(&seen), 7000);
}

#[test]
fn a_relist_replaces_what_was_seen_once_it_is_done() {
    let mut seen = Seen::default();
    listed(
        &mut seen,
        vec![node("a", "4", "01")],
        vec![pod("p1", Some("a"), "1"), pod("p2", Some("a"), "1")],
    );
    assert_eq!(free_cpu(&seen), 2000);
    seen.pod(Event::Init);
    seen.pod(Event::InitApply(pod("p3", Some("a"), "3")));
    assert_eq!(free_cpu(&seen), 2000, "the old Pods hold until it is done");
    seen.pod(Event::InitDone);
    assert_eq!(free_cpu(&seen), 1000, "p1 and p2 are gone, p3 came");
}

#[test]
fn an_unbound_pod_is_not_counted() {
    let mut seen = Seen::default();
    listed(&mut seen, vec![node("a", "4", "01")], vec![]);
    assert!(!seen.pod(Event::Apply(pod("p1", None, "1"))));
    assert_eq!(free_cpu(&seen), 4000);
}

#[test]
fn a_node_is_kept_with_only_what_its_room_is_summed_from() {
    let kept = keep_node(node("a", "4", "01")).expect("kept");
    let json = serde_json::to_value(&kept).expect("JSON");
    assert_eq!(
        json,
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "a", "labels": {"pool": "small"}},
            "spec": {},
            "status": {
                "allocatable": {"cpu": "4", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        })
    );
}
