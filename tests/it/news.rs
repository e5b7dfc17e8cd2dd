//! Servers' news through the gateway: a resource a client subscribed to changed, the
//! resource list changed. Edgar's example server (`test_touch_resource` says a resource
//! changed) behind `edgar mcp serve --transparent`: a handshake-era client on stdio
//! hears the updates of what it subscribed to and nothing after unsubscribing; a
//! stateless client's `subscriptions/listen` stream over HTTP hears what its filter
//! names, tagged with its subscription.

use std::io::BufReader;
use std::net::TcpStream;
use std::time::Duration;

use edgar_tests::{procs_with_tag, user_config};
use serde_json::{Value, json};

use crate::gateway::{Driver, HttpGateway, TOKEN, next_event, session_id};

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar-it");
const STATELESS: &str = env!("CARGO_BIN_EXE_fake-stateless-server");
const WATCHED: &str = "test://watched";

/// A user config with edgar's example server (its conformance tools), tagged `t`.
pub(crate) fn example(home: &std::path::Path, t: &str) {
    let root = home.to_string_lossy().into_owned();
    user_config(
        home,
        json!({"example": {"command": EDGAR,
            "args": ["mcp", "example-server", "--conformance", "--root", root],
            "env": {"EDGAR_TEST_TAG": t}}}),
    );
}

/// The notifications of `method` the driver has heard about `uri` (any, for `None`),
/// after pinging until `n` came or 5 s passed (news travels apart from answers). The
/// server sends an update before the list change it goes with, and news keeps its
/// order: once a list change is heard, an update not heard before it never came.
fn heard(d: &mut Driver, next: &mut u64, method: &str, uri: Option<&str>, n: usize) -> usize {
    let count = |d: &Driver| {
        d.notifications
            .iter()
            .filter(|n| n["method"] == method && uri.is_none_or(|u| n["params"]["uri"] == u))
            .count()
    };
    for _ in 0..50 {
        if count(d) >= n {
            break;
        }
        *next += 1;
        d.send(json!({"jsonrpc": "2.0", "id": *next, "method": "ping"}));
        d.answer(*next);
        std::thread::sleep(Duration::from_millis(100));
    }
    count(d)
}

/// The stateless era's `_meta` of a request.
fn modern() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": {}})
}

/// A `subscriptions/listen` stream over HTTP: request `id`, notifications `filter`.
fn listen(gw: &HttpGateway, id: u64, filter: Value) -> BufReader<TcpStream> {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
                      "params": {"notifications": filter, "_meta": modern()}});
    gw.stream(
        "accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: subscriptions/listen\r\n",
        &body,
    )
}

/// A listen stream (request 7) watching `uri`, once its acknowledgement listed it.
fn watcher(gw: &HttpGateway, uri: &str) -> BufReader<TcpStream> {
    let mut stream = listen(gw, 7, json!({"resourceSubscriptions": [uri]}));
    let ack = next_event(&mut stream).unwrap_or_default();
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!([uri]),
        "{ack}"
    );
    stream
}

#[test]
fn a_subscribed_resource_change_reaches_the_client_that_subscribed() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let t = format!("{}-news-stdio", std::process::id());
    example(home.path(), &t);
    let mut d = Driver::start(home.path(), &["--servers", "example", "--transparent"]);
    let mut next = 100;
    let touch = |d: &mut Driver, id: u64, uri: &str| {
        d.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "test_touch_resource", "arguments": {"uri": uri}}}));
        assert_eq!(d.answer(id)["result"]["isError"], false);
    };
    d.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe",
                  "params": {"uri": WATCHED}}),
    );
    assert!(d.answer(1).get("result").is_some());
    touch(&mut d, 2, WATCHED);
    let updated = "notifications/resources/updated";
    assert_eq!(heard(&mut d, &mut next, updated, Some(WATCHED), 1), 1);
    let listed = "notifications/resources/list_changed";
    assert_eq!(heard(&mut d, &mut next, listed, None, 1), 1);
    // Another URI: not subscribed, not told (the list change is, to everyone).
    touch(&mut d, 3, "test://other");
    assert_eq!(heard(&mut d, &mut next, listed, None, 2), 2);
    let told = |d: &Driver, uri: &str| {
        d.notifications
            .iter()
            .filter(|n| n["method"] == updated && n["params"]["uri"] == uri)
            .count()
    };
    assert_eq!(told(&d, "test://other"), 0);
    d.send(
        json!({"jsonrpc": "2.0", "id": 4, "method": "resources/unsubscribe",
                  "params": {"uri": WATCHED}}),
    );
    assert!(d.answer(4).get("result").is_some());
    touch(&mut d, 5, WATCHED);
    assert_eq!(heard(&mut d, &mut next, listed, None, 3), 3);
    assert_eq!(told(&d, WATCHED), 1, "unsubscribed: not told again");
    assert_eq!(d.finish(), Some(0));
    assert!(procs_with_tag(&t).is_empty());
}

#[test]
fn a_listen_stream_hears_the_resources_its_filter_names() {
    let args = ["--servers", "example", "--transparent"];
    listen_and_touch("news-listen", &args, WATCHED, "test_touch_resource");
}

/// With `--expose all` a served URI names its server: the subscription reaches that
/// server (which tells only of what it was asked to watch), the update comes back
/// under the served URI.
#[test]
fn with_every_server_exposed_a_served_uri_is_watched_at_its_server() {
    let args = ["--servers", "example", "--expose", "all"];
    let served = "edgar://example/test%3A%2F%2Fwatched";
    listen_and_touch("news-all", &args, served, "example__test_touch_resource");
}

/// Two listen streams over HTTP, one watching `uri`, one the resource list; `tool`
/// touches the resource behind it: each hears only what it asked for, tagged.
fn listen_and_touch(test: &str, args: &[&str], uri: &str, tool: &str) {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let t = format!("{}-{test}", std::process::id());
    example(home.path(), &t);
    let gw = HttpGateway::start(home.path(), args);
    let meta = modern();
    let next = next_event;
    let mut watching = watcher(&gw, uri);
    let mut listing = listen(&gw, 8, json!({"resourcesListChanged": true}));
    assert!(next(&mut listing).is_some(), "acknowledged");
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": {"uri": WATCHED}, "_meta": meta}});
    let auth = format!("Bearer {TOKEN}");
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", tool),
    ];
    let (status, _, body) = gw.exchange("POST", &headers, &call.to_string());
    assert_eq!(status, 200, "{body}");
    let told = next(&mut watching).unwrap_or_default();
    assert_eq!(told["method"], "notifications/resources/updated", "{told}");
    assert_eq!(told["params"]["uri"], uri);
    assert_eq!(
        told["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
    let listed = next(&mut listing).unwrap_or_default();
    assert_eq!(
        listed["method"], "notifications/resources/list_changed",
        "{listed}"
    );
    assert_eq!(
        listed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        8
    );
    assert_eq!(gw.stop(), Some(143));
    // Each stream heard only what it asked for, then the end.
    assert_eq!(next(&mut watching), None);
    assert_eq!(next(&mut listing), None);
    assert!(procs_with_tag(&t).is_empty());
}

/// A listen stream's acknowledgement means its upstream subscriptions are in place: a
/// stateless server that puts one in place half a second after it was asked (answering
/// other requests meanwhile) is touched right after the acknowledgement, and the update
/// still comes. When the stream ends, the server's stream is cancelled.
#[test]
fn a_listen_acknowledgement_waits_for_the_upstream_subscription() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let t = format!("{}-news-acked", std::process::id());
    let log = home.path().join("st.log");
    let env = json!({"EDGAR_TEST_TAG": t, "FAKE_ACK_DELAY_MS": "500",
                     "FAKE_LOG": log.to_string_lossy()});
    user_config(
        home.path(),
        json!({"st": {"command": STATELESS, "env": env}}),
    );
    let gw = HttpGateway::start(home.path(), &["--servers", "st", "--transparent"]);
    let meta = modern();
    let mut watching = watcher(&gw, "note://one");
    let touch = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "touch", "arguments": {"uri": "note://one"}, "_meta": meta}});
    let (code, _, body) = gw.post_in(None, touch);
    assert_eq!(code, 200, "{body}");
    let told = next_event(&mut watching).unwrap_or_default();
    assert_eq!(told["method"], "notifications/resources/updated", "{told}");
    assert_eq!(told["params"]["uri"], "note://one");
    assert_eq!(
        told["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
    // The client goes: the gateway's own stream to the server is cancelled.
    drop(watching);
    let cancelled =
        || std::fs::read_to_string(&log).is_ok_and(|l| l.contains("notifications/cancelled"));
    for _ in 0..100 {
        if cancelled() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(cancelled(), "the upstream listen stream was not cancelled");
    assert_eq!(gw.stop(), Some(143));
    assert!(procs_with_tag(&t).is_empty());
}

/// Two holders of one upstream subscription over HTTP: a listen stream watching a URI,
/// and a handshake-era session that subscribes to it and unsubscribes. The session's
/// unsubscribe is its own: the server keeps watching for the stream, which still
/// hears the update.
#[test]
fn one_clients_unsubscribe_does_not_end_anothers_updates() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let t = format!("{}-news-held", std::process::id());
    example(home.path(), &t);
    let gw = HttpGateway::start(home.path(), &["--servers", "example", "--transparent"]);
    let mut watching = watcher(&gw, WATCHED);
    let hello = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "clientInfo": {"name": "t", "version": "1"},
        "capabilities": {}}});
    let (code, head, body) = gw.post_in(None, hello);
    assert_eq!(code, 200, "{body}");
    let session = session_id(&head);
    for (id, method) in [(2, "resources/subscribe"), (3, "resources/unsubscribe")] {
        let m = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"uri": WATCHED}});
        let (code, _, body) = gw.post_in(Some(&session), m);
        assert_eq!(code, 200, "{body}");
        assert!(body.contains("\"result\""), "{method}: {body}");
    }
    let touch = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "test_touch_resource", "arguments": {"uri": WATCHED}}});
    let (code, _, body) = gw.post_in(Some(&session), touch);
    assert_eq!(code, 200, "{body}");
    let told = next_event(&mut watching).unwrap_or_default();
    assert_eq!(told["method"], "notifications/resources/updated", "{told}");
    assert_eq!(told["params"]["uri"], WATCHED);
    assert_eq!(gw.stop(), Some(143));
    assert!(procs_with_tag(&t).is_empty());
}
