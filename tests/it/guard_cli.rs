//! `edgar guard ...` as a user runs it.

use std::path::Path;

use edgar_tests::{run, test_adapter};

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar-it");

fn home() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn tool_name_prints_json() {
    let h = home();
    let r = run(
        EDGAR,
        h.path(),
        &["guard", "tool-name", "github", "create_issue"],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.json(), "github__create_issue");
}

#[test]
fn to_schema_reads_stdin_and_reports_drops() {
    let h = home();
    let tool = br#"{"name":"q","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-y":1}}}}"#;
    let r = run(
        EDGAR,
        h.path(),
        &["guard", "to-schema", "--server", "db"],
        tool,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let v = r.json();
    assert_eq!(v["name"], "db__q");
    assert_eq!(v["dropped"][0]["reason"], "vendor keyword; dropped");
}

#[test]
fn a_rejection_is_one_line_on_stderr_and_exit_1() {
    let h = home();
    let r = run(EDGAR, h.path(), &["guard", "to-schema"], b"[1,2,3]");
    assert_eq!(r.code, Some(1));
    assert!(r.stdout.is_empty());
    assert_eq!(r.stderr.trim().lines().count(), 1, "{}", r.stderr);
    assert!(r.stderr.contains("not a JSON object"), "{}", r.stderr);
}

#[test]
fn to_result_converts_blocks() {
    let h = home();
    let r = run(
        EDGAR,
        h.path(),
        &["guard", "to-result"],
        br#"{"content":[{"type":"text","text":"hi"}],"isError":true}"#,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(
        r.json(),
        serde_json::json!({"isError": true, "content": [{"type": "text", "text": "hi"}]})
    );
}

#[test]
fn a_third_party_adapter_runs_under_the_same_sandbox() {
    let h = home();
    let adapter = test_adapter("misbehaving");
    let adapter = adapter.to_str().unwrap_or_default();
    let r = run(
        EDGAR,
        h.path(),
        &["guard", "tool-name", "s", "t", "--adapter", adapter],
        b"",
    );
    assert_eq!(r.json(), "s__t");
    let r = run(
        EDGAR,
        h.path(),
        &["guard", "tool-name", "s", "loop", "--adapter", adapter],
        b"",
    );
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("time limit"), "{}", r.stderr);
    let other = test_adapter("other-version");
    let r = run(
        EDGAR,
        h.path(),
        &[
            "guard",
            "tool-name",
            "s",
            "t",
            "--adapter",
            other.to_str().unwrap_or_default(),
        ],
        b"",
    );
    assert_eq!(r.code, Some(1));
    assert!(
        r.stderr.contains("must export edgar:schema/adapter@0.2.2"),
        "{}",
        r.stderr
    );
}

#[test]
fn to_schema_lowers_for_a_provider_and_reports_the_losses() {
    let h = home();
    let tool = br#"{"name":"q","inputSchema":{"type":"object","properties":{"when":{"type":"string","format":"uri"},"n":{"type":"integer"}},"required":["n"]}}"#;
    let r = run(
        EDGAR,
        h.path(),
        &[
            "guard",
            "to-schema",
            "--server",
            "db",
            "--provider",
            "openai-strict",
        ],
        tool,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let v = r.json();
    assert_eq!(v["provider"], "openai-strict");
    assert_eq!(
        v["input_schema"]["required"],
        serde_json::json!(["when", "n"])
    );
    assert_eq!(v["input_schema"]["additionalProperties"], false);
    assert_eq!(
        v["accepted_input_schema"]["required"],
        serde_json::json!(["n"])
    );
    let reasons: Vec<String> = v["losses"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| {
            format!(
                "{} {}",
                l["path"].as_str().unwrap_or(""),
                l["reason"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("/properties/when/format ")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("/properties/when ") && r.contains("nullable")),
        "{reasons:?}"
    );
    let r = run(
        EDGAR,
        h.path(),
        &["guard", "to-schema", "--provider", "mistral"],
        tool,
    );
    assert_eq!(r.code, Some(2));
    assert!(
        r.stderr
            .contains("one of generic, anthropic, openai-strict, gemini"),
        "{}",
        r.stderr
    );
}

fn corpus_dir() -> String {
    edgar_tests::fixture("corpus")
        .to_string_lossy()
        .into_owned()
}

/// `edgar guard check` with `adapter`, over `corpus` (the built-in sample when `None`).
fn check(home: &Path, adapter: &Path, corpus: Option<&str>) -> edgar_tests::Run {
    let mut args = vec![
        "guard",
        "check",
        "--adapter",
        adapter.to_str().unwrap_or_default(),
    ];
    if let Some(dir) = corpus {
        args.extend(["--corpus", dir]);
    }
    run(EDGAR, home, &args, b"")
}

/// The kit passes the reference adapter over the whole corpus, every invariant named.
#[test]
fn the_kit_passes_the_reference_adapter_over_the_corpus() {
    let h = home();
    let r = run(
        EDGAR,
        h.path(),
        &["guard", "check", "--corpus", &corpus_dir()],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    for invariant in [
        "loads",
        "schemas",
        "names",
        "hostile inputs",
        "providers",
        "determinism",
        "time",
        "memory",
    ] {
        assert!(
            r.stdout.contains(&format!("pass  {invariant}")),
            "{invariant}: {}",
            r.stdout
        );
    }
    assert!(
        r.stdout.contains("2506 accepted, 0 refused"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("pass  findings") && r.stdout.contains("; 0 scans refused"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("openai-strict: 2506/2506 valid"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("gemini: 2506/2506 valid"), "{}", r.stdout);
    assert!(
        r.stdout
            .ends_with("result: pass (10 of 10 invariants hold)\n"),
        "{}",
        r.stdout
    );
}

/// Each adapter in `tests/adapters/` fails the kit, with the invariant it breaks named.
#[test]
fn the_kit_fails_each_bad_adapter_naming_the_invariant() {
    let h = home();
    for (adapter, broken) in [
        ("misbehaving", "FAIL  schemas"),
        ("previous-version", "FAIL  names"),
        ("other-version", "FAIL  loads"),
        ("wrong-shape", "FAIL  loads"),
        ("hostile_memories", "FAIL  schemas"),
        ("hostile_tables", "FAIL  names"),
    ] {
        let r = check(h.path(), &test_adapter(adapter), None);
        assert_eq!(r.code, Some(1), "{adapter}: {}{}", r.stdout, r.stderr);
        assert!(r.stdout.contains(broken), "{adapter}: {}", r.stdout);
        assert!(r.stdout.contains("result: fail"), "{adapter}: {}", r.stdout);
        if adapter == "previous-version" {
            // The previous contract loads; its naive names collide.
            let loads = "pass  loads           exports edgar:schema/adapter@0.1";
            assert!(r.stdout.contains(loads), "{}", r.stdout);
        }
    }
}

/// The JavaScript adapter (`tests/adapters/js`, built by ComponentizeJS in `.ci/test`)
/// passes the kit: the contract is language-neutral. It lowers for `generic` only and
/// refuses the other providers, which the report shows.
#[test]
fn the_kit_passes_the_javascript_adapter() {
    let h = home();
    let js = edgar_tests::installed("js-adapter/adapter.wasm");
    let r = check(h.path(), &js, Some(&corpus_dir()));
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("2506 accepted, 0 refused"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("generic: 2506/2506 valid"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("gemini: 0/2506 valid, no constraints, 0 changes, 2506 refused"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .ends_with("result: pass (10 of 10 invariants hold)\n"),
        "{}",
        r.stdout
    );
    // And the CLI uses it like any adapter.
    let r = run(
        EDGAR,
        h.path(),
        &[
            "guard",
            "tool-name",
            "s",
            "a.b",
            "--adapter",
            js.to_str().unwrap_or_default(),
        ],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let name = r.json();
    assert!(
        name.as_str().is_some_and(|n| n.starts_with("s__a_b__")),
        "{name}"
    );
}

/// The adapter template (`wit/template`, built by `.ci/test` with the one command its
/// README gives) passes the kit, and its own policy shows.
#[test]
fn the_kit_passes_the_adapter_template() {
    let h = home();
    let wasm = edgar_tests::installed("template/wasm32-wasip2/release/my_schema_adapter.wasm");
    let wasm = wasm.to_str().unwrap_or_default();
    let r = check(h.path(), Path::new(wasm), Some(&corpus_dir()));
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .ends_with("result: pass (10 of 10 invariants hold)\n"),
        "{}",
        r.stdout
    );
    let r = run(
        EDGAR,
        h.path(),
        &["guard", "to-schema", "--server", "demo", "--adapter", wasm],
        br#"{"name": "x", "description": "does x"}"#,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.json()["description"], "[demo] does x");
}

/// A reader that stops early (`edgar guard check | head -1`) ends edgar quietly with the
/// status a shell gives a writer killed by SIGPIPE, not with a panic.
#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    let h = home();
    let mut cmd = std::process::Command::new(EDGAR);
    let mut child = edgar_tests::in_home(&mut cmd, h.path())
        .args(["guard", "check"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
