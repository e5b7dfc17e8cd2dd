//! The conformance suite's tasks fixtures (SEP-2663, the stateless era, with
//! `--conformance` only): tools the server may run as tasks, and `tasks/get`,
//! `tasks/update`, `tasks/cancel` for them. The server stays synchronous: a task is a
//! record whose state follows from the clock and the answers it was given, worked out
//! when asked, so nothing runs between requests.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use crate::mcp::protocol::{self, INVALID_PARAMS, META_CLIENT_CAPABILITIES, MISSING_CAPABILITY};
use crate::mcp::task::EXTENSION;

/// How long a task stays readable after it began.
const TTL_MS: u64 = 600_000;
const POLL_MS: u64 = 200;
/// Longest a call that runs without a task sleeps (`slow_compute` for a client that
/// cannot take a task).
const MAX_SYNC: Duration = Duration::from_secs(5);
/// Most tasks kept; the oldest go first.
const MAX_TASKS: usize = 256;

/// What a task does.
enum Job {
    /// Works `seconds`, then says what it computed.
    Compute { seconds: f64, label: String },
    /// A tool error after a second.
    Failing,
    /// A protocol error after half a second.
    Crashing,
    /// Asks each of `keys` (at once), then completes.
    Asking {
        keys: Vec<&'static str>,
        what: String,
    },
    /// Greets `name` after half a second.
    Greeting { name: String },
}

struct Task {
    job: Job,
    began: Instant,
    created_at: String,
    answers: Map<String, Value>,
    cancelled: bool,
}

/// The tasks this server runs.
#[derive(Default)]
pub(super) struct Tasks {
    tasks: HashMap<String, Task>,
    order: Vec<String>,
    next: u64,
}

/// The tools' descriptors (each with its task support).
pub(super) fn tools() -> Vec<Value> {
    let tool = |name: &str, description: &str, support: &str, properties: Value| {
        json!({"name": name, "description": description,
               "inputSchema": {"type": "object", "properties": properties},
               "execution": {"taskSupport": support}})
    };
    vec![
        tool(
            "greet",
            "Greets someone, at once.",
            "forbidden",
            json!({"name": {"type": "string"}}),
        ),
        tool(
            "slow_compute",
            "Works for some seconds, as a task when the client takes one.",
            "optional",
            json!({"seconds": {"type": "number", "minimum": 0}, "label": {"type": "string"}}),
        ),
        tool(
            "failing_job",
            "A task that ends in a tool error.",
            "required",
            json!({}),
        ),
        tool(
            "protocol_error_job",
            "A task that fails.",
            "optional",
            json!({}),
        ),
        tool(
            "confirm_delete",
            "A task that asks for confirmation first.",
            "required",
            json!({"filename": {"type": "string"}}),
        ),
        tool(
            "multi_input",
            "A task that asks two things at once.",
            "required",
            json!({}),
        ),
        tool(
            "test_tool_with_task",
            "Asks a name, then greets it in a task.",
            "required",
            json!({}),
        ),
    ]
}

fn elicit(message: &str) -> Value {
    json!({"method": "elicitation/create", "params": {"message": message,
           "requestedSchema": {"type": "object", "properties": {
               "name": {"type": "string"}, "confirm": {"type": "boolean"}}}}})
}

fn text(text: &str, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": is_error,
           "resultType": "complete"})
}

fn now_iso() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    crate::text::rfc3339(secs)
}

impl Tasks {
    /// The reply to a request about tasks (a call of one of [`tools`], or a `tasks/*`
    /// method) of the stateless era; `None` for any other.
    pub(super) fn answer(&mut self, id: &Value, method: &str, params: &Value) -> Option<Vec<u8>> {
        let meta = &params["_meta"];
        meta[protocol::META_PROTOCOL_VERSION].as_str()?;
        let takes = meta[META_CLIENT_CAPABILITIES]["extensions"][EXTENSION].is_object();
        let name = params["name"].as_str().unwrap_or("");
        let known = tools().iter().any(|t| t["name"] == name);
        let outcome = match method {
            "tools/call" if known => self.call(name, params, takes),
            "tasks/get" | "tasks/update" | "tasks/cancel" if !takes => Err(missing()),
            "tasks/get" => self.get(params),
            "tasks/update" => self.update(params),
            "tasks/cancel" => self.cancel(params),
            _ => return None,
        };
        Some(match outcome {
            Ok(result) => protocol::response(id, result),
            Err(error) => {
                protocol::encode_message(&json!({"jsonrpc": "2.0", "id": id, "error": error}))
            }
        })
    }

    fn call(&mut self, name: &str, params: &Value, takes: bool) -> Result<Value, Value> {
        let args = &params["arguments"];
        let support = tools()
            .into_iter()
            .find(|t| t["name"] == name)
            .map(|t| t["execution"]["taskSupport"].clone());
        if !takes && support.as_ref().and_then(Value::as_str) == Some("required") {
            return Err(missing());
        }
        let job = match name {
            "greet" => {
                let who = args["name"].as_str().unwrap_or("there");
                return Ok(text(&format!("Hello, {who}!"), false));
            }
            "slow_compute" => Job::Compute {
                seconds: args["seconds"].as_f64().unwrap_or(1.0).clamp(0.0, 3600.0),
                label: args["label"].as_str().unwrap_or("").to_owned(),
            },
            "failing_job" => Job::Failing,
            "protocol_error_job" => Job::Crashing,
            "confirm_delete" => Job::Asking {
                keys: vec!["confirm"],
                what: format!("deleted {}", args["filename"].as_str().unwrap_or("a file")),
            },
            "multi_input" => Job::Asking {
                keys: vec!["first", "second"],
                what: "both answered".into(),
            },
            _ => {
                // Round one asks a name; round two, with it, makes the task.
                let given = &params["inputResponses"]["user_name"]["content"]["name"];
                let Some(who) = given.as_str() else {
                    return Ok(json!({"resultType": "input_required",
                        "inputRequests": {"user_name": elicit("What is your name?")}}));
                };
                Job::Greeting {
                    name: who.to_owned(),
                }
            }
        };
        if !takes {
            // Without the extension, run it now.
            let task = self.make(job);
            if let Job::Compute { seconds, .. } = task.job {
                std::thread::sleep(Duration::from_secs_f64(seconds).min(MAX_SYNC));
            }
            return match self.state(&task, Duration::MAX) {
                (_, Some(result), None) => Ok(result),
                (_, _, Some(error)) => Err(error),
                _ => Err(json!({"code": -32603, "message": "the job needs input"})),
            };
        }
        let task = self.make(job);
        let id = format!("task-{}", self.next);
        self.next += 1;
        let created = json!({"resultType": "task", "taskId": id, "status": "working",
            "createdAt": task.created_at, "lastUpdatedAt": task.created_at,
            "ttlMs": TTL_MS, "pollIntervalMs": POLL_MS});
        if self.order.len() >= MAX_TASKS {
            let oldest = self.order.remove(0);
            self.tasks.remove(&oldest);
        }
        self.order.push(id.clone());
        self.tasks.insert(id, task);
        Ok(created)
    }

    fn make(&self, job: Job) -> Task {
        Task {
            job,
            began: Instant::now(),
            created_at: now_iso(),
            answers: Map::new(),
            cancelled: false,
        }
    }

    /// The task's status, result and error, `elapsed` after it began (at least).
    fn state(&self, task: &Task, elapsed: Duration) -> (Value, Option<Value>, Option<Value>) {
        let elapsed = elapsed.max(task.began.elapsed());
        let secs = elapsed.as_secs_f64();
        if task.cancelled {
            return (json!("cancelled"), None, None);
        }
        let working = (json!("working"), None, None);
        match &task.job {
            Job::Compute { seconds, label } if secs >= *seconds => {
                let done = format!("computed {label} in {seconds} s");
                (json!("completed"), Some(text(&done, false)), None)
            }
            Job::Failing if secs >= 1.0 => {
                (json!("completed"), Some(text("the job failed", true)), None)
            }
            Job::Crashing if secs >= 0.5 => (
                json!("failed"),
                None,
                Some(json!({"code": -32603, "message": "the job crashed"})),
            ),
            Job::Greeting { name } if secs >= 0.5 => (
                json!("completed"),
                Some(text(&format!("Hello, {name}!"), false)),
                None,
            ),
            Job::Asking { keys, what } => {
                let open: Map<String, Value> = keys
                    .iter()
                    .filter(|k| !task.answers.contains_key(**k))
                    .map(|k| ((*k).to_owned(), elicit(&format!("Answer {k}"))))
                    .collect();
                if open.is_empty() {
                    (json!("completed"), Some(text(what, false)), None)
                } else {
                    (json!("input_required"), None, Some(Value::Object(open)))
                }
            }
            _ => working,
        }
    }

    fn task_id<'a>(&self, params: &'a Value) -> Result<&'a str, Value> {
        params["taskId"]
            .as_str()
            .filter(|id| self.tasks.contains_key(*id))
            .ok_or_else(|| json!({"code": INVALID_PARAMS, "message": "no such task"}))
    }

    fn get(&self, params: &Value) -> Result<Value, Value> {
        let id = self.task_id(params)?;
        let task = &self.tasks[id];
        let (status, result, other) = self.state(task, Duration::ZERO);
        let mut detailed = json!({"resultType": "complete", "taskId": id, "status": status,
            "createdAt": task.created_at, "lastUpdatedAt": now_iso(),
            "ttlMs": TTL_MS, "pollIntervalMs": POLL_MS});
        if let Some(r) = result {
            detailed["result"] = r;
        }
        if let Some(o) = other {
            let key = if status == "input_required" {
                "inputRequests"
            } else {
                "error"
            };
            detailed[key] = o;
        }
        Ok(detailed)
    }

    fn update(&mut self, params: &Value) -> Result<Value, Value> {
        let id = self.task_id(params)?.to_owned();
        let Some(given) = params["inputResponses"].as_object() else {
            return Err(
                json!({"code": INVALID_PARAMS, "message": "inputResponses must be an object"}),
            );
        };
        if let Some(task) = self.tasks.get_mut(&id)
            && let Job::Asking { keys, .. } = &task.job
        {
            for (k, v) in given {
                if keys.contains(&k.as_str()) {
                    task.answers.insert(k.clone(), v.clone());
                }
            }
        }
        Ok(json!({"resultType": "complete"}))
    }

    fn cancel(&mut self, params: &Value) -> Result<Value, Value> {
        let id = self.task_id(params)?.to_owned();
        let terminal = self.tasks.get(&id).map(|t| {
            let status = self.state(t, Duration::ZERO).0;
            ["completed", "failed", "cancelled"].contains(&status.as_str().unwrap_or(""))
        });
        if terminal == Some(false)
            && let Some(task) = self.tasks.get_mut(&id)
        {
            task.cancelled = true;
        }
        Ok(json!({"resultType": "complete"}))
    }
}

/// -32021 naming the extension.
fn missing() -> Value {
    json!({"code": MISSING_CAPABILITY,
           "message": "this needs the client to take tasks (io.modelcontextprotocol/tasks)",
           "data": {"requiredCapabilities": {"extensions": {(EXTENSION): {}}}}})
}
