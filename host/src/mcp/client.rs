//! The session: one lazy handle per configured server, discovery once per server per
//! session (cached on disk), tool calls, and close.
//!
//! [`Session::new`] (the walkthrough's `servers`) starts nothing: no process, socket,
//! HTTP client or WASM engine. A server starts the first time one of its tools is
//! called, or when its tool names are needed and no cache has them. A server whose
//! discovery fails stays failed for the session and every call to it says why at once.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Mutex as AsyncMutex;

use super::McpError;
use super::connection::{ClientHandler, Connection, Context, NoHandler};
use super::era::{self, Hello, Negotiated};
use super::http::Http;
use super::http::legacy::Legacy;
use super::input;
use super::protocol::{MODERN, PROTOCOL};
use super::stdio::{Spawn, Stdio};
use super::task::{self, Tasks};
use crate::auth::mcp::{Browser, McpAuth};
use crate::auth::store::Store;
use crate::config::{Config, Held, Hold, ProtocolChoice, ServerSpec, Transport};
use crate::guard::{Adapter, AdapterSource, Guard, SanitizedTool, ToolOutput};
use crate::mcp::cache::{Entry, Era, Failure, Timings, ToolCache, ToolName, now};
use crate::text::shown;
use crate::trust::audit::AuditLog;
use crate::trust::pins::{PinStore, Quarantined};

/// Most `tools/list` pages followed before a server is considered broken.
pub const MAX_PAGES: usize = 100;
/// Most tools accepted from one server.
pub const MAX_TOOLS_PER_SERVER: usize = 5000;
/// Most bytes of tool definitions kept from one server across all its `tools/list`
/// pages: 100 pages of 16 MiB would otherwise hold 1.6 GB before any count check.
pub const MAX_TOOLS_BYTES_PER_SERVER: usize = 32 << 20;
/// Results up to this size go through the built-in adapter on the calling task.
const INLINE_GUARD_BYTES: usize = 64 << 10;
/// Most validation errors reported for one call.
const MAX_ARGUMENT_ERRORS: usize = 10;
/// How long a server whose discovery failed is left alone by commands that do not name
/// it: a dead or hanging server costs its startup deadline once, not on every command.
/// Naming it, changing its config or `edgar mcp reset NAME` tries it at once.
pub const FAILURE_COOLDOWN: Duration = Duration::from_secs(10 * 60);
/// Least time between two refreshes after `notifications/tools/list_changed`: a server
/// that says so in a loop gets one refresh a second, not one per message.
const LIST_CHANGED_MIN_INTERVAL: Duration = Duration::from_secs(1);
/// Longest a server's `ttlMs` keeps its cached list fresh.
const MAX_FRESH_MS: u64 = 86_400_000;
/// How long one `subscriptions/listen` may stay open: as long as the session, in effect.
const LISTEN_FOR: Duration = Duration::from_secs(365 * 86_400);
/// Subscriptions opened for one connection before edgar stops asking, and the wait
/// before each new one (times the attempt).
const LISTEN_ATTEMPTS: u32 = 5;
const LISTEN_RETRY: Duration = Duration::from_secs(1);

/// How a session runs its servers.
#[derive(Clone)]
pub struct SessionOptions {
    /// The working directory: the root offered to servers, and stdio servers' default cwd.
    pub cwd: PathBuf,
    /// Where discovery, adapter artifacts and server logs are cached; `None` disables it.
    pub cache_dir: Option<PathBuf>,
    /// Answers servers' sampling and elicitation requests.
    pub handler: Arc<dyn ClientHandler>,
    /// Where HTTP servers' sign-ins are stored; `None` sends no tokens.
    pub credentials: Option<Store>,
    /// How to reach a human for a (new) authorization; `None` when nobody can answer,
    /// so a server that needs one fails with "run `edgar mcp login NAME`".
    pub browser: Option<Browser>,
    /// Tool pins: with a store, a tool that differs from its pin is quarantined. `None`
    /// pins nothing (every guarded tool is offered).
    pub pins: Option<Arc<PinStore>>,
    /// Where decisions and calls are recorded; `None` records nothing.
    pub audit: Option<AuditLog>,
    /// Longest a prompt or a search waits for servers that must be discovered
    /// ([`PROMPT_BUDGET`] by default); the rest join when they are ready.
    pub prompt_budget: Duration,
}

/// How long the prompt's names (and a search) wait for servers without a cache entry:
/// long enough for a typical local server to answer (`initialize` and `tools/list` take
/// 0.1 to 1 s), short enough that one hanging server never holds the first prompt.
pub const PROMPT_BUDGET: Duration = Duration::from_millis(1500);

impl SessionOptions {
    pub fn new(cwd: PathBuf, cache_dir: Option<PathBuf>) -> SessionOptions {
        SessionOptions {
            cwd,
            cache_dir,
            handler: Arc::new(NoHandler),
            credentials: None,
            browser: None,
            pins: None,
            audit: None,
            prompt_budget: PROMPT_BUDGET,
        }
    }

    /// Pins and the audit trail in `state_dir` (edgar's state directory), with the
    /// project's `.mcp.lock` as the authority for its own servers.
    pub fn with_trust(mut self, state_dir: &std::path::Path) -> SessionOptions {
        self.pins = Some(Arc::new(PinStore::new(state_dir, Some(&self.cwd))));
        self.audit = Some(AuditLog::new(state_dir));
        self
    }

    /// The audit trail keyed by a key kept in `store` (made on the first line written).
    pub fn with_audit_key(mut self, store: Store) -> SessionOptions {
        if let Some(audit) = self.audit.take() {
            self.audit = Some(audit.with_key(crate::auth::audit_key::source(store)));
        }
        self
    }
}

/// Where a server stands, for `edgar mcp list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    NeverStarted,
    Cached {
        tools: usize,
        fetched_at: u64,
        quarantined: usize,
    },
    Running {
        tools: usize,
        quarantined: usize,
    },
    Failed {
        reason: String,
        /// When commands that do not name it will start it again (Unix seconds);
        /// `None` for a failure in this session.
        retry_at: Option<u64>,
    },
    NeedsLogin,
}

#[derive(Debug, Clone)]
pub struct ServerStatus {
    pub name: String,
    pub kind: &'static str,
    pub state: ServerState,
}

/// All tools available now, and the servers that could not provide theirs.
#[derive(Debug, Default)]
pub struct Catalog {
    pub tools: Vec<SanitizedTool>,
    pub failures: Vec<McpError>,
    /// Servers still being discovered when a bounded wait ended; their tools join the
    /// catalog (and the disk cache) when they are ready.
    pub pending: Vec<String>,
}

/// The prompt's tool names: what is ready, what failed, and what is still starting.
#[derive(Debug, Default)]
pub struct PromptNames {
    pub names: Vec<ToolName>,
    pub failures: Vec<McpError>,
    pub pending: Vec<String>,
}

/// One handle per configured server (starting nothing until a tool is needed), shared
/// with the discoveries a bounded wait leaves running in the background. Every method
/// of [`SessionInner`] is available on it.
pub struct Session(Arc<SessionInner>);

impl std::ops::Deref for Session {
    type Target = SessionInner;
    fn deref(&self) -> &SessionInner {
        &self.0
    }
}

/// The session's state; see [`Session`].
pub struct SessionInner {
    /// Discoveries still running after a bounded wait; `close` aborts them.
    background: Mutex<Vec<tokio::task::AbortHandle>>,
    servers: Vec<Arc<Server>>,
    generation: Arc<AtomicU64>,
    guard: Arc<Guard>,
    cache: ToolCache,
    opts: SessionOptions,
    validators: Mutex<HashMap<String, Arc<jsonschema::Validator>>>,
    /// Each HTTP server's sign-in, made the first time it connects.
    sign_ins: Mutex<HashMap<String, Arc<McpAuth>>>,
    /// Configured entries that may not run, so a call naming one says why.
    held: Vec<Held>,
}

struct Server {
    spec: ServerSpec,
    state: AsyncMutex<State>,
    adapter_digest: std::sync::OnceLock<Result<String, String>>,
    /// The tools read from the disk cache this session, so it is read once.
    cached: RwLock<Option<Arc<Vec<SanitizedTool>>>>,
    /// The session's catalog generation, bumped whenever any server's tools change.
    generation: Arc<AtomicU64>,
    /// Tools held back because they differ from their pins (from discovery or cache).
    quarantined: Arc<RwLock<Arc<Vec<Quarantined>>>>,
}

impl Server {
    fn cached(&self) -> Option<Arc<Vec<SanitizedTool>>> {
        self.cached
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn quarantined(&self) -> Arc<Vec<Quarantined>> {
        self.quarantined
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set_quarantined(&self, q: Vec<Quarantined>) {
        *self.quarantined.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(q);
    }

    fn set_cached(&self, tools: Option<Arc<Vec<SanitizedTool>>>) {
        *self.cached.write().unwrap_or_else(|p| p.into_inner()) = tools;
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// The tools known in memory (running server or cache already read), without I/O.
    fn known_tools(&self) -> Option<Arc<Vec<SanitizedTool>>> {
        if let Ok(state) = self.state.try_lock()
            && let State::Running(r) = &*state
        {
            return Some(offered(&self.spec, r.tools()));
        }
        self.cached().map(|t| offered(&self.spec, t))
    }
}

enum State {
    Idle,
    Running(Arc<Running>),
    Failed(String),
}

struct Running {
    conn: Connection,
    transport: AsyncMutex<TransportHandle>,
    tools: RwLock<Arc<Vec<SanitizedTool>>>,
    /// Whether a tool call has gone to it (the first one's latency is recorded).
    called: std::sync::atomic::AtomicBool,
    /// Tasks being followed, cancelled at the server when the session closes.
    tasks: Tasks,
}

enum TransportHandle {
    Stdio(Stdio),
    Http(Http),
    Legacy(Legacy),
}

impl TransportHandle {
    fn stderr_tail(&self) -> String {
        match self {
            TransportHandle::Stdio(s) => s.stderr_tail(),
            TransportHandle::Http(_) | TransportHandle::Legacy(_) => String::new(),
        }
    }

    async fn close(&mut self) {
        match self {
            TransportHandle::Stdio(s) => s.close().await,
            TransportHandle::Http(h) => h.close().await,
            TransportHandle::Legacy(l) => l.close().await,
        }
    }
}

/// Builds a handle per configured server. Starts nothing.
pub fn servers(config: &Config, opts: SessionOptions) -> Session {
    Session::new(config, opts)
}

impl Session {
    pub fn new(config: &Config, opts: SessionOptions) -> Session {
        let generation = Arc::new(AtomicU64::new(0));
        Session(Arc::new(SessionInner {
            background: Mutex::new(Vec::new()),
            generation: generation.clone(),
            servers: config
                .servers
                .iter()
                .map(|spec| {
                    Arc::new(Server {
                        spec: spec.clone(),
                        state: AsyncMutex::new(State::Idle),
                        adapter_digest: std::sync::OnceLock::new(),
                        cached: RwLock::new(None),
                        generation: generation.clone(),
                        quarantined: Arc::default(),
                    })
                })
                .collect(),
            guard: Arc::new(Guard::new(opts.cache_dir.clone())),
            cache: ToolCache::new(opts.cache_dir.as_deref()),
            opts,
            validators: Mutex::new(HashMap::new()),
            sign_ins: Mutex::new(HashMap::new()),
            held: config.held.clone(),
        }))
    }

    /// The names for the prompt, waiting at most `budget` for servers that must be
    /// discovered: cached names at once, the rest concurrently. A server not ready in
    /// time is `pending` and keeps starting in the background (and is cached when it is
    /// ready, for this session's searches and the next session's prompt).
    pub async fn tool_names_within(&self, budget: Duration) -> PromptNames {
        let (mut names, mut failures, missing) = match self.names_at_hand() {
            AtHand::Index(names) => {
                return PromptNames {
                    names,
                    ..PromptNames::default()
                };
            }
            AtHand::Servers(names, failures, missing) => (names, failures, missing),
        };
        if missing.is_empty() {
            let names = self.remember_index(names, &failures);
            return PromptNames {
                names,
                failures,
                pending: Vec::new(),
            };
        }
        let (found, more, pending) = self.discover_within(&missing, budget).await;
        names.extend(found.iter().map(tool_name_of));
        failures.extend(more);
        PromptNames {
            names: dedupe_names(names),
            failures,
            pending,
        }
    }

    /// Every tool available within `budget`: as [`SessionInner::catalog`], but servers
    /// still starting when the budget runs out are `pending`, not waited for.
    pub async fn catalog_within(&self, budget: Duration) -> Catalog {
        let mut ready = Vec::new();
        let mut missing = Vec::new();
        for s in &self.servers {
            if self.needs_start(s) {
                missing.push(s.spec.name.clone());
            } else {
                ready.push(s.spec.name.clone());
            }
        }
        let (mut tools, mut failures) = self.discover_many(&ready).await;
        let (found, more, pending) = self.discover_within(&missing, budget).await;
        tools.extend(found);
        failures.extend(more);
        let mut catalog = unique(tools, failures);
        catalog.pending = pending;
        catalog
    }

    /// Waits until the servers `names` (left starting by a bounded wait) are running or
    /// failed.
    pub async fn settle(&self, names: &[String]) {
        for name in names {
            if let Ok(s) = self.server(name) {
                drop(s.state.lock().await);
            }
        }
    }

    /// Discovers `names` in background tasks, collecting what finishes within `budget`.
    async fn discover_within(
        &self,
        names: &[String],
        budget: Duration,
    ) -> (Vec<SanitizedTool>, Vec<McpError>, Vec<String>) {
        let now = tokio::time::Instant::now();
        let deadline = now
            .checked_add(budget)
            .unwrap_or_else(|| now + Duration::from_secs(365 * 86_400));
        let mut tools = Vec::new();
        let mut failures = Vec::new();
        let mut pending = Vec::new();
        let mut running = Vec::new();
        for name in names {
            // Already being started (by an earlier bounded wait): do not start it twice.
            if self.server(name).is_ok_and(|s| s.state.try_lock().is_err()) {
                pending.push(name.clone());
                continue;
            }
            let inner = self.0.clone();
            let n = name.clone();
            let task = tokio::spawn(async move { inner.tools_for(&n, false).await });
            {
                let mut bg = self.background.lock().unwrap_or_else(|p| p.into_inner());
                bg.retain(|h| !h.is_finished());
                bg.push(task.abort_handle());
            }
            running.push((name.clone(), task));
        }
        for (name, mut task) in running {
            match tokio::time::timeout_at(deadline, &mut task).await {
                Ok(Ok(Ok(t))) => tools.extend(t.iter().cloned()),
                Ok(Ok(Err(e))) => failures.push(e),
                Ok(Err(e)) => failures.push(McpError::Failed {
                    server: name,
                    reason: format!("its discovery stopped: {e}"),
                }),
                Err(_) => pending.push(name),
            }
        }
        (tools, failures, pending)
    }
}

impl SessionInner {
    /// The error for a configured entry that may not run, if `name` is one.
    fn held_error(&self, name: &str) -> Option<McpError> {
        let h = self.held.iter().find(|h| h.name == name)?;
        match &h.why {
            Hold::NeedsApproval(_) => Some(McpError::NeedsApproval {
                server: name.to_owned(),
                file: h.source.clone(),
            }),
            Hold::Blocked { rule } => {
                self.audit("policy_block", json!({"server": name, "rule": rule}));
                Some(McpError::Blocked {
                    server: name.to_owned(),
                    rule: rule.clone(),
                })
            }
            Hold::Refused { field, reason } => Some(McpError::Blocked {
                server: name.to_owned(),
                rule: format!("its project entry is refused ({field}: {reason})"),
            }),
            Hold::Shadowed { .. } => None,
        }
    }

    fn audit(&self, event: &str, fields: Value) {
        if let Some(a) = &self.opts.audit {
            a.note(event, fields);
        }
    }

    fn server(&self, name: &str) -> Result<&Arc<Server>, McpError> {
        self.servers
            .iter()
            .find(|s| s.spec.name == name)
            .ok_or_else(|| {
                self.held_error(name)
                    .unwrap_or_else(|| McpError::UnknownServer(name.to_owned()))
            })
    }

    /// Changes whenever any server's known tools change (read from cache, discovered,
    /// refreshed, reset), so derived data such as a search index can be kept until then.
    /// How long prompts and searches wait for servers that must be discovered.
    pub fn prompt_budget(&self) -> Duration {
        self.opts.prompt_budget
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    pub fn server_names(&self) -> impl Iterator<Item = &str> {
        self.servers.iter().map(|s| s.spec.name.as_str())
    }

    fn adapter_digest(&self, server: &Server) -> Result<String, McpError> {
        server
            .adapter_digest
            .get_or_init(|| server.spec.adapter.digest().map_err(|e| e.to_string()))
            .clone()
            .map_err(|reason| McpError::Start {
                server: server.spec.name.clone(),
                reason,
            })
    }

    /// Every server's state. Reads only small cache files; starts nothing.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.servers
            .iter()
            .map(|s| {
                let state = match s.state.try_lock().as_deref() {
                    Ok(State::Running(r)) => ServerState::Running {
                        tools: r.tools().len(),
                        quarantined: s.quarantined().len(),
                    },
                    Ok(State::Failed(reason)) => ServerState::Failed {
                        reason: reason.clone(),
                        retry_at: None,
                    },
                    _ => self.stored_state(s),
                };
                ServerStatus {
                    name: s.spec.name.clone(),
                    kind: s.spec.transport.kind(),
                    state,
                }
            })
            .collect()
    }

    fn stored_state(&self, s: &Server) -> ServerState {
        if let Some(f) = self.cache.read_failure(&s.spec) {
            return if f.needs_login {
                ServerState::NeedsLogin
            } else {
                ServerState::Failed {
                    reason: f.reason,
                    retry_at: Some(f.at.saturating_add(FAILURE_COOLDOWN.as_secs())),
                }
            };
        }
        let names = self
            .adapter_digest(s)
            .ok()
            .and_then(|d| self.cache.names(&s.spec, &d));
        match names {
            Some((tools, fetched_at, quarantined)) => ServerState::Cached {
                tools: tools.len(),
                fetched_at,
                quarantined,
            },
            None => ServerState::NeverStarted,
        }
    }

    /// The names the prompt carries, from the cache where it has them; servers without
    /// a cache entry are discovered, concurrently, each under its own deadline.
    pub async fn tool_names(&self) -> (Vec<ToolName>, Vec<McpError>) {
        let (mut names, mut failures, missing) = match self.names_at_hand() {
            AtHand::Index(names) => return (names, Vec::new()),
            AtHand::Servers(names, failures, missing) => (names, failures, missing),
        };
        if missing.is_empty() {
            return (self.remember_index(names, &failures), failures);
        }
        let (found, more) = self.discover_many(&missing).await;
        names.extend(found.iter().map(tool_name_of));
        failures.extend(more);
        (dedupe_names(names), failures)
    }

    /// Every server's names came from the cache: keep them as one index file, so the
    /// next start reads one file however many servers there are.
    fn remember_index(&self, names: Vec<ToolName>, failures: &[McpError]) -> Vec<ToolName> {
        let names = dedupe_names(names);
        if failures.is_empty()
            && let Some(key) = self.idle_index_key()
        {
            self.cache.write_index(&key, &names);
        }
        names
    }

    /// The whole configuration's index key, when no server has started (a running
    /// server's live list is newer than any index).
    fn idle_index_key(&self) -> Option<String> {
        let all_idle = self
            .servers
            .iter()
            .all(|s| matches!(s.state.try_lock().as_deref(), Ok(State::Idle)));
        if all_idle { self.index_key() } else { None }
    }

    /// Whether `s` must be started for its tools (or is being started now): not running,
    /// not failed, nothing cached this session or on disk.
    fn needs_start(&self, s: &Server) -> bool {
        let Ok(state) = s.state.try_lock() else {
            return true;
        };
        matches!(*state, State::Idle)
            && s.cached().is_none()
            && self
                .adapter_digest(s)
                .ok()
                .and_then(|d| self.cache.names(&s.spec, &d))
                .is_none()
    }

    /// The names at hand without starting anything: the whole index when it is warm,
    /// else each server's live or cached names; and the servers that have neither.
    fn names_at_hand(&self) -> AtHand {
        if let Some(key) = self.idle_index_key()
            && let Some(names) = self.cache.read_index(&key)
        {
            return AtHand::Index(names);
        }
        let mut names = Vec::new();
        let mut failures = Vec::new();
        let mut missing = Vec::new();
        for s in &self.servers {
            if let Some(running) = s.state.try_lock().ok().and_then(|st| match &*st {
                State::Running(r) => Some(r.clone()),
                _ => None,
            }) {
                names.extend(offered(&s.spec, running.tools()).iter().map(tool_name_of));
                continue;
            }
            if let Some(State::Failed(reason)) = s.state.try_lock().ok().as_deref() {
                failures.push(McpError::Failed {
                    server: s.spec.name.clone(),
                    reason: reason.clone(),
                });
                continue;
            }
            match self
                .adapter_digest(s)
                .ok()
                .and_then(|d| self.cache.names(&s.spec, &d))
            {
                Some((list, _, _)) => {
                    names.extend(list.into_iter().filter(|n| s.spec.allows(&n.tool)))
                }
                None => missing.push(s.spec.name.clone()),
            }
        }
        AtHand::Servers(names, failures, missing)
    }

    /// The session's discovery cache.
    pub fn cache(&self) -> &ToolCache {
        &self.cache
    }

    /// Where the search index of this configuration's cached catalog is kept, and the
    /// key it is stored under (the configuration's, then `model`); `None` while any
    /// server runs, since a running server's live list is newer than any file.
    pub fn search_index(&self, model: &str) -> Option<(PathBuf, String)> {
        let key = format!("{}-{model}", self.idle_index_key()?);
        Some((self.cache.search_path(&key)?, key))
    }

    /// Identifies the whole configuration's cached names: every server's name, transport
    /// digest and adapter digest.
    fn index_key(&self) -> Option<String> {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for s in &self.servers {
            h.update(s.spec.name.as_bytes());
            h.update([0]);
            h.update(s.spec.digest().as_bytes());
            h.update(self.adapter_digest(s).ok()?.as_bytes());
            h.update(
                s.spec
                    .enabled_tools
                    .as_ref()
                    .map(|t| t.join("\u{0}"))
                    .unwrap_or_default()
                    .as_bytes(),
            );
            h.update(s.spec.disabled_tools.join("\u{0}").as_bytes());
            // The policy's tool rules filter names too: a changed policy is another index.
            if s.spec.tool_policy != Default::default() {
                h.update(format!("{:?}", s.spec.tool_policy).as_bytes());
            }
            h.update([0xff]);
        }
        Some(crate::guard::hex(&h.finalize())[..32].to_owned())
    }

    /// Every available tool with its accepted schema: cached where possible, the rest
    /// discovered concurrently.
    pub async fn catalog(&self) -> Catalog {
        let names: Vec<String> = self.servers.iter().map(|s| s.spec.name.clone()).collect();
        let (tools, failures) = self.discover_many(&names).await;
        unique(tools, failures)
    }

    /// Servers' tools for a command that did not name them: one that failed within
    /// [`FAILURE_COOLDOWN`] is not started again.
    async fn discover_many(&self, names: &[String]) -> (Vec<SanitizedTool>, Vec<McpError>) {
        let futures = names.iter().map(|n| self.tools_for(n, false));
        let results = join_all(futures).await;
        let mut tools = Vec::new();
        let mut failures = Vec::new();
        for r in results {
            match r {
                Ok(t) => tools.extend(t.iter().cloned()),
                Err(e) => failures.push(e),
            }
        }
        (tools, failures)
    }

    /// One server's tools: from the running server, else the cache, else discovery. The
    /// caller names the server, so a recent failure does not stop it being tried.
    pub async fn tools(&self, name: &str) -> Result<Arc<Vec<SanitizedTool>>, McpError> {
        self.tools_for(name, true).await
    }

    async fn tools_for(
        &self,
        name: &str,
        named: bool,
    ) -> Result<Arc<Vec<SanitizedTool>>, McpError> {
        let server = self.server(name)?;
        {
            let state = server.state.lock().await;
            match &*state {
                State::Running(r) => return Ok(offered(&server.spec, r.tools())),
                State::Failed(reason) => {
                    return Err(McpError::Failed {
                        server: name.to_owned(),
                        reason: reason.clone(),
                    });
                }
                State::Idle => {}
            }
        }
        if let Some(tools) = server.cached() {
            return Ok(offered(&server.spec, tools));
        }
        let digest = self.adapter_digest(server)?;
        if let Some(entry) = self.cache.read(&server.spec, &digest) {
            let tools = Arc::new(entry.tools);
            server.set_quarantined(entry.quarantined);
            server.set_cached(Some(tools.clone()));
            return Ok(offered(&server.spec, tools));
        }
        if !named && let Some(e) = self.cooling_down(server) {
            return Err(e);
        }
        self.start(server)
            .await
            .map(|r| offered(&server.spec, r.tools()))
    }

    /// Why `server` is left alone: it failed within [`FAILURE_COOLDOWN`].
    fn cooling_down(&self, server: &Server) -> Option<McpError> {
        let f = self.cache.read_failure(&server.spec)?;
        let age = now().saturating_sub(f.at);
        let left = FAILURE_COOLDOWN.as_secs().checked_sub(age)?;
        let name = server.spec.name.clone();
        if f.needs_login {
            return Some(McpError::NeedsLogin {
                server: name,
                challenge: f.challenge,
            });
        }
        Some(McpError::Failed {
            reason: format!(
                "{} ({} ago; not started again for {}, unless named or reset with `edgar mcp reset {name}`)",
                f.reason,
                crate::text::duration(age),
                crate::text::duration(left)
            ),
            server: name,
        })
    }

    /// The server's tools held back because they differ from their pins, as last seen
    /// (by discovery, or read from the cache this session).
    pub fn quarantined(&self, name: &str) -> Vec<Quarantined> {
        self.server(name)
            .map(|s| s.quarantined().as_ref().clone())
            .unwrap_or_default()
    }

    /// Forgets the server's cache and failure, closes it if running, and discovers again.
    pub async fn refresh(&self, name: &str) -> Result<Arc<Vec<SanitizedTool>>, McpError> {
        self.reset(name).await?;
        let server = self.server(name)?;
        self.cache.remove(&server.spec);
        server.set_cached(None);
        self.start(server)
            .await
            .map(|r| offered(&server.spec, r.tools()))
    }

    /// A human's reset: the server is no longer failed and starts again when needed.
    pub async fn reset(&self, name: &str) -> Result<(), McpError> {
        let server = self.server(name)?;
        let mut state = server.state.lock().await;
        if let State::Running(r) = std::mem::replace(&mut *state, State::Idle) {
            r.transport.lock().await.close().await;
        }
        self.cache.clear_failure(&server.spec);
        server.set_cached(None);
        Ok(())
    }

    /// Calls a tool by the name the model sees (or `server/tool`), validating the
    /// arguments against its accepted schema first and converting the result through
    /// the guard.
    pub async fn call(&self, name: &str, arguments: Value) -> Result<ToolOutput, McpError> {
        let started = std::time::Instant::now();
        let result = self.call_inner(name, arguments).await;
        if let Some(audit) = &self.opts.audit {
            let (record, outcome) = result.as_ref().map_or_else(
                |e| (e.1.clone(), json!({"error": e.0.kind()})),
                |(out, r)| {
                    (
                        r.clone(),
                        json!({"is_error": out.is_error, "blocks": out.content.len()}),
                    )
                },
            );
            let mut fields = json!({
                "server": record.server,
                "tool": record.tool,
                "name": name,
                "duration_ms": started.elapsed().as_millis() as u64,
                "args_sha256": record.args_sha256,
                "result_bytes": record.result_bytes,
            });
            if let (Value::Object(f), Value::Object(o)) = (&mut fields, outcome) {
                f.extend(o);
            }
            audit.note("call", fields);
        }
        result.map(|(out, _)| out).map_err(|e| e.0)
    }

    async fn call_inner(
        &self,
        name: &str,
        arguments: Value,
    ) -> Result<(ToolOutput, CallRecord), (McpError, CallRecord)> {
        let mut record = CallRecord::default();
        if let Some(audit) = &self.opts.audit {
            // Keyed when the trail is (HMAC-SHA256), so a short argument cannot be
            // recovered by hashing guesses.
            record.args_sha256 = audit.digest(arguments.to_string().as_bytes());
        }
        let (list, index) = match self.find_tool(name).await {
            Ok(found) => found,
            Err(e) => {
                record.server = e.server().unwrap_or_default().to_owned();
                return Err((e, record));
            }
        };
        let tool = &list[index];
        record.server = tool.server().to_owned();
        record.tool = tool.tool().to_owned();
        match self.call_found(tool, arguments, &mut record).await {
            Ok(out) => Ok((out, record)),
            Err(e) => Err((e, record)),
        }
    }

    async fn call_found(
        &self,
        tool: &SanitizedTool,
        arguments: Value,
        record: &mut CallRecord,
    ) -> Result<ToolOutput, McpError> {
        let name = tool.name();
        let arguments = if arguments.is_null() {
            json!({})
        } else {
            crate::guard::provider::without_absent_nulls(tool.input_schema(), arguments)
        };
        self.validate(tool, &arguments)?;
        let server = self.server(tool.server())?;
        let running = self.start(server).await?;
        if !offered(&server.spec, running.tools())
            .iter()
            .any(|t| t.tool() == tool.tool())
        {
            return Err(self.not_found(name));
        }
        // The result stays the text the server sent: the guard reads it as is.
        let sent = std::time::Instant::now();
        let (conn, timeout) = (&running.conn, server.spec.tool_timeout);
        let text = if conn.modern_version().is_none() {
            let params = json!({"name": tool.tool(), "arguments": arguments});
            conn.request_raw("tools/call", params, timeout).await?
        } else {
            // The stateless era: the server may answer with a request for input first.
            let headers = match &server.spec.transport {
                Transport::Http { .. } => {
                    super::http::param_headers(tool.input_schema(), &arguments)
                }
                _ => Vec::new(),
            };
            input::rounds(tool.server(), &self.opts.handler, |input| {
                let mut params = json!({"name": tool.tool(), "arguments": arguments.clone()});
                if let Some((responses, state)) = input {
                    if !responses.is_null() {
                        params["inputResponses"] = responses;
                    }
                    if let Some(state) = state {
                        params["requestState"] = Value::String(state);
                    }
                }
                conn.request_with_headers("tools/call", params, timeout, headers.clone())
            })
            .await?
        };
        // The tasks extension: the server runs the call as a task; follow it to its end.
        let text = if conn.modern_version().is_some() && task::is_task(text.get()) {
            let follow = task::Follow {
                server: tool.server(),
                conn,
                handler: &self.opts.handler,
                tasks: &running.tasks,
                poll_timeout: timeout,
                deadline: server.spec.task_deadline,
            };
            follow.run(text.get()).await?
        } else {
            text
        };
        if !running.called.swap(true, Ordering::Relaxed) {
            self.note_first_call(&server.spec, sent.elapsed());
        }
        let adapter = self.adapter(server).await?;
        let (server_name, tool_name) = (tool.server().to_owned(), tool.tool().to_owned());
        record.result_bytes = text.get().len() as u64;
        if let Some(max) = server.spec.tool_policy.max_result_bytes
            && text.get().len() as u64 > max
        {
            return Err(McpError::Blocked {
                server: server_name,
                rule: format!(
                    "max_result_bytes (the result of {} has {} bytes; the limit is {max})",
                    tool.name(),
                    text.get().len()
                ),
            });
        }
        // The built-in adapter converts a small result in microseconds (its work is linear
        // in the input): inline is cheaper than any hand-off. Anything else runs off the
        // async workers, bounded by the guard's deadline.
        let out = if server.spec.adapter == AdapterSource::Builtin
            && text.get().len() <= INLINE_GUARD_BYTES
        {
            adapter.to_result(&server_name, &tool_name, text.get())?
        } else {
            run_guard(move || adapter.to_result(&server_name, &tool_name, text.get()))
                .await
                .map_err(|reason| McpError::Start {
                    server: tool.server().to_owned(),
                    reason,
                })??
        };
        Ok(out)
    }

    /// The tool by model-visible name or `server/tool`, as its list and index (no clone).
    async fn find_tool(&self, name: &str) -> Result<(Arc<Vec<SanitizedTool>>, usize), McpError> {
        if let Some((server, tool)) = name.split_once('/') {
            let tools = self.tools(server).await?;
            return match tools.iter().position(|t| t.tool() == tool) {
                Some(i) => Ok((tools, i)),
                None => Err(self.not_found(name)),
            };
        }
        // `server__tool` of a server that may not run: say why rather than search.
        if let Some((prefix, _)) = name.split_once("__")
            && !self.servers.iter().any(|s| s.spec.name == prefix)
            && let Some(e) = self.held_error(prefix)
        {
            return Err(e);
        }
        // Tools already in memory first: the common case reads nothing and clones one tool.
        for s in &self.servers {
            if let Some(list) = s.known_tools()
                && let Some(i) = list.iter().position(|t| t.name() == name)
            {
                return Ok((list, i));
            }
        }
        let find = |tools: Arc<Vec<SanitizedTool>>| {
            let i = tools.iter().position(|t| t.name() == name)?;
            Some((tools, i))
        };
        // A call starts only its own server. The guard lets no server's tool take a name
        // without that server's prefix (`check::prefixed`), so the owner is among the
        // servers the prefix names (several only for a hashed prefix): those with tools
        // at hand first, reading one cache entry, not every server's names. Only a name
        // no owner has falls back to the uncached rest.
        let mut owners: Vec<&Arc<Server>> = self
            .servers
            .iter()
            .filter(|s| crate::guard::check::prefixed(name, &s.spec.name).is_ok())
            .collect();
        owners.sort_by_cached_key(|s| self.needs_start(s));
        let mut owner_error = None;
        for s in &owners {
            match self.tools(&s.spec.name).await {
                Ok(tools) => {
                    if let Some(hit) = find(tools) {
                        return Ok(hit);
                    }
                }
                Err(e) => owner_error = owner_error.or(Some(e)),
            }
        }
        let catalog = self.catalog().await;
        if let Some(t) = catalog.tools.into_iter().find(|t| t.name() == name) {
            return Ok((Arc::new(vec![t]), 0));
        }
        if let Some(e) = owner_error {
            return Err(e);
        }
        match catalog.failures.into_iter().next() {
            Some(e) if self.servers.len() == 1 => Err(e),
            _ => Err(self.not_found(name)),
        }
    }

    /// Why `name` is not callable: quarantined, or unknown.
    fn not_found(&self, name: &str) -> McpError {
        let (server, tool) = name.split_once('/').unwrap_or(("", name));
        for s in &self.servers {
            if !server.is_empty() && s.spec.name != server {
                continue;
            }
            if let Some(q) = s
                .quarantined()
                .iter()
                .find(|q| q.name == tool || (!server.is_empty() && q.tool == tool))
            {
                return McpError::Quarantined {
                    server: s.spec.name.clone(),
                    tool: shown(&q.tool),
                    change: q.change.clone(),
                };
            }
        }
        if !server.is_empty()
            && let Ok(s) = self.server(server)
            && !s.spec.tool_policy.allows(server, tool)
        {
            return McpError::Blocked {
                server: server.to_owned(),
                rule: format!("deny_tools or allow_tools (tool {})", shown(tool)),
            };
        }
        McpError::UnknownTool(name.to_owned())
    }

    /// Validates arguments with the tool's compiled schema, compiling it on the tool's
    /// first call only (compiling costs milliseconds; the catalog is never compiled whole).
    fn validate(&self, tool: &SanitizedTool, args: &Value) -> Result<(), McpError> {
        let key = format!("{}\u{0}{}", tool.server(), tool.tool());
        let cached = self
            .validators
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        let validator = match cached {
            Some(v) => v,
            None => {
                let v = Arc::new(crate::guard::compile_schema(tool.input_schema()).map_err(
                    |reason| McpError::InvalidArguments {
                        tool: tool.name().to_owned(),
                        errors: vec![reason],
                        schema: tool.input_schema().to_string(),
                    },
                )?);
                self.validators
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key, v.clone());
                v
            }
        };
        let errors: Vec<String> = validator
            .iter_errors(args)
            .take(MAX_ARGUMENT_ERRORS)
            .map(|e| {
                let at = e.instance_path().to_string();
                format!(
                    "- at {}: {e}",
                    if at.is_empty() { "(top level)" } else { &at }
                )
            })
            .collect();
        if errors.is_empty() {
            return Ok(());
        }
        Err(McpError::InvalidArguments {
            tool: tool.name().to_owned(),
            errors,
            schema: tool.input_schema().to_string(),
        })
    }

    /// `tool`'s input schema lowered for `provider` by its server's adapter (loaded if
    /// needed; nothing is started).
    pub async fn lower(
        &self,
        tool: &SanitizedTool,
        provider: crate::guard::Provider,
    ) -> Result<crate::guard::LoweredTool, McpError> {
        let server = self.server(tool.server())?;
        let adapter = self.adapter(server).await?;
        let tool = tool.clone();
        let lowered = run_guard(move || adapter.lower_tools(&[&tool], provider).pop())
            .await
            .map_err(|reason| McpError::Start {
                server: server.spec.name.clone(),
                reason,
            })?;
        match lowered {
            Some(result) => result.map_err(McpError::from),
            None => Err(McpError::Start {
                server: server.spec.name.clone(),
                reason: "the guard returned no lowering".into(),
            }),
        }
    }

    async fn adapter(&self, server: &Server) -> Result<Arc<Adapter>, McpError> {
        if let Some(adapter) = self.guard.loaded(&server.spec.adapter) {
            return Ok(adapter);
        }
        let guard = self.guard.clone();
        let source = server.spec.adapter.clone();
        tokio::task::spawn_blocking(move || guard.adapter(&source))
            .await
            .map_err(|e| McpError::Start {
                server: server.spec.name.clone(),
                reason: format!("the guard task failed: {e}"),
            })?
            .map_err(McpError::from)
    }

    /// The running server, starting (discovering) it if needed. A failure marks the
    /// server failed for the session.
    async fn start(&self, server: &Server) -> Result<Arc<Running>, McpError> {
        let name = &server.spec.name;
        let mut state = server.state.lock().await;
        match &*state {
            State::Running(r) => match r.conn.closed_reason() {
                None => return Ok(r.clone()),
                Some(reason) => {
                    let reason = format!("the server stopped: {reason}");
                    *state = State::Failed(reason.clone());
                    self.cache.write_failure(
                        &server.spec,
                        &Failure {
                            reason: reason.clone(),
                            at: now(),
                            needs_login: false,
                            challenge: None,
                        },
                    );
                    return Err(McpError::Failed {
                        server: name.clone(),
                        reason,
                    });
                }
            },
            State::Failed(reason) => {
                return Err(McpError::Failed {
                    server: name.clone(),
                    reason: reason.clone(),
                });
            }
            State::Idle => {}
        }
        match self.discover(server).await {
            Ok(running) => {
                self.cache.clear_failure(&server.spec);
                server.generation.fetch_add(1, Ordering::SeqCst);
                self.watch_list_changed(server, &running);
                if running.conn.modern_version().is_some() {
                    self.listen_for_changes(&server.spec.name, &running);
                }
                *state = State::Running(running.clone());
                Ok(running)
            }
            Err(e) => {
                let reason = strip_server(&e, name);
                // The caller reports the error; a warning too would say it twice.
                tracing::debug!(server = name, "discovery failed: {reason}");
                let (needs_login, challenge) = match &e {
                    McpError::NeedsLogin { challenge, .. } => (true, challenge.clone()),
                    _ => (false, None),
                };
                self.cache.write_failure(
                    &server.spec,
                    &Failure {
                        reason: reason.clone(),
                        at: now(),
                        needs_login,
                        challenge,
                    },
                );
                if !needs_login {
                    self.cache.clear_era(&server.spec);
                }
                *state = State::Failed(reason);
                // A bounded wait may have reported it pending: the catalog changed.
                server.generation.fetch_add(1, Ordering::SeqCst);
                Err(e)
            }
        }
    }

    /// Connect, `initialize`, check the version, `tools/list` (all pages), guard, cache.
    async fn discover(&self, server: &Server) -> Result<Arc<Running>, McpError> {
        let spec = &server.spec;
        let name = &spec.name;
        let digest = self.adapter_digest(server)?;
        let started = std::time::Instant::now();
        let ms = |since: std::time::Instant| since.elapsed().as_millis() as u64;
        let mut timings = Timings {
            at: now(),
            ..Timings::default()
        };
        let (mut transport, conn) = self.connect(spec)?;
        timings.spawn_ms = ms(started);
        let handshake = async {
            let phase = std::time::Instant::now();
            // The guard's first load (engine, compile) overlaps the server's own start.
            let (adapter, era) = tokio::join!(self.adapter(server), self.negotiate(spec, &conn));
            let (adapter, era) = (adapter?, era?);
            timings.initialize_ms = Some(ms(phase));
            // A stateless server's list that it said is still fresh (`ttlMs`) is used as
            // cached: no `tools/list`, no guard work, nothing written.
            let modern = conn.modern_version().is_some();
            if modern
                && let Some(entry) = self.cache.read(spec, &digest)
                && entry.fresh_until_ms.is_some_and(|t| t > now_ms())
            {
                tracing::debug!(server = name, "its tool list is still fresh");
                return Ok::<_, McpError>((era, entry, true));
            }
            let phase = std::time::Instant::now();
            let (raw, ttl_ms) = list_tools(name, &conn, spec.startup_timeout).await?;
            timings.list_ms = Some(ms(phase));
            let phase = std::time::Instant::now();
            let (tools, refused) = guard_tools(&adapter, spec, raw).await?;
            let (tools, quarantined) = pin_tools(
                self.opts.pins.as_deref(),
                self.opts.audit.as_ref(),
                spec,
                tools,
            )?;
            timings.guard_ms = Some(ms(phase));
            let entry = Entry {
                tools,
                refused,
                quarantined,
                protocol_version: era.version.clone(),
                server_info: era.server_info.clone(),
                fetched_at: now(),
                fresh_until_ms: fresh_until(modern, ttl_ms),
            };
            Ok::<_, McpError>((era, entry, false))
        };
        let outcome = tokio::time::timeout(spec.startup_timeout, handshake).await;
        timings.total_ms = ms(started);
        timings.ok = matches!(outcome, Ok(Ok(_)));
        self.cache.write_timings(spec, &timings);
        let outcome = match outcome {
            Ok(r) => r,
            Err(_) => Err(McpError::Timeout {
                server: name.clone(),
                method: "initialize and tools/list".into(),
                timeout: spec.startup_timeout,
            }),
        };
        let (_, entry, cached) = match outcome {
            Ok(v) => v,
            Err(e) => {
                let tail = transport.stderr_tail();
                transport.close().await;
                let e = confined_hint(with_tail(e, &tail), spec);
                return Err(workdir_hint(e, spec, &self.opts.cwd));
            }
        };
        server.set_quarantined(entry.quarantined.clone());
        if !cached && let Err(e) = self.cache.write(spec, &digest, &entry) {
            tracing::debug!(server = name, "cannot write the discovery cache: {e}");
        }
        Ok(Arc::new(Running {
            conn,
            transport: AsyncMutex::new(transport),
            tools: RwLock::new(Arc::new(entry.tools)),
            called: std::sync::atomic::AtomicBool::new(false),
            tasks: Tasks::default(),
        }))
    }

    /// Adds the session's first call latency to the server's last discovery timings.
    fn note_first_call(&self, spec: &ServerSpec, took: Duration) {
        if let Some(mut t) = self.cache.read_timings(spec) {
            t.first_call_ms = Some(took.as_millis() as u64);
            self.cache.write_timings(spec, &t);
        }
    }

    /// The server's last discovery timings, from the cache (`edgar mcp list --timings`).
    pub fn timings(&self, name: &str) -> Option<Timings> {
        self.cache.read_timings(&self.server(name).ok()?.spec)
    }

    /// The server's sign-in, when the session has a credential store.
    fn authorizer(&self, spec: &ServerSpec) -> Option<Arc<dyn super::http::Authorizer>> {
        let store = self.opts.credentials.clone()?;
        let mut all = self.sign_ins.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(a) = all.get(&spec.name) {
            return Some(a.clone());
        }
        let locks = self.opts.cache_dir.as_ref().map(|d| d.join("locks"));
        match McpAuth::new(spec, store, self.opts.browser) {
            Ok(a) => {
                let a = a.with_lock_dir(locks);
                let a = Arc::new(a);
                all.insert(spec.name.clone(), a.clone());
                Some(a)
            }
            Err(e) => {
                tracing::debug!(server = spec.name, "no sign-in: {e}");
                None
            }
        }
    }

    fn connect(&self, spec: &ServerSpec) -> Result<(TransportHandle, Connection), McpError> {
        if let Transport::Http { url, headers } | Transport::Sse { url, headers } = &spec.transport
            && !headers.is_empty()
            && !crate::net::is_https_or_loopback(url)
        {
            return Err(McpError::Start {
                server: spec.name.clone(),
                reason: format!(
                    "refusing to send its configured headers ({}) in clear text to a plain http URL on another host; use https",
                    headers
                        .keys()
                        .map(|k| shown(k))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        let ctx = Context {
            roots: vec![self.opts.cwd.clone()],
            handler: self.opts.handler.clone(),
        };
        match &spec.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
                env_inherit,
            } => {
                let log = self
                    .opts
                    .cache_dir
                    .as_ref()
                    .map(|d| d.join("logs").join(format!("{}.log", spec.name)));
                let (stdio, link) = Stdio::spawn(Spawn {
                    server: &spec.name,
                    command,
                    args,
                    env,
                    env_inherit: *env_inherit,
                    // An approved project entry runs in its project (the approval says
                    // so); everything else in a private empty directory.
                    cwd: cwd.as_deref().or(spec.project.as_deref()),
                    log,
                    sandbox: match &spec.sandbox {
                        crate::config::Sandbox::On(p) => Some(p),
                        _ => None,
                    },
                })
                .map_err(|reason| McpError::Start {
                    server: spec.name.clone(),
                    reason,
                })?;
                // A confined server's start records the profile it runs under.
                if matches!(spec.sandbox, crate::config::Sandbox::On(_)) {
                    self.audit(
                        "start",
                        json!({"server": spec.name, "confinement": confinement_line(spec)}),
                    );
                }
                Ok((
                    TransportHandle::Stdio(stdio),
                    Connection::start(&spec.name, link, ctx),
                ))
            }
            Transport::Http { url, headers } => {
                let (http, link) = Http::start(&spec.name, url, headers, self.authorizer(spec))
                    .map_err(|reason| McpError::Start {
                        server: spec.name.clone(),
                        reason,
                    })?;
                Ok((
                    TransportHandle::Http(http),
                    Connection::start(&spec.name, link, ctx),
                ))
            }
            Transport::Sse { url, headers } => {
                let (legacy, link) = Legacy::start(&spec.name, url, headers, self.authorizer(spec))
                    .map_err(|reason| McpError::Start {
                        server: spec.name.clone(),
                        reason,
                    })?;
                Ok((
                    TransportHandle::Legacy(legacy),
                    Connection::start(&spec.name, link, ctx),
                ))
            }
        }
    }

    /// Settles the protocol era (`era::negotiate`), from the era this server spoke
    /// last time if the cache remembers it.
    async fn negotiate(
        &self,
        spec: &ServerSpec,
        conn: &Connection,
    ) -> Result<Negotiated, McpError> {
        let hello = Hello {
            elicitation: self.opts.handler.supports_elicitation(),
        };
        let known = match spec.protocol {
            ProtocolChoice::Auto => self.cache.read_era(spec).map(|e| e.version),
            ProtocolChoice::Handshake => Some(PROTOCOL[0].to_owned()),
            ProtocolChoice::Stateless => Some(MODERN[0].to_owned()),
        };
        let fixed = spec.protocol != ProtocolChoice::Auto;
        let negotiated = era::negotiate(
            &spec.name,
            conn,
            &hello,
            known.as_deref(),
            fixed,
            spec.startup_timeout,
        )
        .await?;
        if spec.protocol == ProtocolChoice::Auto
            && known.as_deref() != Some(negotiated.version.as_str())
        {
            self.cache.write_era(
                spec,
                &Era {
                    version: negotiated.version.clone(),
                    at: now(),
                },
            );
        }
        Ok(negotiated)
    }

    /// Stateless era: asks a running server to say when its tools change
    /// (`subscriptions/listen`), which feeds the same refresh as the handshake era's
    /// `notifications/tools/list_changed`. The subscription lives as long as the
    /// connection; one that breaks is opened again a few times, one the server does not
    /// offer is not.
    fn listen_for_changes(&self, server: &str, running: &Arc<Running>) {
        let running = running.clone();
        let server = server.to_owned();
        let task = tokio::spawn(async move {
            let params = json!({"notifications": {"toolsListChanged": true}});
            for attempt in 0..LISTEN_ATTEMPTS {
                if attempt > 0 {
                    tokio::time::sleep(LISTEN_RETRY * attempt).await;
                }
                let ended = running
                    .conn
                    .request("subscriptions/listen", params.clone(), LISTEN_FOR)
                    .await;
                match ended {
                    Ok(_) => tracing::debug!(server, "the server ended its subscription"),
                    Err(McpError::Closed { .. }) => return,
                    Err(e @ McpError::Server { .. }) => {
                        tracing::debug!(server, "no change subscription: {e}");
                        return;
                    }
                    Err(e) => tracing::debug!(server, "the change subscription broke: {e}"),
                }
            }
        });
        self.background
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(task.abort_handle());
    }

    /// Refreshes a running server's tools whenever it says its list changed.
    fn watch_list_changed(&self, server: &Server, running: &Arc<Running>) {
        let notify = running.conn.list_changed();
        let weak = Arc::downgrade(running);
        let spec = server.spec.clone();
        let cache = self.cache.clone();
        let digest = self.adapter_digest(server).ok();
        let guard = self.guard.clone();
        let generation = self.generation.clone();
        let pins = self.opts.pins.clone();
        let audit = self.opts.audit.clone();
        let quarantined = server.quarantined.clone();
        tokio::spawn(async move {
            let mut first = true;
            loop {
                if !first {
                    tokio::time::sleep(LIST_CHANGED_MIN_INTERVAL).await;
                }
                first = false;
                notify.notified().await;
                let Some(running) = weak.upgrade() else {
                    return;
                };
                if running.conn.closed_reason().is_some() {
                    return;
                }
                let source = spec.adapter.clone();
                let g = guard.clone();
                let adapter = match tokio::task::spawn_blocking(move || g.adapter(&source)).await {
                    Ok(Ok(a)) => a,
                    _ => continue,
                };
                // The notification makes a list still fresh by its TTL stale at once.
                let modern = running.conn.modern_version().is_some();
                let mut ttl_ms = 0;
                let refreshed =
                    match list_tools(&spec.name, &running.conn, spec.startup_timeout).await {
                        Ok((raw, ttl)) => {
                            ttl_ms = ttl;
                            guard_tools(&adapter, &spec, raw).await
                        }
                        Err(e) => Err(e),
                    };
                let refreshed = refreshed.and_then(|(tools, refused)| {
                    let (tools, q) = pin_tools(pins.as_deref(), audit.as_ref(), &spec, tools)?;
                    Ok((tools, refused, q))
                });
                match refreshed {
                    Ok((tools, refused, q)) => {
                        *quarantined.write().unwrap_or_else(|p| p.into_inner()) =
                            Arc::new(q.clone());
                        tracing::info!(
                            server = spec.name,
                            tools = tools.len(),
                            "tool list changed; refreshed"
                        );
                        *running.tools.write().unwrap_or_else(|p| p.into_inner()) =
                            Arc::new(tools.clone());
                        generation.fetch_add(1, Ordering::SeqCst);
                        if let Some(d) = &digest {
                            cache.remove(&spec);
                            let entry = Entry {
                                tools,
                                refused,
                                quarantined: q,
                                protocol_version: cache
                                    .read_era(&spec)
                                    .map(|e| e.version)
                                    .unwrap_or_default(),
                                server_info: Value::Null,
                                fetched_at: now(),
                                fresh_until_ms: fresh_until(modern, ttl_ms),
                            };
                            let _ = cache.write(&spec, d, &entry);
                        }
                    }
                    Err(e) => {
                        tracing::warn!(server = spec.name, "refreshing the tool list failed: {e}")
                    }
                }
            }
        });
    }

    /// Shuts every started server down and reaps it.
    pub async fn close(&self) {
        for task in self
            .background
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            task.abort();
        }
        let closes = self.servers.iter().map(|s| async move {
            let mut state = s.state.lock().await;
            if let State::Running(r) = std::mem::replace(&mut *state, State::Idle) {
                r.tasks.cancel_all(&r.conn).await;
                r.transport.lock().await.close().await;
            }
        });
        join_all(closes).await;
    }
}

impl Running {
    fn tools(&self) -> Arc<Vec<SanitizedTool>> {
        self.tools.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The tools the config offers (`enabled_tools`/`disabled_tools`), applied when tools are
/// read, so changing the filters needs no rediscovery. No copy when there is no filter.
fn offered(spec: &ServerSpec, tools: Arc<Vec<SanitizedTool>>) -> Arc<Vec<SanitizedTool>> {
    if !spec.filters_tools() {
        return tools;
    }
    Arc::new(
        tools
            .iter()
            .filter(|t| spec.allows(t.tool()))
            .cloned()
            .collect(),
    )
}

fn tool_name_of(t: &SanitizedTool) -> ToolName {
    ToolName {
        name: t.name().to_owned(),
        server: t.server().to_owned(),
        tool: t.tool().to_owned(),
    }
}

fn dedupe_names(names: Vec<ToolName>) -> Vec<ToolName> {
    let mut seen = HashSet::new();
    names
        .into_iter()
        .filter(|n| seen.insert(n.name.clone()))
        .collect()
}

/// Runs guard work off the async workers' queues: `block_in_place` on a multi-threaded
/// runtime (no thread hand-off), `spawn_blocking` otherwise. Guard calls are bounded by
/// their deadline.
async fn run_guard<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => Ok(tokio::task::block_in_place(f)),
        _ => tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| format!("the guard task failed: {e}")),
    }
}

/// One `tools/list` result, its parts undecoded.
#[derive(serde::Deserialize)]
struct Page<'a> {
    #[serde(borrow)]
    tools: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, rename = "nextCursor")]
    next_cursor: Option<&'a serde_json::value::RawValue>,
    #[serde(rename = "ttlMs", default)]
    ttl_ms: Option<f64>,
}

/// Milliseconds since the epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Until when a stateless server's list stays fresh: its `ttlMs` from now (capped at a
/// day); `None` for a handshake server, or a TTL of 0 (stale at once).
fn fresh_until(modern: bool, ttl_ms: u64) -> Option<u64> {
    (modern && ttl_ms > 0).then(|| now_ms().saturating_add(ttl_ms.min(MAX_FRESH_MS)))
}

/// `tools/list`, following `nextCursor` up to [`MAX_PAGES`]; each tool as JSON text, and
/// the shortest `ttlMs` of its pages (0 where a page has none, as the spec says).
async fn list_tools(
    server: &str,
    conn: &Connection,
    timeout: Duration,
) -> Result<(Vec<String>, u64), McpError> {
    let bad = |reason: String| McpError::Protocol {
        server: server.to_owned(),
        reason,
    };
    let mut raw = Vec::new();
    let mut bytes = 0;
    let mut cursor: Option<String> = None;
    let mut seen = HashSet::new();
    let mut ttl_ms = u64::MAX;
    for _ in 0..MAX_PAGES {
        let params = cursor
            .as_ref()
            .map_or(json!({}), |c| json!({ "cursor": c }));
        // Each tool stays the text the server sent (the guard reads text), and the
        // count and bytes are checked before anything is kept.
        let result = conn.request_raw("tools/list", params, timeout).await?;
        let page: Page<'_> = serde_json::from_str(result.get())
            .map_err(|e| bad(format!("its tools/list result does not decode ({e})")))?;
        let Some(tools) = page.tools else {
            return Err(bad("its tools/list result has no tools list".into()));
        };
        let page_ttl = page
            .ttl_ms
            .filter(|t| t.is_finite() && *t > 0.0)
            .map_or(0, |t| t as u64);
        ttl_ms = ttl_ms.min(page_ttl);
        let room = MAX_TOOLS_PER_SERVER - raw.len();
        let tools = super::protocol::elements(tools.get(), room).map_err(|e| {
            bad(if e.starts_with("holds more than") {
                format!("it lists more than {MAX_TOOLS_PER_SERVER} tools")
            } else {
                format!("its tools list {e}")
            })
        })?;
        for t in tools {
            bytes += t.get().len();
            if bytes > MAX_TOOLS_BYTES_PER_SERVER {
                return Err(bad(format!(
                    "its tools/list pages hold more than {} MiB of tool definitions",
                    MAX_TOOLS_BYTES_PER_SERVER >> 20
                )));
            }
            raw.push(t.get().to_owned());
        }
        match page
            .next_cursor
            .and_then(|c| serde_json::from_str::<String>(c.get()).ok())
        {
            Some(c) if !c.is_empty() => {
                if !seen.insert(c.clone()) {
                    return Err(bad("its tools/list pagination repeats a cursor".into()));
                }
                cursor = Some(c);
            }
            _ => return Ok((raw, ttl_ms)),
        }
    }
    Err(bad(format!(
        "its tools/list goes on for more than {MAX_PAGES} pages"
    )))
}

/// The names a session has without starting anything.
enum AtHand {
    /// The whole configuration's index file.
    Index(Vec<ToolName>),
    /// Each server's live or cached names, the failures known, and the servers that
    /// have neither.
    Servers(Vec<ToolName>, Vec<McpError>, Vec<String>),
}

/// A catalog of `tools` where a name two servers produced keeps the first.
fn unique(tools: Vec<SanitizedTool>, failures: Vec<McpError>) -> Catalog {
    let mut seen = HashSet::new();
    let tools = tools
        .into_iter()
        .filter(|t| {
            let fresh = seen.insert(t.name().to_owned());
            if !fresh {
                tracing::warn!(
                    server = t.server(),
                    "tool {} hidden: its name is taken by another server",
                    t.name()
                );
            }
            fresh
        })
        .collect();
    Catalog {
        tools,
        failures,
        pending: Vec::new(),
    }
}

/// What a tool call leaves in the audit trail (never argument values or results).
#[derive(Debug, Clone, Default)]
struct CallRecord {
    server: String,
    tool: String,
    args_sha256: String,
    result_bytes: u64,
}

/// How a stdio server runs, in one line: its confinement, or why it has none.
pub fn confinement_line(spec: &ServerSpec) -> String {
    match &spec.sandbox {
        crate::config::Sandbox::On(p) => crate::mcp::sandbox::describe(p),
        crate::config::Sandbox::Off => "NOT confined: its entry says \"sandbox\": \"off\"".into(),
        crate::config::Sandbox::Unset => {
            "NOT confined: its entry has no \"sandbox\" profile".into()
        }
    }
}

/// Checks guarded tools against the server's pins: the accepted ones, and those held
/// back. First pins and new quarantines are recorded in the audit trail. A pin store
/// that cannot be used fails discovery: never offer unchecked tools when pinning is on.
fn pin_tools(
    pins: Option<&PinStore>,
    audit: Option<&AuditLog>,
    spec: &ServerSpec,
    tools: Vec<SanitizedTool>,
) -> Result<(Vec<SanitizedTool>, Vec<Quarantined>), McpError> {
    let Some(pins) = pins else {
        return Ok((tools, Vec::new()));
    };
    let checked = pins
        .check(spec, tools, now())
        .map_err(|e| McpError::Start {
            server: spec.name.clone(),
            reason: format!("its tool pins cannot be checked: {e}"),
        })?;
    if !checked.pinned_by_lock.is_empty() {
        tracing::warn!(
            server = spec.name,
            "first use: {} tool(s) pinned because the project's .mcp.lock lists them as they are; `edgar mcp pins {}` shows them",
            checked.pinned_by_lock.len(),
            spec.name
        );
    }
    if let Some(audit) = audit {
        if checked.first {
            audit.note(
                "pinned",
                json!({"server": spec.name, "tools": checked.accepted.len(), "launch": spec.digest(),
                       "by_lock": checked.pinned_by_lock}),
            );
        }
        for q in &checked.newly_quarantined {
            tracing::warn!(
                server = spec.name,
                "tool {} quarantined: {}; review it with `edgar mcp approve {}`",
                shown(&q.tool),
                q.change,
                spec.name
            );
            audit.note(
                "quarantine",
                json!({"server": spec.name, "tool": q.tool, "change": q.change}),
            );
        }
    }
    Ok((checked.accepted, checked.quarantined))
}

/// Runs the tools through the guard (off the async runtime) and applies the config's
/// tool filters. Refused tools are logged and listed, never fatal.
async fn guard_tools(
    adapter: &Arc<Adapter>,
    spec: &ServerSpec,
    raw: Vec<String>,
) -> Result<(Vec<SanitizedTool>, Vec<String>), McpError> {
    let adapter = adapter.clone();
    let server = spec.name.clone();
    let results = tokio::task::spawn_blocking(move || adapter.accept_tools(&server, &raw))
        .await
        .map_err(|e| McpError::Start {
            server: spec.name.clone(),
            reason: format!("the guard task failed: {e}"),
        })?;
    let mut tools = Vec::new();
    let mut refused = Vec::new();
    for r in results {
        match r {
            Ok(t) => tools.push(t),
            Err(e) => {
                tracing::warn!(server = spec.name, "tool refused: {e}");
                refused.push(e.to_string());
            }
        }
    }
    Ok((tools, refused))
}

/// The error's text without the leading "MCP server 'x' ", for storing as a reason.
fn strip_server(e: &McpError, name: &str) -> String {
    let text = e.to_string();
    text.strip_prefix(&format!("MCP server '{name}' "))
        .map(str::to_owned)
        .unwrap_or(text)
}

/// A start failure's reason with `hint` appended (other errors as they are).
fn explained(e: McpError, hint: &str) -> McpError {
    match e {
        McpError::Start { server, reason } => McpError::Start {
            server,
            reason: format!("{reason}{hint}"),
        },
        McpError::Closed { server, reason } => McpError::Closed {
            server,
            reason: format!("{reason}{hint}"),
        },
        McpError::Protocol { server, reason } => McpError::Protocol {
            server,
            reason: format!("{reason}{hint}"),
        },
        other => other,
    }
}

/// A server without `cwd` that names a relative path which exists where edgar runs
/// (`node server.js`) failed because it runs in a private empty directory: the error says
/// so and how to fix it, instead of leaving the user to guess.
fn workdir_hint(e: McpError, spec: &ServerSpec, session_dir: &Path) -> McpError {
    let Transport::Stdio {
        command,
        args,
        cwd: None,
        ..
    } = &spec.transport
    else {
        return e;
    };
    if spec.project.is_some() {
        return e;
    }
    let relative = std::iter::once(command).chain(args).find(|a| {
        let p = Path::new(a.as_str());
        p.is_relative() && !a.starts_with('-') && session_dir.join(p).exists()
    });
    let Some(found) = relative else {
        return e;
    };
    let hint = format!(
        "; it runs in a private empty directory, not in {} (where {} is): give it \"cwd\" in its entry, or an absolute path",
        shown(&session_dir.display().to_string()),
        shown(found)
    );
    explained(e, &hint)
}

/// A confined server that failed to start may have been denied what it needed: the error
/// says how it ran and which keys would allow more.
fn confined_hint(e: McpError, spec: &ServerSpec) -> McpError {
    let crate::config::Sandbox::On(p) = &spec.sandbox else {
        return e;
    };
    let hint = format!(
        "; it runs {}: if it was denied a file, a connection or a system call it needs, allow it in its entry's \"sandbox\" (\"read\", \"write\", \"net\": \"all\") or set \"sandbox\": \"off\"",
        crate::mcp::sandbox::describe(p)
    );
    explained(e, &hint)
}

/// Adds the server's last stderr lines to errors that do not already carry them.
fn with_tail(e: McpError, tail: &str) -> McpError {
    match e {
        McpError::Timeout {
            server,
            method,
            timeout,
        } if !tail.is_empty() => McpError::Start {
            reason: format!(
                "no answer to {method} within {} s{tail}",
                timeout.as_secs_f64()
            ),
            server,
        },
        McpError::Version { server, version } if !tail.is_empty() => McpError::Start {
            reason: format!(
                "it speaks protocol version {version}; edgar speaks {}, {}{tail}",
                super::protocol::MODERN.join(", "),
                super::protocol::PROTOCOL.join(", ")
            ),
            server,
        },
        McpError::Protocol { server, reason } => McpError::Protocol {
            server,
            reason: format!("{reason}{tail}"),
        },
        other => other,
    }
}

/// Awaits all futures concurrently, outputs in input order (a tiny `join_all`, to avoid
/// a dependency).
pub async fn join_all<F: std::future::Future>(
    futures: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    let mut pinned: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = pinned.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, slot) in pinned.iter_mut().zip(out.iter_mut()) {
            if slot.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *slot = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}
