use clap::Parser;
use jobrelay_manager::cli::Cli;

/// jemalloc hands freed memory back to the system; with glibc's allocator
/// the per-thread arenas kept about as much again as the caches held.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The flags say how to log, so they come first; clap prints its own
    // errors and help.
    let cli = Cli::parse();
    jobrelay_process::telemetry::init(cli.run.process.log_format);
    Ok(jobrelay_manager::main(cli).await?)
}
