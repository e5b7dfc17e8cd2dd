//! Streamable HTTP round trips against `@modelcontextprotocol/server-everything`
//! (tool `echo`): edgar's session (argument validation, the call, the result through
//! the wasm guard) next to a client built on `rmcp`, the official Rust SDK, on the same
//! server. Then the event-stream parser's throughput. Prints Markdown tables.
//!
//! Needs the npm servers `.ci/test` installs (`EDGAR_TEST_DEPS`, default
//! `target/test-deps`). Run with `cargo bench -p edgar-host --bench http`.

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgar_host::config::{Config, ServerSpec};
use edgar_host::mcp::client::{Session, SessionOptions};
use edgar_host::mcp::http::event_stream::EventStream;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::json;

const SEQUENTIAL: usize = 1000;
const TASKS: usize = 8;
const PER_TASK: usize = 250;

fn main() {
    parser_throughput();
    let deps = std::env::var_os("EDGAR_TEST_DEPS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/test-deps"))
        });
    let server = deps.join("npm/node_modules/.bin/mcp-server-everything");
    if !server.exists() {
        eprintln!(
            "{} is missing: run .ci/test once to install it",
            server.display()
        );
        std::process::exit(1);
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut child = Command::new(&server)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    while TcpStream::connect(addr).is_err() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("http://127.0.0.1:{port}/mcp");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(round_trips(&url));
    let _ = child.kill();
    let _ = child.wait();
}

async fn round_trips(url: &str) {
    let config = Config {
        servers: vec![ServerSpec::http("bench", url)],
        ..Config::default()
    };
    let dir = std::env::temp_dir();
    let session = Arc::new(Session::new(&config, SessionOptions::new(dir, None)));
    let call = |s: Arc<Session>| async move {
        s.call("bench__echo", json!({"message": "hello"}))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    };
    call(session.clone()).await;
    let t = Instant::now();
    for _ in 0..SEQUENTIAL {
        call(session.clone()).await;
    }
    let edgar_seq = t.elapsed();
    let t = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let s = session.clone();
            tokio::spawn(async move {
                for _ in 0..PER_TASK {
                    call(s.clone()).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap_or_else(|e| panic!("{e}"));
    }
    let edgar_conc = t.elapsed();
    session.close().await;

    let client = Arc::new(
        ().serve(StreamableHttpClientTransport::from_uri(url.to_owned()))
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let params = || {
        let mut args = serde_json::Map::new();
        args.insert("message".into(), json!("hello"));
        CallToolRequestParams::new("echo").with_arguments(args)
    };
    client
        .call_tool(params())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let t = Instant::now();
    for _ in 0..SEQUENTIAL {
        client
            .call_tool(params())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let rmcp_seq = t.elapsed();
    let t = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let c = client.clone();
            tokio::spawn(async move {
                for _ in 0..PER_TASK {
                    c.call_tool(params())
                        .await
                        .unwrap_or_else(|e| panic!("{e}"));
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap_or_else(|e| panic!("{e}"));
    }
    let rmcp_conc = t.elapsed();

    let lat = |d: Duration| d.as_secs_f64() * 1e6 / SEQUENTIAL as f64;
    let rate = |d: Duration| (TASKS * PER_TASK) as f64 / d.as_secs_f64();
    println!();
    println!(
        "| Streamable HTTP `tools/call` (server-everything `echo`) | sequential latency | concurrent ({TASKS} tasks) calls/s |"
    );
    println!("|---|---|---|");
    println!(
        "| edgar session (validate + call + wasm guard) | {:.0} µs | {:.0} |",
        lat(edgar_seq),
        rate(edgar_conc)
    );
    println!(
        "| rmcp 3.11 client | {:.0} µs | {:.0} |",
        lat(rmcp_seq),
        rate(rmcp_conc)
    );
}

/// Parses a 64 MiB stream of typical events (one JSON-RPC result of about 1 KB each,
/// with ids) fed in 16 KiB chunks, the size a socket read usually returns.
fn parser_throughput() {
    let text = "x".repeat(900);
    let event = format!(
        "id: 42\nevent: message\ndata: {}\n\n",
        json!({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": text}]}})
    );
    let stream = event.repeat((64 << 20) / event.len());
    let mut best = Duration::MAX;
    let mut events = 0;
    for _ in 0..5 {
        let mut parser = EventStream::new(16 << 20);
        let mut n = 0usize;
        let t = Instant::now();
        for chunk in stream.as_bytes().chunks(16 << 10) {
            parser
                .feed(chunk, |e| n += e.data.len().min(1))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        best = best.min(t.elapsed());
        events = n;
    }
    let mb = stream.len() as f64 / (1 << 20) as f64;
    println!("| event-stream parser | MiB | events | best of 5 | throughput |");
    println!("|---|---|---|---|---|");
    println!(
        "| 1 KB JSON events, 16 KiB chunks | {mb:.0} | {events} | {:.1} ms | {:.0} MiB/s |",
        best.as_secs_f64() * 1e3,
        mb / best.as_secs_f64()
    );
}
