//! Questions upstream servers ask a client of the gateway (`elicitation/create`,
//! `sampling/createMessage`, `roots/list`) while its call runs. A client of the
//! handshake era is asked with our request on its call's own stream (stdout, or the
//! event stream of its POST) and answers in a message that names our id. A stateless
//! client cannot be asked mid-call: its call pauses, the request answers with the
//! questions as input requests (`input_required`), and the call goes on when the
//! client's next request brings the answers (`http/parked.rs`). Only a client that
//! declared the capability is asked, only the caller whose call caused the question may
//! answer it, and one that does not answer within [`ANSWER_TIMEOUT`] is taken to decline.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};

use super::elicit::{ANSWER_TIMEOUT, accepted_shape, disclosed};
use crate::mcp::ask::{Asker, Question, Refusal, capability};
use crate::mcp::protocol::{self, RpcError};
use crate::sync::lock;

/// What a client declared it can answer, in its capabilities (`initialize`'s, or a
/// stateless request's `_meta`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Answers {
    /// Form-mode elicitation.
    pub elicitation: bool,
    /// URL-mode elicitation (declared as `elicitation.url`).
    pub url: bool,
    pub sampling: bool,
    pub roots: bool,
    /// The tasks extension: a call of this client may be handed back as a task.
    pub tasks: bool,
}

tokio::task_local! {
    /// What the client of the request being answered declared it can answer (set
    /// around each HTTP request): whether it may be sent to a URL, for one.
    pub static DECLARED: Answers;
}

impl Answers {
    /// What `capabilities` declare; an empty `elicitation` object means forms, as the
    /// protocol says.
    pub fn declared(capabilities: &Value) -> Answers {
        let elicitation = capabilities.get("elicitation").filter(|e| e.is_object());
        Answers {
            elicitation: elicitation.is_some_and(|e| {
                e.as_object().is_some_and(Map::is_empty) || e.get("form").is_some()
            }),
            url: elicitation.is_some_and(|e| e.get("url").is_some_and(Value::is_object)),
            sampling: capabilities.get("sampling").is_some_and(Value::is_object),
            roots: capabilities.get("roots").is_some_and(Value::is_object),
            tasks: capabilities["extensions"][crate::mcp::task::EXTENSION].is_object(),
        }
    }

    /// The question capabilities declared, by name (`elicitation` for either mode).
    pub fn names(self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.elicitation || self.url {
            out.push("elicitation");
        }
        if self.sampling {
            out.push("sampling");
        }
        if self.roots {
            out.push("roots");
        }
        out
    }

    pub fn any(self) -> bool {
        self.elicitation || self.url || self.sampling || self.roots
    }

    fn takes(self, question: &Question) -> bool {
        match question.method.as_str() {
            "elicitation/create" => {
                if question.params.get("mode").and_then(Value::as_str) == Some("url") {
                    self.url
                } else {
                    self.elicitation
                }
            }
            "sampling/createMessage" => self.sampling,
            "roots/list" => self.roots,
            _ => false,
        }
    }
}

/// A stateless client's call stopped for its questions: the input requests to hand the
/// client, and where its answers (by key) go.
pub struct Pause {
    pub requests: Map<String, Value>,
    pub resume: oneshot::Sender<Map<String, Value>>,
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
    /// An asker for one call of `who`, a handshake-era client that takes `answers`: its
    /// questions go out on `stream` (the call's own stream), one after another.
    pub fn asker(
        self: &Arc<Self>,
        who: &str,
        answers: Answers,
        stream: mpsc::Sender<Vec<u8>>,
    ) -> Asker {
        let questions = self.clone();
        let owner: Arc<str> = who.into();
        Asker::new(who, move |server, asked| {
            let (questions, owner, stream) = (questions.clone(), owner.clone(), stream.clone());
            let server = server.to_owned();
            Box::pin(async move {
                if !asked.iter().all(|q| answers.takes(q)) {
                    return None;
                }
                let mut replies = Vec::with_capacity(asked.len());
                for q in asked {
                    let got = questions.ask(&owner, &server, &q, &stream).await;
                    match reshaped(&q.method, got) {
                        Ok(reply) => replies.push(reply),
                        Err(e) => return Some(Err(Refusal::Failed(e))),
                    }
                }
                Some(Ok(replies))
            })
        })
        .declaring(&answers.names())
    }

    /// An asker for one call of a stateless client that declared `answers`: its
    /// questions pause the call (`pauses` hands them to the client's request) until
    /// the answers come; a question the client did not declare it can answer fails the
    /// request (-32021).
    /// `given`: answers the client sent with the call itself, taken first (by key) for
    /// questions asked under those keys.
    pub fn pausing(
        who: &str,
        answers: Answers,
        pauses: mpsc::Sender<Pause>,
        given: Map<String, Value>,
    ) -> Asker {
        let given = Arc::new(Mutex::new(given));
        let asker = Asker::new(who, move |server, asked| {
            let (pauses, server, early) = (pauses.clone(), server.to_owned(), given.clone());
            Box::pin(async move {
                if let Some(q) = asked.iter().find(|q| !answers.takes(q)) {
                    return Some(Err(Refusal::Undeclared(
                        capability(&q.method).unwrap_or("that"),
                    )));
                }
                let mut given: Map<String, Value> = {
                    let mut early = lock(&early);
                    asked
                        .iter()
                        .filter_map(|q| early.remove(&q.key).map(|a| (q.key.clone(), a)))
                        .collect()
                };
                let requests: Map<String, Value> = asked
                    .iter()
                    .filter(|q| !given.contains_key(&q.key))
                    .map(|q| {
                        let params = shown_to_client(&server, &q.method, q.params.clone());
                        (q.key.clone(), json!({"method": q.method, "params": params}))
                    })
                    .collect();
                if !requests.is_empty() {
                    let (resume, answered) = oneshot::channel();
                    if pauses.send(Pause { requests, resume }).await.is_err() {
                        return Some(Err(Refusal::Failed("the client went away".into())));
                    }
                    let Ok(Ok(later)) = tokio::time::timeout(ANSWER_TIMEOUT, answered).await else {
                        tracing::info!(server, "a stateless client did not come back with answers");
                        return Some(Err(Refusal::Failed(format!(
                            "the client did not answer within {} s",
                            ANSWER_TIMEOUT.as_secs()
                        ))));
                    };
                    given.extend(later);
                }
                let mut replies = Vec::with_capacity(asked.len());
                for q in &asked {
                    let got = given.remove(&q.key).ok_or(());
                    match reshaped(&q.method, got.map(Ok)) {
                        Ok(reply) => replies.push(reply),
                        Err(e) => return Some(Err(Refusal::Failed(e))),
                    }
                }
                Some(Ok(replies))
            })
        });
        let asker = asker.declaring(&answers.names());
        if answers.tasks {
            asker
        } else {
            asker.without_tasks()
        }
    }

    /// Asks one question on `stream`: the client's outcome, or `Err(())` for none.
    async fn ask(
        &self,
        who: &Arc<str>,
        server: &str,
        question: &Question,
        stream: &mpsc::Sender<Vec<u8>>,
    ) -> Result<Result<Value, RpcError>, ()> {
        let params = shown_to_client(server, &question.method, question.params.clone());
        // Random, so an id says nothing of other questions and cannot be guessed.
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).map_err(|_| ())?;
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
        let request = protocol::request(id, &question.method, params);
        stream.send(request).await.map_err(|_| ())?;
        let got = tokio::time::timeout(ANSWER_TIMEOUT, rx).await;
        tracing::info!(
            server,
            "{} forwarded to the client: {}",
            question.method,
            match &got {
                Ok(Ok(Ok(_))) => "answered",
                Ok(Ok(Err(_))) => "refused",
                _ => "no answer",
            }
        );
        match got {
            Ok(Ok(outcome)) => Ok(outcome),
            _ => Err(()),
        }
    }

    /// [`Questions::answered`] for a response as it came off the wire.
    pub fn answered_raw(
        &self,
        who: &str,
        id: u64,
        outcome: Result<Box<serde_json::value::RawValue>, RpcError>,
    ) -> bool {
        let outcome = outcome.map(|raw| serde_json::from_str(raw.get()).unwrap_or_default());
        self.answered(who, id, outcome)
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

/// A question as the client is shown it: an elicitation's words prefixed with the
/// server's name (`disclosed`); anything else without its `_meta`, and a sampling
/// request asking for no context.
fn shown_to_client(server: &str, method: &str, mut params: Value) -> Value {
    if method == "elicitation/create" {
        return disclosed(server, &params);
    }
    if let Some(p) = params.as_object_mut() {
        p.remove("_meta");
        // To the client every upstream is one server, edgar: a sampling request that
        // asks for "thisServer" or "allServers" context would be sent the other
        // servers' context too. It gets none.
        if method == "sampling/createMessage" && p.contains_key("includeContext") {
            p.insert("includeContext".into(), json!("none"));
        }
    }
    params
}

/// What goes back to the server for the client's outcome (`Err(())`: none came): an
/// elicitation's `action` and `content` (no answer or a refusal: declined, not
/// guessed), a completion's `role`, `content`, `model` and `stopReason`, the roots'
/// `uri` and `name`; else why there is no answer.
fn reshaped(method: &str, got: Result<Result<Value, RpcError>, ()>) -> Result<Value, String> {
    match (method, got) {
        ("elicitation/create", Ok(Ok(result))) => Ok(accepted_shape(&result)),
        ("elicitation/create", _) => Ok(json!({"action": "decline"})),
        ("sampling/createMessage", Ok(Ok(result))) => sampled_shape(&result)
            .ok_or_else(|| "the client's completion is not a sampling result".to_owned()),
        ("roots/list", Ok(Ok(result))) => rooted_shape(&result)
            .ok_or_else(|| "the client's roots are not a roots list".to_owned()),
        (_, Ok(Err(e))) => Err(format!(
            "the client refused: {}",
            crate::text::shown_message(&e.message)
        )),
        (_, _) => Err("the client gave no answer".to_owned()),
    }
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

/// The client's roots: each root's `uri` (a string) and `name` (when a string) only.
fn rooted_shape(result: &Value) -> Option<Value> {
    let roots = result.get("roots")?.as_array()?;
    let roots: Vec<Value> = roots
        .iter()
        .filter_map(|r| {
            let uri = r.get("uri")?.as_str()?;
            let mut root = json!({"uri": uri});
            if let Some(name) = r.get("name").and_then(Value::as_str) {
                root["name"] = json!(name);
            }
            Some(root)
        })
        .collect();
    Some(json!({"roots": roots}))
}

#[cfg(test)]
mod tests;
