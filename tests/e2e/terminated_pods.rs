//! Terminated-Pod lifetime on real clusters, with three agents configured
//! three ways:
//! - worker-1: the default scope — only Pods jobrelay created;
//! - worker-2: Pods jobrelay did not create too (the explicit switch), in one
//!   namespace, matching a label selector;
//! - worker-3: the same switch in dry-run mode.
//!
//! Running Pods are never touched.

use std::collections::BTreeMap;
use std::time::Duration;

use jobrelay_proto::wire::{
    CLUSTER_KEY, MANAGED_BY, ORIGIN_UID_LABEL, REMOTE_RETENTION_ANNOTATION,
};
use jobrelay_testbed::kit::{self, Clusters};
use jobrelay_testbed::objects::fixtures::{OUTCOME, RUN_FOR, TestJob};
use jobrelay_testbed::relay::{Options, Relay};
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};

const TIMEOUT: Duration = Duration::from_secs(60);
/// The one namespace worker-2's policy covers.
const SCOPED: &str = "reaped";

async fn setup() -> (&'static Clusters, &'static Relay) {
    let policy = |extra: &str| {
        format!("terminatedPods:\n  succeededAfter: 2s\n  failedAfter: 2s\n  interval: 1s\n{extra}")
    };
    let agent_configs = BTreeMap::from([
        ("worker-1".to_string(), policy("")),
        (
            "worker-2".to_string(),
            policy(&format!(
                "  includeUnmirrored: true\n  namespaces: [{SCOPED}]\n  labelSelector: reap=yes\n"
            )),
        ),
        (
            "worker-3".to_string(),
            policy("  includeUnmirrored: true\n  dryRun: true\n"),
        ),
    ]);
    let (clusters, relay) = kit::relay_with(
        3,
        Options {
            agent_configs,
            ..Default::default()
        },
    )
    .await;
    (clusters, relay)
}

fn worker(
    clusters: &'static Clusters,
    name: &str,
) -> &'static jobrelay_testbed::cluster::ClusterInfo {
    clusters
        .workers()
        .iter()
        .find(|w| w.name == name)
        .expect("worker")
}

/// A bare Pod (no Job, no jobrelay label) that kwok runs for `run_for`.
async fn bare_pod(
    pods: &Api<Pod>,
    name: &str,
    run_for: &str,
    failed: bool,
    labels: &[(&str, &str)],
) -> Pod {
    let mut annotations = BTreeMap::from([(RUN_FOR.to_string(), run_for.to_string())]);
    if failed {
        annotations.insert(OUTCOME.into(), "Failed".into());
    }
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "annotations": annotations, "labels": labels},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "registry.example/jobrelay/test-workload:1"}]},
    }))
    .expect("Pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create Pod")
}

fn phase(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

async fn wait_phase(pods: &Api<Pod>, name: &str, want: &str) {
    wait::until(format!("Pod {name} {want}"), TIMEOUT, || async {
        match pods.get_opt(name).await {
            Ok(Some(pod)) if phase(&pod) == want => Seen::Ready(()),
            Ok(Some(pod)) => Seen::Waiting(phase(&pod)),
            Ok(None) => Seen::Waiting("gone".into()),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await
}

async fn wait_deleted(pods: &Api<Pod>, name: &str) {
    wait::until(format!("Pod {name} deleted"), TIMEOUT, || async {
        match pods.get_opt(name).await {
            Ok(None) => Seen::Ready(()),
            Ok(Some(pod)) => Seen::Waiting(phase(&pod)),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await
}

async fn exists(pods: &Api<Pod>, name: &str) -> bool {
    pods.get_opt(name).await.expect("get Pod").is_some()
}

#[tokio::test]
async fn a_mirrors_terminated_pods_go_and_other_pods_stay_by_default() {
    let (clusters, _relay) = setup().await;
    let ns = kit::namespace_everywhere(clusters, "mirrored").await;
    let w1 = worker(clusters, "worker-1");
    let pods: Api<Pod> = Api::namespaced(kit::client(w1).await, &ns);
    let unmirrored = bare_pod(&pods, "bystander", "1s", false, &[]).await;
    wait_phase(&pods, &unmirrored.name_any(), "Succeeded").await;

    // The finished mirror is kept (annotation) so its Succeeded Pod outlives
    // the Job's completion; only the terminated-Pod policy removes the Pod.
    let manager_jobs: Api<Job> = Api::namespaced(kit::client(clusters.manager()).await, &ns);
    let job = TestJob::new(&ns, "done")
        .managed_by(MANAGED_BY)
        .label(CLUSTER_KEY, "worker-1")
        .annotate(REMOTE_RETENTION_ANNOTATION, "1h")
        .run_for("1s")
        .build();
    let uid = manager_jobs
        .create(&PostParams::default(), &job)
        .await
        .expect("create Job")
        .uid()
        .expect("uid");
    let selector = ListParams::default().labels(&format!("{ORIGIN_UID_LABEL}={uid}"));
    let seen = wait::until(
        "the mirror's Pod Succeeded on worker-1",
        TIMEOUT,
        || async {
            match pods.list(&selector).await {
                Ok(list) if list.items.iter().any(|p| phase(p) == "Succeeded") => {
                    Seen::Ready(list.items[0].name_any())
                }
                Ok(list) => Seen::Waiting(format!(
                    "{:?}",
                    list.items.iter().map(phase).collect::<Vec<_>>()
                )),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await;
    wait_deleted(&pods, &seen).await;

    let mirror: Api<Job> = Api::namespaced(kit::client(w1).await, &ns);
    assert!(
        mirror.get_opt("done").await.expect("get").is_some(),
        "the kept mirror Job itself stays"
    );
    assert!(
        exists(&pods, "bystander").await,
        "a Pod jobrelay did not create is out of scope by default"
    );
}

#[tokio::test]
async fn with_the_switch_on_unmirrored_pods_in_scope_go_and_the_rest_stay() {
    let (clusters, _relay) = setup().await;
    let w2 = worker(clusters, "worker-2");
    let client = kit::client(w2).await;
    kit::create_namespace(&client, SCOPED).await;
    let other = kit::namespace(&client, "unscoped").await;
    let scoped: Api<Pod> = Api::namespaced(client.clone(), SCOPED);
    let unscoped: Api<Pod> = Api::namespaced(client, &other);

    bare_pod(&scoped, "ok-labelled", "1s", false, &[("reap", "yes")]).await;
    bare_pod(&scoped, "failed-labelled", "1s", true, &[("reap", "yes")]).await;
    bare_pod(&scoped, "running-labelled", "1h", false, &[("reap", "yes")]).await;
    bare_pod(&scoped, "ok-unlabelled", "1s", false, &[]).await;
    bare_pod(&unscoped, "ok-elsewhere", "1s", false, &[("reap", "yes")]).await;
    wait_phase(&scoped, "running-labelled", "Running").await;
    wait_phase(&scoped, "ok-unlabelled", "Succeeded").await;
    wait_phase(&unscoped, "ok-elsewhere", "Succeeded").await;

    wait_deleted(&scoped, "ok-labelled").await;
    wait_deleted(&scoped, "failed-labelled").await;
    assert!(
        exists(&scoped, "running-labelled").await,
        "a Running Pod is never touched"
    );
    assert!(
        exists(&scoped, "ok-unlabelled").await,
        "outside the label selector"
    );
    assert!(
        exists(&unscoped, "ok-elsewhere").await,
        "outside the namespaces"
    );
}

#[tokio::test]
async fn dry_run_logs_what_it_would_delete_and_deletes_nothing() {
    let (clusters, relay) = setup().await;
    let w3 = worker(clusters, "worker-3");
    let client = kit::client(w3).await;
    let ns = kit::namespace(&client, "dry").await;
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    bare_pod(&pods, "spared", "1s", false, &[]).await;
    wait_phase(&pods, "spared", "Succeeded").await;
    wait::until("the dry run to name Pod spared", TIMEOUT, || async {
        let log = relay.agent_log("worker-3");
        match log
            .lines()
            .find(|l| l.contains("would delete") && l.contains("pod=spared"))
        {
            Some(line) => Seen::Ready(line.to_string()),
            None => Seen::Waiting("not in the agent's log yet".into()),
        }
    })
    .await;
    assert!(exists(&pods, "spared").await, "dry run deletes nothing");
}
