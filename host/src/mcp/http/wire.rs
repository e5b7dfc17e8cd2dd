//! What the HTTP transports send and get back: outgoing messages with the few facts
//! routing needs, body kinds, size-capped JSON bodies, and per-request failures.

use bytes::Bytes;
use serde_json::Value;

use super::{Challenge, MAX_MESSAGE_BYTES};
use crate::mcp::McpError;
use crate::text::shown;

/// One message on its way out, with what routing needs read from it once.
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    pub body: Bytes,
    pub id: Option<Value>,
    pub method: Option<String>,
    cancels: Option<u64>,
}

impl Outgoing {
    /// `None` for bytes that are not a JSON object (edgar never sends such).
    pub fn parse(bytes: Vec<u8>) -> Option<Outgoing> {
        let trimmed = bytes.trim_ascii_end();
        let value: Value = serde_json::from_slice(trimmed).ok()?;
        let object = value.as_object()?;
        let method = object
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let cancels = match method.as_deref() {
            Some("notifications/cancelled") => object
                .get("params")
                .and_then(|p| p.get("requestId"))
                .and_then(Value::as_u64),
            _ => None,
        };
        let len = trimmed.len();
        let mut bytes = bytes;
        bytes.truncate(len);
        Some(Outgoing {
            id: object.get("id").cloned(),
            method,
            cancels,
            body: Bytes::from(bytes),
        })
    }

    /// A placeholder for streams that answer nothing of ours.
    pub fn none() -> Outgoing {
        Outgoing {
            body: Bytes::new(),
            id: None,
            method: None,
            cancels: None,
        }
    }

    /// The id of a request of ours (a reply to the server has an id but no method).
    pub fn request_id(&self) -> Option<u64> {
        self.method.as_ref()?;
        self.id.as_ref().and_then(Value::as_u64)
    }

    /// The request this `notifications/cancelled` gives up on.
    pub fn cancels(&self) -> Option<u64> {
        self.cancels
    }

    /// The same message with another id.
    pub fn with_id(&self, id: Value) -> Outgoing {
        let mut value: Value = serde_json::from_slice(&self.body).unwrap_or(Value::Null);
        value["id"] = id.clone();
        Outgoing {
            body: Bytes::from(value.to_string()),
            id: Some(id),
            method: self.method.clone(),
            cancels: None,
        }
    }
}

/// Why one exchange failed, before it becomes an [`McpError`].
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    NeedsLogin(Option<Challenge>),
    Status { status: u16, reason: String },
    Failed(String),
}

impl Reply {
    pub fn reason(&self) -> String {
        match self {
            Reply::NeedsLogin(_) => "it needs login".into(),
            Reply::Status { reason, .. } | Reply::Failed(reason) => reason.clone(),
        }
    }

    pub fn into_error(self, server: &str, method: &str) -> McpError {
        match self {
            Reply::NeedsLogin(challenge) => McpError::NeedsLogin {
                server: server.to_owned(),
                challenge,
            },
            Reply::Status { reason, .. } | Reply::Failed(reason) => McpError::Exchange {
                server: server.to_owned(),
                method: method.to_owned(),
                reason,
            },
        }
    }
}

/// What a response body holds, by its content type.
#[derive(Debug)]
pub(crate) enum Body {
    Json,
    EventStream,
    Empty,
    Other(String),
}

impl Body {
    pub fn describe(&self) -> String {
        match self {
            Body::Json => "JSON".into(),
            Body::EventStream => "an event stream".into(),
            Body::Empty => "nothing".into(),
            Body::Other(t) => format!("content type {}", shown(t)),
        }
    }
}

pub(crate) fn body_kind(response: &reqwest::Response) -> Body {
    let Some(kind) = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
    else {
        return if response.content_length() == Some(0) {
            Body::Empty
        } else {
            Body::Other("(none)".into())
        };
    };
    let essence = kind
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "application/json" => Body::Json,
        "text/event-stream" => Body::EventStream,
        _ if response.content_length() == Some(0) => Body::Empty,
        _ => Body::Other(essence),
    }
}

/// Reads a JSON body of at most [`MAX_MESSAGE_BYTES`], refusing a larger one as soon
/// as it is announced or read.
pub(crate) async fn read_json(mut response: reqwest::Response) -> Result<Value, Reply> {
    let too_big = || {
        Reply::Failed(format!(
            "its reply is larger than {MAX_MESSAGE_BYTES} bytes"
        ))
    };
    if response
        .content_length()
        .is_some_and(|n| n > MAX_MESSAGE_BYTES as u64)
    {
        return Err(too_big());
    }
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(c)) => {
                if body.len() + c.len() > MAX_MESSAGE_BYTES {
                    return Err(too_big());
                }
                body.extend_from_slice(&c);
            }
            Ok(None) => break,
            Err(e) => {
                return Err(Reply::Failed(format!(
                    "its reply broke off: {}",
                    e.without_url()
                )));
            }
        }
    }
    serde_json::from_slice(&body).map_err(|e| Reply::Failed(format!("its reply is not JSON ({e})")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outgoing_messages_are_read_once() {
        let m = Outgoing::parse(
            br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{}}"#.to_vec(),
        );
        let m = m.unwrap_or_else(Outgoing::none);
        assert_eq!(m.request_id(), Some(4));
        let reply = Outgoing::parse(br#"{"jsonrpc":"2.0","id":4,"result":{}}"#.to_vec());
        assert_eq!(reply.and_then(|r| r.request_id()), None);
        let cancel = Outgoing::parse(
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}"#
                .to_vec(),
        );
        assert_eq!(cancel.and_then(|c| c.cancels()), Some(9));
        assert!(Outgoing::parse(b"[1]".to_vec()).is_none());
    }
}
