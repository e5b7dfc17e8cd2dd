//! Stateless clients' calls that wait for input (multi-round-trip requests, SEP-2322).
//! A `tools/call` or `prompts/get` of the 2026-07-28 era runs as its own task; when its server asks
//! something (`questions.rs`: a stateless server's input requests, or a handshake
//! server's own request), the call pauses, and the client's request is answered
//! `input_required` with the questions and a `requestState`: a random token naming the
//! paused call, good once, for that caller and that method and name only, for
//! [`ANSWER_TIMEOUT`]. The client's next request brings `inputResponses` and the token back, the call goes
//! on, and that request is answered with its result (or the next questions). A token
//! that names nothing here (altered, used, expired, another replica's) is refused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};

use super::running::{Call, Next, Running, next};
use super::tasks::Tasks;
use super::{Front, Reply, Streamed, event, modern, with_body};
use crate::gateway::Caller;
use crate::gateway::elicit::ANSWER_TIMEOUT;
use crate::gateway::questions::{Answers, Pause, Questions};
use crate::mcp::ask::ASKER;
use crate::mcp::protocol::{self, INVALID_PARAMS};
use crate::mcp::task::{ESCALATION, Escalation};
use crate::sync::lock;
use crate::telemetry::{self, CURRENT};

/// Paused calls, by the token handed out; and calls their upstream made tasks
/// (`tasks.rs`), which outlive their request too.
#[derive(Default)]
pub struct Parked {
    calls: Mutex<HashMap<String, Paused>>,
    pub(super) tasks: Arc<Tasks>,
}

struct Paused {
    who: Arc<str>,
    tool: String,
    /// The questions not answered yet, by key.
    open: Map<String, Value>,
    /// The answers given so far.
    given: Map<String, Value>,
    resume: oneshot::Sender<Map<String, Value>>,
    running: Running,
    since: Instant,
}

impl Parked {
    /// Pauses `running` (of `who`, calling `tool`) for `open`: the token to hand out.
    fn park(&self, paused: Paused) -> Option<String> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).ok()?;
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut calls = lock(&self.calls);
        // Calls nobody came back for are ended (their tasks aborted).
        calls.retain(|_, p| p.since.elapsed() < ANSWER_TIMEOUT && !p.resume.is_closed());
        calls.insert(token.clone(), paused);
        Some(token)
    }

    fn take(&self, who: &str, tool: &str, token: &str) -> Option<Paused> {
        let mut calls = lock(&self.calls);
        match calls.get(token) {
            Some(p) if &*p.who == who && p.tool == tool => calls.remove(token),
            _ => None,
        }
    }
}

impl Front {
    /// A stateless client's `tools/call` or `prompts/get` (`method`), which may pause
    /// for the client's input (`answers`: what it declared it can give): polled here,
    /// a task once it pauses.
    pub(super) async fn call_stateless(
        &self,
        caller: Caller,
        answers: Answers,
        id: Value,
        method: String,
        params: Value,
    ) -> Reply {
        // What a token is bound to besides its caller: this method and name.
        let tool = format!("{method} {}", params["name"].as_str().unwrap_or(""));
        if params.get("requestState").is_some() {
            return self.resume(&caller, &id, &tool, &params).await;
        }
        // Answers sent with a first call (no state: the client knew the questions) are
        // taken for the questions asked under their keys; the rest are ignored.
        let given = match params.get("inputResponses").map(responses) {
            None => Map::new(),
            Some(Some(given)) => given.clone(),
            Some(None) => return refused(&id, BAD_RESPONSES),
        };
        let (notes_tx, notes) = mpsc::channel::<Vec<u8>>(16);
        let (pauses_tx, pauses) = mpsc::channel::<Pause>(1);
        let gateway = self.gateway.clone();
        let asker = Questions::pausing(caller.key(), answers, pauses_tx, given);
        // A client that takes tasks is handed one when the upstream makes its call one.
        let (escalation, tasked) = match answers.tasks && method == "tools/call" {
            true => {
                let (e, heard) = Escalation::new();
                (Some(e), Some(heard))
            }
            false => (None, None),
        };
        let (who, request) = (caller.clone(), id.clone());
        // The call may outlive this request (paused, or a task), so what it was scoped
        // with goes along with it.
        let trace = telemetry::current();
        let call = async move {
            let answer = gateway.answer(&who, &request, &method, params, &notes_tx);
            let answer = ASKER.scope(asker, answer);
            let answer = async move {
                match escalation {
                    Some(e) => ESCALATION.scope(e, answer).await,
                    None => answer.await,
                }
            };
            match trace {
                Some(t) => CURRENT.scope(t, answer).await,
                None => answer.await,
            }
        };
        let running = Running {
            notes,
            pauses,
            tasked,
            call: Call::Inline(Box::pin(call)),
        };
        self.drive(&caller, &tool, id, running, false).await
    }

    /// A stateless client coming back with `inputResponses` for a paused call of
    /// `tool` (its method and name).
    async fn resume(&self, caller: &Caller, id: &Value, tool: &str, params: &Value) -> Reply {
        let refuse = |message: &str| refused(id, message);
        let Some(given) = params.get("inputResponses").and_then(responses) else {
            return refuse(BAD_RESPONSES);
        };
        let token = params["requestState"].as_str().unwrap_or("");
        let Some(mut paused) = self.parked.take(caller.key(), tool, token) else {
            return refuse(
                "requestState names no call waiting for input here (altered, already used, expired, or another caller's)",
            );
        };
        // Answers to questions not asked are ignored; missing ones are asked again.
        for (key, answer) in given {
            if paused.open.remove(key).is_some() {
                paused.given.insert(key.clone(), answer.clone());
            }
        }
        if !paused.open.is_empty() {
            let open = paused.open.clone();
            paused.since = Instant::now();
            return match self.parked.park(paused) {
                Some(token) => {
                    let reply = protocol::response(id, input_required(open, &token));
                    with_body(StatusCode::OK, "application/json", reply)
                }
                None => refuse("edgar could not make a requestState"),
            };
        }
        let Paused {
            given,
            resume,
            running,
            ..
        } = paused;
        if resume.send(given).is_err() {
            return refuse("the call waiting for this input has ended");
        }
        self.drive(caller, tool, id.clone(), running, true).await
    }

    /// Answers request `id` with what `running` does next: its reply (its id made this
    /// request's when `resumed`), or its next questions (the call parked), as JSON, or
    /// as an event stream when notifications (progress) come first.
    async fn drive(
        &self,
        caller: &Caller,
        tool: &str,
        id: Value,
        mut running: Running,
        resumed: bool,
    ) -> Reply {
        // Notes first: what the call sent before it ended goes out before its end.
        let first = tokio::select! {
            biased;
            Some(note) = running.notes.recv() => Err(note),
            next = next(&mut running.call, &mut running.pauses, &mut running.tasked) => Ok(next),
        };
        let first = match first {
            Ok(next) => next,
            Err(note) => return self.stream(caller, tool, id, running, note, resumed),
        };
        let reply = settle(
            &self.parked,
            caller.key(),
            tool,
            &id,
            running,
            first,
            resumed,
        );
        let code = modern::error_code(&reply).map_or(StatusCode::OK, modern::status);
        with_body(code, "application/json", reply)
    }

    /// The stream of notifications that came before the call's reply or next questions.
    fn stream(
        &self,
        caller: &Caller,
        tool: &str,
        id: Value,
        mut running: Running,
        first: Vec<u8>,
        resumed: bool,
    ) -> Reply {
        let (body_tx, body_rx) = mpsc::channel::<Bytes>(16);
        let (parked, who, tool) = (
            self.parked.clone(),
            caller.key().to_owned(),
            tool.to_owned(),
        );
        tokio::spawn(async move {
            if body_tx.send(event(&first)).await.is_err() {
                return;
            }
            let last = loop {
                tokio::select! {
                    biased;
                    // The client went away: dropping `running` ends the call.
                    () = body_tx.closed() => return,
                    Some(note) = running.notes.recv() => {
                        if body_tx.send(event(&note)).await.is_err() {
                            return;
                        }
                    }
                    next = next(&mut running.call, &mut running.pauses, &mut running.tasked) => break next,
                }
            };
            let reply = settle(&parked, &who, &tool, &id, running, last, resumed);
            let _ = body_tx.send(event(&reply)).await;
        });
        let mut r = Response::new(Streamed(body_rx).boxed());
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        r
    }
}

/// The answer to request `id` for what the call did next: its reply (made this
/// request's when `resumed`), or its questions with the token it is parked under.
fn settle(
    parked: &Parked,
    who: &str,
    tool: &str,
    id: &Value,
    running: Running,
    next: Next,
    resumed: bool,
) -> Vec<u8> {
    match next {
        Next::Reply(reply) if reply.is_empty() => {
            protocol::error_response(id, -32603, "the call ended without a reply")
        }
        Next::Reply(reply) if resumed => with_id(&reply, id),
        Next::Reply(reply) => reply,
        Next::Tasked => match parked.tasks.adopt(who, running) {
            Ok(created) => protocol::response(id, created),
            Err(refused) => refused.response(id),
        },
        Next::Ask(Pause { requests, resume }) => {
            let mut running = running;
            running.call.detach();
            let paused = Paused {
                who: who.into(),
                tool: tool.to_owned(),
                open: requests.clone(),
                given: Map::new(),
                resume,
                running,
                since: Instant::now(),
            };
            match parked.park(paused) {
                Some(token) => protocol::response(id, input_required(requests, &token)),
                None => protocol::error_response(id, -32603, "edgar could not make a requestState"),
            }
        }
    }
}

const BAD_RESPONSES: &str = "inputResponses must be an object with an object answer per key";

/// A request's `inputResponses`, if well formed: an object of objects.
fn responses(given: &Value) -> Option<&Map<String, Value>> {
    given
        .as_object()
        .filter(|g| g.values().all(Value::is_object))
}

/// Request `id` refused as invalid (-32602, HTTP 400).
fn refused(id: &Value, message: &str) -> Reply {
    let reply = protocol::error_response(id, INVALID_PARAMS, message);
    with_body(StatusCode::BAD_REQUEST, "application/json", reply)
}

/// The result that says the call needs `open` answered, and comes back with `token`.
fn input_required(open: Map<String, Value>, token: &str) -> Value {
    json!({"resultType": "input_required", "inputRequests": open, "requestState": token})
}

/// `reply` as the answer to request `id` (a resumed call answers the request that
/// brought its last input, not the one that began it).
fn with_id(reply: &[u8], id: &Value) -> Vec<u8> {
    match serde_json::from_slice::<Value>(reply) {
        Ok(mut v) => {
            v["id"] = id.clone();
            protocol::encode_message(&v)
        }
        Err(_) => protocol::error_response(id, -32603, "the call's reply could not be read"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paused(who: &str, tool: &str) -> (Paused, oneshot::Receiver<Map<String, Value>>) {
        let (_notes_tx, notes) = mpsc::channel(1);
        let (_pauses_tx, pauses) = mpsc::channel(1);
        let (resume, resumed) = oneshot::channel();
        let mut call = Call::Inline(Box::pin(std::future::pending()));
        call.detach();
        let running = Running {
            notes,
            pauses,
            tasked: None,
            call,
        };
        let p = Paused {
            who: who.into(),
            tool: tool.into(),
            open: Map::new(),
            given: Map::new(),
            resume,
            running,
            since: Instant::now(),
        };
        (p, resumed)
    }

    #[tokio::test]
    async fn a_paused_call_resumes_once_for_its_caller_and_tool_only() {
        let parked = Parked::default();
        let (p, _resumed) = paused("ada", "gh__issue");
        let token = parked.park(p).unwrap_or_default();
        assert_eq!(token.len(), 32);
        assert!(
            parked.take("bob", "gh__issue", &token).is_none(),
            "another caller"
        );
        assert!(
            parked.take("ada", "gh__other", &token).is_none(),
            "another tool"
        );
        let mut altered = token.clone();
        altered.replace_range(0..1, if token.starts_with('0') { "1" } else { "0" });
        assert!(parked.take("ada", "gh__issue", &altered).is_none());
        assert!(parked.take("ada", "gh__issue", &token).is_some());
        assert!(
            parked.take("ada", "gh__issue", &token).is_none(),
            "used once"
        );
    }

    #[tokio::test]
    async fn a_call_nobody_waits_for_is_ended_when_the_next_one_parks() {
        let parked = Parked::default();
        let (p, resumed) = paused("ada", "t");
        let Call::Task { task, .. } = &p.running.call else {
            panic!("detached")
        };
        let task = task.clone();
        let token = parked.park(p).unwrap_or_default();
        drop(resumed);
        let (q, _keep) = paused("ada", "t");
        let _ = parked.park(q);
        assert!(parked.take("ada", "t", &token).is_none());
        tokio::task::yield_now().await;
        assert!(task.is_finished(), "its task was aborted");
    }
}
