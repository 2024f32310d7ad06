use super::*;

fn why(failed: bool, reason: &str, container: &str, exit_code: Option<i32>, pods: u32) -> PodWhy {
    PodWhy {
        failed,
        reason: reason.into(),
        message: format!("{reason} said so"),
        container: container.into(),
        exit_code,
        pods,
    }
}

fn seen(pending: u32, failed: u32, reasons: Vec<PodWhy>) -> PodsSeen {
    PodsSeen {
        pending,
        failed,
        reasons,
        ..PodsSeen::default()
    }
}

fn image() -> PodWhy {
    why(false, "ErrImageNeverPull", "main", None, 2)
}

fn exited() -> PodWhy {
    why(true, "Error", "main", Some(3), 1)
}

#[test]
fn the_annotation_says_where_the_pods_by_phase_and_each_reason() {
    let text = annotation("worker-1", &seen(2, 1, vec![image(), exited()]));
    assert_eq!(
        text.as_deref(),
        Some(
            "cluster worker-1 (2 Pending, 1 Failed): 2 Pods wait ErrImageNeverPull (container main): ErrImageNeverPull said so; 1 Pod failed Error (container main, exit code 3): Error said so"
        )
    );
    assert_eq!(annotation("worker-1", &seen(2, 0, vec![])), None);
}

#[test]
fn an_agent_that_says_nothing_of_the_pods_changes_nothing() {
    assert_eq!(
        shown("worker-1", None, Some("cluster worker-1 …"), false),
        Shown::default()
    );
}

#[test]
fn a_first_reason_is_annotated_and_told_once_as_a_warning() {
    let pods = seen(2, 0, vec![image()]);
    let next = shown("worker-1", Some(&pods), None, false);
    let text = annotation("worker-1", &pods);
    assert_eq!(next.annotation, Some(text.clone()));
    assert_eq!(
        next.events,
        [PodsEvent {
            reason: Reason::PodsWaiting,
            topic: "wait ErrImageNeverPull (container main)".into(),
            note: "on cluster worker-1, 2 Pods wait ErrImageNeverPull (container main): ErrImageNeverPull said so".into(),
        }]
    );
    assert_eq!(
        shown("worker-1", Some(&pods), text.as_deref(), false),
        Shown::default(),
        "shown already: nothing to write, nothing to tell"
    );
}

#[test]
fn a_new_count_rewrites_the_annotation_and_only_a_new_reason_is_told() {
    let before = annotation("worker-1", &seen(2, 0, vec![image()]));
    let mut more = image();
    more.pods = 3;
    let pods = seen(3, 1, vec![more, exited()]);
    let next = shown("worker-1", Some(&pods), before.as_deref(), false);
    assert_eq!(next.annotation, Some(annotation("worker-1", &pods)));
    assert_eq!(
        next.events
            .iter()
            .map(|e| (e.reason, e.topic.as_str()))
            .collect::<Vec<_>>(),
        [(
            Reason::PodsFailed,
            "failed Error (container main, exit code 3)"
        )],
        "the waiting reason was told before"
    );
}

#[test]
fn another_exit_code_is_another_reason() {
    let before = annotation(
        "worker-1",
        &seen(0, 1, vec![why(true, "Error", "main", Some(137), 1)]),
    );
    let pods = seen(0, 2, vec![why(true, "Error", "main", Some(1), 1)]);
    let next = shown("worker-1", Some(&pods), before.as_deref(), false);
    assert_eq!(next.events.len(), 1, "{next:?}");
}

#[test]
fn once_no_pod_waits_or_failed_for_a_reason_the_annotation_goes() {
    let before = annotation("worker-1", &seen(2, 0, vec![image()]));
    let running = PodsSeen {
        running: 2,
        ..PodsSeen::default()
    };
    let next = shown("worker-1", Some(&running), before.as_deref(), false);
    assert_eq!(next.annotation, Some(None));
    assert!(next.events.is_empty());
    assert_eq!(
        shown("worker-1", Some(&running), None, false),
        Shown::default()
    );
}

#[test]
fn a_reason_without_container_or_message_reads_plainly() {
    let mut evicted = why(true, "Evicted", "", None, 1);
    evicted.message.clear();
    let text = annotation("w", &seen(0, 1, vec![evicted]));
    assert_eq!(
        text.as_deref(),
        Some("cluster w (1 Failed): 1 Pod failed Evicted")
    );
}

#[test]
fn a_workers_warning_names_the_cluster_the_object_the_reason_and_who_said_it() {
    let event = WorkerEvent {
        object: "Pod train-x7k2p".into(),
        reason: "FailedMount".into(),
        message: "secret \"creds\" not found".into(),
        source: "kubelet".into(),
    };
    assert_eq!(
        worker_warning("worker-1", &event),
        PodsEvent {
            reason: Reason::WorkerWarning,
            topic: "Pod FailedMount".into(),
            note: "on cluster worker-1, Pod train-x7k2p: FailedMount (kubelet): secret \"creds\" not found".into(),
        }
    );
    let bare = WorkerEvent {
        object: "Job train".into(),
        reason: "FailedCreate".into(),
        ..WorkerEvent::default()
    };
    assert_eq!(
        worker_warning("w", &bare).note,
        "on cluster w, Job train: FailedCreate"
    );
}

#[test]
fn once_the_mirror_ended_its_end_tells_and_the_annotation_follows() {
    let pods = seen(0, 1, vec![exited()]);
    let next = shown("worker-1", Some(&pods), None, true);
    assert_eq!(next.annotation, Some(annotation("worker-1", &pods)));
    assert!(next.events.is_empty(), "{next:?}");
    assert_eq!(
        reasons(&pods).as_deref(),
        Some("1 Pod failed Error (container main, exit code 3): Error said so")
    );
    assert_eq!(reasons(&seen(1, 0, vec![])), None);
}
