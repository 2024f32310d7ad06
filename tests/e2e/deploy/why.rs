//! Why a relayed Job's Pods wait or failed on its worker, seen where its
//! user looks — on the manager, with no worker credentials: real
//! containers on worker-1's real node, one whose image the node does not
//! have (the kubelet's `ErrImageNeverPull`) and one that exits 3 and is
//! retried. Each manager Job's `jobrelay.dev/pods` annotation says the
//! cluster, the Pods by phase and the kubelet's reason, container and exit
//! code, and a warning Event (`PodsWaiting`, `PodsFailed`) tells it in
//! `kubectl describe job`; one whose Pod no node of the worker matches
//! shows the worker scheduler's `Unschedulable` and its message. And the worker's own Warning Event about a mirror
//! — its Job controller's `FailedCreate` under a quota of no Pods — reaches
//! the manager Job as a `WorkerWarning` naming the worker.

use jobrelay_e2e::deployed::{TIMEOUT, create, finish, namespace, worker};
use jobrelay_proto::wire::{CLUSTER_KEY, MANAGED_BY, PODS_ANNOTATION};
use jobrelay_testbed::cluster::node::{REAL_NODE_LABEL, REAL_NODE_TAINT, WORKLOAD_IMAGE};
use jobrelay_testbed::kit;
use jobrelay_testbed::objects::fixtures::TestJob;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event as CoreEvent, ResourceQuota};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use super::installed;

/// An image no node of the kit has.
const ABSENT_IMAGE: &str = "jobrelay.test/absent:1";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn why_pods_wait_or_failed_on_a_worker_and_its_warnings_are_shown_on_the_manager_job() {
    let installed = installed().await;
    let (ns, jobs) = namespace(installed, "deploy-why").await;
    create(&jobs, on_real_node(&ns, "unpulled", ABSENT_IMAGE, &[], 0)).await;
    // Retried twice, 10 s apart at least: the first Pod has failed while
    // the Job still runs.
    create(
        &jobs,
        on_real_node(&ns, "exits", WORKLOAD_IMAGE, &["-exit=3"], 2),
    )
    .await;

    let unpulled =
        wait_annotation(&jobs, "unpulled", "wait ErrImageNeverPull (container work)").await;
    assert!(
        unpulled.starts_with("cluster worker-1 (1 Pending): 1 Pod wait ErrImageNeverPull"),
        "{unpulled}"
    );
    assert!(
        unpulled.contains(ABSENT_IMAGE),
        "the kubelet's message names the image: {unpulled}"
    );
    let exits = wait_annotation(&jobs, "exits", "failed Error (container work, exit code 3)").await;
    assert!(exits.starts_with("cluster worker-1 ("), "{exits}");
    // Pinned to worker-1 (so placed without asking for room), its Pod
    // selects a node the worker does not have: its scheduler's word.
    let mut nowhere = on_real_node(&ns, "nowhere", WORKLOAD_IMAGE, &[], 0);
    let spec = nowhere.spec.as_mut().and_then(|s| s.template.spec.as_mut());
    spec.expect("a pod spec")
        .node_selector
        .get_or_insert_default()
        .insert("jobrelay.test/absent".into(), "true".into());
    create(&jobs, nowhere).await;
    let unscheduled = wait_annotation(&jobs, "nowhere", "1 Pod wait Unschedulable").await;
    assert!(
        unscheduled.contains("didn't match Pod's node affinity/selector"),
        "the scheduler's message: {unscheduled}"
    );

    let events: Api<Event> = Api::namespaced(jobs.clone().into_client(), &ns);
    let waiting = wait_warning(&events, "unpulled", "PodsWaiting").await;
    assert!(
        waiting.starts_with("on cluster worker-1, 1 Pod wait ErrImageNeverPull (container work): ")
            && waiting.contains(ABSENT_IMAGE),
        "{waiting}"
    );
    let failed = wait_warning(&events, "exits", "PodsFailed").await;
    assert!(
        failed.starts_with("on cluster worker-1, 1 Pod failed Error (container work, exit code 3)"),
        "{failed}"
    );

    // A mirror whose Pods the worker's Job controller may not create (a
    // ResourceQuota of no Pods on worker-2, whose agent holds Roles only):
    // no Pod, so nothing of it but the controller's FailedCreate warning,
    // which reaches the manager Job naming the worker.
    let worker_2 = kit::client(worker(installed, "worker-2")).await;
    let quotas: Api<ResourceQuota> = Api::namespaced(worker_2, &ns);
    let none: ResourceQuota = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "no-pods"}, "spec": {"hard": {"pods": "0"}},
    }))
    .expect("a ResourceQuota");
    quotas
        .create(&PostParams::default(), &none)
        .await
        .expect("creating the quota on worker-2");
    wait::until("the quota counted on worker-2", TIMEOUT, || async {
        match quotas.get("no-pods").await {
            Ok(q) if q.status.as_ref().and_then(|s| s.hard.as_ref()).is_some() => Seen::Ready(()),
            other => Seen::Waiting(format!("{:?}", other.map(|q| q.status))),
        }
    })
    .await;
    let over = TestJob::new(&ns, "over-quota")
        .managed_by(MANAGED_BY)
        .label(CLUSTER_KEY, "worker-2")
        .build();
    create(&jobs, over).await;
    let told = wait_warning(&events, "over-quota", "WorkerWarning").await;
    assert!(
        told.starts_with("on cluster worker-2, Job over-quota: FailedCreate (job-controller): ")
            && told.contains("exceeded quota: no-pods"),
        "{told}"
    );
    // The worker's Job controller says it again as it retries; the manager
    // Job is told once.
    let on_worker: Api<CoreEvent> =
        Api::namespaced(kit::client(worker(installed, "worker-2")).await, &ns);
    wait::until("worker-2 saying FailedCreate twice", TIMEOUT, || async {
        let said: i32 = on_worker
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
            .iter()
            .filter(|e| e.reason.as_deref() == Some("FailedCreate"))
            .filter(|e| e.involved_object.name.as_deref() == Some("over-quota"))
            .map(|e| e.count.unwrap_or(1))
            .sum();
        match said {
            2.. => Seen::Ready(()),
            said => Seen::Waiting(format!("{said} times")),
        }
    })
    .await;
    let copies: Vec<Event> = events
        .list(&ListParams::default())
        .await
        .expect("listing the manager's Events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("WorkerWarning"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("over-quota"))
        .collect();
    assert_eq!(copies.len(), 1, "{copies:?}");
    assert!(copies[0].series.is_none(), "told once: {copies:?}");
    finish(installed, &ns, &jobs).await;
    quotas
        .delete("no-pods", &DeleteParams::default())
        .await
        .expect("deleting the quota");
}

/// A Job pinned to worker-1 whose one container runs `image` with `args` on
/// its real node, as restricted as the kit's nodes require, retried
/// `backoff_limit` times.
pub(super) fn on_real_node(
    ns: &str,
    name: &str,
    image: &str,
    args: &[&str],
    backoff_limit: i32,
) -> Job {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": ns, "labels": {CLUSTER_KEY: "worker-1"}},
        "spec": {
            "managedBy": MANAGED_BY,
            "backoffLimit": backoff_limit,
            "template": {"spec": {
                "restartPolicy": "Never",
                "nodeSelector": {REAL_NODE_LABEL: "true"},
                "tolerations": [{"key": REAL_NODE_TAINT, "operator": "Exists", "effect": "NoSchedule"}],
                "securityContext": {"runAsNonRoot": true, "runAsUser": 65532,
                                    "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [{
                    "name": "work",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "args": args,
                    "securityContext": {"allowPrivilegeEscalation": false,
                                        "readOnlyRootFilesystem": true,
                                        "capabilities": {"drop": ["ALL"]}},
                }],
            }},
        },
    }))
    .expect("a Job")
}

/// Waits until the manager Job `name`'s `jobrelay.dev/pods` annotation
/// says `what`; returns it.
async fn wait_annotation(jobs: &Api<Job>, name: &str, what: &str) -> String {
    wait::until(format!("{name}'s Pods: {what}"), TIMEOUT, || async {
        let job = jobs.get(name).await;
        let shown = job
            .as_ref()
            .ok()
            .and_then(|j| j.annotations().get(PODS_ANNOTATION).cloned());
        match shown {
            Some(text) if text.contains(what) => Seen::Ready(text),
            other => Seen::Waiting(format!("{other:?} ({:?})", job.map(|j| j.status))),
        }
    })
    .await
}

/// Waits for a warning Event of `reason` on the manager Job `name`;
/// returns its note.
async fn wait_warning(events: &Api<Event>, name: &str, reason: &str) -> String {
    wait::until(format!("a {reason} warning on {name}"), TIMEOUT, || async {
        let list = events.list(&ListParams::default()).await.map(|l| l.items);
        let found = list.as_ref().ok().and_then(|events| {
            events.iter().find(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                    && e.reason.as_deref() == Some(reason)
                    && e.type_.as_deref() == Some("Warning")
            })
        });
        match found {
            Some(event) => Seen::Ready(event.note.clone().unwrap_or_default()),
            None => Seen::Waiting(format!(
                "{:?}",
                list.map(|l| l.iter().map(|e| e.reason.clone()).collect::<Vec<_>>())
            )),
        }
    })
    .await
}
