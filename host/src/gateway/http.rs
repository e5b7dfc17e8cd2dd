//! `edgar mcp serve --http`: the gateway over Streamable HTTP, for clients that reach
//! MCP servers by URL. For one person, on a loopback port: every request carries the
//! bearer secret printed at start, and `Host` and `Origin` must name the loopback
//! address served, so a web page cannot reach it through DNS rebinding. For a team
//! (`--gateway-config`): every request carries an access token of the company's
//! identity provider and runs as its user (`team_routes.rs` serves the well-known
//! metadata, health and metrics). One JSON-RPC message per POST, answered with JSON, or
//! with an event stream when notifications (a grown tool list) or questions of an
//! upstream server (elicitation, sampling: `questions.rs`) come with the answer. The
//! session id handed out at `initialize` holds what the client can answer, sealed
//! (`session.rs`): nothing is kept per session. A client in a session may open a
//! standalone GET stream, which hears its tool list change; a dropped connection
//! cancels its call.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming as Body;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::questions::{Answers, DECLARED};
use super::team::{Refusal, Team};
use super::{Caller, Gateway, User};
use crate::auth::Secret as Token;
use crate::mcp::ask::ASKER;
use crate::mcp::protocol::{self, Incoming, MAX_MESSAGE_BYTES};
use session::Sessions;
use streams::{Streamed, event};

mod modern;
mod parked;
mod running;
pub mod session;
mod streams;
mod tasks;
mod team_routes;
pub mod unix;

/// The one path served.
pub const PATH: &str = "/mcp";

/// The header that carries a client's session id.
const SESSION_ID: &str = "mcp-session-id";

/// Connections served at once; a local program opening more cannot exhaust the
/// gateway's file descriptors.
const MAX_CONNECTIONS: usize = 256;

/// Longest a connection may take to send a request's headers (idle keep-alive included).
const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Longest a new connection may stay silent before its first byte: a program that opens
/// connections and sends nothing holds a slot this long at most.
const FIRST_BYTE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Longest a TLS handshake may take.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Longest calls in flight may run on after a shutdown began (SIGTERM): then they are
/// cut off.
pub const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// How clients prove who they are.
pub enum Auth {
    /// One local user: the bearer secret printed at start.
    Secret(Secret),
    /// A team: access tokens of its identity provider, checked by `team`.
    Team(Arc<Team>),
    /// A Unix socket: the kernel vouches that the peer runs as this user (`unix.rs`).
    Peer,
}

/// The bearer secret every request must carry; never printed by `Debug`.
pub struct Secret(String);

impl Secret {
    /// 32 random bytes, hex: what `serve --http` prints once at start.
    pub fn generate() -> std::io::Result<Secret> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)
            .map_err(|e| std::io::Error::other(format!("the OS random source failed: {e}")))?;
        Ok(Secret(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// A secret the user chose (`EDGAR_SERVE_TOKEN`), so a client's config can hold it.
    pub fn from_env(value: String) -> Option<Secret> {
        (value.len() >= 16).then_some(Secret(value))
    }

    /// The secret itself, for the one line that shows it to the user.
    pub fn expose(&self) -> &str {
        &self.0
    }

    fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(given) = bearer(headers) else {
            return false;
        };
        let (given, want) = (given.as_bytes(), self.0.as_bytes());
        // Every byte compared whatever differs first: the time says nothing of the secret.
        given.len() == want.len()
            && std::hint::black_box(
                given
                    .iter()
                    .zip(want)
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b)),
            ) == 0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

struct Front {
    gateway: Arc<Gateway>,
    auth: Auth,
    /// `host:port` spellings of the address served, for the `Host` and `Origin` checks.
    authorities: Vec<String>,
    /// The path MCP is served at.
    path: String,
    /// Seals and opens the session ids handed out.
    sessions: Sessions,
    /// Set when the gateway shuts down: open listen streams end.
    stop: tokio::sync::watch::Receiver<bool>,
    /// Stateless clients' calls waiting for their input.
    parked: Arc<parked::Parked>,
}

/// Serves `gateway` on `listener` (bound to a loopback address) until the future is
/// dropped, which ends every connection and the calls they carry. A failed accept is
/// logged and retried, never the end of the gateway.
pub async fn serve(
    gateway: Arc<Gateway>,
    listener: TcpListener,
    secret: Secret,
) -> std::io::Result<()> {
    serve_until(
        gateway,
        listener,
        Auth::Secret(secret),
        None,
        std::future::pending(),
    )
    .await
}

/// Serves `gateway` on `listener` (over TLS when `tls` is given) until `shutdown`
/// resolves: then no new connection is taken, open ones finish the request they carry
/// (at most [`DRAIN_TIMEOUT`]) and close, and this returns.
pub async fn serve_until(
    gateway: Arc<Gateway>,
    listener: TcpListener,
    auth: Auth,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    let (authorities, path) = match &auth {
        Auth::Secret(_) => (authorities(addr), PATH.to_owned()),
        Auth::Team(team) => (
            vec![team.config.authority()],
            team_routes::mcp_path(&team.config),
        ),
        Auth::Peer => (Vec::new(), PATH.to_owned()),
    };
    // A team's replicas sharing state share the key, so any of them opens any session.
    let sealer = match &auth {
        Auth::Team(team) => team.sessions_key.as_ref().map(crate::seal::Sealer::new),
        Auth::Secret(_) | Auth::Peer => None,
    };
    let sealer = match sealer {
        Some(s) => s,
        None => crate::seal::Sealer::random()?,
    };
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    gateway.hand_out_tasks();
    let front = Arc::new(Front {
        gateway,
        auth,
        authorities,
        path,
        sessions: Sessions::new(sealer),
        stop: stop.clone(),
        parked: Arc::default(),
    });
    let mut connections = JoinSet::new();
    let open = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // At the cap, stop accepting: new clients wait in the kernel's backlog.
        let permit = tokio::select! {
            p = open.clone().acquire_owned() => p,
            () = &mut shutdown => break,
        };
        let Ok(permit) = permit else {
            return Ok(());
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = &mut shutdown => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            // Out of descriptors, or a peer gone before we took it: the listener lives on.
            Err(e) => {
                tracing::warn!("cannot accept an HTTP connection: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        // Finished connections are reaped as new ones come, so the set stays small.
        while connections.try_join_next().is_some() {}
        let (front, tls, stop) = (front.clone(), tls.clone(), stop.clone());
        connections.spawn(async move {
            let _permit = permit;
            let mut first = [0u8; 1];
            match tokio::time::timeout(FIRST_BYTE_TIMEOUT, stream.peek(&mut first)).await {
                Ok(Ok(n)) if n > 0 => {}
                // Silent, closed or broken before a byte: not a client.
                _ => return,
            }
            match tls {
                None => front.connection(stream, Some(peer), stop).await,
                Some(tls) => {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(stream)).await {
                        Ok(Ok(stream)) => front.connection(stream, Some(peer), stop).await,
                        Ok(Err(e)) => tracing::debug!("a TLS handshake from {peer} failed: {e}"),
                        Err(_) => tracing::debug!("a TLS handshake from {peer} timed out"),
                    }
                }
            }
        });
    }
    drop(listener);
    drain(connections, stop_tx).await;
    Ok(())
}

/// Shutting down: says so to every connection, lets each finish its request (at most
/// [`DRAIN_TIMEOUT`]), then cuts the rest.
async fn drain(mut connections: JoinSet<()>, stop_tx: tokio::sync::watch::Sender<bool>) {
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            "{} connections were still busy after {} s; ending them",
            connections.len(),
            DRAIN_TIMEOUT.as_secs()
        );
    }
    connections.shutdown().await;
}

fn authorities(addr: SocketAddr) -> Vec<String> {
    let port = addr.port();
    let mut names = vec![format!("{addr}")];
    if addr.ip().is_loopback() {
        names.push(format!("localhost:{port}"));
    }
    names
}

impl Front {
    /// Serves one connection until it closes, or, after `stop`, until the request it
    /// carries is answered. `peer` is the client's address (none on a Unix socket).
    async fn connection<I>(
        self: Arc<Self>,
        io: I,
        peer: Option<SocketAddr>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let service = hyper::service::service_fn(move |req| {
            let front = self.clone();
            async move { Ok::<_, std::convert::Infallible>(front.respond(req, peer).await) }
        });
        let io = hyper_util::rt::TokioIo::new(io);
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT)
            .serve_connection(io, service);
        let mut conn = std::pin::pin!(conn);
        let stopped = async {
            // A dropped sender also means stop.
            let _ = stop.wait_for(|s| *s).await;
        };
        let ended = tokio::select! {
            ended = conn.as_mut() => ended,
            () = stopped => {
                conn.as_mut().graceful_shutdown();
                conn.await
            }
        };
        if let Err(e) = ended {
            tracing::debug!("an HTTP connection ended: {e}");
        }
    }

    async fn respond(&self, req: Request<Body>, peer: Option<SocketAddr>) -> Reply {
        if let (Auth::Team(team), Some(peer)) = (&self.auth, peer)
            && let Some(reply) = team_routes::respond(team, &req, peer, &self.gateway).await
        {
            return reply;
        }
        if req.uri().path() != self.path {
            let text = format!("edgar serves MCP at {}", self.path);
            return status(StatusCode::NOT_FOUND, &text);
        }
        let headers = req.headers();
        // One of each: with two, a proxy and this check could each read another one.
        for (name, what) in [
            (header::HOST, "Host"),
            (header::ORIGIN, "Origin"),
            (header::AUTHORIZATION, "Authorization"),
        ] {
            if headers.get_all(&name).iter().count() > 1 {
                return refused(
                    StatusCode::BAD_REQUEST,
                    &format!("more than one {what} header"),
                );
            }
        }
        // A trusted proxy in front routes by name itself, and may name us differently.
        let proxied = match &self.auth {
            Auth::Team(team) => peer.is_some_and(|p| team.config.behind_proxy.contains(&p.ip())),
            Auth::Secret(_) | Auth::Peer => false,
        };
        // On a Unix socket the kernel said who the peer is, and no name was resolved.
        let named = !matches!(self.auth, Auth::Peer);
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        if named && !proxied && !host.is_some_and(|h| self.authorities.iter().any(|a| a == h)) {
            return refused(StatusCode::FORBIDDEN, "the Host header is not this server");
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let scheme = match &self.auth {
                Auth::Team(team) => format!("{}://", team.config.resource.scheme()),
                Auth::Secret(_) | Auth::Peer => "http://".to_owned(),
            };
            let allowed = origin
                .to_str()
                .ok()
                .and_then(|o| o.strip_prefix(scheme.as_str()))
                .is_some_and(|o| self.authorities.iter().any(|a| a == o));
            if !allowed {
                return refused(
                    StatusCode::FORBIDDEN,
                    "requests from this origin are refused",
                );
            }
        }
        let caller = match &self.auth {
            Auth::Secret(secret) => {
                if !secret.admits(headers) {
                    return secret_refused(headers);
                }
                Caller::Local
            }
            Auth::Peer => Caller::Local,
            Auth::Team(team) => {
                let authorization = headers
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok());
                match team.verifier.check(authorization).await {
                    Ok(principal) => {
                        let token = super::team::token::bearer(authorization).unwrap_or_default();
                        Caller::User(Arc::new(User {
                            principal,
                            token: Arc::new(Token::new(token)),
                        }))
                    }
                    Err(refusal) => return challenge(team, &refusal, peer),
                }
            }
        };
        let get = req.method() == Method::GET;
        if !get && req.method() != Method::POST {
            let mut r = status(
                StatusCode::METHOD_NOT_ALLOWED,
                "edgar answers POST, and GET for a session's stream: sessions hold nothing to end",
            );
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, POST"));
            return r;
        }
        // A session id must be one of ours for this caller. Without one a client declared
        // nothing in a session (a stateless client declares in each request's `_meta`).
        let answers = match headers.get(SESSION_ID) {
            None => Answers::default(),
            Some(id) => match id
                .to_str()
                .ok()
                .and_then(|id| self.sessions.open(caller.key(), id))
            {
                Some(answers) => answers,
                None => {
                    let reply = protocol::error_response(
                        &Value::Null,
                        -32001,
                        "unknown session: initialize again",
                    );
                    return with_body(StatusCode::NOT_FOUND, "application/json", reply);
                }
            },
        };
        if get {
            return self.standing(&caller, headers);
        }
        let trace = super::trace::from_headers(headers);
        let routing = modern::Routing::of(headers);
        let json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if !json {
            return status(StatusCode::UNSUPPORTED_MEDIA_TYPE, "send application/json");
        }
        let body = match Limited::new(req.into_body(), MAX_MESSAGE_BYTES)
            .collect()
            .await
        {
            Ok(b) => b.to_bytes(),
            Err(_) => return status(StatusCode::PAYLOAD_TOO_LARGE, "the message is too large"),
        };
        let mut messages = match protocol::decode(&body) {
            Ok(m) => m,
            Err(reason) => {
                let reply =
                    protocol::error_response(&Value::Null, protocol::refusal_code(&body), &reason);
                return with_body(StatusCode::BAD_REQUEST, "application/json", reply);
            }
        };
        if messages.len() != 1 {
            let reply = protocol::error_response(
                &Value::Null,
                -32600,
                "send one JSON-RPC message per request",
            );
            return with_body(StatusCode::BAD_REQUEST, "application/json", reply);
        }
        let message = messages.remove(0);
        if let (Some(routing), Incoming::Request { id, method, params }) = (&routing, &message)
            && let Err(refusal) = routing.check(method, params)
        {
            let code = modern::status(refusal.code);
            return with_body(code, "application/json", refusal.reply(id));
        }
        // A stateless `tools/call` carries the arguments its tool marks as headers too.
        if let (Some(routing), Incoming::Request { id, method, params }) = (&routing, &message)
            && method == "tools/call"
            && let Some(name) = params["name"].as_str()
            && let Some(schema) = self.gateway.served_schema(&caller, name).await
        {
            let arguments = params.get("arguments").cloned().unwrap_or(Value::Null);
            let expected = crate::mcp::http::param_headers(&schema, &arguments);
            if let Err(refusal) = routing.check_params(&expected) {
                let code = modern::status(refusal.code);
                return with_body(code, "application/json", refusal.reply(id));
            }
        }
        let modern = routing.is_some();
        match message {
            Incoming::Request { id, method, params } if method == "subscriptions/listen" => {
                self.listen(&caller, &id, &params)
            }
            // The tasks this gateway handed out (`tasks.rs`).
            Incoming::Request { id, method, params } if modern && method.starts_with("tasks/") => {
                self.task_request(&caller, &id, &method, &params)
            }
            // A stateless client's call may pause for its input (`parked.rs`).
            Incoming::Request { id, method, params }
                if modern && matches!(method.as_str(), "tools/call" | "prompts/get") =>
            {
                let declared = &params["_meta"][protocol::META_CLIENT_CAPABILITIES];
                let answers = Answers::declared(declared);
                let call = self.call_stateless(caller, answers, id, method, params);
                match trace {
                    Some(t) => crate::telemetry::CURRENT.scope(t, call).await,
                    None => call.await,
                }
            }
            Incoming::Request { id, method, params } => {
                // The new session says what this client can answer.
                let session = (method == "initialize")
                    .then(|| {
                        let declared = Answers::declared(&params["capabilities"]);
                        self.sessions.issue(caller.key(), declared)
                    })
                    .flatten();
                let mut reply = match trace {
                    Some(t) => {
                        let answer = self.answer(caller, answers, modern, id, method, params);
                        crate::telemetry::CURRENT.scope(t, answer).await
                    }
                    None => {
                        self.answer(caller, answers, modern, id, method, params)
                            .await
                    }
                };
                if let Some(v) = session.and_then(|s| HeaderValue::from_str(&s).ok())
                    && reply.status() == StatusCode::OK
                {
                    reply.headers_mut().insert(SESSION_ID, v);
                }
                reply
            }
            Incoming::Refused { id, reason } => {
                let reply = protocol::error_response(&id, -32600, &reason);
                with_body(StatusCode::OK, "application/json", reply)
            }
            // A client's answer to a question an upstream server asked it.
            Incoming::Response {
                id: Some(id),
                outcome,
            } => {
                if !self
                    .gateway
                    .questions
                    .answered_raw(caller.key(), id, outcome)
                {
                    tracing::debug!("an answer to no question of this client's: id {id}");
                }
                let mut r = Response::new(Full::default().boxed());
                *r.status_mut() = StatusCode::ACCEPTED;
                r
            }
            // Cancellation over HTTP is the client closing its connection.
            Incoming::Notification { .. } | Incoming::Response { id: None, .. } => {
                let mut r = Response::new(Full::default().boxed());
                *r.status_mut() = StatusCode::ACCEPTED;
                r
            }
        }
    }

    /// The answer to one request: JSON when it comes before any notification, else an
    /// event stream that carries each notification as it happens (a call's progress, a
    /// grown tool list) and ends with the answer. A client that goes away drops the
    /// stream, and with it the call.
    async fn answer(
        &self,
        caller: Caller,
        answers: Answers,
        modern: bool,
        id: Value,
        method: String,
        params: Value,
    ) -> Reply {
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(16);
        let gateway = self.gateway.clone();
        // Questions an upstream server asks while this runs travel on its event stream.
        let asker = answers
            .any()
            .then(|| gateway.questions.asker(caller.key(), answers, tx.clone()));
        let mut answer = Box::pin(async move {
            let answer = gateway.answer(&caller, &id, &method, params, &tx);
            let answer = DECLARED.scope(answers, answer);
            match asker {
                Some(asker) => ASKER.scope(asker, answer).await,
                None => answer.await,
            }
        });
        let first = tokio::select! {
            reply = &mut answer => {
                let mut notes = Vec::new();
                while let Ok(n) = rx.try_recv() {
                    notes.push(n);
                }
                if notes.is_empty() {
                    // The stateless era sends an error with the status its code calls for.
                    let code = match modern.then(|| modern::error_code(&reply)).flatten() {
                        Some(code) => modern::status(code),
                        None => StatusCode::OK,
                    };
                    return with_body(code, "application/json", reply);
                }
                let mut stream = Vec::new();
                for message in notes.iter().chain(std::iter::once(&reply)) {
                    stream.extend_from_slice(&event(message));
                }
                return with_body(StatusCode::OK, "text/event-stream", stream);
            }
            Some(note) = rx.recv() => note,
        };
        let (body_tx, body_rx) = mpsc::channel::<Bytes>(16);
        tokio::spawn(async move {
            if body_tx.send(event(&first)).await.is_err() {
                return;
            }
            let reply = loop {
                tokio::select! {
                    reply = &mut answer => break reply,
                    // The client went away: dropping the call cancels it upstream.
                    () = body_tx.closed() => return,
                    Some(note) = rx.recv() => {
                        if body_tx.send(event(&note)).await.is_err() {
                            return;
                        }
                    }
                }
            };
            while let Ok(note) = rx.try_recv() {
                if body_tx.send(event(&note)).await.is_err() {
                    return;
                }
            }
            let _ = body_tx.send(event(&reply)).await;
        });
        let mut r = Response::new(Streamed(body_rx).boxed());
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        r
    }
}

impl Front {
    /// `tasks/get`, `tasks/update` or `tasks/cancel` of a stateless client that declared
    /// the tasks extension in the request (else -32021); the methods the extension's
    /// revision removed (`tasks/result`, `tasks/list`) are not found.
    fn task_request(&self, caller: &Caller, id: &Value, method: &str, params: &Value) -> Reply {
        let reply = match method {
            "tasks/get" | "tasks/update" | "tasks/cancel" => {
                let declared = &params["_meta"][protocol::META_CLIENT_CAPABILITIES];
                if Answers::declared(declared).tasks {
                    self.parked.tasks.request(caller.key(), method, params)
                } else {
                    Err(super::refused::Refused::missing(protocol::TASKS_EXTENSION))
                }
            }
            other => Err((
                protocol::METHOD_NOT_FOUND,
                format!("unknown method {other}"),
            )
                .into()),
        };
        // A cancelled task's call leaves no line of its own: its cancel does.
        if method == "tasks/cancel" && reply.is_ok() {
            let line = || {
                let task = params["taskId"].as_str().unwrap_or("");
                self.gateway
                    .session
                    .audit("task_cancel", serde_json::json!({"task": task}));
            };
            match caller {
                Caller::User(u) => {
                    crate::trust::audit::ACTOR.sync_scope(u.principal.sub.clone(), line)
                }
                Caller::Local => line(),
            }
        }
        let reply = match reply {
            Ok(result) => protocol::response(id, result),
            Err(refused) => refused.response(id),
        };
        let code = modern::error_code(&reply).map_or(StatusCode::OK, modern::status);
        with_body(code, "application/json", reply)
    }
}

type Reply = Response<BoxBody<Bytes, Infallible>>;

/// The token of an `Authorization: Bearer ...` header, if the request has one.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
}

/// A one-person gateway's request without its secret: 401, and whether a token was
/// missing or wrong (RFC 6750's `invalid_token`), so a client's user knows which to fix.
fn secret_refused(headers: &HeaderMap) -> Reply {
    let (text, challenge) = match bearer(headers) {
        None => ("a bearer token is required", "Bearer"),
        Some(_) => (
            "the bearer token is not this gateway's (it printed its token when it started, or it is EDGAR_SERVE_TOKEN)",
            "Bearer error=\"invalid_token\"",
        ),
    };
    let mut r = refused(StatusCode::UNAUTHORIZED, text);
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(challenge),
    );
    r
}

/// A team client's token refused: 401 (or 403 for a missing scope, 503 when the
/// identity provider's keys cannot be had) with the challenge that tells the client
/// where to sign in. The reason is logged, never the token.
pub(super) fn challenge(team: &Team, refusal: &Refusal, peer: Option<SocketAddr>) -> Reply {
    let (code, reason, text) = match refusal {
        Refusal::Missing => (
            StatusCode::UNAUTHORIZED,
            "missing_token",
            "a bearer token is required",
        ),
        Refusal::Invalid(_) => (
            StatusCode::UNAUTHORIZED,
            "invalid_token",
            "the bearer token is not valid here",
        ),
        Refusal::Scope(_) => (
            StatusCode::FORBIDDEN,
            "insufficient_scope",
            "the token lacks a required scope",
        ),
        Refusal::Unavailable(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "keys_unavailable",
            "the identity provider's keys cannot be fetched; retry later",
        ),
    };
    team.metrics.refusal(reason);
    if let Refusal::Invalid(why) | Refusal::Unavailable(why) = refusal {
        let from = peer.map_or_else(|| "a local socket".to_owned(), |p| p.to_string());
        tracing::info!("refused a request from {from}: {}", crate::text::shown(why));
    }
    let mut r = refused(code, text);
    if let Ok(v) = HeaderValue::from_str(&team.challenge(refusal)) {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    r
}

fn with_body(code: StatusCode, content_type: &'static str, body: Vec<u8>) -> Reply {
    let mut r = Response::new(Full::new(Bytes::from(body)).boxed());
    *r.status_mut() = code;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn status(code: StatusCode, text: &str) -> Reply {
    let mut body = text.as_bytes().to_vec();
    body.push(b'\n');
    with_body(code, "text/plain; charset=utf-8", body)
}

/// A refusal before the client proved who it is: answered, then the connection is
/// closed, so it cannot be kept to try again and again or held idle.
fn refused(code: StatusCode, text: &str) -> Reply {
    let mut r = status(code, text);
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_is_checked_whole_and_never_shown() {
        let s = Secret("0123456789abcdef0123".into());
        let mut h = HeaderMap::new();
        assert!(!s.admits(&h));
        for (value, ok) in [
            ("Bearer 0123456789abcdef0123", true),
            ("Bearer 0123456789abcdef012", false),
            ("Bearer 0123456789abcdef01234", false),
            ("bearer 0123456789abcdef0123", true),
            ("Basic 0123456789abcdef0123", false),
            ("0123456789abcdef0123", false),
        ] {
            h.insert(header::AUTHORIZATION, HeaderValue::from_static(value));
            assert_eq!(s.admits(&h), ok, "{value}");
        }
        assert_eq!(format!("{s:?}"), "Secret(..)");
        assert!(Secret::from_env("short".into()).is_none());
    }

    #[test]
    fn a_missing_secret_and_a_wrong_one_are_told_apart() {
        let challenge = |value: Option<&'static str>| {
            let mut h = HeaderMap::new();
            if let Some(v) = value {
                h.insert(header::AUTHORIZATION, HeaderValue::from_static(v));
            }
            let r = secret_refused(&h);
            assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
            r.headers()
                .get(header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(challenge(None), "Bearer");
        assert_eq!(challenge(Some("Basic dXNlcjpwdw==")), "Bearer");
        assert_eq!(
            challenge(Some("Bearer not-the-secret")),
            "Bearer error=\"invalid_token\""
        );
    }

    #[test]
    fn only_the_served_address_is_a_valid_host() {
        let a = authorities("127.0.0.1:8737".parse().unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(a, ["127.0.0.1:8737", "localhost:8737"]);
        let a = authorities("[::1]:9".parse().unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(a, ["[::1]:9", "localhost:9"]);
    }
}
