//! The prompt's tool list for the embedding agent loop: the built-in `tool_search` with
//! its full schema, every available MCP tool by name only (from the cache, starting
//! nothing when the cache has them), and the tools found so far with their schemas.

use serde::Serialize;
use serde_json::Value;

use crate::guard::ToolName;
use crate::mcp::client::Session;
use crate::tools::pending_line;
use crate::tools::search::schema_json;
use crate::tools::search_tool::{ToolSearch, definition};

#[derive(Debug, Clone, Serialize)]
pub struct PromptTools {
    /// Full definitions: `tool_search`, then every tool found in this session.
    pub definitions: Vec<Value>,
    /// Tools the model can find: names only.
    pub names: Vec<ToolName>,
    /// One line per server whose tools are missing, and why.
    pub unavailable: Vec<String>,
}

/// The tool list for the next prompt: cached names at once, and servers without a cache
/// entry for at most the session's `prompt_budget`; those still starting are named in
/// one line and join through `tool_search` when ready.
pub async fn prompt_tools(session: &Session, search: &ToolSearch) -> PromptTools {
    let ready = session.tool_names_within(session.prompt_budget()).await;
    let mut definitions = vec![definition()];
    definitions.extend(search.found().iter().map(schema_json));
    let mut unavailable: Vec<String> = ready
        .failures
        .iter()
        .map(|e| crate::text::shown_message(&e.to_string()))
        .collect();
    if let Some(line) = pending_line(&ready.pending) {
        unavailable.push(line);
    }
    PromptTools {
        definitions,
        names: ready.names,
        unavailable,
    }
}
