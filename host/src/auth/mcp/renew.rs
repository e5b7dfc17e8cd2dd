//! Keeping a sign-in usable without a human: the token for each request, refreshed
//! before it expires, fetched again by an unattended grant, and what a 401 or 403
//! leads to.

use super::token::{self, Credentials, Refusal};
use super::{MAX_AUTHORIZATIONS, McpAuth, REFRESH_MARGIN, State, grant, in_a_row};
use crate::auth::bearer::Challenge;
use crate::auth::{AuthError, Secret};

impl McpAuth {
    /// A token without a human ([`grant`]): discovery, then the configured grant.
    pub(super) async fn unattended(
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
    pub(super) async fn refetch(&self, st: &mut State, creds: &Credentials) -> bool {
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

    /// The token for a request, refreshed first if it is about to expire.
    pub(super) async fn current(&self) -> Option<Secret> {
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
    pub(super) async fn refresh(&self, st: &mut State, creds: &Credentials) -> bool {
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
    pub(super) async fn retry_after(
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
