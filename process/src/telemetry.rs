//! Logging for both binaries: to standard error, levels from `RUST_LOG`
//! (default `info,kube=warn`), colours only on a terminal.

/// Installs the process's tracing subscriber; call once, first thing in `main`.
pub fn init() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,kube=warn".into()),
        )
        .init();
}
