use super::*;
use serde_json::{Value, json};

fn pod(name: &str, status: Value) -> Arc<Pod> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"containers": [{"name": "main", "image": "trainer:1"}]},
            "status": status,
        }))
        .expect("a Pod"),
    )
}

fn waiting(reason: &str, message: &str) -> Value {
    json!({"phase": "Pending", "containerStatuses": [
        {"name": "main", "image": "trainer:1", "imageID": "", "ready": false, "restartCount": 0,
         "state": {"waiting": {"reason": reason, "message": message}}}]})
}

/// A reason as a row: kind, reason, container, exit code, Pods, message.
type Row<'a> = (i32, &'a str, &'a str, Option<i32>, u32, &'a str);

fn reasons(summary: &PodSummary) -> Vec<Row<'_>> {
    summary
        .reasons
        .iter()
        .map(|r| {
            let (kind, reason, container) = (r.kind, r.reason.as_str(), r.container.as_str());
            (
                kind,
                reason,
                container,
                r.exit_code,
                r.pods,
                r.message.as_str(),
            )
        })
        .collect()
}

const WAITING: i32 = PodReasonKind::Waiting as i32;
const FAILED: i32 = PodReasonKind::Failed as i32;

#[test]
fn pods_on_their_way_running_or_done_have_no_reason() {
    let pods = [
        pod("a", waiting("ContainerCreating", "")),
        pod("b", json!({"phase": "Running"})),
        pod("c", json!({"phase": "Succeeded"})),
        pod("d", json!({"phase": "Pending"})),
    ];
    let summary = summary(&pods);
    assert_eq!(
        (summary.pending, summary.running, summary.succeeded),
        (2, 1, 1)
    );
    assert!(summary.reasons.is_empty(), "{summary:?}");
}

#[test]
fn a_waiting_container_says_why_with_its_kubelets_message() {
    let message = "Container image \"trainer:9\" is not present with pull policy of Never";
    let summary = summary(&[
        pod("b", waiting("ErrImageNeverPull", "second")),
        pod("a", waiting("ErrImageNeverPull", message)),
    ]);
    assert_eq!(
        reasons(&summary),
        [(WAITING, "ErrImageNeverPull", "main", None, 2, message)],
        "one reason for both, the first Pod's message"
    );
}

#[test]
fn a_restarting_container_says_how_it_last_ended() {
    let summary = summary(&[pod(
        "a",
        json!({"phase": "Running", "containerStatuses": [
            {"name": "main", "image": "", "imageID": "", "ready": false, "restartCount": 3,
             "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
             "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}]}),
    )]);
    assert_eq!(
        reasons(&summary),
        [(
            WAITING,
            "CrashLoopBackOff",
            "main",
            Some(137),
            1,
            "back-off 40s; it last ended OOMKilled with exit code 137"
        )]
    );
}

#[test]
fn a_failed_pod_says_the_pods_own_reason_else_its_containers_exit() {
    let evicted = pod(
        "a",
        json!({"phase": "Failed", "reason": "Evicted", "message": "The node was low on memory."}),
    );
    let exited = pod(
        "b",
        json!({"phase": "Failed", "containerStatuses": [
            {"name": "main", "image": "", "imageID": "", "ready": false, "restartCount": 0,
             "state": {"terminated": {"reason": "Error", "exitCode": 3}}}]}),
    );
    let summary = summary(&[evicted, exited]);
    assert_eq!(summary.failed, 2);
    let mut found = reasons(&summary);
    found.sort();
    assert_eq!(
        found,
        [
            (FAILED, "Error", "main", Some(3), 1, ""),
            (
                FAILED,
                "Evicted",
                "",
                None,
                1,
                "The node was low on memory."
            ),
        ]
    );
}

#[test]
fn an_unschedulable_pod_says_the_schedulers_message() {
    let summary = summary(&[pod(
        "a",
        json!({"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/3 nodes are available", "lastTransitionTime": "2026-11-30T10:00:00Z"}]}),
    )]);
    assert_eq!(
        reasons(&summary),
        [(
            WAITING,
            "Unschedulable",
            "",
            None,
            1,
            "0/3 nodes are available"
        )]
    );
}

#[test]
fn the_most_common_reasons_are_kept_and_their_messages_cut_short() {
    let long = "x".repeat(2 * MESSAGE_BYTES);
    let mut pods = vec![pod("a", waiting("ImagePullBackOff", &long))];
    pods.push(pod("b", waiting("ImagePullBackOff", "")));
    for (name, reason) in [("c", "A"), ("d", "B"), ("e", "C")] {
        pods.push(pod(name, waiting(reason, "")));
    }
    let mut deleting = (*pod("f", waiting("Z", ""))).clone();
    deleting.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-11-30T10:00:00Z".parse().unwrap(),
        ));
    pods.push(Arc::new(deleting));
    let summary = summary(&pods);
    assert_eq!(summary.pending, 5, "the Pod being deleted is not counted");
    assert_eq!(summary.reasons.len(), REASONS);
    assert_eq!(summary.reasons[0].reason, "ImagePullBackOff");
    assert_eq!(summary.reasons[0].pods, 2);
    assert!(summary.reasons[0].message.len() <= MESSAGE_BYTES);
    assert!(summary.reasons[0].message.ends_with('…'));
    assert_eq!(
        summary.reasons[1..]
            .iter()
            .map(|r| r.reason.as_str())
            .collect::<Vec<_>>(),
        ["A", "B"],
        "among equals, by name of the reason"
    );
}

#[test]
fn the_cache_keeps_what_is_read_and_no_more() {
    let mut kept: Pod = serde_json::from_value(json!({
        "metadata": {"name": "a", "managedFields": [{"manager": "kubelet"}],
                     "annotations": {"kubectl.kubernetes.io/default-container": "main"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "trainer:1"}],
                 "initContainers": [{"name": "fetch", "image": "fetch:1"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1", "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "True"},
        ], "containerStatuses": [
            {"name": "main", "image": "trainer:1", "imageID": "sha", "ready": true, "restartCount": 1,
             "containerID": "containerd://x",
             "state": {"running": {"startedAt": "2026-11-30T10:00:00Z"}},
             "lastState": {"terminated": {"reason": "Error", "exitCode": 2,
                                          "containerID": "containerd://y"}}}]},
    }))
    .expect("a Pod");
    keep_what_is_read(&mut kept);
    assert!(kept.metadata.managed_fields.is_none());
    let annotations = kept.metadata.annotations.as_ref().expect("annotations");
    assert_eq!(
        annotations["kubectl.kubernetes.io/default-container"], "main",
        "the logs' default container is kept"
    );
    let spec = kept.spec.as_ref().expect("a spec");
    assert_eq!(spec.node_name.as_deref(), Some("n1"));
    let names = |containers: &[k8s_openapi::api::core::v1::Container]| {
        let kept: Vec<(String, bool)> = containers
            .iter()
            .map(|c| (c.name.clone(), c.image.is_none()))
            .collect();
        kept
    };
    assert_eq!(names(&spec.containers), [("main".into(), true)]);
    let init = spec.init_containers.as_deref().expect("init containers");
    assert_eq!(names(init), [("fetch".into(), true)], "names only");
    let status = kept.status.as_ref().expect("a status");
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert!(status.pod_ip.is_none());
    assert_eq!(status.conditions.as_ref().map(Vec::len), Some(1));
    let container = &status.container_statuses.as_ref().expect("containers")[0];
    assert_eq!(container.name, "main");
    assert!(container.image.is_empty() && container.container_id.is_none());
    assert!(
        container
            .state
            .as_ref()
            .is_some_and(|s| s.running.is_none())
    );
    let last = container
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref());
    assert_eq!(
        last.map(|t| (t.exit_code, t.container_id.is_none())),
        Some((2, true))
    );
}

#[test]
fn counts_without_a_reason_say_nothing_new_and_a_reason_or_a_count_beside_one_does() {
    let quiet = |running| {
        Said(PodSummary {
            running,
            ..PodSummary::default()
        })
    };
    assert_eq!(
        quiet(0),
        quiet(1),
        "a Pod started: nothing the manager shows"
    );
    let waiting = Said(summary(&[pod("a", waiting("ImagePullBackOff", "x"))]));
    assert_ne!(quiet(0), waiting, "a reason appeared");
    assert_ne!(waiting, quiet(0), "the reason went");
    let mut more = waiting.clone();
    more.0.pending += 1;
    assert_ne!(waiting, more, "a count beside a reason");
}
