//! A lazy host never makes a command wait on a server it does not need: a call starts
//! only its own server, and a server that failed is left alone for a cool-down.

use std::path::{Path, PathBuf};

use edgar_tests::{run, user_config};
use serde_json::json;

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar-it");
const FAKE: &str = env!("CARGO_BIN_EXE_fake-mcp-server");

/// `ok` (a good server) and `stuck` (never answers `initialize`; 3 s deadline), each
/// leaving a marker file when it is started.
fn two_servers(home: &Path) -> (PathBuf, PathBuf) {
    let ok = home.join("ok.started");
    let stuck = home.join("stuck.started");
    user_config(
        home,
        json!({
            "ok": {"command": FAKE, "args": ["good"], "env": {"FAKE_MARKER": ok.display().to_string()}},
            "stuck": {"command": FAKE, "args": ["silent"], "startup_timeout_sec": 3,
                      "env": {"FAKE_MARKER": stuck.display().to_string()}},
        }),
    );
    (ok, stuck)
}

#[test]
fn a_call_starts_only_its_own_server() {
    let h = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (ok, stuck) = two_servers(h.path());
    // Empty cache: the name's prefix says which server to start.
    let r = run(
        EDGAR,
        h.path(),
        &["mcp", "call", "ok__echo", r#"{"text":"hi"}"#],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "hi");
    assert!(ok.exists());
    assert!(!stuck.exists(), "the call started a server it did not need");
    // `server/tool` never starts another server either.
    let r = run(
        EDGAR,
        h.path(),
        &["mcp", "call", "ok/echo", r#"{"text":"x"}"#],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!stuck.exists());

    // Where the time went, per phase, and the first call's round trip.
    let r = run(EDGAR, h.path(), &["mcp", "list", "--timings"], b"");
    let ok_row = r
        .stdout
        .lines()
        .find(|l| l.starts_with("ok\t"))
        .unwrap_or_default();
    let cells: Vec<&str> = ok_row.split('\t').collect();
    assert_eq!(cells.len(), 8, "{}", r.stdout);
    assert!(cells[1..7].iter().all(|c| c.ends_with(" ms")), "{ok_row}");
    assert!(r.stdout.contains("stuck\tnot measured yet"), "{}", r.stdout);
    let r = run(
        EDGAR,
        h.path(),
        &["mcp", "list", "--json", "--timings"],
        b"",
    );
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap_or_default();
    assert_eq!(v[0]["name"], "ok");
    assert_eq!(v[0]["timings"]["ok"], true);
    assert!(v[0]["timings"]["first_call_ms"].is_u64(), "{v}");
}

#[test]
fn a_failed_server_is_left_alone_until_named_reset_or_changed() {
    let h = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (_, stuck) = two_servers(h.path());
    let tools = |args: &[&str]| {
        let mut a = vec!["mcp", "tools"];
        a.extend_from_slice(args);
        run(EDGAR, h.path(), &a, b"")
    };
    // The first command lists every live server's tools and waits out the dead one's
    // deadline, once, naming it (a person asked; the prompt's budget is not theirs).
    let first = tools(&[]);
    assert!(stuck.exists());
    assert!(first.stdout.contains("ok__echo"), "{}", first.stdout);
    assert!(
        first.stderr.contains("'stuck'") && first.stderr.contains("within 3 s"),
        "{}",
        first.stderr
    );
    std::fs::remove_file(&stuck).unwrap_or_else(|e| panic!("{e}"));

    // The next one does not start it, and says when it will be tried again.
    let second = tools(&[]);
    assert!(second.stdout.contains("ok__echo"), "{}", second.stdout);
    assert!(!stuck.exists(), "a failed server was started again");
    assert!(
        second.stderr.contains("not started again for"),
        "{}",
        second.stderr
    );
    let list = run(EDGAR, h.path(), &["mcp", "list"], b"");
    assert!(list.stdout.contains("tried again in"), "{}", list.stdout);
    let list = run(EDGAR, h.path(), &["mcp", "list", "--timings"], b"");
    let row = list
        .stdout
        .lines()
        .find(|l| l.starts_with("stuck\t"))
        .unwrap_or_default();
    assert!(
        row.contains("(failed)") && row.contains("\t-\t"),
        "{}",
        list.stdout
    );

    // Naming it tries it at once.
    tools(&["stuck"]);
    assert!(stuck.exists(), "a named server was not tried");
    std::fs::remove_file(&stuck).unwrap_or_else(|e| panic!("{e}"));

    // So does a reset.
    let r = run(EDGAR, h.path(), &["mcp", "reset", "stuck"], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    tools(&[]);
    assert!(stuck.exists(), "reset did not end the cool-down");
    std::fs::remove_file(&stuck).unwrap_or_else(|e| panic!("{e}"));

    // And a changed command line is another server.
    let ok = h.path().join("ok.started");
    user_config(
        h.path(),
        json!({
            "ok": {"command": FAKE, "args": ["good"], "env": {"FAKE_MARKER": ok.display().to_string()}},
            "stuck": {"command": FAKE, "args": ["silent", "--v2"], "startup_timeout_sec": 3,
                      "env": {"FAKE_MARKER": stuck.display().to_string()}},
        }),
    );
    tools(&[]);
    assert!(stuck.exists(), "a changed config did not end the cool-down");
}

#[test]
fn discovering_many_servers_shows_progress_on_a_terminal_only() {
    let h = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    user_config(
        h.path(),
        json!({
            "ok": {"command": FAKE, "args": ["good"]},
            "slow": {"command": FAKE, "args": ["slow-init"], "startup_timeout_sec": 20},
        }),
    );
    // `script` (util-linux) gives edgar a terminal; its output is that terminal's.
    let command = format!("{EDGAR} mcp tools --refresh");
    let tty = run("script", h.path(), &["-qec", &command, "/dev/null"], b"");
    assert_eq!(tty.code, Some(0), "{}{}", tty.stdout, tty.stderr);
    assert!(
        tty.stdout
            .contains("discovering MCP servers: 1/2 done; waiting on 'slow'"),
        "{}",
        tty.stdout
    );
    assert!(tty.stdout.contains("slow__echo"), "{}", tty.stdout);
    let piped = run(EDGAR, h.path(), &["mcp", "tools", "--refresh"], b"");
    assert_eq!(piped.code, Some(0), "{}", piped.stderr);
    assert!(!piped.stderr.contains("discovering"), "{}", piped.stderr);
    assert!(piped.stdout.contains("slow__echo"), "{}", piped.stdout);
}

#[test]
fn a_hashed_name_resolves_to_its_server_without_starting_others() {
    let h = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = "a_rather_long_server_name_for_hashing";
    let tool = "fetch_the_complete_history_of_every_pull_request_review_comment";
    let tools = h.path().join("tools.json");
    std::fs::write(
        &tools,
        json!([{"name": tool, "inputSchema": {"type": "object"}}]).to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let stuck = h.path().join("stuck.started");
    user_config(
        h.path(),
        json!({
            server: {"command": FAKE, "args": ["good"], "env": {"FAKE_TOOLS": tools.display().to_string()}},
            "stuck": {"command": FAKE, "args": ["silent"], "startup_timeout_sec": 3,
                      "env": {"FAKE_MARKER": stuck.display().to_string()}},
        }),
    );
    let named = run(EDGAR, h.path(), &["guard", "tool-name", server, tool], b"");
    let name = named.stdout.trim().trim_matches('"').to_owned();
    assert!(
        name.len() <= 64 && name.matches("__").count() >= 2,
        "{name}"
    );
    let r = run(
        EDGAR,
        h.path(),
        &["mcp", "call", &name, r#"{"text":"hashed"}"#],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "hashed");
    assert!(!stuck.exists(), "a hashed name started another server");
}
