//! The Streamable HTTP transport (MCP 2025-11-25, also serving 2025-06-18 and 2025-03-26
//! servers): every message is one POST whose answer is JSON or an event stream; a
//! standalone GET stream carries what the server sends on its own.
//!
//! The transport only moves messages. It keeps the `Mcp-Session-Id` and the negotiated
//! `MCP-Protocol-Version`, re-initializes once when a live session is forgotten (404),
//! resumes a stream that ends before its answer (`retry`, then GET with
//! `Last-Event-ID`), and turns every HTTP failure of a request into an
//! [`McpError`](super::McpError)
//! for that request alone. Redirects to another origin are never followed; bodies,
//! events and streams are size-limited; the request deadline lives in the connection,
//! whose `notifications/cancelled` aborts the request's stream here.

pub mod event_stream;
pub(crate) mod legacy;
mod request;
mod streams;
mod wire;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::{AbortHandle, JoinSet};

use crate::text::shown;

use super::connection::{Event, Link, Outbound};
use super::protocol::Incoming;
use crate::sync::lock;
use request::{bearer, check_status, send_with_auth, stateless_headers};
use streams::answers;
use wire::{Body, Reply};

pub use super::protocol::MAX_MESSAGE_BYTES;
pub use crate::auth::bearer::{Authorizer, Challenge};
pub(crate) use request::{client, connect_error, header_map, param_headers, server_url};

/// Most bytes read from one event stream before it is dropped (and resumed if it can be).
pub const MAX_STREAM_BYTES: usize = 64 << 20;

/// How often a stream that ends before its answer is resumed.
const MAX_RESUMES: usize = 5;

/// Reconnection delay when the server names none.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);

/// A standalone GET stream open at least this long counts as healthy when it ends,
/// so it is reopened however often the server closes it.
const HEALTHY_STREAM: Duration = Duration::from_secs(30);

/// Longest reconnection delay honoured.
const MAX_RETRY: Duration = Duration::from_secs(30);

/// How long `close` waits for the server to acknowledge the session's `DELETE`.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Deadline for messages that expect no answer (notifications, our replies).
const SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a stream is read after it carried its answer.
const DRAIN: Duration = Duration::from_millis(500);

/// Requests in flight to one server at once.
const MAX_IN_FLIGHT: usize = 32;

/// Messages buffered in each direction.
const CHANNEL_DEPTH: usize = 64;

/// What both HTTP transports start from: the checked URL and config headers, with the
/// process's HTTP client built.
fn prepare(
    url: &str,
    headers: &BTreeMap<String, String>,
) -> Result<(&'static reqwest::Client, Url, HeaderMap), String> {
    let url = server_url(url)?;
    let headers = header_map(headers)?;
    Ok((client()?, url, headers))
}

/// The connection's link, and the transport's ends of it.
fn link() -> (Link, mpsc::Receiver<Outbound>, mpsc::Sender<Event>) {
    let (out_tx, out_rx) = mpsc::channel::<Outbound>(CHANNEL_DEPTH);
    let (ev_tx, ev_rx) = mpsc::channel::<Event>(CHANNEL_DEPTH);
    let link = Link {
        outgoing: out_tx,
        events: ev_rx,
    };
    (link, out_rx, ev_tx)
}

/// A running Streamable HTTP session.
pub(crate) struct Http {
    shared: Arc<Shared>,
    writer: AbortHandle,
}

struct Shared {
    server: String,
    client: &'static reqwest::Client,
    url: Url,
    headers: HeaderMap,
    events: mpsc::Sender<Event>,
    session: Mutex<Option<HeaderValue>>,
    protocol: Mutex<Option<HeaderValue>>,
    /// The `initialize` request as first sent, replayed when the session is forgotten.
    initialize: Mutex<Option<Outbound>>,
    /// Bumped by each re-initialization, so concurrent 404s re-initialize once.
    epoch: AtomicU64,
    reinit: tokio::sync::Mutex<()>,
    in_flight: Semaphore,
    /// Request id -> its exchange, aborted when the connection cancels the request.
    exchanges: Mutex<HashMap<u64, AbortHandle>>,
    /// The standalone GET stream, one per session epoch.
    listening: Mutex<Option<(u64, AbortHandle)>>,
    auth: Option<Arc<dyn Authorizer>>,
}

impl Http {
    /// Starts the transport's writer. No request is sent until the first message.
    pub(crate) fn start(
        server: &str,
        url: &str,
        headers: &BTreeMap<String, String>,
        auth: Option<Arc<dyn Authorizer>>,
    ) -> Result<(Http, Link), String> {
        let (client, url, headers) = prepare(url, headers)?;
        let (link, out_rx, ev_tx) = link();
        let shared = Arc::new(Shared {
            server: server.to_owned(),
            client,
            url,
            headers,
            events: ev_tx,
            session: Mutex::new(None),
            protocol: Mutex::new(None),
            initialize: Mutex::new(None),
            epoch: AtomicU64::new(0),
            reinit: tokio::sync::Mutex::new(()),
            in_flight: Semaphore::new(MAX_IN_FLIGHT),
            exchanges: Mutex::new(HashMap::new()),
            listening: Mutex::new(None),
            auth,
        });
        let writer = tokio::spawn(write_loop(shared.clone(), out_rx)).abort_handle();
        Ok((Http { shared, writer }, link))
    }

    /// Ends the session: every exchange and stream is aborted, and a live session is
    /// deleted on the server (a 405 is fine: the server keeps no sessions).
    pub(crate) async fn close(&mut self) {
        self.writer.abort();
        if let Some((_, h)) = lock(&self.shared.listening).take() {
            h.abort();
        }
        let session = lock(&self.shared.session).take();
        if let Some(session) = session {
            let delete = self
                .shared
                .authorized(self.shared.request(Method::DELETE, &self.shared.url))
                .await;
            let delete = delete.header("mcp-session-id", session);
            match tokio::time::timeout(CLOSE_TIMEOUT, delete.send()).await {
                Ok(Ok(r)) => tracing::debug!(
                    server = self.shared.server,
                    "session deleted: HTTP {}",
                    r.status()
                ),
                Ok(Err(e)) => tracing::debug!(
                    server = self.shared.server,
                    "deleting the session failed: {}",
                    e.without_url()
                ),
                Err(_) => tracing::debug!(server = self.shared.server, "DELETE timed out"),
            }
        }
        let _ = self
            .shared
            .events
            .try_send(Event::Closed("edgar closed the session".into()));
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        self.writer.abort();
        if let Some((_, h)) = lock(&self.shared.listening).take() {
            h.abort();
        }
    }
}

/// Takes the connection's messages and runs one exchange per message. Dropping this
/// task (close, or the connection going away) aborts every exchange it started.
async fn write_loop(shared: Arc<Shared>, mut outgoing: mpsc::Receiver<Outbound>) {
    let mut tasks = JoinSet::new();
    while let Some(message) = outgoing.recv().await {
        while tasks.try_join_next().is_some() {}
        if let Some(cancelled) = message.cancels {
            let handle = lock(&shared.exchanges).remove(&cancelled);
            if let Some(h) = handle {
                h.abort();
            }
            // Stateless era: closing the request's stream is the cancellation; no
            // notification is posted.
            if message.version.is_some() {
                continue;
            }
        }
        if message.is("initialize") {
            *lock(&shared.initialize) = Some(message.clone());
        }
        // The handshake's last step is answered before anything else is posted: POSTs
        // race, and a server acts on it (server-everything registers the tools that
        // need the client's roots or elicitation; the Python SDK refuses requests that
        // come before it).
        if message.is("notifications/initialized") {
            shared.clone().exchange(message).await;
            continue;
        }
        let id = message.request;
        let task = shared.clone();
        let handle = tasks.spawn(async move { task.exchange(message).await });
        if let Some(id) = id {
            lock(&shared.exchanges).insert(id, handle);
        }
    }
}

impl Shared {
    fn request(&self, method: Method, url: &Url) -> reqwest::RequestBuilder {
        let mut r = self
            .client
            .request(method, url.clone())
            .headers(self.headers.clone());
        if let Some(v) = lock(&self.protocol).clone() {
            r = r.header("mcp-protocol-version", v);
        }
        r
    }

    /// Adds the bearer token, if this server has a sign-in; returns the token sent.
    async fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match bearer(self.auth.as_ref(), None).await {
            Some((header, _)) => request.header("authorization", header),
            None => request,
        }
    }

    fn session(&self) -> Option<HeaderValue> {
        lock(&self.session).clone()
    }

    async fn emit(&self, event: Event) {
        let _ = self.events.send(event).await;
    }

    /// Sends one message and delivers whatever comes back. A request's failure goes to
    /// the connection as that request's error; anything else is logged.
    async fn exchange(self: Arc<Self>, message: Outbound) {
        let _permit = self.in_flight.acquire().await;
        let id = message.request;
        let outcome = if id.is_some() {
            self.send(&message).await
        } else {
            match tokio::time::timeout(SEND_TIMEOUT, self.send(&message)).await {
                Ok(r) => r,
                Err(_) => Err(Reply::Failed("no answer to a notification".into())),
            }
        };
        if let Some(id) = id {
            lock(&self.exchanges).remove(&id);
        }
        let error = match outcome {
            Ok(()) => {
                if message.is("notifications/initialized") {
                    self.listen();
                }
                return;
            }
            Err(e) => e,
        };
        let method = message.method.clone().unwrap_or_else(|| "a reply".into());
        match id {
            Some(id) => {
                let error = error.into_error(&self.server, &method);
                self.emit(Event::Failed { id, error }).await;
            }
            None => tracing::debug!(
                server = self.server,
                "sending {} failed: {}",
                shown(&method),
                error.reason()
            ),
        }
    }

    /// POSTs the message, re-initializing once if the server forgot the session.
    async fn send(&self, message: &Outbound) -> Result<(), Reply> {
        let mut reinitialized = false;
        loop {
            let epoch = self.epoch.load(Ordering::SeqCst);
            let session = self.session();
            let response = send_with_auth(self.auth.as_ref(), message.subject.as_ref(), || {
                let post = self
                    .request(Method::POST, &self.url)
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .body(message.bytes.clone());
                let post = match &message.trace {
                    Some(t) => {
                        let post = post.header("traceparent", t.traceparent());
                        match t.tracestate() {
                            Some(state) => post.header("tracestate", state),
                            None => post,
                        }
                    }
                    None => post,
                };
                match (&message.version, &session) {
                    (Some(version), _) => stateless_headers(post, version, message),
                    (None, Some(s)) => post.header("mcp-session-id", s.clone()),
                    (None, None) => post,
                }
            })
            .await?;
            let status = response.status();
            if status == StatusCode::NOT_FOUND && session.is_some() && !message.is("initialize") {
                if reinitialized {
                    return Err(Reply::Failed(
                        "the server forgot the session again right after re-initializing".into(),
                    ));
                }
                tracing::info!(server = self.server, "the session expired; re-initializing");
                self.reinitialize(epoch).await?;
                reinitialized = true;
                continue;
            }
            if message.is("initialize")
                && let Some(s) = response.headers().get("mcp-session-id")
            {
                if s.to_str()
                    .is_ok_and(|s| s.bytes().all(|b| (0x21..=0x7e).contains(&b)))
                {
                    *lock(&self.session) = Some(s.clone());
                } else {
                    return Err(Reply::Failed(
                        "its Mcp-Session-Id is not visible ASCII".into(),
                    ));
                }
            }
            return self.deliver(response, message.request, message).await;
        }
    }

    /// Reads a POST's answer: nothing (202), one JSON body, or an event stream that
    /// carries the answer (resumed with GET if it ends first).
    async fn deliver(
        &self,
        response: reqwest::Response,
        want: Option<u64>,
        message: &Outbound,
    ) -> Result<(), Reply> {
        let status = response.status();
        if want.is_some()
            && status.is_client_error()
            && !matches!(status.as_u16(), 401 | 403)
            && matches!(wire::body_kind(&response), Body::Json)
        {
            // A stateless server answers an unsupported version (400) or method (404)
            // with a JSON-RPC error for the request: deliver it as that answer.
            let refused = check_status(&response);
            let body = wire::read_body(response).await?;
            let messages = super::protocol::decode(&body).unwrap_or_default();
            if answers(&messages, want) {
                self.emit(Event::Message(messages)).await;
                return Ok(());
            }
            return refused;
        }
        check_status(&response)?;
        if status == StatusCode::ACCEPTED || status == StatusCode::NO_CONTENT {
            return match want {
                Some(_) => Err(Reply::Failed(format!(
                    "it answered HTTP {} with no reply",
                    status.as_u16()
                ))),
                None => Ok(()),
            };
        }
        match wire::body_kind(&response) {
            Body::Json => {
                let body = wire::read_body(response).await?;
                let messages = super::protocol::decode(&body)
                    .map_err(|what| Reply::Failed(format!("it answered with {what}")))?;
                self.note_initialized(message, &messages);
                self.emit(Event::Message(messages)).await;
                Ok(())
            }
            Body::EventStream => {
                let Some(want) = want else {
                    // A stream answering a notification or a reply: read what it carries.
                    let _ = self.read_stream(response, None, message).await;
                    return Ok(());
                };
                let mut end = self.read_stream(response, Some(want), message).await?;
                let mut resumes = 0;
                while !end.answered {
                    let Some(last_id) = end.last_id.clone() else {
                        return Err(Reply::Failed(format!(
                            "its event stream ended before the answer{}",
                            end.describe()
                        )));
                    };
                    if resumes == MAX_RESUMES {
                        return Err(Reply::Failed(format!(
                            "its event stream ended {MAX_RESUMES} times without the answer{}",
                            end.describe()
                        )));
                    }
                    resumes += 1;
                    let wait = end.retry.unwrap_or(DEFAULT_RETRY).min(MAX_RETRY);
                    tokio::time::sleep(wait).await;
                    let response = self.get_stream(Some(&last_id)).await?;
                    end = self.read_stream(response, Some(want), message).await?;
                }
                Ok(())
            }
            Body::Empty if want.is_none() => Ok(()),
            Body::Empty => Err(Reply::Failed("it answered with an empty body".into())),
            Body::Other(kind) => Err(Reply::Failed(format!(
                "it answered with content type {}, not JSON or an event stream",
                shown(&kind)
            ))),
        }
    }

    /// Remembers the negotiated version from the answer to `initialize`.
    fn note_initialized(&self, message: &Outbound, messages: &[Incoming]) {
        #[derive(serde::Deserialize)]
        struct Initialized {
            #[serde(rename = "protocolVersion")]
            protocol_version: String,
        }
        if !message.is("initialize") {
            return;
        }
        let version = messages.iter().find_map(|m| match m {
            Incoming::Response {
                id,
                outcome: Ok(result),
            } if *id == message.request => serde_json::from_str::<Initialized>(result.get()).ok(),
            _ => None,
        });
        if let Some(v) = version.and_then(|v| HeaderValue::from_str(&v.protocol_version).ok()) {
            *lock(&self.protocol) = Some(v);
        }
    }

    /// Replays `initialize` and `notifications/initialized` under a new session, unless
    /// another request already did since `epoch`.
    async fn reinitialize(&self, epoch: u64) -> Result<(), Reply> {
        let _one = self.reinit.lock().await;
        if self.epoch.load(Ordering::SeqCst) != epoch {
            return Ok(());
        }
        let Some(init) = lock(&self.initialize).clone() else {
            return Err(Reply::Failed("the session expired before it began".into()));
        };
        *lock(&self.session) = None;
        // The same request under an id the connection never uses, so its answer is ours.
        let mut replay: Value = serde_json::from_slice(&init.bytes).unwrap_or(Value::Null);
        replay["id"] = json!("edgar-reinitialize");
        let post = self.authorized(self.request(Method::POST, &self.url)).await;
        let response = post
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(replay.to_string())
            .send()
            .await
            .map_err(|e| Reply::Failed(connect_error(&e)))?;
        check_status(&response)?;
        let session = response.headers().get("mcp-session-id").cloned();
        // The answer is ours alone: read it without delivering it.
        match wire::body_kind(&response) {
            Body::Json => {
                wire::read_body(response).await?;
            }
            _ => {
                let mut r = response;
                let mut read = 0usize;
                while let Ok(Some(c)) = r.chunk().await {
                    read += c.len();
                    if read > MAX_MESSAGE_BYTES || c.windows(2).any(|w| w == b"\n\n") {
                        break;
                    }
                }
            }
        }
        *lock(&self.session) = session.clone();
        let note = self.authorized(self.request(Method::POST, &self.url)).await;
        let mut note = note
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(super::protocol::notification(
                "notifications/initialized",
                json!({}),
            ));
        if let Some(s) = session {
            note = note.header("mcp-session-id", s);
        }
        let _ = tokio::time::timeout(SEND_TIMEOUT, note.send()).await;
        self.epoch.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::request::header_value;
    use super::*;

    #[test]
    fn marked_arguments_become_param_headers() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "N"},
            "big": {"type": "integer", "x-mcp-header": "Big"},
            "flag": {"type": "boolean", "x-mcp-header": "Flag"},
            "gone": {"type": "string", "x-mcp-header": "Gone"},
            "plain": {"type": "string"},
            "opts": {"type": "object", "properties": {"dry": {"type": "boolean", "x-mcp-header": "Dry"}}}
        }});
        let args = json!({"region": "us-west1", "n": -7, "big": 9_007_199_254_740_993_u64,
            "flag": false, "gone": null, "plain": "x", "opts": {"dry": true}});
        let mut got = param_headers(&schema, &args);
        got.sort();
        let want: Vec<(String, String)> = [
            ("Dry", "true"),
            ("Flag", "false"),
            ("N", "-7"),
            ("Region", "us-west1"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn header_values_are_plain_or_base64() {
        let v = |s: &str| {
            header_value(s)
                .to_str()
                .map(str::to_owned)
                .unwrap_or_default()
        };
        assert_eq!(v("us west 1"), "us west 1");
        assert_eq!(v("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
        assert_eq!(v(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(v("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
        assert_eq!(
            v("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
        assert_eq!(v(""), "=?base64??=");
    }
}
