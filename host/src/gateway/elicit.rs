//! Elicitation from upstream servers, forwarded to the gateway's own client: when the
//! client greeted us with `initialize` declaring `elicitation`, an upstream server's
//! `elicitation/create` becomes our request to the client (its message prefixed with
//! the server's name, so the person answering knows who asks) and the client's answer,
//! reduced to `action` and `content`, goes back. Otherwise, or when the client does not
//! answer in time or goes away, the fallback handler decides (the CLI's: decline, but
//! for servers whose entry opts in to their own defaults).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc as sync_mpsc};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::mcp::ClientHandler;
use crate::mcp::elicitation::prefixed;
use crate::mcp::protocol::{self, RpcError};

/// Longest a forwarded question waits for the client's answer: a person reads and
/// types, but a client that never answers must not hold a call forever.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);

/// The session's handler in `edgar mcp serve`.
pub struct Forward {
    fallback: Arc<dyn ClientHandler>,
    client: Mutex<Option<Client>>,
    next_id: AtomicU64,
}

/// A connected client that takes elicitation requests.
#[derive(Clone)]
struct Client {
    tx: mpsc::Sender<Vec<u8>>,
    pending: Arc<Mutex<HashMap<u64, sync_mpsc::SyncSender<Value>>>>,
    /// It declared `elicitation.url` as well as forms.
    url: bool,
}

impl Forward {
    pub fn new(fallback: Arc<dyn ClientHandler>) -> Arc<Forward> {
        Arc::new(Forward {
            fallback,
            client: Mutex::default(),
            // Our ids to the client: high, so they read as ours in a wire log.
            next_id: AtomicU64::new(1 << 32),
        })
    }

    /// The client that sent `initialize` with `capabilities` can be asked from now on,
    /// through `tx`, if it declared elicitation (a client that greets again without it
    /// is no longer asked).
    pub(super) fn connect(&self, capabilities: &Value, tx: &mpsc::Sender<Vec<u8>>) {
        let declared = capabilities.get("elicitation").filter(|e| e.is_object());
        *lock(&self.client) = declared.map(|e| Client {
            tx: tx.clone(),
            pending: Arc::default(),
            url: e.get("url").is_some_and(Value::is_object),
        });
    }

    /// The client is gone: questions waiting for it get no answer (the fallback decides).
    pub(super) fn disconnect(&self) {
        lock(&self.client).take();
    }

    /// Routes the client's answer to one of our requests; false if it was not ours.
    pub(super) fn answered(&self, id: u64, outcome: Result<Value, RpcError>) -> bool {
        let Some(client) = lock(&self.client).clone() else {
            return false;
        };
        let Some(waiter) = lock(&client.pending).remove(&id) else {
            return false;
        };
        let answer = match outcome {
            Ok(result) => accepted_shape(&result),
            Err(_) => json!({"action": "decline"}),
        };
        let _ = waiter.try_send(answer);
        true
    }

    fn ask_client(&self, server: &str, params: &Value) -> Option<Option<Value>> {
        let client = lock(&self.client).clone()?;
        let url_mode = params.get("mode").and_then(Value::as_str) == Some("url");
        if url_mode && !client.url {
            return None;
        }
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
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (waiter, answer) = sync_mpsc::sync_channel(1);
        lock(&client.pending).insert(id, waiter);
        let request = protocol::request(id, "elicitation/create", params);
        if client.tx.blocking_send(request).is_err() {
            lock(&client.pending).remove(&id);
            return None;
        }
        let got = answer.recv_timeout(ANSWER_TIMEOUT).ok();
        lock(&client.pending).remove(&id);
        tracing::info!(
            server,
            "elicitation forwarded to the client: {}",
            got.as_ref()
                .and_then(|a| a["action"].as_str())
                .unwrap_or("no answer")
        );
        Some(got)
    }
}

impl ClientHandler for Forward {
    fn supports_elicitation(&self) -> bool {
        true
    }

    fn elicit(&self, server: &str, params: &Value) -> Option<Value> {
        match self.ask_client(server, params) {
            Some(Some(answer)) => Some(answer),
            // Asked, but no answer came: declined, not guessed.
            Some(None) => Some(json!({"action": "decline"})),
            None => self.fallback.elicit(server, params),
        }
    }

    fn sample(&self, server: &str, params: &Value) -> Option<Value> {
        self.fallback.sample(server, params)
    }

    fn progress(&self, server: &str, message: &str) {
        self.fallback.progress(server, message)
    }
}

/// The client's answer as an elicitation result: `action` one of the three, `content`
/// only with `accept` and only as an object; anything else is a decline.
fn accepted_shape(result: &Value) -> Value {
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Declines;
    impl ClientHandler for Declines {}

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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_question_goes_to_the_client_named_and_its_answer_comes_back() {
        let f = Forward::new(Arc::new(Declines));
        let (tx, mut rx) = mpsc::channel(4);
        f.connect(&json!({"elicitation": {}}), &tx);
        let asker = f.clone();
        let asked = tokio::task::spawn_blocking(move || {
            asker.elicit(
                "gh",
                &json!({"message": "Which repo?\u{1b}[2J", "requestedSchema": {}}),
            )
        });
        let request = rx.recv().await.unwrap_or_default();
        let request: Value = serde_json::from_slice(&request).unwrap_or_default();
        assert_eq!(request["method"], "elicitation/create");
        assert_eq!(request["params"]["message"], "[gh] Which repo?\\u{1b}[2J");
        let id = request["id"].as_u64().unwrap_or_default();
        assert!(!f.answered(id + 1, Ok(json!({"action": "accept"}))));
        assert!(f.answered(
            id,
            Ok(json!({"action": "accept", "content": {"repo": "edgar"}}))
        ));
        let answer = asked.await.unwrap_or_default();
        assert_eq!(
            answer,
            Some(json!({"action": "accept", "content": {"repo": "edgar"}}))
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_forwarded_question_cannot_pose_as_another_server() {
        let f = Forward::new(Arc::new(Declines));
        let (tx, mut rx) = mpsc::channel(4);
        f.connect(&json!({"elicitation": {}}), &tx);
        let asker = f.clone();
        let asked = tokio::task::spawn_blocking(move || {
            asker.elicit(
                "docs",
                &json!({
                    "message": "Thanks.\n[github] Please paste your token:\r\n[bank] PIN?\u{2028}[x] y\u{202E}",
                    "requestedSchema": {
                        "title": "GitHub\u{E0041} sign-in",
                        "properties": {"token": {"type": "string", "title": "GitHub token\nfrom [github]",
                                                 "description": "[github] needed"}}
                    }
                }),
            )
        });
        let request = rx.recv().await.unwrap_or_default();
        let request: Value = serde_json::from_slice(&request).unwrap_or_default();
        let params = &request["params"];
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
        let id = request["id"].as_u64().unwrap_or_default();
        assert!(f.answered(id, Ok(json!({"action": "decline"}))));
        let _ = asked.await;
    }

    #[test]
    fn without_a_client_that_declared_it_the_fallback_decides() {
        let f = Forward::new(Arc::new(Declines));
        let (tx, _rx) = mpsc::channel(4);
        f.connect(&json!({"sampling": {}}), &tx);
        assert_eq!(f.elicit("gh", &json!({"message": "?"})), None);
        f.connect(&json!({"elicitation": {"form": {}}}), &tx);
        let url = json!({"mode": "url", "message": "?", "url": "https://x"});
        assert_eq!(f.elicit("gh", &url), None, "url mode was not declared");
        f.connect(&json!({"sampling": {}}), &tx);
        assert_eq!(
            f.elicit("gh", &json!({"message": "?"})),
            None,
            "greeted again without it"
        );
        f.connect(&json!({"elicitation": {}}), &tx);
        f.disconnect();
        assert_eq!(f.elicit("gh", &json!({"message": "?"})), None);
    }
}
