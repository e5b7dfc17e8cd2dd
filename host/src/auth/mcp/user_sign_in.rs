//! Per-user sign-in through a team gateway (`"grant": "user_sign_in"`), for an upstream
//! whose sign-in is not the company's: each user signs in to it themselves. The gateway
//! begins an authorization (discovery, the client, PKCE) for the user, hands them the
//! authorization URL (URL-mode elicitation), and its own callback finishes it; the tokens
//! are the user's alone, kept in memory and, with the replicas' shared state, sealed in
//! their vault.
//!
//! What finishing needs (the PKCE verifier, the client, the user, the server) travels in
//! the authorization request's `state`, sealed with the gateway's key and good for
//! [`STATE_LIFETIME`]: any replica can finish it, the authorization server sees only
//! ciphertext, and a forged or altered `state` opens nowhere.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::Url;
use serde::{Deserialize, Serialize};

use super::{Begun, Logout, McpAuth};
use crate::auth::bearer::{Authorizer, Challenge, Subject};
use crate::auth::store::{Store, UserSecrets};
use crate::auth::vault::TokenVault;
use crate::auth::{AuthError, Secret};
use crate::config::ServerSpec;
use crate::seal::Sealer;
use crate::sync::lock;
use crate::text::shown;

/// Where the browser comes back to, on the gateway's own origin.
pub const CALLBACK_PATH: &str = "/oauth/callback";
/// How long a begun sign-in may take, in seconds (a person reads and types).
pub const STATE_LIFETIME: u64 = 600;
/// What a sealed `state` is bound to: nothing else edgar seals opens as one.
const BOUND: &str = "edgar user sign-in state";
/// Users whose sign-ins one server keeps in memory; emptied when full (a vault keeps
/// them beyond).
const MAX_USERS: usize = 10_000;

/// A sign-in handed to a user: where to send their browser, and its elicitation id.
#[derive(Debug, Clone)]
pub struct Started {
    pub url: Url,
    pub id: String,
}

/// A sign-in finished at the callback: for whom, to which server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub server: String,
    pub sub: String,
    /// The elicitation id the sign-in was handed out with.
    pub id: String,
}

/// What the sealed `state` carries.
#[derive(Serialize, Deserialize)]
struct Pending {
    server: String,
    sub: String,
    id: String,
    /// Unix seconds after which it is refused.
    until: u64,
    begun: Begun,
}

/// The gateway's per-user sign-ins, for every `user_sign_in` server.
pub struct UserSignIns {
    callback: String,
    sealer: Sealer,
    vault: Option<Arc<dyn TokenVault>>,
    specs: HashMap<String, ServerSpec>,
    servers: Mutex<HashMap<String, Arc<UserSignIn>>>,
}

impl std::fmt::Debug for UserSignIns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserSignIns")
            .field("callback", &self.callback)
            .field("servers", &self.specs.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl UserSignIns {
    /// Sign-ins to `specs` (those whose grant is `user_sign_in`), returning to
    /// `callback`; `state` sealed with `sealer`; tokens also kept in `vault`.
    pub fn new(
        callback: String,
        sealer: Sealer,
        vault: Option<Arc<dyn TokenVault>>,
        specs: impl IntoIterator<Item = ServerSpec>,
    ) -> UserSignIns {
        UserSignIns {
            callback,
            sealer,
            vault,
            specs: specs
                .into_iter()
                .filter(|s| s.oauth.grant == crate::config::Grant::UserSignIn)
                .map(|s| (s.name.clone(), s))
                .collect(),
            servers: Mutex::new(HashMap::new()),
        }
    }

    /// The gateway's callback URL: `resource`'s origin and [`CALLBACK_PATH`].
    pub fn callback_for(resource: &Url) -> String {
        format!("{}{CALLBACK_PATH}", resource.origin().ascii_serialization())
    }

    /// The servers signed in to per user here, by name.
    pub fn servers(&self) -> impl Iterator<Item = &str> {
        self.specs.keys().map(String::as_str)
    }

    /// Whether no server is signed in to per user here.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// Whether `server` is signed in to per user here.
    pub fn signs_in(&self, server: &str) -> bool {
        self.specs.contains_key(server)
    }

    /// `server`'s sign-in (the authorizer its connections use), if it is one of ours.
    pub fn server(&self, server: &str) -> Option<Arc<UserSignIn>> {
        let spec = self.specs.get(server)?;
        let mut all = lock(&self.servers);
        Some(
            all.entry(server.to_owned())
                .or_insert_with(|| {
                    Arc::new(UserSignIn {
                        spec: spec.clone(),
                        vault: self.vault.clone(),
                        users: Mutex::new(HashMap::new()),
                        challenge: Mutex::new(None),
                        client: Mutex::new(None),
                    })
                })
                .clone(),
        )
    }

    /// Whether `sub` has a sign-in to `server` (here, or in the vault).
    pub async fn signed_in(&self, server: &str, sub: &str) -> bool {
        match self.server(server).and_then(|s| s.auth_for(sub)) {
            Some(auth) => matches!(auth.stored().await, Ok(Some(_))),
            None => false,
        }
    }

    /// Signs `sub` out of `server`: their tokens revoked where the authorization server
    /// offers it (RFC 7009), then erased here and in the vault (waited for, so no
    /// replica finds them after). Their next call there asks them to sign in again.
    pub async fn sign_out(&self, server: &str, sub: &str) -> Result<Logout, AuthError> {
        let auth = self
            .server(server)
            .and_then(|s| s.auth_for(sub))
            .ok_or_else(|| {
                AuthError::Config(format!("'{}' is not signed in to per user", shown(server)))
            })?;
        auth.logout().await
    }

    /// Begins `sub`'s sign-in to `server`: the authorization URL to send their browser
    /// to, its `state` sealed.
    pub async fn start(&self, server: &str, sub: &str) -> Result<Started, AuthError> {
        let signs_in = self.server(server).ok_or_else(|| {
            AuthError::Config(format!("'{}' is not signed in to per user", shown(server)))
        })?;
        let auth = signs_in
            .auth_for(sub)
            .ok_or_else(|| AuthError::Config(format!("'{server}' cannot be signed in to")))?;
        let challenge = lock(&signs_in.challenge).clone();
        let client = lock(&signs_in.client).clone();
        auth.adopt_client(client).await;
        let (mut url, begun) = auth.begin(challenge.as_ref(), &self.callback).await?;
        // The next user's sign-in is this client too (registered once, not per user).
        *lock(&signs_in.client) = Some(begun.client.clone());
        let id = crate::digest::hex(&random::<16>()?);
        let pending = Pending {
            server: server.to_owned(),
            sub: sub.to_owned(),
            id: id.clone(),
            until: crate::clock::now() + STATE_LIFETIME,
            begun,
        };
        let plain = serde_json::to_vec(&pending)
            .map_err(|e| AuthError::Config(format!("cannot keep the sign-in: {e}")))?;
        let sealed = self
            .sealer
            .seal(&[BOUND], &plain)
            .ok_or_else(|| AuthError::Config("the OS random source failed".into()))?;
        set_state(&mut url, &URL_SAFE_NO_PAD.encode(sealed));
        Ok(Started { url, id })
    }

    /// The browser came back with `query` (the callback's query string): once `proven`
    /// accepts who the sign-in is for (`sub`, its id), the code is exchanged for the
    /// user's tokens, which are kept. Refused: a `state` this gateway did not seal, or
    /// sealed longer than [`STATE_LIFETIME`] ago, an authorization server's error, or
    /// what `proven` refuses.
    pub async fn finish(
        &self,
        query: &str,
        proven: impl FnOnce(&str, &str) -> Result<(), AuthError>,
    ) -> Result<Finished, AuthError> {
        let mut params: HashMap<String, String> = HashMap::new();
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            params
                .entry(k.into_owned())
                .or_insert_with(|| v.into_owned());
        }
        if let Some(error) = params.get("error") {
            return Err(AuthError::Redirect(format!(
                "the authorization server refused the sign-in: {}",
                shown(error)
            )));
        }
        let refused = || {
            AuthError::Redirect(
                "this sign-in link is not one the gateway made, or it was altered".into(),
            )
        };
        let sealed = params
            .get("state")
            .and_then(|s| URL_SAFE_NO_PAD.decode(s).ok())
            .ok_or_else(refused)?;
        let plain = self.sealer.open(&[BOUND], &sealed).ok_or_else(refused)?;
        let pending: Pending = serde_json::from_slice(&plain).map_err(|_| refused())?;
        if crate::clock::now() > pending.until {
            return Err(AuthError::Redirect(format!(
                "this sign-in took longer than {} minutes: call the tool again for a new one",
                STATE_LIFETIME / 60
            )));
        }
        proven(&pending.sub, &pending.id)?;
        let code = params
            .get("code")
            .map(|c| Secret::new(c.clone()))
            .ok_or_else(|| AuthError::Redirect("the redirect brought no code".into()))?;
        let auth = self
            .server(&pending.server)
            .and_then(|s| s.auth_for(&pending.sub))
            .ok_or_else(|| {
                AuthError::Config(format!(
                    "'{}' is no longer signed in to per user",
                    shown(&pending.server)
                ))
            })?;
        auth.finish(pending.begun, &code, params.get("iss").map(String::as_str))
            .await?;
        Ok(Finished {
            server: pending.server,
            sub: pending.sub,
            id: pending.id,
        })
    }
}

/// `url` with its `state` parameter replaced by `state`.
fn set_state(url: &mut Url, state: &str) {
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(k, _)| k != "state")
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    url.query_pairs_mut()
        .clear()
        .extend_pairs(kept)
        .append_pair("state", state);
}

fn random<const N: usize>() -> Result<[u8; N], AuthError> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes)
        .map_err(|e| AuthError::Config(format!("the OS random source failed: {e}")))?;
    Ok(bytes)
}

/// One `user_sign_in` server's sign-ins, one per user: the authorizer its connections
/// ask for the token of the user each message is sent for.
pub struct UserSignIn {
    spec: ServerSpec,
    vault: Option<Arc<dyn TokenVault>>,
    users: Mutex<HashMap<String, Arc<McpAuth>>>,
    /// What the server said when it last refused (where its metadata is).
    challenge: Mutex<Option<Challenge>>,
    /// The client the last sign-in began as, which the next user's begins as too.
    client: Mutex<Option<super::token::Client>>,
}

impl UserSignIn {
    /// `sub`'s sign-in to this server (made on first use; nothing is fetched).
    fn auth_for(&self, sub: &str) -> Option<Arc<McpAuth>> {
        let mut users = lock(&self.users);
        if let Some(a) = users.get(sub) {
            return Some(a.clone());
        }
        if users.len() >= MAX_USERS {
            users.clear();
        }
        let store = Store::User(UserSecrets::new(sub, self.vault.clone()));
        match McpAuth::new(&self.spec, store, None) {
            Ok(a) => {
                let a = Arc::new(a);
                users.insert(sub.to_owned(), a.clone());
                Some(a)
            }
            Err(e) => {
                tracing::warn!(server = self.spec.name, "no sign-in: {e}");
                None
            }
        }
    }
}

impl Authorizer for UserSignIn {
    /// A message sent for nobody carries no token.
    fn bearer(&self) -> Pin<Box<dyn Future<Output = Option<Secret>> + Send + '_>> {
        Box::pin(async { None })
    }

    fn bearer_for<'a>(
        &'a self,
        subject: Option<&'a Subject>,
    ) -> Pin<Box<dyn Future<Output = Option<Secret>> + Send + 'a>> {
        Box::pin(async move {
            let auth = self.auth_for(&subject?.sub)?;
            auth.bearer().await
        })
    }

    fn refused<'a>(
        &'a self,
        status: u16,
        challenge: Option<&'a Challenge>,
        sent: Option<&'a Secret>,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        self.refused_for(None, status, challenge, sent)
    }

    /// Remembers where the server's metadata is; the user's refresh token, if any, is
    /// tried once. A new sign-in needs the user: the call fails, and the gateway asks.
    fn refused_for<'a>(
        &'a self,
        subject: Option<&'a Subject>,
        status: u16,
        challenge: Option<&'a Challenge>,
        sent: Option<&'a Secret>,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        Box::pin(async move {
            if let Some(c) = challenge {
                *lock(&self.challenge) = Some(c.clone());
            }
            let Some(auth) = subject.and_then(|s| self.auth_for(&s.sub)) else {
                return false;
            };
            auth.refused(status, challenge, sent).await
        })
    }
}

#[cfg(test)]
mod tests;
