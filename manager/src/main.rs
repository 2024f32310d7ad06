use clap::Parser;
use jobrelay_manager::cli::Cli;

/// jemalloc hands freed memory back to the system; with glibc's allocator
/// the per-thread arenas kept about as much again as the caches held.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    jobrelay_process::telemetry::init();
    Ok(jobrelay_manager::main(Cli::parse()).await?)
}
