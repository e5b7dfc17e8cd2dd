//! The stateless era over HTTP: a request whose `MCP-Protocol-Version` header names any
//! version but the handshake era's is checked as its transport says before it runs (the
//! `_meta` envelope, the routing headers `Mcp-Method` and `Mcp-Name` matching the body,
//! a version edgar speaks), the methods that era removed are not found, and every
//! JSON-RPC error goes out with the HTTP status its code calls for.

use base64::Engine;
use hyper::StatusCode;
use hyper::header::HeaderMap;
use serde_json::Value;

use crate::mcp::protocol::{
    self, INVALID_PARAMS, META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, METHOD_NOT_FOUND,
    MODERN, PROTOCOL, UNSUPPORTED_PROTOCOL_VERSION,
};

/// JSON-RPC "header mismatch": a routing header disagrees with the body.
pub const HEADER_MISMATCH: i64 = -32020;

/// Methods of the handshake era the stateless one removed.
const REMOVED: &[&str] = &[
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// The routing headers of one request, read before its body is.
pub struct Routing {
    version: String,
    method: Option<String>,
    name: Option<String>,
    /// A routing header sent more than once.
    twice: Option<&'static str>,
    /// `Mcp-Param-*` headers: the name after the prefix (lowercased), the value as sent.
    params: Vec<(String, String)>,
}

/// Why a request is refused before it runs: its JSON-RPC error.
#[derive(Debug, PartialEq)]
pub struct Refusal {
    pub code: i64,
    pub message: String,
}

impl Routing {
    /// The request's routing, if it speaks the stateless era (a version header naming no
    /// handshake version: an unknown one is refused by [`Routing::check`]).
    pub fn of(headers: &HeaderMap) -> Option<Routing> {
        let one = |name: &str| {
            headers
                .get(name)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        };
        let version = one("mcp-protocol-version")?;
        if PROTOCOL.contains(&version.as_str()) {
            return None;
        }
        let twice = ["mcp-protocol-version", "mcp-method", "mcp-name"]
            .into_iter()
            .find(|name| headers.get_all(*name).iter().count() > 1);
        let params = headers
            .iter()
            .filter_map(|(name, value)| {
                let param = name.as_str().strip_prefix("mcp-param-")?;
                Some((
                    param.to_owned(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                ))
            })
            .collect();
        Some(Routing {
            version,
            method: one("mcp-method"),
            name: one("mcp-name"),
            twice,
            params,
        })
    }

    /// A `tools/call`'s `Mcp-Param-*` headers against `expected` (each header a tool's
    /// `x-mcp-header` names and the argument's value as text): every argument the
    /// schema marks must come with its header, carrying that value, literally or as
    /// `=?base64?...?=` of valid, padded base64.
    pub fn check_params(&self, expected: &[(String, String)]) -> Result<(), Refusal> {
        for (header, value) in expected {
            let sent = self
                .params
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(header));
            let Some((_, sent)) = sent else {
                return Err(Refusal {
                    code: HEADER_MISMATCH,
                    message: format!("the Mcp-Param-{header} header is missing"),
                });
            };
            match param_value(sent) {
                Some(v) if v == *value => {}
                Some(_) => {
                    return Err(Refusal {
                        code: HEADER_MISMATCH,
                        message: format!(
                            "the Mcp-Param-{header} header does not match the argument"
                        ),
                    });
                }
                None => {
                    return Err(Refusal {
                        code: HEADER_MISMATCH,
                        message: format!("the Mcp-Param-{header} header is not valid base64"),
                    });
                }
            }
        }
        Ok(())
    }

    /// The transport's checks, in its order (the first failure wins): the envelope,
    /// the headers against the body, the version; then the removed methods.
    pub fn check(&self, method: &str, params: &Value) -> Result<(), Refusal> {
        let refuse = |code, message: String| Err(Refusal { code, message });
        let meta = params.get("_meta").filter(|m| m.is_object());
        let Some(meta) = meta else {
            return refuse(
                INVALID_PARAMS,
                format!(
                    "params._meta must carry {META_PROTOCOL_VERSION} and {META_CLIENT_CAPABILITIES}"
                ),
            );
        };
        let missing: Vec<&str> = [META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES]
            .into_iter()
            .filter(|k| meta.get(*k).is_none())
            .collect();
        if !missing.is_empty() {
            return refuse(
                INVALID_PARAMS,
                format!("params._meta lacks {}", missing.join(" and ")),
            );
        }
        if let Some(name) = self.twice {
            return refuse(
                HEADER_MISMATCH,
                format!("the {name} header appears more than once"),
            );
        }
        let version = meta.get(META_PROTOCOL_VERSION).and_then(Value::as_str);
        if version != Some(self.version.as_str()) {
            return refuse(
                HEADER_MISMATCH,
                "the MCP-Protocol-Version header does not match params._meta".into(),
            );
        }
        if self.method.as_deref() != Some(method) {
            return refuse(
                HEADER_MISMATCH,
                "the Mcp-Method header does not match the request's method".into(),
            );
        }
        let named = match method {
            "tools/call" | "prompts/get" => params.get("name"),
            "resources/read" => params.get("uri"),
            "tasks/get" | "tasks/update" | "tasks/cancel" => params.get("taskId"),
            _ => None,
        };
        if let Some(named) = named.and_then(Value::as_str)
            && self.name.as_deref().map(decoded).as_deref() != Some(named)
        {
            return refuse(
                HEADER_MISMATCH,
                "the Mcp-Name header does not match the request's name".into(),
            );
        }
        if !MODERN.contains(&self.version.as_str()) {
            return refuse(UNSUPPORTED_PROTOCOL_VERSION, self.version.clone());
        }
        if REMOVED.contains(&method) {
            return refuse(
                METHOD_NOT_FOUND,
                format!("{method} is not part of protocol version {}", self.version),
            );
        }
        Ok(())
    }
}

impl Refusal {
    /// The error response to request `id`.
    pub fn reply(&self, id: &Value) -> Vec<u8> {
        if self.code == UNSUPPORTED_PROTOCOL_VERSION {
            let mut supported: Vec<&str> = MODERN.to_vec();
            supported.extend_from_slice(PROTOCOL);
            return protocol::unsupported_version(id, &self.message, &supported);
        }
        protocol::error_response(id, self.code, &self.message)
    }
}

/// An `Mcp-Param-*` value: literal, or what its `=?base64?...?=` form encodes (`None`
/// when that is not valid, padded base64 of UTF-8).
fn param_value(value: &str) -> Option<String> {
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(b) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .ok()
            .and_then(|b| String::from_utf8(b).ok()),
        None => Some(value.to_owned()),
    }
}

/// A header value as sent, or what its `=?base64?...?=` form encodes.
fn decoded(value: &str) -> String {
    value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_else(|| value.to_owned())
}

/// The HTTP status a JSON-RPC error code goes out with in this era.
pub fn status(code: i64) -> StatusCode {
    match code {
        -32700
        | -32600
        | INVALID_PARAMS
        | HEADER_MISMATCH
        | UNSUPPORTED_PROTOCOL_VERSION
        | -32021 => StatusCode::BAD_REQUEST,
        METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// The error code of a JSON-RPC response, if it is a (small) error response.
pub fn error_code(reply: &[u8]) -> Option<i64> {
    #[derive(serde::Deserialize)]
    struct Envelope {
        error: Option<Code>,
    }
    #[derive(serde::Deserialize)]
    struct Code {
        code: i64,
    }
    // An error is small; a large answer is a result, not read again.
    if reply.len() > 16 << 10 {
        return None;
    }
    serde_json::from_slice::<Envelope>(reply)
        .ok()?
        .error
        .map(|e| e.code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;
    use serde_json::json;

    fn routing(pairs: &[(&'static str, &str)]) -> Option<Routing> {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                *k,
                HeaderValue::from_str(v).unwrap_or_else(|e| panic!("{e}")),
            );
        }
        Routing::of(&h)
    }

    fn meta(version: &str) -> Value {
        json!({META_PROTOCOL_VERSION: version, META_CLIENT_CAPABILITIES: {}})
    }

    #[test]
    fn only_a_version_header_outside_the_handshake_era_is_this_era() {
        assert!(routing(&[]).is_none());
        assert!(routing(&[("mcp-protocol-version", "2025-11-25")]).is_none());
        assert!(routing(&[("mcp-protocol-version", "2026-07-28")]).is_some());
        assert!(routing(&[("mcp-protocol-version", "2099-01-01")]).is_some());
    }

    #[test]
    fn each_check_refuses_with_its_code_in_order() {
        let r = routing(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?ZWNobyDinJM=?="),
        ])
        .unwrap_or_else(|| panic!("modern"));
        let call = |params: Value| r.check("tools/call", &params).map_err(|e| e.code);
        assert_eq!(
            call(json!({"name": "echo ✓", "_meta": meta("2026-07-28")})),
            Ok(())
        );
        assert_eq!(call(json!({"name": "echo ✓"})), Err(INVALID_PARAMS));
        assert_eq!(
            call(json!({"name": "echo ✓", "_meta": {META_PROTOCOL_VERSION: "2026-07-28"}})),
            Err(INVALID_PARAMS)
        );
        assert_eq!(
            call(json!({"name": "echo ✓", "_meta": meta("2025-11-25")})),
            Err(HEADER_MISMATCH)
        );
        assert_eq!(
            call(json!({"name": "other", "_meta": meta("2026-07-28")})),
            Err(HEADER_MISMATCH)
        );
        assert_eq!(
            r.check("tools/list", &json!({"_meta": meta("2026-07-28")}))
                .map_err(|e| e.code),
            Err(HEADER_MISMATCH),
            "Mcp-Method names another method"
        );
        let unknown = routing(&[
            ("mcp-protocol-version", "2099-01-01"),
            ("mcp-method", "ping"),
        ])
        .unwrap_or_else(|| panic!("modern"));
        let refused = unknown.check("ping", &json!({"_meta": meta("2099-01-01")}));
        assert_eq!(
            refused.as_ref().map_err(|e| e.code),
            Err(UNSUPPORTED_PROTOCOL_VERSION)
        );
        let reply: Value = refused
            .map_err(|e| serde_json::from_slice(&e.reply(&json!(4))).unwrap_or_default())
            .err()
            .unwrap_or_default();
        assert_eq!(reply["error"]["data"]["requested"], "2099-01-01");
        assert_eq!(reply["id"], 4);
        let ping = routing(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "ping"),
        ])
        .unwrap_or_else(|| panic!("modern"));
        assert_eq!(
            ping.check("ping", &json!({"_meta": meta("2026-07-28")}))
                .map_err(|e| e.code),
            Err(METHOD_NOT_FOUND),
            "removed in this era"
        );
        let twice = routing(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
            ("mcp-method", "tools/list"),
        ])
        .unwrap_or_else(|| panic!("modern"));
        assert_eq!(
            twice
                .check("tools/list", &json!({"_meta": meta("2026-07-28")}))
                .map_err(|e| e.code),
            Err(HEADER_MISMATCH)
        );
    }

    #[test]
    fn param_headers_must_carry_each_marked_argument() {
        let expected = [("Region".to_owned(), "Hello".to_owned())];
        let with = |value: &str| {
            routing(&[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-param-region", value),
            ])
        };
        for ok in ["Hello", "=?base64?SGVsbG8=?="] {
            let r = with(ok).unwrap_or_else(|| panic!("routing"));
            assert_eq!(r.check_params(&expected), Ok(()), "{ok}");
        }
        for bad in [
            "Hullo",
            "=?base64?SGVsbG8?=",
            "=?base64?SGVs!!!bG8=?=",
            "SGVsbG8=",
        ] {
            let r = with(bad).unwrap_or_else(|| panic!("routing"));
            assert_eq!(
                r.check_params(&expected).map_err(|e| e.code),
                Err(HEADER_MISMATCH),
                "{bad}"
            );
        }
        // A literal that only looks like the encoding is compared as it is.
        let literal = [("Region".to_owned(), "=?base64?SGVsbG8=".to_owned())];
        let r = with("=?base64?SGVsbG8=").unwrap_or_else(|| panic!("routing"));
        assert_eq!(r.check_params(&literal), Ok(()));
        let missing =
            routing(&[("mcp-protocol-version", "2026-07-28")]).unwrap_or_else(|| panic!("routing"));
        assert!(missing.check_params(&expected).is_err());
        assert_eq!(missing.check_params(&[]), Ok(()));
    }

    #[test]
    fn error_codes_map_to_their_http_status() {
        let e = protocol::error_response(&json!(1), METHOD_NOT_FOUND, "no");
        assert_eq!(error_code(&e).map(status), Some(StatusCode::NOT_FOUND));
        let r = protocol::response(&json!(1), json!({"error": {"code": 1}}));
        assert_eq!(error_code(&r), None, "a result that mentions an error");
        assert_eq!(status(-32000), StatusCode::OK);
        assert_eq!(status(HEADER_MISMATCH), StatusCode::BAD_REQUEST);
    }
}
