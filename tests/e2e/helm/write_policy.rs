//! The agent's own identity on its worker, held by the chart's write policy
//! and enforced by a real kube-apiserver: as the agent, a Job without the
//! origin's label, taking over or deleting a user's Job, and deleting a Pod
//! in a system namespace or the agent's own are refused; deleting a Pod of
//! the origin is admitted; and no one but the agent creates an object of
//! its origin (save a controller from a template) or changes jobrelay's
//! labels on one. Requests as in `policy_kit.rs`: impersonated,
//! server dry runs.

use std::time::Duration;

use jobrelay_proto::wire::{MANAGER_INSTANCE_LABEL, ORIGIN_LABEL, ORIGIN_UID_LABEL};
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::policy_kit::{acting_as, install, job, refusal};
use super::*;

const TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn the_agents_identity_writes_only_its_origins_objects_outside_system_namespaces() {
    let worker = install("pp-writes", &[]).await;
    worker.wait_enforced().await;
    let admin = kit::client(clusters(0).manager()).await;

    // A Job without the origin's label: not created.
    let mut unlabelled = job("unlabelled", json!({}), json!({}));
    unlabelled["metadata"]["labels"] = json!({});
    let only = format!(
        "writes only objects labelled jobrelay.dev/origin={}",
        worker.origin
    );
    worker.refused(unlabelled.clone(), &only).await;

    // A user's Job: the agent may neither take it over by labelling it nor
    // delete it.
    let users: Api<Job> = Api::namespaced(admin.clone(), &worker.mirrors);
    users
        .create(
            &PostParams::default(),
            &serde_json::from_value(unlabelled).expect("a Job"),
        )
        .await
        .expect("the user's Job");
    let as_agent: Api<Job> = Api::namespaced(worker.agent.clone(), &worker.mirrors);
    let take_over = json!({"metadata": {"labels": {ORIGIN_LABEL: worker.origin}}});
    let message = refusal(
        as_agent
            .patch(
                "unlabelled",
                &PatchParams {
                    dry_run: true,
                    ..PatchParams::default()
                },
                &Patch::Merge(&take_over),
            )
            .await
            .map(drop),
    )
    .expect("taking over a user's Job is refused");
    assert!(message.contains("does not take over"), "{message}");
    let dry_delete = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    let message = refusal(as_agent.delete("unlabelled", &dry_delete).await.map(drop))
        .expect("deleting a user's Job is refused");
    assert!(
        message.contains("writes only objects labelled"),
        "{message}"
    );

    // Pods: one of this origin in the mirrors' namespace may be deleted; a
    // system Pod, or one in the agent's own namespace even with the label,
    // may not. The labelled ones as a Job's Pods (a suspended Job of the
    // user's controls them): no one but the agent or a controller creates
    // one of the origin.
    let mut pods = Vec::new();
    for (ns, name) in [
        (worker.mirrors.as_str(), "mirror-pod"),
        (worker.release_namespace.as_str(), "agent-pod"),
    ] {
        let owner: Job = serde_json::from_value(json!({
            "metadata": {"name": "owner"},
            "spec": {"suspend": true, "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "main", "image": "registry.invalid/busybox"}]}}},
        }))
        .expect("a Job");
        let owner = Api::<Job>::namespaced(admin.clone(), ns)
            .create(&PostParams::default(), &owner)
            .await
            .unwrap_or_else(|e| panic!("creating the owner in {ns}: {e}"));
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {ORIGIN_LABEL: worker.origin},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "owner",
                    "uid": owner.metadata.uid, "controller": true}]},
            "spec": {"containers": [{"name": "main", "image": "registry.invalid/busybox"}]},
        }))
        .expect("a Pod");
        pods.push((ns, pod));
    }
    let system_pod = format!("not-jobrelays-{}", std::process::id());
    let system: Pod = serde_json::from_value(json!({
        "metadata": {"name": system_pod},
        "spec": {"containers": [{"name": "main", "image": "registry.invalid/busybox"}]},
    }))
    .expect("a Pod");
    pods.push(("kube-system", system));
    for (ns, pod) in pods {
        Api::<Pod>::namespaced(admin.clone(), ns)
            .create(&PostParams::default(), &pod)
            .await
            .unwrap_or_else(|e| panic!("creating a Pod in {ns}: {e}"));
    }
    let agents = |ns: &str| Api::<Pod>::namespaced(worker.agent.clone(), ns);
    assert_eq!(
        refusal(
            agents(&worker.mirrors)
                .delete("mirror-pod", &dry_delete)
                .await
                .map(drop)
        ),
        None,
        "the agent deletes its origin's Pods"
    );
    let message = refusal(
        agents("kube-system")
            .delete(&system_pod, &dry_delete)
            .await
            .map(drop),
    )
    .expect("deleting a system Pod is refused");
    assert!(
        message.contains("never writes in namespace kube-system"),
        "{message}"
    );
    let message = refusal(
        agents(&worker.release_namespace)
            .delete("agent-pod", &dry_delete)
            .await
            .map(drop),
    )
    .expect("deleting a Pod in the agent's own namespace is refused");
    assert!(message.contains("its own"), "{message}");
    Api::<Pod>::namespaced(admin, "kube-system")
        .delete(&system_pod, &DeleteParams::default())
        .await
        .expect("removing the system Pod");
}

#[tokio::test]
async fn only_the_agent_writes_jobrelays_labels_on_a_worker() {
    let worker = install("pp-labels", &[]).await;
    let origin = worker.origin.as_str();
    let user = acting_as("worker-user").await;
    let as_user: Api<Job> = Api::namespaced(user, &worker.mirrors);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let labelled = |name: &str, labels: serde_json::Value| -> Job {
        let mut object = job(name, json!({}), json!({}));
        object["metadata"]["labels"] = labels;
        serde_json::from_value(object).expect("a Job")
    };
    let ours = json!({ORIGIN_LABEL: origin, ORIGIN_UID_LABEL: "a-victims-uid"});

    // A worker user's Job passing for a mirror: refused, once the policy is
    // in force (a moment after it is written).
    let message = wait::until("the label policy enforced", TIMEOUT, || async {
        match refusal(
            as_user
                .create(&dry, &labelled("forged", ours.clone()))
                .await
                .map(drop),
        ) {
            Some(message) => Seen::Ready(message),
            None => Seen::Waiting("the user's Job was admitted".into()),
        }
    })
    .await;
    assert!(
        message.contains(&format!(
            "only the jobrelay agent creates jobs labelled jobrelay.dev/origin={origin}"
        )),
        "{message}"
    );
    // What a controller makes from a template it controls is admitted (a
    // JobSet's Job; a Job's Pod likewise).
    let mut child = labelled("child", ours.clone());
    child.metadata.owner_references = Some(vec![
        serde_json::from_value(json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "parent",
            "uid": "00000000-0000-0000-0000-000000000001", "controller": true,
        }))
        .expect("an owner reference"),
    ]);
    assert_eq!(
        refusal(as_user.create(&dry, &child).await.map(drop)),
        None,
        "a controller's child"
    );

    // The agent's mirror, with its instance label: the user may neither
    // change nor remove jobrelay's labels there, and may add their own.
    let mirror = labelled(
        "mirror",
        json!({ORIGIN_LABEL: origin, ORIGIN_UID_LABEL: "uid-1", MANAGER_INSTANCE_LABEL: "ours"}),
    );
    Api::<Job>::namespaced(worker.agent.clone(), &worker.mirrors)
        .create(&PostParams::default(), &mirror)
        .await
        .expect("the agent's mirror");
    let dry_patch = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    for (labels, refused) in [
        (
            json!({MANAGER_INSTANCE_LABEL: "another-installation"}),
            Some(MANAGER_INSTANCE_LABEL),
        ),
        (
            json!({ORIGIN_UID_LABEL: "a-victims-uid"}),
            Some(ORIGIN_UID_LABEL),
        ),
        (json!({ORIGIN_LABEL: null}), Some(ORIGIN_LABEL)),
        (json!({"team.example/owner": "ml"}), None),
    ] {
        let patch = json!({"metadata": {"labels": labels}});
        let answer = refusal(
            as_user
                .patch("mirror", &dry_patch, &Patch::Merge(&patch))
                .await
                .map(drop),
        );
        match refused {
            Some(label) => {
                let message = answer.unwrap_or_else(|| panic!("{patch} was admitted"));
                assert!(
                    message.contains(&format!("only the jobrelay agent sets the labels {label};")),
                    "{message}"
                );
            }
            None => assert_eq!(answer, None, "a label of the user's own"),
        }
    }
}
