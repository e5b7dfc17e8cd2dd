//! Per-user credentials for a team gateway's upstream server (`"grant":
//! "token_exchange"`): the user's own access token is exchanged at the configured token
//! endpoint (RFC 8693) for one scoped to that server, kept per user until it expires.
//! The user's token goes to that endpoint only, never to the server (the MCP spec
//! forbids passing a client's token through); a message sent for no user carries no
//! token at all. With a [`TokenVault`] (a team gateway's replicas), an exchanged token
//! is also kept there, sealed, so another replica reuses it instead of exchanging again.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use super::token::{self, Client};
use crate::auth::bearer::{Authorizer, Challenge, Subject};
use crate::auth::{AuthError, Secret};
use crate::config::{ServerSpec, Transport};
use crate::sync::lock;

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// An exchanged token is fetched again this long before it expires.
const MARGIN: Duration = Duration::from_secs(30);

/// Longest an exchanged token without `expires_in` is kept.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);

/// Users whose tokens are kept at once; the memory is emptied when full.
const MAX_USERS: usize = 10_000;

pub use crate::auth::vault::{Kept, TokenVault};

/// One server's per-user sign-in.
pub struct PerUser {
    server: String,
    token_endpoint: String,
    resource: String,
    audience: Option<String>,
    scope: Option<String>,
    client: Client,
    tokens: Mutex<HashMap<String, (Secret, Instant)>>,
    vault: Option<Arc<dyn TokenVault>>,
}

impl PerUser {
    /// The sign-in `spec`'s `oauth` describes; an error when it lacks what an exchange
    /// needs.
    pub fn new(spec: &ServerSpec) -> Result<PerUser, AuthError> {
        let cfg = &spec.oauth;
        let token_endpoint = cfg.token_endpoint.clone().ok_or_else(|| {
            AuthError::Config("grant \"token_exchange\" needs oauth.token_endpoint".into())
        })?;
        let client_id = cfg.client_id.clone().ok_or_else(|| {
            AuthError::Config("grant \"token_exchange\" needs oauth.client_id".into())
        })?;
        let resource = match &spec.transport {
            Transport::Http { url, .. } | Transport::Sse { url, .. } => url.clone(),
            Transport::Stdio { .. } => {
                return Err(AuthError::Config(
                    "grant \"token_exchange\" is for HTTP servers".into(),
                ));
            }
        };
        Ok(PerUser {
            server: spec.name.clone(),
            token_endpoint,
            resource,
            audience: cfg.audience.clone(),
            scope: cfg.scope.clone(),
            client: Client {
                id: client_id,
                method: if cfg.client_secret.is_some() {
                    "client_secret_basic".into()
                } else {
                    "none".into()
                },
                secret: cfg.client_secret.clone(),
                issuer: cfg.issuer.clone(),
            },
            tokens: Mutex::new(HashMap::new()),
            vault: None,
        })
    }

    /// Also keeps exchanged tokens in `vault` (and looks there before exchanging).
    pub fn with_vault(mut self, vault: Option<Arc<dyn TokenVault>>) -> PerUser {
        self.vault = vault;
        self
    }

    /// This upstream, as the vault knows it: its name and URL (a renamed or moved server
    /// never gets another's tokens).
    fn upstream(&self) -> String {
        format!("{}\n{}", self.server, self.resource)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Secret, Instant)>> {
        lock(&self.tokens)
    }

    /// `subject`'s token for this server: kept, or exchanged now.
    async fn token_for(&self, subject: &Subject) -> Result<Secret, AuthError> {
        if let Some((token, until)) = self.lock().get(&subject.sub)
            && Instant::now() + MARGIN < *until
        {
            return Ok(token.clone());
        }
        if let Some(vault) = &self.vault
            && let Some((token, until)) = vault.get(&self.upstream(), &subject.sub).await
            && let Ok(left) = until.duration_since(SystemTime::now())
            && left > MARGIN
        {
            self.keep(&subject.sub, &token, left);
            return Ok(token);
        }
        let http = crate::auth::oauth::http_client()?;
        let mut form = vec![
            ("grant_type", TOKEN_EXCHANGE.to_owned()),
            ("subject_token", subject.token.expose().to_owned()),
            ("subject_token_type", ACCESS_TOKEN_TYPE.to_owned()),
            ("requested_token_type", ACCESS_TOKEN_TYPE.to_owned()),
            ("resource", self.resource.clone()),
        ];
        if let Some(a) = &self.audience {
            form.push(("audience", a.clone()));
        }
        if let Some(s) = &self.scope {
            form.push(("scope", s.clone()));
        }
        let answer = token::post_form(
            http,
            &self.token_endpoint,
            &self.client,
            form,
            "the token exchange endpoint",
        )
        .await
        .map_err(token::Refusal::into_error)?;
        let (token, lifetime) = issued(&answer)?;
        self.keep(&subject.sub, &token, lifetime);
        if let Some(vault) = &self.vault {
            vault.put(
                &self.upstream(),
                &subject.sub,
                &token,
                SystemTime::now() + lifetime,
            );
        }
        Ok(token)
    }

    fn keep(&self, sub: &str, token: &Secret, lifetime: Duration) {
        let mut tokens = self.lock();
        if tokens.len() >= MAX_USERS {
            tokens.clear();
        }
        tokens.insert(sub.to_owned(), (token.clone(), Instant::now() + lifetime));
    }
}

/// The exchanged access token and how long it lives, from the endpoint's answer.
fn issued(answer: &Value) -> Result<(Secret, Duration), AuthError> {
    let kind = answer.get("issued_token_type").and_then(Value::as_str);
    if kind.is_some_and(|k| k != ACCESS_TOKEN_TYPE) {
        return Err(AuthError::Token(format!(
            "the token exchange issued {} instead of an access token",
            crate::text::shown(kind.unwrap_or_default())
        )));
    }
    let token_type = answer.get("token_type").and_then(Value::as_str);
    if token_type
        .is_some_and(|t| !t.eq_ignore_ascii_case("bearer") && !t.eq_ignore_ascii_case("n_a"))
    {
        return Err(AuthError::Token(
            "the token exchange issued a token that is not a bearer token".into(),
        ));
    }
    let token = answer
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| AuthError::Token("the token exchange answer has no access_token".into()))?;
    let lifetime = answer
        .get("expires_in")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_LIFETIME, Duration::from_secs);
    Ok((Secret::new(token), lifetime))
}

impl Authorizer for PerUser {
    /// Nobody's token: a message sent for no user (a CLI command, a shared discovery
    /// outside any request) goes without one.
    fn bearer(&self) -> Pin<Box<dyn Future<Output = Option<Secret>> + Send + '_>> {
        Box::pin(async { None })
    }

    fn bearer_for<'a>(
        &'a self,
        subject: Option<&'a Subject>,
    ) -> Pin<Box<dyn Future<Output = Option<Secret>> + Send + 'a>> {
        Box::pin(async move {
            let subject = subject?;
            match self.token_for(subject).await {
                Ok(t) => Some(t),
                Err(e) => {
                    tracing::warn!(
                        server = self.server,
                        user = subject.sub,
                        "the token exchange failed: {e}"
                    );
                    None
                }
            }
        })
    }

    /// A refused exchanged token is forgotten, so the next message exchanges again.
    fn refused<'a>(
        &'a self,
        _status: u16,
        _challenge: Option<&'a Challenge>,
        sent: Option<&'a Secret>,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        Box::pin(async move {
            let Some(sent) = sent else {
                return false;
            };
            let mut tokens = self.lock();
            let whose: Vec<String> = tokens
                .iter()
                .filter(|(_, (t, _))| t.expose() == sent.expose())
                .map(|(sub, _)| sub.clone())
                .collect();
            for sub in &whose {
                tokens.remove(sub);
                if let Some(vault) = &self.vault {
                    vault.forget(&self.upstream(), sub);
                }
            }
            !whose.is_empty()
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_a_bearer_access_token_is_taken() {
        let ok = issued(
            &json!({"access_token": "t", "issued_token_type": ACCESS_TOKEN_TYPE,
                                "token_type": "Bearer", "expires_in": 60}),
        );
        assert!(matches!(ok, Ok((_, d)) if d == Duration::from_secs(60)));
        for bad in [
            json!({"access_token": "t", "issued_token_type": "urn:ietf:params:oauth:token-type:id_token"}),
            json!({"access_token": "t", "token_type": "DPoP"}),
            json!({"access_token": ""}),
            json!({"token_type": "Bearer"}),
        ] {
            assert!(issued(&bad).is_err(), "{bad}");
        }
    }
}
