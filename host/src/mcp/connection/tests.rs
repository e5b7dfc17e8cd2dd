//! The connection's own checks: stamps, what is passed on, listen streams' acknowledgements.

use super::dispatch::{file_uri, progress_update};
use super::*;

#[test]
fn a_stamp_is_spliced_into_params_or_merged_with_their_own_meta() {
    let stamp = Stamp::new(
        "2026-07-28",
        json!({"elicitation": {}}),
        json!({"name": "e"}),
    );
    let sent = |params: Value| -> Value {
        let out = Outbound::request(7, "tools/call", params, Some(&stamp));
        serde_json::from_slice(&out.bytes).unwrap_or_else(|e| panic!("{e}"))
    };
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "e"},
    });
    let head = |params: Value| json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
    assert_eq!(sent(json!({})), head(json!({"_meta": meta})));
    assert_eq!(sent(Value::Null), head(json!({"_meta": meta})));
    assert_eq!(
        sent(json!({"name": "t", "arguments": {"q": "\"}"}})),
        head(json!({"_meta": meta, "name": "t", "arguments": {"q": "\"}"}}))
    );
    let mut merged = meta.clone();
    merged["progressToken"] = json!(1);
    assert_eq!(
        sent(json!({"name": "t", "_meta": {"progressToken": 1}})),
        head(json!({"_meta": merged, "name": "t"}))
    );
}

#[test]
fn log_messages_are_passed_on_checked_and_bounded() {
    use super::dispatch::log_message;
    assert_eq!(log_message(&json!({"level": "loud", "data": "x"})), None);
    assert_eq!(log_message(&json!({"level": "info"})), None);
    let m = log_message(&json!({"level": "info", "logger": "l", "data": "a\u{1b}[2Jb"}));
    let text = m
        .as_ref()
        .map(|m| m["data"].to_string())
        .unwrap_or_default();
    assert!(!text.contains('\u{1b}'), "{text}");
    let big = log_message(&json!({"level": "error", "data": {"x": "y".repeat(10_000)}}));
    assert!(big.is_some_and(|m| m["data"].as_str().is_some_and(|d| d.contains("left out"))));
    let small = log_message(&json!({"level": "debug", "data": {"n": 1}}));
    assert_eq!(small, Some(json!({"level": "debug", "data": {"n": 1}})));
}

#[test]
fn progress_is_passed_on_as_numbers_and_a_safe_message() {
    assert_eq!(progress_update(&json!({"progressToken": 1})), None);
    assert_eq!(progress_update(&json!({"progress": "1"})), None);
    let u = progress_update(&json!({"progressToken": 1, "progress": 2, "total": "x", "extra": 1}));
    assert_eq!(u, Some(json!({"progress": 2})));
    let long = format!("\u{1b}[2J{}", "é".repeat(1000));
    let u =
        progress_update(&json!({"progress": 0.5, "total": 1, "message": long})).unwrap_or_default();
    assert_eq!(u["total"], 1);
    let m = u["message"].as_str().unwrap_or_default();
    assert!(!m.contains('\u{1b}') && m.len() <= 303, "{m}");
}

#[test]
fn outbound_messages_carry_their_routing() {
    let r = Outbound::request(4, "tools/call", json!({}), None);
    assert_eq!((r.request, r.is("tools/call")), (Some(4), true));
    let c = Outbound::notification("notifications/cancelled", json!({"requestId": 9}), None);
    assert_eq!((c.request, c.cancels), (None, Some(9)));
    let reply = Outbound::reply(protocol::response(&json!(3), json!({})));
    assert_eq!((reply.request, reply.method), (None, None));
}

/// A listen stream is told of its own acknowledgement only, and one that ends
/// unacknowledged says so (its waiter dropped), with no waiter left behind.
#[test]
fn a_listen_stream_hears_its_own_acknowledgement() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(async {
        let (out_tx, mut out_rx) = mpsc::channel(8);
        let (ev_tx, ev_rx) = mpsc::channel(8);
        let link = Link {
            outgoing: out_tx,
            events: ev_rx,
        };
        let ctx = Context {
            roots: Vec::new(),
            handler: Arc::new(NoHandler),
            news: None,
        };
        let conn = Connection::start("s", link, ctx);
        let ack = |id: Value| {
            Event::Message(vec![Incoming::Notification {
                method: "notifications/subscriptions/acknowledged".into(),
                params: json!({"_meta": {(protocol::META_SUBSCRIPTION_ID): id}}),
            }])
        };
        for answered in [false, true] {
            let (tx, mut acked) = oneshot::channel();
            let c = conn.clone();
            let stream =
                tokio::spawn(async move { c.listen(json!({}), Duration::from_secs(30), tx).await });
            let sent = out_rx.recv().await.and_then(|o| o.request);
            let Some(id) = sent else {
                panic!("no listen request went out");
            };
            // Another stream's acknowledgement, and one naming nothing, are not it.
            for other in [json!(id + 100), json!("x"), Value::Null] {
                let _ = ev_tx.send(ack(other)).await;
            }
            tokio::task::yield_now().await;
            assert!(acked.try_recv().is_err(), "not acknowledged yet");
            if answered {
                // The stream ends (answered) with no acknowledgement.
                let raw = RawValue::from_string("{}".into()).unwrap_or_else(|e| panic!("{e}"));
                let end = Incoming::Response {
                    id: Some(id),
                    outcome: Ok(raw),
                };
                let _ = ev_tx.send(Event::Message(vec![end])).await;
                assert!(acked.await.is_err(), "ended unacknowledged");
                assert!(stream.await.is_ok_and(|r| r.is_ok()));
            } else {
                let _ = ev_tx.send(ack(json!(id))).await;
                assert!(acked.await.is_ok(), "acknowledged");
                // Dropped unanswered (an unsubscribe): cancelled at the server.
                stream.abort();
                let cancel = out_rx.recv().await.map(|o| o.cancels);
                assert_eq!(cancel, Some(Some(id)));
            }
        }
        assert!(lock(&conn.shared.acks).is_empty(), "no waiter is kept");
        assert!(lock(&conn.shared.pending).is_empty(), "no request is kept");
    });
}

#[test]
fn file_uris_are_encoded() {
    assert_eq!(
        file_uri(std::path::Path::new("/home/a b/c#d")),
        "file:///home/a%20b/c%23d"
    );
}
