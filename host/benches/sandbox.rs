//! What confinement costs: edgar's embedded example server started and called through a
//! session with `"sandbox": "off"`, with a profile (Landlock + seccomp, no network) and
//! with a host list (its own user and network namespace and edgar's proxy), in turn. Start to first answer (spawn, the handshake, `tools/list` through the
//! guard, one call: the guard engine is warm after the first round) and sequential calls.
//! Prints a Markdown table of medians.
//!
//! Run with `cargo bench -p edgar-host --bench sandbox`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use edgar_host::config::{Config, HostPort, Net, Sandbox, SandboxProfile, ServerSpec, Transport};
use edgar_host::guard::AdapterSource;
use edgar_host::mcp::client::{Session, SessionOptions};

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar");
const ROUNDS: usize = 30;
const CALLS: usize = 1000;

fn spec(dir: &Path, sandbox: Sandbox) -> ServerSpec {
    ServerSpec {
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
        protocol: Default::default(),
        task_deadline: edgar_host::config::DEFAULT_TASK_DEADLINE,
        written: Default::default(),
        sandbox,
        per_user: false,
    }
}

fn session(dir: &Path, sandbox: Sandbox) -> Session {
    let config = Config {
        servers: vec![spec(dir, sandbox)],
        ..Default::default()
    };
    Session::new(&config, SessionOptions::new(dir.to_owned(), None))
}

/// (start to first answer, mean per call over `calls`).
async fn run(dir: &Path, sandbox: Sandbox, calls: usize) -> (Duration, Duration) {
    let t = Instant::now();
    let s = session(dir, sandbox);
    s.call("bench__current_time", serde_json::json!({}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let first = t.elapsed();
    let t = Instant::now();
    for _ in 0..calls {
        s.call("bench__current_time", serde_json::json!({}))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let per_call = t.elapsed() / calls.max(1) as u32;
    s.close().await;
    (first, per_call)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let profile = |net: Net| {
        Sandbox::On(SandboxProfile {
            net,
            ..SandboxProfile::default()
        })
    };
    let hosts = vec![
        HostPort::parse("api.example.com:443").unwrap_or_else(|e| panic!("{e}")),
        HostPort::parse("localhost:5432").unwrap_or_else(|e| panic!("{e}")),
    ];
    let variants = [
        ("`\"sandbox\": \"off\"`", Sandbox::Off),
        ("confined, net none", profile(Net::None)),
        (
            "confined, net host list (own namespace + proxy)",
            profile(Net::Hosts(hosts)),
        ),
    ];
    // Warm the guard engine and the page cache.
    for (_, v) in &variants {
        run(dir.path(), v.clone(), 10).await;
    }
    let mut starts = vec![Vec::new(); variants.len()];
    for _ in 0..ROUNDS {
        for (i, (_, v)) in variants.iter().enumerate() {
            starts[i].push(run(dir.path(), v.clone(), 0).await.0);
        }
    }
    let mut calls = vec![Vec::new(); variants.len()];
    for _ in 0..5 {
        for (i, (_, v)) in variants.iter().enumerate() {
            calls[i].push(run(dir.path(), v.clone(), CALLS).await.1);
        }
    }
    let starts: Vec<Duration> = starts.into_iter().map(median).collect();
    let calls: Vec<Duration> = calls.into_iter().map(median).collect();
    println!(
        "| example server | start to first answer (median of {ROUNDS}) | per call (median of 5 x {CALLS}) |"
    );
    println!("|---|---|---|");
    for (i, (name, _)) in variants.iter().enumerate() {
        let extra = if i == 0 {
            String::new()
        } else {
            format!(
                " (+{:.1} ms / {:.2}x)",
                (starts[i].as_secs_f64() - starts[0].as_secs_f64()) * 1e3,
                calls[i].as_secs_f64() / calls[0].as_secs_f64()
            )
        };
        println!(
            "| {name}{extra} | {:.1} ms | {:.0} us |",
            starts[i].as_secs_f64() * 1e3,
            calls[i].as_secs_f64() * 1e6,
        );
    }
}
