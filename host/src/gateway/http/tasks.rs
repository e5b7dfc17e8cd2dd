//! Tasks served to stateless clients (the tasks extension, SEP-2663). When an upstream
//! server makes a call of a client that declared the extension a task, edgar hands that
//! client a task of its own at once (`CreateTaskResult`) while it goes on following the
//! upstream's: the call runs on, its result crosses the guard as any call's does, and
//! `tasks/get` reads where it is. Questions the upstream asks on the way park the task
//! (`input_required`, the questions as `inputRequests`) until `tasks/update` brings
//! every answer; `tasks/cancel` ends the call, and with it the upstream's task.
//!
//! A task id is random, names a task of its caller only (another caller's is "no such
//! task"), and lives in this process: a replica answers for the tasks it runs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

use super::running::{Next, Running, next};
use crate::gateway::refused::Refused;
use crate::mcp::protocol::{INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND};
use crate::sync::lock;

/// How long a task stays readable after it last changed.
const TTL: Duration = Duration::from_secs(3600);
/// How often a client is asked to poll.
const POLL_MS: u64 = 500;
/// Most tasks one caller keeps; a new one ends its oldest.
const PER_CALLER: usize = 64;

/// The tasks of every caller, by id.
#[derive(Default)]
pub struct Tasks {
    tasks: Mutex<HashMap<String, Task>>,
}

struct Task {
    who: Arc<str>,
    created: String,
    updated: String,
    /// When it last changed, for expiry and for a caller's oldest.
    touched: Instant,
    state: State,
    /// The call, while it runs.
    driver: Option<AbortHandle>,
}

enum State {
    Working,
    /// Waiting for answers: those still open, those given, and where they go.
    Input {
        open: Map<String, Value>,
        given: Map<String, Value>,
        resume: Option<oneshot::Sender<Map<String, Value>>>,
    },
    Completed(Value),
    Failed(Value),
    Cancelled,
}

impl State {
    fn name(&self) -> &'static str {
        match self {
            State::Working => "working",
            State::Input { .. } => "input_required",
            State::Completed(_) => "completed",
            State::Failed(_) => "failed",
            State::Cancelled => "cancelled",
        }
    }

    fn terminal(&self) -> bool {
        matches!(
            self,
            State::Completed(_) | State::Failed(_) | State::Cancelled
        )
    }
}

impl Task {
    fn set(&mut self, state: State) {
        self.state = state;
        self.updated = now();
        self.touched = Instant::now();
    }

    /// What `tasks/get` (and, without its result, the creating call) says of it.
    fn detailed(&self, id: &str) -> Value {
        let mut v = json!({"taskId": id, "status": self.state.name(),
            "createdAt": self.created, "lastUpdatedAt": self.updated,
            "ttlMs": TTL.as_millis() as u64, "pollIntervalMs": POLL_MS});
        match &self.state {
            State::Input { open, .. } => v["inputRequests"] = Value::Object(open.clone()),
            State::Completed(result) => v["result"] = result.clone(),
            State::Failed(error) => v["error"] = error.clone(),
            State::Working | State::Cancelled => {}
        }
        v
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        if let Some(d) = self.driver.take() {
            d.abort();
        }
    }
}

impl Tasks {
    /// Makes `running` (a call of `who` its upstream made a task) a task of this
    /// gateway, driven on its own from now: the `CreateTaskResult` to answer with. The
    /// task is stored before the answer exists, so a `tasks/get` right after finds it.
    pub(super) fn adopt(self: &Arc<Self>, who: &str, running: Running) -> Result<Value, Refused> {
        let id = token().ok_or((INTERNAL_ERROR, "edgar could not make a task id".to_owned()))?;
        let stamp = now();
        let task = Task {
            who: who.into(),
            created: stamp.clone(),
            updated: stamp,
            touched: Instant::now(),
            state: State::Working,
            driver: None,
        };
        let mut created = task.detailed(&id);
        created["resultType"] = json!("task");
        {
            let mut tasks = lock(&self.tasks);
            tasks.retain(|_, t| t.touched.elapsed() < TTL);
            let mine: Vec<(Instant, String)> = tasks
                .iter()
                .filter(|(_, t)| *t.who == *who)
                .map(|(k, t)| (t.touched, k.clone()))
                .collect();
            if mine.len() >= PER_CALLER
                && let Some((_, oldest)) = mine.iter().min()
            {
                tasks.remove(oldest);
            }
            tasks.insert(id.clone(), task);
        }
        let me = Arc::downgrade(self);
        let key = id.clone();
        let driver = tokio::spawn(async move { drive(me, key, running).await });
        if let Some(t) = lock(&self.tasks).get_mut(&id) {
            t.driver = Some(driver.abort_handle());
        }
        Ok(created)
    }

    /// `tasks/get`, `tasks/update` or `tasks/cancel` of `who`.
    pub(super) fn request(
        &self,
        who: &str,
        method: &str,
        params: &Value,
    ) -> Result<Value, Refused> {
        let id = params["taskId"].as_str().unwrap_or("");
        let mut tasks = lock(&self.tasks);
        tasks.retain(|_, t| t.touched.elapsed() < TTL);
        let Some(task) = tasks.get_mut(id).filter(|t| *t.who == *who) else {
            return Err(Refused::from((INVALID_PARAMS, "no such task".to_owned()))
                .with_data(json!({"taskId": id})));
        };
        let ack = json!({"resultType": "complete"});
        match method {
            "tasks/get" => {
                let mut v = task.detailed(id);
                v["resultType"] = json!("complete");
                Ok(v)
            }
            "tasks/update" => {
                let Some(given) = params["inputResponses"]
                    .as_object()
                    .filter(|g| g.values().all(Value::is_object))
                else {
                    return Err((
                        INVALID_PARAMS,
                        "inputResponses must be an object with an object answer per key".to_owned(),
                    )
                        .into());
                };
                // Answers to questions not open are ignored.
                if let State::Input {
                    open,
                    given: kept,
                    resume,
                } = &mut task.state
                {
                    for (key, answer) in given {
                        if open.remove(key).is_some() {
                            kept.insert(key.clone(), answer.clone());
                        }
                    }
                    if open.is_empty() {
                        let answers = std::mem::take(kept);
                        if let Some(r) = resume.take() {
                            let _ = r.send(answers);
                        }
                        task.set(State::Working);
                    }
                }
                Ok(ack)
            }
            "tasks/cancel" => {
                if !task.state.terminal() {
                    task.set(State::Cancelled);
                    if let Some(d) = task.driver.take() {
                        d.abort();
                    }
                }
                Ok(ack)
            }
            other => Err((METHOD_NOT_FOUND, format!("unknown method {other}")).into()),
        }
    }

    /// Applies `change` to task `id` unless it ended (a cancelled task stays cancelled).
    fn change_unended(&self, id: &str, change: impl FnOnce(&mut Task)) {
        if let Some(t) = lock(&self.tasks).get_mut(id)
            && !t.state.terminal()
        {
            change(t);
        }
    }
}

/// Runs the call of task `id` to its end, parking it on each question.
async fn drive(tasks: std::sync::Weak<Tasks>, id: String, mut running: Running) {
    loop {
        let step = tokio::select! {
            biased;
            // Progress and logs have no request to ride on: a task's client polls.
            Some(_) = running.notes.recv() => continue,
            step = next(&mut running.call, &mut running.pauses, &mut running.tasked) => step,
        };
        let Some(tasks) = tasks.upgrade() else {
            return;
        };
        match step {
            Next::Tasked => {}
            Next::Ask(pause) => tasks.change_unended(&id, |t| {
                t.set(State::Input {
                    open: pause.requests,
                    given: Map::new(),
                    resume: Some(pause.resume),
                });
            }),
            Next::Reply(reply) => {
                let end = ended(&reply);
                tasks.change_unended(&id, |t| {
                    t.driver = None;
                    t.set(end);
                });
                return;
            }
        }
    }
}

/// The state a call's reply leaves its task in: completed with its result (a tool
/// error included), or failed with the error a protocol failure answered.
fn ended(reply: &[u8]) -> State {
    let failed = |message: &str| State::Failed(json!({"code": INTERNAL_ERROR, "message": message}));
    let Ok(mut v) = serde_json::from_slice::<Value>(reply) else {
        return failed("the call ended without a reply");
    };
    if let Some(e) = v.get_mut("error").filter(|e| e.is_object()) {
        return State::Failed(e.take());
    }
    match v.get_mut("result").filter(|r| r.is_object()) {
        Some(r) => State::Completed(r.take()),
        None => failed("the call's reply has neither a result nor an error"),
    }
}

fn token() -> Option<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn now() -> String {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = crate::text::rfc3339(t.as_secs());
    // Milliseconds, so two changes within a second read in order.
    format!("{}.{:03}Z", secs.trim_end_matches('Z'), t.subsec_millis())
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::atomic::{AtomicBool, Ordering};

    use tokio::sync::mpsc;

    use super::*;
    use crate::gateway::http::running::Call;
    use crate::gateway::questions::Pause;

    /// A running call made by `make`, which is handed where its questions go.
    fn running<F: Future<Output = Vec<u8>> + Send + 'static>(
        make: impl FnOnce(mpsc::Sender<Pause>) -> F,
    ) -> Running {
        let (_notes_tx, notes) = mpsc::channel(1);
        let (pauses_tx, pauses) = mpsc::channel(1);
        Running {
            notes,
            pauses,
            tasked: None,
            call: Call::Inline(Box::pin(make(pauses_tx))),
        }
    }

    fn reply(result: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "result": result}))
            .unwrap_or_default()
    }

    fn get(tasks: &Tasks, who: &str, id: &str) -> Result<Value, Refused> {
        tasks.request(who, "tasks/get", &json!({"taskId": id}))
    }

    /// `tasks/get` until the status is `want` (the driver runs on the same runtime).
    async fn settled(tasks: &Tasks, id: &str, want: &str) -> Value {
        for _ in 0..200 {
            if let Ok(v) = get(tasks, "ada", id)
                && v["status"] == want
            {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("task {id} never became {want}");
    }

    fn id_of(created: &Result<Value, Refused>) -> String {
        match created {
            Ok(v) => v["taskId"].as_str().unwrap_or_default().to_owned(),
            Err(e) => panic!("{}", e.message),
        }
    }

    #[tokio::test]
    async fn a_task_is_its_callers_only_and_inlines_its_result() {
        let tasks = Arc::new(Tasks::default());
        let (finish, finished) = oneshot::channel::<()>();
        let r = running(|_| async move {
            let _ = finished.await;
            reply(json!({"content": [{"type": "text", "text": "done"}]}))
        });
        let created = tasks.adopt("ada", r);
        if let Ok(c) = &created {
            assert_eq!(
                (&c["resultType"], &c["status"]),
                (&json!("task"), &json!("working"))
            );
            assert!(c.get("result").is_none());
        }
        let id = id_of(&created);
        match get(&tasks, "bob", &id) {
            Err(e) => assert_eq!(e.code, INVALID_PARAMS, "another caller's is no task"),
            Ok(v) => panic!("bob read ada's task: {v}"),
        }
        assert_eq!(
            get(&tasks, "ada", &id).map(|v| v["status"].clone()).ok(),
            Some(json!("working"))
        );
        let _ = finish.send(());
        let done = settled(&tasks, &id, "completed").await;
        assert_eq!(done["result"]["content"][0]["text"], "done");
        assert!(done.get("error").is_none());
    }

    #[tokio::test]
    async fn a_task_waits_until_every_question_is_answered() {
        let tasks = Arc::new(Tasks::default());
        // The call asks two things and ends with how many answers it got.
        let r = running(|questions| async move {
            let (resume, answered) = oneshot::channel();
            let requests = json!({"a": {"method": "elicitation/create"},
                                  "b": {"method": "elicitation/create"}});
            let requests = requests.as_object().cloned().unwrap_or_default();
            let _ = questions.send(Pause { requests, resume }).await;
            let got = answered.await.unwrap_or_default();
            reply(json!({"content": [{"type": "text", "text": got.len().to_string()}]}))
        });
        let id = id_of(&tasks.adopt("ada", r));
        let parked = settled(&tasks, &id, "input_required").await;
        assert_eq!(parked["inputRequests"].as_object().map(Map::len), Some(2));
        let update = |given: Value| {
            tasks.request(
                "ada",
                "tasks/update",
                &json!({"taskId": id, "inputResponses": given}),
            )
        };
        let ack = update(json!({"a": {"action": "accept"}, "zz": {"action": "accept"}}));
        assert_eq!(
            ack.ok(),
            Some(json!({"resultType": "complete"})),
            "an unknown key is ignored"
        );
        let still = settled(&tasks, &id, "input_required").await;
        let keys: Vec<&String> = still["inputRequests"]
            .as_object()
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        assert_eq!(keys, ["b"], "only the open question is left");
        assert!(update(json!("not an object")).is_err());
        let _ = update(json!({"b": {"action": "decline"}}));
        let done = settled(&tasks, &id, "completed").await;
        assert_eq!(done["result"]["content"][0]["text"], "2");
    }

    #[tokio::test]
    async fn cancelling_ends_the_call_once() {
        struct Flag(Arc<AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let tasks = Arc::new(Tasks::default());
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = Flag(dropped.clone());
        let r = running(|_| async move {
            let _flag = flag;
            std::future::pending::<Vec<u8>>().await
        });
        let id = id_of(&tasks.adopt("ada", r));
        tokio::task::yield_now().await;
        let cancel = || tasks.request("ada", "tasks/cancel", &json!({"taskId": id}));
        assert_eq!(cancel().ok(), Some(json!({"resultType": "complete"})));
        assert_eq!(
            settled(&tasks, &id, "cancelled").await["status"],
            "cancelled"
        );
        for _ in 0..100 {
            if dropped.load(Ordering::Relaxed) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(dropped.load(Ordering::Relaxed), "the call was ended");
        assert_eq!(
            cancel().ok(),
            Some(json!({"resultType": "complete"})),
            "again: the same ack"
        );
        assert!(
            tasks
                .request("ada", "tasks/list", &json!({"taskId": id}))
                .is_err()
        );
    }

    #[test]
    fn a_reply_ends_a_task_completed_or_failed() {
        let failed = |s: State| match s {
            State::Failed(e) => e,
            _ => Value::Null,
        };
        let error = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"boom"}}"#;
        assert_eq!(failed(ended(error))["code"], -32000);
        assert_eq!(failed(ended(b""))["code"], INTERNAL_ERROR);
        assert_eq!(
            failed(ended(br#"{"jsonrpc":"2.0","id":1}"#))["code"],
            INTERNAL_ERROR
        );
        let tool_error = reply(json!({"content": [], "isError": true}));
        assert!(matches!(ended(&tool_error), State::Completed(r) if r["isError"] == true));
    }
}
