use serde_json::json;

use super::*;
use crate::guard::{CachedTool, Hints};

fn tool(server: &str, name: &str, read_only: Option<bool>) -> SanitizedTool {
    SanitizedTool::from_cache(CachedTool {
        server: server.into(),
        tool: name.into(),
        name: format!("{server}__{name}"),
        description: String::new(),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        hints: Hints {
            read_only,
            ..Hints::default()
        },
        dropped: Vec::new(),
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

fn user(sub: &str, groups: &[&str]) -> Principal {
    Principal {
        sub: sub.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        scopes: vec!["mcp".into()],
    }
}

const TEAM: &str = r#"
// Engineers see and call everything of github; readers only its read-only tools.
permit(principal, action, resource in Server::"github")
  when { principal.groups.contains("eng") };
@id("readers-read-only")
permit(principal, action in [Action::"list_tools", Action::"call_tool"], resource in Server::"github")
  when { principal.groups.contains("readers") && resource.readOnlyHint };
@id("no-deletes")
forbid(principal, action == Action::"call_tool", resource == Tool::"github__delete_repo")
  unless { principal.groups.contains("admins") };
"#;

#[test]
fn each_user_gets_what_the_policy_says_and_nothing_by_default() {
    let p = Policy::parse(TEAM).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.len(), 3);
    let (eng, reader, nobody) = (
        user("ada", &["eng"]),
        user("bob", &["readers"]),
        user("eve", &[]),
    );
    let admin = user("root", &["eng", "admins"]);
    let (search, create, delete) = (
        tool("github", "search", Some(true)),
        tool("github", "create_issue", None),
        tool("github", "delete_repo", Some(false)),
    );
    let other = tool("slack", "post", Some(true));
    for (who, t, action, allowed) in [
        (&eng, &create, Action::CallTool, true),
        (&eng, &delete, Action::ListTools, true),
        (&eng, &delete, Action::CallTool, false),
        (&admin, &delete, Action::CallTool, true),
        (&reader, &search, Action::CallTool, true),
        (&reader, &create, Action::ListTools, false),
        (&nobody, &search, Action::ListTools, false),
        (&eng, &other, Action::ListTools, false),
    ] {
        assert_eq!(
            p.decide(who, action, t).allowed(),
            allowed,
            "{} {action:?} {}",
            who.sub,
            t.name()
        );
    }
    let d = p.decide(&eng, Action::CallTool, &delete);
    assert_eq!(d.reason(), "forbidden by policy \"no-deletes\" (policy2)");
    let d = p.decide(&nobody, Action::CallTool, &search);
    assert!(d.reason().contains("denies by default"), "{}", d.reason());
    // Absent hints take MCP's defaults: a tool that says nothing is not read-only.
    assert!(!p.decide(&reader, Action::CallTool, &create).allowed());
}

#[test]
fn a_bad_policy_file_says_where() {
    for (text, line, says) in [
        (
            "permit(principal, action, resource)\n  when { principal.grups.contains(\"x\") };",
            "2:",
            "grups",
        ),
        (
            "permit(principal, action == Action::\"delete_tools\", resource);",
            "1:",
            "delete_tools",
        ),
        ("\n\npermit(principal action, resource);", "3:", ""),
        (
            "permit(principal, action, resource) when { resource.readOnlyHint == \"yes\" };",
            "1:",
            "",
        ),
    ] {
        let e = Policy::parse(text).err().unwrap_or_default();
        assert!(e.starts_with(line), "{text}: {e}");
        assert!(e.contains(says), "{text}: {e}");
    }
}

#[test]
fn an_empty_file_permits_nothing() {
    let p = Policy::parse("").unwrap_or_else(|e| panic!("{e}"));
    assert!(p.is_empty());
    let t = tool("github", "search", Some(true));
    assert!(
        !p.decide(&user("ada", &["eng"]), Action::ListTools, &t)
            .allowed()
    );
}

#[test]
fn prompts_and_resources_are_decided_by_their_own_actions() {
    let text = r#"
// Everyone gets github's prompts; engineers read its resources under repo://.
permit(principal, action in [Action::"list_prompts", Action::"get_prompt"], resource in Server::"github");
permit(principal, action == Action::"read_resource", resource in Server::"github")
  when { principal.groups.contains("eng") && resource.uri like "repo://*" };
// A rule written for every action, as the docs' read-only example: it holds for
// prompts and resources (getting and reading are read-only) and still validates.
permit(principal, action, resource in Server::"docs")
  when { principal.groups.contains("support") && resource.readOnlyHint };
@id("no-admin-prompt")
forbid(principal, action == Action::"get_prompt", resource == Prompt::"github__admin");
"#;
    let p = Policy::parse(text).unwrap_or_else(|e| panic!("{e}"));
    let (eng, support) = (user("ada", &["eng"]), user("sam", &["support"]));
    let prompt = |server, name| Target::Prompt { server, name };
    let resource = |server, uri| Target::Resource { server, uri };
    for (who, action, target, allowed) in [
        (
            &support,
            Action::GetPrompt,
            prompt("github", "triage"),
            true,
        ),
        (
            &support,
            Action::GetPrompt,
            prompt("github", "admin"),
            false,
        ),
        (&eng, Action::ListPrompts, prompt("github", "admin"), true),
        (
            &eng,
            Action::ReadResource,
            resource("github", "repo://a/b"),
            true,
        ),
        (
            &eng,
            Action::ReadResource,
            resource("github", "file:///etc/passwd"),
            false,
        ),
        (
            &eng,
            Action::ListResources,
            resource("github", "repo://a/b"),
            false,
        ),
        (
            &support,
            Action::ReadResource,
            resource("github", "repo://a/b"),
            false,
        ),
        (
            &support,
            Action::ReadResource,
            resource("docs", "file:///x"),
            true,
        ),
        (&support, Action::GetPrompt, prompt("docs", "p"), true),
        (&eng, Action::GetPrompt, prompt("slack", "p"), false),
    ] {
        assert_eq!(
            p.decide_on(who, action, target).allowed(),
            allowed,
            "{} {action:?} {target:?}",
            who.sub
        );
    }
    let d = p.decide_on(&support, Action::GetPrompt, prompt("github", "admin"));
    assert!(d.reason().contains("no-admin-prompt"), "{}", d.reason());
    // A tool action never applies to a prompt, whatever the rule says of tools.
    let tools_only = Policy::parse("permit(principal, action == Action::\"call_tool\", resource);")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !tools_only
            .decide_on(&eng, Action::GetPrompt, prompt("github", "triage"))
            .allowed()
    );
}

#[test]
fn signing_in_is_decided_by_its_own_action_and_is_not_read_only() {
    let text = r#"
// Engineers may sign in to the accounting server; the docs' every-action read-only
// rule still validates, and does not let anyone sign in (signing in keeps a token).
permit(principal, action == Action::"sign_in", resource in Server::"acct")
  when { principal.groups.contains("eng") };
permit(principal, action, resource in Server::"acct")
  when { principal.groups.contains("support") && resource.readOnlyHint };
permit(principal, action, resource == SignIn::"wiki");
"#;
    let p = Policy::parse(text).unwrap_or_else(|e| panic!("{e}"));
    let (eng, support) = (user("ada", &["eng"]), user("sam", &["support"]));
    let sign_in = |server| Target::SignIn { server };
    for (who, server, allowed) in [
        (&eng, "acct", true),
        (&support, "acct", false),
        (&eng, "other", false),
        (&support, "wiki", true),
    ] {
        let got = p.decide_on(who, Action::SignIn, sign_in(server)).allowed();
        assert_eq!(got, allowed, "{} signing in to {server}", who.sub);
    }
    // A sign-in is no tool: a rule on tools does not reach it, nor it them.
    assert!(
        !p.decide(&eng, Action::CallTool, &tool("acct", "echo", None))
            .allowed()
    );
}
