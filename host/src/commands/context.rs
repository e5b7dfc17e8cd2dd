//! What every command shares: the runtime, the loaded config, the CLI's session, the
//! credential store and the audit trail. Commands import this module and never each
//! other, so there is no circle between them (`mcp` only dispatches to the others).

use anyhow::Context;
use edgar_host::auth::keys::Keys;
use edgar_host::auth::mcp::user_sign_in::UserSignIns;
use edgar_host::auth::store::Store;
use edgar_host::config::{Config, ConfigPaths, Hold};
use edgar_host::mcp::client::{Session, SessionOptions};
use edgar_host::paths;
use edgar_host::trust::audit::AuditLog;
use edgar_host::trust::state_dir;
use serde_json::Value;

/// The credential store of the user's keys file (provider keys and sign-ins).
pub fn store() -> anyhow::Result<Store> {
    Ok(Keys::load(paths::config_dir().as_deref())?.store)
}

/// The user's audit trail, keyed by its key file when it has one, else the key in their
/// credential store, else a new key file (`audit_key::source_or_file`).
pub fn audit_log(dir: &std::path::Path) -> AuditLog {
    AuditLog::new(dir).with_key(edgar_host::auth::audit_key::source_or_file(
        store().ok(),
        dir,
    ))
}

/// Records an event in the audit trail when there is a state directory. One log per
/// process, so its key is read from the credential store once, however many events.
pub fn audit(event: &str, fields: Value) {
    static LOG: std::sync::OnceLock<Option<AuditLog>> = std::sync::OnceLock::new();
    if let Some(log) = LOG.get_or_init(|| state_dir().map(|d| audit_log(&d))) {
        log.note(event, fields);
    }
}

/// The name approvals are shared under (beside the pin files).
const SHARED_APPROVALS: &str = "approvals.json";

/// Replaces this machine's approvals of project entries with the ones a team gateway's
/// replicas share, when there are any (they are believed first, like shared pins).
pub fn pull_approvals(files: &dyn edgar_host::trust::pins::SharedPins) -> anyhow::Result<()> {
    let Some(state) = edgar_host::trust::state_dir() else {
        return Ok(());
    };
    let shared = files
        .fetch(SHARED_APPROVALS)
        .map_err(|e| anyhow::anyhow!("the shared approvals: {e}"))?;
    if let Some(bytes) = shared {
        paths::write_atomic(&state.join(SHARED_APPROVALS), &bytes)
            .context("cannot keep the shared approvals")?;
    }
    Ok(())
}

/// Stores this machine's approvals for the replicas (after `edgar mcp approve
/// --gateway-config` approved a project entry).
pub fn push_approvals(files: &dyn edgar_host::trust::pins::SharedPins) -> anyhow::Result<()> {
    let Some(state) = edgar_host::trust::state_dir() else {
        return Ok(());
    };
    if let Some(bytes) = paths::read_capped(&state.join(SHARED_APPROVALS), 8 << 20)? {
        files
            .store(SHARED_APPROVALS, &bytes)
            .map_err(|e| anyhow::anyhow!("the shared approvals: {e}"))?;
    }
    Ok(())
}

pub fn load(paths: &ConfigPaths) -> anyhow::Result<Config> {
    let exe = std::env::current_exe().ok();
    Ok(edgar_host::trust::admit::load(paths, exe.as_deref())?)
}

/// The CLI's session: on-disk cache, elicitation answered from schema defaults, HTTP
/// sign-ins from the credential store, pins and the audit trail. No browser: a new
/// authorization (a 401 the refresh cannot fix, a step-up) starts only from `edgar mcp
/// login`, which a human runs; elsewhere the error names that command.
pub fn session(config: &Config, cwd: &std::path::Path) -> Session {
    use std::io::IsTerminal;
    let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    session_for(config, cwd, terminal)
}

/// The CLI's session, asking a human at the terminal only when `terminal` says one is
/// there (never when stdin carries a protocol).
pub fn session_for(config: &Config, cwd: &std::path::Path, terminal: bool) -> Session {
    session_with(config, cwd, ask_human(config, terminal))
}

/// The CLI's elicitation handler: the human at the terminal, if there is one; otherwise
/// only servers that opted in get their own defaults back.
pub fn ask_human(
    config: &Config,
    terminal: bool,
) -> std::sync::Arc<dyn edgar_host::mcp::ClientHandler> {
    std::sync::Arc::new(edgar_host::mcp::elicitation::AskHuman {
        terminal,
        defaults_for: config
            .servers
            .iter()
            .filter(|s| s.elicitation_defaults)
            .map(|s| s.name.clone())
            .collect(),
    })
}

/// The CLI's session with `handler` answering what servers ask.
pub fn session_with(
    config: &Config,
    cwd: &std::path::Path,
    handler: std::sync::Arc<dyn edgar_host::mcp::ClientHandler>,
) -> Session {
    session_shared(config, cwd, handler, None, None)
}

/// What a team gateway's replicas share, for their sessions.
#[derive(Clone)]
pub struct Shared {
    /// The one audit chain, instead of the user's own trail.
    pub audit: AuditLog,
    /// The discovery cache, besides this machine's.
    pub cache: std::sync::Arc<dyn edgar_host::mcp::cache::SharedCache>,
    /// Each user's exchanged upstream tokens, sealed.
    pub tokens: std::sync::Arc<dyn edgar_host::auth::mcp::exchange::TokenVault>,
    /// The tools' pins.
    pub pins: std::sync::Arc<dyn edgar_host::trust::pins::SharedPins>,
}

/// [`session_with`], with what replicas share when given.
pub fn session_shared(
    config: &Config,
    cwd: &std::path::Path,
    handler: std::sync::Arc<dyn edgar_host::mcp::ClientHandler>,
    shared: Option<Shared>,
    sign_ins: Option<std::sync::Arc<UserSignIns>>,
) -> Session {
    let mut opts = SessionOptions::new(cwd.to_owned(), paths::cache_dir());
    // A command ends when it has answered: a discovery left running in the background
    // would be cut off at exit and never cached, so the CLI waits for each server (under
    // its own startup deadline; a failed one is then left alone for the cool-down).
    opts.prompt_budget = std::time::Duration::MAX;
    if let Some(state) = edgar_host::trust::state_dir() {
        opts = opts.with_trust(&state);
    }
    opts.handler = handler;
    opts.credentials = store().ok();
    opts.user_sign_ins = sign_ins;
    let credentials = opts.credentials.clone();
    opts = opts.with_audit_key(credentials);
    if let Some(shared) = shared {
        opts.audit = Some(shared.audit);
        opts.shared_cache = Some(shared.cache);
        opts.token_vault = Some(shared.tokens);
        if let Some(state) = edgar_host::trust::state_dir() {
            let pins = edgar_host::trust::pins::PinStore::new(&state, Some(&opts.cwd));
            opts.pins = Some(std::sync::Arc::new(pins.with_shared(Some(shared.pins))));
        }
    }
    Session::new(config, opts)
}

/// Runs `work` on a session whose servers may be running. SIGINT, SIGTERM or SIGHUP
/// close every server (end of input, then TERM and KILL to its process group) and exit
/// with 130, 143 or 129, so Ctrl-C never leaves a server behind.
pub async fn guarded<T>(session: &Session, work: impl std::future::Future<Output = T>) -> T {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return work.await;
    };
    let code = tokio::select! {
        out = work => return out,
        _ = int.recv() => 130,
        _ = term.recv() => 143,
        _ = hup.recv() => 129,
    };
    session.close().await;
    // The audit lines of requests still running (their tasks are not dropped).
    edgar_host::trust::audit::write_held();
    // Spans not yet exported go before the process does (nothing when none are).
    let _ = tokio::task::spawn_blocking(edgar_host::telemetry::flush).await;
    std::process::exit(code);
}

pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// A runtime on the calling thread only (blocking work still goes to its pool).
pub fn single_thread_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// One stderr line when project servers wait for approval (their tools are not offered).
pub fn note_held(config: &Config) {
    let waiting: Vec<&str> = config
        .held
        .iter()
        .filter(|h| matches!(h.why, Hold::NeedsApproval(_)))
        .map(|h| h.name.as_str())
        .collect();
    if !waiting.is_empty() {
        eprintln!(
            "edgar: project server(s) waiting for approval, not offered: {} (`edgar mcp approve --all` reviews them)",
            waiting.join(", ")
        );
    }
}

/// Asks y/N on the terminal (on stderr, so stdout stays the command's output); `--yes`
/// answers for scripts. Off a terminal without `--yes`, the answer is no, said so.
pub fn confirm(question: &str, yes: bool) -> anyhow::Result<bool> {
    use std::io::{BufRead, IsTerminal, Write};
    if yes {
        eprintln!("{question} yes (--yes)");
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        eprintln!("{question} not asked: no terminal");
        return Ok(false);
    }
    eprint!("{question} [y/N] ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "Yes"))
}
