//! A test adapter that misbehaves on request, one way per input, so the host's limits
//! and checks can be exercised through a real component.
//!
//! `tool-name(_, X)`, `to-schema(X, _)` and `to-result(X)` pick the behaviour by X:
//! `loop`, `bomb` (memory), `trap` (panic), `stack` (deep recursion), `print` (floods
//! stdout and stderr), `handles` (asks the host for stream after stream and never drops
//! them), and output-specific lies; anything else behaves.
#![cfg(target_arch = "wasm32")]
// wit-bindgen's generated export glue is `unsafe`.
#![allow(unsafe_code)]

use exports::edgar::schema::adapter::*;

// Built on the contract as 0.2.1 released it (`wit/schema.wit` here, kept as it was), so
// every test of it also shows an adapter of that version loads and runs unchanged.
wit_bindgen::generate!({ path: "wit", world: "schema-adapter" });

struct Adapter;
export!(Adapter);

fn misbehave(how: &str) {
    match how {
        "loop" => loop {
            std::hint::black_box(0);
        },
        "bomb" => {
            let mut v: Vec<Vec<u8>> = Vec::new();
            loop {
                v.push(vec![1; 1 << 20]);
                std::hint::black_box(&v);
            }
        }
        "trap" => panic!("the misbehaving adapter panics on purpose"),
        "stack" => {
            std::hint::black_box(recurse(std::hint::black_box(1)));
        }
        "print" => {
            // ~200 KB in all, far past the 16 KiB kept, yet quick under load.
            for _ in 0..2_000 {
                println!("chatty adapter line on stdout, over and over");
                eprintln!("chatty adapter line on stderr, over and over");
            }
        }
        "handles" => loop {
            std::mem::forget(std::hint::black_box(wasip2::cli::stdout::get_stdout()));
        },
        _ => {}
    }
}

#[allow(unconditional_recursion)]
fn recurse(n: u64) -> u64 {
    let buf = std::hint::black_box([n; 64]);
    recurse(buf[3] + 1) + buf[7]
}

fn hints() -> Hints {
    Hints {
        title: None,
        read_only: None,
        destructive: None,
        idempotent: None,
        open_world: None,
    }
}

impl Guest for Adapter {
    fn tool_name(server: String, tool: String) -> Result<String, Rejection> {
        misbehave(&tool);
        Ok(match tool.as_str() {
            "bad-chars" => "has space!".into(),
            "builtin" => "tool_search".into(),
            "too-long" => "x".repeat(100),
            "same" => "same_name".into(),
            _ => format!("{server}__{tool}"),
        })
    }

    fn to_schema(server: String, _tool_json: String) -> Result<AcceptedTool, Rejection> {
        misbehave(&server);
        let schema = match server.as_str() {
            "not-json" => "this is not json".to_owned(),
            "array-schema" => r#"{"type":"array"}"#.to_owned(),
            "remote-ref" => r#"{"type":"object","$ref":"http://127.0.0.1:9/s.json"}"#.to_owned(),
            "huge" => format!(
                r#"{{"type":"object","description":"{}"}}"#,
                "x".repeat(10 << 20)
            ),
            s if s.starts_with("lower-") => {
                format!(r#"{{"type":"object","description":"{}"}}"#, &s[6..])
            }
            _ => r#"{"type":"object"}"#.to_owned(),
        };
        Ok(AcceptedTool {
            name: "t".into(),
            description: String::new(),
            input_schema: schema,
            output_schema: None,
            hints: hints(),
            dropped: Vec::new(),
        })
    }

    /// The schema's description (set by `to-schema` for a server named `lower-X`) picks
    /// the behaviour: `lie` returns a schema no strict provider accepts, `not-json` text,
    /// `evil-note` a loss note with terminal escapes, and any of `misbehave`'s words
    /// misbehaves.
    fn lower_schema(_provider: Provider, input_schema: String) -> Result<LoweredSchema, Rejection> {
        let how = input_schema
            .split("\"description\":\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_default()
            .to_owned();
        let how = how.as_str();
        misbehave(how);
        let schema = match how {
            "lie" => r#"{"type":"object","properties":{"a":{"type":"string"}}}"#.to_owned(),
            "not-json" => "this is not json".to_owned(),
            _ => input_schema,
        };
        let losses = match how {
            "evil-note" => vec![Dropped {
                path: "/properties/x\u{1b}[2J".into(),
                reason: "cleared\u{202e}your screen\u{7}".into(),
            }],
            _ => Vec::new(),
        };
        Ok(LoweredSchema {
            input_schema: schema,
            losses,
        })
    }

    fn to_result(result_json: String) -> Result<ToolOutput, Rejection> {
        misbehave(&result_json);
        let media = |mime: &str, data: &str| Media {
            mime_type: mime.into(),
            data: data.into(),
        };
        let block = match result_json.as_str() {
            "bad-base64" => ContentBlock::Image(media("image/png", "%%%not base64%%%")),
            "bad-mime" => ContentBlock::Image(media("image/svg+xml", "aGk=")),
            "huge-text" => ContentBlock::Text("x".repeat(5 << 20)),
            _ => ContentBlock::Text("ok".into()),
        };
        Ok(ToolOutput {
            is_error: false,
            blocks: vec![block],
        })
    }
}
