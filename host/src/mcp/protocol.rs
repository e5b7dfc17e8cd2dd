//! Sans-IO JSON-RPC 2.0 for MCP: building outgoing messages and classifying incoming ones.

use serde_json::{Value, json};

/// Why a message nested deeper than the JSON parser's limit (128) fails its exchange.
pub(crate) const TOO_DEEP: &str =
    "it sent a message nested deeper than 128 levels, which edgar does not decode";

/// Whether a parse failed on the nesting limit (the one syntax error that a well-formed,
/// hostile message produces).
pub(crate) fn is_too_deep(e: &serde_json::Error) -> bool {
    e.to_string().starts_with("recursion limit exceeded")
}

/// MCP protocol versions this client speaks, newest first.
pub const PROTOCOL: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// JSON-RPC error codes used in answers to a server's requests.
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;

/// One message from a server.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// The answer to one of our requests. Ids we never sent (or strings) are `None`.
    Response {
        id: Option<u64>,
        outcome: Result<Value, RpcError>,
    },
    /// The server asks us something; it expects an answer with the same id.
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

/// Classifies one decoded message (a batch array yields several).
pub fn classify(message: Value) -> Result<Vec<Incoming>, String> {
    match message {
        Value::Array(items) => {
            if items.is_empty() {
                return Err("an empty batch".into());
            }
            items.into_iter().map(classify_one).collect()
        }
        other => Ok(vec![classify_one(other)?]),
    }
}

fn classify_one(message: Value) -> Result<Incoming, String> {
    let Value::Object(mut m) = message else {
        return Err("a message that is not a JSON object".into());
    };
    if m.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err("a message without \"jsonrpc\": \"2.0\"".into());
    }
    let method = m.remove("method");
    let params = m.remove("params").unwrap_or(Value::Null);
    match (method, m.remove("id")) {
        (Some(Value::String(method)), Some(id)) if !id.is_null() => {
            Ok(Incoming::Request { id, method, params })
        }
        (Some(Value::String(method)), _) => Ok(Incoming::Notification { method, params }),
        (Some(_), _) => Err("a message whose method is not a string".into()),
        (None, Some(id)) => {
            let id = id.as_u64();
            let outcome = match (m.remove("result"), m.remove("error")) {
                (Some(result), None) => Ok(result),
                (None, Some(error)) => Err(RpcError {
                    code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                    message: error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("(no message)")
                        .to_owned(),
                }),
                _ => return Err("a response with neither or both of result and error".into()),
            };
            Ok(Incoming::Response { id, outcome })
        }
        (None, None) => Err("a message with neither method nor id".into()),
    }
}

/// A request line (without the newline).
pub fn request(id: u64, method: &str, params: Value) -> Vec<u8> {
    encode(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
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

fn encode(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(v: Value) -> Result<Incoming, String> {
        classify(v).map(|mut v| v.remove(0))
    }

    #[test]
    fn classifies_messages() {
        assert_eq!(
            one(json!({"jsonrpc": "2.0", "id": 3, "result": {"a": 1}})),
            Ok(Incoming::Response {
                id: Some(3),
                outcome: Ok(json!({"a": 1}))
            })
        );
        assert_eq!(
            one(json!({"jsonrpc": "2.0", "id": "x", "error": {"code": -1, "message": "no"}})),
            Ok(Incoming::Response {
                id: None,
                outcome: Err(RpcError {
                    code: -1,
                    message: "no".into()
                })
            })
        );
        assert_eq!(
            one(json!({"jsonrpc": "2.0", "id": 7, "method": "ping"})),
            Ok(Incoming::Request {
                id: json!(7),
                method: "ping".into(),
                params: Value::Null
            })
        );
        assert_eq!(
            one(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})),
            Ok(Incoming::Notification {
                method: "notifications/tools/list_changed".into(),
                params: Value::Null
            })
        );
    }

    #[test]
    fn refuses_malformed_messages() {
        for bad in [
            json!(1),
            json!({"id": 1, "result": {}}),
            json!({"jsonrpc": "2.0", "id": 1}),
            json!({"jsonrpc": "2.0", "id": 1, "result": 1, "error": {}}),
            json!({"jsonrpc": "2.0", "method": 5}),
            json!([]),
        ] {
            assert!(classify(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn batches_yield_each_message() {
        let v = classify(
            json!([{"jsonrpc": "2.0", "method": "a"}, {"jsonrpc": "2.0", "id": 1, "result": 2}]),
        );
        assert_eq!(v.map(|v| v.len()), Ok(2));
    }
}
