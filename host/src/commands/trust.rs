//! `edgar mcp approve|revoke|pins|lock|verify` and `edgar audit`: the human side of
//! project trust, tool pins and the audit trail. Approval prompts show exactly what would
//! run or be contacted, with control characters escaped (a project file or a server
//! could otherwise rewrite the terminal under the question).

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{Context, bail};
use edgar_host::config::{Config, Hold, ProjectEntry, ServerSpec};
use edgar_host::mcp::cache::{ToolCache, now};
use edgar_host::mcp::client::Session;
use edgar_host::paths;
use edgar_host::trust::approval::Approvals;
use edgar_host::trust::pins::{self, LOCK_FILE, LockFile, LockedServer, PinStore, SharedPins};
use edgar_host::trust::state_dir;
use serde_json::{Value, json};

use super::context::{audit, audit_log, confirm, runtime, session};

mod describe;

pub(super) use describe::quote;
use describe::{
    describe_entry, describe_pending, describe_pending_prompts, escaped, pending_change, short,
    target_line,
};

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
    // Declined (or not asked, off a terminal) / could not even be shown.
    let (mut refused, mut unshown) = (false, false);
    for target in &targets {
        let done = if let Some(held) = config.held(target) {
            match &held.why {
                // One entry that cannot be shown (an unset variable) must not hide the rest.
                Hold::NeedsApproval(entry) => match approve_entry(entry, yes) {
                    Ok(done) => {
                        project_approved |= done;
                        done
                    }
                    Err(e) => {
                        eprintln!("edgar: {e:#}");
                        unshown = true;
                        continue;
                    }
                },
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
    Ok(if refused || unshown {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Shows a project entry as it would run and records the approval if the human agrees.
fn approve_entry(entry: &ProjectEntry, yes: bool) -> anyhow::Result<bool> {
    // What runs is shown expanded, so an unset variable leaves nothing to show.
    let spec = entry.spec().map_err(|e| {
        anyhow::anyhow!(
            "{e}; an entry is approved as it would run, so there is nothing to approve until that is fixed: then run `edgar mcp approve {}` again",
            entry.name
        )
    })?;
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
        describe::escaped(&entry.name),
        describe::escaped(&entry.project.display().to_string())
    );
    Ok(true)
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

pub fn revoke(config: &Config, name: &str) -> anyhow::Result<ExitCode> {
    let mut approvals = Approvals::load(Some(&state()?));
    if approvals.revoke(&config.project_dir, name)? {
        audit(
            "revoke",
            json!({"server": name, "project": config.project_dir}),
        );
        println!(
            "revoked the approval of {} in {}",
            describe::escaped(name),
            describe::escaped(&config.project_dir.display().to_string())
        );
        Ok(ExitCode::SUCCESS)
    } else {
        bail!(
            "'{}' has no approval in {}",
            describe::escaped(name),
            describe::escaped(&config.project_dir.display().to_string())
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
    println!("wrote {} ({})", path.display(), pinned(&lock));
    if pending > 0 {
        println!("note: {pending} tool change(s) waiting for approval are not in the lock");
    }
    Ok(ExitCode::SUCCESS)
}

/// What a lock pins, in words: "1 server, 9 tools".
fn pinned(lock: &pins::LockFile) -> String {
    use edgar_host::text::counted;
    format!(
        "{}, {}",
        counted(lock.servers.len(), "server"),
        counted(lock.servers.values().map(|s| s.tools.len()).sum(), "tool")
    )
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
        println!("{} matches: {}", path.display(), pinned(&lock));
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
    let dir = state()?;
    let log = audit_log(&dir);
    let n = log.verify()?;
    let key_file = dir.join(edgar_host::auth::audit_key::FILE);
    let how = if !log.is_keyed() {
        "chained with plain sha256: it has no key yet".to_owned()
    } else if key_file.exists() {
        format!(
            "chained with HMAC-SHA256 under the key in {} (no credential store here: a process that can read your files can read that key)",
            describe::escaped(&key_file.display().to_string())
        )
    } else {
        "chained with HMAC-SHA256 under the key in your credential store".to_owned()
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
