//! The example server's prompts, resources, completion and logging: small and fixed,
//! named as the official conformance suite's server scenarios ask (`test_simple_prompt`,
//! `test://static-text`, ...), so the suite can check edgar's gateway end to end with
//! edgar's own server behind it.

use serde_json::{Value, json};

use super::Reply;
use crate::mcp::protocol::INVALID_PARAMS;

/// A 1x1 PNG, for the image prompt and the binary resource.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const TEMPLATE: &str = "test://template/{id}/data";
/// Values `completion/complete` offers for a prompt argument, filtered by what was typed.
const COMPLETIONS: &[&str] = &["test", "testing", "tested", "value", "values"];

/// What it offers besides tools (for `initialize` and `server/discover`).
pub(super) fn capabilities() -> Value {
    json!({"tools": {"listChanged": true}, "prompts": {}, "resources": {"subscribe": true},
           "logging": {}, "completions": {}})
}

/// Answers a prompts, resources, completion or logging request; `None` for any other.
pub(super) fn handle(method: &str, params: &Value) -> Option<Reply> {
    Some(match method {
        "prompts/list" => Ok(json!({"prompts": [
            {"name": "test_simple_prompt", "description": "A prompt with no arguments"},
            {"name": "test_prompt_with_arguments", "description": "A prompt with two arguments",
             "arguments": [{"name": "arg1", "description": "The first", "required": true},
                           {"name": "arg2", "description": "The second", "required": true}]},
            {"name": "test_prompt_with_embedded_resource", "description": "A prompt embedding a resource",
             "arguments": [{"name": "resourceUri", "description": "The resource's URI", "required": true}]},
            {"name": "test_prompt_with_image", "description": "A prompt with an image"},
        ]}))
        .map(|mut list| {
            if let Some(prompts) = list["prompts"].as_array_mut() {
                prompts.extend(super::changes::prompts());
            }
            list
        }),
        "prompts/get" => prompt(params),
        "resources/list" => Ok(json!({"resources": [
            {"uri": "test://static-text", "name": "static-text", "mimeType": "text/plain",
             "description": "A fixed text"},
            {"uri": "test://static-binary", "name": "static-binary", "mimeType": "image/png",
             "description": "A fixed image"},
            {"uri": "test://watched-resource", "name": "watched-resource", "mimeType": "text/plain",
             "description": "A resource that can be subscribed to"},
        ]})),
        "resources/templates/list" => Ok(json!({"resourceTemplates": [
            {"uriTemplate": TEMPLATE, "name": "template-data", "mimeType": "application/json",
             "description": "Data for an id"},
        ]})),
        "resources/read" => read(params),
        // Nothing changes here, so a subscription never hears anything; it is accepted.
        "resources/subscribe" | "resources/unsubscribe" | "logging/setLevel" => Ok(json!({})),
        "completion/complete" => {
            let typed = params["argument"]["value"].as_str().unwrap_or("");
            let values: Vec<&str> = COMPLETIONS
                .iter()
                .copied()
                .filter(|v| v.starts_with(typed))
                .collect();
            Ok(json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}))
        }
        _ => return None,
    })
}

fn prompt(params: &Value) -> Reply {
    let args = &params["arguments"];
    let arg = |k: &str| -> Result<&str, (i64, String)> {
        args[k]
            .as_str()
            .ok_or_else(|| (INVALID_PARAMS, format!("the argument {k} is required")))
    };
    let user = |content: Value| json!({"role": "user", "content": content});
    let messages = match params["name"].as_str().unwrap_or("") {
        "test_simple_prompt" => vec![user(
            json!({"type": "text", "text": "This is a simple prompt for testing."}),
        )],
        "test_prompt_with_arguments" => vec![user(json!({"type": "text", "text": format!(
            "Prompt with arguments: arg1='{}', arg2='{}'", arg("arg1")?, arg("arg2")?)}))],
        "test_prompt_with_embedded_resource" => vec![
            user(
                json!({"type": "resource", "resource": {"uri": arg("resourceUri")?,
                "mimeType": "text/plain", "text": "Embedded resource content for testing."}}),
            ),
            user(json!({"type": "text", "text": "Please process the embedded resource above."})),
        ],
        "test_prompt_with_image" => vec![
            user(json!({"type": "image", "data": PNG, "mimeType": "image/png"})),
            user(json!({"type": "text", "text": "Please analyze the image above."})),
        ],
        other => return Err((INVALID_PARAMS, format!("no prompt named {other}"))),
    };
    Ok(json!({"messages": messages}))
}

fn read(params: &Value) -> Reply {
    let uri = params["uri"].as_str().unwrap_or("");
    let content = match uri {
        "test://static-text" => {
            json!({"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."})
        }
        "test://watched-resource" => {
            json!({"uri": uri, "mimeType": "text/plain", "text": "Watched resource content."})
        }
        "test://static-binary" => json!({"uri": uri, "mimeType": "image/png", "blob": PNG}),
        _ => {
            let id = uri
                .strip_prefix("test://template/")
                .and_then(|r| r.strip_suffix("/data"))
                .filter(|id| !id.is_empty() && !id.contains('/'));
            let Some(id) = id else {
                return Err((INVALID_PARAMS, format!("no resource at {uri}")));
            };
            json!({"uri": uri, "mimeType": "application/json",
                   "text": json!({"id": id, "data": format!("Data for {id}")}).to_string()})
        }
    };
    Ok(json!({"contents": [content]}))
}

/// A 44-byte WAV header with no samples, for the audio tool.
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=";

/// The tools the conformance suite's server scenarios call (with `--conformance` only:
/// they are the suite's, not a workspace's).
pub(super) fn test_tools() -> Value {
    let tool = |name: &str, description: &str| {
        json!({"name": name, "description": description,
               "inputSchema": {"type": "object", "properties": {}}})
    };
    json!([
        tool("test_image_content", "Returns an image."),
        tool("test_audio_content", "Returns an audio clip."),
        tool("test_embedded_resource", "Returns an embedded resource."),
        tool(
            "test_multiple_content_types",
            "Returns text, an image and a resource."
        ),
        tool(
            "test_tool_with_progress",
            "Reports progress three times, then answers."
        ),
        tool(
            "test_tool_with_logging",
            "Logs three messages, then answers."
        ),
        json!({"name": "test_header_param",
               "description": "Takes a region, which a stateless HTTP client also sends as the Mcp-Param-Region header.",
               "inputSchema": {"type": "object",
                               "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
                               "required": ["region"]}}),
        json!({"name": "json_schema_2020_12_tool",
               "description": "Tool with JSON Schema 2020-12 features",
               "inputSchema": {
                   "$schema": "https://json-schema.org/draft/2020-12/schema",
                   "type": "object",
                   "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                                         "properties": {"street": {"type": "string"},
                                                        "city": {"type": "string"}}}},
                   "properties": {"name": {"type": "string"},
                                  "address": {"$ref": "#/$defs/address"},
                                  "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                                  "phone": {"type": "string"}, "email": {"type": "string"}},
                   "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                   "if": {"properties": {"contactMethod": {"const": "phone"}},
                          "required": ["contactMethod"]},
                   "then": {"required": ["phone"]},
                   "else": {"required": ["email"]},
                   "additionalProperties": false}}),
    ])
}

/// The result of a conformance test tool, `None` for any other name.
pub(super) fn call_test_tool(name: &str) -> Option<Value> {
    let image = json!({"type": "image", "data": PNG, "mimeType": "image/png"});
    let resource = |uri: &str, mime: &str, text: &str| json!({"type": "resource", "resource": {"uri": uri, "mimeType": mime, "text": text}});
    let content = match name {
        "test_image_content" => json!([image]),
        "test_audio_content" => json!([{"type": "audio", "data": WAV, "mimeType": "audio/wav"}]),
        "test_embedded_resource" => json!([resource(
            "test://embedded-resource",
            "text/plain",
            "This is an embedded resource content."
        )]),
        "test_multiple_content_types" => json!([
            {"type": "text", "text": "Multiple content types test:"},
            image,
            resource("test://mixed-content-resource", "application/json",
                     r#"{"test":"data","value":123}"#),
        ]),
        "test_tool_with_progress" => json!([{"type": "text", "text": "Progress reported."}]),
        "test_tool_with_logging" => json!([{"type": "text", "text": "Messages logged."}]),
        "json_schema_2020_12_tool" => json!([{"type": "text", "text": "Schema kept."}]),
        "test_header_param" => json!([{"type": "text", "text": "Region received."}]),
        _ => return None,
    };
    Some(json!({"content": content, "isError": false}))
}

/// What a conformance test tool sends before its answer: `test_tool_with_logging` three
/// log messages, `test_tool_with_progress` three progress notifications when the call
/// carries a progress token.
pub(super) fn progress(method: &str, params: &Value) -> Vec<Vec<u8>> {
    if method == "tools/call" && params["name"] == "test_tool_with_logging" {
        return [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed",
        ]
        .iter()
        .map(|m| {
            crate::mcp::protocol::notification(
                "notifications/message",
                json!({"level": "info", "logger": "test_tool_with_logging", "data": m}),
            )
        })
        .collect();
    }
    let token = &params["_meta"]["progressToken"];
    if method != "tools/call"
        || params["name"] != "test_tool_with_progress"
        || !(token.is_string() || token.is_number())
    {
        return Vec::new();
    }
    [0, 50, 100]
        .iter()
        .map(|p| {
            crate::mcp::protocol::notification(
                "notifications/progress",
                json!({"progressToken": token, "progress": p, "total": 100}),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(method: &str, params: Value) -> Value {
        match handle(method, &params) {
            Some(Ok(v)) => v,
            other => panic!("{method}: {other:?}"),
        }
    }

    #[test]
    fn prompts_and_resources_answer_as_the_suite_asks_and_refuse_the_rest() {
        let got = ok(
            "prompts/get",
            json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "a1", "arg2": "b2"}}),
        );
        let text = got["messages"][0]["content"]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.contains("a1") && text.contains("b2"), "{got}");
        let read = ok("resources/read", json!({"uri": "test://template/42/data"}));
        assert!(
            read["contents"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .contains("42")
        );
        let completed = ok(
            "completion/complete",
            json!({"argument": {"name": "arg1", "value": "tes"}}),
        );
        assert_eq!(
            completed["completion"]["values"],
            json!(["test", "testing", "tested"])
        );
        for (method, params) in [
            ("prompts/get", json!({"name": "nope"})),
            (
                "prompts/get",
                json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "x"}}),
            ),
            ("resources/read", json!({"uri": "test://template//data"})),
            ("resources/read", json!({"uri": "test://template/a/b/data"})),
            ("resources/read", json!({"uri": "file:///etc/passwd"})),
        ] {
            assert!(
                matches!(handle(method, &params), Some(Err(_))),
                "{method} {params}"
            );
        }
        assert!(handle("tools/list", &json!({})).is_none());
    }

    #[test]
    fn progress_is_reported_only_for_its_tool_and_a_token() {
        let call = |token: Value| json!({"name": "test_tool_with_progress", "_meta": {"progressToken": token}});
        assert_eq!(progress("tools/call", &call(json!("t1"))).len(), 3);
        assert_eq!(progress("tools/call", &call(json!(7))).len(), 3);
        assert!(progress("tools/call", &call(Value::Null)).is_empty());
        assert!(progress("tools/call", &json!({"name": "test_image_content"})).is_empty());
        assert!(progress("prompts/get", &call(json!("t1"))).is_empty());
        assert_eq!(
            progress("tools/call", &json!({"name": "test_tool_with_logging"})).len(),
            3
        );
        assert!(call_test_tool("test_audio_content").is_some());
        let listed = test_tools();
        for name in ["test_tool_with_progress", "test_tool_with_logging"] {
            assert!(
                listed
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|t| t["name"] == name),
                "{name}"
            );
            assert!(call_test_tool(name).is_some(), "{name}");
        }
        assert!(call_test_tool("list_directory").is_none());
    }
}
