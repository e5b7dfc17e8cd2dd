//! Stdio round trips against the same server (edgar's embedded example server, tool
//! `current_time`): edgar's session (argument validation, the call, the result through
//! the wasm guard) next to a client built on `rmcp`, the official Rust SDK.
//! Sequential latency and concurrent throughput, edgar in each protocol era (the example
//! server speaks both). Prints a Markdown table.
//!
//! Run with `cargo bench -p edgar-host --bench stdio`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgar_host::config::{Config, ProtocolChoice, ServerSpec, Transport};
use edgar_host::guard::AdapterSource;
use edgar_host::mcp::client::{Session, SessionOptions};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar");
const SEQUENTIAL: usize = 2000;
const TASKS: usize = 8;
const PER_TASK: usize = 500;

/// edgar's session against the example server in one protocol era: (sequential,
/// concurrent) wall time.
async fn edgar(dir: &std::path::Path, protocol: ProtocolChoice) -> (Duration, Duration) {
    let spec = ServerSpec {
        name: "bench".into(),
        transport: Transport::Stdio {
            command: EDGAR.into(),
            args: vec![
                "mcp".into(),
                "example-server".into(),
                "--root".into(),
                dir.display().to_string(),
            ],
            env: BTreeMap::new(),
            cwd: None,
            env_inherit: false,
        },
        startup_timeout: Duration::from_secs(30),
        tool_timeout: Duration::from_secs(30),
        enabled_tools: None,
        disabled_tools: Vec::new(),
        adapter: AdapterSource::Builtin,
        oauth: Default::default(),
        source: PathBuf::from("bench"),
        project: None,
        tool_policy: Default::default(),
        elicitation_defaults: false,
        protocol,
        task_deadline: edgar_host::config::DEFAULT_TASK_DEADLINE,
        sandbox: Default::default(),
        per_user: false,
        written: Default::default(),
    };
    let config = Config {
        servers: vec![spec],
        files: Vec::new(),
        is_default: false,
        ..Default::default()
    };
    let session = Arc::new(Session::new(
        &config,
        SessionOptions::new(dir.to_owned(), None),
    ));
    session
        .call("bench__current_time", serde_json::json!({}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    let t = Instant::now();
    for _ in 0..SEQUENTIAL {
        session
            .call("bench__current_time", serde_json::json!({}))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let seq = t.elapsed();
    let t = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let s = session.clone();
            tokio::spawn(async move {
                for _ in 0..PER_TASK {
                    s.call("bench__current_time", serde_json::json!({}))
                        .await
                        .unwrap_or_else(|e| panic!("{e}"));
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

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let handshake = edgar(dir.path(), ProtocolChoice::Handshake).await;
    let stateless = edgar(dir.path(), ProtocolChoice::Stateless).await;

    let mut cmd = tokio::process::Command::new(EDGAR);
    cmd.args(["mcp", "example-server"]).current_dir(dir.path());
    // rmcp's client speaks whichever era its default negotiation picks.
    let client = Arc::new(
        ().serve(TokioChildProcess::new(cmd).unwrap_or_else(|e| panic!("{e}")))
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let call = || CallToolRequestParams::new("current_time");
    client
        .call_tool(call())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let t = Instant::now();
    for _ in 0..SEQUENTIAL {
        client
            .call_tool(call())
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
                    c.call_tool(CallToolRequestParams::new("current_time"))
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
    println!("| stdio `tools/call` | sequential latency | concurrent ({TASKS} tasks) calls/s |");
    println!("|---|---|---|");
    for (era, (seq, conc)) in [("handshake", handshake), ("stateless", stateless)] {
        println!(
            "| edgar session, {era} era (validate + call + wasm guard) | {:.1} µs | {:.0} |",
            lat(seq),
            rate(conc)
        );
    }
    println!(
        "| rmcp 3.11 client | {:.1} µs | {:.0} |",
        lat(rmcp_seq),
        rate(rmcp_conc)
    );
}
