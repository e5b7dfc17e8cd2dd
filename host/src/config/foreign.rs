//! Every MCP configuration on the machine, whoever wrote it: edgar's own, Claude Code,
//! Claude Desktop, Cursor, VS Code, Windsurf, Codex, Gemini CLI and Zed, user and project
//! files, each read into the same neutral [`Entry`] (nothing expanded, nothing run). This
//! is an inventory for `edgar mcp scan`, not configuration edgar uses.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// Largest configuration file read (Claude Code's `~/.claude.json` holds history too).
const MAX_FILE_BYTES: u64 = 16 << 20;

/// One host's configuration file and what it holds.
#[derive(Debug, Clone)]
pub struct File {
    pub host: &'static str,
    pub path: PathBuf,
    pub scope: Scope,
    /// The servers, or why the file could not be read.
    pub entries: Result<Vec<Entry>, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    User,
    Project,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Project => "project",
        }
    }
}

/// A server entry as written (values unexpanded; they may hold literal secrets).
#[derive(Clone, Default)]
pub struct Entry {
    pub name: String,
    pub command: Option<String>,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub url: Option<String>,
    pub headers: BTreeMap<String, String>,
    /// The URL speaks the legacy HTTP+SSE transport (`"type": "sse"`).
    pub sse: bool,
    /// edgar's own `"sandbox"` key, when the host has one.
    pub sandbox: Option<Value>,
    /// Where in the file the entry starts (1-based line), when it can be found.
    pub line: Option<usize>,
    /// The one directory it applies in, for an entry of Claude Code's `projects` map.
    pub project: Option<String>,
}

impl Entry {
    /// The entry as a server edgar can start, under `name` (unique in its session), for a
    /// one-off look at its tools. Values are taken as written: nothing is expanded, so a
    /// `${VAR}` reaches the server as those characters, never as a secret. It starts, like
    /// every stdio server without a `cwd`, in a private empty directory. `None` when it
    /// names neither a command nor a URL.
    pub fn spec(&self, name: &str, source: &Path) -> Option<super::ServerSpec> {
        let transport = if let Some(command) = &self.command {
            super::Transport::Stdio {
                command: command.clone(),
                args: self.args.clone(),
                env: self.env.clone(),
                cwd: None,
                env_inherit: false,
            }
        } else {
            let (url, headers) = (self.url.clone()?, self.headers.clone());
            if self.sse {
                super::Transport::Sse { url, headers }
            } else {
                super::Transport::Http { url, headers }
            }
        };
        Some(super::ServerSpec::with_defaults(
            name,
            transport,
            &source.display().to_string(),
        ))
    }
}

impl std::fmt::Debug for Entry {
    /// Values may be secrets: names and keys only.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("name", &self.name)
            .field("command", &self.command)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// Where to look: the home directory, `$XDG_CONFIG_HOME` (or `~/.config`), edgar's own
/// user file, and the project directory.
pub struct Places {
    pub home: PathBuf,
    pub config: PathBuf,
    pub edgar: Option<PathBuf>,
    pub project: PathBuf,
}

impl Places {
    /// From the environment: `$HOME`, `$XDG_CONFIG_HOME`, edgar's config path.
    pub fn from_env(project: &Path) -> Option<Places> {
        let home = crate::paths::absolute_var("HOME").map(PathBuf::from)?;
        let config = crate::paths::absolute_var("XDG_CONFIG_HOME")
            .map_or_else(|| home.join(".config"), PathBuf::from);
        Some(Places {
            edgar: crate::config::ConfigPaths::for_project(project).user,
            home,
            config,
            project: project.to_owned(),
        })
    }
}

/// How a host's file keeps its servers.
#[derive(Clone, Copy)]
enum Shape {
    /// `{"mcpServers": {NAME: {...}}}` (Claude, Cursor, Windsurf, Gemini, edgar).
    McpServers,
    /// `{"servers": {NAME: {...}}}` (VS Code's `mcp.json`).
    Servers,
    /// VS Code's `settings.json`: `{"mcp": {"servers": {...}}}`, with comments.
    VsCodeSettings,
    /// `~/.claude.json`: `mcpServers` at the top and under each of `projects`.
    ClaudeCode,
    /// Zed's `settings.json`: `{"context_servers": {NAME: {...}}}`, with comments.
    Zed,
    /// Codex's `config.toml`: `[mcp_servers.NAME]`.
    CodexToml,
}

/// Every known configuration file that exists, read. Files that do not exist are not
/// listed; one that cannot be read or parsed is listed with why.
pub fn inventory(places: &Places) -> Vec<File> {
    let (h, c, p) = (&places.home, &places.config, &places.project);
    let mut candidates: Vec<(&'static str, PathBuf, Scope, Shape)> = Vec::new();
    if let Some(edgar) = &places.edgar {
        candidates.push(("edgar", edgar.clone(), Scope::User, Shape::McpServers));
    }
    candidates.extend([
        (
            "Claude Code",
            h.join(".claude.json"),
            Scope::User,
            Shape::ClaudeCode,
        ),
        (
            "Claude Code / edgar",
            p.join(".mcp.json"),
            Scope::Project,
            Shape::McpServers,
        ),
        (
            "Claude Desktop",
            c.join("Claude/claude_desktop_config.json"),
            Scope::User,
            Shape::McpServers,
        ),
        (
            "Claude Desktop",
            h.join("Library/Application Support/Claude/claude_desktop_config.json"),
            Scope::User,
            Shape::McpServers,
        ),
        (
            "Cursor",
            h.join(".cursor/mcp.json"),
            Scope::User,
            Shape::McpServers,
        ),
        (
            "Cursor",
            p.join(".cursor/mcp.json"),
            Scope::Project,
            Shape::McpServers,
        ),
        (
            "VS Code",
            c.join("Code/User/mcp.json"),
            Scope::User,
            Shape::Servers,
        ),
        (
            "VS Code",
            c.join("Code/User/settings.json"),
            Scope::User,
            Shape::VsCodeSettings,
        ),
        (
            "VS Code",
            p.join(".vscode/mcp.json"),
            Scope::Project,
            Shape::Servers,
        ),
        (
            "Windsurf",
            h.join(".codeium/windsurf/mcp_config.json"),
            Scope::User,
            Shape::McpServers,
        ),
        (
            "Codex",
            h.join(".codex/config.toml"),
            Scope::User,
            Shape::CodexToml,
        ),
        (
            "Gemini CLI",
            h.join(".gemini/settings.json"),
            Scope::User,
            Shape::McpServers,
        ),
        (
            "Gemini CLI",
            p.join(".gemini/settings.json"),
            Scope::Project,
            Shape::McpServers,
        ),
        ("Zed", c.join("zed/settings.json"), Scope::User, Shape::Zed),
        (
            "Zed",
            p.join(".zed/settings.json"),
            Scope::Project,
            Shape::Zed,
        ),
    ]);
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (host, path, scope, shape) in candidates {
        if !seen.insert(path.clone()) {
            continue;
        }
        let bytes = match crate::paths::read_regular(&path, MAX_FILE_BYTES) {
            Ok(Some(b)) => b,
            Ok(None) => continue,
            Err(e) => {
                out.push(File {
                    host,
                    path,
                    scope,
                    entries: Err(e.to_string()),
                });
                continue;
            }
        };
        let entries = String::from_utf8(bytes)
            .map_err(|_| "not UTF-8".to_owned())
            .and_then(|text| read(shape, &text));
        out.push(File {
            host,
            path,
            scope,
            entries,
        });
    }
    out
}

fn read(shape: Shape, text: &str) -> Result<Vec<Entry>, String> {
    if let Shape::CodexToml = shape {
        return codex(text);
    }
    let json = match shape {
        Shape::VsCodeSettings | Shape::Zed => without_comments(text),
        _ => text.to_owned(),
    };
    let doc: Value = serde_json::from_str(&json)
        .map_err(|e| format!("line {}: not valid JSON ({e})", e.line()))?;
    let mut out = Vec::new();
    let mut servers = |map: Option<&Value>, zed: bool, project: Option<&String>| {
        if let Some(Value::Object(m)) = map {
            for (name, e) in m {
                if let Value::Object(e) = e {
                    out.push(Entry {
                        project: project.cloned(),
                        ..entry(name, e, zed, text)
                    });
                }
            }
        }
    };
    match shape {
        Shape::McpServers => servers(doc.get("mcpServers"), false, None),
        Shape::Servers => servers(doc.get("servers"), false, None),
        Shape::VsCodeSettings => {
            servers(doc.get("mcp").and_then(|m| m.get("servers")), false, None)
        }
        Shape::Zed => servers(doc.get("context_servers"), true, None),
        Shape::ClaudeCode => {
            servers(doc.get("mcpServers"), false, None);
            if let Some(Value::Object(projects)) = doc.get("projects") {
                for (dir, p) in projects {
                    servers(p.get("mcpServers"), false, Some(dir));
                }
            }
        }
        Shape::CodexToml => {}
    }
    Ok(out)
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str().map_or_else(|| v.to_string(), str::to_owned),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn entry(name: &str, e: &Map<String, Value>, zed: bool, text: &str) -> Entry {
    // Zed nests the command: `"command": {"path": ..., "args": [...], "env": {...}}`.
    let (command, args, env) = match e.get("command") {
        Some(Value::Object(c)) if zed => (
            c.get("path").and_then(Value::as_str).map(str::to_owned),
            strings(c.get("args")),
            string_map(c.get("env")),
        ),
        other => (
            other.and_then(Value::as_str).map(str::to_owned),
            strings(e.get("args")),
            string_map(e.get("env")),
        ),
    };
    Entry {
        name: name.to_owned(),
        command,
        args,
        env,
        url: e
            .get("url")
            .or_else(|| e.get("serverUrl"))
            .or_else(|| e.get("httpUrl"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        headers: string_map(e.get("headers")),
        sse: ["type", "transport"]
            .iter()
            .any(|k| e.get(*k).and_then(Value::as_str) == Some("sse")),
        sandbox: e.get("sandbox").cloned(),
        line: line_of(text, &format!("\"{name}\"")),
        project: None,
    }
}

/// Codex's `[mcp_servers.NAME]` tables: `command`, `args`, `env`, `url`, `http_headers`.
fn codex(text: &str) -> Result<Vec<Entry>, String> {
    let doc = toml_edit::Document::parse(text)
        .map_err(|e| format!("not valid TOML ({})", e.message().trim()))?;
    let Some(servers) = doc
        .as_table()
        .get("mcp_servers")
        .and_then(|s| s.as_table_like())
    else {
        return Ok(Vec::new());
    };
    let str_of = |i: &toml_edit::Item| i.as_str().map(str::to_owned);
    let table = |i: Option<&toml_edit::Item>| -> BTreeMap<String, String> {
        i.and_then(|t| t.as_table_like())
            .map(|t| {
                t.iter()
                    .filter_map(|(k, v)| Some((k.to_owned(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    for (name, item) in servers.iter() {
        let Some(t) = item.as_table_like() else {
            continue;
        };
        out.push(Entry {
            name: name.to_owned(),
            command: t.get("command").and_then(str_of),
            args: t
                .get("args")
                .and_then(|a| a.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            env: table(t.get("env")),
            url: t.get("url").and_then(str_of),
            headers: table(t.get("http_headers")),
            sse: false,
            sandbox: None,
            line: line_of(text, &format!("mcp_servers.{name}")),
            project: None,
        });
    }
    Ok(out)
}

/// The first line holding `needle`, 1-based.
fn line_of(text: &str, needle: &str) -> Option<usize> {
    let at = text.find(needle)?;
    Some(text[..at].matches('\n').count() + 1)
}

/// JSON with comments (`//`, `/* */`) and trailing commas, as VS Code and Zed write it,
/// made plain JSON. Strings are kept as they are; line breaks are kept, so error lines
/// stay right.
pub fn without_comments(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let start = i;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(b.len());
                out.extend_from_slice(&b[start..i]);
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    if b[i] == b'\n' {
                        out.push(b'\n');
                    }
                    i += 1;
                }
                i = (i + 2).min(b.len());
            }
            b',' => {
                // A comma followed only by blanks, comments and a closing bracket goes.
                let mut j = i + 1;
                loop {
                    while j < b.len() && b[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    if b.get(j) == Some(&b'/') && b.get(j + 1) == Some(&b'/') {
                        while j < b.len() && b[j] != b'\n' {
                            j += 1;
                        }
                        continue;
                    }
                    if b.get(j) == Some(&b'/') && b.get(j + 1) == Some(&b'*') {
                        j += 2;
                        while j < b.len() && !(b[j] == b'*' && b.get(j + 1) == Some(&b'/')) {
                            j += 1;
                        }
                        j = (j + 2).min(b.len());
                        continue;
                    }
                    break;
                }
                if !matches!(b.get(j), Some(b'}' | b']')) {
                    out.push(b',');
                }
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// `v` written as an editor's settings file may be: `gaps` picks what goes where a
    /// blank may (nothing, a space, a line comment, a block comment), and whether a
    /// list ends in a comma.
    fn commented(v: &Value, gaps: &mut impl Iterator<Item = u8>, out: &mut String) {
        fn gap(gaps: &mut impl Iterator<Item = u8>, out: &mut String) {
            match gaps.next().unwrap_or(0) % 5 {
                1 => out.push(' '),
                2 => out.push_str(" // a \"comment\", with /* in it\n"),
                3 => out.push_str("/* a comment, // */"),
                _ => {}
            }
        }
        match v {
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    gap(gaps, out);
                    commented(item, gaps, out);
                    gap(gaps, out);
                    if i + 1 < items.len() || gaps.next().unwrap_or(0) % 2 == 1 {
                        out.push(',');
                    }
                }
                gap(gaps, out);
                out.push(']');
            }
            Value::Object(members) => {
                out.push('{');
                for (i, (k, item)) in members.iter().enumerate() {
                    gap(gaps, out);
                    out.push_str(&Value::String(k.clone()).to_string());
                    gap(gaps, out);
                    out.push(':');
                    gap(gaps, out);
                    commented(item, gaps, out);
                    gap(gaps, out);
                    if i + 1 < members.len() || gaps.next().unwrap_or(0) % 2 == 1 {
                        out.push(',');
                    }
                }
                gap(gaps, out);
                out.push('}');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }

    proptest! {
        /// Whatever JSON a settings file holds, and however it is commented (line and
        /// block comments wherever a blank may go, trailing commas), it reads as the
        /// same value.
        #[test]
        fn any_commented_settings_file_reads_as_its_json(
            v in crate::arbitrary::json_value(3),
            gaps in proptest::collection::vec(any::<u8>(), 0..256),
        ) {
            let mut text = String::new();
            commented(&v, &mut gaps.into_iter().cycle(), &mut text);
            let plain = without_comments(&text);
            let read: Result<Value, _> = serde_json::from_str(&plain);
            prop_assert_eq!(read.ok(), Some(v), "{} -> {}", text, plain);
        }
    }

    #[test]
    fn comments_and_trailing_commas_go_and_strings_stay() {
        let text = "{\n  // a comment\n  \"a\": \"http://x // not a comment\", /* b */\n  \"c\": [1, 2,],\n}\n";
        let plain = without_comments(text);
        let v: Value = serde_json::from_str(&plain).unwrap_or_else(|e| panic!("{e}: {plain}"));
        assert_eq!(v["a"], "http://x // not a comment");
        assert_eq!(v["c"], serde_json::json!([1, 2]));
        assert_eq!(plain.lines().count(), text.lines().count());
    }

    #[test]
    fn each_shape_reads_its_servers() {
        let zed = r#"{"context_servers": {"z": {"command": {"path": "npx", "args": ["-y", "p"], "env": {"K": "v"}}}}}"#;
        let e = read(Shape::Zed, zed).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(e[0].command.as_deref(), Some("npx"));
        assert_eq!(e[0].args, ["-y", "p"]);
        let codex = "[mcp_servers.docs]\ncommand = \"uvx\"\nargs = [\"mcp-docs\"]\n[mcp_servers.docs.env]\nTOKEN = \"abc\"\n";
        let e = read(Shape::CodexToml, codex).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(e[0].name, "docs");
        assert_eq!(e[0].env["TOKEN"], "abc");
        assert_eq!(e[0].line, Some(1));
        let claude = r#"{"mcpServers": {"a": {"url": "http://h/mcp"}}, "projects": {"/p": {"mcpServers": {"b": {"command": "x"}}}}}"#;
        let e = read(Shape::ClaudeCode, claude).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(e.len(), 2);
        assert_eq!(
            (e[0].project.as_deref(), e[1].project.as_deref()),
            (None, Some("/p"))
        );
        assert!(read(Shape::McpServers, "{oops").is_err());
        assert!(format!("{:?}", e[0]).contains("Entry"));
    }
}
