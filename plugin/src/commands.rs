//! Each subcommand as a few named steps: read (`read`), make sense of it
//! (`view`), print (`render`).

use std::io::Write;

use k8s_openapi::jiff::Timestamp;

use crate::cli::{Cli, Command, LogsArgs, Output, job_name};
use crate::errors::Usage;
use crate::read::{self, connect::Connection};
use crate::render::{self, status::Columns};
use crate::view::{cluster, description, status_row};

/// Runs the parsed command line, printing to `out`.
pub async fn run(cli: Cli, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    refuse_all_namespaces(&cli)?;
    let connection = read::connect::connect(
        cli.kubeconfig.as_deref(),
        cli.context.as_deref(),
        cli.namespace.as_deref(),
    )
    .await?;
    let output = cli.output;
    match cli.command {
        Command::Status { job } => {
            status(&connection, job.as_deref(), cli.all_namespaces, output, out).await
        }
        Command::Describe { job } => describe(&connection, &job, output, out).await,
        Command::Clusters => clusters(&connection, output, out).await,
        Command::Logs(args) => logs(&connection, &args, out).await,
    }
}

/// `-A` is for `status` without a Job alone, as in kubectl.
fn refuse_all_namespaces(cli: &Cli) -> Result<(), Usage> {
    let alone = matches!(
        cli.command,
        Command::Status { job: None } | Command::Clusters
    );
    match cli.all_namespaces && !alone {
        true => Err(Usage(
            "error: -A/--all-namespaces is for `status` without a Job; name the Job's namespace with -n".into(),
        )),
        false => Ok(()),
    }
}

async fn status(
    connection: &Connection,
    job: Option<&str>,
    all_namespaces: bool,
    output: Option<Output>,
    out: &mut (dyn Write + Send),
) -> anyhow::Result<()> {
    let client = &connection.client;
    let namespace = (!all_namespaces).then_some(connection.namespace.as_str());
    let jobs = match job {
        Some(target) => {
            let name = job_name(target).map_err(anyhow::Error::msg)?;
            vec![read::jobs::relayed_one(client, &connection.namespace, name).await?]
        }
        None => read::jobs::relayed(client, namespace).await?,
    };
    let workloads = read::kueue::workloads(client, namespace).await;
    let rows: Vec<_> = jobs
        .iter()
        .map(|job| {
            status_row::row(
                job,
                workloads.of(job.metadata.uid.as_deref().unwrap_or_default()),
            )
        })
        .collect();
    let text = match output {
        Some(Output::Json) => render::structured::json(&rows)?,
        Some(Output::Yaml) => render::structured::yaml(&rows)?,
        _ if rows.is_empty() => render::status::none_found(namespace),
        wide => {
            let columns = Columns {
                namespace: all_namespaces,
                wide: wide == Some(Output::Wide),
            };
            render::status::table(&rows, columns, Timestamp::now())
        }
    };
    out.write_all(text.as_bytes())?;
    Ok(())
}

async fn describe(
    connection: &Connection,
    target: &str,
    output: Option<Output>,
    out: &mut (dyn Write + Send),
) -> anyhow::Result<()> {
    let client = &connection.client;
    let namespace = &connection.namespace;
    let name = job_name(target).map_err(anyhow::Error::msg)?;
    let job = read::jobs::relayed_one(client, namespace, name).await?;
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let workloads = read::kueue::workloads(client, Some(namespace)).await;
    let events = read::events::about(client, namespace, &uid).await?;
    let described = description::describe(&job, workloads.of(&uid), &events);
    let text = match output {
        Some(Output::Json) => render::structured::json(&described)?,
        Some(Output::Yaml) => render::structured::yaml(&described)?,
        _ => render::describe::text(&described, Timestamp::now()),
    };
    out.write_all(text.as_bytes())?;
    Ok(())
}

async fn clusters(
    connection: &Connection,
    output: Option<Output>,
    out: &mut (dyn Write + Send),
) -> anyhow::Result<()> {
    let rows: Vec<_> = read::clusters::list(&connection.client)
        .await?
        .iter()
        .map(cluster::row)
        .collect();
    let text = match output {
        Some(Output::Json) => render::structured::json(&rows)?,
        Some(Output::Yaml) => render::structured::yaml(&rows)?,
        _ if rows.is_empty() => render::clusters::NONE_FOUND.into(),
        wide => render::clusters::table(&rows, wide == Some(Output::Wide), Timestamp::now()),
    };
    out.write_all(text.as_bytes())?;
    Ok(())
}

async fn logs(
    connection: &Connection,
    args: &LogsArgs,
    out: &mut (dyn Write + Send),
) -> anyhow::Result<()> {
    let name = job_name(&args.job).map_err(anyhow::Error::msg)?;
    let uri = crate::logs_request::uri(&connection.namespace, name, args);
    read::logs::stream(&connection.client, &uri, out).await
}
