//! The smaller hostile-input fixes, each through the real binary: what a stdio server
//! inherits, plain-http secrets, file modes, exit codes and log output.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use edgar_tests::{run, user_config};
use serde_json::json;

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar-it");
const FAKE: &str = env!("CARGO_BIN_EXE_fake-mcp-server");

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn a_stdio_server_inherits_no_keys_unless_its_entry_says_so() {
    let h = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let tools = h.path().join("tools.json");
    std::fs::write(
        &tools,
        r#"[{"name": "env", "inputSchema": {"type": "object"}}]"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let entry = |inherit: bool| {
        json!({"command": FAKE, "args": ["good"], "env_inherit": inherit,
               "env": {"FAKE_TOOLS": tools.display().to_string(), "GIVEN": "1"}})
    };
    user_config(h.path(), json!({"plain": entry(false), "all": entry(true)}));
    let with_key = |server: &str| {
        run(
            "env",
            h.path(),
            &[
                "ANTHROPIC_API_KEY=sk-test-inherited",
                "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
                EDGAR,
                "mcp",
                "call",
                &format!("{server}__env"),
            ],
            b"",
        )
    };
    let plain = with_key("plain");
    assert_eq!(plain.code, Some(0), "{}", plain.stderr);
    let names: Vec<&str> = plain.stdout.trim().split(',').collect();
    assert!(names.contains(&"PATH") && names.contains(&"HOME") && names.contains(&"GIVEN"));
    // The machine's certificate authorities, which hold no key, are passed.
    assert!(names.contains(&"SSL_CERT_FILE"), "{names:?}");
    assert!(!names.contains(&"ANTHROPIC_API_KEY"), "{names:?}");
    assert!(
        !names.contains(&"EDGAR_TEST_DEPS") && !names.contains(&"CARGO"),
        "{names:?}"
    );
    let all = with_key("all");
    assert!(
        all.stdout
            .split(',')
            .any(|n| n.trim() == "ANTHROPIC_API_KEY"),
        "{}",
        all.stdout
    );
}

#[test]
fn configured_headers_never_go_to_plain_http_on_another_host() {
    let h = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // 192.0.2.0/24 is reserved for documentation: nothing answers there, so only a
    // refusal before any connection can make this fast and clear.
    user_config(
        h.path(),
        json!({"far": {"url": "http://192.0.2.1/mcp", "headers": {"Authorization": "Bearer x"}}}),
    );
    let started = std::time::Instant::now();
    let r = run(EDGAR, h.path(), &["mcp", "call", "far/tool", "{}"], b"");
    assert_eq!(r.code, Some(1));
    assert!(
        r.stderr
            .contains("refusing to send its configured headers ('Authorization') in clear text"),
        "{}",
        r.stderr
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    std::fs::write(
        h.path().join("config/edgar/config.json"),
        r#"{"credential_store": "file"}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let login = run(
        EDGAR,
        h.path(),
        &["mcp", "login", "far", "--no-browser"],
        b"",
    );
    assert_eq!(login.code, Some(1));
    assert!(login.stderr.contains("over plain http"), "{}", login.stderr);
}

#[test]
fn files_are_created_private_and_an_existing_config_keeps_its_mode() {
    let h = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let r = run(
        EDGAR,
        h.path(),
        &["mcp", "add", "s", "--", FAKE, "good"],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let config = h.path().join("config/edgar/mcp.json");
    assert_eq!(mode(&config), 0o600);
    assert_eq!(mode(&h.path().join("config/edgar")), 0o700);
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o640))
        .unwrap_or_else(|e| panic!("{e}"));
    let r = run(
        EDGAR,
        h.path(),
        &["mcp", "add", "t", "--", FAKE, "good"],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(mode(&config), 0o640, "the user's chmod was undone");
    let r = run(
        EDGAR,
        h.path(),
        &["mcp", "call", "s__echo", r#"{"text": "x"}"#],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(mode(&h.path().join("cache/edgar/logs/s.log")), 0o600);
    // Files 0600, directories (failures, timings) 0700, all the way down.
    let mut dirs = vec![h.path().join("cache/edgar/tools")];
    while let Some(dir) = dirs.pop() {
        for f in std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{e}"))
            .flatten()
        {
            if f.path().is_dir() {
                assert_eq!(mode(&f.path()), 0o700, "{}", f.path().display());
                dirs.push(f.path());
            } else {
                assert_eq!(mode(&f.path()), 0o600, "{}", f.path().display());
            }
        }
    }
}

#[test]
fn account_exits_1_when_no_key_is_found() {
    let h = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let r = run(
        "env",
        h.path(),
        &["-u", "NOPE_API_KEY", EDGAR, "account", "nope"],
        b"",
    );
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    let r = run(
        "env",
        h.path(),
        &[
            "NOPE_API_KEY=0123456789abcdef0123456789abcdef-xyz",
            EDGAR,
            "account",
            "nope",
        ],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(!r.stdout.contains("0123456789abcdef0123"), "{}", r.stdout);
}

#[test]
fn logs_off_a_terminal_have_no_colour_and_a_failure_is_said_once() {
    let h = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    user_config(
        h.path(),
        json!({"old": {"command": FAKE, "args": ["old-version"]},
               "names": {"command": FAKE, "args": ["hostile-names"]}}),
    );
    let r = run(EDGAR, h.path(), &["mcp", "tools", "names"], b"");
    assert!(
        r.stderr.contains("edgar: warning: "),
        "a warning is expected here: {}",
        r.stderr
    );
    assert!(
        !r.stderr.contains('\u{1b}'),
        "colour codes on a pipe: {:?}",
        r.stderr
    );
    let r = run(EDGAR, h.path(), &["mcp", "call", "old/echo", "{}"], b"");
    assert_eq!(r.code, Some(1));
    assert_eq!(r.stderr.matches("1999-01-01").count(), 1, "{}", r.stderr);
}

#[test]
fn a_tool_nested_too_deep_is_refused_at_once_instead_of_waiting_for_the_deadline() {
    let h = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    user_config(
        h.path(),
        json!({"deep": {"command": FAKE, "args": ["deep"], "startup_timeout_sec": 30}}),
    );
    let started = std::time::Instant::now();
    let r = run(EDGAR, h.path(), &["mcp", "tools", "deep"], b"");
    // The tool list stays text until the guard reads each tool: the deep one is refused
    // with a note, and the answer comes at once.
    assert!(
        r.stderr.contains("tool refused") && r.stderr.contains("recursion limit exceeded"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.trim().is_empty(), "{}", r.stdout);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "waited {:?}: the 30 s deadline, not an immediate failure",
        started.elapsed()
    );
}

#[test]
fn a_server_cannot_pile_up_tool_pages_past_a_byte_budget() {
    let h = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    user_config(
        h.path(),
        json!({"fat": {"command": FAKE, "args": ["fat-pages"]}}),
    );
    let r = run(EDGAR, h.path(), &["mcp", "tools", "fat"], b"");
    assert_eq!(r.code, Some(1));
    assert!(
        r.stderr.contains("more than 32 MiB of tool definitions"),
        "{}",
        r.stderr
    );
}
