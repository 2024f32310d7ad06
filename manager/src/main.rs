use clap::Parser;
use jobrelay_manager::cli::Cli;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    jobrelay_process::telemetry::init();
    Ok(jobrelay_manager::main(Cli::parse()).await?)
}
