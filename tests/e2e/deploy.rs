//! jobrelay as a platform team runs it: `cargo xtask image`'s images on
//! real nodes, the chart installed by helm in the manager cluster and in
//! each worker, the Pods running with the chart's ServiceAccounts, RBAC,
//! args, env and mounts. A Job is dispatched, reports status and leaves
//! nothing when deleted; one runs as real containers on a worker's real
//! node; one queued in Kueue is admitted through jobrelay's AdmissionCheck
//! and runs, and one with only the queue label is given jobrelay's
//! `managedBy` by the chart's webhook (its certificate the manager's own); a mirror suspended after it started is suspended on its worker
//! (the agent's `jobs/status` permission) and resumed; a mirror lost behind
//! jobrelay's back is re-run; the two manager replicas roll and drain
//! (`deploy/ha.rs`); the workers' namespace and pod-template policies
//! refuse what their owners do not allow (`deploy/policy.rs`); why Pods
//! wait or failed on a worker is shown on the manager Job
//! (`deploy/why.rs`), and its Pods' logs are read there through the
//! manager's aggregated API (`deploy/visibility.rs`). Each ends with the leak audit at zero, and no
//! jobrelay container logged a refusal by its API server.

#[path = "deploy/ha.rs"]
mod ha;
#[path = "deploy/policy.rs"]
mod policy;
#[path = "deploy/visibility.rs"]
mod visibility;
#[path = "deploy/why.rs"]
mod why;

use jobrelay_e2e::deployed::{
    TIMEOUT, create, finish, namespace, wait_connected, wait_outcome, worker,
};
use jobrelay_e2e::scenario::{has_condition, wait_given_managed_by};
use jobrelay_proto::wire::{CLUSTER_KEY, MANAGED_BY, ORIGIN_UID_LABEL, QUEUE_NAME_LABEL};
use jobrelay_testbed::cluster::node::WORKLOAD_IMAGE;
use jobrelay_testbed::controllers::kueue::{Kueue, Settings};
use jobrelay_testbed::deploy::release;
use jobrelay_testbed::deploy::{Installed, NAMESPACE};
use jobrelay_testbed::kit::{self, ClusterOptions};
use jobrelay_testbed::objects::fixtures::TestJob;
use jobrelay_testbed::objects::kueue_objects::{self, LOCAL_QUEUE};
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};

static INSTALLED: tokio::sync::OnceCell<Installed> = tokio::sync::OnceCell::const_new();
static KUEUE: tokio::sync::OnceCell<Kueue> = tokio::sync::OnceCell::const_new();
/// The AdmissionCheck the installed manager answers.
const CHECK: &str = "jobrelay";

/// The clusters, each with a real node (the manager's with three: two
/// replicas and room for a rollout's surge or a drained node's
/// replacement), and jobrelay installed by the chart (once per test
/// process).
async fn installed() -> &'static Installed {
    INSTALLED
        .get_or_init(|| async {
            let clusters = kit::clusters_with(ClusterOptions {
                workers: 2,
                real_nodes: ["manager", "manager", "manager", "worker-1", "worker-2"]
                    .map(String::from)
                    .to_vec(),
            });
            // Kueue runs on the manager cluster before jobrelay starts, so
            // the manager answers its AdmissionChecks from the first.
            KUEUE
                .get_or_init(|| async {
                    Kueue::start(
                        clusters.manager(),
                        &clusters.set().state_dir,
                        &Settings::default(),
                    )
                    .await
                    .unwrap_or_else(|e| panic!("starting Kueue: {e:#}"))
                })
                .await;
            let release = release::current().unwrap_or_else(|e| panic!("jobrelay's images: {e:#}"));
            let installed = Installed::install(clusters, release)
                .await
                .unwrap_or_else(|e| panic!("installing the chart: {e:#}"));
            wait_connected(clusters).await;
            installed
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_is_dispatched_reports_its_status_and_leaves_nothing_when_deleted() {
    let installed = installed().await;
    let (ns, jobs) = namespace(installed, "deploy-basic").await;
    let job = TestJob::new(&ns, "basic")
        .managed_by(MANAGED_BY)
        .run_for("2s")
        .build();
    create(&jobs, job).await;
    let done = wait_outcome(&jobs, "basic", "Complete").await;
    let status = done.status.clone().expect("a copied status");
    assert_eq!(status.succeeded, Some(1), "{status:?}");
    assert!(
        done.annotations().contains_key(CLUSTER_KEY),
        "the Job names its worker"
    );
    finish(installed, &ns, &jobs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_relayed_job_runs_as_real_containers_on_a_workers_real_node() {
    let installed = installed().await;
    let (ns, jobs) = namespace(installed, "deploy-real").await;
    let job = why::on_real_node(&ns, "real", WORKLOAD_IMAGE, &["-sleep=6s"], 0);
    let uid = create(&jobs, job).await;
    // The mirror's Pod runs on worker-1's real node, as a container (kwok
    // fakes no status there).
    let worker_1 = worker(installed, "worker-1");
    let node = worker_1
        .real_node()
        .expect("worker-1's real node")
        .name()
        .to_string();
    let pods: Api<Pod> = Api::namespaced(kit::client(worker_1).await, &ns);
    let selector = ListParams::default().labels(&format!("{ORIGIN_UID_LABEL}={uid}"));
    wait::until(format!("real's Pod running on {node}"), TIMEOUT, || async {
        let pods = pods.list(&selector).await.map(|l| l.items);
        let running = pods.as_ref().is_ok_and(|pods| {
            pods.iter().any(|p| {
                p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str())
                    && p.status
                        .as_ref()
                        .and_then(|s| s.container_statuses.as_ref())
                        .and_then(|c| c.first())
                        .is_some_and(|c| {
                            c.container_id.is_some()
                                && c.state
                                    .as_ref()
                                    .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
                        })
            })
        });
        match running {
            true => Seen::Ready(()),
            false => Seen::Waiting(format!(
                "{:?}",
                pods.map(|p| p.iter().map(|p| p.status.clone()).collect::<Vec<_>>())
            )),
        }
    })
    .await;
    let done = wait_outcome(&jobs, "real", "Complete").await;
    assert_eq!(done.status.and_then(|s| s.succeeded), Some(1));
    finish(installed, &ns, &jobs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_queued_in_kueue_is_admitted_through_jobrelays_check_and_runs() {
    let installed = installed().await;
    let (ns, jobs) = namespace(installed, "deploy-kueue").await;
    let client = kit::client(installed.clusters.manager()).await;
    let queued = async {
        kueue_objects::admission_check(&client, CHECK, None).await?;
        kueue_objects::queue(&client, &ns, &ns, 2, CHECK).await
    };
    queued.await.unwrap_or_else(|e| panic!("{e:#}"));
    let job = TestJob::new(&ns, "queued")
        .managed_by(MANAGED_BY)
        .label(QUEUE_NAME_LABEL, LOCAL_QUEUE)
        .cpu("1")
        .run_for("2s")
        .build();
    create(&jobs, job).await;
    wait_outcome(&jobs, "queued", "Complete").await;
    // Kueue admitted it once jobrelay's check said Ready.
    let workloads = kueue_objects::api(&client, "Workload", Some(&ns));
    let list = workloads
        .list(&ListParams::default())
        .await
        .expect("listing Workloads");
    let states: Vec<String> = list
        .iter()
        .flat_map(|w| {
            w.data["status"]["admissionChecks"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|c| c["name"] == CHECK)
        .map(|c| c["state"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(states, ["Ready"], "the Workload's jobrelay check: {list:?}");

    // The chart's admission webhook, called through its Service with the
    // certificate the manager keeps: a Job with only the queue label is
    // given jobrelay's managedBy and runs.
    let labelled = || {
        TestJob::new(&ns, "labelled")
            .label(QUEUE_NAME_LABEL, LOCAL_QUEUE)
            .cpu("1")
            .run_for("2s")
            .build()
    };
    wait_given_managed_by(&jobs, labelled, TIMEOUT).await;
    create(&jobs, labelled()).await;
    wait_outcome(&jobs, "labelled", "Complete").await;
    finish(installed, &ns, &jobs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mirror_suspended_after_it_started_is_suspended_on_its_worker_and_resumed() {
    let installed = installed().await;
    let (ns, jobs) = namespace(installed, "deploy-suspend").await;
    let job = TestJob::new(&ns, "pausable")
        .managed_by(MANAGED_BY)
        .run_for("15s")
        .build();
    let uid = create(&jobs, job).await;
    let worker_name = wait::until("pausable placed", TIMEOUT, || async {
        match jobs.get("pausable").await {
            Ok(job) => match job.annotations().get(CLUSTER_KEY) {
                Some(cluster) => Seen::Ready(cluster.clone()),
                None => Seen::Waiting("not placed yet".into()),
            },
            Err(error) => Seen::Waiting(error.to_string()),
        }
    })
    .await;
    let mirrors: Api<Job> =
        Api::namespaced(kit::client(worker(installed, &worker_name)).await, &ns);
    let started = |job: &Job| {
        job.status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .is_some()
    };
    wait::until("the mirror started", TIMEOUT, || async {
        match mirrors.get_opt("pausable").await {
            Ok(Some(mirror)) if started(&mirror) => Seen::Ready(()),
            other => Seen::Waiting(format!("{:?}", other.map(|m| m.map(|m| m.status)))),
        }
    })
    .await;
    let suspend = |on: bool| Patch::Merge(serde_json::json!({"spec": {"suspend": on}}));
    jobs.patch("pausable", &PatchParams::default(), &suspend(true))
        .await
        .expect("suspending the manager Job");
    // The agent clears the mirror's startTime (jobs/status), or the worker's
    // Job controller would never resume it.
    let pods: Api<Pod> = Api::namespaced(kit::client(worker(installed, &worker_name)).await, &ns);
    let selector = ListParams::default().labels(&format!("{ORIGIN_UID_LABEL}={uid}"));
    wait::until("the mirror suspended, its Pods gone", TIMEOUT, || async {
        let mirror = mirrors.get("pausable").await;
        let left = pods.list(&selector).await.map(|l| l.items.len());
        match (&mirror, &left) {
            (Ok(m), Ok(0))
                if m.spec.as_ref().and_then(|s| s.suspend) == Some(true) && !started(m) =>
            {
                Seen::Ready(())
            }
            _ => Seen::Waiting(format!("{:?}, Pods {left:?}", mirror.map(|m| m.status))),
        }
    })
    .await;
    jobs.patch("pausable", &PatchParams::default(), &suspend(false))
        .await
        .expect("resuming the manager Job");
    let done = wait_outcome(&jobs, "pausable", "Complete").await;
    assert!(has_condition(&done, "Complete"));
    finish(installed, &ns, &jobs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mirror_lost_behind_jobrelays_back_is_run_again() {
    let installed = installed().await;
    let (ns, jobs) = namespace(installed, "deploy-lost").await;
    let job = TestJob::new(&ns, "lost")
        .managed_by(MANAGED_BY)
        .run_for("20s")
        .build();
    create(&jobs, job).await;
    let (worker_name, first) = wait::until("lost's mirror", TIMEOUT, || async {
        let Ok(job) = jobs.get("lost").await else {
            return Seen::Waiting("no manager Job".into());
        };
        let Some(cluster) = job.annotations().get(CLUSTER_KEY).cloned() else {
            return Seen::Waiting("not placed yet".into());
        };
        let mirrors: Api<Job> =
            Api::namespaced(kit::client(worker(installed, &cluster)).await, &ns);
        match mirrors.get_opt("lost").await {
            Ok(Some(mirror)) => Seen::Ready((cluster, mirror.uid().unwrap_or_default())),
            other => Seen::Waiting(format!("{other:?}")),
        }
    })
    .await;
    let mirrors: Api<Job> =
        Api::namespaced(kit::client(worker(installed, &worker_name)).await, &ns);
    mirrors
        .delete("lost", &DeleteParams::background())
        .await
        .expect("deleting the mirror behind jobrelay's back");
    wait::until("a new mirror of lost", TIMEOUT, || async {
        match mirrors.get_opt("lost").await {
            Ok(Some(mirror)) if mirror.uid().as_deref() != Some(first.as_str()) => Seen::Ready(()),
            other => Seen::Waiting(format!("{:?}", other.map(|m| m.map(|m| m.uid())))),
        }
    })
    .await;
    wait_outcome(&jobs, "lost", "Complete").await;
    finish(installed, &ns, &jobs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_chart_runs_the_images_with_its_own_identities() {
    let installed = installed().await;
    // The Pods are the Deployments' own, on the real nodes, from the images.
    for (cluster, image) in std::iter::once((
        installed.clusters.manager(),
        &installed.release.images.manager,
    ))
    .chain(
        installed
            .clusters
            .workers()
            .iter()
            .map(|w| (w, &installed.release.images.agent)),
    ) {
        let pods: Api<Pod> = Api::namespaced(kit::client(cluster).await, NAMESPACE);
        // A Ready Pod of the Deployment's (the manager's replicas may be
        // rolling meanwhile, see `ha`).
        let pod = wait::until(
            format!("a Ready jobrelay Pod in {}", cluster.name),
            TIMEOUT,
            || async {
                let list = pods.list(&ListParams::default()).await.map(|l| l.items);
                let ready = list.as_ref().ok().and_then(|pods| {
                    pods.iter()
                        .find(|p| {
                            p.owner_references().iter().any(|o| o.kind == "ReplicaSet")
                                && p.metadata.deletion_timestamp.is_none()
                                && is_ready(p)
                        })
                        .cloned()
                });
                match ready {
                    Some(pod) => Seen::Ready(pod),
                    None => Seen::Waiting(format!(
                        "{:?}",
                        list.map(|l| l
                            .iter()
                            .map(|p| (p.name_any(), p.status.clone()))
                            .collect::<Vec<_>>())
                    )),
                }
            },
        )
        .await;
        let spec = pod.spec.as_ref().expect("a Pod spec");
        assert_eq!(
            spec.containers[0].image.as_deref(),
            Some(image.reference.as_str()),
            "{}",
            cluster.name
        );
        let node = spec.node_name.clone().unwrap_or_default();
        assert!(
            cluster.real_nodes.iter().any(|n| n.name() == node),
            "{} runs jobrelay on a real node, not {node:?}",
            cluster.name
        );
        assert!(
            spec.service_account_name
                .as_deref()
                .is_some_and(|a| a.starts_with("jobrelay-")),
            "{}: the chart's ServiceAccount, not default: {:?}",
            cluster.name,
            spec.service_account_name
        );
    }
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
