//! Proof that the kit's JobSet parts behave like JobSet: on worker-1 the real
//! JobSet controller (v0.11.1, a process with webhooks by URL on loopback)
//! turns a JobSet into its child Jobs and Pods, which kwok runs to
//! completion, and a Background delete leaves nothing behind; on the
//! manager, Kueue with its `jobset.x-k8s.io/jobset` integration queues a
//! JobSet as one Workload with a pod set per replicated Job.

use std::time::Duration;

use jobrelay_testbed::controllers::jobset::{JOBSET_NAME_LABEL, JobSetController, jobset_resource};
use jobrelay_testbed::controllers::kueue::{Integrations, Kueue, Settings};
use jobrelay_testbed::kit::{self, Clusters};
use jobrelay_testbed::objects::fixtures::pod_spec;
use jobrelay_testbed::objects::kueue_objects::{self, LOCAL_QUEUE, condition_true};
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

const TIMEOUT: Duration = Duration::from_secs(90);
/// The cluster the JobSet controller runs on.
const JOBSET_WORKER: &str = "worker-1";
/// Label Kueue reads a JobSet's LocalQueue from.
const QUEUE_NAME: &str = "kueue.x-k8s.io/queue-name";

static JOBSET: OnceCell<JobSetController> = OnceCell::const_new();
static KUEUE: OnceCell<Kueue> = OnceCell::const_new();

fn clusters() -> &'static Clusters {
    kit::clusters(1)
}

/// A JobSet `name` of a one-Pod "leader" and a three-Pod "workers"
/// replicated Job, each Pod asking for 100m CPU; kwok finishes Job Pods by
/// itself.
fn leader_and_workers(ns: &str, name: &str, labels: Value) -> DynamicObject {
    let mut pod = serde_json::to_value(pod_spec()).expect("pod spec");
    pod["containers"][0]["resources"] = json!({"requests": {"cpu": "100m"}});
    let replicated = |job: &str, pods: u32| {
        json!({"name": job, "replicas": 1, "template": {"spec": {
            "parallelism": pods, "completions": pods, "backoffLimit": 0,
            "template": {"spec": pod},
        }}})
    };
    serde_json::from_value(json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"replicatedJobs": [replicated("leader", 1), replicated("workers", 3)]},
    }))
    .expect("JobSet")
}

/// Names of the objects of JobSet `name` (by JobSet's name label).
async fn children<K>(api: &Api<K>, name: &str) -> Result<Vec<String>, kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let list = api
        .list(&ListParams::default().labels(&format!("{JOBSET_NAME_LABEL}={name}")))
        .await?;
    Ok(list
        .items
        .iter()
        .map(|o| o.meta().name.clone().unwrap_or_default())
        .collect())
}

#[tokio::test]
async fn jobset_runs_its_jobs_to_completion_and_a_background_delete_leaves_nothing() {
    let worker = clusters()
        .workers()
        .iter()
        .find(|w| w.name == JOBSET_WORKER)
        .expect("worker-1");
    JOBSET
        .get_or_init(|| async {
            JobSetController::start(worker, &clusters().set().state_dir)
                .await
                .unwrap_or_else(|e| panic!("starting JobSet on {JOBSET_WORKER}: {e:#}"))
        })
        .await;
    let client = kit::client(worker).await;
    let ns = kit::namespace(&client, "jobset").await;
    let jobsets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &jobset_resource());
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    let name = "trio";
    jobsets
        .create(
            &PostParams::default(),
            &leader_and_workers(&ns, name, json!({})),
        )
        .await
        .expect("create JobSet");

    wait::until(
        format!("2 child Jobs and 4 Pods of JobSet {ns}/{name}"),
        TIMEOUT,
        || async {
            match (children(&jobs, name).await, children(&pods, name).await) {
                (Ok(j), Ok(p)) if j.len() == 2 && p.len() == 4 => Seen::Ready(()),
                (Ok(j), Ok(p)) => Seen::Waiting(format!("Jobs {j:?}, Pods {p:?}")),
                (Err(e), _) | (_, Err(e)) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await;
    wait::until(format!("JobSet {ns}/{name} Completed"), TIMEOUT, || async {
        match jobsets.get(name).await {
            Ok(set)
                if condition_true(&set.data, "Completed")
                    && set.data["status"]["terminalState"] == "Completed" =>
            {
                Seen::Ready(())
            }
            Ok(set) => Seen::Waiting(format!("status {}", set.data["status"])),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;

    jobsets
        .delete(name, &DeleteParams::background())
        .await
        .expect("delete JobSet");
    wait::until(
        format!("JobSet {ns}/{name}, its Jobs and its Pods gone"),
        TIMEOUT,
        || async {
            let set = jobsets.get_opt(name).await;
            match (
                set,
                children(&jobs, name).await,
                children(&pods, name).await,
            ) {
                (Ok(None), Ok(j), Ok(p)) if j.is_empty() && p.is_empty() => Seen::Ready(()),
                (Ok(set), Ok(j), Ok(p)) => Seen::Waiting(format!(
                    "JobSet there: {}, Jobs {j:?}, Pods {p:?}",
                    set.is_some()
                )),
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await;
}

#[tokio::test]
async fn kueue_queues_a_jobset_as_one_workload_with_a_pod_set_per_replicated_job() {
    let manager = clusters().manager();
    KUEUE
        .get_or_init(|| async {
            let jobset = Integrations { jobset: true };
            Kueue::start_with(
                manager,
                &clusters().set().state_dir,
                &Settings::default(),
                &jobset,
            )
            .await
            .unwrap_or_else(|e| panic!("starting Kueue with JobSet: {e:#}"))
        })
        .await;
    let client = kit::client(manager).await;
    let ns = kit::namespace(&client, "kueue-jobset").await;
    let queued = async {
        kueue_objects::flavor(&client).await?;
        kueue_objects::queue_named(&client, &ns, &ns, LOCAL_QUEUE, 4, &[]).await
    };
    queued.await.unwrap_or_else(|e| panic!("{e:#}"));
    let jobsets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &jobset_resource());
    let name = "queued";
    let labels = json!({QUEUE_NAME: LOCAL_QUEUE});
    jobsets
        .create(
            &PostParams::default(),
            &leader_and_workers(&ns, name, labels),
        )
        .await
        .expect("create JobSet");

    let workloads = kueue_objects::api(&client, "Workload", Some(&ns));
    let pod_sets = wait::until(
        format!("a Workload owned by JobSet {ns}/{name}"),
        TIMEOUT,
        || async {
            let list = match workloads.list(&ListParams::default()).await {
                Ok(list) => list,
                Err(e) => return Seen::Waiting(e.to_string()),
            };
            let owned = list.items.into_iter().find(|w| {
                w.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.kind == "JobSet" && o.name == name)
            });
            match owned {
                Some(w) => Seen::Ready(w.data["spec"]["podSets"].clone()),
                None => Seen::Waiting("no Workload yet".into()),
            }
        },
    )
    .await;
    let sets: Vec<(String, i64)> = pod_sets
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let name = s["name"].as_str().unwrap_or_default().to_string();
            (name, s["count"].as_i64().unwrap_or_default())
        })
        .collect();
    assert_eq!(
        sets,
        [("leader".to_string(), 1), ("workers".to_string(), 3)],
        "one pod set per replicated Job, counted in Pods: {pod_sets}"
    );
}
