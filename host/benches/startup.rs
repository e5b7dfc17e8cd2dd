//! Startup cost: `edgar mcp tools` with a warm cache for 0 servers versus 30 servers of
//! 20 tools each. The 30 servers' commands do not exist, so the run also proves that a
//! warm listing starts nothing. Then the embedding harness's first prompt
//! (`Session::tool_names_within`) with those 30 cached servers, alone and beside a 31st
//! that is uncached and never answers. Prints Markdown tables.
//!
//! Run with `cargo bench -p edgar-host --bench startup`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use edgar_host::config::{Config, ConfigPaths, Hold};
use edgar_host::guard::{AdapterSource, BUILTIN_DIGEST, Guard};
use edgar_host::mcp::cache::{Entry, ToolCache};
use edgar_host::trust::approval::Approvals;

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar");
const RUNS: usize = 101;

fn main() {
    let corpus = corpus_tools(20);
    let zero = setup(0, &corpus);
    let thirty = setup(30, &corpus);
    if std::env::var_os("STARTUP_KEEP_HOMES").is_some() {
        // For profiling one configuration by hand (perf, strace): the homes stay.
        println!(
            "homes: {} {}",
            zero.keep().display(),
            thirty.keep().display()
        );
        return;
    }
    // Interleaved, so machine noise hits both configurations alike.
    let mut zeros = Vec::new();
    let mut thirties = Vec::new();
    for _ in 0..RUNS {
        zeros.push(once(zero.path(), 0));
        thirties.push(once(thirty.path(), 600));
    }
    zeros.sort();
    thirties.sort();
    let (t0, t30) = (zeros[RUNS / 2], thirties[RUNS / 2]);
    println!("| `edgar mcp tools`, warm cache | median of {RUNS} runs |");
    println!("|---|---|");
    println!("| 0 servers | {:.2} ms |", ms(t0));
    println!("| 30 servers x 20 tools | {:.2} ms |", ms(t30));
    println!("| ratio | {:.2}x |", t30.as_secs_f64() / t0.as_secs_f64());
    prompt_with_a_hung_server(thirty.path());
}

/// The first prompt's names, warm, and warm plus one server that never answers (`sleep`
/// as its command): the prompt is ready within `PROMPT_BUDGET` however long it hangs.
fn prompt_with_a_hung_server(home: &Path) {
    use edgar_host::config::Transport;
    use edgar_host::mcp::client::{PROMPT_BUDGET, Session, SessionOptions};
    const PROMPT_RUNS: usize = 5;
    let paths = ConfigPaths {
        user: Some(home.join("config/edgar/mcp.json")),
        project: home.join(".mcp.json"),
        state: Some(home.join(".local/state/edgar")),
        policy: None,
    };
    let warm = edgar_host::trust::admit::load(&paths, None).unwrap_or_else(|e| panic!("{e}"));
    let mut hung = warm.clone();
    let mut spec = warm.servers[0].clone();
    spec.name = "hung".into();
    spec.transport = Transport::Stdio {
        command: "sleep".into(),
        args: vec!["1000".into()],
        env: Default::default(),
        cwd: None,
        env_inherit: false,
    };
    hung.servers.push(spec);
    let runtime = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("{e}"));
    let prompt = |config: &Config| -> Duration {
        runtime.block_on(async {
            let opts = SessionOptions::new(home.to_owned(), Some(home.join("cache/edgar")));
            let session = Session::new(config, opts);
            let t = Instant::now();
            let ready = session.tool_names_within(PROMPT_BUDGET).await;
            let elapsed = t.elapsed();
            assert_eq!(ready.names.len(), 600);
            session.close().await;
            elapsed
        })
    };
    let mut warms: Vec<Duration> = (0..PROMPT_RUNS).map(|_| prompt(&warm)).collect();
    let mut hungs: Vec<Duration> = (0..PROMPT_RUNS).map(|_| prompt(&hung)).collect();
    warms.sort();
    hungs.sort();
    let (w, h) = (warms[PROMPT_RUNS / 2], hungs[PROMPT_RUNS / 2]);
    println!();
    println!("| first prompt's names (library, `tool_names_within`) | median of {PROMPT_RUNS} |");
    println!("|---|---|");
    println!("| 30 cached servers | {:.2} ms |", ms(w));
    println!(
        "| the same + 1 uncached server that never answers | {:.0} ms (budget {} ms) |",
        ms(h),
        PROMPT_BUDGET.as_millis()
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A home with `n` servers, half in the user's config and half in the project's (each
/// approved, so every start checks the approvals), and their tools in a warm cache.
fn setup(n: usize, tools: &[String]) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let entries = |range: std::ops::Range<usize>| -> serde_json::Value {
        let servers: serde_json::Map<String, serde_json::Value> = range
            .map(|i| {
                (
                    format!("server{i}"),
                    serde_json::json!({"command": format!("/nonexistent/mcp-server-{i}")}),
                )
            })
            .collect();
        serde_json::json!({ "mcpServers": servers })
    };
    let user = home.path().join("config/edgar/mcp.json");
    std::fs::create_dir_all(home.path().join("config/edgar")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&user, entries(0..n / 2).to_string()).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(home.path().join(".mcp.json"), entries(n / 2..n).to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    let state = home.path().join(".local/state/edgar");
    let paths = ConfigPaths {
        user: Some(user),
        project: home.path().join(".mcp.json"),
        state: Some(state.clone()),
        policy: None,
    };
    let held = edgar_host::trust::admit::load(&paths, None).unwrap_or_else(|e| panic!("{e}"));
    let mut approvals = Approvals::load(Some(&state));
    for h in &held.held {
        if let Hold::NeedsApproval(entry) = &h.why {
            approvals
                .approve(&entry.project, &entry.name, &entry.digest, 0)
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let config = edgar_host::trust::admit::load(&paths, None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.servers.len(), n, "every server is trusted");
    let cache = ToolCache::new(Some(&home.path().join("cache/edgar")));
    let guard = Guard::new(None);
    let adapter = guard
        .adapter(&AdapterSource::Builtin)
        .unwrap_or_else(|e| panic!("{e}"));
    for spec in &config.servers {
        let accepted = adapter
            .accept_tools(&spec.name, tools)
            .into_iter()
            .filter_map(Result::ok)
            .collect();
        let entry = Entry {
            tools: accepted,
            refused: Vec::new(),
            quarantined: Vec::new(),
            protocol_version: "2025-06-18".into(),
            server_info: serde_json::Value::Null,
            fetched_at: 0,
            fresh_until_ms: None,
        };
        cache
            .write(spec, BUILTIN_DIGEST, &entry)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    home
}

fn once(home: &Path, expect_lines: usize) -> Duration {
    let t = Instant::now();
    let out = Command::new(EDGAR)
        .args(["mcp", "tools"])
        .current_dir(home)
        .env("HOME", home)
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let elapsed = t.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        expect_lines
    );
    elapsed
}

/// The first `n` tools of the corpus's largest servers, as JSON text.
fn corpus_tools(n: usize) -> Vec<String> {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/corpus/github.json");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap_or_default())
            .unwrap_or_default();
    v["tools"]
        .as_array()
        .map(|t| t.iter().take(n).map(|t| t.to_string()).collect())
        .unwrap_or_default()
}
