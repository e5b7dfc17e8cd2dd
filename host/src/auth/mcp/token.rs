//! What a sign-in to an MCP server leaves behind ([`Credentials`], stored as one
//! secret), and the token endpoint requests that make and renew it.

use std::fmt;

use reqwest::Url;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::auth::oauth::post_with;
use crate::auth::{AuthError, Secret};
use crate::text::shown;

/// Longest token lifetime believed: ten years.
const MAX_EXPIRES_IN: u64 = 10 * 365 * 86_400;

/// How edgar authenticates to the token endpoint, as registered or configured.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Client {
    pub id: String,
    /// Issued by registration or configured by the user; edgar ships none.
    pub secret: Option<String>,
    /// `none`, `client_secret_basic`, `client_secret_post` or `private_key_jwt` (the
    /// key is read from its file for each request, never stored here).
    pub method: String,
    /// The authorization server this client belongs to.
    pub issuer: Option<String>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.id)
            .field("secret", &self.secret.as_ref().map(|_| "***"))
            .field("method", &self.method)
            .finish()
    }
}

/// One server's sign-in: tokens, where to renew them, and with which client.
#[derive(Clone, Serialize, Deserialize)]
pub struct Credentials {
    pub access_token: String,
    pub refresh_token: Option<String>,
    /// Unix seconds.
    pub expires_at: Option<u64>,
    /// When the token was issued (Unix seconds): a short-lived token is renewed in the
    /// second half of its life, not on every request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub obtained_at: Option<u64>,
    pub scope: Option<String>,
    /// The RFC 8707 resource, sent identically on every request.
    pub resource: String,
    pub token_endpoint: String,
    pub client: Client,
    /// Scopes a server asked for (403 `insufficient_scope`) when no human could sign in
    /// again; the next `edgar mcp login` asks for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wanted_scope: Option<String>,
    /// Where `edgar mcp logout` revokes the tokens (RFC 7009), if the authorization
    /// server offers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revocation_endpoint: Option<String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_token", &"***")
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| "***"))
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .field("resource", &self.resource)
            .field("client", &self.client)
            .finish()
    }
}

/// Why a token request failed.
#[derive(Debug)]
pub enum Refusal {
    /// The server answered with an OAuth error (`invalid_grant`, ...).
    OAuth { error: String },
    /// Anything else: the network, a 5xx, a malformed answer. Nothing is erased for it.
    Failed(AuthError),
}

impl Refusal {
    /// The stored sign-in cannot work again (RFC 6749 §5.2).
    pub fn is_final(&self) -> bool {
        matches!(self, Refusal::OAuth { error } if matches!(error.as_str(),
            "invalid_grant" | "invalid_client" | "unauthorized_client"))
    }

    pub fn into_error(self) -> AuthError {
        match self {
            Refusal::OAuth { error } => AuthError::Token(shown(&error)),
            Refusal::Failed(e) => e,
        }
    }
}

/// Sends a token request with the client's authentication method.
pub async fn request(
    http: &reqwest::Client,
    endpoint: &str,
    client: &Client,
    form: Vec<(&'static str, String)>,
) -> Result<Credentials, Refusal> {
    let resource = form
        .iter()
        .find(|(k, _)| *k == "resource")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let json = post_form(http, endpoint, client, form, "the token endpoint").await?;
    let Some(access_token) = json.get("access_token").and_then(Value::as_str) else {
        return Err(Refusal::Failed(AuthError::Token(
            "the token response has no access_token".into(),
        )));
    };
    let kind = json.get("token_type").and_then(Value::as_str).unwrap_or("");
    if !kind.eq_ignore_ascii_case("bearer") {
        return Err(Refusal::Failed(AuthError::Token(format!(
            "the token type is {}, not Bearer",
            shown(kind)
        ))));
    }
    let now = crate::tools::cache::now();
    let expires_at = expires_at(&json, now);
    Ok(Credentials {
        obtained_at: Some(now),
        access_token: access_token.to_owned(),
        refresh_token: json
            .get("refresh_token")
            .and_then(Value::as_str)
            .map(str::to_owned),
        expires_at,
        scope: json.get("scope").and_then(Value::as_str).map(str::to_owned),
        resource,
        token_endpoint: endpoint.to_owned(),
        client: client.clone(),
        wanted_scope: None,
        revocation_endpoint: None,
    })
}

/// Posts a token endpoint form with the client's authentication: the JSON answer, or
/// the refusal (its OAuth error code, or the HTTP status from `who`).
pub(crate) async fn post_form(
    http: &reqwest::Client,
    endpoint: &str,
    client: &Client,
    mut form: Vec<(&'static str, String)>,
    who: &str,
) -> Result<Value, Refusal> {
    let secret = client.secret.clone().map(Secret::new);
    let basic = authenticate(client, secret.as_ref(), &mut form);
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let response = post_with(http, endpoint, &pairs, basic)
        .await
        .map_err(Refusal::Failed)?;
    if (200..300).contains(&response.status) {
        return Ok(response.json);
    }
    Err(match response.json.get("error").and_then(Value::as_str) {
        Some(error) => Refusal::OAuth {
            error: error.chars().take(100).collect(),
        },
        None => Refusal::Failed(AuthError::Token(format!(
            "HTTP {} from {who}",
            response.status
        ))),
    })
}

/// Client authentication for a request to the authorization server: HTTP Basic (the
/// returned pair), or `client_id` (and `client_secret`) in the form.
fn authenticate<'a>(
    client: &'a Client,
    secret: Option<&'a Secret>,
    form: &mut Vec<(&'static str, String)>,
) -> Option<(&'a str, &'a Secret)> {
    let basic = match (client.method.as_str(), secret) {
        ("client_secret_basic", Some(s)) => Some((client.id.as_str(), s)),
        _ => None,
    };
    if basic.is_none() {
        form.push(("client_id", client.id.clone()));
    }
    if let ("client_secret_post", Some(s)) = (client.method.as_str(), &client.secret) {
        form.push(("client_secret", s.clone()));
    }
    basic
}

/// Revokes the refresh token, then the access token, at `creds`' revocation endpoint
/// (RFC 7009 §2.1). The server answers 200 even for tokens it no longer knows.
pub async fn revoke(http: &reqwest::Client, creds: &Credentials) -> Result<(), AuthError> {
    let Some(endpoint) = &creds.revocation_endpoint else {
        return Ok(());
    };
    let secret = creds.client.secret.clone().map(Secret::new);
    let tokens = creds
        .refresh_token
        .iter()
        .map(|t| (t, "refresh_token"))
        .chain([(&creds.access_token, "access_token")]);
    for (token, hint) in tokens {
        let mut form = vec![
            ("token", token.clone()),
            ("token_type_hint", hint.to_owned()),
        ];
        let basic = authenticate(&creds.client, secret.as_ref(), &mut form);
        let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let response = post_with(http, endpoint, &pairs, basic).await?;
        if response.status != 200 {
            return Err(AuthError::Token(format!(
                "the revocation endpoint answered HTTP {} for the {hint}",
                response.status
            )));
        }
    }
    Ok(())
}

/// Renews `old` with its refresh token; a response without a new refresh token keeps
/// the old one (servers that do not rotate).
/// When a token answer's `expires_in` runs out. A hostile or careless server's huge value
/// must neither wrap (a refresh on every request) nor promise a token for centuries.
fn expires_at(json: &Value, now: u64) -> Option<u64> {
    json.get("expires_in")
        .and_then(Value::as_u64)
        .map(|s| now.saturating_add(s.min(MAX_EXPIRES_IN)))
}

pub async fn refresh(http: &reqwest::Client, old: &Credentials) -> Result<Credentials, Refusal> {
    let Some(refresh_token) = &old.refresh_token else {
        return Err(Refusal::OAuth {
            error: "no refresh token".into(),
        });
    };
    let form = vec![
        ("grant_type", "refresh_token".to_owned()),
        ("refresh_token", refresh_token.clone()),
        ("resource", old.resource.clone()),
    ];
    let mut new = request(http, &old.token_endpoint, &old.client, form).await?;
    if new.refresh_token.is_none() {
        new.refresh_token = old.refresh_token.clone();
    }
    if new.scope.is_none() {
        new.scope = old.scope.clone();
    }
    new.revocation_endpoint = old.revocation_endpoint.clone();
    Ok(new)
}

impl Credentials {
    /// Whether the token should be renewed before use: it expires within `margin`
    /// seconds, or within half its lifetime for a token that lives less than twice that.
    pub fn expiring(&self, now: u64, margin: u64) -> bool {
        let Some(at) = self.expires_at else {
            return false;
        };
        let margin = match self.obtained_at {
            Some(from) if at > from => margin.min((at - from) / 2),
            _ => margin,
        };
        at <= now.saturating_add(margin)
    }
}

/// Picks the token endpoint authentication method: the registered one if the server
/// allows it, else by what the server lists and whether there is a secret.
pub fn auth_method(registered: Option<&str>, supported: &[String], has_secret: bool) -> String {
    let allowed = |m: &str| supported.is_empty() || supported.iter().any(|s| s == m);
    if let Some(m) = registered
        && allowed(m)
        && (m == "none" || has_secret)
    {
        return m.to_owned();
    }
    if !has_secret {
        return "none".into();
    }
    // RFC 8414 §2: an absent list means client_secret_basic.
    if supported.is_empty() || supported.iter().any(|s| s == "client_secret_basic") {
        "client_secret_basic".into()
    } else if supported.iter().any(|s| s == "client_secret_post") {
        "client_secret_post".into()
    } else {
        "none".into()
    }
}

/// A URL-safe check that an endpoint string is a URL.
pub fn endpoint_url(s: &str) -> Result<Url, AuthError> {
    Url::parse(s).map_err(|_| AuthError::Discovery(format!("{} is not a URL", shown(s))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_never_wraps_or_outlives_ten_years() {
        let now = 1_800_000_000;
        for (v, want) in [
            (serde_json::json!({"expires_in": 3600}), Some(now + 3600)),
            (
                serde_json::json!({"expires_in": u64::MAX}),
                Some(now + MAX_EXPIRES_IN),
            ),
            (serde_json::json!({"expires_in": -5}), None),
            (serde_json::json!({}), None),
        ] {
            assert_eq!(expires_at(&v, now), want, "{v}");
        }
        assert_eq!(
            expires_at(&serde_json::json!({"expires_in": 1}), u64::MAX),
            Some(u64::MAX)
        );
    }

    #[test]
    fn a_short_lived_token_is_renewed_in_its_second_half_not_on_every_use() {
        let mut c = Credentials {
            access_token: String::new(),
            refresh_token: None,
            expires_at: Some(1030),
            obtained_at: Some(1000),
            scope: None,
            resource: String::new(),
            token_endpoint: String::new(),
            client: Client {
                id: String::new(),
                secret: None,
                method: "none".into(),
                issuer: None,
            },
            wanted_scope: None,
            revocation_endpoint: None,
        };
        assert!(!c.expiring(1001, 60));
        assert!(!c.expiring(1014, 60));
        assert!(c.expiring(1015, 60));
        // A long-lived one: the full margin.
        c.expires_at = Some(1000 + 3600);
        assert!(!c.expiring(1000 + 3539, 60));
        assert!(c.expiring(1000 + 3540, 60));
        // Issue time unknown (stored by an older edgar): the full margin.
        c.obtained_at = None;
        assert!(c.expiring(1000 + 3540, 60));
        c.expires_at = None;
        assert!(!c.expiring(u64::MAX, 60));
    }

    #[test]
    fn methods_follow_the_server() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            auth_method(
                Some("client_secret_post"),
                &s(&["client_secret_post"]),
                true
            ),
            "client_secret_post"
        );
        assert_eq!(
            auth_method(None, &s(&["client_secret_basic"]), true),
            "client_secret_basic"
        );
        assert_eq!(auth_method(None, &[], true), "client_secret_basic");
        assert_eq!(auth_method(None, &s(&["none"]), false), "none");
        assert_eq!(
            auth_method(Some("client_secret_basic"), &s(&["none"]), true),
            "none"
        );
        assert_eq!(auth_method(Some("none"), &s(&["none"]), true), "none");
    }

    #[test]
    fn credentials_never_show_secrets() {
        let c = Credentials {
            access_token: "at-secret-1".into(),
            refresh_token: Some("rt-secret-2".into()),
            expires_at: None,
            obtained_at: None,
            scope: None,
            resource: "r".into(),
            token_endpoint: "t".into(),
            client: Client {
                id: "id".into(),
                secret: Some("cs-secret-3".into()),
                method: "none".into(),
                issuer: None,
            },
            wanted_scope: None,
            revocation_endpoint: None,
        };
        let text = format!("{c:?}");
        for s in ["at-secret-1", "rt-secret-2", "cs-secret-3"] {
            assert!(!text.contains(s), "{text}");
        }
    }
}
