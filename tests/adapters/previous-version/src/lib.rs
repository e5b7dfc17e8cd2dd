//! An adapter built for the previous contract, `edgar:schema@0.1.0` (its WIT is kept
//! here as it was released): the host must still load it and give it the generic
//! profile. It passes schemas through and keeps only text blocks.
#![cfg(target_arch = "wasm32")]
// wit-bindgen's generated export glue is `unsafe`.
#![allow(unsafe_code)]

use exports::edgar::schema::adapter::*;
use serde_json::Value;

wit_bindgen::generate!({ path: "wit", world: "schema-adapter" });

struct Adapter;
export!(Adapter);

fn refuse(message: &str) -> Rejection {
    Rejection {
        kind: RejectionKind::InvalidJson,
        message: message.into(),
    }
}

impl Guest for Adapter {
    fn tool_name(server: String, tool: String) -> Result<String, Rejection> {
        Ok(format!("{server}__{tool}"))
    }

    fn to_schema(_server: String, tool_json: String) -> Result<AcceptedTool, Rejection> {
        let tool: Value = serde_json::from_str(&tool_json).map_err(|_| refuse("not JSON"))?;
        let text = |key: &str| tool.get(key).and_then(Value::as_str).map(str::to_owned);
        Ok(AcceptedTool {
            name: text("name").ok_or_else(|| refuse("no name"))?,
            description: text("description").unwrap_or_default(),
            input_schema: tool
                .get("inputSchema")
                .map_or_else(|| r#"{"type":"object"}"#.to_owned(), Value::to_string),
            output_schema: None,
            hints: Hints {
                title: None,
                read_only: None,
                destructive: None,
                idempotent: None,
                open_world: None,
            },
            dropped: Vec::new(),
        })
    }

    fn to_result(result_json: String) -> Result<ToolOutput, Rejection> {
        let result: Value = serde_json::from_str(&result_json).map_err(|_| refuse("not JSON"))?;
        let blocks = result
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .map(|t| ContentBlock::Text(t.to_owned()))
            .collect();
        Ok(ToolOutput {
            is_error: result.get("isError") == Some(&Value::Bool(true)),
            blocks,
        })
    }
}
