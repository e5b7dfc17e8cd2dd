//! Real MCP servers published by others, installed by `.ci/test`: discover, list, call
//! several tools, close, and leave no process behind.

use std::time::Duration;

use edgar_tests::{fixture, installed};
use serde_json::json;

use crate::mcp_stdio::{Harness, spec, text_of};

fn npm(bin: &str) -> String {
    installed(&format!("npm/node_modules/.bin/{bin}"))
        .display()
        .to_string()
}

fn slow_start(mut s: edgar_host::config::ServerSpec) -> edgar_host::config::ServerSpec {
    s.startup_timeout = Duration::from_secs(60);
    s
}

#[tokio::test]
async fn server_everything() {
    let h = Harness::new(vec![slow_start(spec(
        "everything",
        &npm("mcp-server-everything"),
        &["stdio"],
        &[],
    ))]);
    let tools = h
        .session
        .tools("everything")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        tools.iter().any(|t| t.name() == "everything__echo"),
        "{:?}",
        tools.iter().map(|t| t.name()).collect::<Vec<_>>()
    );
    let out = h
        .session
        .call("everything__echo", json!({"message": "hello"}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text_of(&out), "Echo: hello");
    let out = h
        .session
        .call("everything__get-sum", json!({"a": 2, "b": 3}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(text_of(&out).contains('5'), "{out:?}");
    let out = h
        .session
        .call("everything__get-tiny-image", json!({}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.content
            .iter()
            .any(|b| matches!(b, edgar_host::guard::ContentBlock::Image { .. })),
        "{out:?}"
    );
    let out = h
        .session
        .call("everything__get-roots-list", json!({}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!text_of(&out).is_empty());
    h.close().await;
}

#[tokio::test]
async fn server_memory() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = dir.path().join("memory.jsonl").display().to_string();
    let h = Harness::new(vec![slow_start(spec(
        "memory",
        &npm("mcp-server-memory"),
        &[],
        &[("MEMORY_FILE_PATH", file)],
    ))]);
    let entity = json!({"entities": [{"name": "edgar", "entityType": "project", "observations": ["written in Rust"]}]});
    h.session
        .call("memory__create_entities", entity)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let out = h
        .session
        .call("memory__search_nodes", json!({"query": "Rust"}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(text_of(&out).contains("edgar"), "{out:?}");
    h.close().await;
}

/// server-filesystem replaces its allowed directories with the client's roots, so the
/// file lives in the session's working directory (the root edgar offers).
#[tokio::test]
async fn server_filesystem() {
    let workdir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = workdir
        .path()
        .canonicalize()
        .unwrap_or_else(|e| panic!("{e}"));
    let root_s = root.display().to_string();
    let h = Harness::in_dir(
        &root,
        vec![slow_start(spec(
            "fs",
            &npm("mcp-server-filesystem"),
            &[&root_s],
            &[],
        ))],
    );
    std::fs::write(root.join("note.txt"), "edgar was here\n").unwrap_or_else(|e| panic!("{e}"));
    let path = root.join("note.txt").display().to_string();
    let out = h
        .session
        .call("fs__read_text_file", json!({"path": path}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(text_of(&out).contains("edgar was here"), "{out:?}");
    let out = h
        .session
        .call("fs__list_directory", json!({"path": root_s}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(text_of(&out).contains("note.txt"), "{out:?}");
    let e = h
        .session
        .call("fs__read_text_file", json!({}))
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("do not match its input schema"), "{e}");
    h.close().await;
}

#[tokio::test]
async fn a_python_sdk_server() {
    let python = installed("py/bin/python").display().to_string();
    let script = fixture("python_server.py").display().to_string();
    let h = Harness::new(vec![slow_start(spec("py", &python, &[&script], &[]))]);
    let out = h
        .session
        .call("py__add", json!({"a": 20, "b": 22}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(text_of(&out).contains("42"), "{out:?}");
    let out = h
        .session
        .call("py__shout", json!({"text": "quiet"}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(text_of(&out).contains("QUIET"), "{out:?}");
    h.close().await;
}
