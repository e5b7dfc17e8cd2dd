//! `edgar guard ...` as a user runs it.

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
        r.stderr.contains("must export edgar:schema/adapter@0.1.0"),
        "{}",
        r.stderr
    );
}
