//! A team gateway's prompts and resources: edgar's example server behind
//! `edgar mcp serve --http --gateway-config`, and two users whose Cedar policy differs.
//! Each sees, gets, reads and completes only what their own action permits; a denial
//! names the policy and is audited under the user; search-first, a listing shows only
//! running servers' and starts none.

use serde_json::{Value, json};

use crate::team_gateway::{EDGAR, Idp, Key, Team, claims, finish, tag};

const POLICY: &str = r#"
// Engineers get everything of the example server.
permit(principal, action, resource in Server::"ex")
  when { principal.groups.contains("eng") };
// Readers see its prompts, and nothing else of it.
permit(principal, action == Action::"list_prompts", resource in Server::"ex")
  when { principal.groups.contains("readers") };
@id("no-image-prompt")
forbid(principal, action == Action::"get_prompt", resource == Prompt::"ex__test_prompt_with_image");
"#;

const STATIC: &str = "edgar://ex/test%3A%2F%2Fstatic-text";

fn names(m: &Value, list: &str, key: &str) -> Vec<String> {
    m["result"][list]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p[key].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_else(|| panic!("no {list}: {m}"))
}

#[test]
fn a_team_user_gets_prompts_and_resources_only_as_the_policy_says() {
    let key = Key::es256();
    let idp = Idp::start(vec![key.jwk("k")]);
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let t = tag("team-content");
    let root = home.path().to_string_lossy().into_owned();
    let servers = json!({"ex": {"command": EDGAR,
        "args": ["mcp", "example-server", "--conformance", "--root", root],
        "env": {"EDGAR_TEST_TAG": t}}});
    let team = Team::start_with(home.path(), servers, json!({}), &idp, POLICY);
    let ada = key.token(Some("k"), &claims(&idp, &team.resource, "ada", &["eng"]));
    let bob = key.token(
        Some("k"),
        &claims(&idp, &team.resource, "bob", &["readers"]),
    );

    // Nothing runs yet: a listing shows nothing and starts nothing.
    let (_, m) = team.rpc(&bob, 1, "prompts/list", json!({}));
    assert!(names(&m, "prompts", "name").is_empty(), "{m}");
    assert!(edgar_tests::procs_with_tag(&t).is_empty());

    // Ada reads a resource: its server starts.
    let (_, m) = team.rpc(&ada, 2, "resources/read", json!({"uri": STATIC}));
    assert_eq!(m["result"]["contents"][0]["uri"], STATIC, "{m}");
    assert!(
        m["result"]["contents"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("static text")),
        "{m}"
    );

    // Bob may see the prompts, get none, and see or read no resource.
    let (_, m) = team.rpc(&bob, 3, "prompts/list", json!({}));
    let prompts = names(&m, "prompts", "name");
    assert!(
        prompts.contains(&"ex__test_prompt_with_arguments".to_owned()),
        "{m}"
    );
    let (_, m) = team.rpc(
        &bob,
        4,
        "prompts/get",
        json!({"name": "ex__test_simple_prompt"}),
    );
    assert_eq!(m["error"]["code"], -32602, "{m}");
    assert!(
        m["error"]["message"]
            .as_str()
            .is_some_and(|t| t.contains("no policy permits it")),
        "{m}"
    );
    let (_, m) = team.rpc(&bob, 5, "resources/list", json!({}));
    assert!(names(&m, "resources", "uri").is_empty(), "{m}");
    let (_, m) = team.rpc(&bob, 6, "resources/read", json!({"uri": STATIC}));
    assert_eq!(m["error"]["code"], -32602, "{m}");
    assert!(m.get("result").is_none(), "{m}");
    let complete = json!({"ref": {"type": "ref/prompt", "name": "ex__test_prompt_with_arguments"},
                          "argument": {"name": "arg1", "value": "tes"}});
    let (_, m) = team.rpc(&bob, 7, "completion/complete", complete.clone());
    assert_eq!(m["error"]["code"], -32602, "{m}");

    // Ada gets, lists, completes; a forbid wins and names itself.
    let (_, m) = team.rpc(
        &ada,
        8,
        "prompts/get",
        json!({"name": "ex__test_prompt_with_arguments", "arguments": {"arg1": "a1", "arg2": "b2"}}),
    );
    assert!(
        m["result"]["messages"][0]["content"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("a1")),
        "{m}"
    );
    let (_, m) = team.rpc(&ada, 9, "resources/list", json!({}));
    assert!(
        names(&m, "resources", "uri").contains(&STATIC.to_owned()),
        "{m}"
    );
    let (_, m) = team.rpc(&ada, 10, "completion/complete", complete);
    assert!(
        m["result"]["completion"]["values"]
            .as_array()
            .is_some_and(|v| !v.is_empty()),
        "{m}"
    );
    let (_, m) = team.rpc(
        &ada,
        11,
        "prompts/get",
        json!({"name": "ex__test_prompt_with_image"}),
    );
    assert!(
        m["error"]["message"]
            .as_str()
            .is_some_and(|t| t.contains("\"no-image-prompt\"")),
        "{m}"
    );

    // Each denial is in the audit trail under its user, with what was refused.
    let trail = std::fs::read_to_string(home.path().join("state/audit.jsonl"))
        .unwrap_or_else(|e| panic!("{e}"));
    let denied: Vec<Value> = trail
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["event"] == "denied")
        .collect();
    let by = |user: &str, action: &str| {
        denied
            .iter()
            .filter(|l| l["user"] == user && l["action"] == action)
            .count()
    };
    assert_eq!(by("bob", "get_prompt"), 2, "{trail}");
    assert_eq!(by("bob", "read_resource"), 1, "{trail}");
    assert_eq!(by("ada", "get_prompt"), 1, "{trail}");
    assert_eq!(denied.len(), 4, "{trail}");
    // A denied read's line names the resource by a digest, as a read's does.
    assert!(!trail.contains("static-text"), "{trail}");
    assert!(
        denied
            .iter()
            .any(|l| l["action"] == "read_resource" && l["uri_sha256"].is_string()),
        "{trail}"
    );
    finish(team, &t);
}
