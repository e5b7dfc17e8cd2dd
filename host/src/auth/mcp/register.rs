//! Dynamic client registration (RFC 7591): edgar registers itself as a native public
//! client with its loopback redirect URI, asking for refresh tokens too.

use reqwest::Url;
use serde_json::{Value, json};

use super::token::Client;
use crate::auth::AuthError;
use crate::auth::oauth::MAX_TOKEN_RESPONSE_BYTES;
use crate::text::shown;

/// The name edgar registers under.
pub const CLIENT: &str = "edgar";

pub async fn register(
    http: &reqwest::Client,
    endpoint: &Url,
    redirect_uri: &str,
    scope: Option<&str>,
    issuer: Option<String>,
    supported_methods: &[String],
) -> Result<Client, AuthError> {
    let fail = |m: String| {
        AuthError::Discovery(format!(
            "registering with the authorization server failed: {m}"
        ))
    };
    let mut body = json!({
        "client_name": CLIENT,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "native",
    });
    if let Some(s) = scope {
        body["scope"] = json!(s);
    }
    let mut response = http
        .post(endpoint.clone())
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| fail(crate::net::request_error(&e)))?;
    let status = response.status();
    let mut bytes = Vec::new();
    while let Some(c) = response
        .chunk()
        .await
        .map_err(|e| fail(crate::net::request_error(&e)))?
    {
        if bytes.len() + c.len() > MAX_TOKEN_RESPONSE_BYTES {
            return Err(fail("the answer is larger than 1 MiB".into()));
        }
        bytes.extend_from_slice(&c);
    }
    let doc: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if !status.is_success() {
        let why = doc
            .get("error")
            .and_then(Value::as_str)
            .map(shown)
            .unwrap_or_else(|| format!("HTTP {}", status.as_u16()));
        return Err(fail(why));
    }
    let Some(id) = doc.get("client_id").and_then(Value::as_str) else {
        return Err(fail("the answer has no client_id".into()));
    };
    let secret = doc
        .get("client_secret")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let registered = doc
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str);
    let method = super::token::auth_method(registered, supported_methods, secret.is_some());
    Ok(Client {
        id: id.to_owned(),
        secret,
        method,
        issuer,
    })
}
