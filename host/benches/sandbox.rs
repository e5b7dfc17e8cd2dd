//! What confinement costs: edgar's embedded example server started and called through a
//! session with `"sandbox": "off"` and with a profile (Landlock + seccomp, no network),
//! alternating. Start to first answer (spawn, the handshake, `tools/list` through the
//! guard, one call: the guard engine is warm after the first round) and sequential calls.
//! Prints a Markdown table of medians.
//!
//! Run with `cargo bench -p edgar-host --bench sandbox`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use edgar_host::config::{Config, Net, Sandbox, SandboxProfile, ServerSpec, Transport};
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
    let confined = || {
        Sandbox::On(SandboxProfile {
            read: Vec::new(),
            write: Vec::new(),
            net: Net::None,
        })
    };
    // Warm the guard engine and the page cache.
    run(dir.path(), Sandbox::Off, 10).await;
    run(dir.path(), confined(), 10).await;
    let (mut off_start, mut on_start) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        off_start.push(run(dir.path(), Sandbox::Off, 0).await.0);
        on_start.push(run(dir.path(), confined(), 0).await.0);
    }
    let (mut off_call, mut on_call) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        off_call.push(run(dir.path(), Sandbox::Off, CALLS).await.1);
        on_call.push(run(dir.path(), confined(), CALLS).await.1);
    }
    let (a, b) = (median(off_start), median(on_start));
    let (c, d) = (median(off_call), median(on_call));
    println!(
        "| example server | `\"sandbox\": \"off\"` | confined (landlock + seccomp, net none) | ratio |"
    );
    println!("|---|---|---|---|");
    println!(
        "| start to first answer (median of {ROUNDS}) | {:.1} ms | {:.1} ms | +{:.1} ms |",
        a.as_secs_f64() * 1e3,
        b.as_secs_f64() * 1e3,
        (b.as_secs_f64() - a.as_secs_f64()) * 1e3
    );
    println!(
        "| per call (median of 5 x {CALLS}) | {:.0} us | {:.0} us | {:.2}x |",
        c.as_secs_f64() * 1e6,
        d.as_secs_f64() * 1e6,
        d.as_secs_f64() / c.as_secs_f64()
    );
}
