use std::path::Path;

use super::*;
use crate::trust::approval::Approvals;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap_or_else(|e| panic!("{e}"));
    p
}

fn load(user: Option<PathBuf>, project_dir: &Path) -> Result<Config, ConfigError> {
    load_with(user, project_dir, Some(&project_dir.join("state")), None)
}

fn load_with(
    user: Option<PathBuf>,
    project_dir: &Path,
    state: Option<&Path>,
    policy: Option<PathBuf>,
) -> Result<Config, ConfigError> {
    crate::trust::admit::load(
        &ConfigPaths {
            user,
            project: project_dir.join(".mcp.json"),
            state: state.map(Path::to_owned),
            policy,
        },
        Some(Path::new("/bin/edgar")),
    )
}

/// Loads `text` as the user's own config (trusted, so it runs without approval).
fn load_user(dir: &Path, text: &str) -> Result<Config, ConfigError> {
    let user = write(dir, "user.json", text);
    load(Some(user), dir)
}

#[test]
fn user_wins_over_project_and_servers_are_sorted() {
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
    let c = load(Some(user.clone()), d.path()).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<_> = c.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["only-user", "shared"]);
    assert!(
        matches!(&c.servers[1].transport, Transport::Stdio { command, .. } if command == "user-cmd"),
        "a project entry never replaces a user entry"
    );
    assert!(
        matches!(&c.held[..], [Held { name, why: Hold::Shadowed { by }, .. }] if name == "shared" && *by == user)
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
        (
            r#"{"mcpServers": {"s": {"url": "https://h/mcp", "oauth": {"client_id": "c", "client_secret": "s"}}}}"#,
            "client_secret needs \"issuer\"",
        ),
        (
            r#"{"mcpServers": {"s": {"url": "https://h/mcp", "oauth": {"grant": "password"}}}}"#,
            "grant must be",
        ),
        (
            r#"{"mcpServers": {"s": {"url": "https://h/mcp", "oauth": {"grant": "client_credentials"}}}}"#,
            "needs the client_id",
        ),
        (
            r#"{"mcpServers": {"s": {"url": "https://h/mcp", "oauth": {"grant": "client_credentials", "client_id": "c"}}}}"#,
            "needs one of client_secret, private_key_file",
        ),
        (
            r#"{"mcpServers": {"s": {"url": "https://h/mcp", "oauth": {"grant": "cross_app_access", "client_id": "c"}}}}"#,
            "needs \"identity\"",
        ),
        (
            r#"{"mcpServers": {"s": {"url": "https://h/mcp", "oauth": {"grant": "cross_app_access", "client_id": "c",
                "identity": {"token_endpoint": "http://idp.example/token", "client_id": "i", "id_token_command": "x"}}}}}"#,
            "identity.token_endpoint must be an https URL",
        ),
        (
            r#"{"mcpServers": {"s": {"url": "https://h/mcp", "oauth": {"grant": "token_exchange", "client_id": "c"}}}}"#,
            "needs token_endpoint",
        ),
        (
            r#"{"mcpServers": {"s": {"url": "https://h/mcp", "oauth": {"grant": "token_exchange", "client_id": "c",
                "token_endpoint": "http://idp.example/token"}}}}"#,
            "token_endpoint must be an https URL",
        ),
        (
            r#"{"mcpServers": {"s": {"url": "https://h/mcp", "oauth": {"grant": "token_exchange",
                "token_endpoint": "https://idp.example/token"}}}}"#,
            "needs the client_id",
        ),
        (
            r#"{"mcpServers": {"s": {"url": "https://h/mcp", "oauth": {"grant": "token_exchange", "client_id": "c",
                "token_endpoint": "https://idp.example/token", "private_key_file": "/k.pem"}}}}"#,
            "not a private key",
        ),
        (
            r#"{"mcpServers": {"s": {"url": "https://h/mcp", "oauth": {"grant": "user_sign_in", "callback_port": 8123}}}}"#,
            "remove callback_port",
        ),
        (r#"{"mcpServers": []}"#, "field 'mcpServers'"),
        ("{not json", "not valid JSON"),
    ];
    for (text, want) in cases {
        let file = write(d.path(), "user.json", text);
        let e = load(Some(file.clone()), d.path())
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
        load_user(d.path(), text)
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
    let c = load_user(
        d.path(),
        r#"{"mcpServers": {
        "a": {"command": "x", "enabled_tools": ["read", "write"], "disabled_tools": ["write"]},
        "off": {"command": "x", "disabled": true}
    }}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.servers.len(), 1);
    let a = &c.servers[0];
    assert!(a.allows("read") && !a.allows("write") && !a.allows("other"));
}

#[test]
fn debug_never_shows_env_or_header_values() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let c = load_user(
        d.path(),
        r#"{"mcpServers": {"a": {"command": "x", "env": {"TOKEN": "sekrit-value"},
                                 "args": ["--api-key", "sekrit-value", "postgres://u:sekrit-value@db/x"]},
        "b": {"url": "https://h/mcp?token=sekrit-value", "headers": {"Authorization": "Bearer sekrit-value"}}}}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let shown = format!("{:?}", c.servers);
    assert!(!shown.contains("sekrit"), "{shown}");
    assert!(shown.contains("TOKEN") && shown.contains("postgres://u:***@db/x"));
    // The transport alone, as a library user might log it.
    let transports: Vec<_> = c.servers.iter().map(|s| &s.transport).collect();
    let shown = format!("{transports:?}");
    assert!(!shown.contains("sekrit"), "{shown}");
    assert!(shown.contains("TOKEN") && shown.contains("Authorization"));
}

#[test]
fn a_project_entry_is_held_until_approved_and_any_change_voids_the_approval() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let state = d.path().join("state");
    let project = r#"{"mcpServers": {"helper": {"command": "sh", "args": ["-c", "echo ${UNSET_FOR_EDGAR_TRUST_TEST}"]}}}"#;
    write(d.path(), ".mcp.json", project);
    // Unapproved: not a server, no expansion (the variable is unset, yet no error).
    let c = load(None, d.path()).unwrap_or_else(|e| panic!("{e}"));
    assert!(c.servers.is_empty(), "{:?}", c.servers);
    assert!(
        !c.is_default,
        "a project file replaces the embedded default"
    );
    let Some(Held {
        why: Hold::NeedsApproval(entry),
        ..
    }) = c.held("helper")
    else {
        panic!("{:?}", c.held)
    };
    let mut approvals = Approvals::load(Some(&state));
    approvals
        .approve(&c.project_dir, "helper", &entry.digest, 1)
        .unwrap_or_else(|e| panic!("{e}"));
    // Approved: expanded now, so the unset variable is reported.
    let e = load(None, d.path())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("UNSET_FOR_EDGAR_TRUST_TEST is not set"), "{e}");
    write(
        d.path(),
        ".mcp.json",
        r#"{"mcpServers": {"helper": {"command": "sh", "args": ["-c", "echo hi"]}}}"#,
    );
    let c = load(None, d.path()).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        c.servers.is_empty(),
        "a changed argument voids the approval"
    );
    let Some(Held {
        why: Hold::NeedsApproval(entry),
        ..
    }) = c.held("helper")
    else {
        panic!("{:?}", c.held)
    };
    approvals
        .approve(&c.project_dir, "helper", &entry.digest, 2)
        .unwrap_or_else(|e| panic!("{e}"));
    let c = load(None, d.path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.servers.len(), 1);
    assert_eq!(
        c.servers[0].project.as_deref(),
        Some(c.project_dir.as_path())
    );
    // Without a state directory nothing is approved.
    let c = load_with(None, d.path(), None, None).unwrap_or_else(|e| panic!("{e}"));
    assert!(c.servers.is_empty());
}

#[test]
fn a_project_adapter_is_bound_by_its_bytes_and_applies_to_project_servers_only() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let user = write(
        d.path(),
        "user.json",
        r#"{"mcpServers": {"mine": {"command": "x"}}}"#,
    );
    write(d.path(), "a.wasm", "first bytes");
    write(
        d.path(),
        ".mcp.json",
        r#"{"schemaAdapter": "a.wasm", "mcpServers": {"p": {"command": "y"}}}"#,
    );
    let c = load(Some(user.clone()), d.path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.servers[0].name, "mine");
    assert_eq!(
        c.servers[0].adapter,
        AdapterSource::Builtin,
        "the user's server keeps its adapter"
    );
    let Some(Held {
        why: Hold::NeedsApproval(entry),
        ..
    }) = c.held("p")
    else {
        panic!("{:?}", c.held)
    };
    Approvals::load(Some(&d.path().join("state")))
        .approve(&c.project_dir, "p", &entry.digest, 1)
        .unwrap_or_else(|e| panic!("{e}"));
    let c = load(Some(user.clone()), d.path()).unwrap_or_else(|e| panic!("{e}"));
    let p = c.server("p").unwrap_or_else(|| panic!("{:?}", c.held));
    // Loaded only with the bytes the approval covered (their sha256 travels with it).
    assert!(
        matches!(&p.adapter, AdapterSource::Pinned(path, _) if *path == d.path().join("a.wasm")),
        "{:?}",
        p.adapter
    );
    write(d.path(), "a.wasm", "other bytes");
    let c = load(Some(user), d.path()).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        c.server("p").is_none(),
        "a changed adapter voids the approval"
    );
}

#[test]
fn project_field_errors_are_reported_without_reading_the_environment() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    write(
        d.path(),
        ".mcp.json",
        r#"{"mcpServers": {"s": {"command": 5}}}"#,
    );
    let e = load(None, d.path())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.contains("server 's': field 'command': must be a string"),
        "{e}"
    );
    write(
        d.path(),
        ".mcp.json",
        r#"{"mcpServers": {"s": {"url": "${UNSET_FOR_EDGAR_URL}/mcp"}}}"#,
    );
    assert!(load(None, d.path()).is_ok());
}

#[test]
fn policy_blocks_servers_tools_and_project_entries_and_cannot_be_loosened() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let policy = write(
        d.path(),
        "policy.json",
        r#"{"deny_servers": [{"command": "sh *"}],
            "allow_servers": [{"name": "*"}],
            "require_https": true,
            "project_servers": "deny",
            "deny_tools": ["ok/delete_*"],
            "max_result_bytes": 1000}"#,
    );
    let user = write(
        d.path(),
        "user.json",
        r#"{"mcpServers": {
            "shell": {"command": "sh", "args": ["-c", "x"]},
            "ok": {"command": "node", "args": ["s.js"]},
            "plain": {"url": "http://example.com/mcp"},
            "local": {"url": "http://127.0.0.1:9/mcp"}}}"#,
    );
    write(
        d.path(),
        ".mcp.json",
        r#"{"mcpServers": {"proj": {"command": "y"}}}"#,
    );
    let c = load_with(
        Some(user),
        d.path(),
        Some(&d.path().join("state")),
        Some(policy),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<_> = c.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["local", "ok"]);
    let why = |n: &str| match c.held(n).map(|h| &h.why) {
        Some(Hold::Blocked { rule }) => rule.clone(),
        other => panic!("{n}: {other:?}"),
    };
    assert!(
        why("shell").starts_with("deny_servers[0]"),
        "{}",
        why("shell")
    );
    assert!(why("plain").starts_with("require_https"));
    assert!(why("proj").contains("project_servers"));
    let ok = c.server("ok").unwrap_or_else(|| panic!());
    assert!(ok.allows("read") && !ok.allows("delete_repo"));
    assert_eq!(ok.tool_policy.max_result_bytes, Some(1000));
}

#[test]
fn a_malformed_policy_fails_closed_naming_the_line() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let user = write(
        d.path(),
        "user.json",
        r#"{"mcpServers": {"ok": {"command": "x"}}}"#,
    );
    for (text, want) in [
        ("{\n\"deny_servers\": [\n{\"name\": 5}]}", "line 3"),
        ("{\"deny_server\": []}", "unknown field"),
        ("{\"deny_servers\": [{}]}", "needs a name, command or url"),
        ("{\"allowed_adapters\": [\"abc\"]}", "not a sha256"),
        ("{\"project_servers\": \"maybe\"}", "unknown variant"),
    ] {
        let policy = write(d.path(), "policy.json", text);
        let e = load_with(Some(user.clone()), d.path(), None, Some(policy.clone()))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.starts_with(&policy.display().to_string()), "{e}");
        assert!(e.contains(want), "{text}: {e}");
    }
    let missing = d.path().join("nope.json");
    assert!(load_with(Some(user), d.path(), None, Some(missing)).is_err());
}

#[test]
fn the_protocol_era_is_found_out_unless_an_entry_fixes_it() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let c = load_user(
        d.path(),
        r#"{"mcpServers": {"a": {"command": "x"}, "b": {"command": "x", "protocol": "handshake"},
                           "c": {"command": "x", "protocol": "stateless"}}}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let eras: Vec<ProtocolChoice> = c.servers.iter().map(|s| s.protocol).collect();
    assert_eq!(
        eras,
        [
            ProtocolChoice::Auto,
            ProtocolChoice::Handshake,
            ProtocolChoice::Stateless
        ]
    );
    let e = load_user(
        d.path(),
        r#"{"mcpServers": {"a": {"command": "x", "protocol": "2026"}}}"#,
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(e.contains("protocol") && e.contains("stateless"), "{e}");
}

#[test]
fn elicitation_defaults_are_opt_in_per_server() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let c = load_user(
        d.path(),
        r#"{"mcpServers": {"a": {"command": "x", "elicitation": "accept_defaults"},
                           "b": {"command": "x"}}}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(c.servers[0].elicitation_defaults && !c.servers[1].elicitation_defaults);
    let e = load_user(
        d.path(),
        r#"{"mcpServers": {"a": {"command": "x", "elicitation": "yes"}}}"#,
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(e.contains("field 'elicitation'"), "{e}");
}

#[test]
fn a_project_cannot_make_loading_read_forever() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // An adapter path naming a device: hashed for the approval digest without reading it.
    write(
        d.path(),
        ".mcp.json",
        r#"{"mcpServers": {"p": {"command": "x", "adapter": "/dev/zero"}}}"#,
    );
    let c = load(None, d.path()).unwrap_or_else(|e| panic!("{e}"));
    let Some(Held {
        why: Hold::NeedsApproval(entry),
        ..
    }) = c.held("p")
    else {
        panic!("{:?}", c.held)
    };
    assert!(
        matches!(&entry.adapter, Some((_, Err(e))) if e.contains("not a regular file")),
        "{:?}",
        entry.adapter
    );
    // A FIFO in place of the project file.
    std::fs::remove_file(d.path().join(".mcp.json")).unwrap_or_else(|e| panic!("{e}"));
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        d.path().join(".mcp.json"),
        rustix::fs::Mode::from(0o600),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let e = load(None, d.path())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("not a regular file"), "{e}");
}

#[test]
fn unattended_grants_are_read() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = load_user(
        d.path(),
        r#"{"mcpServers": {
            "cc": {"url": "https://h/mcp", "oauth": {"grant": "client_credentials", "client_id": "svc",
                "private_key_file": "/keys/svc.pem", "scope": "tools:read"}},
            "xaa": {"url": "https://h/mcp", "oauth": {"grant": "cross_app_access", "client_id": "c",
                "client_secret": "s", "issuer": "https://as.example",
                "identity": {"token_endpoint": "https://idp.example/token", "client_id": "i",
                    "id_token_command": "idp-cli print-id-token"}}},
            "human": {"url": "https://h/mcp"},
            "each": {"url": "https://h/mcp", "oauth": {"grant": "user_sign_in"}}}}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let by = |n: &str| {
        config
            .server(n)
            .map(|s| s.oauth.clone())
            .unwrap_or_else(|| panic!("no {n}"))
    };
    let cc = by("cc");
    assert_eq!(cc.grant, super::Grant::ClientCredentials);
    assert_eq!(
        cc.private_key_file.as_deref(),
        Some(Path::new("/keys/svc.pem"))
    );
    assert_eq!(cc.scope.as_deref(), Some("tools:read"));
    let xaa = by("xaa");
    assert_eq!(xaa.grant, super::Grant::CrossAppAccess);
    let idp = xaa.identity.unwrap_or_else(|| panic!("no identity"));
    assert!(idp.id_token == super::IdToken::Command("idp-cli print-id-token".into()));
    assert!(!by("human").grant.unattended());
    // Each team user signs in themselves: a human's grant, kept per user.
    let each = by("each").grant;
    assert_eq!(each, super::Grant::UserSignIn);
    assert!(!each.unattended() && each.per_user());
    assert!(!by("human").grant.per_user() && !cc.grant.per_user());
    // Secrets stay out of Debug.
    assert!(!format!("{:?}", by("xaa")).contains("\"s\""));
}

#[test]
fn net_hosts_are_read_strictly_and_matched_by_name() {
    for (text, host, port) in [
        ("api.example.com:443", "api.example.com", 443),
        ("API.Example.COM.:443", "api.example.com", 443),
        ("*.example.com:443", "*.example.com", 443),
        ("127.0.0.1:5432", "127.0.0.1", 5432),
        ("[::1]:8080", "[::1]", 8080),
        ("localhost:1", "localhost", 1),
    ] {
        let h = HostPort::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!((h.host.as_str(), h.port), (host, port), "{text}");
    }
    for bad in [
        "api.example.com",
        "api.example.com:",
        "api.example.com:0",
        "api.example.com:65536",
        "api.example.com:https",
        ":443",
        "http://x:443",
        "a b:443",
        "a..b:443",
        "-a.b:443",
        "[zz]:443",
        "::1:443",
        "*:443",
        "x.*.com:443",
        "user@host:443",
    ] {
        assert!(HostPort::parse(bad).is_err(), "{bad} was accepted");
    }
    let wild = HostPort::parse("*.example.com:443").unwrap_or_else(|e| panic!("{e}"));
    assert!(wild.admits("api.example.com", 443) && wild.admits("A.B.Example.com.", 443));
    assert!(!wild.admits("example.com", 443));
    assert!(!wild.admits("api.example.com", 80));
    assert!(!wild.admits("evilexample.com", 443));
    assert!(!wild.admits("api.example.com.evil.net", 443));
    let exact = HostPort::parse("api.example.com:443").unwrap_or_else(|e| panic!("{e}"));
    assert!(exact.admits("API.example.com", 443) && !exact.admits("x.api.example.com", 443));
    for (text, loopback) in [
        ("localhost:1", true),
        ("127.0.0.1:1", true),
        ("127.1.2.3:1", true),
        ("[::1]:1", true),
        ("localhost.example.com:1", false),
        ("10.0.0.1:1", false),
    ] {
        let h = HostPort::parse(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(h.is_loopback(), loopback, "{text}");
    }
}
