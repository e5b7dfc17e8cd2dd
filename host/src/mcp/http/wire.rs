//! What the HTTP transports get back: body kinds, size-capped JSON bodies, and
//! per-request failures.

use super::{Challenge, MAX_MESSAGE_BYTES};
use crate::mcp::McpError;
use crate::text::shown;

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

/// Reads a body of at most [`MAX_MESSAGE_BYTES`], refusing a larger one as soon as it
/// is announced or read.
pub(crate) async fn read_body(mut response: reqwest::Response) -> Result<Vec<u8>, Reply> {
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
    Ok(body)
}
