//! A validated server entry: how to reach the server ([`Transport`]), its limits, its
//! sign-in client ([`OAuthClient`]), its confinement ([`Sandbox`]), and the embedded
//! default server.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::policy::ToolPolicy;
use super::{
    DEFAULT_STARTUP_TIMEOUT, DEFAULT_TASK_DEADLINE, DEFAULT_TOOL_TIMEOUT, EXAMPLE_SERVER, project,
};
use crate::guard::AdapterSource;

/// How to reach a server.
#[derive(Clone, PartialEq, Eq)]
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

impl fmt::Debug for Transport {
    /// Env values and headers may be secrets: names only; a command line and a URL with
    /// the credentials written in them masked ([`crate::redact`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
                env_inherit,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", &crate::redact::args(args))
                .field("env", &env.keys().collect::<Vec<_>>())
                .field("cwd", cwd)
                .field("env_inherit", env_inherit)
                .finish(),
            Transport::Http { url, headers } | Transport::Sse { url, headers } => f
                .debug_struct(if matches!(self, Transport::Http { .. }) {
                    "Http"
                } else {
                    "Sse"
                })
                .field("url", &crate::redact::url(url))
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .finish(),
        }
    }
}

impl fmt::Debug for ServerSpec {
    /// Env values and headers may hold secrets: only their names are shown, and the
    /// target as written (an expanded `${VAR}` may be a secret too), its credentials
    /// masked.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, keys): (_, Vec<&String>) = match &self.transport {
            Transport::Stdio { env, .. } => ("stdio", env.keys().collect()),
            Transport::Http { headers, .. } | Transport::Sse { headers, .. } => {
                (self.transport.kind(), headers.keys().collect())
            }
        };
        let target = std::iter::once(crate::redact::url(&self.written.target))
            .chain(crate::redact::args(&self.written.args))
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

    pub(super) fn with_defaults(name: &str, transport: Transport, source: &str) -> ServerSpec {
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
