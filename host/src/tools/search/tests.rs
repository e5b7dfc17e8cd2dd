use serde_json::json;

use super::*;
use crate::guard::CachedTool;

fn tool(server: &str, name: &str, description: &str, params: &[(&str, &str)]) -> SanitizedTool {
    let props: serde_json::Map<String, Value> = params
        .iter()
        .map(|(k, d)| (k.to_string(), json!({"type": "string", "description": d})))
        .collect();
    SanitizedTool::from_cache(CachedTool {
        server: server.into(),
        tool: name.into(),
        name: format!("{server}__{name}"),
        description: description.into(),
        input_schema: json!({"type": "object", "properties": props}),
        output_schema: None,
        hints: Default::default(),
        dropped: Vec::new(),
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

fn index() -> SearchIndex {
    SearchIndex::new(tools())
}

fn tools() -> Vec<SanitizedTool> {
    vec![
        tool(
            "github",
            "create_issue",
            "Create a new issue in a GitHub repository",
            &[("title", "Issue title"), ("body", "Issue body")],
        ),
        tool(
            "github",
            "list_issues",
            "List issues in a GitHub repository",
            &[("state", "open or closed")],
        ),
        tool(
            "gitlab",
            "create_issue",
            "Create a new issue in a GitLab project",
            &[("title", "Issue title")],
        ),
        tool(
            "slack",
            "slack_post_message",
            "Post a new message to a Slack channel",
            &[("channel_id", "The channel"), ("text", "Message text")],
        ),
        tool(
            "filesystem",
            "read_text_file",
            "Read the complete contents of a file as text",
            &[("path", "File path")],
        ),
        tool(
            "filesystem",
            "move_file",
            "Move or rename files and directories",
            &[("source", ""), ("destination", "")],
        ),
        tool(
            "time",
            "get_current_time",
            "Get current time in a specific timezone",
            &[("timezone", "IANA timezone name")],
        ),
    ]
}

fn top(ix: &SearchIndex, q: &str, n: usize) -> Vec<String> {
    ix.rank(q, n)
        .into_iter()
        .map(|(i, _)| ix.names(i).name.clone())
        .collect()
}

#[test]
fn ranks_by_meaning_words() {
    let ix = index();
    assert_eq!(
        top(&ix, "open a bug ticket on github", 1),
        ["github__create_issue"]
    );
    assert_eq!(
        top(&ix, "send a chat message to the team channel", 1),
        ["slack__slack_post_message"]
    );
    assert_eq!(
        top(&ix, "what time is it in Tokyo", 1),
        ["time__get_current_time"]
    );
    assert_eq!(top(&ix, "rename a document", 1), ["filesystem__move_file"]);
}

#[test]
fn exact_names_go_first() {
    let ix = index();
    assert_eq!(
        top(&ix, "gitlab__create_issue", 1),
        ["gitlab__create_issue"]
    );
    assert_eq!(top(&ix, "gitlab/create_issue", 1), ["gitlab__create_issue"]);
    let both = top(&ix, "create_issue", 2);
    assert!(
        both.contains(&"github__create_issue".to_owned())
            && both.contains(&"gitlab__create_issue".to_owned())
    );
    assert_eq!(
        top(&ix, "I need `time__get_current_time` please", 1),
        ["time__get_current_time"]
    );
}

#[test]
fn naming_a_server_prefers_its_tools() {
    let ix = index();
    assert_eq!(
        top(&ix, "create an issue in gitlab", 1),
        ["gitlab__create_issue"]
    );
}

#[test]
fn bad_queries_give_nothing_and_do_not_panic() {
    let ix = index();
    for q in ["", "   ", "!!!???", "🦀🦀🦀", "the of and"] {
        assert!(ix.rank(q, 5).is_empty(), "{q:?}");
    }
    let huge = "file ".repeat(200_000);
    assert!(!ix.rank(&huge, 5).is_empty());
    assert!(SearchIndex::new(Vec::new()).rank("anything", 5).is_empty());
}

#[test]
fn ties_break_by_name_so_ranking_is_stable() {
    let ix = SearchIndex::new(vec![
        tool("b", "same", "identical", &[]),
        tool("a", "same", "identical", &[]),
    ]);
    assert_eq!(top(&ix, "identical", 2), ["a__same", "b__same"]);
}

#[test]
fn a_misspelled_tool_name_ranks_that_tool_first() {
    let ix = index();
    assert_eq!(
        top(&ix, "slack_post_mesage", 1),
        ["slack__slack_post_message"]
    );
    assert_eq!(
        top(&ix, "read_txet_file", 1),
        ["filesystem__read_text_file"]
    );
    assert_eq!(top(&ix, "github/craete_issue", 1), ["github__create_issue"]);
    // Several servers share the misspelled name: all of them, before anything else.
    let both = top(&ix, "create_isue", 2);
    assert!(
        both.contains(&"github__create_issue".to_string())
            && both.contains(&"gitlab__create_issue".to_string()),
        "{both:?}"
    );
    // Too far from any name to be a typo: ranked by words as usual.
    assert_ne!(top(&ix, "crate_tissue_x", 1), ["github__create_issue"]);
}

#[test]
fn fusion_finds_by_meaning_what_words_miss_and_names_still_win() {
    use super::model::DIM;
    let ix = index();
    let n = ix.len();
    // Vectors that make `get_current_time` the only tool close to the query's meaning.
    let mut vectors = vec![0f32; n * DIM];
    let clock = (0..n)
        .find(|&i| ix.names(i).tool == "get_current_time")
        .unwrap_or_else(|| panic!("no clock tool"));
    for i in 0..n {
        vectors[i * DIM + usize::from(i == clock)] = 1.0;
    }
    let ix = ix.with_vectors(vectors);
    assert!(ix.has_vectors());
    let mut query = vec![0f32; DIM];
    query[1] = 1.0;
    let ranked = ix.rank_with("what hour is it in Tokyo", Some(&query), 5);
    assert_eq!(ranked.first().map(|&(i, _)| i), Some(clock));
    // Without the query's vector the same words find nothing relevant first.
    assert_ne!(
        ix.rank("what hour is it in Tokyo", 5)
            .first()
            .map(|&(i, _)| i),
        Some(clock)
    );
    // An exact name outranks whatever the vectors say.
    let named = ix.rank_with("move_file", Some(&query), 5);
    assert_eq!(ix.names(named[0].0).name, "filesystem__move_file");
}

#[test]
fn vectors_of_the_wrong_size_are_not_attached() {
    let ix = index().with_vectors(vec![0.5; 3]);
    assert!(!ix.has_vectors());
}

#[test]
fn a_parameters_enum_values_find_the_tool() {
    let with_values = |values: Value| {
        SanitizedTool::from_cache(CachedTool {
            server: "repo".into(),
            tool: "pull_request".into(),
            name: "repo__pull_request".into(),
            description: "Act on a pull request".into(),
            input_schema: json!({"type": "object", "properties": {
                "action": values,
                "labels": {"type": "array", "items": {"enum": ["triage", "wontfix"]}},
            }}),
            output_schema: None,
            hints: Default::default(),
            dropped: Vec::new(),
        })
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let mut catalog = tools();
    catalog.push(with_values(
        json!({"type": "string", "enum": ["squash", "rebase", 7, null]}),
    ));
    let ix = SearchIndex::new(catalog);
    assert_eq!(top(&ix, "squash", 1), ["repo__pull_request"]);
    // An array's items' values too.
    assert_eq!(top(&ix, "wontfix", 1), ["repo__pull_request"]);
    // Without them the word is nowhere.
    let mut catalog = tools();
    catalog.push(with_values(json!({"type": "string"})));
    assert!(top(&SearchIndex::new(catalog), "squash", 1).is_empty());
}
