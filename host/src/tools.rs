//! The harness-facing side of MCP tools, above the session: the prompt's tool list and
//! the built-in `tool_search` (its ranking and kept index included).

pub mod prompt;
pub mod search;
pub mod search_tool;
pub mod tokens;
