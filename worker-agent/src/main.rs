use clap::Parser;
use jobrelay_agent::Args;

/// jemalloc hands freed memory back to the system; with glibc's allocator
/// the per-thread arenas kept about as much again as the caches held.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The flags say how to log, so they come first; clap prints its own
    // errors and help.
    let args = Args::parse();
    jobrelay_process::telemetry::init(args.process.log_format);
    Ok(jobrelay_agent::run(args).await?)
}
