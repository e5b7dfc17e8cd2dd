//! Streamable HTTP round trips against `@modelcontextprotocol/server-everything` (tool
//! `echo`, handshake era only) and the Python SDK 2.3.0 server (tool `add`, both eras):
//! edgar's session (argument validation, the call, the result through the wasm guard)
//! in each era the server speaks, next to a client built on `rmcp`, the official Rust
//! SDK, on the same server. Then the event-stream parser's throughput. Prints Markdown
//! tables.
//!
//! Needs the npm servers and the Python SDK `.ci/test` installs (`EDGAR_TEST_DEPS`,
//! default `target/test-deps`). Run with `cargo bench -p edgar-host --bench http`.

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgar_host::config::{Config, ProtocolChoice, ServerSpec};
use edgar_host::mcp::client::{Session, SessionOptions};
use edgar_host::mcp::http::event_stream::EventStream;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};

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
    let everything = deps.join("npm/node_modules/.bin/mcp-server-everything");
    let python = deps.join("py/bin/python");
    for needed in [&everything, &python] {
        if !needed.exists() {
            eprintln!(
                "{} is missing: run .ci/test once to install it",
                needed.display()
            );
            std::process::exit(1);
        }
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/python_server.py"
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    println!();
    println!(
        "| Streamable HTTP `tools/call` | sequential latency | concurrent ({TASKS} tasks) calls/s |"
    );
    println!("|---|---|---|");
    let node = Server::start(
        Command::new(&everything).arg("streamableHttp"),
        |port, cmd| {
            cmd.env("PORT", port.to_string());
        },
    );
    let echo = ("echo", json!({"message": "hello"}));
    rt.block_on(async {
        let run = edgar(&node.url, &echo, ProtocolChoice::Handshake).await;
        row("server-everything, edgar session (handshake era)", run);
        row(
            "server-everything, rmcp 3.11 client",
            rmcp(&node.url, &echo).await,
        );
    });
    drop(node);
    let py = Server::start(
        Command::new(&python).args([script, "streamable-http"]),
        |port, cmd| {
            cmd.arg(port.to_string());
        },
    );
    let add = ("add", json!({"a": 20, "b": 22}));
    rt.block_on(async {
        for (era, choice) in [
            ("handshake", ProtocolChoice::Handshake),
            ("stateless", ProtocolChoice::Stateless),
        ] {
            let run = edgar(&py.url, &add, choice).await;
            row(&format!("Python SDK 2.3.0, edgar session ({era} era)"), run);
        }
        row(
            "Python SDK 2.3.0, rmcp 3.11 client",
            rmcp(&py.url, &add).await,
        );
    });
}

/// A server on a free loopback port, killed when dropped.
struct Server {
    child: std::process::Child,
    url: String,
}

impl Server {
    fn start(cmd: &mut Command, port_arg: impl FnOnce(u16, &mut Command)) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or_else(|e| panic!("{e}"));
        port_arg(port, cmd);
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        while TcpStream::connect(addr).is_err() {
            std::thread::sleep(Duration::from_millis(50));
        }
        Server {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn row(who: &str, (seq, conc): (Duration, Duration)) {
    let lat = seq.as_secs_f64() * 1e6 / SEQUENTIAL as f64;
    let rate = (TASKS * PER_TASK) as f64 / conc.as_secs_f64();
    println!("| {who} | {lat:.0} µs | {rate:.0} |");
}

/// edgar's session (validate, call, the result through the wasm guard) in one era:
/// (sequential, concurrent) wall time.
async fn edgar(
    url: &str,
    (tool, args): &(&str, Value),
    protocol: ProtocolChoice,
) -> (Duration, Duration) {
    let mut spec = ServerSpec::http("bench", url);
    spec.protocol = protocol;
    let config = Config {
        servers: vec![spec],
        ..Config::default()
    };
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let session = Arc::new(Session::new(
        &config,
        SessionOptions::new(dir.path().to_owned(), None),
    ));
    let name: Arc<str> = format!("bench__{tool}").into();
    let call = |s: Arc<Session>, name: Arc<str>, args: Value| async move {
        s.call(&name, args).await.unwrap_or_else(|e| panic!("{e}"));
    };
    call(session.clone(), name.clone(), args.clone()).await;
    let t = Instant::now();
    for _ in 0..SEQUENTIAL {
        call(session.clone(), name.clone(), args.clone()).await;
    }
    let seq = t.elapsed();
    let t = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (s, name, args) = (session.clone(), name.clone(), args.clone());
            tokio::spawn(async move {
                for _ in 0..PER_TASK {
                    call(s.clone(), name.clone(), args.clone()).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap_or_else(|e| panic!("{e}"));
    }
    let conc = t.elapsed();
    session.close().await;
    (seq, conc)
}

/// A client on rmcp, the official Rust SDK, in whichever era its negotiation picks.
async fn rmcp(url: &str, (tool, args): &(&str, Value)) -> (Duration, Duration) {
    let client = Arc::new(
        ().serve(StreamableHttpClientTransport::from_uri(url.to_owned()))
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let args = args.as_object().cloned().unwrap_or_default();
    let tool = tool.to_string();
    let params = move || CallToolRequestParams::new(tool.clone()).with_arguments(args.clone());
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
    let seq = t.elapsed();
    let t = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (c, params) = (client.clone(), params.clone());
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
    (seq, t.elapsed())
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
