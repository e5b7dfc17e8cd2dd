//! `edgar mcp serve`: the whole host as one MCP server, for agents that already speak
//! MCP (Claude Code, Codex, Cursor, Gemini CLI). The client sees `tool_search` and
//! `call_tool` at start, whatever is configured; each search adds the tools it found to
//! the served list (announced with `notifications/tools/list_changed`), so a client can
//! then call them by name. Everything behind is the session's: lazy start, the guard,
//! pins and policy, sign-in state, the audit trail.
//!
//! Both protocol eras are answered per request, as the example server does: a request
//! whose `_meta` names a stateless version is answered in that era (`server/discover`,
//! `resultType`), anything else after the `initialize` handshake. Requests run
//! concurrently; `notifications/cancelled` stops the one it names (dropping its upstream
//! call, which cancels it at the server). End of input ends the serve loop once what
//! was asked before it is answered (at most `FINISH_AFTER_EOF`); the caller closes the
//! session.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::mcp::client::Session;
use crate::mcp::connection::LOGS;
use crate::mcp::protocol::{
    self, INVALID_PARAMS, META_SUBSCRIPTION_ID, METHOD_NOT_FOUND, MODERN, PROTOCOL,
};
use crate::telemetry::{Kind, Span};
use crate::tools::search_tool::ToolSearch;

mod calls;
mod content;
pub mod elicit;
pub mod http;
mod news;
pub mod per_user;
pub mod questions;
mod refused;
pub mod sign_in;
mod stdio;
pub mod team;
pub mod trace;
mod user;

use crate::guard::SanitizedTool;
use crate::sync::lock;
use calls::{log_sink, progress_sink};
use refused::Refused;
use team::{Principal, Team};

/// The second built-in tool: calls a found tool by name.
pub const CALL_TOOL: &str = "call_tool";

const INSTRUCTIONS: &str = "edgar serves the tools of every configured MCP server without \
    loading their schemas up front. Describe what you need to tool_search (or give a tool's \
    name); it returns the matching tools' schemas, and those tools can then be called \
    directly or through call_tool.";

const SEARCH_DESCRIPTION: &str = "Find tools by what they do, among every MCP server edgar \
    serves: describe the task in plain words (for example \"create a GitHub issue\" or \"read a \
    PDF\"), or give a tool's name. Matching tools' schemas are returned and those tools become \
    callable, by name or through call_tool.";

/// What the gateway shows its client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exposure {
    /// `tool_search` and `call_tool`, and the tools searches found (the default).
    Search,
    /// Every tool, prompt and resource of every server, named `SERVER__...`.
    All,
    /// One server as itself: its tools and prompts by their own names, its resources by
    /// their own URIs, completion, logging and subscriptions passed on; everything
    /// still through the guard, pins, policy, confinement and the audit trail.
    Transparent(String),
}

/// Who a request runs as: the one local user (stdio, the loopback secret), or a user of
/// a team gateway, whose token named them.
#[derive(Debug, Clone, Default)]
pub enum Caller {
    #[default]
    Local,
    User(Arc<User>),
}

/// A team gateway's user: who the token names, and the token itself (exchanged for a
/// per-user upstream's own, never sent on). `Debug` shows the principal only.
pub struct User {
    pub principal: Principal,
    pub token: Arc<crate::auth::Secret>,
}

impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

impl Caller {
    /// The key of this caller's own state (what its searches found).
    /// Who this is: the user's `sub`, empty for the one local user.
    pub fn key(&self) -> &str {
        match self {
            Caller::Local => "",
            Caller::User(u) => &u.principal.sub,
        }
    }
}

/// What a serve loop needs: the session behind it and its search state.
pub struct Gateway {
    session: Arc<Session>,
    search: ToolSearch,
    /// The team gateway's policy, limits and metrics; `None` for one local user.
    team: Option<Arc<Team>>,
    /// A team's servers that run once per user, and each user's session of them.
    per_user: Option<per_user::PerUserServers>,
    expose_all: bool,
    exposure: Exposure,
    /// A client greeted us with `initialize`: it hears of list changes unasked.
    initialized: AtomicBool,
    /// Served over HTTP, where stateless clients are handed tasks (`http/tasks.rs`);
    /// the stdio loop follows an upstream's task itself and says no tasks.
    hands_out_tasks: AtomicBool,
    /// Open `subscriptions/listen` requests for tool list changes (stateless clients),
    /// by request id.
    listeners: Mutex<Vec<Value>>,
    /// What upstream servers asked HTTP clients, waiting for their answers.
    questions: Arc<questions::Questions>,
    /// Whose served tool list grew, for the HTTP clients' `subscriptions/listen` streams.
    grown: tokio::sync::broadcast::Sender<Arc<str>>,
    /// Served URIs each caller subscribed to, for its handshake-era streams.
    subscribed: news::Subscribed,
    /// Open `subscriptions/listen` requests of a stdio client for servers' news.
    watchers: Mutex<Vec<(Value, news::Wants)>>,
    /// The upstream subscriptions each of those holds, let go when it is cancelled.
    holding: Mutex<Vec<(Value, news::Held)>>,
    /// Upstream resource subscriptions, counted by holder.
    upstream: Arc<news::Upstream>,
}

/// A listen stream's sources: see [`Gateway::listen`].
pub(crate) struct Listening {
    /// Its acknowledgement, once its upstream subscriptions are in place.
    pub subscribing: news::Subscribing,
    /// The upstream subscriptions it holds while it is open.
    pub held: news::Held,
    pub wants: bool,
    /// Whose found tools grew.
    pub grown: tokio::sync::broadcast::Receiver<Arc<str>>,
    /// Which upstream's own tool list changed.
    pub upstream: Option<tokio::sync::broadcast::Receiver<Arc<str>>>,
    /// Servers' resource and prompt news, if the stream hears any.
    pub news: Option<news::Watch>,
    /// Users' own sign-ins finished (`team::SignedIn`), for a session's standing stream.
    pub signed_in: Option<tokio::sync::broadcast::Receiver<team::SignedIn>>,
}

/// Above this many tools a client may refuse or truncate the list (OpenAI's API takes
/// 128; Cursor shows 40): `--expose all` says so on stderr.
pub const MANY_TOOLS: usize = 128;

type Reply = Result<Value, Refused>;

/// Results the stateless era gives caching hints (`ttlMs`, `cacheScope`) besides
/// `tools/list`, which sets its own.
const CACHEABLE: &[&str] = &[
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

impl Gateway {
    /// A gateway serving found tools, or with `expose_all` every tool of every server
    /// from the first `tools/list` (which then discovers every server). The session's
    /// handler should be an [`elicit::Forward`], so upstream servers are told they may
    /// ask (and the client is asked, when it can answer).
    pub fn new(session: Arc<Session>, search: ToolSearch, exposure: Exposure) -> Arc<Gateway> {
        Gateway::build(session, search, exposure, None, None)
    }

    /// A team gateway: each request runs as the user its token names, under `team`'s
    /// policy and limits; calls to `per_user`'s servers go to the user's own session.
    pub fn for_team(
        session: Arc<Session>,
        search: ToolSearch,
        exposure: Exposure,
        team: Arc<Team>,
        per_user: Option<per_user::PerUserServers>,
    ) -> Arc<Gateway> {
        Gateway::build(session, search, exposure, Some(team), per_user)
    }

    fn build(
        session: Arc<Session>,
        search: ToolSearch,
        exposure: Exposure,
        team: Option<Arc<Team>>,
        per_user: Option<per_user::PerUserServers>,
    ) -> Arc<Gateway> {
        Arc::new(Gateway {
            session,
            search,
            team,
            per_user,
            expose_all: exposure != Exposure::Search,
            exposure,
            initialized: AtomicBool::new(false),
            hands_out_tasks: AtomicBool::new(false),
            listeners: Mutex::default(),
            questions: Arc::default(),
            grown: tokio::sync::broadcast::channel(64).0,
            subscribed: news::Subscribed::default(),
            watchers: Mutex::default(),
            holding: Mutex::default(),
            upstream: Arc::default(),
        })
    }

    /// Closes every user's own servers (the shared session is the caller's to close).
    pub async fn close_users(&self) {
        if let Some(p) = &self.per_user {
            p.close().await;
        }
    }

    /// One request's JSON-RPC answer, in the era the request speaks, run as `caller`
    /// (its audit lines name the user).
    async fn answer(
        &self,
        caller: &Caller,
        id: &Value,
        method: &str,
        params: Value,
        tx: &mpsc::Sender<Vec<u8>>,
    ) -> Vec<u8> {
        if let Some(team) = &self.team {
            team.metrics.request(method);
        }
        // The gateway's span for the request, in the trace it came with (its header, or
        // its `_meta`), which the work it causes runs in.
        let parent = crate::telemetry::current().or_else(|| trace::from_meta(&params));
        let span = Span::start(Kind::Server, parent, || {
            span_description(caller, id, method, &params)
        });
        let Some(span) = span else {
            return self.answer_traced(caller, id, method, params, tx).await.0;
        };
        let answer = self.answer_traced(caller, id, method, params, tx);
        let (reply, error) = crate::telemetry::CURRENT
            .scope(span.context(), answer)
            .await;
        span.end(error.as_deref());
        reply
    }

    /// [`Gateway::answer`] as its caller, with what failed (`error.type`), if anything.
    async fn answer_traced(
        &self,
        caller: &Caller,
        id: &Value,
        method: &str,
        params: Value,
        tx: &mpsc::Sender<Vec<u8>>,
    ) -> (Vec<u8>, Option<String>) {
        match caller {
            Caller::Local => self.answer_as(caller, id, method, params, tx).await,
            Caller::User(u) => {
                let subject = crate::auth::bearer::Subject {
                    sub: u.principal.sub.clone(),
                    token: u.token.clone(),
                };
                let answer = self.answer_as(caller, id, method, params, tx);
                let answer = crate::auth::bearer::SUBJECT.scope(subject, answer);
                crate::trust::audit::ACTOR
                    .scope(u.principal.sub.clone(), answer)
                    .await
            }
        }
    }

    async fn answer_as(
        &self,
        caller: &Caller,
        id: &Value,
        method: &str,
        params: Value,
        tx: &mpsc::Sender<Vec<u8>>,
    ) -> (Vec<u8>, Option<String>) {
        let stateless = params
            .get("_meta")
            .and_then(|m| m.get(protocol::META_PROTOCOL_VERSION))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let reply = match &stateless {
            Some(v) if !MODERN.contains(&v.as_str()) => {
                let error = protocol::UNSUPPORTED_PROTOCOL_VERSION.to_string();
                return (
                    protocol::unsupported_version(id, v, &supported()),
                    Some(error),
                );
            }
            Some(_) => self
                .handle(caller, method, &params, true, tx)
                .await
                .map(|mut r| {
                    if let Some(r) = r.as_object_mut() {
                        r.insert("resultType".into(), json!("complete"));
                        // What every server lists and reads may change with its next
                        // start: a client caches none of it.
                        if CACHEABLE.contains(&method) {
                            r.entry("ttlMs").or_insert(json!(0));
                            r.entry("cacheScope").or_insert(json!("private"));
                        }
                    }
                    r
                }),
            None => self.handle(caller, method, &params, false, tx).await,
        };
        match reply {
            Ok(result) => {
                let error = (result["isError"] == true).then(|| "tool_error".to_owned());
                (protocol::response(id, result), error)
            }
            Err(refused) => (refused.response(id), Some(refused.code.to_string())),
        }
    }

    async fn handle(
        &self,
        caller: &Caller,
        method: &str,
        params: &Value,
        stateless: bool,
        tx: &mpsc::Sender<Vec<u8>>,
    ) -> Reply {
        match method {
            "server/discover" if stateless => Ok(json!({
                "supportedVersions": supported(),
                "capabilities": self.stateless_capabilities(),
                "instructions": self.instructions(),
                "_meta": {(protocol::META_SERVER_INFO): server_info()},
                // The list grows with each search: never reuse it.
                "ttlMs": 0, "cacheScope": "private",
            })),
            "initialize" => {
                self.initialized.store(true, Ordering::Relaxed);
                let asked = params
                    .get("protocolVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let version = PROTOCOL
                    .iter()
                    .find(|v| **v == asked)
                    .unwrap_or(&PROTOCOL[0]);
                Ok(json!({
                    "protocolVersion": version,
                    "capabilities": capabilities(self.team.is_some()),
                    "serverInfo": server_info(),
                    "instructions": self.instructions(),
                }))
            }
            "ping" => Ok(json!({})),
            "tools/list" => {
                let mut result = json!({"tools": self.tools(caller).await});
                if stateless {
                    result["ttlMs"] = json!(0);
                    result["cacheScope"] = json!("private");
                }
                Ok(result)
            }
            "tools/call" => {
                let name = params.get("name").and_then(Value::as_str).unwrap_or("");
                let args = params.get("arguments").cloned().unwrap_or(json!({}));
                let token = params["_meta"]
                    .get("progressToken")
                    .filter(|t| t.is_string() || t.is_i64() || t.is_u64());
                let progress = token.map(|t| progress_sink(t.clone(), tx.clone()));
                // The server's log messages while the call runs reach this client too,
                // from the level a team's user asked for.
                let least = self
                    .team
                    .as_ref()
                    .and_then(|t| t.log_levels.least(caller.key()));
                let call = self.call(caller, name, args, tx, progress);
                LOGS.scope(log_sink(tx.clone(), least), call).await
            }
            // One user's log level would be every user's upstream: a team's user sets
            // what their own calls bring back (`team/log_levels.rs`).
            "logging/setLevel" if let Some(team) = &self.team => {
                let level = params.get("level").and_then(Value::as_str).unwrap_or("");
                team.log_levels
                    .set(caller.key(), level)
                    .map_err(|e| (INVALID_PARAMS, e))?;
                Ok(json!({}))
            }
            // Search-first, the servers running now are listed (listing starts nothing);
            // a get or read starts the one server it names. A team's policy decides
            // what each user sees and gets.
            "prompts/list" => self.prompts_list(caller).await,
            "prompts/get" => self.prompts_get(caller, params).await,
            "resources/list" => self.resources_list(caller).await,
            "resources/templates/list" => self.templates_list(caller).await,
            "resources/read" => self.resources_read(caller, params).await,
            "resources/subscribe" | "resources/unsubscribe" => {
                let on = method == "resources/subscribe";
                self.subscription(caller, params, on).await
            }
            "completion/complete" | "logging/setLevel" => {
                self.pass_on(caller, method, params).await
            }
            other => Err((METHOD_NOT_FOUND, format!("edgar does not serve {other}")).into()),
        }
    }

    /// What the client's model reads first: how to use the gateway, and which servers
    /// (by their configured names; nothing is started to say so).
    fn instructions(&self) -> String {
        if let Exposure::Transparent(server) = &self.exposure {
            return format!(
                "The MCP server {server}, served by edgar: everything it sends passes edgar's guard."
            );
        }
        // A team's users learn the servers from what they may search, not from here.
        if self.team.is_some() {
            return INSTRUCTIONS.to_owned();
        }
        let names: Vec<&str> = self.session.server_names().collect();
        if names.is_empty() {
            return format!("{INSTRUCTIONS} No MCP server is configured.");
        }
        format!("{INSTRUCTIONS} Servers: {}.", names.join(", "))
    }

    /// The input schema of tool `name` as `caller` is served it, if it is one (its
    /// `x-mcp-header` properties say which `Mcp-Param-*` headers a call must carry).
    /// One server's list is read at most, the one a call would start anyway; a hashed
    /// name whose server part was cut names none, and is not checked.
    pub(crate) async fn served_schema(&self, caller: &Caller, name: &str) -> Option<Value> {
        let schema = |t: &SanitizedTool| t.input_schema().clone();
        match &self.exposure {
            Exposure::Transparent(server) => {
                let tools = self.session.tools(server).await.ok()?;
                tools.iter().find(|t| t.tool() == name).map(schema)
            }
            _ if self.expose_all => {
                let (server, _) = self.owner(name, "__")?;
                let tools = self.session.tools(&server).await.ok()?;
                tools.iter().find(|t| t.name() == name).map(schema)
            }
            _ => self
                .search
                .found_tool(caller.key(), name)
                .map(|t| schema(&t)),
        }
    }

    /// A `subscriptions/listen` stream for an HTTP client (request `id`): the
    /// acknowledgement, whether it asked for tool list changes, and where they are heard.
    pub(crate) fn listen(&self, caller: &Caller, id: &Value, params: &Value) -> Listening {
        let news::Listened {
            tools,
            news,
            subscribing,
            held,
        } = self.listened(caller, id, params);
        Listening {
            subscribing,
            held,
            wants: tools,
            grown: self.grown.subscribe(),
            // An upstream's own change reaches every client only where the served list
            // is the upstreams' (not found tools, which are each caller's).
            upstream: self.expose_all.then(|| self.session.tools_changed()),
            news: news.map(|wants| news::Watch {
                wants: Some(wants),
                heard: self.session.news(),
                subscription: Some(id.clone()),
            }),
            signed_in: None,
        }
    }

    /// What the gateway serves in the stateless era: the same, and over HTTP tasks (an
    /// upstream's task is handed to a client that takes tasks as one of the gateway's).
    fn stateless_capabilities(&self) -> Value {
        let mut c = capabilities(self.team.is_some());
        if self.hands_out_tasks.load(Ordering::Relaxed) {
            c["extensions"] = json!({(protocol::TASKS_EXTENSION): {}});
        }
        c
    }

    /// Says this gateway is served over HTTP, where tasks are handed out.
    pub(crate) fn hand_out_tasks(&self) {
        self.hands_out_tasks.store(true, Ordering::Relaxed);
    }

    /// The news a handshake-era session's stream hears: list changes, and the updates
    /// of what its caller subscribed to.
    pub(crate) fn session_news(&self) -> news::Watch {
        news::Watch {
            wants: None,
            heard: self.session.news(),
            subscription: None,
        }
    }

    /// Says the served list grew: unasked to a client that initialized (the handshake
    /// era), and on each open subscription (the stateless era, which hears nothing else).
    async fn list_changed(&self, tx: &mpsc::Sender<Vec<u8>>) {
        const METHOD: &str = "notifications/tools/list_changed";
        if self.initialized.load(Ordering::Relaxed) {
            let _ = tx.send(protocol::notification(METHOD, Value::Null)).await;
        }
        let listeners = lock(&self.listeners).clone();
        for id in listeners {
            let _ = tx.send(tools_changed(&id)).await;
        }
    }
}

/// The gateway's span name and attributes for a request: OpenTelemetry's MCP
/// conventions, the stateless era's version, and the team user.
fn span_description(
    caller: &Caller,
    id: &Value,
    method: &str,
    params: &Value,
) -> (String, Vec<(&'static str, String)>) {
    let (name, mut attributes) = crate::telemetry::describe(method, params, id.to_string());
    if let Some(version) = params["_meta"][protocol::META_PROTOCOL_VERSION].as_str() {
        attributes.push(("mcp.protocol.version", version.to_owned()));
    }
    if let Caller::User(u) = caller {
        attributes.push(("user.id", u.principal.sub.clone()));
    }
    (name, attributes)
}

/// The notification a listener `id` hears when its tool list grew.
pub(crate) fn tools_changed(id: &Value) -> Vec<u8> {
    protocol::notification(
        "notifications/tools/list_changed",
        json!({"_meta": {(META_SUBSCRIPTION_ID): id}}),
    )
}

/// What the gateway serves: tools, prompts, resources (their servers' list changes and
/// subscriptions, `news.rs`), logging and completion, in every exposure; a team gets
/// no logging (a log level is the gateway's, not one user's).
fn capabilities(team: bool) -> Value {
    let mut c = json!({"tools": {"listChanged": true},
        "prompts": {"listChanged": true},
        "resources": {"subscribe": true, "listChanged": true},
        "logging": {}, "completions": {}});
    if team && let Some(c) = c.as_object_mut() {
        c.remove("logging");
    }
    c
}

fn server_info() -> Value {
    json!({"name": "edgar", "version": env!("CARGO_PKG_VERSION")})
}

fn supported() -> Vec<&'static str> {
    MODERN.iter().chain(PROTOCOL).copied().collect()
}
