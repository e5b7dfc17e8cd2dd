//! What comes in: answers matched to their requests, the server's notifications
//! (progress, list changes, cancellations), and its requests to us (roots, sampling,
//! elicitation, ping) answered through the client's handler, bounded in number.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::mcp::ask::{Asker, Question, Refusal};
use crate::mcp::protocol::{self, Incoming, METHOD_NOT_FOUND};
use crate::text::{shown, shown_message};

use super::{
    Context, Event, INTERNAL_ERROR, INVALID_REQUEST, MAX_SERVER_REQUESTS, Outbound, Outcome,
    Shared, lock,
};

pub(super) async fn dispatch(
    server: String,
    mut events: mpsc::Receiver<Event>,
    outgoing: mpsc::Sender<Outbound>,
    shared: Arc<Shared>,
    ctx: Context,
) {
    let reason = loop {
        let Some(event) = events.recv().await else {
            break "the transport ended".to_owned();
        };
        let messages = match event {
            Event::Closed(reason) => break reason,
            Event::Message(m) => m,
            Event::Failed { id, error } => {
                if let Some(waiter) = lock(&shared.pending).remove(&id) {
                    let _ = waiter.send(Outcome::Failed(error));
                }
                continue;
            }
        };
        for m in messages {
            match m {
                Incoming::Response {
                    id: Some(id),
                    outcome,
                } => match lock(&shared.pending).remove(&id) {
                    Some(waiter) => {
                        let _ = waiter.send(Outcome::Answer(outcome));
                    }
                    None => {
                        tracing::debug!(server, id, "ignoring a response to no pending request")
                    }
                },
                Incoming::Response { id: None, .. } => {
                    tracing::debug!(server, "ignoring a response with an id edgar never sent");
                }
                Incoming::Request { id, method, params } => {
                    answer(&server, id, &method, params, &outgoing, &ctx, &shared).await;
                }
                Incoming::Refused { id, reason } => {
                    tracing::debug!(server, "refusing {reason}");
                    let reply = protocol::error_response(&id, INVALID_REQUEST, &reason);
                    let _ = outgoing.send(Outbound::reply(reply)).await;
                }
                Incoming::Notification { method, params } => {
                    if method == "notifications/subscriptions/acknowledged" {
                        acknowledged(&params, &shared);
                        continue;
                    }
                    if method == "notifications/prompts/list_changed" {
                        shared
                            .prompt_changes
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    match (
                        &ctx.news,
                        crate::mcp::news::heard(&server, &method, &params),
                    ) {
                        // Nobody listening: nothing is kept.
                        (Some(news), Some(heard)) => drop(news.send(heard)),
                        (None, Some(_)) => {}
                        (_, None) => notification(&server, &method, &params, &shared),
                    }
                }
            }
        }
    };
    *lock(&shared.closed) = Some(reason);
    // Dropping the waiters wakes every pending request with the closed reason.
    lock(&shared.pending).clear();
}

/// A listen stream's acknowledgement: the request it names (by the subscription id in
/// `_meta`) is told, once.
fn acknowledged(params: &Value, shared: &Shared) {
    let named = params
        .get("_meta")
        .and_then(|m| m.get(protocol::META_SUBSCRIPTION_ID))
        .and_then(Value::as_u64);
    if let Some(waiter) = named.and_then(|id| lock(&shared.acks).remove(&id)) {
        let _ = waiter.send(());
    }
}

/// A server's progress params as passed on: numbers and a message made one safe line,
/// nothing else (the token is the follower's own). `None` when `progress` is not a number.
pub(super) fn progress_update(params: &Value) -> Option<Value> {
    let progress = params.get("progress").filter(|p| p.is_number())?;
    let mut update = json!({"progress": progress});
    if let Some(total) = params.get("total").filter(|t| t.is_number()) {
        update["total"] = total.clone();
    }
    if let Some(m) = params.get("message").and_then(Value::as_str) {
        update["message"] = json!(shown_message(m));
    }
    Some(update)
}

/// Largest log message `data` passed on, as JSON text; a larger one becomes a note.
const MAX_LOG_DATA: usize = 4 << 10;

/// A server's `notifications/message` params as they are passed on: a level of the
/// protocol's eight, a short logger name, and `data` (a string made safe to show, other
/// JSON as it is when small); `None` for anything else.
pub(super) fn log_message(params: &Value) -> Option<Value> {
    let level = params.get("level").and_then(Value::as_str)?;
    if !protocol::LOG_LEVELS.contains(&level) {
        return None;
    }
    let data = match params.get("data")? {
        Value::String(s) => json!(shown_message(s)),
        other if other.to_string().len() <= MAX_LOG_DATA => other.clone(),
        other => json!(format!(
            "[edgar: {} bytes of log data left out]",
            other.to_string().len()
        )),
    };
    let mut message = json!({"level": level, "data": data});
    if let Some(logger) = params.get("logger").and_then(Value::as_str) {
        message["logger"] = json!(shown_message(&logger.chars().take(128).collect::<String>()));
    }
    Some(message)
}

pub(super) fn notification(server: &str, method: &str, params: &Value, shared: &Shared) {
    match method {
        "notifications/tools/list_changed" => shared.list_changed.notify_one(),
        "notifications/message" => {
            let level = params
                .get("level")
                .and_then(Value::as_str)
                .unwrap_or("info");
            let data = params
                .get("data")
                .map(|d| d.to_string())
                .unwrap_or_default();
            tracing::info!(server, level, "server log: {}", shown(&data));
            if let Some(message) = log_message(params) {
                let sinks: Vec<_> = lock(&shared.logs).values().cloned().collect();
                for sink in sinks {
                    sink(message.clone());
                }
            }
        }
        "notifications/progress" => {
            tracing::debug!(server, "progress: {}", shown(&params.to_string()));
            let token = params.get("progressToken").and_then(Value::as_u64);
            let sink = token.and_then(|t| lock(&shared.progress).get(&t).cloned());
            if let (Some(sink), Some(update)) = (sink, progress_update(params)) {
                sink(update);
            }
        }
        other => tracing::debug!(server, "notification {}", shown(other)),
    }
}

/// Answers one request from the server.
pub(super) async fn answer(
    server: &str,
    id: Value,
    method: &str,
    params: Value,
    outgoing: &mpsc::Sender<Outbound>,
    ctx: &Context,
    shared: &Shared,
) {
    let reply = match method {
        "ping" => protocol::response(&id, json!({})),
        "roots/list" => {
            let roots: Vec<Value> = ctx
                .roots
                .iter()
                .map(|r| {
                    let name = r
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    json!({"uri": file_uri(r), "name": name})
                })
                .collect();
            protocol::response(&id, json!({ "roots": roots }))
        }
        "elicitation/create" | "sampling/createMessage" => {
            let Ok(permit) = shared.server_requests.clone().try_acquire_owned() else {
                tracing::warn!(
                    server,
                    "refusing {method}: {MAX_SERVER_REQUESTS} requests from this server are already waiting"
                );
                let reply = protocol::error_response(
                    &id,
                    INTERNAL_ERROR,
                    &format!(
                        "edgar is already handling {MAX_SERVER_REQUESTS} requests from this server; retry later"
                    ),
                );
                let _ = outgoing.send(Outbound::reply(reply)).await;
                return;
            };
            // The caller of the call running now, when it can be asked; else the handler,
            // which may wait for a human, so it runs elsewhere and answers later.
            let asker = Asker::pick(&lock(&shared.askers));
            let handler = ctx.handler.clone();
            let (server, method, outgoing) =
                (server.to_owned(), method.to_owned(), outgoing.clone());
            tokio::spawn(async move {
                let question = Question {
                    key: "input".into(),
                    method: method.clone(),
                    params: params.clone(),
                };
                let asked = match asker {
                    Some(a) => a.ask(&server, vec![question]).await,
                    None => None,
                };
                let answer = match asked {
                    Some(Ok(mut answers)) if !answers.is_empty() => Some(Ok(answers.remove(0))),
                    Some(Err(Refusal::Failed(refusal))) => Some(Err(refusal)),
                    Some(Err(Refusal::Undeclared(what))) => {
                        Some(Err(format!("the client did not declare {what}")))
                    }
                    Some(Ok(_)) | None => {
                        let (m, s) = (method.clone(), server.clone());
                        tokio::task::spawn_blocking(move || match m.as_str() {
                            "elicitation/create" if handler.supports_elicitation() => {
                                handler.elicit(&s, &params)
                            }
                            "sampling/createMessage" => handler.sample(&s, &params),
                            _ => None,
                        })
                        .await
                        .ok()
                        .flatten()
                        .map(Ok)
                    }
                };
                let reply = match answer {
                    Some(Ok(result)) => protocol::response(&id, result),
                    Some(Err(refusal)) => protocol::error_response(&id, INTERNAL_ERROR, &refusal),
                    None => protocol::error_response(
                        &id,
                        METHOD_NOT_FOUND,
                        &format!("edgar does not support {method}"),
                    ),
                };
                let _ = outgoing.send(Outbound::reply(reply)).await;
                drop(permit);
            });
            return;
        }
        other => {
            tracing::debug!(server, "declining request {}", shown(other));
            protocol::error_response(&id, METHOD_NOT_FOUND, "method not supported by edgar")
        }
    };
    let _ = outgoing.send(Outbound::reply(reply)).await;
}

/// A `file://` URI for an absolute path, percent-encoding what a URI cannot hold.
pub(crate) fn file_uri(path: &std::path::Path) -> String {
    let mut out = String::from("file://");
    for b in path.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
