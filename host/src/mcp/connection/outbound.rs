//! What goes out: each message with the era's stamp (`_meta` of the stateless
//! revision: version, capabilities, client) and the answer it waits for.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::auth::bearer::{SUBJECT, Subject};
use crate::mcp::protocol::{self};

/// The team gateway's user the current task runs for, if any.
fn subject() -> Option<Subject> {
    SUBJECT.try_with(Subject::clone).ok()
}

/// One message on its way to the server, encoded, with what an HTTP transport routes
/// by recorded when it was built (so no transport parses our own messages again).
#[derive(Debug, Clone)]
pub(crate) struct Outbound {
    pub bytes: bytes::Bytes,
    /// The id of a request of ours.
    pub request: Option<u64>,
    pub method: Option<String>,
    /// The request a `notifications/cancelled` gives up on.
    pub cancels: Option<u64>,
    /// The stateless era's protocol version this message names (`None`: the handshake
    /// era, where the transport sends the negotiated version, if any).
    pub version: Option<Arc<str>>,
    /// What the stateless era's `Mcp-Name` header mirrors: a `tools/call`'s or
    /// `prompts/get`'s `name`, a `resources/read`'s `uri`.
    pub name: Option<String>,
    /// `Mcp-Param-*` headers: argument values a tool marks with `x-mcp-header`.
    pub param_headers: Vec<(String, String)>,
    /// The team gateway's user a request is sent for (`auth::bearer::SUBJECT` when it
    /// was built), for a per-user sign-in.
    pub subject: Option<Subject>,
    /// The trace context an HTTP transport passes on (`traceparent`, `tracestate`): a
    /// request's own span's, set by the connection, a notification's the work's it
    /// belongs to.
    pub trace: Option<crate::telemetry::Context>,
}

/// How every request is stamped in the stateless era: the version it names, and the
/// `_meta` entries (that version, the client's capabilities and identity) it carries.
#[derive(Debug)]
pub(crate) struct Stamp {
    pub version: Arc<str>,
    meta: serde_json::Map<String, Value>,
    /// `meta` encoded once, without its braces: spliced into every request whose
    /// params carry no `_meta` of their own, instead of cloned and encoded each time.
    encoded: Box<str>,
}

impl Stamp {
    /// The client capabilities every request declares.
    pub(crate) fn capabilities(&self) -> &Value {
        self.meta
            .get(protocol::META_CLIENT_CAPABILITIES)
            .unwrap_or(&Value::Null)
    }

    pub(crate) fn new(version: &str, capabilities: Value, client_info: Value) -> Stamp {
        let mut meta = serde_json::Map::new();
        meta.insert(protocol::META_PROTOCOL_VERSION.into(), json!(version));
        meta.insert(protocol::META_CLIENT_CAPABILITIES.into(), capabilities);
        meta.insert(protocol::META_CLIENT_INFO.into(), client_info);
        let whole = Value::Object(meta.clone()).to_string();
        let encoded = whole
            .strip_prefix('{')
            .and_then(|s| s.strip_suffix('}'))
            .unwrap_or_default()
            .into();
        Stamp {
            version: version.into(),
            meta,
            encoded,
        }
    }
}

impl Outbound {
    pub(crate) fn request(
        id: u64,
        method: &str,
        mut params: Value,
        stamp: Option<&Stamp>,
    ) -> Outbound {
        let mut name = None;
        if let Some(stamp) = stamp {
            if !params.is_object() {
                params = json!({});
            }
            let key = if method == "resources/read" {
                "uri"
            } else {
                "name"
            };
            if matches!(method, "tools/call" | "prompts/get" | "resources/read") {
                name = params.get(key).and_then(Value::as_str).map(str::to_owned);
            }
            if params.get("_meta").is_none() {
                return Outbound {
                    bytes: protocol::stamped_request(id, method, &params, &stamp.encoded).into(),
                    request: Some(id),
                    method: Some(method.to_owned()),
                    cancels: None,
                    version: Some(stamp.version.clone()),
                    name,
                    param_headers: Vec::new(),
                    subject: subject(),
                    trace: None,
                };
            }
            if let Some(p) = params.as_object_mut() {
                let meta = p.entry("_meta").or_insert_with(|| json!({}));
                if !meta.is_object() {
                    *meta = json!({});
                }
                if let Some(meta) = meta.as_object_mut() {
                    for (k, v) in &stamp.meta {
                        // Capabilities a request narrowed for its caller stay narrowed.
                        if k == protocol::META_CLIENT_CAPABILITIES && meta.contains_key(k) {
                            continue;
                        }
                        meta.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        Outbound {
            bytes: protocol::request(id, method, params).into(),
            request: Some(id),
            method: Some(method.to_owned()),
            cancels: None,
            version: stamp.map(|s| s.version.clone()),
            name,
            param_headers: Vec::new(),
            subject: subject(),
            trace: None,
        }
    }

    pub(crate) fn notification(method: &str, params: Value, stamp: Option<&Stamp>) -> Outbound {
        let cancels = match method {
            "notifications/cancelled" => params.get("requestId").and_then(Value::as_u64),
            _ => None,
        };
        Outbound {
            bytes: protocol::notification(method, params).into(),
            request: None,
            method: Some(method.to_owned()),
            cancels,
            version: stamp.map(|s| s.version.clone()),
            name: None,
            param_headers: Vec::new(),
            subject: subject(),
            trace: crate::telemetry::current(),
        }
    }

    /// Our answer to one of the server's requests.
    pub(crate) fn reply(bytes: Vec<u8>) -> Outbound {
        Outbound {
            bytes: bytes.into(),
            request: None,
            method: None,
            cancels: None,
            version: None,
            name: None,
            param_headers: Vec::new(),
            subject: None,
            trace: None,
        }
    }

    /// Nothing: for streams that answer no message of ours.
    pub(crate) fn none() -> Outbound {
        Outbound::reply(Vec::new())
    }

    pub(crate) fn is(&self, method: &str) -> bool {
        self.method.as_deref() == Some(method)
    }
}
