//! A schema adapter built on edgar's reference policy (`edgar-guest-schema`), with one
//! change of its own to show where policy goes: every description says which server the
//! tool comes from. Replace `to_schema`'s body, or any other function's, with yours; the
//! host checks whatever you return (see `wit/README.md`).

// wit-bindgen's generated export glue is `unsafe`.
#![allow(unsafe_code)]

use exports::edgar::schema::adapter as wit;

wit_bindgen::generate!({
    // The contract, `wit/schema.wit` of edgar (copy it beside this crate when you move it).
    path: "../schema.wit",
    world: "guarding-adapter",
});

guest_schema::wit_conversions!(exports::edgar::schema::adapter);
guest_schema::scan_conversions!(exports::edgar::schema::scan);
guest_schema::context_conversions!(exports::edgar::schema::context);

/// The reference policy's per-call arena: much faster than the default allocator here.
#[global_allocator]
static ALLOCATOR: guest_schema::Arena = guest_schema::Arena::new();

struct MyAdapter;

export!(MyAdapter);

impl wit::Guest for MyAdapter {
    fn tool_name(server: String, tool: String) -> Result<String, wit::Rejection> {
        guest_schema::tool_name(&server, &tool).map_err(rejection)
    }

    fn to_schema(server: String, tool_json: String) -> Result<wit::AcceptedTool, wit::Rejection> {
        let mut tool = guest_schema::to_schema(&server, &tool_json).map_err(rejection)?;
        // Your policy: here, name the server in front of the description.
        tool.description = format!("[{server}] {}", tool.description);
        Ok(accepted(tool))
    }

    fn to_result(result_json: String) -> Result<wit::ToolOutput, wit::Rejection> {
        guest_schema::to_result(&result_json)
            .map(output)
            .map_err(rejection)
    }

    fn lower_schema(
        p: wit::Provider,
        input_schema: String,
    ) -> Result<wit::LoweredSchema, wit::Rejection> {
        guest_schema::lower_schema(provider(p), &input_schema)
            .map(lowered)
            .map_err(rejection)
    }
}

/// Findings: the reference rules. Add your own, or return none.
impl exports::edgar::schema::scan::Guest for MyAdapter {
    fn scan_tool(server: String, tool_json: String) -> Vec<scan_types::Finding> {
        guest_schema::scan_tool(&server, &tool_json)
            .into_iter()
            .map(finding)
            .collect()
    }

    fn scan_text(text: String) -> Vec<scan_types::Finding> {
        guest_schema::scan_text(&text).into_iter().map(finding).collect()
    }
}

/// Prompts and resources: the reference policy. Leave this out (and build world
/// `scanning-adapter`) and the host runs the reference's for you.
impl exports::edgar::schema::context::Guest for MyAdapter {
    fn to_prompt(server: String, prompt_json: String) -> Result<context_types::AcceptedPrompt, String> {
        guest_schema::to_prompt(&server, &prompt_json).map(prompt)
    }

    fn to_resource(
        server: String,
        resource_json: String,
    ) -> Result<context_types::AcceptedResource, String> {
        guest_schema::to_resource(&server, &resource_json).map(resource)
    }

    fn to_resource_template(
        server: String,
        template_json: String,
    ) -> Result<context_types::AcceptedResource, String> {
        guest_schema::to_resource_template(&server, &template_json).map(resource)
    }
}
