//! A request the gateway answers with a JSON-RPC error: its code, its message and, where
//! the protocol asks for one, its `data` (the capability a client did not declare, the
//! URI of a resource that is not there).

use serde_json::{Value, json};

use crate::mcp::protocol::{self, MISSING_CAPABILITY};

/// One refusal.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Refused {
    pub(super) code: i64,
    pub(super) message: String,
    pub(super) data: Option<Value>,
}

impl Refused {
    /// The client did not declare `capability`, which this request needs.
    pub(super) fn missing(capability: &str) -> Refused {
        // An extension (a name with a slash) is declared under `extensions`.
        let required = if capability.contains('/') {
            json!({"extensions": {capability: {}}})
        } else {
            json!({capability: {}})
        };
        Refused {
            code: MISSING_CAPABILITY,
            message: format!(
                "this request needs the client's {capability} capability, which it did not declare"
            ),
            data: Some(json!({"requiredCapabilities": required})),
        }
    }

    /// The same refusal with `data`.
    pub(super) fn with_data(self, data: Value) -> Refused {
        Refused {
            data: Some(data),
            ..self
        }
    }

    /// The error response to request `id`, encoded.
    pub(super) fn response(&self, id: &Value) -> Vec<u8> {
        match &self.data {
            None => protocol::error_response(id, self.code, &self.message),
            Some(data) => protocol::encode_message(&json!({
                "jsonrpc": "2.0", "id": id,
                "error": {"code": self.code, "message": self.message, "data": data},
            })),
        }
    }
}

impl From<(i64, String)> for Refused {
    fn from((code, message): (i64, String)) -> Refused {
        Refused {
            code,
            message,
            data: None,
        }
    }
}
