//! The guard through real components: the reference adapter on hostile input and on
//! the whole corpus, and misbehaving adapters built by this crate.

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

use edgar_host::guard::provider::violations;
use edgar_host::guard::{
    Adapter, AdapterSource, Guard, GuardError, Provider, SanitizedTool, compile_schema,
};
use edgar_tests::{corpus, test_adapter};
use serde_json::json;

fn guard() -> &'static Guard {
    static GUARD: OnceLock<Guard> = OnceLock::new();
    GUARD.get_or_init(|| Guard::new(None))
}

fn builtin() -> Arc<Adapter> {
    guard()
        .adapter(&AdapterSource::Builtin)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn misbehaving() -> Arc<Adapter> {
    guard()
        .adapter(&AdapterSource::File(test_adapter("misbehaving")))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn err_text<T: std::fmt::Debug>(r: Result<T, GuardError>) -> String {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.to_string(),
    }
}

/// After any failure the same adapter must still serve a normal call.
fn still_works(a: &Adapter) {
    assert_eq!(a.tool_name("s", "ok").ok().as_deref(), Some("s__ok"));
}

#[test]
fn hostile_names_get_clean_distinct_names() {
    let a = builtin();
    let cases = [
        ("srv", "x".repeat(1000)),
        ("srv", "read file".to_owned()),
        ("srv", "read_file".to_owned()),
        ("srv", "read-file".to_owned()),
        ("srv", "read.file".to_owned()),
        ("srv", "résumé 工具 🚀".to_owned()),
        ("srv", "tool_search".to_owned()),
        ("tool", "search".to_owned()),
        ("srv", "\u{1b}[31mred\u{0}".to_owned()),
    ];
    let mut seen = HashSet::new();
    for (server, tool) in &cases {
        let name = a.tool_name(server, tool).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            name.len() <= 64
                && name
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
        );
        assert_ne!(name, "tool_search");
        assert!(seen.insert(name.clone()), "{tool:?} collided on {name}");
    }
    assert!(err_text(a.tool_name("srv", "")).contains("empty"));
}

#[test]
fn hostile_schemas_end_in_a_clear_error_or_a_cleaned_value() {
    let a = builtin();
    let deep = format!(
        r#"{{"name":"t","inputSchema":{}{}}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    assert!(err_text(a.to_schema("s", &deep)).contains("not valid JSON"));

    let huge = format!(r#"{{"name":"t","description":"{}"}}"#, "x".repeat(50 << 20));
    assert!(err_text(a.to_schema("s", &huge)).contains("over the"));

    let million: Vec<u32> = (0..1_000_000).collect();
    let big_enum = json!({"name": "t", "inputSchema": {"type": "object", "properties": {"e": {"enum": million}}}});
    assert!(err_text(a.to_schema("s", &big_enum.to_string())).contains("over the"));

    let remote = json!({"name": "t", "inputSchema": {"type": "object", "properties": {"r": {"$ref": "http://127.0.0.1:9/evil.json"}}}});
    let t = a
        .to_schema("s", &remote.to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.input_schema()["properties"]["r"], json!({}));
    assert!(
        t.dropped()
            .iter()
            .any(|d| d.reason.contains("remote $ref refused"))
    );

    let recursive = json!({"name": "t", "inputSchema": {"type": "object", "$ref": "#",
        "properties": {"self": {"$ref": "#"}}, "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}}});
    assert!(a.to_schema("s", &recursive.to_string()).is_ok());

    assert!(
        err_text(a.to_schema("s", r#"{"name":"t","inputSchema":{"type":"string"}}"#))
            .contains("not \"object\"")
    );
    assert!(err_text(a.to_schema("s", "not json at all")).contains("not valid JSON"));
    still_works(&a);
}

#[test]
fn hostile_results_end_in_a_clear_error_or_a_cleaned_value() {
    let a = builtin();
    let huge = json!({"content": [{"type": "text", "text": "x".repeat(200 << 20)}]}).to_string();
    assert!(err_text(a.to_result("s", "t", &huge)).contains("over the"));

    let r = json!({"content": [
        {"type": "image", "mimeType": "image/png", "data": "!!not base64!!"},
        {"type": "image", "mimeType": "image/svg+xml", "data": "aGk="},
        {"type": "mystery", "payload": 1},
        {"type": "text", "text": "y".repeat(300_000)}
    ]});
    let out = a
        .to_result("s", "t", &r.to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    let text = serde_json::to_string(&out).unwrap_or_default();
    assert!(text.contains("not valid base64"));
    assert!(text.contains("type not allowed"));
    assert!(text.contains("unsupported type 'mystery'"));
    assert!(text.contains("[edgar cut "));
    assert!(text.len() < 200_000);
    still_works(&a);
}

#[test]
fn an_infinite_loop_is_interrupted() {
    let a = misbehaving();
    assert!(err_text(a.tool_name("s", "loop")).contains("time limit"));
    still_works(&a);
}

#[test]
fn a_memory_bomb_is_stopped() {
    let a = misbehaving();
    assert!(err_text(a.tool_name("s", "bomb")).contains("memory"));
    still_works(&a);
}

#[test]
fn memory_is_budgeted_across_all_of_an_adapters_memories() {
    // Eight memories of 16 MiB: each under the cap, together twice it.
    let a = guard()
        .adapter(&AdapterSource::File(test_adapter("hostile-memories")))
        .unwrap_or_else(|e| panic!("{e}"));
    let e = err_text(a.tool_name("s", "t"));
    assert!(e.contains("more than 64 MiB of memory"), "{e}");
}

#[test]
fn table_growth_is_budgeted() {
    let a = guard()
        .adapter(&AdapterSource::File(test_adapter("hostile-tables")))
        .unwrap_or_else(|e| panic!("{e}"));
    let e = err_text(a.tool_name("s", "t"));
    assert!(e.contains("more than 65536 table elements"), "{e}");
}

#[test]
fn host_resources_an_adapter_holds_are_bounded() {
    let a = misbehaving();
    let e = err_text(a.tool_name("s", "handles"));
    assert!(e.contains("more than 256 host resources"), "{e}");
    still_works(&a);
}

#[test]
fn a_whole_tool_list_has_one_deadline() {
    // Each tool runs into the 1 s per-call limit; the list as a whole stops at 10 s
    // and says how many tools it never looked at.
    let a = misbehaving();
    let tools: Vec<String> = (0..30).map(|i| format!(r#"{{"name": "t{i}"}}"#)).collect();
    let out = a.accept_tools("loop", &tools);
    assert!(out.len() < tools.len(), "{} results", out.len());
    let last = out
        .last()
        .and_then(|r| r.as_ref().err())
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(
        last.contains("10 s limit for one tool list") && last.contains("were not examined"),
        "{last}"
    );
    assert!(
        out[..out.len() - 1]
            .iter()
            .all(|r| r.as_ref().is_err_and(|e| e.to_string().contains("limit"))),
    );
    still_works(&a);
}

#[test]
fn a_panic_and_a_stack_overflow_are_contained() {
    let a = misbehaving();
    assert!(err_text(a.tool_name("s", "trap")).contains("trapped"));
    assert!(err_text(a.tool_name("s", "stack")).contains("stack"));
    still_works(&a);
}

#[test]
fn a_chatty_adapter_is_bounded_not_killed() {
    let a = misbehaving();
    assert_eq!(a.tool_name("s", "print").ok().as_deref(), Some("s__print"));
}

#[test]
fn lying_output_is_refused_by_the_host() {
    let a = misbehaving();
    for (tool, expect) in [
        ("bad-chars", "outside [A-Za-z0-9_-]"),
        ("builtin", "shadow a built-in"),
        ("too-long", "1 to 64"),
    ] {
        let e = err_text(a.tool_name("s", tool));
        assert!(e.contains(expect), "{tool}: {e}");
    }
    for (server, expect) in [
        ("not-json", "not JSON"),
        ("array-schema", "not an object schema"),
        ("remote-ref", "does not compile"),
        ("huge", "over 262144 bytes"),
    ] {
        let e = err_text(a.to_schema(server, "{}"));
        assert!(e.contains(expect), "{server}: {e}");
    }
    for (input, expect) in [
        ("bad-base64", "not valid base64"),
        ("bad-mime", "not allowed"),
        ("huge-text", "over the 1048576-byte limit"),
    ] {
        let e = err_text(a.to_result("s", "t", input));
        assert!(e.contains(expect), "{input}: {e}");
    }
    still_works(&a);
}

#[test]
fn an_adapter_cannot_reroute_a_call_or_claim_another_servers_names() {
    let a = misbehaving();
    // It accepts every tool as `t`: a call to list_issues would reach the server's `t`.
    let e = err_text(a.to_schema("s", r#"{"name": "list_issues", "inputSchema": {}}"#));
    assert!(
        e.contains("renamed the server's tool 'list_issues' to 't'"),
        "{e}"
    );
    let e = err_text(a.to_schema("s", r#"{"inputSchema": {}}"#));
    assert!(e.contains("has no name"), "{e}");
    // `same_name` carries no server prefix: it could be anyone's.
    let e = err_text(a.tool_name("s", "same"));
    assert!(e.contains("does not carry the prefix of server 's'"), "{e}");
    still_works(&a);
}

#[test]
fn duplicate_names_from_an_adapter_keep_only_the_first() {
    let a = misbehaving();
    let t = r#"{"name": "t"}"#.to_owned();
    let mut out = a.accept_tools("s", &[t.clone(), t]).into_iter();
    assert!(out.next().is_some_and(|r| r.is_ok()));
    let second = out.next().unwrap_or_else(|| panic!("two results"));
    assert!(err_text(second).contains("already taken"));
}

/// An adapter built on 0.2.1 (the misbehaving one) loads under 0.2.2: the contract of
/// 0.2 with lowering, without `context`, whose prompts and resources the host then gives
/// to the built-in adapter.
#[test]
fn an_adapter_of_the_last_release_loads_without_the_new_interface() {
    let a = misbehaving();
    assert_eq!(a.contract(), "0.2");
    assert!(!a.contextual());
    let e = a.accept_context(
        "s",
        edgar_host::guard::context::ContextKind::Prompt,
        &[r#"{"name": "p"}"#.to_owned()],
    );
    assert!(
        matches!(&e[0], Err(GuardError::Failed { reason, .. }) if reason.contains("no edgar:schema/context")),
        "{e:?}"
    );
}

#[test]
fn incompatible_components_are_refused_with_a_clear_message() {
    let g = Guard::new(None);
    let e = err_text(g.adapter(&AdapterSource::File(test_adapter("other-version"))));
    assert!(
        e.contains("edgar:schema/adapter@0.3.0")
            && e.contains("must export edgar:schema/adapter@0.2.2 (or the previous edgar:schema/adapter@0.1.0)"),
        "{e}"
    );
    let e = err_text(g.adapter(&AdapterSource::File(test_adapter("wrong-shape"))));
    assert!(
        e.contains("not compatible") && e.contains("type mismatch"),
        "{e}"
    );
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let empty = dir.path().join("empty.wasm");
    std::fs::write(&empty, b"\0asm\x0d\0\x01\0").unwrap_or_else(|e| panic!("{e}"));
    let e = err_text(g.adapter(&AdapterSource::File(empty)));
    assert!(e.contains("exports nothing"), "{e}");
    let junk = dir.path().join("junk.wasm");
    std::fs::write(&junk, b"definitely not wasm").unwrap_or_else(|e| panic!("{e}"));
    assert!(err_text(g.adapter(&AdapterSource::File(junk))).contains("cannot compile"));
    let missing = dir.path().join("missing.wasm");
    assert!(err_text(g.adapter(&AdapterSource::File(missing))).contains("cannot read"));
}

#[test]
fn a_corrupt_artifact_cache_is_ignored_and_rebuilt() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let first = Guard::new(Some(dir.path().to_owned()));
    first
        .adapter(&AdapterSource::Builtin)
        .unwrap_or_else(|e| panic!("{e}"));
    let wasm_dir = dir.path().join("wasm");
    let files: Vec<_> = std::fs::read_dir(&wasm_dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let mut bytes = std::fs::read(&files[0]).unwrap_or_else(|e| panic!("{e}"));
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&files[0], &bytes).unwrap_or_else(|e| panic!("{e}"));

    let second = Guard::new(Some(dir.path().to_owned()));
    let a = second
        .adapter(&AdapterSource::Builtin)
        .unwrap_or_else(|e| panic!("{e}"));
    still_works(&a);
    let rebuilt = std::fs::read(&files[0]).unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(rebuilt, bytes, "the corrupt artifact was replaced");
}

/// Every real tool in the corpus passes the guard, keeps a name of the right shape, and
/// no two tools anywhere share a name.
#[test]
fn the_whole_corpus_passes_the_guard() {
    let a = builtin();
    let mut names = HashSet::new();
    let mut accepted = 0;
    let mut refused = Vec::new();
    for server in corpus() {
        for result in a.accept_tools(&server.server, &server.tools) {
            match result {
                Ok(t) => {
                    accepted += 1;
                    assert!(names.insert(t.name().to_owned()), "duplicate {}", t.name());
                }
                Err(e) => refused.push(e.to_string()),
            }
        }
    }
    assert_eq!(accepted + refused.len(), 2506);
    assert!(
        refused.is_empty(),
        "{} refused: {refused:#?}",
        refused.len()
    );
}

/// Every corpus tool lowered for every provider meets that provider's rules: the host
/// checks each lowered schema and refuses one that breaks them, names included, so an
/// `Ok` here is a schema the provider accepts.
#[test]
fn the_whole_corpus_lowers_for_every_provider() {
    let a = builtin();
    let tools: Vec<SanitizedTool> = corpus()
        .iter()
        .flat_map(|s| a.accept_tools(&s.server, &s.tools))
        .map(|r| r.unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let refs: Vec<&SanitizedTool> = tools.iter().collect();
    for provider in Provider::ALL {
        let mut failed = Vec::new();
        let mut losses = 0;
        for (t, r) in tools.iter().zip(a.lower_tools(&refs, provider)) {
            match r {
                Ok(l) => {
                    assert_eq!(l.profile(), provider);
                    assert!(violations(provider, t.name(), l.input_schema()).is_empty());
                    if provider == Provider::Generic {
                        assert_eq!(l.input_schema(), t.input_schema());
                    }
                    losses += l.losses().len();
                }
                Err(e) => failed.push(e.to_string()),
            }
        }
        assert!(failed.is_empty(), "{provider}: {failed:#?}");
        // The corpus has no top-level combinators, so Anthropic loses nothing either.
        let lossless = matches!(provider, Provider::Generic | Provider::Anthropic);
        assert_eq!(losses == 0, lossless, "{provider}: {losses} losses");
    }
}

/// An adapter built for `edgar:schema@0.1.0` still loads and works, and gets the generic
/// profile for any provider, said in its losses.
#[test]
fn an_adapter_for_the_previous_contract_still_loads() {
    let a = guard()
        .adapter(&AdapterSource::File(test_adapter("previous-version")))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.tool_name("s", "t").ok().as_deref(), Some("s__t"));
    let tool = json!({"name": "t", "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}});
    let t = a
        .to_schema("s", &tool.to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.name(), "s__t");
    let out = a
        .to_result("s", "t", r#"{"content": [{"type": "text", "text": "hi"}]}"#)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        serde_json::to_value(&out).ok(),
        Some(json!({"isError": false, "content": [{"type": "text", "text": "hi"}]}))
    );
    for provider in [Provider::OpenaiStrict, Provider::Generic] {
        let l = a
            .lower_tools(&[&t], provider)
            .pop()
            .unwrap_or_else(|| panic!("one result"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(l.profile(), Provider::Generic);
        assert_eq!(l.input_schema(), t.input_schema());
        assert_eq!(l.losses().is_empty(), provider == Provider::Generic);
    }
}

/// A lowering that breaks the provider's rules, is not JSON, or runs away ends in a
/// clear error for that tool, and the adapter keeps serving.
#[test]
fn a_lying_or_runaway_lowering_is_refused() {
    let a = misbehaving();
    for (how, want) in [
        ("lie", "breaks its rules"),
        ("not-json", "not JSON"),
        ("loop", "time limit"),
        ("trap", "trapped"),
    ] {
        let t = a
            .to_schema(&format!("lower-{how}"), r#"{"name": "t"}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        let e = err_text(
            a.lower_tools(&[&t], Provider::OpenaiStrict)
                .pop()
                .unwrap_or_else(|| panic!("one result")),
        );
        assert!(e.contains(want), "{how}: {e}");
        still_works(&a);
    }
}

/// An adapter's loss notes reach terminals: control and invisible formatting
/// characters are gone from them by the time the host hands them on.
#[test]
fn an_adapters_loss_notes_are_cleaned() {
    let a = misbehaving();
    let t = a
        .to_schema("lower-evil-note", r#"{"name": "t"}"#)
        .unwrap_or_else(|e| panic!("{e}"));
    let l = a
        .lower_tools(&[&t], Provider::Anthropic)
        .pop()
        .unwrap_or_else(|| panic!("one result"))
        .unwrap_or_else(|e| panic!("{e}"));
    let note = &l.losses()[0];
    assert_eq!(note.path, "/properties/x [2J");
    assert_eq!(note.reason, "cleared your screen ");
}

/// The lowered schema only changes what the model is shown: arguments are validated
/// with the accepted schema, which refuses what a lowering weakened.
#[test]
fn arguments_are_validated_with_the_accepted_schema_not_the_lowered_one() {
    let a = builtin();
    let tool = json!({"name": "t", "inputSchema": {"type": "object", "properties": {
        "n": {"type": "number", "exclusiveMinimum": 0},
        "q": {"type": "string", "minLength": 3}
    }, "required": ["n", "q"]}});
    let t = a
        .to_schema("s", &tool.to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    let accepted = compile_schema(t.input_schema()).unwrap_or_else(|e| panic!("{e}"));
    for (provider, weakened) in [
        (Provider::Gemini, json!({"n": 0, "q": "abc"})),
        (Provider::OpenaiStrict, json!({"n": 1, "q": "ab"})),
    ] {
        let l = a
            .lower_tools(&[&t], provider)
            .pop()
            .unwrap_or_else(|| panic!("one result"))
            .unwrap_or_else(|e| panic!("{e}"));
        let lowered = compile_schema(l.input_schema()).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            lowered.is_valid(&weakened),
            "{provider}: {}",
            l.input_schema()
        );
        assert!(!accepted.is_valid(&weakened), "{provider}");
        assert!(!l.losses().is_empty());
    }
}

/// The reference adapter's per-call arena gives its memory back between calls: an
/// instance reused for thousands of results stays small, as it would with any allocator.
#[test]
fn an_instance_reused_for_many_calls_does_not_grow() {
    let guard = Guard::new(None);
    let a = guard
        .adapter(&AdapterSource::Builtin)
        .unwrap_or_else(|e| panic!("{e}"));
    let result = json!({"content": [{"type": "text", "text": "x".repeat(100_000)}]}).to_string();
    for _ in 0..2000 {
        a.to_result("s", "t", &result)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let tools: Vec<String> = (0..2000)
        .map(|i| json!({"name": format!("t{i}"), "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}}).to_string())
        .collect();
    assert!(a.accept_tools("s", &tools).iter().all(Result::is_ok));
    // 2,000 calls of 100 KB each would need 200 MB without reuse; the limit is 64 MiB.
    assert!(a.peak_memory() < 8 << 20, "{} bytes", a.peak_memory());
}
