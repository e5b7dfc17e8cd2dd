//! Where to sign in: the server's protected resource metadata (RFC 9728) and its
//! authorization server's metadata (RFC 8414 / OpenID Connect discovery), in the order
//! the MCP authorization spec (2025-11-25) fixes, with the 2025-03-26 fallbacks.

use reqwest::Url;
use serde_json::Value;

use crate::auth::AuthError;
use crate::auth::oauth::MAX_TOKEN_RESPONSE_BYTES;
use crate::text::shown;

/// RFC 9728 metadata, as far as sign-in needs it.
#[derive(Debug, Clone)]
pub struct ResourceMetadata {
    /// The `resource` identifier, sent verbatim as RFC 8707 `resource`.
    pub resource: String,
    pub authorization_server: Url,
    pub scopes_supported: Vec<String>,
}

/// RFC 8414 metadata, as far as sign-in needs it.
#[derive(Debug, Clone)]
pub struct ServerMetadata {
    pub issuer: Option<String>,
    /// Where a human signs in, or why no human can sign in here (no endpoint, no
    /// `response_type=code`, no PKCE): a machine-to-machine authorization server still
    /// serves the grants that need none.
    pub authorization_endpoint: Result<Url, String>,
    pub token_endpoint: Url,
    pub registration_endpoint: Option<Url>,
    /// RFC 7009 token revocation, used by `edgar mcp logout`.
    pub revocation_endpoint: Option<Url>,
    pub auth_methods: Vec<String>,
    pub scopes_supported: Vec<String>,
    pub cimd_supported: bool,
    /// `authorization_response_iss_parameter_supported` (RFC 9207): the redirect must
    /// then name the issuer.
    pub iss_in_response: bool,
}

fn fail(msg: String) -> AuthError {
    AuthError::Discovery(msg)
}

/// Only https, or http on a loopback host (OAuth 2.1 §1.5; the suite runs on localhost).
pub fn check_url(url: &Url, what: &str) -> Result<(), AuthError> {
    let loopback = crate::net::is_loopback(url);
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(fail(format!(
            "refusing {what} {}: HTTPS is required except on loopback",
            shown(url.as_str())
        ))),
    }
}

/// A GET of JSON metadata: `Ok(None)` on a 4xx (try the next URL), an error on 5xx.
pub async fn get_json(http: &reqwest::Client, url: &Url) -> Result<Option<Value>, AuthError> {
    check_url(url, "metadata at")?;
    let mut response = http
        .get(url.clone())
        .header("accept", "application/json")
        .header("mcp-protocol-version", crate::mcp::protocol::PROTOCOL[0])
        .send()
        .await
        .map_err(|e| {
            fail(format!(
                "GET {}: {}",
                shown(url.as_str()),
                crate::net::request_error(&e)
            ))
        })?;
    let status = response.status();
    if status.is_client_error() || status.is_redirection() {
        return Ok(None);
    }
    if !status.is_success() {
        return Err(fail(format!(
            "GET {} answered HTTP {}",
            shown(url.as_str()),
            status.as_u16()
        )));
    }
    let mut body = Vec::new();
    while let Some(c) = response.chunk().await.map_err(|e| {
        fail(format!(
            "GET {}: {}",
            shown(url.as_str()),
            crate::net::request_error(&e)
        ))
    })? {
        if body.len() + c.len() > MAX_TOKEN_RESPONSE_BYTES {
            return Err(fail(format!(
                "{} is larger than 1 MiB",
                shown(url.as_str())
            )));
        }
        body.extend_from_slice(&c);
    }
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|_| fail(format!("{} is not JSON", shown(url.as_str()))))
}

/// `https://h/.well-known/NAME` + the URL's path (path insertion, RFC 8414 §3.1).
fn well_known(base: &Url, name: &str, with_path: bool) -> Url {
    let mut u = base.clone();
    let path = base.path().trim_end_matches('/');
    let path = if with_path && !path.is_empty() {
        format!("/.well-known/{name}{path}")
    } else {
        format!("/.well-known/{name}")
    };
    u.set_path(&path);
    u.set_query(None);
    u.set_fragment(None);
    u
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Scheme and host lowercased, one trailing slash dropped: how identifiers compare.
fn normal(s: &str) -> String {
    match Url::parse(s) {
        Ok(u) => u.as_str().trim_end_matches('/').to_owned(),
        Err(_) => s.trim_end_matches('/').to_owned(),
    }
}

/// The server's protected resource metadata: the challenge's URL if given, else the
/// path-inserted well-known URL, then the root one. `None` when the server has none
/// (a 2025-03-26 server).
pub async fn resource_metadata(
    http: &reqwest::Client,
    server: &Url,
    from_challenge: Option<&str>,
) -> Result<Option<ResourceMetadata>, AuthError> {
    let candidates: Vec<Url> = match from_challenge {
        Some(u) => {
            let u = Url::parse(u)
                .map_err(|_| fail(format!("resource_metadata {} is not a URL", shown(u))))?;
            vec![u]
        }
        None => {
            let mut c = Vec::new();
            if !server.path().trim_end_matches('/').is_empty() {
                c.push(well_known(server, "oauth-protected-resource", true));
            }
            c.push(well_known(server, "oauth-protected-resource", false));
            c
        }
    };
    for url in candidates {
        let Some(doc) = get_json(http, &url).await? else {
            continue;
        };
        let resource = doc
            .get("resource")
            .and_then(Value::as_str)
            .ok_or_else(|| fail(format!("{} has no resource", shown(url.as_str()))))?
            .to_owned();
        check_resource(server, &resource)?;
        let Some(first) = strings(&doc, "authorization_servers").into_iter().next() else {
            return Err(fail(format!(
                "{} names no authorization server",
                shown(url.as_str())
            )));
        };
        let authorization_server = Url::parse(&first).map_err(|_| {
            fail(format!(
                "authorization server {} is not a URL",
                shown(&first)
            ))
        })?;
        check_url(&authorization_server, "the authorization server")?;
        return Ok(Some(ResourceMetadata {
            resource,
            authorization_server,
            scopes_supported: strings(&doc, "scopes_supported"),
        }));
    }
    Ok(None)
}

/// The metadata must describe this server: the same origin, and a path that is the
/// server's or a prefix of it (RFC 9728 §3.3, read as the MCP SDKs do).
fn check_resource(server: &Url, resource: &str) -> Result<(), AuthError> {
    let refuse = || {
        fail(format!(
            "the server's metadata names resource {}, not {}; refusing to sign in",
            shown(resource),
            shown(server.as_str())
        ))
    };
    let r = Url::parse(resource).map_err(|_| refuse())?;
    if r.origin() != server.origin() {
        return Err(refuse());
    }
    let rp = r.path().trim_end_matches('/');
    let sp = server.path().trim_end_matches('/');
    if rp.is_empty() || sp == rp || sp.starts_with(&format!("{rp}/")) {
        Ok(())
    } else {
        Err(refuse())
    }
}

/// The authorization server's metadata, from the URLs the spec lists for an issuer with
/// or without a path; `issuer` must match. `None` when no URL has it.
pub async fn server_metadata(
    http: &reqwest::Client,
    issuer: &Url,
    strict: bool,
) -> Result<Option<ServerMetadata>, AuthError> {
    match metadata_document(http, issuer, strict).await? {
        Some((doc, named)) => parse_server_metadata(&doc, named).map(Some),
        None => Ok(None),
    }
}

/// The issuer's metadata document as served, with the issuer it names, from the first
/// well-known URL that has one (a team gateway reads `jwks_uri` from it).
pub async fn metadata_document(
    http: &reqwest::Client,
    issuer: &Url,
    strict: bool,
) -> Result<Option<(Value, Option<String>)>, AuthError> {
    let has_path = !issuer.path().trim_end_matches('/').is_empty();
    let mut urls = vec![well_known(issuer, "oauth-authorization-server", true)];
    urls.push(well_known(issuer, "openid-configuration", true));
    if has_path {
        let mut appended = issuer.clone();
        appended.set_path(&format!(
            "{}/.well-known/openid-configuration",
            issuer.path().trim_end_matches('/')
        ));
        urls.push(appended);
    }
    for url in urls {
        let Some(doc) = get_json(http, &url).await? else {
            continue;
        };
        let named = doc.get("issuer").and_then(Value::as_str).map(str::to_owned);
        if named.as_deref().map(normal) != Some(normal(issuer.as_str())) {
            let msg = format!(
                "the metadata at {} names issuer {}, not {}",
                shown(url.as_str()),
                shown(named.as_deref().unwrap_or("(none)")),
                shown(issuer.as_str())
            );
            if strict {
                return Err(fail(msg));
            }
            tracing::warn!("{msg}; accepted for a 2025-03-26 server");
        }
        return Ok(Some((doc, named)));
    }
    Ok(None)
}

fn parse_server_metadata(doc: &Value, issuer: Option<String>) -> Result<ServerMetadata, AuthError> {
    let endpoint = |key: &str| -> Result<Option<Url>, AuthError> {
        match doc.get(key).and_then(Value::as_str) {
            None => Ok(None),
            Some(s) => {
                let u =
                    Url::parse(s).map_err(|_| fail(format!("{key} {} is not a URL", shown(s))))?;
                check_url(&u, key)?;
                Ok(Some(u))
            }
        }
    };
    let methods = strings(doc, "code_challenge_methods_supported");
    let types = strings(doc, "response_types_supported");
    let authorization_endpoint = if !methods.iter().any(|m| m == "S256") {
        Err("the authorization server does not list S256 in code_challenge_methods_supported, so PKCE cannot be used; refusing to sign in".into())
    } else if !types.is_empty() && !types.iter().any(|t| t == "code") {
        Err("the authorization server does not support response_type=code".into())
    } else {
        endpoint("authorization_endpoint")?
            .ok_or_else(|| "the metadata has no authorization_endpoint".to_owned())
    };
    Ok(ServerMetadata {
        issuer,
        authorization_endpoint,
        token_endpoint: endpoint("token_endpoint")?
            .ok_or_else(|| fail("the metadata has no token_endpoint".into()))?,
        registration_endpoint: endpoint("registration_endpoint")?,
        revocation_endpoint: endpoint("revocation_endpoint")?,
        auth_methods: strings(doc, "token_endpoint_auth_methods_supported"),
        scopes_supported: strings(doc, "scopes_supported"),
        cimd_supported: doc
            .get("client_id_metadata_document_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        iss_in_response: doc
            .get("authorization_response_iss_parameter_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}

/// 2025-03-26 servers without any metadata: `/authorize`, `/token` and `/register` at
/// the server's origin.
pub fn default_endpoints(server: &Url) -> ServerMetadata {
    let at = |p: &str| {
        let mut u = server.clone();
        u.set_path(p);
        u.set_query(None);
        u.set_fragment(None);
        u
    };
    ServerMetadata {
        issuer: None,
        authorization_endpoint: Ok(at("/authorize")),
        token_endpoint: at("/token"),
        registration_endpoint: Some(at("/register")),
        revocation_endpoint: None,
        auth_methods: Vec::new(),
        scopes_supported: Vec::new(),
        cimd_supported: false,
        iss_in_response: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn well_known_urls_insert_the_path() {
        let s = url("https://h.example/public/mcp");
        assert_eq!(
            well_known(&s, "oauth-protected-resource", true).as_str(),
            "https://h.example/.well-known/oauth-protected-resource/public/mcp"
        );
        assert_eq!(
            well_known(&s, "oauth-protected-resource", false).as_str(),
            "https://h.example/.well-known/oauth-protected-resource"
        );
        let root = url("https://auth.example/");
        assert_eq!(
            well_known(&root, "oauth-authorization-server", true).as_str(),
            "https://auth.example/.well-known/oauth-authorization-server"
        );
    }

    #[test]
    fn resources_must_be_this_server() {
        let s = url("http://localhost:5/mcp");
        assert!(check_resource(&s, "http://localhost:5/mcp").is_ok());
        assert!(check_resource(&s, "http://localhost:5/mcp/").is_ok());
        assert!(check_resource(&s, "http://localhost:5").is_ok());
        assert!(check_resource(&s, "https://evil.example.com/mcp").is_err());
        assert!(check_resource(&s, "http://localhost:5/other").is_err());
        assert!(check_resource(&s, "http://localhost:6/mcp").is_err());
    }

    #[test]
    fn only_https_or_loopback() {
        assert!(check_url(&url("https://a.example/x"), "x").is_ok());
        assert!(check_url(&url("http://127.0.0.1:9/x"), "x").is_ok());
        assert!(check_url(&url("http://localhost:9/x"), "x").is_ok());
        assert!(check_url(&url("http://a.example/x"), "x").is_err());
        assert!(check_url(&url("file:///etc/passwd"), "x").is_err());
    }

    #[test]
    fn pkce_support_is_required() {
        let doc = serde_json::json!({"authorization_endpoint": "https://a/authorize",
            "token_endpoint": "https://a/token"});
        // Without PKCE no human signs in there; a grant without a human still could.
        let meta = parse_server_metadata(&doc, None).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            meta.authorization_endpoint
                .is_err_and(|e| e.contains("PKCE"))
        );
        let doc = serde_json::json!({"authorization_endpoint": "https://a/authorize",
            "token_endpoint": "https://a/token", "code_challenge_methods_supported": ["S256"]});
        let meta = parse_server_metadata(&doc, None).unwrap_or_else(|e| panic!("{e}"));
        assert!(meta.authorization_endpoint.is_ok());
    }
}
