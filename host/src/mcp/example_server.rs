//! The embedded default MCP server (`edgar mcp example-server`): read-only tools over
//! the directory it runs in (list, read, search text) plus a clock, over stdio, and a
//! few fixed prompts and resources (`content.rs`). It is the configured server when no
//! config file exists, so a fresh install has something real to discover and call.
//!
//! It is deliberately small and synchronous: one request at a time, std I/O only. It
//! speaks both protocol eras: a request whose `_meta` names a stateless version is
//! answered as that era (`server/discover`, `resultType`, `ttlMs`), anything else after
//! the `initialize` handshake.

use std::collections::VecDeque;
use std::io::{BufRead, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::protocol::{self, Incoming, METHOD_NOT_FOUND, MODERN, PROTOCOL};

mod asking;
mod changes;
mod content;
mod input;
mod tasks;

/// How long its (fixed) tool list stays fresh for a stateless client: an hour, so an
/// upgraded edgar's tools are seen within one.
const LIST_TTL_MS: u64 = 3_600_000;

/// Largest file `read_file` returns in one call.
const MAX_READ_BYTES: usize = 256 << 10;
/// Most entries `list_directory` returns.
const MAX_ENTRIES: usize = 1000;
/// Most files `search_text` opens, and most matches it returns by default.
const MAX_SEARCH_FILES: usize = 5000;
const DEFAULT_MATCHES: usize = 50;
/// Directories `search_text` and recursive listing skip.
const SKIP_DIRS: &[&str] = &[".git", "target", "node_modules", ".venv", "__pycache__"];

/// Serves MCP on stdin/stdout until stdin closes. With `conformance`, it also has the
/// tools the conformance suite's server scenarios call (`content.rs`, `tasks.rs`, ...).
pub fn serve(root: &Path, conformance: bool) -> std::io::Result<()> {
    let root = root.canonicalize()?;
    let mut stdout = std::io::stdout().lock();
    let mut input = Input {
        reader: std::io::stdin().lock(),
        waiting: VecDeque::new(),
    };
    // What the client declared at `initialize`: whether it may be asked.
    let mut client = Value::Null;
    let mut next_id: u64 = 1;
    // The `subscriptions/listen` request that hears list changes, once one came.
    let mut listening = None;
    let mut tasks = tasks::Tasks::default();
    while let Some(m) = input.next()? {
        let Incoming::Request { id, method, params } = m else {
            continue;
        };
        if method == "initialize" {
            client = params["capabilities"].clone();
        }
        if conformance {
            let (mut notes, answered) = changes::hook(&method, &id, &params, &mut listening);
            notes.extend(content::progress(&method, &params));
            for n in notes {
                send(&mut stdout, &n)?;
            }
            if answered {
                continue;
            }
        }
        let tasked = conformance.then(|| tasks.answer(&id, &method, &params));
        if let Some(reply) = tasked.flatten() {
            send(&mut stdout, &reply)?;
            continue;
        }
        let name = params["name"].as_str().unwrap_or("");
        let asks = (conformance && method == "tools/call")
            .then(|| asking::question(name, &params["arguments"]))
            .flatten();
        let reply = match asks {
            Some((asked, question)) => {
                let needs = asking::capability(asked);
                let meta = &params["_meta"];
                let result = if meta[protocol::META_PROTOCOL_VERSION].is_string() {
                    // The stateless era: the question goes back in the result, and the
                    // call comes again with its answer.
                    let declared = &meta[protocol::META_CLIENT_CAPABILITIES][needs];
                    asking::stateless(name, asked, question, &params, declared.is_object())
                } else if !client[needs].is_object() {
                    asking::result(name, Err(format!("the client did not declare {needs}")))
                } else {
                    next_id += 1;
                    asking::result(name, input.ask(&mut stdout, next_id, asked, question)?)
                };
                protocol::response(&id, result)
            }
            None => match handle(&root, &method, &params, conformance) {
                Ok(result) => protocol::response(&id, result),
                Err((protocol::UNSUPPORTED_PROTOCOL_VERSION, requested)) => {
                    let mut supported: Vec<&str> = MODERN.to_vec();
                    supported.extend_from_slice(PROTOCOL);
                    protocol::unsupported_version(&id, &requested, &supported)
                }
                // Its one missing capability is the client's model.
                Err((protocol::MISSING_CAPABILITY, msg)) => {
                    protocol::encode_message(&json!({"jsonrpc": "2.0", "id": id, "error": {
                        "code": protocol::MISSING_CAPABILITY, "message": msg,
                        "data": {"requiredCapabilities": {"sampling": {}}}}}))
                }
                Err((code, msg)) => protocol::error_response(&id, code, &msg),
            },
        };
        send(&mut stdout, &reply)?;
    }
    Ok(())
}

fn send(out: &mut impl Write, message: &[u8]) -> std::io::Result<()> {
    out.write_all(message)?;
    out.write_all(b"\n")?;
    out.flush()
}

/// The client's messages, one at a time; those that came while the server waited for an
/// answer of its own are kept for after.
struct Input<R> {
    reader: R,
    waiting: VecDeque<Incoming>,
}

impl<R: BufRead> Input<R> {
    /// The next message, or `None` at the end of input.
    fn next(&mut self) -> std::io::Result<Option<Incoming>> {
        loop {
            if let Some(m) = self.waiting.pop_front() {
                return Ok(Some(m));
            }
            let mut line = String::new();
            // Capped like edgar's own reader: a longer line ends the session, it is not
            // buffered.
            let limit = super::protocol::MAX_MESSAGE_BYTES as u64;
            let n = (&mut self.reader).take(limit + 1).read_line(&mut line)?;
            if n == 0 {
                return Ok(None);
            }
            if n as u64 > limit {
                return Err(std::io::Error::other(
                    "a request line is over the message size limit",
                ));
            }
            if let Ok(messages) = protocol::decode(line.as_bytes()) {
                self.waiting.extend(messages);
            }
        }
    }

    /// Asks the client `method` as request `id` and waits for its answer; what else
    /// arrives meanwhile waits its turn.
    fn ask(
        &mut self,
        out: &mut impl Write,
        id: u64,
        method: &str,
        params: Value,
    ) -> std::io::Result<Result<Value, String>> {
        send(out, &protocol::request(id, method, params))?;
        let mut held = VecDeque::new();
        let answer = loop {
            match self.next()? {
                None => break Err("the client went away before it answered".to_owned()),
                Some(Incoming::Response {
                    id: Some(got),
                    outcome,
                }) if got == id => {
                    break outcome
                        .map(|raw| serde_json::from_str(raw.get()).unwrap_or_default())
                        .map_err(|e| format!("the client refused: {}", e.message));
                }
                Some(other) => held.push_back(other),
            }
        };
        held.extend(self.waiting.drain(..));
        self.waiting = held;
        Ok(answer)
    }
}

type Reply = Result<Value, (i64, String)>;

fn handle(root: &Path, method: &str, params: &Value, conformance: bool) -> Reply {
    let stateless = params
        .get("_meta")
        .and_then(|m| m.get(protocol::META_PROTOCOL_VERSION))
        .and_then(Value::as_str);
    let Some(version) = stateless else {
        return handle_era(root, method, params, false, conformance);
    };
    if !MODERN.contains(&version) {
        // The version asked for travels as the message; `serve` words the answer.
        return Err((protocol::UNSUPPORTED_PROTOCOL_VERSION, version.to_owned()));
    }
    let mut result = handle_era(root, method, params, true, conformance)?;
    if let Some(r) = result.as_object_mut() {
        r.entry("resultType").or_insert(json!("complete"));
    }
    Ok(result)
}

fn server_info() -> Value {
    json!({"name": "edgar-workspace", "version": env!("CARGO_PKG_VERSION")})
}

const INSTRUCTIONS: &str =
    "Read-only access to the files under the working directory, and the current time.";

fn handle_era(
    root: &Path,
    method: &str,
    params: &Value,
    stateless: bool,
    conformance: bool,
) -> Reply {
    let listed = || {
        let mut list = tools();
        if conformance
            && let (Some(l), Some(extra)) = (list.as_array_mut(), content::test_tools().as_array())
        {
            l.extend(extra.iter().cloned());
            l.extend(asking::tools().as_array().into_iter().flatten().cloned());
            l.extend(changes::tools());
            if stateless {
                l.extend(input::tools().as_array().into_iter().flatten().cloned());
                l.extend(tasks::tools());
            }
        }
        list
    };
    match method {
        "server/discover" if stateless => {
            let mut supported: Vec<&str> = MODERN.to_vec();
            supported.extend_from_slice(PROTOCOL);
            let mut capabilities = content::capabilities();
            if conformance {
                capabilities["extensions"] = json!({(super::task::EXTENSION): {}});
            }
            Ok(json!({
                "supportedVersions": supported,
                "capabilities": capabilities,
                "instructions": INSTRUCTIONS,
                "_meta": {(protocol::META_SERVER_INFO): server_info()},
                "ttlMs": LIST_TTL_MS, "cacheScope": "public",
            }))
        }
        "tools/list" if stateless => Ok(json!({
            "tools": listed(), "ttlMs": LIST_TTL_MS, "cacheScope": "public",
        })),
        "initialize" => {
            let asked = params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or("");
            let version = if PROTOCOL.contains(&asked) {
                asked
            } else {
                PROTOCOL[0]
            };
            Ok(json!({
                "protocolVersion": version,
                "capabilities": content::capabilities(),
                "serverInfo": server_info(),
                "instructions": INSTRUCTIONS,
            }))
        }
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({ "tools": listed() })),
        "tools/call" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            let args = params.get("arguments").cloned().unwrap_or(json!({}));
            if conformance
                && let Some(result) = content::call_test_tool(name).or_else(|| changes::call(name))
            {
                return Ok(result);
            }
            if conformance
                && stateless
                && let Some(result) = input::call(name, params)
            {
                return result;
            }
            Ok(match call(root, name, &args) {
                Ok(text) => json!({"content": [{"type": "text", "text": text}], "isError": false}),
                Err(e) => json!({"content": [{"type": "text", "text": e}], "isError": true}),
            })
        }
        "prompts/get" if conformance && stateless && params["name"] == input::PROMPT => {
            input::prompt(params)
        }
        other => {
            let mut reply = content::handle(other, params)
                .unwrap_or_else(|| Err((METHOD_NOT_FOUND, format!("unknown method {other}"))));
            if other == "prompts/list"
                && conformance
                && stateless
                && let Ok(list) = &mut reply
                && let Some(prompts) = list["prompts"].as_array_mut()
            {
                prompts.push(input::prompt_descriptor());
            }
            reply
        }
    }
}

fn tools() -> Value {
    let read_only = json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false});
    json!([
        {
            "name": "list_directory",
            "title": "List a directory",
            "description": "List the files and subdirectories of a directory inside the workspace. Directories end with '/'.",
            "inputSchema": {"type": "object", "properties": {
                "path": {"type": "string", "description": "Directory relative to the workspace root; default '.'"},
                "recursive": {"type": "boolean", "description": "Also list subdirectories (skips .git, target, node_modules)"}
            }},
            "annotations": read_only
        },
        {
            "name": "read_file",
            "title": "Read a text file",
            "description": "Read a UTF-8 text file inside the workspace, optionally a range of lines.",
            "inputSchema": {"type": "object", "properties": {
                "path": {"type": "string", "description": "File relative to the workspace root"},
                "start_line": {"type": "integer", "minimum": 1, "description": "First line to return (1-based)"},
                "max_lines": {"type": "integer", "minimum": 1, "description": "Most lines to return"}
            }, "required": ["path"]},
            "annotations": read_only
        },
        {
            "name": "search_text",
            "title": "Search file contents",
            "description": "Find lines containing a piece of text (case-insensitive) in the files under a directory; returns path:line: text.",
            "inputSchema": {"type": "object", "properties": {
                "query": {"type": "string", "minLength": 1, "description": "Text to look for"},
                "path": {"type": "string", "description": "Directory to search; default the workspace root"},
                "max_results": {"type": "integer", "minimum": 1, "maximum": 1000}
            }, "required": ["query"]},
            "annotations": read_only
        },
        {
            "name": "current_time",
            "title": "Current time",
            "description": "The current date and time in UTC (RFC 3339) and as a Unix timestamp.",
            "inputSchema": {"type": "object", "properties": {}},
            "annotations": read_only
        }
    ])
}

fn call(root: &Path, name: &str, args: &Value) -> Result<String, String> {
    let path_arg = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or(".");
    match name {
        "list_directory" => {
            let dir = resolve(root, path_arg("path"))?;
            let recursive = args
                .get("recursive")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let mut out = Vec::new();
            list(root, &dir, recursive, &mut out)?;
            let more = out.len() > MAX_ENTRIES;
            out.truncate(MAX_ENTRIES);
            let mut text = out.join("\n");
            if more {
                text.push_str(&format!(
                    "\n[only the first {MAX_ENTRIES} entries are shown]"
                ));
            }
            Ok(if text.is_empty() {
                "(empty directory)".into()
            } else {
                text
            })
        }
        "read_file" => {
            let file = resolve(
                root,
                args.get("path")
                    .and_then(Value::as_str)
                    .ok_or("path is required")?,
            )?;
            let bytes = std::fs::read(&file)
                .map_err(|e| format!("cannot read {}: {e}", rel(root, &file)))?;
            let text = String::from_utf8(bytes)
                .map_err(|_| format!("{} is not UTF-8 text", rel(root, &file)))?;
            let start = args
                .get("start_line")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .max(1) as usize;
            let max = args
                .get("max_lines")
                .and_then(Value::as_u64)
                .map_or(usize::MAX, |n| n as usize);
            let mut out = String::new();
            for line in text.lines().skip(start - 1).take(max) {
                if out.len() + line.len() > MAX_READ_BYTES {
                    out.push_str(&format!(
                        "[stopped at {MAX_READ_BYTES} bytes; ask for later lines with start_line]\n"
                    ));
                    break;
                }
                out.push_str(line);
                out.push('\n');
            }
            Ok(out)
        }
        "search_text" => {
            let query = args
                .get("query")
                .and_then(Value::as_str)
                .filter(|q| !q.is_empty())
                .ok_or("query is required")?;
            let dir = resolve(root, path_arg("path"))?;
            let limit = args
                .get("max_results")
                .and_then(Value::as_u64)
                .map_or(DEFAULT_MATCHES, |n| n as usize);
            let mut hits = Vec::new();
            let mut files = 0;
            search(
                root,
                &dir,
                &query.to_lowercase(),
                limit,
                &mut hits,
                &mut files,
            );
            Ok(if hits.is_empty() {
                format!("no lines contain {query:?}")
            } else {
                hits.join("\n")
            })
        }
        "current_time" => {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_err(|e| e.to_string())?;
            Ok(format!(
                "{} (unix {})",
                crate::text::rfc3339(now.as_secs()),
                now.as_secs()
            ))
        }
        other => Err(format!("unknown tool {other}")),
    }
}

/// `path` inside `root`, refusing anything that escapes it (`..`, absolute paths,
/// symlinks pointing out).
fn resolve(root: &Path, path: &str) -> Result<PathBuf, String> {
    let p = Path::new(path);
    if p.is_absolute() || p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!("{path:?} is outside the workspace"));
    }
    let full = root
        .join(p)
        .canonicalize()
        .map_err(|e| format!("{path}: {e}"))?;
    if !full.starts_with(root) {
        return Err(format!("{path:?} is outside the workspace"));
    }
    Ok(full)
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

fn list(root: &Path, dir: &Path, recursive: bool, out: &mut Vec<String>) -> Result<(), String> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot list {}: {e}", rel(root, dir)))?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        if out.len() > MAX_ENTRIES {
            return Ok(());
        }
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        let path = e.path();
        out.push(format!(
            "{}{}",
            rel(root, &path),
            if is_dir { "/" } else { "" }
        ));
        if recursive && is_dir && !SKIP_DIRS.contains(&e.file_name().to_string_lossy().as_ref()) {
            list(root, &path, true, out)?;
        }
    }
    Ok(())
}

fn search(
    root: &Path,
    dir: &Path,
    query: &str,
    limit: usize,
    hits: &mut Vec<String>,
    files: &mut usize,
) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        if hits.len() >= limit || *files >= MAX_SEARCH_FILES {
            return;
        }
        let Ok(ft) = e.file_type() else { continue };
        let path = e.path();
        if ft.is_dir() {
            if !SKIP_DIRS.contains(&e.file_name().to_string_lossy().as_ref()) {
                search(root, &path, query, limit, hits, files);
            }
        } else if ft.is_file() {
            *files += 1;
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            for (i, line) in text.lines().enumerate() {
                if line.to_lowercase().contains(query) {
                    let line: String = line.chars().take(200).collect();
                    hits.push(format!("{}:{}: {}", rel(root, &path), i + 1, line.trim()));
                    if hits.len() >= limit {
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_workspace() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = d.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join("a.txt"), "hello\nworld\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(resolve(&root, "a.txt").is_ok());
        assert!(resolve(&root, "../etc/passwd").is_err());
        assert!(resolve(&root, "/etc/passwd").is_err());
        std::os::unix::fs::symlink("/etc", root.join("out")).unwrap_or_else(|e| panic!("{e}"));
        assert!(resolve(&root, "out/passwd").is_err());
        let text = call(&root, "search_text", &json!({"query": "WORLD"}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(text, "a.txt:2: world");
        let text = call(
            &root,
            "read_file",
            &json!({"path": "a.txt", "start_line": 2}),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(text, "world\n");
    }
}

#[cfg(test)]
mod era_tests {
    use super::*;

    fn meta(version: &str) -> Value {
        json!({"_meta": {(protocol::META_PROTOCOL_VERSION): version}})
    }

    #[test]
    fn it_speaks_both_eras() {
        let root = Path::new(".");
        let discovered = handle(root, "server/discover", &meta(MODERN[0]), false)
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(discovered["resultType"], "complete");
        assert_eq!(discovered["supportedVersions"][0], MODERN[0]);
        let listed =
            handle(root, "tools/list", &meta(MODERN[0]), false).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(listed["ttlMs"], LIST_TTL_MS);
        assert_eq!(
            handle(root, "tools/list", &meta("1999-01-01"), false).err(),
            Some((protocol::UNSUPPORTED_PROTOCOL_VERSION, "1999-01-01".into()))
        );
        // The handshake era: no `_meta`, no `resultType`, no discover.
        let listed =
            handle(root, "tools/list", &json!({}), false).unwrap_or_else(|e| panic!("{e:?}"));
        assert!(listed.get("resultType").is_none());
        assert!(handle(root, "server/discover", &json!({}), false).is_err());
    }
}
