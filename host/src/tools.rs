//! The harness-facing side of MCP tools: the discovery cache, the prompt's tool list,
//! and the built-in `tool_search`.

pub mod cache;
pub mod prompt;
pub mod search;
pub mod search_tool;
pub mod tokens;
