//! What one HTTP request carries and what its status means: the process's client (no
//! redirect off the origin), config and per-request headers, the sign-in's bearer and
//! its retries, and each failure status turned into an error for that request alone.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::auth::Secret;
use crate::auth::bearer::Subject;
use crate::mcp::connection::Outbound;
use crate::text::shown;

use super::wire::Reply;
use super::{Authorizer, Challenge};

/// Tries of one message when the server keeps refusing its token.
pub(super) const MAX_AUTH_RETRIES: usize = 3;

/// The process's HTTP client for MCP servers, built the first time one is used.
pub(crate) fn client() -> Result<&'static reqwest::Client, String> {
    static CLIENT: std::sync::OnceLock<Result<reqwest::Client, String>> =
        std::sync::OnceLock::new();
    CLIENT
        .get_or_init(|| {
            crate::auth::oauth::client_builder()
                .redirect(same_origin_redirects())
                .connect_timeout(Duration::from_secs(10))
                .build()
                .map_err(|e| format!("cannot build the HTTP client: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Follows at most five redirects, all within the first request's origin; any other
/// redirect comes back as the 3xx response and is reported.
pub(super) fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if same && attempt.previous().len() <= 5 {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

/// Validated config headers. Values may be secrets: errors name the header only.
pub(crate) fn header_map(headers: &BTreeMap<String, String>) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("header name {} is not valid", shown(k)))?;
        let mut value = HeaderValue::from_str(v)
            .map_err(|_| format!("the value of header {} is not valid", shown(k)))?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    Ok(map)
}

/// Parses and checks a server URL: http or https only.
pub(crate) fn server_url(url: &str) -> Result<Url, String> {
    let parsed =
        Url::parse(url).map_err(|e| format!("its URL {} is not valid: {e}", shown(url)))?;
    match parsed.scheme() {
        "http" | "https" => Ok(parsed),
        other => Err(format!(
            "its URL uses {}; only http and https work",
            shown(other)
        )),
    }
}

/// The `Authorization` header (marked sensitive, so it never shows in `Debug`) and the
/// token in it, when the server has a sign-in with a token.
pub(super) async fn bearer(
    auth: Option<&Arc<dyn Authorizer>>,
    subject: Option<&Subject>,
) -> Option<(HeaderValue, Secret)> {
    let token = auth?.bearer_for(subject).await?;
    let mut header = HeaderValue::from_str(&format!("Bearer {}", token.expose())).ok()?;
    header.set_sensitive(true);
    Some((header, token))
}

/// Sends the request `make` builds with the server's bearer token, if it has a sign-in.
/// A 401 (or a 403 asking for more scope) goes to the authorizer, and the request is
/// built and sent again while it says a new token is worth a try, at most
/// [`MAX_AUTH_RETRIES`] times. Any other answer is returned as it is.
pub(super) async fn send_with_auth(
    auth: Option<&Arc<dyn Authorizer>>,
    subject: Option<&Subject>,
    make: impl Fn() -> reqwest::RequestBuilder,
) -> Result<reqwest::Response, Reply> {
    let mut tries = 0;
    loop {
        let mut request = make();
        let mut sent = None;
        if let Some((header, token)) = bearer(auth, subject).await {
            request = request.header("authorization", header);
            sent = Some(token);
        }
        let response = request
            .send()
            .await
            .map_err(|e| Reply::Failed(connect_error(&e)))?;
        if let Some(auth) = auth
            && tries < MAX_AUTH_RETRIES
            && let Err(Reply::NeedsLogin(challenge)) = check_status(&response)
        {
            tries += 1;
            if auth
                .refused_for(
                    subject,
                    response.status().as_u16(),
                    challenge.as_ref(),
                    sent.as_ref(),
                )
                .await
            {
                continue;
            }
        }
        return Ok(response);
    }
}

/// A 3xx, 4xx or 5xx as a failure (401 and 403 with their challenge).
/// The stateless era's request headers: the version the body's `_meta` names, the
/// method, and for `tools/call`, `prompts/get` and `resources/read` the name or URI
/// (base64 in the spec's sentinel when it is not plain visible ASCII). No session.
pub(super) fn stateless_headers(
    post: reqwest::RequestBuilder,
    version: &str,
    message: &Outbound,
) -> reqwest::RequestBuilder {
    let mut post = post.header("mcp-protocol-version", version);
    if let Some(method) = &message.method {
        post = post.header("mcp-method", header_value(method));
    }
    if let Some(name) = &message.name {
        post = post.header("mcp-name", header_value(name));
    }
    for (name, value) in &message.param_headers {
        if let Ok(name) = HeaderName::from_bytes(format!("mcp-param-{name}").as_bytes()) {
            post = post.header(name, header_value(value));
        }
    }
    post
}

/// The `Mcp-Param-*` headers of a `tools/call` (MCP 2026-07-28, Custom Headers): for each
/// property `schema` marks with `x-mcp-header` (reached through `properties` alone, as
/// the guard checked), the argument at that path, as text; absent and null values, and
/// anything but a string, a safe integer or a boolean, give no header.
pub(crate) fn param_headers(schema: &Value, arguments: &Value) -> Vec<(String, String)> {
    const SAFE: i64 = (1 << 53) - 1;
    let mut out = Vec::new();
    let mut stack = vec![(schema, arguments)];
    while let Some((schema, args)) = stack.pop() {
        let Some(props) = schema.get("properties").and_then(Value::as_object) else {
            continue;
        };
        for (key, prop) in props {
            let value = args.get(key);
            if let Some(header) = prop.get("x-mcp-header").and_then(Value::as_str) {
                let text = match value {
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(Value::Bool(b)) => Some(b.to_string()),
                    Some(Value::Number(n)) => n
                        .as_i64()
                        .filter(|i| (-SAFE..=SAFE).contains(i))
                        .map(|i| i.to_string()),
                    _ => None,
                };
                if let Some(text) = text {
                    out.push((header.to_owned(), text));
                }
            }
            if let Some(v) = value.filter(|v| v.is_object()) {
                stack.push((prop, v));
            }
        }
    }
    out
}

/// A value as an HTTP header: as is when it is visible ASCII (and spaces inside),
/// else `=?base64?…?=` (MCP 2026-07-28, Streamable HTTP, Value Encoding).
pub(super) fn header_value(value: &str) -> HeaderValue {
    use base64::Engine as _;
    let sentinel = value.starts_with("=?base64?") && value.ends_with("?=");
    let plain = !value.is_empty()
        && value.bytes().all(|b| b == b' ' || b.is_ascii_graphic())
        && !value.starts_with(' ')
        && !value.ends_with(' ')
        && !sentinel;
    let text = if plain {
        value.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        )
    };
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

pub(super) fn check_status(response: &reqwest::Response) -> Result<(), Reply> {
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let challenge = || {
        Challenge::parse(
            response
                .headers()
                .get_all("www-authenticate")
                .iter()
                .filter_map(|v| v.to_str().ok()),
        )
    };
    match status.as_u16() {
        401 => Err(Reply::NeedsLogin(challenge())),
        403 => match challenge() {
            Some(c) if c.insufficient_scope() => Err(Reply::NeedsLogin(Some(c))),
            _ => Err(Reply::Status {
                status: 403,
                reason: "it refused the request (HTTP 403 Forbidden)".into(),
            }),
        },
        s if status.is_redirection() => {
            let to = response
                .headers()
                .get("location")
                .and_then(|l| l.to_str().ok())
                .unwrap_or("(nowhere)");
            Err(Reply::Status {
                status: s,
                reason: format!(
                    "it redirected (HTTP {s}) to {}; edgar follows redirects only within the server's origin",
                    shown(&crate::redact::url(to))
                ),
            })
        }
        s => Err(Reply::Status {
            status: s,
            reason: format!(
                "HTTP {s} {}",
                status.canonical_reason().unwrap_or("(unknown status)")
            ),
        }),
    }
}

/// A connection failure, without the URL (it may carry a secret query).
pub(crate) fn connect_error(e: &reqwest::Error) -> String {
    format!("cannot reach it: {}", crate::net::request_error(e))
}
