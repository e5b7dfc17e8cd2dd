//! One live connection to a server, whatever carries it: matches responses to requests
//! by id, enforces each request's deadline (sending `notifications/cancelled` when it
//! expires), answers the server's own requests, and fails every waiting request with
//! the transport's reason when the connection ends.

mod dispatch;
mod outbound;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dispatch::dispatch;
pub(crate) use outbound::{Outbound, Stamp};

use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::{Notify, Semaphore, mpsc, oneshot};

use crate::telemetry::{self, Kind, Span};
use crate::text::shown_message;

use super::McpError;
use super::ask::{ASKER, Asker};
use super::protocol::{self, Incoming, RpcError};
use crate::sync::lock;

/// Requests from one server (elicitation, sampling) being handled at once; each may wait
/// for a human or hold a blocking thread, so a server cannot queue thousands. More are
/// refused at once with an error the server can retry on.
pub const MAX_SERVER_REQUESTS: usize = 4;

/// JSON-RPC "internal error": the answer to a request over [`MAX_SERVER_REQUESTS`].
const INTERNAL_ERROR: i64 = -32603;

/// JSON-RPC "invalid request": the answer to a request too large or deep to decode.
const INVALID_REQUEST: i64 = -32600;

/// Where a tool call's progress goes: the server's `notifications/progress` params
/// (`progress`, and `total` and `message` when given), checked and clamped.
pub type ProgressSink = Arc<dyn Fn(Value) + Send + Sync>;

/// Where a server's log messages go while a call to it runs: `notifications/message`
/// params (`level`, `logger`, `data`), checked and bounded.
pub type LogSink = Arc<dyn Fn(Value) + Send + Sync>;

tokio::task_local! {
    /// Set around a call by a caller that wants its progress (`edgar mcp serve`, for a
    /// client that sent a `progressToken`): `tools/call` requests made within then carry
    /// a token of ours, and the server's progress on it reaches the sink.
    pub static PROGRESS: ProgressSink;
    /// Set around a call by a caller that passes the server's log messages on (`edgar
    /// mcp serve`): while a `tools/call` made within runs, the server's log messages
    /// reach the sink (a message names no request, so every call running then hears it).
    pub static LOGS: LogSink;
}

/// What a transport hands the connection.
#[derive(Debug)]
pub(crate) enum Event {
    /// One message (or batch), classified by `protocol::classify`.
    Message(Vec<Incoming>),
    /// The transport could not deliver request `id` or its answer (an HTTP error, a
    /// broken stream, a sign-in challenge); that request fails with `error`.
    Failed { id: u64, error: McpError },
    /// The transport ended; the reason (with the server's last stderr lines) is final.
    Closed(String),
}

/// The two ends a transport provides: messages out, events in.
pub(crate) struct Link {
    pub outgoing: mpsc::Sender<Outbound>,
    pub events: mpsc::Receiver<Event>,
}

/// Answers requests a server may send to the client. The embedding harness can supply
/// one; without it, sampling and elicitation are declined with a JSON-RPC error.
pub trait ClientHandler: Send + Sync + 'static {
    /// Whether to declare the `elicitation` capability.
    fn supports_elicitation(&self) -> bool {
        false
    }
    /// Answers `elicitation/create` (the `result` object), or `None` to decline. Runs on
    /// a blocking thread: it may ask a human.
    fn elicit(&self, _server: &str, _params: &Value) -> Option<Value> {
        None
    }
    /// Whether to declare the `sampling` capability.
    fn supports_sampling(&self) -> bool {
        false
    }
    /// Answers `sampling/createMessage`, or `None` to decline.
    fn sample(&self, _server: &str, _params: &Value) -> Option<Value> {
        None
    }
    /// A long-running call's progress (a task's status message), for a human to see.
    fn progress(&self, _server: &str, _message: &str) {}
}

/// The default handler: declines everything optional.
pub struct NoHandler;

impl ClientHandler for NoHandler {}

/// What the connection needs to answer a server's requests.
#[derive(Clone)]
pub(crate) struct Context {
    pub roots: Vec<PathBuf>,
    pub handler: Arc<dyn ClientHandler>,
    /// Where the server's news (resource and prompt changes) goes, if anywhere.
    pub news: Option<tokio::sync::broadcast::Sender<super::news::News>>,
}

/// A clone speaks on the same connection (one a task's cancellation outlives its
/// caller with).
#[derive(Clone)]
pub(crate) struct Connection {
    server: String,
    outgoing: mpsc::Sender<Outbound>,
    shared: Arc<Shared>,
}

/// How a pending request ended.
enum Outcome {
    Answer(Result<Box<RawValue>, RpcError>),
    Failed(McpError),
}

struct Shared {
    pending: Mutex<HashMap<u64, oneshot::Sender<Outcome>>>,
    /// Set once the server speaks the stateless era (or while probing whether it does).
    stamp: Mutex<Option<Arc<Stamp>>>,
    closed: Mutex<Option<String>>,
    next_id: AtomicU64,
    list_changed: Arc<Notify>,
    /// How many times the server said its prompt list changed.
    prompt_changes: AtomicU64,
    server_requests: Arc<Semaphore>,
    /// Calls whose progress someone follows, by the token we sent (the request id).
    progress: Mutex<HashMap<u64, ProgressSink>>,
    /// Calls whose caller hears the server's log messages, by request id.
    logs: Mutex<HashMap<u64, LogSink>>,
    /// Calls whose caller can answer the server's questions, by request id.
    askers: Mutex<HashMap<u64, Asker>>,
    /// Listen streams waiting for the server's acknowledgement, by request id.
    acks: Mutex<HashMap<u64, oneshot::Sender<()>>>,
}

impl Connection {
    /// Starts the dispatcher task for `link`.
    pub(crate) fn start(server: &str, link: Link, ctx: Context) -> Connection {
        let shared = Arc::new(Shared {
            pending: Mutex::new(HashMap::new()),
            stamp: Mutex::new(None),
            closed: Mutex::new(None),
            next_id: AtomicU64::new(1),
            list_changed: Arc::new(Notify::new()),
            prompt_changes: AtomicU64::new(0),
            server_requests: Arc::new(Semaphore::new(MAX_SERVER_REQUESTS)),
            progress: Mutex::new(HashMap::new()),
            logs: Mutex::new(HashMap::new()),
            askers: Mutex::new(HashMap::new()),
            acks: Mutex::new(HashMap::new()),
        });
        tokio::spawn(dispatch(
            server.to_owned(),
            link.events,
            link.outgoing.clone(),
            shared.clone(),
            ctx,
        ));
        Connection {
            server: server.to_owned(),
            outgoing: link.outgoing,
            shared,
        }
    }

    /// Sends a request and waits for its answer, decoded, at most `timeout`. Decoded
    /// answers (`initialize` and the like) are small: one over
    /// [`protocol::MAX_CONTROL_BYTES`] is refused before it becomes a tree; tool lists and
    /// results, which may be large, stay text (`request_raw`).
    pub(crate) async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, McpError> {
        let raw = self.request_raw(method, params, timeout).await?;
        if raw.get().len() > protocol::MAX_CONTROL_BYTES {
            return Err(McpError::Protocol {
                server: self.server.clone(),
                reason: format!(
                    "its answer to {method} has {} bytes, over the {}-byte limit for anything but tool lists and results",
                    raw.get().len(),
                    protocol::MAX_CONTROL_BYTES
                ),
            });
        }
        serde_json::from_str(raw.get()).map_err(|e| McpError::Protocol {
            server: self.server.clone(),
            reason: if protocol::is_too_deep(&e) {
                format!("its answer to {method} is nested deeper than 128 levels, which edgar does not decode")
            } else {
                format!("its answer to {method} does not decode ({e})")
            },
        })
    }

    /// Sends a request and waits for its answer as JSON text, at most `timeout`
    /// (including the time to hand the message to a server that is slow to read).
    pub(crate) async fn request_raw(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Box<RawValue>, McpError> {
        self.request_with_headers(method, params, timeout, Vec::new())
            .await
    }

    /// [`Connection::request_raw`] with `Mcp-Param-*` headers for an HTTP transport (the
    /// stateless era's custom headers; other transports ignore them).
    pub(crate) async fn request_with_headers(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        param_headers: Vec<(String, String)>,
    ) -> Result<Box<RawValue>, McpError> {
        self.exchange(method, params, timeout, param_headers, None)
            .await
    }

    /// A stateless-era `subscriptions/listen` stream with `params`, open at most
    /// `timeout`: `acknowledged` hears the server's
    /// `notifications/subscriptions/acknowledged` for it (what the server watches is in
    /// place from then on), and is dropped unheard if the stream ends first.
    pub(crate) async fn listen(
        &self,
        params: Value,
        timeout: Duration,
        acknowledged: oneshot::Sender<()>,
    ) -> Result<Box<RawValue>, McpError> {
        let ack = Some(acknowledged);
        self.exchange("subscriptions/listen", params, timeout, Vec::new(), ack)
            .await
    }

    async fn exchange(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        param_headers: Vec<(String, String)>,
        acknowledged: Option<oneshot::Sender<()>>,
    ) -> Result<Box<RawValue>, McpError> {
        self.check_open()?;
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.shared.pending).insert(id, tx);
        let mut params = params;
        let followed = method == "tools/call" && self.follow_progress(id, &mut params);
        let logged = method == "tools/call"
            && LOGS
                .try_with(|sink| lock(&self.shared.logs).insert(id, sink.clone()))
                .is_ok();
        let asked = matches!(method, "tools/call" | "prompts/get")
            && ASKER
                .try_with(|asker| lock(&self.shared.askers).insert(id, asker.clone()))
                .is_ok();
        let _unfollow = (followed || logged || asked).then(|| Unfollow(&self.shared, id));
        let stamp = self.stamp();
        let _stream_end = acknowledged.map(|a| {
            lock(&self.shared.acks).insert(id, a);
            StreamEnd {
                conn: self,
                id,
                stamp: stamp.clone(),
            }
        });
        // A stateless server is told only the question capabilities of the caller who
        // can be asked, so it asks nothing that caller cannot answer.
        if asked
            && let Some(stamp) = &stamp
            && let Some(caps) = ASKER
                .try_with(|asker| asker.restrict(stamp.capabilities()))
                .ok()
                .flatten()
            && let Some(p) = params.as_object_mut()
        {
            let meta = p.entry("_meta").or_insert_with(|| json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert(protocol::META_CLIENT_CAPABILITIES.into(), caps);
            }
        }
        // A span of its own in the trace the caller's work runs in, if any.
        let span = Span::start(Kind::Client, telemetry::current(), || {
            self.span_description(id, method, &params)
        });
        // Its trace context goes in `_meta` too (SEP-414), which every transport carries.
        if let Some(span) = &span {
            if params.is_null() {
                params = json!({});
            }
            if let Some(p) = params.as_object_mut() {
                let meta = p.entry("_meta").or_insert_with(|| json!({}));
                if let Some(meta) = meta.as_object_mut() {
                    let context = span.context();
                    meta.insert("traceparent".into(), json!(context.traceparent()));
                    if let Some(state) = context.tracestate() {
                        meta.insert("tracestate".into(), json!(state));
                    }
                }
            }
        }
        let exchange = async {
            let mut message = Outbound::request(id, method, params, stamp.as_deref());
            message.param_headers = param_headers;
            message.trace = span.as_ref().map(|s| s.context());
            self.outgoing
                .send(message)
                .await
                .map_err(|_| self.closed_error())?;
            match rx.await {
                Ok(Outcome::Answer(Ok(v))) => Ok(v),
                Ok(Outcome::Failed(e)) => Err(e),
                Ok(Outcome::Answer(Err(e))) if e.code == protocol::UNSUPPORTED_PROTOCOL_VERSION => {
                    Err(McpError::UnsupportedVersion {
                        server: self.server.clone(),
                        requested: stamp
                            .as_ref()
                            .map_or(protocol::PROTOCOL[0], |s| &s.version)
                            .to_owned(),
                        supported: e.supported,
                    })
                }
                // A stateless server needing what the caller did not declare: the
                // caller's request fails the same way.
                Ok(Outcome::Answer(Err(protocol::RpcError {
                    code: protocol::MISSING_CAPABILITY,
                    required: Some(capability),
                    ..
                }))) => Err(McpError::MissingCapability {
                    server: self.server.clone(),
                    capability,
                }),
                Ok(Outcome::Answer(Err(e))) => Err(McpError::Server {
                    server: self.server.clone(),
                    method: method.to_owned(),
                    code: e.code,
                    message: shown_message(&e.message),
                }),
                Err(_) => Err(self.closed_error()),
            }
        };
        let outcome = match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => {
                lock(&self.shared.pending).remove(&id);
                let cancel = Outbound::notification(
                    "notifications/cancelled",
                    json!({"requestId": id, "reason": "edgar: the request timed out"}),
                    stamp.as_deref(),
                );
                let _ = self.outgoing.try_send(cancel);
                Err(McpError::Timeout {
                    server: self.server.clone(),
                    method: method.to_owned(),
                    timeout,
                })
            }
        };
        if let Some(span) = span {
            span.end(outcome.as_ref().err().map(McpError::kind));
        }
        outcome
    }

    /// A request's span name and attributes: OpenTelemetry's MCP conventions, and which
    /// server it goes to.
    fn span_description(
        &self,
        id: u64,
        method: &str,
        params: &Value,
    ) -> (String, Vec<(&'static str, String)>) {
        let (name, mut attributes) = telemetry::describe(method, params, id.to_string());
        attributes.push(("edgar.server.name", self.server.clone()));
        (name, attributes)
    }

    /// Gives request `id` a progress token (its id) when the caller follows progress.
    fn follow_progress(&self, id: u64, params: &mut Value) -> bool {
        let Ok(sink) = PROGRESS.try_with(Arc::clone) else {
            return false;
        };
        let Some(p) = params.as_object_mut() else {
            return false;
        };
        let meta = p.entry("_meta").or_insert_with(|| json!({}));
        let Some(meta) = meta.as_object_mut() else {
            return false;
        };
        meta.insert("progressToken".into(), json!(id));
        lock(&self.shared.progress).insert(id, sink);
        true
    }

    pub(crate) async fn notify(&self, method: &str, params: Value) -> Result<(), McpError> {
        self.check_open()?;
        self.outgoing
            .send(Outbound::notification(
                method,
                params,
                self.stamp().as_deref(),
            ))
            .await
            .map_err(|_| self.closed_error())
    }

    /// Woken each time the server sends `notifications/tools/list_changed`.
    /// Stamps every later request for the stateless era at `stamp`'s version, or (with
    /// `None`) for the handshake era. Set while nothing else is in flight: when the
    /// era is probed or chosen.
    pub(crate) fn set_era(&self, stamp: Option<Stamp>) {
        *lock(&self.shared.stamp) = stamp.map(Arc::new);
    }

    /// The stateless era's version this connection speaks, if it does.
    pub(crate) fn modern_version(&self) -> Option<Arc<str>> {
        self.stamp().map(|s| s.version.clone())
    }

    fn stamp(&self) -> Option<Arc<Stamp>> {
        lock(&self.shared.stamp).clone()
    }

    /// How many times the server said its prompt list changed so far.
    pub(crate) fn prompt_changes(&self) -> u64 {
        self.shared.prompt_changes.load(Ordering::Relaxed)
    }

    pub(crate) fn list_changed(&self) -> Arc<Notify> {
        self.shared.list_changed.clone()
    }

    /// The reason the connection ended, once it has.
    pub(crate) fn closed_reason(&self) -> Option<String> {
        lock(&self.shared.closed).clone()
    }

    fn check_open(&self) -> Result<(), McpError> {
        match self.closed_reason() {
            Some(reason) => Err(McpError::Closed {
                server: self.server.clone(),
                reason,
            }),
            None => Ok(()),
        }
    }

    fn closed_error(&self) -> McpError {
        McpError::Closed {
            server: self.server.clone(),
            reason: self
                .closed_reason()
                .unwrap_or_else(|| "the connection ended".into()),
        }
    }
}

/// Stops following a request's progress and logs when its exchange ends, however it ends.
struct Unfollow<'a>(&'a Shared, u64);

impl Drop for Unfollow<'_> {
    fn drop(&mut self) {
        lock(&self.0.progress).remove(&self.1);
        lock(&self.0.logs).remove(&self.1);
        lock(&self.0.askers).remove(&self.1);
    }
}

/// A listen stream's end, however it ends: its acknowledgement is no longer awaited,
/// and a stream dropped unanswered (an unsubscribe) is cancelled at the server.
struct StreamEnd<'a> {
    conn: &'a Connection,
    id: u64,
    stamp: Option<Arc<Stamp>>,
}

impl Drop for StreamEnd<'_> {
    fn drop(&mut self) {
        let shared = &self.conn.shared;
        lock(&shared.acks).remove(&self.id);
        if lock(&shared.pending).remove(&self.id).is_some() {
            let cancel = Outbound::notification(
                "notifications/cancelled",
                json!({"requestId": self.id, "reason": "edgar: the subscription ended"}),
                self.stamp.as_deref(),
            );
            let _ = self.conn.outgoing.try_send(cancel);
        }
    }
}

#[cfg(test)]
mod tests;
