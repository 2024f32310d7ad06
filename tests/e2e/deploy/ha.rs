//! The manager's two replicas as a platform team operates them: a `helm
//! upgrade` that changes the Pod template rolls them (surge first, then the
//! old ones go) and `kubectl rollout status` completes; `kubectl drain` of
//! the leader's node evicts it through the PodDisruptionBudget and
//! completes. Meanwhile Jobs keep coming; after each step exactly one
//! replica leads, labels its Pod, and is the one address in the agents'
//! Service; in the end every Job ran, was dispatched once, and was released
//! only after its worker reported its Pods gone.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use jobrelay_e2e::deployed::{
    TIMEOUT, dispatched_once_and_released_after_their_pods, finish, keep_creating, namespace,
    wait_outcome,
};
use jobrelay_proto::wire::LEADER_LABEL;
use jobrelay_testbed::deploy::{Installed, NAMESPACE, helm_in, kubectl_in};
use jobrelay_testbed::kit;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use super::installed;

/// The manager's Deployment, Lease and agents' Service share this name.
const MANAGER: &str = "jobrelay-manager";
const MANAGER_PODS: &str = "app.kubernetes.io/component=manager";

/// The leading replica as the cluster shows it.
#[derive(Debug, Clone, PartialEq)]
struct Leader {
    pod: String,
    node: String,
    ip: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_managers_roll_and_drain_while_jobs_run_and_none_is_lost_or_dispatched_twice() {
    let installed = installed().await;
    let (ns, jobs) = namespace(installed, "deploy-ha").await;
    let manager = installed.clusters.manager();
    // `helm install --wait` returned (in `installed`): two Ready replicas.
    wait_available(installed, 2).await;
    let first = wait_single_leader(installed, None).await;

    let flowing = Arc::new(AtomicBool::new(true));
    let flow = tokio::spawn(keep_creating(jobs.clone(), ns.clone(), flowing.clone()));

    // A change to the Pod template rolls both replicas.
    let annotated = [
        "--set-string".into(),
        "manager.podAnnotations.rolled=once".into(),
    ];
    let args = installed.manager_args("upgrade", &installed.release, &annotated);
    helm_in(manager, &args)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    kubectl_in(
        manager,
        &[
            "rollout",
            "status",
            &format!("deployment/{MANAGER}"),
            "--timeout=3m",
        ],
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    let rolled = wait_single_leader(installed, Some(&first.pod)).await;
    // An old replica may still be terminating; the running ones are new.
    let pods: Vec<Pod> = manager_pods(installed)
        .await
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    assert_eq!(pods.len(), 2, "two running replicas: {pods:?}");
    assert!(
        pods.iter()
            .all(|p| p.annotations().get("rolled").map(String::as_str) == Some("once")),
        "every replica runs the new template: {:?}",
        pods.iter()
            .map(|p| (p.name_any(), p.annotations().clone()))
            .collect::<Vec<_>>()
    );

    // The leader's node drained: its Pod evicted (the budget allows one).
    kubectl_in(
        manager,
        &[
            "drain",
            &rolled.node,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=3m",
        ],
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    let drained = wait_single_leader(installed, Some(&rolled.pod)).await;
    assert_ne!(drained.node, rolled.node, "the new leader runs elsewhere");
    wait_available(installed, 2).await;
    kubectl_in(manager, &["uncordon", &rolled.node])
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));

    flowing.store(false, Ordering::SeqCst);
    let names = flow.await.expect("the Job flow");
    assert!(names.len() >= 3, "Jobs were created throughout: {names:?}");
    for name in &names {
        wait_outcome(&jobs, name, "Complete").await;
    }
    finish(installed, &ns, &jobs).await;
    dispatched_once_and_released_after_their_pods(installed, &ns, &names).await;
    eprintln!(
        "leaders: {} → rollout → {} → drain of {} → {}; {} Jobs",
        first.pod,
        rolled.pod,
        rolled.node,
        drained.pod,
        names.len()
    );
}

async fn manager_pods(installed: &Installed) -> Vec<Pod> {
    let pods: Api<Pod> =
        Api::namespaced(kit::client(installed.clusters.manager()).await, NAMESPACE);
    pods.list(&ListParams::default().labels(MANAGER_PODS))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

/// Waits until the Deployment has `replicas` available and nothing else.
async fn wait_available(installed: &Installed, replicas: i32) {
    let deployments: Api<Deployment> =
        Api::namespaced(kit::client(installed.clusters.manager()).await, NAMESPACE);
    wait::until(
        format!("{MANAGER} with {replicas} available"),
        TIMEOUT,
        || async {
            let status = deployments
                .get(MANAGER)
                .await
                .map(|d| d.status.unwrap_or_default());
            match status {
                Ok(s) if s.available_replicas == Some(replicas) && s.replicas == Some(replicas) => {
                    Seen::Ready(())
                }
                other => Seen::Waiting(format!("{other:?}")),
            }
        },
    )
    .await;
}

/// Waits until one replica (not `not`) holds the Lease, it alone carries the
/// leader label, and the agents' Service has its address alone.
async fn wait_single_leader(installed: &Installed, not: Option<&str>) -> Leader {
    let client = kit::client(installed.clusters.manager()).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let slices: Api<EndpointSlice> = Api::namespaced(client, NAMESPACE);
    let slice_selector =
        ListParams::default().labels(&format!("kubernetes.io/service-name={MANAGER}"));
    wait::until(
        "a single labelled leader behind the agents' Service",
        TIMEOUT,
        || async {
            let holder = leases
                .get(MANAGER)
                .await
                .ok()
                .and_then(|l| l.spec?.holder_identity);
            let pods = manager_pods(installed).await;
            let labelled: Vec<&Pod> = pods
                .iter()
                .filter(|p| p.labels().get(LEADER_LABEL).map(String::as_str) == Some("true"))
                .collect();
            let endpoints: Vec<String> = slices
                .list(&slice_selector)
                .await
                .map(|l| l.items)
                .unwrap_or_default()
                .into_iter()
                .flat_map(|s| s.endpoints)
                .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
                .flat_map(|e| e.addresses)
                .collect();
            let [pod] = labelled.as_slice() else {
                return Seen::Waiting(format!(
                    "labelled {:?}, Lease {holder:?}",
                    labelled.iter().map(|p| p.name_any()).collect::<Vec<_>>()
                ));
            };
            let leader = Leader {
                pod: pod.name_any(),
                node: pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .unwrap_or_default(),
                ip: pod
                    .status
                    .as_ref()
                    .and_then(|s| s.pod_ip.clone())
                    .unwrap_or_default(),
            };
            match holder.as_deref() == Some(leader.pod.as_str())
                && Some(leader.pod.as_str()) != not
                && endpoints == [leader.ip.clone()]
            {
                true => Seen::Ready(leader),
                false => Seen::Waiting(format!(
                    "labelled {leader:?}, Lease {holder:?}, Service endpoints {endpoints:?}"
                )),
            }
        },
    )
    .await
}
