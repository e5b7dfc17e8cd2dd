//! An MCP server of the stateless era only (2026-07-28) over stdio, for what a real one
//! cannot be made to show: it refuses `initialize` and any request not stamped with its
//! version (`-32022`), and its tools ask for input in every way the multi-round-trip
//! pattern allows, including hostile ones.
//!
//! Tools: `echo`; `ask_name` (a form elicitation, answered on the retry with the
//! echoed state); `ask_url` (a URL-mode elicitation); `wait_state` (a leg with state
//! only); `nag` (asks for ever); `huge_state` (a 10 MB `requestState`); `sample` (asks
//! for a model completion); `change` (adds `added_later` to the tools and says so on the
//! client's `subscriptions/listen`, if it opened one); `touch` (tells the listen streams
//! watching resource `uri` that it changed). Run as tasks (when the client
//! declares the tasks extension): `slow_task` (done after twelve polls, 1.2 s at least), `endless_task`
//! (never done), `asking_task` (needs a name mid-flight), `failing_task`. With
//! `FAKE_LOG=path`, every line received is appended there; `FAKE_TTL_MS` is the
//! `ttlMs` of its tool list (0, stale at once, by default). A listen stream watching
//! resources is in place, and acknowledged, `FAKE_ACK_DELAY_MS` after it came (none by
//! default), while other requests are answered; `notifications/cancelled` ends it.

use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

const VERSION: &str = "2026-07-28";

fn main() {
    let log = std::env::var("FAKE_LOG").ok();
    // Not locked for good: a delayed acknowledgement is written from its own thread.
    let mut out = std::io::stdout();
    // Resource listen streams in place: (URI, the listen request's id).
    let watching: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let mut line = String::new();
    let mut input = std::io::stdin().lock();
    let mut listening: Option<Value> = None;
    let mut changed = false;
    // Task id -> (tool, polls so far, the name given mid-flight).
    let mut tasks: std::collections::HashMap<String, (String, u32, Option<String>)> =
        Default::default();
    loop {
        line.clear();
        if input.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        if let Some(path) = &log
            && let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
        {
            let _ = f.write_all(line.as_bytes());
        }
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if msg["method"] == "notifications/cancelled" {
            let ended = &msg["params"]["requestId"];
            lock(&watching).retain(|(_, sub)| sub != ended);
            continue;
        }
        let (Some(method), Some(id)) = (msg["method"].as_str(), msg.get("id").cloned()) else {
            continue;
        };
        let params = &msg["params"];
        let asked = params["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str();
        if asked != Some(VERSION) {
            let requested = asked.unwrap_or(params["protocolVersion"].as_str().unwrap_or(""));
            send(
                &mut out,
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32022,
                    "message": "Unsupported protocol version",
                    "data": {"supported": [VERSION], "requested": requested}}}),
            );
            continue;
        }
        let result = match method {
            "server/discover" => json!({
                "resultType": "complete", "supportedVersions": [VERSION],
                "capabilities": {"tools": {}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "fake-stateless", "version": "1"}},
                "ttlMs": 0, "cacheScope": "private",
            }),
            "subscriptions/listen"
                if params["notifications"]["resourceSubscriptions"].is_array() =>
            {
                let uris: Vec<String> = params["notifications"]["resourceSubscriptions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|u| u.as_str().map(str::to_owned))
                    .collect();
                let delay: u64 = std::env::var("FAKE_ACK_DELAY_MS")
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(0);
                let watching = watching.clone();
                let in_place = move || {
                    std::thread::sleep(std::time::Duration::from_millis(delay));
                    lock(&watching).extend(uris.iter().map(|u| (u.clone(), id.clone())));
                    send(
                        &mut std::io::stdout(),
                        json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                            "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": id},
                                       "notifications": {"resourceSubscriptions": uris}}}),
                    );
                };
                std::thread::spawn(in_place);
                continue;
            }
            "subscriptions/listen" => {
                let wants = params["notifications"]["toolsListChanged"] == true;
                send(
                    &mut out,
                    json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": id},
                                   "notifications": {"toolsListChanged": wants}}}),
                );
                if wants {
                    listening = Some(id);
                }
                continue;
            }
            "tools/call"
                if params["name"].as_str().is_some_and(|n| n.ends_with("_task"))
                    && !params["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"]
                        ["io.modelcontextprotocol/tasks"]
                        .is_null() =>
            {
                let id = format!("task-{}", tasks.len() + 1);
                let tool = params["name"].as_str().unwrap_or_default().to_owned();
                tasks.insert(id.clone(), (tool, 0, None));
                let mut created = task_state(&id, "working", None);
                created["resultType"] = json!("task");
                created
            }
            "tasks/get" => {
                let id = params["taskId"].as_str().unwrap_or_default().to_owned();
                match tasks.get_mut(&id) {
                    Some((tool, polls, name)) => {
                        *polls += 1;
                        match (tool.as_str(), *polls, name.as_deref()) {
                            ("slow_task", p, _) if p >= 12 => {
                                task_state(&id, "completed", Some(("result", text("slow done"))))
                            }
                            ("failing_task", _, _) => task_state(
                                &id,
                                "failed",
                                Some(("error", json!({"code": -32000, "message": "the build broke"}))),
                            ),
                            ("asking_task", _, Some(n)) => task_state(
                                &id,
                                "completed",
                                Some(("result", text(&format!("built for {n}")))),
                            ),
                            ("asking_task", _, None) => task_state(
                                &id,
                                "input_required",
                                Some((
                                    "inputRequests",
                                    json!({"who": {"method": "elicitation/create", "params": {"mode": "form",
                                        "message": "For whom?", "requestedSchema": {"type": "object",
                                        "properties": {"name": {"type": "string"}}}}}}),
                                )),
                            ),
                            (_, p, _) => {
                                let mut s = task_state(&id, "working", None);
                                s["statusMessage"] = json!(format!("step {p}"));
                                s
                            }
                        }
                    }
                    None => {
                        send(
                            &mut out,
                            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": "no such task"}}),
                        );
                        continue;
                    }
                }
            }
            "tasks/update" => {
                let id = params["taskId"].as_str().unwrap_or_default();
                if let Some(t) = tasks.get_mut(id) {
                    t.2 = params["inputResponses"]["who"]["content"]["name"]
                        .as_str()
                        .map(str::to_owned);
                }
                json!({"resultType": "complete"})
            }
            "tasks/cancel" => json!({"resultType": "complete"}),
            "tools/call" if params["name"] == "change" => {
                changed = true;
                if let Some(sub) = &listening {
                    send(
                        &mut out,
                        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                            "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": sub}}}),
                    );
                }
                text("changed")
            }
            "tools/call" if params["name"] == "touch" => {
                let uri = params["arguments"]["uri"].as_str().unwrap_or_default();
                for (_, sub) in lock(&watching).iter().filter(|(u, _)| u == uri) {
                    send(
                        &mut out,
                        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                            "params": {"uri": uri, "_meta": {"io.modelcontextprotocol/subscriptionId": sub}}}),
                    );
                }
                text("touched")
            }
            "tools/list" => {
                let mut names = vec![
                    "echo",
                    "ask_name",
                    "ask_url",
                    "wait_state",
                    "nag",
                    "huge_state",
                    "sample",
                    "change",
                    "touch",
                    "slow_task",
                    "endless_task",
                    "asking_task",
                    "failing_task",
                ];
                if changed {
                    names.push("added_later");
                }
                let tools: Vec<Value> = names
                    .iter()
                    .map(|n| {
                        json!({"name": n, "description": format!("the {n} tool"),
                    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}})
                    })
                    .collect();
                let ttl: u64 = std::env::var("FAKE_TTL_MS")
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(0);
                json!({"resultType": "complete", "tools": tools, "ttlMs": ttl, "cacheScope": "public"})
            }
            "tools/call" => call(params),
            // A prompt and a resource: answered only with the revision's `_meta` (above).
            "prompts/list" => json!({"resultType": "complete",
                "prompts": [{"name": "greet", "arguments": [{"name": "who", "required": true}]}]}),
            "prompts/get" => json!({"resultType": "complete", "messages": [{"role": "user",
                "content": {"type": "text", "text": format!("Hello, {}", params["arguments"]["who"].as_str().unwrap_or("?"))}}]}),
            "resources/list" => json!({"resultType": "complete",
                "resources": [{"uri": "note://one", "name": "one", "mimeType": "text/plain"}]}),
            "resources/read" => json!({"resultType": "complete",
                "contents": [{"uri": params["uri"], "mimeType": "text/plain", "text": "stateless text"}]}),
            _ => {
                send(
                    &mut out,
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "unknown method"}}),
                );
                continue;
            }
        };
        send(
            &mut out,
            json!({"jsonrpc": "2.0", "id": id, "result": result}),
        );
    }
}

fn call(params: &Value) -> Value {
    let responses = &params["inputResponses"];
    let state = params["requestState"].as_str();
    let elicit = |key: &str, p: Value| {
        json!({"resultType": "input_required",
            "inputRequests": {key: {"method": "elicitation/create", "params": p}},
            "requestState": format!("state-for-{key}")})
    };
    match params["name"].as_str().unwrap_or_default() {
        "ask_name" => match (&responses["who"], state) {
            (Value::Object(r), Some("state-for-who")) => {
                let name = r["content"]["name"].as_str().unwrap_or("nobody");
                text(&format!(
                    "hello {name} ({})",
                    r["action"].as_str().unwrap_or("?")
                ))
            }
            _ => elicit(
                "who",
                json!({"mode": "form", "message": "Your name?",
                    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string", "default": "Ada"}}, "required": ["name"]}}),
            ),
        },
        "ask_url" => match &responses["consent"] {
            Value::Object(r) => text(&format!("consent {}", r["action"].as_str().unwrap_or("?"))),
            _ => elicit(
                "consent",
                json!({"mode": "url", "message": "Approve access", "url": "https://example.com/consent"}),
            ),
        },
        "wait_state" => match state {
            Some("later") => text("waited"),
            _ => json!({"resultType": "input_required", "requestState": "later"}),
        },
        "nag" => elicit(
            "again",
            json!({"mode": "form", "message": "Again?", "requestedSchema": {"type": "object", "properties": {}}}),
        ),
        "huge_state" => {
            json!({"resultType": "input_required", "requestState": "x".repeat(10 << 20)})
        }
        "sample" => json!({"resultType": "input_required",
            "inputRequests": {"q": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 10}}}}),
        _ => text(params["arguments"]["text"].as_str().unwrap_or("")),
    }
}

fn task_state(id: &str, status: &str, extra: Option<(&str, Value)>) -> Value {
    let mut s = json!({"resultType": "complete", "taskId": id, "status": status,
        "createdAt": "2026-12-03T00:00:00Z", "lastUpdatedAt": "2026-12-03T00:00:00Z",
        "ttlMs": 60000, "pollIntervalMs": 100});
    if let Some((k, v)) = extra {
        s[k] = v;
    }
    s
}

fn text(t: &str) -> Value {
    json!({"resultType": "complete", "content": [{"type": "text", "text": t}]})
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn send(out: &mut impl Write, v: Value) {
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}
