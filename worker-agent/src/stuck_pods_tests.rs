use super::*;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

fn node(ready: &str, since: Option<Timestamp>) -> Node {
    let mut condition = json!({"type": "Ready", "status": ready});
    if let Some(since) = since {
        condition["lastTransitionTime"] = json!(since.to_string());
    }
    serde_json::from_value(json!({"status": {"conditions": [
        {"type": "MemoryPressure", "status": "False"}, condition,
    ]}}))
    .unwrap()
}

fn pod(name: &str, deletion: Option<Timestamp>) -> Arc<Pod> {
    let mut pod = Pod::default();
    pod.metadata.name = Some(name.into());
    pod.metadata.deletion_timestamp =
        deletion.map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time);
    Arc::new(pod)
}

#[test]
fn a_node_is_down_since_its_ready_condition_left_true() {
    assert_eq!(readiness(&node("True", Some(at(0)))), Readiness::Ready);
    assert_eq!(
        readiness(&node("False", Some(at(5)))),
        Readiness::DownSince(at(5))
    );
    assert_eq!(
        readiness(&node("Unknown", Some(at(7)))),
        Readiness::DownSince(at(7)),
        "unreachable"
    );
    assert_eq!(readiness(&Node::default()), Readiness::Unknown);
}

#[test]
fn a_pod_is_held_once_its_grace_is_over_on_a_node_not_ready() {
    let down = Readiness::DownSince(at(0));
    assert_eq!(judge(at(10), down, at(9), None), Verdict::NotStuck, "grace");
    assert_eq!(judge(at(10), down, at(10), None), Verdict::Held(at(0)));
    assert_eq!(
        judge(at(10), down, at(3600), None),
        Verdict::Held(at(0)),
        "without a timeout, held for ever"
    );
}

#[test]
fn a_pod_is_forced_once_its_node_is_down_for_the_timeout() {
    let down = Readiness::DownSince(at(0));
    let timeout = Some(TIMEOUT);
    assert_eq!(judge(at(10), down, at(59), timeout), Verdict::Held(at(0)));
    assert_eq!(judge(at(10), down, at(60), timeout), Verdict::Force);
    assert_eq!(
        judge(at(90), down, at(80), timeout),
        Verdict::NotStuck,
        "its grace period is not over"
    );
    assert_eq!(judge(at(90), down, at(90), timeout), Verdict::Force);
}

#[test]
fn a_pod_on_a_ready_or_unknown_node_is_never_held() {
    for node in [Readiness::Ready, Readiness::Unknown] {
        assert_eq!(
            judge(at(0), node, at(3600), Some(TIMEOUT)),
            Verdict::NotStuck,
            "{node:?}"
        );
    }
}

#[test]
fn the_mirrors_whose_held_pods_changed_are_those_told() {
    let held = |pod: &str| Held {
        pod: pod.into(),
        node: "n".into(),
        down_since: at(0),
    };
    let was = HeldPods::from([
        ("same".into(), vec![held("a")]),
        ("gone".into(), vec![held("b")]),
        ("more".into(), vec![held("c")]),
    ]);
    let now = HeldPods::from([
        ("same".into(), vec![held("a")]),
        ("more".into(), vec![held("c"), held("d")]),
        ("new".into(), vec![held("e")]),
    ]);
    assert_eq!(changed(&was, &now), ["gone", "more", "new"]);
    assert_eq!(changed(&now, &now), Vec::<String>::new());
}

#[test]
fn a_held_pod_reports_how_long_its_node_is_down() {
    let held = Held {
        pod: "p".into(),
        node: "n".into(),
        down_since: at(10),
    };
    let report = held.report(at(70));
    assert_eq!(report.node_down_for.map(|d| d.seconds), Some(60));
    assert_eq!((report.pod.as_str(), report.node.as_str()), ("p", "n"));
}

#[test]
fn only_pods_whose_deletion_is_due_are_overdue_the_longest_first() {
    let pods = [
        pod("live", None),
        pod("later", Some(at(30))),
        pod("recent", Some(at(20))),
        pod("oldest", Some(at(10))),
    ];
    let names: Vec<String> = overdue(&pods, at(25))
        .iter()
        .map(|p| p.name_any())
        .collect();
    assert_eq!(names, ["oldest", "recent"]);
}

#[test]
fn the_sweep_runs_four_times_per_timeout_within_bounds() {
    assert_eq!(sweep_every(Some(TIMEOUT)), Duration::from_secs(15));
    assert_eq!(
        sweep_every(Some(Duration::from_secs(2))),
        Duration::from_secs(1)
    );
    assert_eq!(
        sweep_every(Some(Duration::from_secs(3600))),
        Duration::from_secs(30)
    );
    assert_eq!(sweep_every(None), UNSET_EVERY);
}
