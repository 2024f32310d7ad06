use super::*;
use serde_json::json;

fn mirror() -> Mirror {
    Mirror {
        cluster: "worker-1".into(),
        namespace: "ml".into(),
        origin_uid: "u1".into(),
        found: Some(("Job".into(), "train".into())),
    }
}

fn time(at: &str) -> Option<Time> {
    Some(Time(at.parse().expect("a timestamp")))
}

/// A Pod with containers `main` and `sidecar`, created at `created`.
fn pod(name: &str, running: bool, created: &str) -> PodFacts {
    PodFacts {
        name: name.into(),
        running,
        created: time(created),
        containers: vec!["main".into(), "sidecar".into()],
        ..PodFacts::default()
    }
}

fn asking(pod: &str, all_pods: bool) -> LogOpen {
    LogOpen {
        stream: 1,
        namespace: "ml".into(),
        origin_uid: "u1".into(),
        pod: pod.into(),
        all_pods,
        ..LogOpen::default()
    }
}

fn names(chosen: Result<Vec<&PodFacts>, LogEnd>) -> Vec<String> {
    chosen
        .expect("Pods chosen")
        .iter()
        .map(|p| p.name.clone())
        .collect()
}

fn refused(chosen: Result<Vec<&PodFacts>, LogEnd>) -> (LogEndReason, String) {
    let end = chosen.expect_err("refused");
    (end.reason(), end.message)
}

#[test]
fn a_named_pod_of_the_mirror_is_read_alone() {
    let pods = [
        pod("a", true, "2026-11-30T10:00:00Z"),
        pod("b", false, "2026-11-30T09:00:00Z"),
    ];
    assert_eq!(
        names(pods_to_read(&asking("b", false), &mirror(), &pods)),
        ["b"]
    );
}

#[test]
fn a_named_pod_not_the_mirrors_is_invalid_naming_the_pod_and_the_job() {
    let pods = [pod("a", true, "2026-11-30T10:00:00Z")];
    let (reason, message) = refused(pods_to_read(&asking("other", false), &mirror(), &pods));
    assert_eq!(reason, LogEndReason::Invalid);
    assert_eq!(
        message,
        "Pod other is not a Pod of Job ml/train on cluster worker-1"
    );
}

#[test]
fn a_named_pod_and_all_pods_together_are_invalid() {
    let pods = [pod("a", true, "2026-11-30T10:00:00Z")];
    let (reason, message) = refused(pods_to_read(&asking("a", true), &mirror(), &pods));
    assert_eq!(reason, LogEndReason::Invalid);
    assert!(message.contains("not both"), "{message}");
}

#[test]
fn all_pods_are_read_by_name() {
    let pods = [
        pod("c", false, "2026-11-30T08:00:00Z"),
        pod("a", false, "2026-11-30T10:00:00Z"),
        pod("b", true, "2026-11-30T09:00:00Z"),
    ];
    assert_eq!(
        names(pods_to_read(&asking("", true), &mirror(), &pods)),
        ["a", "b", "c"]
    );
}

#[test]
fn following_more_pods_than_are_read_at_once_is_invalid_and_reading_them_is_not() {
    let pods: Vec<PodFacts> = (0..=PODS_AT_ONCE)
        .map(|i| pod(&format!("p{i:02}"), true, "2026-11-30T10:00:00Z"))
        .collect();
    let mut following = asking("", true);
    following.follow = true;
    let (reason, message) = refused(pods_to_read(&following, &mirror(), &pods));
    assert_eq!(reason, LogEndReason::Invalid);
    assert!(message.starts_with("Job ml/train has 17 Pods"), "{message}");
    let read = names(pods_to_read(&asking("", true), &mirror(), &pods));
    assert_eq!(read.len(), PODS_AT_ONCE + 1);
}

#[test]
fn without_a_name_the_first_pod_is_read() {
    let pods = [
        pod("b", true, "2026-11-30T10:00:00Z"),
        pod("a", false, "2026-11-30T08:00:00Z"),
    ];
    assert_eq!(
        names(pods_to_read(&asking("", false), &mirror(), &pods)),
        ["b"]
    );
}

/// A Pod's name, whether it runs, and when it was created.
type Facts = (&'static str, bool, Option<&'static str>);

#[test]
fn the_first_pod_is_a_running_one_then_the_oldest_then_by_name() {
    // (the Pods as name, running, created; the first of them)
    let cases: [(&[Facts], &str); 4] = [
        (
            &[
                ("old", false, Some("2026-11-30T08:00:00Z")),
                ("run", true, Some("2026-11-30T10:00:00Z")),
            ],
            "run",
        ),
        (
            &[
                ("new", true, Some("2026-11-30T10:00:00Z")),
                ("old", true, Some("2026-11-30T08:00:00Z")),
            ],
            "old",
        ),
        (
            &[
                ("b", true, Some("2026-11-30T10:00:00Z")),
                ("a", true, Some("2026-11-30T10:00:00Z")),
            ],
            "a",
        ),
        (
            &[
                ("unknown", false, None),
                ("known", false, Some("2026-11-30T10:00:00Z")),
            ],
            "known",
        ),
    ];
    for (pods, first) in cases {
        let pods: Vec<PodFacts> = pods
            .iter()
            .map(|(name, running, created)| PodFacts {
                name: name.to_string(),
                running: *running,
                created: created.and_then(time),
                ..PodFacts::default()
            })
            .collect();
        let chosen = first_pod(&pods).map(|p| p.name.as_str());
        assert_eq!(chosen, Some(first), "{pods:?}");
    }
}

#[test]
fn a_mirror_without_pods_is_not_found_naming_the_job_and_the_cluster() {
    let (reason, message) = refused(pods_to_read(&asking("", false), &mirror(), &[]));
    assert_eq!(reason, LogEndReason::NotFound);
    assert_eq!(
        message,
        "the mirror of Job ml/train has no Pods on cluster worker-1 yet"
    );
    let gone = Mirror {
        found: None,
        ..mirror()
    };
    let (reason, message) = refused(pods_to_read(&asking("", true), &gone, &[]));
    assert_eq!(reason, LogEndReason::NotFound);
    assert_eq!(
        message,
        "cluster worker-1 holds no mirror of the Job with UID u1 in namespace ml, nor any Pod of it"
    );
}

#[test]
fn an_asked_container_is_read_where_the_pod_has_it_init_containers_included() {
    let mut with_init = pod("a", true, "2026-11-30T10:00:00Z");
    with_init.init_containers = vec!["fetch".into()];
    assert_eq!(container("sidecar", &with_init), Ok("sidecar".into()));
    assert_eq!(container("fetch", &with_init), Ok("fetch".into()));
}

#[test]
fn an_asked_container_the_pod_lacks_is_not_found_listing_its_containers() {
    let mut with_init = pod("a", true, "2026-11-30T10:00:00Z");
    with_init.init_containers = vec!["fetch".into()];
    let end = container("web", &with_init).expect_err("no such container");
    assert_eq!(end.reason(), LogEndReason::NotFound);
    assert_eq!(
        end.message,
        "container web is not in Pod a; its containers: main, sidecar; its init containers: fetch"
    );
}

#[test]
fn without_one_asked_the_annotated_default_container_is_read() {
    let mut annotated = pod("a", true, "2026-11-30T10:00:00Z");
    annotated.default_container = Some("sidecar".into());
    assert_eq!(container("", &annotated), Ok("sidecar".into()));
}

#[test]
fn without_one_asked_or_annotated_the_first_container_is_read() {
    let mut misannotated = pod("a", true, "2026-11-30T10:00:00Z");
    assert_eq!(container("", &misannotated), Ok("main".into()));
    misannotated.default_container = Some("gone".into());
    assert_eq!(
        container("", &misannotated),
        Ok("main".into()),
        "an annotation naming no container of the Pod is passed over"
    );
    let empty = PodFacts {
        name: "a".into(),
        ..PodFacts::default()
    };
    let end = container("", &empty).expect_err("nothing to read");
    assert_eq!(end.reason(), LogEndReason::NotFound);
}

#[test]
fn every_chosen_pod_gets_its_container() {
    let mut b = pod("b", true, "2026-11-30T10:00:00Z");
    b.default_container = Some("sidecar".into());
    let pods = [b, pod("a", false, "2026-11-30T10:00:00Z")];
    let chosen = targets(&asking("", true), &mirror(), &pods).expect("targets");
    let read: Vec<(&str, &str)> = chosen
        .iter()
        .map(|t| (t.pod.as_str(), t.container.as_str()))
        .collect();
    assert_eq!(read, [("a", "main"), ("b", "sidecar")]);
}

#[test]
fn the_facts_are_read_from_a_pod_as_the_cache_keeps_it() {
    let mut cached: Pod = serde_json::from_value(json!({
        "metadata": {"name": "a", "namespace": "ml", "creationTimestamp": "2026-11-30T10:00:00Z",
                     "annotations": {DEFAULT_CONTAINER: "sidecar"}},
        "spec": {"containers": [{"name": "main", "image": "trainer:1"}, {"name": "sidecar"}],
                 "initContainers": [{"name": "fetch"}]},
        "status": {"phase": "Running"},
    }))
    .expect("a Pod");
    crate::pod_summary::keep_what_is_read(&mut cached);
    assert_eq!(
        PodFacts::of(&cached),
        PodFacts {
            name: "a".into(),
            running: true,
            created: time("2026-11-30T10:00:00Z"),
            containers: vec!["main".into(), "sidecar".into()],
            init_containers: vec!["fetch".into()],
            default_container: Some("sidecar".into()),
        }
    );
}
