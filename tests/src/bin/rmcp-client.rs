//! A client built on rmcp 3.x, the official Rust SDK, for the gateway tests:
//! `rmcp-client ERA stdio EDGAR` launches `EDGAR mcp serve`; `rmcp-client ERA http URL
//! TOKEN` reaches `edgar mcp serve --http`; ERA is `discover` (2026-07-28, stateless) or
//! `initialize` (the handshake). It lists tools, searches for an adder, lists again,
//! calls the found tool directly and through `call_tool`, and prints what it saw as JSON.

use rmcp::ServiceError;
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ()>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: rmcp-client discover|initialize stdio EDGAR | http URL TOKEN";
    let lifecycle = match args.first().map(String::as_str) {
        Some("discover") => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
        Some("initialize") => ClientLifecycleMode::Initialize,
        _ => return Err(usage.into()),
    };
    let client: Client = match &args[1..] {
        [mode, edgar] if mode == "stdio" => {
            let mut cmd = tokio::process::Command::new(edgar);
            cmd.args(["mcp", "serve"]);
            ().serve_with_lifecycle(TokioChildProcess::new(cmd)?, lifecycle)
                .await?
        }
        [mode, url, token] if mode == "http" => {
            let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .auth_header(token.as_str());
            let transport = StreamableHttpClientTransport::from_config(config);
            ().serve_with_lifecycle(transport, lifecycle).await?
        }
        _ => return Err(usage.into()),
    };
    let version = client
        .peer_info()
        .map(|info| info.protocol_version.to_string());
    let before = names(&client).await?;
    let found = call(&client, "tool_search", json!({"query": "add two integers"})).await?;
    let after = names(&client).await?;
    let direct = call(&client, "py__add", json!({"a": 2, "b": 3})).await?;
    let through = call(
        &client,
        "call_tool",
        json!({"name": "py__add", "arguments": {"a": 20, "b": 22}}),
    )
    .await?;
    println!(
        "{}",
        json!({"version": version, "before": before, "found": found, "after": after,
               "direct": direct, "through": through})
    );
    client.cancel().await?;
    Ok(())
}

async fn names(client: &Client) -> Result<Vec<String>, ServiceError> {
    let tools = client.list_all_tools().await?;
    Ok(tools.into_iter().map(|t| t.name.to_string()).collect())
}

async fn call(
    client: &Client,
    name: &str,
    arguments: Value,
) -> Result<Value, Box<dyn std::error::Error>> {
    let arguments = arguments.as_object().cloned().unwrap_or_default();
    let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
    Ok(serde_json::to_value(client.call_tool(params).await?)?)
}
