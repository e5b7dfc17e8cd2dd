//! The harness-facing side of MCP tools: the discovery cache (and, later, tool search).

pub mod cache;
