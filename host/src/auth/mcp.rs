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

use std::future::Future;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use reqwest::Url;
use serde_json::json;
use sha2::Digest as _;

use self::discovery::ServerMetadata;
use self::token::{Client, Credentials, Refusal};
use super::assertion::SigningKey;
use super::oauth::{self, Loopback};
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

    /// `edgar mcp login`: probe the server, then authorize with what it asks for.
    pub async fn login(&self) -> Result<Credentials, AuthError> {
        if self.client_config.grant == crate::config::Grant::UserSignIn {
            return Err(AuthError::Config(format!(
                "each user signs in to '{}' themselves, through the team gateway (grant \"user_sign_in\")",
                self.server
            )));
        }
        let mut challenge = self.probe().await?;
        // A server that let the probe in may still protect its tools (and publish
        // metadata saying so); it is not guessed to be a 2025-03-26 one.
        let refused = challenge.is_some();
        let mut st = self.state.lock().await;
        self.load(&mut st).await;
        st.authorizations = 0;
        if self.client_config.grant.unattended() {
            self.unattended(&mut st, challenge.as_ref(), refused)
                .await?;
            return st
                .creds
                .clone()
                .ok_or_else(|| AuthError::NeedsLogin("the sign-in left no token".into()));
        }
        // A step-up the server asked for while nobody could answer.
        let wanted = st.creds.as_ref().and_then(|c| c.wanted_scope.clone());
        if let Some(w) = wanted
            && challenge.as_ref().is_none_or(|c| c.scope.is_none())
        {
            challenge.get_or_insert_with(Challenge::default).scope = Some(w);
        }
        self.authorize(&mut st, challenge.as_ref(), refused).await?;
        st.creds
            .clone()
            .ok_or_else(|| AuthError::NeedsLogin("the sign-in left no token".into()))
    }

    /// An unauthenticated `initialize`: the 401's challenge, or `None` if the server
    /// let us in (it may not need a sign-in at all).
    async fn probe(&self) -> Result<Option<Challenge>, AuthError> {
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": crate::mcp::protocol::PROTOCOL[0], "capabilities": {},
            "clientInfo": {"name": "edgar", "version": env!("CARGO_PKG_VERSION")}}});
        let response = self
            .http()?
            .post(self.url.clone())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| {
                AuthError::Discovery(format!(
                    "cannot reach the server: {}",
                    crate::net::request_error(&e)
                ))
            })?;
        let challenge = Challenge::parse(
            response
                .headers()
                .get_all("www-authenticate")
                .iter()
                .filter_map(|v| v.to_str().ok()),
        );
        match response.status().as_u16() {
            401 | 403 => Ok(Some(challenge.unwrap_or_default())),
            _ => Ok(challenge),
        }
    }

    /// Discovery, client identity, the browser round trip and the code exchange.
    /// `legacy` allows the 2025-03-26 fallbacks when the server has no resource
    /// metadata (only when it actually refused a request).
    async fn authorize(
        &self,
        st: &mut State,
        challenge: Option<&Challenge>,
        legacy: bool,
    ) -> Result<(), AuthError> {
        let Some(browser) = self.browser else {
            return Err(AuthError::NeedsLogin(format!(
                "run `edgar mcp login {}`",
                self.server
            )));
        };
        if st.authorizations >= MAX_AUTHORIZATIONS {
            return Err(AuthError::NeedsLogin(format!(
                "the server still refuses after {MAX_AUTHORIZATIONS} sign-ins"
            )));
        }
        st.authorizations += 1;
        let (meta, resource, prm_scopes) = self.discover(challenge, legacy).await?;
        // Before anything is registered: a server no human can sign in to.
        let auth_endpoint = meta
            .authorization_endpoint
            .clone()
            .map_err(AuthError::Discovery)?;
        let scope = choose_scope(challenge, &prm_scopes, &meta);
        let listener = Loopback::bind(self.client_config.callback_port).await?;
        let redirect_uri = listener.redirect_uri();
        let client = self
            .client(st, &meta, &redirect_uri, scope.as_deref())
            .await?;
        // Before the browser: a key that cannot be read fails now, not after the human
        // has signed in.
        let key = match client.method.as_str() {
            "private_key_jwt" => self.signing_key().await?,
            _ => None,
        };
        let (auth_url, state, verifier) = token::authorization_url(
            auth_endpoint,
            &client.id,
            &redirect_uri,
            scope.as_deref(),
            &resource,
        )?;
        let state = state.expose();
        let callback = match browser {
            Browser::System { no_browser } => {
                eprintln!(
                    "Sign in to '{}' in your browser:\n  {auth_url}",
                    self.server
                );
                let visit = oauth::visit(auth_url.as_str(), no_browser)?;
                if visit == oauth::Visit::Printed && std::io::stdin().is_terminal() {
                    // Over SSH the browser cannot reach this machine's loopback: take the
                    // address it was sent to, pasted, as well as the redirect itself.
                    eprintln!(
                        "If the browser runs on another machine, paste the address it ends up at (it starts {redirect_uri}):"
                    );
                    let pasted = tokio::task::spawn_blocking(|| {
                        let mut line = String::new();
                        std::io::stdin().read_line(&mut line).map(|_| line)
                    });
                    tokio::select! {
                        got = listener.listen(state, oauth::DEFAULT_WAIT) => got?,
                        line = pasted => match line {
                            Ok(Ok(line)) => oauth::check_pasted(&line, state)?,
                            _ => return Err(AuthError::Redirect("nothing was pasted".into())),
                        },
                    }
                } else {
                    listener.listen(state, oauth::DEFAULT_WAIT).await?
                }
            }
            Browser::Fetch => {
                let fetch = tokio::spawn(fetch_redirect(auth_url.clone(), redirect_uri.clone()));
                let got = listener.listen(state, Duration::from_secs(30)).await;
                match got {
                    Ok(c) => c,
                    Err(e) => {
                        if let Ok(Err(why)) = fetch.await {
                            return Err(AuthError::Redirect(why));
                        }
                        return Err(e);
                    }
                }
            }
        };
        check_issuer(
            meta.issuer.as_deref(),
            meta.iss_in_response,
            callback.iss.as_deref(),
        )?;
        let code = callback.code?;
        let grant = token::Grant::Code {
            code: &code,
            verifier,
            redirect_uri: &redirect_uri,
        };
        let endpoint = meta.token_endpoint.as_str();
        let mut creds = token::request(
            self.http()?,
            endpoint,
            &client,
            key.as_ref(),
            grant,
            &resource,
        )
        .await
        .map_err(Refusal::into_error)?;
        creds.revocation_endpoint = meta.revocation_endpoint.as_ref().map(Url::to_string);
        st.refreshed = None;
        self.save(st, creds).await;
        Ok(())
    }

    /// Starts a sign-in whose browser comes back to `redirect_uri` elsewhere (a team
    /// gateway's callback), after the server refused with `challenge`: discovery, the
    /// client, PKCE. Gives the authorization URL and what [`McpAuth::finish`] needs.
    pub async fn begin(
        &self,
        challenge: Option<&Challenge>,
        redirect_uri: &str,
    ) -> Result<(Url, Begun), AuthError> {
        let mut st = self.state.lock().await;
        self.load(&mut st).await;
        let (meta, resource, prm_scopes) = self.discover(challenge, true).await?;
        let auth_endpoint = meta
            .authorization_endpoint
            .clone()
            .map_err(AuthError::Discovery)?;
        let scope = choose_scope(challenge, &prm_scopes, &meta);
        let client = self
            .client(&st, &meta, redirect_uri, scope.as_deref())
            .await?;
        st.client = Some(client.clone());
        let (url, _, verifier) = token::authorization_url(
            auth_endpoint,
            &client.id,
            redirect_uri,
            scope.as_deref(),
            &resource,
        )?;
        let begun = Begun {
            verifier: verifier.secret().clone(),
            redirect_uri: redirect_uri.to_owned(),
            resource,
            client,
            token_endpoint: meta.token_endpoint.to_string(),
            issuer: meta.issuer.clone(),
            iss_in_response: meta.iss_in_response,
            revocation_endpoint: meta.revocation_endpoint.as_ref().map(Url::to_string),
        };
        Ok((url, begun))
    }

    /// Finishes a sign-in [`McpAuth::begin`] started: the code the browser brought back
    /// (and the issuer it named, RFC 9207) exchanged for tokens, which are stored.
    pub async fn finish(
        &self,
        begun: Begun,
        code: &Secret,
        iss: Option<&str>,
    ) -> Result<(), AuthError> {
        check_issuer(begun.issuer.as_deref(), begun.iss_in_response, iss)?;
        let key = match begun.client.method.as_str() {
            "private_key_jwt" => self.signing_key().await?,
            _ => None,
        };
        let grant = token::Grant::Code {
            code,
            verifier: oauth2::PkceCodeVerifier::new(begun.verifier.clone()),
            redirect_uri: &begun.redirect_uri,
        };
        let mut creds = token::request(
            self.http()?,
            &begun.token_endpoint,
            &begun.client,
            key.as_ref(),
            grant,
            &begun.resource,
        )
        .await
        .map_err(Refusal::into_error)?;
        creds.revocation_endpoint = begun.revocation_endpoint.clone();
        let mut st = self.state.lock().await;
        st.loaded = true;
        st.refreshed = None;
        self.save(&mut st, creds).await;
        Ok(())
    }

    /// A token without a human ([`grant`]): discovery, then the configured grant.
    async fn unattended(
        &self,
        st: &mut State,
        challenge: Option<&Challenge>,
        legacy: bool,
    ) -> Result<(), AuthError> {
        let now = std::time::Instant::now();
        if !in_a_row(st.last_unattended, now) {
            st.authorizations = 0;
        }
        st.last_unattended = Some(now);
        if st.authorizations >= MAX_AUTHORIZATIONS {
            return Err(AuthError::NeedsLogin(format!(
                "the server still refuses after {MAX_AUTHORIZATIONS} tokens"
            )));
        }
        st.authorizations += 1;
        let (meta, resource, _) = self.discover(challenge, legacy).await?;
        self.check_configured_issuer(&meta)?;
        let scope = challenge
            .and_then(|c| c.scope.clone())
            .filter(|s| !s.trim().is_empty())
            .or_else(|| self.client_config.scope.clone());
        let target = grant::Target {
            token_endpoint: meta.token_endpoint.as_str(),
            issuer: meta.issuer.as_deref(),
            auth_methods: &meta.auth_methods,
            resource: &resource,
            scope: scope.as_deref(),
        };
        let key = self.signing_key().await?;
        let creds = grant::fetch(self.http()?, &self.client_config, key.as_ref(), &target)
            .await
            .map_err(Refusal::into_error)?;
        st.refreshed = None;
        self.save(st, creds).await;
        Ok(())
    }

    /// The same unattended grant again for an expired token, where the last one was
    /// fetched (no discovery); `false` if it failed.
    async fn refetch(&self, st: &mut State, creds: &Credentials) -> bool {
        st.refreshed = Some(creds.access_token.clone());
        let http = match self.http() {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(server = self.server, "cannot fetch a new token: {e}");
                return false;
            }
        };
        let target = grant::Target {
            token_endpoint: &creds.token_endpoint,
            issuer: creds.client.issuer.as_deref(),
            auth_methods: std::slice::from_ref(&creds.client.method),
            resource: &creds.resource,
            scope: creds.scope.as_deref(),
        };
        let key = match self.signing_key().await {
            Ok(k) => k,
            Err(e) => {
                tracing::warn!(server = self.server, "cannot fetch a new token: {e}");
                return false;
            }
        };
        match grant::fetch(http, &self.client_config, key.as_ref(), &target).await {
            Ok(new) => {
                tracing::info!(server = self.server, "new token fetched");
                self.save(st, new).await;
                true
            }
            Err(r) => {
                tracing::warn!(
                    server = self.server,
                    "fetching a new token failed: {}",
                    r.into_error()
                );
                false
            }
        }
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

    /// The token for a request, refreshed first if it is about to expire.
    async fn current(&self) -> Option<Secret> {
        let mut st = self.state.lock().await;
        self.load(&mut st).await;
        let creds = st.creds.clone()?;
        // A short-lived token is renewed in the second half of its life, not on every
        // request while it is still young.
        let now = crate::clock::now();
        if creds.expiring(now, REFRESH_MARGIN) {
            if creds.refresh_token.is_some() {
                self.refresh(&mut st, &creds).await;
            } else if self.client_config.grant.unattended() {
                self.refetch(&mut st, &creds).await;
            }
        }
        st.creds
            .as_ref()
            .map(|c| Secret::new(c.access_token.clone()))
    }

    /// Refreshes; a final refusal erases the stored sign-in, anything else keeps it.
    async fn refresh(&self, st: &mut State, creds: &Credentials) -> bool {
        st.refreshed = Some(creds.access_token.clone());
        let _lock = self.lock().await;
        // Another process may have refreshed while this one waited for the lock.
        match self.stored().await {
            Ok(Some(stored)) if stored.access_token != creds.access_token => {
                tracing::debug!(
                    server = self.server,
                    "using the token another process refreshed"
                );
                st.client = Some(stored.client.clone());
                st.creds = Some(stored);
                return true;
            }
            // Signed out at another replica: not brought back by refreshing here.
            Ok(None) if self.store.shared() => {
                st.creds = None;
                return false;
            }
            _ => {}
        }
        let http = match self.http() {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(server = self.server, "cannot refresh: {e}");
                return false;
            }
        };
        let key = match creds.client.method.as_str() {
            "private_key_jwt" => match self.signing_key().await {
                Ok(k) => k,
                Err(e) => {
                    st.refreshed = None;
                    tracing::warn!(server = self.server, "cannot refresh: {e}");
                    return false;
                }
            },
            _ => None,
        };
        match token::refresh(http, creds, key.as_ref()).await {
            Ok(new) => {
                tracing::info!(server = self.server, "token refreshed");
                self.save(st, new).await;
                true
            }
            Err(r) if r.is_final() => {
                tracing::warn!(
                    server = self.server,
                    "the sign-in was refused ({}); run `edgar mcp login {}`",
                    r.into_error(),
                    self.server
                );
                st.creds = None;
                if let Err(e) = self.store.erase(&self.key).await {
                    tracing::warn!(server = self.server, "cannot erase the stored sign-in: {e}");
                }
                false
            }
            Err(r) => {
                // Not the server's verdict (the network, a 5xx): a later request may try again.
                st.refreshed = None;
                tracing::warn!(
                    server = self.server,
                    "refreshing the token failed: {}",
                    r.into_error()
                );
                false
            }
        }
    }

    /// A 401 or 403 came back for a request sent with `sent`: `true` to retry it.
    async fn retry_after(
        &self,
        status: u16,
        challenge: Option<&Challenge>,
        sent: Option<&str>,
    ) -> bool {
        let mut st = self.state.lock().await;
        if self.store.shared() {
            // Another replica may have signed the user in anew, or out.
            st.loaded_at = None;
        }
        self.load(&mut st).await;
        let now = st.creds.as_ref().map(|c| c.access_token.as_str());
        if now.is_some() && now != sent {
            // Another request (or replica) already renewed the token.
            return true;
        }
        if self.client_config.grant.unattended() {
            // No human and no refresh token: the grant again, once per token, with the
            // scope a 403 asks for; within the same limit as sign-ins.
            if status == 401
                && let Some(creds) = st.creds.clone()
                && st.refreshed.as_deref() != Some(creds.access_token.as_str())
                && self.refetch(&mut st, &creds).await
            {
                return true;
            }
            return match self.unattended(&mut st, challenge, true).await {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!(server = self.server, "fetching a token failed: {e}");
                    false
                }
            };
        }
        if status == 401
            && let Some(creds) = st.creds.clone()
            && creds.refresh_token.is_some()
            && st.refreshed.as_deref() != Some(creds.access_token.as_str())
            && self.refresh(&mut st, &creds).await
        {
            return true;
        }
        if self.browser.is_none() {
            if status == 403
                && let Some(scope) = challenge.and_then(|c| c.scope.clone())
                && let Some(mut creds) = st.creds.clone()
                && creds.wanted_scope.as_ref() != Some(&scope)
            {
                creds.wanted_scope = Some(scope);
                self.save(&mut st, creds).await;
            }
            return false;
        }
        match self.authorize(&mut st, challenge, true).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(server = self.server, "signing in failed: {e}");
                false
            }
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

/// A sign-in begun where no browser waits: what finishing it needs (the PKCE verifier,
/// the client, where to exchange the code). The gateway keeps it sealed; `Debug` shows
/// no secret.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct Begun {
    verifier: String,
    redirect_uri: String,
    resource: String,
    client: Client,
    token_endpoint: String,
    issuer: Option<String>,
    iss_in_response: bool,
    revocation_endpoint: Option<String>,
}

impl std::fmt::Debug for Begun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Begun")
            .field("redirect_uri", &self.redirect_uri)
            .field("resource", &self.resource)
            .field("client", &self.client)
            .finish_non_exhaustive()
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

/// RFC 9207: a redirect that names an issuer must name the one edgar asked, and a server
/// that promises to name itself must have done so; otherwise the code may be meant for
/// another authorization server (a mix-up attack) and is not sent anywhere.
fn check_issuer(
    issuer: Option<&str>,
    iss_in_response: bool,
    iss: Option<&str>,
) -> Result<(), AuthError> {
    match (iss, issuer) {
        // Simple string comparison, no normalization (RFC 9207 §2.4, MCP 2026-07-28).
        (Some(got), Some(want)) if got != want => Err(AuthError::Redirect(format!(
            "the redirect names the authorization server {}, not {} which edgar asked; refusing its code",
            shown(got),
            shown(want)
        ))),
        (None, _) if iss_in_response => Err(AuthError::Redirect(
            "the authorization server promises to name itself in the redirect (RFC 9207) but did not; refusing its code".into(),
        )),
        _ => Ok(()),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServerSpec;

    fn auth(url: &str) -> McpAuth {
        McpAuth::new(&ServerSpec::http("s", url), Store::memory(), None)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A sign-in held from a shared store is believed for [`RECHECK`], then the store
    /// is asked again: a sign-out at another replica reaches this one within it.
    #[tokio::test]
    async fn a_shared_sign_in_is_read_again_after_the_recheck() {
        use crate::auth::store::{MemoryVault, UserSecrets};
        use std::sync::Arc;
        let vault: Arc<dyn crate::auth::vault::TokenVault> = Arc::new(MemoryVault::default());
        let replica = || Store::User(UserSecrets::new("ada", Some(vault.clone())));
        let here = McpAuth::new(
            &ServerSpec::http("s", "https://mcp.example/"),
            replica(),
            None,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let elsewhere = replica();
        let creds = Credentials {
            access_token: "t1".into(),
            refresh_token: None,
            expires_at: None,
            obtained_at: None,
            scope: None,
            resource: "https://mcp.example/".into(),
            token_endpoint: "https://as.example/token".into(),
            client: token::Client {
                id: "c".into(),
                secret: None,
                method: "none".into(),
                issuer: None,
            },
            wanted_scope: None,
            revocation_endpoint: None,
        };
        let text = serde_json::to_string(&creds).unwrap_or_else(|e| panic!("{e}"));
        elsewhere
            .write(&here.key, &Secret::new(text))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut st = State::default();
        here.load(&mut st).await;
        assert_eq!(
            st.creds.as_ref().map(|c| c.access_token.as_str()),
            Some("t1")
        );
        // Signed out at another replica: still held here within the recheck ...
        elsewhere
            .erase(&here.key)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        here.load(&mut st).await;
        assert!(st.creds.is_some());
        // ... and gone once it has passed.
        st.loaded_at = std::time::Instant::now().checked_sub(RECHECK + Duration::from_secs(1));
        assert!(st.loaded_at.is_some());
        here.load(&mut st).await;
        assert!(st.creds.is_none());
        // A store only this process has is not asked again.
        let alone = McpAuth::new(
            &ServerSpec::http("s", "https://mcp.example/"),
            Store::memory(),
            None,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut st = State::default();
        alone.load(&mut st).await;
        let at = st.loaded_at;
        st.loaded_at = at.and_then(|t| t.checked_sub(RECHECK + Duration::from_secs(1)));
        let before = st.loaded_at;
        alone.load(&mut st).await;
        assert_eq!(st.loaded_at, before);
    }

    #[test]
    fn unattended_fetches_count_only_in_a_row() {
        let t0 = std::time::Instant::now();
        assert!(!in_a_row(None, t0));
        assert!(in_a_row(Some(t0), t0 + Duration::from_secs(5)));
        assert!(in_a_row(Some(t0), t0 + UNATTENDED_WINDOW));
        assert!(!in_a_row(
            Some(t0),
            t0 + UNATTENDED_WINDOW + Duration::from_secs(1)
        ));
    }

    #[test]
    fn a_redirect_from_another_issuer_is_refused() {
        let issuer = Some("https://as.example");
        assert!(check_issuer(issuer, false, None).is_ok());
        assert!(check_issuer(issuer, true, Some("https://as.example")).is_ok());
        // Compared as strings, nothing normalized (MCP 2026-07-28).
        for near in [
            "https://as.example/",
            "HTTPS://as.example",
            "https://as.example:443",
        ] {
            assert!(check_issuer(issuer, false, Some(near)).is_err(), "{near}");
        }
        let e = check_issuer(issuer, false, Some("https://evil.example"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("evil.example") && e.contains("refusing"), "{e}");
        assert!(check_issuer(issuer, true, None).is_err());
    }

    #[test]
    fn a_remote_server_cannot_send_sign_in_to_local_or_private_addresses() {
        let remote = auth("https://mcp.example.com/mcp");
        for target in [
            "http://169.254.169.254/latest/meta-data",
            "https://127.0.0.1:8080/.well-known/oauth-authorization-server",
            "https://10.0.0.7/token",
            "https://[::1]/register",
            "https://localhost/authorize",
        ] {
            let u = Url::parse(target).unwrap_or_else(|e| panic!("{e}"));
            assert!(remote.reachable(&u, "x").is_err(), "{target}");
        }
        let public = Url::parse("https://auth.example.com/token").unwrap_or_else(|e| panic!("{e}"));
        assert!(remote.reachable(&public, "x").is_ok());
        // Local development: a server on loopback may use a local authorization server.
        let local = auth("http://127.0.0.1:3000/mcp");
        let u = Url::parse("http://127.0.0.1:3001/token").unwrap_or_else(|e| panic!("{e}"));
        assert!(local.reachable(&u, "x").is_ok());
        assert!(
            McpAuth::new(
                &ServerSpec::http("s", "http://mcp.example.com/mcp"),
                Store::memory(),
                None
            )
            .is_err()
        );
    }
}
