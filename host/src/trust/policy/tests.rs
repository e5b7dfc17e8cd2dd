use super::*;

#[test]
fn glob_matches_stars_and_question_marks() {
    for (p, t, want) in [
        ("*", "", true),
        ("*", "anything/at all", true),
        ("sh *", "sh -c x", true),
        ("sh *", "bash -c x", false),
        ("git?ub/*", "github/list", true),
        ("*delete*", "repo/delete_file", true),
        ("a*b*c", "aXXbYYc", true),
        ("a*b*c", "aXXbYY", false),
        ("exact", "exact", true),
        ("exact", "exactly", false),
    ] {
        assert_eq!(glob(p, t), want, "{p} ~ {t}");
    }
}

#[test]
fn origins_compare_parsed_not_as_prefixes() {
    assert!(url_matches(
        "https://mcp.example.com",
        "https://mcp.example.com/mcp"
    ));
    assert!(!url_matches(
        "https://mcp.example.com",
        "https://mcp.example.com.evil.net/mcp"
    ));
    assert!(!url_matches(
        "https://mcp.example.com",
        "http://mcp.example.com/mcp"
    ));
    assert!(url_matches(
        "https://*.example.com/*",
        "https://a.example.com/mcp"
    ));
}

#[test]
fn the_system_policy_wins_over_the_environment() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let system = d.path().join("policy.json");
    let env = Some(std::ffi::OsString::from("/tmp/mine.json"));
    assert_eq!(
        choose(&system, env.clone()),
        Some(PathBuf::from("/tmp/mine.json"))
    );
    std::fs::write(&system, "{}").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(choose(&system, env), Some(system.clone()));
    assert_eq!(choose(&d.path().join("none"), None), None);
}

#[test]
fn tool_rules_match_server_slash_tool() {
    let p = ToolPolicy {
        allow: Some(vec!["github/*".into()]),
        deny: vec!["*/delete_*".into()],
        ..ToolPolicy::default()
    };
    assert!(p.allows("github", "list_issues"));
    assert!(!p.allows("github", "delete_repo"));
    assert!(!p.allows("slack", "post"));
}

#[test]
fn prompt_and_resource_rules_name_the_list_that_refused() {
    let policy: Policy = serde_json::from_value(serde_json::json!({
        "deny_prompts": ["*/admin_*"],
        "allow_resources": ["docs/docs://*"],
        "deny_resources": ["docs/docs://secret*"],
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    let rules = policy.tools();
    assert_eq!(rules.prompts.check("gh", "review"), Ok(()));
    assert_eq!(rules.prompts.check("gh", "admin_reset"), Err("deny"));
    assert_eq!(rules.resources.check("docs", "docs://guide"), Ok(()));
    assert_eq!(
        rules.resources.check("docs", "docs://secret/x"),
        Err("deny")
    );
    assert_eq!(
        rules.resources.check("docs", "file:///etc/passwd"),
        Err("allow")
    );
    assert_eq!(rules.resources.check("other", "docs://guide"), Err("allow"));
    // No rules: everything passes.
    assert_eq!(ToolPolicy::default().prompts.check("a", "b"), Ok(()));
}

#[test]
fn a_net_limit_admits_only_hosts_within_it() {
    use crate::config::{HostPort, Net};
    let hosts = |list: &[&str]| {
        Net::Hosts(
            list.iter()
                .map(|h| HostPort::parse(h).unwrap_or_else(|e| panic!("{e}")))
                .collect(),
        )
    };
    let limit = NetLimit::Hosts(vec!["*.corp.example:443".into(), "localhost:5432".into()]);
    for (net, within) in [
        (Net::None, true),
        (hosts(&["api.corp.example:443"]), true),
        (hosts(&["a.b.corp.example:443", "localhost:5432"]), true),
        (hosts(&["*.eu.corp.example:443"]), true),
        (Net::All, false),
        (hosts(&["corp.example:443"]), false),
        (hosts(&["api.corp.example:80"]), false),
        (hosts(&["evilcorp.example:443"]), false),
        (hosts(&["api.corp.example.evil.net:443"]), false),
        (hosts(&["*.example:443"]), false),
        (hosts(&["api.corp.example:443", "127.0.0.1:5432"]), false),
    ] {
        assert_eq!(limit.exceeded(&net).is_none(), within, "{net:?}");
    }
    let none = NetLimit::Word(NetWord::None);
    assert!(none.exceeded(&hosts(&["localhost:1"])).is_some());
    assert!(none.exceeded(&Net::None).is_none());
    let all = NetLimit::Word(NetWord::All);
    assert!(all.exceeded(&Net::All).is_none());
}
