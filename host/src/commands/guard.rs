//! `edgar guard ...`: the border guard from a shell.

use std::io::{Read, Write};
use std::process::ExitCode;

use anyhow::Context;
use edgar_host::guard::{AdapterSource, Guard, MAX_RESULT_JSON_BYTES, MAX_TOOL_JSON_BYTES};
use edgar_host::paths;

use crate::cli::{AdapterArg, GuardCommand};

pub fn run(cmd: GuardCommand) -> anyhow::Result<ExitCode> {
    let guard = Guard::new(paths::cache_dir());
    let outcome = match cmd {
        GuardCommand::ToolName {
            server,
            tool,
            adapter,
        } => {
            let adapter = guard.adapter(&source(adapter))?;
            adapter
                .tool_name(&server, &tool)
                .map(|name| serde_json::json!(name))
        }
        GuardCommand::ToSchema { server, adapter } => {
            let adapter = guard.adapter(&source(adapter))?;
            let input = read_stdin(MAX_TOOL_JSON_BYTES)?;
            adapter
                .to_schema(&server, &input)
                .map(|t| serde_json::to_value(t).unwrap_or_default())
        }
        GuardCommand::ToResult { adapter } => {
            let adapter = guard.adapter(&source(adapter))?;
            let input = read_stdin(MAX_RESULT_JSON_BYTES)?;
            adapter
                .to_result("stdin", "stdin", &input)
                .map(|o| serde_json::to_value(o).unwrap_or_default())
        }
    };
    match outcome {
        Ok(value) => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            serde_json::to_writer_pretty(&mut out, &value)?;
            writeln!(out)?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("edgar: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn source(arg: AdapterArg) -> AdapterSource {
    arg.adapter
        .map_or(AdapterSource::Builtin, AdapterSource::File)
}

/// Reads stdin up to `limit` bytes; more is an error rather than an unbounded buffer.
fn read_stdin(limit: usize) -> anyhow::Result<String> {
    let mut buf = Vec::new();
    std::io::stdin()
        .lock()
        .take(limit as u64 + 1)
        .read_to_end(&mut buf)
        .context("cannot read stdin")?;
    if buf.len() > limit {
        anyhow::bail!("stdin is over the {limit}-byte limit");
    }
    String::from_utf8(buf).context("stdin is not UTF-8")
}
