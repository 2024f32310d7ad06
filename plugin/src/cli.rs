//! The command line, as kubectl users expect it: kubectl's own flags for
//! where to look (`--kubeconfig`, `--context`, `-n`, `-A`, `-o`) before or
//! after a subcommand, and `logs` with `kubectl logs`'s flags. The
//! kubeconfig comes from `KUBECONFIG` (a list of files, merged) the way
//! kubectl reads it, so that variable is not one flag's default here.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// kubectl jobrelay: relayed Jobs, their mirrors on the worker clusters,
/// and the logs of their Pods there, read from the manager cluster alone.
#[derive(Debug, Parser)]
#[command(name = "kubectl-jobrelay", bin_name = "kubectl jobrelay", version)]
pub struct Cli {
    /// The kubeconfig file to use (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace (default: the context's, else `default`).
    #[arg(short = 'n', long, global = true, value_name = "NAME")]
    pub namespace: Option<String>,
    /// Every namespace (`status` without a Job).
    #[arg(short = 'A', long, global = true)]
    pub all_namespaces: bool,
    /// How to print: a table (default), `wide`, `json` or `yaml`.
    #[arg(short = 'o', long, global = true, value_enum, value_name = "FORMAT")]
    pub output: Option<Output>,
    #[command(subcommand)]
    pub command: Command,
}

/// How to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Wide,
    Json,
    Yaml,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// One row per relayed Job: its Kueue state, its cluster, its mirror
    /// there, why its Pods wait, its status and jobrelay's finalizer.
    Status {
        /// One Job (`train` or `job/train`); default: every relayed Job.
        job: Option<String>,
    },
    /// A relayed Job in full: its Kueue Workload, its mirror and what
    /// jobrelay recorded of it, its Pods' reasons, and its Events.
    Describe {
        /// `job/<name>` or `<name>`.
        job: String,
    },
    /// The WorkerClusters: whether their agents are connected, their
    /// mirrors and the room they reported.
    Clusters,
    /// The logs of a relayed Job's Pods on its worker, through the
    /// manager's logs API.
    Logs(LogsArgs),
}

/// `kubectl logs`'s flags, for a relayed Job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct LogsArgs {
    /// `job/<name>` or `<name>`.
    pub job: String,
    /// The container (default: the Pod's only or default container).
    #[arg(short = 'c', long)]
    pub container: Option<String>,
    /// One Pod of the Job, by its name on the worker (default: one the
    /// manager picks).
    #[arg(long, conflicts_with = "all_pods")]
    pub pod: Option<String>,
    /// Every Pod of the Job, each line prefixed with its Pod.
    #[arg(long)]
    pub all_pods: bool,
    /// Stream new lines as they are written.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// Only the last N lines (negative: all).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub tail: Option<i64>,
    /// Only lines newer than this, such as 30s, 5m or 1h.
    #[arg(long, value_name = "DURATION", value_parser = since)]
    pub since: Option<Duration>,
    /// The previous instance of the container, if it restarted.
    #[arg(short = 'p', long)]
    pub previous: bool,
    /// Each line prefixed with its timestamp (RFC 3339).
    #[arg(long)]
    pub timestamps: bool,
}

/// `--since`: a duration of at least a second.
fn since(text: &str) -> Result<Duration, String> {
    let duration = jobrelay_proto::duration::parse(text).map_err(|e| e.to_string())?;
    if duration.is_zero() {
        return Err(format!("{text:?} is no time; write 30s, 5m or 1h"));
    }
    Ok(duration)
}

/// The Job a `describe`, `status` or `logs` argument names: `job/<name>`
/// (also `jobs/`, `job.batch/`, `jobs.batch/`) or `<name>`.
pub fn job_name(target: &str) -> Result<&str, String> {
    let name = match target.split_once('/') {
        None => target,
        Some(("job" | "jobs" | "job.batch" | "jobs.batch", name)) => name,
        Some((kind, _)) => {
            return Err(format!(
                "{target}: jobrelay shows relayed Jobs, not {kind}; write job/<name> or <name>"
            ));
        }
    };
    if name.is_empty() || name.contains('/') {
        return Err(format!("{target}: write job/<name> or <name>"));
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("kubectl-jobrelay").chain(args.iter().copied()))
    }

    #[test]
    fn kubectls_flags_go_before_or_after_the_subcommand() {
        let cli =
            parse(&["-n", "ml", "status", "--context", "manager", "-o", "wide"]).expect("parses");
        assert_eq!(cli.namespace.as_deref(), Some("ml"));
        assert_eq!(cli.context.as_deref(), Some("manager"));
        assert_eq!(cli.output, Some(Output::Wide));
        assert!(matches!(cli.command, Command::Status { job: None }));
        let cli = parse(&["status", "-A", "--kubeconfig", "/tmp/kc"]).expect("parses");
        assert!(cli.all_namespaces);
        assert_eq!(cli.kubeconfig, Some(PathBuf::from("/tmp/kc")));
        assert!(parse(&["status", "-o", "table"]).is_err());
    }

    #[test]
    fn logs_takes_kubectl_logs_flags() {
        let cli = parse(&[
            "logs",
            "job/train",
            "-c",
            "main",
            "--all-pods",
            "-f",
            "--tail",
            "20",
            "--since",
            "5m",
            "-p",
            "--timestamps",
        ])
        .expect("parses");
        let Command::Logs(logs) = cli.command else {
            panic!("not logs: {:?}", cli.command);
        };
        assert_eq!(
            logs,
            LogsArgs {
                job: "job/train".into(),
                container: Some("main".into()),
                pod: None,
                all_pods: true,
                follow: true,
                tail: Some(20),
                since: Some(Duration::from_secs(300)),
                previous: true,
                timestamps: true,
            }
        );
        assert!(parse(&["logs", "train", "--pod", "p", "--all-pods"]).is_err());
        assert!(parse(&["logs", "train", "--tail", "-1"]).is_ok());
        for bad in ["0", "5", "soon", "-5m"] {
            assert!(parse(&["logs", "train", "--since", bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_job_is_named_as_kubectl_names_it() {
        assert_eq!(job_name("train"), Ok("train"));
        assert_eq!(job_name("job/train"), Ok("train"));
        assert_eq!(job_name("jobs.batch/train"), Ok("train"));
        assert!(job_name("pod/train").unwrap_err().contains("not pod"));
        assert!(job_name("job/").is_err());
        assert!(job_name("job/a/b").is_err());
    }
}
