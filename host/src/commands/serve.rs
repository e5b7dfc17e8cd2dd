//! `edgar mcp serve`: the gateway on stdio, and the snippets that put it in a client's
//! configuration.

use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use edgar_host::auth::mcp::user_sign_in::UserSignIns;
use edgar_host::config::{ConfigPaths, Grant};
use edgar_host::gateway::elicit::Forward;
use edgar_host::gateway::http::{self, Secret};
use edgar_host::gateway::per_user::PerUserServers;
use edgar_host::gateway::team::browser::Browser;
use edgar_host::gateway::team::config::SharedState;
use edgar_host::gateway::team::{SIGNED_IN_CHANNEL, Team, TeamConfig, tls};
use edgar_host::gateway::{Exposure, Gateway};
use edgar_host::seal::Sealer;
use edgar_host::state::{
    Notices, SharedDiscovery, SharedFound, SharedPinFiles, SharedTokens, StateKey, Trail,
};
use edgar_host::tools::search_tool::ToolSearch;
use edgar_host::trust::audit::AuditLog;
use serde_json::json;
use tokio::io::{AsyncBufRead, AsyncWrite, BufReader};

use crate::cli::ClientKind;

use super::context::{
    Shared, ask_human, guarded, load, note_held, runtime, session_shared, single_thread_runtime,
};

pub fn run(
    print_config: Option<ClientKind>,
    reserve: usize,
    servers: &[String],
    expose_all: bool,
    transparent: bool,
    listen: Listen,
) -> anyhow::Result<ExitCode> {
    let Listen {
        http,
        gateway_config,
        unix,
    } = listen;
    if let Some(client) = print_config {
        let exe = std::env::current_exe().context("cannot tell where edgar is installed")?;
        print!("{}", snippet(client, &exe.display().to_string()));
        return Ok(ExitCode::SUCCESS);
    }
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let team = match &gateway_config {
        Some(path) => Some(TeamConfig::load(path)?),
        None => None,
    };
    // Shared trust files (pins, approvals) are reached before the config is judged: the
    // replicas' approvals of project entries are the ones it is judged by.
    // One client on stdio is answered on one thread: a proxied call then wakes no other
    // thread between reading the request and writing the answer (those hand-offs were
    // about a third of its cost). Listeners serve many clients on the usual workers.
    // Guard work, searches and blocking calls run off it either way.
    let rt = if http.is_none() && unix.is_none() {
        single_thread_runtime()?
    } else {
        runtime()?
    };
    let shared_files = match team.as_ref().and_then(|t| t.state.as_ref()) {
        Some(state) => {
            let key = StateKey::load(&state.key_file)?;
            rt.block_on(migrate(state))?;
            let files = Arc::new(
                SharedPinFiles::start(state.database.clone(), key.pins_key())
                    .map_err(anyhow::Error::msg)?,
            );
            super::context::pull_approvals(files.as_ref())?;
            Some(files)
        }
        None => None,
    };
    let mut config = load(&ConfigPaths::for_project(&cwd))?;
    if !servers.is_empty() {
        for name in servers {
            if config.server(name).is_none() && config.held(name).is_none() {
                bail!("no MCP server named '{name}' is configured");
            }
        }
        config.servers.retain(|s| servers.contains(&s.name));
    }
    let exposure = match (transparent, config.servers.as_slice()) {
        (true, [one]) => Exposure::Transparent(one.name.clone()),
        (true, _) => bail!("--transparent serves one server: name it with --servers NAME"),
        (false, _) if expose_all => Exposure::All,
        (false, _) => Exposure::Search,
    };
    if let Some(addr) = http
        && !addr.ip().is_loopback()
    {
        match &team {
            None => bail!(
                "--http serves on a loopback address only (127.0.0.1 or ::1), not {addr}; a team gateway (--gateway-config) may listen beyond it"
            ),
            Some(t) if t.tls.is_none() && t.behind_proxy.is_empty() => bail!(
                "{addr} is not a loopback address: the gateway config must set \"tls\" (a certificate and key) or \"behind_proxy\" (the proxy that terminates TLS)"
            ),
            Some(_) => {}
        }
    }
    note_held(&config);
    rt.block_on(async {
        // Spans over OTLP when the standard variables name an endpoint.
        if edgar_host::telemetry::export_from_env()? {
            eprintln!("edgar: exporting traces over OTLP, as the OTEL_* variables say");
        }
        // stdin carries the protocol: nobody can be asked anything there, but the
        // client may ask its user what upstream servers elicit.
        let forward = Forward::new(ask_human(&config, false));
        // Replicas sharing state write one audit trail and share discoveries, in the
        // database.
        let shared = match (team.as_ref().and_then(|t| t.state.as_ref()), &shared_files) {
            (Some(state), Some(files)) => Some(shared_state(state, files.clone()).await?),
            _ => None,
        };
        // A team's users' own sign-ins to the servers they sign in to themselves, sealed
        // with a key the replicas share (else one of this process).
        let sign_in_key = match team.as_ref().and_then(|t| t.state.as_ref()) {
            Some(state) => StateKey::load(&state.key_file)?.sign_in_key(),
            None => edgar_host::seal::random_key().context("cannot make the sign-in key")?,
        };
        // (Only when a server is signed in to so: else no sign-in route is served.)
        let sign_ins = match &team {
            Some(t) => Some(user_sign_ins(t, &config, shared.as_ref(), &sign_in_key)?)
                .filter(|s| !s.is_empty())
                .map(Arc::new),
            None => None,
        };
        let session = Arc::new(session_shared(
            &config,
            &cwd,
            forward.clone(),
            shared.clone(),
            sign_ins.clone(),
        ));
        let search = ToolSearch::new(reserve);
        let (team, tls) = match team {
            Some(config) => {
                let tls = config.tls.as_ref().map(tls::acceptor).transpose()?;
                let mut team = Team::start(config).await?;
                team.shared_audit = shared.as_ref().map(|s| s.audit.clone());
                team.shared_found = team
                    .config
                    .state
                    .as_ref()
                    .map(|s| Arc::new(SharedFound::new(s.database.clone())));
                team.sign_ins = sign_ins.clone();
                team.browser = Browser::new(&team.config, &sign_in_key);
                team.sessions_key = match &team.config.state {
                    Some(s) => Some(StateKey::load(&s.key_file)?.sessions_key()),
                    None => None,
                };
                // A sign-in finished at one replica reaches the user's streams at all.
                team.notices = match &team.config.state {
                    Some(s) => Some(Notices::new(s.database.clone(), SIGNED_IN_CHANNEL)?),
                    None => None,
                };
                team.hear_other_replicas();
                (Some(Arc::new(team)), tls)
            }
            None => (None, None),
        };
        let gateway = match &team {
            Some(t) => {
                let per_user =
                    per_user_servers(&config, &cwd, &forward, shared.clone(), sign_ins.clone());
                Gateway::for_team(session.clone(), search, exposure, t.clone(), per_user)
            }
            None => Gateway::new(session.clone(), search, exposure),
        };
        // Kept to close each user's own servers after serving.
        let users = gateway.clone();
        let served = match (http, team) {
            (Some(addr), Some(team)) => {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("cannot listen on {addr}"))?;
                let resource = team.config.resource.to_string();
                let how = if tls.is_some() { "https" } else { "http" };
                eprintln!(
                    "edgar: serving MCP for a team at {resource} ({how} on {}; {} policies from {})",
                    listener.local_addr()?,
                    team.policy.len(),
                    team.config.policy.display()
                );
                let auth = http::Auth::Team(team);
                // SIGTERM or SIGINT: stop taking connections, let calls in flight finish.
                http::serve_until(gateway, listener, auth, tls, stop_signal())
                    .await
                    .with_context(|| format!("serving MCP at {resource}"))
            }
            (Some(addr), None) => {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("cannot listen on {addr}"))?;
                let secret = secret()?;
                let url = format!("http://{}{}", listener.local_addr()?, http::PATH);
                eprintln!("edgar: serving MCP at {url}");
                guarded(&session, http::serve(gateway, listener, secret))
                    .await
                    .with_context(|| format!("serving MCP at {url}"))
            }
            (None, _) => match unix {
                Some(path) => {
                    let listener = http::unix::bind(&path)
                        .with_context(|| format!("cannot listen on {}", path.display()))?;
                    eprintln!(
                        "edgar: serving MCP at unix:{} (path {})",
                        path.display(),
                        http::PATH
                    );
                    // SIGTERM or SIGINT: finish the calls in flight, remove the socket.
                    http::unix::serve_until(gateway, listener, &path, stop_signal())
                        .await
                        .with_context(|| format!("serving MCP on {}", path.display()))
                }
                None => guarded(&session, gateway.serve(input(), output()))
                    .await
                    .context("serving MCP on stdio"),
            },
        };
        users.close_users().await;
        session.close().await;
        // The last spans, sent before the process goes (bounded by the export timeout).
        let _ = tokio::task::spawn_blocking(edgar_host::telemetry::flush).await;
        if let Some(shared) = &shared {
            // Written after every line queued before it: lines not waited for (denials,
            // pins) are in the chain before the process goes.
            let stop = shared.audit.record_confirmed("gateway_stop", json!({"replica": replica()}));
            match tokio::time::timeout(std::time::Duration::from_secs(5), stop).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => eprintln!("edgar: {e}"),
                Err(_) => eprintln!("edgar: the shared audit trail did not take the last lines within 5 s"),
            }
        }
        served?;
        Ok(ExitCode::SUCCESS)
    })
}

/// This replica, as its audit lines name it: the host's name and the process id.
fn replica() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{}/{}", host.trim(), std::process::id())
}

/// How long a replica starting waits for the shared database before giving up.
const STATE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Reaches the shared database (tried again for [`STATE_WAIT`]: replicas may start
/// before it) and brings its schema up to this build's.
async fn migrate(state: &SharedState) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    loop {
        match state.database.migrate().await {
            Ok(()) => return Ok(()),
            Err(e) if started.elapsed() < STATE_WAIT => {
                eprintln!(
                    "edgar: the shared state at {}: {e}; trying again",
                    state.database.describe()
                );
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            Err(e) => bail!(
                "the shared state at {} could not be reached within {} s: {e}",
                state.database.describe(),
                STATE_WAIT.as_secs()
            ),
        }
    }
}

/// What replicas share (the database migrated already): the audit writer started, the
/// discovery cache, the token vault and the trust files opened.
async fn shared_state(state: &SharedState, files: Arc<SharedPinFiles>) -> anyhow::Result<Shared> {
    let key = StateKey::load(&state.key_file)?;
    let audit_key = key.audit_key();
    let trail = Trail::start(state.database.clone(), audit_key.clone());
    let audit = AuditLog::shared(trail, audit_key);
    audit
        .record_confirmed("gateway_start", json!({"replica": replica()}))
        .await?;
    Ok(Shared {
        audit,
        cache: Arc::new(SharedDiscovery::new(
            state.database.clone(),
            key.discovery_key(),
        )),
        tokens: Arc::new(SharedTokens::new(state.database.clone(), key.tokens_key())?),
        pins: files,
    })
}

/// Where `serve` listens: stdio unless one of these is given.
pub struct Listen {
    pub http: Option<SocketAddr>,
    pub gateway_config: Option<PathBuf>,
    pub unix: Option<PathBuf>,
}

/// The servers marked `"per_user"`, each user's session of them made from the same
/// config and options as the shared one; `None` when there are none.
fn per_user_servers(
    config: &edgar_host::config::Config,
    cwd: &std::path::Path,
    forward: &Arc<Forward>,
    shared: Option<Shared>,
    sign_ins: Option<Arc<UserSignIns>>,
) -> Option<PerUserServers> {
    let mut theirs = config.clone();
    theirs.servers.retain(|s| s.per_user);
    if theirs.servers.is_empty() {
        return None;
    }
    let names: Vec<String> = theirs.servers.iter().map(|s| s.name.clone()).collect();
    let (cwd, forward) = (cwd.to_owned(), forward.clone());
    let make = move || {
        session_shared(
            &theirs,
            &cwd,
            forward.clone(),
            shared.clone(),
            sign_ins.clone(),
        )
    };
    Some(PerUserServers::new(names, Box::new(make)))
}

/// The users' own sign-ins to the servers whose grant is `user_sign_in`: returning to
/// the gateway's callback, their state sealed with a key the replicas share (else one of
/// this process), their tokens kept in the shared vault when there is one.
fn user_sign_ins(
    team: &TeamConfig,
    config: &edgar_host::config::Config,
    shared: Option<&Shared>,
    key: &[u8; 32],
) -> anyhow::Result<UserSignIns> {
    let signs_in = config
        .servers
        .iter()
        .find(|s| s.oauth.grant == Grant::UserSignIn);
    if let Some(s) = signs_in
        && team.browser_client.is_none()
    {
        bail!(
            "'{}' is signed in to by each user (grant \"user_sign_in\"), so the gateway config must set \"browser_client\" (its client_id at the identity provider): a sign-in link can be forwarded, and only the user it was made for, shown by the company's sign-in in that browser, may finish it",
            s.name
        );
    }
    Ok(UserSignIns::new(
        UserSignIns::callback_for(&team.resource),
        Sealer::new(key),
        shared.map(|s| s.tokens.clone()),
        config.servers.iter().cloned(),
    ))
}

/// Resolves at the first SIGTERM or SIGINT (a team gateway then drains); never, when
/// the signals cannot be watched.
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
    eprintln!("edgar: stopping: finishing the calls in flight");
}

/// `EDGAR_SERVE_TOKEN` when set (so a client's config can hold it), else a new secret
/// shown once on stderr.
fn secret() -> anyhow::Result<Secret> {
    if let Ok(value) = std::env::var("EDGAR_SERVE_TOKEN") {
        return Secret::from_env(value).context("EDGAR_SERVE_TOKEN must be at least 16 characters");
    }
    let secret = Secret::generate().context("cannot make a bearer token")?;
    eprintln!(
        "edgar: clients must send `Authorization: Bearer {}` (or set EDGAR_SERVE_TOKEN)",
        secret.expose()
    );
    Ok(secret)
}

/// The protocol's input: stdin, read straight from the event loop when it is a pipe (as
/// every MCP client launches a server); tokio's `stdin` reads on a blocking thread, a
/// handoff that cost each proxied call tens of microseconds.
fn input() -> Box<dyn AsyncBufRead + Unpin + Send> {
    let pipe = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(tokio::net::unix::pipe::Receiver::from_owned_fd);
    match pipe {
        Ok(pipe) => Box::new(BufReader::new(pipe)),
        Err(_) => Box::new(BufReader::new(tokio::io::stdin())),
    }
}

/// The protocol's output: stdout, written from the event loop when it is a pipe.
fn output() -> Box<dyn AsyncWrite + Unpin + Send> {
    let pipe = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(tokio::net::unix::pipe::Sender::from_owned_fd);
    match pipe {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdout()),
    }
}

/// What to add to `client`'s configuration so it launches `exe mcp serve`.
fn snippet(client: ClientKind, exe: &str) -> String {
    let entry = json!({"command": exe, "args": ["mcp", "serve"]});
    let servers = json!({"mcpServers": {"edgar": entry}});
    let pretty = serde_json::to_string_pretty(&servers).unwrap_or_default();
    // A JSON string is a valid TOML basic string.
    let quoted = serde_json::to_string(exe).unwrap_or_default();
    let word = super::trust::quote(exe);
    match client {
        ClientKind::Claude => format!(
            "# Claude Code: run\nclaude mcp add --scope user edgar -- {word} mcp serve\n\
             # or put this in a project's .mcp.json:\n{pretty}\n"
        ),
        ClientKind::Codex => format!(
            "# Codex CLI: add to ~/.codex/config.toml\n[mcp_servers.edgar]\ncommand = {quoted}\n\
             args = [\"mcp\", \"serve\"]\n"
        ),
        ClientKind::Cursor => {
            format!(
                "// Cursor: merge into ~/.cursor/mcp.json (or a project's .cursor/mcp.json)\n{pretty}\n"
            )
        }
        ClientKind::Gemini => {
            format!("// Gemini CLI: merge into ~/.gemini/settings.json\n{pretty}\n")
        }
        ClientKind::Vscode => {
            let mut entry = entry;
            entry["type"] = json!("stdio");
            let servers = json!({"servers": {"edgar": entry}});
            let pretty = serde_json::to_string_pretty(&servers).unwrap_or_default();
            let mut add = entry;
            add["name"] = json!("edgar");
            let add = super::trust::quote(&add.to_string());
            format!(
                "# VS Code: run\ncode --add-mcp {add}\n\
                 # or merge into a workspace's .vscode/mcp.json:\n{pretty}\n"
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_snippet_names_the_binary_and_the_command() {
        for client in [
            ClientKind::Claude,
            ClientKind::Codex,
            ClientKind::Cursor,
            ClientKind::Gemini,
            ClientKind::Vscode,
        ] {
            let text = snippet(client, "/opt/my \"edgar\"/edgar");
            assert!(
                text.contains(r#""/opt/my \"edgar\"/edgar""#),
                "{client:?}: {text}"
            );
            assert!(text.contains("serve"), "{client:?}: {text}");
        }
        // A command line quotes for the shell: `$` and backticks are not expanded.
        let claude = snippet(ClientKind::Claude, "/opt/$HOME`x`/edgar");
        assert!(
            claude
                .contains("claude mcp add --scope user edgar -- '/opt/$HOME`x`/edgar' mcp serve\n"),
            "{claude}"
        );
        let vscode = snippet(ClientKind::Vscode, "/usr/bin/edgar");
        assert!(
            vscode.contains(r#"code --add-mcp '{"command":"/usr/bin/edgar","args":["mcp","serve"],"type":"stdio","name":"edgar"}'"#),
            "{vscode}"
        );
        assert!(vscode.contains(r#""servers": {"#), "{vscode}");
        let codex = snippet(ClientKind::Codex, "/usr/bin/edgar");
        assert!(codex.contains(
            "[mcp_servers.edgar]\ncommand = \"/usr/bin/edgar\"\nargs = [\"mcp\", \"serve\"]"
        ));
    }
}
