//! Spans over OTLP: the gateway, told by the standard `OTEL_*` variables where a
//! collector listens, exports a server span for each request (in the trace the client
//! sent, or a new one) and a client span for each request it makes upstream, as
//! OpenTelemetry's MCP conventions name them; audit lines carry the same trace id; no
//! argument or token is ever exported; the client's `tracestate` travels with its trace. The collector is a recording HTTP server that
//! takes OTLP/JSON (`OTEL_EXPORTER_OTLP_PROTOCOL=http/json`).

use edgar_tests::{procs_with_tag, run};
use serde_json::{Value, json};

use crate::gateway::{HttpGateway, TOKEN};
use crate::mcp_http_faults::{FakeHttp, Resp};
use crate::news::example;

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar-it");
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";
/// The vendors' trace state the client sends with its trace.
const STATE: &str = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7";

/// One exported span, flattened: name, kind, ids, attributes, status code.
#[derive(Debug)]
struct Exported {
    name: String,
    kind: u64,
    trace: String,
    span: String,
    parent: String,
    /// The W3C `tracestate` it carries.
    state: String,
    attributes: Value,
    status: u64,
    service: String,
}

impl Exported {
    fn attribute(&self, key: &str) -> Option<&str> {
        let all = self.attributes.as_array()?;
        let kv = all.iter().find(|kv| kv["key"] == key)?;
        kv["value"]["stringValue"].as_str()
    }
}

/// Every span in the collector's OTLP/JSON requests.
fn spans(bodies: &[Value]) -> Vec<Exported> {
    let mut out = Vec::new();
    for body in bodies {
        for rs in body["resourceSpans"].as_array().into_iter().flatten() {
            let service = rs["resource"]["attributes"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|kv| kv["key"] == "service.name")
                .and_then(|kv| kv["value"]["stringValue"].as_str())
                .unwrap_or_default()
                .to_owned();
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                for s in ss["spans"].as_array().into_iter().flatten() {
                    let text = |k: &str| s[k].as_str().unwrap_or_default().to_owned();
                    out.push(Exported {
                        name: text("name"),
                        kind: s["kind"].as_u64().unwrap_or(0),
                        trace: text("traceId"),
                        span: text("spanId"),
                        parent: text("parentSpanId"),
                        state: text("traceState"),
                        attributes: s["attributes"].clone(),
                        status: s["status"]["code"].as_u64().unwrap_or(0),
                        service: service.clone(),
                    });
                }
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_exports_its_spans_and_the_upstreams_in_the_clients_trace() {
    let collector = FakeHttp::start(|_| Resp::Json(200, vec![], json!({}))).await;
    let endpoint = collector.url.trim_end_matches("/mcp").to_owned();
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let t = format!("{}-traces", std::process::id());
    example(home.path(), &t);
    let secret = "secret-argument-7d1c";
    let home_path = home.path().to_owned();
    let env_endpoint = endpoint.clone();
    let audit = tokio::task::spawn_blocking(move || {
        let env = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", env_endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ];
        let args = ["--servers", "example", "--transparent"];
        let gw = HttpGateway::start_with(&home_path, &args, &env);
        let auth = format!("Bearer {TOKEN}");
        let call = |id: u64, tool: &str, traceparent: Option<&str>| {
            let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                              "params": {"name": tool, "arguments": {"name": secret}}});
            let mut headers = vec![
                ("authorization", auth.as_str()),
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
            ];
            headers.extend(traceparent.map(|t| ("traceparent", t)));
            headers.extend(traceparent.map(|_| ("tracestate", STATE)));
            let (status, _, answer) = gw.exchange("POST", &headers, &body.to_string());
            assert_eq!(status, 200, "{answer}");
            answer
        };
        let traced = format!("00-{TRACE}-{PARENT}-01");
        assert!(call(1, "greet", Some(&traced)).contains(secret));
        assert!(call(2, "greet", None).contains(secret));
        let refused = call(3, "no_such_tool", None);
        assert!(refused.contains(r#""isError":true"#), "{refused}");
        // SIGTERM: the spans not yet sent go before the gateway does.
        assert_eq!(gw.stop(), Some(143));
        run(
            EDGAR,
            &home_path,
            &["audit", "tail", "-n", "50", "--json"],
            b"",
        )
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(procs_with_tag(&t).is_empty());

    let requests = collector
        .requests
        .lock()
        .map(|r| r.clone())
        .unwrap_or_default();
    assert!(
        requests
            .iter()
            .all(|r| r.method == "POST" && r.path == "/v1/traces"),
        "{requests:?}"
    );
    for r in &requests {
        assert!(
            !r.raw.contains(secret),
            "an argument was exported: {}",
            r.raw
        );
        assert!(!r.raw.contains(TOKEN), "the token was exported: {}", r.raw);
    }
    let bodies: Vec<Value> = requests.iter().map(|r| r.body.clone()).collect();
    let all = spans(&bodies);
    assert!(all.iter().all(|s| s.service == "edgar"), "{all:#?}");
    let server: Vec<&Exported> = all
        .iter()
        .filter(|s| s.kind == 2 && s.name == "tools/call greet")
        .collect();
    assert_eq!(server.len(), 2, "{all:#?}");

    // The client's trace: the gateway's span is its child, the upstream's call the
    // gateway span's.
    let joined = server
        .iter()
        .find(|s| s.trace == TRACE)
        .unwrap_or_else(|| panic!("no span in the client's trace: {all:#?}"));
    assert_eq!(joined.parent, PARENT);
    assert_eq!(joined.attribute("mcp.method.name"), Some("tools/call"));
    assert_eq!(joined.attribute("gen_ai.tool.name"), Some("greet"));
    assert_eq!(joined.status, 0, "unset: it succeeded");
    let upstream = all
        .iter()
        .find(|s| s.kind == 3 && s.trace == TRACE && s.name == "tools/call greet")
        .unwrap_or_else(|| panic!("no upstream span: {all:#?}"));
    assert_eq!(upstream.parent, joined.span);
    assert_eq!(upstream.attribute("edgar.server.name"), Some("example"));
    // The vendors' state travels with the trace, to the upstream too.
    assert_eq!(
        (joined.state.as_str(), upstream.state.as_str()),
        (STATE, STATE)
    );

    // A request that came with no trace starts one, which its audit line names.
    let fresh = server
        .iter()
        .find(|s| s.trace != TRACE)
        .unwrap_or_else(|| panic!("no span of a new trace: {all:#?}"));
    assert_eq!(fresh.parent, "", "a root span");
    assert!(
        all.iter()
            .any(|s| s.kind == 3 && s.trace == fresh.trace && s.parent == fresh.span),
        "{all:#?}"
    );
    let calls: Vec<Value> = audit
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "call" && e["tool"] == "greet")
        .collect();
    let traces: Vec<&str> = calls
        .iter()
        .filter_map(|c| c["trace_id"].as_str())
        .collect();
    assert_eq!(traces, [TRACE, fresh.trace.as_str()], "{}", audit.stdout);

    // A failed call's span says it failed, and how.
    let failed = all
        .iter()
        .find(|s| s.kind == 2 && s.name == "tools/call no_such_tool")
        .unwrap_or_else(|| panic!("no span of the refused call: {all:#?}"));
    assert_eq!(failed.status, 2, "{failed:?}");
    assert_eq!(
        failed.attribute("error.type"),
        Some("tool_error"),
        "{failed:?}"
    );
}
