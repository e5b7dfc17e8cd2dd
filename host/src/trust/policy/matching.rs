//! How a server rule meets a server: by what runs and where requests go, never by how an
//! entry spells them. A command is compared as the program the entry would really run
//! (found through the entry's own `PATH`, links resolved), a URL part by part after
//! parsing (scheme; host without case, trailing dot, IDNA or numeric disguises; port;
//! path).

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use reqwest::Url;

use super::glob;

/// Whether a rule is admitting (allow: only what surely matches) or excluding (deny:
/// anything that could match, spelled or resolved).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Allow,
    Deny,
}

/// A stdio server as a rule sees it: its command line as written, and the program it
/// would run (canonical) when that can be found.
pub struct Launch<'a> {
    pub command: &'a str,
    pub args: &'a [String],
    pub resolved: Option<PathBuf>,
}

/// Whether the command pattern `pattern` (a glob over "program args...") meets `launch`.
/// The pattern's program, when a bare name (`npx`, no glob), stands for what edgar's own
/// `PATH` finds under that name; a path or a glob is compared with the resolved program.
/// Allow rules match only the resolved program; deny rules match either spelling.
pub fn command_matches(pattern: &str, launch: &Launch<'_>, mode: Mode) -> bool {
    let args = launch.args.join(" ");
    let line = |program: &str| {
        if args.is_empty() {
            program.to_owned()
        } else {
            format!("{program} {args}")
        }
    };
    let resolved_line = launch
        .resolved
        .as_ref()
        .map(|p| line(&p.display().to_string()));
    let (program, rest) = match pattern.split_once(' ') {
        Some((p, r)) => (p, Some(r)),
        None => (pattern, None),
    };
    let bare = !program.contains('/') && !program.contains(['*', '?']);
    let resolved_pattern = if bare {
        resolve(program, std::env::var_os("PATH").as_deref(), None).map(|p| match rest {
            Some(r) => format!("{} {r}", p.display()),
            None => p.display().to_string(),
        })
    } else {
        Some(pattern.to_owned())
    };
    let by_resolution = match (&resolved_pattern, &resolved_line) {
        (Some(p), Some(l)) => glob(p, l),
        _ => false,
    };
    match mode {
        Mode::Allow => by_resolution,
        Mode::Deny => {
            by_resolution
                || glob(pattern, &line(launch.command))
                || resolved_line.as_deref().is_some_and(|l| glob(pattern, l))
        }
    }
}

/// The program `command` names, found as `execvp` would: a name with a `/` relative to
/// `dir`, else the first executable regular file in `path`'s directories (relative ones
/// against `dir`); canonical, links resolved. `None` when nothing is found.
pub fn resolve(
    command: &str,
    path: Option<&std::ffi::OsStr>,
    dir: Option<&Path>,
) -> Option<PathBuf> {
    let against = |p: PathBuf| -> Option<PathBuf> {
        if p.is_absolute() {
            Some(p)
        } else {
            dir.map(|d| d.join(p))
        }
    };
    let runnable = |p: &Path| -> Option<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(p).ok()?;
        (meta.is_file() && meta.permissions().mode() & 0o111 != 0)
            .then(|| p.canonicalize().ok())
            .flatten()
    };
    if command.contains('/') {
        return runnable(&against(PathBuf::from(command))?);
    }
    if command.is_empty() {
        return None;
    }
    for entry in std::env::split_paths(path?) {
        // An empty entry is the working directory, as for the shell.
        let entry = if entry.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            entry
        };
        if let Some(p) = against(entry.join(command)).and_then(|p| runnable(&p)) {
            return Some(p);
        }
    }
    None
}

/// A URL pattern: `scheme://host[:port][/path-glob]`. The host may be `*` or start with
/// `*.` (whole labels: `*.example.com` matches `a.example.com` and `a.b.example.com`,
/// not `example.com` or `badexample.com`). Without a path it matches every path.
pub fn url_matches(pattern: &str, url: &str) -> bool {
    let Ok(url) = Url::parse(url) else {
        return false;
    };
    let Some((scheme, rest)) = pattern.split_once("://") else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case(url.scheme()) {
        return false;
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], Some(&rest[i..])),
        None => (rest, None),
    };
    let (host_pattern, port) = split_port(authority);
    let Some(url_host) = url.host_str().map(normal_host) else {
        return false;
    };
    if !host_matches(host_pattern, &url_host, scheme) {
        return false;
    }
    let url_port = url.port_or_known_default();
    let pattern_port = match port {
        Some(p) => p.parse::<u16>().ok(),
        None => default_port(scheme),
    };
    if port != Some("*") && pattern_port != url_port {
        return false;
    }
    match path {
        None | Some("/") | Some("/*") => true,
        Some(p) => glob(p, url.path()),
    }
}

/// `host[:port]`, with IPv6 brackets kept on the host.
fn split_port(authority: &str) -> (&str, Option<&str>) {
    if authority.starts_with('[') {
        return match authority.find("]:") {
            Some(i) => (&authority[..=i], Some(&authority[i + 2..])),
            None => (authority, None),
        };
    }
    match authority.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    }
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme.to_ascii_lowercase().as_str() {
        "https" | "wss" => Some(443),
        "http" | "ws" => Some(80),
        _ => None,
    }
}

/// A host as the URL parser leaves it (lowercase, IDNA as punycode, IPv4 in dotted form)
/// without the trailing dot, and an IPv4-mapped IPv6 address as its IPv4 address.
fn normal_host(host: &str) -> String {
    let host = host.strip_suffix('.').unwrap_or(host);
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(IpAddr::V6(v6)) = bare.parse::<IpAddr>() {
        return match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => format!("[{v6}]"),
        };
    }
    host.to_ascii_lowercase()
}

/// The pattern's host normalized the way a URL's is (through the URL parser, so
/// `Example.COM.`, `bücher.de` and `0x7f.1` are what they stand for).
fn host_matches(pattern: &str, url_host: &str, scheme: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    let (wild, name) = match pattern.strip_prefix("*.") {
        Some(n) => (true, n),
        None => (false, pattern),
    };
    let scheme = if default_port(scheme).is_some() {
        scheme
    } else {
        "https"
    };
    let Some(name) = Url::parse(&format!("{scheme}://{name}/"))
        .ok()
        .and_then(|u| u.host_str().map(normal_host))
    else {
        return false;
    };
    if wild {
        url_host
            .strip_suffix(name.as_str())
            .is_some_and(|head| head.len() > 1 && head.ends_with('.'))
    } else {
        url_host == name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_compared_part_by_part_whatever_their_spelling() {
        for (pattern, url, want) in [
            (
                "https://mcp.example.com",
                "https://mcp.example.com/mcp",
                true,
            ),
            (
                "https://mcp.example.com",
                "https://MCP.Example.COM./mcp",
                true,
            ),
            (
                "https://mcp.example.com",
                "https://mcp.example.com:443/x",
                true,
            ),
            (
                "https://mcp.example.com",
                "https://mcp.example.com:8443/x",
                false,
            ),
            (
                "https://mcp.example.com",
                "http://mcp.example.com/mcp",
                false,
            ),
            (
                "https://mcp.example.com",
                "https://mcp.example.com.evil.net/",
                false,
            ),
            (
                "https://mcp.example.com",
                "https://mcp.example.com@evil.net/",
                false,
            ),
            (
                "https://mcp.example.com",
                "https://evil.net/?mcp.example.com",
                false,
            ),
            ("https://*.example.com", "https://a.example.com/mcp", true),
            ("https://*.example.com", "https://a.b.example.com/mcp", true),
            ("https://*.example.com", "https://example.com/mcp", false),
            ("https://*.example.com", "https://badexample.com/mcp", false),
            ("https://*.example.com/*", "https://a.example.com/mcp", true),
            (
                "https://mcp.example.com/mcp*",
                "https://mcp.example.com/mcp/v2",
                true,
            ),
            (
                "https://mcp.example.com/mcp*",
                "https://mcp.example.com/other",
                false,
            ),
            (
                "https://bücher.example",
                "https://xn--bcher-kva.example/",
                true,
            ),
            ("https://BÜCHER.example", "https://bücher.example/", true),
            ("http://127.0.0.1:8080", "http://0x7f.0.0.1:8080/mcp", true),
            ("http://127.0.0.1:8080", "http://2130706433:8080/mcp", true),
            (
                "http://127.0.0.1:8080",
                "http://[::ffff:127.0.0.1]:8080/mcp",
                true,
            ),
            ("http://127.0.0.1:8080", "http://127.0.0.2:8080/mcp", false),
            ("http://[::1]:9", "http://[0:0:0:0:0:0:0:1]:9/", true),
            ("https://a.example:*", "https://a.example:1234/", true),
        ] {
            assert_eq!(url_matches(pattern, url), want, "{pattern} ~ {url}");
        }
    }

    #[test]
    fn programs_are_found_as_exec_would_and_links_resolved() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let bin = d.path().join("bin");
        let evil = d.path().join("evil");
        std::fs::create_dir_all(&bin).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(&evil).unwrap_or_else(|e| panic!("{e}"));
        for p in [bin.join("tool"), evil.join("tool")] {
            std::fs::write(&p, "#!/bin/sh\n").unwrap_or_else(|e| panic!("{e}"));
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        std::os::unix::fs::symlink(evil.join("tool"), bin.join("alias"))
            .unwrap_or_else(|e| panic!("{e}"));
        let path = std::env::join_paths([&bin]).unwrap_or_else(|e| panic!("{e}"));
        let real = |p: &Path| p.canonicalize().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            resolve("tool", Some(&path), None),
            Some(real(&bin.join("tool")))
        );
        assert_eq!(
            resolve("alias", Some(&path), None),
            Some(real(&evil.join("tool"))),
            "a link is what it points to"
        );
        assert_eq!(
            resolve("./tool", None, Some(&evil)),
            Some(real(&evil.join("tool")))
        );
        assert_eq!(resolve("nothing", Some(&path), None), None);
        let spelled = |command: &'static str, resolved: Option<PathBuf>| Launch {
            command,
            args: &[],
            resolved,
        };
        let pattern = format!("{}", real(&bin.join("tool")).display());
        // An allow rule admits only the program it names, however it is spelled.
        assert!(command_matches(
            &pattern,
            &spelled("tool", resolve("tool", Some(&path), None)),
            Mode::Allow
        ));
        assert!(!command_matches(
            &pattern,
            &spelled("alias", resolve("alias", Some(&path), None)),
            Mode::Allow
        ));
        assert!(!command_matches(
            &format!("{}", bin.join("tool").display()),
            &spelled("/nonexistent/tool", None),
            Mode::Allow
        ));
        // A deny rule also stops the spelling.
        assert!(command_matches(
            "*tool",
            &spelled("./tool", None),
            Mode::Deny
        ));
    }
}
