//! What a sign-in to an MCP server leaves behind ([`Credentials`], stored as one
//! secret), and the requests to the authorization server that make, renew and revoke
//! it: the grants `oauth2` carries through it, the others by hand.

use std::borrow::Cow;
use std::fmt;

use oauth2::basic::{BasicClient, BasicErrorResponse, BasicTokenResponse, BasicTokenType};
use oauth2::{
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, RefreshToken, RequestTokenError, Scope, TokenResponse, TokenUrl,
};
use reqwest::Url;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::auth::assertion::{ASSERTION_TYPE, SigningKey};
use crate::auth::oauth::{self, post_with};
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

/// A grant `oauth2` carries: what a token is asked for with.
pub enum Grant<'a> {
    /// The code from the redirect, with the PKCE verifier its challenge was made from.
    Code {
        code: &'a Secret,
        verifier: PkceCodeVerifier,
        redirect_uri: &'a str,
    },
    /// A refresh token (RFC 6749 §6).
    Refresh(&'a str),
    /// The client's own credentials (RFC 6749 §4.4), for a scope.
    ClientCredentials { scope: Option<&'a str> },
}

/// The authorization URL for a sign-in: `client_id`, S256 PKCE, a fresh `state`, the
/// redirect, the scope and the RFC 8707 resource. Returns the URL, the `state` to
/// expect back and the PKCE verifier for the code exchange.
pub fn authorization_url(
    endpoint: Url,
    client_id: &str,
    redirect_uri: &str,
    scope: Option<&str>,
    resource: &str,
) -> Result<(Url, Secret, PkceCodeVerifier), AuthError> {
    let redirect = RedirectUrl::new(redirect_uri.to_owned())
        .map_err(|_| AuthError::Loopback(format!("{} is not a URL", shown(redirect_uri))))?;
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let oauth = BasicClient::new(ClientId::new(client_id.to_owned()))
        .set_auth_uri(AuthUrl::from_url(endpoint))
        .set_redirect_uri(redirect);
    let (url, state) = oauth
        .authorize_url(CsrfToken::new_random)
        .set_pkce_challenge(challenge)
        .add_scopes(scope.map(|s| Scope::new(s.to_owned())))
        .add_extra_param("resource", resource)
        .url();
    Ok((url, Secret::new(state.into_secret()), verifier))
}

/// Asks the token endpoint for a token by `grant`, authenticated as `client` (with a
/// fresh assertion signed by `key` when the client uses `private_key_jwt`), for
/// `resource`.
pub async fn request(
    http: &reqwest::Client,
    endpoint: &str,
    client: &Client,
    key: Option<&SigningKey>,
    grant: Grant<'_>,
    resource: &str,
) -> Result<Credentials, Refusal> {
    let url = TokenUrl::new(endpoint.to_owned()).map_err(|_| {
        Refusal::Failed(AuthError::Discovery(format!(
            "{} is not a URL",
            shown(endpoint)
        )))
    })?;
    let mut oauth = BasicClient::new(ClientId::new(client.id.clone())).set_token_uri(url);
    match (client.method.as_str(), &client.secret) {
        ("client_secret_basic", Some(s)) => {
            oauth = oauth.set_client_secret(ClientSecret::new(s.clone()));
        }
        ("client_secret_post", Some(s)) => {
            oauth = oauth
                .set_client_secret(ClientSecret::new(s.clone()))
                .set_auth_type(AuthType::RequestBody);
        }
        // Otherwise `client_id` goes in the body (`none`, or with an assertion).
        _ => {}
    }
    let mut params = vec![("resource", resource.to_owned())];
    params.extend(assertion(client, key, endpoint)?);
    macro_rules! with_params {
        ($request:expr) => {{
            let mut r = $request;
            for (k, v) in params {
                r = r.add_extra_param(k, v);
            }
            r
        }};
    }
    let send = Http(http);
    let answer = match grant {
        Grant::Code {
            code,
            verifier,
            redirect_uri,
        } => {
            let redirect = RedirectUrl::new(redirect_uri.to_owned()).map_err(|_| {
                Refusal::Failed(AuthError::Loopback(format!(
                    "{} is not a URL",
                    shown(redirect_uri)
                )))
            })?;
            let r = oauth
                .exchange_code(AuthorizationCode::new(code.expose().to_owned()))
                .set_pkce_verifier(verifier)
                .set_redirect_uri(Cow::Owned(redirect));
            with_params!(r).request_async(&send).await
        }
        Grant::Refresh(token) => {
            let token = RefreshToken::new(token.to_owned());
            with_params!(oauth.exchange_refresh_token(&token))
                .request_async(&send)
                .await
        }
        Grant::ClientCredentials { scope } => {
            let r = oauth
                .exchange_client_credentials()
                .add_scopes(scope.map(|s| Scope::new(s.to_owned())));
            with_params!(r).request_async(&send).await
        }
    };
    credentials(answer.map_err(refusal)?, endpoint, client, resource)
}

/// A token request by a grant `oauth2` does not carry (an RFC 7523 JWT bearer
/// assertion): the `form` posted with the client's authentication, the answer read as
/// any other token answer.
pub async fn request_form(
    http: &reqwest::Client,
    endpoint: &str,
    client: &Client,
    key: Option<&SigningKey>,
    mut form: Vec<(&'static str, String)>,
    resource: &str,
) -> Result<Credentials, Refusal> {
    form.push(("resource", resource.to_owned()));
    form.extend(assertion(client, key, endpoint)?);
    let json = post_form(http, endpoint, client, form, "the token endpoint").await?;
    let answer = serde_json::from_value::<BasicTokenResponse>(json).map_err(|_| {
        Refusal::Failed(AuthError::Token(
            "the token endpoint's answer is not a token response".into(),
        ))
    })?;
    credentials(answer, endpoint, client, resource)
}

/// The client assertion parameters (RFC 7523 §2.2) for a `private_key_jwt` client:
/// signed now, for the authorization server (its issuer, or else the token endpoint).
fn assertion(
    client: &Client,
    key: Option<&SigningKey>,
    endpoint: &str,
) -> Result<Vec<(&'static str, String)>, Refusal> {
    if client.method != "private_key_jwt" {
        return Ok(Vec::new());
    }
    let Some(key) = key else {
        return Err(Refusal::Failed(AuthError::Config(
            "the client signs in with a private key, and none is configured".into(),
        )));
    };
    let audience = client.issuer.as_deref().unwrap_or(endpoint);
    let jwt = key
        .assertion(&client.id, audience, crate::clock::now())
        .map_err(Refusal::Failed)?;
    Ok(vec![
        ("client_assertion_type", ASSERTION_TYPE.to_owned()),
        ("client_assertion", jwt),
    ])
}

/// `oauth2`'s HTTP client: a named type rather than a closure, so the request's future
/// is `Send` for every lifetime (the transport's authorizer needs that).
struct Http<'a>(&'a reqwest::Client);

impl<'c> oauth2::AsyncHttpClient<'c> for Http<'_> {
    type Error = AuthError;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<oauth2::HttpResponse, AuthError>> + Send + 'c>,
    >;

    fn call(&'c self, request: oauth2::HttpRequest) -> Self::Future {
        Box::pin(answer(self.0, request))
    }
}

/// [`oauth::send`], with an error answer that is not an OAuth error (a 5xx page)
/// reported by its status rather than as unparseable.
async fn answer(
    http: &reqwest::Client,
    request: oauth2::HttpRequest,
) -> Result<oauth2::HttpResponse, AuthError> {
    let response = oauth::send(http, request).await?;
    let status = response.status().as_u16();
    let oauth_error = || {
        serde_json::from_slice::<Value>(response.body())
            .is_ok_and(|v| v.get("error").is_some_and(Value::is_string))
    };
    if status != 200 && !oauth_error() {
        return Err(AuthError::Token(format!(
            "HTTP {status} from the token endpoint"
        )));
    }
    Ok(response)
}

fn refusal(e: RequestTokenError<AuthError, BasicErrorResponse>) -> Refusal {
    match e {
        RequestTokenError::ServerResponse(r) => Refusal::OAuth {
            error: r.error().as_ref().chars().take(100).collect(),
        },
        RequestTokenError::Request(e) => Refusal::Failed(e),
        // The body may hold a token: only where the answer went wrong is shown.
        RequestTokenError::Parse(e, _) => Refusal::Failed(AuthError::Token(format!(
            "the token endpoint's answer is not understood (at {})",
            shown(&e.path().to_string())
        ))),
        RequestTokenError::Other(why) => Refusal::Failed(AuthError::Token(shown(&why))),
    }
}

/// What a token answer leaves behind, once it is a Bearer token.
fn credentials(
    answer: BasicTokenResponse,
    endpoint: &str,
    client: &Client,
    resource: &str,
) -> Result<Credentials, Refusal> {
    if *answer.token_type() != BasicTokenType::Bearer {
        return Err(Refusal::Failed(AuthError::Token(format!(
            "the token type is {}, not Bearer",
            shown(answer.token_type().as_ref())
        ))));
    }
    let now = crate::clock::now();
    Ok(Credentials {
        obtained_at: Some(now),
        access_token: answer.access_token().secret().clone(),
        refresh_token: answer.refresh_token().map(|t| t.secret().clone()),
        expires_at: answer.expires_in().map(|d| expires_at(d.as_secs(), now)),
        scope: answer
            .scopes()
            .map(|s| s.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ")),
        resource: resource.to_owned(),
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

/// When a token answer's `expires_in` runs out. A hostile or careless server's huge value
/// must neither wrap (a refresh on every request) nor promise a token for centuries.
fn expires_at(expires_in: u64, now: u64) -> u64 {
    now.saturating_add(expires_in.min(MAX_EXPIRES_IN))
}

/// Renews `old` with its refresh token; a response without a new refresh token keeps
/// the old one (servers that do not rotate). `key` signs the client's assertion when
/// it authenticates with one.
pub async fn refresh(
    http: &reqwest::Client,
    old: &Credentials,
    key: Option<&SigningKey>,
) -> Result<Credentials, Refusal> {
    let Some(refresh_token) = &old.refresh_token else {
        return Err(Refusal::OAuth {
            error: "no refresh token".into(),
        });
    };
    let grant = Grant::Refresh(refresh_token);
    let mut new = request(
        http,
        &old.token_endpoint,
        &old.client,
        key,
        grant,
        &old.resource,
    )
    .await?;
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
        assert_eq!(expires_at(3600, now), now + 3600);
        assert_eq!(expires_at(u64::MAX, now), now + MAX_EXPIRES_IN);
        assert_eq!(expires_at(1, u64::MAX), u64::MAX);
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
