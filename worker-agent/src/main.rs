use clap::Parser;
use jobrelay_agent::cli::Args;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    jobrelay_process::telemetry::init();
    Ok(jobrelay_agent::run(Args::parse()).await?)
}
