//! `edgar mcp serve --http`: the gateway over Streamable HTTP on a loopback port, for
//! clients that reach MCP servers by URL. Every request carries the bearer secret
//! printed at start; `Host` and `Origin` must name the loopback address served, so a
//! web page cannot reach it through DNS rebinding. One JSON-RPC message per POST,
//! answered with JSON, or with an event stream when notifications (a grown tool list)
//! come with the answer. No session ids and no standalone GET stream: every client
//! shares the gateway's found tools, and a dropped connection cancels its call.

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

use super::Gateway;
use crate::mcp::protocol::{self, Incoming, MAX_MESSAGE_BYTES};

/// The one path served.
pub const PATH: &str = "/mcp";

/// Connections served at once; a local program opening more cannot exhaust the
/// gateway's file descriptors.
const MAX_CONNECTIONS: usize = 256;

/// Longest a connection may take to send a request's headers (idle keep-alive included).
const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Longest a new connection may stay silent before its first byte: a program that opens
/// connections and sends nothing holds a slot this long at most.
const FIRST_BYTE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

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
        let Some(given) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
        else {
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
    secret: Secret,
    /// `host:port` spellings of the address served, for the `Host` and `Origin` checks.
    authorities: Vec<String>,
}

/// Serves `gateway` on `listener` (bound to a loopback address) until the future is
/// dropped, which ends every connection and the calls they carry. A failed accept is
/// logged and retried, never the end of the gateway.
pub async fn serve(
    gateway: Arc<Gateway>,
    listener: TcpListener,
    secret: Secret,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    let front = Arc::new(Front {
        gateway,
        secret,
        authorities: authorities(addr),
    });
    let mut connections = JoinSet::new();
    let open = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        // At the cap, stop accepting: new clients wait in the kernel's backlog.
        let Ok(permit) = open.clone().acquire_owned().await else {
            return Ok(());
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // Out of descriptors, or a peer gone before we took it: the listener lives on.
            Err(e) => {
                tracing::warn!("cannot accept an HTTP connection: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        // Finished connections are reaped as new ones come, so the set stays small.
        while connections.try_join_next().is_some() {}
        let front = front.clone();
        connections.spawn(async move {
            let _permit = permit;
            let mut first = [0u8; 1];
            match tokio::time::timeout(FIRST_BYTE_TIMEOUT, stream.peek(&mut first)).await {
                Ok(Ok(n)) if n > 0 => {}
                // Silent, closed or broken before a byte: not a client.
                _ => return,
            }
            let service = hyper::service::service_fn(move |req| {
                let front = front.clone();
                async move { Ok::<_, std::convert::Infallible>(front.respond(req).await) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(io, service)
                .await
            {
                tracing::debug!("an HTTP connection ended: {e}");
            }
        });
    }
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
    async fn respond(&self, req: Request<Body>) -> Reply {
        if req.uri().path() != PATH {
            return status(StatusCode::NOT_FOUND, "edgar serves MCP at /mcp");
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
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        if !host.is_some_and(|h| self.authorities.iter().any(|a| a == h)) {
            return refused(StatusCode::FORBIDDEN, "the Host header is not this server");
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let allowed = origin
                .to_str()
                .ok()
                .and_then(|o| o.strip_prefix("http://"))
                .is_some_and(|o| self.authorities.iter().any(|a| a == o));
            if !allowed {
                return refused(
                    StatusCode::FORBIDDEN,
                    "requests from this origin are refused",
                );
            }
        }
        if !self.secret.admits(headers) {
            let mut r = refused(StatusCode::UNAUTHORIZED, "a bearer token is required");
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
        if req.method() != Method::POST {
            let mut r = status(
                StatusCode::METHOD_NOT_ALLOWED,
                "edgar answers POST only: no standalone event stream, no sessions",
            );
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
            return r;
        }
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
                let reply = protocol::error_response(&Value::Null, -32700, &reason);
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
        match messages.remove(0) {
            Incoming::Request { id, method, .. } if method == "subscriptions/listen" => {
                let reply = protocol::error_response(
                    &id,
                    protocol::METHOD_NOT_FOUND,
                    "subscriptions are served on stdio; over HTTP, list tools again after a tool_search",
                );
                with_body(StatusCode::OK, "application/json", reply)
            }
            Incoming::Request { id, method, params } => self.answer(id, method, params).await,
            Incoming::Refused { id, reason } => {
                let reply = protocol::error_response(&id, -32600, &reason);
                with_body(StatusCode::OK, "application/json", reply)
            }
            // Cancellation over HTTP is the client closing its connection.
            Incoming::Notification { .. } | Incoming::Response { .. } => {
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
    async fn answer(&self, id: Value, method: String, params: Value) -> Reply {
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(16);
        let gateway = self.gateway.clone();
        let mut answer = Box::pin(async move { gateway.answer(&id, &method, params, &tx).await });
        let first = tokio::select! {
            reply = &mut answer => {
                let mut notes = Vec::new();
                while let Ok(n) = rx.try_recv() {
                    notes.push(n);
                }
                if notes.is_empty() {
                    return with_body(StatusCode::OK, "application/json", reply);
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

type Reply = Response<BoxBody<Bytes, Infallible>>;

/// One JSON-RPC message as a server-sent event.
fn event(message: &[u8]) -> Bytes {
    let mut e = Vec::with_capacity(message.len() + 24);
    e.extend_from_slice(b"event: message\ndata: ");
    e.extend_from_slice(message);
    e.extend_from_slice(b"\n\n");
    Bytes::from(e)
}

/// A response body fed as events happen; it ends when the sender is dropped.
struct Streamed(mpsc::Receiver<Bytes>);

impl hyper::body::Body for Streamed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|c| Ok(hyper::body::Frame::data(c))))
    }
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
    fn only_the_served_address_is_a_valid_host() {
        let a = authorities("127.0.0.1:8737".parse().unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(a, ["127.0.0.1:8737", "localhost:8737"]);
        let a = authorities("[::1]:9".parse().unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(a, ["[::1]:9", "localhost:9"]);
    }
}
