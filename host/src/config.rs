//! MCP server configuration: the `mcpServers` JSON that Claude Code (`.mcp.json`),
//! Claude Desktop and Cursor use, read from the project and the user, merged with the
//! project winning, `${VAR}` expanded, and validated into [`ServerSpec`]s.
//!
//! Reading config does no I/O beyond the two files: it stores a command to run, never a
//! connection to hold.

pub mod bound;
pub mod edit;
mod expand;
pub mod foreign;
pub mod project;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::guard::AdapterSource;
use bound::{Bound, entry_digest};

pub use expand::expand;

/// Default time for a server to start and answer `initialize` and `tools/list`.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time for one tool call.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(120);
/// Default time for a call the server runs as a task (MCP tasks extension).
pub const DEFAULT_TASK_DEADLINE: Duration = Duration::from_secs(3600);
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
        /// Pass edgar's whole environment (`env_inherit: true`), not just
        /// [`crate::mcp::INHERITED_ENV`] and `env`.
        env_inherit: bool,
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
    /// For an entry of a project's `.mcp.json`: that project's directory. Its approval and
    /// its tools' pins belong to that directory.
    pub project: Option<PathBuf>,
    /// The administrator's tool rules and result cap.
    pub tool_policy: ToolPolicy,
    /// `"elicitation": "accept_defaults"`: with no human to ask, answer this server's
    /// elicitations with its own defaults (otherwise they are declined).
    pub elicitation_defaults: bool,
    /// `"protocol"`: which protocol era to speak (found out by default).
    pub protocol: ProtocolChoice,
    /// `task_deadline_sec`: the longest a call the server runs as a task is followed
    /// (each poll has `tool_timeout`); then the task is cancelled at the server.
    pub task_deadline: Duration,
    /// The command, arguments and URL as written, before `${VAR}` expansion: what is
    /// shown (`mcp get`, `Debug`), since an expanded value may be a secret.
    pub written: Written,
    /// `"sandbox"`: what a stdio server's process may touch (`mcp::sandbox`).
    pub sandbox: Sandbox,
    /// `"per_user": true`: behind a team gateway, each user gets a process (or
    /// connection) of their own; anywhere else there is one user, and this changes nothing.
    pub per_user: bool,
}

/// A stdio entry's `"sandbox"`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Sandbox {
    /// No `"sandbox"` key in a user entry: not confined (docs/security.md says why), unless
    /// the policy requires it. A project entry without one gets edgar's default profile.
    #[default]
    Unset,
    /// `"sandbox": "off"`: not confined, on purpose.
    Off,
    /// Confined to this profile.
    On(SandboxProfile),
}

/// `"sandbox": {"read": [PATH...], "write": [PATH...], "net": [HOST:PORT...] | "none" | "all"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxProfile {
    /// Read (and run) beyond the system's directories, its program and its arguments.
    pub read: Vec<PathBuf>,
    /// Read and write, beyond its private temporary directory.
    pub write: Vec<PathBuf>,
    pub net: Net,
    /// edgar's own profile for an entry that has none (a project server's), not the entry's.
    pub implied: bool,
}

/// A confined server's network.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Net {
    /// No TCP, no internet, packet or Unix sockets.
    #[default]
    None,
    /// Only these hosts, by name: through edgar's filtering proxy, from a network
    /// namespace of its own (`mcp::sandbox::egress`).
    Hosts(Vec<HostPort>),
    /// Everything.
    All,
}

/// One `"net"` host: a DNS name (or `*.` and a domain, for its subdomains), an IPv4
/// address or a bracketed IPv6 one, and a port. Kept lower-case, without a trailing dot.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostPort {
    pub host: String,
    pub port: u16,
}

impl HostPort {
    /// Reads `host:port`; the error says what is wrong with it.
    pub fn parse(s: &str) -> Result<HostPort, String> {
        let shown = crate::text::shown(s);
        let (host, port) = s
            .rsplit_once(':')
            .ok_or_else(|| format!("{shown} has no port: write it as host:port"))?;
        let port = match port.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => {
                return Err(format!(
                    "{shown}: the port must be a number from 1 to 65535"
                ));
            }
        };
        let host = host.to_ascii_lowercase();
        let host = host.strip_suffix('.').unwrap_or(&host).to_owned();
        let ok = if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            v6.parse::<std::net::Ipv6Addr>().is_ok()
        } else {
            let name = host.strip_prefix("*.").unwrap_or(&host);
            !name.is_empty()
                && name.len() <= 253
                && name.split('.').all(|label| {
                    !label.is_empty()
                        && label.len() <= 63
                        && !label.starts_with('-')
                        && !label.ends_with('-')
                        && label
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                })
        };
        if !ok {
            return Err(format!(
                "{shown}: the host must be a name (api.example.com, *.example.com), an IPv4 address or a bracketed IPv6 one"
            ));
        }
        Ok(HostPort { host, port })
    }

    /// Whether a connection to `host` (as a client names it) and `port` is this one's.
    pub fn admits(&self, host: &str, port: u16) -> bool {
        if port != self.port {
            return false;
        }
        let host = host.to_ascii_lowercase();
        let host = host.strip_suffix('.').unwrap_or(&host);
        match self.host.strip_prefix("*.") {
            Some(domain) => host
                .strip_suffix(domain)
                .is_some_and(|rest| rest.len() > 1 && rest.ends_with('.')),
            None => host == self.host,
        }
    }

    /// Whether it names this machine's loopback: reachable raw too, not only by proxy.
    pub fn is_loopback(&self) -> bool {
        matches!(self.host.as_str(), "localhost" | "[::1]")
            || self
                .host
                .parse::<std::net::Ipv4Addr>()
                .is_ok_and(|a| a.is_loopback())
    }
}

impl std::fmt::Display for HostPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// An entry's target as written in its file (`${VAR}` references kept).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    /// The command of a stdio server, or the URL of an HTTP one.
    pub target: String,
    pub args: Vec<String>,
}

impl Written {
    /// Whether anything in it is taken from the environment when it runs.
    pub fn has_variables(&self) -> bool {
        project::has_variable(&self.target) || self.args.iter().any(|a| project::has_variable(a))
    }
}

/// A server's protocol era: probed once and remembered (`auto`), or fixed by the
/// entry for a server whose probe misleads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ProtocolChoice {
    #[default]
    Auto,
    /// The `initialize` handshake (2024-11-05 to 2025-11-25), no probe.
    Handshake,
    /// The stateless era (2026-07-28), no probe and no fallback.
    Stateless,
}

/// A server's `oauth` entry: a client the user registered with its authorization
/// server, or a client ID metadata document URL. Empty means dynamic registration.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct OAuthClient {
    pub client_id: Option<String>,
    /// Only a secret the user was issued; edgar ships none.
    pub client_secret: Option<String>,
    /// The authorization server (its RFC 8414 `issuer`) that issued `client_id` and
    /// `client_secret`: they are sent to no other, whatever the MCP server later names.
    /// Required with a secret in a config file.
    pub issuer: Option<String>,
    /// An https URL of a client ID metadata document (used where the server supports it).
    pub client_metadata_url: Option<String>,
    /// A fixed loopback port for the redirect, for clients registered with one.
    pub callback_port: Option<u16>,
    /// How tokens are obtained: by a human in a browser (the default) or without one.
    pub grant: Grant,
    /// A PEM private key file: the client authenticates with a signed JWT
    /// (`private_key_jwt`, RFC 7523) instead of a secret.
    pub private_key_file: Option<PathBuf>,
    /// `"private_key": "store"`: the key `edgar mcp set-key NAME` put in the credential
    /// store (the OS keyring), instead of a file.
    pub private_key_in_store: bool,
    /// Scopes to ask for when no human signs in (else the server's challenge decides).
    pub scope: Option<String>,
    /// The enterprise identity provider, for [`Grant::CrossAppAccess`].
    pub identity: Option<IdentityProvider>,
    /// Where a team gateway's user's token is exchanged, for [`Grant::TokenExchange`].
    pub token_endpoint: Option<String>,
    /// The `audience` asked for in that exchange (RFC 8693), when the endpoint wants one.
    pub audience: Option<String>,
}

/// How a server's tokens are obtained (`oauth.grant`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Grant {
    /// A human signs in in a browser: authorization code with PKCE.
    #[default]
    AuthorizationCode,
    /// The client's own credentials (a secret or a private key), no human: CI,
    /// services, `edgar mcp serve`. Tokens are fetched again when they expire.
    ClientCredentials,
    /// Enterprise-managed sign-in (SEP-990): an ID token from the organisation's
    /// identity provider is exchanged there for an identity assertion grant (ID-JAG,
    /// RFC 8693), which the server's authorization server exchanges for its token
    /// (RFC 7523 JWT bearer grant).
    CrossAppAccess,
    /// Per user, behind a team gateway: each user's own access token is exchanged for
    /// one scoped to this server (RFC 8693), never passed through.
    TokenExchange,
    /// Per user, behind a team gateway, for a server whose sign-in is not the company's:
    /// each user signs in to it themselves, sent to its authorization page by URL-mode
    /// elicitation, and the gateway's own callback finishes it (authorization code with
    /// PKCE, the tokens kept per user).
    UserSignIn,
}

impl Grant {
    pub fn as_str(self) -> &'static str {
        match self {
            Grant::AuthorizationCode => "authorization_code",
            Grant::ClientCredentials => "client_credentials",
            Grant::CrossAppAccess => "cross_app_access",
            Grant::TokenExchange => "token_exchange",
            Grant::UserSignIn => "user_sign_in",
        }
    }

    /// Whether tokens come without a human (and so without a browser).
    pub fn unattended(self) -> bool {
        matches!(
            self,
            Grant::ClientCredentials | Grant::CrossAppAccess | Grant::TokenExchange
        )
    }

    /// Whether each team gateway user has tokens of their own (nothing is stored for
    /// the server itself).
    pub fn per_user(self) -> bool {
        matches!(self, Grant::TokenExchange | Grant::UserSignIn)
    }
}

/// An organisation's identity provider (`oauth.identity`), where an ID token is
/// exchanged for an ID-JAG.
#[derive(Clone, PartialEq, Eq)]
pub struct IdentityProvider {
    pub token_endpoint: String,
    /// This client at the identity provider.
    pub client_id: String,
    pub client_secret: Option<String>,
    pub id_token: IdToken,
}

/// Where the ID token comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum IdToken {
    /// A command whose standard output is the token (`id_token_command`; split at
    /// spaces and run without a shell, like `api_key_command`).
    Command(String),
    /// A token given by the embedding program (never from a config file).
    Given(crate::auth::Secret),
}

impl fmt::Debug for IdentityProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdentityProvider")
            .field("token_endpoint", &self.token_endpoint)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "***"))
            .field(
                "id_token",
                &match &self.id_token {
                    IdToken::Command(c) => format!("command {c:?}"),
                    IdToken::Given(_) => "***".into(),
                },
            )
            .finish()
    }
}

impl fmt::Debug for OAuthClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthClient")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "***"))
            .field("issuer", &self.issuer)
            .field("client_metadata_url", &self.client_metadata_url)
            .field("callback_port", &self.callback_port)
            .field("grant", &self.grant)
            .field("private_key_file", &self.private_key_file)
            .field("private_key_in_store", &self.private_key_in_store)
            .field("scope", &self.scope)
            .field("identity", &self.identity)
            .field("token_endpoint", &self.token_endpoint)
            .field("audience", &self.audience)
            .finish()
    }
}

impl fmt::Debug for ServerSpec {
    /// Env values and headers may hold secrets: only their names are shown, and the
    /// target as written (an expanded `${VAR}` may be a secret too).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, keys): (_, Vec<&String>) = match &self.transport {
            Transport::Stdio { env, .. } => ("stdio", env.keys().collect()),
            Transport::Http { headers, .. } | Transport::Sse { headers, .. } => {
                (self.transport.kind(), headers.keys().collect())
            }
        };
        let target = std::iter::once(&self.written.target)
            .chain(&self.written.args)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(" ");
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
        crate::digest::hex(&Sha256::digest(identity.to_string().as_bytes()))
    }

    /// Whether the server's tool `tool` is offered, after `enabled_tools`/`disabled_tools`
    /// and the administrator's tool rules.
    pub fn allows(&self, tool: &str) -> bool {
        self.enabled_tools
            .as_ref()
            .is_none_or(|e| e.iter().any(|t| t == tool))
            && !self.disabled_tools.iter().any(|t| t == tool)
            && self.tool_policy.allows(&self.name, tool)
    }

    /// Whether any filter applies to this server's tools (so the unfiltered list can be
    /// shared without a copy when none does).
    pub fn filters_tools(&self) -> bool {
        self.enabled_tools.is_some()
            || !self.disabled_tools.is_empty()
            || self.tool_policy.allow.is_some()
            || !self.tool_policy.deny.is_empty()
    }
}

/// The part of the policy that applies to one server's tools and results, kept with its
/// [`ServerSpec`] so filtering needs no lookup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolPolicy {
    pub allow: Option<Vec<String>>,
    pub deny: Vec<String>,
    /// The rules for the server's prompts (`server/prompt` globs).
    pub prompts: Rules,
    /// The rules for the server's resources (`server/URI` globs).
    pub resources: Rules,
    pub max_result_bytes: Option<u64>,
    /// What the guard's findings lead to.
    pub findings: FindingActions,
}

/// What the session does with the guard's findings (policy `"findings"`): per severity
/// on a tool, for a secret in a result and for one in a call's arguments. The defaults
/// hold back a tool with a high finding, warn of a medium one, mask a secret before the
/// model reads it, and send no call that carries one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FindingActions {
    pub high: FindingAction,
    pub medium: FindingAction,
    pub low: FindingAction,
    pub secret_in_result: SecretAction,
    /// A secret in a call's arguments (a key the model was talked into passing along).
    pub secret_in_arguments: ArgumentAction,
}

impl Default for FindingActions {
    fn default() -> FindingActions {
        FindingActions {
            high: FindingAction::Quarantine,
            medium: FindingAction::Warn,
            low: FindingAction::Ignore,
            secret_in_result: SecretAction::Mask,
            secret_in_arguments: ArgumentAction::Block,
        }
    }
}

/// What a finding on a tool leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FindingAction {
    /// The tool is held back (listed as quarantined, with the finding), and audited.
    Quarantine,
    /// The tool is offered; the finding is logged and audited.
    Warn,
    /// Nothing.
    Ignore,
}

/// What a secret found in a tool's result leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SecretAction {
    /// The secret is replaced by a marker naming its rule before the model reads it.
    Mask,
    /// The call fails with the rule's name; the result is not shown.
    Block,
}

/// What a secret found in a call's arguments leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArgumentAction {
    /// The call is not sent; the error names the rule and the argument, never the value.
    Block,
    /// The call is sent; the finding is logged and audited.
    Allow,
}

impl ToolPolicy {
    /// Whether the policy lets the model see and call `server/tool`.
    pub fn allows(&self, server: &str, tool: &str) -> bool {
        allowed(self.allow.as_deref(), &self.deny, server, tool)
    }
}

/// An administrator's allow and deny globs over `server/item` (deny wins; with `allow`,
/// what matches none of it is refused).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    pub allow: Option<Vec<String>>,
    pub deny: Vec<String>,
}

impl Rules {
    /// Whether `server/item` passes, and if not, the rule list that refused it.
    pub fn check(&self, server: &str, item: &str) -> Result<(), &'static str> {
        if allowed(self.allow.as_deref(), &self.deny, server, item) {
            return Ok(());
        }
        let full = format!("{server}/{item}");
        Err(if self.deny.iter().any(|p| crate::text::glob(p, &full)) {
            "deny"
        } else {
            "allow"
        })
    }
}

fn allowed(allow: Option<&[String]>, deny: &[String], server: &str, item: &str) -> bool {
    if allow.is_none() && deny.is_empty() {
        return true;
    }
    let full = format!("{server}/{item}");
    allow.is_none_or(|a| a.iter().any(|p| crate::text::glob(p, &full)))
        && !deny.iter().any(|p| crate::text::glob(p, &full))
}

/// The merged configuration.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The servers a session may run, in a stable order: by name. Trusted (the user's
    /// own, or approved) and allowed by the policy.
    pub servers: Vec<ServerSpec>,
    /// Entries that are configured but may not run, and why. A session never sees them.
    pub held: Vec<Held>,
    /// The files that were read.
    pub files: Vec<PathBuf>,
    /// True when no file existed and the embedded default was used.
    pub is_default: bool,
    /// The project directory (canonical where it can be resolved).
    pub project_dir: PathBuf,
}

/// A configured entry that does not run.
#[derive(Debug, Clone)]
pub struct Held {
    pub name: String,
    pub kind: &'static str,
    pub source: PathBuf,
    pub why: Hold,
}

/// Why an entry is held back.
#[derive(Debug, Clone)]
pub enum Hold {
    /// A project entry no human has approved in exactly this form.
    NeedsApproval(Box<ProjectEntry>),
    /// A project entry with the name of one of the user's servers: the user's wins.
    Shadowed { by: PathBuf },
    /// The administrator's policy forbids it.
    Blocked { rule: String },
    /// A project entry asks for something no project may (`config::project::refusal`):
    /// no approval can make it run.
    Refused { field: String, reason: String },
}

/// A project's server entry as written, not expanded: what an approval covers.
#[derive(Clone)]
pub struct ProjectEntry {
    pub name: String,
    pub project: PathBuf,
    pub file: PathBuf,
    pub raw: Map<String, Value>,
    /// The adapter component it would load (its own `adapter`, else the project's
    /// `schemaAdapter`), with the sha256 of its bytes or why they cannot be read.
    pub adapter: Option<(PathBuf, Result<String, String>)>,
    /// The project's own code it runs (`project::code_files`), hashed.
    pub code: Vec<project::CodeFile>,
    /// The environment variables its command, arguments and URL use (their values at
    /// approval are bound into `digest`, never kept).
    pub variables: Vec<String>,
    /// What an approval of this entry is bound to.
    pub digest: String,
}

impl fmt::Debug for ProjectEntry {
    /// The raw entry may hold literal secrets: only its name and digest are shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProjectEntry")
            .field("name", &self.name)
            .field("file", &self.file)
            .field("digest", &self.digest)
            .finish_non_exhaustive()
    }
}

impl ProjectEntry {
    /// Checks the entry's fields without expanding anything (every `${VAR}` stands for
    /// a placeholder), so a broken project file is reported before anyone approves it.
    pub fn check_shape(&self) -> Result<(), ConfigError> {
        let base = self.file.parent().unwrap_or(Path::new("."));
        parse_server(&self.name, &self.raw, &self.file, base, &no_env)
            .map(drop)
            .map_err(|(field, message)| ConfigError {
                file: self.file.clone(),
                server: Some(self.name.clone()),
                field: Some(field.into()),
                message,
            })
    }

    /// The entry expanded and validated, as it would run once approved. Expands
    /// `${VAR}` from the environment: call it only for a human deciding, or after
    /// approval.
    pub fn spec(&self) -> Result<ServerSpec, ConfigError> {
        let base = self.file.parent().unwrap_or(Path::new("."));
        let mut spec = parse_server(&self.name, &self.raw, &self.file, base, &from_env).map_err(
            |(field, message)| ConfigError {
                file: self.file.clone(),
                server: Some(self.name.clone()),
                field: Some(field.into()),
                message,
            },
        )?;
        // The adapter runs only with the bytes the approval covered.
        match &self.adapter {
            Some((path, Ok(sha))) => {
                spec.adapter = AdapterSource::Pinned(path.clone(), sha.clone())
            }
            Some((path, Err(_))) => spec.adapter = AdapterSource::File(path.clone()),
            None => {}
        }
        spec.project = Some(self.project.clone());
        // A project's stdio server is confined unless its entry says otherwise.
        if spec.sandbox == Sandbox::Unset && matches!(spec.transport, Transport::Stdio { .. }) {
            spec.sandbox = Sandbox::On(SandboxProfile {
                implied: true,
                ..SandboxProfile::default()
            });
        }
        Ok(spec)
    }
}

/// Where config lives for a session.
#[derive(Debug, Clone)]
pub struct ConfigPaths {
    /// `$EDGAR_CONFIG`, else `$XDG_CONFIG_HOME/edgar/mcp.json`.
    pub user: Option<PathBuf>,
    /// `.mcp.json` in the project directory.
    pub project: PathBuf,
    /// edgar's state directory, where approvals are kept; `None` approves nothing.
    pub state: Option<PathBuf>,
    /// The administrator's policy file, if one applies.
    pub policy: Option<PathBuf>,
}

impl ConfigPaths {
    /// The paths for a session whose project directory is `project_dir`.
    pub fn for_project(project_dir: &Path) -> ConfigPaths {
        // A relative `$EDGAR_CONFIG` is ignored: read from the directory edgar runs in, a
        // repository's file would be trusted as the user's own.
        let user = crate::paths::absolute_var("EDGAR_CONFIG")
            .map(PathBuf::from)
            .or_else(|| crate::paths::config_dir().map(|d| d.join("mcp.json")));
        ConfigPaths {
            user,
            project: project_dir.join(".mcp.json"),
            state: crate::paths::state_dir(),
            policy: crate::paths::policy_file(),
        }
    }
}

/// What the config files say, before anyone judged it: the user's servers (trusted as
/// written), and the project's entries (unexpanded, each with the digest an approval of
/// it must carry). `trust::admit` decides what of it runs.
#[derive(Debug, Default)]
pub struct Configured {
    /// The user's servers, by name.
    pub user: BTreeMap<String, ServerSpec>,
    /// The project file's entries, in file order.
    pub project: Vec<ProjectEntry>,
    /// The files that were read.
    pub files: Vec<PathBuf>,
    /// The project directory (canonical where it can be resolved).
    pub project_dir: PathBuf,
}

/// Reads the user file, then the project file, judging nothing (see [`Configured`]).
pub fn read(paths: &ConfigPaths) -> Result<Configured, ConfigError> {
    let project_dir = paths.project.parent().unwrap_or(Path::new("."));
    let project_dir = project_dir
        .canonicalize()
        .unwrap_or_else(|_| project_dir.to_owned());
    let mut written = Configured::default();
    if let Some(file) = &paths.user
        && let Some(doc) = read_file(file)?
    {
        written.files.push(file.clone());
        let parsed = parse_document(file, &doc)?;
        for mut s in parsed.servers {
            if let (Some(a), AdapterSource::Builtin) = (&parsed.adapter, &s.adapter) {
                s.adapter = a.clone();
            }
            written.user.insert(s.name.clone(), s);
        }
    }
    if let Some(doc) = read_project_file(&paths.project)? {
        written.files.push(paths.project.clone());
        written.project = project_entries(&paths.project, &project_dir, &doc)?;
    }
    written.project_dir = project_dir;
    Ok(written)
}

impl Config {
    pub fn server(&self, name: &str) -> Option<&ServerSpec> {
        self.servers.iter().find(|s| s.name == name)
    }

    pub fn held(&self, name: &str) -> Option<&Held> {
        self.held.iter().find(|h| h.name == name)
    }
}

/// The entries of a project file, unexpanded, each with the digest an approval of it
/// must carry. Reads the adapter components they name (to bind their bytes).
fn project_entries(
    file: &Path,
    project_dir: &Path,
    doc: &Value,
) -> Result<Vec<ProjectEntry>, ConfigError> {
    let document = Document::read(file, doc)?;
    let base = file.parent().unwrap_or(Path::new("."));
    let mut out = Vec::with_capacity(document.entries.len());
    let mut identity = None;
    for (name, entry) in document.entries {
        let err = |field: &str, message: String| ConfigError {
            file: file.to_owned(),
            server: Some(name.clone()),
            field: Some(field.into()),
            message,
        };
        let adapter = match string(entry, "adapter").map_err(|(f, m)| err(f, m))? {
            Some(p) => Some(base.join(p)),
            None => document.adapter.clone(),
        };
        // Bounded, regular files only: this runs before anyone approved the entry.
        let adapter = adapter.map(|path| {
            let sha = crate::guard::read_component(&path).map(|b| crate::digest::sha256_hex(&b));
            (path, sha)
        });
        let code = project::code_files(project_dir, entry);
        let code_bound: Vec<(String, String)> = code
            .iter()
            .map(|c| {
                let sha = match &c.sha256 {
                    Ok(s) => s.clone(),
                    Err(e) => format!("unreadable: {e}"),
                };
                (c.path.clone(), sha)
            })
            .collect();
        let identity = identity.get_or_insert_with(|| project::identity(project_dir));
        let variables = project::variables(entry, &from_env);
        let digest = entry_digest(
            project_dir,
            name,
            entry,
            Bound {
                adapter: adapter
                    .as_ref()
                    .map(|(p, sha)| (p.as_path(), sha.as_deref().unwrap_or("unreadable"))),
                code: &code_bound,
                identity: Some(identity),
                variables: &variables,
            },
        );
        out.push(ProjectEntry {
            name: name.clone(),
            project: project_dir.to_owned(),
            file: file.to_owned(),
            raw: entry.clone(),
            adapter,
            code,
            variables: variables.into_iter().map(|(n, _)| n).collect(),
            digest,
        });
    }
    Ok(out)
}

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

fn is_disabled(e: &Map<String, Value>) -> bool {
    e.get("disabled").and_then(Value::as_bool) == Some(true)
        || e.get("enabled").and_then(Value::as_bool) == Some(false)
}

/// The embedded default: this binary's own example server over the project directory,
/// named as an argument (it runs, like every server without a `cwd`, in a private empty
/// directory).
pub fn example_server(command: &Path, root: &Path) -> ServerSpec {
    let transport = Transport::Stdio {
        command: command.display().to_string(),
        args: vec![
            "mcp".into(),
            "example-server".into(),
            "--root".into(),
            root.display().to_string(),
        ],
        env: BTreeMap::new(),
        cwd: None,
        env_inherit: false,
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
        let written = match &transport {
            Transport::Stdio { command, args, .. } => Written {
                target: command.clone(),
                args: args.clone(),
            },
            Transport::Http { url, .. } | Transport::Sse { url, .. } => Written {
                target: url.clone(),
                args: Vec::new(),
            },
        };
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
            project: None,
            tool_policy: ToolPolicy::default(),
            elicitation_defaults: false,
            protocol: ProtocolChoice::Auto,
            task_deadline: DEFAULT_TASK_DEADLINE,
            written,
            sandbox: Sandbox::Unset,
            per_user: false,
        }
    }
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

/// A config file's shape: its `schemaAdapter` and its enabled, well-named entries.
struct Document<'a> {
    adapter: Option<PathBuf>,
    entries: Vec<(&'a String, &'a Map<String, Value>)>,
}

impl<'a> Document<'a> {
    fn read(file: &Path, doc: &'a Value) -> Result<Document<'a>, ConfigError> {
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
        Ok(Document { adapter, entries })
    }
}

struct Parsed {
    servers: Vec<ServerSpec>,
    adapter: Option<AdapterSource>,
}

fn parse_document(file: &Path, doc: &Value) -> Result<Parsed, ConfigError> {
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

/// Where `${VAR}` takes its value.
type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

fn from_env(var: &str) -> Option<String> {
    std::env::var(var).ok()
}

/// For checking an unapproved entry's shape without reading the environment: every
/// variable is set, to a value that passes the shape checks even where it starts a URL.
fn no_env(_: &str) -> Option<String> {
    Some("http://unexpanded".into())
}

fn parse_server(
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

/// A `"sandbox"` object: paths with `~/` for the home and `${VAR}` expanded, relative
/// ones against the config file's directory; `net` as `"none"` (the default), `"all"` or
/// a list of `host:port` (an empty one is `"none"`).
/// Hosts a profile may list (each loopback one is a listener in the server's namespace).
pub const MAX_NET_HOSTS: usize = 64;

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
