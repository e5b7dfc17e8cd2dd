//! edgar-host: the MCP and sign-in core of the edgar coding agent.
//!
//! Everything an MCP server sends passes through [`guard`], a sandboxed WebAssembly
//! component, before the harness uses it. Nothing here starts a process, opens a
//! socket or creates a WASM engine until a server's tool is first needed.

#[cfg(test)]
mod arbitrary;
pub mod auth;
pub mod clock;
pub mod config;
pub mod digest;
pub mod gateway;
pub mod guard;
pub mod mcp;
pub mod net;
pub mod paths;
pub mod redact;
pub mod seal;
pub mod state;
pub mod sync;
pub mod telemetry;
pub mod text;
pub mod tools;
pub mod trust;
pub mod workdir;
