//! MCP server configuration: the `mcpServers` JSON that Claude Code (`.mcp.json`),
//! Claude Desktop and Cursor use, read from the project and the user, merged with the
//! project winning, `${VAR}` expanded, and validated into [`ServerSpec`]s.
//!
//! Reading config does no I/O beyond the two files: it stores a command to run, never a
//! connection to hold.

pub mod edit;
mod expand;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::guard::AdapterSource;

pub use expand::expand;

/// Default time for a server to start and answer `initialize` and `tools/list`.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time for one tool call.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(120);
/// Largest config file read.
const MAX_CONFIG_BYTES: u64 = 4 << 20;

/// The name of the embedded default server, configured when no config file exists.
pub const EXAMPLE_SERVER: &str = "workspace";

/// A config problem, naming the file, the server and the field.
#[derive(Debug, thiserror::Error)]
#[error("{}{}{}: {message}", file.display(), server.as_ref().map(|s| format!(": server '{s}'")).unwrap_or_default(), field.as_ref().map(|f| format!(": field '{f}'")).unwrap_or_default())]
pub struct ConfigError {
    pub file: PathBuf,
    pub server: Option<String>,
    pub field: Option<String>,
    pub message: String,
}

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking newline-delimited JSON on stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
    /// The legacy HTTP+SSE transport (protocol 2024-11-05).
    Sse {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

impl Transport {
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
            Transport::Sse { .. } => "sse",
        }
    }
}

/// One validated server entry.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerSpec {
    pub name: String,
    pub transport: Transport,
    pub startup_timeout: Duration,
    pub tool_timeout: Duration,
    /// When set, only these tools (server's own names) are offered.
    pub enabled_tools: Option<Vec<String>>,
    pub disabled_tools: Vec<String>,
    pub adapter: AdapterSource,
    /// How edgar identifies itself when signing in to this (HTTP) server.
    pub oauth: OAuthClient,
    /// The file this entry came from (or `<built-in>` for the embedded default).
    pub source: PathBuf,
}

/// A server's `oauth` entry: a client the user registered with its authorization
/// server, or a client ID metadata document URL. Empty means dynamic registration.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct OAuthClient {
    pub client_id: Option<String>,
    /// Only a secret the user was issued; edgar ships none.
    pub client_secret: Option<String>,
    /// An https URL of a client ID metadata document (used where the server supports it).
    pub client_metadata_url: Option<String>,
    /// A fixed loopback port for the redirect, for clients registered with one.
    pub callback_port: Option<u16>,
}

impl fmt::Debug for OAuthClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthClient")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "***"))
            .field("client_metadata_url", &self.client_metadata_url)
            .field("callback_port", &self.callback_port)
            .finish()
    }
}

impl fmt::Debug for ServerSpec {
    /// Env values and headers may hold secrets: only their names are shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, target, keys): (_, String, Vec<&String>) = match &self.transport {
            Transport::Stdio {
                command, args, env, ..
            } => (
                "stdio",
                format!("{command} {}", args.join(" ")),
                env.keys().collect(),
            ),
            Transport::Http { url, headers } | Transport::Sse { url, headers } => {
                (self.transport.kind(), url.clone(), headers.keys().collect())
            }
        };
        f.debug_struct("ServerSpec")
            .field("name", &self.name)
            .field("kind", &kind)
            .field("target", &target)
            .field("secret_names", &keys)
            .finish_non_exhaustive()
    }
}

impl ServerSpec {
    /// sha256 of the transport identity (type, command, args, url), hex. The discovery
    /// cache is keyed by it: a changed command or URL invalidates the cache; nothing
    /// else (env, headers, timeouts) does.
    pub fn digest(&self) -> String {
        let identity = match &self.transport {
            Transport::Stdio { command, args, .. } => {
                serde_json::json!({"type": "stdio", "command": command, "args": args})
            }
            Transport::Http { url, .. } => serde_json::json!({"type": "http", "url": url}),
            Transport::Sse { url, .. } => serde_json::json!({"type": "sse", "url": url}),
        };
        crate::guard::hex(&Sha256::digest(identity.to_string().as_bytes()))
    }

    /// Whether the server's tool `tool` is offered, after `enabled_tools`/`disabled_tools`.
    pub fn allows(&self, tool: &str) -> bool {
        self.enabled_tools
            .as_ref()
            .is_none_or(|e| e.iter().any(|t| t == tool))
            && !self.disabled_tools.iter().any(|t| t == tool)
    }
}

/// The merged configuration.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Servers in a stable order: by name.
    pub servers: Vec<ServerSpec>,
    /// The files that were read.
    pub files: Vec<PathBuf>,
    /// True when no file existed and the embedded default was used.
    pub is_default: bool,
}

/// Where config lives for a session.
#[derive(Debug, Clone)]
pub struct ConfigPaths {
    /// `$EDGAR_CONFIG`, else `$XDG_CONFIG_HOME/edgar/mcp.json`.
    pub user: Option<PathBuf>,
    /// `.mcp.json` in the project directory.
    pub project: PathBuf,
}

impl ConfigPaths {
    /// The paths for a session whose project directory is `project_dir`.
    pub fn for_project(project_dir: &Path) -> ConfigPaths {
        let user = std::env::var_os("EDGAR_CONFIG")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| crate::paths::config_dir().map(|d| d.join("mcp.json")));
        ConfigPaths {
            user,
            project: project_dir.join(".mcp.json"),
        }
    }
}

impl Config {
    /// Reads the user file, then the project file (which wins per server). When neither
    /// exists, the embedded example server is the configuration.
    pub fn load(
        paths: &ConfigPaths,
        default_command: Option<&Path>,
    ) -> Result<Config, ConfigError> {
        let mut merged: BTreeMap<String, ServerSpec> = BTreeMap::new();
        let mut files = Vec::new();
        let mut global_adapter = None;
        for file in paths.user.iter().chain([&paths.project]) {
            let Some(doc) = read_file(file)? else {
                continue;
            };
            files.push(file.clone());
            let parsed = parse_document(file, &doc)?;
            if parsed.adapter.is_some() {
                global_adapter = parsed.adapter;
            }
            merged.extend(parsed.servers.into_iter().map(|s| (s.name.clone(), s)));
        }
        if let Some(adapter) = global_adapter {
            for s in merged
                .values_mut()
                .filter(|s| s.adapter == AdapterSource::Builtin)
            {
                s.adapter = adapter.clone();
            }
        }
        let is_default = files.is_empty();
        if is_default && let Some(command) = default_command {
            let spec = example_server(command);
            merged.insert(spec.name.clone(), spec);
        }
        Ok(Config {
            servers: merged.into_values().collect(),
            files,
            is_default,
        })
    }

    pub fn server(&self, name: &str) -> Option<&ServerSpec> {
        self.servers.iter().find(|s| s.name == name)
    }
}

/// The embedded default: this binary's own example server over the working directory.
pub fn example_server(command: &Path) -> ServerSpec {
    let transport = Transport::Stdio {
        command: command.display().to_string(),
        args: vec!["mcp".into(), "example-server".into()],
        env: BTreeMap::new(),
        cwd: None,
    };
    ServerSpec::with_defaults(EXAMPLE_SERVER, transport, "<built-in default>")
}

impl ServerSpec {
    /// A Streamable HTTP server with default timeouts and no headers.
    pub fn http(name: &str, url: &str) -> ServerSpec {
        let transport = Transport::Http {
            url: url.into(),
            headers: BTreeMap::new(),
        };
        ServerSpec::with_defaults(name, transport, "<command line>")
    }

    fn with_defaults(name: &str, transport: Transport, source: &str) -> ServerSpec {
        ServerSpec {
            name: name.into(),
            transport,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
            enabled_tools: None,
            disabled_tools: Vec::new(),
            adapter: AdapterSource::Builtin,
            oauth: OAuthClient::default(),
            source: PathBuf::from(source),
        }
    }
}

/// A file's JSON, or `None` when it does not exist.
pub fn read_file(file: &Path) -> Result<Option<Value>, ConfigError> {
    let err = |message: String| ConfigError {
        file: file.to_owned(),
        server: None,
        field: None,
        message,
    };
    let meta = match std::fs::metadata(file) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(err(format!("cannot read: {e}"))),
    };
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(err(format!(
            "{} bytes, over the {MAX_CONFIG_BYTES}-byte limit",
            meta.len()
        )));
    }
    let text = std::fs::read_to_string(file).map_err(|e| err(format!("cannot read: {e}")))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| err(format!("not valid JSON: {e}")))
}

struct Parsed {
    servers: Vec<ServerSpec>,
    adapter: Option<AdapterSource>,
}

fn parse_document(file: &Path, doc: &Value) -> Result<Parsed, ConfigError> {
    let err = |server: Option<&str>, field: Option<&str>, message: String| ConfigError {
        file: file.to_owned(),
        server: server.map(str::to_owned),
        field: field.map(str::to_owned),
        message,
    };
    let Some(root) = doc.as_object() else {
        return Err(err(
            None,
            None,
            "must be a JSON object with an \"mcpServers\" object".into(),
        ));
    };
    let base = file.parent().unwrap_or(Path::new("."));
    let adapter = match root.get("schemaAdapter") {
        None | Some(Value::Null) => None,
        Some(Value::String(p)) => Some(adapter_path(base, p)),
        Some(_) => {
            return Err(err(
                None,
                Some("schemaAdapter"),
                "must be a path string".into(),
            ));
        }
    };
    let servers = match root.get("mcpServers") {
        None | Some(Value::Null) => {
            return Ok(Parsed {
                servers: Vec::new(),
                adapter,
            });
        }
        Some(Value::Object(s)) => s,
        Some(_) => return Err(err(None, Some("mcpServers"), "must be an object".into())),
    };
    let mut out = Vec::with_capacity(servers.len());
    for (name, entry) in servers {
        let fail = |field: Option<&str>, message: String| err(Some(name), field, message);
        check_name(name).map_err(|m| fail(None, m))?;
        let Some(entry) = entry.as_object() else {
            return Err(fail(None, "must be an object".into()));
        };
        if entry.get("disabled").and_then(Value::as_bool) == Some(true)
            || entry.get("enabled").and_then(Value::as_bool) == Some(false)
        {
            continue;
        }
        out.push(
            parse_server(name, entry, file, base)
                .map_err(|(field, message)| fail(Some(field), message))?,
        );
    }
    Ok(Parsed {
        servers: out,
        adapter,
    })
}

/// `[A-Za-z0-9_-]`, 1 to 64 characters: names appear in tool names and file names.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
    {
        return Err("a server name must be 1 to 64 characters of [A-Za-z0-9_-]".into());
    }
    Ok(())
}

type FieldError = (&'static str, String);

fn parse_server(
    name: &str,
    e: &Map<String, Value>,
    file: &Path,
    base: &Path,
) -> Result<ServerSpec, FieldError> {
    let kind = match e.get("type").or_else(|| e.get("transport")) {
        Some(Value::String(t)) => t.as_str(),
        None if e.contains_key("url") => "http",
        None => "stdio",
        Some(_) => return Err(("type", "must be \"stdio\", \"http\" or \"sse\"".into())),
    };
    let transport = match kind {
        "stdio" => {
            let command = string(e, "command")?
                .ok_or(("command", "is required for a stdio server".into()))?;
            let command = expand_field(&command, "command")?;
            if command.trim().is_empty() {
                return Err(("command", "is empty".into()));
            }
            let args = strings(e, "args")?
                .iter()
                .map(|a| expand_field(a, "args"))
                .collect::<Result<_, _>>()?;
            let env = string_map(e, "env")?;
            let env = env
                .into_iter()
                .map(|(k, v)| Ok((k, expand_field(&v, "env")?)))
                .collect::<Result<_, FieldError>>()?;
            let cwd = string(e, "cwd")?
                .map(|c| expand_field(&c, "cwd"))
                .transpose()?
                .map(|c| base.join(c));
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            }
        }
        "http" | "streamable-http" | "streamableHttp" | "sse" => {
            let url = string(e, "url")?.ok_or(("url", "is required for an http server".into()))?;
            let url = expand_field(&url, "url")?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(("url", "must start with http:// or https://".into()));
            }
            let headers = string_map(e, "headers")?;
            let headers = headers
                .into_iter()
                .map(|(k, v)| Ok((k, expand_field(&v, "headers")?)))
                .collect::<Result<_, FieldError>>()?;
            if kind == "sse" {
                Transport::Sse { url, headers }
            } else {
                Transport::Http { url, headers }
            }
        }
        other => {
            return Err((
                "type",
                format!("unknown transport {other:?}; use \"stdio\", \"http\" or \"sse\""),
            ));
        }
    };
    let adapter = match string(e, "adapter")? {
        Some(p) => adapter_path(base, &p),
        None => AdapterSource::Builtin,
    };
    Ok(ServerSpec {
        name: name.to_owned(),
        transport,
        startup_timeout: seconds(e, "startup_timeout_sec")?.unwrap_or(DEFAULT_STARTUP_TIMEOUT),
        tool_timeout: seconds(e, "tool_timeout_sec")?.unwrap_or(DEFAULT_TOOL_TIMEOUT),
        enabled_tools: e
            .contains_key("enabled_tools")
            .then(|| strings(e, "enabled_tools"))
            .transpose()?,
        disabled_tools: strings(e, "disabled_tools")?,
        adapter,
        oauth: oauth_client(e)?,
        source: file.to_owned(),
    })
}

fn oauth_client(e: &Map<String, Value>) -> Result<OAuthClient, FieldError> {
    let o = match e.get("oauth") {
        None | Some(Value::Null) => return Ok(OAuthClient::default()),
        Some(Value::Object(o)) => o,
        Some(_) => return Err(("oauth", "must be an object".into())),
    };
    let field = |k: &'static str| -> Result<Option<String>, FieldError> {
        string(o, k)
            .map_err(|(_, m)| ("oauth", format!("{k} {m}")))?
            .map(|v| expand_field(&v, "oauth"))
            .transpose()
    };
    let client_metadata_url = field("client_metadata_url")?;
    if let Some(u) = &client_metadata_url
        && !u.starts_with("https://")
    {
        return Err(("oauth", "client_metadata_url must be an https URL".into()));
    }
    let callback_port = match o.get("callback_port") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .filter(|p| *p > 0)
                .ok_or(("oauth", "callback_port must be a port number".into()))?,
        ),
    };
    Ok(OAuthClient {
        client_id: field("client_id")?,
        client_secret: field("client_secret")?,
        client_metadata_url,
        callback_port,
    })
}

fn adapter_path(base: &Path, p: &str) -> AdapterSource {
    AdapterSource::File(base.join(p))
}

fn expand_field(s: &str, field: &'static str) -> Result<String, FieldError> {
    expand(s, &|v| std::env::var(v).ok()).map_err(|m| (field, m))
}

fn string(e: &Map<String, Value>, key: &'static str) -> Result<Option<String>, FieldError> {
    match e.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err((key, "must be a string".into())),
    }
}

fn strings(e: &Map<String, Value>, key: &'static str) -> Result<Vec<String>, FieldError> {
    match e.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or((key, "must be a list of strings".into()))
            })
            .collect(),
        Some(_) => Err((key, "must be a list of strings".into())),
    }
}

fn string_map(
    e: &Map<String, Value>,
    key: &'static str,
) -> Result<BTreeMap<String, String>, FieldError> {
    match e.get(key) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err((key, format!("the value of {k:?} must be a string"))),
            })
            .collect(),
        Some(_) => Err((key, "must be an object of strings".into())),
    }
}

fn seconds(e: &Map<String, Value>, key: &'static str) -> Result<Option<Duration>, FieldError> {
    match e.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(s) if s > 0.0 && s <= 86_400.0 => Ok(Some(Duration::from_secs_f64(s))),
            _ => Err((
                key,
                "must be a number of seconds between 0 and 86400".into(),
            )),
        },
    }
}

#[cfg(test)]
mod tests;
