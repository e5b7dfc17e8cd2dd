//! A whole `edgar tool-search` process on a warm cache holding the real corpus (106
//! servers, 2,506 tools, their commands nonexistent, so nothing can start), with each
//! encoder: none (words only), the bundled one (a fresh machine's default) and the
//! installed one, each after a first run that embedded the catalog and filled the caches.
//! Prints a Markdown table of medians.
//!
//! Run with `EDGAR_SEARCH_MODEL=DIR cargo bench -p edgar-host --bench search_cli` (the
//! installed model's row needs it; `edgar search-model install` puts it in place).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use edgar_host::config::ConfigPaths;
use edgar_host::guard::{AdapterSource, BUILTIN_DIGEST, Guard};
use edgar_host::mcp::cache::{Entry, ToolCache};
use edgar_host::tools::search::semantic;

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar");
const RUNS: usize = 21;
const QUERY: &str = "switch my local checkout to another branch";

fn main() {
    let home = setup();
    if std::env::var_os("SEARCH_KEEP_HOME").is_some() {
        // For profiling by hand (perf, strace): the home stays.
        println!("home: {}", home.keep().display());
        return;
    }
    let model = std::env::var_os("EDGAR_SEARCH_MODEL");
    let none = home.path().join("no-model").into_os_string();
    let mut rows = vec![
        ("by words only", none.clone(), "words"),
        ("bundled all-MiniLM-L6-v2 (4-bit), fused", none, "auto"),
    ];
    if let Some(m) = model {
        rows.push(("installed all-MiniLM-L6-v2, fused", m, "auto"));
    }
    println!("| `edgar tool-search`, warm cache, 2,506 tools | median of {RUNS} runs |");
    println!("|---|---|");
    for (what, model, encoder) in rows {
        // The first run embeds (once) and fills the caches; it is not counted.
        once(home.path(), &model, encoder);
        let mut times: Vec<Duration> = (0..RUNS)
            .map(|_| once(home.path(), &model, encoder))
            .collect();
        times.sort();
        println!("| {what} | {:.1} ms |", times[RUNS / 2].as_secs_f64() * 1e3);
    }
}

fn once(home: &Path, model: &std::ffi::OsStr, encoder: &str) -> Duration {
    let t = Instant::now();
    let out = Command::new(EDGAR)
        .args(["tool-search", QUERY])
        .current_dir(home)
        .env("HOME", home)
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("EDGAR_SEARCH_MODEL", model)
        .env(semantic::ENCODER_VAR, encoder)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let elapsed = t.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.starts_with("Found"),
        "{stdout}"
    );
    elapsed
}

/// A home whose user config names every corpus server (commands that do not exist) and
/// whose cache holds their guarded tools.
fn setup() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let corpus: Vec<(String, Vec<String>)> = files
        .iter()
        .map(|f| {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(f).unwrap_or_default())
                    .unwrap_or_default();
            let tools = v["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| t.to_string())
                .collect();
            (v["server"].as_str().unwrap_or_default().to_owned(), tools)
        })
        .collect();
    let servers: serde_json::Map<String, serde_json::Value> = corpus
        .iter()
        .map(|(s, _)| {
            (
                s.clone(),
                serde_json::json!({"command": format!("/nonexistent/{s}")}),
            )
        })
        .collect();
    let user = home.path().join("config/edgar/mcp.json");
    std::fs::create_dir_all(home.path().join("config/edgar")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        &user,
        serde_json::json!({"mcpServers": servers}).to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(home.path().join(".mcp.json"), r#"{"mcpServers": {}}"#)
        .unwrap_or_else(|e| panic!("{e}"));
    let paths = ConfigPaths {
        user: Some(user),
        project: home.path().join(".mcp.json"),
        state: Some(home.path().join(".local/state/edgar")),
        policy: None,
    };
    let config = edgar_host::trust::admit::load(&paths, None).unwrap_or_else(|e| panic!("{e}"));
    let cache = ToolCache::new(Some(&home.path().join("cache/edgar")));
    let guard = Guard::new(None);
    let adapter = guard
        .adapter(&AdapterSource::Builtin)
        .unwrap_or_else(|e| panic!("{e}"));
    for spec in &config.servers {
        let tools = corpus
            .iter()
            .find(|(s, _)| *s == spec.name)
            .map(|(_, t)| t.as_slice())
            .unwrap_or_default();
        let entry = Entry {
            tools: adapter
                .accept_tools(&spec.name, tools)
                .into_iter()
                .filter_map(Result::ok)
                .collect(),
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
