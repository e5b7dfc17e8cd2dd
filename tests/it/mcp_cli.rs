//! `edgar mcp ...` as a user runs it: config editing, listing, laziness, calls, exit codes.

use std::path::Path;

use edgar_tests::{run, user_config};
use serde_json::json;

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar-it");
const FAKE: &str = env!("CARGO_BIN_EXE_fake-mcp-server");

fn home() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"))
}

fn markers(dir: &Path) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

/// 30 servers that leave a marker file when started: listing and warm-cache tool names
/// start none of them.
#[test]
fn listing_starts_nothing() {
    let h = home();
    let marks = h.path().join("markers");
    std::fs::create_dir(&marks).unwrap_or_else(|e| panic!("{e}"));
    let servers: serde_json::Map<String, serde_json::Value> = (0..30)
        .map(|i| {
            let marker = marks.join(format!("s{i}")).display().to_string();
            (
                format!("s{i}"),
                json!({"command": FAKE, "args": ["good"], "env": {"FAKE_MARKER": marker}}),
            )
        })
        .collect();
    user_config(h.path(), json!(servers));

    let r = run(EDGAR, h.path(), &["mcp", "list"], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout.lines().count(), 30);
    assert!(
        r.stdout.lines().all(|l| l.ends_with("never started")),
        "{}",
        r.stdout
    );
    assert_eq!(markers(&marks), 0);

    // Cold: what is ready within the prompt budget is listed, the rest named as still
    // starting; by the time the command exits every server is discovered and cached.
    let r = run(EDGAR, h.path(), &["mcp", "tools"], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let listed = r.stdout.lines().count();
    assert!(
        listed == 150 || r.stderr.contains("still starting: "),
        "{listed} names, and: {}",
        r.stderr
    );
    assert_eq!(markers(&marks), 30, "a cold cache discovers every server");

    for e in std::fs::read_dir(&marks).into_iter().flatten().flatten() {
        std::fs::remove_file(e.path()).unwrap_or_else(|e| panic!("{e}"));
    }
    let r = run(EDGAR, h.path(), &["mcp", "tools", "--json"], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let v = r.json();
    assert_eq!(v.as_array().map(Vec::len), Some(150));
    assert_eq!(
        v[0],
        json!({"name": "s0__echo", "server": "s0", "tool": "echo"})
    );
    let r = run(EDGAR, h.path(), &["mcp", "list"], b"");
    assert!(
        r.stdout.lines().all(|l| l.ends_with("cached: 5 tools")),
        "{}",
        r.stdout
    );
    assert_eq!(markers(&marks), 0, "warm listing started a server");
}

#[test]
fn the_embedded_default_works_with_no_config() {
    let h = home();
    std::fs::write(h.path().join("hello.txt"), "needle in a haystack\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let r = run(EDGAR, h.path(), &["mcp", "tools"], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("workspace__search_text"), "{}", r.stdout);
    let r = run(
        EDGAR,
        h.path(),
        &[
            "mcp",
            "call",
            "workspace__search_text",
            r#"{"query":"NEEDLE"}"#,
        ],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "hello.txt:1: needle in a haystack");
    let r = run(
        EDGAR,
        h.path(),
        &[
            "mcp",
            "call",
            "workspace__read_file",
            r#"{"path":"../../etc/passwd"}"#,
        ],
        b"",
    );
    assert_eq!(r.code, Some(3), "a tool error exits 3: {}", r.stderr);
    assert!(r.stdout.contains("outside the workspace"), "{}", r.stdout);
}

/// `KEY=VALUE` words instead of JSON: each value typed by the tool's schema, so a
/// string property keeps `42` as text and an integer one gets a number.
#[test]
fn a_call_takes_key_value_words_typed_by_the_schema() {
    let h = home();
    let sub = h.path().join("sub");
    std::fs::create_dir(&sub).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(sub.join("a.txt"), "42 apples\n42 pears\n").unwrap_or_else(|e| panic!("{e}"));
    let call = |words: &[&str]| {
        let mut args = vec!["mcp", "call", "workspace__search_text", "path=sub"];
        args.extend_from_slice(words);
        run(EDGAR, h.path(), &args, b"")
    };
    let r = call(&["query=42", "max_results=1"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "sub/a.txt:1: 42 apples");
    // A value the schema refuses is named by the argument check.
    let r = call(&["query=42", "max_results=many"]);
    assert_eq!(r.code, Some(1), "{}", r.stdout);
    assert!(r.stderr.contains("/max_results"), "{}", r.stderr);
    // A word that is neither is a usage error naming it.
    let r = call(&["query"]);
    assert_eq!(r.code, Some(1), "{}", r.stdout);
    assert!(
        r.stderr
            .contains("'query' is neither a JSON object nor KEY=VALUE"),
        "{}",
        r.stderr
    );
}

#[test]
fn add_get_remove_round_trip_and_mask_secrets() {
    let h = home();
    let r = run(
        EDGAR,
        h.path(),
        &[
            "mcp",
            "add",
            "demo",
            "--env",
            "TOKEN=sekrit",
            "--",
            FAKE,
            "good",
        ],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let r = run(
        EDGAR,
        h.path(),
        &[
            "mcp",
            "add",
            "remote",
            "--url",
            "https://example.com/mcp",
            "--header",
            "Authorization: Bearer sekrit",
        ],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let r = run(EDGAR, h.path(), &["mcp", "get", "demo"], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.json()["env"], json!({"TOKEN": "***"}));
    let r = run(EDGAR, h.path(), &["mcp", "get", "remote"], b"");
    assert!(!r.stdout.contains("sekrit"), "{}", r.stdout);
    // Credentials written in a command line or a URL: masked where they are, the rest
    // as written.
    let add = |args: &[&str]| {
        let r = run(EDGAR, h.path(), &[&["mcp", "add"][..], args].concat(), b"");
        assert_eq!(r.code, Some(0), "{}", r.stderr);
    };
    add(&[
        "db",
        "--",
        "/bin/true",
        "--password",
        "sekrit",
        "--token=sekrit",
        "postgres://admin:sekrit@db.example.com/prod",
    ]);
    add(&[
        "remote2",
        "--url",
        "https://u:sekrit@example.com/mcp?token=sekrit&x=1",
    ]);
    let r = run(EDGAR, h.path(), &["mcp", "get", "db"], b"");
    assert!(!r.stdout.contains("sekrit"), "{}", r.stdout);
    assert_eq!(
        r.json()["args"],
        json!([
            "--password",
            "***",
            "--token=***",
            "postgres://admin:***@db.example.com/prod"
        ])
    );
    let r = run(EDGAR, h.path(), &["mcp", "get", "remote2"], b"");
    assert_eq!(
        r.json()["url"],
        json!("https://u:***@example.com/mcp?token=***&x=1")
    );
    // A name already there is never replaced: not by a good entry, not by a bad one
    // (whose undoing would have removed the name, the old entry with it).
    for again in [
        &["db", "--", "/bin/echo"][..],
        &["db", "--", "/bin/echo", "${EDGAR_UNSET_FOR_THIS_TEST}"],
    ] {
        let r = run(EDGAR, h.path(), &[&["mcp", "add"][..], again].concat(), b"");
        assert_eq!(r.code, Some(1), "{}", r.stderr);
        assert!(r.stderr.contains("already there"), "{}", r.stderr);
        let r = run(EDGAR, h.path(), &["mcp", "get", "db"], b"");
        assert_eq!(r.json()["command"], json!("/bin/true"), "{}", r.stdout);
    }
    // Claude Code's form: `--transport http NAME URL`, `-H`; a command there is refused
    // with where it goes.
    add(&[
        "--transport",
        "http",
        "cc",
        "https://example.com/mcp",
        "-H",
        "X-Team: a",
    ]);
    let r = run(EDGAR, h.path(), &["mcp", "get", "cc"], b"");
    assert_eq!(r.json()["url"], json!("https://example.com/mcp"));
    assert_eq!(r.json()["headers"], json!({"X-Team": "***"}));
    let r = run(EDGAR, h.path(), &["mcp", "add", "cmd", "npx"], b"");
    assert_eq!(r.code, Some(1));
    assert!(
        r.stderr
            .contains("a command goes after `--`: edgar mcp add cmd -- npx ..."),
        "{}",
        r.stderr
    );
    let r = run(
        EDGAR,
        h.path(),
        &["mcp", "call", "demo__add", r#"{"a":1,"b":2}"#, "--json"],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(
        r.json(),
        json!({"isError": false, "content": [{"type": "text", "text": "3"}]})
    );
    let r = run(EDGAR, h.path(), &["mcp", "remove", "demo"], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let r = run(EDGAR, h.path(), &["mcp", "remove", "demo"], b"");
    assert_eq!(r.code, Some(1));
    assert!(
        r.stderr.starts_with("edgar: no server named 'demo'"),
        "{}",
        r.stderr
    );
    // A server in the other file: said where it is.
    add(&["pj", "--project", "--", "/bin/true"]);
    let r = run(EDGAR, h.path(), &["mcp", "remove", "pj"], b"");
    assert_eq!(r.code, Some(1));
    assert!(
        r.stderr.contains("it is in") && r.stderr.contains(".mcp.json: add --project"),
        "{}",
        r.stderr
    );
}

#[test]
fn errors_are_one_clear_line_with_exit_1() {
    let h = home();
    std::fs::write(
        h.path().join(".mcp.json"),
        r#"{"mcpServers": {"x": {"command": 7}}}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let r = run(EDGAR, h.path(), &["mcp", "list"], b"");
    assert_eq!(r.code, Some(1));
    assert!(
        r.stderr
            .contains(".mcp.json: server 'x': field 'command': must be a string"),
        "{}",
        r.stderr
    );
    std::fs::remove_file(h.path().join(".mcp.json")).unwrap_or_else(|e| panic!("{e}"));

    user_config(
        h.path(),
        json!({"s": {"command": FAKE, "args": ["old-version"]}}),
    );
    let r = run(EDGAR, h.path(), &["mcp", "call", "s/echo", "{}"], b"");
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("1999-01-01"), "{}", r.stderr);
    let r = run(EDGAR, h.path(), &["mcp", "list"], b"");
    assert!(
        r.stdout.contains("failed: "),
        "the failure is remembered: {}",
        r.stdout
    );
    let r = run(EDGAR, h.path(), &["mcp", "reset", "s"], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let r = run(EDGAR, h.path(), &["mcp", "list"], b"");
    assert!(r.stdout.contains("never started"), "{}", r.stdout);

    let r = run(
        EDGAR,
        h.path(),
        &["mcp", "call", "nope__nothing", "{}"],
        b"",
    );
    assert_eq!(r.code, Some(1));
    let r = run(
        EDGAR,
        h.path(),
        &["mcp", "call", "s/echo", "{not json"],
        b"",
    );
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("not valid JSON"), "{}", r.stderr);
    let r = run(EDGAR, h.path(), &["mcp", "call", "s/echo", "not json"], b"");
    assert_eq!(r.code, Some(1));
    assert!(
        r.stderr.contains("neither a JSON object nor KEY=VALUE"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_changed_command_invalidates_the_cache_and_a_corrupt_entry_is_rebuilt() {
    let h = home();
    user_config(h.path(), json!({"s": {"command": FAKE, "args": ["good"]}}));
    assert_eq!(
        run(EDGAR, h.path(), &["mcp", "tools"], b"")
            .stdout
            .lines()
            .count(),
        5
    );
    let tools_dir = h.path().join("cache/edgar/tools");
    for e in std::fs::read_dir(&tools_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_file())
    {
        std::fs::write(e.path(), b"{corrupt").unwrap_or_else(|e| panic!("{e}"));
    }
    let r = run(EDGAR, h.path(), &["mcp", "tools"], b"");
    assert_eq!(r.stdout.lines().count(), 5, "{}", r.stderr);
    user_config(
        h.path(),
        json!({"s": {"command": FAKE, "args": ["hostile-names"]}}),
    );
    // The new command is discovered afresh, but the server's pins survive the change:
    // its different tools wait for approval.
    let r = run(EDGAR, h.path(), &["mcp", "tools"], b"");
    assert_eq!(r.stdout, "", "{}", r.stderr);
    let files = std::fs::read_dir(&tools_dir)
        .map(|d| d.flatten().filter(|e| e.path().is_file()).count())
        .unwrap_or(0);
    assert_eq!(files, 2, "the old config's entry was replaced");
    let r = run(EDGAR, h.path(), &["mcp", "approve", "s", "--yes"], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let r = run(EDGAR, h.path(), &["mcp", "tools"], b"");
    assert_eq!(r.stdout.lines().count(), 6, "{}{}", r.stdout, r.stderr);
}

/// A failed server is left alone for a while, but an edit of the file its entry is in
/// (here the `env` value it was missing, which does not change the command's digest)
/// may be the fix: the next listing starts it again.
#[test]
fn an_edited_entry_is_tried_again_at_once() {
    let h = home();
    let entry = |ok: &str| {
        json!({"s": {"command": "sh",
                     "args": ["-c", format!("[ -n \"$OK\" ] || {{ echo 'OK is not set' >&2; exit 3; }}; exec {FAKE} good")],
                     "env": {"OK": ok}}})
    };
    user_config(h.path(), entry(""));
    let r = run(EDGAR, h.path(), &["mcp", "tools"], b"");
    assert!(r.stderr.contains("OK is not set"), "{}", r.stderr);
    let r = run(EDGAR, h.path(), &["mcp", "tools"], b"");
    assert!(r.stderr.contains("not started again"), "held: {}", r.stderr);
    user_config(h.path(), entry("1"));
    // Written within the failure's second would read as older: the edit is dated after.
    let file = h.path().join("config/edgar/mcp.json");
    std::fs::File::options()
        .write(true)
        .open(&file)
        .and_then(|f| {
            f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(2))
        })
        .unwrap_or_else(|e| panic!("{e}"));
    let r = run(EDGAR, h.path(), &["mcp", "tools"], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("s__echo"), "{}{}", r.stdout, r.stderr);
}

#[test]
fn tool_filters_apply_without_rediscovery() {
    let h = home();
    let marker = h.path().join("started");
    let env = json!({"FAKE_MARKER": marker.display().to_string()});
    user_config(
        h.path(),
        json!({"s": {"command": FAKE, "args": ["good"], "env": env}}),
    );
    assert_eq!(
        run(EDGAR, h.path(), &["mcp", "tools"], b"")
            .stdout
            .lines()
            .count(),
        5
    );
    std::fs::remove_file(&marker).unwrap_or_else(|e| panic!("{e}"));
    user_config(
        h.path(),
        json!({"s": {"command": FAKE, "args": ["good"], "env": env, "disabled_tools": ["die", "change"]}}),
    );
    let r = run(EDGAR, h.path(), &["mcp", "tools"], b"");
    assert_eq!(
        r.stdout.lines().collect::<Vec<_>>(),
        ["s__echo", "s__add", "s__ask_client"],
        "{}",
        r.stderr
    );
    user_config(
        h.path(),
        json!({"s": {"command": FAKE, "args": ["good"], "env": env, "enabled_tools": ["add"]}}),
    );
    let r = run(EDGAR, h.path(), &["mcp", "tools"], b"");
    assert_eq!(r.stdout.trim(), "s__add", "{}", r.stderr);
    assert!(!marker.exists(), "changing a filter started the server");
    let r = run(EDGAR, h.path(), &["mcp", "call", "s__echo", "{}"], b"");
    assert_eq!(
        r.code,
        Some(1),
        "a filtered-out tool cannot be called: {}",
        r.stdout
    );
}

/// A key edgar does not read is no error (a shared file holds other clients' keys), but a
/// misspelled one, or another client's name for a filter edgar reads elsewhere, is said:
/// ignored silently, `"sandox"` would run the server unconfined and `"excludeTools"`
/// would offer the tools it meant to hide.
#[test]
fn a_misspelled_or_foreign_key_is_named_not_silently_ignored() {
    let h = home();
    user_config(
        h.path(),
        json!({"a": {"command": "/bin/true", "sandox": {"read": ["/srv"]}, "alwaysAllow": []}}),
    );
    std::fs::write(
        h.path().join(".mcp.json"),
        json!({"mcpServers": {"p": {"command": "/bin/true", "excludeTools": ["rm"]}}}).to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let r = run(EDGAR, h.path(), &["mcp", "list"], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("a\tstdio"), "{}", r.stdout);
    let user = h.path().join("config/edgar/mcp.json");
    let expected = format!(
        "{}: server 'a': key 'sandox' is ignored: edgar reads no such key; did you mean \"sandbox\"?",
        user.display()
    );
    assert!(r.stderr.contains(&expected), "{}", r.stderr);
    assert!(
        r.stderr.contains("server 'p': key 'excludeTools' is ignored: Gemini CLI's key; edgar reads \"disabled_tools\""),
        "{}",
        r.stderr
    );
    // Another client's own setting passes in silence.
    assert!(!r.stderr.contains("alwaysAllow"), "{}", r.stderr);
    assert_eq!(r.stderr.matches("is ignored").count(), 2, "{}", r.stderr);
}

/// A program that is not there is said when the server is added, not first at its start
/// (the entry is still added: the program may be installed later).
#[test]
fn adding_a_server_whose_program_is_not_found_says_so() {
    let h = home();
    let add = |args: &[&str]| run(EDGAR, h.path(), &[&["mcp", "add"][..], args].concat(), b"");
    let r = add(&["typo", "--", "no-such-program-for-edgar-tests", "--stdio"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr.contains("note: 'no-such-program-for-edgar-tests' was not found (no executable file of that name is on PATH): typo will not start until it is"),
        "{}",
        r.stderr
    );
    let r = add(&["rel", "--", "./server.js"]);
    assert!(
        r.stderr.contains(
            "(a relative path, and a server without a cwd runs in a private empty directory)"
        ),
        "{}",
        r.stderr
    );
    let r = add(&["gone", "--", "/nonexistent/edgar/server"]);
    assert!(
        r.stderr.contains("(no executable file is at that path)"),
        "{}",
        r.stderr
    );
    for found in [
        &["ok", "--", "sh", "-c", "true"][..],
        &["abs", "--", "/bin/true"],
    ] {
        let r = add(found);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        assert!(!r.stderr.contains("was not found"), "{}", r.stderr);
    }
    let r = run(EDGAR, h.path(), &["mcp", "list"], b"");
    assert_eq!(r.stdout.lines().count(), 5, "{}", r.stdout);
}

/// A token written where no name says it is one (a bare argument, a URL's path) is
/// masked by `mcp get` when the guard's secret rules know its shape, as `mcp scan`
/// masks it; everything else is shown as written.
#[test]
fn get_masks_a_bare_token_the_secret_rules_know() {
    let h = home();
    let pat = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let slack = "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx";
    user_config(
        h.path(),
        json!({
            "bare": {"command": "/bin/true", "args": [pat, "--mode", "plain-arg"]},
            "web": {"url": format!("https://h.example/mcp/{slack}")},
        }),
    );
    let r = run(EDGAR, h.path(), &["mcp", "get", "bare"], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!r.stdout.contains(pat), "{}", r.stdout);
    assert_eq!(
        r.json()["args"],
        json!([
            "[masked by edgar: github-pat (gitleaks)]",
            "--mode",
            "plain-arg"
        ])
    );
    let r = run(EDGAR, h.path(), &["mcp", "get", "web"], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!r.stdout.contains(slack), "{}", r.stdout);
    assert!(
        r.json()["url"]
            .as_str()
            .is_some_and(|u| u.starts_with("https://h.example/mcp/[masked by edgar: ")),
        "{}",
        r.stdout
    );
}
