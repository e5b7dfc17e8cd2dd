//! The guard's cost, measured over the real tool corpus (`tests/fixtures/corpus`):
//! the reference adapter through the wasm component versus the same Rust compiled
//! natively, cold start with and without the precompiled cache, the cost of an empty
//! call, and the process RSS after loading the guard.
//!
//! Run with `cargo bench -p edgar-host --bench guard`. Prints a Markdown table.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use edgar_host::guard::{AdapterSource, Guard};

const ROUNDS: usize = 11;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--cold-start") {
        let source = match args.get(i + 2) {
            Some(file) => AdapterSource::File(PathBuf::from(file)),
            None => AdapterSource::Builtin,
        };
        cold_start_child(Path::new(&args[i + 1]), &source);
        return;
    }
    let corpus = load_corpus();
    // K passes of one side only, for an instruction counter (`valgrind --tool=callgrind`):
    // the difference between two K is the cost of the passes alone.
    let passes = |flag: &str| {
        args.iter().position(|a| a == flag).map(|i| {
            args.get(i + 1)
                .and_then(|k| k.parse::<usize>().ok())
                .unwrap_or(1)
        })
    };
    if let Some(k) = passes("--passes-native") {
        for (server, list) in corpus.iter().cycle().take(k * corpus.len()) {
            for (name, json) in list {
                std::hint::black_box(guest_schema::tool_name(server, name).ok());
                std::hint::black_box(guest_schema::to_schema(server, json).ok());
            }
        }
        return;
    }
    if let Some(k) = passes("--passes-wasm") {
        let source = match args.iter().position(|a| a == "--adapter") {
            Some(i) => AdapterSource::File(PathBuf::from(&args[i + 1])),
            None => AdapterSource::Builtin,
        };
        let guard = Guard::new(Some(tempfile_dir()));
        let adapter = guard.adapter(&source).unwrap_or_else(|e| panic!("{e}"));
        for (server, list) in corpus.iter().cycle().take(k * corpus.len()) {
            std::hint::black_box(adapter.bench_raw_calls(server, list).ok());
        }
        return;
    }
    // K empty calls, each in a fresh instance (a result's guard call pays this), for a
    // profiler (`perf record`).
    if let Some(k) = passes("--fresh") {
        let guard = Guard::new(Some(tempfile_dir()));
        let adapter = guard
            .adapter(&AdapterSource::Builtin)
            .unwrap_or_else(|e| panic!("{e}"));
        let t = Instant::now();
        for _ in 0..k {
            adapter
                .bench_empty_calls(1)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        println!(
            "empty call in a fresh instance: {:.1} µs",
            t.elapsed().as_secs_f64() * 1e6 / k as f64
        );
        return;
    }
    let tools: usize = corpus.iter().map(|(_, t)| t.len()).sum();
    println!("Corpus: {} servers, {tools} tools.\n", corpus.len());
    println!("| measurement | result |");
    println!("|---|---|");

    let guard = Guard::new(None);
    let adapter = guard
        .adapter(&AdapterSource::Builtin)
        .unwrap_or_else(|e| panic!("{e}"));
    let run_native = || {
        let t = Instant::now();
        for (server, list) in &corpus {
            for (name, json) in list {
                std::hint::black_box(guest_schema::tool_name(server, name).ok());
                std::hint::black_box(guest_schema::to_schema(server, json).ok());
            }
        }
        t.elapsed()
    };
    let run_wasm = || {
        let t = Instant::now();
        for (server, list) in &corpus {
            std::hint::black_box(
                adapter
                    .bench_raw_calls(server, list)
                    .unwrap_or_else(|e| panic!("{e}")),
            );
        }
        t.elapsed()
    };
    // Interleaved rounds, so machine noise hits both sides alike; medians of each.
    run_native();
    run_wasm();
    let mut natives = Vec::new();
    let mut wasms = Vec::new();
    for _ in 0..ROUNDS {
        natives.push(run_native());
        wasms.push(run_wasm());
    }
    natives.sort();
    wasms.sort();
    let (native, wasm) = (natives[ROUNDS / 2], wasms[ROUNDS / 2]);
    let per = |d: Duration| d.as_secs_f64() * 1e6 / tools as f64;
    println!(
        "| `tool_name` + `to_schema`, native, per tool | {:.1} µs |",
        per(native)
    );
    println!(
        "| `tool_name` + `to_schema`, wasm component (one instance per server), per tool | {:.1} µs ({:.2}x native) |",
        per(wasm),
        wasm.as_secs_f64() / native.as_secs_f64()
    );

    let raw: Vec<(String, Vec<String>)> = corpus
        .iter()
        .map(|(s, l)| (s.clone(), l.iter().map(|(_, j)| j.clone()).collect()))
        .collect();
    let full = median(3, || {
        let t = Instant::now();
        for (server, list) in &raw {
            std::hint::black_box(adapter.accept_tools(server, list));
        }
        t.elapsed()
    });
    println!(
        "| whole guard per tool (component + host checks + `jsonschema` compile) | {:.1} µs |",
        per(full)
    );
    // With findings on, as discovery runs it: the same, then `scan-tool` over each tool.
    let scanned = median(3, || {
        let t = Instant::now();
        for (server, list) in &raw {
            std::hint::black_box(adapter.accept_tools(server, list));
            std::hint::black_box(adapter.scan_tools(server, list));
        }
        t.elapsed()
    });
    println!(
        "| whole guard per tool with findings (`scan-tool` too) | {:.1} µs ({:.2}x without) |",
        per(scanned),
        scanned.as_secs_f64() / full.as_secs_f64()
    );
    let scan_native = median(ROUNDS, || {
        let t = Instant::now();
        for (server, list) in &raw {
            for json in list {
                std::hint::black_box(guest_schema::scan_tool(server, json));
            }
        }
        t.elapsed()
    });
    println!(
        "| `scan_tool` alone, native, per tool | {:.1} µs |",
        per(scan_native)
    );

    const CALLS: usize = 20_000;
    let reused = median(ROUNDS, || {
        let t = Instant::now();
        adapter
            .bench_empty_calls(CALLS)
            .unwrap_or_else(|e| panic!("{e}"));
        t.elapsed()
    });
    println!(
        "| empty call (`tool_name(\"s\",\"t\")`), reused instance | {:.2} µs |",
        reused.as_secs_f64() * 1e6 / CALLS as f64
    );
    let native_empty = median(ROUNDS, || {
        let t = Instant::now();
        for _ in 0..CALLS {
            std::hint::black_box(guest_schema::tool_name(std::hint::black_box("s"), "t").ok());
        }
        t.elapsed()
    });
    println!(
        "| same call, native | {:.3} µs |",
        native_empty.as_secs_f64() * 1e6 / CALLS as f64
    );
    let fresh = median(ROUNDS, || {
        let t = Instant::now();
        for _ in 0..1000 {
            adapter
                .bench_empty_calls(1)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        t.elapsed()
    });
    println!(
        "| empty call in a fresh instance (store + instantiate + call) | {:.1} µs |",
        fresh.as_secs_f64() * 1e6 / 1000.0
    );

    cold_starts("", None);

    // The JavaScript adapter of tests/adapters/js, when .ci/test has built it.
    let js = std::env::var_os("EDGAR_TEST_DEPS")
        .map_or_else(
            || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-deps"),
            PathBuf::from,
        )
        .join("js-adapter/adapter.wasm");
    if !js.exists() {
        println!("\n(The JavaScript adapter is not built: run .ci/test to measure it.)");
        return;
    }
    let js_adapter = guard
        .adapter(&AdapterSource::File(js.clone()))
        .unwrap_or_else(|e| panic!("{e}"));
    let js_full = median(3, || {
        let t = Instant::now();
        for (server, list) in &raw {
            std::hint::black_box(js_adapter.accept_tools(server, list));
        }
        t.elapsed()
    });
    println!(
        "| JavaScript adapter (ComponentizeJS, {:.1} MB): whole guard per tool | {:.1} µs |",
        std::fs::metadata(&js).map_or(0.0, |m| m.len() as f64 / 1e6),
        per(js_full)
    );
    println!(
        "| JavaScript adapter: most linear memory of one instance over the corpus | {:.1} MiB |",
        js_adapter.peak_memory() as f64 / f64::from(1 << 20)
    );
    cold_starts("JavaScript adapter: ", Some(&js));
}

/// Cold starts in fresh processes, with and without the precompiled artifact cached.
fn cold_starts(label: &str, adapter: Option<&Path>) {
    let dir = tempfile_dir();
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
    let cold: Vec<(f64, f64)> = (0..3)
        .map(|_| {
            let _ = std::fs::remove_dir_all(&dir);
            child(&exe, &dir, adapter)
        })
        .collect();
    let warm: Vec<(f64, f64)> = (0..5).map(|_| child(&exe, &dir, adapter)).collect();
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "| {label}cold start: engine + compile with Cranelift (no cache), first call | {:.1} ms |",
        median_f(cold.iter().map(|c| c.0).collect())
    );
    println!(
        "| {label}cold start: engine + load precompiled artifact, first call | {:.1} ms |",
        median_f(warm.iter().map(|c| c.0).collect())
    );
    println!(
        "| {label}process RSS growth from loading the guard (warm cache) | {:.1} MiB |",
        median_f(warm.iter().map(|c| c.1).collect())
    );
}

/// In a fresh process: time from nothing to the first answered call, and RSS growth.
fn cold_start_child(cache: &Path, source: &AdapterSource) {
    let before = rss_kib();
    let t = Instant::now();
    let guard = Guard::new(Some(cache.to_owned()));
    let adapter = guard.adapter(source).unwrap_or_else(|e| panic!("{e}"));
    let name = adapter
        .tool_name("s", "t")
        .unwrap_or_else(|e| panic!("{e}"));
    let elapsed = t.elapsed();
    assert_eq!(name, "s__t");
    println!(
        "{} {}",
        elapsed.as_secs_f64() * 1e3,
        (rss_kib() - before) as f64 / 1024.0
    );
}

fn child(exe: &Path, dir: &Path, adapter: Option<&Path>) -> (f64, f64) {
    let out = Command::new(exe)
        .arg("--cold-start")
        .arg(dir)
        .args(adapter)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text
        .split_whitespace()
        .map(|s| s.parse::<f64>().unwrap_or(f64::NAN));
    (it.next().unwrap_or(f64::NAN), it.next().unwrap_or(f64::NAN))
}

fn rss_kib() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

fn tempfile_dir() -> PathBuf {
    std::env::temp_dir().join(format!("edgar-guard-bench-{}", std::process::id()))
}

fn median(rounds: usize, mut f: impl FnMut() -> Duration) -> Duration {
    f();
    let mut v: Vec<Duration> = (0..rounds).map(|_| f()).collect();
    v.sort();
    v[v.len() / 2]
}

fn median_f(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// (server, [(tool name, tool JSON)]) for every corpus file.
fn load_corpus() -> Vec<(String, Vec<(String, String)>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/corpus");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(p).unwrap_or_default())
                    .unwrap_or_default();
            let tools = v["tools"]
                .as_array()
                .map(|ts| {
                    ts.iter()
                        .map(|t| {
                            (
                                t["name"].as_str().unwrap_or_default().to_owned(),
                                t.to_string(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            (v["server"].as_str().unwrap_or_default().to_owned(), tools)
        })
        .collect()
}
