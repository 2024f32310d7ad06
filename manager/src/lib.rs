//! jobrelay manager: runs in the manager cluster, watches Jobs managed by
//! `jobrelay.dev/manager`, serves the `Relay` gRPC service that worker agents
//! dial, and writes mirror status back.

pub mod agent_certificates;
pub mod caches;
pub mod certificate_pin;
pub mod cli;
pub mod cluster_status;
pub mod config;
pub mod crds;
pub mod error;
pub mod events;
pub mod field_manager;
pub mod fleet;
pub mod fleet_views;
pub mod instance;
pub mod job_changes;
pub mod job_controllers;
pub mod job_life;
pub mod job_writes;
pub mod kueue;
pub mod leader;
pub mod lost;
pub mod metrics;
pub mod mirror;
pub mod outbox;
pub mod pace;
pub mod placement;
pub mod reconcile;
pub mod registry;
pub mod retention;
pub mod retries;
pub mod session;
pub mod startup;
pub mod status;
pub mod status_queue;
pub mod status_sync;
pub mod superseded;
pub mod webhook;
pub mod worker_cluster;
pub mod worker_cluster_set;

use crate::cli::{Cli, Command};
pub use crate::error::Error;

/// Runs what the command line asks for.
pub async fn main(cli: Cli) -> Result<(), Error> {
    match cli.command {
        Some(Command::Crd) => {
            print!("{}", crds::all());
            Ok(())
        }
        None => startup::run(cli.run).await,
    }
}
