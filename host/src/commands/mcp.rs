//! `edgar mcp ...`: manage servers, list their tools, call one.
//!
//! Exit codes: 0 success; 1 an error (printed as one `edgar: ...` line on stderr);
//! 2 a usage error; 3 the tool ran but reported an error (`isError`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use edgar_host::config::{ConfigPaths, Held, Hold, Transport, edit};
use edgar_host::mcp::client::{ServerState, Session};
use serde_json::{Value, json};

use super::context::{guarded, load, note_held, runtime, session};
use super::output::{print_blocks, print_json};
use super::sign_in::SignIn;
use crate::cli::{McpCommand, ScopeArg};

/// Exit code for a tool result with `isError`.
const TOOL_ERROR: u8 = 3;

pub fn run(cmd: McpCommand) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let paths = ConfigPaths::for_project(&cwd);
    match cmd {
        McpCommand::Serve {
            print_config,
            reserve,
            servers,
            expose,
            transparent,
            http,
            gateway_config,
            unix,
        } => super::serve::run(
            print_config,
            reserve,
            &servers,
            expose.is_some(),
            transparent,
            super::serve::Listen {
                http,
                gateway_config,
                unix,
            },
        ),
        McpCommand::ExampleServer { root, conformance } => {
            edgar_host::mcp::example_server::serve(root.as_deref().unwrap_or(&cwd), conformance)?;
            Ok(ExitCode::SUCCESS)
        }
        McpCommand::Add {
            name,
            target,
            url,
            transport,
            headers,
            env,
            scope,
            sandbox,
            command,
        } => {
            // Claude Code's form, `NAME URL`: only a URL goes there; a command goes after `--`.
            if let Some(t) = &target
                && !(t.starts_with("http://") || t.starts_with("https://"))
            {
                bail!(
                    "{} is not an http:// or https:// URL; a command goes after `--`: edgar mcp add {name} -- {t} ...",
                    edgar_host::text::shown(t)
                );
            }
            add(
                &paths,
                &name,
                url.or(target),
                transport,
                headers,
                env,
                &scope,
                &sandbox,
                command,
            )
        }
        McpCommand::Remove { name, scope } => {
            let file = scope_file(&paths, &scope)?;
            if edit::remove_server(&file, &name)? {
                println!("removed {name} from {}", file.display());
                Ok(ExitCode::SUCCESS)
            } else {
                // Where it is, if it is in the other file.
                let other = ScopeArg {
                    project: !scope.project,
                };
                let elsewhere = scope_file(&paths, &other)
                    .ok()
                    .filter(|f| edit::has_server(f, &name));
                match elsewhere {
                    Some(f) => bail!(
                        "no server named '{name}' in {}; it is in {}{}",
                        file.display(),
                        f.display(),
                        if other.project {
                            ": add --project"
                        } else {
                            ": drop --project"
                        }
                    ),
                    None => bail!("no server named '{name}' in {}", file.display()),
                }
            }
        }
        McpCommand::Scan {
            json,
            sarif,
            discover,
            yes,
            unconfined,
        } => super::inventory::run(
            &cwd,
            json,
            sarif,
            discover.then_some(super::inventory::Discover { yes, unconfined }),
        ),
        McpCommand::Get { name } => {
            let config = load(&paths)?;
            let Some(spec) = config.server(&name) else {
                match config.held(&name) {
                    Some(h) => bail!(
                        "'{name}' ({}) does not run: {}",
                        h.source.display(),
                        held_text(h)
                    ),
                    None => bail!("no MCP server named '{name}' is configured"),
                }
            };
            let mut out =
                json!({"name": spec.name, "type": spec.transport.kind(), "source": spec.source});
            match &spec.transport {
                Transport::Stdio {
                    env,
                    cwd,
                    env_inherit,
                    ..
                } => {
                    out["env_inherit"] = json!(env_inherit);
                    // As written (an expanded ${VAR} may be a secret), with what is
                    // written there as a credential masked.
                    out["command"] = json!(spec.written.target);
                    let args = super::inventory::secrets_masked(&name, &spec.written.args)?;
                    out["args"] = json!(edgar_host::redact::args(&args));
                    out["env"] = json!(
                        env.keys()
                            .map(|k| (k.clone(), json!("***")))
                            .collect::<serde_json::Map<_, _>>()
                    );
                    if let Some(cwd) = cwd {
                        out["cwd"] = json!(cwd);
                    }
                    out["confinement"] = json!(edgar_host::mcp::client::confinement_line(spec));
                }
                Transport::Http { headers, .. } | Transport::Sse { headers, .. } => {
                    let url = super::inventory::secrets_masked(
                        &name,
                        std::slice::from_ref(&spec.written.target),
                    )?
                    .pop()
                    .unwrap_or_default();
                    out["url"] = json!(edgar_host::redact::url(&url));
                    out["headers"] = json!(
                        headers
                            .keys()
                            .map(|k| (k.clone(), json!("***")))
                            .collect::<serde_json::Map<_, _>>()
                    );
                }
            }
            let o = &spec.oauth;
            if o.client_id.is_some() || o.client_metadata_url.is_some() || o.callback_port.is_some()
            {
                out["oauth"] = json!({
                    "client_id": o.client_id,
                    "client_secret": o.client_secret.as_ref().map(|_| "***"),
                    "client_metadata_url": o.client_metadata_url,
                    "callback_port": o.callback_port,
                });
            }
            if o.grant != edgar_host::config::Grant::AuthorizationCode {
                out["oauth"]["grant"] = json!(o.grant.as_str());
            }
            if let Some(t) = &o.token_endpoint {
                out["oauth"]["token_endpoint"] = json!(t);
            }
            if let Some(a) = &o.audience {
                out["oauth"]["audience"] = json!(a);
            }
            if spec.per_user {
                out["per_user"] = json!(true);
            }
            out["startup_timeout_sec"] = json!(spec.startup_timeout.as_secs_f64());
            out["tool_timeout_sec"] = json!(spec.tool_timeout.as_secs_f64());
            out["digest"] = json!(spec.digest());
            print_json(&out)?;
            Ok(ExitCode::SUCCESS)
        }
        McpCommand::List { json, timings } => {
            let config = load(&paths)?;
            let session = session(&config, &cwd);
            let status = session.status();
            let sign_ins = runtime()?.block_on(super::sign_in::states(&config));
            if json {
                let v: Vec<Value> = status
                    .iter()
                    .zip(&sign_ins)
                    .map(|(s, sign_in)| {
                        let (state, detail) = describe(&s.state);
                        let mut v = json!({"name": s.name, "type": s.kind, "state": state, "detail": detail});
                        if let Some(spec) = config.server(&s.name)
                            && matches!(spec.transport, Transport::Stdio { .. })
                        {
                            v["confinement"] =
                                json!(edgar_host::mcp::client::confinement_line(spec));
                        }
                        if let Some(si) = sign_in {
                            v["sign_in"] = si.json();
                        }
                        if timings && let Some(t) = session.timings(&s.name) {
                            v["timings"] = json!(t);
                        }
                        v
                    })
                    .chain(config.held.iter().map(|h| {
                        json!({"name": h.name, "type": h.kind, "state": held_state(h),
                               "detail": held_text(h), "source": h.source})
                    }))
                    .collect();
                print_json(&json!(v))?;
            } else {
                let mut out = std::io::BufWriter::new(std::io::stdout().lock());
                for h in &config.held {
                    writeln!(
                        out,
                        "{}\t{}\t{}: {}",
                        h.name,
                        h.kind,
                        held_state(h),
                        held_text(h)
                    )?;
                }
                if status.is_empty() && config.held.is_empty() {
                    writeln!(
                        out,
                        "no MCP servers configured; add one with `edgar mcp add`"
                    )?;
                }
                if timings {
                    print_timings(&mut out, &session, &status)?;
                    out.flush()?;
                    return Ok(ExitCode::SUCCESS);
                }
                for (s, sign_in) in status.iter().zip(&sign_ins) {
                    let (state, detail) = describe(&s.state);
                    // How a local server's process runs, where people look (`get` has
                    // the whole line).
                    let confined = match config
                        .server(&s.name)
                        .map(|spec| (&spec.transport, &spec.sandbox))
                    {
                        Some((Transport::Stdio { .. }, edgar_host::config::Sandbox::On(_))) => {
                            "confined\t"
                        }
                        Some((Transport::Stdio { .. }, _)) => "NOT confined\t",
                        _ => "",
                    };
                    writeln!(
                        out,
                        "{}\t{}\t{confined}{}{}{}",
                        s.name,
                        s.kind,
                        state,
                        detail.map(|d| format!(": {d}")).unwrap_or_default(),
                        sign_in
                            .as_ref()
                            .map(|si| format!("\t{}", si.text()))
                            .unwrap_or_default()
                    )?;
                }
                out.flush()?;
                // Why the store cannot be read is the same for every server: say it once.
                if let Some(why) = sign_ins.iter().flatten().find_map(SignIn::unknown) {
                    eprintln!("edgar: sign-in state unknown: {why}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        McpCommand::Login {
            name,
            no_browser,
            browser_fetch,
        } => {
            let config = load(&paths)?;
            runtime()?.block_on(super::sign_in::login(
                &config,
                &name,
                no_browser,
                browser_fetch,
            ))
        }
        McpCommand::Logout { name } => {
            let config = load(&paths)?;
            runtime()?.block_on(super::sign_in::logout(&config, &name))
        }
        McpCommand::SetKey { name, file, remove } => {
            let config = load(&paths)?;
            runtime()?.block_on(super::sign_in::set_key(
                &config,
                &name,
                file.as_deref(),
                remove,
            ))
        }
        McpCommand::Approve {
            name,
            all: _,
            yes,
            gateway_config,
        } => super::trust::approve(
            &load(&paths)?,
            name.as_deref(),
            yes,
            gateway_config.as_deref(),
        ),
        McpCommand::Revoke { name } => super::trust::revoke(&load(&paths)?, &name),
        McpCommand::Pins {
            name,
            json,
            gateway_config,
        } => super::trust::show_pins(
            &load(&paths)?,
            name.as_deref(),
            json,
            gateway_config.as_deref(),
        ),
        McpCommand::Lock => super::trust::lock(&load(&paths)?, &cwd),
        McpCommand::Verify => super::trust::verify(&load(&paths)?, &cwd),
        McpCommand::Reset { name } => runtime()?.block_on(async {
            let config = load(&paths)?;
            let session = session(&config, &cwd);
            session.reset(&name).await?;
            println!("{name} will start again when it is next needed");
            Ok(ExitCode::SUCCESS)
        }),
        McpCommand::Tools {
            name,
            refresh,
            json,
        } => runtime()?.block_on(async {
            let config = load(&paths)?;
            note_held(&config);
            let session = session(&config, &cwd);
            let result = guarded(&session, tools(&session, name.as_deref(), refresh, json)).await;
            session.close().await;
            result
        }),
        McpCommand::Prompts { name, json } => {
            super::content::prompts(&load(&paths)?, &cwd, name.as_deref(), json)
        }
        McpCommand::Prompt {
            name,
            arguments,
            json,
        } => super::content::prompt(&load(&paths)?, &cwd, &name, &arguments, json),
        McpCommand::Resources { name, json } => {
            super::content::resources(&load(&paths)?, &cwd, name.as_deref(), json)
        }
        McpCommand::Read { uri, server, json } => {
            super::content::read(&load(&paths)?, &cwd, &uri, server.as_deref(), json)
        }
        McpCommand::Call {
            tool,
            arguments,
            json,
        } => runtime()?.block_on(async {
            let given = super::arguments::parse(&arguments)?;
            let config = load(&paths)?;
            let session = session(&config, &cwd);
            let result = guarded(&session, async {
                let arguments = match given {
                    super::arguments::Given::Json(v) => v,
                    super::arguments::Given::Pairs(p) => {
                        super::arguments::typed(p, &session.input_schema(&tool).await?)
                    }
                };
                session.call(&tool, arguments).await
            })
            .await;
            session.close().await;
            let output = result?;
            if json {
                print_json(&serde_json::to_value(&output)?)?;
            } else {
                print_blocks(&output.content)?;
            }
            if output.is_error {
                refused_by_sandbox_note(&config, &tool, &output.content);
            }
            Ok(if output.is_error {
                ExitCode::from(TOOL_ERROR)
            } else {
                ExitCode::SUCCESS
            })
        }),
    }
}

/// A confined server's tool error that reads like a refused file (`EACCES`, a read-only
/// file system) gets a note on stderr saying how the server runs and which keys allow
/// more: the sandbox, not the server, is then the likely cause. Only a hint for the
/// person at the terminal; the result itself is printed as the server sent it.
fn refused_by_sandbox_note(
    config: &edgar_host::config::Config,
    tool: &str,
    content: &[edgar_host::guard::ContentBlock],
) {
    const REFUSALS: &[&str] = &[
        "EACCES",
        "EPERM",
        "EROFS",
        "Permission denied",
        "permission denied",
        "Operation not permitted",
        "Read-only file system",
    ];
    let server = tool
        .split_once('/')
        .or_else(|| tool.split_once("__"))
        .map_or(tool, |(s, _)| s);
    let Some(spec) = config.server(server) else {
        return;
    };
    if !matches!(spec.sandbox, edgar_host::config::Sandbox::On(_)) {
        return;
    }
    let refused = content.iter().any(|b| match b {
        edgar_host::guard::ContentBlock::Text { text } => REFUSALS.iter().any(|r| text.contains(r)),
        _ => false,
    });
    if refused {
        eprintln!(
            "note: {server} runs {}: if it was refused a file it needs, allow it in its entry's \"sandbox\" (\"read\", \"write\") or set \"sandbox\": \"off\"",
            edgar_host::mcp::client::confinement_line(spec)
        );
    }
}

async fn tools(
    session: &Session,
    name: Option<&str>,
    refresh: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let targets: Vec<String> = match name {
        Some(n) => vec![n.to_owned()],
        None => session.server_names().map(str::to_owned).collect(),
    };
    let mut names = Vec::new();
    let mut failed = false;
    if name.is_some() || refresh {
        // Every server at once (each under its own deadline), with progress on a terminal.
        let results = super::progress::each(&targets, |t| async move {
            if refresh {
                session.refresh(&t).await
            } else {
                session.tools(&t).await
            }
        })
        .await;
        for result in results {
            match result {
                Ok(list) => names.extend(list.iter().map(|t| {
                    (
                        t.name().to_owned(),
                        t.server().to_owned(),
                        t.tool().to_owned(),
                    )
                })),
                Err(e) => {
                    failed = true;
                    eprintln!("edgar: {e}");
                }
            }
        }
    } else {
        // A person asked for the list: every live server's tools, in one listing, each
        // server under its own startup deadline (the prompt's 1.5 s budget is for a
        // harness's first prompt, not a human's question). A server in its failure
        // cool-down is left alone, so a dead one costs its deadline once.
        let ready = session.tool_names_within(std::time::Duration::MAX).await;
        names.extend(ready.names.into_iter().map(|n| (n.name, n.server, n.tool)));
        for e in &ready.failures {
            failed = true;
            eprintln!("edgar: {e}");
        }
        // With no budget nothing is left pending: every server answered or failed.
        debug_assert!(ready.pending.is_empty());
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if json {
        let v: Vec<Value> = names
            .iter()
            .map(|(n, s, t)| json!({"name": n, "server": s, "tool": t}))
            .collect();
        serde_json::to_writer_pretty(&mut out, &v)?;
        writeln!(out)?;
    } else {
        for (n, _, _) in &names {
            writeln!(out, "{n}")?;
        }
    }
    out.flush()?;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

#[allow(clippy::too_many_arguments)]
fn add(
    paths: &ConfigPaths,
    name: &str,
    url: Option<String>,
    transport: Option<String>,
    headers: Vec<String>,
    env: Vec<String>,
    scope: &ScopeArg,
    sandbox: &crate::cli::SandboxArg,
    command: Vec<String>,
) -> anyhow::Result<ExitCode> {
    let confined = !sandbox.read.is_empty() || !sandbox.write.is_empty() || !sandbox.net.is_empty();
    let net = match sandbox.net.as_slice() {
        [] => json!("none"),
        [word] if word == "none" || word == "all" => json!(word),
        hosts if hosts.iter().any(|h| h == "none" || h == "all") => {
            bail!("--net none or --net all stands alone; --net HOST:PORT may repeat")
        }
        hosts => json!(hosts),
    };
    if (confined || sandbox.no_sandbox) && url.is_some() {
        bail!("--read, --write, --net and --no-sandbox apply to stdio servers (a command)");
    }
    if url.is_none() && (transport.is_some() || !headers.is_empty()) {
        bail!("--transport and --header apply to an HTTP server (--url URL)");
    }
    if url.is_some() && !env.is_empty() {
        bail!("--env applies to a stdio server (a command after `--`)");
    }
    let entry = match (url, command.split_first()) {
        (Some(url), None) => {
            let mut h = serde_json::Map::new();
            for header in headers {
                let (k, v) = header
                    .split_once(':')
                    .with_context(|| format!("header {header:?} is not `Name: value`"))?;
                h.insert(k.trim().to_owned(), json!(v.trim()));
            }
            json!({"type": transport.unwrap_or_else(|| "http".into()), "url": url, "headers": h})
        }
        (None, Some((cmd, args))) => {
            let mut e = serde_json::Map::new();
            for kv in env {
                let (k, v) = kv
                    .split_once('=')
                    .with_context(|| format!("--env {kv:?} is not KEY=VALUE"))?;
                e.insert(k.to_owned(), json!(v));
            }
            let mut entry = json!({"command": cmd, "args": args, "env": e});
            if sandbox.no_sandbox {
                entry["sandbox"] = json!("off");
            } else if confined {
                entry["sandbox"] = json!({"read": sandbox.read, "write": sandbox.write,
                                          "net": net});
            }
            entry
        }
        (None, None) => bail!("give the server's command after `--`, or --url URL"),
        (Some(_), Some(_)) => bail!("give either --url or a command, not both"),
    };
    // Said once it is added: a user's stdio server with no profile (a project's gets
    // edgar's default one).
    let entry_unconfined =
        !scope.project && entry.get("command").is_some() && entry.get("sandbox").is_none();
    let file = scope_file(paths, scope)?;
    edit::add_server(&file, name, entry)?;
    // Re-read so a bad entry (for example an unset ${VAR}) is reported now, and taken out
    // again: the file is left as it was, not unreadable.
    let config = match edgar_host::trust::admit::load(paths, None) {
        Ok(config) => config,
        Err(e) => {
            edit::remove_server(&file, name)?;
            return Err(anyhow::Error::new(e).context(format!("{name} was not added")));
        }
    };
    println!("added {name} to {}", file.display());
    // A path that is not there grants nothing (a typo shows up only as a denied start);
    // checked as the config read it (`~/`, `${VAR}` and relative paths resolved).
    if let Some(spec) = config.server(name)
        && let edgar_host::config::Sandbox::On(profile) = &spec.sandbox
        && !profile.implied
    {
        let named = (profile.read.iter().map(|p| ("--read", p)))
            .chain(profile.write.iter().map(|p| ("--write", p)));
        for (flag, path) in named.filter(|(_, p)| !p.exists()) {
            eprintln!(
                "note: {flag} {} does not exist: it allows nothing until it does",
                edgar_host::text::shown_up_to(&path.display().to_string(), 240)
            );
        }
    }
    // A misspelled program shows up only at the first start: said now.
    if let Some(edgar_host::config::Transport::Stdio {
        command, env, cwd, ..
    }) = config.server(name).map(|s| &s.transport)
    {
        let path = env
            .get("PATH")
            .map(std::ffi::OsString::from)
            .or_else(|| std::env::var_os("PATH"));
        if edgar_host::trust::policy::resolve_program(command, path.as_deref(), cwd.as_deref())
            .is_none()
        {
            let hint = match (command.contains('/'), cwd.is_some()) {
                (false, _) => "no executable file of that name is on PATH",
                (true, _) if Path::new(command).is_absolute() => {
                    "no executable file is at that path"
                }
                (true, true) => "no executable file is at that path from its cwd",
                (true, false) => {
                    "a relative path, and a server without a cwd runs in a private empty directory"
                }
            };
            eprintln!(
                "note: {} was not found ({hint}): {name} will not start until it is",
                edgar_host::text::shown_up_to(command, 240)
            );
        }
    }
    if entry_unconfined {
        eprintln!(
            "note: {name} runs NOT confined (a user server is not, unless its entry has a \"sandbox\"): --read, --write and --net confine it, --no-sandbox says so"
        );
    }
    if scope.project {
        println!(
            "it runs once approved: `edgar mcp approve {name}` shows what it would run and asks"
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn scope_file(paths: &ConfigPaths, scope: &ScopeArg) -> anyhow::Result<PathBuf> {
    if scope.project {
        return Ok(paths.project.clone());
    }
    paths
        .user
        .clone()
        .context("no user config directory: set HOME or XDG_CONFIG_HOME, or use --project")
}

fn held_state(h: &Held) -> &'static str {
    match h.why {
        Hold::NeedsApproval(_) => "needs approval",
        Hold::Blocked { .. } => "blocked by policy",
        Hold::Shadowed { .. } => "ignored",
        Hold::Refused { .. } => "refused",
    }
}

fn held_text(h: &Held) -> String {
    match &h.why {
        Hold::NeedsApproval(_) => format!(
            "a project server; review it with `edgar mcp approve {}`",
            h.name
        ),
        Hold::Blocked { rule } => rule.clone(),
        Hold::Refused { field, reason } => {
            format!("a project entry edgar refuses to run, approved or not: {field}: {reason}")
        }
        Hold::Shadowed { by } => format!(
            "your own config ({}) has a server of this name, and yours runs",
            by.display()
        ),
    }
}

fn quarantine_note(n: usize) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(", {n} quarantined (`edgar mcp approve`)")
    }
}

/// `edgar mcp list --timings`: one row per server, from its last discovery.
fn print_timings(
    out: &mut impl Write,
    session: &Session,
    status: &[edgar_host::mcp::client::ServerStatus],
) -> anyhow::Result<()> {
    let ms = |v: Option<u64>| v.map_or("-".to_owned(), |v| format!("{v} ms"));
    writeln!(
        out,
        "SERVER\tSPAWN\tINITIALIZE\tTOOLS/LIST\tGUARD\tTOTAL\tFIRST CALL\tMEASURED"
    )?;
    for s in status {
        match session.timings(&s.name) {
            Some(t) => writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}\t{}{}\t{}\t{} ago",
                s.name,
                ms(Some(t.spawn_ms)),
                ms(t.initialize_ms),
                ms(t.list_ms),
                ms(t.guard_ms),
                ms(Some(t.total_ms)),
                if t.ok { "" } else { " (failed)" },
                ms(t.first_call_ms),
                edgar_host::text::duration(edgar_host::mcp::cache::now().saturating_sub(t.at))
            )?,
            None => writeln!(out, "{}\tnot measured yet (never discovered)", s.name)?,
        }
    }
    Ok(())
}

fn describe(state: &ServerState) -> (&'static str, Option<String>) {
    match state {
        ServerState::NeverStarted => ("never started", None),
        ServerState::Cached {
            tools, quarantined, ..
        } => (
            "cached",
            Some(format!("{tools} tools{}", quarantine_note(*quarantined))),
        ),
        ServerState::Running { tools, quarantined } => (
            "running",
            Some(format!("{tools} tools{}", quarantine_note(*quarantined))),
        ),
        ServerState::Failed { reason, retry_at } => (
            "failed",
            Some(match retry_at {
                Some(at) if *at > edgar_host::mcp::cache::now() => format!(
                    "{reason}; tried again in {} (or when named, or after `edgar mcp reset`)",
                    edgar_host::text::duration(at - edgar_host::mcp::cache::now())
                ),
                _ => reason.clone(),
            }),
        ),
        ServerState::NeedsLogin => ("needs login", None),
    }
}
