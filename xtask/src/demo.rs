//! `cargo xtask demo`: builds what is needed, starts a manager and two worker
//! clusters, and shows each of them healthy by running a real Job on it.

use std::time::{Duration, Instant};

use jobrelay_e2e::cluster::{ClusterInfo, NODE};
use jobrelay_e2e::controlplane::{self, seconds};
use jobrelay_e2e::fixtures::TestJob;
use jobrelay_e2e::kit;
use jobrelay_e2e::supervisor::Supervisor;
use jobrelay_e2e::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};

use crate::{log, supervisor_command, workspace_root};

#[derive(clap::Args)]
pub struct Args {
    /// Number of worker clusters.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Keep the clusters running until Ctrl-C.
    #[arg(long)]
    keep: bool,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    controlplane::ensure_built(&mut log)?;
    let started = Instant::now();
    let state_dir = workspace_root()
        .join("target")
        .join("jobrelay")
        .join(format!("demo-{}", std::process::id()));
    let supervisor = Supervisor::start(supervisor_command()?, &state_dir, args.workers, false)?;
    log(&format!(
        "1 manager + {} worker cluster(s) up in {}",
        args.workers,
        seconds(started.elapsed())
    ));

    let mut rows = Vec::new();
    for cluster in &supervisor.set().clusters {
        rows.push(health(cluster).await?);
    }
    println!();
    println!("CLUSTER    API SERVER               VERSION   NODE               PROBE JOB");
    for row in &rows {
        println!("{row}");
    }
    println!();
    println!("Every cluster runs the real kube-apiserver, controller manager (Job, CronJob and");
    println!("garbage-collector controllers) and scheduler, with kwok playing kubelet.");
    println!("Next: the jobrelay manager and agents relaying Jobs between them.");
    if args.keep {
        println!();
        println!("{}", supervisor.set().export_lines());
        log("clusters kept; Ctrl-C stops them");
        tokio::signal::ctrl_c().await?;
    }
    supervisor.stop()
}

async fn health(cluster: &ClusterInfo) -> anyhow::Result<String> {
    let client = cluster.client().await?;
    let version = client.apiserver_version().await?.git_version;
    let node = Api::<Node>::all(client.clone()).get(NODE).await?;
    let ready = node
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let ns = kit::namespace(&client, "demo").await;
    let jobs: Api<Job> = Api::namespaced(client, &ns);
    jobs.create(&PostParams::default(), &TestJob::new(&ns, "probe").build())
        .await?;
    let started = Instant::now();
    wait::try_until(
        format!("probe Job on {} Complete", cluster.name),
        Duration::from_secs(60),
        || async {
            match jobs.get("probe").await {
                Ok(job) if job.status.as_ref().and_then(|s| s.succeeded) == Some(1) => {
                    Seen::Ready(())
                }
                Ok(job) => Seen::Waiting(format!("{:?}", job.status)),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await?;
    Ok(format!(
        "{:<10} {:<24} {:<9} {:<18} Complete in {}",
        cluster.name,
        cluster.server,
        version,
        format!("{NODE} {}", if ready { "Ready" } else { "NotReady" }),
        seconds(started.elapsed())
    ))
}
