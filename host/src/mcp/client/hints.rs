//! What a failed start says: the server's stderr tail, and why a private working
//! directory or confinement may be the cause, with the key that changes it.

use std::path::Path;

use crate::config::{ServerSpec, Transport};
use crate::mcp::McpError;
use crate::text::shown;

/// How a stdio server runs, in one line: its confinement, or why it has none.
pub fn confinement_line(spec: &ServerSpec) -> String {
    let installs = match &spec.sandbox {
        crate::config::Sandbox::On(_) => own_installs(spec),
        _ => Vec::new(),
    };
    confinement_line_found(spec, &installs)
}

/// [`confinement_line`] with the installs its start found (not looked up again).
pub(crate) fn confinement_line_found(spec: &ServerSpec, installs: &[std::path::PathBuf]) -> String {
    match &spec.sandbox {
        crate::config::Sandbox::On(p) => {
            let mut line = crate::mcp::sandbox::describe(p);
            if !installs.is_empty() {
                let shown: Vec<String> = installs
                    .iter()
                    .map(|p| crate::text::visible(&p.display().to_string()))
                    .collect();
                let what = if spec.project.is_some() {
                    "the runtime its program belongs to (found on your PATH) read with it"
                } else {
                    "its own install read with it"
                };
                line.push_str(&format!("; {what}: {}", shown.join(", ")));
            }
            line
        }
        crate::config::Sandbox::Off => "NOT confined: its entry says \"sandbox\": \"off\"".into(),
        crate::config::Sandbox::Unset => {
            "NOT confined: its entry has no \"sandbox\" profile".into()
        }
    }
}

/// The installs a stdio server reads with its program (for a project's entry, only the
/// runtime of a program found on the user's PATH), found as its start will find them.
fn own_installs(spec: &ServerSpec) -> Vec<std::path::PathBuf> {
    let Transport::Stdio {
        command,
        args,
        env,
        cwd,
        ..
    } = &spec.transport
    else {
        return Vec::new();
    };
    let inherited = std::env::var_os("PATH");
    let path = env
        .get("PATH")
        .map(std::ffi::OsStr::new)
        .or(inherited.as_deref());
    crate::mcp::sandbox::own_installs(&crate::mcp::sandbox::Program {
        command,
        path,
        args,
        cwd: cwd.as_deref(),
        server: &spec.name,
        project: spec.project.as_deref(),
    })
}

/// The error's text without the leading "MCP server 'x' ", for storing as a reason.
pub(super) fn strip_server(e: &McpError, name: &str) -> String {
    let text = e.to_string();
    text.strip_prefix(&format!("MCP server '{name}' "))
        .map(str::to_owned)
        .unwrap_or(text)
}

/// A start failure's reason with `hint` appended (other errors as they are).
pub(super) fn explained(e: McpError, hint: &str) -> McpError {
    match e {
        McpError::Start { server, reason } => McpError::Start {
            server,
            reason: format!("{reason}{hint}"),
        },
        McpError::Closed { server, reason } => McpError::Closed {
            server,
            reason: format!("{reason}{hint}"),
        },
        McpError::Protocol { server, reason } => McpError::Protocol {
            server,
            reason: format!("{reason}{hint}"),
        },
        other => other,
    }
}

/// A server without `cwd` that names a relative path which exists where edgar runs
/// (`node server.js`) failed because it runs in a private empty directory: the error says
/// so and how to fix it, instead of leaving the user to guess.
pub(super) fn workdir_hint(e: McpError, spec: &ServerSpec, session_dir: &Path) -> McpError {
    let Transport::Stdio {
        command,
        args,
        cwd: None,
        ..
    } = &spec.transport
    else {
        return e;
    };
    if spec.project.is_some() {
        return e;
    }
    let relative = std::iter::once(command).chain(args).find(|a| {
        let p = Path::new(a.as_str());
        p.is_relative() && !a.starts_with('-') && session_dir.join(p).exists()
    });
    let Some(found) = relative else {
        return e;
    };
    let hint = format!(
        "; it runs in a private empty directory, not in {} (where {} is): give it \"cwd\" in its entry, or an absolute path",
        shown(&session_dir.display().to_string()),
        shown(found)
    );
    explained(e, &hint)
}

/// A confined server that failed to start may have been denied what it needed: the error
/// says how it ran and which keys would allow more.
pub(super) fn confined_hint(e: McpError, spec: &ServerSpec) -> McpError {
    if !matches!(spec.sandbox, crate::config::Sandbox::On(_)) {
        return e;
    }
    let hint = format!(
        "; it runs {}: if it was denied a file, a connection or a system call it needs, allow it in its entry's \"sandbox\" (\"read\", \"write\", \"net\": [\"host:port\"] or \"all\") or set \"sandbox\": \"off\"",
        confinement_line(spec)
    );
    explained(e, &hint)
}

/// Adds the server's last stderr lines to errors that do not already carry them.
pub(super) fn with_tail(e: McpError, tail: &str) -> McpError {
    match e {
        McpError::Timeout {
            server,
            method,
            timeout,
        } if !tail.is_empty() => McpError::Start {
            reason: format!(
                "no answer to {method} within {} s{tail}",
                timeout.as_secs_f64()
            ),
            server,
        },
        McpError::Version { server, version } if !tail.is_empty() => McpError::Start {
            reason: format!(
                "it speaks protocol version {version}; edgar speaks {}, {}{tail}",
                crate::mcp::protocol::MODERN.join(", "),
                crate::mcp::protocol::PROTOCOL.join(", ")
            ),
            server,
        },
        McpError::Protocol { server, reason } => McpError::Protocol {
            server,
            reason: format!("{reason}{tail}"),
        },
        other => other,
    }
}
