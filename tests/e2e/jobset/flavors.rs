//! A JobSet whose replicated Jobs Kueue admits in two flavors: each
//! flavor's node label is quota on the manager, so the mirror of every
//! replicated Job carries neither — it runs on worker-1, whose nodes have
//! neither — while the manager JobSet keeps what Kueue gave each.

use jobrelay_e2e::scenario::{Scenario, WAIT, live_worker_pods, quota_back_to_zero};
use jobrelay_kinds::jobset::JobSet;
use jobrelay_testbed::objects::kueue_objects::{self, LOCAL_QUEUE};
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use kube::ResourceExt;
use serde_json::json;

use super::{
    CHECK, QUEUE_NAME, create, finish, leader_and_workers, on_worker, relayed, wait_manager,
};

/// The node label both flavors set, to values no test node carries.
const POOL: &str = "e2e.jobrelay.dev/pool";

/// Two flavors of one node label and a ClusterQueue over them: `small`
/// (1 CPU) has room for the leader's 500m, not for the workers' 1500m,
/// which Kueue then assigns `large` (2 CPUs).
async fn two_flavors(client: &kube::Client, s: &Scenario) -> anyhow::Result<(String, String)> {
    let (small, large) = (format!("small-{}", s.ns), format!("large-{}", s.ns));
    for flavor in [&small, &large] {
        let spec = json!({"metadata": {"name": flavor}, "spec": {"nodeLabels": {POOL: flavor}}});
        kueue_objects::apply(client, "ResourceFlavor", None, spec).await?;
    }
    let quota = |flavor: &str, cpu: &str| json!({"name": flavor, "resources": [{"name": "cpu", "nominalQuota": cpu}]});
    let cluster_queue = json!({
        "metadata": {"name": s.ns},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": s.ns}},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                quota(&small, "1"), quota(&large, "2"),
            ]}],
            "admissionChecksStrategy": {"admissionChecks": [{"name": CHECK}]},
        },
    });
    kueue_objects::apply(client, "ClusterQueue", None, cluster_queue).await?;
    let local_queue = json!({
        "metadata": {"name": LOCAL_QUEUE, "namespace": s.ns},
        "spec": {"clusterQueue": s.ns},
    });
    kueue_objects::apply(client, "LocalQueue", Some(&s.ns), local_queue).await?;
    Ok((small, large))
}

/// The value of [`POOL`] in each replicated Job's pod template, by name.
fn pools(jobset: &JobSet) -> Vec<(String, Option<String>)> {
    let replicated = jobset.spec.iter().flat_map(|s| &s.replicated_jobs);
    replicated
        .map(|job| (job.name.clone(), pool_of(job.template.spec.as_ref())))
        .collect()
}

fn pool_of(job: Option<&JobSpec>) -> Option<String> {
    let pod = job?.template.spec.as_ref()?;
    pod.node_selector.as_ref()?.get(POOL).cloned()
}

#[tokio::test]
async fn a_jobset_admitted_in_a_flavor_per_pod_set_runs_on_a_worker_with_neither() {
    let (s, jobsets) = relayed("jobset-flavors").await;
    let client = s.jobs.clone().into_client();
    let (small, large) = two_flavors(&client, &s)
        .await
        .unwrap_or_else(|e| panic!("flavors and queues: {e:#}"));
    let mut jobset = leader_and_workers("flavored", "8s");
    jobset
        .labels_mut()
        .insert(QUEUE_NAME.into(), LOCAL_QUEUE.into());
    let uid = create(&jobsets, &jobset).await;

    // Kueue admits it, each replicated Job in its own flavor.
    let admitted = wait_manager(&jobsets, ("flavored", "admitted"), |set| {
        pools(set).iter().all(|(_, pool)| pool.is_some())
    })
    .await;
    assert_eq!(
        pools(&admitted),
        [
            ("leader".to_string(), Some(small.clone())),
            ("workers".to_string(), Some(large.clone())),
        ],
        "Kueue gave each replicated Job its own flavor's node label"
    );
    // All four Pods run on worker-1, whose nodes carry no POOL label.
    wait::until(
        "the JobSet's four Pods running on a worker",
        WAIT,
        || async {
            match live_worker_pods(&s).await.get(&uid) {
                Some(4) => Seen::Ready(()),
                other => Seen::Waiting(format!("{other:?} live Pods")),
            }
        },
    )
    .await;
    let children: Vec<Job> = on_worker(&s, "flavored").await;
    let mut children: Vec<(String, Option<String>)> = children
        .iter()
        .map(|job| (job.name_any(), pool_of(job.spec.as_ref())))
        .collect();
    children.sort();
    assert_eq!(
        children,
        [
            ("flavored-leader-0".to_string(), None),
            ("flavored-workers-0".to_string(), None),
        ],
        "no replicated Job of the mirror keeps a flavor's node label"
    );
    wait_manager(&jobsets, ("flavored", "Completed"), |set| {
        set.condition("Completed")
    })
    .await;
    finish(&s, &jobsets).await;
    quota_back_to_zero(&s).await;
    for (kind, name) in [
        ("ClusterQueue", &s.ns),
        ("ResourceFlavor", &small),
        ("ResourceFlavor", &large),
    ] {
        let _ = kueue_objects::api(&client, kind, None)
            .delete(name, &Default::default())
            .await;
    }
}
