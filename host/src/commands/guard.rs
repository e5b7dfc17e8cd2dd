//! `edgar guard ...`: the border guard from a shell.

use std::io::{Read, Write};
use std::process::ExitCode;

use anyhow::Context;
use std::path::PathBuf;

use edgar_host::guard::{
    AdapterSource, Guard, GuardError, MAX_RESULT_JSON_BYTES, MAX_TOOL_JSON_BYTES, kit,
};
use edgar_host::paths;

use crate::cli::{AdapterArg, GuardCommand};

pub fn run(cmd: GuardCommand) -> anyhow::Result<ExitCode> {
    let guard = Guard::new(paths::cache_dir());
    let outcome = match cmd {
        GuardCommand::Check { adapter, corpus } => return check(&guard, adapter, corpus),
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
        GuardCommand::ToSchema {
            server,
            adapter,
            provider,
        } => {
            let adapter = guard.adapter(&source(adapter))?;
            let input = read_stdin(MAX_TOOL_JSON_BYTES)?;
            adapter.to_schema(&server, &input).and_then(|t| {
                let mut v = serde_json::to_value(&t).unwrap_or_default();
                if let Some(provider) = provider.provider {
                    let lowered =
                        adapter.lower_tools(&[&t], provider).pop().ok_or_else(|| {
                            GuardError::Failed {
                                subject: Default::default(),
                                reason: "no lowering returned".into(),
                            }
                        })??;
                    v["accepted_input_schema"] = v["input_schema"].take();
                    v["input_schema"] = lowered.input_schema().clone();
                    v["provider"] = serde_json::json!(lowered.provider());
                    v["profile"] = serde_json::json!(lowered.profile());
                    v["losses"] = serde_json::to_value(lowered.losses()).unwrap_or_default();
                }
                Ok(v)
            })
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

/// `edgar guard check`: the kit's report on stdout, exit 1 when an invariant fails.
fn check(guard: &Guard, adapter: AdapterArg, corpus: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let source = source(adapter);
    let corpus = match &corpus {
        Some(dir) => kit::read_corpus(dir).map_err(anyhow::Error::msg)?,
        None => kit::sample_corpus(),
    };
    let report = kit::check_source(guard, &source, &corpus);
    println!("edgar guard check: {source}");
    println!("{}", report.text());
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
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
