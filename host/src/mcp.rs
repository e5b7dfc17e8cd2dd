//! The MCP session layer: `McpError`, `PROTOCOL`, and the modules that run servers.
//!
//! [`client`] owns the session (lazy handles, discovery, calls, close); `stdio`, [`http`]
//! (Streamable HTTP) and its legacy HTTP+SSE sibling are transports that only move JSON
//! messages; `connection` matches requests to responses and answers the server's own
//! requests, whatever the transport.

pub mod ask;
pub mod cache;
pub mod client;
pub(crate) mod connection;
pub mod elicitation;
pub(crate) mod era;
pub mod example_server;
pub mod http;
pub mod hygiene;
pub(crate) mod input;
pub mod news;
pub mod protocol;
pub mod sandbox;
pub(crate) mod stdio;
pub(crate) mod task;

use std::time::Duration;

use crate::guard::GuardError;

pub use connection::{ClientHandler, MAX_SERVER_REQUESTS, NoHandler};
pub use protocol::PROTOCOL;
pub use stdio::INHERITED_ENV;

/// The one error both transports raise. Variants say what happened to the session;
/// callers never learn which transport carried it.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("no MCP server named '{0}' is configured")]
    UnknownServer(String),
    #[error("no tool named '{0}'; `edgar mcp tools` lists them")]
    UnknownTool(String),
    /// A prompt or resource the server does not list (`what` says which, escaped).
    #[error("MCP server '{server}' offers no {what}")]
    NotOffered { server: String, what: String },
    #[error("MCP server '{server}' could not start: {reason}")]
    Start { server: String, reason: String },
    /// The server failed earlier (in this session, or in another process within
    /// `FAILURE_COOLDOWN`) and stays failed until reset.
    #[error(
        "MCP server '{server}' failed earlier: {reason}; reset it with `edgar mcp reset {server}`"
    )]
    Failed { server: String, reason: String },
    /// The server wants a (better) token; `challenge` is what its `WWW-Authenticate` said.
    #[error("MCP server '{server}' needs login: run `edgar mcp login {server}`")]
    NeedsLogin {
        server: String,
        challenge: Option<http::Challenge>,
    },
    #[error("MCP server '{server}' closed the connection: {reason}")]
    Closed { server: String, reason: String },
    #[error("MCP server '{server}' did not answer {method} within {} s", timeout.as_secs_f64())]
    Timeout {
        server: String,
        method: String,
        timeout: Duration,
    },
    /// The transport could not carry one request or its answer (an HTTP status, a
    /// refused redirect, a stream that ended early, an oversized body).
    #[error("MCP server '{server}' did not answer {method}: {reason}")]
    Exchange {
        server: String,
        method: String,
        reason: String,
    },
    /// A server asked the caller for something (its `capability`: elicitation,
    /// sampling, roots) that the caller did not declare it can give.
    #[error(
        "MCP server '{server}' needs the client's {capability}, which the client did not declare"
    )]
    MissingCapability {
        server: String,
        capability: &'static str,
    },
    #[error("MCP server '{server}' broke the protocol: {reason}")]
    Protocol { server: String, reason: String },
    #[error("MCP server '{server}' answered {method} with error {code}: {message}")]
    Server {
        server: String,
        method: String,
        code: i64,
        message: String,
    },
    #[error("MCP server '{server}' speaks protocol version {version}; edgar speaks {}, {}", protocol::MODERN.join(", "), PROTOCOL.join(", "))]
    Version { server: String, version: String },
    /// The server refused the protocol version a request named (`-32022`), saying which
    /// it speaks.
    #[error("MCP server '{server}' does not speak protocol version {requested} (it speaks {})", if supported.is_empty() { "nothing it named".to_owned() } else { supported.join(", ") })]
    UnsupportedVersion {
        server: String,
        requested: String,
        supported: Vec<String>,
    },
    /// The model's arguments do not match the tool's accepted schema. Carries the schema
    /// so a model can correct itself without searching again.
    #[error("the arguments for {tool} do not match its input schema:\n{}\nThe schema is: {schema}", errors.join("\n"))]
    InvalidArguments {
        tool: String,
        errors: Vec<String>,
        schema: String,
    },
    /// A project's server that no human has approved in its current form.
    #[error(
        "MCP server '{server}' from {} needs approval: review it with `edgar mcp approve {server}`", file.display()
    )]
    NeedsApproval {
        server: String,
        file: std::path::PathBuf,
    },
    /// The administrator's policy forbids this server, tool or result.
    #[error("MCP server '{server}' is blocked by policy: {rule}")]
    Blocked { server: String, rule: String },
    /// The tool (or prompt, as `kind` says) differs from what was pinned (or is new) and
    /// waits for a human. `tool` is its name as the server gave it.
    #[error(
        "{kind} {} of MCP server '{server}' is quarantined ({change} since it was pinned): review it with `edgar mcp approve {server}`",
        crate::text::shown(tool)
    )]
    Quarantined {
        server: String,
        kind: &'static str,
        tool: String,
        change: String,
    },
    /// The audit trail a gateway's replicas share could not take the call's line: the
    /// call did not run (`ran` false), or ran and its result is withheld. Retryable.
    #[error("{}", unaudited(*ran, reason))]
    Unaudited { ran: bool, reason: String },
    #[error(transparent)]
    Guard(#[from] GuardError),
}

/// What a client is told when the shared audit trail did not take a call's line.
fn unaudited(ran: bool, reason: &str) -> String {
    if ran {
        format!(
            "the call ran, but its audit line could not be written ({reason}); its result is withheld. The call_begin line records it; retry only if repeating it is safe"
        )
    } else {
        format!("{reason}; the call was not run. Retry in a few seconds")
    }
}

impl McpError {
    /// The variant's name, for records that must not carry message text (an argument
    /// error quotes the arguments).
    pub fn kind(&self) -> &'static str {
        match self {
            McpError::UnknownServer(_) => "unknown_server",
            McpError::UnknownTool(_) => "unknown_tool",
            McpError::NotOffered { .. } => "not_offered",
            McpError::Start { .. } => "start",
            McpError::Failed { .. } => "failed",
            McpError::NeedsLogin { .. } => "needs_login",
            McpError::Closed { .. } => "closed",
            McpError::Timeout { .. } => "timeout",
            McpError::Exchange { .. } => "exchange",
            McpError::MissingCapability { .. } => "missing_capability",
            McpError::Protocol { .. } => "protocol",
            McpError::Server { .. } => "server_error",
            McpError::Version { .. } | McpError::UnsupportedVersion { .. } => "version",
            McpError::InvalidArguments { .. } => "invalid_arguments",
            McpError::NeedsApproval { .. } => "needs_approval",
            McpError::Blocked { .. } => "blocked",
            McpError::Quarantined { .. } => "quarantined",
            McpError::Unaudited { .. } => "unaudited",
            McpError::Guard(_) => "guard",
        }
    }

    /// The server this error is about, if any.
    pub fn server(&self) -> Option<&str> {
        match self {
            McpError::UnknownServer(s) => Some(s),
            McpError::Start { server, .. }
            | McpError::NotOffered { server, .. }
            | McpError::Failed { server, .. }
            | McpError::NeedsLogin { server, .. }
            | McpError::Exchange { server, .. }
            | McpError::MissingCapability { server, .. }
            | McpError::Closed { server, .. }
            | McpError::Timeout { server, .. }
            | McpError::Protocol { server, .. }
            | McpError::Server { server, .. }
            | McpError::Version { server, .. }
            | McpError::UnsupportedVersion { server, .. }
            | McpError::NeedsApproval { server, .. }
            | McpError::Blocked { server, .. }
            | McpError::Quarantined { server, .. } => Some(server),
            McpError::UnknownTool(_)
            | McpError::InvalidArguments { .. }
            | McpError::Unaudited { .. }
            | McpError::Guard(_) => None,
        }
    }
}
