//! jobrelay manager: runs in the manager cluster, watches Jobs managed by
//! `jobrelay.dev/manager`, serves the `Relay` gRPC service that worker agents
//! dial, and writes mirror status back.

pub mod caches;
pub mod cli;
pub mod clusters;
pub mod condition;
pub mod config;
pub mod controller;
pub mod deletion_turns;
pub mod error;
pub mod field_manager;
pub mod fleet;
pub mod instance;
pub mod job;
pub mod kinds;
pub mod kueue;
pub mod leader;
pub mod log_streams;
pub mod mirror;
pub mod outbox;
pub mod reason;
pub mod session;
pub mod startup;
pub mod status_copy;
pub mod telemetry;
pub mod visibility;
pub mod webhook;

use crate::cli::{Cli, Command};
pub use crate::error::Error;

/// Runs what the command line asks for.
pub async fn main(cli: Cli) -> Result<(), Error> {
    match cli.command {
        Some(Command::Crd) => {
            print!("{}", clusters::crds::all());
            Ok(())
        }
        None => startup::run(cli.run).await,
    }
}
