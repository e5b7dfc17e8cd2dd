//! The semantic stage of `tool_search`: with the larger model (installed by `.ci/test`
//! with `edgar search-model install`) the encoder reproduces the reference embedding and
//! the CLI embeds a catalog once and reuses the vectors; in a fresh home with nothing
//! installed the bundled encoder ranks by meaning; with `EDGAR_SEARCH_ENCODER=words`
//! search is by words, said once.

use edgar_host::tools::search::model::Encoder;
use edgar_tests::{Run, installed, test_deps, user_config};
use serde_json::json;

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar-it");

fn model_dir() -> std::path::PathBuf {
    installed("search-model/model.safetensors");
    test_deps().join("search-model")
}

fn edgar(home: &std::path::Path, model: &std::path::Path, args: &[&str]) -> Run {
    edgar_logging(home, model, args, "warn")
}

fn edgar_logging(home: &std::path::Path, model: &std::path::Path, args: &[&str], log: &str) -> Run {
    edgar_with(home, model, args, log, "auto")
}

fn edgar_with(
    home: &std::path::Path,
    model: &std::path::Path,
    args: &[&str],
    log: &str,
    encoder: &str,
) -> Run {
    let out = std::process::Command::new(EDGAR)
        .args(args)
        .env("EDGAR_LOG", log)
        .env("EDGAR_SEARCH_ENCODER", encoder)
        .env("HOME", home)
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("EDGAR_SEARCH_MODEL", model)
        .env_remove("EDGAR_CACHE_DIR")
        .env_remove("EDGAR_CONFIG")
        .current_dir(home)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    Run::from(out)
}

#[test]
fn the_encoder_reproduces_the_reference_embedding() {
    let encoder = Encoder::load(&model_dir()).unwrap_or_else(|e| panic!("{e}"));
    let v = encoder
        .embed(&["create a github issue", "Café naïve 工具 x"], 128)
        .unwrap_or_else(|e| panic!("{e}"));
    // The first values of sentence-transformers' all-MiniLM-L6-v2 embeddings of these
    // texts (mean pooling, normalized), computed outside edgar.
    let want: [[f32; 6]; 2] = [
        [-0.02086, -0.10294, -0.07378, 0.02337, 0.00726, -0.04829],
        [-0.01369, -0.00759, 0.06361, 0.00002, 0.03091, 0.01966],
    ];
    for (got, want) in v.iter().zip(want) {
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 2e-4, "{:?} vs {want:?}", &got[..6]);
        }
        let norm: f32 = got.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4);
    }
    let docs = encoder
        .embed(
            &[
                "filesystem: list directory. Get a detailed listing of all files and directories in a specified path.",
                "slack: slack post message. Post a new message to a Slack channel",
            ],
            64,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let q = encoder
        .embed(&["what is inside this folder"], 128)
        .unwrap_or_else(|e| panic!("{e}"));
    let cos = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    assert!(cos(&q[0], &docs[0]) > cos(&q[0], &docs[1]) + 0.2);
}

/// The weights are mapped, so a damaged file must be refused at load, by name, before any
/// tensor is read: cut short, or shifted off f32 alignment.
#[test]
fn a_damaged_model_file_is_refused_at_load() {
    let model =
        std::fs::read(model_dir().join("model.safetensors")).unwrap_or_else(|e| panic!("{e}"));
    let header = u64::from_le_bytes(model[..8].try_into().unwrap_or_default()) as usize;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::copy(model_dir().join("vocab.txt"), dir.path().join("vocab.txt"))
        .unwrap_or_else(|e| panic!("{e}"));
    let shifted = {
        // One more byte of header (a space, still valid JSON) moves every tensor by one.
        let mut v = ((header + 1) as u64).to_le_bytes().to_vec();
        v.extend_from_slice(&model[8..8 + header]);
        v.push(b' ');
        v.extend_from_slice(&model[8 + header..]);
        v
    };
    for (what, bytes, says) in [
        ("cut short", &model[..model.len() / 2], "past the end"),
        ("no header", &model[..4], "shorter than its header"),
        ("misaligned", &shifted[..], "not aligned"),
    ] {
        std::fs::write(dir.path().join("model.safetensors"), bytes)
            .unwrap_or_else(|e| panic!("{e}"));
        match Encoder::load(dir.path()) {
            Ok(_) => panic!("{what}: loaded"),
            Err(e) => assert!(e.to_string().contains(says), "{what}: {e}"),
        }
    }
}

/// A home whose one server is the real filesystem server over an empty directory.
fn files_home() -> tempfile::TempDir {
    let fs = installed("npm/node_modules/.bin/mcp-server-filesystem");
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let shared = home.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap_or_else(|e| panic!("{e}"));
    user_config(
        home.path(),
        json!({"files": {"command": fs, "args": [shared]}}),
    );
    home
}

#[test]
fn the_cli_embeds_a_catalog_once_and_ranks_by_words_when_asked() {
    let home = files_home();
    let model = model_dir();
    let first = edgar(
        home.path(),
        &model,
        &["tool-search", "what is inside this folder", "--json"],
    );
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    assert_eq!(
        first.stderr.matches("embedding").count(),
        1,
        "{}",
        first.stderr
    );
    let names: Vec<String> = first.json()["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["tool"].as_str().map(str::to_owned))
        .collect();
    assert!(
        names
            .iter()
            .take(3)
            .any(|n| n.starts_with("list_directory")),
        "{names:?}"
    );
    let vectors = home.path().join("cache/edgar/search");
    assert!(
        std::fs::read_dir(&vectors).is_ok_and(|mut d| d.any(|e| e.is_ok())),
        "no vector cache in {}",
        vectors.display()
    );
    // The same catalog again: nothing embedded, the same answer.
    let second = edgar(
        home.path(),
        &model,
        &["tool-search", "what is inside this folder", "--json"],
    );
    assert!(!second.stderr.contains("embedding"), "{}", second.stderr);
    assert_eq!(first.json()["tools"], second.json()["tools"]);

    // Words only when asked: said once on stderr, and the search still answers.
    let r = edgar_with(
        home.path(),
        &model,
        &["tool-search", "list_directory"],
        "warn",
        "words",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(
        r.stderr.matches("semantic search is off").count(),
        1,
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("EDGAR_SEARCH_ENCODER=words"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.contains("files__list_directory"), "{}", r.stdout);
}

/// Tool names of a `tool-search --json` answer, best first.
fn found(r: &Run) -> Vec<String> {
    r.json()["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["tool"].as_str().map(str::to_owned))
        .collect()
}

/// A fresh home, nothing installed: the bundled encoder ranks by meaning (a question
/// that shares no word with the tool finds it; by words it does not), says which encoder
/// it is, and keeps its expansion and the catalog's vectors for the next search.
#[test]
fn a_fresh_home_ranks_by_meaning_with_the_bundled_encoder() {
    let home = files_home();
    let none = home.path().join("no-model");
    let query = ["tool-search", "how big is this document", "--json"];
    let by_meaning = edgar(home.path(), &none, &query);
    assert_eq!(by_meaning.code, Some(0), "{}", by_meaning.stderr);
    assert!(
        !by_meaning.stderr.contains("semantic search is off"),
        "{}",
        by_meaning.stderr
    );
    assert!(
        found(&by_meaning)
            .iter()
            .take(3)
            .any(|t| t == "get_file_info"),
        "{:?}",
        found(&by_meaning)
    );
    let by_words = edgar_with(home.path(), &none, &query, "warn", "words");
    assert!(
        !found(&by_words)
            .iter()
            .take(5)
            .any(|t| t == "get_file_info"),
        "{:?}",
        found(&by_words)
    );
    let search = home.path().join("cache/edgar/search");
    let kept: Vec<String> = std::fs::read_dir(&search)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        kept.iter().any(|f| f.ends_with(".f32")) && kept.iter().any(|f| f.starts_with("vectors-")),
        "{kept:?}"
    );
    let again = edgar(home.path(), &none, &query);
    assert!(!again.stderr.contains("embedding"), "{}", again.stderr);
    assert_eq!(found(&again), found(&by_meaning));

    let status = edgar(home.path(), &none, &["search-model"]);
    assert_eq!(status.code, Some(0), "{}", status.stderr);
    assert!(
        status
            .stdout
            .starts_with("in use: all-MiniLM-L6-v2 (4-bit), bundled"),
        "{}",
        status.stdout
    );
    assert!(
        status.stdout.contains("are not installed"),
        "{}",
        status.stdout
    );
    let status = edgar(home.path(), &model_dir(), &["search-model"]);
    assert!(
        status
            .stdout
            .starts_with("in use: all-MiniLM-L6-v2 (installed"),
        "{}",
        status.stdout
    );
}

/// The index files under the cache (one per configuration and model).
fn index_files(home: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(home.join("cache/edgar/tools"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "search"))
        .collect();
    files.sort();
    files
}

#[test]
fn a_warm_search_loads_the_kept_index_and_a_changed_catalog_rebuilds_it() {
    let home = files_home();
    let model = model_dir();
    // The answer, and whether the index was loaded from its file or kept in it (the
    // debug log says which).
    let search = |query: &str| {
        let r = edgar_logging(
            home.path(),
            &model,
            &["tool-search", query, "--json"],
            "edgar_host::tools=debug",
        );
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        let how = if r.stderr.contains("search index loaded") {
            "loaded"
        } else if r.stderr.contains("search index kept") {
            "kept"
        } else {
            "built"
        };
        (r.json()["tools"].clone(), how)
    };
    // The first search discovers the server (running: nothing kept); the second reads the
    // cache and keeps the index; the third loads it.
    let (discovered, how) = search("what is inside this folder");
    assert_eq!(how, "built");
    assert!(index_files(home.path()).is_empty());
    assert_eq!(
        search("what is inside this folder"),
        (discovered.clone(), "kept")
    );
    let kept = index_files(home.path());
    assert_eq!(kept.len(), 1, "{kept:?}");
    let bytes = std::fs::read(&kept[0]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        search("what is inside this folder"),
        (discovered.clone(), "loaded")
    );
    let (named, how) = search("files/list_directory");
    assert_eq!(
        (&named[0]["tool"], how),
        (&json!("list_directory"), "loaded")
    );

    // A damaged index is ignored, the answer unchanged, and a good one written again.
    std::fs::write(&kept[0], &bytes[..bytes.len() / 2]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        search("what is inside this folder"),
        (discovered.clone(), "kept")
    );
    assert_eq!(std::fs::read(&kept[0]).ok().as_deref(), Some(&bytes[..]));

    // Without the model the bundled encoder's index is another file; the model's stays.
    let none = home.path().join("no-model");
    let r = edgar(home.path(), &none, &["tool-search", "list_directory"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(index_files(home.path()).len(), 2);

    // Discovering again rewrites the server's entry: every kept index is stale and gone.
    let r = edgar(home.path(), &model, &["mcp", "tools", "--refresh"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(index_files(home.path()).is_empty());
    assert_eq!(search("what is inside this folder").1, "kept");
    assert_eq!(search("what is inside this folder").1, "loaded");
    assert_eq!(index_files(home.path()).len(), 1);
}
