use serde_json::json;

use super::*;
use crate::guard::{AdapterSource, Guard};

fn builtin() -> std::sync::Arc<Adapter> {
    Guard::new(None)
        .adapter(&AdapterSource::Builtin)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn refusal(r: Result<Guarded, String>) -> String {
    match r {
        Ok(g) => panic!("accepted: {g:?}"),
        Err(e) => e,
    }
}

fn prompt_out(name: &str) -> context_wit::AcceptedPrompt {
    context_wit::AcceptedPrompt {
        name: name.into(),
        title: None,
        description: String::new(),
        arguments: Vec::new(),
    }
}

fn resource_out(uri: &str) -> context_wit::AcceptedResource {
    context_wit::AcceptedResource {
        uri: uri.into(),
        name: "n".into(),
        title: None,
        description: String::new(),
        mime_type: None,
        size: None,
    }
}

#[test]
fn the_builtin_adapter_accepts_what_can_be_asked_for_again_and_refuses_the_rest() {
    let a = builtin();
    assert!(a.contextual());
    let items = [
        json!({"name": "greet", "description": "Say hi\u{200b}", "arguments": [{"name": "who", "required": true}]}),
        json!({"name": "bad\nname"}),
        json!({"name": "p", "arguments": [{"name": "a"}, {"name": "a"}]}),
        json!([1]),
    ]
    .map(|v| v.to_string());
    let out = a.accept_context("srv", ContextKind::Prompt, &items);
    let Ok(Guarded::Prompt(p)) = &out[0] else {
        panic!("{:?}", out[0]);
    };
    assert_eq!(p.name, "greet");
    assert_eq!(p.description, "Say hi\\u{200b}", "made visible by the host");
    assert!(p.arguments[0].required);
    for (i, e) in out.iter().enumerate().skip(1) {
        let Err(e) = e else {
            panic!("item {i} accepted")
        };
        assert!(matches!(e, GuardError::Rejected { .. }), "item {i}: {e}");
        assert!(e.to_string().starts_with("server 'srv'"), "{e}");
    }
    let resources = a.accept_context(
        "srv",
        ContextKind::Template,
        &[
            json!({"uriTemplate": "file:///{path}", "name": "files", "mimeType": "text/plain"})
                .to_string(),
        ],
    );
    assert!(
        matches!(&resources[0], Ok(Guarded::Resource(r)) if r.uri == "file:///{path}" && r.mime_type.as_deref() == Some("text/plain")),
        "{resources:?}"
    );
}

#[test]
fn an_item_over_the_input_limit_never_reaches_the_adapter() {
    let big = json!({"name": "p", "description": "x".repeat(MAX_TOOL_JSON_BYTES)}).to_string();
    let out = builtin().accept_context("srv", ContextKind::Prompt, &[big]);
    assert!(
        matches!(&out[0], Err(GuardError::TooLarge { .. })),
        "{out:?}"
    );
    let msg = match &out[0] {
        Err(e) => e.to_string(),
        Ok(g) => panic!("accepted: {g:?}"),
    };
    assert!(msg.contains("prompt 'p'"), "{msg}");
}

#[test]
fn an_adapter_cannot_reroute_or_smuggle_what_the_server_listed() {
    // Rerouted: a request for `greet` would reach `delete_everything`.
    let e = refusal(checked(
        ContextItem::Prompt(prompt_out("delete_everything")),
        ContextKind::Prompt,
        Some("greet"),
    ));
    assert!(e.contains("changed the server's name"), "{e}");
    let e = refusal(checked(
        ContextItem::Resource(resource_out("file:///etc/shadow")),
        ContextKind::Resource,
        Some("file:///tmp/notes"),
    ));
    assert!(e.contains("changed the server's uri"), "{e}");
    // Invented: the server's item had no name at all.
    assert!(
        checked(
            ContextItem::Prompt(prompt_out("p")),
            ContextKind::Prompt,
            None
        )
        .is_err()
    );
    // Of another kind than asked.
    assert!(
        checked(
            ContextItem::Prompt(prompt_out("a:b")),
            ContextKind::Resource,
            Some("a:b")
        )
        .is_err()
    );
    // Each field the host bounds, broken one at a time.
    type Break = Box<dyn Fn(&mut context_wit::AcceptedPrompt)>;
    let breaks: Vec<Break> = vec![
        Box::new(|p| p.title = Some("two\nlines".into())),
        Box::new(|p| p.description = "d".repeat(MAX_DESCRIPTION_BYTES + 1)),
        Box::new(|p| {
            p.arguments = (0..65)
                .map(|i| context_wit::PromptArgument {
                    name: format!("a{i}"),
                    description: String::new(),
                    required: false,
                })
                .collect()
        }),
        Box::new(|p| {
            p.arguments = vec![
                context_wit::PromptArgument {
                    name: "x".into(),
                    description: String::new(),
                    required: false,
                };
                2
            ]
        }),
        Box::new(|p| {
            p.arguments = vec![context_wit::PromptArgument {
                name: String::new(),
                description: String::new(),
                required: true,
            }]
        }),
    ];
    for (i, b) in breaks.iter().enumerate() {
        let mut p = prompt_out("p");
        b(&mut p);
        assert!(
            checked(ContextItem::Prompt(p), ContextKind::Prompt, Some("p")).is_err(),
            "break {i}"
        );
    }
    for (uri, mime) in [
        ("no scheme", None),
        ("x:a\u{7}", None),
        ("a:b", Some("text")),
        ("a:b", Some("te\"xt/plain")),
    ] {
        let mut r = resource_out(uri);
        r.mime_type = mime.map(str::to_owned);
        assert!(
            checked(ContextItem::Resource(r), ContextKind::Resource, Some(uri)).is_err(),
            "{uri} {mime:?}"
        );
    }
}
