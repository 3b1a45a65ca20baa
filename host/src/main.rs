use clap::Parser;
use tracing_subscriber::EnvFilter;

fn main() -> std::process::ExitCode {
    // Logs go to stderr: in stdio mode stdout belongs to JSON-RPC alone.
    // Each line passes the redactor once the host knows its secrets.
    let logs = toolhost::redact::LogRedaction::default();
    tracing_subscriber::fmt()
        .with_writer({
            let logs = logs.clone();
            move || logs.stderr()
        })
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            EnvFilter::try_from_env("TOOLHOST_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    let cli = toolhost::cli::Cli::parse();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if let Some(workers) = cli.runtime_workers() {
        builder.worker_threads(workers);
    }
    let runtime = match builder.build() {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!("cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(toolhost::cli::run(cli, logs)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // Operator-facing: plain text on stderr, with its file:line and fix.
            eprintln!("toolhost: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
