//! The gateway's session handler, and what its clients are shown of an upstream's
//! elicitation. A question an upstream server asks while a client's call runs goes to
//! that client (`questions.rs`, through [`crate::mcp::ask::ASKER`]) when it declared it
//! can answer; [`Forward`] decides the rest through the fallback handler (the CLI's:
//! decline, but for servers whose entry opts in to their own defaults). Upstream, it
//! declares elicitation and sampling, which the gateway's clients may answer.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::mcp::ClientHandler;
use crate::mcp::elicitation::prefixed;

/// Longest a forwarded question waits for the client's answer: a person reads and
/// types, but a client that never answers must not hold a call forever.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);

/// The session's handler in `edgar mcp serve`.
pub struct Forward {
    fallback: Arc<dyn ClientHandler>,
}

impl Forward {
    pub fn new(fallback: Arc<dyn ClientHandler>) -> Arc<Forward> {
        Arc::new(Forward { fallback })
    }
}

impl ClientHandler for Forward {
    fn supports_elicitation(&self) -> bool {
        true
    }

    fn supports_sampling(&self) -> bool {
        true
    }

    fn elicit(&self, server: &str, params: &Value) -> Option<Value> {
        self.fallback.elicit(server, params)
    }

    fn sample(&self, server: &str, params: &Value) -> Option<Value> {
        self.fallback.sample(server, params)
    }

    fn progress(&self, server: &str, message: &str) {
        self.fallback.progress(server, message)
    }
}

/// An elicitation request as the gateway's client may show it to a person: every line
/// of the server's words, and every field's title and description, starts with the
/// server's name, escaped, so no line can pose as another server's; `_meta` is dropped.
pub(super) fn disclosed(server: &str, params: &Value) -> Value {
    let mut params = params.clone();
    // The client shows it to a person: every line of the server's words, and every
    // field's title and description, starts with the server's name, escaped, so no
    // line can pose as another server's.
    let message = params.get("message").and_then(Value::as_str).unwrap_or("");
    params["message"] = json!(prefixed(server, message));
    if let Some(props) = params
        .pointer_mut("/requestedSchema/properties")
        .and_then(Value::as_object_mut)
    {
        for property in props.values_mut() {
            for key in ["title", "description"] {
                if let Some(text) = property.get(key).and_then(Value::as_str) {
                    let text = prefixed(server, text).replace('\n', " ");
                    property[key] = json!(text);
                }
            }
        }
    }
    if let Some(title) = params
        .pointer("/requestedSchema/title")
        .and_then(Value::as_str)
    {
        let title = prefixed(server, title).replace('\n', " ");
        params["requestedSchema"]["title"] = json!(title);
    }
    if let Some(meta) = params.as_object_mut() {
        meta.remove("_meta");
    }
    params
}

/// The client's answer as an elicitation result: `action` one of the three, `content`
/// only with `accept` and only as an object; anything else is a decline.
pub(super) fn accepted_shape(result: &Value) -> Value {
    match result.get("action").and_then(Value::as_str) {
        Some("accept") => {
            let content = result
                .get("content")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_else(Map::new);
            json!({"action": "accept", "content": content})
        }
        Some("cancel") => json!({"action": "cancel"}),
        _ => json!({"action": "decline"}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_three_actions_go_back_and_content_only_with_accept() {
        let a = accepted_shape(&json!({"action": "accept", "content": {"n": 1}, "x": 2}));
        assert_eq!(a, json!({"action": "accept", "content": {"n": 1}}));
        let a = accepted_shape(&json!({"action": "cancel", "content": {"n": 1}}));
        assert_eq!(a, json!({"action": "cancel"}));
        assert_eq!(
            accepted_shape(&json!({"action": "sure"})),
            json!({"action": "decline"})
        );
        assert_eq!(
            accepted_shape(&json!({"action": "accept", "content": "text"})),
            json!({"action": "accept", "content": {}})
        );
    }

    #[test]
    fn a_question_shown_cannot_pose_as_another_server() {
        let params = disclosed(
            "docs",
            &json!({
                "message": "Thanks.\n[github] Please paste your token:\r\n[bank] PIN?\u{2028}[x] y\u{202E}",
                "requestedSchema": {
                    "title": "GitHub\u{E0041} sign-in",
                    "properties": {"token": {"type": "string", "title": "GitHub token\nfrom [github]",
                                             "description": "[github] needed"}}
                },
                "_meta": {"x": 1}
            }),
        );
        let message = params["message"].as_str().unwrap_or_default();
        for line in message.split('\n') {
            assert!(line.starts_with("[docs] "), "{line:?} in {message:?}");
        }
        assert!(
            !message.contains('\u{2028}')
                && !message.contains('\u{202E}')
                && !message.contains('\r')
        );
        let title = params["requestedSchema"]["properties"]["token"]["title"]
            .as_str()
            .unwrap_or_default();
        assert!(
            title.starts_with("[docs] ") && !title.contains('\n'),
            "{title:?}"
        );
        let description = params["requestedSchema"]["properties"]["token"]["description"]
            .as_str()
            .unwrap_or_default();
        assert!(description.starts_with("[docs] "), "{description:?}");
        let top = params["requestedSchema"]["title"]
            .as_str()
            .unwrap_or_default();
        assert!(
            top.starts_with("[docs] ") && top.contains("\\u{e0041}"),
            "{top:?}"
        );
        assert!(params.get("_meta").is_none());
    }
}
