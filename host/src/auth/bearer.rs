//! What an HTTP transport asks of sign-in: an [`Authorizer`] that supplies a bearer
//! token and decides what a refusal means, and the `Bearer` [`Challenge`] of a
//! `WWW-Authenticate` header (RFC 6750 §3, RFC 9110 §11.6.1) that comes with a refusal.
//! Parameters come in any order, quoted or bare; other schemes in the same header are
//! skipped. Sign-in implements the first (`auth::mcp::McpAuth`); the transports only
//! call it, so sign-in never depends on them.

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

use super::Secret;

tokio::task_local! {
    /// The user a team gateway's request runs as, with the token they brought: set
    /// around the request, recorded on each message sent for it, and read only by a
    /// per-user sign-in (`auth::mcp::exchange`), which exchanges it and never sends it on.
    pub static SUBJECT: Subject;
}

/// A team gateway's user and their inbound access token. Never shown by `Debug`.
#[derive(Clone)]
pub struct Subject {
    pub sub: String,
    pub token: std::sync::Arc<Secret>,
}

impl std::fmt::Debug for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subject")
            .field("sub", &self.sub)
            .finish_non_exhaustive()
    }
}

/// Supplies one server's bearer token and decides what a refusal means; implemented by
/// the sign-in layer (`auth::mcp::McpAuth`). The transport never stores a token.
pub trait Authorizer: Send + Sync + 'static {
    /// The token to send now (refreshed first if it is about to expire), if any.
    fn bearer(&self) -> Pin<Box<dyn Future<Output = Option<Secret>> + Send + '_>>;

    /// The token to send for a message sent on `subject`'s behalf (a team gateway's
    /// user); a sign-in shared by everyone ignores who.
    fn bearer_for<'a>(
        &'a self,
        subject: Option<&'a Subject>,
    ) -> Pin<Box<dyn Future<Output = Option<Secret>> + Send + 'a>> {
        let _ = subject;
        self.bearer()
    }
    /// The server answered `status` (401, or 403 with `insufficient_scope`) to a request
    /// sent with `sent`: `true` when a new token makes a retry worthwhile.
    fn refused<'a>(
        &'a self,
        status: u16,
        challenge: Option<&'a Challenge>,
        sent: Option<&'a Secret>,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>>;

    /// [`Authorizer::refused`] for a message sent on `subject`'s behalf; a sign-in
    /// shared by everyone ignores who.
    fn refused_for<'a>(
        &'a self,
        subject: Option<&'a Subject>,
        status: u16,
        challenge: Option<&'a Challenge>,
        sent: Option<&'a Secret>,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        let _ = subject;
        self.refused(status, challenge, sent)
    }
}

/// What the server's challenge asks for. Nothing here is secret.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    /// RFC 9728 protected resource metadata URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_metadata: Option<String>,
    /// Space-separated scopes the request needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// `invalid_token`, `insufficient_scope`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_description: Option<String>,
}

/// Longest header value parsed; longer ones are cut (they are hostile or broken).
const MAX_HEADER: usize = 8 << 10;

impl Challenge {
    /// The `Bearer` challenge among the header values, if there is one. A value with no
    /// scheme but only parameters is read as bearer too (some servers send that).
    pub fn parse<'a>(values: impl IntoIterator<Item = &'a str>) -> Option<Challenge> {
        for value in values {
            let value = &value[..floor_char_boundary(value, MAX_HEADER)];
            for (scheme, params) in challenges(value) {
                if scheme.eq_ignore_ascii_case("bearer") {
                    return Some(Challenge::from_params(params));
                }
            }
        }
        None
    }

    fn from_params(params: Vec<(String, String)>) -> Challenge {
        let mut c = Challenge::default();
        for (k, v) in params {
            let slot = match k.to_ascii_lowercase().as_str() {
                "resource_metadata" => &mut c.resource_metadata,
                "scope" => &mut c.scope,
                "error" => &mut c.error,
                "error_description" => &mut c.error_description,
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(v);
            }
        }
        c
    }

    /// The server wants more scopes than the token has.
    pub fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

fn floor_char_boundary(s: &str, max: usize) -> usize {
    if s.len() <= max {
        return s.len();
    }
    (0..=max)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0)
}

/// Splits a header value into `(scheme, params)` challenges. Items are separated by
/// commas outside quotes; an item `scheme [token68 | param]` opens a challenge, an
/// item `name=value` adds a parameter to the open one.
fn challenges(value: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut out: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for item in split_items(value) {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        if let Some((name, value)) = param(item) {
            if out.is_empty() {
                out.push(("Bearer".into(), Vec::new()));
            }
            if let Some(last) = out.last_mut() {
                last.1.push((name, value));
            }
            continue;
        }
        let (scheme, rest) = item.split_once([' ', '\t']).unwrap_or((item, ""));
        let mut params = Vec::new();
        if let Some(p) = param(rest.trim()) {
            params.push(p);
        }
        out.push((scheme.to_owned(), params));
    }
    out
}

/// `name = value` (value quoted or a token), or `None`.
fn param(item: &str) -> Option<(String, String)> {
    let (name, value) = item.split_once('=')?;
    let name = name.trim();
    let value = value.trim_start();
    if name.is_empty() || name.contains([' ', '\t', '"']) || value.starts_with('=') {
        return None;
    }
    Some((name.to_owned(), read_value(value)))
}

/// Splits at commas that are not inside a quoted string.
fn split_items(value: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in value.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                items.push(&value[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&value[start..]);
    items
}

/// A quoted-string (with `\\` escapes) or a bare token.
fn read_value(s: &str) -> String {
    let Some(body) = s.strip_prefix('"') else {
        return s.trim_end().to_owned();
    };
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            '"' => break,
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// `value` as an RFC 9110 quoted-string.
    fn quote(value: &str) -> String {
        let mut out = String::from('"');
        for c in value.chars() {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
        out
    }

    proptest! {
        /// A `Bearer` challenge however a server writes it (parameters in any order,
        /// any letter case, quoted with escapes or bare, spaces around `=`, after
        /// another scheme's challenge, unknown parameters beside) reads back to its
        /// values; and no header value, however broken, panics the parser.
        #[test]
        fn a_bearer_challenge_reads_back_however_it_is_written(
            values in proptest::collection::vec(proptest::option::of("[ -~]{0,40}"), 4),
            order in Just(vec![0usize, 1, 2, 3]).prop_shuffle(),
            bare in any::<[bool; 4]>(),
            upper in any::<[bool; 4]>(),
            spaced in any::<bool>(),
            before in prop_oneof![Just(""), Just("Basic realm=\"a, b\", "), Just("DPoP algs=\"ES256\", "), Just("Negotiate abc==, ")],
            scheme in prop_oneof![Just("Bearer"), Just("bearer"), Just("BEARER")],
            extra in proptest::option::of("[a-z_]{1,8}"),
        ) {
            let names = ["resource_metadata", "scope", "error", "error_description"];
            let mut params = Vec::new();
            for i in order {
                let Some(value) = &values[i] else { continue };
                let name = if upper[i] { names[i].to_ascii_uppercase() } else { names[i].to_owned() };
                // A bare token cannot be empty or hold separators.
                let token = !value.is_empty()
                    && value.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~+/:".contains(&b));
                let written = if bare[i] && token { value.clone() } else { quote(value) };
                let eq = if spaced { " = " } else { "=" };
                params.push(format!("{name}{eq}{written}"));
            }
            if let Some(extra) = &extra && !names.contains(&extra.as_str()) {
                params.push(format!("{extra}=\"x, y\""));
            }
            let header = format!("{before}{scheme} {}", params.join(", "));
            let read = Challenge::parse([header.as_str()]);
            let expected = Challenge {
                resource_metadata: values[0].clone(),
                scope: values[1].clone(),
                error: values[2].clone(),
                error_description: values[3].clone(),
            };
            prop_assert_eq!(read, Some(expected), "{}", header);
        }

        #[test]
        fn no_header_value_panics_the_parser(value in any::<String>()) {
            let _ = Challenge::parse([value.as_str()]);
        }
    }

    #[test]
    fn the_suites_headers() {
        let c = Challenge::parse([
            r#"Bearer error="invalid_token", error_description="Missing Authorization header", resource_metadata="http://localhost:5/.well-known/oauth-protected-resource/mcp""#,
        ])
        .unwrap_or_default();
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("http://localhost:5/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(
            c.error_description.as_deref(),
            Some("Missing Authorization header")
        );
        let c = Challenge::parse([
            r#"Bearer scope="mcp:basic mcp:write", resource_metadata="http://h/x", error="insufficient_scope""#,
        ])
        .unwrap_or_default();
        assert_eq!(c.scope.as_deref(), Some("mcp:basic mcp:write"));
        assert!(c.insufficient_scope());
    }

    #[test]
    fn other_schemes_bare_values_and_escapes() {
        let c = Challenge::parse([r#"Basic realm="x", Bearer scope=read, error="a\"b,c""#])
            .unwrap_or_default();
        assert_eq!(c.scope.as_deref(), Some("read"));
        assert_eq!(c.error.as_deref(), Some("a\"b,c"));
        let c = Challenge::parse(["DPoP algs=\"ES256\"", "bearer realm=api"]);
        assert_eq!(c, Some(Challenge::default()));
        assert_eq!(Challenge::parse(["Basic abc=="]), None);
        assert_eq!(
            Challenge::parse(["Basic abc==, Bearer scope=\"s\""]).and_then(|c| c.scope),
            Some("s".into())
        );
        assert_eq!(Challenge::parse(["Bearer"]), Some(Challenge::default()));
        assert_eq!(Challenge::parse([""]), None);
        // Unterminated quotes and huge headers end, they do not panic.
        let _ = Challenge::parse(["Bearer scope=\"unterminated"]);
        let huge = format!("Bearer scope=\"{}\"", "é".repeat(20_000));
        assert!(Challenge::parse([huge.as_str()]).is_some());
    }
}
