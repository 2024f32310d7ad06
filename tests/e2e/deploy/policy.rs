//! What a worker allows, as its owner set it with the agent's chart: a
//! system namespace is never open, worker-2's agent (whose policy names the
//! scenario namespaces, and which holds Roles there alone) refuses any
//! other, and the pod-template policy — a ValidatingAdmissionPolicy the
//! worker's API server applies to the agent's requests — refuses a
//! privileged container and a ServiceAccount not allowed. Each refusal ends
//! the manager Job `Failed` (RemoteRejected) with a sentence that names the
//! cause, and nothing is created on the worker.

use jobrelay_e2e::deployed::{TIMEOUT, create, finish, namespace, worker};
use jobrelay_proto::wire::{CLUSTER_KEY, MANAGED_BY, ORIGIN_LABEL, ORIGIN_UID_LABEL};
use jobrelay_testbed::deploy::{Installed, ORIGIN, OUTSIDE, SCOPED_WORKER};
use jobrelay_testbed::kit;
use jobrelay_testbed::objects::fixtures::TestJob;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::PodSpec;
use kube::api::{Api, DeleteParams, ListParams};

use super::installed;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_workers_namespace_and_pod_template_policies_refuse_with_reasons_and_create_nothing() {
    let installed = installed().await;
    let (ns, jobs) = namespace(installed, "deploy-policy").await;

    // A system namespace, on any worker.
    let system: Api<Job> = Api::namespaced(
        kit::client(installed.clusters.manager()).await,
        "kube-system",
    );
    let uid = create(&system, relayed("kube-system", "system", None).build()).await;
    let message = wait_refused(&system, "system", "REJECT_REASON_NAMESPACE_NOT_ALLOWED").await;
    assert!(message.contains("system namespace"), "{message}");
    delete_and_wait(&system, "system").await;
    assert_nothing_of(installed, "kube-system", &uid).await;

    // A namespace worker-2's policy does not name.
    let outside: Api<Job> =
        Api::namespaced(kit::client(installed.clusters.manager()).await, OUTSIDE);
    let uid = create(
        &outside,
        relayed(OUTSIDE, "outside", Some(SCOPED_WORKER)).build(),
    )
    .await;
    let message = wait_refused(&outside, "outside", "REJECT_REASON_NAMESPACE_NOT_ALLOWED").await;
    assert!(
        message.contains(OUTSIDE) && !message.contains("deploy-basic"),
        "names the namespace, not those allowed: {message}"
    );
    delete_and_wait(&outside, "outside").await;
    assert_nothing_of(installed, OUTSIDE, &uid).await;

    // A privileged container, and a ServiceAccount not allowed, on either
    // kind of agent.
    for (cluster, suffix) in [("worker-1", "1"), (SCOPED_WORKER, "2")] {
        let privileged = |pod: &mut PodSpec| {
            pod.containers[0].security_context = Some(
                serde_json::from_value(serde_json::json!({"privileged": true}))
                    .expect("a securityContext"),
            );
        };
        let message = denied(
            installed,
            &jobs,
            &format!("privileged-{suffix}"),
            cluster,
            privileged,
        )
        .await;
        assert!(message.contains("privileged containers"), "{message}");
        let as_builder = |pod: &mut PodSpec| pod.service_account_name = Some("builder".into());
        let message = denied(
            installed,
            &jobs,
            &format!("as-builder-{suffix}"),
            cluster,
            as_builder,
        )
        .await;
        assert!(
            message.contains("ServiceAccount builder") && !message.contains("default"),
            "names the ServiceAccount refused, not those allowed: {message}"
        );
    }

    // What the policies allow runs on the scoped worker.
    create(&jobs, relayed(&ns, "allowed", Some(SCOPED_WORKER)).build()).await;
    jobrelay_e2e::deployed::wait_outcome(&jobs, "allowed", "Complete").await;
    finish(installed, &ns, &jobs).await;
}

/// Creates `name` on `cluster` with its pod template changed by `change`,
/// waits until the worker's pod-template policy denied it, checks that
/// nothing of it was created, and returns the refusal's message.
async fn denied(
    installed: &Installed,
    jobs: &Api<Job>,
    name: &str,
    cluster: &str,
    change: impl FnOnce(&mut PodSpec),
) -> String {
    let ns = jobs.namespace().expect("a namespaced Api").to_string();
    let mut job = relayed(&ns, name, Some(cluster)).build();
    change(
        job.spec
            .as_mut()
            .and_then(|s| s.template.spec.as_mut())
            .expect("a pod spec"),
    );
    let uid = create(jobs, job).await;
    let message = wait_refused(jobs, name, "REJECT_REASON_POLICY_DENIED").await;
    assert_nothing_of(installed, &ns, &uid).await;
    message
}

/// A short relayed Job, pinned to `cluster` if given.
fn relayed(ns: &str, name: &str, cluster: Option<&str>) -> TestJob {
    let job = TestJob::new(ns, name).managed_by(MANAGED_BY).run_for("1s");
    match cluster {
        Some(cluster) => job.label(CLUSTER_KEY, cluster),
        None => job,
    }
}

/// Waits until `name` failed as refused by its worker for `reason`; returns
/// the condition's message.
async fn wait_refused(jobs: &Api<Job>, name: &str, reason: &str) -> String {
    wait::until(format!("{name} refused with {reason}"), TIMEOUT, || async {
        let job = match jobs.get(name).await {
            Ok(job) => job,
            Err(error) => return Seen::Waiting(error.to_string()),
        };
        let failed = job
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Failed" && c.status == "True"))
            .cloned();
        match failed {
            Some(c) if c.reason.as_deref() == Some("RemoteRejected") => {
                let message = c.message.unwrap_or_default();
                assert!(message.contains(reason), "refused for {reason}: {message}");
                Seen::Ready(message)
            }
            other => Seen::Waiting(format!("{other:?}")),
        }
    })
    .await
}

async fn delete_and_wait(jobs: &Api<Job>, name: &str) {
    let _ = jobs.delete(name, &DeleteParams::background()).await;
    wait::until(format!("{name} gone"), TIMEOUT, || async {
        match jobs.get_opt(name).await {
            Ok(None) => Seen::Ready(()),
            other => Seen::Waiting(format!(
                "{:?}",
                other.map(|j| j.map(|j| j.metadata.finalizers))
            )),
        }
    })
    .await;
}

/// No Job of jobrelay's for `uid` in `ns` on any worker.
async fn assert_nothing_of(installed: &Installed, ns: &str, uid: &str) {
    for cluster in ["worker-1", "worker-2"] {
        let jobs: Api<Job> = Api::namespaced(kit::client(worker(installed, cluster)).await, ns);
        let selector = format!("{ORIGIN_LABEL}={ORIGIN},{ORIGIN_UID_LABEL}={uid}");
        let found = jobs
            .list(&ListParams::default().labels(&selector))
            .await
            .expect("listing Jobs");
        assert!(
            found.items.is_empty(),
            "{cluster} holds a Job for {uid} in {ns}"
        );
    }
}
