//! Signing in to an MCP server (MCP authorization, 2025-11-25, with 2025-06-18 and
//! 2025-03-26 servers in mind): probe, discover ([`discovery`]), identify the client
//! (configured, client ID metadata document, or [`register`]), PKCE through the
//! loopback listener, and [`token`] exchange and refresh.
//!
//! [`McpAuth`] is one server's sign-in. The Streamable HTTP transport asks it for a
//! bearer token for every request and tells it about 401s and 403 `insufficient_scope`;
//! it refreshes once, and re-authorizes only when a human can answer (a [`Browser`]),
//! at most [`MAX_AUTHORIZATIONS`] times. Tokens live in the credential store as one
//! secret per server and never reach output, logs or errors.

pub mod discovery;
pub mod exchange;
pub mod grant;
pub mod register;
pub mod token;
pub mod user_sign_in;

mod authorize;
mod renew;
#[cfg(test)]
mod tests;

pub use authorize::Begun;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use reqwest::Url;
use sha2::Digest as _;

use self::discovery::ServerMetadata;
use self::token::{Client, Credentials};
use super::assertion::SigningKey;
use super::oauth;
use super::store::Store;
use super::{AuthError, Secret};
use crate::auth::bearer::{Authorizer, Challenge};
use crate::config::{OAuthClient, ServerSpec, Transport};
use crate::text::shown;

/// Interactive authorizations one sign-in may start (a server that keeps asking for
/// more scope is not obeyed for ever).
pub const MAX_AUTHORIZATIONS: u32 = 3;
/// Longest wait for another process's refresh.
const LOCK_WAIT: Duration = Duration::from_secs(30);
/// A token this close to expiry is refreshed before use.
const REFRESH_MARGIN: u64 = 60;

/// How the authorization URL reaches a human.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Browser {
    /// The system browser (or the URL printed where there is none).
    System { no_browser: bool },
    /// Headless, for tests against authorization servers that redirect at once: GET the
    /// URL without following redirects, then GET the `Location`, which must be our own
    /// loopback listener (so the listener and its state check still run).
    Fetch,
}

/// One server's sign-in state.
pub struct McpAuth {
    server: String,
    url: Url,
    client_config: OAuthClient,
    store: Store,
    key: String,
    /// Where `edgar mcp set-key` keeps this server's client private key.
    client_key: String,
    browser: Option<Browser>,
    /// Where the cross-process refresh lock lives; `None` refreshes without one.
    lock_dir: Option<PathBuf>,
    state: tokio::sync::Mutex<State>,
}

#[derive(Default)]
struct State {
    loaded: bool,
    /// When the store was last read (a shared store is read again after [`RECHECK`]).
    loaded_at: Option<std::time::Instant>,
    creds: Option<Credentials>,
    /// The client used last, kept even when tokens are dropped (re-used for step-up).
    client: Option<Client>,
    authorizations: u32,
    /// The access token a refresh was already tried for.
    refreshed: Option<String>,
    /// When a token was last fetched without a human (for [`in_a_row`]).
    last_unattended: Option<std::time::Instant>,
}

/// How long a sign-in held from a shared store (a team gateway's replicas) is used
/// before the store is asked again: a user who signed out at another replica is
/// signed out here within this.
const RECHECK: Duration = Duration::from_secs(60);

/// Tokens fetched without a human further apart than this are not "in a row".
const UNATTENDED_WINDOW: Duration = Duration::from_secs(60);

/// Whether a fetch now follows the last closely enough to count towards
/// [`MAX_AUTHORIZATIONS`]: a refusing server is not asked for ever, yet a long-lived
/// session whose tokens are revoked now and then is not stopped for good.
fn in_a_row(last: Option<std::time::Instant>, now: std::time::Instant) -> bool {
    last.is_some_and(|t| now.saturating_duration_since(t) <= UNATTENDED_WINDOW)
}

impl McpAuth {
    /// The sign-in for an HTTP server; `browser` is `None` where no human can answer.
    pub fn new(
        spec: &ServerSpec,
        store: Store,
        browser: Option<Browser>,
    ) -> Result<McpAuth, AuthError> {
        let (Transport::Http { url, .. } | Transport::Sse { url, .. }) = &spec.transport else {
            return Err(AuthError::Config(format!(
                "'{}' is a stdio server; only HTTP servers sign in",
                spec.name
            )));
        };
        let url = Url::parse(url)
            .map_err(|_| AuthError::Config(format!("the URL of '{}' is not valid", spec.name)))?;
        if !crate::net::is_https_or_loopback(url.as_str()) {
            return Err(AuthError::Config(format!(
                "refusing to sign in to '{}' over plain http: a token would cross the network in clear text; use https",
                spec.name
            )));
        }
        Ok(McpAuth {
            server: spec.name.clone(),
            key: store_key(spec),
            client_key: client_key_entry(spec),
            url,
            client_config: spec.oauth.clone(),
            store,
            browser,
            lock_dir: None,
            state: tokio::sync::Mutex::new(State::default()),
        })
    }

    /// Takes `client` (one registered for another user of the same server, with the
    /// same redirect URI) when it has none yet, so each user's sign-in does not register
    /// one of its own.
    pub async fn adopt_client(&self, client: Option<Client>) {
        let mut st = self.state.lock().await;
        self.load(&mut st).await;
        if st.client.is_none() {
            st.client = client;
        }
    }

    /// Serializes refreshes across edgar processes with a lock file in `dir`: servers
    /// that rotate refresh tokens revoke the whole family when an old one is reused.
    pub fn with_lock_dir(mut self, dir: Option<PathBuf>) -> McpAuth {
        self.lock_dir = dir;
        self
    }

    async fn load(&self, st: &mut State) {
        let fresh = !self.store.shared() || st.loaded_at.is_some_and(|t| t.elapsed() < RECHECK);
        if st.loaded && fresh {
            return;
        }
        st.loaded = true;
        st.loaded_at = Some(std::time::Instant::now());
        match self.store.read(&self.key).await {
            Ok(Some(secret)) => match serde_json::from_str::<Credentials>(secret.expose()) {
                Ok(c) => {
                    st.client = Some(c.client.clone());
                    st.creds = Some(c);
                }
                Err(_) => tracing::warn!(
                    server = self.server,
                    "ignoring an unreadable stored sign-in"
                ),
            },
            // Signed out (at another replica, when the store is shared).
            Ok(None) => st.creds = None,
            Err(e) => tracing::debug!(server = self.server, "no stored sign-in: {e}"),
        }
    }

    async fn save(&self, st: &mut State, creds: Credentials) {
        st.client = Some(creds.client.clone());
        st.loaded_at = Some(std::time::Instant::now());
        match serde_json::to_string(&creds) {
            Ok(text) => {
                if let Err(e) = self.store.write(&self.key, &Secret::new(text)).await {
                    tracing::warn!(
                        server = self.server,
                        "the sign-in is kept for this session only: {e}"
                    );
                }
            }
            Err(e) => tracing::warn!(server = self.server, "cannot serialize the sign-in: {e}"),
        }
        st.creds = Some(creds);
    }

    /// The stored sign-in, for `edgar mcp list` (tokens stay inside); a store that
    /// cannot be read says why.
    pub async fn stored(&self) -> Result<Option<Credentials>, AuthError> {
        match self.store.read(&self.key).await? {
            Some(secret) => serde_json::from_str(secret.expose())
                .map(Some)
                .map_err(|_| {
                    AuthError::Store(format!(
                        "the stored sign-in of '{}' is unreadable",
                        self.server
                    ))
                }),
            None => Ok(None),
        }
    }

    /// Revokes the stored tokens where the authorization server offers it (RFC 7009),
    /// then erases everything stored for this server, whether or not revocation worked.
    pub async fn logout(&self) -> Result<Logout, AuthError> {
        let mut st = self.state.lock().await;
        let stored = self.store.read(&self.key).await?;
        let revoked = match stored
            .as_ref()
            .and_then(|s| serde_json::from_str::<Credentials>(s.expose()).ok())
        {
            None => Revoked::NothingToRevoke,
            Some(c) if c.revocation_endpoint.is_none() => Revoked::NotOffered,
            Some(c) => match token::revoke(self.http()?, &c).await {
                Ok(()) => Revoked::Yes,
                Err(e) => Revoked::Failed(e.to_string()),
            },
        };
        self.store.erase(&self.key).await?;
        *st = State {
            loaded: true,
            ..State::default()
        };
        Ok(Logout {
            erased: stored.is_some(),
            revoked,
        })
    }

    /// A configured client's credentials go only to the authorization server that issued
    /// them (`oauth.issuer`), whatever the MCP server names; without metadata, the
    /// authorization server is the token endpoint's origin.
    fn check_configured_issuer(&self, meta: &ServerMetadata) -> Result<(), AuthError> {
        let Some(configured) = &self.client_config.issuer else {
            return Ok(());
        };
        let actual = meta
            .issuer
            .clone()
            .unwrap_or_else(|| meta.token_endpoint.origin().ascii_serialization());
        if same_issuer(configured, &actual) {
            return Ok(());
        }
        Err(AuthError::Discovery(format!(
            "the server now names the authorization server {}, but the client configured for '{}' was issued by {}; edgar sends its credentials to no other",
            shown(&actual),
            self.server,
            shown(configured)
        )))
    }

    /// The client's private key, if it authenticates with one: from its file, or from
    /// the credential store where `edgar mcp set-key` put it.
    async fn signing_key(&self) -> Result<Option<SigningKey>, AuthError> {
        if self.client_config.private_key_in_store {
            let pem = self.store.read(&self.client_key).await?.ok_or_else(|| {
                AuthError::Config(format!(
                    "no private key is stored for '{0}': run `edgar mcp set-key {0} --file KEY.pem`",
                    self.server
                ))
            })?;
            return SigningKey::from_pem(pem.expose()).map(Some);
        }
        match &self.client_config.private_key_file {
            Some(path) => grant::read_key(path).await.map(Some),
            None => Ok(None),
        }
    }

    /// Where and how to sign in: the resource metadata (or, for a 2025-03-26 server when
    /// `legacy`, its origin), the authorization server's metadata, the resource, and the
    /// scopes the resource lists.
    async fn discover(
        &self,
        challenge: Option<&Challenge>,
        legacy: bool,
    ) -> Result<(ServerMetadata, String, Vec<String>), AuthError> {
        let from_challenge = challenge.and_then(|c| c.resource_metadata.as_deref());
        if let Some(u) = from_challenge.and_then(|u| Url::parse(u).ok()) {
            self.reachable(&u, "resource metadata")?;
        }
        let prm = discovery::resource_metadata(self.http()?, &self.url, from_challenge).await?;
        if let Some(p) = &prm {
            self.reachable(&p.authorization_server, "the authorization server")?;
        }
        let (meta, resource, prm_scopes) = match &prm {
            Some(p) => {
                let meta = discovery::server_metadata(self.http()?, &p.authorization_server, true)
                    .await?
                    .ok_or_else(|| {
                        AuthError::Discovery(format!(
                            "no authorization server metadata for {}",
                            shown(p.authorization_server.as_str())
                        ))
                    })?;
                (meta, p.resource.clone(), p.scopes_supported.clone())
            }
            None if !legacy => {
                return Err(AuthError::Discovery(format!(
                    "'{}' did not ask for a sign-in and publishes no OAuth metadata; there is nothing to sign in to",
                    self.server
                )));
            }
            None => {
                // A 2025-03-26 server: its origin is the authorization server.
                let mut origin = self.url.clone();
                origin.set_path("/");
                let meta = match discovery::server_metadata(self.http()?, &origin, false).await? {
                    Some(m) => m,
                    None => discovery::default_endpoints(&self.url),
                };
                (meta, canonical(&self.url), Vec::new())
            }
        };
        for (what, u) in [
            (
                "authorization_endpoint",
                meta.authorization_endpoint.as_ref().ok(),
            ),
            ("token_endpoint", Some(&meta.token_endpoint)),
            ("registration_endpoint", meta.registration_endpoint.as_ref()),
            ("revocation_endpoint", meta.revocation_endpoint.as_ref()),
        ] {
            if let Some(u) = u {
                self.reachable(u, what)?;
            }
        }
        Ok((meta, resource, prm_scopes))
    }

    /// Which client to be: the one used before with this authorization server, a
    /// configured one, a metadata document URL, or a fresh registration.
    async fn client(
        &self,
        st: &State,
        meta: &ServerMetadata,
        redirect_uri: &str,
        scope: Option<&str>,
    ) -> Result<Client, AuthError> {
        if let Some(c) = &st.client
            && c.issuer == meta.issuer
        {
            return Ok(c.clone());
        }
        let cfg = &self.client_config;
        if let Some(id) = &cfg.client_id {
            self.check_configured_issuer(meta)?;
            let method = if cfg.private_key_file.is_some() || cfg.private_key_in_store {
                "private_key_jwt".to_owned()
            } else {
                token::auth_method(None, &meta.auth_methods, cfg.client_secret.is_some())
            };
            return Ok(Client {
                id: id.clone(),
                secret: cfg.client_secret.clone(),
                method,
                issuer: meta.issuer.clone(),
            });
        }
        if let Some(url) = &cfg.client_metadata_url
            && meta.cimd_supported
        {
            return Ok(Client {
                id: url.clone(),
                secret: None,
                method: "none".into(),
                issuer: meta.issuer.clone(),
            });
        }
        match &meta.registration_endpoint {
            Some(endpoint) => {
                register::register(
                    self.http()?,
                    endpoint,
                    redirect_uri,
                    scope,
                    meta.issuer.clone(),
                    &meta.auth_methods,
                )
                .await
            }
            None => Err(AuthError::Discovery(format!(
                "the authorization server offers no registration; register a client with it and set \"oauth\": {{\"client_id\": \"...\"}} for '{}' in the config",
                self.server
            ))),
        }
    }
}

impl Authorizer for McpAuth {
    fn bearer(&self) -> Pin<Box<dyn Future<Output = Option<Secret>> + Send + '_>> {
        Box::pin(self.current())
    }

    fn refused<'a>(
        &'a self,
        status: u16,
        challenge: Option<&'a Challenge>,
        sent: Option<&'a Secret>,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        Box::pin(self.retry_after(status, challenge, sent.map(Secret::expose)))
    }
}

/// What `edgar mcp logout` did.
#[derive(Debug)]
pub struct Logout {
    /// Whether a sign-in was stored (and is now erased).
    pub erased: bool,
    pub revoked: Revoked,
}

/// Whether the tokens were revoked at the authorization server.
#[derive(Debug)]
pub enum Revoked {
    Yes,
    /// The authorization server lists no `revocation_endpoint`: the tokens stay valid
    /// there until they expire.
    NotOffered,
    /// Revocation failed (the local sign-in is erased all the same).
    Failed(String),
    NothingToRevoke,
}

/// Whether two issuer identifiers name the same authorization server (RFC 8414 issuers
/// are compared as strings; a trailing slash is forgiven).
fn same_issuer(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

impl McpAuth {
    /// The HTTP client for this server's sign-in: a remote server's authorization
    /// requests may reach public addresses only, whatever its URLs' names resolve to.
    fn http(&self) -> Result<&'static reqwest::Client, AuthError> {
        if crate::net::is_loopback(&self.url) {
            oauth::http_client()
        } else {
            oauth::public_http_client()
        }
    }

    /// What the server names for discovery and sign-in must not reach into this machine or
    /// its private networks (a server could otherwise make edgar probe them, or cloud
    /// metadata), unless the MCP server itself is on loopback, as in local development.
    fn reachable(&self, url: &Url, what: &str) -> Result<(), AuthError> {
        if crate::net::is_local(url) && !crate::net::is_loopback(&self.url) {
            return Err(AuthError::Discovery(format!(
                "refusing {what} {}: a remote server may not send edgar to a local or private address",
                shown(url.as_str())
            )));
        }
        Ok(())
    }
}

impl McpAuth {
    /// Takes the refresh lock (an exclusive `flock` on a file named after the store
    /// entry), waiting at most [`LOCK_WAIT`]; without a lock directory, or when the lock
    /// cannot be had, the refresh goes ahead unlocked.
    async fn lock(&self) -> Option<std::fs::File> {
        let dir = self.lock_dir.clone()?;
        let name = format!(
            "{}.lock",
            crate::digest::hex(&sha2::Sha256::digest(self.key.as_bytes()))[..16].to_owned()
        );
        let take = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
            crate::paths::create_private_dir(&dir)?;
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(dir.join(name))?;
            rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
            Ok(file)
        });
        match tokio::time::timeout(LOCK_WAIT, take).await {
            Ok(Ok(Ok(file))) => Some(file),
            Ok(Ok(Err(e))) => {
                tracing::warn!(server = self.server, "refreshing without the lock: {e}");
                None
            }
            _ => {
                tracing::warn!(
                    server = self.server,
                    "refreshing without the lock: it stayed taken"
                );
                None
            }
        }
    }
}

/// The credential store entry of a server: its name and a digest of its URL, so a
/// changed URL never receives the old server's token.
pub fn store_key(spec: &ServerSpec) -> String {
    format!("mcp-server:{}:{}", spec.name, &spec.digest()[..16])
}

/// The credential store entry of a server's client private key (`edgar mcp set-key`):
/// bound to its URL like its tokens, so a changed URL never gets an assertion signed
/// with it.
pub fn client_key_entry(spec: &ServerSpec) -> String {
    format!("mcp-client-key:{}:{}", spec.name, &spec.digest()[..16])
}

/// Scopes to ask for: the challenge's, else the resource's `scopes_supported`, else
/// none. `offline_access` is added only where the authorization server lists it.
fn choose_scope(
    challenge: Option<&Challenge>,
    prm_scopes: &[String],
    meta: &ServerMetadata,
) -> Option<String> {
    let base = challenge
        .and_then(|c| c.scope.clone())
        .filter(|s| !s.trim().is_empty())
        .or_else(|| (!prm_scopes.is_empty()).then(|| prm_scopes.join(" ")))?;
    let wants_offline = meta.scopes_supported.iter().any(|s| s == "offline_access")
        && !base.split(' ').any(|s| s == "offline_access");
    Some(if wants_offline {
        format!("{base} offline_access")
    } else {
        base
    })
}

/// The server URL as an RFC 8707 resource: no fragment, no query.
fn canonical(url: &Url) -> String {
    let mut u = url.clone();
    u.set_fragment(None);
    u.set_query(None);
    u.as_str().to_owned()
}

/// The headless "browser": one GET without redirects, then the `Location`, which must
/// be our redirect URI.
async fn fetch_redirect(url: Url, redirect_uri: String) -> Result<(), String> {
    let client = oauth::http_client().map_err(|e| e.to_string())?;
    let response = client.get(url).send().await.map_err(|e| {
        format!(
            "the authorization request failed: {}",
            crate::net::request_error(&e)
        )
    })?;
    let Some(location) = response
        .headers()
        .get("location")
        .and_then(|l| l.to_str().ok())
        .map(str::to_owned)
    else {
        return Err(format!(
            "the authorization server answered HTTP {} without a redirect",
            response.status().as_u16()
        ));
    };
    if !location.starts_with(&redirect_uri) {
        return Err(format!(
            "the authorization server redirected to {}",
            shown(&location)
        ));
    }
    client.get(&location).send().await.map_err(|e| {
        format!(
            "the redirect did not reach the listener: {}",
            crate::net::request_error(&e)
        )
    })?;
    Ok(())
}
