//! Reading a config file: its JSON (bounded, regular files only), its shape
//! ([`Document`]), and each entry validated into a [`ServerSpec`] with `${VAR}` expanded
//! from a [`Lookup`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::policy::ToolPolicy;
use super::spec::{
    Grant, HostPort, IdToken, IdentityProvider, Net, OAuthClient, ProtocolChoice, Sandbox,
    SandboxProfile, ServerSpec, Transport, Written,
};
use super::{
    ConfigError, DEFAULT_STARTUP_TIMEOUT, DEFAULT_TASK_DEADLINE, DEFAULT_TOOL_TIMEOUT,
    MAX_CONFIG_BYTES, expand,
};
use crate::guard::AdapterSource;

/// The transport an unparsed entry names, for listing it.
pub fn raw_kind(e: &Map<String, Value>) -> &'static str {
    match e
        .get("type")
        .or_else(|| e.get("transport"))
        .and_then(Value::as_str)
    {
        Some("sse") => "sse",
        Some("stdio") => "stdio",
        Some(_) => "http",
        None if e.contains_key("url") => "http",
        None => "stdio",
    }
}

pub(super) fn is_disabled(e: &Map<String, Value>) -> bool {
    e.get("disabled").and_then(Value::as_bool) == Some(true)
        || e.get("enabled").and_then(Value::as_bool) == Some(false)
}

/// A file's JSON, or `None` when it does not exist. A symbolic link is followed (the
/// user's own config is often one); [`read_project_file`] refuses them.
pub fn read_file(file: &Path) -> Result<Option<Value>, ConfigError> {
    read_json(file, crate::paths::Links::Follow)
}

/// A repository's file's JSON (`.mcp.json`): a regular file, never through a link.
pub fn read_project_file(file: &Path) -> Result<Option<Value>, ConfigError> {
    read_json(file, crate::paths::Links::Refuse)
}

fn read_json(file: &Path, links: crate::paths::Links) -> Result<Option<Value>, ConfigError> {
    let err = |message: String| ConfigError {
        file: file.to_owned(),
        server: None,
        field: None,
        message,
    };
    // Regular files only, opened without following a final link or blocking on a FIFO
    // or device (a cloned repository can hold any of them).
    let bytes = match crate::paths::read_regular_with(file, MAX_CONFIG_BYTES, links) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(None),
        Err(e) => return Err(err(format!("cannot read: {e}"))),
    };
    let text = String::from_utf8(bytes).map_err(|_| err("not UTF-8".into()))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| err(format!("not valid JSON: {e}")))
}

/// A config file's shape: its `schemaAdapter`, its enabled, well-named entries, and
/// what to say of keys edgar does not read ([`super::unknown::notes`]).
pub(super) struct Document<'a> {
    pub(super) adapter: Option<PathBuf>,
    pub(super) entries: Vec<(&'a String, &'a Map<String, Value>)>,
    pub(super) notes: Vec<String>,
}

impl<'a> Document<'a> {
    pub(super) fn read(file: &Path, doc: &'a Value) -> Result<Document<'a>, ConfigError> {
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
            Some(Value::String(p)) => Some(base.join(p)),
            Some(_) => {
                return Err(err(
                    None,
                    Some("schemaAdapter"),
                    "must be a path string".into(),
                ));
            }
        };
        let servers = match root.get("mcpServers") {
            None | Some(Value::Null) => None,
            Some(Value::Object(s)) => Some(s),
            Some(_) => return Err(err(None, Some("mcpServers"), "must be an object".into())),
        };
        let mut entries = Vec::new();
        for (name, entry) in servers.into_iter().flatten() {
            check_name(name).map_err(|m| err(Some(name), None, m))?;
            let Some(entry) = entry.as_object() else {
                return Err(err(Some(name), None, "must be an object".into()));
            };
            if !is_disabled(entry) {
                entries.push((name, entry));
            }
        }
        Ok(Document {
            adapter,
            entries,
            notes: super::unknown::notes(root),
        })
    }
}

pub(super) struct Parsed {
    pub(super) servers: Vec<ServerSpec>,
    pub(super) adapter: Option<AdapterSource>,
    pub(super) notes: Vec<String>,
}

pub(super) fn parse_document(file: &Path, doc: &Value) -> Result<Parsed, ConfigError> {
    let document = Document::read(file, doc)?;
    let base = file.parent().unwrap_or(Path::new("."));
    let servers = document
        .entries
        .into_iter()
        .map(|(name, entry)| {
            parse_server(name, entry, file, base, &from_env).map_err(|(field, message)| {
                ConfigError {
                    file: file.to_owned(),
                    server: Some(name.clone()),
                    field: Some(field.into()),
                    message,
                }
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(Parsed {
        servers,
        adapter: document.adapter.map(AdapterSource::File),
        notes: document.notes,
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

pub(super) type FieldError = (&'static str, String);

/// Where `${VAR}` takes its value.
pub(super) type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

pub(super) fn from_env(var: &str) -> Option<String> {
    std::env::var(var).ok()
}

/// For checking an unapproved entry's shape without reading the environment: every
/// variable is set, to a value that passes the shape checks even where it starts a URL.
pub(super) fn no_env(_: &str) -> Option<String> {
    Some("http://unexpanded".into())
}

pub(super) fn parse_server(
    name: &str,
    e: &Map<String, Value>,
    file: &Path,
    base: &Path,
    env: Lookup,
) -> Result<ServerSpec, FieldError> {
    let expand_field = |s: &str, field: &'static str| expand_field(s, field, env);
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
            let env_inherit = match e.get("env_inherit") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err(("env_inherit", "must be true or false".into())),
            };
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
                env_inherit,
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
        Some(p) => AdapterSource::File(base.join(p)),
        None => AdapterSource::Builtin,
    };
    let written = Written {
        target: string(e, "command")
            .ok()
            .flatten()
            .filter(|_| matches!(transport, Transport::Stdio { .. }))
            .or_else(|| string(e, "url").ok().flatten())
            .unwrap_or_default(),
        args: if matches!(transport, Transport::Stdio { .. }) {
            strings(e, "args").unwrap_or_default()
        } else {
            Vec::new()
        },
    };
    let sandbox = match e.get("sandbox") {
        None | Some(Value::Null) => Sandbox::Unset,
        Some(_) if !matches!(transport, Transport::Stdio { .. }) => {
            return Err(("sandbox", "applies to stdio servers only".into()));
        }
        Some(Value::String(s)) if s == "off" => Sandbox::Off,
        Some(Value::Object(o)) => Sandbox::On(sandbox_profile(o, base, env)?),
        Some(_) => {
            return Err((
                "sandbox",
                "must be \"off\" or {\"read\": [...], \"write\": [...], \"net\": [\"host:port\", ...] | \"none\" | \"all\"}".into(),
            ));
        }
    };
    let per_user = match e.get("per_user") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(("per_user", "must be true or false".into())),
    };
    Ok(ServerSpec {
        per_user,
        sandbox,
        written,
        name: name.to_owned(),
        transport,
        startup_timeout: seconds(e, "startup_timeout_sec")?.unwrap_or(DEFAULT_STARTUP_TIMEOUT),
        tool_timeout: seconds(e, "tool_timeout_sec")?.unwrap_or(DEFAULT_TOOL_TIMEOUT),
        task_deadline: seconds(e, "task_deadline_sec")?.unwrap_or(DEFAULT_TASK_DEADLINE),
        enabled_tools: e
            .contains_key("enabled_tools")
            .then(|| strings(e, "enabled_tools"))
            .transpose()?,
        disabled_tools: strings(e, "disabled_tools")?,
        adapter,
        oauth: oauth_client(e, env)?,
        source: file.to_owned(),
        project: None,
        tool_policy: ToolPolicy::default(),
        elicitation_defaults: match string(e, "elicitation")?.as_deref() {
            None | Some("decline") => false,
            Some("accept_defaults") => true,
            Some(_) => {
                return Err((
                    "elicitation",
                    "must be \"accept_defaults\" or \"decline\"".into(),
                ));
            }
        },
        protocol: match string(e, "protocol")?.as_deref() {
            None | Some("auto") => ProtocolChoice::Auto,
            Some("handshake") => ProtocolChoice::Handshake,
            Some("stateless") => ProtocolChoice::Stateless,
            Some(_) => {
                return Err((
                    "protocol",
                    "must be \"auto\", \"handshake\" or \"stateless\"".into(),
                ));
            }
        },
    })
}

/// Hosts a profile may list (each loopback one is a listener in the server's namespace).
pub const MAX_NET_HOSTS: usize = 64;

/// A `"sandbox"` object: paths with `~/` for the home and `${VAR}` expanded, relative
/// ones against the config file's directory; `net` as `"none"` (the default), `"all"` or
/// a list of `host:port` (an empty one is `"none"`).
fn sandbox_profile(
    o: &Map<String, Value>,
    base: &Path,
    env: Lookup,
) -> Result<SandboxProfile, FieldError> {
    for k in o.keys() {
        if !matches!(k.as_str(), "read" | "write" | "net") {
            return Err((
                "sandbox",
                format!(
                    "unknown key {}: use read, write and net",
                    crate::text::shown(k)
                ),
            ));
        }
    }
    let paths = |key: &'static str| -> Result<Vec<PathBuf>, FieldError> {
        strings(o, key)
            .map_err(|(_, m)| ("sandbox", format!("{key} {m}")))?
            .iter()
            .map(|p| {
                let p = expand_field(p, "sandbox", env)?;
                let p = match p.strip_prefix("~/").or((p == "~").then_some("")) {
                    Some(rest) => env("HOME")
                        .map(|h| Path::new(&h).join(rest))
                        .ok_or(("sandbox", "~ needs HOME".to_owned()))?,
                    None => base.join(p),
                };
                Ok(p)
            })
            .collect()
    };
    let net = match o.get("net") {
        None | Some(Value::Null) => Net::None,
        Some(Value::String(s)) if s == "none" => Net::None,
        Some(Value::String(s)) if s == "all" => Net::All,
        Some(Value::Array(list)) => {
            let mut hosts = Vec::new();
            for h in list {
                let Value::String(h) = h else {
                    return Err(("sandbox", "net: each host is a \"host:port\" string".into()));
                };
                let h = expand_field(h, "sandbox", env)?;
                hosts.push(HostPort::parse(&h).map_err(|e| ("sandbox", format!("net: {e}")))?);
            }
            hosts.sort();
            hosts.dedup();
            if hosts.len() > MAX_NET_HOSTS {
                return Err((
                    "sandbox",
                    format!("net: at most {MAX_NET_HOSTS} hosts (use \"*.\" for a domain's)"),
                ));
            }
            if hosts.is_empty() {
                Net::None
            } else {
                Net::Hosts(hosts)
            }
        }
        Some(_) => {
            return Err((
                "sandbox",
                "net must be \"none\", \"all\" or a list of \"host:port\"".into(),
            ));
        }
    };
    Ok(SandboxProfile {
        read: paths("read")?,
        write: paths("write")?,
        net,
        implied: false,
    })
}

fn oauth_client(e: &Map<String, Value>, env: Lookup) -> Result<OAuthClient, FieldError> {
    let o = match e.get("oauth") {
        None | Some(Value::Null) => return Ok(OAuthClient::default()),
        Some(Value::Object(o)) => o,
        Some(_) => return Err(("oauth", "must be an object".into())),
    };
    let field = |k: &'static str| -> Result<Option<String>, FieldError> {
        string(o, k)
            .map_err(|(_, m)| ("oauth", format!("{k} {m}")))?
            .map(|v| expand_field(&v, "oauth", env))
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
    let client_secret = field("client_secret")?;
    let issuer = field("issuer")?;
    if client_secret.is_some() && issuer.is_none() {
        return Err((
            "oauth",
            "client_secret needs \"issuer\": the authorization server that issued it (edgar sends the secret to no other)".into(),
        ));
    }
    if let Some(i) = &issuer
        && reqwest::Url::parse(i).is_err()
    {
        return Err(("oauth", "issuer must be a URL".into()));
    }
    let grant = match field("grant")?.as_deref() {
        None | Some("authorization_code") => Grant::AuthorizationCode,
        Some("client_credentials") => Grant::ClientCredentials,
        Some("cross_app_access") => Grant::CrossAppAccess,
        Some("token_exchange") => Grant::TokenExchange,
        Some("user_sign_in") => Grant::UserSignIn,
        Some(_) => {
            return Err((
                "oauth",
                "grant must be \"authorization_code\", \"client_credentials\", \"cross_app_access\", \"token_exchange\" or \"user_sign_in\"".into(),
            ));
        }
    };
    let client_id = field("client_id")?;
    let private_key_file = field("private_key_file")?.map(PathBuf::from);
    let private_key_in_store = match field("private_key")?.as_deref() {
        None => false,
        Some("store") => true,
        Some(_) => {
            return Err((
                "oauth",
                "private_key must be \"store\" (the key `edgar mcp set-key` stored); a file is \"private_key_file\"".into(),
            ));
        }
    };
    if grant.unattended() && client_id.is_none() {
        return Err((
            "oauth",
            format!(
                "grant \"{}\" needs the client_id the authorization server issued",
                grant.as_str()
            ),
        ));
    }
    let credentials = usize::from(client_secret.is_some())
        + usize::from(private_key_file.is_some())
        + usize::from(private_key_in_store);
    if grant == Grant::ClientCredentials && credentials != 1 {
        return Err((
            "oauth",
            "grant \"client_credentials\" needs one of client_secret, private_key_file or \"private_key\": \"store\"".into(),
        ));
    }
    let identity = match o.get("identity") {
        None | Some(Value::Null) => None,
        Some(Value::Object(i)) => Some(identity_provider(i, env)?),
        Some(_) => return Err(("oauth", "identity must be an object".into())),
    };
    if grant == Grant::CrossAppAccess && identity.is_none() {
        return Err((
            "oauth",
            "grant \"cross_app_access\" needs \"identity\": the identity provider's token_endpoint, client_id and id_token_command".into(),
        ));
    }
    let token_endpoint = field("token_endpoint")?;
    if let Some(t) = &token_endpoint
        && !crate::net::is_https_or_loopback(t)
    {
        return Err((
            "oauth",
            "token_endpoint must be an https URL (a user's token crosses it)".into(),
        ));
    }
    if grant == Grant::TokenExchange && token_endpoint.is_none() {
        return Err((
            "oauth",
            "grant \"token_exchange\" needs token_endpoint: where each user's token is exchanged"
                .into(),
        ));
    }
    if grant == Grant::UserSignIn && callback_port.is_some() {
        return Err((
            "oauth",
            "grant \"user_sign_in\" returns to the team gateway's own callback, not a loopback port: remove callback_port".into(),
        ));
    }
    if grant == Grant::TokenExchange && (private_key_file.is_some() || private_key_in_store) {
        return Err((
            "oauth",
            "grant \"token_exchange\" authenticates with client_secret (or none), not a private key".into(),
        ));
    }
    Ok(OAuthClient {
        client_id,
        client_secret,
        issuer,
        client_metadata_url,
        callback_port,
        grant,
        private_key_file,
        private_key_in_store,
        scope: field("scope")?,
        identity,
        token_endpoint,
        audience: field("audience")?,
    })
}

fn identity_provider(i: &Map<String, Value>, env: Lookup) -> Result<IdentityProvider, FieldError> {
    let field = |k: &'static str| -> Result<Option<String>, FieldError> {
        string(i, k)
            .map_err(|(_, m)| ("oauth", format!("identity.{k} {m}")))?
            .map(|v| expand_field(&v, "oauth", env))
            .transpose()
    };
    let missing = |k: &str| ("oauth", format!("identity needs {k}"));
    let token_endpoint = field("token_endpoint")?.ok_or_else(|| missing("token_endpoint"))?;
    if !crate::net::is_https_or_loopback(&token_endpoint) {
        return Err((
            "oauth",
            "identity.token_endpoint must be an https URL (an ID token crosses it)".into(),
        ));
    }
    Ok(IdentityProvider {
        token_endpoint,
        client_id: field("client_id")?.ok_or_else(|| missing("client_id"))?,
        client_secret: field("client_secret")?,
        id_token: IdToken::Command(
            // The command is run as written, never expanded (like api_key_command).
            string(i, "id_token_command")
                .map_err(|(_, m)| ("oauth", format!("identity.id_token_command {m}")))?
                .ok_or_else(|| missing("id_token_command"))?,
        ),
    })
}

fn expand_field(s: &str, field: &'static str, env: Lookup) -> Result<String, FieldError> {
    expand(s, env).map_err(|m| (field, m))
}

pub(super) fn string(
    e: &Map<String, Value>,
    key: &'static str,
) -> Result<Option<String>, FieldError> {
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
