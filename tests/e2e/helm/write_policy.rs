//! The agent's own identity on its worker, held by the chart's write policy
//! and enforced by a real kube-apiserver: as the agent, a Job without the
//! origin's label, taking over or deleting a user's Job, and deleting a Pod
//! in a system namespace or the agent's own are refused; deleting a Pod of
//! the origin is admitted; and no one but the agent sets the label naming a
//! manager installation. Requests as in `policy_kit.rs`: impersonated,
//! server dry runs.

use std::time::Duration;

use jobrelay_proto::wire::{MANAGER_INSTANCE_LABEL, ORIGIN_LABEL};
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::policy_kit::{install, job, refusal};
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
    worker
        .refused(
            unlabelled.clone(),
            "writes only objects labelled jobrelay.dev/origin=helm-e2e",
        )
        .await;

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
    let take_over = json!({"metadata": {"labels": {ORIGIN_LABEL: ORIGIN}}});
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
    // may not.
    let pod = |ns: &str, name: &str| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns, "labels": {ORIGIN_LABEL: ORIGIN}},
            "spec": {"containers": [{"name": "main", "image": "registry.invalid/busybox"}]},
        }))
        .expect("a Pod")
    };
    let system_pod = format!("not-jobrelays-{}", std::process::id());
    let mut system = pod("kube-system", &system_pod);
    system.metadata.labels = None;
    for (ns, pod) in [
        (worker.mirrors.as_str(), pod(&worker.mirrors, "mirror-pod")),
        (
            worker.release_namespace.as_str(),
            pod(&worker.release_namespace, "agent-pod"),
        ),
        ("kube-system", system),
    ] {
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
async fn only_the_agent_sets_the_manager_instance_label() {
    // An origin of its own: each release's policy holds its origin's
    // objects, and the other tests' releases share theirs.
    let origin = "instance-e2e";
    let worker = install("pp-instance", &["--set", &format!("origin={origin}")]).await;
    let cluster = clusters(0).manager();
    let user = cluster
        .client_as("worker-user", &["system:masters"])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let as_user: Api<Job> = Api::namespaced(user, &worker.mirrors);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let with_instance = |name: &str| -> Job {
        let mut object = job(name, json!({}), json!({}));
        object["metadata"]["labels"] =
            json!({ORIGIN_LABEL: origin, MANAGER_INSTANCE_LABEL: "another-installation"});
        serde_json::from_value(object).expect("a Job")
    };

    // A worker user's Job naming a manager instance: refused.
    let message = wait::until("the instance-label policy enforced", TIMEOUT, || async {
        match refusal(
            as_user
                .create(&dry, &with_instance("forged"))
                .await
                .map(drop),
        ) {
            Some(message) => Seen::Ready(message),
            None => Seen::Waiting("the user's label was admitted".into()),
        }
    })
    .await;
    assert!(
        message.contains("only the jobrelay agent sets the label jobrelay.dev/manager-instance"),
        "{message}"
    );
    // The agent's own mirror carries it; the user may not change it there,
    // and may write any other label.
    let as_agent: Api<Job> = Api::namespaced(worker.agent.clone(), &worker.mirrors);
    as_agent
        .create(&PostParams::default(), &with_instance("mirror"))
        .await
        .expect("the agent's mirror with its instance label");
    let patch = |value: &str| json!({"metadata": {"labels": {MANAGER_INSTANCE_LABEL: value, "team.example/owner": "ml"}}});
    let dry_patch = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let changed = refusal(
        as_user
            .patch("mirror", &dry_patch, &Patch::Merge(&patch("forged")))
            .await
            .map(drop),
    )
    .expect("a user changing the instance label is refused");
    assert!(changed.contains("may not"), "{changed}");
    assert_eq!(
        refusal(
            as_user
                .patch(
                    "mirror",
                    &dry_patch,
                    &Patch::Merge(&patch("another-installation"))
                )
                .await
                .map(drop)
        ),
        None,
        "the label left as the agent wrote it, another one added"
    );
}
