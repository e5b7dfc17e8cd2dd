//! The reference schema adapter: the border guard's policy for tool names, tool
//! schemas and tool results, and for the prompts and resources a server lists.
//!
//! Everything here is plain Rust over `serde_json`, so the same code runs inside the
//! `wasm32-wasip2` component (see `component.rs`) and natively, where it is unit-tested
//! and benchmarked against the component. It does no I/O.

// The allocator is the one hand-written `unsafe` here, each use with its argument.
#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)]
mod arena;
mod context;
mod convert;
mod json;
pub mod limits;
mod lower;
mod name;
mod result;
mod scan;
mod schema;
mod text;
mod types;

#[cfg(target_arch = "wasm32")]
pub use arena::Arena;
pub use context::{
    AcceptedPrompt, AcceptedResource, PromptArgument, to_prompt, to_resource, to_resource_template,
};
pub use lower::{LoweredSchema, MAX_LOSSES, Provider, lower_schema};
pub use name::{BUILTIN_TOOLS, tool_name};
pub use result::to_result;
pub use scan::{MAX_FINDINGS, scan_text, scan_tool};
pub use schema::to_schema;
pub use types::{
    AcceptedTool, ContentBlock, Dropped, EmbeddedResource, Finding, FindingKind, Hints, Media,
    Rejection, RejectionKind, ResourceContents, ResourceLink, Severity, ToolOutput,
};

// wit-bindgen's generated export glue is `unsafe` (the allocator above is the only
// hand-written `unsafe`). Off
// (`default-features = false`) for an adapter crate that builds its own component on
// this one, as `wit/template/` does.
#[cfg(all(target_arch = "wasm32", feature = "component"))]
#[allow(unsafe_code)]
mod component;
