//! Tasks served to stateless clients (the tasks extension, SEP-2663): edgar's example
//! server behind `edgar mcp serve --http --transparent` makes some calls tasks; a client
//! that declared the extension is handed each as a task of the gateway's own, one that
//! did not gets the result at once or the server's -32021.

use std::time::{Duration, Instant};

use edgar_tests::procs_with_tag;
use serde_json::{Value, json};

use crate::gateway::{Driver, HttpGateway, TOKEN};

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// One stateless request (with the routing headers the revision requires) of a client
/// that takes tasks or not: (HTTP status, the JSON-RPC message).
fn ask(gw: &HttpGateway, takes: bool, method: &str, mut params: Value) -> (u16, Value) {
    let caps = if takes {
        json!({"extensions": {TASKS: {}}, "elicitation": {}})
    } else {
        json!({})
    };
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps});
    let name = params["name"]
        .as_str()
        .or(params["taskId"].as_str())
        .unwrap_or("")
        .to_owned();
    let auth = format!("Bearer {TOKEN}");
    let mut headers = vec![
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ];
    if !name.is_empty() {
        headers.push(("mcp-name", &name));
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let (status, _, body) = gw.exchange("POST", &headers, &body.to_string());
    let message = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    (status, message)
}

/// `tasks/get` until the task's status is `want` or it ended (at most 10 s).
fn wait_for(gw: &HttpGateway, id: &str, want: &str) -> Value {
    let start = Instant::now();
    loop {
        let (_, got) = ask(gw, true, "tasks/get", json!({"taskId": id}));
        let status = got["result"]["status"].as_str().unwrap_or("").to_owned();
        if status == want || ["completed", "failed", "cancelled"].contains(&status.as_str()) {
            return got["result"].clone();
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "task {id} stuck: {got}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn created(message: &Value) -> String {
    let r = &message["result"];
    assert_eq!(r["resultType"], "task", "{message}");
    let id = r["taskId"].as_str().unwrap_or_default().to_owned();
    assert!(
        id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "a random id of the gateway's, not the upstream's: {message}"
    );
    for absent in ["result", "error", "inputRequests", "requestState"] {
        assert!(r.get(absent).is_none(), "{absent} in {message}");
    }
    id
}

#[test]
fn an_upstream_task_is_handed_to_a_client_that_takes_tasks() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let t = format!("{}-tasks-handed", std::process::id());
    crate::news::example(home.path(), &t);
    let gw = HttpGateway::start(home.path(), &["--servers", "example", "--transparent"]);

    // The gateway says it serves tasks.
    let (_, found) = ask(&gw, false, "server/discover", json!({}));
    assert!(
        found["result"]["capabilities"]["extensions"][TASKS].is_object(),
        "{found}"
    );

    // A long call becomes a task at once; it is readable at once, and cancelled.
    let (status, long) = ask(
        &gw,
        true,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 60, "label": "long"}}),
    );
    assert_eq!(status, 200);
    let id = created(&long);
    let (_, now) = ask(&gw, true, "tasks/get", json!({"taskId": id}));
    assert_eq!(now["result"]["status"], "working", "{now}");
    assert_eq!(now["result"]["resultType"], "complete");
    let (_, ack) = ask(&gw, true, "tasks/cancel", json!({"taskId": id}));
    assert_eq!(ack["result"], json!({"resultType": "complete"}));
    assert_eq!(wait_for(&gw, &id, "cancelled")["status"], "cancelled");
    let (_, again) = ask(&gw, true, "tasks/cancel", json!({"taskId": id}));
    assert_eq!(
        again["result"],
        json!({"resultType": "complete"}),
        "idempotent"
    );
    // The cancelled call left no line of its own; its cancel did.
    let edgar = env!("CARGO_BIN_EXE_edgar-it");
    let args = ["audit", "tail", "-n", "50", "--json"];
    let tail = edgar_tests::run(edgar, home.path(), &args, b"");
    let cancels = tail
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["event"] == "task_cancel" && l["task"] == json!(id))
        .count();
    assert!(cancels >= 1, "{}", tail.stdout);

    // A short one completes with the result that crossed the guard.
    let (_, short) = ask(
        &gw,
        true,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 1, "label": "short"}}),
    );
    let done = wait_for(&gw, &created(&short), "completed");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"],
        "computed short in 1 s"
    );

    // A question parks the task until the answer comes with tasks/update.
    let (_, asking) = ask(
        &gw,
        true,
        "tools/call",
        json!({"name": "confirm_delete", "arguments": {"filename": "a.txt"}}),
    );
    let id = created(&asking);
    let parked = wait_for(&gw, &id, "input_required");
    assert_eq!(parked["status"], "input_required", "{parked}");
    assert_eq!(
        parked["inputRequests"]["confirm"]["method"], "elicitation/create",
        "{parked}"
    );
    let answer = json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
    let (_, ack) = ask(
        &gw,
        true,
        "tasks/update",
        json!({"taskId": id, "inputResponses": answer}),
    );
    assert_eq!(ack["result"], json!({"resultType": "complete"}));
    let done = wait_for(&gw, &id, "completed");
    assert_eq!(
        done["result"]["content"][0]["text"], "deleted a.txt",
        "{done}"
    );

    // The upstream's task failing is the task failing, with its error.
    let (_, crash) = ask(
        &gw,
        true,
        "tools/call",
        json!({"name": "protocol_error_job", "arguments": {}}),
    );
    let failed = wait_for(&gw, &created(&crash), "failed");
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["error"]["code"], -32603, "{failed}");
    assert!(failed.get("result").is_none());

    // Not declared: the result at once, or the server's -32021 naming the extension;
    // the task methods refused alike; an id not handed out is no task.
    let (_, sync) = ask(
        &gw,
        false,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 0}}),
    );
    assert_eq!(sync["result"]["resultType"], "complete", "{sync}");
    assert!(sync["result"].get("taskId").is_none());
    let (status, refused) = ask(
        &gw,
        false,
        "tools/call",
        json!({"name": "failing_job", "arguments": {}}),
    );
    assert_eq!((status, &refused["error"]["code"]), (400, &json!(-32021)));
    assert!(
        refused["error"]["data"]["requiredCapabilities"]["extensions"][TASKS].is_object(),
        "{refused}"
    );
    let (status, gated) = ask(&gw, false, "tasks/get", json!({"taskId": id}));
    assert_eq!((status, &gated["error"]["code"]), (400, &json!(-32021)));
    let (status, unknown) = ask(&gw, true, "tasks/get", json!({"taskId": "0".repeat(32)}));
    assert_eq!((status, &unknown["error"]["code"]), (400, &json!(-32602)));
    for removed in ["tasks/result", "tasks/list"] {
        let (status, gone) = ask(&gw, true, removed, json!({"taskId": id}));
        assert_eq!((status, &gone["error"]["code"]), (404, &json!(-32601)));
    }

    // A task still running does not hold the gateway at SIGTERM, nor outlive it.
    let (_, running) = ask(
        &gw,
        true,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 600}}),
    );
    created(&running);
    assert_eq!(gw.stop(), Some(143));
    assert!(
        procs_with_tag(&t).is_empty(),
        "the example server was reaped"
    );
}

/// Over stdio the gateway hands out no tasks and says so: it follows an upstream's task
/// itself, and a client that declared the extension gets the result in the answer.
#[test]
fn over_stdio_the_gateway_follows_the_task_itself() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let t = format!("{}-tasks-stdio", std::process::id());
    crate::news::example(home.path(), &t);
    let args = ["--servers", "example", "--transparent"];
    let mut d = Driver::spawn(home.path(), &args, false, &[]);
    d.meta = Some(json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    }));
    d.send(json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}));
    let found = d.answer(1);
    assert!(found["result"]["capabilities"].is_object(), "{found}");
    assert!(
        found["result"]["capabilities"]["extensions"][TASKS].is_null(),
        "{found}"
    );
    d.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "slow_compute", "arguments": {"seconds": 1, "label": "s"}}}));
    let done = d.answer(2);
    assert_eq!(
        done["result"]["content"][0]["text"], "computed s in 1 s",
        "{done}"
    );
    assert!(done["result"].get("taskId").is_none());
    assert_eq!(d.finish(), Some(0));
    assert!(procs_with_tag(&t).is_empty());
}
