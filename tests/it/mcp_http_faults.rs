//! Misbehaving Streamable HTTP servers, for faults no real server can be made to show:
//! a small HTTP/1.1 server on loopback answers each request as the test says. Every
//! fault must end in a clear `McpError` within its deadline.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use edgar_host::mcp::McpError;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::mcp_http_real::http_spec;
use crate::mcp_stdio::{Harness, text_of};

/// One request as the fake server saw it.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
    /// The body as text (forms).
    pub raw: String,
}

impl Req {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    /// A form or query parameter, percent-decoded.
    pub fn param(&self, name: &str) -> Option<String> {
        let query = self.path.split_once('?').map(|(_, q)| q).unwrap_or("");
        [self.raw.as_str(), query]
            .iter()
            .flat_map(|s| form_urlencoded::parse(s.as_bytes()))
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    }
    pub fn rpc(&self) -> &str {
        self.body["method"].as_str().unwrap_or("")
    }
    pub fn id(&self) -> Value {
        self.body["id"].clone()
    }
}

/// How the fake server answers.
pub enum Resp {
    Json(u16, Vec<(&'static str, String)>, Value),
    Accepted,
    Status(u16, Vec<(&'static str, String)>),
    /// An event stream: these bytes, then `after`.
    Sse(String, After),
    /// A body of this content type that never stops (until the client hangs up).
    Endless(&'static str, String),
    /// No answer at all, not even headers.
    Hang,
    /// After this long, the answer the function then gives (and whatever it does).
    Later(Duration, Box<dyn FnOnce() -> Resp + Send>),
}

pub enum After {
    Close,
    Hang,
    /// A comment every 20 ms, for ever.
    Ping,
}

type Handler = dyn Fn(&Req) -> Resp + Send + Sync;

/// A loopback server running `handler`; its URL is `http://127.0.0.1:PORT/mcp`.
pub struct FakeHttp {
    pub url: String,
    pub requests: Arc<Mutex<Vec<Req>>>,
}

impl FakeHttp {
    pub async fn start(handler: impl Fn(&Req) -> Resp + Send + Sync + 'static) -> FakeHttp {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let requests = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let seen = requests.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (h, seen) = (handler.clone(), seen.clone());
                tokio::spawn(async move { serve(socket, h, seen).await });
            }
        });
        FakeHttp {
            url: format!("http://127.0.0.1:{port}/mcp"),
            requests,
        }
    }

    pub fn count(&self, rpc: &str) -> usize {
        self.requests
            .lock()
            .map(|r| r.iter().filter(|q| q.rpc() == rpc).count())
            .unwrap_or(0)
    }
}

async fn serve(mut socket: TcpStream, handler: Arc<Handler>, seen: Arc<Mutex<Vec<Req>>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.lines();
    let mut first = lines.next().unwrap_or("").split(' ');
    let method = first.next().unwrap_or("").to_owned();
    let path = first.next().unwrap_or("").to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    let req = Req {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        raw: String::from_utf8_lossy(&body).into_owned(),
    };
    if let Ok(mut s) = seen.lock() {
        s.push(req.clone());
    }
    let head = |status: u16, extra: &[(&str, String)]| {
        let mut h = format!("HTTP/1.1 {status} X\r\nconnection: close\r\n");
        for (k, v) in extra {
            h.push_str(&format!("{k}: {v}\r\n"));
        }
        h
    };
    let mut resp = handler(&req);
    while let Resp::Later(wait, then) = resp {
        tokio::time::sleep(wait).await;
        resp = then();
    }
    let out = match resp {
        Resp::Json(status, extra, v) => {
            let body = v.to_string();
            let mut h = head(status, &extra);
            h.push_str(&format!(
                "content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            ));
            h
        }
        Resp::Accepted => format!("{}content-length: 0\r\n\r\n", head(202, &[])),
        Resp::Status(status, extra) => format!("{}content-length: 0\r\n\r\n", head(status, &extra)),
        Resp::Sse(events, after) => {
            let h = format!("{}content-type: text/event-stream\r\n\r\n", head(200, &[]));
            if socket.write_all(h.as_bytes()).await.is_err()
                || socket.write_all(events.as_bytes()).await.is_err()
            {
                return;
            }
            match after {
                After::Close => {}
                After::Hang => tokio::time::sleep(Duration::from_secs(3600)).await,
                After::Ping => loop {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    if socket.write_all(b": ping\n\n").await.is_err() {
                        return;
                    }
                },
            }
            return;
        }
        Resp::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            return;
        }
        Resp::Later(..) => return,
        Resp::Endless(kind, prefix) => {
            let h = format!("{}content-type: {kind}\r\n\r\n{prefix}", head(200, &[]));
            if socket.write_all(h.as_bytes()).await.is_err() {
                return;
            }
            let block = vec![b'a'; 1 << 16];
            // About 1 GB unless the client hangs up first.
            for _ in 0..(1usize << 14) {
                if socket.write_all(&block).await.is_err() {
                    return;
                }
            }
            return;
        }
    };
    let _ = socket.write_all(out.as_bytes()).await;
    let _ = socket.shutdown().await;
}

/// A well-behaved server's answers; `None` for what the test decides itself.
pub fn good(req: &Req) -> Option<Resp> {
    if req.method == "GET" {
        return Some(Resp::Status(405, vec![]));
    }
    if req.method == "DELETE" {
        return Some(Resp::Status(200, vec![]));
    }
    let result = match req.rpc() {
        "initialize" => json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "fake-http", "version": "1"}}),
        "tools/list" => json!({"tools": [{"name": "echo", "description": "Echo text.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}),
        "tools/call" => json!({"content": [{"type": "text", "text": "fine"}]}),
        m if m.starts_with("notifications/") => return Some(Resp::Accepted),
        _ => return None,
    };
    Some(Resp::Json(
        200,
        vec![],
        json!({"jsonrpc": "2.0", "id": req.id(), "result": result}),
    ))
}

/// Start-up is not what these tests time: a loaded machine (a debug build's first guard
/// compile among a hundred tests) gets a generous limit.
const STARTUP: Duration = Duration::from_secs(30);

fn harness(url: &str) -> Harness {
    let mut spec = http_spec("fake", url, false);
    spec.startup_timeout = STARTUP;
    spec.tool_timeout = Duration::from_secs(1);
    Harness::new(vec![spec])
}

/// Runs `fake__echo` against a server whose `tools/call` answers `call`.
async fn call_with(
    call: impl Fn(&Req) -> Resp + Send + Sync + 'static,
) -> (Result<String, McpError>, Duration) {
    let server = FakeHttp::start(move |req| match req.rpc() {
        "tools/call" => call(req),
        _ => good(req).unwrap_or(Resp::Status(400, vec![])),
    })
    .await;
    let h = harness(&server.url);
    let t = Instant::now();
    let r = h
        .session
        .call("fake__echo", json!({"text": "x"}))
        .await
        .map(|o| text_of(&o));
    let took = t.elapsed();
    h.close().await;
    (r, took)
}

fn error_text(r: Result<String, McpError>) -> (McpError, String) {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => {
            let text = e.to_string();
            (e, text)
        }
    }
}

#[tokio::test]
async fn a_good_fake_works() {
    let (r, _) = call_with(|req| good(req).unwrap_or(Resp::Accepted)).await;
    assert_eq!(r.unwrap_or_else(|e| panic!("{e}")), "fine");
}

/// POSTs race: a request sent beside `notifications/initialized` can reach the server
/// first. A server that registers tools when the handshake ends (server-everything's
/// roots and elicitation tools) then lists without them, and the Python SDK refuses the
/// request. Here the notification takes a second to be answered, and a tool appears
/// when it has been. (Another server is discovered first: `tools/list` also waits for
/// the guard, whose first load could take longer than the delay.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_posted_before_the_handshake_ends() {
    let first = FakeHttp::start(|req| good(req).unwrap_or(Resp::Status(400, vec![]))).await;
    let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = ready.clone();
    let server = FakeHttp::start(move |req| match req.rpc() {
        "notifications/initialized" => {
            let flag = flag.clone();
            Resp::Later(
                Duration::from_secs(1),
                Box::new(move || {
                    flag.store(true, Ordering::SeqCst);
                    Resp::Accepted
                }),
            )
        }
        "tools/list" if ready.load(Ordering::SeqCst) => Resp::Json(
            200,
            vec![],
            json!({"jsonrpc": "2.0", "id": req.id(), "result": {"tools": [
                {"name": "echo", "inputSchema": {"type": "object"}},
                {"name": "late", "inputSchema": {"type": "object"}}]}}),
        ),
        _ => good(req).unwrap_or(Resp::Status(400, vec![])),
    })
    .await;
    let mut specs = Vec::new();
    for (name, url) in [("first", &first.url), ("fake", &server.url)] {
        let mut spec = http_spec(name, url, false);
        spec.startup_timeout = STARTUP;
        specs.push(spec);
    }
    let h = Harness::new(specs);
    let warm = h.session.tools("first").await;
    assert!(warm.is_ok_and(|t| t.len() == 1));
    let tools = h
        .session
        .tools("fake")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    assert_eq!(names, ["fake__echo", "fake__late"]);
    h.close().await;
}

#[tokio::test]
async fn malformed_events_end_in_a_clear_error() {
    let (r, _) = call_with(|_| {
        Resp::Sse(
            "data: {not json\n\nevent\ndata: [1,\n\n".into(),
            After::Close,
        )
    })
    .await;
    let (e, text) = error_text(r);
    assert!(matches!(e, McpError::Exchange { .. }), "{e:?}");
    assert!(text.contains("ended before the answer"), "{text}");
    assert!(text.contains("2 of its events were not JSON"), "{text}");
}

#[tokio::test]
async fn a_silent_stream_hits_the_deadline() {
    let (r, took) = call_with(|_| Resp::Sse(String::new(), After::Hang)).await;
    let (e, _) = error_text(r);
    assert!(matches!(e, McpError::Timeout { .. }), "{e:?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[tokio::test]
async fn a_stream_that_never_ends_hits_the_deadline() {
    let (r, took) = call_with(|_| Resp::Sse(": hello\n\n".into(), After::Ping)).await;
    let (e, _) = error_text(r);
    assert!(matches!(e, McpError::Timeout { .. }), "{e:?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[tokio::test]
async fn server_errors_are_named() {
    let (r, _) = call_with(|_| Resp::Status(500, vec![])).await;
    let (e, text) = error_text(r);
    assert!(matches!(e, McpError::Exchange { .. }), "{e:?}");
    assert!(text.contains("HTTP 500 Internal Server Error"), "{text}");
}

#[tokio::test]
async fn a_gigabyte_body_is_refused() {
    let prefix = r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":""#;
    let (r, _) = call_with(move |_| Resp::Endless("application/json", prefix.into())).await;
    let (_, text) = error_text(r);
    assert!(text.contains("larger than 16777216 bytes"), "{text}");
    let (r, _) = call_with(|_| Resp::Endless("text/event-stream", "data: ".into())).await;
    let (_, text) = error_text(r);
    assert!(text.contains("exceeds 16777216 bytes"), "{text}");
}

#[tokio::test]
async fn redirects_to_another_origin_are_not_followed() {
    let elsewhere = FakeHttp::start(|req| good(req).unwrap_or(Resp::Accepted)).await;
    let target = elsewhere.url.replace("127.0.0.1", "localhost");
    let (r, _) = call_with(move |_| Resp::Status(307, vec![("location", target.clone())])).await;
    let (_, text) = error_text(r);
    assert!(text.contains("redirected (HTTP 307)"), "{text}");
    assert_eq!(elsewhere.count("tools/call"), 0);
}

#[tokio::test]
async fn redirects_within_the_origin_are_followed() {
    let server = FakeHttp::start(|req| {
        if req.path == "/old" {
            return Resp::Status(308, vec![("location", "/mcp".into())]);
        }
        good(req).unwrap_or(Resp::Accepted)
    })
    .await;
    let h = harness(&server.url.replace("/mcp", "/old"));
    let out = h
        .session
        .call("fake__echo", json!({"text": "x"}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text_of(&out), "fine");
    h.close().await;
}

#[tokio::test]
async fn the_wrong_content_type_is_named() {
    let (r, _) = call_with(|_| Resp::Endless("text/html", "<html>".into())).await;
    let (_, text) = error_text(r);
    assert!(text.contains("content type 'text/html'"), "{text}");
}

/// A stateful server whose sessions are forgotten after `lifetime` calls.
async fn expiring(lifetime: usize) -> FakeHttp {
    let sessions = Arc::new(AtomicUsize::new(0));
    let calls = Arc::new(AtomicUsize::new(0));
    FakeHttp::start(move |req| {
        let current = format!("s{}", sessions.load(Ordering::SeqCst));
        if req.rpc() == "initialize" {
            let id = sessions.fetch_add(1, Ordering::SeqCst) + 1;
            calls.store(0, Ordering::SeqCst);
            let mut r = good(req).unwrap_or(Resp::Accepted);
            if let Resp::Json(_, h, _) = &mut r {
                h.push(("mcp-session-id", format!("s{id}")));
            }
            return r;
        }
        if req.method == "POST" && req.header("mcp-session-id") != Some(current.as_str()) {
            return Resp::Status(404, vec![]);
        }
        if req.rpc() == "tools/call" && calls.fetch_add(1, Ordering::SeqCst) >= lifetime {
            return Resp::Status(404, vec![]);
        }
        good(req).unwrap_or(Resp::Accepted)
    })
    .await
}

#[tokio::test]
async fn an_expired_session_is_initialized_again_once() {
    let server = expiring(1).await;
    let h = harness(&server.url);
    for _ in 0..3 {
        let out = h
            .session
            .call("fake__echo", json!({"text": "x"}))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(text_of(&out), "fine");
    }
    // One session per call after the first: each expires after one call.
    assert_eq!(server.count("initialize"), 3);
    let sessions: Vec<String> = server
        .requests
        .lock()
        .map(|r| {
            r.iter()
                .filter(|q| q.rpc() == "tools/call")
                .filter_map(|q| q.header("mcp-session-id").map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(sessions, ["s1", "s1", "s2", "s2", "s3"]);
    h.close().await;
}

#[tokio::test]
async fn config_headers_go_out_and_close_deletes_the_session() {
    let server = expiring(100).await;
    let mut spec = http_spec("fake", &server.url, false);
    if let edgar_host::config::Transport::Http { headers, .. } = &mut spec.transport {
        headers.insert("X-Api-Key".into(), "k-123".into());
    }
    let h = Harness::new(vec![spec]);
    h.session
        .call("fake__echo", json!({"text": "x"}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    h.close().await;
    let requests = server
        .requests
        .lock()
        .map(|r| r.clone())
        .unwrap_or_default();
    assert!(
        requests
            .iter()
            .all(|r| r.header("x-api-key") == Some("k-123"))
    );
    // The era probe came first, as a stateless request: no session, its own version.
    let probe = &requests[0];
    assert_eq!(probe.rpc(), "server/discover");
    assert_eq!(probe.header("mcp-method"), Some("server/discover"));
    assert_eq!(probe.header("mcp-protocol-version"), Some("2026-07-28"));
    assert_eq!(probe.header("mcp-session-id"), None);
    assert_eq!(
        probe.body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    // After initialization every request names the session and the negotiated version.
    for r in requests
        .iter()
        .filter(|r| !matches!(r.rpc(), "initialize" | "server/discover"))
    {
        assert_eq!(r.header("mcp-session-id"), Some("s1"), "{r:?}");
        assert_eq!(
            r.header("mcp-protocol-version"),
            Some("2025-11-25"),
            "{r:?}"
        );
    }
    let deletes: Vec<_> = requests.iter().filter(|r| r.method == "DELETE").collect();
    assert_eq!(deletes.len(), 1);
    assert_eq!(deletes[0].header("mcp-session-id"), Some("s1"));
}

#[tokio::test]
async fn a_session_that_keeps_expiring_is_an_error() {
    let server = expiring(0).await;
    let h = harness(&server.url);
    let e = h
        .session
        .call("fake__echo", json!({"text": "x"}))
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("forgot the session again"), "{e}");
    h.close().await;
}

#[tokio::test]
async fn a_401_means_needs_login_with_the_challenge() {
    let server = FakeHttp::start(|_| {
        Resp::Status(
            401,
            vec![(
                "www-authenticate",
                r#"Bearer error="invalid_token", scope="files:read", resource_metadata="http://127.0.0.1:1/.well-known/oauth-protected-resource/mcp""#.into(),
            )],
        )
    })
    .await;
    let h = harness(&server.url);
    let e = h.session.tools("fake").await.err();
    match &e {
        Some(McpError::NeedsLogin { server, challenge }) => {
            assert_eq!(server, "fake");
            let c = challenge.clone().unwrap_or_default();
            assert_eq!(c.scope.as_deref(), Some("files:read"));
            assert!(c.resource_metadata.is_some_and(|u| u.ends_with("/mcp")));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        e.map(|e| e.to_string())
            .unwrap_or_default()
            .contains("run `edgar mcp login fake`")
    );
    let status = h.session.status();
    assert_eq!(
        status[0].state,
        edgar_host::mcp::client::ServerState::Failed {
            reason: "needs login: run `edgar mcp login fake`".into(),
            retry_at: None,
        }
    );
    h.close().await;
}

fn legacy_harness(url: &str) -> Harness {
    legacy_harness_within(url, STARTUP)
}

fn legacy_harness_within(url: &str, startup: Duration) -> Harness {
    let mut spec = http_spec("fake", url, true);
    spec.startup_timeout = startup;
    Harness::new(vec![spec])
}

#[tokio::test]
async fn a_legacy_server_that_wants_a_login_says_so() {
    let server = FakeHttp::start(|_| {
        Resp::Status(
            401,
            vec![("www-authenticate", r#"Bearer scope="a b""#.into())],
        )
    })
    .await;
    let h = legacy_harness(&server.url);
    let e = h.session.tools("fake").await.err();
    match e {
        Some(McpError::NeedsLogin { challenge, .. }) => {
            assert_eq!(challenge.and_then(|c| c.scope).as_deref(), Some("a b"));
        }
        other => panic!("{other:?}"),
    }
    h.close().await;
}

#[tokio::test]
async fn a_legacy_endpoint_on_another_origin_is_refused() {
    let server = FakeHttp::start(|_| {
        Resp::Sse(
            "event: endpoint\ndata: http://127.0.0.2:1/messages\n\n".into(),
            After::Hang,
        )
    })
    .await;
    let h = legacy_harness(&server.url);
    let e = h
        .session
        .tools("fake")
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("is on another origin"), "{e}");
    assert_eq!(server.count("initialize"), 0);
    h.close().await;
}

#[tokio::test]
async fn a_legacy_stream_without_an_endpoint_hits_the_deadline() {
    let server = FakeHttp::start(|_| Resp::Sse(": nothing yet\n\n".into(), After::Ping)).await;
    let h = legacy_harness_within(&server.url, Duration::from_secs(3));
    let t = Instant::now();
    let e = h.session.tools("fake").await.err();
    assert!(
        matches!(
            e,
            Some(McpError::Start { .. }) | Some(McpError::Timeout { .. })
        ),
        "{e:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(10));
    h.close().await;
}

#[tokio::test]
async fn close_does_not_wait_long_for_a_hung_delete() {
    let server = FakeHttp::start(|req| {
        if req.method == "DELETE" {
            return Resp::Hang;
        }
        let mut r = good(req).unwrap_or(Resp::Accepted);
        if let (Resp::Json(_, h, _), "initialize") = (&mut r, req.rpc()) {
            h.push(("mcp-session-id", "s1".into()));
        }
        r
    })
    .await;
    let h = harness(&server.url);
    h.session
        .call("fake__echo", json!({"text": "x"}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Harness::close asserts that closing took less than 5 s.
    h.close().await;
    assert_eq!(
        server
            .requests
            .lock()
            .map(|r| r.iter().filter(|q| q.method == "DELETE").count())
            .unwrap_or(0),
        1
    );
}
