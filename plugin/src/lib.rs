//! `kubectl jobrelay`: what a user with credentials for the manager cluster
//! alone can learn of the Jobs jobrelay relays — where each runs, how its
//! mirror stands, why its Pods wait or failed, its Kueue admission, its
//! Events, the worker clusters — and the logs of its Pods on the worker,
//! through the manager's logs API.
//!
//! [`run`] does it all, so end-to-end tests call it in-process; the binary
//! `kubectl-jobrelay` only calls it. The decisions are pure ([`view`],
//! [`render`]); [`read`] talks to the API server.

pub mod cli;
mod commands;
pub mod errors;
pub mod logs_request;
pub mod read;
pub mod render;
pub mod view;

use std::io::Write;

use clap::Parser;
use clap::error::ErrorKind;

pub use errors::{ApiError, Usage};

/// Runs `kubectl jobrelay` with `args` (the arguments after the program's
/// name, e.g. `["status", "-A"]`), printing to `out`. `--help` and
/// `--version` print there too. A refused command line is a [`Usage`]
/// error; a request the API server refused, an [`ApiError`] whose message
/// is the server's.
pub async fn run(args: Vec<String>, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let argv = std::iter::once("kubectl-jobrelay".to_string()).chain(args);
    let cli = match cli::Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(error)
            if matches!(
                error.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) =>
        {
            write!(out, "{}", error.render())?;
            return Ok(());
        }
        Err(error) => return Err(Usage(error.render().to_string()).into()),
    };
    commands::run(cli, out).await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn run_with(args: &[&str]) -> (anyhow::Result<()>, String) {
        let mut out = Vec::new();
        let result = run(args.iter().map(|a| a.to_string()).collect(), &mut out).await;
        (result, String::from_utf8(out).expect("UTF-8"))
    }

    #[tokio::test]
    async fn help_is_printed_and_a_bad_command_line_is_a_usage_error() {
        let (result, text) = run_with(&["--help"]).await;
        assert!(result.is_ok());
        for subcommand in ["status", "describe", "clusters", "logs"] {
            assert!(text.contains(subcommand), "{text}");
        }
        let (result, _) = run_with(&["frobnicate"]).await;
        let error = result.expect_err("refused");
        assert!(error.downcast_ref::<Usage>().is_some(), "{error}");
        let (result, _) = run_with(&["describe", "train", "-A"]).await;
        assert!(
            result
                .expect_err("refused")
                .downcast_ref::<Usage>()
                .is_some()
        );
    }
}
