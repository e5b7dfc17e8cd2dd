//! A server built on rmcp 3.x, the official Rust SDK, over stdio: a real peer that
//! speaks both protocol eras (it answers `server/discover` and `initialize`). One tool,
//! `add`, returns the sum of its integer arguments `a` and `b`.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::json;

struct Adder;

impl ServerHandler for Adder {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("rmcp-adder", "1.0.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"]
        });
        let schema = match schema {
            serde_json::Value::Object(map) => Arc::new(map),
            _ => Arc::default(),
        };
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "add",
            "Add two integers",
            schema,
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != "add" {
            return Err(ErrorData::invalid_params("no such tool", None));
        }
        let args = request.arguments.unwrap_or_default();
        let get = |k: &str| args.get(k).and_then(serde_json::Value::as_i64);
        let (Some(a), Some(b)) = (get("a"), get("b")) else {
            return Err(ErrorData::invalid_params("a and b must be integers", None));
        };
        Ok(CallToolResult::success(vec![ContentBlock::text((a + b).to_string())]).into())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    match Adder.serve(rmcp::transport::stdio()).await {
        Ok(service) => {
            let _ = service.waiting().await;
        }
        Err(e) => eprintln!("rmcp-server: {e}"),
    }
}
