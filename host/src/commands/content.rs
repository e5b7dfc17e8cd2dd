//! `edgar mcp prompts`, `prompt`, `resources` and `read`: what servers offer besides
//! tools, each through the guard; a server starts only when asked about.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use edgar_host::config::Config;
use edgar_host::mcp::McpError;
use edgar_host::mcp::client::Session;

use super::context::{guarded, note_held, runtime, session};
use super::output::{print_blocks, print_json};

/// Runs `work` on a fresh session of `config` and closes it, whatever happens.
fn with_session<T>(
    config: &Config,
    cwd: &Path,
    work: impl AsyncFnOnce(&Session) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    note_held(config);
    runtime()?.block_on(async {
        let session = session(config, cwd);
        let result = guarded(&session, work(&session)).await;
        session.close().await;
        result
    })
}

/// The servers a listing covers: the one named, else every configured one.
fn targets(config: &Config, name: Option<&str>) -> Vec<String> {
    match name {
        Some(n) => vec![n.to_owned()],
        None => config.servers.iter().map(|s| s.name.clone()).collect(),
    }
}

/// A listing's per-server failure: named and skipped when listing every server (one
/// without prompts or resources is normal), an error when one server was asked for.
fn skipped(e: McpError, asked: bool) -> anyhow::Result<()> {
    if asked {
        return Err(e.into());
    }
    if !matches!(e, McpError::Server { .. }) {
        eprintln!("edgar: {e}");
    }
    Ok(())
}

pub fn prompts(
    config: &Config,
    cwd: &Path,
    name: Option<&str>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    with_session(config, cwd, async |session| {
        let all = gather(config, name, async |s: &str| session.prompts(s).await).await?;
        let as_json = json.then(|| serde_json::to_value(&all)).transpose()?;
        print_listing(&all, as_json, |p| {
            let args: Vec<String> = p
                .arguments
                .iter()
                .map(|a| {
                    if a.required {
                        a.name.clone()
                    } else {
                        format!("[{}]", a.name)
                    }
                })
                .collect();
            format!(
                "{}/{}\t{}\t{}",
                p.server,
                p.name,
                args.join(" "),
                first_line(&p.description)
            )
        })
    })
}

/// Every listed server's items: the one named, else each configured one, skipping those
/// that offer none.
async fn gather<T>(
    config: &Config,
    name: Option<&str>,
    fetch: impl AsyncFn(&str) -> Result<Vec<T>, McpError>,
) -> anyhow::Result<Vec<T>> {
    let mut all = Vec::new();
    for server in targets(config, name) {
        match fetch(&server).await {
            Ok(list) => all.extend(list),
            Err(e) => skipped(e, name.is_some())?,
        }
    }
    Ok(all)
}

/// A listing as `json` when asked for, else one line per item.
fn print_listing<T>(
    all: &[T],
    json: Option<serde_json::Value>,
    line: impl Fn(&T) -> String,
) -> anyhow::Result<ExitCode> {
    if let Some(v) = json {
        print_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = std::io::stdout().lock();
    for item in all {
        writeln!(out, "{}", line(item))?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn prompt(
    config: &Config,
    cwd: &Path,
    name: &str,
    arguments: &[String],
    json: bool,
) -> anyhow::Result<ExitCode> {
    let Some((server, prompt)) = name.split_once('/').or_else(|| name.split_once("__")) else {
        bail!("name the prompt as SERVER/PROMPT (`edgar mcp prompts` lists them)");
    };
    let mut args = BTreeMap::new();
    for kv in arguments {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("the argument {kv:?} is not KEY=VALUE"))?;
        args.insert(k.to_owned(), v.to_owned());
    }
    with_session(config, cwd, async |session| {
        let out = session.prompt(server, prompt, &args).await?;
        if json {
            print_json(&serde_json::to_value(&out)?)?;
            return Ok(ExitCode::SUCCESS);
        }
        for m in &out.messages {
            println!("[{}]", m.role);
            print_blocks(&m.content)?;
        }
        Ok(ExitCode::SUCCESS)
    })
}

pub fn resources(
    config: &Config,
    cwd: &Path,
    name: Option<&str>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    with_session(config, cwd, async |session| {
        let all = gather(config, name, async |s: &str| session.resources(s).await).await?;
        let as_json = json.then(|| serde_json::to_value(&all)).transpose()?;
        print_listing(&all, as_json, |r| {
            let kind = if r.template {
                "template"
            } else {
                r.mime_type.as_deref().unwrap_or("-")
            };
            format!("{}\t{}\t{}\t{}", r.server, r.uri, kind, r.name)
        })
    })
}

pub fn read(
    config: &Config,
    cwd: &Path,
    uri: &str,
    server: Option<&str>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    with_session(config, cwd, async |session| {
        let server = match server {
            Some(s) => s.to_owned(),
            None => owner(config, session, uri).await?,
        };
        let blocks = session.read(&server, uri).await?;
        if json {
            print_json(&serde_json::to_value(&blocks)?)?;
        } else {
            print_blocks(&blocks)?;
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// The server that lists `uri`: the only one configured, else the first whose list has it.
async fn owner(config: &Config, session: &Session, uri: &str) -> anyhow::Result<String> {
    if let [only] = config.servers.as_slice() {
        return Ok(only.name.clone());
    }
    for s in &config.servers {
        if let Ok(list) = session.resources(&s.name).await
            && list.iter().any(|r| !r.template && r.uri == uri)
        {
            return Ok(s.name.clone());
        }
    }
    bail!("no server lists that resource; name one with --server")
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}
