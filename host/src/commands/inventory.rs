//! `edgar mcp scan`: every MCP configuration on the machine (`config::foreign`), with
//! findings on each entry. Secrets are found by the guard's own rules (`scan-text`) and
//! never printed: a command line shows them masked. With `--discover` (after showing
//! what would run and asking), each server is started once through the guard
//! (`Session::inspect`) and its tools' findings join the report. Text, JSON, or SARIF
//! 2.1.0.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use edgar_host::config::Config;
use edgar_host::config::foreign::{self, Entry, File};
use edgar_host::guard::findings::{self, FindingKind, Severity, mask};
use edgar_host::guard::{Adapter, AdapterSource, ContentBlock, Guard, ToolOutput};
use edgar_host::mcp::client::{Inspection, Session, SessionOptions};
use edgar_host::{net, paths, redact, text};
use serde_json::{Value, json};

use super::context::{audit, confirm, guarded, runtime};

/// One finding on a configuration entry.
struct Finding {
    rule: &'static str,
    severity: Severity,
    message: String,
}

/// One server entry of a file, as reported.
struct Server {
    entry: Entry,
    /// Its command line or URL, secrets masked, in one line for the report.
    shown: String,
    /// The same, part by part (the command and each argument, or the URL), uncut.
    launch: Vec<String>,
    found: Vec<Finding>,
    /// The `env` and `header` values not to print (a credential by name or by the guard's
    /// rules), as `env KEY` / `header KEY`.
    hidden: std::collections::BTreeSet<String>,
    /// With `--discover`: its tools through the guard, or why they could not be listed;
    /// `None` when it was not started.
    discovered: Option<Result<Inspection, String>>,
}

/// Servers started at once by `--discover`.
const AT_ONCE: usize = 4;

/// The rules, for SARIF's rule table: id, level, one line.
const RULES: &[(&str, Severity, &str)] = &[
    (
        "plaintext-secret",
        Severity::High,
        "A credential is written in plain text in an MCP configuration",
    ),
    (
        "literal-credential",
        Severity::Medium,
        "A credential is written as a literal value: a variable, header, flag or query parameter named like one, or a password in a URL",
    ),
    (
        "cleartext-http",
        Severity::Medium,
        "An HTTP server on another host is reached without TLS",
    ),
    (
        "unpinned-launcher",
        Severity::Medium,
        "The launcher fetches the newest release of the server at every start",
    ),
    (
        "unconfined",
        Severity::Low,
        "A local server runs with every right of the user",
    ),
];

/// How `--discover` starts what it found.
#[derive(Debug, Clone, Copy)]
pub struct Discover {
    /// Start without asking.
    pub yes: bool,
    /// Run stdio servers unconfined instead of under edgar's default profile.
    pub unconfined: bool,
}

/// `discover` is `Some` with `--discover`.
pub fn run(
    project: &Path,
    json: bool,
    sarif: bool,
    discover: Option<Discover>,
) -> anyhow::Result<ExitCode> {
    let places = foreign::Places::from_env(project).context("no home directory: set HOME")?;
    let files = foreign::inventory(&places);
    let guard = Guard::new(paths::cache_dir());
    let adapter = guard.adapter(&AdapterSource::Builtin)?;
    let mut report: Report<'_> = files
        .iter()
        .map(|file| {
            let servers = file
                .entries
                .as_ref()
                .map(|entries| {
                    entries
                        .iter()
                        .map(|e| {
                            let (launch, found, hidden) = check(&adapter, file, e);
                            Server {
                                entry: e.clone(),
                                shown: one_line(e, &launch),
                                launch,
                                found,
                                hidden,
                                discovered: None,
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            (file, servers)
        })
        .collect();
    if let Some(how) = discover {
        discover_all(&mut report, project, how)?;
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    use std::io::Write;
    if sarif {
        serde_json::to_writer_pretty(&mut out, &to_sarif(&report))?;
        writeln!(out)?;
    } else if json {
        serde_json::to_writer_pretty(&mut out, &to_json(&report))?;
        writeln!(out)?;
    } else {
        write!(out, "{}", to_text(&report))?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

type Report<'a> = Vec<(&'a File, Vec<Server>)>;

/// Shows every server that would start and how, asks, then starts each once (a few at
/// a time) and lists its tools through the guard. Nothing is expanded: a `${VAR}` reaches
/// the server as written. A stdio server runs confined (no network, nothing of the home;
/// a cloned repository's entries are among what it finds) unless `--unconfined` says
/// otherwise.
fn discover_all(report: &mut Report<'_>, project: &Path, how: Discover) -> anyhow::Result<()> {
    let Discover { yes, unconfined } = how;
    // Nothing beyond its program and the paths its arguments name: it runs in a private
    // empty directory, and the directory a scan runs in may be the home.
    let confinement = edgar_host::config::SandboxProfile::default();
    // The administrator's policy holds here too: a server it blocks is not started.
    let policy = match edgar_host::config::ConfigPaths::for_project(project).policy {
        Some(file) => Some(edgar_host::trust::admit::policy(&file)?),
        None => None,
    };
    let mut specs = Vec::new();
    let mut at = Vec::new();
    let mut taken = std::collections::HashSet::new();
    let mut blocked = Vec::new();
    eprintln!(
        "`--discover` starts each server below once, in a private empty directory, with its values as written (nothing expanded), lists its tools through the guard, and stops it;"
    );
    if unconfined {
        eprintln!(
            "each local server runs NOT confined, with every right of your user (--unconfined):"
        );
    } else {
        eprintln!(
            "each local server runs {} (--unconfined runs them with every right of your user):",
            edgar_host::mcp::sandbox::describe(&confinement)
        );
    }
    for (fi, (file, servers)) in report.iter().enumerate() {
        for (si, s) in servers.iter().enumerate() {
            let name = unique_name(&s.entry.name, &mut taken);
            let Some(mut spec) = s.entry.spec(&name, &file.path) else {
                continue;
            };
            if !unconfined && matches!(spec.transport, edgar_host::config::Transport::Stdio { .. })
            {
                spec.sandbox = edgar_host::config::Sandbox::On(confinement.clone());
            }
            if let Some(rule) = policy.as_ref().and_then(|p| p.blocks(&spec)) {
                blocked.push(((fi, si), format!("the policy blocks it: {rule}")));
                continue;
            }
            let how = if s.entry.command.is_some() {
                "would run"
            } else {
                "would connect to"
            };
            let mut line = format!(
                "  {} ({}, {}): {how} {}",
                text::shown(&s.entry.name),
                file.host,
                file.path.display(),
                whole(&s.launch)
            );
            // Every value is shown (an `env` such as NODE_OPTIONS changes what runs),
            // except a credential's, which is named only.
            let values: Vec<String> = s
                .entry
                .env
                .iter()
                .map(|(k, v)| (format!("env {k}"), v))
                .chain(
                    s.entry
                        .headers
                        .iter()
                        .map(|(k, v)| (format!("header {k}"), v)),
                )
                .map(|(what, v)| {
                    if s.hidden.contains(&what) {
                        format!("{what}=(a credential, not shown)")
                    } else {
                        format!("{what}='{}'", text::visible(v))
                    }
                })
                .collect();
            if !values.is_empty() {
                line.push_str(&format!(" with {} as written", values.join(", ")));
            }
            eprintln!("{line}");
            specs.push(spec);
            at.push((fi, si));
        }
    }
    for ((fi, si), why) in blocked {
        report[fi].1[si].discovered = Some(Err(why));
    }
    if specs.is_empty() {
        eprintln!("  (none)");
        return Ok(());
    }
    if !confirm(&format!("Start these {} server(s)?", specs.len()), yes)? {
        eprintln!("edgar: nothing started; the report covers the configuration only");
        return Ok(());
    }
    // What a human let run is in the trail: each server, where it was configured, and its
    // launch, whole (secrets masked).
    audit(
        "scan_discover",
        json!({"servers": at.iter().map(|&(fi, si)| {
            let (file, servers) = &report[fi];
            json!({"name": servers[si].entry.name, "file": file.path, "launch": servers[si].launch})
        }).collect::<Vec<_>>(), "by": if yes { "--yes" } else { "terminal" },
        "confined": !unconfined}),
    );
    let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    let config = Config {
        servers: specs,
        project_dir: project.to_owned(),
        ..Config::default()
    };
    // No credential store and no pins: a sign-in or an approval is not this scan's to use.
    let session = Session::new(
        &config,
        SessionOptions::new(project.to_owned(), paths::cache_dir()),
    );
    let rt = runtime()?;
    let results = rt.block_on(guarded(&session, async {
        let mut all = Vec::with_capacity(names.len());
        for chunk in names.chunks(AT_ONCE) {
            let batch = chunk.iter().map(|n| session.inspect(n));
            all.extend(edgar_host::mcp::client::join_all(batch).await);
        }
        session.close().await;
        all
    }));
    for ((fi, si), r) in at.into_iter().zip(results) {
        report[fi].1[si].discovered = Some(r.map_err(|e| text::shown_message(&e.to_string())));
    }
    Ok(())
}

/// `name` made a server name (`[A-Za-z0-9_-]`, at most 48 characters) unique in `taken`.
fn unique_name(name: &str, taken: &mut std::collections::HashSet<String>) -> String {
    let mut base: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(48)
        .collect();
    if base.is_empty() {
        base.push_str("server");
    }
    let mut candidate = base.clone();
    let mut n = 2;
    while !taken.insert(candidate.clone()) {
        candidate = format!("{base}-{n}");
        n += 1;
    }
    candidate
}

/// `values` (a server's arguments, its URL) with what the guard's secret rules find in
/// them masked: a token written where no name says it is one (`mcp get`'s bare
/// argument). The built-in adapter's rules, as `mcp scan` runs them.
pub(super) fn secrets_masked(server: &str, values: &[String]) -> anyhow::Result<Vec<String>> {
    if values.is_empty() {
        return Ok(Vec::new());
    }
    let guard = Guard::new(paths::cache_dir());
    let adapter = guard
        .adapter(&AdapterSource::Builtin)
        .context("the guard's secret rules could not load, so nothing is shown unchecked")?;
    let output = ToolOutput {
        is_error: false,
        content: values
            .iter()
            .map(|v| ContentBlock::Text { text: v.clone() })
            .collect(),
    };
    let mut out = values.to_vec();
    let scanned = adapter
        .scan_output("get", server, &output)
        .context("the guard's secret rules failed, so nothing is shown unchecked")?;
    for (i, found) in scanned {
        let secrets: Vec<&_> = found
            .iter()
            .filter(|f| f.kind == FindingKind::Secret)
            .collect();
        if let Some(v) = out.get_mut(i)
            && !secrets.is_empty()
        {
            *v = mask(v, &secrets);
        }
    }
    Ok(out)
}

/// The entry's command line with secrets masked, its findings, and the values not to
/// print.
fn check(
    adapter: &Adapter,
    file: &File,
    e: &Entry,
) -> (
    Vec<String>,
    Vec<Finding>,
    std::collections::BTreeSet<String>,
) {
    let mut hidden = std::collections::BTreeSet::new();
    let mut found = Vec::new();
    // Every value that may hold a secret, scanned by the guard's rules in one instance.
    let mut values: Vec<(String, &str)> = Vec::new();
    values.extend(e.env.iter().map(|(k, v)| (format!("env {k}"), v.as_str())));
    values.extend(
        e.headers
            .iter()
            .map(|(k, v)| (format!("header {k}"), v.as_str())),
    );
    values.extend(
        e.args
            .iter()
            .enumerate()
            .map(|(i, a)| (format!("argument {}", i + 1), a.as_str())),
    );
    if let Some(u) = &e.url {
        values.push(("url".into(), u.as_str()));
    }
    let output = ToolOutput {
        is_error: false,
        content: values
            .iter()
            .map(|(_, v)| ContentBlock::Text {
                text: (*v).to_owned(),
            })
            .collect(),
    };
    let scanned = adapter
        .scan_output("scan", &e.name, &output)
        .unwrap_or_default();
    let mut secret_at = vec![Vec::new(); values.len()];
    for (i, findings) in scanned {
        for f in findings
            .into_iter()
            .filter(|f| f.kind == FindingKind::Secret)
        {
            found.push(Finding {
                rule: "plaintext-secret",
                severity: Severity::High,
                message: format!(
                    "{} holds {} in plain text ({})",
                    values[i].0, f.message, f.rule
                ),
            });
            secret_at[i].push(f);
        }
    }
    for ((what, value), secrets) in values.iter().zip(&secret_at) {
        let credential_name = credential_name(what);
        if !what.starts_with("argument") && (credential_name || !secrets.is_empty()) {
            hidden.insert(what.clone());
        }
        if secrets.is_empty()
            && credential_name
            && !what.starts_with("argument")
            && value.len() >= 8
            && !value.contains('$')
        {
            found.push(Finding {
                rule: "literal-credential",
                severity: Severity::Medium,
                message: format!(
                    "{what} holds a literal value; use a reference (`${{VAR}}`) or the host's secret store"
                ),
            });
        }
    }
    // A credential written where one goes on a command line or in a URL, which the rules
    // above did not already report.
    let args_from = e.env.len() + e.headers.len();
    let redacted = redact::args(&e.args);
    let written = redacted
        .iter()
        .zip(&e.args)
        .enumerate()
        .map(|(i, (r, a))| (args_from + i, r != a && !a.contains('$')));
    let url_at = values.len().saturating_sub(1);
    let in_url = e
        .url
        .as_ref()
        .map(|u| (url_at, redact::url(u) != *u && !u.contains('$')));
    for (at, plain) in written.chain(in_url) {
        if plain && secret_at[at].is_empty() {
            found.push(Finding {
                rule: "literal-credential",
                severity: Severity::Medium,
                message: format!(
                    "{} holds a credential in plain text (a password in a URL, or the value of a flag or parameter named like one); use a reference (`${{VAR}}`)",
                    values[at].0
                ),
            });
        }
    }
    if let Some(u) = &e.url
        && u.starts_with("http://")
        && !net::is_https_or_loopback(u)
    {
        found.push(Finding {
            rule: "cleartext-http",
            severity: Severity::Medium,
            message: "its URL is plain http to another host: tokens and results cross the network unencrypted".into(),
        });
    }
    if let Some(pkg) = unpinned(e) {
        found.push(Finding {
            rule: "unpinned-launcher",
            severity: Severity::Medium,
            message: format!(
                "runs the newest release of {} at every start; pin a version",
                text::shown(&pkg)
            ),
        });
    }
    if e.command.is_some() && !confined(file, e) {
        found.push(Finding {
            rule: "unconfined",
            severity: Severity::Low,
            message: if file.host == "edgar" || file.host.ends_with("/ edgar") {
                "no \"sandbox\" profile: it runs with every right of the user".into()
            } else {
                format!("{} runs it with every right of the user", file.host)
            },
        });
    }
    // The launch: the command and each argument with the secrets the rules found masked,
    // then those written where a credential goes (a URL's password, `--token X`).
    let launch: Vec<String> = match (&e.command, &e.url) {
        (Some(command), _) => std::iter::once(command.clone())
            .chain(e.args.iter().zip(redacted).enumerate().map(|(i, (a, r))| {
                let secrets: Vec<&_> = secret_at[args_from + i].iter().collect();
                if secrets.is_empty() {
                    r
                } else {
                    redact::url(&mask(a, &secrets))
                }
            }))
            .collect(),
        (None, Some(u)) => {
            let secrets: Vec<&_> = secret_at[values.len() - 1].iter().collect();
            vec![redact::url(&mask(u, &secrets))]
        }
        (None, None) => Vec::new(),
    };
    (launch, found, hidden)
}

/// A launch in one line for the report: the command escaped, each argument (or the URL)
/// quoted and cut at 80 bytes.
fn one_line(e: &Entry, launch: &[String]) -> String {
    match (&e.command, launch.split_first()) {
        (Some(_), Some((command, args))) => std::iter::once(text::visible(command))
            .chain(args.iter().map(|a| text::shown(a)))
            .collect::<Vec<_>>()
            .join(" "),
        (None, Some((url, _))) => text::shown(url),
        _ => "(no command or URL that can be read)".into(),
    }
}

/// A launch whole, for a human asked to let it run: every part escaped, none cut.
fn whole(launch: &[String]) -> String {
    launch
        .iter()
        .map(|a| format!("'{}'", text::visible(a)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether an `env KEY` / `header KEY` is named like a credential.
fn credential_name(what: &str) -> bool {
    redact::credential_name(what.split_once(' ').map_or(what, |(_, name)| name))
}

/// The package an `npx`/`bunx`/`uvx`/`pipx run` launch fetches without a fixed version.
fn unpinned(e: &Entry) -> Option<String> {
    let program = Path::new(e.command.as_deref()?)
        .file_name()?
        .to_str()?
        .to_owned();
    let mut args = e.args.iter().map(String::as_str);
    let spec = match program.as_str() {
        "npx" | "bunx" | "pnpx" => args.find(|a| !a.starts_with('-'))?,
        "uvx" => args.find(|a| !a.starts_with('-'))?,
        "pipx" => {
            args.find(|a| *a == "run")?;
            args.find(|a| !a.starts_with('-'))?
        }
        _ => return None,
    };
    let pinned = match program.as_str() {
        "uvx" | "pipx" => spec.contains("==") || spec.contains('@'),
        // `@scope/name@1.2.3` or `name@1.2.3`; `@latest` is the newest release.
        _ => spec.rsplit_once('@').is_some_and(|(name, v)| {
            !name.is_empty() && !v.is_empty() && v != "latest" && v != "next"
        }),
    };
    (!pinned).then(|| spec.to_owned())
}

/// Whether an entry runs confined: only edgar's `"sandbox"` profile does.
fn confined(file: &File, e: &Entry) -> bool {
    file.host.contains("edgar") && e.sandbox.as_ref().is_some_and(|s| s.is_object())
}

fn counts(report: &Report<'_>) -> [usize; 3] {
    let mut by = [0usize; 3];
    for (_, servers) in report {
        for s in servers {
            for f in &s.found {
                by[f.severity as usize] += 1;
            }
            for (_, found) in tools_of(s) {
                for f in found {
                    by[f.severity as usize] += 1;
                }
            }
        }
    }
    by
}

/// The discovered tools of a server with their findings (none when not discovered).
fn tools_of(s: &Server) -> impl Iterator<Item = (&str, &[findings::Finding])> {
    s.discovered
        .iter()
        .filter_map(|d| d.as_ref().ok())
        .flat_map(|i| i.tools.iter().map(|(t, f)| (t.tool(), f.as_slice())))
}

fn to_text(report: &Report<'_>) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let servers: usize = report.iter().map(|(_, s)| s.len()).sum();
    for (file, entries) in report {
        let _ = writeln!(
            out,
            "{} ({}) {}",
            file.host,
            file.scope.as_str(),
            file.path.display()
        );
        if let Err(e) = &file.entries {
            let _ = writeln!(out, "  cannot be read: {}", text::shown_message(e));
        }
        for s in entries {
            let _ = writeln!(
                out,
                "  {}  {}{}",
                text::shown(&s.entry.name),
                s.shown,
                s.entry
                    .project
                    .as_ref()
                    .map(|p| format!("  (only in {})", text::shown(p)))
                    .unwrap_or_default()
            );
            for f in &s.found {
                let _ = writeln!(out, "    {} {}: {}", f.severity.as_str(), f.rule, f.message);
            }
            match &s.discovered {
                None => {}
                Some(Err(e)) => {
                    let _ = writeln!(out, "    not discovered: {e}");
                }
                Some(Ok(i)) => {
                    let _ = writeln!(
                        out,
                        "    {} tool(s) through the guard{}{}",
                        i.tools.len(),
                        if i.refused.is_empty() {
                            String::new()
                        } else {
                            format!(", {} refused", i.refused.len())
                        },
                        if i.scans {
                            ""
                        } else {
                            " (its adapter reports no findings)"
                        }
                    );
                    for (tool, found) in tools_of(s) {
                        for f in found {
                            let _ = writeln!(out, "    tool {}: {}", text::shown(tool), f.line());
                        }
                    }
                    for r in &i.refused {
                        let _ = writeln!(out, "    refused: {}", text::shown_message(r));
                    }
                }
            }
        }
    }
    let [low, medium, high] = counts(report);
    let _ = writeln!(
        out,
        "{}, {}: {high} high, {medium} medium, {low} low",
        text::counted(report.len(), "file"),
        text::counted(servers, "server"),
    );
    out
}

fn to_json(report: &Report<'_>) -> Value {
    let [low, medium, high] = counts(report);
    json!({
        "files": report.iter().map(|(file, entries)| json!({
            "host": file.host,
            "path": file.path,
            "scope": file.scope.as_str(),
            "error": file.entries.as_ref().err(),
            "servers": entries.iter().map(|s| {
                let mut v = json!({
                    "name": s.entry.name,
                    "line": s.entry.line,
                    "project": s.entry.project,
                    "launch": s.shown,
                    "findings": s.found.iter().map(|f| json!({
                        "rule": f.rule, "severity": f.severity.as_str(), "message": f.message,
                    })).collect::<Vec<_>>(),
                });
                match &s.discovered {
                    None => {}
                    Some(Err(e)) => v["discovery"] = json!({"error": e}),
                    Some(Ok(i)) => v["discovery"] = json!({
                        "tools": i.tools.iter().map(|(t, found)| json!({
                            "name": t.tool(), "findings": found,
                        })).collect::<Vec<_>>(),
                        "refused": i.refused,
                        "unscanned": i.unscanned,
                        "scans": i.scans,
                    }),
                }
                v
            }).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "counts": {"high": high, "medium": medium, "low": low},
    })
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::High => "error",
        Severity::Medium => "warning",
        Severity::Low => "note",
    }
}

fn to_sarif(report: &Report<'_>) -> Value {
    let mut rules: Vec<Value> = RULES
        .iter()
        .map(|(id, s, text)| {
            json!({"id": id, "shortDescription": {"text": text},
                   "defaultConfiguration": {"level": level(*s)}})
        })
        .collect();
    // The guard's rules that found something in a discovered tool, each once.
    let mut guard_rules = std::collections::BTreeMap::new();
    let mut results = Vec::new();
    for (file, entries) in report {
        let uri = format!("file://{}", file.path.display());
        for s in entries {
            let mut location = json!({"physicalLocation": {"artifactLocation": {"uri": uri}}});
            if let Some(line) = s.entry.line {
                location["physicalLocation"]["region"] = json!({"startLine": line});
            }
            for f in &s.found {
                results.push(json!({
                    "ruleId": f.rule,
                    "level": level(f.severity),
                    "message": {"text": format!("{} ({}): {}", s.entry.name, file.host, f.message)},
                    "locations": [location],
                }));
            }
            for (tool, found) in tools_of(s) {
                for f in found {
                    let id = format!("guard/{}", f.rule);
                    guard_rules
                        .entry(id.clone())
                        .or_insert((f.severity, f.kind.as_str()));
                    results.push(json!({
                        "ruleId": id,
                        "level": level(f.severity),
                        "message": {"text": format!(
                            "{} ({}): tool {}: {}", s.entry.name, file.host, tool, f.line()
                        )},
                        "locations": [location],
                    }));
                }
            }
        }
    }
    for (id, (severity, kind)) in guard_rules {
        rules.push(json!({
            "id": id,
            "shortDescription": {"text": format!("The guard found {kind} in a tool the server lists")},
            "defaultConfiguration": {"level": level(severity)},
        }));
    }
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "edgar mcp scan",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "results": results,
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(command: &str, args: &[&str]) -> Entry {
        Entry {
            name: "s".into(),
            command: Some(command.into()),
            args: args.iter().map(|a| a.to_string()).collect(),
            ..Entry::default()
        }
    }

    #[test]
    fn names_are_made_valid_and_unique() {
        let mut taken = std::collections::HashSet::new();
        assert_eq!(unique_name("github", &mut taken), "github");
        assert_eq!(unique_name("github", &mut taken), "github-2");
        assert_eq!(unique_name("my server/ä", &mut taken), "my-server--");
        assert_eq!(unique_name("", &mut taken), "server");
        let long = "x".repeat(100);
        assert_eq!(unique_name(&long, &mut taken).len(), 48);
        for n in &taken {
            assert!(edgar_host::config::check_name(n).is_ok(), "{n}");
        }
    }

    #[test]
    fn launchers_without_a_version_are_unpinned() {
        for (cmd, args, want) in [
            (
                "npx",
                &["-y", "@modelcontextprotocol/server-memory"][..],
                Some("@modelcontextprotocol/server-memory"),
            ),
            (
                "npx",
                &["-y", "@modelcontextprotocol/server-memory@2026.8.31"][..],
                None,
            ),
            ("npx", &["pkg@latest"][..], Some("pkg@latest")),
            ("/usr/bin/npx", &["--yes", "pkg"][..], Some("pkg")),
            ("uvx", &["mcp-server-time"][..], Some("mcp-server-time")),
            ("uvx", &["mcp-server-time==0.6.2"][..], None),
            ("pipx", &["run", "mcp-x"][..], Some("mcp-x")),
            ("node", &["server.js"][..], None),
        ] {
            assert_eq!(
                unpinned(&entry(cmd, args)).as_deref(),
                want,
                "{cmd} {args:?}"
            );
        }
    }
}
