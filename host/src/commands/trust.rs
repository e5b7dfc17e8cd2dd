//! `edgar mcp approve|revoke|pins|lock|verify` and `edgar audit`: the human side of
//! project trust, tool pins and the audit trail. Approval prompts show exactly what would
//! run or be contacted, with control characters escaped (a project file or a server
//! could otherwise rewrite the terminal under the question).

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{Context, bail};
use edgar_host::config::{Config, Hold, ProjectEntry, ServerSpec, Transport};
use edgar_host::mcp::cache::{ToolCache, now};
use edgar_host::mcp::client::Session;
use edgar_host::paths;
use edgar_host::trust::approval::Approvals;
use edgar_host::trust::pins::{
    self, LOCK_FILE, LockFile, LockedServer, PinFile, PinStore, SharedPins,
};
use edgar_host::trust::state_dir;
use serde_json::{Value, json};

use super::context::{audit, audit_log, confirm, runtime, session};

fn state() -> anyhow::Result<std::path::PathBuf> {
    state_dir().context("no state directory for approvals and pins: set HOME or XDG_STATE_HOME")
}

fn pin_store(config: &Config) -> anyhow::Result<PinStore> {
    Ok(PinStore::new(&state()?, Some(&config.project_dir)))
}

/// The trust files (pins, approvals) a team gateway's replicas share, when
/// `gateway_config` names its config.
fn shared_files(
    gateway_config: Option<&std::path::Path>,
) -> anyhow::Result<Option<std::sync::Arc<dyn SharedPins>>> {
    let Some(path) = gateway_config else {
        return Ok(None);
    };
    let (db, key) = gateway_state(path)?;
    let shared =
        edgar_host::state::SharedPinFiles::start(db, key.pins_key()).map_err(anyhow::Error::msg)?;
    Ok(Some(std::sync::Arc::new(shared)))
}

pub fn approve(
    config: &Config,
    name: Option<&str>,
    yes: bool,
    gateway_config: Option<&std::path::Path>,
) -> anyhow::Result<ExitCode> {
    let shared = shared_files(gateway_config)?;
    if let Some(files) = &shared {
        // Approved on top of what the replicas already approved.
        super::context::pull_approvals(files.as_ref())?;
    }
    let pins = pin_store(config)?.with_shared(shared.clone());
    let mut project_approved = false;
    let mut targets: Vec<String> = match name {
        Some(n) => vec![n.to_owned()],
        None => {
            let mut t: Vec<String> = config
                .held
                .iter()
                .filter(|h| matches!(h.why, Hold::NeedsApproval(_)))
                .map(|h| h.name.clone())
                .collect();
            for spec in &config.servers {
                if pins
                    .read(spec)?
                    .is_some_and(|f| !f.pending.is_empty() || !f.pending_prompts.is_empty())
                {
                    t.push(spec.name.clone());
                }
            }
            t
        }
    };
    targets.dedup();
    if targets.is_empty() {
        println!("nothing waits for approval");
        return Ok(ExitCode::SUCCESS);
    }
    let mut refused = false;
    for target in &targets {
        let done = if let Some(held) = config.held(target) {
            match &held.why {
                // One entry that cannot be shown (an unset variable) must not hide the rest.
                Hold::NeedsApproval(entry) => {
                    let done = approve_entry(entry, yes).unwrap_or_else(|e| {
                        eprintln!("edgar: {e:#}");
                        false
                    });
                    project_approved |= done;
                    done
                }
                Hold::Blocked { rule } => {
                    eprintln!("edgar: MCP server '{target}' is blocked by policy: {rule}");
                    false
                }
                Hold::Shadowed { by } => {
                    eprintln!(
                        "edgar: the project's '{target}' is ignored: your own config ({}) has a server of that name; rename one of them",
                        by.display()
                    );
                    false
                }
                Hold::Refused { field, reason } => {
                    eprintln!(
                        "edgar: the project's '{target}' cannot be approved: {field}: {reason}"
                    );
                    false
                }
            }
        } else if let Some(spec) = config.server(target) {
            let done = approve_pins(&pins, spec, &config.project_dir, yes)?;
            if done && let Some(path) = gateway_config {
                // The replicas' shared discovery holds the tools as they were held back.
                let (db, key) = gateway_state(path)?;
                let shared = edgar_host::state::SharedDiscovery::new(db, key.discovery_key());
                runtime()?.block_on(shared.forget(&spec.name))?;
            }
            done
        } else {
            bail!("no MCP server named '{target}' is configured")
        };
        refused |= !done;
    }
    if project_approved && let Some(files) = &shared {
        super::context::push_approvals(files.as_ref())?;
        println!("the replicas take the approval when they next start");
    }
    if refused && !yes && !std::io::stdin().is_terminal() {
        bail!("not approved: no terminal to ask at; review the above and pass --yes to approve");
    }
    Ok(if refused {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Shows a project entry as it would run and records the approval if the human agrees.
fn approve_entry(entry: &ProjectEntry, yes: bool) -> anyhow::Result<bool> {
    let spec = entry.spec()?;
    if let Some((path, Err(e))) = &entry.adapter {
        bail!(
            "the adapter {} of '{}' cannot be read ({e}); nothing to approve",
            path.display(),
            entry.name
        );
    }
    let mut out = String::new();
    describe_entry(entry, &spec, &mut out);
    print!("{out}");
    // Loaded with the config a moment ago, so it reads; read again here, where it decides.
    let policy = match edgar_host::trust::policy::path() {
        Some(file) => Some(edgar_host::trust::admit::policy(&file)?),
        None => None,
    };
    if let Some(rule) = policy.as_ref().and_then(|p| p.blocks(&spec)) {
        audit(
            "policy_block",
            json!({"server": entry.name, "rule": rule, "project": entry.project}),
        );
        eprintln!(
            "edgar: MCP server '{}' is blocked by policy: {rule}",
            entry.name
        );
        return Ok(false);
    }
    if !confirm(&format!("Approve '{}'?", entry.name), yes)? {
        println!("not approved");
        return Ok(false);
    }
    let mut approvals = Approvals::load(Some(&state()?));
    approvals.approve(&entry.project, &entry.name, &entry.digest, now())?;
    audit(
        "approve",
        json!({"server": entry.name, "project": entry.project, "digest": entry.digest,
               "what": target_line(&spec)}),
    );
    println!(
        "approved {} for {} (any change to its entry needs a new approval)",
        entry.name,
        entry.project.display()
    );
    Ok(true)
}

/// What a server runs or contacts, in one line, as written (`${VAR}` named, never its
/// value, which may be a secret): for the prompt and the audit trail.
fn target_line(spec: &ServerSpec) -> String {
    match &spec.transport {
        Transport::Stdio { .. } => std::iter::once(&spec.written.target)
            .chain(&spec.written.args)
            .map(|a| quote(a))
            .collect::<Vec<_>>()
            .join(" "),
        Transport::Http { .. } | Transport::Sse { .. } => escaped(&spec.written.target),
    }
}

fn describe_entry(entry: &ProjectEntry, spec: &ServerSpec, out: &mut String) {
    use std::fmt::Write as _;
    let _ = writeln!(
        out,
        "Project server '{}' in {}",
        escaped(&entry.name),
        escaped(&entry.file.display().to_string())
    );
    // Where a value comes from, never the value of a variable (it may be a secret).
    let origin = |value: Option<&Value>| -> String {
        let Some(template) = value.and_then(Value::as_str) else {
            return "(not a string)".into();
        };
        let vars = variables(template);
        if vars.is_empty() {
            format!("a literal value of {} characters", template.chars().count())
        } else if template.trim() == format!("${{{}}}", vars[0]) && vars.len() == 1 {
            format!("your environment variable {}", vars[0])
        } else {
            format!("text with your environment variables {}", vars.join(", "))
        }
    };
    let mut shown_keys: Vec<&str> = vec!["type", "transport", "adapter"];
    match &spec.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
            env_inherit,
        } => {
            shown_keys.extend(["command", "args", "env", "cwd", "env_inherit"]);
            let _ = writeln!(out, "  would run:  {}", target_line(spec));
            let dir = cwd.as_deref().unwrap_or(&entry.project);
            let path = env
                .get("PATH")
                .map(std::ffi::OsString::from)
                .or_else(|| std::env::var_os("PATH"));
            let program = match edgar_host::trust::policy::resolve_program(
                command,
                path.as_deref(),
                Some(dir),
            ) {
                Some(p) => escaped(&p.display().to_string()),
                None => "(not found)".into(),
            };
            let _ = writeln!(out, "  program:    {} -> {program}", quote(command));
            let _ = writeln!(
                out,
                "  in:         {}{}",
                escaped(&dir.display().to_string()),
                if cwd.is_none() {
                    " (the project directory: programs and launchers there load its code, such as node_modules, python -m modules, a pyproject.toml)"
                } else {
                    ""
                }
            );
            if args.is_empty() {
                let _ = writeln!(out, "  arguments:  none");
            }
            for c in &entry.code {
                match &c.sha256 {
                    Ok(sha) => {
                        let _ = writeln!(
                            out,
                            "  runs code:  {} (sha256 {sha}; a change needs a new approval)",
                            escaped(&c.path)
                        );
                    }
                    Err(e) => {
                        let _ = writeln!(
                            out,
                            "  runs code:  {} (not hashed: {})",
                            escaped(&c.path),
                            escaped(e)
                        );
                    }
                }
            }
            let raw_env = entry.raw.get("env");
            for k in env.keys() {
                let _ = writeln!(
                    out,
                    "  env:        {} = {}",
                    escaped(k),
                    origin(raw_env.and_then(|e| e.get(k)))
                );
            }
            let inherited = if *env_inherit {
                "ALL of edgar's environment (env_inherit), keys included".to_owned()
            } else {
                format!(
                    "from edgar's environment only {}",
                    edgar_host::mcp::INHERITED_ENV.join(", ")
                )
            };
            let _ = writeln!(out, "  inherits:   {inherited}");
            shown_keys.push("sandbox");
            let _ = writeln!(
                out,
                "  process:    {}",
                edgar_host::mcp::client::confinement_line(spec)
            );
        }
        Transport::Http { headers, .. } | Transport::Sse { headers, .. } => {
            shown_keys.extend(["url", "headers"]);
            let _ = writeln!(
                out,
                "  would contact: {} ({})",
                target_line(spec),
                spec.transport.kind()
            );
            let raw = entry.raw.get("headers");
            for k in headers.keys() {
                let _ = writeln!(
                    out,
                    "  header:     {} = {} (sent to that URL)",
                    escaped(k),
                    origin(raw.and_then(|h| h.get(k)))
                );
            }
        }
    }
    for name in &entry.variables {
        let _ = writeln!(
            out,
            "  variable:   {} from your environment, in what runs or is contacted (its value now is part of this approval; a new value needs a new one; it is not shown)",
            escaped(name)
        );
    }
    if let Some(Value::Object(o)) = entry.raw.get("oauth") {
        shown_keys.push("oauth");
        let o_spec = &spec.oauth;
        let _ = writeln!(
            out,
            "  sign-in:    grant {} (tokens kept in your keyring)",
            o_spec.grant.as_str()
        );
        for (key, value) in o {
            let line = match (key.as_str(), value) {
                ("client_secret", v) => format!(
                    "client_secret = {} (sent to the issuer's token endpoint)",
                    origin(Some(v))
                ),
                ("identity", Value::Object(i)) => {
                    let mut parts = Vec::new();
                    for (k, v) in i {
                        if k == "client_secret" {
                            parts.push(format!("{k} = {}", origin(Some(v))));
                        } else {
                            parts.push(format!("{} = {}", escaped(k), escaped(&v.to_string())));
                        }
                    }
                    format!(
                        "identity provider (your ID token is sent there): {}",
                        parts.join(", ")
                    )
                }
                (k, v) => format!("{} = {}", escaped(k), escaped(&v.to_string())),
            };
            let _ = writeln!(out, "  oauth:      {line}");
        }
    }
    if spec.elicitation_defaults {
        shown_keys.push("elicitation");
        let _ = writeln!(
            out,
            "  answers:    the server's questions with its own defaults, without asking you (elicitation: accept_defaults)"
        );
    }
    match &entry.adapter {
        Some((path, Ok(sha))) => {
            let _ = writeln!(
                out,
                "  adapter:    {} (sha256 {sha}; loaded only with these bytes)",
                escaped(&path.display().to_string())
            );
        }
        Some((path, Err(e))) => {
            let _ = writeln!(
                out,
                "  adapter:    {} (unreadable: {})",
                escaped(&path.display().to_string()),
                escaped(e)
            );
        }
        None => {
            let _ = writeln!(out, "  adapter:    the built-in one");
        }
    }
    // Every other field, as written: nothing the entry says is left out of the review.
    for (key, value) in &entry.raw {
        if !shown_keys.contains(&key.as_str()) {
            let _ = writeln!(
                out,
                "  {:<11} {}",
                format!("{}:", escaped(key)),
                escaped(&value.to_string())
            );
        }
    }
    let _ = writeln!(out, "  digest:     {}", entry.digest);
}

/// A digest as listed: its first 16 characters, escaped (a pin file on disk may have been
/// edited into anything, and must not make the listing panic or rewrite the terminal).
fn short(digest: &str) -> String {
    escaped(&digest.chars().take(16).collect::<String>())
}

/// The `${VAR}` names a template uses.
fn variables(template: &str) -> Vec<String> {
    edgar_host::config::project::variable_names(template)
        .iter()
        .map(|n| escaped(n))
        .collect()
}

/// Control and invisible characters made visible, nothing cut: a prompt must show all
/// of what it approves (one escaper for every surface a human reviews).
fn escaped(s: &str) -> String {
    edgar_host::text::visible(s)
}

/// A shell word as a human would read it: single-quoted when it holds anything but plain
/// characters.
fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", escaped(s).replace('\'', r"'\''"))
    }
}

/// Why a pending tool waits: what changed since its pin, else what the guard found, else
/// that it is new.
fn pending_change(file: &PinFile, tool: &str, p: &pins::Pin) -> String {
    let changed = file
        .tools
        .get(tool)
        .filter(|old| old.digest != p.digest)
        .map(|old| pins::what_changed(&old.view, &p.view));
    let found = p
        .finding
        .as_ref()
        .map(|f| format!("the guard found {}", edgar_host::text::visible(f)));
    // A changed tool says what changed; its finding is shown apart (`finding`).
    changed.or(found).unwrap_or_else(|| "new tool".to_owned())
}

/// Shows each changed or new tool against its pin and accepts them if the human agrees.
fn approve_pins(
    pins: &PinStore,
    spec: &ServerSpec,
    project_dir: &std::path::Path,
    yes: bool,
) -> anyhow::Result<bool> {
    let Some(file) = pins.read(spec)? else {
        println!(
            "{}: nothing to approve (its tools are pinned when it is first discovered)",
            spec.name
        );
        return Ok(true);
    };
    if file.pending.is_empty() && file.pending_prompts.is_empty() {
        println!(
            "{}: nothing to approve; every tool and prompt matches its pin",
            spec.name
        );
        return Ok(true);
    }
    let mut out = String::new();
    describe_pending(&file, &mut out);
    describe_pending_prompts(&file, &mut out);
    print!("{out}");
    let question = match file.pending_prompts.len() {
        0 => format!(
            "Accept {} tool change(s) of '{}'?",
            file.pending.len(),
            spec.name
        ),
        n => format!(
            "Accept {} tool and {n} prompt change(s) of '{}'?",
            file.pending.len(),
            spec.name
        ),
    };
    if !confirm(&question, yes)? {
        println!("not approved; the tools stay quarantined");
        return Ok(false);
    }
    let accepted = pins.accept(spec, None)?;
    // The cache holds the tools as they were held back: discover again next time.
    ToolCache::new(paths::cache_dir().as_deref()).remove(spec);
    audit(
        "accept_pins",
        json!({"server": spec.name, "tools": accepted}),
    );
    println!("accepted: {}", accepted.join(", "));
    let lock = pins::read_lock(&project_dir.join(LOCK_FILE))?;
    if spec.project.is_some() && lock.is_some_and(|l| l.servers.contains_key(&spec.name)) {
        println!(
            "note: ./{LOCK_FILE} pins '{}' for this project and stays the authority; update it with `edgar mcp lock`",
            spec.name
        );
    }
    Ok(true)
}

fn describe_pending(file: &PinFile, out: &mut String) {
    use std::fmt::Write as _;
    for (tool, new) in &file.pending {
        if let Some(finding) = &new.finding {
            // The guard's finding, and the whole tool as it is (invisible characters
            // escaped), so the human sees what the finding is about.
            let _ = writeln!(
                out,
                "tool '{}': the guard found {}",
                escaped(tool),
                edgar_host::text::visible(finding)
            );
            let changed = file.tools.get(tool).is_some_and(|o| o.digest != new.digest);
            if !changed {
                for line in lines_of(Some(&new.view)) {
                    let _ = writeln!(out, "    {line}");
                }
                continue;
            }
        }
        against_pin(out, "tool", tool, file.tools.get(tool), new);
    }
}

/// One pending tool or prompt (`kind`) against its pin: what changed, part by part as a
/// diff (and said when only invisible characters did), or all of it when it is new.
fn against_pin(out: &mut String, kind: &str, name: &str, old: Option<&pins::Pin>, new: &pins::Pin) {
    use std::fmt::Write as _;
    let Some(old) = old else {
        let _ = writeln!(out, "{kind} '{}': new", escaped(name));
        for line in lines_of(Some(&new.view)) {
            let _ = writeln!(out, "    + {line}");
        }
        return;
    };
    let _ = writeln!(
        out,
        "{kind} '{}': {}",
        escaped(name),
        pins::what_changed(&old.view, &new.view)
    );
    for (key, label) in pins::VIEW_PARTS {
        let (a, b) = (old.view.get(key), new.view.get(key));
        if a != b {
            let _ = writeln!(out, "  {label}:");
            if without_invisible(a) == without_invisible(b) {
                let _ = writeln!(
                    out,
                    "    invisible characters changed (shown below as \\u{{...}} escapes; a model reads them, a reviewer does not see them)"
                );
            }
            for line in diff(&lines_of(a), &lines_of(b)) {
                let _ = writeln!(out, "    {line}");
            }
        }
    }
}

/// Each pending prompt against its pin, as tools are shown.
fn describe_pending_prompts(file: &PinFile, out: &mut String) {
    for (name, new) in &file.pending_prompts {
        against_pin(out, "prompt", name, file.prompts.get(name), new);
    }
}

/// A view part's text with control and invisible characters removed: what a terminal
/// shows of it.
fn without_invisible(v: Option<&Value>) -> String {
    let text = match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    text.chars()
        .filter(|c| !edgar_host::text::unsafe_to_show(*c) || *c == '\n')
        .collect()
}

/// A view part as lines: text as its own lines, JSON pretty-printed; escaped.
fn lines_of(v: Option<&Value>) -> Vec<String> {
    let text = match v {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => serde_json::to_string_pretty(other).unwrap_or_default(),
    };
    text.lines().map(escaped).collect()
}

/// A line diff (longest common subsequence): `- old`, `+ new`, `  same`.
fn diff(a: &[String], b: &[String]) -> Vec<String> {
    // Bounded: a pathological schema must not make the prompt quadratic in memory.
    const MAX_LINES: usize = 2000;
    if a.len() > MAX_LINES || b.len() > MAX_LINES {
        return a
            .iter()
            .map(|l| format!("- {l}"))
            .chain(b.iter().map(|l| format!("+ {l}")))
            .collect();
    }
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push(format!("  {}", a[i]));
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push(format!("+ {}", b[j]));
            j += 1;
        } else {
            out.push(format!("- {}", a[i]));
            i += 1;
        }
    }
    out
}

pub fn revoke(config: &Config, name: &str) -> anyhow::Result<ExitCode> {
    let mut approvals = Approvals::load(Some(&state()?));
    if approvals.revoke(&config.project_dir, name)? {
        audit(
            "revoke",
            json!({"server": name, "project": config.project_dir}),
        );
        println!(
            "revoked the approval of {name} in {}",
            config.project_dir.display()
        );
        Ok(ExitCode::SUCCESS)
    } else {
        bail!(
            "'{name}' has no approval in {}",
            config.project_dir.display()
        )
    }
}

pub fn show_pins(
    config: &Config,
    name: Option<&str>,
    json_out: bool,
    gateway_config: Option<&std::path::Path>,
) -> anyhow::Result<ExitCode> {
    let pins = pin_store(config)?.with_shared(shared_files(gateway_config)?);
    let specs: Vec<&ServerSpec> = match name {
        Some(n) => vec![
            config
                .server(n)
                .with_context(|| format!("no MCP server named '{n}' may run here"))?,
        ],
        None => config.servers.iter().collect(),
    };
    let mut all = serde_json::Map::new();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for spec in specs {
        let Some(file) = pins.read(spec)? else {
            if !json_out {
                writeln!(out, "{}\tnot pinned yet (never discovered)", spec.name)?;
            }
            continue;
        };
        if json_out {
            all.insert(
                spec.name.clone(),
                json!({
                    "launch": file.launch,
                    "tools": file.tools.iter().map(|(k, p)| (k.clone(), json!(p.digest))).collect::<serde_json::Map<_, _>>(),
                    "pending": file.pending.iter().map(|(k, p)| {
                        let change = pending_change(&file, k, p);
                        (k.clone(), json!({"digest": p.digest, "change": change, "finding": p.finding}))
                    }).collect::<serde_json::Map<_, _>>(),
                }),
            );
            continue;
        }
        writeln!(
            out,
            "{}\t{} pinned, {} waiting for approval",
            spec.name,
            file.tools.len(),
            file.pending.len()
        )?;
        for (tool, p) in &file.tools {
            writeln!(out, "  {}\t{}", escaped(tool), short(&p.digest))?;
        }
        for (tool, p) in &file.pending {
            let change = pending_change(&file, tool, p);
            writeln!(
                out,
                "  {}\t{}\tquarantined: {change}",
                escaped(tool),
                short(&p.digest)
            )?;
            if let Some(f) = &p.finding
                && !change.starts_with("the guard found")
            {
                writeln!(
                    out,
                    "  \t\tthe guard found {}",
                    edgar_host::text::visible(f)
                )?;
            }
        }
    }
    if json_out {
        serde_json::to_writer_pretty(&mut out, &Value::Object(all))?;
        writeln!(out)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Writes `./.mcp.lock` from the pins of this project's approved servers, discovering
/// those never discovered.
pub fn lock(config: &Config, cwd: &std::path::Path) -> anyhow::Result<ExitCode> {
    let pins = pin_store(config)?;
    let project: Vec<&ServerSpec> = config
        .servers
        .iter()
        .filter(|s| s.project.is_some())
        .collect();
    if project.is_empty() {
        bail!("this project has no approved servers to lock (`edgar mcp list` shows them)");
    }
    let session = session(config, cwd);
    let mut lock = LockFile {
        format: 1,
        ..LockFile::default()
    };
    runtime()?.block_on(async {
        let discover = async {
            for spec in &project {
                if pins.read(spec)?.is_none() {
                    session.tools(&spec.name).await?;
                }
                // Its prompts are pinned by a listing; a server without any says so
                // with an error, and the lock then pins that it has none.
                let _ = session.prompts(&spec.name).await;
            }
            anyhow::Ok(())
        };
        let result = super::context::guarded(&session, discover).await;
        session.close().await;
        result
    })?;
    let mut pending = 0;
    for spec in &project {
        let file = pins
            .read(spec)?
            .with_context(|| format!("'{}' has no pins", spec.name))?;
        pending += file.pending.len();
        lock.servers
            .insert(spec.name.clone(), LockedServer::from_pins(&file));
    }
    let path = cwd.join(LOCK_FILE);
    pins::write_lock(&path, &lock)?;
    audit(
        "lock",
        json!({"file": path, "servers": lock.servers.keys().collect::<Vec<_>>()}),
    );
    println!(
        "wrote {} ({} servers, {} tools)",
        path.display(),
        lock.servers.len(),
        lock.servers.values().map(|s| s.tools.len()).sum::<usize>()
    );
    if pending > 0 {
        println!("note: {pending} tool change(s) waiting for approval are not in the lock");
    }
    Ok(ExitCode::SUCCESS)
}

/// Discovers every server the lock pins, afresh, and reports each difference.
pub fn verify(config: &Config, cwd: &std::path::Path) -> anyhow::Result<ExitCode> {
    let path = cwd.join(LOCK_FILE);
    let lock = pins::read_lock(&path)?.with_context(|| {
        format!(
            "no {} here; write one with `edgar mcp lock`",
            path.display()
        )
    })?;
    let session = session(config, cwd);
    let drift = runtime()?.block_on(async {
        let d = super::context::guarded(&session, drift(config, &lock, &session)).await;
        session.close().await;
        d
    });
    if drift.is_empty() {
        println!(
            "{} matches: {} servers, {} tools",
            path.display(),
            lock.servers.len(),
            lock.servers.values().map(|s| s.tools.len()).sum::<usize>()
        );
        return Ok(ExitCode::SUCCESS);
    }
    for d in &drift {
        println!("drift: {d}");
    }
    audit("verify_drift", json!({"file": path, "drift": drift.len()}));
    eprintln!(
        "edgar: {} does not match ({} differences)",
        path.display(),
        drift.len()
    );
    Ok(ExitCode::FAILURE)
}

async fn drift(config: &Config, lock: &LockFile, session: &Session) -> Vec<String> {
    let mut out = Vec::new();
    for spec in config.servers.iter().filter(|s| s.project.is_some()) {
        if !lock.servers.contains_key(&spec.name) {
            out.push(format!(
                "{}: a project server the lock does not pin",
                spec.name
            ));
        }
    }
    for (name, locked) in &lock.servers {
        let Some(spec) = config.server(name) else {
            let why = match config.held(name).map(|h| &h.why) {
                Some(Hold::NeedsApproval(_)) => "needs approval",
                Some(Hold::Blocked { .. }) => "is blocked by policy",
                Some(Hold::Shadowed { .. }) => "is shadowed by a user server",
                Some(Hold::Refused { .. }) => "is refused (edgar mcp list says why)",
                None => "is not configured",
            };
            out.push(format!("{name}: pinned by the lock but {why}"));
            continue;
        };
        if spec.digest() != locked.launch {
            out.push(format!(
                "{name}: its command or URL changed since the lock was written"
            ));
        }
        match session.refresh(name).await {
            Ok(tools) => {
                let mut seen = std::collections::BTreeSet::new();
                for t in tools.iter() {
                    seen.insert(t.tool().to_owned());
                }
                for q in session.quarantined(name) {
                    seen.insert(q.tool.clone());
                    out.push(format!("{name}/{}: {}", escaped(&q.tool), q.change));
                }
                for tool in locked.tools.keys() {
                    if !seen.contains(tool) {
                        out.push(format!(
                            "{name}/{}: pinned by the lock but no longer listed",
                            escaped(tool)
                        ));
                    }
                }
            }
            Err(e) => out.push(format!("{name}: cannot be discovered: {e}")),
        }
        // A prompt the lock pins that is not offered as it was pinned: changed, held
        // back, or gone.
        if let Some(prompts) = locked.prompts.as_ref().filter(|p| !p.is_empty()) {
            let offered: std::collections::BTreeSet<String> = match session.prompts(name).await {
                Ok(list) => list.into_iter().map(|p| p.name).collect(),
                Err(e) => {
                    out.push(format!("{name}: its prompts cannot be listed: {e}"));
                    continue;
                }
            };
            for prompt in prompts.keys().filter(|p| !offered.contains(*p)) {
                out.push(format!(
                    "{name}/prompt {}: pinned by the lock but not offered as pinned",
                    escaped(prompt)
                ));
            }
        }
    }
    out
}

/// The shared state a team gateway config names, and its key; an error when it names
/// none.
fn gateway_state(
    path: &std::path::Path,
) -> anyhow::Result<(edgar_host::state::Database, edgar_host::state::StateKey)> {
    let config = edgar_host::gateway::team::TeamConfig::load(path)?;
    let Some(state) = config.state else {
        anyhow::bail!(
            "{} names no shared \"state\": its gateway writes the audit trail of the user it runs as (`edgar audit verify` as that user)",
            path.display()
        );
    };
    let key = edgar_host::state::StateKey::load(&state.key_file)?;
    // A database no replica has used yet has no tables: made here, as a replica would.
    runtime()?.block_on(state.database.migrate())?;
    Ok((state.database, key))
}

pub fn audit_verify(gateway_config: Option<&std::path::Path>) -> anyhow::Result<ExitCode> {
    if let Some(path) = gateway_config {
        let (db, key) = gateway_state(path)?;
        let n = runtime()?.block_on(edgar_host::state::trail::verify(&db, &key.audit_key()))?;
        println!(
            "{}: the shared audit trail is intact, {n} events (chained with HMAC-SHA256 under a key derived from the state key)",
            db.describe()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let log = audit_log(&state()?);
    let n = log.verify()?;
    let how = if log.is_keyed() {
        "chained with HMAC-SHA256 under the key in your credential store"
    } else {
        "chained with plain sha256: no audit key in a credential store, so a process that can write these files could rewrite them unseen"
    };
    println!("{}: intact, {n} events ({how})", log.path().display());
    Ok(ExitCode::SUCCESS)
}

pub fn audit_tail(
    n: usize,
    json_out: bool,
    gateway_config: Option<&std::path::Path>,
) -> anyhow::Result<ExitCode> {
    let events = match gateway_config {
        Some(path) => {
            let (db, _) = gateway_state(path)?;
            runtime()?.block_on(edgar_host::state::trail::tail(&db, n))?
        }
        None => audit_log(&state()?).tail(n)?,
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for e in events {
        if json_out {
            writeln!(out, "{e}")?;
            continue;
        }
        let time = e
            .get("time")
            .and_then(Value::as_u64)
            .map(|ms| edgar_host::text::rfc3339(ms / 1000))
            .unwrap_or_default();
        let event = e.get("event").and_then(Value::as_str).unwrap_or("?");
        let mut details: Vec<String> = Vec::new();
        if let Some(map) = e.as_object() {
            for (k, v) in map {
                if matches!(k.as_str(), "seq" | "time" | "event" | "prev") {
                    continue;
                }
                let v = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                details.push(format!("{k}={}", escaped(&v)));
            }
        }
        writeln!(out, "{time}  {event:<12} {}", details.join(" "))?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_shows_everything_and_escapes_control_characters() {
        assert_eq!(quote("sh"), "sh");
        assert_eq!(quote("echo pwned > ~/x"), "'echo pwned > ~/x'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote("a\u{1b}]52;c;x\u{7}"), r"'a\u{1b}]52;c;x\u{7}'");
    }

    #[test]
    fn diff_marks_removed_added_and_kept_lines() {
        let a: Vec<String> = ["one", "two", "three"].map(String::from).to_vec();
        let b: Vec<String> = ["one", "2", "three", "four"].map(String::from).to_vec();
        assert_eq!(diff(&a, &b), ["  one", "+ 2", "- two", "  three", "+ four"]);
    }

    #[test]
    fn an_edited_pin_digest_is_listed_without_panicking() {
        assert_eq!(short("0123456789abcdef0123"), "0123456789abcdef");
        assert_eq!(short("ab"), "ab");
        assert_eq!(short("\u{1b}[2J"), "\\u{1b}[2J");
    }

    #[test]
    fn variables_are_named_not_expanded() {
        assert_eq!(variables("Bearer ${TOKEN}"), ["TOKEN"]);
        assert_eq!(variables("${A:-x}/${B}"), ["A", "B"]);
        assert!(variables("plain").is_empty());
    }
}
