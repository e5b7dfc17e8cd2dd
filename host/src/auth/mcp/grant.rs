//! Tokens without a human: the client credentials grant (a client secret, or a JWT
//! signed with the client's private key, RFC 7523 §2.2) and cross-app access (SEP-990:
//! an ID token exchanged at the organisation's identity provider for an ID-JAG, RFC
//! 8693, and that at the server's authorization server for its token, RFC 7523 §2.1).
//! Neither has a refresh token to keep: a token that expires is fetched again.

use std::path::Path;

use serde_json::Value;

use super::token::{self, Client, Credentials, Refusal};
use crate::auth::assertion::SigningKey;
use crate::auth::{AuthError, Secret};
use crate::config::{Grant, IdToken, OAuthClient};
use crate::text::shown;

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const ID_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:id_token";
const ID_JAG_TYPE: &str = "urn:ietf:params:oauth:token-type:id-jag";
/// Largest private key file read.
const MAX_KEY_BYTES: u64 = 64 << 10;

/// Where a token is asked for, as discovered (or remembered from the last token).
pub struct Target<'a> {
    pub token_endpoint: &'a str,
    /// The authorization server's issuer: the audience of assertions and of the ID-JAG.
    pub issuer: Option<&'a str>,
    /// Token endpoint authentication methods the server lists.
    pub auth_methods: &'a [String],
    pub resource: &'a str,
    pub scope: Option<&'a str>,
}

impl Target<'_> {
    fn audience(&self) -> &str {
        self.issuer.unwrap_or(self.token_endpoint)
    }
}

/// A token by `cfg`'s unattended grant; `key` is the client's private key when it
/// authenticates with one (read by the caller from its file or the credential store).
pub async fn fetch(
    http: &reqwest::Client,
    cfg: &OAuthClient,
    key: Option<&SigningKey>,
    target: &Target<'_>,
) -> Result<Credentials, Refusal> {
    match cfg.grant {
        Grant::ClientCredentials => client_credentials(http, cfg, key, target).await,
        Grant::CrossAppAccess => cross_app_access(http, cfg, key, target).await,
        Grant::AuthorizationCode => Err(Refusal::Failed(AuthError::Config(
            "this server is signed in to by a human (`edgar mcp login`)".into(),
        ))),
        Grant::TokenExchange | Grant::UserSignIn => Err(Refusal::Failed(AuthError::Config(
            "this server is signed in to per user, through a team gateway".into(),
        ))),
    }
}

fn client_id(cfg: &OAuthClient) -> Result<String, Refusal> {
    cfg.client_id
        .clone()
        .ok_or_else(|| Refusal::Failed(AuthError::Config("no client_id is configured".into())))
}

async fn client_credentials(
    http: &reqwest::Client,
    cfg: &OAuthClient,
    key: Option<&SigningKey>,
    target: &Target<'_>,
) -> Result<Credentials, Refusal> {
    let client = configured_client(cfg, key, target)?;
    let grant = token::Grant::ClientCredentials {
        scope: target.scope,
    };
    token::request(
        http,
        target.token_endpoint,
        &client,
        key,
        grant,
        target.resource,
    )
    .await
}

/// The configured client at this authorization server: `private_key_jwt` when it has
/// a key, else its secret by a method the server accepts.
fn configured_client(
    cfg: &OAuthClient,
    key: Option<&SigningKey>,
    target: &Target<'_>,
) -> Result<Client, Refusal> {
    let (secret, method) = match key {
        Some(_) => (None, "private_key_jwt".to_owned()),
        None => (
            cfg.client_secret.clone(),
            token::auth_method(None, target.auth_methods, cfg.client_secret.is_some()),
        ),
    };
    Ok(Client {
        id: client_id(cfg)?,
        secret,
        method,
        issuer: target.issuer.map(str::to_owned),
    })
}

async fn cross_app_access(
    http: &reqwest::Client,
    cfg: &OAuthClient,
    key: Option<&SigningKey>,
    target: &Target<'_>,
) -> Result<Credentials, Refusal> {
    let Some(idp) = &cfg.identity else {
        return Err(Refusal::Failed(AuthError::Config(
            "cross_app_access needs an identity provider".into(),
        )));
    };
    let id_token = match &idp.id_token {
        IdToken::Given(t) => t.clone(),
        IdToken::Command(line) => {
            let argv: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
            crate::auth::keys::secret_command(&argv)
                .await
                .map_err(|why| {
                    Refusal::Failed(AuthError::Config(format!("id_token_command failed: {why}")))
                })?
        }
    };
    // 1. At the identity provider: the ID token for an ID-JAG naming this
    //    authorization server and this resource.
    let mut form = vec![
        ("grant_type", TOKEN_EXCHANGE.to_owned()),
        ("requested_token_type", ID_JAG_TYPE.to_owned()),
        ("subject_token", id_token.expose().to_owned()),
        ("subject_token_type", ID_TOKEN_TYPE.to_owned()),
        ("audience", target.audience().to_owned()),
        ("resource", target.resource.to_owned()),
    ];
    if let Some(s) = target.scope {
        form.push(("scope", s.to_owned()));
    }
    let idp_client = Client {
        id: idp.client_id.clone(),
        secret: idp.client_secret.clone(),
        method: if idp.client_secret.is_some() {
            "client_secret_basic".into()
        } else {
            "none".into()
        },
        issuer: None,
    };
    let jag = exchange(http, &idp.token_endpoint, &idp_client, form).await?;
    // 2. At the authorization server: the ID-JAG for the server's token.
    let mut form = vec![
        ("grant_type", JWT_BEARER.to_owned()),
        ("assertion", jag.expose().to_owned()),
    ];
    if let Some(s) = target.scope {
        form.push(("scope", s.to_owned()));
    }
    let client = configured_client(cfg, key, target)?;
    token::request_form(
        http,
        target.token_endpoint,
        &client,
        key,
        form,
        target.resource,
    )
    .await
}

/// An RFC 8693 token exchange for an ID-JAG: the issued token, which is not a bearer
/// token and is used once, at once.
async fn exchange(
    http: &reqwest::Client,
    endpoint: &str,
    client: &Client,
    form: Vec<(&'static str, String)>,
) -> Result<Secret, Refusal> {
    let json = token::post_form(http, endpoint, client, form, "the identity provider")
        .await
        .map_err(|r| match r {
            Refusal::OAuth { error } => Refusal::OAuth {
                error: format!("the identity provider: {error}"),
            },
            other => other,
        })?;
    let issued = json.get("issued_token_type").and_then(Value::as_str);
    if issued != Some(ID_JAG_TYPE) {
        return Err(Refusal::Failed(AuthError::Token(format!(
            "the identity provider issued {} instead of an ID-JAG",
            shown(issued.unwrap_or("nothing typed"))
        ))));
    }
    json.get("access_token")
        .and_then(Value::as_str)
        .map(Secret::new)
        .ok_or_else(|| {
            Refusal::Failed(AuthError::Token(
                "the identity provider's answer has no access_token".into(),
            ))
        })
}

/// The client's private key from its file, read when a token is needed (not kept in
/// memory).
pub async fn read_key(path: &Path) -> Result<SigningKey, AuthError> {
    let path = path.to_owned();
    let text = tokio::task::spawn_blocking(move || -> Result<String, String> {
        use std::io::Read as _;
        let file = std::fs::File::open(&path)
            .map_err(|e| format!("cannot open the private key file {}: {e}", path.display()))?;
        let mut text = String::new();
        file.take(MAX_KEY_BYTES)
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read the private key file {}: {e}", path.display()))?;
        Ok(text)
    })
    .await
    .map_err(|e| AuthError::Config(e.to_string()))?
    .map_err(AuthError::Config)?;
    SigningKey::from_pem(&text)
}
