//! jobrelay worker agent: runs in a worker cluster, dials the manager, applies
//! and deletes mirror Jobs, reports their status, and confirms every Pod gone.

mod cli;
mod config;
mod deletion_pace;
mod dial;
mod epoch;
mod error;
mod fence;
mod initial_list;
mod kinds;
mod logs;
mod lost;
mod metrics;
mod mirrors;
mod namespaces;
mod pod_summary;
mod report;
mod room;
mod scoped_watch;
mod session;
mod startup;
mod stuck_pods;
mod teardown;
mod terminated_pods;
mod unschedulable;
mod watched;
mod worker_events;

use std::time::Duration;

use jobrelay_process::{Shutdown, Tasks};
use tokio::sync::watch;
use tracing::info;

pub use crate::cli::Args;
/// How a manager is dialled and redialled, for a simulated agent's
/// sessions (`cargo xtask bench --clusters`).
pub use crate::dial::{Dial, Redial};
pub use crate::error::Error;
/// Which mirrors the orphan sweep finds, for its micro-benchmark.
pub use crate::mirrors::{HeldMirror, orphans};
/// How long a session's opening may take, for a simulated agent to match.
pub use crate::session::OPEN_TIMEOUT;

use crate::deletion_pace::DeletionPace;
use crate::metrics::Metrics;

/// How long the agent's tasks get to finish once the shutdown was requested.
const DRAIN_GRACE: Duration = Duration::from_secs(10);

/// Runs the agent until SIGINT or SIGTERM.
pub async fn run(args: Args) -> Result<(), Error> {
    startup::check(&args)?;
    let kube_api_limit = args.process.kube_api.rate_limit()?;
    let dial = startup::dial(&args)?;
    let tasks = Tasks::new(&Shutdown::on_signals());
    let shutdown = tasks.shutdown();
    let (readiness, health) =
        jobrelay_process::health::serve(args.process.health_listen, shutdown.clone()).await?;
    tasks.spawn_to_end(health);
    let metrics = std::sync::Arc::new(Metrics::new());
    let mut metrics_server = startup::serve_metrics(&args, &metrics, &tasks).await?;
    let (config, policy) = startup::read_config(&args)?;
    let user_agent = format!(
        "jobrelay-agent/{} ({})",
        env!("CARGO_PKG_VERSION"),
        args.cluster
    );
    let client = jobrelay_process::kube_client::client(
        args.process.kubeconfig.as_deref(),
        kube_api_limit,
        &user_agent,
    )
    .await?;
    let deletions = DeletionPace::per_second(args.deletions_per_second);
    startup::clean_terminated_pods(&client, config, &args.origin, &deletions, &tasks).await?;
    let served = startup::served_kinds(&client).await?;
    let (watched, watching) = startup::watch_mirrors(&client, &args.origin, policy, &served);
    let room = startup::watch_room(&args, &client, &metrics, &tasks);
    let warnings = startup::watch_warnings(&args, &client, &watched, &tasks);
    let (connected, link_up) = watch::channel(false);
    startup::follow_link(&metrics, link_up, client.clone(), readiness, &tasks);
    let (stuck_pod_timeout, held) =
        startup::sweep_stuck_pods(&client, &watched, &deletions, &tasks);
    let mut agent = startup::agent(&args, dial, connected, client, deletions, watched, &metrics)
        .reporting_room(room)
        .telling_worker_events(warnings)
        .telling_stuck_pods(stuck_pod_timeout);
    agent.mirrors.watch_held_pods(held);
    info!(cluster = %args.cluster, manager = %args.manager_url.join(","), origin = %args.origin, "agent starting");
    let metrics_failed =
        jobrelay_process::Error::listen("the metrics endpoint", args.metrics_listen);
    let ended = tokio::select! {
        () = agent.run() => Ok(()),
        () = watching => Ok(()),
        () = shutdown.requested() => {
            info!("stopping");
            Ok(())
        }
        served = &mut metrics_server => match served {
            Ok(Err(error)) => Err(metrics_failed(error).into()),
            _ => Ok(()),
        },
    };
    tasks.drain(DRAIN_GRACE).await;
    ended
}
