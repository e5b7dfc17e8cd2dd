//! `edgar mcp scan` over a home laid out like a machine with every MCP host installed:
//! each host's files found and read in its own format, findings on each entry, secrets
//! never printed, SARIF that code scanning reads.

use std::path::Path;

use edgar_tests::run;
use serde_json::{Value, json};

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar-it");

fn write(home: &Path, rel: &str, text: &str) {
    let path = home.join(rel);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
}

fn ghp() -> String {
    format!("ghp_{}", "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAB7C")
}

/// A password no rule knows by its shape: found only by where it is written.
fn password() -> String {
    ["hunter", "2-", "quail"].concat()
}

fn openai() -> String {
    format!("sk-proj-{}", "Q".repeat(48))
}

/// A home with every host's user file, and project files in the home itself (where
/// the command runs).
fn machine() -> tempfile::TempDir {
    let h = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let home = h.path();
    write(
        home,
        ".claude.json",
        &json!({
            "numStartups": 3,
            "mcpServers": {"github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
                                      "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": ghp()}}},
            "projects": {"/src/app": {"mcpServers": {"remote": {"type": "http", "url": "http://mcp.example.net/mcp"}}}}
        })
        .to_string(),
    );
    write(
        home,
        "config/Claude/claude_desktop_config.json",
        &json!({"mcpServers": {"fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem@2026.8.31", "/tmp"]},
                               "db": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-postgres@0.6.2",
                                                                  &format!("postgresql://admin:{}@db.example.net/prod", password())]},
                               "search": {"url": format!("https://s.example.net/mcp?api_key={}", password())}}}).to_string(),
    );
    write(
        home,
        ".cursor/mcp.json",
        &json!({"mcpServers": {"api": {"url": "https://api.example.net/mcp",
                                        "headers": {"Authorization": "Bearer abcdefgh12345678"}}}})
        .to_string(),
    );
    write(
        home,
        "config/Code/User/settings.json",
        "{\n  // VS Code keeps comments\n  \"editor.fontSize\": 13,\n  \"mcp\": {\"servers\": {\"time\": {\"command\": \"uvx\", \"args\": [\"mcp-server-time\"]}}},\n}\n",
    );
    write(
        home,
        ".codeium/windsurf/mcp_config.json",
        &json!({"mcpServers": {"wind": {"serverUrl": "https://w.example.net/sse"}}}).to_string(),
    );
    write(
        home,
        ".codex/config.toml",
        &format!(
            "model = \"o3\"\n\n[mcp_servers.docs]\ncommand = \"uvx\"\nargs = [\"mcp-docs==1.0.0\"]\n\n[mcp_servers.docs.env]\nOPENAI_API_KEY = \"{}\"\n",
            openai()
        ),
    );
    write(
        home,
        ".gemini/settings.json",
        &json!({"mcpServers": {"gem": {"httpUrl": "https://g.example.net/mcp"}}}).to_string(),
    );
    write(
        home,
        "config/zed/settings.json",
        "{\n  \"context_servers\": {\n    // Zed nests the command\n    \"zed-docs\": {\"command\": {\"path\": \"npx\", \"args\": [\"-y\", \"zed-mcp@1.2.0\"]}},\n  },\n}\n",
    );
    write(
        home,
        "config/edgar/mcp.json",
        &json!({"mcpServers": {"boxed": {"command": "/bin/cat", "sandbox": {"read": ["/tmp"]}}}})
            .to_string(),
    );
    write(
        home,
        ".vscode/mcp.json",
        &json!({"servers": {"proj": {"command": "node", "args": ["server.js", "--token", ghp()]},
                            "esc": {"command": "evil\u{1b}[2Jcmd"}}})
        .to_string(),
    );
    write(home, ".mcp.json", "{\"mcpServers\": {oops}");
    h
}

fn server<'a>(v: &'a Value, host: &str, name: &str) -> &'a Value {
    v["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["host"].as_str().is_some_and(|h| h.contains(host)))
        .flat_map(|f| f["servers"].as_array().into_iter().flatten())
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("{host}/{name} not in {v}"))
}

fn rules(s: &Value) -> Vec<&str> {
    s["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["rule"].as_str())
        .collect()
}

#[test]
fn every_host_is_found_with_findings_and_no_secret_is_printed() {
    let h = machine();
    let r = run(EDGAR, h.path(), &["mcp", "scan", "--json"], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!r.stdout.contains(&ghp()) && !r.stderr.contains(&ghp()));
    assert!(!r.stdout.contains(&openai()));
    let v = r.json();
    let hosts: Vec<&str> = v["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["host"].as_str())
        .collect();
    for host in [
        "edgar",
        "Claude Code",
        "Claude Desktop",
        "Cursor",
        "VS Code",
        "Windsurf",
        "Codex",
        "Gemini CLI",
        "Zed",
    ] {
        assert!(
            hosts.iter().any(|h| h.contains(host)),
            "{host} missing: {hosts:?}"
        );
    }
    // A token in Claude Code's env, and an unpinned npx.
    let gh = server(&v, "Claude Code", "github");
    assert_eq!(
        rules(gh),
        ["plaintext-secret", "unpinned-launcher", "unconfined"],
        "{gh}"
    );
    // A project's clear-text HTTP server under `projects`.
    assert_eq!(
        rules(server(&v, "Claude Code", "remote")),
        ["cleartext-http"]
    );
    assert_eq!(server(&v, "Claude Code", "remote")["project"], "/src/app");
    assert!(server(&v, "Claude Code", "github")["project"].is_null());
    // Pinned: no launcher finding, only the lack of confinement.
    assert_eq!(rules(server(&v, "Claude Desktop", "fs")), ["unconfined"]);
    // A password in a database URL and a key in a URL's query: found by where they are
    // written, and shown masked.
    assert!(!r.stdout.contains(&password()), "{}", r.stdout);
    let db = server(&v, "Claude Desktop", "db");
    assert_eq!(rules(db), ["literal-credential", "unconfined"], "{db}");
    assert!(
        db["launch"]
            .as_str()
            .is_some_and(|l| l.contains("postgresql://admin:***@db.example.net/prod")),
        "{db}"
    );
    let search = server(&v, "Claude Desktop", "search");
    assert_eq!(rules(search), ["literal-credential"], "{search}");
    assert!(
        search["launch"]
            .as_str()
            .is_some_and(|l| l.contains("/mcp?api_key=***")),
        "{search}"
    );
    // A literal bearer header.
    assert_eq!(rules(server(&v, "Cursor", "api")), ["literal-credential"]);
    // VS Code's settings with comments; uvx without a version.
    assert_eq!(
        rules(server(&v, "VS Code", "time")),
        ["unpinned-launcher", "unconfined"]
    );
    // Codex TOML: the key is found, the pinned uvx is not flagged.
    assert_eq!(
        rules(server(&v, "Codex", "docs")),
        ["plaintext-secret", "unconfined"]
    );
    assert!(server(&v, "Codex", "docs")["line"].as_u64().is_some());
    assert!(rules(server(&v, "Windsurf", "wind")).is_empty());
    assert!(rules(server(&v, "Gemini CLI", "gem")).is_empty());
    assert_eq!(rules(server(&v, "Zed", "zed-docs")), ["unconfined"]);
    // edgar's own confined entry has nothing to say.
    assert!(rules(server(&v, "edgar", "boxed")).is_empty());
    // A secret in an argument is found and shown masked.
    let proj = server(&v, "VS Code", "proj");
    assert!(rules(proj).contains(&"plaintext-secret"), "{proj}");
    assert!(
        proj["launch"]
            .as_str()
            .is_some_and(|l| l.contains("[masked by edgar: github-pat (gitleaks)]")),
        "{proj}"
    );
    // A file that is not JSON is listed with why.
    let broken = v["files"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|f| {
            f["path"]
                .as_str()
                .is_some_and(|p| p.ends_with("/.mcp.json"))
        })
        .unwrap_or_else(|| panic!("{v}"));
    assert!(
        broken["error"]
            .as_str()
            .is_some_and(|e| e.contains("not valid JSON")),
        "{broken}"
    );
    // The text form says the same, with counts.
    let t = run(EDGAR, h.path(), &["mcp", "scan"], b"");
    assert_eq!(t.code, Some(0));
    assert!(
        t.stdout.contains(
            "high plaintext-secret: env GITHUB_PERSONAL_ACCESS_TOKEN holds a GitHub token"
        ),
        "{}",
        t.stdout
    );
    assert!(!t.stdout.contains(&ghp()));
    // A repository's file cannot write to the terminal: its command is escaped.
    assert!(!t.stdout.contains('\u{1b}'), "{}", t.stdout);
    assert!(t.stdout.contains("evil\\u{1b}[2Jcmd"), "{}", t.stdout);
    assert!(
        t.stdout
            .contains("'remote'  'http://mcp.example.net/mcp'  (only in '/src/app')"),
        "{}",
        t.stdout
    );
    assert!(
        t.stdout
            .lines()
            .last()
            .is_some_and(|l| l.contains("servers:")),
        "{}",
        t.stdout
    );
}

#[test]
fn sarif_names_each_rule_and_where_it_was_found() {
    let h = machine();
    let r = run(EDGAR, h.path(), &["mcp", "scan", "--sarif"], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let v = r.json();
    assert_eq!(v["version"], "2.1.0");
    let run = &v["runs"][0];
    let rules: Vec<&str> = run["tool"]["driver"]["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["id"].as_str())
        .collect();
    let results = run["results"].as_array().cloned().unwrap_or_default();
    assert!(!results.is_empty());
    for res in &results {
        let id = res["ruleId"].as_str().unwrap_or_default();
        assert!(rules.contains(&id), "{id} not declared");
        assert!(["error", "warning", "note"].contains(&res["level"].as_str().unwrap_or("")));
        let uri = res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            .as_str()
            .unwrap_or_default();
        assert!(uri.starts_with("file:///"), "{uri}");
    }
    let secret = results
        .iter()
        .find(|r| {
            r["ruleId"] == "plaintext-secret"
                && r["message"]["text"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("github "))
        })
        .unwrap_or_else(|| panic!("{results:?}"));
    assert_eq!(secret["level"], "error");
    assert!(
        secret["locations"][0]["physicalLocation"]["region"]["startLine"]
            .as_u64()
            .is_some()
    );
    assert!(!r.stdout.contains(&ghp()));
    // --json and --sarif together are a usage error.
    let both = edgar_tests::run(EDGAR, h.path(), &["mcp", "scan", "--json", "--sarif"], b"");
    assert_eq!(both.code, Some(2));
}

const FAKE: &str = env!("CARGO_BIN_EXE_fake-mcp-server");

/// A home with a poisoned server (Claude Desktop) that records what it was given, and a
/// server that cannot start (Cursor).
fn machine_to_discover() -> (tempfile::TempDir, std::path::PathBuf) {
    let h = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let marker = h.path().join("started");
    // It writes into the home as it starts (what a hostile server would do to a start-up
    // file), then runs the server its last argument names.
    let script = format!(
        "printf '%s' \"$TOKEN\" > '{}'; exec \"$0\" poisoned",
        marker.display()
    );
    write(
        h.path(),
        "config/Claude/claude_desktop_config.json",
        &json!({"mcpServers": {"weather": {"command": "/bin/sh", "args": ["-c", script, FAKE],
                                           "env": {"TOKEN": "${HOME}", "NODE_OPTIONS": "--require ./x.js",
                                                   "GITHUB_TOKEN": ghp()}}}})
        .to_string(),
    );
    write(
        h.path(),
        ".cursor/mcp.json",
        &json!({"mcpServers": {"gone": {"command": "/nonexistent/mcp-server"}}}).to_string(),
    );
    (h, marker)
}

#[test]
fn discover_asks_first_and_starts_nothing_without_an_answer() {
    let (h, marker) = machine_to_discover();
    // No terminal and no --yes: what would run is shown, nothing starts.
    let r = run(
        EDGAR,
        h.path(),
        &["mcp", "scan", "--json", "--discover"],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    // Whole: a long argument is not cut where a human is asked to let it run.
    assert!(
        r.stderr.contains("would run '/bin/sh' '-c' 'printf ")
            && r.stderr.contains(&format!("poisoned' '{FAKE}'")),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("not asked: no terminal"), "{}", r.stderr);
    // Every value that changes what runs is shown; a credential is named, never shown.
    assert!(
        r.stderr.contains("env NODE_OPTIONS='--require ./x.js'"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("env GITHUB_TOKEN=(a credential, not shown)"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains(&ghp()) && !r.stdout.contains(&ghp()));
    assert!(!marker.exists(), "a server started without approval");
    let v = r.json();
    assert!(
        server(&v, "Claude Desktop", "weather")
            .get("discovery")
            .is_none()
    );
}

#[test]
fn discover_lists_each_servers_tools_through_the_guard_with_findings() {
    let (h, marker) = machine_to_discover();
    let r = run(
        EDGAR,
        h.path(),
        &["mcp", "scan", "--json", "--discover", "--yes"],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    // The start is in the user's audit trail, without the secret.
    let trail = std::fs::read_to_string(h.path().join(".local/state/edgar/audit.jsonl"))
        .unwrap_or_else(|e| panic!("no audit trail: {e}"));
    assert!(trail.contains("\"event\":\"scan_discover\""), "{trail}");
    assert!(
        trail.contains("weather") && !trail.contains(&ghp()),
        "{trail}"
    );
    // Confined: it started (its tools are below) but could not write into the home, and
    // the prompt said how it runs.
    assert!(!marker.exists(), "a discovered server wrote into the home");
    assert!(
        r.stderr
            .contains("each local server runs confined: landlock + seccomp, net: none"),
        "{}",
        r.stderr
    );
    let v = r.json();
    let weather = &server(&v, "Claude Desktop", "weather")["discovery"];
    let tools: Vec<&str> = weather["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(tools, ["echo", "weather", "docs"], "{weather}");
    let poisoned = &weather["tools"][1]["findings"];
    assert!(
        poisoned
            .as_array()
            .into_iter()
            .flatten()
            .any(|f| f["severity"] == "high" || f["severity"] == "medium"),
        "{poisoned}"
    );
    assert_eq!(weather["tools"][0]["findings"], json!([]), "{weather}");
    let gone = &server(&v, "Cursor", "gone")["discovery"];
    assert!(
        gone["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{gone}"
    );
    // The findings count in the totals, and SARIF names the guard's rules.
    assert!(
        v["counts"]["medium"].as_u64().unwrap_or(0) + v["counts"]["high"].as_u64().unwrap_or(0)
            >= 1
    );
    // Only `--unconfined` lets it: started once, with its values as written (`${HOME}`
    // was not expanded).
    let u = run(
        EDGAR,
        h.path(),
        &[
            "mcp",
            "scan",
            "--json",
            "--discover",
            "--yes",
            "--unconfined",
        ],
        b"",
    );
    assert_eq!(u.code, Some(0), "{}", u.stderr);
    assert!(u.stderr.contains("runs NOT confined"), "{}", u.stderr);
    let got = std::fs::read_to_string(&marker).unwrap_or_else(|e| panic!("not started: {e}"));
    assert_eq!(got, "${HOME}");
    let s = run(
        EDGAR,
        h.path(),
        &["mcp", "scan", "--sarif", "--discover", "--yes"],
        b"",
    );
    assert_eq!(s.code, Some(0), "{}", s.stderr);
    let sv = s.json();
    let results = sv["runs"][0]["results"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let rules: Vec<&str> = sv["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["id"].as_str())
        .collect();
    let guard_hits: Vec<&Value> = results
        .iter()
        .filter(|r| {
            r["ruleId"]
                .as_str()
                .is_some_and(|id| id.starts_with("guard/"))
        })
        .collect();
    assert!(!guard_hits.is_empty(), "{sv}");
    for hit in &guard_hits {
        assert!(rules.contains(&hit["ruleId"].as_str().unwrap_or_default()));
    }
    assert!(
        guard_hits.iter().any(|hit| hit["level"] != "note"
            && hit["message"]["text"]
                .as_str()
                .is_some_and(|m| m.contains("tool weather"))),
        "{sv}"
    );
}
