//! A mirror is its origin UID in its Job's namespace, never a label alone.
//! A user of a worker cluster who may write Jobs in one namespace copies
//! the labels of another namespace's mirror onto a Job of their own and
//! leaves it Terminating — what a mirror being deleted behind jobrelay's
//! back looks like. The mirror runs on as it was (not judged lost, not run
//! again); the copy is left alone, logged and counted by the agent; and
//! deleting the manager Job removes the mirror and nothing of the copy.

use jobrelay_e2e::scenario::{Scenario, WAIT};
use jobrelay_proto::wire::{CLUSTER_KEY, ORIGIN_LABEL, ORIGIN_UID_LABEL};
use jobrelay_testbed::kit;
use jobrelay_testbed::relay::metric_in;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::EXCLUSIVE;

const WORKER: &str = "worker-1";
/// Holds the copy Terminating until the test lets it go.
const HOLD: &str = "e2e.jobrelay.dev/hold";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_copy_of_a_mirrors_labels_in_another_namespace_is_not_the_mirror() {
    let _exclusive = EXCLUSIVE.lock().await;
    let s = Scenario::relayed("victim").await;
    let uid = s
        .create(s.job("victim").label(CLUSTER_KEY, WORKER).run_for("1h"))
        .await;
    let mirrors: Api<Job> = s.worker_api(WORKER).await;
    let mirror_uid = wait::until("the victim's mirror on worker-1", WAIT, || async {
        match mirrors.get_opt("victim").await {
            Ok(Some(mirror)) => Seen::Ready(mirror.uid().unwrap_or_default()),
            other => Seen::Waiting(format!("{other:?}")),
        }
    })
    .await;

    // The worker user's namespace, and their Job carrying the mirror's
    // labels, left Terminating by a finalizer of theirs.
    let worker = kit::client(s.worker(WORKER)).await;
    let theirs = kit::namespace(&worker, "worker-user").await;
    let copies: Api<Job> = Api::namespaced(worker.clone(), &theirs);
    let copy: Job = serde_json::from_value(json!({
        "metadata": {
            "name": "copy",
            "labels": {ORIGIN_LABEL: s.relay.origin, ORIGIN_UID_LABEL: uid},
            "finalizers": [HOLD],
        },
        "spec": {
            "suspend": true,
            "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "main", "image": "registry.invalid/busybox"}]}},
        },
    }))
    .expect("a Job");
    copies
        .create(&PostParams::default(), &copy)
        .await
        .unwrap_or_else(|e| panic!("creating the copy: {e}"));
    copies
        .delete("copy", &DeleteParams::background())
        .await
        .unwrap_or_else(|e| panic!("deleting the copy: {e}"));

    // The agent sees the copy, and sets it apart.
    let relay = s.relay;
    wait::until("the agent counts the copy as foreign", WAIT, || async {
        match relay.agent_metrics(WORKER).await {
            Ok(text) => match metric_in(&text, "jobrelay_agent_foreign_objects") {
                Some(n) if n >= 1.0 => Seen::Ready(()),
                other => Seen::Waiting(format!("jobrelay_agent_foreign_objects {other:?}")),
            },
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
    let log = relay.agent_log(WORKER);
    assert!(
        log.lines()
            .any(|l| l.contains("outside the mirror's namespace")
                && l.contains(&format!("Job {theirs}/copy"))),
        "the agent logs the copy once it sees it"
    );

    // The mirror runs on: the same Job, not judged lost, not run again.
    let victim = s.jobs.get("victim").await.expect("the manager Job");
    assert!(
        !s.events("victim")
            .await
            .iter()
            .any(|(reason, _)| reason == "RemoteJobLost"),
        "the mirror was not judged lost: {:?}",
        s.events("victim").await
    );
    assert_eq!(
        mirrors.get("victim").await.ok().and_then(|m| m.uid()),
        Some(mirror_uid),
        "the mirror is the one created first"
    );
    assert!(victim.metadata.deletion_timestamp.is_none());
    assert!(
        !log.contains("mirror lost behind jobrelay's back"),
        "the agent judged no mirror lost"
    );

    // Deleting the manager Job removes the mirror, and leaves the copy.
    s.finish(WAIT).await;
    let left = copies.get("copy").await.expect("the copy is still there");
    assert_eq!(left.finalizers(), [HOLD], "left as its owner made it");
    let release = json!({"metadata": {"finalizers": null}});
    copies
        .patch("copy", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap_or_else(|e| panic!("releasing the copy: {e}"));
}
