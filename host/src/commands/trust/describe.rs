//! What an approval prompt shows: a project entry as it would run (its command as
//! written, quoted for a shell, `${VAR}` named, never expanded; what it reads, sends and
//! runs), and a server's changed tools and prompts against their pins, as a diff. Every
//! string a project file or a server wrote is escaped before it reaches the terminal.

use edgar_host::config::{ProjectEntry, ServerSpec, Transport};
use edgar_host::trust::pins::{self, PinFile};
use serde_json::Value;

/// What a server runs or contacts, in one line, as written (`${VAR}` named, never its
/// value, which may be a secret): for the prompt and the audit trail.
pub(super) fn target_line(spec: &ServerSpec) -> String {
    match &spec.transport {
        Transport::Stdio { .. } => std::iter::once(&spec.written.target)
            .chain(&spec.written.args)
            .map(|a| quote(a))
            .collect::<Vec<_>>()
            .join(" "),
        Transport::Http { .. } | Transport::Sse { .. } => escaped(&spec.written.target),
    }
}

pub(super) fn describe_entry(entry: &ProjectEntry, spec: &ServerSpec, out: &mut String) {
    use std::fmt::Write as _;
    let _ = writeln!(
        out,
        "Project server '{}' in {}",
        escaped(&entry.name),
        escaped(&entry.file.display().to_string())
    );
    // Where a value comes from, never the value of a variable (it may be a secret).
    let origin = |value: Option<&Value>| -> String {
        let Some(template) = value.and_then(Value::as_str) else {
            return "(not a string)".into();
        };
        let vars = variables(template);
        if vars.is_empty() {
            format!("a literal value of {} characters", template.chars().count())
        } else if template.trim() == format!("${{{}}}", vars[0]) && vars.len() == 1 {
            format!("your environment variable {}", vars[0])
        } else {
            format!("text with your environment variables {}", vars.join(", "))
        }
    };
    let mut shown_keys: Vec<&str> = vec!["type", "transport", "adapter"];
    match &spec.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
            env_inherit,
        } => {
            shown_keys.extend(["command", "args", "env", "cwd", "env_inherit"]);
            let _ = writeln!(out, "  would run:  {}", target_line(spec));
            let dir = cwd.as_deref().unwrap_or(&entry.project);
            let path = env
                .get("PATH")
                .map(std::ffi::OsString::from)
                .or_else(|| std::env::var_os("PATH"));
            let program = match edgar_host::trust::policy::resolve_program(
                command,
                path.as_deref(),
                Some(dir),
            ) {
                Some(p) => escaped(&p.display().to_string()),
                None => "(not found)".into(),
            };
            let _ = writeln!(out, "  program:    {} -> {program}", quote(command));
            let _ = writeln!(
                out,
                "  in:         {}{}",
                escaped(&dir.display().to_string()),
                if cwd.is_none() {
                    " (the project directory: programs and launchers there load its code, such as node_modules, python -m modules, a pyproject.toml)"
                } else {
                    ""
                }
            );
            if args.is_empty() {
                let _ = writeln!(out, "  arguments:  none");
            }
            for c in &entry.code {
                match &c.sha256 {
                    Ok(sha) => {
                        let _ = writeln!(
                            out,
                            "  runs code:  {} (sha256 {sha}; a change needs a new approval)",
                            escaped(&c.path)
                        );
                    }
                    Err(e) => {
                        let _ = writeln!(
                            out,
                            "  runs code:  {} (not hashed: {})",
                            escaped(&c.path),
                            escaped(e)
                        );
                    }
                }
            }
            let raw_env = entry.raw.get("env");
            for k in env.keys() {
                let _ = writeln!(
                    out,
                    "  env:        {} = {}",
                    escaped(k),
                    origin(raw_env.and_then(|e| e.get(k)))
                );
            }
            let inherited = if *env_inherit {
                "ALL of edgar's environment (env_inherit), keys included".to_owned()
            } else {
                format!(
                    "from edgar's environment only {}",
                    edgar_host::mcp::INHERITED_ENV.join(", ")
                )
            };
            let _ = writeln!(out, "  inherits:   {inherited}");
            shown_keys.push("sandbox");
            let _ = writeln!(
                out,
                "  process:    {}",
                edgar_host::mcp::client::confinement_line(spec)
            );
        }
        Transport::Http { headers, .. } | Transport::Sse { headers, .. } => {
            shown_keys.extend(["url", "headers"]);
            let _ = writeln!(
                out,
                "  would contact: {} ({})",
                target_line(spec),
                spec.transport.kind()
            );
            let raw = entry.raw.get("headers");
            for k in headers.keys() {
                let _ = writeln!(
                    out,
                    "  header:     {} = {} (sent to that URL)",
                    escaped(k),
                    origin(raw.and_then(|h| h.get(k)))
                );
            }
        }
    }
    for name in &entry.variables {
        let _ = writeln!(
            out,
            "  variable:   {} from your environment, in what runs or is contacted (its value now is part of this approval; a new value needs a new one; it is not shown)",
            escaped(name)
        );
    }
    if let Some(Value::Object(o)) = entry.raw.get("oauth") {
        shown_keys.push("oauth");
        let o_spec = &spec.oauth;
        let _ = writeln!(
            out,
            "  sign-in:    grant {} (tokens kept in your keyring)",
            o_spec.grant.as_str()
        );
        for (key, value) in o {
            let line = match (key.as_str(), value) {
                ("client_secret", v) => format!(
                    "client_secret = {} (sent to the issuer's token endpoint)",
                    origin(Some(v))
                ),
                ("identity", Value::Object(i)) => {
                    let mut parts = Vec::new();
                    for (k, v) in i {
                        if k == "client_secret" {
                            parts.push(format!("{k} = {}", origin(Some(v))));
                        } else {
                            parts.push(format!("{} = {}", escaped(k), escaped(&v.to_string())));
                        }
                    }
                    format!(
                        "identity provider (your ID token is sent there): {}",
                        parts.join(", ")
                    )
                }
                (k, v) => format!("{} = {}", escaped(k), escaped(&v.to_string())),
            };
            let _ = writeln!(out, "  oauth:      {line}");
        }
    }
    if spec.elicitation_defaults {
        shown_keys.push("elicitation");
        let _ = writeln!(
            out,
            "  answers:    the server's questions with its own defaults, without asking you (elicitation: accept_defaults)"
        );
    }
    match &entry.adapter {
        Some((path, Ok(sha))) => {
            let _ = writeln!(
                out,
                "  adapter:    {} (sha256 {sha}; loaded only with these bytes)",
                escaped(&path.display().to_string())
            );
        }
        Some((path, Err(e))) => {
            let _ = writeln!(
                out,
                "  adapter:    {} (unreadable: {})",
                escaped(&path.display().to_string()),
                escaped(e)
            );
        }
        None => {
            let _ = writeln!(out, "  adapter:    the built-in one");
        }
    }
    // Every other field, as written: nothing the entry says is left out of the review.
    for (key, value) in &entry.raw {
        if !shown_keys.contains(&key.as_str()) {
            let _ = writeln!(
                out,
                "  {:<11} {}",
                format!("{}:", escaped(key)),
                escaped(&value.to_string())
            );
        }
    }
    let _ = writeln!(out, "  digest:     {}", entry.digest);
}

/// A digest as listed: its first 16 characters, escaped (a pin file on disk may have been
/// edited into anything, and must not make the listing panic or rewrite the terminal).
pub(super) fn short(digest: &str) -> String {
    escaped(&digest.chars().take(16).collect::<String>())
}

/// The `${VAR}` names a template uses.
fn variables(template: &str) -> Vec<String> {
    edgar_host::config::project::variable_names(template)
        .iter()
        .map(|n| escaped(n))
        .collect()
}

/// Control and invisible characters made visible, nothing cut: a prompt must show all
/// of what it approves (one escaper for every surface a human reviews).
pub(super) fn escaped(s: &str) -> String {
    edgar_host::text::visible(s)
}

/// A shell word as a human would read it: single-quoted when it holds anything but plain
/// characters.
pub(crate) fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", escaped(s).replace('\'', r"'\''"))
    }
}

/// Why a pending tool waits: what changed since its pin, else what the guard found, else
/// that it is new.
pub(super) fn pending_change(file: &PinFile, tool: &str, p: &pins::Pin) -> String {
    let changed = file
        .tools
        .get(tool)
        .filter(|old| old.digest != p.digest)
        .map(|old| pins::what_changed(&old.view, &p.view));
    let found = p
        .finding
        .as_ref()
        .map(|f| format!("the guard found {}", edgar_host::text::visible(f)));
    // A changed tool says what changed; its finding is shown apart (`finding`).
    changed.or(found).unwrap_or_else(|| "new tool".to_owned())
}

pub(super) fn describe_pending(file: &PinFile, out: &mut String) {
    use std::fmt::Write as _;
    for (tool, new) in &file.pending {
        if let Some(finding) = &new.finding {
            // The guard's finding, and the whole tool as it is (invisible characters
            // escaped), so the human sees what the finding is about.
            let _ = writeln!(
                out,
                "tool '{}': the guard found {}",
                escaped(tool),
                edgar_host::text::visible(finding)
            );
            let changed = file.tools.get(tool).is_some_and(|o| o.digest != new.digest);
            if !changed {
                for line in lines_of(Some(&new.view)) {
                    let _ = writeln!(out, "    {line}");
                }
                continue;
            }
        }
        against_pin(out, "tool", tool, file.tools.get(tool), new);
    }
}

/// One pending tool or prompt (`kind`) against its pin: what changed, part by part as a
/// diff (and said when only invisible characters did), or all of it when it is new.
fn against_pin(out: &mut String, kind: &str, name: &str, old: Option<&pins::Pin>, new: &pins::Pin) {
    use std::fmt::Write as _;
    let Some(old) = old else {
        let _ = writeln!(out, "{kind} '{}': new", escaped(name));
        for line in lines_of(Some(&new.view)) {
            let _ = writeln!(out, "    + {line}");
        }
        return;
    };
    let _ = writeln!(
        out,
        "{kind} '{}': {}",
        escaped(name),
        pins::what_changed(&old.view, &new.view)
    );
    for (key, label) in pins::VIEW_PARTS {
        let (a, b) = (old.view.get(key), new.view.get(key));
        if a != b {
            let _ = writeln!(out, "  {label}:");
            if without_invisible(a) == without_invisible(b) {
                let _ = writeln!(
                    out,
                    "    invisible characters changed (shown below as \\u{{...}} escapes; a model reads them, a reviewer does not see them)"
                );
            }
            for line in diff(&lines_of(a), &lines_of(b)) {
                let _ = writeln!(out, "    {line}");
            }
        }
    }
}

/// Each pending prompt against its pin, as tools are shown.
pub(super) fn describe_pending_prompts(file: &PinFile, out: &mut String) {
    for (name, new) in &file.pending_prompts {
        against_pin(out, "prompt", name, file.prompts.get(name), new);
    }
}

/// A view part's text with control and invisible characters removed: what a terminal
/// shows of it.
fn without_invisible(v: Option<&Value>) -> String {
    let text = match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    text.chars()
        .filter(|c| !edgar_host::text::unsafe_to_show(*c) || *c == '\n')
        .collect()
}

/// A view part as lines: text as its own lines, JSON pretty-printed; escaped.
fn lines_of(v: Option<&Value>) -> Vec<String> {
    let text = match v {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => serde_json::to_string_pretty(other).unwrap_or_default(),
    };
    text.lines().map(escaped).collect()
}

/// A line diff (longest common subsequence): `- old`, `+ new`, `  same`.
fn diff(a: &[String], b: &[String]) -> Vec<String> {
    // Bounded: a pathological schema must not make the prompt quadratic in memory.
    const MAX_LINES: usize = 2000;
    if a.len() > MAX_LINES || b.len() > MAX_LINES {
        return a
            .iter()
            .map(|l| format!("- {l}"))
            .chain(b.iter().map(|l| format!("+ {l}")))
            .collect();
    }
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push(format!("  {}", a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            // Removed before added where either would do, as `diff -u` and git show it.
            out.push(format!("- {}", a[i]));
            i += 1;
        } else {
            out.push(format!("+ {}", b[j]));
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_shows_everything_and_escapes_control_characters() {
        assert_eq!(quote("sh"), "sh");
        assert_eq!(quote("echo pwned > ~/x"), "'echo pwned > ~/x'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote("a\u{1b}]52;c;x\u{7}"), r"'a\u{1b}]52;c;x\u{7}'");
    }

    #[test]
    fn diff_marks_removed_added_and_kept_lines() {
        let a: Vec<String> = ["one", "two", "three"].map(String::from).to_vec();
        let b: Vec<String> = ["one", "2", "three", "four"].map(String::from).to_vec();
        assert_eq!(diff(&a, &b), ["  one", "- two", "+ 2", "  three", "+ four"]);
        // A whole part replaced: the old lines first, then the new.
        let (a, b) = (vec!["x".to_owned(), "y".to_owned()], vec!["z".to_owned()]);
        assert_eq!(diff(&a, &b), ["- x", "- y", "+ z"]);
        assert_eq!(diff(&[], &b), ["+ z"]);
        assert_eq!(diff(&a, &[]), ["- x", "- y"]);
    }

    #[test]
    fn an_edited_pin_digest_is_listed_without_panicking() {
        assert_eq!(short("0123456789abcdef0123"), "0123456789abcdef");
        assert_eq!(short("ab"), "ab");
        assert_eq!(short("\u{1b}[2J"), "\\u{1b}[2J");
    }

    #[test]
    fn variables_are_named_not_expanded() {
        assert_eq!(variables("Bearer ${TOKEN}"), ["TOKEN"]);
        assert_eq!(variables("${A:-x}/${B}"), ["A", "B"]);
        assert!(variables("plain").is_empty());
    }
}
