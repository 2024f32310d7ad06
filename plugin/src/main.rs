//! `kubectl-jobrelay`, the kubectl plugin: everything is in the library.

use std::process::ExitCode;

use kubectl_jobrelay::Usage;

#[tokio::main]
async fn main() -> ExitCode {
    let args = std::env::args_os()
        .skip(1)
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let mut out = std::io::stdout();
    match kubectl_jobrelay::run(args, &mut out).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if error.downcast_ref::<Usage>().is_some() => {
            eprintln!("{error}");
            ExitCode::from(2)
        }
        // The reader went away (`| head`): nothing more to say to anyone.
        Err(error) if closed_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn closed_pipe(error: &anyhow::Error) -> bool {
    error
        .downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}
