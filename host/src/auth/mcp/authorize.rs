//! A human signs in: `edgar mcp login` (probe, discovery, the client, the browser round
//! trip through the loopback listener, the code exchange), and a sign-in begun here and
//! finished at a team gateway's callback ([`Begun`]).

use reqwest::Url;
use serde_json::json;

use std::io::IsTerminal;
use std::time::Duration;

use super::token::{self, Client, Credentials, Refusal};
use super::{Browser, MAX_AUTHORIZATIONS, McpAuth, State, choose_scope, fetch_redirect};
use crate::auth::bearer::Challenge;
use crate::auth::oauth::{self, Loopback};
use crate::auth::{AuthError, Secret};
use crate::text::shown;

impl McpAuth {
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
    pub(super) async fn probe(&self) -> Result<Option<Challenge>, AuthError> {
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
    pub(super) async fn authorize(
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
}

/// A sign-in begun where no browser waits: what finishing it needs (the PKCE verifier,
/// the client, where to exchange the code). The gateway keeps it sealed; `Debug` shows
/// no secret.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct Begun {
    pub(super) verifier: String,
    pub(super) redirect_uri: String,
    pub(super) resource: String,
    pub(super) client: Client,
    pub(super) token_endpoint: String,
    pub(super) issuer: Option<String>,
    pub(super) iss_in_response: bool,
    pub(super) revocation_endpoint: Option<String>,
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

/// RFC 9207: a redirect that names an issuer must name the one edgar asked, and a server
/// that promises to name itself must have done so; otherwise the code may be meant for
/// another authorization server (a mix-up attack) and is not sent anywhere.
pub(super) fn check_issuer(
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
