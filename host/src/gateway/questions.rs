//! Questions upstream servers ask an HTTP client of the gateway (`elicitation/create`,
//! `sampling/createMessage`) while its call runs: sent as our request on the event
//! stream of the client's own POST, answered by the client in a later POST that names
//! our id. Only the client that declared the capability is asked, only the caller whose
//! call caused the question may answer it, and a client that does not answer within
//! [`ANSWER_TIMEOUT`] is taken to decline.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};

use super::elicit::{ANSWER_TIMEOUT, accepted_shape, disclosed};
use crate::mcp::ask::{Answer, Asker};
use crate::mcp::protocol::{self, RpcError};

/// What a client declared it can answer, in its `initialize` capabilities.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Answers {
    /// Form-mode elicitation.
    pub elicitation: bool,
    /// URL-mode elicitation (declared as `elicitation.url`).
    pub url: bool,
    pub sampling: bool,
}

impl Answers {
    /// What `capabilities` (an `initialize` request's) declare; an empty `elicitation`
    /// object means forms, as the protocol says.
    pub fn declared(capabilities: &Value) -> Answers {
        let elicitation = capabilities.get("elicitation").filter(|e| e.is_object());
        Answers {
            elicitation: elicitation.is_some_and(|e| {
                e.as_object().is_some_and(Map::is_empty) || e.get("form").is_some()
            }),
            url: elicitation.is_some_and(|e| e.get("url").is_some_and(Value::is_object)),
            sampling: capabilities.get("sampling").is_some_and(Value::is_object),
        }
    }

    pub fn any(self) -> bool {
        self.elicitation || self.url || self.sampling
    }

    fn takes(self, method: &str, params: &Value) -> bool {
        match method {
            "elicitation/create" => {
                if params.get("mode").and_then(Value::as_str) == Some("url") {
                    self.url
                } else {
                    self.elicitation
                }
            }
            "sampling/createMessage" => self.sampling,
            _ => false,
        }
    }
}

/// Our questions waiting for a client's answer, by the id we gave them.
#[derive(Default)]
pub struct Questions {
    waiting: Mutex<HashMap<u64, Waiting>>,
}

struct Waiting {
    who: Arc<str>,
    answer: oneshot::Sender<Result<Value, RpcError>>,
}

impl Questions {
    /// An asker for one call of `who`, whose client takes `answers`: its questions go
    /// out on `stream` (the call's event stream).
    pub fn asker(
        self: &Arc<Self>,
        who: &str,
        answers: Answers,
        stream: mpsc::Sender<Vec<u8>>,
    ) -> Asker {
        let questions = self.clone();
        let owner: Arc<str> = who.into();
        Asker::new(who, move |server, method, params| {
            let (questions, owner, stream) = (questions.clone(), owner.clone(), stream.clone());
            let (server, method) = (server.to_owned(), method.to_owned());
            Box::pin(async move {
                if !answers.takes(&method, &params) {
                    return None;
                }
                Some(
                    questions
                        .ask(&owner, &server, &method, params, &stream)
                        .await,
                )
            })
        })
    }

    async fn ask(
        &self,
        who: &Arc<str>,
        server: &str,
        method: &str,
        params: Value,
        stream: &mpsc::Sender<Vec<u8>>,
    ) -> Answer {
        let params = match method {
            "elicitation/create" => disclosed(server, &params),
            _ => without_meta(params),
        };
        // Random, so an id says nothing of other questions and cannot be guessed.
        let mut bytes = [0u8; 8];
        if getrandom::fill(&mut bytes).is_err() {
            return Err("edgar could not make a request id".into());
        }
        // Below 2^53: a JavaScript client keeps the number exact.
        let id = u64::from_le_bytes(bytes) >> 11;
        let (tx, rx) = oneshot::channel();
        lock(&self.waiting).insert(
            id,
            Waiting {
                who: who.clone(),
                answer: tx,
            },
        );
        let _unwait = Unwait(self, id);
        if stream
            .send(protocol::request(id, method, params))
            .await
            .is_err()
        {
            return Err("the client went away before it could be asked".into());
        }
        let got = tokio::time::timeout(ANSWER_TIMEOUT, rx).await;
        tracing::info!(
            server,
            "{method} forwarded to the client: {}",
            match &got {
                Ok(Ok(Ok(_))) => "answered",
                Ok(Ok(Err(_))) => "refused",
                _ => "no answer",
            }
        );
        match (method, got) {
            ("elicitation/create", Ok(Ok(Ok(result)))) => Ok(accepted_shape(&result)),
            // Asked, but no answer came (or a refusal): declined, not guessed.
            ("elicitation/create", _) => Ok(json!({"action": "decline"})),
            (_, Ok(Ok(Ok(result)))) => sampled_shape(&result)
                .ok_or_else(|| "the client's completion is not a sampling result".to_owned()),
            (_, Ok(Ok(Err(e)))) => Err(format!(
                "the client refused: {}",
                crate::text::shown_message(&e.message)
            )),
            (_, _) => Err(format!(
                "the client did not answer within {} s",
                ANSWER_TIMEOUT.as_secs()
            )),
        }
    }

    /// Routes a client's answer to our question `id`; false if there is no such
    /// question or it was asked of another caller (who learns nothing from it).
    pub fn answered(&self, who: &str, id: u64, outcome: Result<Value, RpcError>) -> bool {
        let mut waiting = lock(&self.waiting);
        match waiting.get(&id) {
            Some(w) if &*w.who == who => {}
            _ => return false,
        }
        match waiting.remove(&id) {
            Some(w) => w.answer.send(outcome).is_ok(),
            None => false,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.waiting).len()
    }
}

struct Unwait<'a>(&'a Questions, u64);

impl Drop for Unwait<'_> {
    fn drop(&mut self) {
        lock(&self.0.waiting).remove(&self.1);
    }
}

fn without_meta(mut params: Value) -> Value {
    if let Some(p) = params.as_object_mut() {
        p.remove("_meta");
    }
    params
}

/// The client's completion as a sampling result: `role`, `content`, `model` and
/// `stopReason` only; `None` unless it has a role and content.
fn sampled_shape(result: &Value) -> Option<Value> {
    let role = result.get("role").and_then(Value::as_str)?;
    let content = result
        .get("content")
        .filter(|c| c.is_object() || c.is_array())?;
    let mut shaped = json!({"role": role, "content": content});
    for key in ["model", "stopReason"] {
        if let Some(v) = result.get(key).and_then(Value::as_str) {
            shaped[key] = json!(v);
        }
    }
    Some(shaped)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_client_declared_is_what_it_is_asked() {
        let a = Answers::declared(&json!({"elicitation": {}, "sampling": {}}));
        assert_eq!(
            a,
            Answers {
                elicitation: true,
                url: false,
                sampling: true
            }
        );
        let a = Answers::declared(&json!({"elicitation": {"url": {}}}));
        assert!(!a.elicitation && a.url && !a.sampling);
        assert!(!Answers::declared(&json!({"elicitation": true})).any());
        let form = Answers::declared(&json!({"elicitation": {"form": {}}}));
        assert!(form.takes("elicitation/create", &json!({"message": "?"})));
        assert!(!form.takes("elicitation/create", &json!({"mode": "url"})));
        assert!(!form.takes("sampling/createMessage", &json!({})));
        assert!(!form.takes("roots/list", &json!({})));
    }

    async fn asked(stream: &mut mpsc::Receiver<Vec<u8>>) -> Value {
        let request = stream.recv().await.unwrap_or_default();
        serde_json::from_slice(&request).unwrap_or_default()
    }

    #[tokio::test]
    async fn only_the_caller_asked_can_answer_and_the_answer_is_reshaped() {
        let questions = Arc::new(Questions::default());
        let (tx, mut rx) = mpsc::channel(4);
        let all = Answers {
            elicitation: true,
            url: true,
            sampling: true,
        };
        let asker = questions.asker("ada", all, tx);
        let call = asker.ask(
            "gh",
            "sampling/createMessage",
            json!({"messages": [], "_meta": {"x": 1}}),
        );
        let call = tokio::spawn(call);
        let request = asked(&mut rx).await;
        assert_eq!(request["method"], "sampling/createMessage");
        assert!(request["params"].get("_meta").is_none());
        let id = request["id"].as_u64().unwrap_or_default();
        assert!(id < 1 << 53);
        let completion = json!({"role": "assistant", "content": {"type": "text", "text": "hi"},
                                "model": "m", "stopReason": "endTurn", "extra": "dropped"});
        assert!(
            !questions.answered("bob", id, Ok(completion.clone())),
            "not bob's question"
        );
        assert!(!questions.answered("ada", id + 1, Ok(completion.clone())));
        assert!(questions.answered("ada", id, Ok(completion)));
        let got = call.await.ok().flatten();
        assert_eq!(
            got,
            Some(Ok(
                json!({"role": "assistant", "content": {"type": "text", "text": "hi"},
                           "model": "m", "stopReason": "endTurn"})
            ))
        );
        assert_eq!(questions.len(), 0);
        assert!(
            !questions.answered("ada", id, Ok(json!({}))),
            "answered once"
        );
    }

    #[tokio::test]
    async fn a_refusal_declines_an_elicitation_and_fails_a_sampling() {
        let questions = Arc::new(Questions::default());
        let (tx, mut rx) = mpsc::channel(4);
        let all = Answers {
            elicitation: true,
            url: false,
            sampling: true,
        };
        let asker = questions.asker("", all, tx);
        let refuse = |_| RpcError {
            code: -1,
            message: "no\u{1b}[2J".into(),
            supported: Vec::new(),
        };
        let call = tokio::spawn(asker.ask("gh", "elicitation/create", json!({"message": "?"})));
        let request = asked(&mut rx).await;
        assert_eq!(request["params"]["message"], "[gh] ?");
        let id = request["id"].as_u64().unwrap_or_default();
        assert!(questions.answered("", id, Err(refuse(id))));
        assert_eq!(
            call.await.ok().flatten(),
            Some(Ok(json!({"action": "decline"})))
        );
        let call = tokio::spawn(asker.ask("gh", "sampling/createMessage", json!({})));
        let id = asked(&mut rx).await["id"].as_u64().unwrap_or_default();
        assert!(questions.answered("", id, Err(refuse(id))));
        match call.await.ok().flatten() {
            Some(Err(e)) => assert!(e.contains("refused") && !e.contains('\u{1b}'), "{e}"),
            other => panic!("{other:?}"),
        }
        let url = asker
            .ask("gh", "elicitation/create", json!({"mode": "url"}))
            .await;
        assert_eq!(url, None, "url mode was not declared: the handler decides");
        drop(rx);
        let gone = asker.ask("gh", "sampling/createMessage", json!({})).await;
        assert!(matches!(gone, Some(Err(_))), "{gone:?}");
        assert_eq!(questions.len(), 0);
    }
}
