//! `edgar dev conformance-client URL`: the official conformance suite's client, driving
//! the same session code as every other command (no disk cache, so every run talks to
//! the scenario's server).

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use edgar_host::auth::Secret;
use edgar_host::auth::mcp::Browser;
use edgar_host::auth::store::Store;
use edgar_host::config::{Config, Grant, IdToken, IdentityProvider, ServerSpec};
use edgar_host::mcp::client::{Session, SessionOptions};
use edgar_host::mcp::elicitation::AcceptDefaults;
use serde_json::{Map, Value, json};

use crate::cli::DevCommand;

pub fn run(cmd: DevCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        DevCommand::ConformanceClient { url } => conformance_client(&url),
    }
}

/// The server's name in the session.
const SERVER: &str = "conformance";
/// The client ID metadata document URL the suite expects (it never fetches it).
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

fn conformance_client(url: &str) -> anyhow::Result<ExitCode> {
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    eprintln!("edgar conformance client: scenario {scenario:?}, server {url}");
    let mut spec = ServerSpec::http(SERVER, url);
    // Pre-registered credentials come in the scenario's context; the suite checks the
    // client ID metadata document URL literally.
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    spec.oauth.client_id = context["client_id"].as_str().map(str::to_owned);
    spec.oauth.client_secret = context["client_secret"].as_str().map(str::to_owned);
    spec.oauth.client_metadata_url = Some(CLIENT_METADATA_URL.into());
    // The extension scenarios sign in without a human: client credentials (a secret or
    // a private key the suite made) and cross-app access (an ID token the suite's
    // identity provider issued).
    let key_file =
        std::env::temp_dir().join(format!("edgar-conformance-{}.pem", std::process::id()));
    let _key_guard = RemoveOnDrop(key_file.clone());
    match scenario.as_str() {
        "auth/client-credentials-jwt" | "auth/client-credentials-basic" => {
            spec.oauth.grant = Grant::ClientCredentials;
            if let Some(pem) = context["private_key_pem"].as_str() {
                edgar_host::paths::write_atomic(&key_file, pem.as_bytes())
                    .context("cannot write the scenario's private key")?;
                spec.oauth.private_key_file = Some(key_file.clone());
            }
        }
        // Renamed in the suite's 0.2 line (SEP-990 became enterprise-managed authorization).
        "auth/cross-app-access-complete-flow" | "auth/enterprise-managed-authorization" => {
            spec.oauth.grant = Grant::CrossAppAccess;
            let field = |k: &str| context[k].as_str().map(str::to_owned);
            spec.oauth.identity = Some(IdentityProvider {
                token_endpoint: field("idp_token_endpoint")
                    .context("the scenario names no idp_token_endpoint")?,
                client_id: field("idp_client_id").context("the scenario names no idp_client_id")?,
                client_secret: None,
                id_token: IdToken::Given(Secret::new(
                    field("idp_id_token").context("the scenario gives no idp_id_token")?,
                )),
            });
        }
        _ => {}
    }
    let config = Config {
        servers: vec![spec],
        ..Config::default()
    };
    let cwd = std::env::current_dir().context("no working directory")?;
    let mut opts = SessionOptions::new(cwd, None);
    opts.handler = Arc::new(AcceptDefaults);
    // Sign-in is real (discovery, registration, PKCE, the loopback listener, the token
    // exchange) except the browser, and nothing is persisted.
    opts.credentials = Some(Store::memory());
    opts.browser = Some(Browser::Fetch);
    let rt = super::context::runtime()?;
    rt.block_on(async {
        let session = Session::new(&config, opts);
        let outcome = drive(&session, &scenario, &context).await;
        session.close().await;
        outcome
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Deletes a file when dropped (the scenario's private key).
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Lists the tools, then makes the calls the scenario's context asks for, or calls the
/// scenario's tool (or the first one) with arguments made from its input schema.
async fn drive(session: &Session, scenario: &str, context: &Value) -> anyhow::Result<()> {
    let tools = session.tools(SERVER).await?;
    eprintln!(
        "{} tools: {}",
        tools.len(),
        tools
            .iter()
            .map(|t| t.tool())
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(calls) = context["toolCalls"].as_array() {
        for call in calls {
            let name = call["name"].as_str().context("a toolCall without a name")?;
            // A null argument breaks the tool's schema, which edgar enforces (a model
            // would be told so): it is left out, as a model told so would.
            let mut arguments = call["arguments"].clone();
            if let Some(a) = arguments.as_object_mut() {
                a.retain(|_, v| !v.is_null());
            }
            let output = session.call(&format!("{SERVER}/{name}"), arguments).await?;
            println!("{}", serde_json::to_string(&output)?);
        }
        return Ok(());
    }
    match scenario {
        // The server lists a tool whose schema has a network `$ref` and serves no call:
        // listing is the whole test (nothing may fetch the `$ref`).
        "json-schema-ref-no-deref" => return Ok(()),
        // Each tool exercises one multi-round-trip rule; all are called, in turn.
        "sep-2322-client-request-state" => {
            for t in tools.iter() {
                let output = session
                    .call(&format!("{SERVER}/{}", t.tool()), json!({}))
                    .await?;
                println!("{}", serde_json::to_string(&output)?);
            }
            return Ok(());
        }
        // Echo back the schema edgar holds for the focal tool: what a model is shown.
        "json-schema-2020-12-preservation" => {
            let focal = tools
                .iter()
                .find(|t| t.tool() == "json_schema_2020_12_tool")
                .context("the server has no json_schema_2020_12_tool")?;
            let schema = focal.input_schema().clone();
            let output = session
                .call(
                    &format!("{SERVER}/json_schema_echo"),
                    json!({ "schema": schema }),
                )
                .await?;
            println!("{}", serde_json::to_string(&output)?);
            return Ok(());
        }
        _ => {}
    }
    let wanted = match scenario {
        "tools_call" => Some("add_numbers"),
        "elicitation-sep1034-client-defaults" => Some("test_client_elicitation_defaults"),
        "sse-retry" => Some("test_reconnection"),
        _ => None,
    };
    let tool = match wanted {
        Some(w) => tools.iter().find(|t| t.tool() == w),
        None => tools.first(),
    };
    let Some(tool) = tool else {
        if let Some(w) = wanted {
            anyhow::bail!("the server has no tool {w}");
        }
        return Ok(());
    };
    let arguments = example_arguments(tool.input_schema());
    let output = session
        .call(&format!("{SERVER}/{}", tool.tool()), arguments)
        .await?;
    println!("{}", serde_json::to_string(&output)?);
    Ok(())
}

/// Arguments that satisfy a simple schema: each required property gets its default or
/// a small value of its type.
fn example_arguments(schema: &Value) -> Value {
    let mut args = Map::new();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, p) in props {
            if !required.contains(&name.as_str()) {
                continue;
            }
            let value = p.get("default").cloned().unwrap_or_else(|| {
                match p.get("type").and_then(Value::as_str) {
                    Some("number") | Some("integer") => json!(1),
                    Some("boolean") => json!(true),
                    Some("array") => json!([]),
                    Some("object") => json!({}),
                    _ => json!("test"),
                }
            });
            args.insert(name.clone(), value);
        }
    }
    Value::Object(args)
}
