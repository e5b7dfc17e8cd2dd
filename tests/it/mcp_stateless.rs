//! The two protocol eras: a stateless (2026-07-28) server reached without a handshake,
//! a handshake server found by the probe's fallback, each era remembered so the next
//! cold start goes straight to it, the Python SDK 2.3.0 and rmcp 3.x servers in either era, and the
//! multi-round-trip pattern (form and URL elicitation, a state-only leg, the round
//! limit, an oversized state, a request edgar cannot answer).
//!
//! What each server received is recorded by wrapping it in `tee`, so the tests see the
//! wire, not edgar's account of it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use edgar_host::config::{Config, ProtocolChoice, ServerSpec};
use edgar_host::mcp::client::{Session, SessionOptions};
use edgar_tests::{fixture, installed, procs_with_tag};
use serde_json::{Value, json};

use crate::mcp_stdio::{spec, text_of};

const STATELESS: &str = env!("CARGO_BIN_EXE_fake-stateless-server");
const HANDSHAKE: &str = env!("CARGO_BIN_EXE_fake-mcp-server");

/// Answers every elicitation: a form with a name, a URL by accepting.
struct Answers;
impl edgar_host::mcp::ClientHandler for Answers {
    fn supports_elicitation(&self) -> bool {
        true
    }
    fn elicit(&self, _server: &str, params: &Value) -> Option<Value> {
        Some(match params["mode"].as_str() {
            Some("url") => json!({"action": "accept"}),
            _ => json!({"action": "accept", "content": {"name": "Grace"}}),
        })
    }
}

/// A server spec whose every received line is appended to `log` (through `tee`).
fn recorded(name: &str, log: &Path, argv: &[&str], tag: &str) -> ServerSpec {
    let line = argv
        .iter()
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let script = format!("tee -a '{}' | exec {line}", log.display());
    spec(
        name,
        "sh",
        &["-c", &script],
        &[("EDGAR_TEST_TAG", tag.to_owned())],
    )
}

fn session(dir: &Path, specs: Vec<ServerSpec>, handler: bool) -> Session {
    let config = Config {
        servers: specs,
        ..Default::default()
    };
    let mut opts = SessionOptions::new(dir.to_owned(), Some(dir.join("cache")));
    if handler {
        opts.handler = Arc::new(Answers);
    }
    Session::new(&config, opts)
}

/// The methods received, in order.
fn methods(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|m| m["method"].as_str().map(str::to_owned))
        .collect()
}

fn stamped(log: &Path) -> Vec<Option<String>> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m.get("id").is_some())
        .map(|m| {
            m["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

/// A test's directory, the log its server's wire is recorded in, and its process tag.
fn wire(test: &str) -> (tempfile::TempDir, std::path::PathBuf, String) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("wire.log");
    (dir, log, tag(test))
}

fn tag(test: &str) -> String {
    format!("{}-{test}", std::process::id())
}

async fn echo(s: &Session, tool: &str) -> Result<String, String> {
    s.call(tool, json!({"text": "hi"}))
        .await
        .map(|o| text_of(&o))
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn a_stateless_server_is_reached_without_a_handshake_and_its_era_remembered() {
    let (dir, log, t) = wire("stateless");
    let s = session(
        dir.path(),
        vec![recorded("st", &log, &[STATELESS], &t)],
        false,
    );
    assert_eq!(echo(&s, "st__echo").await.as_deref(), Ok("hi"));
    s.close().await;
    // The subscription opens once the server runs, beside the call.
    let mut seen = methods(&log);
    seen.retain(|m| m != "subscriptions/listen");
    assert_eq!(seen, ["server/discover", "tools/list", "tools/call"]);
    assert!(
        stamped(&log)
            .iter()
            .all(|v| v.as_deref() == Some("2026-07-28")),
        "{:?}",
        stamped(&log)
    );
    // A cold start of the next session goes straight to the era: no probe.
    let _ = std::fs::remove_file(&log);
    let s = session(
        dir.path(),
        vec![recorded("st", &log, &[STATELESS], &t)],
        false,
    );
    assert_eq!(echo(&s, "st__echo").await.as_deref(), Ok("hi"));
    s.close().await;
    let mut seen = methods(&log);
    seen.retain(|m| m != "subscriptions/listen");
    assert_eq!(seen, ["tools/list", "tools/call"]);
    assert!(procs_with_tag(&t).is_empty());
}

#[tokio::test]
async fn prompts_and_resources_of_a_stateless_server_carry_the_revision() {
    let (dir, log, t) = wire("content");
    let s = session(
        dir.path(),
        vec![recorded("st", &log, &[STATELESS], &t)],
        false,
    );
    let prompts = s.prompts("st").await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    let args = std::collections::BTreeMap::from([("who".to_owned(), "Ada".to_owned())]);
    let out = s
        .prompt("st", "greet", &args)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        matches!(&out.messages[0].content[0], edgar_host::guard::ContentBlock::Text { text } if text == "Hello, Ada"),
        "{out:?}"
    );
    let blocks = s
        .read("st", "note://one")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        matches!(&blocks[0], edgar_host::guard::ContentBlock::Resource { resource } if resource.text.as_deref() == Some("stateless text")),
        "{blocks:?}"
    );
    s.close().await;
    let seen = methods(&log);
    for m in ["prompts/list", "prompts/get", "resources/read"] {
        assert!(seen.iter().any(|s| s == m), "{m} not sent: {seen:?}");
    }
    // The server answers only requests stamped with its revision: every one was.
    assert!(
        stamped(&log)
            .iter()
            .all(|v| v.as_deref() == Some("2026-07-28")),
        "{:?}",
        stamped(&log)
    );
    assert!(!seen.iter().any(|m| m == "initialize"), "{seen:?}");
}

#[tokio::test]
async fn a_handshake_server_is_probed_once_then_greeted_directly() {
    let (dir, log, t) = wire("handshake");
    let fake = || recorded("hs", &log, &[HANDSHAKE, "good"], &t);
    let s = session(dir.path(), vec![fake()], false);
    assert_eq!(echo(&s, "hs__echo").await.as_deref(), Ok("hi"));
    s.close().await;
    assert_eq!(
        methods(&log),
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call"
        ]
    );
    let _ = std::fs::remove_file(&log);
    let s = session(dir.path(), vec![fake()], false);
    assert_eq!(echo(&s, "hs__echo").await.as_deref(), Ok("hi"));
    s.close().await;
    assert_eq!(methods(&log)[0], "initialize");
    assert!(!methods(&log).iter().any(|m| m == "server/discover"));
    assert!(procs_with_tag(&t).is_empty());
}

#[tokio::test]
async fn the_python_sdk_server_speaks_either_era() {
    let python = installed("py/bin/python").display().to_string();
    let script = fixture("python_server.py").display().to_string();
    either_era("python", &[&python, &script]).await;
}

#[tokio::test]
async fn the_rust_sdk_server_speaks_either_era() {
    either_era("rmcp", &[env!("CARGO_BIN_EXE_rmcp-server")]).await;
}

/// A real SDK's server (tool `add`) reached by default in the stateless era without an
/// `initialize`, and, forced, by the handshake without a `server/discover`.
async fn either_era(name: &str, argv: &[&str]) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let t = tag(name);
    for (choice, want) in [
        (ProtocolChoice::Auto, "server/discover"),
        (ProtocolChoice::Handshake, "initialize"),
    ] {
        let log = dir.path().join(format!("{choice:?}.log"));
        let mut spec = recorded("sdk", &log, argv, &t);
        spec.protocol = choice;
        spec.startup_timeout = Duration::from_secs(30);
        let s = session(dir.path(), vec![spec], false);
        let out = s
            .call("sdk__add", json!({"a": 20, "b": 22}))
            .await
            .map(|o| text_of(&o))
            .unwrap_or_else(|e| panic!("{name} {choice:?}: {e}"));
        assert!(out.contains("42"), "{out}");
        s.close().await;
        let seen = methods(&log);
        assert_eq!(seen[0], want, "{choice:?}: {seen:?}");
        let other = if want == "initialize" {
            "server/discover"
        } else {
            "initialize"
        };
        assert!(!seen.iter().any(|m| m == other), "{choice:?}: {seen:?}");
    }
    assert!(procs_with_tag(&t).is_empty());
}

#[tokio::test]
async fn a_handshake_forced_on_a_stateless_server_fails_clearly() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let t = tag("forced");
    let mut spec = spec("st", STATELESS, &[], &[("EDGAR_TEST_TAG", t.clone())]);
    spec.protocol = ProtocolChoice::Handshake;
    let s = session(dir.path(), vec![spec], false);
    let e = echo(&s, "st__echo").await.err().unwrap_or_default();
    s.close().await;
    assert!(
        e.contains("does not speak protocol version 2025-11-25 (it speaks 2026-07-28)"),
        "{e}"
    );
}

#[tokio::test]
async fn input_requests_are_answered_and_the_call_retried() {
    let (dir, log, t) = wire("mrtr");
    let s = session(
        dir.path(),
        vec![recorded("st", &log, &[STATELESS], &t)],
        true,
    );
    assert_eq!(
        echo(&s, "st__ask_name").await.as_deref(),
        Ok("hello Grace (accept)")
    );
    assert_eq!(
        echo(&s, "st__ask_url").await.as_deref(),
        Ok("consent accept")
    );
    assert_eq!(echo(&s, "st__wait_state").await.as_deref(), Ok("waited"));
    let nag = echo(&s, "st__nag").await.err().unwrap_or_default();
    assert!(nag.contains("more than 10 times"), "{nag}");
    let huge = echo(&s, "st__huge_state").await.err().unwrap_or_default();
    assert!(huge.contains("over the"), "{huge}");
    let sample = echo(&s, "st__sample").await.err().unwrap_or_default();
    assert!(sample.contains("a completion from the model"), "{sample}");
    s.close().await;
    // Each retry was a new request carrying the answers and the state byte for byte.
    let calls: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["method"] == "tools/call" && m["params"]["name"] == "ask_name")
        .collect();
    assert_eq!(calls.len(), 2);
    assert_ne!(calls[0]["id"], calls[1]["id"]);
    assert!(calls[0]["params"].get("requestState").is_none());
    assert_eq!(calls[1]["params"]["requestState"], "state-for-who");
    assert_eq!(
        calls[1]["params"]["inputResponses"]["who"]["content"]["name"],
        "Grace"
    );
    let nags = methods_named(&log, "nag");
    assert_eq!(nags, 11, "the first call and ten rounds");
    assert!(procs_with_tag(&t).is_empty());
}

fn methods_named(log: &Path, tool: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["params"]["name"] == tool)
        .count()
}

#[tokio::test]
async fn without_a_handler_an_elicitation_fails_the_call_by_name() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let t = tag("nohandler");
    let s = session(
        dir.path(),
        vec![spec("st", STATELESS, &[], &[("EDGAR_TEST_TAG", t.clone())])],
        false,
    );
    let e = echo(&s, "st__ask_name").await.err().unwrap_or_default();
    s.close().await;
    assert!(
        e.contains("elicitation/create") && e.contains("a human's input"),
        "{e}"
    );
}

#[tokio::test]
async fn a_subscription_brings_a_changed_tool_list() {
    let (dir, log, t) = wire("listen");
    let s = session(
        dir.path(),
        vec![recorded("st", &log, &[STATELESS], &t)],
        false,
    );
    // The subscription opens once the server runs; the change comes after it.
    assert_eq!(echo(&s, "st__echo").await.as_deref(), Ok("hi"));
    for _ in 0..50 {
        if methods(&log).iter().any(|m| m == "subscriptions/listen") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(echo(&s, "st__change").await.as_deref(), Ok("changed"));
    let mut found = false;
    for _ in 0..50 {
        let tools = s.tools("st").await.unwrap_or_else(|e| panic!("{e}"));
        if tools.iter().any(|t| t.name() == "st__added_later") {
            found = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    s.close().await;
    assert!(found, "{:?}", methods(&log));
    let seen = methods(&log);
    assert!(seen.iter().any(|m| m == "subscriptions/listen"), "{seen:?}");
    assert!(procs_with_tag(&t).is_empty());
}

/// A session on the stateless fake with a one-second tool timeout and `deadline` for tasks.
fn task_session(dir: &Path, log: &Path, t: &str, deadline: Duration) -> Session {
    let mut spec = recorded("st", log, &[STATELESS], t);
    spec.tool_timeout = Duration::from_secs(1);
    spec.task_deadline = deadline;
    session(dir, vec![spec], true)
}

#[tokio::test]
async fn tasks_are_followed_to_their_end() {
    let (dir, log, t) = wire("tasks");
    let s = task_session(dir.path(), &log, &t, Duration::from_secs(30));
    // Twelve polls of at least 100 ms: the task outlasts the one-second tool timeout,
    // which bounds each poll, not the task.
    let started = std::time::Instant::now();
    assert_eq!(echo(&s, "st__slow_task").await.as_deref(), Ok("slow done"));
    assert!(started.elapsed() > Duration::from_secs(1));
    assert_eq!(
        echo(&s, "st__asking_task").await.as_deref(),
        Ok("built for Grace")
    );
    let failed = echo(&s, "st__failing_task").await.err().unwrap_or_default();
    assert!(failed.contains("the build broke"), "{failed}");
    s.close().await;
    let seen = methods(&log);
    let gets = seen.iter().filter(|m| *m == "tasks/get").count();
    // Twelve for the slow task, two for the asking one, one for the failing one.
    assert!(gets >= 15, "{seen:?}");
    assert_eq!(seen.iter().filter(|m| *m == "tasks/update").count(), 1);
    // Nothing was still running at close: nothing to cancel.
    assert!(!seen.iter().any(|m| m == "tasks/cancel"), "{seen:?}");
    assert!(procs_with_tag(&t).is_empty());
}

#[tokio::test]
async fn a_task_past_its_deadline_is_cancelled_at_the_server() {
    let (dir, log, t) = wire("deadline");
    let s = task_session(dir.path(), &log, &t, Duration::from_millis(1500));
    let e = echo(&s, "st__endless_task").await.err().unwrap_or_default();
    assert!(e.contains("its deadline; cancelled"), "{e}");
    s.close().await;
    let seen = methods(&log);
    assert_eq!(
        seen.last().map(String::as_str),
        Some("tasks/cancel"),
        "{seen:?}"
    );
    assert!(procs_with_tag(&t).is_empty());
}

/// A session on the stateless fake, and a call of its endless task that is being
/// followed (its first `tasks/get` went out, or 5 s passed).
async fn endless_task(
    dir: &Path,
    log: &Path,
    t: &str,
) -> (
    Arc<Session>,
    tokio::task::JoinHandle<Result<String, String>>,
) {
    let s = Arc::new(task_session(dir, log, t, Duration::from_secs(3600)));
    let call = {
        let s = s.clone();
        tokio::spawn(async move { echo(&s, "st__endless_task").await })
    };
    for _ in 0..50 {
        if methods(log).iter().any(|m| m == "tasks/get") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (s, call)
}

#[tokio::test]
async fn closing_the_session_cancels_a_task_in_flight() {
    let (dir, log, t) = wire("close-task");
    let (s, call) = endless_task(dir.path(), &log, &t).await;
    // What Ctrl-C does in `edgar mcp call`: the call is dropped, the session closed.
    call.abort();
    s.close().await;
    let seen = methods(&log);
    assert!(seen.iter().any(|m| m == "tasks/cancel"), "{seen:?}");
    assert!(procs_with_tag(&t).is_empty());
}

/// A call dropped while its task runs (a gateway's client cancelled the task it was
/// handed) cancels the task at the server at once, not when the session closes.
#[tokio::test]
async fn a_task_nobody_waits_for_is_cancelled_at_once() {
    let (dir, log, t) = wire("dropped-task");
    let (s, call) = endless_task(dir.path(), &log, &t).await;
    call.abort();
    let mut cancelled = false;
    for _ in 0..50 {
        cancelled = methods(&log).iter().any(|m| m == "tasks/cancel");
        if cancelled {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(cancelled, "{:?}", methods(&log));
    s.close().await;
    assert!(procs_with_tag(&t).is_empty());
}

#[tokio::test]
async fn a_tool_list_the_server_says_is_fresh_is_not_fetched_again() {
    let (dir, log, t) = wire("ttl");
    let fresh = || {
        let mut s = recorded("st", &log, &[STATELESS], &t);
        if let edgar_host::config::Transport::Stdio { env, .. } = &mut s.transport {
            env.insert("FAKE_TTL_MS".into(), "600000".into());
        }
        s
    };
    let s = session(dir.path(), vec![fresh()], false);
    assert_eq!(echo(&s, "st__echo").await.as_deref(), Ok("hi"));
    s.close().await;
    let _ = std::fs::remove_file(&log);
    // Ten minutes of freshness: the next cold start goes straight to the call.
    let s = session(dir.path(), vec![fresh()], false);
    assert_eq!(echo(&s, "st__echo").await.as_deref(), Ok("hi"));
    s.close().await;
    let mut seen = methods(&log);
    seen.retain(|m| m != "subscriptions/listen");
    assert_eq!(seen, ["tools/call"]);
    assert!(procs_with_tag(&t).is_empty());
}

/// A `prompts/get` right after a list uses the list just checked (one `prompts/list`
/// on the wire, not one per get); the server saying its prompts changed makes the next
/// get list again, and see the change.
#[tokio::test]
async fn a_prompt_get_lists_again_only_when_the_list_may_have_changed() {
    let (dir, log, t) = wire("prompt-list-kept");
    let root = dir.path().to_string_lossy().into_owned();
    let edgar = env!("CARGO_BIN_EXE_edgar-it");
    let argv = [
        edgar,
        "mcp",
        "example-server",
        "--conformance",
        "--root",
        &root,
    ];
    let s = session(dir.path(), vec![recorded("ex", &log, &argv, &t)], false);
    let listed = s.prompts("ex").await.unwrap_or_else(|e| panic!("{e}"));
    assert!(listed.iter().all(|p| p.name != "test_added_prompt"));
    let none = std::collections::BTreeMap::new();
    for _ in 0..3 {
        let out = s.prompt("ex", "test_simple_prompt", &none).await;
        assert!(out.is_ok(), "{:?}", out.err());
    }
    let lists = |log: &Path| methods(log).iter().filter(|m| *m == "prompts/list").count();
    assert_eq!(lists(&log), 1, "{:?}", methods(&log));
    // The server adds a prompt and says so: the next get lists again and finds it.
    s.call("ex__test_trigger_prompt_change", json!({}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let added = s.prompt("ex", "test_added_prompt", &none).await;
    assert!(
        !matches!(added, Err(edgar_host::mcp::McpError::NotOffered { .. })),
        "the change was not seen: {:?}",
        added.err()
    );
    assert_eq!(lists(&log), 2, "{:?}", methods(&log));
    s.close().await;
    assert!(procs_with_tag(&t).is_empty());
}
