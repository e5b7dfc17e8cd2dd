//! Sans-IO JSON-RPC 2.0 for MCP: building outgoing messages and classifying incoming ones.

use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer as _, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// Whether a parse failed on the nesting limit (the one syntax error that a well-formed,
/// hostile message produces).
pub(crate) fn is_too_deep(e: &serde_json::Error) -> bool {
    e.to_string().starts_with("recursion limit exceeded")
}

/// MCP protocol versions of the handshake era (`initialize`) this client speaks,
/// newest first.
pub const PROTOCOL: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// Stateless (2026-07-28 and later) versions: no handshake, every request carries its
/// version, capabilities and client in `_meta`. Newest first.
pub const MODERN: &[&str] = &["2026-07-28"];

/// Whether `version` is one of the stateless era's.
pub fn is_modern(version: &str) -> bool {
    MODERN.contains(&version)
}

/// `_meta` keys of the stateless era.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// The listen request a stateless-era notification answers (its subscription).
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// "The server does not speak the version this request named"; its `data.supported`
/// lists the ones it does.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// Most versions read from an `UnsupportedProtocolVersion` error's list.
const MAX_SUPPORTED: usize = 16;

/// JSON-RPC error codes used in answers to a server's requests.
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
/// "Missing required client capability": the request needs a capability the client did
/// not declare, named in `data.requiredCapabilities`.
pub const MISSING_CAPABILITY: i64 = -32021;
/// JSON-RPC's code for an error inside the server.
pub const INTERNAL_ERROR: i64 = -32603;
/// The tasks extension (`io.modelcontextprotocol/tasks`), as capabilities name it.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Largest JSON-RPC message read from a server (a stdio line, an HTTP body or event);
/// longer fails the request, or on stdio the server.
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// Largest request or notification from a server that is decoded: they carry small
/// things (a ping, a log line, an elicitation form). Only responses may be as large as a
/// transport's message limit, and their `result` is kept as text, never built into a tree.
pub const MAX_CONTROL_BYTES: usize = 1 << 20;
/// Most messages in one JSON-RPC batch.
pub const MAX_BATCH: usize = 1000;

/// The levels of `notifications/message` and `logging/setLevel`, least severe first
/// (RFC 5424's, as MCP names them).
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// How severe a log `level` is (`debug` is 0), if it is one of [`LOG_LEVELS`].
pub fn log_severity(level: &str) -> Option<u8> {
    LOG_LEVELS.iter().position(|l| *l == level).map(|i| i as u8)
}

/// One message from a server.
#[derive(Debug)]
pub enum Incoming {
    /// The answer to one of our requests. Ids we never sent (or strings) are `None`.
    /// The result stays JSON text: a tool list or a tool result goes on as text (to the
    /// guard) without being decoded and encoded again.
    Response {
        id: Option<u64>,
        outcome: Result<Box<RawValue>, RpcError>,
    },
    /// The server asks us something; it expects an answer with the same id.
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A request too large (or too deep) to decode: answered with an error.
    Refused {
        id: Value,
        reason: String,
    },
    Notification {
        method: String,
        params: Value,
    },
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    /// For [`UNSUPPORTED_PROTOCOL_VERSION`]: the versions the server says it speaks.
    pub supported: Vec<String>,
    /// For [`MISSING_CAPABILITY`]: the capability a server asks for, when it is one a
    /// server's question needs (`elicitation`, `sampling`, `roots`) or the tasks
    /// extension ([`TASKS_EXTENSION`]).
    pub required: Option<&'static str>,
}

/// The envelope of one message: its fields as undecoded text, so classifying a 16 MiB
/// response costs one scan and no allocation per value.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<&'a RawValue>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ErrorObject {
    code: Option<i64>,
    message: Option<String>,
    /// Any JSON: what is read of it depends on the code.
    data: Option<Value>,
}

/// Decodes and classifies one message as received (a line, an event's data, a body).
pub fn decode(bytes: &[u8]) -> Result<Vec<Incoming>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "a message that is not UTF-8".to_owned())?;
    let raw: &RawValue =
        serde_json::from_str(text).map_err(|_| "a message that is not JSON".to_owned())?;
    classify(raw)
}

/// The JSON-RPC error code for a message [`decode`] refused: -32700 (parse error) when it
/// is not JSON at all, -32600 (invalid request) when it is JSON but not a message.
pub fn refusal_code(bytes: &[u8]) -> i64 {
    if serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok() {
        -32600
    } else {
        -32700
    }
}

/// Classifies one message (a batch yields several).
pub fn classify(message: &RawValue) -> Result<Vec<Incoming>, String> {
    let text = message.get();
    if text.starts_with('[') {
        let items = elements(text, MAX_BATCH).map_err(|e| format!("a batch that {e}"))?;
        if items.is_empty() {
            return Err("an empty batch".into());
        }
        return items.into_iter().map(classify_one).collect();
    }
    Ok(vec![classify_one(message)?])
}

fn classify_one(message: &RawValue) -> Result<Incoming, String> {
    if !message.get().starts_with('{') {
        return Err("a message that is not a JSON object".into());
    }
    let m: Envelope<'_> = serde_json::from_str(message.get())
        .map_err(|e| format!("a message that does not decode ({e})"))?;
    let version = m.jsonrpc.map(|v| serde_json::from_str::<String>(v.get()));
    if !matches!(version, Some(Ok(v)) if v == "2.0") {
        return Err("a message without \"jsonrpc\": \"2.0\"".into());
    }
    let id = m.id.filter(|id| id.get() != "null");
    let Some(method) = m.method else {
        let Some(id) = id else {
            return Err("a message with neither method nor id".into());
        };
        let outcome = match (m.result, m.error) {
            (Some(result), None) => Ok(result.to_owned()),
            (None, Some(error)) => {
                let e: ErrorObject = serde_json::from_str(error.get()).unwrap_or(ErrorObject {
                    code: None,
                    message: None,
                    data: None,
                });
                let code = e.code.unwrap_or(0);
                let data = e.data.unwrap_or(Value::Null);
                let supported = match (code, data.get("supported").and_then(Value::as_array)) {
                    (UNSUPPORTED_PROTOCOL_VERSION, Some(list)) => list
                        .iter()
                        .filter_map(Value::as_str)
                        .filter(|v| {
                            v.len() <= 32
                                && v.bytes()
                                    .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
                        })
                        .take(MAX_SUPPORTED)
                        .map(str::to_owned)
                        .collect(),
                    _ => Vec::new(),
                };
                let required = match (code, data.get("requiredCapabilities")) {
                    (MISSING_CAPABILITY, Some(Value::Object(caps))) => {
                        ["elicitation", "sampling", "roots"]
                            .into_iter()
                            .find(|c| caps.contains_key(*c))
                            .or_else(|| {
                                caps.get("extensions")
                                    .and_then(|e| e.get(TASKS_EXTENSION))
                                    .map(|_| TASKS_EXTENSION)
                            })
                    }
                    _ => None,
                };
                Err(RpcError {
                    code,
                    message: e.message.unwrap_or_else(|| "(no message)".into()),
                    supported,
                    required,
                })
            }
            _ => return Err("a response with neither or both of result and error".into()),
        };
        let id = serde_json::from_str::<u64>(id.get()).ok();
        return Ok(Incoming::Response { id, outcome });
    };
    let method: String = serde_json::from_str(method.get())
        .map_err(|_| "a message whose method is not a string".to_owned())?;
    let shown_method = crate::text::shown(&method);
    let params = || -> Result<Value, String> {
        if message.get().len() > MAX_CONTROL_BYTES {
            return Err(format!(
                "a {shown_method} message of {} bytes, over the {MAX_CONTROL_BYTES}-byte limit for requests and notifications",
                message.get().len()
            ));
        }
        match m.params {
            Some(p) => serde_json::from_str(p.get()).map_err(|e| {
                if is_too_deep(&e) {
                    format!("a {shown_method} message nested deeper than 128 levels")
                } else {
                    format!("a {shown_method} message whose params do not decode ({e})")
                }
            }),
            None => Ok(Value::Null),
        }
    };
    match id {
        Some(id) => {
            let id: Value = serde_json::from_str(id.get())
                .map_err(|_| "a request whose id does not decode".to_owned())?;
            if !(id.is_string() || id.is_number()) {
                return Err("a request whose id is neither a string nor a number".into());
            }
            let params = params();
            Ok(match params {
                Ok(params) => Incoming::Request { id, method, params },
                Err(reason) => Incoming::Refused { id, reason },
            })
        }
        None => {
            let params = params()?;
            Ok(Incoming::Notification { method, params })
        }
    }
}

/// The elements of the JSON array `text`, undecoded, refusing more than `cap` before
/// collecting the rest: a list's length is checked before anything is built for it.
pub(crate) fn elements(text: &str, cap: usize) -> Result<Vec<&RawValue>, String> {
    struct Capped(usize);
    impl<'de> Visitor<'de> for Capped {
        type Value = Vec<&'de RawValue>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an array")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(item) = seq.next_element::<&'de RawValue>()? {
                if out.len() == self.0 {
                    return Err(serde::de::Error::custom(format!(
                        "holds more than {} items",
                        self.0
                    )));
                }
                out.push(item);
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    match de.deserialize_seq(Capped(cap)) {
        Ok(items) => Ok(items),
        Err(e) => {
            let text = e.to_string();
            Err(match text.split_once(" at line ") {
                Some((what, _)) if what.starts_with("holds more than") => what.to_owned(),
                _ => format!("does not decode ({text})"),
            })
        }
    }
}

/// A request line (without the newline).
pub fn request(id: u64, method: &str, params: Value) -> Vec<u8> {
    encode(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
}

/// A request whose params object (which has no `_meta`) gets a `_meta` object made of
/// `meta`, the already-encoded members of one (a stateless era stamp).
pub fn stamped_request(id: u64, method: &str, params: &Value, meta: &str) -> Vec<u8> {
    let params = encode(params);
    let mut out = Vec::with_capacity(64 + method.len() + meta.len() + params.len());
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.to_string().as_bytes());
    out.extend_from_slice(b",\"method\":");
    out.extend_from_slice(&encode(&Value::from(method)));
    out.extend_from_slice(b",\"params\":{\"_meta\":{");
    out.extend_from_slice(meta.as_bytes());
    out.push(b'}');
    match params.get(1..) {
        // `{}`: nothing but the stamp.
        Some(b"}") => out.push(b'}'),
        Some(rest) => {
            out.push(b',');
            out.extend_from_slice(rest);
        }
        None => out.push(b'}'),
    }
    out.push(b'}');
    out
}

pub fn notification(method: &str, params: Value) -> Vec<u8> {
    if params.is_null() {
        return encode(&json!({"jsonrpc": "2.0", "method": method}));
    }
    encode(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
}

pub fn response(id: &Value, result: Value) -> Vec<u8> {
    encode(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

pub fn error_response(id: &Value, code: i64, message: &str) -> Vec<u8> {
    encode(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
}

/// The `-32022` answer: the versions this side speaks, and the one asked for.
pub fn unsupported_version(id: &Value, requested: &str, supported: &[&str]) -> Vec<u8> {
    encode(&json!({"jsonrpc": "2.0", "id": id, "error": {
        "code": UNSUPPORTED_PROTOCOL_VERSION, "message": "Unsupported protocol version",
        "data": {"supported": supported, "requested": requested}}}))
}

/// A whole message, encoded (for one whose shape no helper here builds).
pub fn encode_message(v: &Value) -> Vec<u8> {
    encode(v)
}

fn encode(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

#[cfg(test)]
mod tests;
