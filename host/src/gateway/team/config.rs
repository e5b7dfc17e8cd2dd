//! The team gateway's configuration file (`serve --gateway-config FILE`): who the
//! gateway is to its clients (the `resource` they reach and the token audience), whose
//! tokens it believes (`issuer`), what it permits (a Cedar policy file) and how it is
//! reached (TLS, or a proxy in front). Unknown keys are refused: a misspelt security
//! setting must not be silently ignored.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use reqwest::Url;
use serde::Deserialize;

use super::TeamError;
use crate::state::Database;

/// Clock skew allowed on `exp` and `nbf` unless the file says otherwise.
const DEFAULT_LEEWAY_SECONDS: u64 = 60;

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    resource: String,
    issuer: String,
    #[serde(default)]
    jwks_uri: Option<String>,
    #[serde(default)]
    authorization_servers: Option<Vec<String>>,
    #[serde(default)]
    scopes_supported: Vec<String>,
    #[serde(default)]
    required_scopes: Vec<String>,
    #[serde(default)]
    groups_claim: Option<String>,
    policy: PathBuf,
    #[serde(default)]
    tls: Option<Tls>,
    #[serde(default)]
    behind_proxy: Vec<IpAddr>,
    #[serde(default)]
    metrics_from: Vec<IpAddr>,
    #[serde(default)]
    rate_limits: Option<RateLimits>,
    #[serde(default)]
    leeway_seconds: Option<u64>,
    #[serde(default)]
    introspection: Option<IntrospectionFile>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    state_key_file: Option<PathBuf>,
    #[serde(default)]
    browser_client: Option<BrowserClientFile>,
}

/// The gateway as a client of the company's identity provider, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BrowserClientFile {
    client_id: String,
    /// The environment variable holding the client's secret (never the file).
    #[serde(default)]
    client_secret_env: Option<String>,
}

/// RFC 7662 introspection for opaque tokens, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IntrospectionFile {
    endpoint: String,
    client_id: String,
    /// The environment variable holding the client's secret (never the file).
    #[serde(default)]
    client_secret_env: Option<String>,
}

/// Where opaque tokens are asked about, and as whom.
#[derive(Clone)]
pub struct IntrospectionConfig {
    pub endpoint: String,
    pub client_id: String,
    pub client_secret: Option<String>,
}

impl std::fmt::Debug for IntrospectionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntrospectionConfig")
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "***"))
            .finish()
    }
}

/// The gateway as a client of the company's identity provider (OpenID Connect,
/// authorization code with PKCE), to learn who is at the browser of a user's own
/// sign-in to an upstream (`"grant": "user_sign_in"`) before it is kept for them.
#[derive(Clone)]
pub struct BrowserClient {
    pub client_id: String,
    pub client_secret: Option<String>,
}

impl std::fmt::Debug for BrowserClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrowserClient")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "***"))
            .finish()
    }
}

/// The certificate chain and private key the gateway serves HTTPS with (PEM files).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tls {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Calls allowed per minute, with a burst, for each user and for each tool.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimits {
    #[serde(default)]
    pub per_user: Option<Rate>,
    #[serde(default)]
    pub per_tool: Option<Rate>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rate {
    pub per_minute: u32,
    #[serde(default)]
    pub burst: Option<u32>,
}

/// The configuration, checked: URLs parsed, paths made absolute.
#[derive(Debug, Clone)]
pub struct TeamConfig {
    /// What clients reach, the audience every token must name (RFC 8707).
    pub resource: Url,
    pub issuer: String,
    pub jwks_uri: Option<Url>,
    pub authorization_servers: Vec<String>,
    pub scopes_supported: Vec<String>,
    /// Scopes every token must carry (else 403 `insufficient_scope`).
    pub required_scopes: Vec<String>,
    pub groups_claim: String,
    pub policy: PathBuf,
    pub tls: Option<Tls>,
    /// Proxies whose `X-Forwarded-*` headers are believed (their peer address only).
    pub behind_proxy: Vec<IpAddr>,
    /// Addresses besides loopback that may read `/metrics`.
    pub metrics_from: Vec<IpAddr>,
    pub rate_limits: RateLimits,
    pub leeway_seconds: u64,
    /// Opaque tokens are introspected here; without it only JWTs are accepted.
    pub introspection: Option<IntrospectionConfig>,
    /// Where replicas share their state; `None`: this machine's files.
    pub state: Option<SharedState>,
    /// Who is at the browser of a user's own sign-in to an upstream is asked of the
    /// identity provider as this client; required when a server's grant is
    /// `user_sign_in`.
    pub browser_client: Option<BrowserClient>,
}

/// The database replicas share, and the file holding the key they share.
#[derive(Debug, Clone)]
pub struct SharedState {
    pub database: Database,
    pub key_file: PathBuf,
}

impl TeamConfig {
    /// Reads and checks `path`; relative paths inside are taken from its directory.
    pub fn load(path: &Path) -> Result<TeamConfig, TeamError> {
        let bad = |reason: String| TeamError::Config {
            path: path.to_owned(),
            reason,
        };
        let bytes = crate::paths::read_capped(path, 1 << 20)
            .map_err(|e| bad(e.to_string()))?
            .ok_or_else(|| bad("no such file".into()))?;
        let file: File = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        TeamConfig::check(file, base).map_err(bad)
    }

    fn check(file: File, base: &Path) -> Result<TeamConfig, String> {
        let resource = Url::parse(&file.resource)
            .map_err(|e| format!("resource {:?} is not a URL: {e}", file.resource))?;
        let secure = |u: &Url| u.scheme() == "https" || crate::net::is_loopback(u);
        if !secure(&resource) {
            return Err(format!(
                "resource {resource} must be https (http only on loopback)"
            ));
        }
        if resource.fragment().is_some() || resource.query().is_some() {
            return Err("resource must have no query or fragment (RFC 8707)".into());
        }
        let issuer_url = Url::parse(&file.issuer)
            .map_err(|e| format!("issuer {:?} is not a URL: {e}", file.issuer))?;
        if !secure(&issuer_url) {
            return Err(format!(
                "issuer {} must be https (http only on loopback)",
                file.issuer
            ));
        }
        let jwks_uri = match &file.jwks_uri {
            None => None,
            Some(s) => {
                let u = Url::parse(s).map_err(|e| format!("jwks_uri {s:?} is not a URL: {e}"))?;
                if !secure(&u) {
                    return Err(format!(
                        "jwks_uri {s} must be https (http only on loopback)"
                    ));
                }
                Some(u)
            }
        };
        let limits = file.rate_limits.unwrap_or_default();
        for rate in [limits.per_user, limits.per_tool].into_iter().flatten() {
            if rate.per_minute == 0 || rate.burst == Some(0) {
                return Err("a rate limit of 0 refuses every call; leave it out instead".into());
            }
        }
        let introspection = match file.introspection {
            None => None,
            Some(i) => {
                let u = Url::parse(&i.endpoint).map_err(|e| {
                    format!("introspection.endpoint {:?} is not a URL: {e}", i.endpoint)
                })?;
                if !secure(&u) {
                    return Err(format!(
                        "introspection.endpoint {} must be https (http only on loopback)",
                        i.endpoint
                    ));
                }
                let client_secret = match &i.client_secret_env {
                    None => None,
                    Some(var) => Some(std::env::var(var).map_err(|_| {
                        format!("introspection.client_secret_env names {var}, which is not set")
                    })?),
                };
                Some(IntrospectionConfig {
                    endpoint: i.endpoint,
                    client_id: i.client_id,
                    client_secret,
                })
            }
        };
        let browser_client = match file.browser_client {
            None => None,
            Some(b) => {
                let client_secret = match &b.client_secret_env {
                    None => None,
                    Some(var) => Some(std::env::var(var).map_err(|_| {
                        format!("browser_client.client_secret_env names {var}, which is not set")
                    })?),
                };
                Some(BrowserClient {
                    client_id: b.client_id,
                    client_secret,
                })
            }
        };
        let absolute = |p: PathBuf| if p.is_absolute() { p } else { base.join(p) };
        let state = match (file.state, file.state_key_file) {
            (None, None) => None,
            (None, Some(_)) => {
                return Err("state_key_file is set without \"state\" (a postgres:// URL)".into());
            }
            (Some(_), None) => {
                return Err(
                    "\"state\" needs \"state_key_file\": the key replicas share (openssl rand -hex 32, mode 0600)".into(),
                );
            }
            (Some(url), Some(key)) => Some(SharedState {
                database: Database::new(&url).map_err(|e| e.to_string())?,
                key_file: absolute(key),
            }),
        };
        Ok(TeamConfig {
            authorization_servers: file
                .authorization_servers
                .unwrap_or_else(|| vec![file.issuer.clone()]),
            resource,
            issuer: file.issuer,
            jwks_uri,
            scopes_supported: file.scopes_supported,
            required_scopes: file.required_scopes,
            groups_claim: file.groups_claim.unwrap_or_else(|| "groups".into()),
            policy: absolute(file.policy),
            tls: file.tls.map(|t| Tls {
                cert: absolute(t.cert),
                key: absolute(t.key),
            }),
            behind_proxy: file.behind_proxy,
            metrics_from: file.metrics_from,
            rate_limits: limits,
            leeway_seconds: file.leeway_seconds.unwrap_or(DEFAULT_LEEWAY_SECONDS),
            introspection,
            state,
            browser_client,
        })
    }

    /// `host[:port]` as clients name the gateway (the `Host` header they send).
    pub fn authority(&self) -> String {
        let host = self.resource.host_str().unwrap_or_default();
        match self.resource.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_owned(),
        }
    }

    /// Where the protected resource metadata is (RFC 9728 §3.1: the well-known path
    /// with the resource's path appended).
    pub fn metadata_url(&self) -> String {
        let mut u = self.resource.clone();
        let path = self.resource.path().trim_end_matches('/');
        u.set_path(&format!("/.well-known/oauth-protected-resource{path}"));
        u.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: serde_json::Value) -> Result<TeamConfig, String> {
        let file: File = serde_json::from_value(v).map_err(|e| e.to_string())?;
        TeamConfig::check(file, Path::new("/etc/edgar"))
    }

    #[test]
    fn a_minimal_file_gets_its_defaults_and_absolute_paths() {
        let c = parse(serde_json::json!({
            "resource": "https://mcp.example.com/mcp",
            "issuer": "https://login.example.com/realms/acme",
            "policy": "team.cedar",
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            c.authorization_servers,
            ["https://login.example.com/realms/acme"]
        );
        assert_eq!(c.groups_claim, "groups");
        assert_eq!(c.policy, Path::new("/etc/edgar/team.cedar"));
        assert_eq!(c.authority(), "mcp.example.com");
        assert_eq!(
            c.metadata_url(),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
    }

    #[test]
    fn unsafe_or_misspelt_settings_are_refused() {
        let base = serde_json::json!({
            "resource": "https://mcp.example.com/mcp",
            "issuer": "https://login.example.com",
            "policy": "p.cedar",
        });
        for (key, value, says) in [
            (
                "resource",
                serde_json::json!("http://mcp.example.com/mcp"),
                "https",
            ),
            (
                "issuer",
                serde_json::json!("http://login.example.com"),
                "https",
            ),
            (
                "jwks_uri",
                serde_json::json!("http://keys.example.com"),
                "https",
            ),
            (
                "resource",
                serde_json::json!("https://m.example.com/mcp#x"),
                "fragment",
            ),
            ("polcy", serde_json::json!("p.cedar"), "unknown field"),
            (
                "rate_limits",
                serde_json::json!({"per_user": {"per_minute": 0}}),
                "0",
            ),
            (
                "state",
                serde_json::json!("postgres://gw:pw@db/gw"),
                "state_key_file",
            ),
            ("state_key_file", serde_json::json!("k"), "\"state\""),
        ] {
            let mut v = base.clone();
            v[key] = value;
            let e = parse(v).err().unwrap_or_default();
            assert!(e.contains(says), "{key}: {e}");
        }
        let mut v = base.clone();
        v["state"] = serde_json::json!("mysql://gw:hunter2@db/gw");
        v["state_key_file"] = serde_json::json!("state.key");
        let e = parse(v.clone()).err().unwrap_or_default();
        assert!(e.contains("postgres://") && !e.contains("hunter2"), "{e}");
        v["state"] = serde_json::json!("postgres://gw:hunter2@db/gw");
        let c = parse(v).unwrap_or_else(|e| panic!("{e}"));
        let s = c.state.unwrap_or_else(|| panic!("a shared state"));
        assert_eq!(s.key_file, Path::new("/etc/edgar/state.key"));
        assert!(!format!("{:?}", s.database).contains("hunter2"));
        let mut v = base.clone();
        v["resource"] = serde_json::json!("http://127.0.0.1:9000/mcp");
        v["issuer"] = serde_json::json!("http://localhost:9001");
        assert!(parse(v).is_ok(), "loopback may be http");
    }
}
