use clap::Parser;
use toolhost::logs::LogSink;
use toolhost::redact::LogRedaction;
use tracing_subscriber::EnvFilter;

/// What is logged when `TOOLHOST_LOG` is not set. rmcp logs at info level
/// for every session it opens and closes and for every stateless request
/// (three lines, one of them the client's whole `initialize` as debug
/// text): nothing the audit trail does not already say better, a fifth of
/// a stateless request's CPU, and noise in the operator's journal. Its
/// warnings and errors still show.
const DEFAULT_LOG_FILTER: &str = "info,rmcp=warn";

fn main() -> std::process::ExitCode {
    let cli = toolhost::cli::Cli::parse();
    // Logs go to stderr: in stdio mode stdout belongs to JSON-RPC alone.
    // Each line passes the redactor once the host knows its secrets. A
    // serving host writes them from a thread of its own (toolhost::logs).
    let logs = LogRedaction::default();
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let sink = match cli.serves() {
        true => LogSink::queued(logs.clone(), ansi),
        false => LogSink::in_place(logs.clone()),
    };
    tracing_subscriber::fmt()
        .with_writer(sink.clone())
        .with_ansi(ansi)
        .with_env_filter(
            EnvFilter::try_from_env("TOOLHOST_LOG")
                .unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG_FILTER)),
        )
        .init();
    // A panic on this thread ends the process: what was logged before it
    // goes first. (Elsewhere a panic ends only a task, and a runtime thread
    // must not wait on stderr.)
    let hook = std::panic::take_hook();
    let on_panic = sink.clone();
    std::panic::set_hook(Box::new(move |info| {
        // With stderr stalled, the default hook's message would hang too.
        if std::thread::current().name() == Some("main") && !on_panic.flush() {
            return;
        }
        hook(info);
    }));
    let outcome = run(cli, logs);
    // What was logged is on stderr before the error, if any, is; if stderr
    // is stalled, printing the error would hang the exit.
    let written = sink.flush();
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            if written {
                // Operator-facing: plain text on stderr, with its file:line and fix.
                eprintln!("toolhost: {e:#}");
            }
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: toolhost::cli::Cli, logs: LogRedaction) -> anyhow::Result<()> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if let Some(workers) = cli.runtime_workers() {
        builder.worker_threads(workers);
    }
    let runtime = builder
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?;
    let outcome = runtime.block_on(toolhost::cli::run(cli, logs));
    // Dropping the runtime would wait for every blocking task to end: a host
    // stopped while it compiles a large component would then take as long
    // as the compile. What such a task leaves unfinished (a cache entry
    // being written) is written to a staging name and never taken for done.
    runtime.shutdown_timeout(SHUTDOWN_WAIT);
    outcome
}

/// How long a finished command waits for blocking work still running.
const SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(1);
