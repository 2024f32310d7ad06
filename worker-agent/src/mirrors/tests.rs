//! Unit tests of the mirrors' passes: what a pass sees and reports.

use super::*;
use crate::watched::listed;
use jobrelay_kinds::jobset::JOBSET_UID_LABEL;
use jobrelay_proto::v1::{DeleteMirror, DeleteReason, MirrorPhase};
use jobrelay_proto::wire::{
    MANAGER_INSTANCE_LABEL, ORIGIN_LABEL, ORIGIN_UID_LABEL, REVISION_ANNOTATION,
};
use k8s_openapi::api::batch::v1::Job;

/// A mirror of origin UID `uid`, finished or running.
fn mirror(uid: &str, finished: bool) -> Job {
    let status = match finished {
        true => serde_json::json!({"succeeded": 1, "conditions": [
            {"type": "Complete", "status": "True", "lastTransitionTime": "2026-11-26T04:00:00Z"}]}),
        false => serde_json::json!({"active": 1}),
    };
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("job-{uid}"), "namespace": "ml", "uid": format!("mirror-{uid}"),
            "resourceVersion": "7",
            "labels": {ORIGIN_LABEL: "test", ORIGIN_UID_LABEL: uid},
            "annotations": {REVISION_ANNOTATION: "1"}},
        "status": status,
    }))
    .unwrap()
}

/// The mirrors of caches that listed `jobs` and no Pod, whose every request
/// to the API server fails: nothing listens where their client points.
pub(super) async fn reaching_nothing(jobs: Vec<Job>) -> Mirrors {
    let changes = Arc::new(Changes::default());
    let jobs = listed(jobs, &changes).await;
    let pods = listed(Vec::<Pod>::new(), &changes).await;
    let nowhere = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    let pacing = Pacing {
        orphan_pod_grace: Duration::from_secs(10),
        deletions: DeletionPace::per_second(100),
        apply_retry_max: Duration::from_secs(60),
        brake: super::BrakeSettings::default(),
    };
    let client = kube::Client::try_from(nowhere).unwrap();
    let objects = crate::kinds::objects::Objects::new(jobs, None);
    Mirrors::new(client, "test".into(), pacing, objects, pods, changes)
}

pub(super) fn deleted(uid: &str, namespace: &str) -> DeleteMirror {
    DeleteMirror {
        origin_uid: uid.into(),
        namespace: namespace.into(),
        name: format!("job-{uid}"),
        reason: DeleteReason::ManagerJobDeleted as i32,
        kind: None,
    }
}

#[tokio::test]
async fn the_first_half_of_a_pass_reports_status_without_a_request() {
    let mut mirrors = reaching_nothing(vec![mirror("u1", true), mirror("u2", false)]).await;
    mirrors.delete(deleted("u2", "ml"));

    let mut out = Vec::new();
    let _look = mirrors.look(Pass::Changes, &mut out);
    let reported: Vec<(&str, MirrorPhase)> = out
        .iter()
        .filter_map(|m| match &m.kind {
            Some(Kind::MirrorStatus(s)) => Some((s.origin_uid.as_str(), s.phase())),
            _ => None,
        })
        .collect();
    assert_eq!(
        reported,
        [("u1", MirrorPhase::Succeeded)],
        "the finished mirror, not the one being deleted"
    );
}

#[tokio::test]
async fn what_the_agent_holds_follows_each_desired_set_apply_and_delete() {
    let mut mirrors = reaching_nothing(vec![mirror("u1", false), mirror("u2", false)]).await;
    let holding = mirrors.holding();
    assert_eq!(
        *holding.borrow(),
        None,
        "nothing before the session's DesiredSet"
    );
    mirrors.set_desired(unplaced(&["u1", "u2"]), Vec::new(), false);
    let held = |received, uids: &[&str]| {
        Some(jobrelay_proto::holding::Summary::of(uids.iter().copied()).holding(received))
    };
    assert_eq!(*holding.borrow(), held(1, &["u1", "u2"]));
    mirrors.apply_all(vec![apply("u3")]);
    assert_eq!(*holding.borrow(), held(2, &["u1", "u2", "u3"]));
    mirrors.delete(deleted("u1", "ml"));
    assert_eq!(*holding.borrow(), held(3, &["u2", "u3"]));
    mirrors.new_session();
    assert_eq!(
        *holding.borrow(),
        None,
        "a new session waits for its DesiredSet"
    );
}

#[tokio::test]
async fn a_second_desired_set_drops_an_apply_waiting_for_a_mirror_it_no_longer_names() {
    let mut mirrors = reaching_nothing(vec![mirror("u1", false)]).await;
    mirrors.set_desired(unplaced(&["u1"]), Vec::new(), false);
    // The apply of a new generation waits until the old mirror is gone.
    mirrors.delete(deleted("u1", "ml"));
    mirrors.apply_all(vec![apply("u1")]);
    let waits = |mirrors: &Mirrors| match &mirrors.records.get("u1").map(|r| &r.work) {
        Some(mirror::Work::Deleting { then_apply, .. }) => then_apply.is_some(),
        other => panic!("u1 is being deleted, not {other:?}"),
    };
    assert!(waits(&mirrors));
    mirrors.set_desired(unplaced(&[]), Vec::new(), false);
    assert!(
        !waits(&mirrors),
        "the apply is dropped, the deletion goes on"
    );
}

fn apply(uid: &str) -> jobrelay_proto::v1::ApplyMirror {
    jobrelay_proto::v1::ApplyMirror {
        origin_uid: uid.into(),
        revision: 2,
        object: Vec::new(),
        kind: None,
    }
}

/// A policy that names `ml` only: the watches cover nothing else.
pub(super) fn only_ml() -> Arc<crate::namespaces::NamespacePolicy> {
    Arc::new(crate::namespaces::NamespacePolicy {
        all: false,
        names: ["ml".to_string()].into(),
        selector: None,
        own: Some("jobrelay-system".into()),
    })
}

/// The mirrors a pass reported gone.
async fn reported_gone(mirrors: &mut Mirrors) -> Vec<String> {
    let mut out = Vec::new();
    let findings = mirrors.look(Pass::Full, &mut out);
    mirrors.act(findings, &mut out).await;
    out.into_iter()
        .filter_map(|m| match m.kind {
            Some(Kind::MirrorGone(gone)) => Some(gone.origin_uid),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_mirror_outside_the_watches_is_not_gone_while_its_namespace_cannot_be_read() {
    // The agent restarted with a policy that no longer names `team-b`: its
    // caches show nothing there, and the API server cannot be read.
    let mut mirrors = reaching_nothing(vec![]).await.within(only_ml());
    mirrors.delete(deleted("outside", "team-b"));
    mirrors.delete(deleted("watched", "ml"));
    mirrors.delete(deleted("system", "kube-system"));
    assert_eq!(
        reported_gone(&mut mirrors).await,
        ["system"],
        "only where jobrelay never writes is nothing read; elsewhere a failed read confirms nothing"
    );
    assert_eq!(reported_gone(&mut mirrors).await, Vec::<String>::new());
    assert!(mirrors.is_deleting("outside") && mirrors.is_deleting("watched"));
}

#[tokio::test]
async fn the_manager_instance_is_read_from_the_mirrors_the_agent_wrote_not_their_children() {
    let labelled = |uid: &str, instance: &str, child: bool| {
        let mut job = mirror(uid, false);
        let labels = job.metadata.labels.get_or_insert_with(Default::default);
        labels.insert(MANAGER_INSTANCE_LABEL.into(), instance.into());
        if child {
            labels.insert(JOBSET_UID_LABEL.into(), "jobset-uid".into());
        }
        job
    };
    let mirrors = reaching_nothing(vec![
        labelled("u1", "ours", false),
        labelled("u2", "from-a-users-template", true),
    ])
    .await;
    assert_eq!(mirrors.manager_instances(), ["ours"]);
}

/// A DesiredSet's mirrors that name no namespace (an older manager's).
fn unplaced(uids: &[&str]) -> Vec<(String, String)> {
    uids.iter()
        .map(|u| (u.to_string(), String::new()))
        .collect()
}
