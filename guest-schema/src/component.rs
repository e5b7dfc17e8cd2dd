//! The `wasm32-wasip2` component: exports `edgar:schema/adapter`, `edgar:schema/scan` and
//! `edgar:schema/context` by converting the native results of this crate into the WIT types.

use exports::edgar::schema::adapter as wit;

wit_bindgen::generate!({
    path: "../wit",
    world: "guarding-adapter",
});

crate::wit_conversions!(exports::edgar::schema::adapter);
crate::scan_conversions!(exports::edgar::schema::scan);
crate::context_conversions!(exports::edgar::schema::context);

/// Every call allocates many small JSON values and keeps nothing: a per-call arena.
#[global_allocator]
static ALLOCATOR: crate::Arena = crate::Arena::new();

struct Adapter;

export!(Adapter);

impl wit::Guest for Adapter {
    fn tool_name(server: String, tool: String) -> Result<String, wit::Rejection> {
        crate::tool_name(&server, &tool).map_err(rejection)
    }

    fn to_schema(server: String, tool_json: String) -> Result<wit::AcceptedTool, wit::Rejection> {
        crate::to_schema(&server, &tool_json)
            .map(accepted)
            .map_err(rejection)
    }

    fn lower_schema(
        p: wit::Provider,
        input_schema: String,
    ) -> Result<wit::LoweredSchema, wit::Rejection> {
        crate::lower_schema(provider(p), &input_schema)
            .map(lowered)
            .map_err(rejection)
    }

    fn to_result(result_json: String) -> Result<wit::ToolOutput, wit::Rejection> {
        crate::to_result(&result_json)
            .map(output)
            .map_err(rejection)
    }
}

impl exports::edgar::schema::scan::Guest for Adapter {
    fn scan_tool(server: String, tool_json: String) -> Vec<scan_types::Finding> {
        crate::scan_tool(&server, &tool_json)
            .into_iter()
            .map(finding)
            .collect()
    }

    fn scan_text(text: String) -> Vec<scan_types::Finding> {
        crate::scan_text(&text).into_iter().map(finding).collect()
    }
}

impl exports::edgar::schema::context::Guest for Adapter {
    fn to_prompt(
        server: String,
        prompt_json: String,
    ) -> Result<context_types::AcceptedPrompt, String> {
        crate::to_prompt(&server, &prompt_json).map(prompt)
    }

    fn to_resource(
        server: String,
        resource_json: String,
    ) -> Result<context_types::AcceptedResource, String> {
        crate::to_resource(&server, &resource_json).map(resource)
    }

    fn to_resource_template(
        server: String,
        template_json: String,
    ) -> Result<context_types::AcceptedResource, String> {
        crate::to_resource_template(&server, &template_json).map(resource)
    }
}
