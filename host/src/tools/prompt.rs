//! The prompt's tool list for the embedding agent loop: the built-in `tool_search` with
//! its full schema, every available MCP tool by name only (from the cache, starting
//! nothing when the cache has them), and the tools found so far with their schemas.

use serde::Serialize;
use serde_json::Value;

use crate::mcp::client::Session;
use crate::tools::cache::ToolName;
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

/// The tool list for the next prompt.
pub async fn prompt_tools(session: &Session, search: &ToolSearch) -> PromptTools {
    let (names, failures) = session.tool_names().await;
    let mut definitions = vec![definition()];
    definitions.extend(search.found().iter().map(schema_json));
    PromptTools {
        definitions,
        names,
        unavailable: failures
            .iter()
            .map(|e| crate::text::shown_message(&e.to_string()))
            .collect(),
    }
}
