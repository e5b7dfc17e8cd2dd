//! The guard through the real reference component.

use std::sync::OnceLock;

use serde_json::json;

use super::adapter::MAX_POOLED_INPUT_BYTES;
use super::*;

fn adapter() -> Arc<Adapter> {
    static GUARD: OnceLock<Guard> = OnceLock::new();
    GUARD
        .get_or_init(|| Guard::new(None))
        .adapter(&AdapterSource::Builtin)
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn names_go_through_the_component() {
    let a = adapter();
    assert_eq!(
        a.tool_name("github", "create_issue").ok().as_deref(),
        Some("github__create_issue")
    );
    let long = a
        .tool_name("srv", &"x".repeat(1000))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(long.len(), 64);
    assert!(matches!(
        a.tool_name("", "x"),
        Err(GuardError::Rejected { .. })
    ));
    assert!(matches!(
        a.tool_name("s", &"x".repeat(MAX_NAME_INPUT_BYTES + 1)),
        Err(GuardError::TooLarge { .. })
    ));
}

#[test]
fn schemas_are_accepted_and_checked() {
    let a = adapter();
    let tool = json!({"name": "read", "description": "Read", "inputSchema": {
        "type": "object", "properties": {"p": {"type": "string"}}, "x-v": 1
    }, "annotations": {"readOnlyHint": true}});
    let t = a
        .to_schema("fs", &tool.to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.name(), "fs__read");
    assert_eq!(t.tool(), "read");
    assert_eq!(
        t.input_schema(),
        &json!({"type": "object", "properties": {"p": {"type": "string"}}})
    );
    assert_eq!(t.hints().read_only, Some(true));
    assert_eq!(t.dropped().len(), 1);
}

#[test]
fn a_schema_that_does_not_compile_is_refused_by_the_host() {
    let a = adapter();
    let tool = json!({"name": "t", "inputSchema": {"type": "object", "properties": {"p": {"pattern": "(a"}}}});
    let err = a
        .to_schema("s", &tool.to_string())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("does not compile"), "{err}");
}

#[test]
fn batches_keep_going_after_a_bad_tool_and_refuse_duplicates() {
    let a = adapter();
    let tools = vec![
        json!({"name": "a", "inputSchema": {"type": "object"}}).to_string(),
        "garbage".to_owned(),
        json!({"name": "a", "inputSchema": {"type": "object"}}).to_string(),
        json!({"name": "b"}).to_string(),
    ];
    let out = a.accept_tools("s", &tools);
    assert!(out[0].is_ok());
    assert!(matches!(out[1], Err(GuardError::Rejected { .. })));
    assert!(
        matches!(&out[2], Err(GuardError::BadOutput { reason, .. }) if reason.contains("already taken"))
    );
    assert!(out[3].is_ok());
}

#[test]
fn results_become_blocks() {
    let a = adapter();
    let r = json!({"content": [{"type": "text", "text": "hi"}, {"type": "image", "mimeType": "image/png", "data": "aGk="}], "isError": true});
    let out = a
        .to_result("s", "t", &r.to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.is_error);
    assert_eq!(out.content[0], ContentBlock::Text { text: "hi".into() });
    assert!(
        matches!(&out.content[1], ContentBlock::Image { mime_type, .. } if mime_type == "image/png")
    );
}

#[test]
fn a_servers_results_are_converted_and_scanned_in_its_own_kept_instances() {
    // An adapter of its own, so no other test's instances are in its pool.
    let a = Guard::new(None)
        .adapter(&AdapterSource::Builtin)
        .unwrap_or_else(|e| panic!("{e}"));
    let kept = |server: &str| lock(&a.idle).get(server).map_or(0, Vec::len);
    let secret = "AKIAIOSFODNN7EXAMPLE";
    let r = json!({"content": [{"type": "text", "text": format!("key {secret}")}]});
    let out = a
        .to_result("s", "t", &r.to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(kept("s"), 1, "the conversion's instance is kept");
    let found = a
        .scan_output("s", "t", &out)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        found.len(),
        1,
        "the scan in a kept instance still finds: {found:?}"
    );
    assert_eq!(
        kept("s"),
        1,
        "the scan took the kept instance and gave it back"
    );
    // Another server's results never use it.
    a.scan_output("other", "t", &out)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((kept("s"), kept("other")), (1, 1));
    // A large output's instance is not kept (its memory stays grown).
    let large = ToolOutput {
        is_error: false,
        content: vec![ContentBlock::Text {
            text: "x".repeat(MAX_POOLED_INPUT_BYTES + 1),
        }],
    };
    let _ = a.scan_output("s", "t", &large);
    assert_eq!(kept("s"), 0);
}

#[test]
fn oversized_results_never_reach_the_guest() {
    let a = adapter();
    let big = "x".repeat(MAX_RESULT_JSON_BYTES + 1);
    assert!(matches!(
        a.to_result("s", "t", &big),
        Err(GuardError::TooLarge { .. })
    ));
}

#[test]
fn artifacts_load_only_from_a_directory_no_one_else_can_write() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    Guard::new(Some(dir.path().to_owned()))
        .adapter(&AdapterSource::Builtin)
        .unwrap_or_else(|e| panic!("{e}"));
    let wasm = dir.path().join("wasm");
    assert!(artifact::is_private(&wasm));
    let file = std::fs::read_dir(&wasm)
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
        .next()
        .unwrap_or_else(|| panic!("no artifact"))
        .path();
    // Planted native code in a directory others can write: never read (a read would
    // find it corrupt and delete it).
    std::fs::write(&file, b"planted").unwrap_or_else(|e| panic!("{e}"));
    std::fs::set_permissions(&wasm, std::fs::Permissions::from_mode(0o777))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!artifact::is_private(&wasm));
    Guard::new(Some(dir.path().to_owned()))
        .adapter(&AdapterSource::Builtin)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        std::fs::read(&file).unwrap_or_default() == b"planted",
        "a file in a shared directory was read or rewritten"
    );
    // A private directory but a file others can write: not read, but replaced by a
    // fresh private artifact.
    std::fs::set_permissions(&wasm, std::fs::Permissions::from_mode(0o700))
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666))
        .unwrap_or_else(|e| panic!("{e}"));
    Guard::new(Some(dir.path().to_owned()))
        .adapter(&AdapterSource::Builtin)
        .unwrap_or_else(|e| panic!("{e}"));
    let replaced = std::fs::read(&file).unwrap_or_default();
    assert!(replaced.len() > 1000, "the planted file was not replaced");
    assert!(artifact::is_private(&file));
}
