//! The `edgar` command: parses arguments, runs one command, prints a top-level error.

mod cli;
mod commands;

use std::process::ExitCode;

use clap::Parser;

/// The exit status of a writer whose reader went away: what a shell reports for a
/// process killed by SIGPIPE (128 + 13).
const BROKEN_PIPE_EXIT: u8 = 141;

fn main() -> ExitCode {
    quiet_on_broken_pipe();
    let args = cli::Cli::parse();
    init_logging();
    match commands::run(args) {
        Ok(code) => code,
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::from(BROKEN_PIPE_EXIT)
        }
        Err(e) => {
            eprintln!("edgar: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `println!` panics when stdout is a pipe whose reader has gone (`edgar mcp list | head
/// -1`). The reader stopping early is its choice, not an error: exit quietly, as a Unix
/// tool killed by SIGPIPE would (stdio servers die with edgar, `PR_SET_PDEATHSIG`).
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(i32::from(BROKEN_PIPE_EXIT));
        }
        default(info);
    }));
}

/// Logs go to stderr, filtered by `EDGAR_LOG` (default: warnings). A warning is one line
/// a person reads, `edgar: warning: ...` like edgar's errors; with `EDGAR_LOG` set
/// (someone is tracing) each line has its time and level, coloured only on a terminal
/// and never with `NO_COLOR` set.
fn init_logging() {
    use std::io::IsTerminal;
    let colour = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let filter = tracing_subscriber::EnvFilter::try_from_env("EDGAR_LOG");
    let tracing = filter.is_ok();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter.unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")))
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_target(false);
    if tracing {
        logs.init();
    } else {
        logs.event_format(Plain).init();
    }
}

/// A log line as edgar's own messages read: `edgar: warning: what happened key=value`.
struct Plain;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for Plain
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let level = match *event.metadata().level() {
            tracing::Level::ERROR => "error",
            tracing::Level::WARN => "warning",
            tracing::Level::INFO => "info",
            tracing::Level::DEBUG => "debug",
            tracing::Level::TRACE => "trace",
        };
        write!(writer, "edgar: {level}: ")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}
