//! `cargo xtask demo`: the main job on local clusters. One manager and two
//! worker control planes, Kueue on the manager, the JobSet controller on
//! worker-1, `jobrelay-manager` and an agent per worker, and a handful of
//! Jobs — short, long, parallel, failing, one deleted while it runs, and
//! three queued in Kueue with quota for two — and one JobSet among them,
//! shown live, then a leak report counted on every worker.

mod jobset;
mod workers;

use workers::Workers;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use jobrelay_kinds::jobset::JobSet;
use jobrelay_proto::wire::{CLUSTER_KEY, MANAGED_BY, REMOTE_CLEANUP_FINALIZER};
use jobrelay_testbed::cluster::supervisor::Supervisor;
use jobrelay_testbed::controllers::kueue::{Integrations, Kueue};
use jobrelay_testbed::go::controlplane::seconds;
use jobrelay_testbed::go::upstream;
use jobrelay_testbed::kit;
use jobrelay_testbed::objects::fixtures::TestJob;
use jobrelay_testbed::objects::kueue_objects;
use jobrelay_testbed::objects::leaks::leaks;
use jobrelay_testbed::relay::Relay;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use crate::{log, supervisor_command, workspace_root};

const NAMESPACE: &str = "demo";
/// The demo's AdmissionCheck (answered by jobrelay) and ClusterQueue.
const CHECK: &str = "jobrelay";
/// Label Kueue reads a Job's LocalQueue from.
const QUEUE_NAME: &str = "kueue.x-k8s.io/queue-name";
/// The demo stops waiting for its Jobs after this long.
const DEADLINE: Duration = Duration::from_secs(180);

#[derive(clap::Args)]
pub struct Args {
    /// Keep the clusters and jobrelay running until Ctrl-C.
    #[arg(long)]
    keep: bool,
}

/// The demo's Jobs, and when (seconds after start) the one marked so is deleted.
fn workload() -> Vec<(TestJob, Option<u64>)> {
    let job = |name: &str| TestJob::new(NAMESPACE, name).managed_by(MANAGED_BY);
    vec![
        (job("short").run_for("3s").terminate_after("1s"), None),
        (
            job("long")
                .run_for("20s")
                .parallelism(2, 2)
                .terminate_after("2s"),
            None,
        ),
        (job("wide").run_for("2s").parallelism(3, 6), None),
        (job("failing").run_for("4s").failing(), None),
        (
            job("pinned").run_for("6s").label(CLUSTER_KEY, "worker-2"),
            None,
        ),
        (
            job("doomed")
                .run_for("1h")
                .parallelism(2, 2)
                .terminate_after("4s"),
            Some(8),
        ),
    ]
    .into_iter()
    .chain((1..=3).map(|i| {
        let queued = job(&format!("queued-{i}"))
            .label(QUEUE_NAME, kueue_objects::LOCAL_QUEUE)
            .cpu("1")
            .run_for("5s")
            .terminate_after("1s");
        (queued, None)
    }))
    .collect()
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    upstream::ensure_built(&mut log)?;
    let started = Instant::now();
    let state_dir = workspace_root()
        .join("target")
        .join("jobrelay")
        .join(format!("demo-{}", std::process::id()));
    let supervisor = Supervisor::start(supervisor_command()?, &state_dir, 2, false)?;
    log(&format!(
        "1 manager + 2 worker clusters up in {}",
        seconds(started.elapsed())
    ));
    let set = supervisor.set().clone();
    // Kueue first: the manager answers its AdmissionChecks when it finds it.
    // With its JobSet integration it installs the JobSet CRD, which the
    // manager looks for when it starts; so does each agent on its worker.
    let integrations = Integrations { jobset: true };
    let kueue = Kueue::start_with(
        set.manager(),
        &set.state_dir,
        &Default::default(),
        &integrations,
    )
    .await?;
    log("Kueue ready on the manager cluster");
    let jobset_controller = jobset::start_controller(&set).await?;
    log(&format!(
        "the JobSet controller ready on {}",
        jobset::WORKER
    ));
    let relay = Relay::start(&set).await?;
    log(&format!(
        "jobrelay-manager and 2 agents connected; logs in {}/logs",
        set.state_dir.display()
    ));

    let manager = set.manager().client().await?;
    for cluster in &set.clusters {
        kit::create_namespace(&cluster.client().await?, NAMESPACE).await;
    }
    kueue_objects::admission_check(&manager, CHECK, None).await?;
    kueue_objects::queue(&manager, NAMESPACE, NAMESPACE, 2, CHECK).await?;
    log("ClusterQueue demo: 2 CPUs, behind AdmissionCheck jobrelay");
    let jobs: Api<Job> = Api::namespaced(manager.clone(), NAMESPACE);
    let jobsets: Api<JobSet> = Api::namespaced(manager.clone(), NAMESPACE);
    jobsets
        .create(&PostParams::default(), &jobset::jobset()?)
        .await?;
    let mut deletions = BTreeMap::new();
    for (job, delete_after) in workload() {
        let created = jobs.create(&PostParams::default(), &job.build()).await?;
        if let Some(after) = delete_after {
            deletions.insert(created.name_any(), Duration::from_secs(after));
        }
    }

    let workers = Workers::connect(&set).await?;
    let shown = Instant::now();
    let mut refresh = tokio::time::interval(Duration::from_secs(1));
    loop {
        refresh.tick().await;
        for (name, after) in &deletions {
            if shown.elapsed() >= *after
                && jobs
                    .get_opt(name)
                    .await?
                    .is_some_and(|j| j.metadata.deletion_timestamp.is_none())
            {
                jobs.delete(name, &DeleteParams::default()).await?;
            }
        }
        let queues = kueue_objects::workload_states(&manager, NAMESPACE).await?;
        let mut rows = table(&jobs, &workers, &queues).await?;
        rows.push(jobset::row(&jobsets, &workers).await?);
        draw(&rows, shown.elapsed());
        if rows.iter().all(|r| r.settled) || shown.elapsed() > DEADLINE {
            break;
        }
    }

    println!();
    println!(
        "Deleting the finished manager Jobs and JobSet, then counting what is left on the workers…"
    );
    for job in jobs.list(&ListParams::default()).await? {
        jobs.delete(&job.name_any(), &DeleteParams::default())
            .await?;
    }
    if jobsets.get_opt(jobset::NAME).await?.is_some() {
        jobsets
            .delete(jobset::NAME, &DeleteParams::default())
            .await?;
    }
    jobrelay_testbed::wait::try_until(
        "every demo Job and the JobSet gone from the manager",
        Duration::from_secs(60),
        || async {
            let left = match (
                jobs.list(&ListParams::default()).await,
                jobsets.get_opt(jobset::NAME).await,
            ) {
                (Ok(list), Ok(jobset)) => list.items.len() + usize::from(jobset.is_some()),
                (Err(e), _) | (_, Err(e)) => {
                    return jobrelay_testbed::wait::Seen::Waiting(e.to_string());
                }
            };
            match left {
                0 => jobrelay_testbed::wait::Seen::Ready(()),
                n => jobrelay_testbed::wait::Seen::Waiting(format!("{n} left")),
            }
        },
    )
    .await?;
    let found = leaks(&set, &relay.origin, NAMESPACE).await?;
    let leaked = |kind| found.iter().filter(|l| l.kind == kind).count();
    println!(
        "Leak report over {} workers: {} leaked JobSets, {} leaked Jobs, {} leaked Pods",
        set.workers().len(),
        leaked("JobSet"),
        leaked("Job"),
        leaked("Pod")
    );
    for leak in &found {
        println!("  {leak}");
    }
    if args.keep {
        println!("\n{}", set.export_lines());
        log("clusters and jobrelay kept; Ctrl-C stops them");
        tokio::signal::ctrl_c().await?;
    }
    drop(relay);
    jobset_controller.kill();
    kueue.kill();
    supervisor.stop()?;
    anyhow::ensure!(
        found.is_empty(),
        "the demo left {} objects behind",
        found.len()
    );
    Ok(())
}

struct Row {
    name: String,
    queue: String,
    cluster: String,
    remote: String,
    pods: String,
    manager: String,
    held: bool,
    settled: bool,
}

impl Row {
    /// The row of an object deleted from the manager.
    fn deleted(name: String) -> Row {
        Row {
            name,
            queue: "-".into(),
            cluster: "-".into(),
            remote: "-".into(),
            pods: "-".into(),
            manager: "deleted".into(),
            held: false,
            settled: true,
        }
    }
}

async fn table(
    jobs: &Api<Job>,
    workers: &Workers,
    queues: &BTreeMap<String, &'static str>,
) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for (job, _) in workload() {
        let name = job.build().name_any();
        let queue = queues.get(&name).copied().unwrap_or("-").to_string();
        let Some(manager_job) = jobs.get_opt(&name).await? else {
            rows.push(Row {
                queue,
                ..Row::deleted(name)
            });
            continue;
        };
        let cluster = manager_job
            .annotations()
            .get(CLUSTER_KEY)
            .cloned()
            .unwrap_or_else(|| "-".into());
        let uid = manager_job.uid().unwrap_or_default();
        let (remote, pods) = if cluster == "-" {
            ("-".into(), "-".into())
        } else {
            workers.remote(&cluster, &name, &uid).await?
        };
        let held = manager_job
            .finalizers()
            .iter()
            .any(|f| f == REMOTE_CLEANUP_FINALIZER);
        let finished = describe(&manager_job);
        let settled = !held && (finished.starts_with("Complete") || finished.starts_with("Failed"));
        let manager = if manager_job.metadata.deletion_timestamp.is_some() {
            format!("deleting, {finished}")
        } else {
            finished
        };
        rows.push(Row {
            name,
            queue,
            cluster,
            remote,
            pods,
            manager,
            held,
            settled,
        });
    }
    Ok(rows)
}

fn describe(job: &Job) -> String {
    let status = job.status.clone().unwrap_or_default();
    let condition = status
        .conditions
        .iter()
        .flatten()
        .filter(|c| c.status == "True" && (c.type_ == "Complete" || c.type_ == "Failed"))
        .map(|c| c.type_.clone())
        .next_back();
    let counts = format!(
        "active {} ok {} failed {}",
        status.active.unwrap_or(0),
        status.succeeded.unwrap_or(0),
        status.failed.unwrap_or(0)
    );
    let suspended = job.spec.as_ref().and_then(|s| s.suspend) == Some(true);
    match condition {
        Some(condition) => format!("{condition} ({counts})"),
        None if suspended => format!("Suspended ({counts})"),
        None => format!("Running ({counts})"),
    }
}

fn draw(rows: &[Row], elapsed: Duration) {
    if std::io::stdout().is_terminal() {
        print!("\x1b[2J\x1b[H");
    } else {
        println!();
    }
    println!(
        "jobrelay demo — {} since the Jobs were created",
        seconds(elapsed)
    );
    let header = [
        "JOB",
        "KUEUE",
        "CLUSTER",
        "ON THE WORKER",
        "WORKER PODS",
        "ON THE MANAGER",
        "FINALIZER",
    ];
    let [job, queue, cluster, worker, pods, manager, finalizer] = header;
    println!("{job:<9} {queue:<9} {cluster:<9} {worker:<36} {pods:<18} {manager:<46} {finalizer}");
    for r in rows {
        let finalizer = if r.held { "held" } else { "released" };
        println!(
            "{:<9} {:<9} {:<9} {:<36} {:<18} {:<46} {}",
            r.name, r.queue, r.cluster, r.remote, r.pods, r.manager, finalizer
        );
    }
    println!("(* a JobSet: one leader and three worker Pods, relayed as one)");
}
