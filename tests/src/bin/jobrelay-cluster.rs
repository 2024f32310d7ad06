//! Runs one set of test clusters until its standard input closes or it is
//! signalled; see `jobrelay_testbed::cluster::supervisor`.

use clap::Parser;
use jobrelay_testbed::cluster::supervisor::{SuperviseArgs, supervise};

#[derive(Parser)]
#[command(name = "jobrelay-cluster")]
struct Cli {
    #[command(flatten)]
    args: SuperviseArgs,
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if let Err(e) = supervise(Cli::parse().args).await {
        eprintln!("Error: {e:#}");
        std::process::exit(1);
    }
}
