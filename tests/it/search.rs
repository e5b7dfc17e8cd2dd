//! `tool_search` through the session and the CLI: names in the prompt, schemas on
//! search, the reserve, the found set, and bad queries.

use edgar_host::tools::prompt::prompt_tools;
use edgar_host::tools::search_tool::{TOOL_SEARCH, ToolSearch};
use edgar_tests::run;
use serde_json::json;

use crate::mcp_stdio::{Harness, spec};

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar-it");
const FAKE: &str = env!("CARGO_BIN_EXE_fake-mcp-server");

#[tokio::test]
async fn the_prompt_has_names_until_a_search_finds_schemas() {
    let mut silent = spec("silent", FAKE, &["silent"], &[]);
    silent.startup_timeout = std::time::Duration::from_millis(500);
    // `silent` fails by its own deadline; `fake` is waited for however busy the machine.
    let h = Harness::patient(vec![spec("fake", FAKE, &["good"], &[]), silent]);
    let search = ToolSearch::new(3000);
    let before = prompt_tools(&h.session, &search).await;
    assert_eq!(before.definitions.len(), 1);
    assert_eq!(before.definitions[0]["name"], TOOL_SEARCH);
    assert_eq!(before.names.len(), 5);
    assert_eq!(before.unavailable.len(), 1, "{:?}", before.unavailable);

    let reply = search.search(&h.session, "add two integers").await;
    assert_eq!(
        reply.tools.first().map(|t| t.name.as_str()),
        Some("fake__add"),
        "{}",
        reply.found
    );
    assert!(
        reply.found.contains("now callable directly by name"),
        "{}",
        reply.found
    );
    assert!(
        reply.found.contains("Not searched: MCP server 'silent'"),
        "{}",
        reply.found
    );
    let after = prompt_tools(&h.session, &search).await;
    assert!(
        after
            .definitions
            .iter()
            .any(|d| d["name"] == "fake__add" && d["input_schema"]["type"] == "object")
    );
    h.close().await;
}

/// A home whose user config has the fake server `fake`.
fn home_with_fake() -> tempfile::TempDir {
    let h = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = h.path().join("config").join("edgar");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.join("mcp.json"),
        json!({"mcpServers": {"fake": {"command": FAKE, "args": ["good"]}}}).to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    h
}

/// A schema too large for what is left of the reserve is named, and the next, smaller
/// ones are still returned: one large tool does not crowd out the rest.
#[test]
fn a_schema_too_large_for_the_reserve_is_named_and_the_next_still_returned() {
    let h = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = h.path().join("config").join("edgar");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    let long = "Writes a compressed archive of the given folders. ".repeat(40);
    let tools = json!([
        {"name": "big_archive", "description": long, "inputSchema": schema},
        {"name": "small_archive", "description": "Writes a small archive.", "inputSchema": schema},
    ]);
    let list = h.path().join("tools.json");
    std::fs::write(&list, tools.to_string()).unwrap_or_else(|e| panic!("{e}"));
    let server = json!({"command": FAKE, "args": ["good"], "env": {"FAKE_TOOLS": list}});
    std::fs::write(
        dir.join("mcp.json"),
        json!({"mcpServers": {"fake": server}}).to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let search = |reserve: &str| {
        let args = ["tool-search", "big archive", "--reserve", reserve, "--json"];
        let r = run(EDGAR, h.path(), &args, b"");
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        r.json()
    };
    // With room for both: the large one first.
    let v = search("100000");
    let (first, second) = (&v["tools"][0], &v["tools"][1]);
    assert_eq!(first["name"], "fake__big_archive", "{v}");
    assert_eq!(second["name"], "fake__small_archive", "{v}");
    let small = second["tokens"].as_u64().unwrap_or(0);
    assert!(first["tokens"].as_u64().unwrap_or(0) > small, "{v}");
    // Room for the small one only: it is returned, the large one named.
    let v = search(&small.to_string());
    let names: Vec<&str> = v["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names.first(), Some(&"fake__small_archive"), "{v}");
    assert!(!names.contains(&"fake__big_archive"), "{v}");
    assert!(
        v["not_fitted"][0]
            .as_str()
            .unwrap_or_default()
            .starts_with("fake__big_archive ("),
        "{v}"
    );
}

#[test]
fn cli_prints_what_the_model_receives() {
    let h = home_with_fake();
    let r = run(
        EDGAR,
        h.path(),
        &["tool-search", "echo some text back", "--json"],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let v = r.json();
    assert_eq!(v["tools"][0]["name"], "fake__echo");
    assert!(v["tools"][0]["score"].as_f64().unwrap_or(0.0) > 0.0);
    assert!(v["tools"][0]["tokens"].as_u64().unwrap_or(0) > 10);
    assert!(v["found"].as_str().unwrap_or_default().starts_with("Found"));

    let r = run(
        EDGAR,
        h.path(),
        &["tool-search", "echo", "--reserve", "5", "--json"],
        b"",
    );
    let v = r.json();
    assert_eq!(v["tools"], json!([]));
    assert!(
        v["not_fitted"][0]
            .as_str()
            .unwrap_or_default()
            .starts_with("fake__echo ("),
        "{v}"
    );
    assert!(
        v["found"]
            .as_str()
            .unwrap_or_default()
            .contains("none fits"),
        "{v}"
    );

    for (query, expect) in [
        ("", "The query is empty"),
        ("?!?!", "No tool matches"),
        ("🦀🦀", "No tool matches"),
    ] {
        let r = run(EDGAR, h.path(), &["tool-search", query], b"");
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        assert!(r.stdout.starts_with(expect), "{query:?}: {}", r.stdout);
        assert!(r.stdout.len() < 400);
    }
    let long = "add ".repeat(25_000);
    let r = run(EDGAR, h.path(), &["tool-search", &long], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout.contains("fake__add"),
        "{}",
        &r.stdout[..r.stdout.len().min(300)]
    );
    assert!(r.stdout.len() < 5000, "the query is not echoed in full");
}

/// `--provider` lowers each returned schema for that provider: the JSON carries the
/// lowered schema and its losses, the text mode prints the schema on stdout and the
/// losses on stderr.
#[test]
fn cli_lowers_the_returned_schemas_for_a_provider() {
    let h = home_with_fake();
    let r = run(
        EDGAR,
        h.path(),
        &[
            "tool-search",
            "echo some text back",
            "--json",
            "--provider",
            "openai-strict",
        ],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let v = r.json();
    let echo = &v["tools"][0];
    assert_eq!(echo["name"], "fake__echo");
    let schema = &echo["schema"]["input_schema"];
    assert_eq!(schema["additionalProperties"], false, "{schema}");
    assert_eq!(schema["required"], json!(["text", "a", "b", "sleep_ms"]));
    assert_eq!(
        schema["properties"]["text"]["type"],
        json!(["string", "null"])
    );
    assert_eq!(echo["lowering"]["provider"], "openai-strict");
    assert_eq!(echo["lowering"]["losses"].as_array().map(Vec::len), Some(4));

    let r = run(
        EDGAR,
        h.path(),
        &["tool-search", "echo some text back", "--provider", "gemini"],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout.contains(r#""input_schema":{"type":"object""#),
        "{}",
        r.stdout
    );
    assert!(
        !r.stdout.contains("losses"),
        "losses stay off what the model reads"
    );
    let r = run(
        EDGAR,
        h.path(),
        &[
            "tool-search",
            "echo some text back",
            "--provider",
            "openai-strict",
        ],
        b"",
    );
    assert!(
        r.stderr.contains("fake__echo for openai-strict: 4 changes"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("/properties/text optional: now required and nullable"),
        "{}",
        r.stderr
    );
}

#[test]
fn an_empty_catalog_says_so() {
    let h = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(h.path().join(".mcp.json"), r#"{"mcpServers": {}}"#)
        .unwrap_or_else(|e| panic!("{e}"));
    let r = run(EDGAR, h.path(), &["tool-search", "anything"], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout.starts_with("No tools are available"),
        "{}",
        r.stdout
    );
}

/// An empty query is answered with what to ask instead, before anything is started or
/// embedded for it: a server that leaves a marker when started leaves none.
#[test]
fn an_empty_query_starts_and_embeds_nothing() {
    let h = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let marker = h.path().join("started");
    edgar_tests::user_config(
        h.path(),
        json!({"fake": {"command": FAKE, "args": ["good"],
                        "env": {"FAKE_MARKER": marker.display().to_string()}}}),
    );
    for query in ["", "   ", "\t\n"] {
        let r = run(EDGAR, h.path(), &["tool-search", query], b"");
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        assert!(r.stdout.starts_with("The query is empty"), "{}", r.stdout);
        assert!(!r.stderr.contains("embedding"), "{}", r.stderr);
        assert!(!marker.exists(), "{query:?} started the server");
    }
    // The same home does start it for a real query (the marker is what it leaves).
    let r = run(EDGAR, h.path(), &["tool-search", "echo"], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(marker.exists(), "{}", r.stderr);
}
