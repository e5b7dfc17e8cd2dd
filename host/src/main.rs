//! The `edgar` command: parses arguments, runs one command, prints a top-level error.

mod cli;
mod commands;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    init_logging();
    match commands::run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("edgar: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr, filtered by `EDGAR_LOG` (default: warnings), coloured only on a
/// terminal and never with `NO_COLOR` set.
fn init_logging() {
    use std::io::IsTerminal;
    let colour = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let filter = tracing_subscriber::EnvFilter::try_from_env("EDGAR_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_target(false)
        .init();
}
