//! Who is at the browser of a user's own sign-in to an upstream (`"grant":
//! "user_sign_in"`). A sign-in link can be forwarded: were its callback to keep the
//! tokens of whoever completes it, a user who sent their link to a colleague would get
//! the colleague's upstream account. So the link first goes to the company's identity
//! provider (OpenID Connect, authorization code with PKCE and a nonce, the gateway as
//! `browser_client`); only a browser that signs in there as the user the link was made
//! for goes on to the upstream, carrying a cookie that says so, sealed and bound to
//! that one sign-in; the callback keeps nothing for a browser without it.

use std::collections::HashMap;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::Url;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::config::TeamConfig;
use super::token::{Refusal, Verifier};
use crate::auth::mcp::discovery::{self, ServerMetadata};
use crate::auth::mcp::token::{self, Client};
use crate::auth::mcp::user_sign_in::STATE_LIFETIME;
use crate::seal::Sealer;
use crate::text::shown;

/// Where the browser comes back from the company's sign-in.
pub const IDENTITY_PATH: &str = "/oauth/identity";
const BOUND_STATE: &str = "edgar sign-in identity state";
const BOUND_COOKIE: &str = "edgar sign-in browser";
/// Each sign-in's cookie is named after it, so two at once do not overwrite each other.
const COOKIE_PREFIX: &str = "edgar_sign_in_";

/// What the identity leg's `state` carries.
#[derive(Serialize, Deserialize)]
struct Going {
    /// The upstream's authorization URL, where the browser goes next.
    upstream: String,
    sub: String,
    id: String,
    verifier: String,
    nonce: String,
    until: u64,
}

/// What the cookie carries: this browser signed in to the company as `sub`, for
/// sign-in `id`.
#[derive(Serialize, Deserialize)]
struct Proven {
    sub: String,
    id: String,
    until: u64,
}

/// The gateway as the browser's client of the company's identity provider.
pub struct Browser {
    client: Client,
    issuer: String,
    redirect_uri: String,
    secure: bool,
    sealer: Sealer,
    meta: tokio::sync::OnceCell<ServerMetadata>,
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Browser")
            .field("client", &self.client)
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

impl Browser {
    /// The check `config` sets up (`browser_client`), sealing with `key`; `None` when
    /// it names no client.
    pub fn new(config: &TeamConfig, key: &[u8; 32]) -> Option<Browser> {
        let b = config.browser_client.as_ref()?;
        let origin = config.resource.origin().ascii_serialization();
        Some(Browser {
            client: Client {
                id: b.client_id.clone(),
                secret: b.client_secret.clone(),
                method: if b.client_secret.is_some() {
                    "client_secret_basic".into()
                } else {
                    "none".into()
                },
                issuer: Some(config.issuer.clone()),
            },
            issuer: config.issuer.clone(),
            redirect_uri: format!("{origin}{IDENTITY_PATH}"),
            secure: config.resource.scheme() == "https",
            sealer: Sealer::new(key),
            meta: tokio::sync::OnceCell::new(),
        })
    }

    fn http(&self) -> Result<&'static reqwest::Client, String> {
        let loopback = Url::parse(&self.issuer).is_ok_and(|u| crate::net::is_loopback(&u));
        let http = if loopback {
            crate::auth::oauth::http_client()
        } else {
            crate::auth::oauth::public_http_client()
        };
        http.map_err(|e| e.to_string())
    }

    /// The identity provider's endpoints (fetched once).
    async fn meta(&self) -> Result<&ServerMetadata, String> {
        self.meta
            .get_or_try_init(|| async {
                let issuer = Url::parse(&self.issuer).map_err(|e| e.to_string())?;
                discovery::server_metadata(self.http()?, &issuer, true)
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| format!("{} publishes no metadata", shown(&self.issuer)))
            })
            .await
    }

    /// The link to give `sub` for sign-in `id`: the company's sign-in first, then
    /// `upstream` (the upstream's authorization URL).
    pub async fn first_the_company(
        &self,
        upstream: &Url,
        sub: &str,
        id: &str,
    ) -> Result<Url, String> {
        let meta = self.meta().await?;
        let mut url = meta.authorization_endpoint.clone()?;
        let (challenge, verifier) = oauth2::PkceCodeChallenge::new_random_sha256();
        let nonce = URL_SAFE_NO_PAD.encode(random::<16>()?);
        let going = Going {
            upstream: upstream.to_string(),
            sub: sub.to_owned(),
            id: id.to_owned(),
            verifier: verifier.secret().clone(),
            nonce: nonce.clone(),
            until: crate::clock::now() + STATE_LIFETIME,
        };
        let state = self.seal(BOUND_STATE, &going)?;
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.client.id)
            .append_pair("redirect_uri", &self.redirect_uri)
            .append_pair("scope", "openid")
            .append_pair("state", &state)
            .append_pair("nonce", &nonce)
            .append_pair("code_challenge", challenge.as_str())
            .append_pair("code_challenge_method", "S256");
        Ok(url)
    }

    /// Back from the company's sign-in with `query`: where the browser goes on (the
    /// upstream's authorization URL) and the `Set-Cookie` value that lets its callback
    /// keep the tokens; or why not (another user signed in, an altered or stale link,
    /// the provider's refusal).
    pub async fn identified(
        &self,
        query: &str,
        verifier: &Verifier,
    ) -> Result<(String, String), String> {
        let params = params(query);
        if let Some(error) = params.get("error") {
            return Err(format!("the company's sign-in refused: {}", shown(error)));
        }
        let going: Going = params
            .get("state")
            .and_then(|s| self.open(BOUND_STATE, s))
            .ok_or("this sign-in link is not one the gateway made, or it was altered")?;
        if crate::clock::now() > going.until {
            return Err(format!(
                "this sign-in took longer than {} minutes: ask your MCP client again",
                STATE_LIFETIME / 60
            ));
        }
        let code = params.get("code").ok_or("the redirect brought no code")?;
        let meta = self.meta().await?;
        let form = vec![
            ("grant_type", "authorization_code".to_owned()),
            ("code", code.clone()),
            ("redirect_uri", self.redirect_uri.clone()),
            ("code_verifier", going.verifier.clone()),
        ];
        let answer = token::post_form(
            self.http()?,
            meta.token_endpoint.as_str(),
            &self.client,
            form,
            "the identity provider",
        )
        .await
        .map_err(|r| r.into_error().to_string())?;
        let id_token = answer
            .get("id_token")
            .and_then(Value::as_str)
            .ok_or("the identity provider sent no ID token")?;
        let sub = verifier
            .id_token(id_token, &self.client.id, &going.nonce)
            .await
            .map_err(|r| match r {
                Refusal::Invalid(why) | Refusal::Unavailable(why) => why,
                Refusal::Missing | Refusal::Scope(_) => "the ID token was refused".into(),
            })?;
        if sub != going.sub {
            return Err(
                "you signed in to the company as another user than the one this sign-in link was made for; a sign-in link is for the person whose MCP client asked for it".into(),
            );
        }
        let proven = Proven {
            sub,
            id: going.id.clone(),
            until: going.until,
        };
        let mut cookie = format!(
            "{COOKIE_PREFIX}{}={}; Path=/oauth/callback; Max-Age={STATE_LIFETIME}; HttpOnly; SameSite=Lax",
            going.id,
            self.seal(BOUND_COOKIE, &proven)?
        );
        if self.secure {
            cookie.push_str("; Secure");
        }
        Ok((going.upstream, cookie))
    }

    /// Whether `cookies` (the request's `Cookie` header values) show this browser
    /// signed in to the company as `sub` for sign-in `id`, within its lifetime.
    pub fn proves<'a>(
        &self,
        cookies: impl IntoIterator<Item = &'a str>,
        sub: &str,
        id: &str,
    ) -> bool {
        let name = format!("{COOKIE_PREFIX}{id}");
        cookies
            .into_iter()
            .flat_map(|h| h.split(';'))
            .filter_map(|c| c.trim().split_once('='))
            .filter(|(n, _)| *n == name)
            .filter_map(|(_, v)| self.open::<Proven>(BOUND_COOKIE, v))
            .any(|p| p.sub == sub && p.id == id && crate::clock::now() <= p.until)
    }

    fn seal(&self, bound: &str, value: &impl Serialize) -> Result<String, String> {
        let plain = serde_json::to_vec(value).map_err(|e| e.to_string())?;
        let sealed = self
            .sealer
            .seal(&[bound], &plain)
            .ok_or("the OS random source failed")?;
        Ok(URL_SAFE_NO_PAD.encode(sealed))
    }

    fn open<T: for<'de> Deserialize<'de>>(&self, bound: &str, text: &str) -> Option<T> {
        let sealed = URL_SAFE_NO_PAD.decode(text).ok()?;
        let plain = self.sealer.open(&[bound], &sealed)?;
        serde_json::from_slice(&plain).ok()
    }
}

fn params(query: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        out.entry(k.into_owned()).or_insert_with(|| v.into_owned());
    }
    out
}

fn random<const N: usize>() -> Result<[u8; N], String> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| format!("the OS random source failed: {e}"))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests;
