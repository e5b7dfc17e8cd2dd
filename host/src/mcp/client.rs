//! The session: one lazy handle per configured server, discovery once per server per
//! session (cached on disk), tool calls, and close.
//!
//! [`Session::new`] (the walkthrough's `servers`) starts nothing: no process, socket,
//! HTTP client or WASM engine. A server starts the first time one of its tools is
//! called, or when its tool names are needed and no cache has them. A server whose
//! discovery fails stays failed for the session and every call to it says why at once.
//!
//! This file holds the handle, the server table and what every part shares; each job
//! has its own file: `catalog` (names and found tools, bounded waits,
//! the cool-down), `discovery` (start, `tools/list`, guard, pins, cache), `connect`
//! (transports, sign-in, era), `call` (calls and their audit), `refresh` (reset,
//! refresh, list changes) and `hints` (what a failed start says).

use std::collections::HashMap;

mod call;
mod catalog;
mod connect;
mod content;
mod discovery;
mod findings;
mod hints;
mod inspect;
mod prompts;
mod refresh;
mod resources;
#[cfg(test)]
mod tests;
mod utilities;

use super::McpError;
use super::connection::{ClientHandler, Connection, NoHandler};
use super::task::Tasks;
use crate::auth::mcp::{Browser, McpAuth};
use crate::auth::store::Store;
use crate::config::{Config, Held, Hold, ServerSpec};
use crate::guard::ToolName;
use crate::guard::{Guard, SanitizedTool};
use crate::mcp::cache::{Timings, ToolCache};
use crate::trust::audit::AuditLog;
use crate::trust::pins::{PinStore, Quarantined};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::sync::Mutex as AsyncMutex;

use connect::TransportHandle;
pub use hints::confinement_line;
pub use inspect::Inspection;
pub use prompts::{Prompt, PromptArgument, PromptMessage, PromptOutput};
pub use resources::Resource;
pub use utilities::ACKNOWLEDGED;

/// Most `tools/list` pages followed before a server is considered broken.
pub const MAX_PAGES: usize = 100;

/// Most tools accepted from one server.
pub const MAX_TOOLS_PER_SERVER: usize = 5000;

/// Most bytes of tool definitions kept from one server across all its `tools/list`
/// pages: 100 pages of 16 MiB would otherwise hold 1.6 GB before any count check.
pub const MAX_TOOLS_BYTES_PER_SERVER: usize = 32 << 20;

/// How long a server whose discovery failed is left alone by commands that do not name
/// it: a dead or hanging server costs its startup deadline once, not on every command.
/// Naming it, changing its config or `edgar mcp reset NAME` tries it at once.
pub const FAILURE_COOLDOWN: Duration = Duration::from_secs(10 * 60);

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
    /// A discovery cache shared with other machines (a team gateway's replicas).
    pub shared_cache: Option<Arc<dyn crate::mcp::cache::SharedCache>>,
    /// Where per-user exchanged tokens are kept for other machines too (sealed).
    pub token_vault: Option<Arc<dyn crate::auth::mcp::exchange::TokenVault>>,
    /// A team gateway's users' own sign-ins to its `user_sign_in` servers.
    pub user_sign_ins: Option<Arc<crate::auth::mcp::user_sign_in::UserSignIns>>,
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
            shared_cache: None,
            token_vault: None,
            user_sign_ins: None,
        }
    }

    /// Pins and the audit trail in `state_dir` (edgar's state directory), with the
    /// project's `.mcp.lock` as the authority for its own servers.
    pub fn with_trust(mut self, state_dir: &std::path::Path) -> SessionOptions {
        self.pins = Some(Arc::new(PinStore::new(state_dir, Some(&self.cwd))));
        self.audit = Some(AuditLog::new(state_dir));
        self
    }

    /// The audit trail keyed (made on the first line written): by its key file when it
    /// has one, else a key kept in `store`, else a new key file beside the trail
    /// (`auth::audit_key::source_or_file`).
    pub fn with_audit_key(mut self, store: Option<Store>) -> SessionOptions {
        if let Some(audit) = self.audit.take() {
            let source = crate::auth::audit_key::source_or_file(store, audit.dir());
            self.audit = Some(audit.with_key(source));
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
    /// Each server whose tools changed while it ran (its own word, re-listed and
    /// guarded), for whoever serves the list on.
    changed: tokio::sync::broadcast::Sender<Arc<str>>,
    /// What running servers say changed besides their tools.
    news: tokio::sync::broadcast::Sender<super::news::News>,
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
    /// Its prompt list as last checked, for a `prompts/get` right after.
    prompts: Mutex<Option<prompts::Kept>>,
    /// The stateless era's resource subscriptions: a listen stream per URI.
    watched: Mutex<HashMap<String, tokio::task::AbortHandle>>,
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
            changed: tokio::sync::broadcast::channel(16).0,
            news: tokio::sync::broadcast::channel(64).0,
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
            cache: ToolCache::new(opts.cache_dir.as_deref()).with_shared(opts.shared_cache.clone()),
            opts,
            validators: Mutex::new(HashMap::new()),
            sign_ins: Mutex::new(HashMap::new()),
            held: config.held.clone(),
        }))
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

    /// Writes an event to the session's audit trail, when it keeps one (the gateway
    /// writes its own decisions there too).
    pub fn audit(&self, event: &str, fields: Value) {
        if let Some(a) = &self.opts.audit {
            a.note(event, fields);
        }
    }

    /// The digest an audit line carries for `bytes` it must not hold (a URI, which may
    /// carry a secret): keyed when the trail is; `None` without a trail.
    pub fn audit_digest(&self, bytes: &[u8]) -> Option<String> {
        self.opts.audit.as_ref().map(|a| a.digest(bytes))
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

    /// How long prompts and searches wait for servers that must be discovered.
    pub fn prompt_budget(&self) -> Duration {
        self.opts.prompt_budget
    }

    /// Changes whenever any server's known tools change (read from cache, discovered,
    /// refreshed, reset), so derived data such as a search index can be kept until then.
    /// Hears the name of each server whose tools changed while it ran, once its new
    /// list passed the guard and the pins.
    pub fn tools_changed(&self) -> tokio::sync::broadcast::Receiver<Arc<str>> {
        self.changed.subscribe()
    }

    /// Hears what running servers say changed besides their tools (a watched resource,
    /// their resource or prompt list), as they say it.
    pub fn news(&self) -> tokio::sync::broadcast::Receiver<super::news::News> {
        self.news.subscribe()
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

    /// The servers running now, in configured order. One being started is not yet (it
    /// is told as [`super::news::Change::Started`] when it is); a server's state held
    /// for a moment by a call is waited for, briefly.
    pub async fn running(&self) -> Vec<&str> {
        const HELD: Duration = Duration::from_millis(100);
        let mut names = Vec::new();
        for s in &self.servers {
            let state = match s.state.try_lock() {
                Ok(state) => Some(state),
                Err(_) => tokio::time::timeout(HELD, s.state.lock()).await.ok(),
            };
            if let Some(State::Running(_)) = state.as_deref() {
                names.push(s.spec.name.as_str());
            }
        }
        names
    }

    /// Every server's state. Reads only small cache files; starts nothing.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.servers.iter().map(|s| self.status_one(s)).collect()
    }

    /// One server's state (as `status` gives it), if it is configured.
    pub fn status_of(&self, name: &str) -> Option<ServerStatus> {
        self.server(name).ok().map(|s| self.status_one(s))
    }

    fn status_one(&self, s: &Server) -> ServerStatus {
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

    /// The session's discovery cache.
    pub fn cache(&self) -> &ToolCache {
        &self.cache
    }

    /// The server's tools held back because they differ from their pins, as last seen
    /// (by discovery, or read from the cache this session).
    pub fn quarantined(&self, name: &str) -> Vec<Quarantined> {
        self.server(name)
            .map(|s| s.quarantined().as_ref().clone())
            .unwrap_or_default()
    }

    /// The server's last discovery timings, from the cache (`edgar mcp list --timings`).
    pub fn timings(&self, name: &str) -> Option<Timings> {
        self.cache.read_timings(&self.server(name).ok()?.spec)
    }

    /// Keeps a background task's handle for `close` to abort, forgetting those that
    /// have finished, so a long session does not gather one per task it ever ran.
    fn keep(&self, task: tokio::task::AbortHandle) {
        let mut background = crate::sync::lock(&self.background);
        background.retain(|h| !h.is_finished());
        background.push(task);
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
