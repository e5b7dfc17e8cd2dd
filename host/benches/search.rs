//! `tool_search` quality and speed over the real corpus (`tests/fixtures/corpus`, 2,506
//! tools from 106 servers, each through the built-in guard) with the labelled query set
//! `tests/fixtures/search-queries.json`: recall@1, recall@5, MRR; index build time and
//! query latency at the corpus size and at ~10,000 tools (the corpus replicated under
//! other server names); prompt tokens of all schemas versus names only.
//!
//! Run with `cargo bench -p edgar-host --bench search` (add `-- --misses` to list the
//! queries whose answer is not in the top 5). Prints Markdown.

use std::path::Path;
use std::time::{Duration, Instant};

use edgar_host::guard::{AdapterSource, Guard, SanitizedTool};
use edgar_host::tools::search::{MAX_MATCHES, SearchIndex, schema_text};
use edgar_host::tools::tokens;

fn main() {
    let show_misses = std::env::args().any(|a| a == "--misses");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let corpus = load(&root.join("corpus"), "");
    let queries: Vec<(String, Vec<String>)> = {
        let v: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(root.join("search-queries.json")).unwrap_or_default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        v.as_array()
            .into_iter()
            .flatten()
            .map(|q| {
                let expect = q["expect"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e.as_str())
                    .map(str::to_owned)
                    .collect();
                (q["q"].as_str().unwrap_or_default().to_owned(), expect)
            })
            .collect()
    };

    let t = Instant::now();
    let index = SearchIndex::new(corpus.clone());
    let build = t.elapsed();
    let (mut r1, mut r5, mut mrr) = (0.0, 0.0, 0.0);
    let mut misses = Vec::new();
    for (q, expect) in &queries {
        let ranked = index.rank(q, MAX_MATCHES);
        let ids: Vec<String> = ranked
            .iter()
            .map(|&(i, _)| format!("{}/{}", index.tool(i).server(), index.tool(i).tool()))
            .collect();
        match ids.iter().position(|id| expect.contains(id)) {
            Some(p) => {
                r1 += f64::from(p == 0);
                r5 += f64::from(p < 5);
                mrr += 1.0 / (p as f64 + 1.0);
                if p >= 5 {
                    misses.push((q, expect, ids));
                }
            }
            None => misses.push((q, expect, ids)),
        }
    }
    let n = queries.len() as f64;
    let latency = query_latency(&index, &queries);

    let big_tools: Vec<SanitizedTool> = (0..4)
        .flat_map(|copy| {
            if copy == 0 {
                corpus.clone()
            } else {
                load(&root.join("corpus"), &format!("c{copy}"))
            }
        })
        .collect();
    let big_n = big_tools.len();
    let t = Instant::now();
    let big = SearchIndex::new(big_tools);
    let big_build = t.elapsed();
    let big_latency = query_latency(&big, &queries);

    let all_schemas: usize = corpus.iter().map(|t| tokens::count(&schema_text(t))).sum();
    let names_only = tokens::count(
        &corpus
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join("\n"),
    );

    println!("| tool_search over the corpus | result |");
    println!("|---|---|");
    println!(
        "| queries (tests/fixtures/search-queries.json) | {} |",
        queries.len()
    );
    println!("| recall@1 | {:.3} |", r1 / n);
    println!("| recall@5 | {:.3} |", r5 / n);
    println!("| MRR | {:.3} |", mrr / n);
    println!(
        "| index build, {} tools | {:.1} ms |",
        corpus.len(),
        ms(build)
    );
    println!(
        "| query latency, {} tools (median) | {:.3} ms |",
        corpus.len(),
        ms(latency)
    );
    println!("| index build, {big_n} tools | {:.1} ms |", ms(big_build));
    println!(
        "| query latency, {big_n} tools (median) | {:.3} ms |",
        ms(big_latency)
    );
    println!("| prompt tokens, all schemas (o200k_base) | {all_schemas} |");
    println!(
        "| prompt tokens, names only | {names_only} ({:.1} %) |",
        100.0 * names_only as f64 / all_schemas as f64
    );
    if show_misses {
        for (q, expect, got) in misses {
            println!(
                "\nMISS {q:?}\n  want {expect:?}\n  got  {:?}",
                &got[..got.len().min(5)]
            );
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn query_latency(index: &SearchIndex, queries: &[(String, Vec<String>)]) -> Duration {
    let mut times: Vec<Duration> = Vec::new();
    for _ in 0..5 {
        for (q, _) in queries {
            let t = Instant::now();
            std::hint::black_box(index.rank(q, MAX_MATCHES));
            times.push(t.elapsed());
        }
    }
    times.sort();
    times[times.len() / 2]
}

/// Every corpus tool through the built-in guard; server names get `suffix`.
fn load(dir: &Path, suffix: &str) -> Vec<SanitizedTool> {
    let guard = Guard::new(None);
    let adapter = guard
        .adapter(&AdapterSource::Builtin)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&f).unwrap_or_default())
                .unwrap_or_default();
        let server = format!("{}{suffix}", v["server"].as_str().unwrap_or_default());
        let tools: Vec<String> = v["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| t.to_string())
            .collect();
        out.extend(
            adapter
                .accept_tools(&server, &tools)
                .into_iter()
                .filter_map(Result::ok),
        );
    }
    out
}
