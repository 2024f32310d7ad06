//! An upgrade and a rollback as `docs/install.md` says to do them, on real
//! nodes, while Jobs run: the previous release (a minor version older,
//! built from a pinned commit, its CRDs in the chart's `crds/`) installed
//! by its own chart and images; a burst of Jobs and a steady flow of them;
//! the manager upgraded to this tree (the CRDs handed to the release first,
//! by the guide's block), then the agents; then the agents rolled back,
//! then the manager, by the guide's blocks. After each step the worker is
//! connected by an agent of the version it should have, and a
//! WorkerClusterSet written under the old CRD still reads. In the end every
//! Job ran, was dispatched once and released only after its worker reported
//! its Pods gone, and the leak audit is at zero.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use jobrelay_e2e::deployed::{
    TIMEOUT, create, dispatched_once_and_released_after_their_pods, finish, keep_creating,
    namespace, wait_outcome,
};
use jobrelay_manager::clusters::worker_cluster::WorkerCluster;
use jobrelay_manager::clusters::worker_cluster_set::WorkerClusterSet;
use jobrelay_proto::wire::MANAGED_BY;
use jobrelay_testbed::cluster::ClusterInfo;
use jobrelay_testbed::deploy::guide::{self, Step, UPGRADE_STEPS};
use jobrelay_testbed::deploy::release::{self, Release};
use jobrelay_testbed::deploy::shell::Shell;
use jobrelay_testbed::deploy::{Installed, NAMESPACE, helm_in, load};
use jobrelay_testbed::kit::{self, ClusterOptions};
use jobrelay_testbed::objects::fixtures::TestJob;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};

/// How many Jobs start at once before the upgrade, each running through it.
const BURST: usize = 12;
/// The column this tree's WorkerCluster CRD adds: how a test tells the
/// chart's CRD from the previous release's.
const NEW_COLUMN: &str = "Agent-Version";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upgrade_and_a_rollback_in_the_documented_order_lose_no_job() {
    let clusters = kit::clusters_with(ClusterOptions {
        workers: 1,
        real_nodes: ["manager", "manager", "manager", "worker-1"]
            .map(String::from)
            .to_vec(),
    });
    let (manager, worker) = (clusters.manager(), &clusters.workers()[0]);
    let previous = release::previous().unwrap_or_else(|e| panic!("the previous release: {e:#}"));
    let current = release::current().unwrap_or_else(|e| panic!("this tree's release: {e:#}"));
    assert_ne!(
        previous.images.agent.tag(),
        current.images.agent.tag(),
        "the previous release has a version of its own"
    );
    load(clusters, &current).unwrap_or_else(|e| panic!("loading {}: {e:#}", current.name));
    let steps = upgrade_steps(Shell::new(&clusters.set().state_dir, manager, worker));

    let mut timings = Vec::new();
    let mut step = Instant::now();
    let installed = Installed::install(clusters, previous.clone())
        .await
        .unwrap_or_else(|e| panic!("installing {}: {e:#}", previous.name));
    wait_agent(manager, worker, &previous).await;
    timings.push(("install", step.elapsed()));
    let sets: Api<WorkerClusterSet> = Api::all(kit::client(manager).await);
    let set: WorkerClusterSet = serde_json::from_value(serde_json::json!({
        "apiVersion": "jobrelay.dev/v1alpha1",
        "kind": "WorkerClusterSet",
        "metadata": {"name": "written-before-the-upgrade"},
        "spec": {"clusters": [worker.name], "placement": "InOrder"},
    }))
    .expect("a WorkerClusterSet");
    sets.create(&PostParams::default(), &set)
        .await
        .expect("a WorkerClusterSet under the previous release's CRD");

    let (ns, jobs) = namespace(&installed, "deploy-upgrade").await;
    let mut names = Vec::new();
    for index in 0..BURST {
        let name = format!("burst-{index}");
        let job = TestJob::new(&ns, &name)
            .managed_by(MANAGED_BY)
            .run_for("25s")
            .build();
        create(&jobs, job).await;
        names.push(name);
    }
    let flowing = Arc::new(AtomicBool::new(true));
    let flow = tokio::spawn(keep_creating(jobs.clone(), ns.clone(), flowing.clone()));

    // Manager first: the CRDs handed to the release, then the upgrade.
    step = Instant::now();
    steps.run("crds-to-the-release").await;
    helm_in(manager, &installed.manager_args("upgrade", &current, &[]))
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    wait_manager(manager, &current).await;
    wait_agent(manager, worker, &previous).await;
    timings.push(("manager upgraded", step.elapsed()));
    assert_crd_is_the_charts(manager).await;
    sets.get(&set_name(&set))
        .await
        .expect("the WorkerClusterSet written before the upgrade reads");

    // Then the agents.
    step = Instant::now();
    helm_in(
        worker,
        &installed.agent_args(&worker.name, "upgrade", &current, &[]),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    wait_agent(manager, worker, &current).await;
    timings.push(("agents upgraded", step.elapsed()));

    // Rollback: the agents first, then the manager.
    step = Instant::now();
    steps.run("rollback-agents").await;
    wait_agent(manager, worker, &previous).await;
    timings.push(("agents rolled back", step.elapsed()));
    step = Instant::now();
    steps.run("rollback-manager").await;
    wait_manager(manager, &previous).await;
    wait_agent(manager, worker, &previous).await;
    timings.push(("manager rolled back", step.elapsed()));
    // The CRDs stay as the newer chart left them, and still read.
    assert_crd_is_the_charts(manager).await;
    sets.get(&set_name(&set))
        .await
        .expect("the WorkerClusterSet reads after the rollback");

    flowing.store(false, Ordering::SeqCst);
    let flowed = flow.await.expect("the Job flow");
    assert!(
        flowed.len() >= 5,
        "Jobs were created throughout: {flowed:?}"
    );
    names.extend(flowed);
    for name in &names {
        wait_outcome(&jobs, name, "Complete").await;
    }
    finish(&installed, &ns, &jobs).await;
    dispatched_once_and_released_after_their_pods(&installed, &ns, &names).await;
    eprintln!(
        "{} → {} → {}; {} Jobs; {}",
        previous.name,
        current.name,
        previous.name,
        names.len(),
        timings
            .iter()
            .map(|(what, took)| format!("{what} in {:.1} s", took.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

/// The guide's upgrade and rollback blocks, and where they run.
struct Steps {
    shell: Shell,
    read: Vec<Step>,
}

fn upgrade_steps(shell: Shell) -> Steps {
    let text =
        std::fs::read_to_string(shell.root().join("docs/install.md")).expect("docs/install.md");
    let read = guide::parse(&text).unwrap_or_else(|e| panic!("docs/install.md: {e}"));
    for name in UPGRADE_STEPS {
        assert!(
            guide::named(&read.steps, name).is_some(),
            "docs/install.md marks no `step {name}`"
        );
    }
    Steps {
        shell,
        read: read.steps,
    }
}

impl Steps {
    async fn run(&self, name: &str) {
        let step = guide::named(&self.read, name).expect("a step checked at the start");
        self.shell.run(step).await;
    }
}

fn set_name(set: &WorkerClusterSet) -> String {
    set.metadata.name.clone().unwrap_or_default()
}

/// Waits until the worker is connected by an agent of `release`'s version.
async fn wait_agent(manager: &ClusterInfo, worker: &ClusterInfo, release: &Release) {
    let api: Api<WorkerCluster> = Api::all(kit::client(manager).await);
    let version = release.images.agent.tag();
    wait::until(
        format!("{} connected by agent {version}", worker.name),
        TIMEOUT,
        || async {
            let cluster = api.get(&worker.name).await;
            let state = cluster.as_ref().map(|c| {
                (
                    c.condition("Connected").map(|c| c.status.clone()),
                    c.status.as_ref().and_then(|s| s.agent_version.clone()),
                )
            });
            match &state {
                Ok((Some(connected), Some(agent))) if connected == "True" && agent == version => {
                    Seen::Ready(())
                }
                _ => Seen::Waiting(format!("(Connected, agentVersion): {state:?}")),
            }
        },
    )
    .await;
}

/// Waits until the manager's Deployment runs `release`'s image on every
/// replica it wants.
async fn wait_manager(manager: &ClusterInfo, release: &Release) {
    let deployments: Api<Deployment> = Api::namespaced(kit::client(manager).await, NAMESPACE);
    let image = &release.images.manager.reference;
    wait::until(
        format!("the manager rolled out as {image}"),
        TIMEOUT,
        || async {
            let deployment = deployments.get("jobrelay-manager").await;
            let state = deployment.as_ref().map(|d| {
                let template = d
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.spec.as_ref())
                    .and_then(|s| s.containers.first())
                    .and_then(|c| c.image.clone());
                let status = d.status.clone().unwrap_or_default();
                let observed = status.observed_generation == d.metadata.generation;
                let replicas = (status.updated_replicas, status.available_replicas);
                (template, observed, replicas, status.replicas)
            });
            match &state {
                Ok((Some(running), true, (updated, available), all))
                    if running == image && updated == all && available == all =>
                {
                    Seen::Ready(())
                }
                _ => Seen::Waiting(format!(
                    "(image, observed, (updated, available), replicas): {state:?}"
                )),
            }
        },
    )
    .await;
}

/// The WorkerCluster CRD is the one this tree's chart renders, handed to
/// the manager's release and kept (as it is when the release rolls back to
/// a chart that does not render it).
async fn assert_crd_is_the_charts(manager: &ClusterInfo) {
    let crds: Api<CustomResourceDefinition> = Api::all(kit::client(manager).await);
    let crd = crds
        .get("workerclusters.jobrelay.dev")
        .await
        .expect("the WorkerCluster CRD");
    let columns: Vec<String> = crd
        .spec
        .versions
        .iter()
        .flat_map(|v| v.additional_printer_columns.iter().flatten())
        .map(|c| c.name.clone())
        .collect();
    assert!(
        columns.iter().any(|c| c == NEW_COLUMN),
        "the chart upgraded the CRD: columns {columns:?}"
    );
    let annotations = crd.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations
            .get("helm.sh/resource-policy")
            .map(String::as_str),
        Some("keep"),
        "{annotations:?}"
    );
    assert_eq!(
        annotations
            .get("meta.helm.sh/release-name")
            .map(String::as_str),
        Some("jobrelay"),
        "{annotations:?}"
    );
}
