//! The harness-facing side of MCP tools, above the session: the prompt's tool list and
//! the built-in `tool_search` (its ranking and kept index included).

pub mod prompt;
pub mod search;
pub mod search_tool;
pub mod tokens;

/// The one line naming servers still starting, if any.
pub fn pending_line(pending: &[String]) -> Option<String> {
    (!pending.is_empty()).then(|| {
        format!(
            "still starting: {}; their tools can be found with tool_search once they are ready",
            pending.join(", ")
        )
    })
}
