//! `tool_search` quality and speed over the real corpus (`tests/fixtures/corpus`, 2,506
//! tools from 106 servers, each through the built-in guard), on two labelled query sets
//! side by side: our own (`search-queries.json`, written after reading the corpus) and
//! one written by others (`search-queries-dev.jsonl`, never used to tune). For each, by
//! words only and fused with the semantic model (when it is installed): recall@1,
//! recall@5, MRR, and recall within the default `RESERVE` (what a search really returns).
//! Then build, load and query times at 2,506 and ~10,000 tools (the corpus replicated
//! under other server names; its vectors are replicated too, not re-embedded).
//!
//! Run with `cargo bench -p edgar-host --bench search` (`-- --misses` lists the dev-set
//! queries whose answer is not in the fused top 5). Prints Markdown.

use std::path::Path;
use std::time::{Duration, Instant};

use edgar_host::guard::{AdapterSource, Guard, SanitizedTool};
use edgar_host::tools::search::model::Encoder;
use edgar_host::tools::search::semantic;
use edgar_host::tools::search::{MAX_MATCHES, RESERVE, SearchIndex, schema_text, store};
use edgar_host::tools::tokens;

type Queries = Vec<(String, Vec<String>)>;

fn main() {
    let show_misses = std::env::args().any(|a| a == "--misses");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let corpus = load(&root.join("corpus"), "");
    let own = own_queries(&root.join("search-queries.json"));
    let dev = dev_queries(&root.join("search-queries-dev.jsonl"));

    let t = Instant::now();
    let lexical = SearchIndex::new(corpus.clone());
    let build = t.elapsed();

    // Each encoder there is: the bundled one always, the installed one when present.
    let mut encoders: Vec<Measured> = Vec::new();
    // The first process expands the bundled weights and keeps them; later ones map them.
    let kept_dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let kept = kept_dir.path().join("expanded.f32");
    let t = Instant::now();
    drop(Encoder::bundled(Some(&kept)).unwrap_or_else(|e| panic!("{e}")));
    let first_load = t.elapsed();
    let t = Instant::now();
    let bundled = Encoder::bundled(Some(&kept)).unwrap_or_else(|e| panic!("{e}"));
    let bundled_load = t.elapsed();
    encoders.push(Measured::new(
        "bundled all-MiniLM-L6-v2 (4-bit)",
        bundled,
        bundled_load,
        &corpus,
    ));
    match semantic::model_dir().map(|d| (Instant::now(), Encoder::load(&d))) {
        Some((t, Ok(e))) => encoders.push(Measured::new(
            "installed all-MiniLM-L6-v2",
            e,
            t.elapsed(),
            &corpus,
        )),
        _ => eprintln!("all-MiniLM-L6-v2 is not installed: its rows are left out"),
    }

    println!(
        "| ranking | dev recall@1 | dev recall@5 | dev recall@10 | dev MRR | dev within RESERVE ({RESERVE} tokens) | own recall@5 | own within RESERVE |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let line = |name: &str, ix: &SearchIndex, enc: Option<&Encoder>| {
        let (d, o) = (evaluate(ix, enc, &dev), evaluate(ix, enc, &own));
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} ({:.1} tools) | {:.3} | {:.3} |",
            d.r1, d.r5, d.r10, d.mrr, d.reserve, d.returned, o.r5, o.reserve
        );
    };
    line("words only (BM25F)", &lexical, None);
    for m in &encoders {
        line(&format!("{}, fused", m.name), &m.fused, Some(&m.encoder));
    }

    println!();
    println!("| cost | result |");
    println!("|---|---|");
    println!(
        "| lexical index build, {} tools | {:.1} ms |",
        corpus.len(),
        ms(build)
    );
    println!(
        "| lexical query (median), {} tools | {:.3} ms |",
        corpus.len(),
        ms(latency(&lexical, None, &own))
    );
    print_stored(&lexical, "lexical");
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
    let big = SearchIndex::new(big_tools.clone());
    println!(
        "| lexical index build, {big_n} tools | {:.1} ms |",
        ms(t.elapsed())
    );
    println!(
        "| lexical query (median), {big_n} tools | {:.3} ms |",
        ms(latency(&big, None, &own))
    );
    print_stored(&big, "lexical");
    for m in &encoders {
        let e = &m.encoder;
        if m.name.starts_with("bundled") {
            println!(
                "| {}: loading the encoder, first process (expanding and keeping its weights) | {:.1} ms |",
                m.name,
                ms(first_load)
            );
        }
        println!("| {}: loading the encoder | {:.1} ms |", m.name, ms(m.load));
        println!(
            "| {}: embedding the corpus (cold, {} tools, all cores) | {:.1} s |",
            m.name,
            corpus.len(),
            m.embed.as_secs_f64()
        );
        let qv = query_vectors(e, &own);
        let mut times: Vec<Duration> = own
            .iter()
            .map(|(q, _)| {
                let t = Instant::now();
                std::hint::black_box(
                    e.embed(&[q.as_str()], semantic::QUERY_TOKENS)
                        .unwrap_or_default(),
                );
                t.elapsed()
            })
            .collect();
        times.sort();
        println!(
            "| {}: embedding one query (median) | {:.2} ms |",
            m.name,
            ms(times[times.len() / 2])
        );
        println!(
            "| fused ranking without the query's embedding (median), {} tools | {:.3} ms |",
            corpus.len(),
            ms(latency(&m.fused, Some(&qv), &own))
        );
        print_stored(&m.fused, "fused");
        let vectors: Vec<f32> = (0..4).flat_map(|_| m.vectors.clone()).collect();
        let big = SearchIndex::new(big_tools.clone()).with_vectors(vectors);
        println!(
            "| fused ranking without the query's embedding (median), {big_n} tools | {:.3} ms |",
            ms(latency(&big, Some(&qv), &own))
        );
        print_stored(&big, "fused");
    }
    let all_schemas: usize = corpus.iter().map(|t| tokens::count(&schema_text(t))).sum();
    let names_only = tokens::count(
        &corpus
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join("\n"),
    );
    println!("| prompt tokens, all schemas (o200k_base) | {all_schemas} |");
    println!(
        "| prompt tokens, names only | {names_only} ({:.1} %) |",
        100.0 * names_only as f64 / all_schemas as f64
    );
    if show_misses {
        let (ix, enc) = match encoders.last() {
            Some(m) => (&m.fused, Some(&m.encoder)),
            None => (&lexical, None),
        };
        for (q, expect) in &dev {
            let ids = ranked_ids(ix, enc, q);
            if !ids.iter().take(5).any(|id| expect.contains(id)) {
                println!(
                    "\nMISS {q:?}\n  want {expect:?}\n  got  {:?}",
                    &ids[..ids.len().min(5)]
                );
            }
        }
    }
}

/// An encoder with the corpus embedded by it, and its fused index.
struct Measured {
    name: &'static str,
    encoder: Encoder,
    load: Duration,
    embed: Duration,
    vectors: Vec<f32>,
    fused: SearchIndex,
}

impl Measured {
    fn new(name: &'static str, encoder: Encoder, load: Duration, corpus: &[SanitizedTool]) -> Self {
        let texts: Vec<String> = corpus.iter().map(semantic::doc_text).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let t = Instant::now();
        let vectors = encoder
            .embed(&refs, semantic::DOC_TOKENS)
            .unwrap_or_else(|err| panic!("{err}"))
            .concat();
        let embed = t.elapsed();
        Measured {
            name,
            load,
            embed,
            fused: SearchIndex::new(corpus.to_vec()).with_vectors(vectors.clone()),
            vectors,
            encoder,
        }
    }
}

#[derive(Default)]
struct Eval {
    r1: f64,
    r5: f64,
    r10: f64,
    mrr: f64,
    reserve: f64,
    returned: f64,
}

/// The index kept on disk: its size, and loading it (median of 11, page cache warm).
fn print_stored(index: &SearchIndex, what: &str) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("index.search");
    let t = Instant::now();
    store::write(index, &path, "bench").unwrap_or_else(|e| panic!("{e}"));
    let write = t.elapsed();
    let size = std::fs::metadata(&path).map_or(0, |m| m.len());
    let mut times: Vec<Duration> = (0..11)
        .map(|_| {
            let t = Instant::now();
            let loaded = store::load(&path, "bench");
            let took = t.elapsed();
            assert!(loaded.is_some_and(|l| l.len() == index.len()));
            took
        })
        .collect();
    times.sort();
    println!(
        "| {what} index file, {} tools: size / write (with token counts) / load | {:.1} MB / {:.0} ms / {:.1} ms |",
        index.len(),
        size as f64 / 1e6,
        ms(write),
        ms(times[5])
    );
}

fn ranked_ids(ix: &SearchIndex, enc: Option<&Encoder>, q: &str) -> Vec<String> {
    ranked(ix, enc, q)
        .iter()
        .map(|&(i, _)| format!("{}/{}", ix.names(i).server, ix.names(i).tool))
        .collect()
}

fn ranked(ix: &SearchIndex, enc: Option<&Encoder>, q: &str) -> Vec<(usize, f32)> {
    let qv = enc.and_then(|e| e.embed(&[q], semantic::QUERY_TOKENS).ok()?.pop());
    ix.rank_with(q, qv.as_deref(), MAX_MATCHES)
}

fn evaluate(ix: &SearchIndex, enc: Option<&Encoder>, queries: &Queries) -> Eval {
    let mut e = Eval::default();
    for (q, expect) in queries {
        let ranked = ranked(ix, enc, q);
        let ids: Vec<String> = ranked
            .iter()
            .map(|&(i, _)| format!("{}/{}", ix.names(i).server, ix.names(i).tool))
            .collect();
        if let Some(p) = ids.iter().position(|id| expect.contains(id)) {
            e.r1 += f64::from(p == 0);
            e.r5 += f64::from(p < 5);
            e.r10 += f64::from(p < 10);
            e.mrr += 1.0 / (p as f64 + 1.0);
        }
        // What `ToolSearch::search` returns: best first, each schema that still fits.
        let mut used = 0;
        let mut returned = 0;
        let mut hit = false;
        for (&(i, _), id) in ranked.iter().take(MAX_MATCHES).zip(&ids) {
            let tokens = ix.schema_tokens(i);
            if used + tokens > RESERVE {
                continue;
            }
            used += tokens;
            returned += 1;
            hit |= expect.contains(id);
        }
        e.reserve += f64::from(hit);
        e.returned += f64::from(returned);
    }
    let n = queries.len().max(1) as f64;
    for v in [
        &mut e.r1,
        &mut e.r5,
        &mut e.r10,
        &mut e.mrr,
        &mut e.reserve,
        &mut e.returned,
    ] {
        *v /= n;
    }
    e
}

fn query_vectors(e: &Encoder, queries: &Queries) -> Vec<Vec<f32>> {
    queries
        .iter()
        .map(|(q, _)| {
            e.embed(&[q.as_str()], semantic::QUERY_TOKENS)
                .ok()
                .and_then(|mut v| v.pop())
                .unwrap_or_default()
        })
        .collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Median time of one ranking (query vectors precomputed when given).
fn latency(index: &SearchIndex, vectors: Option<&[Vec<f32>]>, queries: &Queries) -> Duration {
    let mut times: Vec<Duration> = Vec::new();
    for _ in 0..5 {
        for (k, (q, _)) in queries.iter().enumerate() {
            let qv = vectors.map(|v| v[k].as_slice());
            let t = Instant::now();
            std::hint::black_box(index.rank_with(q, qv, MAX_MATCHES));
            times.push(t.elapsed());
        }
    }
    times.sort();
    times[times.len() / 2]
}

fn own_queries(path: &Path) -> Queries {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    v.as_array()
        .into_iter()
        .flatten()
        .map(|q| {
            (
                q["q"].as_str().unwrap_or_default().to_owned(),
                strings(&q["expect"]),
            )
        })
        .collect()
}

fn dev_queries(path: &Path) -> Queries {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let q: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"));
            (
                q["query"].as_str().unwrap_or_default().to_owned(),
                strings(&q["expected"]),
            )
        })
        .collect()
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e.as_str())
        .map(str::to_owned)
        .collect()
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
