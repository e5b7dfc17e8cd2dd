//! The tasks extension (`io.modelcontextprotocol/tasks`, stateless era): a server may
//! answer a `tools/call` with a task (`resultType: "task"`) instead of its result, and
//! edgar polls `tasks/get` until the task ends, answering its input requests with
//! `tasks/update`. Each poll has the tool timeout; the whole task has the server's
//! task deadline (`task_deadline_sec`), after which it is cancelled at the server.
//! The session cancels every task still followed when it closes (`Tasks::cancel_all`),
//! so Ctrl-C in `edgar mcp call` stops the work at the server too.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::McpError;
use super::connection::{ClientHandler, Connection};
use super::input;
use crate::sync::lock;
use crate::text::{shown, shown_message};

/// The extension's name, as declared in the client's capabilities.
pub const EXTENSION: &str = super::protocol::TASKS_EXTENSION;
/// Polling intervals honoured: a server cannot make edgar spin or sleep for an hour.
const MIN_POLL: Duration = Duration::from_millis(100);
const MAX_POLL: Duration = Duration::from_secs(30);
const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// How long a `tasks/cancel` is given when edgar gives up on a task.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest task id kept.
const MAX_TASK_ID: usize = 256;

/// A task's state as `tasks/get` (or the creating result) reports it.
#[derive(Deserialize)]
struct State<'a> {
    #[serde(rename = "taskId")]
    task_id: String,
    status: String,
    #[serde(rename = "statusMessage", default)]
    status_message: Option<String>,
    #[serde(rename = "pollIntervalMs", default)]
    poll_interval_ms: Option<f64>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<TaskError>,
    #[serde(rename = "inputRequests", default)]
    input_requests: Option<Value>,
}

#[derive(Deserialize)]
struct TaskError {
    #[serde(default)]
    code: i64,
    #[serde(default)]
    message: String,
}

/// Whether a result is a task handle.
pub(crate) fn is_task(result: &str) -> bool {
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(rename = "resultType", borrow, default)]
        result_type: Option<&'a str>,
    }
    serde_json::from_str::<Kind<'_>>(result).is_ok_and(|k| k.result_type == Some("task"))
}

/// Set around a call whose caller takes tasks itself (a gateway's client that declared
/// the extension): told when the server makes the call a task, so that caller can be
/// handed a task of its own at once while edgar follows the server's to its end.
#[derive(Clone)]
pub struct Escalation {
    told: mpsc::Sender<()>,
    fired: Arc<AtomicBool>,
}

tokio::task_local! {
    pub static ESCALATION: Escalation;
}

impl Escalation {
    /// A hook, and where it is heard (once).
    pub fn new() -> (Escalation, mpsc::Receiver<()>) {
        let (told, heard) = mpsc::channel(1);
        let fired = Arc::new(AtomicBool::new(false));
        (Escalation { told, fired }, heard)
    }

    fn fire(&self) {
        if !self.fired.swap(true, Ordering::Relaxed) {
            let _ = self.told.try_send(());
        }
    }
}

/// Whether the call running now became a task for a caller that takes tasks: its
/// failure is then the task's (`failed`), not a tool result.
pub fn escalated() -> bool {
    ESCALATION
        .try_with(|e| e.fired.load(Ordering::Relaxed))
        .unwrap_or(false)
}

/// The tasks a session follows, per server, so closing it can cancel them.
#[derive(Default)]
pub(crate) struct Tasks {
    ids: Mutex<HashSet<String>>,
}

impl Tasks {
    /// Cancels every task still followed (best effort, briefly): the session is closing.
    pub(crate) async fn cancel_all(&self, conn: &Connection) {
        let ids: Vec<String> = lock(&self.ids).drain().collect();
        for id in ids {
            let _ = conn
                .request("tasks/cancel", json!({"taskId": id}), CANCEL_TIMEOUT)
                .await;
        }
    }
}

/// A followed task, forgotten when its following ends; cancelled at the server when
/// that following was dropped before the task ended.
struct Left<'a> {
    conn: &'a Connection,
    tasks: &'a Tasks,
    id: &'a str,
    finished: bool,
}

impl Drop for Left<'_> {
    fn drop(&mut self) {
        lock(&self.tasks.ids).remove(self.id);
        if self.finished {
            return;
        }
        let (conn, id) = (self.conn.clone(), self.id.to_owned());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = conn
                    .request("tasks/cancel", json!({"taskId": id}), CANCEL_TIMEOUT)
                    .await;
            });
        }
    }
}

/// What following a task needs.
pub(crate) struct Follow<'a> {
    pub server: &'a str,
    pub conn: &'a Connection,
    pub handler: &'a Arc<dyn ClientHandler>,
    pub tasks: &'a Tasks,
    /// Each poll's deadline.
    pub poll_timeout: Duration,
    /// The whole task's.
    pub deadline: Duration,
}

impl Follow<'_> {
    /// Follows the task `created` names to its end: the result a synchronous call would
    /// have returned, or the task's error.
    pub(crate) async fn run(&self, created: &str) -> Result<Box<RawValue>, McpError> {
        let state: State<'_> = serde_json::from_str(created)
            .map_err(|e| self.bad(format!("its task handle does not decode ({e})")))?;
        let id = state.task_id.clone();
        if id.is_empty() || id.len() > MAX_TASK_ID {
            return Err(self.bad("its task id is empty or too long".into()));
        }
        lock(&self.tasks.ids).insert(id.clone());
        let _ = ESCALATION.try_with(Escalation::fire);
        // Dropped unfinished (the caller gave up: a client cancelled its task), the task
        // is cancelled at the server too.
        let mut left = Left {
            conn: self.conn,
            tasks: self.tasks,
            id: &id,
            finished: false,
        };
        let outcome = tokio::time::timeout(self.deadline, self.poll(&id, created)).await;
        let outcome = match outcome {
            Ok(r) => r,
            Err(_) => {
                let _ = self
                    .conn
                    .request("tasks/cancel", json!({"taskId": id}), CANCEL_TIMEOUT)
                    .await;
                Err(McpError::Timeout {
                    server: self.server.to_owned(),
                    method: format!("task {} (its deadline; cancelled)", shown(&id)),
                    timeout: self.deadline,
                })
            }
        };
        left.finished = true;
        outcome
    }

    async fn poll(&self, id: &str, created: &str) -> Result<Box<RawValue>, McpError> {
        let mut text: Box<RawValue> = RawValue::from_string(created.to_owned())
            .map_err(|e| self.bad(format!("its task handle does not decode ({e})")))?;
        loop {
            let state: State<'_> = serde_json::from_str(text.get())
                .map_err(|e| self.bad(format!("its task state does not decode ({e})")))?;
            if state.task_id != id {
                return Err(self.bad(format!(
                    "it answered for task {} when asked about {}",
                    shown(&state.task_id),
                    shown(id)
                )));
            }
            if let Some(m) = &state.status_message {
                self.handler.progress(
                    self.server,
                    &shown_message(&format!("{}: {m}", state.status)),
                );
            }
            match state.status.as_str() {
                "completed" => {
                    let result = state
                        .result
                        .ok_or_else(|| self.bad("its completed task has no result".into()))?;
                    return Ok(result.to_owned());
                }
                "failed" => {
                    let e = state.error.unwrap_or(TaskError {
                        code: 0,
                        message: "(no error given)".into(),
                    });
                    return Err(McpError::Server {
                        server: self.server.to_owned(),
                        method: "tools/call".into(),
                        code: e.code,
                        message: shown_message(&e.message),
                    });
                }
                "cancelled" => {
                    return Err(McpError::Exchange {
                        server: self.server.to_owned(),
                        method: "tools/call".into(),
                        reason: "the server cancelled the task".into(),
                    });
                }
                "input_required" => {
                    let asked = json!({"resultType": "input_required",
                        "inputRequests": state.input_requests.unwrap_or(json!({}))});
                    if let Some(asked) = input::required(self.server, &asked.to_string())? {
                        let responses =
                            input::answer(self.server, self.handler, asked.requests).await?;
                        self.conn
                            .request(
                                "tasks/update",
                                json!({"taskId": id, "inputResponses": responses}),
                                self.poll_timeout,
                            )
                            .await?;
                    }
                }
                "working" => {}
                other => {
                    return Err(self.bad(format!("its task status is {}", shown(other))));
                }
            }
            let wait = state
                .poll_interval_ms
                .filter(|ms| ms.is_finite() && *ms >= 0.0)
                .map_or(DEFAULT_POLL, |ms| Duration::from_millis(ms as u64))
                .clamp(MIN_POLL, MAX_POLL);
            tokio::time::sleep(wait).await;
            text = self
                .conn
                .request_raw("tasks/get", json!({"taskId": id}), self.poll_timeout)
                .await?;
        }
    }

    fn bad(&self, reason: String) -> McpError {
        McpError::Protocol {
            server: self.server.to_owned(),
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_caller_that_takes_tasks_hears_once_that_its_call_became_one() {
        assert!(!escalated(), "outside any call");
        let (hook, mut heard) = Escalation::new();
        let inside = ESCALATION.scope(hook, async {
            assert!(!escalated(), "not yet a task");
            let _ = ESCALATION.try_with(Escalation::fire);
            let _ = ESCALATION.try_with(Escalation::fire);
            escalated()
        });
        assert!(inside.await);
        assert_eq!(heard.recv().await, Some(()));
        assert_eq!(heard.recv().await, None, "told once");
    }

    #[test]
    fn only_a_task_handle_is_a_task() {
        assert!(is_task(r#"{"resultType":"task","taskId":"t"}"#));
        assert!(!is_task(r#"{"resultType":"complete","content":[]}"#));
        assert!(!is_task(r#"{"content":[]}"#));
        assert!(!is_task("not json"));
    }
}
