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
mod wire;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::{AbortHandle, JoinSet};

pub use crate::auth::bearer::{Authorizer, Challenge};

use crate::auth::Secret;

/// Tries of one message when the server keeps refusing its token.
const MAX_AUTH_RETRIES: usize = 3;
use wire::{Body, Reply};

use super::connection::{Event, Link, Outbound};
use super::protocol::Incoming;
use crate::text::shown;

pub use super::protocol::MAX_MESSAGE_BYTES;
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

/// The process's HTTP client for MCP servers, built the first time one is used.
pub(crate) fn client() -> Result<&'static reqwest::Client, String> {
    static CLIENT: std::sync::OnceLock<Result<reqwest::Client, String>> =
        std::sync::OnceLock::new();
    CLIENT
        .get_or_init(|| {
            crate::auth::oauth::client_builder()
                .redirect(same_origin_redirects())
                .connect_timeout(Duration::from_secs(10))
                .build()
                .map_err(|e| format!("cannot build the HTTP client: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Follows at most five redirects, all within the first request's origin; any other
/// redirect comes back as the 3xx response and is reported.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if same && attempt.previous().len() <= 5 {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

/// Validated config headers. Values may be secrets: errors name the header only.
pub(crate) fn header_map(headers: &BTreeMap<String, String>) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("header name {} is not valid", shown(k)))?;
        let mut value = HeaderValue::from_str(v)
            .map_err(|_| format!("the value of header {} is not valid", shown(k)))?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    Ok(map)
}

/// Parses and checks a server URL: http or https only.
pub(crate) fn server_url(url: &str) -> Result<Url, String> {
    let parsed =
        Url::parse(url).map_err(|e| format!("its URL {} is not valid: {e}", shown(url)))?;
    match parsed.scheme() {
        "http" | "https" => Ok(parsed),
        other => Err(format!(
            "its URL uses {}; only http and https work",
            shown(other)
        )),
    }
}

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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
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
        match bearer(self.auth.as_ref()).await {
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
            let response = send_with_auth(self.auth.as_ref(), || {
                let post = self
                    .request(Method::POST, &self.url)
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .body(message.bytes.clone());
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

    /// Reads an event stream, delivering each message, until it ends or carries the
    /// answer to `want`.
    async fn read_stream(
        &self,
        mut response: reqwest::Response,
        want: Option<u64>,
        message: &Outbound,
    ) -> Result<StreamEnd, Reply> {
        let mut parser = event_stream::EventStream::new(MAX_MESSAGE_BYTES);
        let mut end = StreamEnd::default();
        let mut read = 0usize;
        loop {
            let next = if end.answered {
                // The server should end the stream after the answer; reading to its end
                // lets the connection go back to the pool, but only briefly.
                match tokio::time::timeout(DRAIN, response.chunk()).await {
                    Ok(next) => next,
                    Err(_) => break,
                }
            } else {
                response.chunk().await
            };
            let chunk = match next {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(e) => {
                    end.broken = Some(e.without_url().to_string());
                    break;
                }
            };
            read += chunk.len();
            if read > MAX_STREAM_BYTES {
                end.broken = Some(format!("it carried more than {MAX_STREAM_BYTES} bytes"));
                break;
            }
            let mut messages = Vec::new();
            parser
                .feed(&chunk, |e| {
                    if e.event.is_empty() || e.event == "message" {
                        messages.push(e.data)
                    }
                })
                .map_err(|e| Reply::Failed(e.to_string()))?;
            for data in messages {
                if data.trim().is_empty() {
                    continue;
                }
                let messages = match super::protocol::decode(data.as_bytes()) {
                    Ok(m) => m,
                    Err(_) => {
                        end.not_json += 1;
                        continue;
                    }
                };
                let answers = want.is_some() && answers(&messages, want);
                self.note_initialized(message, &messages);
                self.emit(Event::Message(messages)).await;
                if answers {
                    end.answered = true;
                }
            }
        }
        end.last_id = parser.last_id().map(str::to_owned);
        end.retry = parser.retry().map(Duration::from_millis);
        Ok(end)
    }

    /// Opens a GET event stream, resuming after `last_id` if given.
    async fn get_stream(&self, last_id: Option<&str>) -> Result<reqwest::Response, Reply> {
        let last_id = last_id
            .map(HeaderValue::from_str)
            .transpose()
            .map_err(|_| Reply::Failed("its event id is not a valid header".into()))?;
        let session = self.session();
        let response = send_with_auth(self.auth.as_ref(), || {
            let mut get = self
                .request(Method::GET, &self.url)
                .header("accept", "text/event-stream");
            if let Some(s) = &session {
                get = get.header("mcp-session-id", s.clone());
            }
            if let Some(id) = &last_id {
                get = get.header("last-event-id", id.clone());
            }
            get
        })
        .await?;
        check_status(&response)?;
        match wire::body_kind(&response) {
            Body::EventStream => Ok(response),
            other => Err(Reply::Failed(format!(
                "its GET answered {} instead of an event stream",
                other.describe()
            ))),
        }
    }

    /// Opens the standalone GET stream for this session (once per session epoch).
    fn listen(self: &Arc<Self>) {
        let epoch = self.epoch.load(Ordering::SeqCst);
        let mut listening = lock(&self.listening);
        if listening.as_ref().is_some_and(|(e, _)| *e == epoch) {
            return;
        }
        if let Some((_, old)) = listening.take() {
            old.abort();
        }
        let me = self.clone();
        let handle = tokio::spawn(async move { me.listen_loop().await }).abort_handle();
        *listening = Some((epoch, handle));
    }

    async fn listen_loop(&self) {
        let mut last_id: Option<String> = None;
        let mut failures = 0;
        let nothing = Outbound::none();
        while failures < 3 {
            let response = match self.get_stream(last_id.as_deref()).await {
                Ok(r) => r,
                Err(Reply::Status { status, .. }) if matches!(status, 400 | 404 | 405) => {
                    tracing::debug!(
                        server = self.server,
                        "the server offers no GET stream (HTTP {status})"
                    );
                    return;
                }
                Err(e) => {
                    tracing::debug!(server = self.server, "GET stream: {}", e.reason());
                    failures += 1;
                    tokio::time::sleep(DEFAULT_RETRY * failures).await;
                    continue;
                }
            };
            let opened = std::time::Instant::now();
            match self.read_stream(response, None, &nothing).await {
                Ok(end) => {
                    // A stream that lived a while was healthy: servers close idle streams.
                    if opened.elapsed() >= HEALTHY_STREAM {
                        failures = 0;
                    }
                    failures += 1;
                    last_id = end.last_id.or(last_id);
                    let wait = end.retry.unwrap_or(DEFAULT_RETRY).min(MAX_RETRY);
                    tokio::time::sleep(wait).await;
                }
                Err(e) => {
                    tracing::debug!(server = self.server, "GET stream: {}", e.reason());
                    return;
                }
            }
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

/// The `Authorization` header (marked sensitive, so it never shows in `Debug`) and the
/// token in it, when the server has a sign-in with a token.
async fn bearer(auth: Option<&Arc<dyn Authorizer>>) -> Option<(HeaderValue, Secret)> {
    let token = auth?.bearer().await?;
    let mut header = HeaderValue::from_str(&format!("Bearer {}", token.expose())).ok()?;
    header.set_sensitive(true);
    Some((header, token))
}

/// Sends the request `make` builds with the server's bearer token, if it has a sign-in.
/// A 401 (or a 403 asking for more scope) goes to the authorizer, and the request is
/// built and sent again while it says a new token is worth a try, at most
/// [`MAX_AUTH_RETRIES`] times. Any other answer is returned as it is.
pub(super) async fn send_with_auth(
    auth: Option<&Arc<dyn Authorizer>>,
    make: impl Fn() -> reqwest::RequestBuilder,
) -> Result<reqwest::Response, Reply> {
    let mut tries = 0;
    loop {
        let mut request = make();
        let mut sent = None;
        if let Some((header, token)) = bearer(auth).await {
            request = request.header("authorization", header);
            sent = Some(token);
        }
        let response = request
            .send()
            .await
            .map_err(|e| Reply::Failed(connect_error(&e)))?;
        if let Some(auth) = auth
            && tries < MAX_AUTH_RETRIES
            && let Err(Reply::NeedsLogin(challenge)) = check_status(&response)
        {
            tries += 1;
            if auth
                .refused(
                    response.status().as_u16(),
                    challenge.as_ref(),
                    sent.as_ref(),
                )
                .await
            {
                continue;
            }
        }
        return Ok(response);
    }
}

/// Whether `messages` (a message or batch) hold the answer to request `want`.
fn answers(messages: &[Incoming], want: Option<u64>) -> bool {
    messages
        .iter()
        .any(|m| matches!(m, Incoming::Response { id, .. } if *id == want))
}

/// How an event stream ended.
#[derive(Debug, Default)]
struct StreamEnd {
    answered: bool,
    last_id: Option<String>,
    retry: Option<Duration>,
    not_json: usize,
    broken: Option<String>,
}

impl StreamEnd {
    fn describe(&self) -> String {
        let mut out = String::new();
        if let Some(b) = &self.broken {
            out.push_str(&format!(" ({})", shown(b)));
        }
        if self.not_json > 0 {
            out.push_str(&format!("; {} of its events were not JSON", self.not_json));
        }
        out
    }
}

/// A 3xx, 4xx or 5xx as a failure (401 and 403 with their challenge).
/// The stateless era's request headers: the version the body's `_meta` names, the
/// method, and for `tools/call`, `prompts/get` and `resources/read` the name or URI
/// (base64 in the spec's sentinel when it is not plain visible ASCII). No session.
fn stateless_headers(
    post: reqwest::RequestBuilder,
    version: &str,
    message: &Outbound,
) -> reqwest::RequestBuilder {
    let mut post = post.header("mcp-protocol-version", version);
    if let Some(method) = &message.method {
        post = post.header("mcp-method", header_value(method));
    }
    if let Some(name) = &message.name {
        post = post.header("mcp-name", header_value(name));
    }
    for (name, value) in &message.param_headers {
        if let Ok(name) = HeaderName::from_bytes(format!("mcp-param-{name}").as_bytes()) {
            post = post.header(name, header_value(value));
        }
    }
    post
}

/// The `Mcp-Param-*` headers of a `tools/call` (MCP 2026-07-28, Custom Headers): for each
/// property `schema` marks with `x-mcp-header` (reached through `properties` alone, as
/// the guard checked), the argument at that path, as text; absent and null values, and
/// anything but a string, a safe integer or a boolean, give no header.
pub(crate) fn param_headers(schema: &Value, arguments: &Value) -> Vec<(String, String)> {
    const SAFE: i64 = (1 << 53) - 1;
    let mut out = Vec::new();
    let mut stack = vec![(schema, arguments)];
    while let Some((schema, args)) = stack.pop() {
        let Some(props) = schema.get("properties").and_then(Value::as_object) else {
            continue;
        };
        for (key, prop) in props {
            let value = args.get(key);
            if let Some(header) = prop.get("x-mcp-header").and_then(Value::as_str) {
                let text = match value {
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(Value::Bool(b)) => Some(b.to_string()),
                    Some(Value::Number(n)) => n
                        .as_i64()
                        .filter(|i| (-SAFE..=SAFE).contains(i))
                        .map(|i| i.to_string()),
                    _ => None,
                };
                if let Some(text) = text {
                    out.push((header.to_owned(), text));
                }
            }
            if let Some(v) = value.filter(|v| v.is_object()) {
                stack.push((prop, v));
            }
        }
    }
    out
}

/// A value as an HTTP header: as is when it is visible ASCII (and spaces inside),
/// else `=?base64?…?=` (MCP 2026-07-28, Streamable HTTP, Value Encoding).
fn header_value(value: &str) -> HeaderValue {
    use base64::Engine as _;
    let sentinel = value.starts_with("=?base64?") && value.ends_with("?=");
    let plain = !value.is_empty()
        && value.bytes().all(|b| b == b' ' || b.is_ascii_graphic())
        && !value.starts_with(' ')
        && !value.ends_with(' ')
        && !sentinel;
    let text = if plain {
        value.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        )
    };
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn check_status(response: &reqwest::Response) -> Result<(), Reply> {
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let challenge = || {
        Challenge::parse(
            response
                .headers()
                .get_all("www-authenticate")
                .iter()
                .filter_map(|v| v.to_str().ok()),
        )
    };
    match status.as_u16() {
        401 => Err(Reply::NeedsLogin(challenge())),
        403 => match challenge() {
            Some(c) if c.insufficient_scope() => Err(Reply::NeedsLogin(Some(c))),
            _ => Err(Reply::Status {
                status: 403,
                reason: "it refused the request (HTTP 403 Forbidden)".into(),
            }),
        },
        s if status.is_redirection() => {
            let to = response
                .headers()
                .get("location")
                .and_then(|l| l.to_str().ok())
                .unwrap_or("(nowhere)");
            Err(Reply::Status {
                status: s,
                reason: format!(
                    "it redirected (HTTP {s}) to {}; edgar follows redirects only within the server's origin",
                    shown(to)
                ),
            })
        }
        s => Err(Reply::Status {
            status: s,
            reason: format!(
                "HTTP {s} {}",
                status.canonical_reason().unwrap_or("(unknown status)")
            ),
        }),
    }
}

/// A connection failure, without the URL (it may carry a secret query).
pub(crate) fn connect_error(e: &reqwest::Error) -> String {
    format!("cannot reach it: {}", crate::net::request_error(e))
}

#[cfg(test)]
mod tests {
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
