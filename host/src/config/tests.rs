use std::path::Path;

use super::*;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap_or_else(|e| panic!("{e}"));
    p
}

fn load(user: Option<PathBuf>, project_dir: &Path) -> Result<Config, ConfigError> {
    Config::load(
        &ConfigPaths {
            user,
            project: project_dir.join(".mcp.json"),
        },
        Some(Path::new("/bin/edgar")),
    )
}

#[test]
fn project_wins_over_user_and_servers_are_sorted() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let user = write(
        d.path(),
        "user.json",
        r#"{"mcpServers": {
        "shared": {"command": "user-cmd"},
        "only-user": {"type": "http", "url": "https://example.com/mcp", "headers": {"X": "y"}}
    }}"#,
    );
    write(
        d.path(),
        ".mcp.json",
        r#"{"mcpServers": {"shared": {"command": "project-cmd", "args": ["-v"]}}}"#,
    );
    let c = load(Some(user), d.path()).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<_> = c.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["only-user", "shared"]);
    assert!(
        matches!(&c.servers[1].transport, Transport::Stdio { command, .. } if command == "project-cmd")
    );
    assert!(!c.is_default);
}

#[test]
fn no_config_means_the_embedded_default() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let c = load(None, d.path()).unwrap_or_else(|e| panic!("{e}"));
    assert!(c.is_default);
    assert_eq!(c.servers.len(), 1);
    assert_eq!(c.servers[0].name, EXAMPLE_SERVER);
}

#[test]
fn errors_name_file_server_and_field() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cases = [
        (
            r#"{"mcpServers": {"s": {"command": 5}}}"#,
            "server 's': field 'command': must be a string",
        ),
        (
            r#"{"mcpServers": {"bad name": {"command": "x"}}}"#,
            "server 'bad name'",
        ),
        (
            r#"{"mcpServers": {"s": {"type": "http"}}}"#,
            "field 'url': is required",
        ),
        (
            r#"{"mcpServers": {"s": {"type": "carrier-pigeon", "command": "x"}}}"#,
            "unknown transport",
        ),
        (
            r#"{"mcpServers": {"s": {"command": "x", "env": {"K": "${UNSET_FOR_EDGAR_TEST}"}}}}"#,
            "UNSET_FOR_EDGAR_TEST is not set",
        ),
        (
            r#"{"mcpServers": {"s": {"command": "x", "tool_timeout_sec": -1}}}"#,
            "field 'tool_timeout_sec'",
        ),
        (r#"{"mcpServers": []}"#, "field 'mcpServers'"),
        ("{not json", "not valid JSON"),
    ];
    for (text, want) in cases {
        let file = write(d.path(), ".mcp.json", text);
        let e = load(None, d.path())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.starts_with(&file.display().to_string()), "{e}");
        assert!(e.contains(want), "{text}: {e}");
    }
}

#[test]
fn digest_covers_transport_identity_only() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let digest = |text: &str| {
        write(d.path(), ".mcp.json", text);
        load(None, d.path())
            .unwrap_or_else(|e| panic!("{e}"))
            .servers[0]
            .digest()
    };
    let base = digest(r#"{"mcpServers": {"s": {"command": "a", "args": ["1"]}}}"#);
    assert_eq!(
        base,
        digest(
            r#"{"mcpServers": {"s": {"command": "a", "args": ["1"], "env": {"K": "v"}, "tool_timeout_sec": 5}}}"#
        )
    );
    assert_ne!(
        base,
        digest(r#"{"mcpServers": {"s": {"command": "a", "args": ["2"]}}}"#)
    );
    assert_ne!(
        base,
        digest(r#"{"mcpServers": {"s": {"command": "b", "args": ["1"]}}}"#)
    );
}

#[test]
fn tool_filters_and_disabled_servers() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    write(
        d.path(),
        ".mcp.json",
        r#"{"mcpServers": {
        "a": {"command": "x", "enabled_tools": ["read", "write"], "disabled_tools": ["write"]},
        "off": {"command": "x", "disabled": true}
    }}"#,
    );
    let c = load(None, d.path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.servers.len(), 1);
    let a = &c.servers[0];
    assert!(a.allows("read") && !a.allows("write") && !a.allows("other"));
}

#[test]
fn debug_never_shows_env_or_header_values() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    write(
        d.path(),
        ".mcp.json",
        r#"{"mcpServers": {"a": {"command": "x", "env": {"TOKEN": "sekrit-value"}},
        "b": {"url": "https://h/mcp", "headers": {"Authorization": "Bearer sekrit-value"}}}}"#,
    );
    let c = load(None, d.path()).unwrap_or_else(|e| panic!("{e}"));
    let shown = format!("{:?}", c.servers);
    assert!(!shown.contains("sekrit"), "{shown}");
    assert!(shown.contains("TOKEN"));
}
