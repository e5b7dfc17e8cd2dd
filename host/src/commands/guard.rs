//! `edgar guard ...`: the border guard from a shell.

use std::io::{Read, Write};
use std::process::ExitCode;

use anyhow::Context;
use std::path::PathBuf;

use edgar_host::guard::findings::{Finding, FindingKind, Severity};
use edgar_host::guard::{
    AdapterSource, Guard, GuardError, MAX_RESULT_JSON_BYTES, MAX_TOOL_JSON_BYTES, kit,
};
use edgar_host::{paths, text};

use crate::cli::{AdapterArg, GuardCommand};

pub fn run(cmd: GuardCommand) -> anyhow::Result<ExitCode> {
    let guard = Guard::new(paths::cache_dir());
    let outcome = match cmd {
        GuardCommand::Check { adapter, corpus } => return check(&guard, adapter, corpus),
        GuardCommand::Scan {
            file,
            server,
            json,
            fail_on,
            adapter,
        } => return scan(&guard, &file, server, json, fail_on, adapter),
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

/// Largest file `edgar guard scan` reads.
const MAX_SCAN_BYTES: usize = 64 << 20;
/// Exit code when the input cannot be read or understood.
const USAGE: u8 = 2;

/// `edgar guard scan`: every finding on every tool of a list, offline.
fn scan(
    guard: &Guard,
    file: &std::path::Path,
    server: Option<String>,
    json: bool,
    fail_on: Severity,
    adapter: AdapterArg,
) -> anyhow::Result<ExitCode> {
    let text = if file == std::path::Path::new("-") {
        read_stdin(MAX_SCAN_BYTES)
    } else {
        paths::read_capped(file, MAX_SCAN_BYTES as u64)
            .map_err(anyhow::Error::from)
            .and_then(|b| b.with_context(|| format!("{} does not exist", file.display())))
            .and_then(|b| String::from_utf8(b).context("not UTF-8"))
    };
    let listed = text.and_then(|t| tool_list(&t));
    let (file_server, tools) = match listed {
        Ok(l) => l,
        Err(e) => {
            eprintln!("edgar: {}: {e:#}", file.display());
            return Ok(ExitCode::from(USAGE));
        }
    };
    let server = server.or(file_server).unwrap_or_else(|| "server".into());
    let source = source(adapter);
    let adapter = guard.adapter(&source)?;
    if !adapter.scans() {
        eprintln!(
            "edgar: {source} reports no findings: it does not export edgar:schema/scan (an adapter built for edgar:schema@0.2.0 or earlier)"
        );
    }
    let raw: Vec<String> = tools.iter().map(|t| t.to_string()).collect();
    let results = adapter.scan_tools(&server, &raw);
    let mut rows = Vec::new();
    let mut worst: Option<Severity> = None;
    let mut counts = [0usize; 3];
    for (tool, result) in tools.iter().zip(results) {
        let name = tool.get("name").and_then(|n| n.as_str()).unwrap_or("?");
        match result {
            Ok(found) => {
                for f in found {
                    worst = worst.max(Some(f.severity));
                    counts[f.severity as usize] += 1;
                    rows.push((name.to_owned(), excerpt(tool, &f), f));
                }
            }
            Err(e) => {
                eprintln!("edgar: {e}");
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if json {
        let findings: Vec<serde_json::Value> = rows
            .iter()
            .map(|(tool, excerpt, f)| {
                let mut v = serde_json::to_value(f).unwrap_or_default();
                v["server"] = server.clone().into();
                v["tool"] = tool.clone().into();
                if let Some(e) = excerpt {
                    v["excerpt"] = e.clone().into();
                }
                v
            })
            .collect();
        let report = serde_json::json!({
            "tools": tools.len(),
            "findings": findings,
            "counts": {"low": counts[0], "medium": counts[1], "high": counts[2]},
        });
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        for (tool, excerpt, f) in &rows {
            writeln!(
                out,
                "{}/{}: {}",
                text::shown(&server),
                text::shown(tool),
                f.line()
            )?;
            if let Some(e) = excerpt {
                writeln!(out, "    {e}")?;
            }
        }
        writeln!(
            out,
            "{} tool{} scanned: {} high, {} medium, {} low",
            tools.len(),
            if tools.len() == 1 { "" } else { "s" },
            counts[2],
            counts[1],
            counts[0]
        )?;
    }
    out.flush()?;
    Ok(if worst.is_some_and(|w| w >= fail_on) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The tools of a `tools/list` result, a JSON-RPC response carrying one, a corpus file
/// (`{"server", "tools"}`), a bare array or one tool; with the file's server name if it
/// has one.
fn tool_list(text: &str) -> anyhow::Result<(Option<String>, Vec<serde_json::Value>)> {
    let v: serde_json::Value = serde_json::from_str(text).context("not JSON")?;
    let server = v.get("server").and_then(|s| s.as_str()).map(str::to_owned);
    let listed = v
        .get("tools")
        .or_else(|| v.get("result").and_then(|r| r.get("tools")))
        .and_then(|t| t.as_array());
    let tools = match (&v, listed) {
        (serde_json::Value::Array(a), _) => a.clone(),
        (_, Some(tools)) => tools.clone(),
        // One tool, as `guard to-schema` takes it.
        (serde_json::Value::Object(o), None) if o.get("name").is_some_and(|n| n.is_string()) => {
            vec![v.clone()]
        }
        _ => anyhow::bail!(
            "no tool list: expected an array of tools, an object with `tools` or `result.tools`, or one tool"
        ),
    };
    Ok((server, tools))
}

/// The matched text with a little context, invisible characters made visible; never
/// for a secret.
fn excerpt(tool: &serde_json::Value, f: &Finding) -> Option<String> {
    if f.kind == FindingKind::Secret {
        return None;
    }
    let s = tool.pointer(&f.path)?.as_str()?;
    let from = s.floor_char_boundary(f.start.saturating_sub(30));
    let to = s.ceil_char_boundary((f.end + 30).min(s.len()));
    let shown = if f.kind == FindingKind::DeceptiveName {
        // Look-alike letters are the point: spell out every one outside ASCII.
        s[from..to]
            .chars()
            .map(|c| {
                if c.is_ascii() {
                    c.to_string()
                } else {
                    c.escape_unicode().to_string()
                }
            })
            .collect()
    } else {
        text::visible(&s[from..to])
    };
    Some(format!("\"{}\"", shown.replace('\n', " ")))
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
