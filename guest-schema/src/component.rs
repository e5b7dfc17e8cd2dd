//! The `wasm32-wasip2` component: exports `edgar:schema/adapter` by converting the
//! native results of this crate into the WIT types.

use crate::types as native;
use exports::edgar::schema::adapter as wit;

wit_bindgen::generate!({
    path: "../wit",
    world: "schema-adapter",
});

/// The guest is single-threaded and allocation-heavy (every JSON value); talc measured
/// faster than the default dlmalloc here.
#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

struct Adapter;

export!(Adapter);

impl wit::Guest for Adapter {
    fn tool_name(server: String, tool: String) -> Result<String, wit::Rejection> {
        crate::tool_name(&server, &tool).map_err(rejection)
    }

    fn to_schema(server: String, tool_json: String) -> Result<wit::AcceptedTool, wit::Rejection> {
        let t = crate::to_schema(&server, &tool_json).map_err(rejection)?;
        Ok(wit::AcceptedTool {
            name: t.name,
            description: t.description,
            input_schema: t.input_schema,
            output_schema: t.output_schema,
            hints: wit::Hints {
                title: t.hints.title,
                read_only: t.hints.read_only,
                destructive: t.hints.destructive,
                idempotent: t.hints.idempotent,
                open_world: t.hints.open_world,
            },
            dropped: t.dropped.into_iter().map(dropped).collect(),
        })
    }

    fn lower_schema(
        provider: wit::Provider,
        input_schema: String,
    ) -> Result<wit::LoweredSchema, wit::Rejection> {
        let provider = match provider {
            wit::Provider::Generic => crate::Provider::Generic,
            wit::Provider::Anthropic => crate::Provider::Anthropic,
            wit::Provider::OpenaiStrict => crate::Provider::OpenAiStrict,
            wit::Provider::Gemini => crate::Provider::Gemini,
        };
        let l = crate::lower_schema(provider, &input_schema).map_err(rejection)?;
        Ok(wit::LoweredSchema {
            input_schema: l.input_schema,
            losses: l.losses.into_iter().map(dropped).collect(),
        })
    }

    fn to_result(result_json: String) -> Result<wit::ToolOutput, wit::Rejection> {
        let out = crate::to_result(&result_json).map_err(rejection)?;
        Ok(wit::ToolOutput {
            is_error: out.is_error,
            blocks: out.blocks.into_iter().map(block).collect(),
        })
    }
}

fn rejection(r: native::Rejection) -> wit::Rejection {
    let kind = match r.kind {
        native::RejectionKind::InvalidJson => wit::RejectionKind::InvalidJson,
        native::RejectionKind::InvalidName => wit::RejectionKind::InvalidName,
        native::RejectionKind::NotObjectSchema => wit::RejectionKind::NotObjectSchema,
        native::RejectionKind::TooLarge => wit::RejectionKind::TooLarge,
        native::RejectionKind::Other => wit::RejectionKind::Other,
    };
    wit::Rejection {
        kind,
        message: r.message,
    }
}

fn dropped(d: native::Dropped) -> wit::Dropped {
    wit::Dropped {
        path: d.path,
        reason: d.reason,
    }
}

fn media(m: native::Media) -> wit::Media {
    wit::Media {
        mime_type: m.mime_type,
        data: m.data,
    }
}

fn block(b: native::ContentBlock) -> wit::ContentBlock {
    match b {
        native::ContentBlock::Text(t) => wit::ContentBlock::Text(t),
        native::ContentBlock::Image(m) => wit::ContentBlock::Image(media(m)),
        native::ContentBlock::Audio(m) => wit::ContentBlock::Audio(media(m)),
        native::ContentBlock::ResourceLink(l) => {
            wit::ContentBlock::ResourceLink(wit::ResourceLink {
                uri: l.uri,
                name: l.name,
                description: l.description,
                mime_type: l.mime_type,
            })
        }
        native::ContentBlock::Resource(r) => wit::ContentBlock::Embedded(wit::EmbeddedResource {
            uri: r.uri,
            mime_type: r.mime_type,
            contents: match r.contents {
                native::ResourceContents::Text(t) => wit::ResourceContents::Text(t),
                native::ResourceContents::Blob(b) => wit::ResourceContents::Blob(b),
            },
        }),
    }
}
